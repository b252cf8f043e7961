"""The paste-ready markdown of scripts/report.sh (tools/rebase_ci/report.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.rebase_ci.report import bisect_markdown, matrix_markdown, render

MATRIX = {
    "kind": "gdn-ucache-version-matrix",
    "pinned": "0.33.0",
    "series": ["a.patch", "b|c.patch"],
    "test": "static",
    "rows": [
        {
            "base": "0.33.0", "kind": "version", "commit": "f" * 40, "upstream_commit": "4ba787ec9",
            "pinned": True, "ok": True, "seconds": 1.0, "error": "",
            "cells": [{"patch": "a.patch", "status": "applies", "detail": "", "files": []},
                      {"patch": "b|c.patch", "status": "applies (3-way)", "detail": "",
                       "files": []}],
        },
        {
            "base": "0.32.0", "kind": "version", "commit": "e" * 40, "upstream_commit": "",
            "pinned": False, "ok": False, "seconds": 1.0, "error": "",
            "cells": [{"patch": "a.patch", "status": "conflicts",
                       "detail": "conflicts in vllm/x/a.py, vllm/y/b.py, c.py, d.py",
                       "files": ["vllm/x/a.py", "vllm/y/b.py", "c.py", "d.py"]},
                      {"patch": "b|c.patch", "status": "blocked", "detail": "", "files": []}],
        },
        {
            "base": "origin/main", "kind": "ref", "commit": "", "upstream_commit": "",
            "pinned": False, "ok": False, "seconds": 0.0, "error": "not a commit\nmore",
            "cells": [],
        },
    ],
}  # fmt: skip


def _table(markdown: str) -> list[list[str]]:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]


def test_matrix_markdown_is_one_table_with_a_column_per_base() -> None:
    markdown = matrix_markdown(MATRIX)
    table = _table(markdown)
    assert table[0] == ["patch", "vLLM 0.33.0 (pinned)", "vLLM 0.32.0", "`origin/main`"]
    assert table[1] == ["*upstream commit*", "`4ba787ec9`", "?", "?"]
    assert table[2] == [
        "`a.patch`", "✅ applies", "❌ **conflicts**: `a.py`, `b.py`, `c.py` +1", "⚠ not checked"
    ]  # fmt: skip
    # A '|' in a patch name is escaped so the table keeps its columns.
    assert "`b\\|c.patch`" in markdown and table[3][1] == "✅ applies (3-way)"
    assert table[4] == ["*series*", "**OK**", "**NOT OK**", "**NOT OK**"]
    assert all(len(row) == 4 for row in table)
    assert "- `origin/main`: not a commit" in markdown
    assert "conflicts in vllm/x/a.py" in markdown


def test_bisect_markdown() -> None:
    data = {
        "kind": "gdn-ucache-bisect", "good": "a" * 40, "bad": "b" * 40, "test": "",
        "commits_in_range": 40, "steps": 6,
        "culprit": {"commit": "c" * 40, "subject": "[Core] x | y", "date": "2026-11-20",
                    "shared_files": ["vllm/a.py"],
                    "failing": [{"patch": "p.patch", "status": "conflicts",
                                 "files": ["vllm/a.py"]}]},
    }  # fmt: skip
    markdown = bisect_markdown(data)
    assert "no longer applies" in markdown
    assert "| commit | `cccccccccccc` |" in markdown
    assert "| subject | [Core] x \\| y |" in markdown
    assert "`aaaaaaaaaaaa..bbbbbbbbbbbb` (40 commits, 6 steps)" in markdown
    assert "| failing patch | `p.patch`: conflicts (`vllm/a.py`) |" in markdown
    data["culprit"], data["message"] = None, "the series is fine at BAD; nothing to bisect"
    assert "nothing to bisect" in bisect_markdown(data)


def test_render_refuses_other_json(tmp_path: Path) -> None:
    good = tmp_path / "m.json"
    good.write_text(json.dumps(MATRIX))
    assert render([good]).startswith("### gdn-ucache series vs vLLM releases")
    other = tmp_path / "x.json"
    other.write_text("{}")
    with pytest.raises(ValueError, match="not a rebase-CI result"):
        render([other])


def test_report_script_takes_paths_relative_to_the_caller(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(json.dumps(MATRIX))
    script = Path(__file__).resolve().parents[2] / "scripts" / "report.sh"
    result = subprocess.run(
        ["bash", str(script), "m.json", "-o", "table.md"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "table.md").read_text() == matrix_markdown(MATRIX)
