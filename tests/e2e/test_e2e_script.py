"""bench/e2e.py (#10) on CPU: arguments, the job plan and engine arguments, the correctness
judgement on synthetic token lists, the report, and the parent's robustness (every worker
fails here: no vLLM, no GPU) without a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.e2e import plan, report

ROOT = Path(__file__).resolve().parents[2]


def load_e2e():
    spec = importlib.util.spec_from_file_location("bench_e2e", ROOT / "bench/e2e.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


e2e = load_e2e()


# ----------------------------------------------------------------------------- arguments


def test_run_arguments_and_tensor_parallel() -> None:
    args = e2e.parse_args(
        [
            "run",
            "--suite",
            "correctness",
            "--models-dir",
            "m",
            "--out",
            "o",
            "--tensor-parallel-size",
            "2",
            "--backends",
            "nospec,ucache_ours",
        ]
    )
    assert args.tensor_parallel_size == 2 and args.backends == ["nospec", "ucache_ours"]
    jobs = plan.suite_jobs("correctness", args.backends, None, args.tensor_parallel_size, "/t")
    assert all(j.engine["tensor_parallel_size"] == 2 for j in jobs)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--suite", "speed", "--models-dir", "m", "--out", "o", "--backends", "bogus"],
        ["run", "--suite", "correctness", "--models-dir", "m", "--out", "o", "--modes", "x"],
        [
            "run",
            "--suite",
            "speed",
            "--models-dir",
            "m",
            "--out",
            "o",
            "--tensor-parallel-size",
            "0",
        ],
        ["run", "--suite", "nosuch", "--models-dir", "m", "--out", "o"],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        e2e.parse_args(argv)


# ----------------------------------------------------------------------------- plan


def test_backend_engine_arguments() -> None:
    nospec, env = plan.backend_engine_args(plan.BACKENDS["nospec"])
    assert "speculative_config" not in nospec and not env
    native, _ = plan.backend_engine_args(plan.BACKENDS["native"])
    assert native["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert "use_replayssm" not in native
    triton, _ = plan.backend_engine_args(plan.BACKENDS["replay_triton"])
    assert triton["use_replayssm"] and triton["replayssm_buffer_len"] == 16
    assert triton["additional_config"]["gdn_spec_backend"] == "triton"
    ours, env = plan.backend_engine_args(plan.BACKENDS["ucache_ours"])
    assert ours["additional_config"] == {
        "gdn_prefill_backend": "triton",
        "gdn_spec_backend": "flashinfer_ucache",
    }
    assert env["VLLM_GDN_UCACHE_MODULE"] == str(ROOT / "kernels/gdn_ucache_flush.py")
    assert (ROOT / "kernels/gdn_ucache_flush.py").is_file()
    _, env = plan.backend_engine_args(plan.BACKENDS["ucache_flashinfer"])
    assert env["VLLM_GDN_UCACHE_MODULE"] == "${GDN_FLASHINFER_UCACHE_MODULE}"


def test_unset_kernel_variable_leaves_vllm_default(monkeypatch: pytest.MonkeyPatch) -> None:
    job = plan.correctness_jobs(["ucache_flashinfer"], ["eager"], ["tiny-agree"])[0]
    monkeypatch.delenv("GDN_FLASHINFER_UCACHE_MODULE", raising=False)
    assert "VLLM_GDN_UCACHE_MODULE" not in e2e.job_env(job)
    monkeypatch.setenv("GDN_FLASHINFER_UCACHE_MODULE", "/x/k.py")
    assert e2e.job_env(job)["VLLM_GDN_UCACHE_MODULE"] == "/x/k.py"


def test_correctness_plan_covers_every_backend_and_mode() -> None:
    jobs = plan.suite_jobs("correctness", list(plan.BACKENDS), None, 1, "/t")
    assert {(j.backend, j.mode) for j in jobs} == {
        (b, m) for b in plan.BACKENDS for m in plan.MODES
    }
    assert all(j.num_requests >= 64 and j.max_tokens >= 256 for j in jobs)
    modes = {j.mode: j for j in jobs if j.backend == "nospec"}
    assert modes["eager"].engine["enforce_eager"] is True
    assert modes["full_graphs"].engine["compilation_config"]["cudagraph_mode"] == (
        "FULL_DECODE_ONLY"
    )
    assert modes["piecewise_compile"].engine["compilation_config"]["cudagraph_mode"] == (
        "PIECEWISE"
    )
    assert modes["prefix_caching"].engine["enable_prefix_caching"] is True
    assert modes["prefix_caching"].prompts == "shared_prefix"
    refused = {j.backend for j in jobs if j.mode == "prefix_caching" and j.expect_error}
    assert refused == {"replay_triton", "ucache_flashinfer", "ucache_ours"}
    assert "num_gpu_blocks_override" in modes["preemption"].engine
    # Every correctness engine shares the GPU: fixed KV budget, no memory profiling.
    assert all(j.engine["kv_cache_memory_bytes"] == 2 << 30 for j in jobs)


def test_smoke_plan_runs_both_acceptance_levels() -> None:
    jobs = plan.suite_jobs("smoke", ["nospec", "native"], None, 1, "/t")
    assert {j.model for j in jobs} == {"tiny-agree", "tiny-reject"}
    # Smoke and correctness run in one invocation: their job keys (files) must differ.
    both = jobs + plan.suite_jobs("correctness", ["nospec", "native"], ["eager"], 1, "/t")
    assert len({j.key for j in both}) == len(both)


def test_speed_plan_captures_exactly_the_sweep_sizes() -> None:
    jobs = plan.suite_jobs("speed", ["nospec", "native"], None, 1, "/t")
    assert {j.model for j in jobs} == {"geom-35b-agree", "geom-35b-reject"}
    assert [(j.model, j.backend) for j in jobs if j.backend == "nospec"] == [
        ("geom-35b-agree", "nospec")
    ], "the -reject checkpoint has the same target: one nospec run"
    sizes = jobs[0].engine["compilation_config"]["cudagraph_capture_sizes"]
    for b in plan.SPEED_BATCHES:
        assert b in sizes and 4 * b in sizes
    assert jobs[0].engine["max_num_seqs"] == 256 and jobs[0].batches == plan.SPEED_BATCHES


def test_speed_output_length_and_deep_model_options() -> None:
    """--speed-max-tokens reaches every speed job (default unchanged: 128); a prompt plus output
    longer than the speed engines' max_model_len raises it; --speed-models takes the 40-layer
    checkpoints."""
    base = ["run", "--suite", "speed", "--models-dir", "m", "--out", "o"]
    assert e2e.parse_args(base).speed_max_tokens == plan.SPEED_MAX_TOKENS == 128
    args = e2e.parse_args(
        base + ["--speed-max-tokens", "512", "--speed-models", "geom-35b-deep-reject"]
    )
    jobs = plan.suite_jobs(
        "speed",
        ["native", "ucache_ours"],
        None,
        1,
        "/t",
        speed_models=args.speed_models,
        speed_max_tokens=args.speed_max_tokens,
    )
    assert [(j.model, j.backend, j.max_tokens) for j in jobs] == [
        ("geom-35b-deep-reject", "native", 512),
        ("geom-35b-deep-reject", "ucache_ours", 512),
    ]
    assert all(j.engine["max_model_len"] == 1024 for j in jobs)
    (default,) = plan.suite_jobs("speed", ["native"], None, 1, "/t", speed_models=["x-reject"])
    assert default.max_tokens == 128 and default.engine["max_model_len"] == 1024
    (long,) = plan.speed_jobs(["native"], ["x-reject"], max_tokens=1000)
    assert long.engine["max_model_len"] == plan.SPEED_PROMPT_TOKENS + 1000
    assert {len(p) for p in plan.make_prompts("speed", 4, 4096)} == {plan.SPEED_PROMPT_TOKENS}
    with pytest.raises(SystemExit):
        e2e.parse_args(base + ["--speed-max-tokens", "1"])


def test_models_command_builds_only_the_asked_levels(tmp_path: Path) -> None:
    assert e2e.main(["models", str(tmp_path), "--models", "tiny", "--acceptance", "reject"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["tiny-reject"]


def test_state_column_of_the_deep_model_scales_with_its_gdn_layers() -> None:
    """The memory column takes the GDN layer count from the model's config: geom-35b-deep has
    30 GDN layers, geom-35b 6, so every backend's state per request is 5x."""
    results = [
        speed_result(b, [1.0], model=m)
        for m in ("geom-35b-reject", "geom-35b-deep-reject")
        for b in ("native", "replay_triton", "ucache_ours")
    ]
    state = e2e.state_bytes_for(results, None)
    if not state:
        pytest.skip("the series' calculator is unavailable (vllm/ not populated)")
    for backend in ("native", "replay_triton", "ucache_ours"):
        shallow = state[("geom-35b-reject", backend)]
        assert state[("geom-35b-deep-reject", backend)] == pytest.approx(5 * shallow)
    assert state[("geom-35b-reject", "native")] == pytest.approx(48.56, abs=0.01)


