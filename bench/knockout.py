"""Where does the time go? Our kernel with compile-time knock-outs and knobs, in one process.

Knock-outs (GDN_UCACHE_SKIP, results are wrong on purpose): proj (no projection MMAs), epi (no
per-row epilogue), fold (no fold MMAs and no write-back); `state` (no state loads) only together
with the others (alone its PTX fails to assemble). Knobs: GDN_UCACHE_BV, GDN_UCACHE_XSPLIT (hi/lo
split of [k;q] in the MMAs), GDN_UCACHE_MBP (min CTAs per SM), GDN_UCACHE_BSMEM (B fragments in
shared memory instead of registers).

    python bench/knockout.py --hv 32 --batch 256 --flush 0 100
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.bench_ucache import Point, floor_bytes, load_backends, time_graph  # noqa: E402

VARIANTS = {
    "base": {},
    "mbp0": {"GDN_UCACHE_MBP": "0"},
    "mbp5": {"GDN_UCACHE_MBP": "5"},
    "regfrag": {"GDN_UCACHE_BSMEM": "0"},
    "nosplit": {"GDN_UCACHE_XSPLIT": "0"},
    "mbp4": {"GDN_UCACHE_MBP": "4"},
    "bsmem": {"GDN_UCACHE_BSMEM": "1"},
    "bs+mbp4": {"GDN_UCACHE_BSMEM": "1", "GDN_UCACHE_MBP": "4"},
    "bs+mbp5": {"GDN_UCACHE_BSMEM": "1", "GDN_UCACHE_MBP": "5"},
    "bv16": {"GDN_UCACHE_BV": "16"},
    "bv32": {"GDN_UCACHE_BV": "32"},
    "bv64": {"GDN_UCACHE_BV": "64"},
    "bv128": {"GDN_UCACHE_BV": "128"},
    "no_proj": {"GDN_UCACHE_SKIP": "proj"},
    "no_epi": {"GDN_UCACHE_SKIP": "epi"},
    "no_fold": {"GDN_UCACHE_SKIP": "fold"},
    "no_all": {"GDN_UCACHE_SKIP": "state,proj,epi,fold"},
}
KNOBS = (
    "GDN_UCACHE_XSPLIT",
    "GDN_UCACHE_MBP",
    "GDN_UCACHE_BV",
    "GDN_UCACHE_SKIP",
    "GDN_UCACHE_BSMEM",
)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", default="serving")
    ap.add_argument("--hv", type=int, default=32)
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 100])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    handle = load_backends(args.arm, ["ours"])["ours"]
    scrub = torch.ones((256 << 20) // 4, device="cuda")
    print(f"{'B':>4s} {'fl%':>4s} {'floor':>7s} " + " ".join(f"{v:>8s}" for v in args.variants))
    for B in args.batch:
        for frac in args.flush:
            point = Point(handle, B, 16, args.hv, 4, frac / 100, seed=B + frac)
            floor = floor_bytes(B, 16, args.hv, 4, point.n_flush, 8, 15) / 4.3e12 * 1e6
            line = f"{B:4d} {frac:4d} {floor:7.1f} "
            for name in args.variants:
                for k in KNOBS:
                    os.environ.pop(k, None)
                os.environ.update(VARIANTS[name])
                try:
                    line += f" {time_graph(handle.fn, point, scrub, args.reps):8.2f}"
                except Exception as exc:  # keep going: a knob may not compile
                    line += f" {'ERR':>8s}"
                    print(f"# {name}: {exc!r}"[:300], flush=True)
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
