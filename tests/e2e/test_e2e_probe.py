"""bench/e2e_probe.py and bench/h200_e2e_s4.sh (#10, session 4) on CPU: arguments, the engines
match the speed suite's, the kernel-call instrumentation on a fake kernel module, the report,
the parent with failing workers, and the GPU script's step logic without a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest

from tools.e2e import plan

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/h200_e2e_s4.sh"


def load_probe():
    spec = importlib.util.spec_from_file_location("bench_e2e_probe", ROOT / "bench/e2e_probe.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


probe = load_probe()


def test_arguments_and_defaults() -> None:
    args = probe.parse_args(["run", "--models-dir", "m", "--out", "o"])
    assert args.backends == ["ucache_flashinfer", "ucache_ours"]
    assert args.model == "geom-35b-agree" and args.batches == [1, 32, 256]
    with pytest.raises(SystemExit):
        probe.parse_args(["run", "--models-dir", "m", "--out", "o", "--backends", "bogus"])


def test_probe_engines_are_the_speed_suites() -> None:
    """The probe must measure the engine of the 0.55x rows, not a variant of it."""
    jobs = probe.probe_jobs(["ucache_flashinfer", "ucache_ours"], "geom-35b-agree", [1, 32], 128)
    for job in jobs:
        (speed,) = plan.speed_jobs([job.backend], ["geom-35b-agree"], 1, (1, 32), 128)
        assert job.engine == speed.engine and job.env == speed.env
    assert jobs[0].env["VLLM_GDN_UCACHE_MODULE"] == "${GDN_FLASHINFER_UCACHE_MODULE}"
    assert jobs[1].env["VLLM_GDN_UCACHE_MODULE"].endswith("kernels/gdn_ucache_flush.py")


def test_kernel_wrapper_counts_calls_compiles_and_rows() -> None:
    torch = pytest.importorskip("torch")
    module = types.ModuleType("fake_kernel")
    module._CACHE = {}

    def kernel(*args, q=None, **kwargs):
        key = ("static", q.shape[0])  # flashinfer's strided mode keys on the batch
        if key not in module._CACHE:
            module._CACHE[key] = object()
        return q

    module.gated_delta_rule_mtp_ucache_flush = kernel
    p = probe.Probe()
    p.wrap_kernel_module(module)
    p.wrap_kernel_module(module)  # idempotent
    p.phase = "init"
    for rows in (1, 8, 1):
        module.gated_delta_rule_mtp_ucache_flush(q=torch.zeros(rows, 4))
    p.phase = "timed-1"
    for _ in range(3):
        module.gated_delta_rule_mtp_ucache_flush(q=torch.zeros(1, 4))
    init, timed = p.phases["init"].summary(), p.phases["timed-1"].summary()
    assert init["compiles"] == 2 and init["compile_rows"] == [1, 8]
    assert init["kernel_calls_eager"] == 3 and init["rows"] == {1: 2, 8: 1}
    assert timed["compiles"] == 0 and timed["kernel_calls_eager"] == 3
    assert timed["host_us_median"] is not None and timed["gpu_us_median"] is None  # no CUDA


def test_markdown_lists_points_phases_and_profile() -> None:
    result = {
        "job": {"backend": "ucache_flashinfer", "model": "geom-35b-agree"},
        "status": "ok",
        "config": {"use_v2_model_runner": True},
        "init_s": 80.0,
        "points": [
            {
                "batch": 32,
                "decode_tok_s": 9497.0,
                "steps_timed": 53,
                "steps_full_graph": 52,
                "wall_ms_per_step": 8.1,
                "forward_ms_median": 1.2,
                "drafter_ms_median": 0.4,
            }
        ],
        "phases": {
            "init": {"compiles": 7, "compile_s": 30.1, "compile_rows": [1, 2, 8]},
            "timed-32": {"kernel_calls_eager": 6, "rows": {"256": 6}, "host_us_median": 400.0},
        },
        "profile": {"gpu": "name  time\nkernel 1.0"},
    }
    text = probe.markdown([result, {"job": {"backend": "x"}, "status": "error", "error": "E"}])
    assert "| 32 | 9497.0 | 53 (52) | 8.1 | 1.2 | 0.4 | 6 (rows {'256': 6}) | 400.0 |" in text
    assert "init: 7 compiles (30.1 s, rows [1, 2, 8])" in text
    assert "kernel 1.0" in text and "## x on None: error" in text


def test_parent_records_failing_workers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/e2e_probe.py"), "run", "--models-dir", str(tmp_path)]
        + ["--out", str(out), "--backends", "ucache_ours", "--deadline-s", "200"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (res,) = json.loads((out / "probe.json").read_text())["results"]
    assert res["status"] == "error" and res["job"]["backend"] == "ucache_ours"
    assert "## ucache_ours on geom-35b-agree: error" in (out / "probe.md").read_text()


def test_gpu_script_help_shellcheck_and_skips_without_budget(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", SCRIPT, "--help"], capture_output=True, text=True, check=True)
    assert "BUDGET_S" in proc.stdout and "e2e-s4.tar.xz" in proc.stdout
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        subprocess.run([shellcheck, SCRIPT], check=True)
    home = tmp_path / "home"  # the JIT caches the script saves on exit come from $HOME
    (home / ".triton/cache/k").mkdir(parents=True)
    (home / ".triton/cache/k/kernel.cubin").write_bytes(b"\x7fELF" + bytes(64))
    env = {
        **os.environ,
        "HOME": str(home),
        "E2E_S4_WORK": str(tmp_path / "w"),
        "OUT": str(tmp_path / "out"),
        "E2E_MODELS_DIR": str(tmp_path / "m"),
        "BUDGET_S": "60",
    }
    proc = subprocess.run(
        ["bash", SCRIPT, "reject", "triton", "probe"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("no time left") == 3
    assert (tmp_path / "out/e2e-s4.tar.xz").is_file()
    with tarfile.open(tmp_path / "out/host-caches.tar.gz") as tar:
        assert ".triton/cache/k/kernel.cubin" in tar.getnames()
    bad = subprocess.run(["bash", SCRIPT, "bogus"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "unknown step" in bad.stderr


def test_gpu_script_continues_only_missing_backends(tmp_path: Path) -> None:
    """A second call on the warm host repeats only the backends without an ok result."""
    work = tmp_path / "w"
    (work / "e2e").mkdir(parents=True)
    model = "geom-35b-reject"
    results = [
        {"job": {"backend": "native", "model": model}, "status": "ok"},
        {"job": {"backend": "ucache_ours", "model": model}, "status": "ok"},
        {
            "job": {"backend": "ucache_flashinfer", "model": model},
            "status": "timeout (480 s, reached: ok)",
        },
        # Another model's result in the same file does not count for this one.
        {"job": {"backend": "replay_triton", "model": "geom-35b-deep-reject"}, "status": "ok"},
    ]
    (work / "e2e/e2e-speed-reject.json").write_text(json.dumps({"results": results}))
    (work / "e2e/e2e-speed-agree-triton.json").write_text(
        json.dumps(
            {
                "results": [
                    {"job": {"backend": "replay_triton", "model": "geom-35b-agree"}, "status": "ok"}
                ]
            }
        )
    )
    env = {
        **os.environ,
        "E2E_S4_SAVE_CACHES": "0",
        "E2E_S4_WORK": str(work),
        "OUT": str(tmp_path / "out"),
        "E2E_MODELS_DIR": str(tmp_path / "m"),
        "BUDGET_S": "60",
    }
    proc = subprocess.run(
        ["bash", SCRIPT, "reject", "triton"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "e2e-speed-reject: skipped (ucache_flashinfer,replay_triton; no time left)" in proc.stdout
    )
    assert "e2e-speed-agree-triton: done in an earlier call" in proc.stdout


def fake_python(tmp_path: Path) -> tuple[dict, Path]:
    """An environment whose `python3` records the script's bench/ commands instead of running
    them (every other use, e.g. the packing and the resume check, runs the real Python); its
    models command leaves each checkpoint's construction.json, as the real one does last."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        "#!/usr/bin/env bash\n"
        'if [[ ${1:-} == bench/* ]]; then echo "$*" >> "$CALLS"; fi\n'
        # `bench/e2e.py models DIR --models M --acceptance A,B`: the checkpoints' marker files.
        "if [[ ${1:-} == bench/e2e.py && ${2:-} == models ]]; then\n"
        "  for a in ${7//,/ }; do\n"
        '    mkdir -p "$3/$5-$a" && echo {} > "$3/$5-$a/construction.json"\n'
        "  done\n"
        "fi\n"
        "if [[ ${1:-} == bench/* ]]; then exit 0; fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    (bin_dir / "python3").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "GDN_HOST_SITE": "unused",  # never source a real host's env.sh
        "E2E_S4_SAVE_CACHES": "0",
        "E2E_S4_WORK": str(tmp_path / "w"),
        "OUT": str(tmp_path / "out"),
        "E2E_MODELS_DIR": str(tmp_path / "m"),
        "BUDGET_S": "600",
    }
    return env, calls


