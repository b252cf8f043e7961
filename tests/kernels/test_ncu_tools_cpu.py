"""bench/ncu_summary.py (the k3 call's Nsight Compute table) and bench/ncu_profile.py (its driver)
on CPU: the table from a raw-CSV export, and a clean refusal without CUDA."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.ncu_summary import summarize

ROOT = Path(__file__).resolve().parents[2]
RAW = """==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","launch__registers_per_thread",\
"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","","nsecond","register/thread","ratio","ratio","ratio"
"0","ours/HV32/B256/f0/kernel_cutlass_kernel_x","118,500","90","3.5","1.25","0"
"1","flashinfer/HV32/B256/f0","86,000","73","2","4","0.5"
"""


def test_summary_table_orders_stalls_and_converts_units(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(RAW)
    lines = summarize(path)
    assert lines[0].startswith("| launch | us |")
    ours, fi = lines[2], lines[3]
    assert "| ours/HV32/B256/f0 | 118.5 |" in ours and "| 90 |" in ours
    assert ours.endswith("long_scoreboard 3.50, barrier 1.25 |")  # zero stalls left out
    assert fi.endswith("barrier 4.00, long_scoreboard 2.00, wait 0.50 |")


def test_summary_of_an_empty_export(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text("==ERROR== no kernels were profiled\n")
    assert summarize(path) == [f"# {path}: no profiled launches"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without CUDA")
def test_profile_driver_refuses_without_cuda() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/ncu_profile.py", "--backends", "oracle"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "needs CUDA" in proc.stderr


def test_summary_dram_columns_in_megabytes(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(
        '"ID","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed",'
        '"dram__bytes.sum","lts__t_sector_hit_rate.pct"\n'
        '"","","%","Gbyte","%"\n'
        '"0","ours/HV32/B256/f0","81.5","0.3712","12.5"\n'
        '"1","flashinfer/HV32/B256/f0","90","0.3712","1"\n'
    )
    lines = summarize(path)
    assert "| 81.5 | 371.2 | 12.5 |" in lines[2]
    assert "| 90 | 371.2 | 1 |" in lines[3]
