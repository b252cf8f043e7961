"""Preflight on the GPU host: torch + GPU, CuTe-DSL import and compile, flashinfer's ucache module.

Run on the host after `source .gpu/env.sh`:  python3 tools/gpu_smoke.py
Prints one line per check; exits non-zero at the first failure so a run stops before real work.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time


def main() -> int:
    import torch

    print(f"torch {torch.__version__} cuda={torch.cuda.is_available()}", flush=True)
    if not torch.cuda.is_available():
        print("no CUDA device", flush=True)
        return 1
    name, cc = torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)
    print(f"gpu {name} cc={cc}", flush=True)

    t0 = time.time()
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    where = os.path.dirname(cutlass.__file__)
    print(f"cutlass imported in {time.time() - t0:.1f}s from {where}", flush=True)

    @cute.kernel
    def add_one(x: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        x[tidx] = x[tidx] + 1.0

    @cute.jit
    def launch(x: cute.Tensor):
        add_one(x).launch(grid=(1, 1, 1), block=(32, 1, 1))

    x = torch.zeros(32, device="cuda")
    t0 = time.time()
    compiled = cute.compile(launch, from_dlpack(x))
    compiled(from_dlpack(x))
    torch.cuda.synchronize()
    ok = bool((x == 1).all())
    print(f"cute compile+run {time.time() - t0:.1f}s ok={ok}", flush=True)
    if not ok:
        return 1

    path = os.environ.get("GDN_FLASHINFER_UCACHE_MODULE", "")
    if path:
        spec = importlib.util.spec_from_file_location("fi_ucache_smoke", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        print(f"flashinfer ucache RING_SLOTS={mod.RING_SLOTS} W_RING={mod.W_RING}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
