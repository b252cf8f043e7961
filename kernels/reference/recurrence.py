"""Stage 2: the token-by-token float64 gated delta rule (the ground truth).

kernel-spec.md section 2.1, per token t, per value head (state S is [V, K], K contiguous):
    alpha_t = exp(g_t)
    u_t     = beta_t * (v_t - alpha_t * S_{t-1} k_hat_t)      (the correction the u ring stores)
    S_t     = alpha_t * S_{t-1} + u_t k_hat_t^T
    o_t     = S_t q_hat_t
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.reference.gating import TokenInputs


@dataclass
class RecurrenceResult:
    """y, u: [B, T, HV, V]; final_state: [B, HV, V, K] after all T tokens;
    accepted_state: [B, HV, V, K] after the first `accepted[b]` tokens (None if not asked);
    state_norms: [B, T, HV] Frobenius norm of the state after each token."""

    y: torch.Tensor
    u: torch.Tensor
    final_state: torch.Tensor
    accepted_state: torch.Tensor | None
    state_norms: torch.Tensor


def recurrent_gated_delta_rule(
    state: torch.Tensor, tokens: TokenInputs, accepted: torch.Tensor | None = None
) -> RecurrenceResult:
    """Run the recurrence from `state` [B, HV, V, K] over the T tokens of `tokens`, in float64.

    `accepted` ([B] ints in [0, T]) additionally returns, per row, the state after that many tokens:
    this is how the harness advances its "true" state by the accepted prefix only.
    """
    S = state.double().clone()
    T = tokens.q_hat.shape[1]
    ys, us, norms = [], [], []
    accepted_state = None
    if accepted is not None:
        # checked where the caller keeps it (a CPU tensor costs no device sync)
        if bool(((accepted < 0) | (accepted > T)).any()):
            raise ValueError(f"accepted counts must lie in [0, {T}], got {accepted.tolist()}")
        accepted = accepted.to(device=S.device, dtype=torch.long)
        accepted_state = S.clone()
    for t in range(T):
        k_t = tokens.k_hat[:, t]  # [B, HV, K]
        alpha = torch.exp(tokens.g[:, t])[..., None, None]  # [B, HV, 1, 1]
        S = alpha * S
        predicted = torch.einsum("bhvk,bhk->bhv", S, k_t)
        u_t = tokens.beta[:, t][..., None] * (tokens.v[:, t] - predicted)
        S = S + u_t[..., :, None] * k_t[..., None, :]
        ys.append(torch.einsum("bhvk,bhk->bhv", S, tokens.q_hat[:, t]))
        us.append(u_t)
        norms.append(torch.linalg.vector_norm(S, dim=(-2, -1)))
        if accepted_state is not None:
            take = (accepted == t + 1)[:, None, None, None]
            accepted_state = torch.where(take, S, accepted_state)
    return RecurrenceResult(
        y=torch.stack(ys, dim=1),
        u=torch.stack(us, dim=1),
        final_state=S,
        accepted_state=accepted_state,
        state_norms=torch.stack(norms, dim=1),
    )
