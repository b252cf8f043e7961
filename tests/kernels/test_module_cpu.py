"""CPU checks of kernels/gdn_ucache_flush.py (and of a next version,
kernels/gdn_ucache_flush_next.py, while one is built and not yet proven on a GPU): module
identity, validation, and sm_90a compilation.

No GPU needed. The compile test cross-compiles kernel variants with CuTe-DSL (CUTE_DSL_ARCH=sm_90a /
sm_100a) and checks that the PTX keeps to SM100-portable instructions (mma.sync, no wgmma/tcgen05).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "kernels" / "gdn_ucache_flush.py"
NEXT = REPO / "kernels" / "gdn_ucache_flush_next.py"  # the next version until it is proven on a GPU
KERNEL_FILES = [KERNEL] + ([NEXT] if NEXT.exists() else [])


def _load(env: dict[str, str], name: str, path: Path = KERNEL):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module", params=KERNEL_FILES, ids=lambda p: p.stem)
def kmod(request):
    env = {"GDN_UCACHE_STATE_DTYPE": "", "GDN_UCACHE_RING_DTYPE": ""}
    module = _load(env, f"gdnu_cpu_bf16_{request.param.stem}", request.param)
    module.__file_under_test__ = request.param
    return module


def test_ring_slots_line_and_constants(kmod) -> None:
    src = kmod.__file_under_test__.read_text()
    found = re.findall(r"^RING_SLOTS(?:\s*:\s*\w+)?\s*=\s*(\d+)", src, flags=re.M)
    assert found == ["32"], "vLLM's init-time scan needs a column-0 `RING_SLOTS = 32` line"
    assert (kmod.K_DIM, kmod.V_DIM_C, kmod.W_RING, kmod.RING_SLOTS, kmod.RING_MASK) == (
        128,
        128,
        16,
        32,
        31,
    )
    assert set(kmod.__all__) == {
        "gated_delta_rule_mtp_ucache_flush",
        "GdnDecodeUCacheFlushKernel",
        "K_DIM",
        "V_DIM_C",
        "W_RING",
        "RING_SLOTS",
        "RING_MASK",
    }
    assert kmod.IO_TORCH == kmod.ST_TORCH == kmod.RING_TORCH == torch.bfloat16
    assert kmod.SUPPORTED_T == (2, 3, 4, 5, 6, 7, 8)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_import_is_self_contained(path: Path) -> None:
    # loadable by path with nothing of the project on sys.path
    code = (
        "import importlib.util, sys; "
        f"s = importlib.util.spec_from_file_location('m', {str(path)!r}); "
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
        "print(m.RING_SLOTS, m.IO_TORCH, m.ST_TORCH, m.RING_TORCH)"
    )
    env = dict(os.environ, GDN_UCACHE_STATE_DTYPE="fp16", GDN_UCACHE_RING_DTYPE="fp16")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["32", "torch.bfloat16", "torch.float16", "torch.float16"]


@pytest.mark.parametrize(
    "env",
    [
        {"GDN_UCACHE_IO_DTYPE": "fp32"},
        {"GDN_UCACHE_STATE_DTYPE": "fp8"},
        {"GDN_UCACHE_IO_DTYPE": "fp16", "GDN_UCACHE_STATE_DTYPE": "bf16"},
        {"GDN_UCACHE_IO_DTYPE": "fp16", "GDN_UCACHE_RING_DTYPE": "bf16"},
    ],
)
@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_bad_dtype_env_raises_at_import(env: dict[str, str], path: Path) -> None:
    with pytest.raises(ValueError, match="GDN_UCACHE_"):
        _load(env, "gdnu_bad", path)


def _args(kmod, B=3, T=4, H=2, HV=4, pool=5, io=torch.bfloat16, st=None, ring=None):
    st = st or kmod.ST_TORCH
    ring = ring or kmod.RING_TORCH
    return dict(
        A_log=torch.zeros(HV),
        a=torch.zeros(B, T, HV, dtype=io),
        dt_bias=torch.zeros(HV),
        q=torch.randn(B, T, H, 128).to(io),
        k=torch.randn(B, T, H, 128).to(io),
        v=torch.randn(B, T, HV, 128).to(io),
        b=torch.zeros(B, T, HV, dtype=io),
        initial_state_source=torch.zeros(pool, HV, 128, 128, dtype=st),
        initial_state_indices=torch.arange(B, dtype=torch.int32),
        k_cache=torch.zeros(pool, H, 32, 128, dtype=ring),
        u_cache=torch.zeros(pool, HV, 32, 128, dtype=ring),
        g_cache=torch.zeros(pool, HV, 32),
        hist_len=torch.zeros(B, dtype=torch.int32),
        cache_base=torch.zeros(B, dtype=torch.int32),
    )


def test_validation_messages(kmod) -> None:
    f = kmod.gated_delta_rule_mtp_ucache_flush
    with pytest.raises(AssertionError, match="IO dtype"):
        f(
            **_args(kmod, io=torch.float16)
            | {"initial_state_source": torch.zeros(5, 4, 128, 128, dtype=torch.bfloat16)}
        )
    with pytest.raises(AssertionError, match="GDN_UCACHE_STATE_DTYPE"):
        f(**_args(kmod, st=torch.float16))
    with pytest.raises(AssertionError, match="GDN_UCACHE_RING_DTYPE"):
        f(**_args(kmod, ring=torch.float16))
    for T in (1, 9):
        with pytest.raises(NotImplementedError, match=f"T={T}"):
            f(**_args(kmod, T=T))
    for fm in (0, 14):
        with pytest.raises(AssertionError, match="flush_min"):
            f(**_args(kmod), flush_min=fm)
    with pytest.raises(NotImplementedError, match="recovery_steps"):
        f(**_args(kmod), recovery_steps=1)
    with pytest.raises(NotImplementedError, match="intermediate_states_buffer"):
        f(**_args(kmod), intermediate_states_buffer=torch.zeros(1))
    with pytest.raises(AssertionError, match="softplus_beta"):
        f(**_args(kmod), softplus_beta=2.0)
    with pytest.raises(AssertionError, match="int32"):
        f(**_args(kmod) | {"hist_len": torch.zeros(3, dtype=torch.int64)})
    with pytest.raises(AssertionError, match="k_cache must be"):
        f(**_args(kmod) | {"k_cache": torch.zeros(5, 2, 16, 128, dtype=torch.bfloat16)})
    with pytest.raises(NotImplementedError, match="inner dims must be dense"):
        f(
            **_args(kmod)
            | {"u_cache": torch.zeros(5, 4, 128, 32, dtype=torch.bfloat16).transpose(2, 3)}
        )
    with pytest.raises(ValueError, match="CUDA"):
        f(**_args(kmod))  # every check passed: only the device is wrong


def test_standalone_commit_guards(kmod) -> None:
    f = kmod.gated_delta_rule_mtp_ucache_flush
    with pytest.raises(ValueError, match="caller-owned cache_base"):
        f(**_args(kmod) | {"cache_base": None})
    with pytest.raises(AssertionError, match="contiguous"):
        f(**_args(kmod) | {"cache_base": torch.zeros(6, dtype=torch.int32)[::2]})
    with pytest.raises(AssertionError, match="hist_len out of legal range"):
        f(**_args(kmod) | {"hist_len": torch.tensor([0, 17, 3], dtype=torch.int32)})
    with pytest.raises(AssertionError, match="cache_base out of legal range"):
        f(**_args(kmod) | {"cache_base": torch.tensor([0, 32, 3], dtype=torch.int32)})
    # restart_hist_on_flush=False: cache_base=None is allowed (reaches the device check)
    with pytest.raises(ValueError, match="CUDA"):
        f(**_args(kmod) | {"cache_base": None}, restart_hist_on_flush=False)


# Every T at the default-size BV, every BV, every dtype arm, stochastic rounding; one sm_100a build.
_VARIANTS_90 = (
    [[T, 16, 32, 64, "bf16", "fp16", "fp16", 0] for T in range(2, 9)]
    + [[4, 16, 32, bv, "bf16", "fp16", "fp16", 0] for bv in (16, 32, 128)]
    + [[4, 16, 64, 128, "bf16", "bf16", "bf16", 0], [4, 16, 48, 128, "fp16", "fp16", "fp16", 0]]
    + [[8, 16, 32, 128, "bf16", "bf16", "bf16", 1], [4, 16, 32, 128, "bf16", "fp16", "fp16", 1]]
    # fp16 checkpoint with bf16 rings (state dtype != ring dtype: scores keep their own B copy)
    + [[4, 16, 32, 128, "bf16", "fp16", "bf16", 0], [4, 16, 32, 64, "bf16", "bf16", "fp16", 0]]
)
# The next version's knobs: late state tiles, persistent CTAs, cp.async prefetch levels
# ([..., late, persistent, prefetch]).
_VARIANTS_NEXT = [
    [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 1, 0],
    [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 3, 0],
    [4, 16, 64, 128, "bf16", "fp16", "fp16", 0, 1, 1],
    [8, 16, 32, 64, "bf16", "bf16", "bf16", 0, 0, 1],
    [3, 16, 48, 32, "fp16", "fp16", "fp16", 1, 1, 1],
    [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 0, 1, 1],
    [5, 16, 32, 16, "bf16", "bf16", "bf16", 0, 1, 1, 1],
    [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 0, 1, 2],
    [8, 16, 64, 64, "fp16", "fp16", "fp16", 0, 1, 1, 2],
    [4, 2, 4, 128, "bf16", "fp16", "fp16", 0, 3, 1, 2],
    # late5 (v8 in next; the shipped file reads it as two late tiles): T=8 with stochastic
    # rounding, and BV=64 where the staged tile is the warp's only one
    [8, 16, 48, 128, "bf16", "bf16", "bf16", 1, 5, 0],
    [6, 16, 32, 64, "fp16", "fp16", "fp16", 0, 5, 0],
    # and BV=32, where warps 2-3 hold no tile and only drain their stage copies
    [2, 16, 32, 32, "bf16", "fp16", "fp16", 0, 5, 0],
]


def _compile(
    arch: str, variants: list, tmp_path: Path, path: Path = KERNEL, keep: str = "ptx"
) -> tuple[list[float], str]:
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl (module `cutlass`) is not installed")
    env = dict(
        os.environ,
        CUTE_DSL_ARCH=arch,
        CUTE_DSL_KEEP=keep,
        CUTE_DSL_DUMP_DIR=str(tmp_path),
        GDN_UCACHE_KERNEL_FILE=str(path),
    )
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "kernels" / "_compile_variants.py"),
            json.dumps(variants),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        if "libcuda" in tail or "no CUDA" in tail.lower():
            pytest.skip(f"CuTe-DSL cannot compile without a GPU here: {tail[-300:]}")
        raise AssertionError(f"compile for {arch} failed:\n{tail}")
    timings = json.loads(proc.stdout.strip().splitlines()[-1])["compile_s"]
    ptx = "\n".join(p.read_text() for p in tmp_path.glob("*.ptx"))
    return timings, ptx


def _has_knobs(path: Path) -> bool:
    # v4 and later: late state tiles, persistent CTAs and prefetch are compile-time knobs
    return "def launch_config(" in path.read_text()


def _portable(ptx: str) -> None:
    assert "mma.sync.aligned.m16n8k16" in ptx
    for banned in ("wgmma", "tcgen05", "setmaxnreg"):
        assert banned not in ptx, f"{banned} in the PTX: not portable between SM90 and SM100"


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_compile_sm90a_variants(tmp_path: Path, path: Path) -> None:
    variants = _VARIANTS_90 + (_VARIANTS_NEXT if _has_knobs(path) else [])
    timings, ptx = _compile("sm_90a", variants, tmp_path, path)
    assert len(timings) == len(variants)
    assert len(list(tmp_path.glob("*.ptx"))) >= 1
    _portable(ptx)
    print(f"sm_90a compile seconds per variant: {timings}")


def _stages_state(path: Path) -> bool:
    # v7 and later: launch knob late=4 stages the state tiles in shared memory
    return "def stage_state_tiles(" in path.read_text()


@pytest.mark.skipif(not NEXT.exists() or not _stages_state(NEXT), reason="no staged-state next")
def test_staged_state_compiles_to_shared_reads(tmp_path: Path) -> None:
    """late=4: the state goes global -> shared by cp.async and comes back with ld.shared.v4, the
    fold's re-read under its own asm string (so it is not merged with the projection's read); at
    T=8 BV=128 too (two tiles per warp)."""
    variants = [
        [4, 16, 32, 64, "bf16", "fp16", "fp16", 0, 4],
        [8, 16, 48, 128, "bf16", "bf16", "bf16", 1, 4],
    ]
    timings, ptx = _compile("sm_90a", variants, tmp_path, NEXT)
    assert len(timings) == 2
    assert "ld.shared.v4.b32" in ptx and "// again" in ptx
    # the prologue waits for the windows' group alone
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx)
    _portable(ptx)


def _next_has_late(mode: int) -> bool:
    """next's launch knob GDN_UCACHE_LATE=mode exists (its LATE_MODES entry: a stable marker,
    unlike the flag tuples, which grow with every new mode)."""
    return NEXT.exists() and re.search(rf"^    {mode}: \"", NEXT.read_text(), re.M) is not None


def _next_bv128_ptx(tmp_path: Path, late: int, name: str | None = None) -> str:
    """PTX of next at T=4, HV=32, BV=128 (two tiles per warp), serving dtypes, launch knob late."""
    dump = tmp_path / (name or f"late{late}")
    dump.mkdir()
    _, ptx = _compile("sm_90a", [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, late]], dump, NEXT)
    return ptx


def _state_op_counts(ptx: str) -> dict[str, int]:
    """How the state moves in a PTX: 16-byte global loads, 16-byte shared reads (the fold's
    re-reads tagged `// again`), per-thread cp.async and waits for all of this thread's copies."""
    return {
        "ldg": len(re.findall(r"ld\.global\S*\.v4", ptx)),
        "lds": ptx.count("ld.shared.v4.b32"),
        "again": ptx.count("// again"),
        "cp_async": len(re.findall(r"cp\.async\.c[ga]", ptx)),
        "wait0": len(re.findall(r"cp\.async\.wait_group\s+0;", ptx)),
    }