def test_27b_deep_model_runs_and_its_state_column(tmp_path: Path) -> None:
    """geom-27b-deep: the models command accepts it (checked by name, nothing built), the speed
    suite takes its checkpoints, and its GDN state per request is 1.5x the 8-layer geom-27b's
    (9 vs 6 GDN layers): native 109.05 MiB, replay_triton 32.61, ucache 19.11 (B=256: 27.3,
    8.2 and 4.8 GiB)."""
    from tools.e2e import make_models

    assert "geom-27b-deep" in make_models.MODELS
    with pytest.raises(SystemExit):
        e2e.main(["models", str(tmp_path), "--models", "geom-27b-dep", "--acceptance", "reject"])
    args = e2e.parse_args(
        ["run", "--suite", "speed", "--models-dir", "m", "--out", "o"]
        + ["--speed-models", "geom-27b-deep-reject", "--speed-max-tokens", "512"]
        + ["--backends", "native,ucache_ours", "--batches", "1,32,256"]
    )
    jobs = plan.suite_jobs(
        "speed",
        args.backends,
        None,
        1,
        "/t",
        speed_models=args.speed_models,
        batches=args.batches,
        speed_max_tokens=args.speed_max_tokens,
    )
    assert [(j.model, j.backend, j.batches) for j in jobs] == [
        ("geom-27b-deep-reject", "native", (1, 32, 256)),
        ("geom-27b-deep-reject", "ucache_ours", (1, 32, 256)),
    ]
    backends = ("nospec", "native", "replay_triton", "ucache_ours", "ucache_flashinfer")
    results = [
        speed_result(b, [1.0], model=m)
        for m in ("geom-27b-reject", "geom-27b-deep-reject")
        for b in backends
    ]
    state = e2e.state_bytes_for(results, None)
    if not state:
        pytest.skip("the series' calculator is unavailable (vllm/ not populated)")
    for backend in backends:
        shallow = state[("geom-27b-reject", backend)]
        assert state[("geom-27b-deep-reject", backend)] == pytest.approx(1.5 * shallow)
    deep = {b: state[("geom-27b-deep-reject", b)] for b in backends}
    assert deep["native"] == pytest.approx(109.05, abs=0.01)
    assert deep["replay_triton"] == pytest.approx(32.61, abs=0.01)
    assert deep["ucache_ours"] == pytest.approx(deep["ucache_flashinfer"])
    assert deep["ucache_ours"] == pytest.approx(19.11, abs=0.01)


