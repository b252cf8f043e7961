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
import shutil
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
    # the bulk-staged modes (late13 / late10 in next; the shipped file reads them as every tile
    # late): T=8 with stochastic rounding, and BV=64 where the staged tile is the warp's only one
    [8, 16, 48, 128, "bf16", "bf16", "bf16", 1, 13, 0],
    [6, 16, 32, 64, "fp16", "fp16", "fp16", 0, 10, 0],
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


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_unknown_late_mode_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown mode, and each experiment removed from next (late4-9, 11, 12: git history), is
    refused with the list of the kept ones."""
    knext = _load({}, "gdnu_cpu_next_late99", NEXT)
    assert sorted(knext.LATE_MODES) == [0, 1, 2, 3, 10, 13]
    for late in (99, 4, 5, 6, 7, 8, 9, 11, 12):
        monkeypatch.setenv("GDN_UCACHE_LATE", str(late))
        with pytest.raises(
            ValueError, match=rf"late={late} \(GDN_UCACHE_LATE.*10 \(each warp's state tiles"
        ):
            knext.compile_variant(4, 16, 32, 128)


@pytest.mark.skipif(not _next_has_late(10), reason="no late10 in next")
def test_bulk_modes_refuse_small_bv_and_chain_outside_bv128(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """late10 / late13 need every warp to own its tiles (BV >= 64); with persistent CTAs (chain)
    they need BV=128 (two tiles per warp: every live row completes two mbarrier phases per warp,
    so the parity is the tile index) and no second window buffer. Each refusal names the knob."""
    knext = _load({}, "gdnu_cpu_next_bulk", NEXT)
    for late in ("10", "13"):
        monkeypatch.setenv("GDN_UCACHE_LATE", late)
        chain = rf"late={late} with persistent CTAs \(chain\) needs BV=128"
        with pytest.raises(ValueError, match=chain + ".*got BV=64.*GDN_UCACHE_PERSIST=0"):
            knext.compile_variant(4, 16, 32, 64, persist=True)
        with pytest.raises(ValueError, match=chain + ".*prefetch=1.*GDN_UCACHE_PREFETCH=0"):
            knext.compile_variant(4, 16, 32, 128, persist=True, prefetch=1)
        with pytest.raises(
            ValueError, match=rf"late={late} .*needs BV=64 or 128.*GDN_UCACHE_BV=128"
        ):
            knext.compile_variant(4, 16, 32, 32)


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_chain_copies_the_next_rows_first_tile_after_the_last_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """late13 with persistent CTAs (chain, t1early as in its candidates): the next row's tile 0
    is copied at three more sites than the one-row kernel has copies (after a verify-only row's
    last read, after a flush row's fold re-read, and from a pad row), each behind its proxy
    fence; the MMAs are the same; a CTA barrier ends each row (shared memory is reused) and a pad
    row waits for its zero-filling window copies; no pad-row wait on an entry copy is left."""
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("nvidia-cutlass-dsl (module `cutlass`) is not installed")
    monkeypatch.setenv("GDN_UCACHE_T1EARLY", "1")
    ptxs = {}
    for persist in (0, 1):
        dump = tmp_path / f"persist{persist}"
        dump.mkdir()
        variant = [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 13, persist, 0, 1]]
        ptxs[persist] = _compile("sm_90a", variant, dump, NEXT)[1]
    one, chain = ptxs[0], ptxs[1]
    _portable(chain)

    def n(text: str, op: str) -> int:
        return text.count(op)

    assert n(one, "cp.async.bulk.shared::cluster") == 3
    assert n(chain, "cp.async.bulk.shared::cluster") == 6
    assert n(chain, "mbarrier.arrive.expect_tx") == n(one, "mbarrier.arrive.expect_tx") + 3
    assert n(chain, "fence.proxy.async") == n(one, "fence.proxy.async") + 3
    assert n(chain, "mma.sync") == n(one, "mma.sync")
    assert n(chain, "bar.sync") == n(one, "bar.sync") + 1
    assert n(chain, "cp.async.wait_group") == n(one, "cp.async.wait_group") + 1
    assert n(chain, "mbarrier.try_wait") == n(one, "mbarrier.try_wait") - 1
    # nextl2 (chain only): at the two sites where a row is done with the stage (a live row after
    # its tile loop, a pad row at once), warp 3 asks L2 for the next row's first bytes: per site
    # 4 window runs + q/k/v of the token loop (7 bulk prefetches) and 3 lines (the g row's first
    # and last word, the gates); the copies and MMAs are unchanged
    monkeypatch.setenv("GDN_UCACHE_NEXTL2", "1")
    dump = tmp_path / "nextl2"
    dump.mkdir()
    variant = [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 13, 1, 0, 1]]
    l2 = _compile("sm_90a", variant, dump, NEXT)[1]
    assert n(chain, "cp.async.bulk.prefetch.L2") == 0 and n(chain, "prefetch.global.L2") == 0
    assert n(l2, "cp.async.bulk.prefetch.L2") == 14 and n(l2, "prefetch.global.L2") == 6
    for op in ("cp.async.bulk.shared::cluster", "mma.sync", "bar.sync"):
        assert n(l2, op) == n(chain, op), op


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.stem)
def test_compile_sm100a(tmp_path: Path, path: Path) -> None:
    variants = [[4, 16, 32, 64, "bf16", "fp16", "fp16", 0]]
    if _has_knobs(path):
        variants.append([4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 1, 1, 2])
    if path == NEXT and "self.chain = " in path.read_text():
        variants.append([4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 13, 1, 0, 1])  # chain
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
    # warp (two sinks), BV=64 late10 one (its state read from the shared stage)
    for n, variant in enumerate(
        (
            [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 3],
            [4, 16, 32, 64, "bf16", "fp16", "fp16", 0, 10],
        )
    ):
        dump = tmp_path / str(n)
        dump.mkdir()
        _, ptx = _compile("sm_90a", [variant], dump, NEXT)
        assert ptx.count("setp.eq.s32 pm, ") == (2 if n == 0 else 1)


@pytest.mark.skipif(not _next_has_late(10), reason="no late10 in next")
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
        "sm_90a", [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 10]], dump, NEXT, "ptx,ir"
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
def test_late10_stages_the_state_with_two_bulk_copies_per_tile(tmp_path: Path) -> None:
    """late=10 at BV=128, T=4 (two tiles per warp): no state load from global memory by the
    threads and no per-thread cp.async of it: each warp arms its mbarrier for the 4096 bytes of
    a warp-tile and lanes 0-1 issue one 2048-byte bulk copy each (tile rows 0-7 / 8-15) at two
    call sites (entry and the reused stage), tile 1 after a proxy fence; three waits (tile 0,
    tile 1, a pad row's entry copies); the projection's and the fold's 8 shared reads per tile
    (the fold's tagged `// again`). late3 loads both tiles from global memory instead."""
    ref = _state_op_counts(_next_bv128_ptx(tmp_path, 3))
    ptx = _next_bv128_ptx(tmp_path, 10)
    _portable(ptx)
    copies = re.findall(r"cp\.async\.bulk\.shared::cluster\S* \[%r\d+\], \[%rd\d+\], (\d+),", ptx)
    assert copies == ["2048"] * 2, copies
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 2
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 4096;", ptx)
    assert ptx.count("fence.proxy.async.shared::cta") == 1
    assert len(re.findall(r"mbarrier\.try_wait\.parity", ptx)) >= 3
    counts = _state_op_counts(ptx)
    assert ref["ldg"] - counts["ldg"] == 16  # 8 per tile, two tiles
    assert counts["cp_async"] == ref["cp_async"]
    assert counts["lds"] - ref["lds"] == 32 and counts["again"] == 16


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_late13_drops_the_fp32_rows_and_a_barrier(tmp_path: Path) -> None:
    """late=13 at BV=64 (one tile per warp): late10's copies, state reads and MMAs, no fp32 [k; q]
    rows in shared memory (phase 1 writes the x fragments), one CTA barrier fewer (the fold-
    fragment copy's; phase 3 keeps one for the window weights), the fold's fragments from the k
    window (16-bit shared loads instead of kb's 32-bit words); it compiles at BV=128 too."""
    counts = {}
    for late in (10, 13):
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
    c10, c13 = counts[10], counts[13]
    assert c13["state"] == c10["state"] and c13["mma"] == c10["mma"]
    assert c10["st_f32"] > 0 and c13["st_f32"] == 0
    assert c13["bar"] == c10["bar"] - 1
    assert c13["ld16"] >= c10["ld16"] + 32, (c10, c13)  # 16 fold steps x 2 words, flush rows
    _next_bv128_ptx(tmp_path, 13)


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_t1early_copies_the_next_tile_right_after_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_T1EARLY=1 (bulk modes, BV=128): tile 1 is copied right after tile 0 is read into
    registers for the last time: after the projection's read on a verify-only row, after the
    fold's re-read on a flush row (two sites, each behind its proxy fence, instead of one at tile
    1's turn); the state reads and MMAs are unchanged, and so is the PTX without the knob (the
    late10 / late13 tests above)."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_T1EARLY", "1")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-t1early")
    _portable(ptx)
    copies = re.findall(r"cp\.async\.bulk\.shared::cluster\S* \[%r\d+\], \[%rd\d+\], (\d+),", ptx)
    assert copies == ["2048"] * 3, copies
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 3
    assert ptx.count("fence.proxy.async.shared::cta") == 2
    assert _state_op_counts(ptx) == _state_op_counts(base)
    assert ptx.count("mma.sync") == base.count("mma.sync")


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_t1l2_prefetches_tile_1_into_l2_at_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_T1L2=1 (bulk modes): one 4 KB bulk L2 prefetch per warp (lane 0) of tile 1 at
    BV=128, none at BV=64 (one tile per warp); nothing else changes: the same copies, waits and
    state reads. It also compiles for sm_100a (the instruction exists there)."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_T1L2", "1")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-t1l2")
    prefetches = re.findall(r"cp\.async\.bulk\.prefetch\.L2\.global \[%rd\d+\], (\d+);", ptx)
    assert prefetches == ["4096"], prefetches
    for op in ("cp.async.bulk.shared::cluster", "mbarrier.try_wait", "mma.sync"):
        assert ptx.count(op) == base.count(op), op
    assert _state_op_counts(ptx) == _state_op_counts(base)
    dump = tmp_path / "bv64"
    dump.mkdir()
    _, ptx64 = _compile("sm_90a", [[4, 16, 32, 64, "bf16", "fp16", "fp16", 0, 13]], dump, NEXT)
    assert "cp.async.bulk.prefetch" not in ptx64
    dump100 = tmp_path / "sm100"
    dump100.mkdir()
    _, ptx100 = _compile(
        "sm_100a", [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 13]], dump100, NEXT
    )
    assert "cp.async.bulk.prefetch.L2.global" in ptx100