@pytest.mark.skipif(not _next_has_late(5), reason="no late5 in next")
def test_late5_stages_only_the_deferred_tile(tmp_path: Path) -> None:
    """late=5 (v8) at BV=128, T=4 (two tiles per warp): tile 0 comes by 8 global 16-byte loads
    per thread, tile 1 by 8 cp.async into shared memory at entry and back by ld.shared.v4 for the
    projection and again for the fold (16 reads); late3 loads both tiles from global memory."""
    counts = {}
    for late in (3, 5):
        ptx = _next_bv128_ptx(tmp_path, late)
        counts[late] = _state_op_counts(ptx)
        if late == 5:
            _portable(ptx)
            # the prologue waits for the windows' group alone
            assert re.search(r"cp\.async\.wait_group\s+1;", ptx)
    assert counts[3]["ldg"] - counts[5]["ldg"] == 8
    assert counts[5]["cp_async"] - counts[3]["cp_async"] == 8
    assert counts[5]["lds"] - counts[3]["lds"] == 16 and counts[5]["again"] == 8


@pytest.mark.skipif(not _next_has_late(6), reason="no late6 in next")
def test_late6_runs_every_tile_through_one_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """late=6 (v9 step 1) at BV=128, T=4: the same copies and shared reads as late4 (every tile
    cp.async'd, read back for the projection and again for the fold), no state load from global
    memory into registers, and one more wait for this thread's copies (tile 1 is issued into
    tile 0's slots only after tile 0 was read). The `alias` knock-out compiles too."""
    counts = {}
    for late in (4, 6):
        ptx = _next_bv128_ptx(tmp_path, late)
        counts[late] = _state_op_counts(ptx)
        if late == 6:
            _portable(ptx)
            assert re.search(r"cp\.async\.wait_group\s+1;", ptx)  # the prologue: windows alone
    for key in ("ldg", "lds", "again", "cp_async"):
        assert counts[6][key] == counts[4][key], (key, counts)
    assert counts[6]["again"] == 16
    assert counts[6]["wait0"] == counts[4]["wait0"] + 1
    monkeypatch.setenv("GDN_UCACHE_SKIP", "alias")
    _next_bv128_ptx(tmp_path, 6, "alias")


