"""Move the series onto another vLLM base, patch by patch.

``REF|VERSION``: a release version (``0.34.0``) is imported like the pinned one (upstream tag
when git is reachable, else the PyPI sdist as a deterministic commit on branch
``vllm-<version>``); anything else is a git ref in ``vllm/`` (fetched from ``origin`` if it is
not there yet). The patches from ``patches/series`` are applied one at a time with
``git am -3`` on a work branch ``gdn-ucache-rebase``; the first conflict stops the run, names
the patch and the files, and leaves ``patches/`` and branch ``gdn-ucache`` untouched. On
success it prints ``git range-diff`` old vs new, moves ``gdn-ucache``, refreshes ``patches/``
and (for a release) ``vllm.pin``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tools.series.apply import (
    _conflict_report,
    am_one,
    require_vllm,
    series_base,
    series_state,
)
from tools.series.errors import SeriesError
from tools.series.export import export_series
from tools.series.gitutil import (
    branch_exists,
    commits_between,
    current_branch,
    dirty_files,
    git,
    git_out,
    operation_in_progress,
    rev_parse,
)
from tools.series.layout import BASE_REF, SERIES_BRANCH, Layout
from tools.series.pin import write_pin
from tools.series.populate import ensure_base, is_release_version

WORK_BRANCH = f"{SERIES_BRANCH}-rebase"


def _state_file(repo: Path) -> Path:
    return Path(git_out(repo, "rev-parse", "--absolute-git-dir")) / "gdn-ucache-rebase.json"


def _resolve_new_base(layout: Layout, repo: Path, target: str, source: str) -> tuple[str, str]:
    """(commit, kind) for REF|VERSION; kind is 'version' or 'ref'."""
    if is_release_version(target):
        return ensure_base(layout, target, source), "version"
    commit = rev_parse(repo, target)
    if commit is None and git(repo, "remote", "get-url", "origin", check=False).returncode == 0:
        fetched = git(repo, "fetch", "origin", target, check=False, timeout=1800)
        if fetched.returncode == 0:
            commit = rev_parse(repo, "FETCH_HEAD")
    if commit is None:
        raise SeriesError(
            f"{target!r} is neither a release version (like 0.34.0) nor a git ref known in "
            f"{repo} (or fetchable from its origin); nothing was changed"
        )
    return commit, "ref"


def rebase_series(layout: Layout, target: str, source: str = "auto") -> int:
    repo = require_vllm(layout)
    if branch_exists(repo, WORK_BRANCH) or _state_file(repo).exists():
        raise SeriesError(
            f"a previous rebase stopped on branch {WORK_BRANCH}; finish it with "
            "scripts/rebase.sh --continue or drop it with scripts/rebase.sh --abort"
        )
    busy = operation_in_progress(repo)
    if busy:
        raise SeriesError(f"{busy} is in progress in {repo}; finish or abort it first")
    dirty = dirty_files(repo)
    if dirty:
        raise SeriesError(f"{repo} has uncommitted changes ({', '.join(dirty[:5])}); commit them")
    old_base = series_base(layout, repo)
    state = series_state(layout, old_base)
    if state.foreign or state.applied != len(state.patches):
        raise SeriesError(
            f"branch {SERIES_BRANCH} does not match patches/ "
            f"({state.applied}/{len(state.patches)} patches on it, "
            f"{len(state.foreign)} commit(s) not in patches/); run scripts/apply.sh "
            "(or scripts/export.sh to keep the branch) first. Nothing was changed."
        )
    new_base, kind = _resolve_new_base(layout, repo, target, source)
    old_tip = git_out(repo, "rev-parse", f"refs/heads/{SERIES_BRANCH}")
    print(f"rebasing {len(state.patches)} patch(es) from {old_base[:12]} onto {new_base[:12]}")
    saved = {
        "target": target,
        "kind": kind,
        "old_base": old_base,
        "old_tip": old_tip,
        "new_base": new_base,
        "patches": [p.name for p in state.patches],
    }
    git(repo, "checkout", "--quiet", "-b", WORK_BRANCH, new_base)
    _state_file(repo).write_text(json.dumps(saved, indent=1))
    return _apply_remaining(layout, repo, saved)


def _apply_remaining(layout: Layout, repo: Path, saved: dict) -> int:
    names: list[str] = saved["patches"]
    done = len(commits_between(repo, saved["new_base"], "HEAD"))
    total = len(names)
    for number, name in enumerate(names, start=1):
        if number <= done:
            continue
        patch = layout.patches_dir / name
        ok, output = am_one(repo, patch)
        if not ok:
            files = _conflict_report(repo, output)
            raise SeriesError(
                f"[{number}/{total}] {name}: CONFLICT"
                + (f" in {', '.join(files)}" if files else "")
                + f"\n{output.strip()}\n"
                f"patches/ and branch {SERIES_BRANCH} are untouched. {repo} is on {WORK_BRANCH} "
                f"with patches 1..{number - 1} rebased and `git am` stopped at this one.\n"
                f"  resolve: fix the files, `git -C {repo} add` them, `git -C {repo} am "
                "--continue`, then scripts/rebase.sh --continue\n"
                "  give up: scripts/rebase.sh --abort"
            )
        print(f"[{number}/{total}] {name}: ok", flush=True)
    return _finish(layout, repo, saved)


def _finish(layout: Layout, repo: Path, saved: dict) -> int:
    new_tip = git_out(repo, "rev-parse", "HEAD")
    print("\n== git range-diff (old series vs rebased series) ==")
    range_diff = git(
        repo,
        "range-diff",
        "--no-color",
        f"{saved['old_base']}..{saved['old_tip']}",
        f"{saved['new_base']}..{new_tip}",
    )
    print(range_diff.stdout.rstrip() or "(empty series)")
    backup = 1
    while branch_exists(repo, f"{SERIES_BRANCH}-backup-{backup}"):
        backup += 1
    git(repo, "branch", f"{SERIES_BRANCH}-backup-{backup}", saved["old_tip"])
    git(repo, "branch", "--force", SERIES_BRANCH, new_tip)
    git(repo, "checkout", "--quiet", SERIES_BRANCH)
    git(repo, "branch", "--delete", "--force", WORK_BRANCH)
    git(repo, "update-ref", BASE_REF, saved["new_base"])
    _state_file(repo).unlink(missing_ok=True)
    print(f"\n{SERIES_BRANCH} moved (old series kept as {SERIES_BRANCH}-backup-{backup})")
    if saved["kind"] == "version":
        _update_pin(layout, repo, saved["target"], saved["new_base"])
    else:
        print(f"vllm.pin unchanged: {saved['target']} is not a release version")
    export_series(layout)
    return 0


def _update_pin(layout: Layout, repo: Path, version: str, base: str) -> None:
    message = git_out(repo, "log", "-1", "--format=%B", base)
    updates = {"VLLM_VERSION": version}
    fields = dict(
        line.split(": ", 1)
        for line in message.splitlines()
        if line.startswith(("Upstream-Commit: ", "Sdist-SHA256: "))
    )
    if "Sdist-SHA256" in fields:  # a deterministic sdist import
        updates["VLLM_UPSTREAM_COMMIT"] = fields.get("Upstream-Commit", "unknown")
        updates["VLLM_SDIST_SHA256"] = fields["Sdist-SHA256"]
        updates["VLLM_BASE_SHA"] = base
    else:  # the upstream tag itself
        updates["VLLM_UPSTREAM_COMMIT"] = base
        updates["VLLM_BASE_SHA"] = ""  # known only for a sdist import
    write_pin(layout.pin_path, updates)
    print(f"vllm.pin now pins vLLM {version} (base {base[:12]})")
    _update_gitlink(layout, base)


def _update_gitlink(layout: Layout, base: str) -> None:
    """Stage the vllm gitlink at the new base in the superproject, when there is one."""
    listed = subprocess.run(
        ["git", "-C", str(layout.root), "ls-files", "--stage", "--", "vllm"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode == 0 and listed.stdout.startswith("160000 "):
        subprocess.run(
            ["git", "-C", str(layout.root), "update-index", "--cacheinfo", f"160000,{base},vllm"],
            check=True,
        )
        print("staged the vllm gitlink at the new base; commit vllm.pin, patches/ and vllm")


def continue_rebase(layout: Layout) -> int:
    repo = require_vllm(layout)
    state_file = _state_file(repo)
    if not state_file.exists():
        raise SeriesError("no rebase to continue (scripts/rebase.sh REF|VERSION starts one)")
    if operation_in_progress(repo):
        raise SeriesError(f"`git am` is still stopped in {repo}; run `git -C {repo} am --continue`")
    if current_branch(repo) != WORK_BRANCH:
        raise SeriesError(f"{repo} is not on {WORK_BRANCH}; check it out to continue")
    return _apply_remaining(layout, repo, json.loads(state_file.read_text()))


def abort_rebase(layout: Layout) -> int:
    repo = require_vllm(layout)
    if operation_in_progress(repo) == "git am":
        git(repo, "am", "--abort")
    if current_branch(repo) == WORK_BRANCH:
        git(repo, "checkout", "--quiet", "--force", SERIES_BRANCH)
    if branch_exists(repo, WORK_BRANCH):
        git(repo, "branch", "--delete", "--force", WORK_BRANCH)
    _state_file(repo).unlink(missing_ok=True)
    print(f"rebase dropped; {repo} is back on {SERIES_BRANCH}, patches/ untouched")
    return 0
