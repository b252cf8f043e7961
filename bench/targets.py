"""Issue #6's targets, read off bench/bench_ucache.py results (JSON), as one markdown report.

    python bench/targets.py results/kernel/k6/final-v5-serving.json \
        results/kernel/k6/final-v5-bf16.json --out results/kernel/k6/targets.md

Per (arm, B, flush %): the range over HV of ours / flashinfer and of time / HBM floor, and the
Triton baseline / ours; then the targets one by one: "never slower than flashinfer" (points where
ours <= flashinfer, and the worst ones), B >= 128 mean time/floor at 20 % flush (target 1.10) and
on all-flush steps (target 1.15), B = 1 time (target 4 us). Ratios are taken inside one process
(one arm's run), never across runs. Several files of the same arm (repeat processes) are merged
point by point: each ratio is the median of the per-run ratios, each time the median time, and the
report counts the points whose runs disagree on which kernel is faster (absolute times move a
few percent between processes: results/kernel/k15).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import median
from typing import Any

OURS, FI, TRITON = "ours", "flashinfer", "triton_vllm"


def load_rows(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of every file (each row: arm, HV, B, flush_pct, floor_us, us{backend: us}, the run
    (file) index and its device) and the commands that produced them."""
    rows: list[dict[str, Any]] = []
    commands: list[str] = []
    for run, path in enumerate(paths):
        data = json.loads(path.read_text())
        meta = data["meta"]
        extra = {
            "launch_floor_us": meta.get("launch_floor_us"),  # bench_ucache since session 6
            "read_rate": meta.get("read_rate_bytes_per_s"),  # since session 24
            "run": run,
            "device": meta.get("device", "unknown device"),
        }
        rows += [r | extra for r in data["results"]]
        commands.append(meta["command"])
    return rows, commands


def merge_runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (arm, HV, B, flush %): with one run, that run's row; with several, the median
    time per backend and, under `ratios`, the median of the per-run ratios (a ratio is only ever
    taken inside one run) with `flip` set where the runs disagree on ours <= flashinfer."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["HV"], r["B"], r["flush_pct"]), []).append(r)
    merged = []
    for runs in groups.values():
        if len(runs) == 1:
            merged.append(runs[0])
            continue
        backends = set.intersection(*(set(r["us"]) for r in runs))
        row = dict(runs[0])
        row["us"] = {b: median(r["us"][b] for r in runs) for b in backends}
        row["runs"] = len(runs)
        row["ratios"] = {}
        for num, den in ((OURS, FI), (TRITON, OURS)):
            per_run = [
                r["us"][num] / r["us"][den] for r in runs if num in r["us"] and den in r["us"]
            ]
            if per_run:
                row["ratios"][num, den] = median(per_run)
                if (num, den) == (OURS, FI):
                    row["flip"] = min(per_run) <= 1.0 < max(per_run)
        lf = [r["launch_floor_us"] for r in runs if r.get("launch_floor_us") is not None]
        row["launch_floor_us"] = median(lf) if lf else None
        merged.append(row)
    return merged


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if abs(hi - lo) < 5e-3 else f"{fmt.format(lo)}-{fmt.format(hi)}"


def ratio(row: dict[str, Any], num: str, den: str) -> float | None:
    """num / den of one row: the run's own ratio, or for merged runs the median per-run ratio."""
    if "ratios" in row:
        return row["ratios"].get((num, den))
    a, b = row["us"].get(num), row["us"].get(den)
    return a / b if a and b else None


def report(rows: list[dict[str, Any]], commands: list[str]) -> str:
    """The markdown report (see the module docstring)."""
    devices = ", ".join(sorted({r["device"] for r in rows}))  # load_rows sets device and run
    n_runs = len({r["run"] for r in rows})
    md = ["# Issue #6 targets from bench/bench_ucache.py", "", f"Commands ({devices}):", ""]
    md += [f"    {c}" for c in commands]
    rows = merge_runs(rows)
    repeated = [r for r in rows if r.get("runs", 1) > 1]
    if repeated:
        flips = [r for r in repeated if r.get("flip")]
        md += [
            "",
            f"{n_runs} runs; {len(repeated)} points timed in more than one: their ratios are the "
            "median of the per-run ratios, their times the median times. Points whose runs "
            f"disagree on ours <= flashinfer: {len(flips)}"
            + (
                " ("
                + ", ".join(f"{r['arm']} HV={r['HV']} B={r['B']} {r['flush_pct']} %" for r in flips)
                + ")."
                if flips
                else "."
            ),
        ]
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
                f"(target {target:.2f}: {verdict}){card_floor(sel)}."
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


def card_floor(sel: list[dict[str, Any]]) -> str:
    """The same mean against the floor at the run's own measured streaming-read rate (the floor
    column assumes the H200's 4.3 TB/s; on another card that reads high or low), or ''."""
    rates = [r.get("read_rate") for r in sel]
    if not sel or not all(rates):
        return ""
    x = [r["us"][OURS] * 1e-6 * r["read_rate"] / r["floor_bytes"] for r in sel]
    fx = [r["us"][FI] * 1e-6 * r["read_rate"] / r["floor_bytes"] for r in sel if FI in r["us"]]
    fi = f", flashinfer {sum(fx) / len(fx):.2f}" if fx else ""
    return (
        f"; against this card's own streaming-read rate ({_span([r / 1e12 for r in rates])} "
        f"TB/s, a sum over 1 GiB) {sum(x) / len(x):.2f}x{fi}"
    )


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