def test_prompts_are_deterministic_and_mixed() -> None:
    a = plan.make_prompts("mixed", 64, 2048)
    assert a == plan.make_prompts("mixed", 64, 2048)
    assert len({len(p) for p in a}) >= 5 and all(3 <= t < 2048 for p in a for t in p)
    shared = plan.make_prompts("shared_prefix", 16, 2048)
    assert shared[0][:272] == shared[4][:272]
    with pytest.raises(ValueError):
        plan.make_prompts("nope", 1, 10)


def spec_backend_source() -> str | None:
    for ref in ("gdn-ucache", "ucache-wip"):
        shown = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT / "vllm"),
                "show",
                f"{ref}:vllm/model_executor/layers/mamba/gdn/spec_backend.py",
            ],
            capture_output=True,
            text=True,
        )
        if shown.returncode == 0:
            return shown.stdout
    return None


def test_badconfig_expectations_match_the_designed_messages() -> None:
    """The regexes match messages built the way spec_backend.py builds them."""
    jobs = {j.mode: j for j in plan.badconfig_jobs("tiny-agree", "/t")}
    samples = {
        "T=3": "1 + num_speculative_tokens is 3; the kernel supports T in (4, 8) "
        "(num_speculative_tokens 3, 7)",
        "missing-module": "VLLM_GDN_UCACHE_MODULE='/t/no_such_kernel.py' does not exist; point",
        "pre-ring-module": "/t/pre_ring/gdn_ucache_flush.py has RING_SLOTS = 16; vLLM needs",
        "float32-state": "--mamba-ssm-cache-dtype float32 is not a ucache checkpoint dtype",
    }
    import re

    for mode, text in samples.items():
        assert re.search(jobs[mode].expect_error, text), mode
    source = spec_backend_source()
    if source is None:
        pytest.skip("the ucache series (spec_backend.py) is not in vllm/")
    assert "the kernel supports T in" in source and "is not a ucache" in source
    assert "has {found}; vLLM needs a ring build" in source