def _next_has_xpf() -> bool:
    return NEXT.exists() and "GDN_UCACHE_XPF" in NEXT.read_text()


@pytest.mark.skipif(not _next_has_xpf(), reason="no xpf in next")
def test_xpf_prefetches_row_z_plus_n_into_l2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_XPF=N (bulk modes, one row per CTA): row z + N's three cursors are loaded with
    ours (pinned), then lane 0 of warp 3 asks L2 for that row's bytes with warp-uniform
    addresses (no per-lane loops in the SASS): its state rows (one 4 KB bulk prefetch per 16
    rows), per token its q/k rows and v slice (256 bytes each at BV=128, in a run-time loop), its
    two u and two k window runs (run-dependent sizes), its g row (two lines) and gates (lane
    lines). Nothing that computes a result changes: the same copies, state reads, MMAs and
    barriers. The register modes and persistent CTAs ignore it; it compiles for sm_100a."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_XPF", "8")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-xpf8")
    _portable(ptx)
    bulk = re.findall(r"cp\.async\.bulk\.prefetch\.L2\.global \[%rd\d+\], (%?r?\d+);", ptx)
    sized = [b for b in bulk if b.startswith("%")]
    assert sorted(b for b in bulk if not b.startswith("%")) == ["256"] * 3 + ["4096"] * 8
    assert len(sized) == 4, bulk
    assert ptx.count("prefetch.global.L2 ") == 3
    assert "cp.async.bulk.prefetch" not in base and "prefetch.global" not in base
    vol = "ld.volatile.global.b32"
    assert ptx.count(vol) == base.count(vol) + 3
    for op in ("cp.async.bulk.shared::cluster", "mbarrier.try_wait", "mma.sync", "cp.async.cg"):
        assert ptx.count(op) == base.count(op), op
    assert _state_op_counts(ptx) == _state_op_counts(base)
    assert len(re.findall(r"bar\.sync|barrier\.sync", ptx)) == len(
        re.findall(r"bar\.sync|barrier\.sync", base)
    )
    # BV=64 (late13): four 4 KB pieces of state rows
    dump = tmp_path / "bv64"
    dump.mkdir()
    _, ptx64 = _compile("sm_90a", [[4, 16, 32, 64, "bf16", "fp16", "fp16", 0, 13]], dump, NEXT)
    assert len(re.findall(r"prefetch\.L2\.global \[%rd\d+\], 4096;", ptx64)) == 4
    # register modes and persistent CTAs: no cross-row prefetch
    for name, variant in (
        ("late3", [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 3]),
        ("persist", [4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 0, 1, 1]),
    ):
        dump = tmp_path / name
        dump.mkdir()
        assert "prefetch" not in _compile("sm_90a", [variant], dump, NEXT)[1], name
    dump100 = tmp_path / "sm100"
    dump100.mkdir()
    _, ptx100 = _compile(
        "sm_100a", [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 13]], dump100, NEXT
    )
    assert ptx100.count("prefetch.global.L2 ") == 3


