"""Conformance of our CuTe-DSL kernel (kernels/gdn_ucache_flush.py) against the float64 oracle.

Runs the multi-step harness of kernels/reference (fresh random inputs, poisoned outputs and stale
ring rows, invariants of kernel-spec 2.9) on every dtype arm and layout. Needs CUDA + CuTe-DSL;
skips with the reason elsewhere. Results of a run can be written as JSON with GDN_CONFORMANCE_OUT;
GDN_UCACHE_OURS_MODULE=path tests another kernel file (e.g. a next version) with the same cases.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from bench.knockout import CANDIDATES, KNOBS, variant_env
from kernels.reference.backends import get_backend
from kernels.reference.harness import ConformanceHarness, HarnessConfig

_OURS = get_backend("ours")
_OK, _WHY = _OURS.available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _OK, reason=f"ours unavailable: {_WHY}")]
_REPORTS: list[dict] = []


# The vLLM layout case: packed q/k/v rows, a/b views, block-strided pools with padding, a pad
# row, CUDA-graph replay.
VLLM_BLOCK_STRIDED_GRAPH: dict[str, object] = dict(
    num_requests=5,
    pad_rows=1,
    num_k_heads=2,
    num_v_heads=8,
    num_tokens=4,
    page_pad_elems=64,
    cuda_graph=True,
)


def _run(arm: str, layout: str = "compact", **cfg: object) -> None:
    handle = _OURS.load(arm, layout)
    config = HarnessConfig(layout=layout, **cfg)  # type: ignore[arg-type]
    report = ConformanceHarness(handle, config).run()
    summary = report.summary()
    summary["case"] = {"arm": arm, "layout": layout, **{k: v for k, v in cfg.items()}}
    _REPORTS.append(summary)
    assert report.ok, report.failure_text()


@pytest.fixture(scope="module", autouse=True)
def _dump_reports():
    yield
    out = os.environ.get("GDN_CONFORMANCE_OUT")
    if out:
        Path(out).write_text(json.dumps(_REPORTS, indent=1, default=str))


ARMS = ["serving", "bf16", "fp16_io"]


@pytest.mark.parametrize("cand", CANDIDATES)
@pytest.mark.parametrize("arm", ["serving", "bf16"])
def test_candidate(arm: str, cand: str, monkeypatch) -> None:
    # Every launch configuration that may become a default (bench/knockout.py CANDIDATES), with
    # pad rows and a GQA group; persistent ones walk several rows per CTA (2 programs) and also run
    # the vLLM layout (packed q/k/v, a/b views, block-strided pools) under a CUDA graph.
    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)
    env = variant_env(cand)
    for knob, value in env.items():
        monkeypatch.setenv(knob, value)
    persistent = "GDN_UCACHE_PERSIST" in env
    if persistent:
        monkeypatch.setenv("GDN_UCACHE_NPROG", "2")
    _run(arm, num_requests=7, pad_rows=2, num_k_heads=2, num_v_heads=4, num_tokens=4, steps=30)
    if persistent:
        _run(arm, "vllm", **VLLM_BLOCK_STRIDED_GRAPH, steps=20)


@pytest.mark.parametrize("arm", ARMS)
def test_compact_gqa_pad_rows(arm: str) -> None:
    _run(arm, num_requests=6, pad_rows=2, num_k_heads=2, num_v_heads=4, num_tokens=4, steps=40)


@pytest.mark.parametrize("arm", ARMS)
def test_vllm_layout_block_strided_graph(arm: str) -> None:
    _run(arm, "vllm", **VLLM_BLOCK_STRIDED_GRAPH, steps=30)


@pytest.mark.parametrize("T", [2, 3, 5, 6, 7, 8])
@pytest.mark.parametrize("arm", ["serving", "bf16"])
def test_native_t(arm: str, T: int) -> None:
    _run(arm, num_requests=5, num_k_heads=2, num_v_heads=4, num_tokens=T, steps=24)


@pytest.mark.parametrize("T", [3, 4, 8])
@pytest.mark.parametrize("arm", ["serving", "bf16"])
def test_scalar_qk_path(arm: str, T: int, monkeypatch) -> None:
    # the fallback for q/k rows that are not 16-byte aligned (element loads, norms through smem);
    # the harness's rows are aligned, so the knob forces it
    monkeypatch.setenv("GDN_UCACHE_VEC_QK", "0")
    _run(arm, num_requests=5, pad_rows=1, num_k_heads=2, num_v_heads=4, num_tokens=T, steps=20)


@pytest.mark.parametrize("gates", ["no_decay", "strong_decay", "beta_zero", "degenerate"])
def test_gate_regimes_zero_rows(gates: str) -> None:
    _run(
        "serving",
        num_requests=4,
        num_k_heads=1,
        num_v_heads=2,
        gates=gates,
        zero_qk_prob=0.2,
        steps=16,
    )


def test_predictive_flush_misaligned_cursors() -> None:
    _run(
        "bf16",
        num_requests=6,
        pad_rows=1,
        num_tokens=4,
        flush_min=9,
        misaligned_cursors=True,
        recycle_prob=0.1,
        steps=30,
    )


def test_t8_flush_min_9_boundaries() -> None:
    _run("serving", num_requests=4, num_tokens=8, initial_hist=[0, 8, 9, 16][:4], steps=16)


@pytest.mark.parametrize(
    ("arm", "bv", "mbp", "late"),
    [
        ("serving", "128", "4", "0"),
        ("bf16", "128", "7", "1"),
        ("serving", "128", "6", "1"),
        ("serving", "128", "7", "3"),
        ("serving", "64", "7", "0"),
        ("bf16", "64", "6", "1"),
        ("bf16", "32", "0", "0"),
        ("serving", "16", "0", "0"),
    ],
)
def test_forced_bv_launch_bounds(arm: str, bv: str, mbp: str, late: str, monkeypatch) -> None:
    # The BV heuristic picks BV=128 only for B*HV >= 2 SMs, which no other case reaches: force
    # every tile height, launch bounds (register allocation, spills) and late state loads.
    monkeypatch.setenv("GDN_UCACHE_BV", bv)
    monkeypatch.setenv("GDN_UCACHE_MBP", mbp)
    monkeypatch.setenv("GDN_UCACHE_LATE", late)
    _run(arm, num_requests=6, pad_rows=1, num_k_heads=2, num_v_heads=4, num_tokens=4, steps=30)


@pytest.mark.parametrize(
    ("arm", "bv", "late", "nprog", "prefetch"),
    [
        ("serving", "128", "1", "2", "0"),
        ("bf16", "64", "0", "3", "0"),
        ("serving", "32", "1", "1", "0"),
        ("serving", "128", "0", "2", "1"),
        ("bf16", "128", "1", "3", "1"),
        ("serving", "16", "0", "2", "1"),
        ("serving", "128", "0", "2", "2"),
        ("bf16", "64", "1", "3", "2"),
        ("serving", "32", "0", "4", "2"),
    ],
)
def test_persistent_rows(
    arm: str, bv: str, late: str, nprog: str, prefetch: str, monkeypatch
) -> None:
    # Persistent CTAs walk several rows each (pad rows among them) and prefetch the next row's
    # cursors and state (and, with prefetch, its ring windows by cp.async) during the current one.
    monkeypatch.setenv("GDN_UCACHE_BV", bv)
    monkeypatch.setenv("GDN_UCACHE_LATE", late)
    monkeypatch.setenv("GDN_UCACHE_PERSIST", "4")
    monkeypatch.setenv("GDN_UCACHE_NPROG", nprog)
    monkeypatch.setenv("GDN_UCACHE_PREFETCH", prefetch)
    _run(arm, num_requests=7, pad_rows=2, num_k_heads=2, num_v_heads=4, num_tokens=4, steps=30)


def test_persistent_prefetch_vllm_layout_graph(monkeypatch) -> None:
    # packed q/k/v rows, a/b views, block-strided pools, a pad row, CUDA graph: the persistent
    # kernel with every prefetch (state, windows, q/k/v, gates)
    monkeypatch.setenv("GDN_UCACHE_BV", "128")
    monkeypatch.setenv("GDN_UCACHE_PERSIST", "4")
    monkeypatch.setenv("GDN_UCACHE_NPROG", "2")
    monkeypatch.setenv("GDN_UCACHE_PREFETCH", "2")
    _run("serving", "vllm", **VLLM_BLOCK_STRIDED_GRAPH, steps=30)


def test_forced_bv128_t8(monkeypatch) -> None:
    monkeypatch.setenv("GDN_UCACHE_BV", "128")
    monkeypatch.setenv("GDN_UCACHE_LATE", "1")
    _run("serving", num_requests=4, num_tokens=8, initial_hist=[0, 8, 9, 16], steps=16)


def test_qwen_shape_hv32() -> None:
    _run("serving", num_requests=8, num_k_heads=16, num_v_heads=32, num_tokens=4, steps=10)


def test_64bit_offsets() -> None:
    if torch.cuda.get_device_properties(0).total_memory < 60 << 30:
        pytest.skip("needs > 60 GiB of GPU memory")
    _run(
        "serving",
        num_requests=2,
        extra_pool_slots=1,
        num_k_heads=1,
        num_v_heads=2,
        page_stride_elems=(1 << 30) + 8,
        steps=6,
    )


def test_long_run_no_drift() -> None:
    _run("serving", num_requests=4, num_k_heads=1, num_v_heads=2, num_tokens=4, steps=200)