@pytest.mark.skipif(not _next_has_late(7), reason="no late7 in next")
def test_late7_stages_the_state_with_bulk_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """late=7 (v9 step 2) at BV=128, T=4: no state load from global memory by the threads and no
    per-thread cp.async of it: each warp arms its mbarrier for 4096 bytes and lanes 0-15 issue
    one 256-byte bulk copy (a state row) per tile (two call sites: entry and the reused stage),
    tile 1 after a proxy fence; three waits (tile 0, tile 1, a pad row's entry copies); the
    projection's and the fold's 16 shared reads per tile as late6's. Other BV are refused by
    name."""
    counts = {}
    for late in (6, 7):
        ptx = _next_bv128_ptx(tmp_path, late)
        counts[late] = _state_op_counts(ptx)
        if late == 7:
            _portable(ptx)
            bulk = re.findall(
                r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                r" \[%r\d+\], \[%rd\d+\], 256, \[%r\d+\]",
                ptx,
            )
            assert len(bulk) == 2  # entry + the reused stage; lanes 0-15, one row each
            assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 2
            assert ptx.count("fence.proxy.async.shared::cta") == 1
            assert len(re.findall(r"mbarrier\.try_wait\.parity", ptx)) >= 3
            assert re.search(r"cp\.async\.wait_group\s+0;", ptx)
    assert counts[7]["ldg"] == counts[6]["ldg"]
    assert counts[6]["cp_async"] - counts[7]["cp_async"] == 16  # 8 per tile, two tiles
    assert counts[7]["lds"] == counts[6]["lds"] and counts[7]["again"] == 16
    # late8: both tiles at entry, 32 lanes one row each, one barrier phase of 8192 bytes
    ptx = _next_bv128_ptx(tmp_path, 8)
    assert (
        len(re.findall(r"cp\.async\.bulk\.shared::cluster\S* \[%r\d+\], \[%rd\d+\], 256,", ptx))
        == 1
    )
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 8192;", ptx)
    assert "fence.proxy.async" not in ptx and ptx.count("// again") == 16
    # late9: tile 0 by global loads into registers at entry (as late5), tile 1 by one bulk copy
    # site at entry; one wait for it and one for a pad row
    ptx9 = _next_bv128_ptx(tmp_path, 9)
    assert _state_op_counts(ptx9)["ldg"] == counts[7]["ldg"] + 8
    assert len(re.findall(r"cp\.async\.bulk\.shared::cluster", ptx9)) == 1
    assert len(re.findall(r"mbarrier\.try_wait\.parity", ptx9)) >= 2
    assert ptx9.count("// again") == 8 and "fence.proxy.async" not in ptx9
    knext = _load({}, "gdnu_cpu_next_late7", NEXT)
    for late in ("8", "9"):
        monkeypatch.setenv("GDN_UCACHE_LATE", late)
        with pytest.raises(ValueError, match=f"late={late} .*needs BV=128.*GDN_UCACHE_BV=128"):
            knext.compile_variant(4, 16, 32, 64)
    monkeypatch.setenv("GDN_UCACHE_LATE", "7")  # one tile per warp at BV=64 (session 11)
    with pytest.raises(ValueError, match=r"late=7 .*needs BV=64 or 128.*GDN_UCACHE_BV=128"):
        knext.compile_variant(4, 16, 32, 32)


