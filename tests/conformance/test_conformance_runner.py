"""run_gpu_suite.py end to end on CPU with the oracle backend: units in subprocesses, the JSON and
markdown summary, skipped backends listed with their reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_runner_writes_summary(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(REPO / "tests/conformance/run_gpu_suite.py"),
        "--out",
        str(tmp_path),
        "--backends",
        "oracle,ours",
        "--arms",
        "serving",
        "--cases",
        "t4_boundaries,t8_boundaries",
        "--max-steps",
        "2",
        "--deadline-s",
        "120",
        "--jobs",
        "2",
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "conformance.json").read_text())
    assert summary["counts"]["passed"] == 2
    assert {row["case"] for row in summary["cases"]} == {"t4_boundaries", "t8_boundaries"}
    assert "ours" in summary["unavailable"] or any(r["backend"] == "ours" for r in summary["cases"])
    markdown = (tmp_path / "conformance.md").read_text()
    assert "| oracle | serving | t4_boundaries | passed |" in markdown


def test_drift_plot_from_committed_results(tmp_path: Path) -> None:
    results = REPO / "results/conformance/h200-conformance.json"
    out = tmp_path / "drift.png"
    cmd = [sys.executable, str(REPO / "bench/drift_plot.py"), str(results), str(out)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.stat().st_size > 10_000
