"""Stage 3b: the verify(+flush) step with upstream's rounding points emulated (kernel-spec 2.7).

Not an oracle: a model of what a bf16/fp16 kernel computes, in float64 with a cast to the storage
dtype at every point where upstream stores a value. It calibrates tolerances on CPU (with K = 128,
long runs) and shows which deviations rounding alone produces. Rounding points:
  tile      k_hat and q_hat*scale stored in the IO dtype (fp16 when state and rings are fp16);
            the k ring gets the tile value re-rounded to the ring dtype
  gemm      exp(G*) * tile re-rounded before the S0 GEMM (fp16 operands when the state is fp16)
  history   w_j * (k_j . x) rounded to the ring dtype (A operand of the history MMA)
  solve     -beta Gamma KK^T and Tmat rounded to IO; Gamma (Q K^T) and QT = (...) Tmat rounded to IO
  residual  R = v - exp(gamma) hk rounded to IO
  outputs   y = QT R + exp(gamma) hq rounded to IO; U = Tmat R rounded to the ring dtype
  fold      w_j u_j rounded to the ring dtype, S_hist rounded once to the state dtype
Transcendental approximations (ex2/rsqrt.approx) are not modelled.
"""

from __future__ import annotations

import torch

from kernels.reference.arms import DtypeArm
from kernels.reference.gating import TokenInputs
from kernels.reference.replay import RingWindow, StepResult, decay_weights


def _r(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x.to(dtype).double()


def verify_flush_emulated(
    checkpoint: torch.Tensor,
    window: RingWindow,
    tokens: TokenInputs,
    flush_min: int,
    arm: DtypeArm,
) -> StepResult:
    """Same contract as replay.verify_flush_closed_form, rounding like upstream (cumulative g)."""
    io, ring, state = arm.io, arm.ring, arm.state
    fp16 = torch.float16
    tile_dtype = fp16 if (state == fp16 and ring == fp16) else io
    gemm_dtype = fp16 if state == fp16 else io
    T = tokens.num_tokens
    S0 = checkpoint.double()
    q_t = _r(tokens.q_hat, tile_dtype).permute(0, 2, 1, 3)  # [B, HV, T, K]
    k_t = _r(tokens.k_hat, tile_dtype).permute(0, 2, 1, 3)
    beta = tokens.beta.permute(0, 2, 1)  # [B, HV, T]
    gamma = torch.cumsum(tokens.g, dim=1).permute(0, 2, 1)
    g_star = window.g_star()  # [B, HV]
    w = decay_weights(window)  # [B, HV, W]

    def history(x: torch.Tensor) -> torch.Tensor:  # x [B, HV, T, K] -> S_hist x [B, HV, T, V]
        scaled = _r(torch.exp(g_star)[..., None, None] * x, gemm_dtype)
        from_checkpoint = torch.einsum("bhvk,bhtk->bhtv", S0, scaled)
        scores = _r(torch.einsum("bhjk,bhtk->bhtj", window.k, x) * w[:, :, None, :], ring)
        return from_checkpoint + torch.einsum("bhtj,bhjv->bhtv", scores, window.u)

    hk, hq = history(k_t), history(q_t)
    residual = _r(tokens.v.permute(0, 2, 1, 3) - torch.exp(gamma)[..., None] * hk, io)
    lower_incl = torch.tril(torch.ones(T, T, dtype=torch.bool, device=S0.device))
    strictly = torch.tril(lower_incl, diagonal=-1)
    decay = torch.exp(
        torch.where(lower_incl, gamma[..., :, None] - gamma[..., None, :], -torch.inf)
    )
    minus_m = _r(
        torch.where(strictly, -beta[..., :, None] * decay * (k_t @ k_t.transpose(-1, -2)), 0.0), io
    )
    eye = torch.eye(T, dtype=S0.dtype, device=S0.device)
    tmat = torch.linalg.solve_triangular(eye - minus_m, torch.diag_embed(beta), upper=False)
    tmat = _r(tmat, io)
    qk = _r(torch.where(lower_incl, decay * (q_t @ k_t.transpose(-1, -2)), 0.0), io)
    qt = _r(qk @ tmat, io)
    y = _r(qt @ residual + torch.exp(gamma)[..., None] * hq, io)
    u = _r(tmat @ residual, ring)

    wu = _r(w[..., None] * window.u, ring)
    state_hist = _r(
        torch.exp(g_star)[..., None, None] * S0 + torch.einsum("bhjv,bhjk->bhvk", wu, window.k),
        state,
    )
    flush = window.hist_len >= flush_min
    absolute = g_star[:, None, :] + gamma.permute(0, 2, 1)
    g_append = torch.where(flush[:, None, None], gamma.permute(0, 2, 1), absolute).float().double()
    return StepResult(
        y=y.permute(0, 2, 1, 3),
        u=u.permute(0, 2, 1, 3),
        k_append=_r(_r(tokens.k_hat_key, tile_dtype), ring),
        g_append=g_append,
        flush=flush,
        state_hist=state_hist,
    )
