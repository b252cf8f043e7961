"""Run the series' own vLLM tests for its Triton ops on CPU (TRITON_INTERPRET=1).

The files are materialised from the committed patches (``git apply --include``
of the files the series creates), so CI tests exactly what ``patches/`` holds,
without a vLLM checkout or vLLM's dependencies: ``vllm_triton_shim`` binds
``vllm.triton_utils`` to the real Triton. The vLLM test files run unchanged in
a subprocess (the interpreter is chosen when ``triton.jit`` decorates).
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

# Files created by the series that run without the rest of vLLM.
CPU_FILES = (
    "vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py",
    "tests/kernels/mamba/test_gdn_replayssm_spec_decode.py",
)


def materialise(dest: Path) -> list[str]:
    """Apply the series' hunks for CPU_FILES into ``dest``; return those present."""
    present: list[str] = []
    for path in read_series(PATCHES):
        changed = set(parse_patch(path).changed_paths()) & set(CPU_FILES)
        if not changed:
            continue
        includes = [f"--include={name}" for name in sorted(changed)]
        subprocess.run(
            ["git", "apply", *includes, str(path)], cwd=dest, check=True, capture_output=True
        )
        present.extend(name for name in changed if name not in present)
    return present


@pytest.fixture(scope="module")
def series_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to materialise the patches")
    pytest.importorskip("triton", reason="the Triton interpreter runs the series' ops")
    dest = tmp_path_factory.mktemp("series-cpu")
    present = materialise(dest)
    if not any(name.startswith("tests/") for name in present):
        pytest.skip("the series has no CPU-runnable Triton op tests yet")
    return dest


@pytest.mark.parametrize("test_file", [f for f in CPU_FILES if f.startswith("tests/")])
def test_vllm_series_tests_under_triton_interpreter(series_tree: Path, test_file: str) -> None:
    if not (series_tree / test_file).is_file():
        pytest.skip(f"{test_file} is not in the series")
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        GDN_SERIES_VLLM_ROOT=str(series_tree),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.series.vllm_triton_shim",
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "--import-mode=importlib",
            f"--rootdir={series_tree}",
            str(series_tree / test_file),
        ],
        cwd=series_tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    assert result.returncode == 0, f"vLLM tests failed under TRITON_INTERPRET=1:\n{tail}"
    assert " passed" in result.stdout, tail
