"""Judge the series against one vLLM base commit: does each patch apply, and do its tests pass?

The judgement never touches ``vllm/``'s checkout or branches. It runs in a *scratch view*: a
throwaway project root whose ``vllm.pin`` names the base, whose ``patches/`` is the real one,
and whose ``vllm/`` is an empty repository that borrows ``vllm/``'s objects (git alternates)
and has one branch, ``vllm-<label>``, at the base. On that view the foundation's own
``check_series`` (what ``scripts/apply.sh --check`` runs) gives the apply verdict; for the test
verdict the view checks the base out and applies the patches one by one with ``git am -3``
(the foundation's ``am_one``), running the test command after each.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.series.apply import am_one, check_series
from tools.series.errors import SeriesError
from tools.series.gitutil import git, git_out, is_repo, rev_parse
from tools.series.layout import Layout, base_branch_for
from tools.series.patchfile import parse_patch, read_series

# Cell statuses of the matrix, best first. "ok" statuses mean the patch is usable there.
APPLIES = "applies"
MERGES = "applies (3-way)"
CONFLICTS = "conflicts"
FAILS_TESTS = "fails tests"
BROKEN = "broken patch"
BLOCKED = "blocked"
OK_STATUSES = (APPLIES, MERGES)

# The built-in test: serious errors only (syntax, undefined names; syntax only where ruff is
# not installed) in the Python files the patch touches. Catches the commonest silent breakage
# of a 3-way merge or of an upstream rename the patch still uses, in seconds, without vLLM.
STATIC_TEST = "static"
STATIC_RULES = "E9,F63,F7,F82"


@dataclass
class PatchVerdict:
    """One cell of the matrix: one patch on one base."""

    patch: str
    status: str
    detail: str = ""
    files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def to_json(self) -> dict:
        return asdict(self)


def series_patches(layout: Layout) -> list[Path]:
    return read_series(layout.patches_dir)


def series_paths(layout: Layout) -> set[str]:
    """Every file path the series touches (new side of each diff)."""
    paths: set[str] = set()
    for patch in series_patches(layout):
        paths.update(parse_patch(patch).changed_paths())
    return paths


def _objects_dir(repo: Path) -> str:
    common = git_out(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return str(Path(common) / "objects")


@contextmanager
def scratch_view(layout: Layout, base: str, label: str = "scratch") -> Iterator[Layout]:
    """A throwaway project judging ``layout``'s patches on ``base`` (see module doc)."""
    repo = layout.vllm_dir
    if not is_repo(repo):
        raise SeriesError(f"{repo} is not populated; run scripts/setup.sh first")
    commit = rev_parse(repo, base)
    if commit is None:
        raise SeriesError(f"{base!r} is not a commit in {repo}")
    root = Path(tempfile.mkdtemp(prefix="rebase-ci-"))
    try:
        (root / "vllm.pin").write_text(f"VLLM_VERSION={label}\nVLLM_UPSTREAM_COMMIT={commit}\n")
        (root / "patches").symlink_to(layout.patches_dir.resolve(), target_is_directory=True)
        view_repo = root / "vllm"
        view_repo.mkdir()
        git(view_repo, "init", "--quiet")
        alternates = Path(git_out(view_repo, "rev-parse", "--absolute-git-dir"))
        (alternates / "objects" / "info" / "alternates").write_text(_objects_dir(repo) + "\n")
        git(view_repo, "update-ref", f"refs/heads/{base_branch_for(label)}", commit)
        yield Layout(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _verdicts_from_check(layout: Layout) -> list[PatchVerdict]:
    verdicts = []
    for line in check_series(layout):
        if line.status == "note":
            continue
        if line.status in ("applied", "applies cleanly"):
            verdicts.append(PatchVerdict(line.name, APPLIES))
        elif line.status == "applies with 3-way merge":
            verdicts.append(PatchVerdict(line.name, MERGES))
        elif line.status == "blocked":
            verdicts.append(PatchVerdict(line.name, BLOCKED, line.detail))
        elif line.detail.startswith("conflicts in"):
            files = [f.strip() for f in line.detail[len("conflicts in") :].split(",") if f.strip()]
            verdicts.append(PatchVerdict(line.name, CONFLICTS, line.detail, files))
        else:
            verdicts.append(PatchVerdict(line.name, BROKEN, line.detail))
    return verdicts


def _run_test(
    command: str, worktree: Path, patch: Path, label: str, timeout: float
) -> tuple[bool, str]:
    """Run the test command (or the built-in static test) after ``patch``; (passed, log tail)."""
    touched = parse_patch(patch).changed_paths()
    if command == STATIC_TEST:
        python_files = [p for p in touched if p.endswith(".py") and (worktree / p).is_file()]
        if not python_files:
            return True, "no Python files touched"
        if importlib.util.find_spec("ruff") is not None:
            argv = [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated"]
            argv += ["--output-format", "concise", "--select", STATIC_RULES, *python_files]
        else:  # a bare interpreter (before the test venv exists): syntax only
            argv = [sys.executable, "-m", "py_compile", *python_files]
    else:
        argv = ["bash", "-c", command]
    env = dict(os.environ)
    env.update(
        {
            "GDN_SERIES_PATCH": patch.name,
            "GDN_SERIES_PATCH_FILES": " ".join(touched),
            "GDN_VLLM_BASE": label,
        }
    )
    try:
        result = subprocess.run(
            argv, cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s"
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0, "\n".join(output.splitlines()[-15:])


def evaluate_base(
    layout: Layout,
    base: str,
    label: str = "scratch",
    test_command: str | None = None,
    test_timeout: float = 1800.0,
) -> list[PatchVerdict]:
    """Verdict per patch of ``layout``'s series on commit ``base`` of ``layout.vllm_dir``.

    Apply verdicts come from ``check_series``; with ``test_command`` (a bash command run in a
    checkout of the base with patches 1..k applied, or ``"static"``), the first patch whose
    tests fail is marked ``fails tests`` and the rest ``blocked``.
    """
    with scratch_view(layout, base, label) as view:
        verdicts = _verdicts_from_check(view)
        if not test_command or not verdicts:
            return verdicts
        repo = view.vllm_dir
        # git am needs an identity; CI machines often have none configured.
        git(repo, "config", "user.name", "gdn-ucache rebase-ci")
        git(repo, "config", "user.email", "rebase-ci@gdn-ucache.invalid")
        git(repo, "checkout", "--quiet", "--force", base_branch_for(label))
        failed_at: str | None = None
        for verdict, patch in zip(verdicts, series_patches(view), strict=True):
            if not verdict.ok:
                break
            if failed_at:
                verdict.status, verdict.detail = BLOCKED, f"tests fail at {failed_at}"
                continue
            applied, output = am_one(repo, patch)
            if not applied:  # check said it applies; git am disagreeing is a finding too
                verdict.status, verdict.detail = CONFLICTS, output.strip()[-500:]
                failed_at = patch.name
                continue
            passed, log = _run_test(test_command, repo, patch, label, test_timeout)
            if not passed:
                verdict.status, verdict.detail = FAILS_TESTS, log
                failed_at = patch.name
        return verdicts
