"""Bisect and version matrix on the grown synthetic upstream (tests/rebase_ci/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.rebase_ci.conftest import TEST_COMMAND, GrownUpstream, run_tool
from tools.rebase_ci.matrix import select_versions
from tools.series.layout import Layout
from tools.series.populate import ensure_base


def test_bisect_names_the_planted_commit(grown: GrownUpstream, tmp_path: Path) -> None:
    vllm_before = grown.project.git("rev-parse", "HEAD")
    branch_before = grown.project.git("symbolic-ref", "--short", "HEAD")
    out = tmp_path / "out"
    result = run_tool(
        grown.project, "bisect-upstream", "vllm-1.0.0", "upstream-main", "--out", str(out)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"first bad commit: {grown.planted} [Core] Step by a configurable increment" in (
        result.stdout
    )
    assert "vllm/engine.py" in result.stdout
    data = json.loads((out / "bisect-result.json").read_text())
    culprit = data["culprit"]
    assert culprit["commit"] == grown.planted
    assert culprit["shared_files"] == ["vllm/engine.py"]
    assert [c["patch"] for c in culprit["failing"]] == [grown.patch("kernel")]
    assert culprit["failing"][0]["status"] == "conflicts"
    assert culprit["failing"][0]["files"] == ["vllm/engine.py"]
    assert data["commits_in_range"] == 7 and 2 <= data["steps"] <= 4
    summary = (out / "bisect-summary.md").read_text()
    assert grown.planted[:12] in summary and "Step by a configurable increment" in summary
    # vllm/ is left exactly as it was: same branch, same commit, no bisect state.
    assert grown.project.git("rev-parse", "HEAD") == vllm_before
    assert grown.project.git("symbolic-ref", "--short", "HEAD") == branch_before
    assert not (grown.project.vllm / ".git" / "BISECT_LOG").exists()


def test_bisect_with_tests_names_the_test_breaking_commit(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_tool(
        grown.project, "bisect-upstream", "vllm-1.0.0", "upstream-main",
        "--test-cmd", TEST_COMMAND, "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    culprit = json.loads((out / "bisect-result.json").read_text())["culprit"]
    assert culprit["commit"] == grown.test_breaker
    assert [c["patch"] for c in culprit["failing"]] == [grown.patch("steps")]
    assert culprit["failing"][0]["status"] == "fails tests"
    # The test-breaking commit touched engine.py, which the kernel patch also touches.
    assert culprit["shared_files"] == ["vllm/engine.py"]


def test_bisect_refuses_a_bad_good(grown: GrownUpstream, tmp_path: Path) -> None:
    result = run_tool(
        grown.project, "bisect-upstream", grown.planted, "upstream-main", "--out", str(tmp_path)
    )
    assert result.returncode == 1
    assert "already fails at GOOD" in result.stderr


def test_bisect_refuses_unrelated_commits(
    grown: GrownUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vllm-1.1.0 is a separate sdist import: no history links it to upstream-main.
    monkeypatch.setenv("GDN_UCACHE_CACHE", str(grown.project.cache))
    monkeypatch.setenv("GDN_UCACHE_OFFLINE", "1")
    ensure_base(Layout(grown.project.root), "1.1.0", "sdist")
    result = run_tool(grown.project, "bisect-upstream", "vllm-1.1.0", "upstream-main")
    assert result.returncode == 1
    assert "not an ancestor" in result.stderr and "version-matrix" in result.stderr


def _matrix(grown: GrownUpstream, tmp_path: Path, *args: str):
    out = tmp_path / "matrix"
    result = run_tool(grown.project, "version-matrix", *args, "--out", str(out))
    data = json.loads((out / "version-matrix.json").read_text())
    return result, data, out


def test_matrix_marks_exactly_the_broken_patch(grown: GrownUpstream, tmp_path: Path) -> None:
    result, data, out = _matrix(
        grown, tmp_path, "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "--test-cmd", TEST_COMMAND
    )
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = {row["base"]: [c["status"] for c in row["cells"]] for row in data["rows"]}
    assert statuses == {
        "1.0.0": ["applies", "applies", "applies"],
        "1.1.0": ["applies", "applies", "applies"],
        "1.2.0": ["conflicts", "blocked", "blocked"],
        "1.3.0": ["applies", "applies", "fails tests"],
        "1.4.0": ["applies", "conflicts", "blocked"],
    }
    row = {r["base"]: r for r in data["rows"]}
    assert row["1.4.0"]["cells"][1]["files"] == ["vllm/engine.py"]
    assert row["1.2.0"]["cells"][0]["files"] == ["vllm/config.py"]
    assert (
        "FAILED tests/test_ucache_steps.py::test_ring_steps" in row["1.3.0"]["cells"][2]["detail"]
    )
    assert [r["pinned"] for r in data["rows"]] == [True, False, False, False, False]
    assert data["series"] == grown.patch_names
    markdown = (out / "version-matrix.md").read_text()
    assert markdown in result.stdout
    assert "vLLM 1.0.0 (pinned)" in markdown and "❌ **conflicts**: `engine.py`" in markdown


def test_matrix_fails_only_when_the_pinned_release_fails(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    result, data, _ = _matrix(grown, tmp_path, "1.0.0", "1.2.0", "--no-test")
    assert result.returncode == 0, result.stderr
    assert [r["ok"] for r in data["rows"]] == [True, False]
    pin = grown.project.root / "vllm.pin"
    pin.write_text(pin.read_text().replace("VLLM_VERSION=1.0.0", "VLLM_VERSION=1.2.0"))
    result, data, _ = _matrix(grown, tmp_path, "1.1.0", "--no-test")
    assert result.returncode == 1
    assert "pinned vLLM 1.2.0" in result.stderr
    # The pinned release is always judged, first, even when not asked for.
    assert [r["base"] for r in data["rows"]] == ["1.2.0", "1.1.0"]


def test_matrix_default_versions_come_from_the_cache_offline(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    pin = grown.project.root / "vllm.pin"
    pin.write_text(pin.read_text().replace("VLLM_VERSION=1.0.0", "VLLM_VERSION=1.3.0"))
    result, data, _ = _matrix(grown, tmp_path, "--newer")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["base"] for r in data["rows"]] == ["1.3.0", "1.4.0", "1.2.0", "1.1.0"]
    # the static test (syntax, undefined names) passes where the patches apply
    assert data["test"] == "static"
    assert [c["status"] for c in data["rows"][0]["cells"]] == ["applies"] * 3


def test_select_versions() -> None:
    available = ["0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0", "0.9.2"]
    assert select_versions(available, "0.33.0") == ["0.33.0", "0.32.0", "0.31.0"]
    assert select_versions(available, "0.33.0", 1, newer=True) == ["0.33.0", "0.34.0", "0.32.0"]
    assert select_versions(available, "0.9.2", 2) == ["0.9.2"]
    assert select_versions(["0.34.0"], "0.33.0", 2, newer=True) == ["0.33.0", "0.34.0"]


PATCH_TEXT = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@example.com>
Subject: [Core] Use a helper

Body.

diff --git a/vllm/mod.py b/vllm/mod.py
--- a/vllm/mod.py
+++ b/vllm/mod.py
@@ -1 +1 @@
-x = 1
+x = helper()
"""


