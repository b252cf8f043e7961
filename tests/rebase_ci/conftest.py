"""The foundation's synthetic upstream, grown a git history with planted breakage.

On top of the two standard patches (config -> #49887, kernel -> #50380) a third one, "steps",
(#50380) adds a module and a test that rely on ``vllm.engine.run``. Upstream then moves on,
on branch ``upstream-main`` of the project's ``vllm/`` (after base ``vllm-1.0.0``):

====  =====================================================  ================================
 #    upstream commit                                         effect on the series
====  =====================================================  ================================
 u1   README                                                  none
 u2   add vllm/new_module.py                                  none
 u3   engine: run() takes one warm-up step less (TESTS)       patch "steps" fails its test
 u4   tools/run.sh                                            none
 u5   engine: step by INCREMENT (PLANTED)                     patch "kernel" conflicts
 u6   README                                                  none
 u7   add vllm/other.py                                       none
====  =====================================================  ================================

Releases for the matrix (sdists in the private cache): the foundation's 1.0.0 (pinned),
1.1.0 (applies), 1.2.0 (patch "config" conflicts), plus 1.3.0 = u4 (patch "steps" fails
tests) and 1.4.0 = u7 (patch "kernel" conflicts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.synthetic_upstream import (
    SyntheticProject,
    add_standard_patches,
    make_project,
    write_sdist,
)

# The per-patch test command of the fixture: the synthetic upstream's own test functions.
TEST_COMMAND = f"{sys.executable} {Path(__file__).with_name('run_synthetic_tests.py')}"

MESSAGE_STEPS = """\
[Spec Decode] Count ucache steps through the engine

The ucache ring length follows the number of engine steps; this adds the helper and its test.

Upstream-PR: vllm-project/vllm#50380
Drop-when: #50380 is merged and released
Signed-off-by: Test Author <test@example.com>
"""


@dataclass
class GrownUpstream:
    project: SyntheticProject
    commits: dict[str, str]  # u1..u7 -> sha
    patch_names: list[str]  # config, kernel, steps (series order)

    @property
    def planted(self) -> str:
        return self.commits["u5"]

    @property
    def test_breaker(self) -> str:
        return self.commits["u3"]

    def patch(self, short: str) -> str:
        return self.patch_names[["config", "kernel", "steps"].index(short)]


def commit_files(
    project: SyntheticProject, parent: str, message: str, edits: dict[str, tuple[str, str] | str]
) -> str:
    """A commit on top of parent with edits (path -> text or (old, new)), without a checkout."""
    env = project.env()
    with tempfile.TemporaryDirectory() as scratch:
        env["GIT_INDEX_FILE"] = str(Path(scratch) / "index")

        def git(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(
                ["git", "-C", str(project.vllm), *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                check=True,
            ).stdout.strip()

        git("read-tree", parent)
        for path, edit in edits.items():
            if isinstance(edit, tuple):
                old, new = edit
                text = git("cat-file", "blob", f"{parent}:{path}") + "\n"
                assert old in text, f"{old!r} not in {path}"
                text = text.replace(old, new, 1)
            else:
                text = edit
            blob = git("hash-object", "-w", "--stdin", stdin=text)
            git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        tree = git("write-tree")
        return git("commit-tree", tree, "-p", parent, "-m", message)


def sdist_from_commit(project: SyntheticProject, commit: str, version: str) -> None:
    names = project.git("ls-tree", "-r", "--name-only", commit).splitlines()
    files = {name: project.git("cat-file", "blob", f"{commit}:{name}") + "\n" for name in names}
    files["vllm/_version.py"] = (
        f"__version__ = version = '{version}'\n__commit_id__ = commit_id = 'g{commit[:9]}'\n"
    )
    files["PKG-INFO"] = f"Metadata-Version: 2.4\nName: vllm\nVersion: {version}\n"
    write_sdist(project.cache, version, files)


def grow_upstream(tmp_path: Path) -> GrownUpstream:
    project = make_project(tmp_path)
    project.run("populate-vllm")
    add_standard_patches(project)
    project.commit_on_series(
        MESSAGE_STEPS,
        {
            "vllm/ucache_steps.py": "from vllm.engine import run\n\n\ndef ring_steps(n: int) -> "
            "int:\n    return run(n)\n",
            "tests/test_ucache_steps.py": "from vllm.ucache_steps import ring_steps\n\n\n"
            "def test_ring_steps():\n    assert ring_steps(4) == 4\n",
        },
    )
    project.run("export")
    names = [
        line
        for line in (project.patches / "series").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    base = project.git("rev-parse", "vllm-1.0.0")
    steps: list[tuple[str, str, dict]] = [
        ("u1", "[Doc] Reword the README", {"README.md": "# synthetic vLLM, main\n"}),
        ("u2", "[Core] Add new_module", {"vllm/new_module.py": "X = 1\n"}),
        (
            "u3",
            "[Core] run() takes one warm-up step less",
            {
                "vllm/engine.py": (
                    "    for _ in range(steps):\n",
                    "    for _ in range(steps - 1):\n",
                ),
                "tests/test_engine.py": ("run(3) == 3", "run(3) == 2"),
            },
        ),
        ("u4", "[CI] Louder run.sh", {"tools/run.sh": "#!/bin/sh\necho running\n"}),
        (
            "u5",
            "[Core] Step by a configurable increment",
            {
                "vllm/engine.py": (
                    "def step(state: int) -> int:\n    return state + 1\n",
                    "INCREMENT = 1\n\n\n"
                    "def step(state: int) -> int:\n    return state + INCREMENT\n",
                )
            },
        ),
        ("u6", "[Doc] README again", {"README.md": "# synthetic vLLM, main again\n"}),
        ("u7", "[Core] Add other", {"vllm/other.py": "Y = 2\n"}),
    ]
    commits: dict[str, str] = {}
    parent = base
    for label, message, edits in steps:
        parent = commit_files(project, parent, message, edits)
        commits[label] = parent
    project.git("branch", "upstream-main", parent)
    sdist_from_commit(project, commits["u4"], "1.3.0")
    sdist_from_commit(project, commits["u7"], "1.4.0")
    return GrownUpstream(project, commits, names)


@pytest.fixture
def grown(tmp_path: Path) -> GrownUpstream:
    return grow_upstream(tmp_path)


def run_tool(project: SyntheticProject, script: str, *args: str) -> subprocess.CompletedProcess:
    """Run one of this area's scripts against the synthetic project (never the real vllm/)."""
    env = project.env()
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return subprocess.run(
        ["bash", str(Path(__file__).resolve().parents[2] / "scripts" / f"{script}.sh"), *args],
        capture_output=True,
        text=True,
        env={**env, "PATH": os.environ["PATH"]},
        check=False,
    )