@pytest.mark.skipif(not _next_has_late(5), reason="no late5 in next")
def test_unknown_late_mode_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    knext = _load({}, "gdnu_cpu_next_late99", NEXT)
    monkeypatch.setenv("GDN_UCACHE_LATE", "99")
    with pytest.raises(ValueError, match=r"late=99 \(GDN_UCACHE_LATE.*5 \(the first tile"):
        knext.compile_variant(4, 16, 32, 128)


@pytest.mark.skipif(not NEXT.exists() or not _stages_state(NEXT), reason="no staged-state next")
def test_staged_state_refuses_persistent_ctas(monkeypatch: pytest.MonkeyPatch) -> None:
    knext = _load({}, "gdnu_cpu_next_late4", NEXT)
    for late in ("4", "5") if _next_has_late(5) else ("4",):
        monkeypatch.setenv("GDN_UCACHE_LATE", late)
        with pytest.raises(ValueError, match=f"late={late} .*GDN_UCACHE_PERSIST=0"):
            knext.compile_variant(4, 16, 32, 128, persist=True)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_compile_sm100a(tmp_path: Path, path: Path) -> None:
    variants = [[4, 16, 32, 64, "bf16", "fp16", "fp16", 0]]
    if _has_knobs(path):
        variants.append([4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 1, 1, 2])
    timings, ptx = _compile("sm_100a", variants, tmp_path, path)
    _portable(ptx)