@pytest.mark.parametrize(
    ("source", "passes"),
    [("x = 1\n", True), ("x = helper()\n", False), ("def f(:\n", False)],
)
def test_static_test_flags_syntax_errors_and_undefined_names(
    tmp_path: Path, source: str, passes: bool
) -> None:
    from tools.rebase_ci.evaluate import STATIC_TEST, _run_test

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "mod.py").write_text(source)
    patch = tmp_path / "p.patch"
    patch.write_text(PATCH_TEXT)
    passed, log = _run_test(STATIC_TEST, tmp_path, patch, "x", 60)
    assert passed is passes, log
    if not passes:
        assert "vllm/mod.py" in log


def test_matrix_takes_git_refs_and_report_renders_it(grown: GrownUpstream, tmp_path: Path) -> None:
    result, data, out = _matrix(grown, tmp_path, "1.0.0", "--ref", "upstream-main", "--no-test")
    assert result.returncode == 0, result.stdout + result.stderr
    ref_row = data["rows"][1]
    assert (ref_row["base"], ref_row["kind"]) == ("upstream-main", "ref")
    assert [c["status"] for c in ref_row["cells"]] == ["applies", "conflicts", "blocked"]
    report = run_tool(grown.project, "report", str(out / "version-matrix.json"))
    assert report.returncode == 0, report.stderr
    assert report.stdout == (out / "version-matrix.md").read_text()
    assert "| patch | vLLM 1.0.0 (pinned) | `upstream-main` |" in report.stdout


def test_bisect_step_aborts_on_an_internal_error(
    grown: GrownUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tools.rebase_ci import bisect

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("bug")

    monkeypatch.chdir(grown.project.vllm)
    monkeypatch.setattr(bisect, "judge", broken)
    assert bisect.bisect_step(Layout(grown.project.root), None) == bisect.STEP_ABORT
