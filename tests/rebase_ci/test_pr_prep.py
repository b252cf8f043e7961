"""scripts/pr-prep.sh on the synthetic series: one stacked, signed-off branch per upstream PR."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.rebase_ci.conftest import GrownUpstream, run_tool
from tools.rebase_ci.pr_prep import load_stack, vllm_pr_numbers
from tools.series.check import SUBJECT_RE
from tools.series.patchfile import PatchFile


def _commit_results(root: Path) -> None:
    """A committed results table in the synthetic project, as results/<area>/*.md."""
    (root / "results" / "kernels").mkdir(parents=True)
    (root / "results" / "kernels" / "bench.md").write_text(
        "# ucache kernel\n\n| T | ours (us) | flashinfer (us) | ratio |\n|---|---|---|---|\n"
        "| 4 | 10.0 | 12.0 | 1.20 |\n\nCommand: `python bench/x.py`\n"
    )
    for args in (["init", "-q"], ["add", "results"], ["commit", "-q", "-m", "results"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_pr_prep_builds_stacked_branches_and_descriptions(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    project = grown.project
    _commit_results(project.root)
    checkout = project.git("rev-parse", "HEAD")
    out = tmp_path / "prs"
    result = run_tool(project, "pr-prep", "--no-lint", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "pr-prep.json").read_text())
    assert [p["branch"] for p in summary["prs"]] == ["pr/1-triton-replayssm", "pr/2-ucache"]
    assert [p["patches"] for p in summary["prs"]] == [
        [grown.patch("config")],
        [grown.patch("kernel"), grown.patch("steps")],
    ]
    # Stacked: PR 2 sits on PR 1, which sits on the pinned base.
    assert project.git("rev-parse", "pr/1-triton-replayssm~1") == project.git(
        "rev-parse", "vllm-1.0.0"
    )
    assert project.git("rev-parse", "pr/2-ucache~2") == project.git(
        "rev-parse", "pr/1-triton-replayssm"
    )
    # Same content as the series branch; every commit signed off by its author.
    assert project.tree("pr/2-ucache") == project.tree("gdn-ucache")
    for line in project.git("log", "--format=%ae|%(trailers:key=Signed-off-by,valueonly)",
                            "vllm-1.0.0..pr/2-ucache").split("\n\n"):  # fmt: skip
        email, signoff = line.strip().split("|", 1)
        assert f"<{email}>" in signoff
    assert project.git("rev-parse", "HEAD") == checkout  # vllm/'s checkout untouched
    first = (out / "1-triton-replayssm.md").read_text()
    second = (out / "2-ucache.md").read_text()
    assert first.startswith("# [Spec Decode][Kernel] GDN ReplaySSM")
    for heading in ("## Overview", "## How it is wired", "## Validation",
                    "## Duplicate-work check (vLLM AGENTS.md)", "## AI assistance"):  # fmt: skip
        assert heading in first and heading in second
    assert "#48792, #49887" in first and "#50380" in second
    assert "stacked on branch `pr/1-triton-replayssm`" in second
    assert "`tests/test_ucache_steps.py`" in second
    assert "| 4 | 10.0 | 12.0 | 1.20 |" in second and "results/kernels/bench.md" in second
    assert "PyPI sdist import" in first  # the synthetic base is an sdist import


def test_pr_prep_refuses_unsigned_commits(grown: GrownUpstream, tmp_path: Path) -> None:
    project = grown.project
    patch = project.patches / grown.patch("config")
    patch.write_text(
        patch.read_text().replace("Signed-off-by: Test Author <test@example.com>\n", "")
    )
    result = run_tool(project, "pr-prep", "--no-lint", "--out", str(tmp_path))
    assert result.returncode == 1
    assert "no Signed-off-by" in result.stderr and "--signoff" in result.stderr
    assert "pr/1" not in project.git("branch", "--list", "pr/*")
    result = run_tool(project, "pr-prep", "--no-lint", "--signoff", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr


def test_pr_prep_refuses_a_series_out_of_stack_order(grown: GrownUpstream, tmp_path: Path) -> None:
    series = grown.project.patches / "series"
    names = grown.patch_names
    series.write_text("\n".join([names[1], names[0], names[2]]) + "\n")
    result = run_tool(grown.project, "pr-prep", "--no-lint", "--out", str(tmp_path))
    assert result.returncode == 1
    assert "reorder patches/series" in result.stderr


@pytest.mark.parametrize(
    ("value", "numbers"),
    [
        ("vllm-project/vllm#49887 (kernel part)", [49887]),
        ("#48792, vllm-project/vllm#49887", [48792, 49887]),
        ("flashinfer-ai/flashinfer#4081", []),
        ("none (project-only test harness)", []),
        ("https://github.com/vllm-project/vllm/pull/50380", [50380]),
    ],
)
def test_upstream_pr_numbers(value: str, numbers: list[int]) -> None:
    patch = PatchFile(Path("x.patch"), "a", "[X] y", "", "", [("Upstream-PR", value)])
    assert vllm_pr_numbers(patch) == numbers


def test_stack_titles_follow_vllm_rule() -> None:
    stack = load_stack()
    assert [pr.name for pr in stack] == ["triton-replayssm", "ucache"]
    assert all(SUBJECT_RE.match(pr.title) for pr in stack)
    assert stack[0].upstream_prs == [48792, 49887] and stack[1].upstream_prs == [50380]


def test_pr_prep_fails_when_lint_cannot_pass(grown: GrownUpstream, tmp_path: Path) -> None:
    # The synthetic upstream has no .pre-commit-config.yaml, so vLLM's lint cannot run there:
    # that must not pass as lint-clean.
    result = run_tool(grown.project, "pr-prep", "--out", str(tmp_path))
    assert result.returncode == 1
    assert "not lint-clean" in result.stderr and "pr/1-triton-replayssm" in result.stderr
    # The branches are still there to inspect.
    assert "pr/2-ucache" in grown.project.git("branch", "--list", "pr/*")