def test_pre_ring_module_differs_only_in_ring_slots(tmp_path: Path) -> None:
    e2e.pre_ring_module(tmp_path)
    text = (tmp_path / "pre_ring/gdn_ucache_flush.py").read_text()
    assert "\nRING_SLOTS = 16" in text and "\nRING_SLOTS = 32" not in text


# ----------------------------------------------------------------------------- judgement


def test_first_divergence() -> None:
    assert report.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert report.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert report.first_divergence([1, 2, 3], [1, 2]) == 2


def test_compare_identical_bounded_and_diverging() -> None:
    ref = {"tokens": [[1, 2, 3, 4]] * 20, "margins": [[2.0, 0.01, 3.0, 3.0]] * 20}
    same = report.compare_outputs("b", ref, {"tokens": [[1, 2, 3, 4]] * 20})
    assert same.verdict == "identical" and same.identical == 20
    # One request diverges where the reference's top-2 margin is a rounding tie.
    tie = report.compare_outputs("b", ref, {"tokens": [[1, 9, 9, 9]] + [[1, 2, 3, 4]] * 19})
    assert tie.verdict == "bounded"
    assert tie.divergences[0].position == 1 and tie.divergences[0].reference_margin == 0.01
    # A divergence at a clear margin is a bug, not rounding.
    bug = report.compare_outputs("b", ref, {"tokens": [[1, 2, 9, 9]] + [[1, 2, 3, 4]] * 19})
    assert bug.verdict == "DIVERGES"
    # Many tie divergences are still ties: the count is reported, the margin decides.
    many = report.compare_outputs("b", ref, {"tokens": [[1, 9, 9, 9]] * 15 + [[1, 2, 3, 4]] * 5})
    assert many.verdict == "bounded" and "15 request(s)" in many.note
    short = report.compare_outputs("b", ref, {"tokens": [[1]]})
    assert short.verdict == "error"


def test_native_spec_is_the_labelled_control() -> None:
    """vLLM's native spec path is labelled `control` (its ties are measured, not judged) and its
    divergence count is printed beside the other backends; a clear-margin divergence fails."""
    n = 20
    ref = {"tokens": [[1, 2, 3, 4]] * n, "margins": [[2.0, 0.0, 3.0, 3.0]] * n}

    def job(backend: str, output: dict) -> dict:
        return {
            "job": {"suite": "correctness", "model": "m", "mode": "eager", "backend": backend},
            "status": "ok",
            "output": output,
        }

    rows = report.judge_correctness(
        [
            job("nospec", ref),
            job("native", {"tokens": [[1, 9, 9, 9]] * 10 + [[1, 2, 3, 4]] * 10}),
            job("ucache_ours", {"tokens": [[1, 9, 9, 9]] * 12 + [[1, 2, 3, 4]] * 8}),
            job("replay_triton", {"tokens": [[1, 2, 9, 9]] + [[1, 2, 3, 4]] * (n - 1)}),
        ]
    )
    by = {r["backend"]: r for r in rows}
    assert {b: r["verdict"] for b, r in by.items()} == {
        "nospec": "reference",
        "native": "control",
        "ucache_ours": "bounded",
        "replay_triton": "DIVERGES",  # a clear-margin divergence is never rounding
    }
    assert "[native: 10 request(s) diverge" in by["ucache_ours"]["note"]


def test_acceptance_from_counters() -> None:
    acc = report.acceptance(
        {
            "spec_decode_num_drafts": 100,
            "spec_decode_num_draft_tokens": 300,
            "spec_decode_num_accepted_tokens": 210,
            "spec_decode_num_accepted_tokens_per_pos": [90, 70, 50],
        }
    )
    assert acc["tokens_per_step"] == pytest.approx(3.1)
    assert acc["draft_acceptance_rate"] == pytest.approx(0.7)
    assert acc["per_position"] == [0.9, 0.7, 0.5]
    assert report.acceptance({}) is None


