"""Per layer-step time of the series' Triton ReplaySSM baseline (verify + flush launches) on H200.

Grid (issue #4): H=16, HV in {32, 48, 64}, T=4, B in {1, 8, 32, 64, 128, 256}, flush fraction
0 / 20 / 100 %. Arms, all bf16 activations and fp16 u/k rings:
  triton_fp32ckpt  the Triton baseline with an fp32 checkpoint: vLLM's Qwen3.5 default
                   (mamba_ssm_dtype=float32), what the series serves today
  triton_fp16ckpt  the Triton baseline with an fp16 checkpoint (same bytes as the fused kernel)
  flashinfer       flashinfer 0.7.2.post1's fused gated_delta_rule_mtp_ucache_flush (fp16
                   checkpoint; vLLM's ucache serving arm), the one-launch anchor
Every call is captured in a CUDA graph and replayed on a cold L2 (bench_ucache.time_graph); verify
rows sit at P=8, flush rows at P=15. floor = bytes that must move / 4.3 TB/s (kernel-spec 3.2), with
the checkpoint at 4 bytes for the fp32 arm. Ratios in the table are taken in this one run.

    GDN_TRITON_BASELINE_MODULE=tests/series/triton_baseline_adapter.py \
        python bench/bench_triton.py --out results/triton
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault(
    "GDN_TRITON_BASELINE_MODULE", str(REPO / "tests" / "series" / "triton_baseline_adapter.py")
)

from bench.bench_ucache import (  # noqa: E402
    HBM_BYTES_PER_S,
    P_FLUSH,
    P_VERIFY,
    Point,
    floor_bytes,
    load_backends,
    time_graph,
)

ARMS = ("triton_fp32ckpt", "triton_fp16ckpt", "flashinfer")


def floor_us(B: int, H: int, HV: int, T: int, n_flush: int, state_bytes: int) -> float:
    """kernel-spec 3.2's floor; an fp32 checkpoint adds 2 bytes per element read or written."""
    total = floor_bytes(B, H, HV, T, n_flush, P_VERIFY, P_FLUSH)
    extra_per_state = HV * 16384 * (state_bytes - 2)
    total += (B + n_flush) * extra_per_state
    return total / HBM_BYTES_PER_S * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hv", nargs="+", type=int, default=[32, 48, 64])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8, 32, 64, 128, 256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 20, 100], help="flush percent")
    ap.add_argument("--T", type=int, default=4)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None, help="folder for bench_triton.{json,md}")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time", file=sys.stderr)
        return 2

    handles = load_backends("serving", ["triton_vllm", "flashinfer"])
    if "triton_vllm" not in handles:
        print("the Triton baseline did not load", file=sys.stderr)
        return 1
    scrub = torch.ones((256 << 20) // 4, device="cuda")
    results: list[dict[str, Any]] = []
    t_start = time.time()
    print(
        f"{'HV':>3s} {'B':>4s} {'fl%':>4s} {'fl32':>7s} {'fl16':>7s} "
        + "".join(f" {name[:15]:>15s} {'x':>5s}" for name in ARMS)
        + "  tri16/fi",
        flush=True,
    )
    for hv in args.hv:
        for B in args.batch:
            for frac in args.flush:
                point = Point(
                    handles["triton_vllm"], B, args.H, hv, args.T, frac / 100, seed=B + hv + frac
                )
                floor16 = floor_us(B, args.H, hv, args.T, point.n_flush, 2)
                floor32 = floor_us(B, args.H, hv, args.T, point.n_flush, 4)
                row: dict[str, Any] = dict(
                    HV=hv, H=args.H, T=args.T, B=B, flush_pct=frac, n_flush=point.n_flush,
                    floor_us={"fp16ckpt": floor16, "fp32ckpt": floor32}, us={}, x={}, errors={},
                )  # fmt: skip
                runs = {
                    "triton_fp16ckpt": ("triton_vllm", torch.float16, floor16),
                    "triton_fp32ckpt": ("triton_vllm", torch.float32, floor32),
                    "flashinfer": ("flashinfer", torch.float16, floor16),
                }
                fp16_pool = point.args["initial_state_source"]
                for arm, (backend, state_dtype, floor) in runs.items():
                    if backend not in handles:
                        continue
                    point.args["initial_state_source"] = fp16_pool.to(state_dtype)
                    try:
                        us = time_graph(handles[backend].fn, point, scrub, args.reps)
                        row["us"][arm] = us
                        row["x"][arm] = us / floor
                    except Exception as exc:
                        row["errors"][arm] = repr(exc)[:300]
                point.args["initial_state_source"] = fp16_pool
                results.append(row)
                line = f"{hv:3d} {B:4d} {frac:4d} {floor32:7.1f} {floor16:7.1f}"
                for arm in ARMS:
                    line += (
                        f" {row['us'].get(arm, math.nan):15.2f} {row['x'].get(arm, math.nan):5.2f}"
                    )
                if "flashinfer" in row["us"] and "triton_fp16ckpt" in row["us"]:
                    line += f"  {row['us']['triton_fp16ckpt'] / row['us']['flashinfer']:.2f}"
                print(line, flush=True)
                for arm, err in row["errors"].items():
                    print(f"#   {arm}: {err}", flush=True)
    wall = time.time() - t_start
    if args.out:
        write_results(args, results, wall)
    print(f"# wall {wall:.1f} s", flush=True)
    return 0


def write_results(args: argparse.Namespace, results: list[dict[str, Any]], wall: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    meta = dict(
        command=cmd,
        device=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        triton=__import__("triton").__version__,
        python=platform.python_version(),
        wall_s=wall,
        reps=args.reps,
        p_verify=P_VERIFY,
        p_flush=P_FLUSH,
        hbm_bytes_per_s=HBM_BYTES_PER_S,
    )
    (args.out / "bench_triton.json").write_text(
        json.dumps(dict(meta=meta, results=results), indent=1)
    )
    md = [
        f"# Triton ReplaySSM baseline (verify + flush), per layer-step, {meta['device']}",
        "",
        f"Command: `{cmd}` (torch {meta['torch']}, triton {meta['triton']}).",
        "",
        "CUDA-graph replay on a cold L2, median of the replays, in us. x = time / HBM floor of",
        "the arm's checkpoint dtype (floor32 / floor16). tri16/fi = Triton fp16-checkpoint time /",
        "flashinfer's fused kernel time (same bytes). Verify rows at P=8, flush rows at P=15.",
        "",
        "| HV | B | flush % | floor32 | floor16 | triton fp32 ckpt | x | triton fp16 ckpt | x"
        " | flashinfer | x | tri16/fi |",
        "|---" * 12 + "|",
    ]
    for r in results:
        cells = [str(r["HV"]), str(r["B"]), str(r["flush_pct"])]
        cells += [f"{r['floor_us']['fp32ckpt']:.1f}", f"{r['floor_us']['fp16ckpt']:.1f}"]
        for arm in ARMS:
            us = r["us"].get(arm)
            cells += [f"{us:.1f}" if us else "-", f"{r['x'][arm]:.2f}" if us else "-"]
        fi, tri = r["us"].get("flashinfer"), r["us"].get("triton_fp16ckpt")
        cells.append(f"{tri / fi:.2f}" if fi and tri else "-")
        md.append("| " + " | ".join(cells) + " |")
    (args.out / "bench_triton.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
