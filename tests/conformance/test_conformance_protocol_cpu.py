"""Protocol invariants on CPU: the multi-step harness driving the oracle as a backend.

Every case of cases.py that makes sense on CPU runs in the f64 arm (float64 storage: the harness's
checks must hold to ~1e-12) and a reduced set in the serving arm (the oracle rounding to bf16/fp16
storage: the tolerances must hold with room). A long CPU drift smoke test checks the growth bound.
"""

from __future__ import annotations

import pytest

from kernels.reference.backends import get_backend
from kernels.reference.harness import ConformanceHarness, HarnessConfig, fresh_seed
from tests.conformance.cases import CASES, cpu_overrides, run_case

_ORACLE = get_backend("oracle")
_CPU_CASES = [case for case in CASES if case.cpu and case.kind == "harness"]


def _check(result: dict) -> None:
    assert result["ok"], result.get("failure_text")


@pytest.mark.parametrize("case", _CPU_CASES, ids=lambda c: c.name)
def test_oracle_f64(case) -> None:
    seed = fresh_seed()
    steps = min(case.config["steps"], 40)
    _check(
        run_case(
            _ORACLE.load("f64", case.config.get("layout", "compact")),
            case,
            seed,
            {**cpu_overrides(), "steps": steps},
        )
    )


@pytest.mark.parametrize("arm", ["serving", "bf16", "fp16_io"])
@pytest.mark.parametrize("name", ["t4_random", "t8_boundaries", "vllm_layout_block_strided"])
def test_oracle_storage_rounding_arms(arm: str, name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    layout = case.config.get("layout", "compact")
    _check(
        run_case(_ORACLE.load(arm, layout), case, fresh_seed(), {**cpu_overrides(), "steps": 24})
    )


@pytest.mark.parametrize("T", [2, 3, 5, 6, 7])
def test_oracle_native_t(T: int) -> None:
    """Our kernel supports native T in 2..8: the oracle and harness must too."""
    config = HarnessConfig(num_tokens=T, steps=14, pad_rows=1, head_dim=16, recycle_prob=0.05)
    report = ConformanceHarness(_ORACLE.load("f64"), config).run()
    assert report.ok, report.failure_text()
    assert report.summary()["flush_rows"] > 0


def test_report_counts_flushes_and_wraps() -> None:
    config = HarnessConfig(num_tokens=4, steps=30, head_dim=16, accepted="all")
    report = ConformanceHarness(_ORACLE.load("f64"), config).run()
    summary = report.summary()
    assert report.ok, report.failure_text()
    assert summary["flush_rows"] >= 6 * 30 // 4 - 6  # n = T: a flush every 4 steps per request
    assert summary["wrap_rows"] > 0
    assert set(report.steps[0].errors) >= {
        "y_true",
        "y_local",
        "state_true",
        "k_append",
        "u_append",
    }


def test_drift_smoke_serving_arm() -> None:
    """~200 steps at batch 4: errors stay at the rounding level and do not grow."""
    config = HarnessConfig(num_requests=4, num_tokens=4, steps=200, head_dim=16, fail_fast=False)
    report = ConformanceHarness(_ORACLE.load("serving"), config).run()
    assert report.ok, report.failure_text()
    state = [x for x in report.metric_series("state_true", 0)]
    assert max(state) < 0.25 * report.tolerance["state_true_rel"]


@pytest.mark.parametrize("arm", ["serving", "bf16", "fp16_io"])
def test_emulated_upstream_rounding_within_tolerance(arm: str) -> None:
    """The oracle with upstream's rounding points emulated (K = 128, as the kernels) stays inside
    the arm's tolerances: they leave room for rounding alone."""
    config = HarnessConfig(
        num_requests=4,
        pad_rows=1,
        num_k_heads=2,
        num_v_heads=4,
        steps=12,
        gates="degenerate",
        zero_qk_prob=0.1,
        seed=fresh_seed(),
    )
    report = ConformanceHarness(get_backend("emulated").load(arm), config).run()
    assert report.ok, report.failure_text()


def test_oracle_layout_equivalence_and_graph_twin_machinery() -> None:
    case = next(c for c in CASES if c.name == "layout_equivalence")
    result = run_case(
        _ORACLE.load("serving"),
        case,
        fresh_seed(),
        cpu_overrides(),
        partner=_ORACLE.load("serving", "vllm"),
    )
    assert result["ok"], result.get("failure_text")


def test_varying_batch_rebuilds_buffers() -> None:
    config = HarnessConfig(
        num_requests=6, pad_rows=1, min_active=2, steps=20, head_dim=16, seed=fresh_seed()
    )
    harness = ConformanceHarness(_ORACLE.load("f64"), config)
    sizes = set()
    for _ in range(config.steps):
        report = harness.step()
        assert not report.failures, report.failures
        sizes.add(harness.buffer_batch)
    assert len(sizes) > 1