def synthetic_results() -> list[dict]:
    def res(suite, model, mode, backend, **kw):
        return {
            "job": {
                "suite": suite,
                "model": model,
                "mode": mode,
                "backend": backend,
                "engine": {"tensor_parallel_size": 1},
            },
            "status": "ok",
            **kw,
        }

    toks = [[5, 6, 7, 8]] * 4
    out = [
        res(
            "correctness",
            "tiny-agree",
            "eager",
            "nospec",
            output={"tokens": toks, "margins": [[1.0] * 4] * 4},
        ),
        res(
            "correctness",
            "tiny-agree",
            "eager",
            "native",
            output={"tokens": toks},
            metrics={"spec_decode_num_drafts": 10, "spec_decode_num_accepted_tokens": 20},
        ),
        res(
            "correctness",
            "tiny-agree",
            "eager",
            "ucache_ours",
            output={"tokens": [[5, 6, 0, 0]] + toks[1:]},
        ),
        res("correctness", "tiny-agree", "prefix_caching", "replay_triton"),
    ]
    out[-1] |= {"status": "init-error", "error": "ValueError: does not support prefix caching"}
    for backend, scale in (("nospec", 1.0), ("native", 1.5), ("ucache_ours", 3.0)):
        out.append(
            res(
                "speed",
                "geom-35b-agree",
                "graphs",
                backend,
                speed=[{"batch": b, "decode_tok_s": scale * 100 * b} for b in (1, 8)],
            )
        )
    out.append(
        {
            "job": {
                "suite": "badconfig",
                "model": "tiny-agree",
                "mode": "T=3",
                "backend": "ucache_ours",
                "engine": {},
            },
            "status": "expected-error",
            "error": "ValueError: ... T in (4, 8)",
        }
    )
    return out


def test_markdown_and_plot(tmp_path: Path) -> None:
    results = synthetic_results()
    rows = {(r["mode"], r["backend"]): r for r in report.judge_correctness(results)}
    assert rows[("eager", "native")]["verdict"] == "identical"
    assert rows[("eager", "native")]["acceptance"]["tokens_per_step"] == pytest.approx(3.0)
    assert rows[("eager", "ucache_ours")]["verdict"] == "DIVERGES"
    assert rows[("prefix_caching", "replay_triton")]["verdict"] == "init-error"
    speed = {(r["batch"], r["backend"]): r for r in report.speed_rows(results)}
    assert speed[(8, "ucache_ours")]["vs_native"] == pytest.approx(2.0)
    assert speed[(8, "ucache_ours")]["vs_nospec"] == pytest.approx(3.0)
    # The reject checkpoint's nospec is the agree one's (same target model).
    rej = [r for r in results if r["job"]["suite"] == "speed" and r["job"]["backend"] == "native"]
    rej = [{**rej[0], "job": {**rej[0]["job"], "model": "geom-35b-reject"}}]
    rows = {(r["model"], r["batch"]): r for r in report.speed_rows(results + rej)}
    assert rows[("geom-35b-reject", 8)]["vs_nospec"] == pytest.approx(1.5)
    text = report.markdown(results, {("geom-35b-agree", "native"): 12.5}, command="x")
    assert "| tiny-agree | eager | ucache_ours | DIVERGES |" in text
    assert "| geom-35b-agree | 8 | native | 1200 | - | 1.00 | 1.50 | 12.50 |" in text
    assert "| T=3 | expected-error |" in text
    assert report.plot_speed(results, tmp_path / "speed.png")
    assert (tmp_path / "speed.png").stat().st_size > 1000


