"""bench/ptxas_regs.py: the launch bound lands where ptxas reads it, and one real compile reports
registers, spills and CTAs per SM (skips without a CUDA >= 12.9 ptxas or CuTe-DSL)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from bench import ptxas_regs

PTX = ".visible .entry k(\n)\n.reqntid 128, 1, 1\n{\nret;\n}\n"


def test_launch_bound_goes_after_reqntid_once() -> None:
    text = ptxas_regs.with_bound(PTX, 6)
    assert ".reqntid 128, 1, 1\n.minnctapersm 6\n{" in text
    assert ptxas_regs.with_bound(text, 5) == text, "an existing bound is kept"
    assert ptxas_regs.with_bound(PTX, 0) == PTX, "0 = no launch bound"
    with pytest.raises(ValueError, match="reqntid"):
        ptxas_regs.with_bound(".visible .entry k()\n{\n}\n", 5)


def _ptxas_reads_ptx_88() -> str | None:
    for cand in ptxas_regs.ptxas_candidates():
        out = subprocess.run([cand, "--version"], capture_output=True, text=True).stdout
        if "release 12.9" in out or "release 13" in out or "cuda_13" in out:
            return cand
    return None


def test_real_compile_reports_registers(tmp_path: Path) -> None:
    ptxas = _ptxas_reads_ptx_88()
    if ptxas is None:
        pytest.skip("no CUDA >= 12.9 ptxas on this machine (PTX 8.8)")
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    text = ptxas_regs.ours_ptx(3, 4, 32, tmp_path / "dump").read_text()
    free = ptxas_regs.ptxas_info(ptxas, ptxas_regs.with_bound(text, 0), tmp_path)
    bound = ptxas_regs.ptxas_info(ptxas, ptxas_regs.with_bound(text, 7), tmp_path)
    assert 32 <= free["registers"] <= 255 and free["ctas_by_regs"] >= 1
    assert bound["registers"] <= 72, "7 CTAs/SM of 128 threads leave at most 72 registers"
    assert bound["ctas_by_regs"] == 7
