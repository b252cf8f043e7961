"""Build the series branch in ``vllm/`` from the base and apply ``patches/`` (git am -3).

Idempotent: patches already on the series branch (same patch-id, in series order) are
skipped, so a second run changes nothing. A series branch with commits that are not in
``patches/`` is never rewritten silently: export them first, or pass ``--reset`` (the old
branch is kept as ``gdn-ucache-backup-<n>``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.series.errors import SeriesError
from tools.series.gitutil import (
    branch_exists,
    commits_between,
    current_branch,
    dirty_files,
    git,
    git_out,
    is_repo,
    operation_in_progress,
    patch_id_of_commit,
    patch_id_of_text,
    rev_parse,
)
from tools.series.layout import BASE_REF, SERIES_BRANCH, Layout, base_branch_for
from tools.series.patchfile import parse_patch, read_series


@dataclass
class SeriesState:
    """How the series branch relates to ``patches/``."""

    repo: Path
    base: str
    patches: list[Path]
    branch_commits: list[str]
    applied: int  # leading patches that are on the branch, in order
    foreign: list[str]  # branch commits after those that are not the next patches


def require_vllm(layout: Layout) -> Path:
    repo = layout.vllm_dir
    if (
        not is_repo(repo)
        or rev_parse(repo, "HEAD") is None
        and not any(
            branch_exists(repo, b)
            for b in (SERIES_BRANCH, base_branch_for(layout.pinned_version()))
        )
    ):
        raise SeriesError(
            f"{repo} is not populated; run scripts/setup.sh (or scripts/populate-vllm.sh) first"
        )
    return repo


def base_commit(layout: Layout, repo: Path) -> str:
    """The commit the series is built on: the pinned release's base branch."""
    branch = base_branch_for(layout.pinned_version())
    commit = rev_parse(repo, f"refs/heads/{branch}")
    if commit is None:
        raise SeriesError(
            f"base branch {branch} is missing in {repo}; run scripts/populate-vllm.sh"
        )
    return commit


def series_base(layout: Layout, repo: Path) -> str:
    """The base the series branch sits on: refs/gdn-ucache/base (set by apply and rebase)
    when it is an ancestor of the branch, else the pinned release's base branch."""
    recorded = rev_parse(repo, BASE_REF)
    tip = rev_parse(repo, f"refs/heads/{SERIES_BRANCH}")
    if recorded and tip:
        on_branch = git(repo, "merge-base", "--is-ancestor", recorded, tip, check=False)
        if on_branch.returncode == 0:
            return recorded
    return base_commit(layout, repo)


def series_state(layout: Layout, base: str | None = None) -> SeriesState:
    repo = require_vllm(layout)
    base = base or series_base(layout, repo)
    patches = read_series(layout.patches_dir)
    tip = rev_parse(repo, f"refs/heads/{SERIES_BRANCH}")
    commits: list[str] = []
    if tip is not None:
        if git(repo, "merge-base", "--is-ancestor", base, tip, check=False).returncode != 0:
            raise SeriesError(
                f"branch {SERIES_BRANCH} in {repo} is not built on {base[:12]} "
                f"(the pinned base); rebuild it with scripts/apply.sh --reset "
                f"(the old branch is kept) or move it with scripts/rebase.sh"
            )
        commits = commits_between(repo, base, tip)
    applied = 0
    for commit, patch in zip(commits, patches, strict=False):
        if patch_id_of_commit(repo, commit) != patch_id_of_text(repo, parse_patch(patch).diff):
            break
        applied += 1
    return SeriesState(repo, base, patches, commits, applied, commits[applied:])


def _subject(repo: Path, commit: str) -> str:
    return git_out(repo, "log", "-1", "--format=%s", commit)


def _backup_branch(repo: Path) -> str:
    number = 1
    while branch_exists(repo, f"{SERIES_BRANCH}-backup-{number}"):
        number += 1
    name = f"{SERIES_BRANCH}-backup-{number}"
    git(repo, "branch", name, SERIES_BRANCH)
    return name


_FAILED_FILE_PREFIXES = (
    "error: patch failed: ",
    "error: ",
    "CONFLICT (content): Merge conflict in ",
)


def _conflict_report(repo: Path, am_output: str) -> list[str]:
    files = git_out(repo, "diff", "--name-only", "--diff-filter=U").splitlines()
    if not files:
        for line in am_output.splitlines():
            for prefix in _FAILED_FILE_PREFIXES:
                if line.startswith(prefix) and ":" in line[len(prefix) :]:
                    candidate = line[len(prefix) :].split(":")[0].strip()
                    if candidate and " " not in candidate:
                        files.append(candidate)
                    break
    return sorted(set(files))


def validate_patch(patch: Path) -> None:
    """Raise SeriesError naming the file if it is not a well-formed format-patch file."""
    from tools.series.target import parse_diff

    parse_diff(parse_patch(patch).diff, patch.name, allow_binary=True)


def am_one(repo: Path, patch: Path) -> tuple[bool, str]:
    """``git am -3 -k`` one patch; on failure return (False, git's output) with am stopped.

    A corrupt file raises SeriesError before git am starts, so nothing is left half-done.
    """
    validate_patch(patch)
    result = git(repo, "am", "--3way", "--keep", "--quiet", str(patch.resolve()), check=False)
    return result.returncode == 0, (result.stdout + result.stderr)


