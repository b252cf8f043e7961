"""bench/ptxas_regs.py: the launch bound lands where ptxas reads it, and one real compile reports
registers, spills and CTAs per SM (skips without a CUDA >= 12.9 ptxas or CuTe-DSL)."""

from __future__ import annotations

import importlib.util
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


def test_real_compile_reports_registers(tmp_path: Path) -> None:
    ptxas = ptxas_regs.ptxas_reading_ptx88()
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


IR = """llvm.func @other() {
    %9 = llvm.mlir.constant(7 : i64) : i64
}
llvm.func @host() {
    %8 = llvm.mlir.constant(128 : i32) : i32
    %9 = llvm.mlir.constant(44448 : i64) : i64
    %16 = llvm.getelementptr %10[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, \
array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %9, %16 : i64, !llvm.ptr
}
"""


def test_launch_smem_bytes_reads_the_launch_struct_of_its_own_function() -> None:
    assert ptxas_regs.launch_smem_bytes(IR) == 44448
    assert ptxas_regs.launch_smem_bytes(IR.replace("[0, 2]", "[0, 1, 2]")) is None


def test_shared_memory_sets_the_ctas_per_sm_as_measured(tmp_path: Path) -> None:
    """What ncu measured on the H200 (results/kernel/k12, k13): v5b's late3 requested 28,832 B
    (ncu 28.85 KB); v10 (shipped since session 16) adds a 16 B stage placeholder; late13
    (36.4 KB) 6 CTAs/SM; late10 with the 16-bit v slice fits 5 CTAs/SM in 227 KiB (1 KiB
    reserved per CTA)."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    nxt = ptxas_regs.ROOT / "kernels/gdn_ucache_flush_next.py"
    if "self.vs16" not in nxt.read_text():
        pytest.skip("next has no 16-bit v slice")
    for late, kernel, want_ctas in ((3, None, 7), (13, nxt, 6), (10, nxt, 5)):
        dump = tmp_path / f"l{late}"
        ptxas_regs.ours_ptx(late, 4, 32, dump, kernel)
        info = ptxas_regs.smem_info(dump)
        assert info["ctas_by_smem"] == want_ctas, (late, info)
        if late == 3:
            assert info["smem_bytes"] == 28832 + 16


def test_dsreg_fits_late13_in_seven_ctas_per_sm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """next's dsreg (session 16): without the 4.6 KB ds round trip late13 requests 31,776 B, 7
    CTAs/SM (what ncu showed on the H100, results/kernel/k16); at T > 4 the knob is off (the
    projections would need 16 registers per tile), so the kernel is the same as without it."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    nxt = ptxas_regs.ROOT / "kernels/gdn_ucache_flush_next.py"
    if "self.dsreg" not in nxt.read_text():
        pytest.skip("next has no dsreg knob")
    info = {}
    for dsreg, T in ((1, 4), (1, 8), (0, 8)):
        monkeypatch.setenv("GDN_UCACHE_DSREG", str(dsreg))
        dump = tmp_path / f"d{dsreg}t{T}"
        ptxas_regs.ours_ptx(13, T, 32, dump, nxt)
        info[dsreg, T] = ptxas_regs.smem_info(dump)
    assert info[1, 4] == {"smem_bytes": 31776, "ctas_by_smem": 7}
    assert info[1, 8] == info[0, 8]


def test_tproj_compiles_without_a_spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """next's tproj (session 21) with the B >= 128 entry's knobs, compiled with the ptxas options
    its compile passes (TPROJ_PTXAS_OPTIONS): no spill. At ptxas's default level its first form
    spilled the state head pointer at 64 registers and ran 0.6-1.4 % slower on an H100
    (results/kernel/k24-h100)."""
    ptxas = ptxas_regs.ptxas_reading_ptx88()
    if ptxas is None:
        pytest.skip("no CUDA >= 12.9 ptxas on this machine (PTX 8.8)")
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    nxt = ptxas_regs.ROOT / "kernels/gdn_ucache_flush_next.py"
    if "TPROJ_PTXAS_OPTIONS = " not in nxt.read_text():
        pytest.skip("next has no tproj knob")
    spec = importlib.util.spec_from_file_location("gdnu_tproj_opts", nxt)
    kmod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kmod)
    for name in ("T1EARLY", "T1L2", "WVEARLY", "TPROJ"):
        monkeypatch.setenv(f"GDN_UCACHE_{name}", "1")
    ptx = ptxas_regs.ours_ptx(13, 4, 32, tmp_path / "d", nxt).read_text()
    info = ptxas_regs.ptxas_info(ptxas, ptx, tmp_path, tuple(kmod.TPROJ_PTXAS_OPTIONS.split()))
    assert info["spill_stores"] == info["spill_loads"] == 0, info


def test_ctas_by_registers_rounds_to_the_allocation_unit() -> None:
    """Registers are allocated per warp in units of 256 (8 per thread): 84 registers hold 5 CTAs
    of 128 threads per SM, as Nsight Compute reported for afe (results/kernel/k22-h100), not the
    6 that 65536 / (84 x 128) suggests."""
    from bench.ptxas_regs import ctas_by_registers

    assert [ctas_by_registers(r) for r in (64, 72, 80, 84, 86, 88, 96)] == [8, 7, 6, 5, 5, 5, 5]
    assert ctas_by_registers(16) == 32
