"""The conformance harness through vLLM's ucache adapter, with the float64 oracle as the kernel.

This is the CPU half of "the conformance suite passes through the adapter": packed q|k|v rows,
[b|a] views, -1 pad rows added by the adapter, request-keyed cursors and in-place output all sit
between the harness and the kernel. The H200 half runs the same backend with flashinfer's kernel
(GDN_UCACHE_ADAPTER_KERNEL=flashinfer; tests/conformance/run_gpu_suite.py --backends
ucache_adapter).
"""

from __future__ import annotations

import pytest

from kernels.reference import ucache_adapter
from kernels.reference.backends import get_backend
from kernels.reference.harness import ConformanceHarness, HarnessConfig


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest):
    path, why = ucache_adapter.adapter_file()
    if path is None:
        pytest.skip(f"the series' ucache adapter is not available: {why}")
    return get_backend("ucache_adapter")


@pytest.fixture(autouse=True)
def oracle_inner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDN_UCACHE_ADAPTER_KERNEL", "oracle")


CASES = {
    "t4_vllm_layout": dict(num_tokens=4, layout="vllm", pad_rows=2, steps=12),
    "t8_compact_layout": dict(num_tokens=8, layout="compact", pad_rows=1, steps=10),
    "t4_recycled_misaligned": dict(
        num_tokens=4, layout="vllm", recycle_prob=0.2, misaligned_cursors=True, steps=10
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_serving_arm_through_adapter(backend, case: str) -> None:
    handle = backend.load("serving", CASES[case]["layout"])
    assert handle.notes == ["inner kernel: oracle"]
    config = HarnessConfig(
        num_requests=4, num_k_heads=2, num_v_heads=4, head_dim=128, **CASES[case]
    )
    report = ConformanceHarness(handle, config).run()
    assert report.ok, report.failure_text()


def test_adapter_rejects_predictive_flush_min(backend) -> None:
    handle = backend.load("serving", "vllm")
    config = HarnessConfig(num_requests=2, num_k_heads=2, num_v_heads=4, flush_min=9, steps=1)
    with pytest.raises(ValueError, match="flushes lazily"):
        ConformanceHarness(handle, config).run()
