"""Run vLLM's own checks on the files the series changes, inside ``vllm/``.

Checks (vLLM's configuration, from its pyproject.toml and .pre-commit-config.yaml): ruff
check, ruff format, typos, the SPDX header check and the forbidden-imports check. The tool
versions are read from ``vllm/.pre-commit-config.yaml`` and installed from PyPI wheels into a
cached venv (``$GDN_UCACHE_CACHE/vllm-lint-<versions>``), so nothing needs GitHub.
"""

from __future__ import annotations

import re
import subprocess
import venv
from pathlib import Path

from tools.series.apply import require_vllm, series_base
from tools.series.errors import SeriesError
from tools.series.gitutil import git_out
from tools.series.layout import Layout

_SPDX_CHECK = """
import sys
sys.path.insert(0, "tools/pre_commit")
from check_spdx_header import SPDXStatus, check_spdx_header_status
bad = [f for f in sys.argv[1:] if check_spdx_header_status(f) != SPDXStatus.COMPLETE]
for f in bad:
    print(f"{f}: missing SPDX header (see vLLM's tools/pre_commit/check_spdx_header.py)")
sys.exit(1 if bad else 0)
"""


def read_precommit_config(repo: Path) -> str:
    """vLLM's .pre-commit-config.yaml, or a SeriesError naming what is missing."""
    path = repo / ".pre-commit-config.yaml"
    if not path.is_file():
        raise SeriesError(
            f"{path} not found: vLLM lint reads its tool versions there; populate vllm/ with "
            "scripts/populate-vllm.sh (or pass a vLLM base that ships the file)"
        )
    return path.read_text()


def hook_versions(repo: Path) -> dict[str, str]:
    """Pinned versions of ruff and typos in vLLM's .pre-commit-config.yaml."""
    config = read_precommit_config(repo)
    versions = {}
    for tool, url in (("ruff", "astral-sh/ruff-pre-commit"), ("typos", "crate-ci/typos")):
        match = re.search(re.escape(url) + r"\s*\n\s*rev:\s*v?([0-9][0-9.]*)", config)
        if not match:
            raise SeriesError(f"cannot find the {tool} version in {repo}/.pre-commit-config.yaml")
        versions[tool] = match.group(1)
    return versions


def global_exclude(repo: Path) -> re.Pattern[str] | None:
    config = read_precommit_config(repo)
    match = re.search(r"^exclude:\s*'([^']*)'", config, flags=re.MULTILINE)
    return re.compile(match.group(1)) if match else None


def lint_venv(layout: Layout, versions: dict[str, str]) -> Path:
    """A cached venv with vLLM's pinned ruff and typos (plus regex for its check scripts)."""
    name = f"vllm-lint-ruff{versions['ruff']}-typos{versions['typos']}"
    home = layout.cache_dir / name
    python = home / "bin" / "python"
    stamp = home / ".complete"
    if not stamp.exists():
        print(f"installing ruff=={versions['ruff']} typos=={versions['typos']} into {home}")
        venv.create(home, with_pip=True, clear=True)
        requirements = [f"ruff=={versions['ruff']}", f"typos=={versions['typos']}", "regex"]
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *requirements], check=True)
        stamp.write_text("\n".join(requirements) + "\n")
    return home / "bin"


def changed_files(layout: Layout) -> list[str]:
    repo = require_vllm(layout)
    base = series_base(layout, repo)
    listed = git_out(repo, "diff", "--name-only", "--diff-filter=d", base, "--").splitlines()
    listed += git_out(repo, "ls-files", "--others", "--exclude-standard").splitlines()
    exclude = global_exclude(repo)
    return [name for name in listed if not (exclude and exclude.match(name))]


def lint_vllm(layout: Layout, files: list[str] | None = None, fix: bool = False) -> int:
    repo = require_vllm(layout)
    files = files or changed_files(layout)
    if not files:
        print("the series changes no files: nothing to lint")
        return 0
    python_files = [name for name in files if name.endswith(".py")]
    tools = lint_venv(layout, hook_versions(repo))
    python = str(tools / "python")
    checks: list[tuple[str, list[str], list[str]]] = [
        (
            "ruff check",
            [str(tools / "ruff"), "check", *([] if fix else ["--no-fix"])],
            python_files,
        ),
        (
            "ruff format",
            [str(tools / "ruff"), "format", *([] if fix else ["--check"])],
            python_files,
        ),
        ("typos", [str(tools / "typos"), "--force-exclude"], files),
        (
            "SPDX header",
            [python, "tools/pre_commit/check_spdx_header.py"]
            if fix
            else [python, "-c", _SPDX_CHECK],
            python_files,
        ),
        (
            "forbidden imports",
            [python, "tools/pre_commit/check_forbidden_imports.py"],
            python_files,
        ),
    ]
    print(f"linting {len(files)} file(s) changed by the series in {repo}")
    failed = []
    for name, command, targets in checks:
        if not targets:
            print(f"{name}: skipped (no files)")
            continue
        result = subprocess.run(
            [*command, *targets], cwd=repo, capture_output=True, text=True, check=False
        )
        if result.returncode == 0:
            print(f"{name}: ok")
        else:
            failed.append(name)
            print(f"{name}: FAILED")
            print((result.stdout + result.stderr).rstrip())
    if failed:
        print(f"vLLM lint failed: {', '.join(failed)}" + ("" if fix else " (try --fix)"))
        return 1
    print("vLLM lint: all ok")
    return 0
