"""bench/targets.py: issue #6's targets read off bench_ucache JSON (synthetic rows, no GPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench.targets import main


def _rows(arm: str, slow_point: tuple[int, int, int]) -> list[dict]:
    rng = random.Random()
    rows = []
    for hv in (32, 48, 64):
        for B in (1, 8, 32, 128, 256):
            for fl in (0, 20, 100):
                floor = 0.3 * B * hv / 32 * (1.5 if fl == 100 else 1.0)
                fi = floor * rng.uniform(1.1, 1.4) + 5.0
                ours = fi * (1.05 if (hv, B, fl) == slow_point else rng.uniform(0.8, 0.99))
                us = {"ours": ours, "flashinfer": fi, "triton_vllm": ours * 3}
                rows.append(dict(arm=arm, HV=hv, B=B, flush_pct=fl, floor_us=floor, us=us))
    return rows


def test_report_counts_wins_and_names_the_slow_point(tmp_path: Path) -> None:
    paths = []
    for arm, slow in (("serving", (48, 256, 0)), ("bf16", (64, 32, 20))):
        p = tmp_path / f"{arm}.json"
        meta = dict(command=f"bench {arm}")
        if arm == "serving":
            meta["launch_floor_us"] = 3.25  # older files (bf16 here) have none
        p.write_text(json.dumps(dict(meta=meta, results=_rows(arm, slow))))
        paths.append(str(p))
    out = tmp_path / "t.md"
    assert main([*paths, "--out", str(out)]) == 0
    text = out.read_text()
    assert "ours <= flashinfer at 88/90 points" in text
    assert "serving HV=48 B=256 0 % 1.050" in text and "bf16 HV=64 B=32 20 % 1.050" in text
    assert "| serving | 256 | 0 | 0." in text  # the range over HV includes the slow point
    assert "| serving | 1 | 100 | **" in text  # every HV faster: bold
    assert "B = 1, serving:" in text and "bench serving" in text
    assert "a one-kernel graph takes 3.25 us" in text
    bf16_b1 = next(line for line in text.splitlines() if "B = 1, bf16" in line)
    assert "one-kernel" not in bf16_b1


def test_repeat_runs_merge_to_median_ratios_and_count_flips(tmp_path: Path) -> None:
    # three serving processes: at HV=32 B=256 verify ours is 0.95x, 1.04x and 1.06x flashinfer
    # (the median ratio 1.04 loses, and the runs disagree); elsewhere the same faster rows
    base = _rows("serving", (48, 256, 0))
    paths = []
    for run, r32 in enumerate((0.95, 1.04, 1.06)):
        rows = [dict(r, us=dict(r["us"])) for r in base]
        for r in rows:
            if (r["HV"], r["B"], r["flush_pct"]) == (32, 256, 0):
                r["us"]["ours"] = r["us"]["flashinfer"] * r32
            r["us"]["flashinfer"] *= 1.0 + 0.05 * run  # absolute times move between runs
            r["us"]["ours"] *= 1.0 + 0.05 * run
        p = tmp_path / f"run{run}.json"
        meta = dict(command=f"bench serving {run}", device="NVIDIA H200")
        p.write_text(json.dumps(dict(meta=meta, results=rows)))
        paths.append(str(p))
    out = tmp_path / "t.md"
    assert main([*paths, "--out", str(out)]) == 0
    text = out.read_text()
    assert "Commands (NVIDIA H200):" in text and "bench serving 2" in text
    assert "3 runs; 45 points timed in more than one" in text
    assert "disagree on ours <= flashinfer: 1 (serving HV=32 B=256 0 %)." in text
    assert "ours <= flashinfer at 43/45 points" in text  # the slow point and HV=32 B=256
    assert "serving HV=32 B=256 0 % 1.040" in text


def test_floor_at_the_cards_own_read_rate(tmp_path: Path) -> None:
    """A run that measured its card's streaming-read rate (bench_ucache since session 24) also
    reads B >= 128 against the floor at that rate; a run without it keeps the one line."""
    rows = _rows("serving", (48, 256, 0))
    for r in rows:
        r["floor_bytes"] = r["floor_us"] * 1e-6 * 4.3e12  # the floor column's 4.3 TB/s
    p = tmp_path / "h100.json"
    meta = dict(command="bench serving", device="NVIDIA H100", read_rate_bytes_per_s=3.0e12)
    p.write_text(json.dumps(dict(meta=meta, results=rows)))
    out = tmp_path / "t.md"
    assert main([str(p), "--out", str(out)]) == 0
    line = next(ln for ln in out.read_text().splitlines() if "B >= 128, 20 % flush" in ln)
    sel = [r for r in rows if r["B"] >= 128 and r["flush_pct"] == 20]
    x = sum(r["us"]["ours"] / r["floor_us"] for r in sel) / len(sel)
    assert f"mean {x:.2f}x the floor" in line
    assert f"own streaming-read rate (3.00 TB/s, a sum over 1 GiB) {x * 3.0 / 4.3:.2f}x" in line
    meta.pop("read_rate_bytes_per_s")
    p.write_text(json.dumps(dict(meta=meta, results=rows)))
    assert main([str(p), "--out", str(out)]) == 0
    assert "own streaming-read rate" not in out.read_text()
