"""Run the ucache patches' own vLLM tests (series part 2, issue #5) on CPU.

Tree, in order: ``GDN_SERIES_VLLM_ROOT``; the ``vllm/`` submodule when the series is applied
there; the files the committed patches create, materialised with ``git apply --include``; the
session worktree ``/work/vllm-ucache``. Skips with the reason when none holds the files.

* light tests (adapter + resolver, fake kernel files) run through ``vllm_ucache_shim``, needing
  only torch and regex;
* full-tree tests (VllmConfig / EngineArgs on a tiny local Qwen3.5 config, the metadata builder's
  pad rows, the layer dispatch) need vLLM's Python dependencies and a full tree; they skip with the
  reason when ``vllm.config`` cannot be imported (set GDN_SERIES_PYTHON to an interpreter that has
  them, e.g. a vLLM venv).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.series.patchfile import parse_patch, read_series

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"
WORKTREE = Path("/work/vllm-ucache")

LIGHT_SOURCES = (
    "vllm/model_executor/layers/mamba/ops/gdn_ucache_spec.py",
    "vllm/model_executor/layers/mamba/gdn/spec_backend.py",
)
LIGHT_TESTS = (
    "tests/kernels/mamba/test_gdn_ucache_spec.py",
    "tests/kernels/mamba/test_gdn_spec_backend.py",
)
# Need vLLM's Python dependencies and the whole patched tree; the Triton cursor ops run
# interpreted on CPU (CUDA_VISIBLE_DEVICES= keeps vllm.triton_utils on the real Triton).
FULL_TREE_TESTS = (
    "tests/config/test_gdn_spec_backend_config.py",
    "tests/v1/attention/test_gdn_ucache_metadata.py",
    "tests/kernels/mamba/test_gdn_ucache_layer_dispatch.py",
)


def _has(tree: Path, files: tuple[str, ...]) -> bool:
    return all((tree / name).is_file() for name in files)


def _materialise(dest: Path) -> bool:
    """Apply the series' hunks for the light files into ``dest``."""
    wanted = set(LIGHT_SOURCES + LIGHT_TESTS)
    try:
        series = read_series(PATCHES)
    except Exception:  # no series yet
        return False
    for path in series:
        changed = sorted(set(parse_patch(path).changed_paths()) & wanted)
        if changed:
            includes = [f"--include={name}" for name in changed]
            subprocess.run(
                ["git", "apply", *includes, str(path)], cwd=dest, check=True, capture_output=True
            )
    return _has(dest, LIGHT_SOURCES + LIGHT_TESTS)


@pytest.fixture(scope="module")
def light_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("regex", reason="spec_backend uses vLLM's regex dependency")
    explicit = os.environ.get("GDN_SERIES_VLLM_ROOT")
    for tree in (Path(explicit) if explicit else None, ROOT / "vllm"):
        if tree is not None and _has(tree, LIGHT_SOURCES + LIGHT_TESTS):
            return tree
    if shutil.which("git") is not None:
        dest = tmp_path_factory.mktemp("series-ucache")
        if _materialise(dest):
            return dest
    if _has(WORKTREE, LIGHT_SOURCES + LIGHT_TESTS):
        return WORKTREE
    pytest.skip("no tree holds the ucache patches yet (patches/, vllm/, /work/vllm-ucache)")


def _pytest(
    tree: Path, files: tuple[str, ...], shim: bool, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        CUDA_VISIBLE_DEVICES="",
        TRITON_INTERPRET="1",
        GDN_SERIES_VLLM_ROOT=str(tree),
        VLLM_TARGET_DEVICE=os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        # The shim goes by its bare module name: the vLLM tree has its own ``tests`` package.
        PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).parent) if shim else str(tree), os.environ.get("PYTHONPATH", "")]
        ),
    )
    plugins = ["-p", "vllm_ucache_shim"] if shim else []
    return subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            *plugins,
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "--import-mode=importlib",
            f"--rootdir={tree}",
            *[str(tree / name) for name in files],
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_adapter_and_resolver_tests(light_tree: Path) -> None:
    result = _pytest(light_tree, LIGHT_TESTS, shim=True)
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    assert result.returncode == 0, f"ucache vLLM tests failed in {light_tree}:\n{tail}"
    assert " passed" in result.stdout and " skipped" not in result.stdout, tail


def test_full_tree_tests(light_tree: Path) -> None:
    if not _has(light_tree, FULL_TREE_TESTS) or not (light_tree / "vllm" / "config").is_dir():
        pytest.skip(f"{light_tree} is not a full vLLM tree with the ucache patches")
    python = os.environ.get("GDN_SERIES_PYTHON", sys.executable)
    probe = subprocess.run(
        [python, "-c", "import transformers, triton, vllm.config, vllm.engine.arg_utils"],
        cwd=light_tree,
        env=dict(os.environ, PYTHONPATH=str(light_tree), VLLM_TARGET_DEVICE="cpu"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"vLLM's Python dependencies are not importable by {python} ({last})")
    result = _pytest(light_tree, FULL_TREE_TESTS, shim=False, python=python)
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    if "failed to be inspected" in result.stdout and result.returncode != 0:
        pytest.skip(f"vLLM's model registry cannot import Qwen3.5 with {python}:\n{tail}")
    assert result.returncode == 0, f"ucache full-tree tests failed in {light_tree}:\n{tail}"
