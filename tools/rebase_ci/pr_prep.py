"""Turn the series into the branches an upstream contributor pushes, and their descriptions.

The stack (``pr_stack.toml``) says which upstream PR each patch belongs to, through the
patch's ``Upstream-PR:`` trailer. For each PR, in order, a branch ``pr/<n>-<name>`` is built in
``vllm/`` on top of the previous PR's branch (the first on the chosen base) by ``git am -3`` of
its patches in a scratch repository (``vllm/``'s checkout is never touched), then checked:
every commit signed off (``--signoff`` adds yours where one is missing), subjects in vLLM's
``[Tag] Title`` form, and vLLM's own lint (``tools.series.lint``) on the files the PR changes.
Each PR's description (markdown, vLLM's PR-template headings plus what AGENTS.md asks for) is
written to ``<out>/<n>-<name>.md``.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tools.rebase_ci.bisect import resolve
from tools.rebase_ci.evaluate import scratch_view
from tools.series.check import SUBJECT_RE
from tools.series.errors import SeriesError
from tools.series.gitutil import git, git_out, is_repo
from tools.series.layout import Layout, base_branch_for
from tools.series.patchfile import PatchFile, parse_patch, read_series

STACK_FILE = Path(__file__).with_name("pr_stack.toml")
_VLLM_PR = re.compile(r"(?:(?<![\w/-])|vllm-project/vllm)#(\d+)")
_OTHER_REPO_PR = re.compile(r"[\w.-]+/[\w.-]+#\d+")


@dataclass
class StackPR:
    number: int
    name: str
    title: str
    upstream_prs: list[int]
    builds_on: list[str]
    purpose: str
    results: list[str]
    patches: list[PatchFile] = field(default_factory=list)

    @property
    def branch(self) -> str:
        return f"pr/{self.number}-{self.name}"


def load_stack(path: Path = STACK_FILE) -> list[StackPR]:
    data = tomllib.loads(path.read_text())
    stack = []
    for number, entry in enumerate(data.get("pr", []), start=1):
        pr = StackPR(
            number=number,
            name=entry["name"],
            title=entry["title"],
            upstream_prs=list(entry["upstream_prs"]),
            builds_on=list(entry.get("builds_on", [])),
            purpose=entry.get("purpose", "").strip(),
            results=list(entry.get("results", [])),
        )
        if not SUBJECT_RE.match(pr.title):
            raise SeriesError(f"{path}: title {pr.title!r} is not in vLLM's '[Tag] Title' form")
        stack.append(pr)
    return stack


def vllm_pr_numbers(patch: PatchFile) -> list[int]:
    """vllm-project/vllm PR numbers named by the patch's Upstream-PR trailers."""
    numbers = []
    for value in patch.trailer_values("Upstream-PR"):
        if value.lower().startswith("none"):
            continue
        cleaned = _OTHER_REPO_PR.sub(
            lambda m: m.group(0) if m.group(0).startswith("vllm-project/vllm#") else "", value
        )
        numbers += [int(n) for n in _VLLM_PR.findall(cleaned)]
        numbers += [int(n) for n in re.findall(r"github\.com/vllm-project/vllm/pull/(\d+)", value)]
    return numbers


def split_series(layout: Layout, stack: list[StackPR]) -> list[PatchFile]:
    """Assign each patch to its PR (in place); return the patches that stay downstream."""
    downstream: list[PatchFile] = []
    last_pr = 0
    for path in read_series(layout.patches_dir):
        patch = parse_patch(path)
        numbers = vllm_pr_numbers(patch)
        owner = next((pr for pr in stack if set(numbers) & set(pr.upstream_prs)), None)
        if owner is None:
            downstream.append(patch)
            continue
        if owner.number < last_pr:
            raise SeriesError(
                f"{patch.name} belongs to PR {owner.number} ({owner.name}) but comes after a "
                f"patch of PR {last_pr}; reorder patches/series so each PR's patches come "
                "before the next PR's (the stack is pushed in that order)"
            )
        last_pr = owner.number
        owner.patches.append(patch)
    return downstream


