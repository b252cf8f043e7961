"""Per layer-step time of the series' Triton ReplaySSM baseline vs the fused ucache kernels (H200).

One process, two phases (both timed as CUDA-graph replays on a cold L2, the arms of a point
interleaved: bench_ucache.time_graphs):

1. Launch-config sweep of the Triton kernels at a few points (--sweep-hv x --sweep-batch x
   --sweep-flush, fp32 and fp16 checkpoints): every --configs entry (block_v, num_warps,
   num_stages), the op's own default table, and (if --v1-root is given) the session-1 kernel.
   A compact table is printed; the best config per batch regime (rows x value heads: small /
   mid / large) becomes the launch table of phase 2.
2. The grid (issue #4): H=16, HV in {32, 48, 64}, T=4, B in {1, 8, 32, 64, 128, 256}, flush
   fraction 0 / 20 / 100 %, bf16 activations and fp16 u/k rings. Columns:
     triton_fp32ckpt  the Triton baseline with an fp32 checkpoint (vLLM's Qwen3.5 default)
     triton_fp16ckpt  the Triton baseline with an fp16 checkpoint (the fused kernels' bytes)
     flashinfer       flashinfer 0.7.2.post1's fused gated_delta_rule_mtp_ucache_flush
     ours             kernels/gdn_ucache_flush.py (backend `ours`), the same contract
   plus the HBM floors (kernel-spec 3.2 bytes / 4.3 TB/s, fp32 checkpoint at 4 bytes) and the
   ratios of this one run. Verify rows at P=8, flush rows at P=15.

Outputs under --out: bench_triton.{json,md,png} (grid) and sweep_triton.{json,md}.

    GDN_SERIES_VLLM_ROOT=.gpu/series-vllm python3 bench/bench_triton.py --out $OUT/triton
"""

from __future__ import annotations

import argparse
import importlib.util
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
    capture_graph,
    floor_bytes,
    load_backends,
    time_graphs,
)

Config = dict[str, int | None]  # fields of the op's GdnReplaySSMLaunchConfig
ARMS = ("triton_fp32ckpt", "triton_fp16ckpt", "flashinfer", "ours")
OP_FILE = "vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py"
# Regimes of the launch table, by rows x value heads (programs of one whole head each).
REGIMES = (("small", 256), ("mid", 4096), ("large", 1 << 62))
# BLOCK_V,BLOCK_K,WARPS,STAGES[,MAXNREG]: value tiles from 16 rows to whole heads. ptxas (sm_90)
# gives the verify kernel ~117-128 registers per thread at these shapes (168 for an fp32 checkpoint
# at 32 rows x 4 warps) and the flush kernel ~125-250; a cap of 128 keeps 4 programs of 4 warps
# or 2 of 8 warps per SM at the price of a few spilled bytes.
DEFAULT_CONFIGS = (
    "16,32,4,2",
    "32,32,4,2,128",
    "64,32,4,2,128",
    "64,32,8,2,128",
    "128,32,8,2",
    "128,32,8,2,128",
    "128,32,8,3,128",
)


def floor_us(B: int, H: int, HV: int, T: int, n_flush: int, state_bytes: int) -> float:
    """kernel-spec 3.2's floor; an fp32 checkpoint adds 2 bytes per element read or written."""
    total = floor_bytes(B, H, HV, T, n_flush, P_VERIFY, P_FLUSH)
    total += (B + n_flush) * HV * 16384 * (state_bytes - 2)
    return total / HBM_BYTES_PER_S * 1e6


def regime(B: int, HV: int) -> str:
    pairs = B * HV
    return next(name for name, most in REGIMES if pairs <= most)


def parse_config(text: str) -> Config:
    """BLOCK_V,BLOCK_K,WARPS,STAGES[,MAXNREG] -> the op's GdnReplaySSMLaunchConfig fields."""
    fields = [int(x) for x in text.split(",")]
    if len(fields) not in (4, 5):
        raise SystemExit(f"--configs expects BLOCK_V,BLOCK_K,WARPS,STAGES[,MAXNREG], got {text}")
    names = ("block_v", "block_k", "num_warps", "num_stages", "max_registers")
    config: Config = dict(zip(names, fields, strict=False))
    config.setdefault("max_registers", None)
    return config


