"""Find the first upstream commit at which the series stops applying (or its tests fail).

``git bisect run`` drives the search in a scratch repository that borrows ``vllm/``'s objects
(``vllm/``'s checkout, branches and bisect state are never touched) with ``--no-checkout``:
each step judges the series on ``BISECT_HEAD`` with :func:`evaluate_base`, i.e. the check of
``scripts/apply.sh --check`` on that commit (plus the test command when one is given).
Exit codes of a step follow ``git bisect run``: 0 good, 1 bad, 125 skip, 128 abort (a bug in
the step itself must stop the search rather than mark a commit bad).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from tools.rebase_ci.evaluate import evaluate_base, series_paths
from tools.series.errors import SeriesError
from tools.series.gitutil import git, git_out, is_repo, rev_parse
from tools.series.layout import Layout, base_branch_for
from tools.series.populate import is_release_version

STEP_GOOD, STEP_BAD, STEP_SKIP, STEP_ABORT = 0, 1, 125, 128


@dataclass
class StepResult:
    ok: bool
    failing: list[dict]


def judge(layout: Layout, commit: str, test_command: str | None) -> StepResult:
    verdicts = evaluate_base(layout, commit, "bisect", test_command)
    failing = [v.to_json() for v in verdicts if not v.ok and v.status != "blocked"]
    return StepResult(all(v.ok for v in verdicts), failing)


def resolve(repo: Path, name: str) -> str:
    """A commit for a ref, a full/short SHA, or a release (tag v<version>, branch vllm-<v>)."""
    candidates = [name]
    if is_release_version(name):
        candidates += [f"v{name}", base_branch_for(name)]
    for candidate in candidates:
        commit = rev_parse(repo, candidate)
        if commit:
            return commit
    raise SeriesError(
        f"{name!r} is not a commit, ref or release in {repo}; fetch it first "
        f"(git -C {repo} fetch origin {name})"
    )


def _culprit_details(layout: Layout, repo: Path, commit: str, test: str | None) -> dict:
    subject, date = git_out(repo, "log", "-1", "--format=%s%x00%cI", commit).split("\x00")
    parents = git_out(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if parents:
        changed = git_out(repo, "diff", "--name-only", "--no-renames", parents[0], commit)
    else:
        changed = git_out(repo, "ls-tree", "-r", "--name-only", commit)
    touched = sorted(set(changed.splitlines()) & series_paths(layout))
    return {
        "commit": commit,
        "subject": subject,
        "date": date,
        "shared_files": touched,
        "failing": judge(layout, commit, test).failing,
    }


def bisect_upstream(
    layout: Layout,
    good: str,
    bad: str,
    test_command: str | None = None,
    log=print,
) -> dict:
    """Bisect ``good..bad`` in ``vllm/``; return the result JSON (kind gdn-ucache-bisect)."""
    repo = layout.vllm_dir
    if not is_repo(repo):
        raise SeriesError(f"{repo} is not populated; run scripts/setup.sh first")
    good_commit, bad_commit = resolve(repo, good), resolve(repo, bad)
    ancestor = git(repo, "merge-base", "--is-ancestor", good_commit, bad_commit, check=False)
    if ancestor.returncode != 0:
        raise SeriesError(
            f"GOOD {good} is not an ancestor of BAD {bad}; bisect needs upstream history "
            "between them (an sdist import has none: compare releases with "
            "scripts/version-matrix.sh instead)"
        )
    count = int(git_out(repo, "rev-list", "--count", f"{good_commit}..{bad_commit}"))
    result = {
        "kind": "gdn-ucache-bisect",
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "good": good_commit,
        "bad": bad_commit,
        "test": test_command or "",
        "commits_in_range": count,
        "steps": 0,
        "culprit": None,
        "message": "",
    }
    log(f"checking GOOD {good_commit[:12]} and BAD {bad_commit[:12]} ({count} commits apart)")
    if not judge(layout, good_commit, test_command).ok:
        raise SeriesError(
            f"the series already fails at GOOD {good} ({good_commit[:12]}); pick an older "
            "GOOD (e.g. the pinned release, where it must apply)"
        )
    if judge(layout, bad_commit, test_command).ok:
        result["message"] = "the series is fine at BAD; nothing to bisect"
        log(result["message"])
        return result
    scratch = Path(tempfile.mkdtemp(prefix="rebase-ci-bisect-"))
    try:
        git(scratch, "init", "--quiet")
        objects = git_out(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
        git_dir = Path(git_out(scratch, "rev-parse", "--absolute-git-dir"))
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}/objects\n")
        # bisect wants a valid HEAD; --no-checkout leaves the (empty) work tree alone.
        git(scratch, "update-ref", "refs/heads/main", bad_commit)
        git(scratch, "bisect", "start", "--no-checkout", bad_commit, good_commit)
        step = [sys.executable, "-m", "tools.rebase_ci", "--root", str(layout.root), "bisect-step"]
        if test_command:
            step += ["--test-cmd", test_command]
        env = dict(os.environ)
        # git bisect run starts the step in the scratch repo: make this checkout importable.
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")])
        )
        run = subprocess.run(
            ["git", "-C", str(scratch), "bisect", "run", *step],
            capture_output=True,
            text=True,
            env=env,
        )
        output = run.stdout + run.stderr
        result["steps"] = len(re.findall(r"^bisect-step: ", output, flags=re.MULTILINE))
        found = re.search(r"^([0-9a-f]{40}) is the first bad commit", output, re.MULTILINE)
        if run.returncode != 0 or not found:
            raise SeriesError(f"git bisect run did not finish:\n{output.strip()[-2000:]}")
        result["culprit"] = _culprit_details(layout, repo, found.group(1), test_command)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    culprit = result["culprit"]
    log(f"first bad commit: {culprit['commit']} {culprit['subject']}")
    log(f"  files it touched that the series also touches: {', '.join(culprit['shared_files'])}")
    for cell in culprit["failing"]:
        log(f"  {cell['patch']}: {cell['status']} {' '.join(cell.get('files', []))}")
    return result


def bisect_step(layout: Layout, test_command: str | None) -> int:
    """One ``git bisect run`` step in the current (scratch) repository: judge BISECT_HEAD."""
    here = Path.cwd()
    commit = rev_parse(here, "BISECT_HEAD") or rev_parse(here, "HEAD")
    if commit is None:
        print("bisect-step: no BISECT_HEAD here", file=sys.stderr)
        return STEP_ABORT
    try:
        verdict = judge(layout, commit, test_command)
    except SeriesError as exc:  # e.g. a commit whose tree cannot be read: skip it
        print(f"bisect-step: {commit[:12]}: {exc}", file=sys.stderr)
        return STEP_SKIP
    except Exception:  # a bug here must stop the bisect, not pass for "bad" (exit 1)
        traceback.print_exc()
        return STEP_ABORT
    print(f"bisect-step: {commit[:12]}: {'good' if verdict.ok else 'bad'}")
    return STEP_GOOD if verdict.ok else STEP_BAD
