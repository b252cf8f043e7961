"""The project's own Python is ruff-clean (lint and format), as the style rules and the
pre-commit hooks require; CI runs this, so a commit made without the hooks still fails here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"]
)
def test_project_is_ruff_clean(args: list[str]) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not on PATH (it is in the test extra: scripts/test.sh puts it there)")
    # pyproject.toml excludes vllm/ (the series is linted by scripts/lint-vllm.sh), .venv, .gpu
    res = subprocess.run([ruff, *args], cwd=REPO, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]