def config_name(config: Config | None) -> str:
    if not config:
        return "default"
    name = "v{block_v}k{block_k}w{num_warps}s{num_stages}".format(**config)
    return name + (f"r{config['max_registers']}" if config.get("max_registers") else "")


def load_v1_ops(root: Path) -> Any:
    """The session-1 kernel module (no launch-config arguments) from another tree."""
    path = root / OP_FILE
    spec = importlib.util.spec_from_file_location("_gdn_replayssm_v1", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # vllm.triton_utils is already shimmed by the adapter
    return module


class TritonArm:
    """The Triton adapter with a launch config (or another kernel module) set per call."""

    def __init__(self, handle: Any, ops: Any = None) -> None:
        self.handle = handle  # Point() reads the dtype arm from it
        self.module = handle.module
        self.ops = ops
        self.config: Config = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        saved_ops, saved_cfg = self.module.ops, dict(self.module.LAUNCH_OVERRIDES)
        if self.ops is not None:
            self.module.ops = self.ops
        self.module.LAUNCH_OVERRIDES.clear()
        self.module.LAUNCH_OVERRIDES.update(self.config)
        try:
            return self.module.gated_delta_rule_mtp_ucache_flush(*args, **kwargs)
        finally:
            self.module.ops = saved_ops
            self.module.LAUNCH_OVERRIDES.clear()
            self.module.LAUNCH_OVERRIDES.update(saved_cfg)


_WARM: dict[str, Any] = {}


def _warm_init(v1_root: str | None) -> None:
    """Worker start: load the Triton adapter (and the session-1 op) once per process."""
    handle = load_backends("serving", ["triton_vllm"])["triton_vllm"]
    _WARM["triton"] = TritonArm(handle)
    if v1_root:
        _WARM["v1"] = TritonArm(handle, ops=load_v1_ops(Path(v1_root)))


def _warm_task(task: tuple[int, int, int, str, str]) -> float:
    """Compile one (HV, checkpoint dtype, config) pair by calling it once: both launches."""
    H, T, hv, ckpt, config = task
    arm = _WARM["v1"] if config == "v1" else _WARM["triton"]
    arm.config = parse_config(config) if config not in ("v1", "default") else {}
    t0 = time.time()
    point = Point(arm.handle, 2, H, hv, T, 0.5, seed=0)
    fp16_pool = point.args["initial_state_source"]
    point.args["initial_state_source"] = fp16_pool.to(getattr(torch, ckpt))
    point.call(arm)
    torch.cuda.synchronize()
    return time.time() - t0


def warm_compile(args: argparse.Namespace) -> None:
    """Fill Triton's on-disk cache for every variant the run can launch, in parallel processes
    (one compile takes ~1.5 s on one core; the main process then only loads cubins)."""
    import concurrent.futures
    import multiprocessing

    configs = ["v1"] if args.only_v1 else ["default", *args.configs]
    configs += ["v1"] if args.v1_root and not args.only_v1 else []
    hvs = args.sweep_hv if args.sweep_only else [*args.sweep_hv, *args.hv]
    tasks = [
        (args.H, args.T, hv, ckpt, config)
        for hv in dict.fromkeys(hvs)
        for ckpt in ("float32", "float16")
        for config in configs
        if config != "v1" or args.only_v1 or hv in args.sweep_hv
    ]
    t0 = time.time()
    ctx = multiprocessing.get_context("spawn")
    v1_root = str(args.v1_root) if args.v1_root else None
    failed = 0
    pool = concurrent.futures.ProcessPoolExecutor(
        args.warm_workers, mp_context=ctx, initializer=_warm_init, initargs=(v1_root,)
    )
    try:
        futures = {pool.submit(_warm_task, task): task for task in tasks}
        for future in concurrent.futures.as_completed(futures, timeout=args.warm_timeout_s):
            try:
                future.result()
            except Exception as exc:
                failed += 1
                print(f"#   warm {futures[future]}: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    wall = time.time() - t0
    print(f"# warm compile: {len(tasks)} (HV, ckpt, config) tasks, {failed} failed, {wall:.1f} s")


def capture_arm(fn: Any, point: Point, state_dtype: torch.dtype) -> tuple[Any, torch.Tensor]:
    """fn's graph (one call per replay, cold L2) on `point` with its checkpoint pool in
    state_dtype, and that pool: the graph reads it, so it must outlive the replays. A Triton
    arm's launch config is the one set when this is called (the graph keeps it)."""
    fp16_pool = point.args["initial_state_source"]
    pool = fp16_pool.to(state_dtype)
    point.args["initial_state_source"] = pool
    try:
        return capture_graph(fn, point, 1), pool
    finally:
        point.args["initial_state_source"] = fp16_pool


def time_arms(
    captures: dict[str, tuple[Any, torch.Tensor]], scrub: Any, reps: int
) -> dict[str, float]:
    """Median us per call of each captured arm, their replays interleaved (bench_ucache.
    time_graphs: the arm timed first at a point would otherwise pay for the first replays after
    the point's allocation, 8-16 % at HV 48/64 B=256 in results/kernel/s22-order)."""
    return time_graphs({name: graph for name, (graph, _) in captures.items()}, scrub, reps, 1)


def sweep(
    args: argparse.Namespace, triton: TritonArm, v1: TritonArm | None, scrub: Any
) -> tuple[dict[str, Config], list[dict[str, Any]]]:
    """Time every config at the sweep points; return the best config per regime + the rows."""
    candidates: list[tuple[str, Config | None, TritonArm]] = [("default", None, triton)]
    candidates += [(config_name(parse_config(c)), parse_config(c), triton) for c in args.configs]
    if v1 is not None:
        candidates.append(("v1", None, v1))
    names = [name for name, _, _ in candidates]
    print("# sweep (us; best per row marked *)", flush=True)
    print(f"{'HV':>3s} {'B':>4s} {'fl%':>4s} ckpt " + "".join(f"{n:>12s}" for n in names))
    rows: list[dict[str, Any]] = []
    for hv in args.sweep_hv:
        for B in args.sweep_batch:
            for frac in args.sweep_flush:
                point = Point(triton.handle, B, args.H, hv, args.T, frac / 100, seed=B)
                for ckpt, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
                    captures: dict[str, tuple[Any, torch.Tensor]] = {}
                    for name, config, arm in candidates:
                        arm.config = dict(config or {})
                        try:
                            captures[name] = capture_arm(arm, point, dtype)
                        except Exception as exc:  # a config that does not compile: report
                            print(f"#   {name}: {type(exc).__name__}: {str(exc)[:200]}")
                        arm.config = {}
                    us = time_arms(captures, scrub, args.sweep_reps) if captures else {}
                    del captures
                    best = min(us, key=us.get) if us else ""
                    rows.append(
                        dict(HV=hv, B=B, flush_pct=frac, ckpt=ckpt, regime=regime(B, hv), us=us)
                    )
                    cells = "".join(
                        f"{us[n]:11.1f}{'*' if n == best else ' '}" if n in us else f"{'-':>12s}"
                        for n in names
                    )
                    print(f"{hv:3d} {B:4d} {frac:4d} {ckpt} {cells}", flush=True)
                del point
    chosen: dict[str, Config] = {}
    configs = {config_name(parse_config(c)): parse_config(c) for c in args.configs}
    for name, _ in REGIMES:
        for ckpt in ("fp32", "fp16"):
            mine = [r for r in rows if r["regime"] == name and r["ckpt"] == ckpt]
            # Geometric mean of time / best-at-that-point over the regime's points.
            scores: dict[str, float] = {}
            for cfg in configs:
                ratios = [r["us"][cfg] / min(r["us"].values()) for r in mine if cfg in r["us"]]
                if mine and len(ratios) == len(mine):
                    scores[cfg] = math.exp(sum(map(math.log, ratios)) / len(ratios))
            if scores:
                best = min(scores, key=scores.get)
                chosen[f"{name}/{ckpt}"] = configs[best]
                print(f"# {name}/{ckpt}: {best} (geomean {scores[best]:.3f}x of per-point best)")
    return chosen, rows


def grid(
    args: argparse.Namespace,
    handles: dict[str, Any],
    triton: TritonArm,
    chosen: dict[str, Config],
    scrub: Any,
    t_start: float,
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    print(
        f"{'HV':>3s} {'B':>4s} {'fl%':>4s} {'fl32':>7s} {'fl16':>7s}"
        + "".join(f" {name[:15]:>15s} {'x':>5s}" for name in ARMS)
        + "  tri32/fi tri16/fi tri16/ours",
        flush=True,
    )
    for hv in args.hv:
        for B in args.batch:
            for frac in args.flush:
                if time.time() - t_start > args.deadline_s:
                    print(f"# deadline: skipped HV={hv} B={B} flush={frac}", flush=True)
                    continue
                point = Point(triton.handle, B, args.H, hv, args.T, frac / 100, seed=B + hv + frac)
                floor16 = floor_us(B, args.H, hv, args.T, point.n_flush, 2)
                floor32 = floor_us(B, args.H, hv, args.T, point.n_flush, 4)
                row: dict[str, Any] = dict(
                    HV=hv, H=args.H, T=args.T, B=B, flush_pct=frac, n_flush=point.n_flush,
                    floor_us={"fp16ckpt": floor16, "fp32ckpt": floor32}, us={}, x={}, errors={},
                )  # fmt: skip
                runs = {
                    "triton_fp32ckpt": (triton, torch.float32, floor32),
                    "triton_fp16ckpt": (triton, torch.float16, floor16),
                    "flashinfer": (handles.get("flashinfer"), torch.float16, floor16),
                    "ours": (handles.get("ours"), torch.float16, floor16),
                }
                configs = {}
                captures: dict[str, tuple[Any, torch.Tensor]] = {}
                for arm, (fn, dtype, _) in runs.items():
                    if fn is None:
                        continue
                    if fn is triton:
                        ckpt = "fp32" if dtype == torch.float32 else "fp16"
                        triton.config = dict(chosen.get(f"{regime(B, hv)}/{ckpt}", {}))
                        configs[ckpt] = config_name(triton.config)
                    fn = getattr(fn, "fn", fn)
                    try:
                        captures[arm] = capture_arm(fn, point, dtype)
                    except Exception as exc:
                        row["errors"][arm] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    triton.config = {}
                for arm, us in (time_arms(captures, scrub, args.reps) if captures else {}).items():
                    row["us"][arm] = us
                    row["x"][arm] = us / runs[arm][2]
                del captures
                row["triton_config"] = configs
                del point
                results.append(row)
                line = f"{hv:3d} {B:4d} {frac:4d} {floor32:7.1f} {floor16:7.1f}"
                for arm in ARMS:
                    line += (
                        f" {row['us'].get(arm, math.nan):15.2f} {row['x'].get(arm, math.nan):5.2f}"
                    )
                for num, den in RATIOS:
                    line += f" {ratio(row, num, den):9.2f}"
                print(line, flush=True)
                for arm, err in row["errors"].items():
                    print(f"#   {arm}: {err}", flush=True)
        if args.out:
            write_grid(args, results, chosen, time.time() - t_start)
    return results


RATIOS = (
    ("triton_fp32ckpt", "flashinfer"),
    ("triton_fp16ckpt", "flashinfer"),
    ("triton_fp16ckpt", "ours"),
)


def ratio(row: dict[str, Any], num: str, den: str) -> float:
    a, b = row["us"].get(num), row["us"].get(den)
    return a / b if a and b else math.nan


def meta(args: argparse.Namespace, wall: float) -> dict[str, Any]:
    return dict(
        command="python3 " + " ".join(shlex.quote(a) for a in sys.argv),
        device=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        triton=__import__("triton").__version__,
        python=platform.python_version(),
        wall_s=round(wall, 1),
        reps=args.reps,
        p_verify=P_VERIFY,
        p_flush=P_FLUSH,
        hbm_bytes_per_s=HBM_BYTES_PER_S,
        triton_kernel=getattr(args, "triton_kernel", "patch 1 (this series)"),
        env={k: v for k, v in os.environ.items() if k.startswith("GDN_")},
    )


def write_sweep(args: argparse.Namespace, rows: list[dict[str, Any]], chosen: Any) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    m = meta(args, 0.0)
    (args.out / "sweep_triton.json").write_text(
        json.dumps(dict(meta=m, chosen=chosen, rows=rows), indent=1)
    )
    names = sorted({n for r in rows for n in r["us"]})
    md = [
        "# Triton launch-config sweep (graph replay, cold L2, us)",
        "",
        f"Command: `{m['command']}` ({m['device']}, triton {m['triton']}).",
        "",
        "Config vAkBwCsD[rE] = block_v A, block_k B, num_warps C, num_stages D, maxnreg E;"
        " default = the op's table;"
        " v1 = the session-1 kernel. Chosen per regime (rows x HV <= 256 / 4096 / more) and"
        " checkpoint dtype: " + ", ".join(f"{k}: {config_name(v)}" for k, v in chosen.items()),
        "",
        "| HV | B | flush % | ckpt | " + " | ".join(names) + " |",
        "|---" * (4 + len(names)) + "|",
    ]
    for r in rows:
        best = min(r["us"].values()) if r["us"] else None
        cells = [
            (f"**{r['us'][n]:.1f}**" if r["us"][n] == best else f"{r['us'][n]:.1f}")
            if n in r["us"]
            else "-"
            for n in names
        ]
        md.append(
            f"| {r['HV']} | {r['B']} | {r['flush_pct']} | {r['ckpt']} | " + " | ".join(cells) + " |"
        )
    (args.out / "sweep_triton.md").write_text("\n".join(md) + "\n")


def write_grid(
    args: argparse.Namespace, results: list[dict[str, Any]], chosen: Any, wall: float
) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    m = meta(args, wall)
    (args.out / "bench_triton.json").write_text(
        json.dumps(dict(meta=m, chosen_triton_configs=chosen, results=results), indent=1)
    )
    md = [
        f"# Triton ReplaySSM baseline vs fused ucache kernels, per layer-step, {m['device']}",
        "",
        f"Command: `{m['command']}` (torch {m['torch']}, triton {m['triton']}).",
        "",
        "CUDA-graph replay on a cold L2, median of the replays, in us. x = time / HBM floor of",
        "the arm's checkpoint dtype (floor32 / floor16). Ratios are taken in this one run. Triton",
        "launch config per point from the sweep (column cfg). Verify rows at P=8, flush at P=15.",
        f"Triton kernel timed: {m['triton_kernel']}.",
        "",
        "| HV | B | flush % | floor32 | floor16 | triton fp32 | x | triton fp16 | x | flashinfer"
        " | x | ours | x | tri32/fi | tri16/fi | tri16/ours | cfg fp32 / fp16 |",
        "|---" * 17 + "|",
    ]
    for r in results:
        cells = [str(r["HV"]), str(r["B"]), str(r["flush_pct"])]
        cells += [f"{r['floor_us']['fp32ckpt']:.1f}", f"{r['floor_us']['fp16ckpt']:.1f}"]
        for arm in ARMS:
            us = r["us"].get(arm)
            cells += [f"{us:.1f}" if us else "-", f"{r['x'][arm]:.2f}" if us else "-"]
        cells += [f"{ratio(r, a, b):.2f}" for a, b in RATIOS]
        cells.append(" / ".join(r["triton_config"].get(c, "-") for c in ("fp32", "fp16")))
        md.append("| " + " | ".join(cells) + " |")
    (args.out / "bench_triton.md").write_text("\n".join(md).replace("nan", "-") + "\n")
    try:
        plot(results, args.out / "bench_triton.png")
    except Exception as exc:  # matplotlib missing on the host: the JSON is enough to re-plot
        print(f"# plot skipped: {exc!r}", flush=True)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Time vs batch per backend with the floor lines; one panel per (HV, flush fraction)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hvs = sorted({r["HV"] for r in results})
    fracs = sorted({r["flush_pct"] for r in results})
    fig, axes = plt.subplots(
        len(hvs), len(fracs), figsize=(4.4 * len(fracs), 3.4 * len(hvs)), squeeze=False
    )
    styles = {
        "triton_fp32ckpt": "s-",
        "triton_fp16ckpt": "o-",
        "flashinfer": "^-",
        "ours": "v-",
    }
    for hi, hv in enumerate(hvs):
        for fi, frac in enumerate(fracs):
            ax = axes[hi][fi]
            rows = sorted(
                (r for r in results if r["HV"] == hv and r["flush_pct"] == frac),
                key=lambda r: r["B"],
            )
            if not rows:
                ax.set_visible(False)
                continue
            bs = [r["B"] for r in rows]
            ax.plot(bs, [r["floor_us"]["fp32ckpt"] for r in rows], "k:", label="floor fp32 ckpt")
            ax.plot(bs, [r["floor_us"]["fp16ckpt"] for r in rows], "k--", label="floor fp16 ckpt")
            for arm, style in styles.items():
                ys = [r["us"].get(arm, math.nan) for r in rows]
                if not all(math.isnan(y) for y in ys):
                    ax.plot(bs, ys, style, label=arm, markersize=4)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"HV={hv}, flush {frac}%", fontsize=9)
            ax.set_xlabel("batch B")
            ax.set_ylabel("us / layer-step")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hv", nargs="+", type=int, default=[32, 64, 48])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8, 32, 64, 128, 256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 20, 100], help="flush percent")
    ap.add_argument("--T", type=int, default=4)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sweep-hv", nargs="+", type=int, default=[64])
    ap.add_argument("--sweep-batch", nargs="+", type=int, default=[1, 32, 256])
    ap.add_argument("--sweep-flush", nargs="+", type=int, default=[0, 100])
    ap.add_argument("--sweep-reps", type=int, default=10)
    ap.add_argument(
        "--configs",
        nargs="*",
        default=list(DEFAULT_CONFIGS),
        help="BLOCK_V,BLOCK_K,WARPS,STAGES[,MAXNREG]",
    )
    ap.add_argument("--no-sweep", action="store_true", help="grid with the op's default table")
    ap.add_argument("--sweep-only", action="store_true", help="stop after the sweep (no grid)")
    ap.add_argument(
        "--only-v1",
        action="store_true",
        help="time only the session-1 kernel (--v1-root) in the Triton columns, e.g. after the "
        "series' kernel failed its GPU tests (a faulting kernel would poison the CUDA context)",
    )
    ap.add_argument("--v1-root", type=Path, default=None, help="tree with the session-1 op file")
    ap.add_argument("--warm-workers", type=int, default=12, help="0: compile lazily")
    ap.add_argument("--warm-timeout-s", type=float, default=70.0)
    ap.add_argument("--deadline-s", type=float, default=1e9, help="skip grid points after this")
    ap.add_argument("--out", type=Path, default=None, help="folder for the result files")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time", file=sys.stderr)
        return 2

    handles = load_backends("serving", ["triton_vllm", "flashinfer", "ours"])
    if "triton_vllm" not in handles:
        print("the Triton baseline did not load", file=sys.stderr)
        return 1
    triton = TritonArm(handles["triton_vllm"])
    v1 = None
    if args.v1_root is not None and (args.v1_root / OP_FILE).is_file():
        v1 = TritonArm(handles["triton_vllm"], ops=load_v1_ops(args.v1_root))
    t_start = time.time()
    if args.warm_workers > 0:
        try:
            warm_compile(args)
        except Exception as exc:  # e.g. the timeout: whatever is cached stays cached
            print(f"# warm compile stopped: {type(exc).__name__}: {exc}", flush=True)
    scrub = torch.ones((256 << 20) // 4, device="cuda")
    chosen: dict[str, Config] = {}
    if args.only_v1 and v1 is None:
        print("--only-v1 needs --v1-root with the session-1 op file", file=sys.stderr)
        return 1
    if not args.no_sweep and not args.only_v1:
        chosen, rows = sweep(args, triton, v1, scrub)
        print(f"# sweep wall {time.time() - t_start:.1f} s", flush=True)
        if args.out:
            write_sweep(args, rows, chosen)
        if args.sweep_only:
            return 0
    grid_arm, args.triton_kernel = triton, "patch 1 (this series)"
    if args.only_v1 or (not args.no_sweep and not chosen and v1 is not None):
        # The series' kernel failed at every sweep point: time the session-1 kernel instead.
        assert v1 is not None
        grid_arm, args.triton_kernel = v1, "v1 (session-1 kernel; the series' kernel failed)"
        print(f"# grid Triton columns: {args.triton_kernel}", flush=True)
    results = grid(args, handles, grid_arm, chosen, scrub, t_start)
    wall = time.time() - t_start
    if args.out:
        write_grid(args, results, chosen, wall)
    print(f"# wall {wall:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
