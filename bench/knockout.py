"""Where does the time go, and which launch config is best? Kernel files x knobs, in one process.

Every variant is a set of environment knobs that the kernel file reads at call time, so one
process times several kernel files (`--modules NAME=PATH`) under many configs on identical inputs
(CUDA-graph replay, cold L2 unless --warm; the timing of bench/bench_ucache.py).

Variant names: a named one from VARIANTS, or knobs joined by '+': bv{16,32,64,128} (rows per
CTA, GDN_UCACHE_BV), mbp{0..8} (launch bounds: min CTAs per SM, GDN_UCACHE_MBP; 0 = none),
late{0,1,2,3} (state tiles per warp loaded only at the projection, 3 = the second one only after
the first one's work), late{10,13} (state tiles by bulk copies into shared memory; GDN_UCACHE_LATE,
the kernel's LATE_MODES), t1early (bulk modes: the next tile copied as soon as the stage is free),
t1l2 (bulk modes: the later tiles prefetched into L2 at entry), wvearly (the window weights
before phase 1's barrier: late13 loses a CTA barrier), xpf{N} (one row per CTA: each CTA
prefetches into L2 what row z + N's CTAs will read, GDN_UCACHE_XPF), actfirst (the q/k/v and
gate loads issued with the cursor loads, before the window copies),
persist{N} (persistent CTAs, N per SM, GDN_UCACHE_PERSIST), nprog{N} (force N programs), pf/pf2
(persistent: cp.async prefetch of the next row's windows / also its q/k/v and gates),
no_{proj,epi,fold} and no_all (timing knock-outs, GDN_UCACHE_SKIP: results are wrong on purpose),
nosplit (GDN_UCACHE_XSPLIT=0), regfrag (GDN_UCACHE_BSMEM=0). `base` = the file's own defaults.
A variant written MODULE:VARIANT runs for that module only.

    python bench/knockout.py --hv 32 --batch 256 --flush 0 100
    python bench/knockout.py --modules v4=kernels/gdn_ucache_flush.py \\
        v3=kernels/gdn_ucache_flush_v3.py --variants base bv128+mbp5 --json out/sweep.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.bench_ucache import (  # noqa: E402
    HBM_BYTES_PER_S,
    P_FLUSH,
    P_VERIFY,
    WARM_CALLS,
    Point,
    calls_per_replay,
    capture_graph,
    floor_bytes,
    launch_floor_us,
    load_backends,
    time_graphs,
)

VARIANTS = {
    "base": {},
    "regfrag": {"GDN_UCACHE_BSMEM": "0"},
    "nosplit": {"GDN_UCACHE_XSPLIT": "0"},
    "no_proj": {"GDN_UCACHE_SKIP": "proj"},
    "no_epi": {"GDN_UCACHE_SKIP": "epi"},
    "no_fold": {"GDN_UCACHE_SKIP": "fold"},
    # session 19: phase 5's math without its stores / its stores without the math
    "no_epistore": {"GDN_UCACHE_SKIP": "epistore"},
    "no_epimath": {"GDN_UCACHE_SKIP": "epimath"},
    # session 20, afe only: Z0 (phase 5 at P = 0, before the state arrives) replaced by zeros
    "no_afez0": {"GDN_UCACHE_SKIP": "afez0"},
    "no_all": {"GDN_UCACHE_SKIP": "state,proj,epi,fold"},
    # the state tiles are loaded (and kept alive by one predicated store each) but no math runs:
    # what streaming the state costs at this launch config, next to no_all (everything else)
    "stream": {"GDN_UCACHE_SKIP": "proj,epi,fold,sink"},
    "scalarqk": {"GDN_UCACHE_VEC_QK": "0"},
    # the large shared-memory buffers share one region (results wrong): the CTAs per SM are then
    # set by the registers alone (v9's question: does 7 CTAs/SM with the state out of registers
    # close the gap to flashinfer?)
    "alias": {"GDN_UCACHE_SKIP": "alias"},
    # the driver's largest shared-memory carve-out (228 KiB on the H200) instead of its own pick
    "cmax": {"GDN_UCACHE_CARVEOUT": "100"},
    # bulk modes: the warp's next state tile is copied as soon as the current one was read for
    # the last time (verify-only rows: before the projection; flush rows: after the fold's read)
    "t1early": {"GDN_UCACHE_T1EARLY": "1"},
    # bulk modes: the warp's later state tiles prefetched into L2 at entry (their copies hit L2)
    "t1l2": {"GDN_UCACHE_T1L2": "1"},
    # one row per CTA: the window weights before phase 1's barrier from g words loaded at entry
    # (late13 loses a CTA barrier)
    "wvearly": {"GDN_UCACHE_WVEARLY": "1"},
    # one row per CTA: the q/k/v and gate loads leave with the cursor loads (block boundaries
    # keep ptxas from issuing them after the window copies, a DRAM trip late)
    "actfirst": {"GDN_UCACHE_ACTFIRST": "1"},
    # session 16: bulk modes at BV=128, T <= 4 keep the projections in registers (no ds round
    # trip: late13 in 31.8 KB, 7 CTAs/SM); nobar: a warp barrier before the epilogue, the CTA
    # barrier that orders phase 3's operands at the end of tile 0 (dsreg implies it)
    "dsreg": {"GDN_UCACHE_DSREG": "1"},
    "nobar": {"GDN_UCACHE_NOBAR": "1"},
    # session 17, chain only: the next row's windows, g row, q/k/v rows and gates asked into L2
    # when its tile-0 copy is issued
    "nextl2": {"GDN_UCACHE_NEXTL2": "1"},
    # session 19: bulk modes at BV=128 with t1early: each tile's epilogue right after its
    # projection, while the warp's next tile is in flight (implies nobar)
    "tepi": {"GDN_UCACHE_TEPI": "1"},
    # session 20: bulk modes at BV=128, T <= 4: the affine epilogue (U and the outputs as
    # Z0 + (e^{G*} P) L^T, Z0 and L before the state arrives; two MMAs per tile after it)
    "afe": {"GDN_UCACHE_AFE": "1"},
    # session 20: the u / output stores staged in shared memory, written as 16-byte rows
    "ostage": {"GDN_UCACHE_OSTAGE": "1"},
    # session 20: the state's bulk copies with an L2 evict-first policy
    "stef": {"GDN_UCACHE_STEF": "1"},
    # session 21: bulk modes, T <= 4: the projection transposed ([X hi; X lo] S0^T), both
    # operands from 16-byte shared reads (no register moves assembling A fragments)
    "tproj": {"GDN_UCACHE_TPROJ": "1"},
}
# Launch configurations of kernels/gdn_ucache_flush.py that may become defaults (T=4). The GPU
# conformance test runs each of them in the serving and bf16 arms; the final benchmark times only
# those that passed (bench/h200_run.sh k2), next to flashinfer, and the per-(B, HV) winners become
# launch_config()'s table. Configurations measured and dropped (v6's late1 without a bound, the
# BV=64 bulk forms: results/kernel/k14) left the list; their results name the commits.
CANDIDATES = (
    "base",
    "bv128",
    "bv128+late3+mbp7",
    "bv128+late3+mbp6",
    "bv128+late1+mbp7",
    "bv128+late3+mbp5",
    "bv128+late1+mbp6",
    "bv128+late3+mbp0",  # no launch bound: 80 registers, no spills, 6 CTAs/SM (ptxas_regs.py)
    "bv128+late10+mbp0",  # next (session 11): two 2 KB copies per warp-tile; 64 regs, 44.4 KB: 5
    "bv128+late13+mbp0",  # next: 60 regs, 36.4 KB: 6
    "bv128+late10+mbp0+t1early",  # session 12: next tile copied as soon as the stage is free
    "bv128+late13+mbp0+t1early",  # 72 registers, no spills, same shared memory (6 CTAs/SM)
    "bv128+late13+mbp0+t1early+t1l2",  # + tile 1 prefetched into L2 at entry
    "bv128+late13+mbp0+t1early+t1l2+wvearly",  # + the window weights before phase 1's barrier
    # session 13: actfirst (load order only) and xpfN (each CTA prefetches row z + N's bytes
    # into L2, a hint; it lost everywhere in session 16 and stays as propose's tests use it).
    # xpf's code is the same for every N > 0 (N only offsets the row), so the table may name any
    # distance; 2 makes the conformance batch (9 rows, pad rows among them) prefetch real rows,
    # pad rows and none
    "bv128+late13+mbp0+actfirst+xpf2",
    "bv128+late10+mbp0+actfirst+xpf2",
    "bv128+late13+mbp0+xpf2",
    "bv128+late10+mbp0+xpf2",
    "bv128+late13+mbp0+actfirst",
    "bv128+late10+mbp0+actfirst",
    "bv128+late3+mbp5+actfirst",  # the B=8 entry with it
    "bv32+actfirst",  # the B=1 entries with it
    "bv64+actfirst",  # session 17: B=1 at HV 48/64 (session 21: faster than bv128 there, k25)
    "bv128+actfirst",
    "bv64+mbp7",
    "bv32",
    "bv16",
    "bv128+persist4+pf2",
    "bv128+late1+persist4+pf2",
    "bv128+late3+persist5+pf2",
    # session 20: ostage (16-byte u / output rows through shared memory) on the table's B >= 32
    # entries (session 21, H200: -1.3-1.7 % at B >= 128 verify-only, results/kernel/s21-h200)
    "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    "bv128+late13+mbp0+t1early+t1l2+ostage",
    "bv128+late10+mbp0+ostage",
    "bv128+late10+mbp0+t1early+ostage",
    # session 16: dsreg (7 CTAs/SM) on the B >= 128 entry, kept for B=32: there the table's late10
    # (5 CTAs/SM) runs HV=64 in 3.1 waves where flashinfer (7) needs 2.2, and loses by 14 %
    # (results/kernel/s21-h200)
    "bv128+late13+mbp0+t1early+t1l2+wvearly+dsreg",
    # session 22: afe on the HV=48 B=32 entry (late10 + t1early: 72 registers, no spills, still
    # 5 CTAs/SM by shared memory; without t1early late10 + afe spills 4 words). On an H100 the
    # B=32 loss to flashinfer is phase 5's serial time (results/kernel/s22-h100-b32), which afe
    # moves before the state arrives; k19/k20 on H100s timed it 1-4 % faster at B=32 verify
    "bv128+late10+mbp0+t1early+afe",
    # session 23: v12b's B=32 entry with ostage (k6's `base+ostage` column times it there): at
    # B=32 the stores are ~0.4 us of HV=48's 1.8 us gap on an H100 (no_epistore, session 22);
    # 82 registers, no spill, 5 CTAs/SM (bench/ptxas_regs.py)
    "bv128+late10+mbp0+t1early+afe+ostage",
    # Left in session 21, after the H200 had timed them (the knobs stay in next, each still
    # checked by its forced suite in its h200_run mode): the other dsreg / nobar forms (no gain
    # at B >= 128 on either card), chain (sessions 18-19: slower), tepi (1-2 % slower), afe alone
    # and with ostage (slower with flush rows), stef (a deferral), the B >= 128 entries without
    # t1l2 (slower at B >= 128) and tproj (time-neutral on both cards). git history has the list.
)

KNOBS = (
    "GDN_UCACHE_XSPLIT",
    "GDN_UCACHE_MBP",
    "GDN_UCACHE_BV",
    "GDN_UCACHE_SKIP",
    "GDN_UCACHE_BSMEM",
    "GDN_UCACHE_LATE",
    "GDN_UCACHE_PERSIST",
    "GDN_UCACHE_NPROG",
    "GDN_UCACHE_PREFETCH",
    "GDN_UCACHE_VEC_QK",
    "GDN_UCACHE_CARVEOUT",
    "GDN_UCACHE_T1EARLY",
    "GDN_UCACHE_T1L2",
    "GDN_UCACHE_WVEARLY",
    "GDN_UCACHE_XPF",
    "GDN_UCACHE_ACTFIRST",
    "GDN_UCACHE_DSREG",
    "GDN_UCACHE_NOBAR",
    "GDN_UCACHE_NEXTL2",
    "GDN_UCACHE_TEPI",
    "GDN_UCACHE_AFE",
    "GDN_UCACHE_OSTAGE",
    "GDN_UCACHE_STEF",
    "GDN_UCACHE_TPROJ",
)


def variant_env(name: str) -> dict[str, str]:
    """Environment of a variant name ('bv128+mbp5', 'no_fold', 'base', ...)."""
    env: dict[str, str] = {}

    def set_knob(key: str, value: str) -> None:
        if key == "GDN_UCACHE_SKIP" and env.get(key):
            value = f"{env[key]},{value}"  # knock-outs combine: stream+alias, alias+pad9800
        env[key] = value

    for part in name.split("+"):
        if part in VARIANTS:
            for key, value in VARIANTS[part].items():
                set_knob(key, value)
        elif part.startswith("bv") and part[2:].isdigit():
            env["GDN_UCACHE_BV"] = part[2:]
        elif part.startswith("mbp") and part[3:].isdigit():
            env["GDN_UCACHE_MBP"] = part[3:]
        elif part.startswith("late") and part[4:].isdigit():
            env["GDN_UCACHE_LATE"] = part[4:]
        elif part.startswith("xpf") and part[3:].isdigit():
            env["GDN_UCACHE_XPF"] = part[3:]
        elif part.startswith("persist") and part[7:].isdigit():
            env["GDN_UCACHE_PERSIST"] = part[7:]
        elif part.startswith("nprog") and part[5:].isdigit():
            env["GDN_UCACHE_NPROG"] = part[5:]
        elif part in ("pf", "pf1", "pf2"):
            env["GDN_UCACHE_PREFETCH"] = part[2:] or "1"
        elif any(part.startswith(p) and part[len(p) :].isdigit() for p in ("pad", "stag")):
            # padN: unused shared memory per CTA (bytes), to pin the CTAs per SM; stagN (session
            # 25): odd CTAs of the first wave start N ns late. Both timing-only SKIP tokens
            set_knob("GDN_UCACHE_SKIP", part)
        else:
            raise SystemExit(f"unknown variant part {part!r} in {name!r}")
    return env


def choose(
    rows: list[dict[str, Any]], module: str = "v4", exclude: tuple[str, ...] = ()
) -> dict[tuple[int, int], str]:
    """Per (HV, B): the candidate of `module` timed at every flush level of that (HV, B) with the
    smallest mean ratio to flashinfer over the flush levels (the flush mix is not known at launch
    time, so each level weighs the same); ties and missing flashinfer: the lowest time at 20 %
    flush (the steady serving mix).

    Until session 8 the rule was the smallest *worst* ratio. Verify-only (0 %) is where every
    candidate trails flashinfer, so that rule kept configs that won 1-2 % there and lost 3-8 % at
    20 % and 100 % flush (results/kernel/v7-k4/README.md)."""
    by_point: dict[tuple[int, int], dict[int, dict[str, float]]] = {}
    for r in rows:
        by_point.setdefault((r["HV"], r["B"]), {})[r["flush_pct"]] = r["us"]
    out = {}
    for key, per_flush in by_point.items():
        names = None
        for us in per_flush.values():
            mine = {
                c.partition(":")[2]
                for c in us
                if c.startswith(module + ":") and c.partition(":")[2] not in exclude
            }
            names = mine if names is None else names & mine
        if not names:
            continue
        ref = per_flush.get(20) or next(iter(per_flush.values()))

        def score(n: str, per_flush=per_flush, ref=ref) -> tuple[float, float]:
            ratios = [
                us[f"{module}:{n}"] / us["flashinfer:base"]
                for us in per_flush.values()
                if "flashinfer:base" in us
            ]
            mean = sum(ratios) / len(ratios) if ratios else 0.0
            return (round(mean, 3), ref[f"{module}:{n}"])

        out[key] = min(sorted(names), key=score)
    return out


def report(
    paths: list[Path],
    out: Path,
    tag: str,
    module: str = "v4",
    ref: str = "v3:base",
    exclude: tuple[str, ...] = (),
) -> int:
    """Turn sweep JSONs into bench-style JSON/markdown/PNG. Rows of the same (arm, HV, B, flush)
    from several files are merged; the serving arm decides the configuration per (HV, B) (ours =
    the chosen candidate of `module`, `exclude`d names never chosen), flashinfer and the `ref`
    column (an earlier version) as timed in the same process."""
    from bench.bench_ucache import plot

    merged: dict[tuple, dict[str, Any]] = {}
    for p in paths:
        for r in json.loads(p.read_text())["rows"]:
            key = (r["arm"], r["HV"], r["B"], r["flush_pct"])
            row = merged.setdefault(key, {**r, "us": {}})
            row["us"].update(r["us"])
    rows_all = list(merged.values())
    arms = sorted({r["arm"] for r in rows_all}, key=lambda a: (a != "serving", a))
    chosen = choose([r for r in rows_all if r["arm"] == arms[0]], module, exclude)
    results = []
    for arm in arms:
        for r in sorted(
            (r for r in rows_all if r["arm"] == arm),
            key=lambda r: (r["HV"], r["B"], r["flush_pct"]),
        ):
            us = r["us"]
            pick = chosen.get((r["HV"], r["B"]))
            row = {k: r[k] for k in ("arm", "HV", "B", "flush_pct", "floor_us")}
            row["config"] = pick
            row["us"] = {}
            if pick and f"{module}:{pick}" in us:
                row["us"]["ours"] = us[f"{module}:{pick}"]
            for src, name in (("flashinfer:base", "flashinfer"), (ref, "ours_v3")):
                if src in us:
                    row["us"][name] = us[src]
            row["all_us"] = us
            results.append(row)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "sources": [str(p) for p in paths],
        # the report's own command line (bench/targets.py names each source file's command)
        "command": " ".join(["python bench/knockout.py report", *map(str, paths)])
        + f" --out {out} --tag {tag} --module {module} --ref {ref}",
        "chosen": {f"{h},{b}": c for (h, b), c in chosen.items()},
    }
    (out / f"{tag}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    md = [
        f"# {tag}: ours ({module}, chosen launch config per (HV, B)) vs flashinfer vs {ref} "
        "(one process per arm)",
        "",
        "Sources: " + ", ".join(f"`{p.name}`" for p in paths) + " (bench/knockout.py sweeps, "
        "CUDA-graph replay, cold L2). x = time / HBM floor.",
        "",
        "| arm | HV | B | flush % | floor | flashinfer | x | ours | x | config | ours/fi | "
        f"{ref} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        fi, ours, v3 = (r["us"].get(n) for n in ("flashinfer", "ours", "ours_v3"))
        fl = r["floor_us"]

        def cell(v: float | None) -> str:
            return f"{v:.2f}" if v else "-"

        md.append(
            f"| {r['arm']} | {r['HV']} | {r['B']} | {r['flush_pct']} | {fl:.1f} | {cell(fi)} | "
            f"{fi / fl:.2f} | {cell(ours)} | {ours / fl if ours else 0:.2f} | {r['config']} | "
            f"{ours / fi if ours and fi else 0:.3f} | {cell(v3)} |"
            if fi
            else f"| {r['arm']} | {r['HV']} | {r['B']} | {r['flush_pct']} | {fl:.1f} | - | - | "
            f"{cell(ours)} | - | {r['config']} | - | {cell(v3)} |"
        )
    (out / f"{tag}.md").write_text("\n".join(md) + "\n")
    try:
        plot([{**r, "us": r["us"]} for r in results], out / f"{tag}.png")
    except Exception as exc:
        print(f"# plot failed: {exc!r}")
    print("\n".join(md))
    table: dict[int, dict[int, str]] = {}
    for (hv, b), name in sorted(chosen.items()):
        table.setdefault(hv, {})[b] = name
    print("# chosen launch configs per (HV, B), as kernels/gdn_ucache_flush.py's _TUNED_T4:")
    print(f"_TUNED_T4 = {table!r}")
    return 0


def mean_ratios(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Per (HV, B): every column's mean ratio to flashinfer over the flush levels (choose's score,
    for all modules at once), and per column how many points are at or below flashinfer and its
    worst ratio. Returns (table lines, summary lines) as markdown."""
    cols = sorted({c for r in rows for c in r["us"] if c != "flashinfer:base"})
    cells: dict[tuple[int, int], dict[str, list[float]]] = {}
    wins = dict.fromkeys(cols, 0)
    worst: dict[str, tuple[float, int, int, int]] = {}
    for r in rows:
        fi = r["us"].get("flashinfer:base")
        if not fi:
            continue
        for c in cols:
            if c in r["us"]:
                ratio = r["us"][c] / fi
                cells.setdefault((r["HV"], r["B"]), {}).setdefault(c, []).append(ratio)
                wins[c] += ratio <= 1.0
                worst[c] = max(
                    worst.get(c, (0.0, 0, 0, 0)), (ratio, r["HV"], r["B"], r["flush_pct"])
                )
    table = ["| HV | B | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for (hv, b), per in sorted(cells.items()):
        means = {c: sum(v) / len(v) for c, v in per.items()}
        best = min(means.values())
        table.append(
            f"| {hv} | {b} | "
            + " | ".join(
                "-"
                if c not in means
                else f"**{means[c]:.3f}**"
                if means[c] == best
                else f"{means[c]:.3f}"
                for c in cols
            )
            + " |"
        )
    n = sum(1 for r in rows if r["us"].get("flashinfer:base"))
    summary = [
        f"- {c}: <= flashinfer at {wins[c]} of {n} points; worst {worst[c][0]:.3f}x "
        f"(HV={worst[c][1]} B={worst[c][2]} flush {worst[c][3]} %)"
        for c in cols
        if c in worst
    ]
    return table, summary


def same_code(name: str) -> frozenset[str]:
    """A launch configuration as the code it compiles: its knobs in any order, any xpf distance
    as `xpf` (N only offsets the prefetched row)."""
    return frozenset(re.sub(r"^xpf[1-9]\d*$", "xpf", p) for p in name.split("+"))


def is_candidate(name: str) -> bool:
    """Whether a table entry runs code that the GPU conformance test ran (CANDIDATES)."""
    return same_code(name) in {same_code(c) for c in CANDIDATES}


CANDIDATE_RESULT = re.compile(r"::test_candidate\[(\w+)-([^\]]+)\] (PASSED|FAILED|ERROR)")


def passed_candidates(logs: list[Path]) -> set[frozenset[str]]:
    """The candidates (as same_code) that PASSED in every arm these GPU conformance logs ran
    (k6's conformance-candidate-*.log, pytest -v); one that failed, errored or did not run in
    some arm (a part cut by its time limit) is left out."""
    arms: set[str] = set()
    results: dict[frozenset[str], dict[str, bool]] = {}
    for log in logs:
        for arm, name, outcome in CANDIDATE_RESULT.findall(log.read_text(errors="replace")):
            arms.add(arm)
            per_arm = results.setdefault(same_code(name), {})
            per_arm[arm] = per_arm.get(arm, True) and outcome == "PASSED"
    return {code for code, per_arm in results.items() if arms and all(per_arm.get(a) for a in arms)}


def propose(
    rows: list[dict[str, Any]],
    table: dict[int, dict[int, str]],
    module: str = "ours",
    passed: set[frozenset[str]] | None = None,
) -> tuple[dict[int, dict[int, str]], list[str]]:
    """A new launch table from candidate sweeps of `module` whose `base` was `table` (the
    kernel's _TUNED_T4 when they ran): per (HV, table B key), the column with the smallest mean
    ratio to flashinfer over every timed row it covers (each B the key serves and each flush
    level weigh the same); `base+X` becomes the table's entry there plus X. Only conformance
    candidates (is_candidate) are chosen, and with `passed` (passed_candidates of the GPU run)
    only those that passed there; keys no sweep covers keep their entry. Returns (table, one
    explanation line per changed key)."""

    def resolve(hv: int, key: int, name: str) -> str:
        parts = name.split("+")
        if parts[0] != "base":
            return name
        entry = table[hv][key]
        return "+".join([entry, *(p for p in parts[1:] if p not in entry.split("+"))])

    new = {hv: dict(row) for hv, row in table.items()}
    lines = [
        f"HV={hv} B>={key}: the entry {name} did not pass in every arm of the conformance logs"
        for hv, row in sorted(table.items())
        for key, name in sorted(row.items())
        if passed is not None and same_code(name) not in passed
    ]
    groups: dict[tuple[int, int], list[dict[str, float]]] = {}
    for r in rows:
        if r["HV"] not in table or "flashinfer:base" not in r["us"]:
            continue
        keys = [b for b in table[r["HV"]] if b <= r["B"]]
        if keys:
            groups.setdefault((r["HV"], max(keys)), []).append(r["us"])
    for (hv, key), timed in sorted(groups.items()):
        names = set.intersection(
            *({c.partition(":")[2] for c in us if c.startswith(module + ":")} for us in timed)
        )

        def mean_ratio(n: str, timed: list = timed) -> float:
            return sum(us[f"{module}:{n}"] / us["flashinfer:base"] for us in timed) / len(timed)

        names = {n for n in names if is_candidate(resolve(hv, key, n))}
        if passed is not None:
            names = {n for n in names if same_code(resolve(hv, key, n)) in passed}
        if not names:
            continue
        best = min(sorted(names), key=mean_ratio)
        resolved = resolve(hv, key, best)
        if resolved != table[hv][key]:
            base_ratio = mean_ratio("base") if "base" in names else float("nan")
            lines.append(
                f"HV={hv} B>={key}: {table[hv][key]} -> {resolved} ({best}: mean ratio to "
                f"flashinfer {mean_ratio(best):.3f} vs base {base_ratio:.3f}, {len(timed)} rows)"
            )
        new[hv][key] = resolved
    return new, lines


# the kernel file's launch tables by card class (its _launch_table; GDN_UCACHE_TABLE there)
TABLE_VARS = {"h200": "_TUNED_T4", "h100": "_TUNED_T4_H100"}


def table_head(var: str = "_TUNED_T4") -> str:
    """The first line of a launch table's block in the kernel file."""
    return f"{var}: dict[int, dict[int, str]] = {{"


TABLE_HEAD = table_head()


def table_source(table: dict[int, dict[int, str]], var: str = "_TUNED_T4") -> str:
    """A launch table as the kernel file writes it (ruff-format's layout at 100 columns): one line
    per HV, or one line per entry where the HV's line would be longer."""
    lines = [table_head(var)]
    for hv, row in sorted(table.items()):
        items = [f'{b}: "{name}"' for b, name in sorted(row.items())]
        one = f"    {hv}: {{{', '.join(items)}}},"
        if len(one) <= 100:
            lines.append(one)
        else:
            lines += [f"    {hv}: {{", *(f"        {it}," for it in items), "    },"]
    return "\n".join([*lines, "}"]) + "\n"


def write_table(
    kernel: Path, table: dict[int, dict[int, str]], dest: Path, var: str = "_TUNED_T4"
) -> None:
    """Write `kernel` with its `var` block replaced by `table` to `dest` (may be `kernel`: the
    shipping step then needs no hand edit). The block runs from table_head(var) at column 0 to the
    next line that is only `}`; anything else is an error naming what to fix."""
    text = kernel.read_text()
    head = table_head(var)
    starts = [m.start() for m in re.finditer(rf"^{re.escape(head)}$", text, re.M)]
    if len(starts) != 1:
        raise SystemExit(f"{kernel}: expected one line `{head}` at column 0, found {len(starts)}")
    end = text.find("\n}\n", starts[0])
    if end < 0:
        raise SystemExit(f"{kernel}: the {var} block has no closing line `}}`")
    dest.write_text(text[: starts[0]] + table_source(table, var) + text[end + 3 :])


def sweep_table(
    metas: list[dict[str, Any]], forced: str | None, card_table: Callable[[str], str]
) -> str:
    """The launch table the sweeps' `base` ran with: from the cards they recorded (knockout's
    JSON since session 30) by the kernel's `card_table` rule, checked against `forced` (propose
    --table); h200 where none was recorded. Sweeps from cards of two classes, or a --table that
    contradicts the card, are refused: their `base` columns are different tables."""
    found = {card_table(m["device"]) for m in metas if m.get("device")}
    if len(found) > 1:
        raise SystemExit("propose: the sweeps ran on cards with different launch tables")
    if forced is not None and found and forced not in found:
        raise SystemExit(
            f"propose: --table {forced}, but the sweeps ran on a card whose table is "
            f"{found.pop()} (drop --table, or pass sweeps from that card)"
        )
    return forced or (found.pop() if found else "h200")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "propose":
        # a new _TUNED_T4 from candidate sweeps (the kernel file's table resolves `base+X`)
        pp = argparse.ArgumentParser(description="a launch table from candidate sweeps")
        pp.add_argument("cmd")
        pp.add_argument("sweeps", nargs="+", type=Path)
        pp.add_argument("--kernel", type=Path, required=True, help="its table was `base`")
        pp.add_argument(
            "--table",
            choices=sorted(TABLE_VARS),
            help="the kernel's launch table the sweeps' `base` was, and the one --write replaces "
            "(default: from the card the sweeps recorded, h100 for H100 / H800, else h200; "
            "h200 for sweeps that recorded none)",
        )
        pp.add_argument("--module", default="ours")
        pp.add_argument(
            "--write",
            type=Path,
            help="also write the kernel file with the new table here (may be --kernel itself)",
        )
        pp.add_argument(
            "--conformance",
            nargs="+",
            type=Path,
            help="GPU conformance logs (k6's conformance-candidate-*.log): choose only what passed",
        )
        pa = pp.parse_args()
        spec = importlib.util.spec_from_file_location("gdnu_propose", pa.kernel)
        kmod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kmod)
        sweeps = [json.loads(p.read_text()) for p in pa.sweeps]
        rows = [r for sw in sweeps for r in sw["rows"]]
        passed = passed_candidates(pa.conformance) if pa.conformance else None
        if passed is not None:
            print(f"# {len(passed)} candidates passed in every arm of {len(pa.conformance)} logs")
        # kernels from before the H100 table (v12d) have one table: every card is h200's
        card_table = getattr(kmod, "_card_table", lambda name: "h200")
        metas = [sw.get("meta", {}) for sw in sweeps]
        var = TABLE_VARS[sweep_table(metas, pa.table, card_table)]
        if not hasattr(kmod, var):
            raise SystemExit(f"{pa.kernel} has no {var}: pass --table h200 (its _TUNED_T4)")
        table, lines = propose(rows, getattr(kmod, var), pa.module, passed)
        print("\n".join(f"# {ln}" for ln in lines) or "# no change")
        print(f"{var} = {table!r}")
        if pa.write:
            write_table(pa.kernel, table, pa.write, var)
            print(f"# wrote {pa.write}")
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "chosen":
        # the distinct winning candidates of these sweeps, one per line (to time them elsewhere)
        rows: list[dict[str, Any]] = []
        for p in sys.argv[2:]:
            if Path(p).is_file():
                rows += json.loads(Path(p).read_text())["rows"]
        merged: dict[tuple, dict[str, Any]] = {}
        for r in rows:
            key = (r["arm"], r["HV"], r["B"], r["flush_pct"])
            merged.setdefault(key, {**r, "us": {}})["us"].update(r["us"])
        for name in sorted(set(choose(list(merged.values())).values())):
            print(name)
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "means":
        # per (HV, B) mean ratio to flashinfer of every column of these sweep JSONs (markdown)
        for p in sys.argv[2:]:
            table, summary = mean_ratios(json.loads(Path(p).read_text())["rows"])
            print(f"## {p}: mean ratio to flashinfer over the flush levels (bold: best)\n")
            print("\n".join(table + [""] + summary) + "\n")
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        rp = argparse.ArgumentParser(description="bench-style tables from sweep JSONs")
        rp.add_argument("cmd")
        rp.add_argument("sweeps", nargs="+", type=Path, help="first one decides the configs")
        rp.add_argument("--out", type=Path, required=True)
        rp.add_argument("--tag", default="final")
        rp.add_argument("--module", default="v4", help="the kernel whose configs are chosen")
        rp.add_argument("--ref", default="v3:base", help="comparison column (module:variant)")
        rp.add_argument("--exclude", nargs="*", default=[], help="variants never chosen")
        ra = rp.parse_args()
        return report(ra.sweeps, ra.out, ra.tag, ra.module, ra.ref, tuple(ra.exclude))
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--arm", default="serving")
    ap.add_argument("--hv", nargs="+", type=int, default=[32])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 100])
    ap.add_argument("--variants", nargs="+", default=["base"])
    ap.add_argument(
        "--modules",
        nargs="+",
        default=["ours=kernels/gdn_ucache_flush.py"],
        metavar="NAME=PATH",
        help="kernel files to time (each with every variant)",
    )
    ap.add_argument(
        "--backends",
        nargs="*",
        default=[],
        help="registered backends timed as they are (e.g. flashinfer), variant name 'base'",
    )
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument(
        "--warm", action="store_true", help="warm L2: no scrub, WARM_CALLS calls per graph replay"
    )
    ap.add_argument("--json", type=Path, default=None, help="write all timings here (JSON)")
    ap.add_argument(
        "--budget-s", type=float, default=1e9, help="stop starting new points after this"
    )
    args = ap.parse_args()
    for v in args.variants:
        variant_env(v.partition(":")[2] or v)  # fail early on a bad name
    modules = {}
    for item in args.modules:
        name, _, path = item.partition("=")
        modules[name] = Path(path)
    handles = load_backends(args.arm, args.backends, modules)
    scrub = None if args.warm else torch.ones((256 << 20) // 4, device="cuda")
    t0 = time.time()
    rows: list[dict[str, Any]] = []

    def runs_for(mod: str) -> list[str]:
        if mod in args.backends:
            return ["base"]
        out = []
        for v in args.variants:
            vm, sep, vv = v.partition(":")
            if not sep:
                out.append(v)
            elif vm == mod:
                out.append(vv)
        return out

    cols = [f"{m}:{v}" for m in handles for v in runs_for(m)]
    mode = f"warm L2 ({WARM_CALLS} back-to-back calls per graph)" if args.warm else "cold L2"
    print(f"# arm {args.arm}, {mode}, us per call", flush=True)
    launch_us = launch_floor_us(scrub, args.reps)
    print(f"# launch floor (one 1-element kernel, same timing): {launch_us:.2f} us", flush=True)
    for i, c in enumerate(cols):
        print(f"# column {i}: {c}")
    print(
        f"{'HV':>3s} {'B':>4s} {'fl%':>4s} {'floor':>7s} "
        + " ".join(f"{i:>7d}" for i in range(len(cols)))
    )
    saved = {k: os.environ.get(k) for k in KNOBS}
    try:
        for hv in args.hv:
            for B in args.batch:
                for frac in args.flush:
                    if time.time() - t0 > args.budget_s:
                        print("# budget reached: stopping", flush=True)
                        raise StopIteration
                    first = next(iter(handles.values()))
                    point = Point(first, B, 16, hv, 4, frac / 100, seed=B * 1000 + hv + frac)
                    fb = floor_bytes(B, 16, hv, 4, point.n_flush, P_VERIFY, P_FLUSH)
                    floor = fb / HBM_BYTES_PER_S * 1e6
                    row: dict[str, Any] = dict(
                        arm=args.arm, HV=hv, B=B, flush_pct=frac, floor_us=floor, us={}
                    )
                    line = f"{hv:3d} {B:4d} {frac:4d} {floor:7.1f} "
                    # every column's graph is captured with its knobs set (the launch reads them
                    # at call time), then the replays of all columns interleave (time_graphs)
                    calls = calls_per_replay(scrub)
                    graphs = {}
                    for mod, handle in handles.items():
                        for name in runs_for(mod):
                            for k in KNOBS:
                                os.environ.pop(k, None)
                            os.environ.update(variant_env(name))
                            try:
                                graphs[f"{mod}:{name}"] = capture_graph(handle.fn, point, calls)
                            except Exception as exc:  # keep going: a knob may not compile
                                print(f"# {mod}:{name}: {exc!r}"[:300], flush=True)
                    for k in KNOBS:
                        os.environ.pop(k, None)
                    timed = time_graphs(graphs, scrub, args.reps, calls) if graphs else {}
                    del graphs
                    for col in cols:
                        if col in timed:
                            row["us"][col] = timed[col]
                            line += f" {timed[col]:7.2f}"
                        else:
                            line += f" {'ERR':>7s}"
                    rows.append(row)
                    print(line, flush=True)
                    if args.json:
                        args.json.parent.mkdir(parents=True, exist_ok=True)
                        meta = dict(
                            argv=sys.argv,
                            warm=args.warm,
                            warm_calls=WARM_CALLS if args.warm else 1,
                            reps=args.reps,
                            launch_floor_us=launch_us,
                            device=torch.cuda.get_device_name(),  # which launch table `base` was
                        )
                        args.json.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    except StopIteration:
        pass
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    print(f"# wall {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
