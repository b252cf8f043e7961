"""End to end on a GPU host (#10): the patched vLLM engine itself, every GDN spec backend, same
requests; correctness against no speculation, decode speed, bad-configuration checks.

    # on the GPU host, after `source /tmp/gdn-host/env.sh` (tools/gpuhost, README "End to end")
    python3 bench/e2e.py models /tmp/e2e-models --models tiny,geom-35b
    python3 bench/e2e.py run --suite correctness --models-dir /tmp/e2e-models --out $OUT/e2e
    python3 bench/e2e.py run --suite speed --models-dir /tmp/e2e-models --out $OUT/e2e
    # the 40-layer geometry, reject level only, longer timed runs
    python3 bench/e2e.py models /tmp/e2e-models --models geom-35b-deep --acceptance reject
    python3 bench/e2e.py run --suite speed --speed-models geom-35b-deep-reject \
        --speed-max-tokens 512 --models-dir /tmp/e2e-models --out $OUT/e2e
    # anywhere (CPU): re-render committed results, with the GDN-state memory column
    python3 bench/e2e.py report results/e2e/e2e-*.json --out results/e2e

Each job (model x backend x mode) runs in its own process with a timeout; an error, crash or
timeout is recorded and the run goes on. Results are rewritten after every job (JSON + markdown,
PNG at the end), so a run cut short still leaves everything it measured. Suites: smoke (tiny,
eager, 16 requests), correctness (tiny, 5 modes, 64 requests x 256 tokens), speed (geometry
models, batches 1..256, both acceptance levels), badconfig (ucache init errors).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.e2e import plan, report  # noqa: E402

MIN_JOB_S = 75  # do not start a job with less time left than an engine start needs


# ----------------------------------------------------------------------------- worker


def _metrics(llm) -> dict:
    """Spec-decode and preemption counters (summed over labels)."""
    out: dict = {}
    try:
        snapshot = llm.get_metrics()
    except Exception:  # noqa: BLE001 - metrics are optional
        return out
    for m in snapshot:
        name = m.name.removeprefix("vllm:")
        if hasattr(m, "values"):
            prev = out.get(name) or [0] * len(m.values)
            out[name] = [a + b for a, b in zip(prev, m.values, strict=False)]
        elif hasattr(m, "value") and isinstance(m.value, int | float):
            out[name] = out.get(name, 0) + m.value
    return out


def _delta(after: dict, before: dict) -> dict:
    keys = (
        "spec_decode_num_drafts",
        "spec_decode_num_draft_tokens",
        "spec_decode_num_accepted_tokens",
        "spec_decode_num_accepted_tokens_per_pos",
        "num_preemptions",
    )
    out = {}
    for k in keys:
        if k not in after:
            continue
        a, b = after[k], before.get(k)
        if isinstance(a, list):
            b = b or [0] * len(a)
            out[k] = [x - y for x, y in zip(a, b, strict=False)]
        else:
            out[k] = a - (b or 0)
    return out


def _margins(output) -> list[float] | None:
    """Top-1 minus top-2 logprob at every generated position (None without logprobs)."""
    logprobs = output.logprobs
    if not logprobs:
        return None
    rows = []
    for entry in logprobs:
        values = sorted((lp.logprob for lp in entry.values()), reverse=True)
        rows.append(round(values[0] - values[1], 4) if len(values) > 1 else None)
    return rows


def prefill_check(llm, prompts: list[list[int]], tokens: list[list[int]]) -> dict:
    """Re-score every request's own output with one full prefill of prompt + output (no
    speculation on that path) and measure, at every generated position, the prefill's top-1
    logprob minus the logprob of the token that was emitted. A correct decode path emits the
    argmax up to rounding ties at EVERY position, not only up to its first divergence from
    another run, so this checks the state after every flush of a 256-token output."""
    from vllm import SamplingParams

    sp = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1, detokenize=False)
    inputs = [{"prompt_token_ids": p + t} for p, t in zip(prompts, tokens, strict=True)]
    outs = llm.generate(inputs, sp, use_tqdm=False)
    gaps: list[tuple[int, int, float]] = []  # (request, position, gap)
    for req, (p, t, o) in enumerate(zip(prompts, tokens, outs, strict=True)):
        rows = o.prompt_logprobs  # rows[j]: distribution of token j given tokens < j
        for pos, tok in enumerate(t):
            entry = rows[len(p) + pos]
            top = max(lp.logprob for lp in entry.values())
            gaps.append((req, pos, top - entry[tok].logprob))
    off = [g for g in gaps if g[2] >= report.ROUNDING_MARGIN]
    return {
        "tokens": len(gaps),
        "off_argmax": len(off),
        "max_gap": round(max((g[2] for g in gaps), default=0.0), 4),
        "first_off": [[r, pos, round(g, 4)] for r, pos, g in sorted(off, key=lambda x: x[1])[:8]],
    }


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _measure(llm, job: dict, cfg: dict, result: dict, write) -> None:
    """Generate (correctness) or sweep batches (speed); fills `result`."""
    from vllm import SamplingParams

    prompts = plan.make_prompts(job["prompts"], job["num_requests"], cfg["vocab_size"])
    inputs = [{"prompt_token_ids": p} for p in prompts]
    if job["suite"] in ("correctness", "smoke"):
        want_logprobs = job["backend"] == "nospec"  # margins of the reference only
        sp = SamplingParams(
            temperature=0.0,
            max_tokens=job["max_tokens"],
            ignore_eos=True,
            logprobs=2 if want_logprobs else None,
            detokenize=False,
        )
        before = _metrics(llm)
        outs = llm.generate(inputs, sp, use_tqdm=False)
        result["metrics"] = _delta(_metrics(llm), before)
        result["output"] = {
            "tokens": [list(o.outputs[0].token_ids) for o in outs],
            "margins": [_margins(o.outputs[0]) for o in outs] if want_logprobs else None,
        }
        distinct = [len(set(t)) for t in result["output"]["tokens"]]
        result["distinct_tokens_min"] = min(distinct)
        write()
        try:
            result["prefill_check"] = prefill_check(llm, prompts, result["output"]["tokens"])
        except Exception as exc:  # noqa: BLE001 - the greedy comparison above still stands
            result["prefill_check"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    else:  # speed: decode tokens/s = (full - prefill-only) time per batch
        points = []
        warm = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, detokenize=False)
        llm.generate(inputs[:8], warm, use_tqdm=False)
        for batch in job["batches"]:
            batch_inputs = inputs[:batch]
            one = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True, detokenize=False)
            full = SamplingParams(
                temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True, detokenize=False
            )
            # Warm this batch size first: the first steps at a new shape may JIT-compile
            # (Triton specialises on argument values) - session 2's single-shot B=256 points
            # spread 4x between backends.
            llm.generate(batch_inputs, warm, use_tqdm=False)
            samples = []
            before = _metrics(llm)
            for _ in range(job.get("repeats", 5)):
                t0 = time.perf_counter()
                llm.generate(batch_inputs, one, use_tqdm=False)
                t_prefill = time.perf_counter() - t0
                t0 = time.perf_counter()
                llm.generate(batch_inputs, full, use_tqdm=False)
                t_full = time.perf_counter() - t0
                decode_tokens = batch * (job["max_tokens"] - 1)
                samples.append(
                    {
                        "t_full_s": round(t_full, 4),
                        "t_prefill_s": round(t_prefill, 4),
                        "decode_tok_s": decode_tokens / max(t_full - t_prefill, 1e-9),
                    }
                )
            median = sorted(samples, key=lambda x: x["decode_tok_s"])[len(samples) // 2]
            points.append(
                {
                    "batch": batch,
                    **median,
                    "samples": samples,
                    "metrics": _delta(_metrics(llm), before),
                }
            )
            result["speed"] = points
            write()
        totals: dict = {}
        for p in points:
            for k, v in p["metrics"].items():
                totals[k] = (
                    [a + b for a, b in zip(totals.get(k) or [0] * len(v), v, strict=False)]
                    if isinstance(v, list)
                    else totals.get(k, 0) + v
                )
        result["metrics"] = totals
    try:
        import torch

        result["max_memory_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    except Exception:  # noqa: BLE001
        pass


def run_worker(job: dict, models_dir: Path, result_path: Path) -> int:
    result: dict = {"job": job, "status": "starting", "seconds": None}
    write = lambda: result_path.write_text(json.dumps(result) + "\n")  # noqa: E731
    write()
    start = time.time()
    tp = job["engine"].get("tensor_parallel_size", 1)
    if tp == 1:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # errors stay in-process
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    for key, value in (
        ("NCCL_NVLS_ENABLE", "0"),
        ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
        ("NVSHMEM_DISABLE_NVLS", "1"),
    ):
        os.environ.setdefault(key, value)  # the multi-GPU hosts must never use NVLink multicast
    model_dir = models_dir / job["model"]
    if not (model_dir / "config.json").is_file():
        result["status"] = "missing-model"
        result["error"] = f"no {model_dir}/config.json: run `bench/e2e.py models` for it first"
        write()
        return 0
    cfg = json.loads((model_dir / "config.json").read_text())
    result["env"] = {k: os.environ.get(k) for k in ("VLLM_GDN_UCACHE_MODULE",)}
    wants_ucache = job["engine"].get("additional_config", {}).get("gdn_spec_backend")
    if wants_ucache == "flashinfer_ucache" and not _has_module(
        "vllm.model_executor.layers.mamba.gdn.spec_backend"
    ):
        # Without the series' ucache patches the key is an opaque, ignored dict entry: the
        # engine would silently run another path under this backend's name.
        result["status"] = "unavailable"
        result["error"] = "the bundled vLLM lacks the ucache backend (gdn/spec_backend.py)"
        write()
        return 0
    try:
        import torch

        from vllm import LLM

        try:
            result["host"] = f"{torch.cuda.get_device_name()} torch {torch.__version__}"
        except Exception:  # noqa: BLE001 - no GPU: let vLLM say what is missing
            result["host"] = f"no CUDA device, torch {torch.__version__}"
        llm = LLM(
            model=str(model_dir),
            skip_tokenizer_init=True,
            seed=0,
            disable_log_stats=False,
            **job["engine"],
        )
    except BaseException as exc:  # noqa: BLE001 - every init failure is a result
        text = f"{type(exc).__name__}: {exc}"
        result["error"] = text[-4000:]
        result["traceback"] = "".join(traceback.format_exception(exc)[-6:])[-3000:]
        if job.get("expect_error"):
            ok = re.search(job["expect_error"], text) is not None
            result["status"] = "expected-error" if ok else "wrong-error"
        else:
            result["status"] = "init-error"
        result["seconds"] = round(time.time() - start, 1)
        write()
        return 0
    result["init_seconds"] = round(time.time() - start, 1)
    if job.get("expect_error"):
        result["status"] = "no-error"  # the engine started although it must refuse
        write()
        return 0
    try:
        cc = llm.llm_engine.vllm_config.cache_config
        result["cache"] = {
            "num_gpu_blocks": cc.num_gpu_blocks,
            "mamba_ssm_cache_dtype": str(cc.mamba_ssm_cache_dtype),
            "block_size": cc.block_size,
        }
    except Exception:  # noqa: BLE001 - informative only
        pass
    try:
        _measure(llm, job, cfg, result, write)
    except Exception as exc:  # noqa: BLE001 - a failing step is a result too
        result["status"] = "run-error"
        result["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        result["traceback"] = "".join(traceback.format_exception(exc)[-6:])[-3000:]
        result["seconds"] = round(time.time() - start, 1)
        write()
        return 0
    result["status"] = "ok"
    result["seconds"] = round(time.time() - start, 1)
    write()
    return 0


# ----------------------------------------------------------------------------- parent


def pre_ring_module(tmp: Path) -> None:
    """A copy of our kernel module as a pre-ring build (RING_SLOTS = 16) for the badconfig job."""
    source = (ROOT / "kernels/gdn_ucache_flush.py").read_text()
    (tmp / "pre_ring").mkdir(parents=True, exist_ok=True)
    (tmp / "pre_ring/gdn_ucache_flush.py").write_text(
        re.sub(r"^RING_SLOTS = 32", "RING_SLOTS = 16", source, flags=re.MULTILINE)
    )


def job_env(job: plan.Job) -> dict:
    env = dict(os.environ)
    for key, value in job.env.items():
        expanded = os.path.expandvars(value)
        if "$" in expanded:  # an unset variable (e.g. no flashinfer file): leave vLLM's default
            continue
        env[key] = expanded
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_job(job: plan.Job, models_dir: Path, work: Path, timeout_s: float) -> dict:
    jobs_dir = work / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    stem = job.key.replace("/", "__")
    job_path, result_path, log_path = (
        jobs_dir / f"{stem}.job.json",
        jobs_dir / f"{stem}.result.json",
        work / "logs" / stem,
    )
    log_path.parent.mkdir(exist_ok=True)
    job_path.write_text(json.dumps(job.to_dict()))
    cmd = [
        sys.executable,
        str(ROOT / "bench/e2e.py"),
        "worker",
        str(job_path),
        str(result_path),
        "--models-dir",
        str(models_dir),
    ]
    start = time.time()
    with open(f"{log_path}.log", "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=job_env(job), start_new_session=True
        )
        try:
            proc.wait(timeout=timeout_s)
            status = None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and any engine processes it made
            proc.wait()
            status = "timeout"
    try:
        result = json.loads(result_path.read_text())
    except (OSError, json.JSONDecodeError):
        result = {"job": job.to_dict(), "status": "crashed"}
    if status == "timeout":
        result["status"] = f"timeout ({timeout_s:.0f} s, reached: {result.get('status')})"
    elif result.get("status") in ("starting", None):
        result["status"] = f"crashed (exit {proc.returncode})"
    if result["status"] not in report.COMPLETED:
        tail = Path(f"{log_path}.log").read_text(errors="replace")[-2500:]
        result.setdefault("error", "")
        result["log_tail"] = tail
    result["wall_s"] = round(time.time() - start, 1)
    return result


def pack_logs(work: Path, out: Path, name: str) -> None:
    """All worker logs in one file: the device tool returns at most 8 files from $OUT."""
    logs = sorted((work / "logs").glob("*.log"))
    if logs:
        with tarfile.open(out / f"logs-{name}.tar.xz", "w:xz") as tar:
            for log in logs:
                tar.add(log, arcname=log.name)


def write_outputs(
    results: list[dict], out: Path, name: str, command: str, plot: bool = False
) -> None:
    """JSON + markdown (+ PNG) per run, plus the logs archive: $OUT returns <= 8 files."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(
        json.dumps({"command": command, "results": results}, indent=0) + "\n"
    )
    (out / f"{name}.md").write_text(report.markdown(results, command=command))
    if plot:
        report.plot_speed(results, out / f"{name}.png")


