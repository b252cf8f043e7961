"""Two sets of bench/bench_ucache.py runs side by side, point by point (e.g. two hosts).

Each set is merged as bench/targets.py merges runs (median time per backend, median of the
per-run ours / flashinfer ratios). The report gives, per flush level, the geometric mean over the
grid of each backend's time in set B over set A, and lists every point where either set has ours
slower than flashinfer. Times across sets come from different processes (often different cards),
so only the within-set ratios compare kernels; the cross-set time ratios say how the card or host
moved each kernel.

    python bench/compare_runs.py --a results/kernel/v12c-k6/h100-repeats/final-*.json \
        --b results/kernel/v12d-h100/final-*.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import geometric_mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import FI, OURS, load_rows, merge_runs, ratio  # noqa: E402

Key = tuple[str, int, int, int]  # arm, HV, B, flush %


def merged(paths: list[Path]) -> dict[Key, dict[str, Any]]:
    """One merged row per (arm, HV, B, flush %) of the given runs."""
    rows, _ = load_rows(paths)
    return {(r["arm"], r["HV"], r["B"], r["flush_pct"]): r for r in merge_runs(rows)}


def compare(a: dict[Key, dict[str, Any]], b: dict[Key, dict[str, Any]]) -> str:
    """The markdown report of set B against set A (points present in both only)."""
    keys = sorted(a.keys() & b.keys())
    if not keys:
        raise SystemExit("compare_runs: the two sets share no (arm, HV, B, flush %) point")
    dev_a = ", ".join(sorted({a[k]["device"] for k in keys}))
    dev_b = ", ".join(sorted({b[k]["device"] for k in keys}))
    md = [f"A: {dev_a}; B: {dev_b}; {len(keys)} common points.", ""]
    md += ["| flush % | fi time B/A | ours time B/A | points |", "|---|---|---|---|"]
    for flush in sorted({k[3] for k in keys}):
        ks = [k for k in keys if k[3] == flush]
        t = {be: geometric_mean(b[k]["us"][be] / a[k]["us"][be] for k in ks) for be in (FI, OURS)}
        md.append(f"| {flush} | {t[FI]:.3f} | {t[OURS]:.3f} | {len(ks)} |")
    md += ["", "| arm | HV | B | flush % | A ours/fi | B ours/fi |", "|---|---|---|---|---|---|"]
    n_a = n_b = 0
    for k in keys:
        ra, rb = ratio(a[k], OURS, FI), ratio(b[k], OURS, FI)
        if ra is None or rb is None:
            continue
        n_a += ra > 1.0
        n_b += rb > 1.0
        if ra > 1.0 or rb > 1.0:
            md.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {ra:.3f} | {rb:.3f} |")
    md += ["", f"ours slower than flashinfer: A {n_a} / {len(keys)}, B {n_b} / {len(keys)}."]
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--a", nargs="+", type=Path, required=True, help="set A's JSON files")
    ap.add_argument("--b", nargs="+", type=Path, required=True, help="set B's JSON files")
    ap.add_argument("--out", type=Path, help="markdown file (default: stdout)")
    args = ap.parse_args(argv)
    for p in [*args.a, *args.b]:
        if not p.is_file():
            ap.error(f"{p}: no such file (pass bench/bench_ucache.py JSON results)")
    text = compare(merged(args.a), merged(args.b))
    if args.out:
        args.out.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