def test_gpu_script_default_model_and_length(tmp_path: Path) -> None:
    """Without E2E_S4_MODEL / E2E_S4_MAX_TOKENS the commands are those of sessions 4-7 (the
    models step builds only the levels the requested steps use)."""
    env, calls = fake_python(tmp_path)
    proc = subprocess.run(
        ["bash", SCRIPT, "models", "reject"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    models, reject = calls.read_text().splitlines()
    assert models == f"bench/e2e.py models {tmp_path}/m --models geom-35b --acceptance reject"
    assert reject.startswith("bench/e2e.py run --suite speed --speed-models geom-35b-reject ")
    assert "--speed-max-tokens" not in reject and reject.endswith("--name e2e-speed-reject")
    assert " --batches 1,8,32,128,256 " in reject


def test_gpu_script_deep_model_and_long_runs(tmp_path: Path) -> None:
    """E2E_S4_MODEL picks the model of every step (its own file names, so results of geom-35b
    on the same host never count as done); E2E_S4_MAX_TOKENS reaches the speed runs."""
    env, calls = fake_python(tmp_path)
    env |= {"E2E_S4_MODEL": "geom-35b-deep", "E2E_S4_MAX_TOKENS": "512", "E2E_S4_BATCHES": "1,256"}
    (tmp_path / "w/e2e").mkdir(parents=True)
    done = [{"job": {"backend": "native", "model": "geom-35b-reject"}, "status": "ok"}]
    (tmp_path / "w/e2e/e2e-speed-reject.json").write_text(json.dumps({"results": done}))
    agree = tmp_path / "m/geom-35b-deep-agree"
    agree.mkdir(parents=True)
    (agree / "construction.json").write_text("{}")  # present: only -reject is built
    proc = subprocess.run(
        ["bash", SCRIPT, "models", "reject", "probe"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    models, reject, probe_call = calls.read_text().splitlines()
    assert models.endswith("--models geom-35b-deep --acceptance reject")
    assert "--speed-models geom-35b-deep-reject --backends native,ucache_ours," in reject
    assert "--speed-max-tokens 512" in reject and " --batches 1,256 " in reject
    assert reject.endswith("--name e2e-speed-geom-35b-deep-reject")
    assert probe_call.startswith("bench/e2e_probe.py run ")
    assert "--model geom-35b-deep-agree" in probe_call
    assert probe_call.endswith("--name probe-geom-35b-deep-s4")


def test_gpu_script_probe_without_its_checkpoint_names_the_models_step(tmp_path: Path) -> None:
    """Session 8 ran `probe` alone on a host without the -agree checkpoint and got a
    FileNotFoundError from the engine. Now the step is skipped with a line that names the models
    step, the other steps still run, and the script exits 3."""
    env, calls = fake_python(tmp_path)
    env["E2E_S4_MODEL"] = "geom-27b-deep"
    reject = tmp_path / "m/geom-27b-deep-reject"
    reject.mkdir(parents=True)
    (reject / "construction.json").write_text("{}")
    proc = subprocess.run(
        ["bash", SCRIPT, "reject", "probe", "agree"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 3, proc.stderr
    missing = f"{tmp_path}/m/geom-27b-deep-agree not built: run the models step first"
    assert f"probe: skipped ({missing}, e.g. steps 'models probe')" in proc.stdout
    assert f"agree: skipped ({missing}, e.g. steps 'models agree')" in proc.stdout
    (reject_call,) = calls.read_text().splitlines()  # only the step whose checkpoint exists
    assert "--speed-models geom-27b-deep-reject " in reject_call
    assert (tmp_path / "out/e2e-s4.tar.xz").is_file()
    # With the models step first, the -agree level is built and both steps run.
    proc = subprocess.run(
        ["bash", SCRIPT, "models", "probe"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    models, probe_call = calls.read_text().splitlines()[1:]
    assert models.endswith("--models geom-27b-deep --acceptance agree")
    assert "--model geom-27b-deep-agree" in probe_call


def test_gpu_script_agree_step_runs_all_five_backends_and_resumes(tmp_path: Path) -> None:
    """The agree step: nospec and the four spec backends at the agree level by default
    (E2E_S4_AGREE_BACKENDS overrides), files e2e-speed-<model>-agree*; a second call repeats
    only the backends without an ok result, like reject."""
    env, calls = fake_python(tmp_path)
    env |= {"E2E_S4_MODEL": "geom-27b-deep", "E2E_S4_MAX_TOKENS": "512", "E2E_S4_BATCHES": "1,256"}
    proc = subprocess.run(
        ["bash", SCRIPT, "models", "agree"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    models, agree = calls.read_text().splitlines()
    assert models.endswith("--models geom-27b-deep --acceptance agree")
    assert (
        "--speed-models geom-27b-deep-agree "
        "--backends nospec,native,ucache_ours,ucache_flashinfer,replay_triton "
    ) in agree
    assert "--speed-max-tokens 512" in agree and " --batches 1,256 " in agree
    assert agree.endswith("--name e2e-speed-geom-27b-deep-agree")
    # The first call measured nospec and native (ucache_ours timed out): the second call, same
    # command, builds nothing and runs the other three.
    model = "geom-27b-deep-agree"
    done = [
        {"job": {"backend": "nospec", "model": model}, "status": "ok"},
        {"job": {"backend": "native", "model": model}, "status": "ok"},
        {"job": {"backend": "ucache_ours", "model": model}, "status": "timeout (480 s)"},
    ]
    (tmp_path / "w/e2e/e2e-speed-geom-27b-deep-agree.json").write_text(
        json.dumps({"results": done})
    )
    calls.unlink()
    proc = subprocess.run(
        ["bash", SCRIPT, "models", "agree"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "models: present" in proc.stdout
    (agree,) = calls.read_text().splitlines()
    assert "--backends ucache_ours,ucache_flashinfer,replay_triton " in agree
    assert agree.endswith("--name e2e-speed-geom-27b-deep-agree-2")
    # E2E_S4_AGREE_BACKENDS picks the list, e.g. native again in a fresh work dir.
    calls.unlink()
    env |= {"E2E_S4_WORK": str(tmp_path / "w2"), "E2E_S4_AGREE_BACKENDS": "native,replay_triton"}
    proc = subprocess.run(["bash", SCRIPT, "agree"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (agree,) = calls.read_text().splitlines()
    assert "--backends native,replay_triton " in agree


def test_gpu_script_help_prints_the_whole_comment_block() -> None:
    proc = subprocess.run(["bash", SCRIPT, "--help"], capture_output=True, text=True, check=True)
    lines = SCRIPT.read_text().splitlines()
    header = lines[1 : next(i for i, line in enumerate(lines) if not line.startswith("#"))]
    assert proc.stdout.splitlines() == header
    assert "E2E_S4_MODEL" in proc.stdout and "E2E_S4_MAX_TOKENS" in proc.stdout


def test_install_patches_adapter_dispatch_and_gc(monkeypatch: pytest.MonkeyPatch) -> None:
    """install() against stand-ins of the vLLM modules it patches (names as on gdn-ucache)."""
    import gc

    torch = pytest.importorskip("torch")
    kernel = types.ModuleType("fake_kernel")
    kernel._CACHE = {}
    kernel.gated_delta_rule_mtp_ucache_flush = lambda *a, q=None, **k: q
    adapter = types.ModuleType(probe.ADAPTER)
    adapter.load_ucache_kernel_module = lambda *a, **k: kernel
    runner_v2 = types.ModuleType("vllm.v1.worker.gpu.cudagraph_utils")
    dispatcher_v1 = types.ModuleType("vllm.v1.cudagraph_dispatcher")

    class Desc:
        cg_mode = types.SimpleNamespace(name="FULL")
        num_tokens = 128

    class CudaGraphManager:
        def dispatch(self, *args, **kwargs):
            return Desc()

    class CudagraphDispatcher:
        def dispatch(self, num_tokens, *args, **kwargs):
            return types.SimpleNamespace(name="NONE"), types.SimpleNamespace(num_tokens=num_tokens)

    runner_v2.CudaGraphManager = CudaGraphManager
    dispatcher_v1.CudagraphDispatcher = CudagraphDispatcher
    for name, module in (
        (probe.ADAPTER, adapter),
        ("vllm.v1.worker.gpu.cudagraph_utils", runner_v2),
        ("vllm.v1.cudagraph_dispatcher", dispatcher_v1),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", torch.cuda.CUDAGraph.replay)
    callbacks = list(gc.callbacks)
    p = probe.Probe()
    try:
        p.install()
        assert p.installed == [
            "kernel wrapper",
            "CUDAGraph.replay",
            "CudaGraphManager.dispatch",
            "CudagraphDispatcher.dispatch",
            "gc.callbacks",
        ]
        p.phase = "timed-32"
        module = adapter.load_ucache_kernel_module()
        module.gated_delta_rule_mtp_ucache_flush(q=torch.zeros(32, 4))
        CudaGraphManager().dispatch(32, 128, 4, 0)
        CudagraphDispatcher().dispatch(7)
        gc.collect()
        summary = p.phases["timed-32"].summary()
        assert summary["kernel_calls_eager"] == 1 and summary["rows"] == {32: 1}
        assert summary["dispatch"] == {
            "CudaGraphManager:FULL:128": 1,
            "CudagraphDispatcher:NONE:7": 1,
        }
        assert summary["gc_collections"] == {"2": 1}
    finally:
        gc.callbacks[:] = callbacks


def test_flashinfer_static_variant_cross_compiles_in_seconds(tmp_path: Path) -> None:
    """tools/e2e/fi_static_compile.py: flashinfer's kernel in vLLM's strided static mode compiles
    on a CPU (sm_90a) in seconds, with the compact mode's PTX instruction mix."""
    pytest.importorskip("cutlass")
    from tools.e2e import fi_static_compile

    if not fi_static_compile.DEFAULT_FI.is_file():
        pytest.skip("no .gpu/fi: run scripts/gpu-bundle.sh")
    mixes = []
    for extra in ([], ["--compact"]):
        dump = tmp_path / (extra[0][2:] if extra else "strided")
        proc = subprocess.run(
            [sys.executable, "-m", "tools.e2e.fi_static_compile", "--batches", "2"]
            + ["--dump", str(dump), *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        first, *rest = proc.stdout.splitlines()
        assert json.loads(first)["compile_s"] < 60
        (mix,) = json.loads("\n".join(rest))["ptx"].values()
        mixes.append({k: v for k, v in mix.items() if k != "lines"})
    assert mixes[0] == mixes[1] and mixes[0]["mma.sync"] > 0


def test_thread_cpu_census_names_the_busy_thread() -> None:
    """A thread that burns CPU during a phase is named in that phase's census (session 7: the
    flashinfer engine's host ops ran ~1.5x slower with the same call counts)."""
    import threading
    import time

    p = probe.Probe()
    p.phase = "timed-1"
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    worker = threading.Thread(target=spin, name="spinner")
    worker.start()
    # On a loaded machine the spinner may get little CPU at first: wait (up to 20 s) until the
    # kernel has charged it a few ticks, then end the phase while it still runs (an ended
    # thread leaves /proc/self/task).
    deadline = time.perf_counter() + 20
    while time.perf_counter() < deadline:
        time.sleep(0.05)
        busy = [c for name, c in probe.thread_cpu_snapshot()[2].values() if name == "spinner"]
        if busy and busy[0] >= 0.05:
            break
    p.phase = "after-1"
    stop.set()
    worker.join()
    census = p.phases["timed-1"].summary()
    assert census["wall_s"] > 0 and census["cpu_s"] >= 0.05
    assert any(t.startswith("spinner[") for t in census["threads_busy"]), census
    assert census["cpu_per_wall"] is not None


def test_steps_from_dispatch_counts_target_model_steps() -> None:
    from collections import Counter

    dispatch = Counter(
        {
            "ModelCudaGraphManager:NONE:128": 1,
            "SpeculatorCudaGraphManager:NONE:128": 1,
            "SpeculatorCudaGraphManager:FULL:1": 54,
            "ModelCudaGraphManager:FULL:4": 54,
            "SpeculatorCudaGraphManager:FULL:4": 54,
        }
    )
    assert probe.steps_from_dispatch(dispatch) == {"steps_timed": 55, "steps_full_graph": 54}
