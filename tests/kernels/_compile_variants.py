"""Compile kernel variants for a GPU arch on a machine without a GPU; print one JSON line.

Run in a subprocess (the CuTe-DSL environment is read when cutlass is imported):
    CUTE_DSL_ARCH=sm_90a CUTE_DSL_KEEP=ptx CUTE_DSL_DUMP_DIR=DIR \
        [GDN_UCACHE_KERNEL_FILE=kernels/gdn_ucache_flush_next.py] \
        python tests/kernels/_compile_variants.py '[[T, H, HV, BV, io, st, ring, sr], ...]'
(optionally up to four more entries per variant: late state tiles (GDN_UCACHE_LATE), persistent
0/1, window prefetch 0/1/2, 16-byte q/k rows 1/0). The JSON line holds each variant's compile
time and the dynamic shared memory its launch requests (read off the lowered host code: what sets
the CTAs per SM).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import importlib.util  # noqa: E402

import torch  # noqa: E402

from bench.ptxas_regs import launch_smem_bytes  # noqa: E402

# the kernel file under test (default: the shipped one)
_PATH = Path(
    os.environ.get(
        "GDN_UCACHE_KERNEL_FILE",
        Path(__file__).resolve().parents[2] / "kernels" / "gdn_ucache_flush.py",
    )
)
_SPEC = importlib.util.spec_from_file_location("gdnu_compile_under_test", _PATH)
kmod = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kmod)

_DT = {"bf16": torch.bfloat16, "fp16": torch.float16}


def main() -> None:
    variants = json.loads(sys.argv[1])
    timings, smem = [], []
    for T, H, HV, BV, io, st, ring, sr, *knobs in variants:
        extra = {}
        if knobs:  # the next version's knobs (late tiles, persistent CTAs, prefetch level)
            late, persist, prefetch, vec_qk = (list(knobs) + [0, 0, 0, 1][len(knobs) :])[:4]
            os.environ["GDN_UCACHE_LATE"] = str(late)
            extra = {"persist": bool(persist), "prefetch": int(prefetch), "vec_qk": bool(vec_qk)}
        t0 = time.time()
        fn = kmod.compile_variant(T, H, HV, BV, _DT[io], _DT[st], _DT[ring], bool(sr), **extra)
        timings.append(round(time.time() - t0, 2))
        module = getattr(fn, "ir_module", None)
        smem.append(launch_smem_bytes(str(module)) if module is not None else None)
    print(json.dumps({"compile_s": timings, "smem_bytes": smem}))


if __name__ == "__main__":
    main()