def run(args: argparse.Namespace) -> int:
    start = time.time()
    deadline = start + args.deadline_s
    out = args.out
    tmp = Path(tempfile.mkdtemp(prefix="e2e-"))
    work = args.work or tmp / "work"  # per-job files and logs (never under $OUT)
    pre_ring_module(tmp)
    jobs: list[plan.Job] = []
    for suite in args.suite:
        jobs += plan.suite_jobs(
            suite,
            args.backends,
            args.modes,
            args.tensor_parallel_size,
            str(tmp),
            speed_models=args.speed_models,
            correctness_models=args.correctness_models,
            batches=tuple(args.batches),
            speed_max_tokens=args.speed_max_tokens,
        )
    if args.preempt_blocks is not None:
        for job in jobs:
            if "num_gpu_blocks_override" in job.engine:
                job.engine["num_gpu_blocks_override"] = args.preempt_blocks
    name = args.name or "e2e-" + "-".join(args.suite)
    command = "python3 bench/e2e.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    results: list[dict] = []
    lock = threading.Lock()
    print(
        f"{len(jobs)} jobs, deadline {args.deadline_s} s, {args.jobs} at a time (speed jobs alone)",
        flush=True,
    )

    def one(job: plan.Job) -> None:
        left = deadline - time.time()
        if left < MIN_JOB_S:
            res = {"job": job.to_dict(), "status": "skipped (deadline)"}
        else:
            res = run_job(job, args.models_dir, work, min(job.timeout_s, left - 5))
        extra = ""
        if res.get("output"):
            extra = f" distinct>={res.get('distinct_tokens_min')}"
        acc = report.acceptance(res.get("metrics"))
        if acc:
            extra += f" tokens/step={acc['tokens_per_step']:.2f}"
        with lock:
            results.append(res)
            print(
                f"[{time.time() - start:5.0f}s] {job.key}: {res['status']} "
                f"({res.get('wall_s')} s){extra}",
                flush=True,
            )
            if res["status"] not in (*report.COMPLETED, "skipped (deadline)"):
                detail = res.get("error") or res.get("log_tail") or ""
                print("   ", detail[-600:].replace("\n", "\n    "), flush=True)
            write_outputs(results, out, name, command)

    shared = [j for j in jobs if j.suite != "speed"]
    alone = [j for j in jobs if j.suite == "speed"]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, shared))
    for job in alone:  # timings: nothing else on the GPU
        one(job)
    write_outputs(results, out, name, command, plot=True)
    pack_logs(work, out, name)
    shutil.rmtree(tmp, ignore_errors=True)  # per-job files (and the default work dir) are packed
    print((out / f"{name}.md").read_text(), flush=True)
    return 0


