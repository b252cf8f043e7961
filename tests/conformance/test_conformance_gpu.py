"""The conformance cases against every registered kernel backend and dtype arm (needs CUDA).

Each backend/arm/case combination skips with the reason when CUDA, CuTe-DSL or the backend's
module is absent. run_gpu_suite.py runs the same cases in parallel processes and writes the
committed results summary; this file is the pytest view of the same matrix.
"""

from __future__ import annotations

import pytest

from kernels.reference.backends import KERNEL_BACKENDS, get_backend
from kernels.reference.harness import fresh_seed
from tests.conformance.cases import CASES, arms_for, run_case

_PARAMS = [
    pytest.param(backend, arm, case, id=f"{backend}-{arm}-{case.name}")
    for backend in KERNEL_BACKENDS
    for case in CASES
    for arm in arms_for(case, ("serving", "bf16", "fp16_io"))
]


@pytest.mark.gpu
@pytest.mark.parametrize(("backend_name", "arm", "case"), _PARAMS)
def test_kernel_conformance(backend_name: str, arm: str, case) -> None:
    backend = get_backend(backend_name)
    ok, why = backend.available()
    if not ok:
        pytest.skip(f"{backend_name}: {why}")
    if arm not in backend.arms():
        pytest.skip(f"{backend_name} has no {arm} arm")
    handle = backend.load(arm, case.config.get("layout", "compact"))
    if case.config["num_tokens"] not in handle.supported_t:
        pytest.skip(f"{backend_name} does not support T={case.config['num_tokens']}")
    partner = backend.load(arm, "vllm") if case.kind == "layout_equivalence" else None
    seed = fresh_seed()
    result = run_case(handle, case, seed, partner=partner)
    assert result["ok"], f"seed {seed}: {result.get('failure_text')}"
