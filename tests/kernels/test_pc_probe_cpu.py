"""CPU checks of bench/pc_probe.py (the producer / consumer streaming probe of session 26): its
configuration errors, the checksum it verifies every launch against, and what its two kernels
compile to for sm_90a (no GPU needed: CuTe-DSL cross-compiles)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import pc_probe  # noqa: E402


@pytest.mark.parametrize(
    ("config", "names"),
    [
        (("bogus", 2, 2, 4096, 0), "mode"),
        (("pc", 2, 2, 1000, 0), "copy_bytes"),
        (("pc", 2, 2, 4096, -1), "tail"),
        (("pc", 1, 2, 4096, 0), "stages"),
        (("pc", 6, 2, 4096, 0), "lower ctas or stages"),
        (("pc", 2, 2, 4096, 0, 6), "warps"),
        (("plain", 1, 1, 4096, 0, 8), "plain: 4"),
        (("pc", 2, 2, 4096, 2000, 8, 200), "not both"),
        (("pc", 2, 2, 4096, 0, 8, 1 << 16), "FMA-loop iterations"),
    ],
)
def test_bad_configs_name_what_to_change(config: tuple, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        pc_probe.check_config(*config)


def test_parse_config_forms() -> None:
    assert pc_probe.parse_config("plain:2000") == ("plain", 1, 1, 4096, 2000, 4, 0)
    assert pc_probe.parse_config("pc:3:2:0") == ("pc", 3, 2, 4096, 0, 4, 0)
    assert pc_probe.parse_config("pc:2:3:2000:8") == ("pc", 2, 3, 4096, 2000, 8, 0)
    assert pc_probe.parse_config("pc:2:2:2000:8:1024") == ("pc", 2, 2, 1024, 2000, 8, 0)
    # wN: N FMA-loop iterations instead of clock cycles
    assert pc_probe.parse_config("pc:2:2:w200:8") == ("pc", 2, 2, 4096, 0, 8, 200)
    assert pc_probe.parse_config("plain:w100") == ("plain", 1, 1, 4096, 0, 4, 100)
    for bad in ("pc:3:2", "plain", "pc:a:2:0", "pc:1:2:3:4:5:6", "pc:2:2:wx"):
        with pytest.raises(ValueError, match="expected plain:TAIL or pc:STAGES:CTAS:TAIL"):
            pc_probe.parse_config(bad)


def test_expected_checksum_is_the_xor_of_each_threads_16_byte_columns() -> None:
    """The reference the GPU run compares against, checked against a direct per-byte reading of
    the kernel's addressing (thread t reads bytes t * 16 + j * 2048, j < 16, of its item)."""
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    hv, B = 3, 2
    pool = torch.randn(5, hv, 128, 128, generator=gen).to(torch.bfloat16)
    idx = torch.tensor([4, 1], dtype=torch.int32)
    item = 4  # row 1 (slot 1), head 1
    raw = pool[1, 1].contiguous().view(torch.uint8).reshape(-1)
    for warps in (4, 8):
        n = 32 * warps
        got = pc_probe.expected_checksum(pool, idx, warps)
        assert got.shape == (B * hv, 512)  # 2 KB per item either way
        per = 2048 // n  # bytes a thread writes
        for t in (0, 77, n - 1):
            want = torch.zeros(16, dtype=torch.uint8)
            for j in range(32768 // (16 * n)):
                want ^= raw[t * 16 + j * 16 * n : t * 16 + j * 16 * n + 16]
            if warps == 8:
                want = want[:8] ^ want[8:]
            row = got[item].contiguous().view(torch.uint8)
            assert torch.equal(row[t * per : (t + 1) * per], want)


def _compile_ptx(tmp_path: Path, configs: list[tuple]) -> str:
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl (module `cutlass`) is not installed")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bench.pc_probe import compile_probe\n"
        f"for c in {configs!r}: compile_probe(*c)\n"
    )
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx")
    tmp_path.mkdir(parents=True, exist_ok=True)
    env["CUTE_DSL_DUMP_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(REPO)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    files = sorted(tmp_path.glob("*.ptx"))
    assert len(files) == len(configs)
    return "\n".join(p.read_text() for p in files)


def test_plain_compiles_to_one_item_per_cta(tmp_path: Path) -> None:
    ptx = _compile_ptx(tmp_path, [("plain", 1, 1, 4096, 0)])
    assert ptx.count("cp.async.bulk.shared::cluster.global") == 8  # 8 x 4 KB = one state
    assert ptx.count("mbarrier.init") == 2  # full + empty of its one stage
    assert ptx.count("ld.shared.v4.b32") == 16 and "%clock64" not in ptx  # tail 0: no spin


def test_pc_compiles_a_producer_loop_and_a_consumer_loop(tmp_path: Path) -> None:
    ptx = _compile_ptx(tmp_path, [("pc", 3, 2, 4096, 2000)])
    assert ".minnctapersm 2" in ptx
    assert ptx.count("mbarrier.init") == 6  # full + empty per stage
    assert ptx.count("cp.async.bulk.shared::cluster.global") == 8
    assert ptx.count("mbarrier.try_wait.parity") == 2  # producer: empty; consumers: full
    assert ptx.count("mbarrier.arrive.shared") == 1  # the consumers' release
    assert "%clock64" in ptx and "2000" in ptx  # the tail's spin


def test_pc_with_eight_consumer_warps(tmp_path: Path) -> None:
    """The :8 form: 288 threads (the producer is warp 8), 8 arrivals per stage release, each
    consumer thread 8 reads and one 8-byte store (2 KB per item, as with 4 warps)."""
    ptx = _compile_ptx(tmp_path / "c4096", [("pc", 2, 3, 4096, 2000, 8)])
    small = _compile_ptx(tmp_path / "c1024", [("pc", 2, 2, 1024, 2000, 8)])
    assert small.count("cp.async.bulk.shared::cluster.global") == 32  # 1 KB copies
    assert ptx.count("cp.async.bulk.shared::cluster.global") == 8
    assert ".maxntid 288" in ptx or ".reqntid 288" in ptx
    assert ptx.count("ld.shared.v4.b32") == 8
    assert "st.global.v2.b32" in ptx and "st.global.v4.b32" not in ptx


def test_work_tail_is_an_fma_loop_that_only_an_impossible_sum_lets_out(tmp_path: Path) -> None:
    """The wN form: a run-time loop of four fp32 FMAs per iteration (issue pressure, not a clock
    spin), its sum compared with -1.0 and folded into the checksum by a select (never taken on
    the GPU: the written bytes stay the state's checksum)."""
    ptx = _compile_ptx(tmp_path, [("pc", 2, 2, 4096, 0, 8, 200)])
    assert "%clock64" not in ptx
    assert ptx.count("fma.rn.f32") == 4  # one loop body, not 200 unrolled copies
    assert "setp.eq.f32" in ptx and "0fBF800000" in ptx  # == -1.0
    assert "200" in ptx  # the trip count


def test_ratio_table_reads_each_column_against_flashinfer_and_the_floor() -> None:
    rows = [dict(HV=64, B=256, floor_us=130.0, us={"flashinfer": 160.0, "pc:2:2:0:8": 144.0},
                 wrong=["pc:2:2:0:8"])]  # fmt: skip
    table = pc_probe.ratio_table(["flashinfer", "pc:2:2:0:8"], rows).splitlines()
    assert table[0].startswith("| HV | B | floor us | flashinfer /fi (/floor)")
    assert table[2] == "| 64 | 256 | 130.0 | 1.000 (1.23) | 0.900 (1.11) WRONG |"


def test_bad_config_on_the_command_line_is_a_usage_error() -> None:
    """A bad --configs word exits 2 with the message naming the expected forms, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.pc_probe", "--configs", "pc:2:2:wq:8"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "TAIL may be wN" in proc.stderr and "Traceback" not in proc.stderr
