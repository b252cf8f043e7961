"""Why does ucache with flashinfer's kernel run at ~0.55x native spec end to end (#10)?

Session 3 measured ucache_flashinfer at 0.53-0.56x native at every batch size (geom-35b-agree,
FULL decode graphs) while ucache_ours, through the same adapter and metadata, ran at 0.90-1.03x
(results/e2e/README.md, "Why flashinfer's kernel is 0.55x end to end"). This probe runs the same
speed engine (tools/e2e/plan.speed_jobs: same engine arguments, same capture sizes) in-process,
instrumented, for each backend named:

- every call of the kernel module's `gated_delta_rule_mtp_ucache_flush`: eager or inside a CUDA
  graph capture, launch rows (the adapter's pad_to), host seconds, compiles (growth of the
  module's `_CACHE`), GPU time of eager calls (CUDA events);
- the CUDA-graph mode chosen per step (model runner V2 `CudaGraphManager.dispatch`, V1
  `CudagraphDispatcher.dispatch`) and `torch.cuda.CUDAGraph.replay` calls;
- per-step GPU time of the target forward and the drafter (model runner V2 `step_timing`);
- Python GC collections and their time;
- per phase: wall seconds, the process's CPU seconds and the busiest threads' CPU seconds
  (/proc/self/task; session 7's profile showed every host op ~1.5x slower in the flashinfer
  engine with the same call counts, as if another thread competed for the GIL or the cores);
- one torch.profiler window (top kernels by GPU time and ops by CPU time).

A step replayed from a FULL graph never runs the Python wrapper, so "eager GDN calls" in the
timed decode must be ~0 for both kernels; if they are not, the step ran eagerly and the wrapper's
host cost is on the critical path.

    # GPU host, after `source /tmp/gdn-host/env.sh` and `bench/e2e.py models ... geom-35b`
    python3 bench/e2e_probe.py run --models-dir /tmp/e2e-models --out $OUT/probe --deadline-s 300
    # CPU: re-render a fetched result
    python3 bench/e2e_probe.py report probe.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.e2e import plan  # noqa: E402

ADAPTER = "vllm.model_executor.layers.mamba.ops.gdn_ucache_spec"
MAX_EVENTS = 4096  # eager calls timed with CUDA events per phase


# ----------------------------------------------------------------------------- instrumentation


class PhaseStats:
    """What happened while one phase (init, warm-B, timed-B, profile) ran."""

    def __init__(self) -> None:
        self.calls_eager = 0
        self.calls_capturing = 0
        self.rows: Counter[int] = Counter()
        self.host_s: list[float] = []  # eager calls without a compile
        self.compiles: list[tuple[int, float]] = []  # (rows, seconds of the compiling call)
        self.events: list = []  # (start, end) CUDA events of eager calls
        self.dispatch: Counter[str] = Counter()
        self.replays = 0
        self.gc_count: Counter[int] = Counter()
        self.gc_s = 0.0
        self.cpu: dict = {}  # thread_cpu_delta() of the phase, set when the phase ends

    def summary(self) -> dict:
        gpu_us = []
        for start, end in self.events:
            try:
                gpu_us.append(start.elapsed_time(end) * 1e3)
            except Exception:  # noqa: BLE001 - an event that never completed
                pass
        return {
            "kernel_calls_eager": self.calls_eager,
            "kernel_calls_capturing": self.calls_capturing,
            "rows": dict(sorted(self.rows.items())),
            "host_us_median": _median_us(self.host_s),
            "host_us_total": round(sum(self.host_s) * 1e6, 1),
            "gpu_us_median": round(statistics.median(gpu_us), 1) if gpu_us else None,
            "compiles": len(self.compiles),
            "compile_s": round(sum(s for _, s in self.compiles), 2),
            "compile_rows": sorted({r for r, _ in self.compiles}),
            "dispatch": dict(self.dispatch),
            "graph_replays": self.replays,
            "gc_collections": {str(k): v for k, v in sorted(self.gc_count.items())},
            "gc_ms": round(self.gc_s * 1e3, 1),
            **self.cpu,
        }


def thread_cpu_snapshot() -> tuple[float, float, dict[int, tuple[str, float]]]:
    """(wall, process CPU seconds, {tid: (thread name, CPU seconds)}) of this process, from
    /proc/self/task/*/stat (utime + stime); threads of native libraries included. A thread that
    ended within the phase counts in the process's CPU seconds only."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    # Python's thread names (the kernel's comm is "python" for them before 3.14)
    py_names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    threads: dict[int, tuple[str, float]] = {}
    for task in Path("/proc/self/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended between listing and reading
            continue
        # "tid (comm) state ..." with comm possibly containing spaces/parentheses
        name = py_names.get(int(task.name)) or stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        threads[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    times = os.times()
    return time.perf_counter(), times.user + times.system, threads


def thread_cpu_delta(before: tuple, after: tuple, top: int = 6) -> dict:
    """Wall and CPU seconds between two snapshots; the `top` threads by CPU time (a thread
    that started in between counts from zero)."""
    wall = after[0] - before[0]
    per_thread = []
    for tid, (name, cpu) in after[2].items():
        spent = cpu - before[2].get(tid, (name, 0.0))[1]
        if spent > 0:
            per_thread.append((round(spent, 3), name, tid))
    per_thread.sort(reverse=True)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(after[1] - before[1], 3),
        "cpu_per_wall": round((after[1] - before[1]) / wall, 2) if wall > 0 else None,
        "threads_busy": [f"{name}[{tid}] {spent} s" for spent, name, tid in per_thread[:top]],
    }


def _median_us(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1e6, 1) if values else None


class Probe:
    def __init__(self) -> None:
        self.phases: dict[str, PhaseStats] = {}
        self.installed: list[str] = []
        self._gc_start = 0.0
        self._phase = "import"
        self._cpu_at_start = thread_cpu_snapshot()

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        """Switching phase closes the CPU census of the phase that ends."""
        self.end_phase()
        self._phase = name

    def end_phase(self) -> None:
        now = thread_cpu_snapshot()
        self.stats().cpu = thread_cpu_delta(self._cpu_at_start, now)
        self._cpu_at_start = now

    def stats(self) -> PhaseStats:
        return self.phases.setdefault(self.phase, PhaseStats())

    # -- the kernel module's entry point
    def wrap_kernel_module(self, module) -> None:
        import torch

        name = "gated_delta_rule_mtp_ucache_flush"
        if getattr(module, "_e2e_probe_wrapped", False):
            return
        fn = getattr(module, name)
        probe = self
        cuda = torch.cuda.is_available()

        def wrapped(*args, **kwargs):
            st = probe.stats()
            capturing = cuda and torch.cuda.is_current_stream_capturing()
            q = kwargs.get("q")
            rows = int(q.shape[0]) if q is not None else -1
            cache = getattr(module, "_CACHE", None)
            before = len(cache) if isinstance(cache, dict) else None
            timed = cuda and not capturing and len(st.events) < MAX_EVENTS
            if timed:
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            host = time.perf_counter() - t0
            if timed:
                end.record()
                st.events.append((start, end))
            compiled = before is not None and len(module._CACHE) > before
            st.rows[rows] += 1
            if capturing:
                st.calls_capturing += 1
            else:
                st.calls_eager += 1
            if compiled:
                st.compiles.append((rows, host))
            elif not capturing:
                st.host_s.append(host)
            return out

        setattr(module, name, wrapped)
        module._e2e_probe_wrapped = True

    def install(self) -> None:
        import importlib

        import torch

        probe = self
        adapter = importlib.import_module(ADAPTER)
        load = adapter.load_ucache_kernel_module

        def load_wrapped(*args, **kwargs):
            module = load(*args, **kwargs)
            probe.wrap_kernel_module(module)
            return module

        adapter.load_ucache_kernel_module = load_wrapped
        self.installed.append("kernel wrapper")

        replay = torch.cuda.CUDAGraph.replay

        def replay_counted(graph, *args, **kwargs):
            probe.stats().replays += 1
            return replay(graph, *args, **kwargs)

        torch.cuda.CUDAGraph.replay = replay_counted
        self.installed.append("CUDAGraph.replay")

        for mod_name, cls_name, v2 in (
            ("vllm.v1.worker.gpu.cudagraph_utils", "CudaGraphManager", True),
            ("vllm.v1.cudagraph_dispatcher", "CudagraphDispatcher", False),
        ):
            try:
                cls = getattr(importlib.import_module(mod_name), cls_name)
            except Exception as exc:  # noqa: BLE001 - the other runner's module may not import
                self.installed.append(f"{cls_name}: not patched ({type(exc).__name__})")
                continue
            self._wrap_dispatch(cls, v2)
            self.installed.append(f"{cls_name}.dispatch")

        def on_gc(phase: str, info: dict) -> None:
            if phase == "start":
                probe._gc_start = time.perf_counter()
            else:
                st = probe.stats()
                st.gc_count[info.get("generation", -1)] += 1
                st.gc_s += time.perf_counter() - probe._gc_start

        gc.callbacks.append(on_gc)
        self.installed.append("gc.callbacks")

    def _wrap_dispatch(self, cls, v2: bool) -> None:
        dispatch = cls.dispatch
        probe = self

        def dispatch_counted(mgr, *args, **kwargs):
            out = dispatch(mgr, *args, **kwargs)
            mode, tokens = (out.cg_mode, out.num_tokens) if v2 else (out[0], out[1].num_tokens)
            key = f"{type(mgr).__name__}:{getattr(mode, 'name', mode)}:{tokens}"
            probe.stats().dispatch[key] += 1
            return out

        cls.dispatch = dispatch_counted


# ----------------------------------------------------------------------------- worker


def _runner(llm):
    try:
        worker = llm.collective_rpc(lambda w: getattr(w, "worker", w))[0]
        return getattr(worker, "model_runner", None)
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def _step_summary(samples: list) -> dict:
    if not samples:
        return {"steps_timed": 0}
    fwd = [s.forward_ms for s in samples]
    drf = [s.drafter_ms for s in samples]
    return {
        "steps_timed": len(samples),
        "steps_full_graph": sum(1 for s in samples if s.full_cudagraph),
        "forward_ms_median": round(statistics.median(fwd), 3),
        "drafter_ms_median": round(statistics.median(drf), 3),
        "forward_ms_total": round(sum(fwd), 1),
        "drafter_ms_total": round(sum(drf), 1),
        "forward_ms_median_eager": (
            round(statistics.median([s.forward_ms for s in samples if not s.full_cudagraph]), 3)
            if any(not s.full_cudagraph for s in samples)
            else None
        ),
    }


def steps_from_dispatch(dispatch: Counter[str]) -> dict:
    """Target-model steps and FULL-graph steps of a phase from its CudaGraphManager.dispatch
    counts (model runner V2 keys "ModelCudaGraphManager:MODE:TOKENS"); the drafter's
    dispatches are not steps of their own."""
    model = {k: v for k, v in dispatch.items() if k.startswith("ModelCudaGraphManager:")}
    full = sum(v for k, v in model.items() if k.split(":")[1] == "FULL")
    return {"steps_timed": sum(model.values()), "steps_full_graph": full}


def _profile_tables(prof, rows: int = 25) -> dict:
    tables = {}
    averages = prof.key_averages()
    for label, keys in (
        ("gpu", ("device_time_total", "cuda_time_total")),
        ("cpu", ("self_cpu_time_total",)),
    ):
        for key in keys:
            try:
                tables[label] = averages.table(
                    sort_by=key, row_limit=rows, max_name_column_width=70
                )
                break
            except Exception as exc:  # noqa: BLE001 - older/newer key names
                tables[label] = f"({key}: {exc})"
    return tables


def run_worker(job: dict, models_dir: Path, result_path: Path, opts: dict) -> int:
    result: dict = {"job": job, "status": "starting", "opts": opts}
    write = lambda: result_path.write_text(json.dumps(result, default=str) + "\n")  # noqa: E731
    write()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    probe = Probe()
    start = time.time()
    try:
        import torch

        from vllm import LLM, SamplingParams

        probe.install()
        result["installed"] = probe.installed
        result["env"] = {k: os.environ.get(k) for k in ("VLLM_GDN_UCACHE_MODULE",)}
        cfg = json.loads((models_dir / job["model"] / "config.json").read_text())
        probe.phase = "init"
        llm = LLM(
            model=str(models_dir / job["model"]),
            skip_tokenizer_init=True,
            seed=0,
            disable_log_stats=False,
            **job["engine"],
        )
        result["init_s"] = round(time.time() - start, 1)
        vc = llm.llm_engine.vllm_config
        result["config"] = {
            "use_v2_model_runner": getattr(vc, "use_v2_model_runner", None),
            "async_scheduling": vc.scheduler_config.async_scheduling,
            "cudagraph_mode": str(vc.compilation_config.cudagraph_mode),
            "capture_sizes": vc.compilation_config.cudagraph_capture_sizes,
            "max_num_seqs": vc.scheduler_config.max_num_seqs,
            "max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens,
        }
        result["status"] = "running"
        write()
        runner = _runner(llm)
        timing = getattr(runner, "step_timing", None)
        result["step_timing"] = timing is not None
        prompts = plan.make_prompts("speed", max(job["batches"]), cfg["vocab_size"])
        inputs = [{"prompt_token_ids": p} for p in prompts]

        def params(n: int):
            return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, detokenize=False)

        points = []
        for batch in job["batches"]:
            batch_inputs = inputs[:batch]
            probe.phase = f"warm-{batch}"
            llm.generate(batch_inputs, params(8), use_tqdm=False)
            probe.phase = f"prefill-{batch}"
            t0 = time.perf_counter()
            llm.generate(batch_inputs, params(1), use_tqdm=False)
            t_prefill = time.perf_counter() - t0
            probe.phase = f"timed-{batch}"
            samples: list = []
            t0 = time.perf_counter()
            if timing is not None:
                with timing.collect() as samples:
                    llm.generate(batch_inputs, params(job["max_tokens"]), use_tqdm=False)
            else:
                llm.generate(batch_inputs, params(job["max_tokens"]), use_tqdm=False)
            t_full = time.perf_counter() - t0
            probe.phase = f"after-{batch}"  # closes timed-B's CPU census
            steps = _step_summary(samples)
            if not steps.get("steps_timed"):  # step_timing collected nothing (session 7)
                steps = steps_from_dispatch(probe.phases[f"timed-{batch}"].dispatch)
            n_steps = steps.get("steps_timed") or 0
            points.append(
                {
                    "batch": batch,
                    "t_full_s": round(t_full, 4),
                    "t_prefill_s": round(t_prefill, 4),
                    "decode_tok_s": round(
                        batch * (job["max_tokens"] - 1) / max(t_full - t_prefill, 1e-9), 1
                    ),
                    "wall_ms_per_step": round(t_full * 1e3 / n_steps, 3) if n_steps else None,
                    **steps,
                }
            )
            result["points"] = points
            result["phases"] = {k: v.summary() for k, v in probe.phases.items()}
            write()
        if opts.get("profile_batch"):
            try:  # a profiler failure leaves the measurements above standing
                from torch.profiler import ProfilerActivity, profile

                batch = opts["profile_batch"]
                probe.phase = f"profile-{batch}"
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    llm.generate(inputs[:batch], params(opts["profile_tokens"]), use_tqdm=False)
                torch.cuda.synchronize()
                result["profile"] = _profile_tables(prof)
                if opts.get("trace"):
                    trace = Path(opts["trace"])
                    prof.export_chrome_trace(str(trace))
                    result["trace"] = trace.name
            except Exception as exc:  # noqa: BLE001
                result["profile"] = {"error": f"{type(exc).__name__}: {exc}"[-1000:]}
        probe.end_phase()
        result["phases"] = {k: v.summary() for k, v in probe.phases.items()}
        result["status"] = "ok"
    except BaseException as exc:  # noqa: BLE001 - every failure is a result
        result["status"] = "error"
        result["error"] = f"{type(exc).__name__}: {exc}"[-3000:]
        result["traceback"] = "".join(traceback.format_exception(exc)[-6:])[-3000:]
        result["phases"] = {k: v.summary() for k, v in probe.phases.items()}
    result["seconds"] = round(time.time() - start, 1)
    write()
    return 0


# ----------------------------------------------------------------------------- parent


def probe_jobs(backends: list[str], model: str, batches: list[int], max_tokens: int) -> list:
    """The speed suite's own engine per backend (same arguments as its session-3 rows)."""
    return [plan.speed_jobs([b], [model], 1, tuple(batches), max_tokens)[0] for b in backends]


def run(args: argparse.Namespace) -> int:
    from bench import e2e

    start = time.time()
    deadline = start + args.deadline_s
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="e2e-probe-"))
    results = []
    for job in probe_jobs(args.backends, args.model, args.batches, args.max_tokens):
        left = deadline - time.time()
        stem = job.backend
        if left < e2e.MIN_JOB_S:
            results.append({"job": job.to_dict(), "status": "skipped (deadline)"})
            continue
        job_path, result_path = work / f"{stem}.job.json", work / f"{stem}.result.json"
        job_path.write_text(json.dumps(job.to_dict()))
        opts = {
            "profile_batch": args.profile_batch,
            "profile_tokens": args.profile_tokens,
            "trace": str(args.out / f"trace-{stem}.json") if args.trace else None,
        }
        cmd = [sys.executable, str(Path(__file__).resolve()), "worker", str(job_path)]
        cmd += [str(result_path), "--models-dir", str(args.models_dir), "--opts", json.dumps(opts)]
        log_path = work / f"{stem}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=e2e.job_env(job),
                start_new_session=True,
            )
            try:
                proc.wait(timeout=min(job.timeout_s, left - 5))
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                timed_out = True
        try:
            res = json.loads(result_path.read_text())
        except (OSError, json.JSONDecodeError):
            res = {"job": job.to_dict(), "status": "crashed"}
        if timed_out:
            res["status"] = f"timeout (reached: {res.get('status')})"
        if res.get("status") != "ok":
            res["log_tail"] = log_path.read_text(errors="replace")[-3000:]
        results.append(res)
        print(f"[{time.time() - start:5.0f}s] {job.backend}: {res['status']}", flush=True)
        write(results, args.out, args.name)
    write(results, args.out, args.name)
    print((args.out / f"{args.name}.md").read_text(), flush=True)
    return 0


def write(results: list[dict], out: Path, name: str) -> None:
    (out / f"{name}.json").write_text(json.dumps({"results": results}, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown(results))


def _cell(x) -> str:
    return "-" if x is None else str(x)


def markdown(results: list[dict]) -> str:
    """Per backend: init compiles, then per batch the timed decode's numbers."""
    lines = ["# ucache kernel probe (#10)", ""]
    for res in results:
        job = res.get("job", {})
        lines += [f"## {job.get('backend')} on {job.get('model')}: {res.get('status')}", ""]
        if res.get("error"):
            lines += ["    " + res["error"][-600:].replace("\n", "\n    "), ""]
        if res.get("config"):
            lines += [f"config: `{json.dumps(res['config'])}`, init {res.get('init_s')} s", ""]
        phases = res.get("phases", {})
        init = phases.get("init", {})
        if init:
            lines += [
                f"init: {init.get('compiles')} compiles ({init.get('compile_s')} s, rows "
                f"{init.get('compile_rows')}), kernel calls eager {init.get('kernel_calls_eager')}"
                f" / capturing {init.get('kernel_calls_capturing')}",
                "",
            ]
        points = res.get("points") or []
        if points:
            lines += [
                "| B | decode tok/s | steps (FULL graph) | wall ms/step | fwd GPU ms/step | "
                "draft GPU ms/step | eager kernel calls | host us/call | eager GPU us/call | "
                "compiles | graph replays | gc (ms) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for p in points:
                ph = phases.get(f"timed-{p['batch']}", {})
                lines.append(
                    f"| {p['batch']} | {p['decode_tok_s']} | {_cell(p.get('steps_timed'))} "
                    f"({_cell(p.get('steps_full_graph'))}) | {_cell(p.get('wall_ms_per_step'))} | "
                    f"{_cell(p.get('forward_ms_median'))} | {_cell(p.get('drafter_ms_median'))} | "
                    f"{_cell(ph.get('kernel_calls_eager'))} (rows {ph.get('rows')}) | "
                    f"{_cell(ph.get('host_us_median'))} | {_cell(ph.get('gpu_us_median'))} | "
                    f"{_cell(ph.get('compiles'))} | {_cell(ph.get('graph_replays'))} | "
                    f"{ph.get('gc_collections')} ({_cell(ph.get('gc_ms'))}) |"
                )
            lines.append("")
            disp = {k: v.get("dispatch") for k, v in phases.items() if k.startswith("timed-")}
            lines += ["dispatch (timed phases): `" + json.dumps(disp) + "`", ""]
            census = [
                f"- B={p['batch']}: wall {ph.get('wall_s')} s, process CPU {ph.get('cpu_s')} s "
                f"({ph.get('cpu_per_wall')} per wall s); busiest threads: "
                + ", ".join(ph.get("threads_busy") or ["-"])
                for p in points
                if (ph := phases.get(f"timed-{p['batch']}", {})).get("wall_s") is not None
            ]
            if census:
                lines += ["CPU census (timed phases):", "", *census, ""]
        for label, table in (res.get("profile") or {}).items():
            lines += [f"profile ({label}):", "", "```", table.strip()[:6000], "```", ""]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_run = sub.add_parser("run", help="probe the backends (GPU host)")
    p_run.add_argument("--models-dir", type=Path, required=True)
    p_run.add_argument("--out", type=Path, required=True)
    p_run.add_argument("--model", default="geom-35b-agree")
    p_run.add_argument(
        "--backends",
        type=lambda s: s.split(","),
        default=["ucache_flashinfer", "ucache_ours"],
    )
    p_run.add_argument(
        "--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32, 256]
    )
    p_run.add_argument("--max-tokens", type=int, default=128)
    p_run.add_argument("--profile-batch", type=int, default=32, help="0: no profiler window")
    p_run.add_argument("--profile-tokens", type=int, default=16)
    p_run.add_argument("--trace", action="store_true", help="also export chrome traces")
    p_run.add_argument("--deadline-s", type=float, default=300)
    p_run.add_argument("--name", default="probe")
    p_worker = sub.add_parser("worker", help="(internal) one backend in this process")
    p_worker.add_argument("job", type=Path)
    p_worker.add_argument("result", type=Path)
    p_worker.add_argument("--models-dir", type=Path, required=True)
    p_worker.add_argument("--opts", type=json.loads, default={})
    p_report = sub.add_parser("report", help="re-render a probe JSON as markdown (CPU)")
    p_report.add_argument("result", type=Path)
    args = parser.parse_args(argv)
    for name in getattr(args, "backends", None) or []:
        if name not in plan.BACKENDS:
            parser.error(f"unknown backend {name!r}; choose from {','.join(plan.BACKENDS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cmd == "worker":
        return run_worker(json.loads(args.job.read_text()), args.models_dir, args.result, args.opts)
    if args.cmd == "report":
        print(markdown(json.loads(args.result.read_text())["results"]))
        return 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
