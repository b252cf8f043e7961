"""Float64 ReplaySSM oracle, multi-step conformance harness and backend registry (issue #3).

Stages (one file each, flash-linear-attention style):
  gating.py      g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), L2 norm with eps
  recurrence.py  token-by-token float64 gated delta rule (the ground truth)
  replay.py      ring layout, state reconstruction, closed UT/WY verify(+flush) step, cursor commit,
                 and `gated_delta_rule_mtp_ucache_flush`: the oracle behind the kernel contract
  arms.py        dtype arms (IO / state / ring dtypes and the env vars that select them)
  tolerances.py  THE one place for tolerances, justified by kernel-spec 2.7's rounding points
  harness.py     multi-step driver with the invariant checks and a per-step error report
  backends.py    registry: oracle, flashinfer, ours, triton_vllm
"""

from kernels.reference.arms import ARMS, KERNEL_ARMS, DtypeArm, get_arm
from kernels.reference.backends import BACKENDS, KERNEL_BACKENDS, Backend, KernelHandle, get_backend
from kernels.reference.gating import (
    EPS,
    TokenInputs,
    gate_beta,
    gate_log_decay,
    l2_normalize,
    prepare_tokens,
)
from kernels.reference.harness import ConformanceHarness, HarnessConfig, RunReport, StepReport
from kernels.reference.recurrence import RecurrenceResult, recurrent_gated_delta_rule
from kernels.reference.replay import (
    RING_MASK,
    RING_SLOTS,
    W_RING,
    RingWindow,
    StepResult,
    append_slots,
    commit_cursors,
    default_flush_min,
    gated_delta_rule_mtp_ucache_flush,
    gather_window,
    reconstruct_state,
    reset_cursors,
    verify_flush_closed_form,
    verify_flush_token_by_token,
    window_slots,
)
from kernels.reference.tolerances import TOLERANCES, Tolerance, tolerance_for

__all__ = [
    "ARMS",
    "BACKENDS",
    "KERNEL_ARMS",
    "KERNEL_BACKENDS",
    "TOLERANCES",
    "Backend",
    "ConformanceHarness",
    "DtypeArm",
    "HarnessConfig",
    "KernelHandle",
    "RunReport",
    "StepReport",
    "Tolerance",
    "get_arm",
    "get_backend",
    "tolerance_for",
    "EPS",
    "RING_MASK",
    "RING_SLOTS",
    "W_RING",
    "RecurrenceResult",
    "RingWindow",
    "StepResult",
    "TokenInputs",
    "append_slots",
    "commit_cursors",
    "default_flush_min",
    "gate_beta",
    "gate_log_decay",
    "gated_delta_rule_mtp_ucache_flush",
    "gather_window",
    "l2_normalize",
    "prepare_tokens",
    "reconstruct_state",
    "recurrent_gated_delta_rule",
    "reset_cursors",
    "verify_flush_closed_form",
    "verify_flush_token_by_token",
    "window_slots",
]
