"""One launch per (backend, point) inside a profiler range, for Nsight Compute (issue #6).

Every backend is compiled and warmed first; then torch.cuda.profiler.start() opens the range that
`ncu --profile-from-start off` profiles, and each (backend, point) runs exactly once under an NVTX
range named `<backend>/HV<hv>/B<b>/f<flush%>` (ncu's --print-nvtx-rename kernel shows it). Inputs
are bench_ucache.Point's (fresh random data, non-zero rings).

    ncu --clock-control none --profile-from-start off --section SpeedOfLight ... \\
        python3 bench/ncu_profile.py --backends ours flashinfer --hv 32 --batch 256 --flush 0 100
Without ncu it just runs (a smoke test of the driver).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.bench_ucache import Point, load_backends  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", default="serving")
    ap.add_argument("--backends", nargs="+", default=["ours", "flashinfer"])
    ap.add_argument("--hv", nargs="+", type=int, default=[32])
    ap.add_argument("--batch", nargs="+", type=int, default=[256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 100], help="percent of rows")
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--T", type=int, default=4)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("ncu_profile: needs CUDA", file=sys.stderr)
        return 2
    from kernels.reference.arms import ARMS

    handles = load_backends(args.arm, args.backends)
    if not handles:
        print("ncu_profile: no backend loaded", file=sys.stderr)
        return 1
    runs = []
    for hv in args.hv:
        for b in args.batch:
            for fl in args.flush:
                for name, handle in handles.items():
                    point = Point(handle, b, args.H, hv, args.T, fl / 100, seed=hv * 1000 + b + fl)
                    for _ in range(2):  # compile + warm outside the profiled range
                        point.call(handle.fn)
                    runs.append((f"{name}/HV{hv}/B{b}/f{fl}", handle, point))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for label, handle, point in runs:
        with torch.cuda.nvtx.range(label):
            point.call(handle.fn)
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"ncu_profile: {len(runs)} profiled calls ({', '.join(r[0] for r in runs)}); arm "
          f"{args.arm} = {ARMS[args.arm]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
