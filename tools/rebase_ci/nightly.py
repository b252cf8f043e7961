"""The nightly rebase job, as one command the workflow calls (and the tests run offline).

``python -m tools.rebase_ci nightly TARGET``: judge the series on TARGET (a commit or ref in
``vllm/``, e.g. upstream main fetched by the workflow). If a patch fails there, bisect the
upstream range from the pinned release's fork point to TARGET and name the culprit. If the
series applies, run the foundation's ``scripts/rebase.sh TARGET`` (which refreshes
``patches/`` and prints the range-diff). Writes into OUT: ``nightly.json`` (status),
``summary.md`` (the job summary / tracking-issue body), ``version-matrix.json`` for TARGET,
``bisect-result.json`` on failure, ``range-diff.txt`` on success. Exit 0 when the series
rebased, 1 when it did not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tools.rebase_ci.bisect import bisect_upstream
from tools.rebase_ci.evaluate import STATIC_TEST
from tools.rebase_ci.matrix import matrix_json, run_matrix, write_outputs
from tools.rebase_ci.report import bisect_markdown, matrix_markdown
from tools.series.errors import SeriesError
from tools.series.gitutil import git, git_out, rev_parse
from tools.series.layout import SERIES_BRANCH, Layout, base_branch_for

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _fork_point(layout: Layout, target: str) -> str | None:
    """Where TARGET's history meets the pinned release: the good end of the bisect range."""
    repo = layout.vllm_dir
    pinned = rev_parse(repo, base_branch_for(layout.pinned_version()))
    if pinned is None:
        return None
    merged = git(repo, "merge-base", pinned, target, check=False)
    return merged.stdout.strip() if merged.returncode == 0 and merged.stdout.strip() else None


def _rebase(layout: Layout, target: str, out: Path) -> tuple[bool, str]:
    """Run scripts/rebase.sh TARGET; keep its range-diff. (ok, log tail)."""
    env = dict(os.environ, GDN_UCACHE_ROOT=str(layout.root), PYTHON=sys.executable)
    result = subprocess.run(
        ["bash", str(SCRIPTS / "rebase.sh"), target], capture_output=True, text=True, env=env
    )
    output = result.stdout + result.stderr
    (out / "rebase.log").write_text(output)
    marker = "== git range-diff"
    if marker in result.stdout:
        range_diff = result.stdout.split(marker, 1)[1].split("\n", 1)[1]
        (out / "range-diff.txt").write_text(range_diff.split(f"\n{SERIES_BRANCH} moved", 1)[0])
    return result.returncode == 0, "\n".join(output.strip().splitlines()[-20:])


def nightly(
    layout: Layout,
    target: str,
    out: Path,
    test_command: str | None = STATIC_TEST,
    rebase: bool = True,
    log=print,
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    repo = layout.vllm_dir
    commit = rev_parse(repo, target)
    if commit is None:
        raise SeriesError(f"{target!r} is not a commit in {repo}; fetch it first")
    rows = run_matrix(layout, [commit], test_command, log=log)
    matrix = matrix_json(layout, rows, test_command)
    matrix["rows"][0]["base"] = target
    write_outputs(matrix, out)
    row = matrix["rows"][0]
    status: dict = {
        "target": target,
        "commit": commit,
        "subject": git_out(repo, "log", "-1", "--format=%s", commit),
        "pinned": layout.pinned_version(),
        "applies": row["ok"],
        "failing": [
            c for c in row["cells"] if c["status"] not in ("applies", "applies (3-way)", "blocked")
        ],  # fmt: skip
        "range": None,
        "culprit": None,
        "rebased": False,
    }
    sections = []
    if not row["ok"]:
        good = _fork_point(layout, commit)
        if good is None:
            sections.append(
                "No upstream history links the pinned base to the target (an sdist import?), "
                "so no bisect; compare releases with scripts/version-matrix.sh."
            )
        else:
            status["range"] = f"{good}..{commit}"
            try:
                result = bisect_upstream(layout, good, commit, test_command, log=log)
                (out / "bisect-result.json").write_text(json.dumps(result, indent=1) + "\n")
                sections.append(bisect_markdown(result))
                status["culprit"] = result["culprit"]
            except SeriesError as exc:
                sections.append(f"Bisect of `{good[:12]}..{commit[:12]}` not possible: {exc}")
    elif rebase:
        ok, tail = _rebase(layout, commit, out)
        status["rebased"] = ok
        if not ok:
            sections.append("`scripts/rebase.sh` failed although the check passed:\n\n```\n"
                            + tail + "\n```")  # fmt: skip
    heading = _heading(status)
    summary = "\n".join([heading, "", matrix_markdown(matrix), *sections])
    (out / "summary.md").write_text(summary)
    (out / "nightly.json").write_text(json.dumps(status, indent=1) + "\n")
    log(summary)
    return 0 if status["applies"] and (status["rebased"] or not rebase) else 1


def _heading(status: dict) -> str:
    target = f"`{status['target']}` at `{status['commit'][:12]}` ({status['subject']})"
    if status["applies"] and status["rebased"]:
        return f"## ✅ gdn-ucache rebased onto vLLM {target}"
    if status["applies"]:
        return f"## ✅ gdn-ucache applies on vLLM {target}"
    tests_only = status["failing"] and all(c["status"] == "fails tests" for c in status["failing"])
    verdict = "fails its tests on" if tests_only else "does not apply on"
    lines = [f"## ❌ gdn-ucache {verdict} vLLM {target}", ""]
    for cell in status["failing"]:
        files = ", ".join(f"`{f}`" for f in cell.get("files", [])) or "-"
        lines.append(f"- failing patch `{cell['patch']}`: {cell['status']}; files: {files}")
    if status["range"]:
        good, bad = status["range"].split("..")
        lines.append(f"- upstream range: `{good[:12]}..{bad[:12]}` (pinned vLLM "
                     f"{status['pinned']} fork point .. target)")  # fmt: skip
    culprit = status.get("culprit")
    if culprit:
        lines.append(
            f"- first bad upstream commit: `{culprit['commit'][:12]}` {culprit['subject']}"
        )
    return "\n".join(lines)
