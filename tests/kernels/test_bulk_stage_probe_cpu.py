"""v9's state path compiles for sm_90a on the CPU (kernels/NOTES.md "Session 10"): bulk async
copies of half a state, one row at a padded pitch each, completing on one mbarrier that expects
the half's bytes, then `ldmatrix` reads; the state is never in registers while in flight.
Skips without CuTe-DSL; the ptxas half skips without a CUDA >= 12.9 ptxas."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import ptxas_regs

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests/kernels/_bulk_stage_probe.py"


def test_bulk_stage_probe_emits_bulk_copies_an_mbarrier_and_ldmatrix(tmp_path: Path) -> None:
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    dump = tmp_path / "dump"
    dump.mkdir()  # CuTe-DSL writes nothing into a directory that does not exist
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump))
    proc = subprocess.run(
        [sys.executable, str(PROBE)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (ptx,) = dump.glob("*.ptx")
    text = ptx.read_text()
    copies = re.findall(r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                        r" \[%r\d+\], \[%rd\d+\], 256, \[%r\d+\]", text)  # fmt: skip
    assert len(copies) == 2, "two 256-byte rows per lane of the issuing warp"
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r" in text and "16384;" in text
    assert "mbarrier.try_wait.parity.shared.b64" in text
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in text
    ptxas = next(
        (c for c in ptxas_regs.ptxas_candidates() if "release 13" in subprocess.run(
            [c, "--version"], capture_output=True, text=True).stdout),
        None,
    )  # fmt: skip
    if ptxas is None:
        pytest.skip("no CUDA 13 ptxas here: the PTX checks passed, the register count is not read")
    info = ptxas_regs.ptxas_info(ptxas, ptx.read_text(), tmp_path)
    assert info["registers"] <= 32 and info["spill_stores"] == 0