def _sass(ptx: str, tmp_path: Path) -> list[str] | None:
    """The SASS instructions of a PTX (ptxas from CUDA >= 12.9, then cuobjdump: PATH's or the
    one triton ships), or None where either tool is missing."""
    from bench import ptxas_regs

    ptxas = ptxas_regs.ptxas_reading_ptx88()
    triton = importlib.util.find_spec("triton")
    bundled = (
        Path(triton.origin).parent / "backends/nvidia/bin/cuobjdump"
        if triton and triton.origin
        else None
    )
    cuobjdump = shutil.which("cuobjdump") or (
        str(bundled) if bundled and bundled.is_file() else None
    )
    if ptxas is None or cuobjdump is None:
        return None
    src, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    src.write_text(ptx)
    subprocess.run([ptxas, "-arch=sm_90a", str(src), "-o", str(cubin)], check=True)
    out = subprocess.run(
        [cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]+);", out)


@pytest.mark.skipif(not _next_has_xpf(), reason="no actfirst in next")
def test_actfirst_issues_the_activation_loads_before_the_window_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_ACTFIRST=1: two never-taken traps end ptxas's blocks after the cursor loads and
    after the q/k/v and gate loads. In the SASS the cursor loads come first and every activation
    load precedes the first window copy (which waits for the cursors); without the knob ptxas
    issues the window copies first and some activation loads a DRAM trip later. Nothing else
    changes."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_ACTFIRST", "1")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-actfirst")
    assert ptx.count("@p trap;") == 2 and "trap" not in base
    for op in ("cp.async.bulk.shared::cluster", "cp.async.cg", "mma.sync", "ld.global"):
        assert ptx.count(op) == base.count(op), op
    order = {}
    for name, text in (("base", base), ("actfirst", ptx)):
        (tmp_path / name).mkdir()
        sass = _sass(text, tmp_path / name)
        if sass is None:
            pytest.skip("no CUDA >= 12.9 ptxas or no cuobjdump: the SASS order is not checked")
        first_copy = next(i for i, ins in enumerate(sass) if "LDGSTS" in ins)
        acts = [i for i, ins in enumerate(sass) if re.search(r"LDG\.E\.(128|U16)", ins)]
        order[name] = (first_copy, acts)
    copy, acts = order["actfirst"]
    assert acts and max(acts) < copy, order["actfirst"]
    copy, acts = order["base"]
    assert max(acts) > copy, "the baseline no longer delays its activation loads"