def _has_sink(path: Path) -> bool:
    return "def sink_if_magic(" in path.read_text()


@pytest.mark.skipif(not NEXT.exists() or not _has_sink(NEXT), reason="no sink knock-out in next")
def test_stream_knockout_keeps_the_state_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/knockout.py's `stream` variant (GDN_UCACHE_SKIP=proj,epi,fold,sink): the math is
    gone but every state word reaches the predicated magic store, so ptxas cannot drop the loads
    (register and shared-memory state paths)."""
    monkeypatch.setenv("GDN_UCACHE_SKIP", "proj,epi,fold,sink")
    # (one compile per variant: they share the PTX file name); BV=128 late3 has two tiles per
    # warp (two sinks), BV=64 late4 one
    for n, variant in enumerate(
        (
            [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 3],
            [4, 16, 32, 64, "bf16", "fp16", "fp16", 0, 4],
        )
    ):
        dump = tmp_path / str(n)
        dump.mkdir()
        _, ptx = _compile("sm_90a", [variant], dump, NEXT)
        assert ptx.count("setp.eq.s32 pm, ") == (2 if n == 0 else 1)


@pytest.mark.skipif(not _next_has_late(7), reason="no late7 in next")
def test_residency_knobs_compile_and_bad_carveout_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The residency-curve knobs of k10: `padN` (unused shared memory, with `alias`) and the
    preferred carve-out (GDN_UCACHE_CARVEOUT) compile, the carve-out as a CUDA function
    attribute of the kernel op (`cu_attrs`, which every launch applies; session 11 found the
    launch-config route ignored); a carve-out outside 0..100 is refused with the variable's
    name."""
    monkeypatch.setenv("GDN_UCACHE_SKIP", "alias,pad9800")
    monkeypatch.setenv("GDN_UCACHE_CARVEOUT", "100")
    dump = tmp_path / "pad"
    dump.mkdir()
    _, ptx = _compile(
        "sm_90a", [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 7]], dump, NEXT, "ptx,ir"
    )
    _portable(ptx)
    mlir = "\n".join(p.read_text() for p in dump.glob("*.mlir"))
    assert re.search(r"cu_attrs = \{[^}]*preferred_shared_memory_carveout = 100 : i32", mlir)
    # bulk-staged modes ask for the largest carve-out by default; v5b's path (late3) does not
    monkeypatch.delenv("GDN_UCACHE_CARVEOUT")
    monkeypatch.delenv("GDN_UCACHE_SKIP")
    for late, want in ((10, True), (3, False)):
        dump = tmp_path / f"default{late}"
        dump.mkdir()
        variant = [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, late]]
        _compile("sm_90a", variant, dump, NEXT, "ir")
        mlir = "\n".join(p.read_text() for p in dump.glob("*.mlir"))
        assert ("preferred_shared_memory_carveout = 100" in mlir) is want, late
    knext = _load({}, "gdnu_cpu_next_carveout", NEXT)
    monkeypatch.setenv("GDN_UCACHE_CARVEOUT", "150")
    with pytest.raises(
        ValueError, match=r"GDN_UCACHE_CARVEOUT=150: expected -1 \(the driver's\) or a percent"
    ):
        knext.compile_variant(4, 16, 32, 128)


