"""The conformance case matrix, shared by the pytest GPU suite and run_gpu_suite.py.

Kernel geometry is chosen to keep the number of compiled cubins small (flashinfer keys its cache on
dtypes, T, H, HV, launch bounds (from B*HV) and, in the strided "vllm" layout, B and pool strides):
B = 8 rows and HV = 8 everywhere, so B*HV stays in one launch-bounds bucket.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import torch

from kernels.reference.backends import KernelHandle
from kernels.reference.harness import ConformanceHarness, HarnessConfig, bits_differ

CaseKind = Literal["harness", "graph_vs_eager", "drift", "layout_equivalence"]
SERVING_ONLY = ("serving",)


@dataclass(frozen=True)
class Case:
    name: str
    config: dict[str, Any]
    kind: CaseKind = "harness"
    arms: tuple[str, ...] | None = None  # None: every arm the backend supports
    cpu: bool = True  # also meaningful for the oracle on CPU (small head_dim there)
    description: str = ""
    # Cases sharing a unit share one compiled kernel (same dtypes, T, H, HV, layout, pool strides):
    # the GPU runner gives every (backend, arm, unit) its own process so compiles run in parallel.
    unit: str = "t4"
    # A backend may refuse this input with a clear exception instead of running it (e.g. an
    # alignment requirement); silently wrong results still fail.
    may_reject: bool = False


_GEOM = {"num_requests": 6, "pad_rows": 2, "num_k_heads": 4, "num_v_heads": 8}
_DRIFT_STEPS = 2000

CASES: list[Case] = [
    Case(
        "t4_random",
        {**_GEOM, "num_tokens": 4, "steps": 60, "recycle_prob": 0.03},
        description="T=4, random accepts, recycled requests, pad rows, shuffled batch",
    ),
    Case(
        "t4_flush_min9",
        {**_GEOM, "num_tokens": 4, "flush_min": 9, "steps": 40},
        description="predictive flushing (flush_min 9 < default 13)",
    ),
    Case(
        "t4_boundaries",
        {
            **_GEOM,
            "num_tokens": 4,
            "steps": 12,
            "accepted": "all",
            "initial_hist": [0, 12, 13, 16, 16, 12],
            "initial_base": [0, 28, 31, 17, 30, 20],
        },
        description="P = 0, flush_min-1, flush_min, 16; bases that wrap past 31",
    ),
    Case(
        "t4_fm9_boundaries",
        {
            **_GEOM,
            "num_tokens": 4,
            "flush_min": 9,
            "steps": 12,
            "accepted": "one",
            "initial_hist": [0, 8, 9, 16, 15, 1],
            "initial_base": [29, 30, 31, 28, 5, 31],
        },
        description="flush_min 9: P = 0, 8, 9, 16; one token accepted per step",
    ),
    Case(
        "degenerate_gates",
        {**_GEOM, "num_tokens": 4, "steps": 40, "gates": "degenerate", "zero_qk_prob": 0.15},
        description="per head: no decay, very strong decay, beta -> 0, normal; zero q/k rows",
    ),
    Case(
        "cuda_graph_vs_eager",
        {**_GEOM, "num_tokens": 4, "steps": 10},
        kind="graph_vs_eager",
        cpu=False,
        description="capture once, replay: outputs, pool and rings bit-identical to eager",
    ),
    Case(
        "misaligned_cursors",
        {**_GEOM, "num_tokens": 4, "steps": 10, "misaligned_cursors": True},
        arms=SERVING_ONLY,
        description="index/hist/base int32 tensors 4 bytes into their buffers",
        may_reject=True,
    ),
    Case(
        "varying_batch",
        {**_GEOM, "num_tokens": 4, "steps": 30, "min_active": 2},
        arms=("serving", "bf16"),
        description="2..6 active requests per step: the batch size changes, idle slots untouched",
    ),
    Case(
        "t8_random",
        {**_GEOM, "num_tokens": 8, "steps": 60, "recycle_prob": 0.03},
        description="T=8, random accepts",
        unit="t8",
    ),
    Case(
        "t8_flush_min5",
        {**_GEOM, "num_tokens": 8, "flush_min": 5, "steps": 40},
        description="T=8 with flush_min 5 < default 9",
        unit="t8",
    ),
    Case(
        "t8_boundaries",
        {
            **_GEOM,
            "num_tokens": 8,
            "steps": 12,
            "accepted": "all",
            "initial_hist": [0, 8, 9, 16, 16, 8],
            "initial_base": [31, 26, 30, 17, 0, 24],
        },
        description="T=8: P = 0, 8, 9, 16 with wrapping bases",
        unit="t8",
    ),
    Case(
        "gqa_ratio1",
        {**_GEOM, "num_k_heads": 8, "num_tokens": 4, "steps": 30},
        arms=SERVING_ONLY,
        description="HV/H = 1",
        unit="ratio1",
    ),
    Case(
        "gqa_ratio4",
        {**_GEOM, "num_k_heads": 2, "num_tokens": 4, "steps": 30},
        arms=SERVING_ONLY,
        description="HV/H = 4",
        unit="ratio4",
    ),
    Case(
        "vllm_layout_block_strided",
        {**_GEOM, "num_tokens": 4, "steps": 30, "layout": "vllm", "page_pad_elems": 64},
        arms=("serving", "bf16"),
        description="packed q/k/v rows, a/b views (b first), block-strided pools (padding checked)",
        unit="vllm",
    ),
    Case(
        "layout_equivalence",
        {**_GEOM, "num_tokens": 4, "steps": 10, "page_pad_elems": 64},
        kind="layout_equivalence",
        arms=SERVING_ONLY,
        description="compact vs vLLM layout (packed q/k/v, a/b views, strided pools): same bits",
        unit="vllm",
    ),
    Case(
        "drift",
        {
            "num_requests": 8,
            "pad_rows": 0,
            "num_k_heads": 4,
            "num_v_heads": 8,
            "num_tokens": 4,
            "steps": _DRIFT_STEPS,
        },
        kind="drift",
        cpu=False,
        description=f"{_DRIFT_STEPS}-step run at batch 8, random accepts",
        unit="drift",
    ),
    Case(
        "pool_beyond_2pow31",
        {
            "num_requests": 6,
            "pad_rows": 2,
            "extra_pool_slots": 18,
            "num_k_heads": 4,
            "num_v_heads": 8,
            "num_tokens": 4,
            "steps": 6,
            "layout": "vllm",
            "page_stride_elems": 1 << 27,
        },
        arms=SERVING_ONLY,
        cpu=False,
        description="24 pages of 2^27 elements in each of the four pools, requests on the top ones",
        unit="huge",
    ),
]


def case_by_name(name: str) -> Case:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no conformance case {name!r}")


def arms_for(case: Case, backend_arms: tuple[str, ...]) -> list[str]:
    return [arm for arm in backend_arms if case.arms is None or arm in case.arms]


def run_case(
    handle: KernelHandle,
    case: Case,
    seed: int,
    overrides: dict[str, Any] | None = None,
    deadline: float | None = None,
    partner: KernelHandle | None = None,
) -> dict[str, Any]:
    """Run one case; returns a JSON-able result with "ok", "summary" and (drift) per-step series.

    `deadline` (time.monotonic() value) cuts a drift run short; the result then says so.
    `partner`: for layout_equivalence, the same backend and arm loaded in the "vllm" layout.
    """
    config = HarnessConfig(**{**case.config, **(overrides or {}), "seed": seed})
    if case.kind == "graph_vs_eager":
        return _graph_vs_eager(handle, config)
    if case.kind == "layout_equivalence":
        if partner is None:
            raise ValueError("layout_equivalence needs the vllm-layout handle as partner")
        return _layout_equivalence(handle, partner, config)
    harness = ConformanceHarness(handle, config)
    if case.kind == "drift":
        config.fail_fast = False
        for _ in range(config.steps):
            harness.step()
            if deadline is not None and time.monotonic() > deadline:
                break
        report = harness.report
    else:
        report = harness.run()
    result: dict[str, Any] = {"ok": report.ok, "summary": report.summary()}
    if report.ok and len(report.steps) < config.steps:
        result["ok"] = False
        result["cut_short"] = f"{len(report.steps)} of {config.steps} steps before the deadline"
    if case.kind == "drift":
        result["series"] = {
            name: {"max": report.metric_series(name, 0), "mean": report.metric_series(name, 1)}
            for name in ("y_true", "state_true")
        }
        result["flush_rows_per_step"] = [s.flush_rows for s in report.steps]
    if not report.ok:
        result["failure_text"] = report.failure_text()
    return result


def _graph_vs_eager(handle: KernelHandle, config: HarnessConfig) -> dict[str, Any]:
    """Two harnesses with one seed: eager calls vs one captured graph replayed; compare bitwise."""
    eager = ConformanceHarness(handle, config)
    graph_config = HarnessConfig(**{**config.__dict__, "cuda_graph": True})
    return _twin_run(eager, ConformanceHarness(handle, graph_config), "eager", "graph replay")


def _layout_equivalence(
    compact: KernelHandle, strided: KernelHandle, config: HarnessConfig
) -> dict[str, Any]:
    """One seed, two layouts (kernel-spec 2.9 item 14): results must be bit-identical."""
    first = ConformanceHarness(
        compact, HarnessConfig(**{**config.__dict__, "layout": "compact", "page_pad_elems": 0})
    )
    second = ConformanceHarness(strided, HarnessConfig(**{**config.__dict__, "layout": "vllm"}))
    return _twin_run(first, second, "compact layout", "vllm layout")


def _twin_run(
    eager: ConformanceHarness, graphed: ConformanceHarness, first: str, second: str
) -> dict[str, Any]:
    """Step two harnesses built from one seed in lockstep; outputs and state must match bitwise."""
    config = eager.cfg
    mismatches: list[str] = []
    for step in range(config.steps):
        eager.step()
        graphed.step()
        pairs = [("output", eager.output, graphed.output)]
        ours, theirs = eager.state_tensors(), graphed.state_tensors()
        pairs += [(name, ours[name], theirs[name]) for name in ours]
        for name, x, y in pairs:
            if bool(bits_differ(x, y).any()):
                mismatches.append(f"step {step}: {name} differs between {first} and {second}")
    summary = graphed.report.summary()
    ok = not mismatches and eager.report.ok and graphed.report.ok
    result: dict[str, Any] = {"ok": ok, "summary": summary, "mismatches": mismatches[:10]}
    if not ok:
        result["failure_text"] = "\n".join(
            mismatches[:10] + eager.report.failures() + graphed.report.failures()
        )
    return result


def drift_bound_text(result: dict[str, Any]) -> str:
    series = result.get("series", {}).get("state_true", {}).get("max", [])
    finite = [x for x in series if not math.isnan(x)]
    return f"max state error {max(finite):.3e}" if finite else "no data"


def cpu_overrides() -> dict[str, Any]:
    """The oracle on CPU: head_dim 16 keeps CI fast; the math does not depend on K = 128."""
    return {"head_dim": 16}


def cuda_ok() -> tuple[bool, str]:
    return (True, "") if torch.cuda.is_available() else (False, "no CUDA device")
