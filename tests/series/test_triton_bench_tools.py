"""The Triton baseline's benchmark tooling on CPU: patch materialiser, bench logic, GPU script.

bench/bench_triton.py needs a GPU to time anything; here its sweep/grid/report logic runs with
fake kernels and a fake timer, so a typo cannot waste the team's one device call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import bench_triton
from bench.triton_prep import SERIES_FILES, materialise, new_files

ROOT = Path(__file__).resolve().parents[2]
PATCH1 = ROOT / "patches" / "Kernel-GDN-ReplaySSM-speculative-verify-flush-Triton.patch"
GPU_SCRIPT = ROOT / "bench" / "h200_triton.sh"


def test_materialised_files_match_git_apply(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed for the reference")
    ours = tmp_path / "ours"
    materialise(PATCH1, ours)
    ref = tmp_path / "ref"
    ref.mkdir()
    includes = [f"--include={name}" for name in SERIES_FILES]
    subprocess.run(["git", "apply", *includes, str(PATCH1)], cwd=ref, check=True)
    for name in SERIES_FILES:
        assert (ours / name).read_text() == (ref / name).read_text(), name


def test_new_files_ignores_modified_files() -> None:
    patch = (
        "Subject: x\n\n---\n"
        "diff --git a/a.py b/a.py\nindex 1..2 100644\n--- a/a.py\n+++ b/a.py\n"
        "@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/b.py b/b.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/b.py\n"
        "@@ -0,0 +1,2 @@\n+one\n+two\n-- \n2.40\n"
    )
    assert new_files(patch) == {"b.py": "one\ntwo\n"}


def test_materialise_names_a_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.patch"
    empty.write_text("Subject: nothing\n")
    with pytest.raises(SystemExit, match="does not create"):
        materialise(empty, tmp_path / "out")


def test_config_parsing_and_regimes() -> None:
    config = bench_triton.parse_config("128,32,8,2,128")
    assert config == dict(block_v=128, block_k=32, num_warps=8, num_stages=2, max_registers=128)
    assert bench_triton.parse_config("64,32,4,2")["max_registers"] is None
    assert bench_triton.config_name(config) == "v128k32w8s2r128"
    assert bench_triton.config_name(None) == "default"
    with pytest.raises(SystemExit, match="BLOCK_V,BLOCK_K"):
        bench_triton.parse_config("64,4,2")
    # Same thresholds as the op's default table (rows x value heads).
    assert [bench_triton.regime(B, 64) for B in (1, 4, 8, 64, 65)] == [
        "small", "small", "mid", "mid", "large"
    ]  # fmt: skip
    for name in bench_triton.DEFAULT_CONFIGS:
        bench_triton.parse_config(name)


def test_floor_counts_fp32_checkpoint_bytes() -> None:
    f16 = bench_triton.floor_us(256, 16, 32, 4, 0, 2)
    f32 = bench_triton.floor_us(256, 16, 32, 4, 0, 4)
    extra = 256 * 32 * 16384 * 2 / bench_triton.HBM_BYTES_PER_S * 1e6
    assert f32 == pytest.approx(f16 + extra)


class _FakeModule:
    def __init__(self) -> None:
        self.ops: Any = "series op"
        self.LAUNCH_OVERRIDES: dict[str, Any] = {}
        self.seen: list[tuple[Any, dict[str, Any]]] = []

    def gated_delta_rule_mtp_ucache_flush(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append((self.ops, dict(self.LAUNCH_OVERRIDES)))


class _FakeHandle:
    def __init__(self) -> None:
        self.module = _FakeModule()
        self.arm = None
        self.fn = lambda *args, **kwargs: None


class _FakePoint:
    def __init__(self, handle: Any, B: int, H: int, HV: int, T: int, frac: float, seed: int):
        self.n_flush = int(round(frac * B))
        self.args = {"initial_state_source": torch.zeros(2)}

    def call(self, fn: Any) -> None:
        fn()


def _run_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *extra: str, fail_series=False):
    handle = _FakeHandle()
    monkeypatch.setattr(bench_triton, "load_backends", lambda arm, names: {
        "triton_vllm": handle, "flashinfer": _FakeHandle(), "ours": _FakeHandle()})  # fmt: skip
    monkeypatch.setattr(bench_triton, "load_v1_ops", lambda root: "v1 op")
    monkeypatch.setattr(bench_triton, "Point", _FakePoint)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "fake GPU")
    monkeypatch.setattr(torch, "ones", lambda *args, **kwargs: torch.zeros(1))

    class FakeGraph:  # what a capture froze: the arm's time with the config set at capture
        def __init__(self, us: float) -> None:
            self.us = us

    def fake_capture(fn: Any, point: Any, calls: int) -> FakeGraph:
        assert calls == 1, "cold L2: one call per replay"
        if isinstance(fn, bench_triton.TritonArm):
            if fail_series and fn.ops is None:
                raise RuntimeError("CompilationError (fake)")
            fn()
            # Whole heads win at large batches, small tiles at small ones.
            block_v = fn.config.get("block_v") or 48
            return FakeGraph(10.0 + abs(block_v - 16 * (1 + point.n_flush % 8)) * 0.01)
        return FakeGraph(7.0)

    def fake_time_graphs(graphs: dict, scrub: Any, reps: int, calls: int) -> dict[str, float]:
        assert calls == 1
        return {name: g.us for name, g in graphs.items()}

    monkeypatch.setattr(bench_triton, "capture_graph", fake_capture)
    monkeypatch.setattr(bench_triton, "time_graphs", fake_time_graphs)
    v1 = tmp_path / "v1"
    (v1 / bench_triton.OP_FILE).parent.mkdir(parents=True)
    (v1 / bench_triton.OP_FILE).write_text("")
    argv = ["bench_triton.py", "--out", str(tmp_path / "out"), "--warm-workers", "0"]
    argv += ["--hv", "32", "--batch", "1", "256", "--v1-root", str(v1), *extra]
    monkeypatch.setattr(sys, "argv", argv)
    assert bench_triton.main() == 0
    return handle, json.loads((tmp_path / "out" / "bench_triton.json").read_text())


def test_bench_sweeps_chooses_and_reports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    handle, report = _run_bench(monkeypatch, tmp_path)
    chosen = report["chosen_triton_configs"]
    assert set(chosen) == {f"{r}/{c}" for r in ("small", "mid", "large") for c in ("fp32", "fp16")}
    assert report["meta"]["triton_kernel"].startswith("patch 1")
    rows = report["results"]
    assert len(rows) == 2 * 3
    for row in rows:
        assert set(row["us"]) == set(bench_triton.ARMS)
        assert row["x"]["triton_fp32ckpt"] == pytest.approx(
            row["us"]["triton_fp32ckpt"] / row["floor_us"]["fp32ckpt"]
        )
    # The sweep drove the series' op with explicit configs and the session-1 op without.
    seen = handle.module.seen
    assert any(ops == "series op" and cfg.get("block_v") == 128 for ops, cfg in seen)
    assert any(ops == "v1 op" and not cfg for ops, cfg in seen)
    assert handle.module.ops == "series op" and not handle.module.LAUNCH_OVERRIDES
    out = tmp_path / "out"
    for name in ("bench_triton.md", "sweep_triton.md", "sweep_triton.json"):
        assert (out / name).is_file()
    assert " / " in (out / "bench_triton.md").read_text()  # cfg cells: fp32 / fp16 configs
    sweep_md = (out / "sweep_triton.md").read_text()
    assert "v1" in sweep_md and "**" in sweep_md


def test_bench_falls_back_to_v1_when_the_series_kernel_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    handle, report = _run_bench(monkeypatch, tmp_path, fail_series=True)
    assert report["chosen_triton_configs"] == {}
    assert report["meta"]["triton_kernel"].startswith("v1")
    assert all("triton_fp16ckpt" in row["us"] for row in report["results"])


def test_bench_only_v1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    handle, report = _run_bench(monkeypatch, tmp_path, "--only-v1")
    assert report["meta"]["triton_kernel"].startswith("v1")
    assert all(ops == "v1 op" for ops, _ in handle.module.seen)
    assert not (tmp_path / "out" / "sweep_triton.json").exists()


def test_gpu_script_is_strict_and_shellcheck_clean() -> None:
    text = GPU_SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert os.access(GPU_SCRIPT, os.X_OK)
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    result = subprocess.run([shellcheck, str(GPU_SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_gpu_script_runs_through_without_a_gpu(tmp_path: Path) -> None:
    """Without CUDA every step reports instead of failing the script; the layout of $OUT is
    what the lead copies back. The script rebuilds .gpu/series-vllm from patches/."""
    repo = tmp_path / "repo"
    for name in ("bench", "tests", "kernels", "tools", "patches"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, OUT=str(tmp_path / "out"), CUDA_VISIBLE_DEVICES="")
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run(
        ["bash", "bench/h200_triton.sh"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== total" in result.stdout
    out = tmp_path / "out" / "triton"
    assert (out / "vllm_kernel_tests.log").is_file() and (out / "bench.log").is_file()
    for name in SERIES_FILES:
        assert (repo / ".gpu" / "series-vllm" / name).is_file()


def test_results_rebuilt_from_the_committed_run_log(tmp_path: Path) -> None:
    """results/triton was rebuilt from the H200 run's stdout: the parser reads every table."""
    from bench.triton_from_log import config_fields, parse_log

    log = ROOT / "results" / "triton" / "triton.log"
    if not log.is_file():
        pytest.skip("no committed run log")
    sweep_rows, chosen, grid_rows = parse_log(log.read_text())
    assert len(sweep_rows) == 12 and len(grid_rows) == 54
    assert set(chosen) == {f"{r}/{c}" for r in ("small", "mid", "large") for c in ("fp32", "fp16")}
    assert all(len(row["us"]) == len(bench_triton.ARMS) for row in grid_rows)
    assert config_fields("v128k32w8s3r128") == dict(
        block_v=128, block_k=32, num_warps=8, num_stages=3, max_registers=128
    )
    committed = json.loads((log.parent / "bench_triton.json").read_text())
    assert [r["us"] for r in committed["results"]] == [r["us"] for r in grid_rows]
