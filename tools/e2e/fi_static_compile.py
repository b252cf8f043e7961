"""Cross-compile flashinfer's ucache flush kernel on a CPU in vLLM's mode and the benchmarks' mode.

The series' adapter runs flashinfer 0.7.2.post1's `gdn_decode_bf16_wy_ucache_flush.py` with
`SGLANG_GDN_WY_STRIDED_QKV=1`. That is the only mode the module accepts for vLLM's block-strided
pools. In it every tensor is a fully static layout, and the compile-cache key holds the launch
rows B, so each CUDA-graph bucket compiles its own cubin. This script compiles the module's
kernel class on a CPU (sm_90a, fake tensors, no GPU) for a list of B. It reports:

- the seconds each compile takes;
- optionally, with `--dump DIR`, the PTX instruction mix of each variant, for comparison with
  the compact mode that results/kernel and results/triton timed (`--compact`);
- optionally, with `--host-us`, the host time per call of the argument conversion alone
  (flashinfer's wrapper against ours).

It executes the flashinfer file as found (default `.gpu/fi/...`, built by scripts/gpu-bundle.sh)
and copies nothing from it.

    CUTE_DSL_ARCH=sm_90a python -m tools.e2e.fi_static_compile --batches 1,2,8,32,64,128,256
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FI = ROOT / ".gpu/fi/flashinfer/gdn_kernels/gdn_decode_bf16_wy_ucache_flush.py"
# geom-35b / Qwen3.5-35B-A3B GDN geometry per rank, T = 1 + 3 drafts
H, HV, K, V, T = 16, 32, 128, 128, 4
# One vLLM ReplaySSM page of this geometry: conv state (bf16) + fp16 checkpoint + fp16 u/k rings
# + fp32 g ring, in bytes (the pools are views into it with this dim-0 stride).
PAGE_BYTES = 3 * (2 * H * K + HV * V) * 2 + HV * V * K * 2 + (HV + H) * 32 * 128 * 2 + HV * 32 * 4
H200_SMEM_PER_SM = 233472  # asked from the device when min_blocks_per_mp > 1 (no device here)
PTX_OPS = ("ld.global", "st.global", "cp.async.c", "cp.async.bulk.tensor", "mma.sync", "ld.shared")


def load_module(path: Path):
    os.environ.update(
        GDN_UCACHE_IO_DTYPE="bf16",
        GDN_UCACHE_STATE_DTYPE="fp16",
        GDN_UCACHE_RING_DTYPE="fp16",
        SGLANG_GDN_WY_STRIDED_QKV="1",
    )
    # its `flashinfer.gdn_kernels.device_target` import resolves through the bundle's fi/ folder
    sys.path.insert(0, str(path.parents[2]))
    spec = importlib.util.spec_from_file_location("fi_ucache_flush_cpu", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from cutlass.cutlass_dsl import cutlass as dsl

    dsl.cuda_helpers.get_device_attribute = lambda attribute, device_id=0: H200_SMEM_PER_SM
    return module


def compile_one(module, batch: int, compact: bool, pool: int = 2048) -> float:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    gm = cute.AddressSpace.gmem

    def ft(dtype, shape, stride):
        return make_fake_tensor(dtype, shape, stride, memspace=gm, assumed_align=16)

    rs = None if compact else 2 * H * K + HV * V  # token stride of the packed conv output
    ab = HV if compact else 2 * HV  # a/b token stride (packed a|b chunk in vLLM)
    page = PAGE_BYTES
    bf16, f16, i32 = cutlass.BFloat16, cutlass.Float16, cutlass.Int32
    args = [
        ft(bf16, (batch, T, H, K), (T * (rs or H * K), rs or H * K, K, 1)),
        ft(bf16, (batch, T, H, K), (T * (rs or H * K), rs or H * K, K, 1)),
        ft(bf16, (batch, T, HV, V), (T * (rs or HV * V), rs or HV * V, V, 1)),
        ft(bf16, (batch, T, HV), (T * ab, ab, 1)),
        ft(bf16, (batch, T, HV), (T * ab, ab, 1)),
        ft(bf16, (HV,), (1,)),
        ft(bf16, (HV,), (1,)),
        ft(f16, (pool, HV, V, K), (HV * V * K if compact else page // 2, V * K, K, 1)),
        ft(i32, (batch,), (1,)),
        ft(f16, (pool, H, 32, K), (H * 32 * K if compact else page // 2, 32 * K, K, 1)),
        ft(f16, (pool, HV, 32, V), (HV * 32 * V if compact else page // 2, 32 * V, V, 1)),
        ft(cutlass.Float32, (pool, HV, 32), (HV * 32 if compact else page // 4, 32, 1)),
        ft(i32, (batch,), (1,)),
        ft(i32, (batch,), (1,)),
        ft(bf16, (batch, T, HV, V), (T * HV * V, HV * V, V, 1)),
        K**-0.5,
        HV,
        V,
        H,
        16 - T + 1,
        make_fake_stream(),
    ]
    mbp = max(1, min(-(-HV * batch // 132) + 1, 7))  # the module's rule, 132 SMs
    kernel = module.GdnDecodeUCacheFlushKernel(
        disable_state_update=True,
        min_blocks_per_mp=mbp,
        t_input=T,
        n_valid=T,
        qkv_row_stride=rs or 0,
        ab_native=True,
        ab_t_stride=0 if compact else ab,
        pdl_trigger=False,
    )
    start = time.perf_counter()
    cute.compile[(cute.GPUArch("sm_90a"),)](kernel, *args)
    return time.perf_counter() - start


def host_conversion_us(batch: int = 32, calls: int = 2000) -> dict[str, float]:
    """Host microseconds per call of the argument conversion alone, on CPU tensors laid out
    like vLLM's: flashinfer's wrapper (4 meta-tensor density checks + 15 `from_dlpack`) vs
    ours (15 `make_ptr`). The JIT-executor call itself needs a GPU and comes on top."""
    import cutlass
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import from_dlpack, make_ptr

    rs = 2 * H * K + HV * V
    rows = torch.zeros(batch * T, rs, dtype=torch.bfloat16).unflatten(0, (batch, T))
    q = rows[..., : H * K].unflatten(-1, (H, K))
    k = rows[..., H * K : 2 * H * K].unflatten(-1, (H, K))
    v = rows[..., 2 * H * K :].unflatten(-1, (HV, V))
    ab = torch.zeros(batch * T, 2 * HV, dtype=torch.bfloat16).unflatten(0, (batch, T))
    a, b = ab[..., :HV], ab[..., HV:]
    page = torch.zeros(8, PAGE_BYTES // 2, dtype=torch.float16)
    h0 = page[:, : HV * V * K].unflatten(1, (HV, V, K))
    kc = page[:, : H * 32 * K].unflatten(1, (H, 32, K))
    uc = page[:, : HV * 32 * V].unflatten(1, (HV, 32, V))
    gc = page.view(torch.float32)[:, : HV * 32].unflatten(1, (HV, 32))
    idx = torch.zeros(batch, dtype=torch.int32)
    out = torch.zeros(batch, T, HV, V, dtype=torch.bfloat16)
    alog = torch.zeros(HV, dtype=torch.bfloat16)
    tensors = [q, k, v, a, b, alog, alog, h0, idx, kc, uc, gc, idx, idx, out]
    gm = cute.AddressSpace.gmem

    def flashinfer_like() -> None:
        for t in (h0, kc, uc, gc):
            torch.empty(t.shape[1:], device="meta").stride()
        [from_dlpack(t, 16) for t in tensors]

    def ours_like() -> None:
        [make_ptr(cutlass.BFloat16, t.data_ptr(), gm, assumed_align=2) for t in tensors]

    result = {}
    for fn in (flashinfer_like, ours_like):
        for _ in range(50):
            fn()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        result[fn.__name__] = round((time.perf_counter() - start) / calls * 1e6, 1)
    return result


def ptx_mix(directory: Path) -> dict[str, dict[str, int]]:
    out = {}
    for ptx in sorted(directory.glob("*.ptx")):
        text = ptx.read_text()
        out[ptx.name[-60:]] = {op: text.count(op) for op in PTX_OPS} | {"lines": text.count("\n")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", type=Path, default=DEFAULT_FI)
    parser.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1])
    parser.add_argument("--compact", action="store_true", help="the benchmarks' compact mode")
    parser.add_argument("--dump", type=Path, default=None, help="keep PTX here and count ops")
    parser.add_argument(
        "--host-us", action="store_true", help="also time the argument conversion per call"
    )
    args = parser.parse_args(argv)
    if not args.kernel.is_file():
        print(f"no {args.kernel}: run scripts/gpu-bundle.sh", file=sys.stderr)
        return 2
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        os.environ.update(CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(args.dump))
    module = load_module(args.kernel)
    mode = "compact" if args.compact else "strided-static"
    for batch in args.batches:
        seconds = compile_one(module, batch, args.compact)
        print(json.dumps({"mode": mode, "B": batch, "compile_s": round(seconds, 2)}), flush=True)
    if args.host_us:
        print(json.dumps({"host_us_per_call": host_conversion_us()}), flush=True)
    if args.dump:
        print(json.dumps({"ptx": ptx_mix(args.dump)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
