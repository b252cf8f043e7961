"""bench/compare_runs.py: two sets of bench_ucache runs, point by point (synthetic, no GPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench.compare_runs import main


def _write(path: Path, device: str, fi_scale: float, slow: set[tuple[int, int, int]]) -> Path:
    rng = random.Random()
    rows = []
    for hv in (32, 64):
        for B in (8, 256):
            for fl in (0, 100):
                fi = (0.3 * B * hv / 32 + 5.0) * rng.uniform(1.1, 1.3) * fi_scale
                ours = fi * (1.04 if (hv, B, fl) in slow else rng.uniform(0.8, 0.98))
                us = {"ours": ours, "flashinfer": fi}
                rows.append(dict(arm="serving", HV=hv, B=B, flush_pct=fl, floor_us=1.0, us=us))
    meta = dict(command="bench", device=device)
    path.write_text(json.dumps(dict(meta=meta, results=rows)))
    return path


def test_lists_each_sets_slow_points_and_the_time_shift(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", "card A", 1.0, {(32, 256, 0)})
    b = _write(tmp_path / "b.json", "card B", 0.5, {(64, 8, 100)})
    out = tmp_path / "c.md"
    assert main(["--a", str(a), "--b", str(b), "--out", str(out)]) == 0
    text = out.read_text()
    assert "A: card A; B: card B; 8 common points." in text
    assert "| serving | 32 | 256 | 0 | 1.040 | 0." in text
    assert "| serving | 64 | 8 | 100 | 0." in text and "| 1.040 |" in text
    assert "ours slower than flashinfer: A 1 / 8, B 1 / 8." in text
    fi_rows = [ln for ln in text.splitlines() if ln.startswith("| 0 |") or ln.startswith("| 100 |")]
    assert len(fi_rows) == 2
    for ln in fi_rows:  # B's flashinfer is drawn at half A's scale, up to the 1.1-1.3 draws
        assert 0.5 * 1.1 / 1.3 - 1e-9 <= float(ln.split("|")[2]) <= 0.5 * 1.3 / 1.1 + 1e-9


def test_missing_file_names_what_to_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = _write(tmp_path / "a.json", "card A", 1.0, set())
    with pytest.raises(SystemExit):
        main(["--a", str(a), "--b", str(tmp_path / "nope.json")])
    assert "nope.json: no such file" in capsys.readouterr().err
