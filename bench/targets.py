"""Issue #6's targets, read off bench/bench_ucache.py results (JSON), as one markdown report.

    python bench/targets.py results/kernel/k6/final-v5-serving.json \
        results/kernel/k6/final-v5-bf16.json --out results/kernel/k6/targets.md

Per (arm, B, flush %): the range over HV of ours / flashinfer and of time / HBM floor, and the
Triton baseline / ours; then the targets one by one: "never slower than flashinfer" (points where
ours <= flashinfer, and the worst ones), B >= 128 mean time/floor at 20 % flush (target 1.10) and
on all-flush steps (target 1.15), B = 1 time (target 4 us). Ratios are taken inside one process
(one arm's run), never across runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

OURS, FI, TRITON = "ours", "flashinfer", "triton_vllm"


def load_rows(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of every file (each row: arm, HV, B, flush_pct, floor_us, us{backend: us}) and the
    commands that produced them."""
    rows: list[dict[str, Any]] = []
    commands: list[str] = []
    for path in paths:
        data = json.loads(path.read_text())
        floor = data["meta"].get("launch_floor_us")  # bench_ucache since session 6
        rows += [r | {"launch_floor_us": floor} for r in data["results"]]
        commands.append(data["meta"]["command"])
    return rows, commands


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if abs(hi - lo) < 5e-3 else f"{fmt.format(lo)}-{fmt.format(hi)}"


def ratio(row: dict[str, Any], num: str, den: str) -> float | None:
    a, b = row["us"].get(num), row["us"].get(den)
    return a / b if a and b else None


def report(rows: list[dict[str, Any]], commands: list[str]) -> str:
    """The markdown report (see the module docstring)."""
    md = ["# Issue #6 targets from bench/bench_ucache.py", "", "Commands (H200, one per arm):", ""]
    md += [f"    {c}" for c in commands]
    md += [
        "",
        "Per arm, B and flush %: ranges over HV (32/48/64) of ours/flashinfer, time/floor (x) and "
        "the Triton baseline / ours. Bold: ours <= flashinfer at every HV.",
        "",
        "| arm | B | flush % | ours/fi | ours x floor | fi x floor | triton/ours |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["arm"], r["B"], r["flush_pct"]) for r in rows})
    for arm, B, fl in keys:
        sel = [r for r in rows if (r["arm"], r["B"], r["flush_pct"]) == (arm, B, fl)]
        of = [x for r in sel if (x := ratio(r, OURS, FI)) is not None]
        ox = [r["us"][OURS] / r["floor_us"] for r in sel if OURS in r["us"]]
        fx = [r["us"][FI] / r["floor_us"] for r in sel if FI in r["us"]]
        to = [x for r in sel if (x := ratio(r, TRITON, OURS)) is not None]
        cell = _span(of, "{:.3f}")
        if of and max(of) <= 1.0:
            cell = f"**{cell}**"
        md.append(f"| {arm} | {B} | {fl} | {cell} | {_span(ox)} | {_span(fx)} | {_span(to)} |")

    both = [(r, x) for r in rows if (x := ratio(r, OURS, FI)) is not None]
    wins = [r for r, x in both if x <= 1.0]
    worst = sorted(both, key=lambda rx: -rx[1])[:8]
    md += ["", "## Targets", ""]
    md.append(
        f"- **Never slower than flashinfer:** ours <= flashinfer at {len(wins)}/{len(both)} "
        "points. Worst: "
        + ", ".join(
            f"{r['arm']} HV={r['HV']} B={r['B']} {r['flush_pct']} % {x:.3f}" for r, x in worst
        )
        + "."
    )
    for fl, target in ((20, 1.10), (100, 1.15)):
        for arm in sorted({r["arm"] for r in rows}):
            sel = [
                r
                for r in rows
                if r["arm"] == arm and r["B"] >= 128 and r["flush_pct"] == fl and OURS in r["us"]
            ]
            if not sel:
                continue
            ours = sum(r["us"][OURS] / r["floor_us"] for r in sel) / len(sel)
            fis = [r["us"][FI] / r["floor_us"] for r in sel if FI in r["us"]]
            fi = f", flashinfer {sum(fis) / len(fis):.2f}" if fis else ""
            verdict = "met" if ours <= target else "not met"
            md.append(
                f"- **B >= 128, {fl} % flush, {arm}:** mean {ours:.2f}x the floor{fi} "
                f"(target {target:.2f}: {verdict})."
            )
    for arm in sorted({r["arm"] for r in rows}):
        sel = [r for r in rows if r["arm"] == arm and r["B"] == 1 and OURS in r["us"]]
        if sel:
            t = [r["us"][OURS] for r in sel]
            f = [r["us"][FI] for r in sel if FI in r["us"]]
            lf = [r["launch_floor_us"] for r in sel if r.get("launch_floor_us") is not None]
            floor = f"; a one-kernel graph takes {_span(lf)} us in this timing" if lf else ""
            md.append(
                f"- **B = 1, {arm}:** ours {_span(t)} us, flashinfer {_span(f)} us (cold L2, "
                f"graph replay{floor}; target 4 us: {'met' if max(t) <= 4.0 else 'not met'})."
            )
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", type=Path, help="bench/bench_ucache.py JSON files")
    ap.add_argument("--out", type=Path, default=None, help="markdown file (default: stdout)")
    args = ap.parse_args(argv)
    rows, commands = load_rows(args.json)
    text = report(rows, commands)
    if args.out:
        args.out.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
