"""Long-run drift of the folded checkpoint with and without GDN_UCACHE_STATE_SR (stochastic
rounding).

Drives our kernel through many verify(+flush) steps with the conformance harness (float64 truth),
once with round-to-nearest and once with stochastic rounding of the folded state, same seed and
inputs, and reports the state error vs the float64 truth over time (mean over blocks, per step).

    python bench/sr_drift.py --steps 400 --out results/kernel

The JSON and the table are rewritten after every run, so a run cut by `--budget-s` (no new run
starts past it) or by a timeout keeps what finished; each row records its wall seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.reference.arms import get_arm  # noqa: E402
from kernels.reference.backends import (  # noqa: E402
    REPO_ROOT,
    KernelHandle,
    check_ucache_module,
    load_module_by_path,
)
from kernels.reference.harness import ConformanceHarness, HarnessConfig  # noqa: E402

KERNEL = REPO_ROOT / "kernels" / "gdn_ucache_flush.py"


def handle_for(arm_name: str, sr: bool) -> KernelHandle:
    arm = get_arm(arm_name)
    env = dict(arm.kernel_env(), GDN_UCACHE_STATE_SR="1" if sr else "0")
    module = load_module_by_path(KERNEL, env, f"sr{int(sr)}_{arm_name}", REPO_ROOT)
    check_ucache_module(module, arm, str(KERNEL))
    return KernelHandle(
        "ours",
        arm,
        "compact",
        module.gated_delta_rule_mtp_ucache_flush,
        "cuda",
        tuple(module.SUPPORTED_T),
        module=module,
    )


def write_outputs(out: Path, rows: list[dict[str, Any]]) -> None:
    """sr_drift.json (every row, with its error series) and sr_drift.md (the table)."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    (out / "sr_drift.json").write_text(json.dumps(dict(command=cmd, rows=rows), indent=1))
    md = [
        "# Stochastic rounding of the folded checkpoint: long-run state error vs float64 truth",
        "",
        f"Command: `{cmd}`",
        "",
        "Mean relative state error (checkpoint + live window vs the float64 recurrence), "
        "averaged over the 2nd and the last tenth of the run; every step accepts all T=4 "
        "drafts, so a row flushes every 4 steps.",
        "",
        "| arm | gates | SR | steps | flush rows | 2nd tenth | last tenth | last / 2nd | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['arm']} | {r['gates']} | {'on' if r['sr'] else 'off'} | {r['steps']} "
            f"| {r['flushes']} | {r['early']:.3e} | {r['late']:.3e} | "
            f"{r['late'] / r['early']:.2f} | {r['wall_s']:.1f} |"
        )
    (out / "sr_drift.md").write_text("\n".join(md) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arms", nargs="+", default=["bf16", "serving"])
    ap.add_argument("--gates", nargs="+", default=["no_decay", "mixed"])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget-s", type=float, default=0.0, help="start no run after this (0: none)")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    t_start = time.time()
    print(
        f"{'arm':8s} {'gates':9s} {'SR':>3s} {'flushes':>7s} {'2nd tenth':>10s} "
        f"{'last tenth':>11s} {'final':>10s}"
    )
    for arm in args.arms:
        for gates in args.gates:
            for sr in (False, True):
                if args.budget_s and time.time() - t_start > args.budget_s:
                    print(f"# budget: {arm} {gates} SR={int(sr)} not started", flush=True)
                    continue
                t_run = time.time()
                cfg = HarnessConfig(
                    num_requests=8,
                    num_k_heads=2,
                    num_v_heads=4,
                    num_tokens=4,
                    steps=args.steps,
                    accepted="all",
                    gates=gates,
                    seed=args.seed,
                    shuffle_batch=False,
                    poison_stale=False,
                    fail_fast=False,
                )
                report = ConformanceHarness(handle_for(arm, sr), cfg).run()
                series = report.metric_series("state_true", 1)
                tenth = max(1, len(series) // 10)
                good = [x for x in series if not math.isnan(x)]
                early = sum(series[tenth : 2 * tenth]) / tenth
                late = sum(series[-tenth:]) / tenth
                flushes = sum(s.flush_rows for s in report.steps)
                rows.append(
                    dict(
                        arm=arm,
                        gates=gates,
                        sr=sr,
                        steps=args.steps,
                        wall_s=time.time() - t_run,
                        flushes=flushes,
                        early=early,
                        late=late,
                        final=good[-1] if good else math.nan,
                        series=series,
                        ok=report.ok,
                        failures=report.failures(3),
                    )
                )
                print(
                    f"{arm:8s} {gates:9s} {int(sr):3d} {flushes:7d} {early:10.3e} "
                    f"{late:11.3e} {rows[-1]['final']:10.3e}",
                    flush=True,
                )
                if args.out:
                    write_outputs(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