def speed_result(backend: str, samples: list[float] | None, model: str = "m-reject") -> dict:
    point = {"batch": 8, "decode_tok_s": sorted(samples or [100.0])[len(samples or [0]) // 2]}
    if samples is not None:
        point["samples"] = [{"decode_tok_s": x} for x in samples]
    return {
        "job": {
            "suite": "speed",
            "model": model,
            "backend": backend,
            "mode": "graphs",
            "engine": {"tensor_parallel_size": 1},
        },
        "status": "ok",
        "speed": [point],
    }


def test_speed_table_shows_the_sample_range_and_marks_noise() -> None:
    """A ratio to native whose samples overlap native's samples is marked (noise); one whose
    range lies apart is not; a point without samples (session 2's files) shows "-"."""
    results = [
        speed_result("native", [1871, 2147, 2431, 2000, 2200]),
        speed_result("ucache_ours", [1321, 1360, 2090, 1400, 1350]),  # overlaps native
        speed_result("replay_triton", [1000, 1100, 1050]),  # entirely below native
        speed_result("ucache_flashinfer", None),  # no samples
    ]
    rows = {r["backend"]: r for r in report.speed_rows(results)}
    assert rows["ucache_ours"]["vs_native_within_noise"] is True
    assert rows["replay_triton"]["vs_native_within_noise"] is False
    assert rows["ucache_flashinfer"]["vs_native_within_noise"] is None
    assert rows["native"]["vs_native_within_noise"] is None
    assert (rows["ucache_ours"]["samples_min"], rows["ucache_ours"]["samples_max"]) == (1321, 2090)
    text = report.markdown(results)
    assert (
        "| m-reject | 8 | ucache_ours | 1360 | 1321-2090 (1.58x) | 0.63 (noise) | - | - |" in text
    )
    assert "| m-reject | 8 | replay_triton | 1050 | 1000-1100 (1.10x) | 0.49 | - | - |" in text
    assert "| m-reject | 8 | ucache_flashinfer | 100 | - | 0.05 | - | - |" in text
    assert "| m-reject | 8 | native | 2147 | 1871-2431 (1.30x) | 1.00 | - | - |" in text
    # Without native in the run there is nothing to compare with: no mark.
    alone = report.markdown(results[1:2])
    assert "| 1321-2090 (1.58x) | - | - | - |" in alone


COMMITTED = sorted((ROOT / "results/e2e").glob("e2e-h200-*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_results_still_render(path: Path) -> None:
    """Every committed result file re-renders with the sample column: files before session 3
    have no samples ("-"), later ones have them."""
    results = report.load_results([path])
    text = report.markdown(results)
    rows = report.speed_rows(results)
    if not rows:
        pytest.skip("no speed results in this file")
    assert "| samples |" in text
    with_samples = [r for r in rows if r["samples"]]
    if "session2" in path.stem:
        assert not with_samples and "| - | 1.00 |" in text
    else:
        assert len(with_samples) == len(rows)
        assert all(r["samples_min"] <= r["decode_tok_s"] <= r["samples_max"] for r in rows)


def test_report_command_renders_committed_json(tmp_path: Path) -> None:
    path = tmp_path / "e2e-x.json"
    path.write_text(
        json.dumps({"command": "python3 bench/e2e.py run ...", "results": synthetic_results()})
    )
    assert e2e.main(["report", str(path), "--out", str(tmp_path), "--name", "e2e"]) == 0
    assert "Decode speed" in (tmp_path / "e2e.md").read_text()
    assert (tmp_path / "e2e.png").is_file()


# ----------------------------------------------------------------------------- robustness


def test_parent_survives_failing_workers(tmp_path: Path) -> None:
    """No GPU/vLLM here: every worker fails at init; the run records it and finishes."""
    from tools.e2e import make_models

    models = tmp_path / "models"
    for name in ("tiny-agree", "tiny-reject"):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text(
            json.dumps(make_models.make_config(make_models.MODELS["tiny"]))
        )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/e2e.py"),
            "run",
            "--suite",
            "smoke",
            "--suite",
            "badconfig",
            "--backends",
            "nospec,native",
            "--models-dir",
            str(models),
            "--out",
            str(out),
            "--jobs",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((out / "e2e-smoke-badconfig.json").read_text())
    statuses = {
        (r["job"]["suite"], r["job"]["model"], r["job"]["backend"], r["job"]["mode"]): r["status"]
        for r in data["results"]
    }
    assert len(statuses) == 4 + 4
    for (suite, *_), status in statuses.items():
        if suite == "badconfig":
            # No vLLM here, so no ucache backend: refused before any engine starts.
            assert status == "unavailable"
        else:
            assert status == "init-error"
    assert sorted(p.name for p in out.iterdir()) == [
        "e2e-smoke-badconfig.json",
        "e2e-smoke-badconfig.md",
        "logs-e2e-smoke-badconfig.tar.xz",
    ], "at most 8 files come back from $OUT (no PNG without speed results)"
    assert "Jobs that did not complete" in (out / "e2e-smoke-badconfig.md").read_text()


# ----------------------------------------------------------------------------- real vLLM (CPU)

ENGINE_CHECK = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tools.e2e import plan
from vllm.config import CompilationConfig
from vllm.engine.arg_utils import EngineArgs
import dataclasses
fields = {f.name for f in dataclasses.fields(EngineArgs)}
jobs = (plan.suite_jobs("correctness", list(plan.BACKENDS), None, 1, "/t")
        + plan.suite_jobs("speed", list(plan.BACKENDS), None, 1, "/t")
        + plan.badconfig_jobs("tiny-agree", "/t"))
unknown = sorted({k for j in jobs for k in j.engine if k not in fields})
for j in jobs:
    if "compilation_config" in j.engine:
        CompilationConfig(**j.engine["compilation_config"])
job = plan.correctness_jobs(["native"], ["eager"], ["tiny-agree"])[0]
engine = {k: v for k, v in job.engine.items() if k != "kv_cache_memory_bytes"}
cfg = EngineArgs(model=sys.argv[2], skip_tokenizer_init=True, **engine).create_engine_config()
print(json.dumps({"unknown": unknown, "text_config": type(cfg.model_config.hf_text_config).__name__,
                  "arch": cfg.model_config.architecture,
                  "ssm_dtype": str(cfg.cache_config.mamba_ssm_cache_dtype),
                  "spec": cfg.speculative_config.method}))
"""


@pytest.mark.container
def test_engine_arguments_against_the_real_vllm(tmp_path: Path) -> None:
    """With the container check's venv (the pinned vllm wheel + the series, CPU), every job's
    engine arguments exist and the constructed tiny checkpoint resolves to Qwen3.5 + MTP."""
    from tools.container.check import venv_dir, venv_lock
    from tools.e2e import make_models
    from tools.series.layout import default_layout

    python = venv_dir(default_layout()) / "bin/python"
    if not python.exists():
        pytest.skip(f"no {python} (scripts/check-container-install.sh builds it)")
    model = make_models.write_model(tmp_path, make_models.MODELS["tiny"], "agree")
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    with venv_lock(default_layout()):  # the container check re-patches this venv's vllm
        proc = subprocess.run(
            [str(python), "-c", ENGINE_CHECK, str(ROOT), str(model)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "unknown": [],
        "text_config": "Qwen3_5TextConfig",
        "arch": "Qwen3_5ForCausalLM",
        "ssm_dtype": "float32",
        "spec": "mtp",
    }


def test_missing_model_is_reported(tmp_path: Path) -> None:
    job = plan.correctness_jobs(["nospec"], ["eager"], ["tiny-agree"])[0]
    result = tmp_path / "r.json"
    assert e2e.run_worker(job.to_dict(), tmp_path / "nomodels", result) == 0
    data = json.loads(result.read_text())
    assert data["status"] == "missing-model" and "bench/e2e.py models" in data["error"]


# ----------------------------------------------------------------------------- worker, fake engine


class _Logprob:
    def __init__(self, value: float) -> None:
        self.logprob = value


class _Completion:
    def __init__(self, tokens: list[int], logprobs) -> None:
        self.token_ids = tokens
        self.logprobs = logprobs


class _Output:
    def __init__(self, tokens: list[int], logprobs, prompt_logprobs=None) -> None:
        self.outputs = [_Completion(tokens, logprobs)]
        self.prompt_logprobs = prompt_logprobs


class _Counter:
    def __init__(self, name: str, value: int) -> None:
        self.name, self.value = name, value


class _Vector:
    def __init__(self, name: str, values: list[int]) -> None:
        self.name, self.values = name, values


class FakeLLM:
    """generate(): token t+1 follows t (argmax, logprob -0.1; anything else -2.6); counters grow
    like a spec run accepting 2 of 3. `wrong_at`: the decode path emits t+2 at that position."""

    def __init__(self, wrong_at: int | None = None) -> None:
        self.steps = 0
        self.wrong_at = wrong_at

    def generate(self, inputs, sp, use_tqdm=False):
        outs = []
        for item in inputs:
            ids = item["prompt_token_ids"]
            tokens, last = [], ids[-1]
            for i in range(sp.max_tokens):
                last = (last + (2 if i == self.wrong_at else 1)) % 2048
                tokens.append(last)
            logprobs = (
                [{t: _Logprob(-0.1), t + 1: _Logprob(-2.6)} for t in tokens]
                if sp.logprobs
                else None
            )
            prompt_logprobs = None
            if getattr(sp, "prompt_logprobs", None):
                prompt_logprobs = [None] + [
                    {ids[j - 1] + 1: _Logprob(-0.1)}
                    | ({} if ids[j] == ids[j - 1] + 1 else {ids[j]: _Logprob(-2.6)})
                    for j in range(1, len(ids))
                ]
            outs.append(_Output(tokens, logprobs, prompt_logprobs))
            self.steps += sp.max_tokens
        return outs

    def get_metrics(self):
        drafts = self.steps // 3
        return [
            _Counter("vllm:spec_decode_num_drafts", drafts),
            _Counter("vllm:spec_decode_num_draft_tokens", 3 * drafts),
            _Counter("vllm:spec_decode_num_accepted_tokens", 2 * drafts),
            _Vector("vllm:spec_decode_num_accepted_tokens_per_pos", [drafts, drafts, 0]),
            _Counter("vllm:num_preemptions", 0),
        ]


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch):
    import types

    class SamplingParams:
        def __init__(self, **kw) -> None:
            self.__dict__.update(kw)
            self.logprobs = kw.get("logprobs")

    module = types.ModuleType("vllm")
    module.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_measure_correctness_with_a_fake_engine(fake_vllm) -> None:
    job = plan.suite_jobs("smoke", ["nospec"], None, 1, "/t")[0].to_dict()
    result: dict = {}
    e2e._measure(FakeLLM(), job, {"vocab_size": 2048}, result, lambda: None)
    out = result["output"]
    assert len(out["tokens"]) == 16 and all(len(t) == 64 for t in out["tokens"])
    assert out["margins"][0][0] == pytest.approx(2.5)
    acc = report.acceptance(result["metrics"])
    assert acc["tokens_per_step"] == pytest.approx(3.0, rel=0.05)
    assert result["metrics"]["num_preemptions"] == 0
    # Every emitted token is the prefill argmax.
    assert result["prefill_check"] == {
        "tokens": 16 * 64,
        "off_argmax": 0,
        "max_gap": 0.0,
        "first_off": [],
    }


def test_prefill_check_catches_an_off_argmax_token(fake_vllm) -> None:
    """A decode path that emits a non-argmax token (here at position 5 of every request) is
    caught at that position even though the greedy run goes on consistently after it."""
    job = plan.suite_jobs("smoke", ["ucache_ours"], None, 1, "/t")[0].to_dict()
    result: dict = {}
    e2e._measure(FakeLLM(wrong_at=5), job, {"vocab_size": 2048}, result, lambda: None)
    check = result["prefill_check"]
    assert check["off_argmax"] == 16 and check["max_gap"] == pytest.approx(2.5)
    assert {pos for _, pos, _ in check["first_off"]} == {5}
    assert report.prefill_cell(check) == "16/1024 (max 2.500)"


def test_measure_speed_with_a_fake_engine(fake_vllm) -> None:
    job = plan.suite_jobs("speed", ["native"], None, 1, "/t", batches=(1, 8))[0].to_dict()
    result: dict = {}
    e2e._measure(FakeLLM(), job, {"vocab_size": 4096}, result, lambda: None)
    assert [p["batch"] for p in result["speed"]] == [1, 8]
    assert all(p["decode_tok_s"] > 0 for p in result["speed"])
    assert result["metrics"]["spec_decode_num_drafts"] > 0


@pytest.mark.container
def test_every_job_config_validates_with_the_patched_vllm(tmp_path: Path) -> None:
    """tools.e2e.config_check in the container check's venv (pinned wheel + the series): every
    engine that must start validates; every bad configuration fails with its designed message."""
    from tools.container.check import venv_dir, venv_lock
    from tools.e2e import make_models
    from tools.series.layout import default_layout

    python = venv_dir(default_layout()) / "bin/python"
    if not python.exists():
        pytest.skip(f"no {python} (scripts/check-container-install.sh builds it)")
    make_models.write_model(tmp_path, make_models.MODELS["tiny"], "agree")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    with venv_lock(default_layout()):  # the container check re-patches this venv's vllm
        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.util as u; print(u.find_spec("
                "'vllm.model_executor.layers.mamba.gdn.spec_backend') is not None)",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        if probe.stdout.strip() != "True":
            pytest.skip("the venv's vllm has no ucache backend yet (re-run the container check)")
        proc = subprocess.run(
            [str(python), "-m", "tools.e2e.config_check", str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=900,
            env=env,
        )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "29/29 as expected" in proc.stdout


def test_resumed_run_clears_the_cut_jobs_of_the_first(tmp_path: Path) -> None:
    """A job cut by the first run's deadline and completed by the resumed run is one completed
    job; a job that failed in every input file is still listed as not completed."""
    first, second = synthetic_results()[:2], synthetic_results()[:3]
    first[0] = first[0] | {"status": "timeout"}
    first.append(first[1] | {"job": first[1]["job"] | {"backend": "replay_triton"}})
    first[-1]["status"] = "skipped"
    paths = []
    for name, rows in (("a", first), ("b", second)):
        paths.append(tmp_path / f"e2e-{name}.json")
        paths[-1].write_text(json.dumps({"results": rows}))
    results = report.load_results(paths)
    assert [r["status"] for r in results if r["job"]["backend"] == "nospec"] == ["ok"]
    text = report.markdown(results)
    assert "correctness/tiny-agree/eager/nospec" not in text
    assert "- correctness/tiny-agree/eager/replay_triton: skipped" in text
