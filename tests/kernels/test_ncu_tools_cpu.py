"""bench/ncu_summary.py (the k3 call's Nsight Compute table) and bench/ncu_profile.py (its driver)
on CPU: the table from a raw-CSV export, and a clean refusal without CUDA."""

from __future__ import annotations

import lzma
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.ncu_sass import read_kernels
from bench.ncu_sass import summarize as sass_summary
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


def _summary_of(tmp_path: Path, units: dict[str, str], *launches: tuple[str, ...]) -> list[str]:
    """summarize() of a raw export with these metric columns (metric -> ncu's unit) and one row
    per launch (its name, then its values in the columns' order)."""

    def line(cells: list[str]) -> str:
        return ",".join(f'"{c}"' for c in cells) + "\n"

    path = tmp_path / "raw.csv"
    path.write_text(
        line(["ID", "Kernel Name", *units])
        + line(["", "", *units.values()])
        + "".join(line([str(i), *launch]) for i, launch in enumerate(launches))
    )
    return summarize(path)


def test_summary_dram_columns_in_megabytes(tmp_path: Path) -> None:
    lines = _summary_of(
        tmp_path,
        {
            "dram__throughput.avg.pct_of_peak_sustained_elapsed": "%",
            "dram__bytes.sum": "Gbyte",
            "lts__t_sector_hit_rate.pct": "%",
        },
        ("ours/HV32/B256/f0", "81.5", "0.3712", "12.5"),
        ("flashinfer/HV32/B256/f0", "90", "0.3712", "1"),
    )
    assert "| 81.5 | 371.2 | 12.5 |" in lines[2]
    assert "| 90 | 371.2 | 1 |" in lines[3]


def test_summary_l2_columns(tmp_path: Path) -> None:
    """L2 load and write sectors (session 20: the H200's L2 at ~90 % binds the table; its 16-bit
    stores write twice the sectors of flashinfer's 16-byte ones)."""
    lines = _summary_of(
        tmp_path,
        {
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": "%",
            "lts__t_sectors_op_write.sum": "sector",
        },
        ("ours/HV32/B256/f0", "90.27", "1,108,709"),
    )
    assert "| L2% | L2 wr Msec |" in lines[0]
    assert "| 90.27 | 1.109 |" in lines[2]


def test_summary_instructions_column(tmp_path: Path) -> None:
    """Warp instructions executed in millions (session 21: the table issued 14-18 % more than
    flashinfer on the H200; tproj brought it to flashinfer's count), whatever unit ncu exports."""
    launches = (("ours/HV32/B256/f0", "40,289,280"), ("flashinfer/HV32/B256/f0", "35.09"))
    lines = _summary_of(tmp_path, {"smsp__inst_executed.sum": "inst"}, *launches)
    assert lines[0].endswith("| Minst | top stalls (warps per issue) |")
    assert "| 40.29 |" in lines[2]
    lines = _summary_of(tmp_path, {"smsp__inst_executed.sum": "Minst"}, *launches)
    assert "| 35.09 |" in lines[3]


SASS_CSV = """"Kernel Name","ours/HV32/B256/f0/kernel_x"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb",\
"stall_barrier","stall_long_sb (Not Issued)"
"0x0","LDG.E.128 R16, desc[UR8][R10.64]","1","8192","0","0","0"
"0x10","@!P0  BAR.SYNC.DEFER_BLOCKING 0x0","30","8192","0","30","0"
"0x20","MOV R40, R16","60","8192","60","0","50"
"0x30","HMMA.16816.F32 R60, R40, R60, RZ","9","8192","0","0","0"
"Kernel Name","flashinfer/HV32/B256/f0/kernel_y"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb"
"0x0","@!P0  NANOSLEEP.SYNCS 0x989680","10","1,024","10"
"""


def test_sass_summary_places_the_stalls(tmp_path: Path) -> None:
    """bench/ncu_sass.py: per kernel, stall shares by reason and opcode (predicates stripped,
    'Not Issued' columns not double-counted), the top instructions with their index, and the
    memory map; an .xz export reads the same."""
    path = tmp_path / "sass.csv.xz"
    path.write_bytes(lzma.compress(SASS_CSV.encode()))
    ours, fi = read_kernels(path)
    assert len(ours.rows) == 4 and fi.rows[0]["Instructions Executed"] == "1,024"
    text = "\n".join(sass_summary(ours, top=2, show_map=True))
    assert "100 stall samples" in text
    assert "long_sb 60.0 %" in text and "barrier 30.0 %" in text and "Not Issued" not in text
    assert "opcodes by stall samples: MOV 60.0 %, BAR 30.0 %" in text
    assert "| 2 | 60.0 | long_sb | `MOV R40, R16` |" in text
    assert "    0 LDG" in text and "    1 BAR" in text and "    3 HMMA" in text
    assert "1024 warp-instructions" in "\n".join(sass_summary(fi, top=1, show_map=False))


def test_sass_summary_refuses_other_csv(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(RAW)
    with pytest.raises(SystemExit, match="not `ncu --page source --csv` output"):
        read_kernels(path)