def apply_series(layout: Layout, reset: bool = False) -> int:
    """Apply the series onto the series branch; return the number of patches applied now."""
    repo = require_vllm(layout)
    busy = operation_in_progress(repo)
    if busy:
        raise SeriesError(
            f"{busy} is in progress in {repo} (a previous apply or edit stopped there); "
            f"finish it (`git -C {repo} am --continue` after fixing) or abort it "
            f"(`git -C {repo} am --abort`), then run again"
        )
    dirty = dirty_files(repo)
    if dirty:
        raise SeriesError(
            f"{repo} has uncommitted changes ({', '.join(dirty[:5])}"
            f"{' ...' if len(dirty) > 5 else ''}); commit or stash them, then run again"
        )
    pinned = base_commit(layout, repo)
    if reset and branch_exists(repo, SERIES_BRANCH):
        backup = _backup_branch(repo)
        print(f"kept the old {SERIES_BRANCH} as {backup}")
        if current_branch(repo) == SERIES_BRANCH:
            git(repo, "checkout", "--quiet", "--detach")
        git(repo, "branch", "--force", SERIES_BRANCH, pinned)
        git(repo, "update-ref", BASE_REF, pinned)
    if not branch_exists(repo, SERIES_BRANCH):
        git(repo, "branch", SERIES_BRANCH, pinned)
        git(repo, "update-ref", BASE_REF, pinned)
    # Normally the pinned base; after `rebase.sh REF` the ref the series was moved onto.
    base = series_base(layout, repo)
    state = series_state(layout, base)
    if state.foreign:
        listed = "\n".join(f"  {c[:12]} {_subject(repo, c)}" for c in state.foreign[:10])
        raise SeriesError(
            f"branch {SERIES_BRANCH} has {len(state.foreign)} commit(s) that are not the next "
            f"patches of patches/series:\n{listed}\n"
            "Save them with scripts/export.sh, or rebuild the branch from patches/ with "
            "scripts/apply.sh --reset (the old branch is kept as a backup). Nothing was changed."
        )
    git(repo, "update-ref", BASE_REF, base)
    if current_branch(repo) != SERIES_BRANCH:
        git(repo, "checkout", "--quiet", SERIES_BRANCH)
    total = len(state.patches)
    for number, patch in enumerate(state.patches, start=1):
        if number <= state.applied:
            print(f"[{number}/{total}] {patch.name}: already applied")
            continue
        ok, output = am_one(repo, patch)
        if not ok:
            files = _conflict_report(repo, output)
            raise SeriesError(
                f"[{number}/{total}] {patch.name} does not apply"
                + (f"; conflicting files: {', '.join(files)}" if files else "")
                + f"\n{output.strip()}\n"
                f"{repo} is on {SERIES_BRANCH} with patches 1..{number - 1} applied and "
                "`git am` stopped at this one. Either resolve the conflicts, `git add` them, "
                f"`git -C {repo} am --continue` and run scripts/export.sh; or undo this patch "
                f"with `git -C {repo} am --abort` (patches 1..{number - 1} stay applied)."
            )
        print(f"[{number}/{total}] {patch.name}: applied")
    if not total:
        print("patches/series is empty: the series branch equals the base")
    return total - state.applied


@dataclass
class CheckLine:
    name: str
    status: str  # "applied", "applies cleanly", "applies with 3-way merge", "fails", "blocked"
    detail: str = ""


def check_series(layout: Layout) -> list[CheckLine]:
    """Report each patch as applied / applies / fails without changing anything in vllm/."""
    state = series_state(layout)
    repo = state.repo
    lines = [CheckLine(p.name, "applied") for p in state.patches[: state.applied]]
    start = state.branch_commits[state.applied - 1] if state.applied else state.base
    if state.foreign:
        # Local commits that are not in patches/: judge the rest against the last good commit.
        lines.append(
            CheckLine(
                f"({len(state.foreign)} local commit(s) not in patches/)",
                "note",
                "checked without them",
            )
        )
    with tempfile.TemporaryDirectory(prefix="series-check-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(repo, "read-tree", start, env=env)
        failed = False
        for patch in state.patches[state.applied :]:
            if failed:
                lines.append(CheckLine(patch.name, "blocked", "an earlier patch fails"))
                continue
            try:
                validate_patch(patch)
            except SeriesError as exc:
                lines.append(CheckLine(patch.name, "fails", str(exc)))
                failed = True
                continue
            path = str(patch.resolve())
            clean = git(repo, "apply", "--cached", "--check", path, env=env, check=False)
            if clean.returncode == 0:
                git(repo, "apply", "--cached", path, env=env)
                lines.append(CheckLine(patch.name, "applies cleanly"))
                continue
            merged = git(repo, "apply", "--cached", "--3way", path, env=env, check=False)
            if merged.returncode == 0:
                lines.append(CheckLine(patch.name, "applies with 3-way merge"))
                continue
            conflicted = git(repo, "diff", "--cached", "--name-only", "--diff-filter=U", env=env)
            files = sorted(set(conflicted.stdout.split())) or _conflict_report(repo, merged.stderr)
            lines.append(CheckLine(patch.name, "fails", "conflicts in " + ", ".join(files)))
            failed = True
    return lines
