"""Fused GDN ucache verify+flush kernels: ours vs flashinfer vs Triton vs the HBM floor.

All backends run in ONE process on the same inputs, each call captured in a CUDA graph and replayed
on a cold L2 (a read-only pass over a buffer several times the L2 size between replays; the pass is
outside the timed events). Per point: median over `--reps` replays of the kernel alone.

Grid (issue #6): T=4, H=16, HV in {32, 48, 64}, B in {1, 8, 32, 128, 256}, flush fraction 0 / 20 /
100 %, dtype arms serving (bf16 IO, fp16 state+rings) and bf16. Verify rows sit at P=8 and flush
rows at P=15 (kernel-spec 3.2's averages); flush rows are scattered at random.

Floor = bytes that must move (kernel-spec 3.2: ACT + S + RING_A + RING_R(P) per row, + S on flush
rows) / 4.3 TB/s. Output: a table on stdout, and JSON + markdown + PNG under --out.

    python bench/bench_ucache.py --out results/kernel            # full grid
    python bench/bench_ucache.py --hv 32 --batch 1 256 --quick   # subset

Backends: ours = kernels/gdn_ucache_flush.py; flashinfer = FI_DIR / GDN_FLASHINFER_UCACHE_MODULE
(see kernels/reference/backends.py); triton_vllm = GDN_TRITON_BASELINE_MODULE if set.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HBM_BYTES_PER_S = 4.3e12
H_DEFAULT, K, V, T_DEFAULT = 16, 128, 128, 4
P_VERIFY, P_FLUSH = 8, 15


def floor_bytes(B: int, H: int, HV: int, T: int, n_flush: int, p_v: int, p_f: int) -> int:
    """kernel-spec 3.2 byte model for one call (2-byte activations, 2-byte state and rings)."""
    act = T * (512 * H + 516 * HV)
    state = HV * 16384 * 2
    ring_a = T * (256 * (HV + H) + 4 * HV)

    def ring_r(p: int) -> int:
        return p * 256 * (HV + H) + 64 * HV

    per_verify = act + state + ring_a + ring_r(p_v)
    per_flush = act + state + ring_a + ring_r(p_f) + state
    return (B - n_flush) * per_verify + n_flush * per_flush


def file_backend(name: str, path: Path) -> Any:
    """A kernel file loaded by path under its own backend name (e.g. a kept older version)."""
    from kernels.reference.backends import REPO_ROOT, OursBackend

    class _FileBackend(OursBackend):
        def module_path(self) -> tuple[Path | None, str, Path | None]:
            if not path.is_file():
                return None, f"{path} does not exist", None
            return path, "", REPO_ROOT

    backend = _FileBackend()
    backend.name = name
    return backend


def parse_extra(items: list[str]) -> dict[str, Path]:
    """NAME=PATH pairs of --extra (kernel files benchmarked beside the registered backends)."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--extra expects NAME=PATH, got {item!r}")
        out[name] = Path(path)
    return out


def load_backends(
    arm: str, names: list[str], extra: dict[str, Path] | None = None
) -> dict[str, Any]:
    from kernels.reference.backends import get_backend

    out: dict[str, Any] = {}
    for name in [*names, *(extra or {})]:
        backend = file_backend(name, extra[name]) if extra and name in extra else get_backend(name)
        ok, why = backend.available()
        if not ok:
            print(f"# backend {name}: unavailable ({why})", flush=True)
            continue
        try:
            out[name] = backend.load(arm, "compact")
        except Exception as exc:  # report and keep the other backends
            print(f"# backend {name} ({arm}): failed to load: {exc!r}", flush=True)
    return out