@pytest.mark.skipif(not _next_has_late(13), reason="no late13 in next")
def test_wvearly_drops_late13s_weight_barrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_WVEARLY=1: two 32-bit g-row loads per thread at entry (g_j and G*), the window
    weights written before phase 1's barrier, and late13's phase-3 barrier (it only ordered the
    weights) gone; the state path and the MMAs are unchanged."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_WVEARLY", "1")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-wvearly")

    def bars(text: str) -> int:
        return len(re.findall(r"bar\.sync|barrier\.sync", text))

    assert bars(ptx) == bars(base) - 1
    assert ptx.count("ld.volatile.global.b32") == base.count("ld.volatile.global.b32") + 2
    assert _state_op_counts(ptx) == _state_op_counts(base)
    assert ptx.count("mma.sync") == base.count("mma.sync")

    # the weights are stored before the first CTA barrier (phase 1's), which orders them: one
    # shared store more ahead of it than without the knob
    def stores_before_first_bar(text: str) -> int:
        first_bar = re.search(r"bar\.sync|barrier\.sync", text)
        assert first_bar
        return len(re.findall(r"st\.shared\.", text[: first_bar.start()]))

    assert stores_before_first_bar(ptx) == stores_before_first_bar(base) + 1
    # persistent CTAs ignore the knob: the same PTX with and without it
    persist = [[4, 16, 32, 128, "bf16", "fp16", "fp16", 0, 0, 1, 1]]
    ptxs = []
    for value in ("0", "1"):
        monkeypatch.setenv("GDN_UCACHE_WVEARLY", value)
        dump = tmp_path / f"persist-{value}"
        dump.mkdir()
        ptxs.append(_compile("sm_90a", persist, dump, NEXT)[1])
    assert ptxs[0] == ptxs[1]