@pytest.mark.skipif(not _next_has_late(10), reason="no late10 in next")
def test_late10_moves_a_warp_tile_by_two_bulk_copies(tmp_path: Path) -> None:
    """late=10 (late7's schedule) and late=11 (late9's): every bulk copy site moves 2048 bytes
    (tile rows 0-7 or 8-15, lanes 0-1), none moves a 256-byte row; the barrier is armed for the
    same 4096 bytes per warp-tile and the shared reads are late7's / late9's."""
    for late, like, sites in ((10, 7, 2), (11, 9, 1)):
        ptx = _next_bv128_ptx(tmp_path, late)
        _portable(ptx)
        copies = re.findall(
            r"cp\.async\.bulk\.shared::cluster\S* \[%r\d+\], \[%rd\d+\], (\d+),", ptx
        )
        assert copies == ["2048"] * sites, copies
        assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == sites
        assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 4096;", ptx)
        ref = _state_op_counts(_next_bv128_ptx(tmp_path, like))
        assert _state_op_counts(ptx) == ref


@pytest.mark.skipif(not _next_has_late(12), reason="no late12 in next")
def test_late12_is_late10_in_less_shared_memory(tmp_path: Path) -> None:
    """late=12: late10's copies and state reads, one more CTA barrier (phase 3 ends before the
    projections overwrite the [k; q] tile) and no fold-fragment copy: the fold's B fragments
    come from the k window (16-bit shared loads) instead of 32-bit words of kb."""
    ptx10 = _next_bv128_ptx(tmp_path, 10)
    ptx12 = _next_bv128_ptx(tmp_path, 12)
    _portable(ptx12)
    assert _state_op_counts(ptx12) == _state_op_counts(ptx10)
    bars = [len(re.findall(r"bar\.sync|barrier\.sync", p)) for p in (ptx10, ptx12)]
    assert bars[1] == bars[0], bars  # the kb build's barrier goes, the phase-3 barrier comes
    u16 = [len(re.findall(r"ld\.shared\.[bu]16", p)) for p in (ptx10, ptx12)]
    assert u16[1] >= u16[0] + 64, u16  # 16 fold steps x 2 words x 2 halves, on flush rows


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_late13_drops_the_fp32_rows_and_a_barrier(tmp_path: Path) -> None:
    """late=13 at BV=64 (one tile per warp): late10's copies, state reads and MMAs, no fp32 [k; q]
    rows in shared memory (phase 1 writes the x fragments), one CTA barrier fewer (the fold-
    fragment copy's; phase 3 keeps one for the window weights), the fold's fragments from the k
    window as late12's; it compiles at BV=128 too."""
    counts = {}
    for late in (10, 12, 13):
        dump = tmp_path / f"bv64-late{late}"
        dump.mkdir()
        _, ptx = _compile("sm_90a", [[4, 16, 32, 64, "bf16", "fp16", "fp16", 0, late]], dump, NEXT)
        counts[late] = {
            "state": _state_op_counts(ptx),
            "bar": len(re.findall(r"bar\.sync|barrier\.sync", ptx)),
            "st_f32": ptx.count("st.shared.v4.f32"),
            "ld16": len(re.findall(r"ld\.shared\.[bu]16", ptx)),
            "mma": ptx.count("mma.sync"),
        }
        if late == 13:
            _portable(ptx)
    c10, c12, c13 = counts[10], counts[12], counts[13]
    assert c13["state"] == c10["state"] and c13["mma"] == c10["mma"]
    assert c10["st_f32"] > 0 and c13["st_f32"] == 0
    assert c13["bar"] == c10["bar"] - 1
    assert c13["ld16"] == c12["ld16"] > c10["ld16"]
    _next_bv128_ptx(tmp_path, 13)
