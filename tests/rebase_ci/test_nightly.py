"""The nightly job (python -m tools.rebase_ci nightly) on the grown synthetic upstream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.rebase_ci.conftest import TEST_COMMAND, GrownUpstream

REPO_ROOT = Path(__file__).resolve().parents[2]


def _nightly(grown: GrownUpstream, target: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.rebase_ci", "nightly", target, "--out", str(out)],
        cwd=REPO_ROOT,
        env=grown.project.env(),
        capture_output=True,
        text=True,
        check=False,
    )


def test_nightly_failure_names_patch_files_range_and_culprit(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    patches_before = grown.project.snapshot_patches()
    result = _nightly(grown, "upstream-main", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    status = json.loads((tmp_path / "nightly.json").read_text())
    base = grown.project.git("rev-parse", "vllm-1.0.0")
    tip = grown.project.git("rev-parse", "upstream-main")
    assert status["applies"] is False and status["rebased"] is False
    assert [c["patch"] for c in status["failing"]] == [grown.patch("kernel")]
    assert status["range"] == f"{base}..{tip}"
    assert status["culprit"]["commit"] == grown.planted
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## ❌ gdn-ucache does not apply on vLLM `upstream-main`")
    assert f"failing patch `{grown.patch('kernel')}`: conflicts; files: `vllm/engine.py`" in summary
    assert f"upstream range: `{base[:12]}..{tip[:12]}`" in summary
    assert f"first bad upstream commit: `{grown.planted[:12]}`" in summary
    assert (tmp_path / "bisect-result.json").is_file()
    assert grown.project.snapshot_patches() == patches_before  # nothing rewritten on failure


def test_nightly_success_rebases_and_keeps_the_range_diff(
    grown: GrownUpstream, tmp_path: Path
) -> None:
    target = grown.commits["u2"]
    result = _nightly(grown, target, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads((tmp_path / "nightly.json").read_text())
    assert status["applies"] and status["rebased"]
    assert (tmp_path / "summary.md").read_text().startswith("## ✅ gdn-ucache rebased onto")
    range_diff = (tmp_path / "range-diff.txt").read_text()
    assert range_diff.count(" = ") == 3  # three patches, unchanged by the rebase
    # The series branch now sits on the target; patches/ was re-exported.
    assert grown.project.git("rev-parse", "gdn-ucache~3") == target
    assert sorted(p.name for p in grown.project.patches.glob("*.patch")) == sorted(
        grown.patch_names
    )


def test_nightly_test_failure_is_named_as_such(grown: GrownUpstream, tmp_path: Path) -> None:
    target = grown.commits["u4"]  # after the test-breaking commit, before the planted conflict
    result = subprocess.run(
        [sys.executable, "-m", "tools.rebase_ci", "nightly", target, "--out", str(tmp_path),
         "--test-cmd", TEST_COMMAND],
        cwd=REPO_ROOT, env=grown.project.env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## ❌ gdn-ucache fails its tests on vLLM")
    assert f"failing patch `{grown.patch('steps')}`: fails tests" in summary
    status = json.loads((tmp_path / "nightly.json").read_text())
    assert status["culprit"]["commit"] == grown.test_breaker