def latest_results_table(root: Path, patterns: list[str]) -> tuple[str, str] | None:
    """(path, first markdown table) of the most recently committed results file matching."""
    newest: tuple[int, str] | None = None
    for pattern in patterns:
        for name in glob.glob(str(root / pattern)):
            relative = str(Path(name).relative_to(root))
            stamp = subprocess.run(
                ["git", "-C", str(root), "log", "-1", "--format=%ct", "--", relative],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            if stamp and (newest is None or int(stamp) > newest[0]):
                newest = (int(stamp), relative)
    if newest is None:
        return None
    table: list[str] = []
    for line in (root / newest[1]).read_text().splitlines():
        if line.lstrip().startswith("|"):
            table.append(line)
        elif table:
            break
    return (newest[1], "\n".join(table)) if table else None


def _commits(repo: Path, base: str, tip: str) -> list[str]:
    return git_out(repo, "rev-list", "--reverse", f"{base}..{tip}").split()


def _signoff_problems(repo: Path, commits: list[str]) -> list[str]:
    problems = []
    for commit in commits:
        subject = git_out(repo, "log", "-1", "--format=%s", commit)
        author = git_out(repo, "log", "-1", "--format=%ae", commit)
        signoffs = git_out(
            repo, "log", "-1", "--format=%(trailers:key=Signed-off-by,valueonly)", commit
        ).splitlines()
        if not any(s.strip() for s in signoffs):
            problems.append(f"{commit[:12]} {subject}: no Signed-off-by")
        elif not any(f"<{author}>" in s for s in signoffs):
            problems.append(f"{commit[:12]} {subject}: no Signed-off-by of its author <{author}>")
        if not SUBJECT_RE.match(subject):
            problems.append(f"{commit[:12]} {subject}: subject is not '[Tag] Title'")
    return problems


def _lint(view: Layout, files: list[str]) -> tuple[bool, str]:
    from tools.series.lint import lint_vllm

    python_or_text = [f for f in files if (view.vllm_dir / f).is_file()]
    try:
        status = lint_vllm(view, files=python_or_text)
    except (SeriesError, OSError) as exc:  # e.g. no .pre-commit-config.yaml in the base
        return False, f"vLLM lint not run: {exc}"
    return status == 0, "vLLM lint (ruff, ruff format, typos, SPDX, forbidden imports): " + (
        "clean" if status == 0 else "FAILED"
    )


def describe(
    pr: StackPR,
    stack: list[StackPR],
    repo: Path,
    base: str,
    commits: list[str],
    root: Path,
    lint: str,
    base_is_sdist: bool,
) -> str:
    """The PR description (markdown)."""
    parent = stack[pr.number - 2] if pr.number > 1 else None
    start = f"refs/heads/{parent.branch}" if parent else base
    stat = git(repo, "diff", "--stat=100", start, commits[-1]).stdout.rstrip() if commits else ""
    files = git_out(repo, "diff", "--name-only", start, commits[-1]).splitlines() if commits else []
    tests = [f for f in files if f.startswith("tests/") and f.endswith(".py")]
    coauthors = sorted(
        {
            line.strip()
            for commit in commits
            for line in git_out(
                repo, "log", "-1", "--format=%(trailers:key=Co-authored-by,valueonly)", commit
            ).splitlines()
            if line.strip()
        }
    )
    upstream = ", ".join(f"#{n}" for n in pr.upstream_prs)
    lines = [f"# {pr.title}", "", "## Overview", "", pr.purpose, ""]
    lines += [f"Corresponds to upstream {upstream}." if upstream else "", ""]
    lines += ["Builds on:", ""]
    lines += [f"- {item}" for item in pr.builds_on] or ["- vLLM main"]
    if parent:
        lines.append(f"- stacked on branch `{parent.branch}` ({parent.title}); review that first")
    lines += ["", "## How it is wired", ""]
    for commit in commits:
        subject = git_out(repo, "log", "-1", "--format=%s", commit)
        body = git_out(repo, "log", "-1", "--format=%b", commit).strip().split("\n\n")[0]
        lines += [f"### {subject}", "", " ".join(body.split()), ""]
    lines += ["```", stat, "```", "", "## Validation", ""]
    if tests:
        lines += ["Tests added or changed:", ""]
        lines += [f"- `{t}`" for t in tests]
        lines += ["", "```bash", f".venv/bin/python -m pytest {' '.join(tests)} -v", "```", ""]
    else:
        lines += ["No tests added or changed by this PR.", ""]
    lines += [f"- {lint}"]
    numstat = git_out(repo, "diff", "--numstat", start, commits[-1]) if commits else ""
    core = sum(
        int(added) + int(removed)
        for added, removed, path in (line.split("\t", 2) for line in numstat.splitlines())
        if added != "-" and not path.startswith(("tests/", "benchmarks/")) and "/ops/" not in path
    )
    lines += [
        f"- size: {core} changed lines outside tests, benchmarks and kernel ops "
        "(vLLM expects an RFC above 500)",
        "",
    ]
    table = latest_results_table(root, pr.results)
    if table:
        source, text = table
        lines += ["Latest benchmark (committed results, `" + source + "`):", "", text, ""]
    else:
        lines += ["No committed benchmark results yet (looked in: "
                  + ", ".join(f"`{p}`" for p in pr.results) + ").", ""]  # fmt: skip
    lines += [
        "## Duplicate-work check (vLLM AGENTS.md)",
        "",
        f"This continues upstream {upstream or 'work'} rather than competing with it; "
        + (
            "credit is kept in the commits' `Co-authored-by:` trailers. "
            if coauthors
            else "**no commit has a `Co-authored-by:` trailer yet: add credit for the upstream "
            "authors before pushing.** "
        )
        + "Before pushing, from a machine that reaches GitHub (fail closed: do not push if a "
        "newer equivalent PR exists):",
        "",
        "```bash",
        'gh pr list --repo vllm-project/vllm --state all --search "ReplaySSM GDN"',
        *(
            f"gh pr view {n} --repo vllm-project/vllm --json state,title,updatedAt"
            for n in pr.upstream_prs
        ),  # fmt: skip
        "```",
        "",
        "- [ ] duplicate check done (date, result) and the upstream authors contacted",
        "",
        "## AI assistance",
        "",
        "This PR was prepared with AI assistance (code, tests and this description were drafted "
        "with an AI coding assistant in the gdn-ucache project). The submitter has reviewed "
        "every changed line and ran the tests and benchmarks quoted above.",
        "",
    ]
    if coauthors:
        lines += ["Co-authored-by (from the commits): " + "; ".join(coauthors), ""]
    lines += [
        "## Checklist",
        "",
        f"- [x] every commit has a DCO `Signed-off-by:` ({len(commits)} commits)",
        "- [x] subjects follow vLLM's `[Tag] Title` rule",
        f"- [{'x' if 'clean' in lint else ' '}] vLLM lint on the changed files",
        "",
        f"vLLM base: `{base}`"
        + (
            " (a PyPI sdist import; rebase onto upstream git before "
            "pushing: scripts/pr-prep.sh --base <upstream commit>)"
            if base_is_sdist
            else ""
        ),  # fmt: skip
        "",
    ]
    return "\n".join(lines)


def prepare_prs(
    layout: Layout,
    base: str | None = None,
    out_dir: Path = Path("build/pr-prep"),
    signoff: bool = False,
    lint: bool = True,
    stack_file: Path = STACK_FILE,
    log=print,
) -> dict:
    """Build ``pr/<n>-<name>`` branches in vllm/ and write descriptions; return a summary."""
    repo = layout.vllm_dir
    if not is_repo(repo):
        raise SeriesError(f"{repo} is not populated; run scripts/setup.sh first")
    stack = load_stack(stack_file)
    downstream = split_series(layout, stack)
    base_commit = resolve(repo, base or base_branch_for(layout.pinned_version()))
    base_is_sdist = "Sdist-SHA256: " in git_out(repo, "log", "-1", "--format=%B", base_commit)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict = {"base": base_commit, "prs": [], "downstream": [p.name for p in downstream]}
    for patch in downstream:
        log(f"stays downstream (no stack PR in its Upstream-PR): {patch.name}")
    lint_failures: list[str] = []
    with scratch_view(layout, base_commit, "pr-base") as view:
        scratch = view.vllm_dir
        git(scratch, "checkout", "--quiet", "--force", base_branch_for("pr-base"))
        for pr in stack:
            if not pr.patches:
                log(f"PR {pr.number} ({pr.name}): no patches in the series; skipped")
                continue
            start = git_out(scratch, "rev-parse", "HEAD")
            for patch in pr.patches:
                applied = git(
                    scratch, "am", "--3way", "--keep", "--quiet",
                    *(["--signoff"] if signoff else []), str(patch.path.resolve()),
                    check=False,
                )  # fmt: skip
                if applied.returncode != 0:
                    raise SeriesError(
                        f"PR {pr.number} ({pr.name}): {patch.name} does not apply on "
                        f"{base_commit[:12]} plus the PRs before it:\n"
                        f"{(applied.stdout + applied.stderr).strip()}\nNo branch was written."
                    )
            git(scratch, "branch", "--force", pr.branch, "HEAD")
            commits = _commits(scratch, start, "HEAD")
            problems = _signoff_problems(scratch, commits)
            if problems:
                raise SeriesError(
                    f"PR {pr.number} ({pr.name}) is not ready for upstream:\n  "
                    + "\n  ".join(problems)
                    + "\n(--signoff adds your sign-off where one is missing; fix subjects on "
                    "the series branch and export). No branch was written."
                )
            files = git_out(scratch, "diff", "--name-only", "--diff-filter=d", start, "HEAD")
            lint_ok, lint_text = (
                _lint(view, files.splitlines()) if lint else (True, "vLLM lint: not run")
            )
            if lint and not lint_ok:
                lint_failures.append(f"PR {pr.number} ({pr.branch}): {lint_text}")
            text = describe(
                pr, stack, scratch, base_commit, commits, layout.root, lint_text, base_is_sdist
            )
            description = out_dir / f"{pr.number}-{pr.name}.md"
            description.write_text(text)
            summary["prs"].append(
                {
                    "number": pr.number,
                    "name": pr.name,
                    "branch": pr.branch,
                    "title": pr.title,
                    "commits": len(commits),
                    "patches": [p.name for p in pr.patches],
                    "lint": lint_text,
                    "description": str(description),
                }
            )
            log(f"PR {pr.number}: {pr.branch} ({len(commits)} commits) -> {description}")
        # Bring the branches into vllm/ (objects and refs); its checkout is left alone.
        branches = [f"+refs/heads/{p['branch']}:refs/heads/{p['branch']}" for p in summary["prs"]]
        if branches:
            git(repo, "fetch", "--quiet", "--no-tags", str(scratch), *branches)
    summary["generated"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (out_dir / "pr-prep.json").write_text(json.dumps(summary, indent=1) + "\n")
    if lint_failures:
        raise SeriesError(
            "not lint-clean (branches and descriptions were written for inspection; fix on the "
            "series branch, scripts/export.sh, run again):\n  " + "\n  ".join(lint_failures)
        )
    log(
        f"push with: git -C {repo} push <your fork> "
        + " ".join(p["branch"] for p in summary["prs"])
    )
    return summary
