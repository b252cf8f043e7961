"""bench/sr_drift.py's bookkeeping on the CPU (the kernel runs only on the H200): the table is
rewritten after every run, and `--budget-s` starts no run past the budget but keeps what ran."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import sr_drift


class FakeHarness:
    def __init__(self, handle, cfg) -> None:
        self.cfg = cfg

    def run(self):
        series = [1e-3 * (1 + 0.01 * i) for i in range(self.cfg.steps)]
        return SimpleNamespace(
            metric_series=lambda name, n: series,
            steps=[SimpleNamespace(flush_rows=2)] * self.cfg.steps,
            ok=True,
            failures=lambda n: [],
        )


def test_rows_are_written_as_they_finish_and_the_budget_stops_new_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter(range(0, 10_000, 10))  # each time.time() call advances 10 s
    monkeypatch.setattr(sr_drift.time, "time", lambda: next(clock))
    monkeypatch.setattr(sr_drift, "handle_for", lambda arm, sr: None)
    monkeypatch.setattr(sr_drift, "ConformanceHarness", FakeHarness)
    argv = ["--steps", "40", "--arms", "serving", "--gates", "no_decay", "mixed"]
    assert sr_drift.main([*argv, "--budget-s", "45", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "sr_drift.json").read_text())["rows"]
    # budget checks at t=10 and 40 start runs (each reads the clock twice more); the third check
    # (t=70) is past 45 s
    assert [(r["gates"], r["sr"]) for r in rows] == [("no_decay", False), ("no_decay", True)]
    assert all(r["steps"] == 40 and r["wall_s"] == 10 and r["flushes"] == 80 for r in rows)
    table = (tmp_path / "sr_drift.md").read_text()
    assert table.count("| serving | no_decay |") == 2 and "| 40 | 80 |" in table
