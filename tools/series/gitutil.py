"""Thin, explicit wrappers around the git command line."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from tools.series.errors import SeriesError

# Settings that would make imports or patches differ between machines (user config,
# CRLF conversion, signing, diff prefixes) are pinned for every git call we make.
_PINNED_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.attributesFile=/dev/null",
    "commit.gpgSign=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "format.signature=",
    "format.numbered=auto",
    "am.threeWay=false",
    "am.keepcr=true",  # patches carry CRLF lines of CRLF files verbatim
    "advice.detachedHead=false",
    "init.defaultBranch=main",
    "color.ui=false",
)


@functools.cache
def _fallback_identity() -> dict[str, str]:
    """A committer for git am on machines without user.name/user.email (fresh CI hosts)."""
    probe = subprocess.run(
        ["git", "var", "GIT_COMMITTER_IDENT"], capture_output=True, text=True, check=False
    )
    if probe.returncode == 0:
        return {}
    return {"GIT_COMMITTER_NAME": "gdn-ucache", "GIT_COMMITTER_EMAIL": "series@gdn-ucache.invalid"}


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"})
    for key, value in _fallback_identity().items():
        env.setdefault(key, value)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(key, None)
    if extra:
        env.update(extra)
    return env


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``git -C repo args`` and capture text output; raise SeriesError on failure if check."""
    command = ["git", "-C", str(repo)]
    for setting in _PINNED_CONFIG:
        command += ["-c", setting]
    command += list(args)
    try:
        result = subprocess.run(
            command,
            check=False,
            capture_output=True,
            text=True,
            env=git_env(env),
            input=input_text,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise SeriesError(f"git {' '.join(args)} timed out after {timeout} s") from exc
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise SeriesError(f"git {' '.join(args)} failed in {repo}:\n{detail}")
    return result


def git_out(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return git(repo, *args, env=env).stdout.strip()


def is_repo(path: Path) -> bool:
    return (path / ".git").exists()


def rev_parse(repo: Path, ref: str) -> str | None:
    result = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def branch_exists(repo: Path, branch: str) -> bool:
    return rev_parse(repo, f"refs/heads/{branch}") is not None


def current_branch(repo: Path) -> str | None:
    result = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def dirty_files(repo: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not); untracked files are ignored."""
    out = git(repo, "status", "--porcelain", "--untracked-files=no").stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def operation_in_progress(repo: Path) -> str | None:
    """Name of an unfinished git am/rebase/merge/cherry-pick in repo, if any."""
    git_dir = Path(git_out(repo, "rev-parse", "--absolute-git-dir"))
    if (git_dir / "rebase-apply" / "applying").exists():
        return "git am"
    if (git_dir / "rebase-apply").exists() or (git_dir / "rebase-merge").exists():
        return "git rebase"
    if (git_dir / "MERGE_HEAD").exists():
        return "git merge"
    if (git_dir / "CHERRY_PICK_HEAD").exists():
        return "git cherry-pick"
    return None


def commits_between(repo: Path, base: str, tip: str) -> list[str]:
    """Commits in base..tip, oldest first; refuses merge commits (a series is linear)."""
    out = git_out(repo, "rev-list", "--reverse", "--parents", f"{base}..{tip}")
    commits = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 2:
            raise SeriesError(
                f"{fields[0][:12]} in {base}..{tip} is a merge; the series must be linear"
            )
        commits.append(fields[0])
    return commits


def patch_id_of_text(repo: Path, patch_text: str) -> str | None:
    out = git(repo, "patch-id", "--stable", input_text=patch_text).stdout.split()
    return out[0] if out else None


def patch_id_of_commit(repo: Path, commit: str) -> str | None:
    diff = git(repo, "diff-tree", "-p", "--no-renames", "--full-index", "--root", commit).stdout
    return patch_id_of_text(repo, diff)