def render(args: argparse.Namespace) -> int:
    results = report.load_results(args.results)
    state = state_bytes_for(results, args.models_dir)
    name = args.name
    args.out.mkdir(parents=True, exist_ok=True)
    commands = sorted({json.loads(p.read_text()).get("command", "") for p in args.results})
    (args.out / f"{name}.md").write_text(
        report.markdown(results, state, command="; ".join(c for c in commands if c))
    )
    report.plot_speed(results, args.out / f"{name}.png")
    compact = {
        "commands": commands,
        "correctness": report.judge_correctness(results),
        "speed": report.speed_rows(results, state),
        "results": [report.compact(r) for r in results],
    }
    (args.out / f"{name}.json").write_text(json.dumps(compact, indent=0, default=str) + "\n")
    print(f"wrote {args.out / name}.md/.png/.json")
    return 0


def state_bytes_for(results: list[dict], models_dir: Path | None) -> dict:
    """(model, backend) -> GDN state MiB per request, from the series' calculator (CPU)."""
    from tools.e2e import make_models, series_calc

    try:
        calc = series_calc.series_calculator(ROOT)
    except series_calc.SeriesSourceError as exc:
        print(f"note: no memory column ({exc})")
        return {}
    out = {}
    for res in results:
        job = res["job"]
        spec_name = job["model"].rsplit("-", 1)[0]
        if spec_name not in make_models.MODELS:
            continue
        cfg = make_models.make_config(make_models.MODELS[spec_name])
        backend = plan.BACKENDS[job["backend"]]
        mode = "replay" if backend.replay else ("native" if backend.spec else "nospec")
        dtype = "float16" if backend.gdn_spec_backend == "flashinfer_ucache" else "float32"
        tp = job["engine"].get("tensor_parallel_size", 1)
        out[(job["model"], job["backend"])] = (
            series_calc.gdn_state_bytes_per_request(
                calc, cfg, mode, tp=tp, num_spec=plan.NUM_SPEC, state_dtype=dtype
            )
            / 2**20
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_models = sub.add_parser("models", help="generate the checkpoints (tools/e2e/make_models)")
    p_models.add_argument("out", type=Path)
    p_models.add_argument(
        "--models", default="tiny,geom-35b", help="comma list of tools/e2e/make_models.MODELS"
    )
    p_models.add_argument("--acceptance", default="agree,reject")
    p_run = sub.add_parser("run", help="run suites (on the GPU host)")
    p_run.add_argument("--suite", action="append", choices=plan.SUITES, required=True)
    p_run.add_argument("--models-dir", type=Path, required=True)
    p_run.add_argument("--out", type=Path, required=True)
    p_run.add_argument("--backends", type=lambda s: s.split(","), default=list(plan.BACKENDS))
    p_run.add_argument(
        "--modes",
        type=lambda s: s.split(","),
        default=None,
        help=f"correctness modes (default all: {','.join(plan.MODES)})",
    )
    p_run.add_argument("--correctness-models", type=lambda s: s.split(","), default=None)
    p_run.add_argument(
        "--speed-models",
        type=lambda s: s.split(","),
        default=None,
        help="checkpoint directories, e.g. geom-35b-deep-reject (default geom-35b-{agree,reject})",
    )
    p_run.add_argument(
        "--speed-max-tokens",
        type=int,
        default=plan.SPEED_MAX_TOKENS,
        help="output tokens of every timed speed run (longer runs: less noise per sample)",
    )
    p_run.add_argument(
        "--batches", type=lambda s: [int(x) for x in s.split(",")], default=list(plan.SPEED_BATCHES)
    )
    p_run.add_argument("--tensor-parallel-size", type=int, default=1)
    p_run.add_argument(
        "--preempt-blocks",
        type=int,
        default=None,
        help="num_gpu_blocks_override of the preemption mode",
    )
    p_run.add_argument(
        "--deadline-s",
        type=float,
        default=540,
        help="start no job after this many seconds (device calls stop at 600)",
    )
    p_run.add_argument(
        "--work",
        type=Path,
        default=None,
        help="per-job files and logs (default: a temp dir; never under --out)",
    )
    p_run.add_argument(
        "--jobs",
        type=int,
        default=5,
        help="engines at a time for correctness/badconfig jobs (speed: one)",
    )
    p_run.add_argument("--name", default=None, help="output file stem (default e2e-<suites>)")
    p_worker = sub.add_parser("worker", help="(internal) one job in this process")
    p_worker.add_argument("job", type=Path)
    p_worker.add_argument("result", type=Path)
    p_worker.add_argument("--models-dir", type=Path, required=True)
    p_report = sub.add_parser("report", help="re-render results (CPU): markdown + PNG")
    p_report.add_argument("results", type=Path, nargs="+")
    p_report.add_argument("--out", type=Path, default=ROOT / "results/e2e")
    p_report.add_argument("--models-dir", type=Path, default=None)
    p_report.add_argument("--name", default="e2e")
    args = parser.parse_args(argv)
    for name in getattr(args, "backends", None) or []:
        if name not in plan.BACKENDS:
            parser.error(f"unknown backend {name!r}; choose from {','.join(plan.BACKENDS)}")
    for name in getattr(args, "modes", None) or []:
        if name not in plan.MODES:
            parser.error(f"unknown mode {name!r}; choose from {','.join(plan.MODES)}")
    if getattr(args, "tensor_parallel_size", 1) < 1:
        parser.error("--tensor-parallel-size must be >= 1")
    if getattr(args, "speed_max_tokens", 2) < 2:
        parser.error("--speed-max-tokens must be >= 2 (decode time = full minus 1-token run)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cmd == "models":
        from tools.e2e import make_models

        return make_models.main(
            [str(args.out), "--models", args.models, "--acceptance", args.acceptance]
        )
    if args.cmd == "worker":
        return run_worker(json.loads(args.job.read_text()), args.models_dir, args.result)
    if args.cmd == "report":
        return render(args)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