class Point:
    """Inputs of one grid point, shared by all backends (fresh random data, non-zero rings)."""

    def __init__(self, handle: Any, B: int, H: int, HV: int, T: int, flush_frac: float, seed: int):
        arm = handle.arm
        dev = "cuda"
        gen = torch.Generator(device=dev).manual_seed(seed)

        def randn(
            *shape: int, scale: float = 1.0, dtype: torch.dtype = torch.float32
        ) -> torch.Tensor:
            return (torch.randn(*shape, device=dev, generator=gen) * scale).to(dtype)

        pool = B + 8
        self.n_flush = int(round(flush_frac * B))
        hist = torch.full((B,), P_VERIFY, dtype=torch.int32)
        hist[torch.randperm(B)[: self.n_flush]] = P_FLUSH
        self.args = dict(
            q=randn(B, T, H, K, dtype=arm.io),
            k=randn(B, T, H, K, dtype=arm.io),
            v=randn(B, T, HV, V, scale=0.5, dtype=arm.io),
            b=randn(B, T, HV, dtype=arm.io),
            initial_state_source=randn(pool, HV, V, K, scale=0.1, dtype=arm.state),
            initial_state_indices=torch.randperm(pool, device=dev)[:B].to(torch.int32),
            k_cache=torch.nn.functional.normalize(randn(pool, H, 32, K), dim=-1).to(arm.ring),
            u_cache=randn(pool, HV, 32, V, scale=0.3, dtype=arm.ring),
            g_cache=-torch.rand(pool, HV, 32, device=dev, generator=gen).cumsum(-1) * 0.05,
            hist_len=hist.to(dev),
            cache_base=torch.randint(0, 32, (B,), device=dev, dtype=torch.int32, generator=gen),
            output=torch.empty(B, T, HV, V, device=dev, dtype=arm.io),
            scale=K**-0.5,
            restart_hist_on_flush=False,
        )
        self.A_log = -3 + torch.rand(HV, device=dev, generator=gen) * 0.3
        self.a = randn(B, T, HV, scale=0.5, dtype=arm.io)
        self.dt_bias = randn(HV, scale=0.5)

    def call(self, fn: Any) -> torch.Tensor:
        return fn(self.A_log, self.a, self.dt_bias, **self.args)


class _NoArgs:
    """A `Point` stand-in for a kernel without inputs."""

    def call(self, fn: Any) -> Any:
        return fn()


def launch_floor_us(scrub: torch.Tensor | None, reps: int) -> float:
    """The same timing of a graph holding one 1-element kernel: what any single-kernel call costs
    in this measurement before it moves a byte (the B=1 target is read against it)."""
    x = torch.zeros(1, device="cuda")
    return time_graph(lambda: x.add_(1.0), _NoArgs(), scrub, reps)  # type: ignore[arg-type]