def _late13_table_and(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knob: str
) -> tuple[str, str]:
    """PTX of late13 with the B >= 128 table entry's knobs (t1early, t1l2, wvearly), without and
    with GDN_UCACHE_<KNOB>=1 (left set for the caller); the latter checked for SM100-portable
    instructions."""
    for name in ("GDN_UCACHE_T1EARLY", "GDN_UCACHE_T1L2", "GDN_UCACHE_WVEARLY"):
        monkeypatch.setenv(name, "1")
    base = _next_bv128_ptx(tmp_path, 13, "late13-t1early")
    monkeypatch.setenv(f"GDN_UCACHE_{knob.upper()}", "1")
    ptx = _next_bv128_ptx(tmp_path, 13, f"late13-{knob}")
    _portable(ptx)
    return base, ptx


def _next_has_knob(name: str) -> bool:
    """next's kernel class has the on/off knob `name` (its `self.<name> = ` line)."""
    return f"self.{name} = " in NEXT.read_text()


@pytest.mark.skipif(not _next_has_knob("tepi"), reason="no tepi in next")
def test_tepi_runs_tile_0s_epilogue_before_tile_1s_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_TEPI=1 (late13, t1early as in the B >= 128 entries): tile 0's epilogue (its
    predicated 16-bit u / output stores) sits between tile 0's and tile 1's mbarrier waits, so it
    runs while tile 1 is in flight; without the knob every such store follows the last wait. The
    copies, state reads, MMAs and CTA barriers are the same in number (the barrier that orders
    phase 3's operands moves from after the last tile to after tile 0)."""
    base, ptx = _late13_table_and(tmp_path, monkeypatch, "tepi")

    def stores_before_tile_1s_wait(text: str) -> int:
        # the waits in program order: tile 0's, tile 1's, a pad row's (on its entry copies)
        waits = [m.start() for m in re.finditer(r"mbarrier\.try_wait", text)]
        assert len(waits) == 3, len(waits)
        return text[: waits[1]].count("st.global.b16")

    assert stores_before_tile_1s_wait(base) == 0
    assert stores_before_tile_1s_wait(ptx) == ptx.count("st.global.b16") // 2 > 0
    for op in ("cp.async.bulk.shared::cluster", "mma.sync", "bar.sync", "mbarrier.try_wait"):
        assert ptx.count(op) == base.count(op), op
    assert _state_op_counts(ptx) == _state_op_counts(base)


@pytest.mark.skipif(
    not _next_has_knob("tepi") or '"epistore" in ks.skip' not in NEXT.read_text(),
    reason="no epistore / epimath knock-outs in next",
)
def test_epilogue_knockouts_split_its_math_from_its_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timing knock-outs of phase 5 (results wrong on purpose): `epistore` keeps every MMA and
    drops the 16-bit u / output stores (one never-taken store per tile keeps the math alive);
    `epimath` keeps the stores and drops phase 5's MMAs (8 per tile at T=4) and ldmatrix."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    ptx = {}
    for knob in ("epistore", "epimath"):
        monkeypatch.setenv("GDN_UCACHE_SKIP", knob)
        ptx[knob] = _next_bv128_ptx(tmp_path, 13, f"late13-{knob}")
    # 8 predicated stores of either kind per thread (4 per tile), each a u-ring and an output store
    assert base.count("st.global.b16") == 16 and base.count("0x13579bdf") == 0
    assert ptx["epistore"].count("mma.sync") == base.count("mma.sync")
    assert ptx["epistore"].count("st.global.b16") == 0
    assert ptx["epistore"].count("0x13579bdf") == 2  # one sink per tile
    assert ptx["epimath"].count("st.global.b16") == base.count("st.global.b16")
    assert ptx["epimath"].count("mma.sync") == base.count("mma.sync") - 16
    assert ptx["epimath"].count("ldmatrix") == 0 < base.count("ldmatrix")


@pytest.mark.skipif("STAG_CTAS" not in NEXT.read_text(), reason="no stag experiment in next")
def test_stag_only_delays_the_first_waves_odd_ctas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`GDN_UCACHE_SKIP=stagN` (session 25's timing experiment): one nanosleep of N ns, taken by
    odd CTAs below STAG_CTAS, before anything else; every other instruction of the kernel is the
    same, and without the token there is no nanosleep at all."""
    base = _next_bv128_ptx(tmp_path, 13, "late13")
    monkeypatch.setenv("GDN_UCACHE_SKIP", "stag1500")
    ptx = _next_bv128_ptx(tmp_path, 13, "late13-stag")
    assert base.count("nanosleep") == 0
    assert ptx.count("nanosleep.u32") == 1
    assert "1500" in ptx
    for op in ("cp.async.bulk", "mma.sync", "st.global", "bar.sync", "mbarrier.try_wait"):
        assert ptx.count(op) == base.count(op), op
    assert _state_op_counts(ptx) == _state_op_counts(base)


@pytest.mark.skipif(not _next_has_knob("tproj"), reason="no tproj in next")
def test_tproj_reads_the_projections_operands_as_16_byte_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_TPROJ=1 (late13 with the B >= 128 knobs): the projection transposed, [X hi;
    X lo] S0^T. The same MMAs, stores and barriers; the state moves as before; the [k^; q^]
    fragments are read as one 16-byte word group per lane and k-step (8 per tile) instead of 4
    scalar words (32 per tile)."""
    base, ptx = _late13_table_and(tmp_path, monkeypatch, "tproj")
    for op in ("mma.sync", "st.global.b16", "bar.sync", "mbarrier.try_wait", "ldmatrix"):
        assert ptx.count(op) == base.count(op), op
    ops, base_ops = _state_op_counts(ptx), _state_op_counts(base)
    assert ops.pop("lds") >= base_ops.pop("lds") + 2 * 8 and ops == base_ops

    def scalar_shared_words(text: str) -> int:
        return text.count("ld.shared.b32")

    assert scalar_shared_words(ptx) <= scalar_shared_words(base) - 2 * 32


@pytest.mark.skipif(not _next_has_knob("afe"), reason="no afe in next")
def test_afe_moves_phase_5s_math_before_the_state_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GDN_UCACHE_AFE=1 (late13 with the B >= 128 knobs): phase 5 at P = 0 (Z0: 8 MMAs and one
    ldmatrix per tile) runs before the first mbarrier wait; after the waits only the projections
    and two MMAs per tile remain, and the stores follow each tile's projection. One CTA barrier
    more (it orders phase 3's operands before Z0); the state path is unchanged. Knock-outs:
    `afez0` drops Z0's MMAs, `epistore` the stores (one never-taken store per tile instead)."""
    base, ptx = _late13_table_and(tmp_path, monkeypatch, "afe")

    def mmas_after_first_wait(text: str) -> int:
        first = re.search(r"mbarrier\.try_wait", text)
        assert first
        return text[first.start() :].count("mma.sync")

    # per tile at T=4: projection 16 (8 k-steps x hi/lo), epilogue 8 (2 + 3 + 3), afe 2
    assert mmas_after_first_wait(base) - mmas_after_first_wait(ptx) == 2 * (8 - 2)
    assert ptx.count("mma.sync") == base.count("mma.sync") + 2 * 2
    first_wait = re.search(r"mbarrier\.try_wait", ptx)
    assert first_wait and "ldmatrix" not in ptx[first_wait.start() :]
    assert ptx.count("bar.sync") == base.count("bar.sync") + 1
    assert ptx.count("st.global.b16") == base.count("st.global.b16")
    # the state path: the same loads and copies (ptxas may merge Z0's fp32 operand reads of
    # sw / cmat / mmat / lmat into more 16-byte shared reads, so those are not compared)
    ops, base_ops = _state_op_counts(ptx), _state_op_counts(base)
    assert ops.pop("lds") >= base_ops.pop("lds") and ops == base_ops
    monkeypatch.setenv("GDN_UCACHE_SKIP", "afez0")
    no_z0 = _next_bv128_ptx(tmp_path, 13, "late13-afe-afez0")
    assert no_z0.count("mma.sync") == ptx.count("mma.sync") - 2 * 8
    monkeypatch.setenv("GDN_UCACHE_SKIP", "epistore")
    no_st = _next_bv128_ptx(tmp_path, 13, "late13-afe-epistore")
    assert no_st.count("st.global.b16") == 0 and no_st.count("0x13579bdf") == 2
    assert no_st.count("mma.sync") == ptx.count("mma.sync")