def read_rate_bytes_per_s(reps: int) -> float:
    """What one plain streaming read (torch's sum over 1 GiB, 20x the L2) moves per second on
    this card, timed like the kernels: the floors use kernel-spec's 4.3 TB/s (the H200), and this
    rate reads a run on another card against its own memory."""
    buf = torch.ones((1 << 30) // 4, device="cuda")
    us = time_graph(lambda: buf.sum(), _NoArgs(), None, reps)  # type: ignore[arg-type]
    return (1 << 30) / (us * 1e-6)


# Warm L2: calls per captured graph. One call per replay timed 6-13 us at B=1 for both kernels
# with 2x jumps between neighbouring points (session 9, results/kernel/k8/warm-b1-k8.log): the
# host's graph launch still landed between the events now and then. Back-to-back calls inside one
# graph are what a serving step sees (the kernel between other kernels of a captured graph) and
# leave the host out; the probe's 5.3 us for flashinfer (h200-probe.md) was also a mean over
# back-to-back replays.
WARM_CALLS = 16


def calls_per_replay(scrub: torch.Tensor | None) -> int:
    """Calls captured per graph: one on a cold L2 (a scrub before every replay), WARM_CALLS
    back-to-back on a warm one (scrub None)."""
    return 1 if scrub is not None else WARM_CALLS


def capture_graph(fn: Any, point: Point, calls: int) -> Any:
    """`calls` back-to-back calls of `fn` on `point` captured in one CUDA graph (after two eager
    calls that compile and a side-stream call, as graph capture asks)."""
    for _ in range(2):
        point.call(fn)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        point.call(fn)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        for _ in range(calls):
            point.call(fn)
    return graph


# Untimed rounds before the timed ones at each point: the first replays after a point's inputs
# were allocated ran 8-16 % slow at the largest points (HV 48 / 64, B = 256; results/kernel/
# s22-order): whichever backend was timed first lost there, on the H100 and the H200.
SETTLE_ROUNDS = 5


def time_graphs(
    graphs: dict[str, Any], scrub: torch.Tensor | None, reps: int, calls: int
) -> dict[str, float]:
    """Median microseconds per call of each captured graph, their replays interleaved: round i
    replays every graph once, in an order rotated by i, after SETTLE_ROUNDS untimed rounds, so a
    drift in the card's state during the point (the slow first replays above) falls on every
    backend alike instead of on the one timed first. On a cold L2 a read-only scrub of > 2x L2
    precedes every replay; warm (scrub None), a ~20 us sleep keeps the GPU busy while the host
    enqueues the replay (otherwise the host's graph-launch latency lands between the events:
    session 6's first warm run timed 10-16 us at B=1, more than cold L2)."""
    names = list(graphs)
    sink = torch.zeros((), device="cuda")
    marks = {n: [] for n in names}
    for i in range(-SETTLE_ROUNDS, reps):
        shift = i % len(names) if names else 0
        for n in names[shift:] + names[:shift]:
            if scrub is not None:
                sink += scrub.sum()  # read-only pass: evicts the previous replay's lines
            else:
                torch.cuda._sleep(40_000)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[n].replay()
            end.record()
            if i >= 0:
                marks[n].append((start, end))
    torch.cuda.synchronize()
    out = {}
    for n, pairs in marks.items():
        times = sorted(s.elapsed_time(e) * 1e3 / calls for s, e in pairs)
        out[n] = times[len(times) // 2]
    return out


def time_graph(fn: Any, point: Point, scrub: torch.Tensor | None, reps: int) -> float:
    """Median microseconds per call of `fn` in graph replay: on a cold L2, one call per replay
    after a read-only scrub of > 2x L2; warm (scrub None), WARM_CALLS back-to-back calls captured
    in one graph, the replay's time divided by WARM_CALLS. One backend alone: a comparison times
    its backends' graphs together (time_graphs)."""
    calls = calls_per_replay(scrub)
    return time_graphs({"fn": capture_graph(fn, point, calls)}, scrub, reps, calls)["fn"]


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = sorted({r["arm"] for r in results})
    hvs = sorted({r["HV"] for r in results})
    fracs = sorted({r["flush_pct"] for r in results})
    fig, axes = plt.subplots(
        len(arms) * len(hvs),
        len(fracs),
        figsize=(4.2 * len(fracs), 3.2 * len(arms) * len(hvs)),
        squeeze=False,
    )
    for ai, arm in enumerate(arms):
        for hi, hv in enumerate(hvs):
            for fi, frac in enumerate(fracs):
                ax = axes[ai * len(hvs) + hi][fi]
                rows = sorted(
                    (
                        r
                        for r in results
                        if r["arm"] == arm and r["HV"] == hv and r["flush_pct"] == frac
                    ),
                    key=lambda r: r["B"],
                )
                if not rows:
                    continue
                bs = [r["B"] for r in rows]
                ax.plot(bs, [r["floor_us"] for r in rows], "k--", label="HBM floor")
                for name in rows[0]["us"]:
                    ax.plot(bs, [r["us"].get(name, math.nan) for r in rows], "o-", label=name)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{arm} HV={hv} flush {frac}%", fontsize=9)
                ax.set_xlabel("batch B")
                ax.set_ylabel("us / call")
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_outputs(args: argparse.Namespace, results: list[dict[str, Any]], wall: float) -> None:
    """JSON + markdown + PNG under args.out (called after every HV block: a timeout keeps data)."""
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    meta = dict(
        command=cmd,
        device=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        python=platform.python_version(),
        wall_s=wall,
        reps=args.reps,
        p_verify=P_VERIFY,
        p_flush=P_FLUSH,
        hbm_bytes_per_s=HBM_BYTES_PER_S,
        launch_floor_us=getattr(args, "launch_floor_us", None),
        read_rate_bytes_per_s=getattr(args, "read_rate", None),
        env={k: v for k, v in os.environ.items() if k.startswith(("GDN_", "CUTE_DSL_ARCH"))},
    )
    (args.out / f"{args.tag}.json").write_text(
        json.dumps(dict(meta=meta, results=results), indent=1)
    )
    md = [
        f"# {args.tag}: fused ucache kernel, graph replay, {'warm' if args.warm else 'cold'} "
        f"L2 ({meta['device']})",
        "",
        f"Command: `{cmd}`",
        "",
        "Times in us (median of replays); x = time / HBM floor; ours/fi = ours / flashinfer.",
        f"Launch floor (a graph of one 1-element kernel, same timing): "
        f"{meta['launch_floor_us'] or float('nan'):.2f} us.",
        "",
    ]
    names = sorted({n for r in results for n in r["us"]})
    md.append(
        "| arm | HV | B | flush % | floor | "
        + " | ".join(f"{n} | x" for n in names)
        + " | ours/fi |"
    )
    md.append("|---" * (5 + 2 * len(names) + 1) + "|")
    for r in results:
        cells = [
            r["arm"],
            str(r["HV"]),
            str(r["B"]),
            str(r["flush_pct"]),
            f"{r['floor_us']:.1f}",
        ]
        for n in names:
            us = r["us"].get(n)
            cells += [f"{us:.2f}" if us else "-", f"{us / r['floor_us']:.2f}" if us else "-"]
        fi, ours = r["us"].get("flashinfer"), r["us"].get("ours")
        cells.append(f"{ours / fi:.3f}" if fi and ours else "-")
        md.append("| " + " | ".join(cells) + " |")
    (args.out / f"{args.tag}.md").write_text("\n".join(md) + "\n")
    try:
        plot(results, args.out / f"{args.tag}.png")
    except Exception as exc:
        print(f"# plot failed: {exc!r}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--arms", nargs="+", default=["serving", "bf16"])
    ap.add_argument("--hv", nargs="+", type=int, default=[32, 48, 64])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8, 32, 128, 256])
    ap.add_argument("--flush", nargs="+", type=int, default=[0, 20, 100], help="flush percent")
    ap.add_argument("--T", type=int, default=T_DEFAULT)
    ap.add_argument("--H", type=int, default=H_DEFAULT)
    ap.add_argument("--backends", nargs="+", default=["ours", "flashinfer", "triton_vllm"])
    ap.add_argument(
        "--extra",
        nargs="*",
        default=[],
        metavar="NAME=PATH",
        help="more kernel files to time, e.g. ours_v3=kernels/gdn_ucache_flush_v3.py",
    )
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument(
        "--out", type=Path, default=None, help="folder for bench.json / bench.md / bench.png"
    )
    ap.add_argument("--tag", default="bench")
    ap.add_argument(
        "--warm",
        action="store_true",
        help="warm L2: no scrub; WARM_CALLS back-to-back calls per graph replay, time per call",
    )
    args = ap.parse_args()

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time", file=sys.stderr)
        return 2
    # 256 MiB read between replays: > 5x the H200's 50 MB L2 (read-only: no dirty write-backs)
    scrub = None if args.warm else torch.ones((256 << 20) // 4, device="cuda")
    results: list[dict[str, Any]] = []
    t_start = time.time()
    args.launch_floor_us = launch_floor_us(scrub, args.reps)
    print(f"# launch floor (one 1-element kernel, same timing): {args.launch_floor_us:.2f} us")
    args.read_rate = read_rate_bytes_per_s(args.reps)
    print(f"# streaming read (sum over 1 GiB): {args.read_rate / 1e12:.2f} TB/s on this card")
    hdr = f"{'arm':8s} {'HV':>3s} {'B':>4s} {'fl%':>4s} {'floor':>7s}"
    for arm in args.arms:
        handles = load_backends(arm, args.backends, parse_extra(args.extra))
        if not handles:
            continue
        names = list(handles)
        print(hdr + "".join(f" {n[:10]:>10s} {'x':>5s}" for n in names) + "  ours/fi", flush=True)
        for hv in args.hv:
            for B in args.batch:
                for frac in args.flush:
                    point = Point(
                        next(iter(handles.values())),
                        B,
                        args.H,
                        hv,
                        args.T,
                        frac / 100,
                        seed=B * 1000 + hv + frac,
                    )
                    fb = floor_bytes(B, args.H, hv, args.T, point.n_flush, P_VERIFY, P_FLUSH)
                    floor_us = fb / HBM_BYTES_PER_S * 1e6
                    row: dict[str, Any] = dict(
                        arm=arm,
                        HV=hv,
                        H=args.H,
                        T=args.T,
                        B=B,
                        flush_pct=frac,
                        n_flush=point.n_flush,
                        floor_bytes=fb,
                        floor_us=floor_us,
                        us={},
                        errors={},
                    )
                    # every backend's graph first, then their replays interleaved (time_graphs)
                    calls = calls_per_replay(scrub)
                    graphs = {}
                    for name, h in handles.items():
                        if args.T not in h.supported_t:
                            continue
                        try:
                            graphs[name] = capture_graph(h.fn, point, calls)
                        except Exception as exc:
                            row["errors"][name] = repr(exc)[:300]
                    if graphs:
                        row["us"] = time_graphs(graphs, scrub, args.reps, calls)
                    del graphs
                    results.append(row)
                    line = f"{arm:8s} {hv:3d} {B:4d} {frac:4d} {floor_us:7.1f}"
                    for n in names:
                        us = row["us"].get(n, math.nan)
                        line += f" {us:10.2f} {us / floor_us:5.2f}"
                    if "ours" in row["us"] and "flashinfer" in row["us"]:
                        line += f"  {row['us']['ours'] / row['us']['flashinfer']:.3f}"
                    print(line, flush=True)
            if args.out:
                write_outputs(args, results, time.time() - t_start)
    wall = time.time() - t_start
    if args.out:
        write_outputs(args, results, wall)
    print(f"# wall {wall:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
