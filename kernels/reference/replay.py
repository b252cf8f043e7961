"""Stage 3: the ReplaySSM ring state and one verify(+flush) step, float64 (kernel-spec 1.7, 2.2-6).

Per request (pool slot s, value head hv, key head i_h = hv // (HV // H)):
  checkpoint  pool[s, hv]                     [V, K]   state dtype
  k ring      k_cache[s, i_h, 32, K]          ring dtype (one row per KEY head)
  u ring      u_cache[s, hv, 32, V]           ring dtype
  g ring      g_cache[s, hv, 32]              float32
  cursors     hist_len[b] = P in [0, 16], cache_base[b] = base in [0, 32); request-keyed (row b)

Logical window row j < P lives at physical row (base + j) & 31 and holds k_hat_j, u_j and
G_j = sum_{i<=j} g_i (cumulative log-decay since the checkpoint; "cumulative" g-ring format).
With G* = G_{P-1} (0 if P == 0) and w_j = exp(G* - G_j):
    S_hist = exp(G*) S0 + sum_{j<P} w_j u_j k_j^T          (the state after the committed tokens)

One step (T drafts) appends k_hat_s, u_s and g at (base + P + s) & 31 for every s < T. A row whose
P >= flush_min also folds: pool[s] <- S_hist, and its appended g rows are local (gamma_s) instead of
absolute (G* + gamma_s). The cursors are NOT touched by the step; the caller commits with
`commit_cursors` after it knows the accepted count n in [1, T].

vLLM's Triton ReplaySSM stores per-token g in the same ring shape ("per_token" format, kernel-spec
6.7); `g_ring_format` selects the interpretation wherever the g ring is read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from kernels.reference.gating import TokenInputs, prepare_tokens, value_to_key_head
from kernels.reference.recurrence import recurrent_gated_delta_rule

RING_SLOTS = 32  # physical ring depth per (slot, head)
RING_MASK = RING_SLOTS - 1  # physical row = (base + logical) & RING_MASK
W_RING = 16  # maximum live window; legal hist_len range is [0, W_RING]
MAX_T = 8  # P + T <= 16 + 8 = 24 < 32 keeps flush appends clear of the live window

GRingFormat = Literal["cumulative", "per_token"]


def default_flush_min(num_tokens: int) -> int:
    """Lazy flush threshold W_RING - T + 1: flush exactly when [P, P+T) would overflow."""
    return W_RING - num_tokens + 1


def check_flush_min(flush_min: int, num_tokens: int) -> None:
    """ValueError unless 1 <= flush_min <= W_RING - T + 1 (every verify row has P + T <= 16)."""
    if not 1 <= flush_min <= default_flush_min(num_tokens):
        raise ValueError(
            f"flush_min={flush_min} must lie in [1, {default_flush_min(num_tokens)}] "
            f"for T={num_tokens}"
        )


def window_slots(cache_base: torch.Tensor, width: int = W_RING) -> torch.Tensor:
    """Physical ring rows of logical rows 0..width-1: [B, width] long, (base + j) & 31."""
    j = torch.arange(width, device=cache_base.device)
    return (cache_base.long()[:, None] + j) & RING_MASK


def append_slots(cache_base: torch.Tensor, hist_len: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """Physical ring rows the T drafts are appended to: [B, T] long, (base + P + s) & 31."""
    s = torch.arange(num_tokens, device=cache_base.device)
    return (cache_base.long()[:, None] + hist_len.long()[:, None] + s) & RING_MASK


@dataclass
class RingWindow:
    """The live window of B rows, float64, expanded to value heads.

    k: [B, HV, W, K]; u: [B, HV, W, V]; G: [B, HV, W] cumulative log-decay; valid: [B, W] (j < P).
    Rows j >= P are zero in k/u/G whatever the ring held there (NaN/Inf included).
    """

    k: torch.Tensor
    u: torch.Tensor
    G: torch.Tensor
    valid: torch.Tensor
    hist_len: torch.Tensor

    def g_star(self) -> torch.Tensor:
        """G* = G_{P-1}, 0 when P == 0: [B, HV]."""
        last = (self.hist_len.long() - 1).clamp_min(0)
        g_last = self.G.gather(2, last[:, None, None].expand(-1, self.G.shape[1], 1))[..., 0]
        return torch.where(self.hist_len[:, None] > 0, g_last, torch.zeros_like(g_last))


def gather_window(
    k_cache: torch.Tensor,
    u_cache: torch.Tensor,
    g_cache: torch.Tensor,
    slots: torch.Tensor,
    cache_base: torch.Tensor,
    hist_len: torch.Tensor,
    g_ring_format: GRingFormat = "cumulative",
) -> RingWindow:
    """Read the live window of pool slots `slots` [B] (all >= 0) at cursors cache_base, hist_len."""
    slots = slots.long()
    num_k_heads, num_v_heads = k_cache.shape[1], u_cache.shape[1]
    head_map = value_to_key_head(num_v_heads, num_k_heads, k_cache.device)
    rows = window_slots(cache_base)  # [B, W]
    valid = torch.arange(W_RING, device=rows.device)[None, :] < hist_len.long()[:, None]
    k_rows = k_cache[slots[:, None], :, rows]  # [B, W, H, K]
    u_rows = u_cache[slots[:, None], :, rows]  # [B, W, HV, V]
    g_rows = g_cache[slots[:, None], :, rows]  # [B, W, HV]
    # torch.where, never multiply: rows beyond P may legally hold NaN/Inf (kernel-spec 2.9 item 10).
    k_rows = torch.where(valid[..., None, None], k_rows.double(), 0.0)
    u_rows = torch.where(valid[..., None, None], u_rows.double(), 0.0)
    g_rows = torch.where(valid[..., None], g_rows.double(), 0.0)
    if g_ring_format == "per_token":
        g_rows = torch.cumsum(g_rows, dim=1)
    elif g_ring_format != "cumulative":
        raise ValueError(f"unknown g_ring_format {g_ring_format!r}")
    return RingWindow(
        k=k_rows[:, :, head_map].permute(0, 2, 1, 3),
        u=u_rows.permute(0, 2, 1, 3),
        G=g_rows.permute(0, 2, 1),
        valid=valid,
        hist_len=hist_len.long(),
    )


def decay_weights(window: RingWindow) -> torch.Tensor:
    """w_j = exp(G* - G_j) on valid rows, 0 elsewhere: [B, HV, W]."""
    diff = window.g_star()[..., None] - window.G
    return torch.where(
        window.valid[:, None, :], torch.exp(torch.where(window.valid[:, None, :], diff, 0.0)), 0.0
    )


def reconstruct_state(checkpoint: torch.Tensor, window: RingWindow) -> torch.Tensor:
    """S_hist = exp(G*) S0 + sum_j w_j u_j k_j^T, float64 [B, HV, V, K] (kernel-spec 2.2)."""
    w = decay_weights(window)
    history = torch.einsum("bhj,bhjv,bhjk->bhvk", w, window.u, window.k)
    return torch.exp(window.g_star())[..., None, None] * checkpoint.double() + history


def project_history(checkpoint: torch.Tensor, window: RingWindow, x: torch.Tensor) -> torch.Tensor:
    """S_hist x without forming S_hist (kernel-spec 2.3 step 1): x [B,T,HV,K] -> [B,T,HV,V]."""
    w = decay_weights(window)
    from_checkpoint = torch.einsum("bhvk,bthk->bthv", checkpoint.double(), x)
    scores = torch.einsum("bhjk,bthk->bthj", window.k, x) * w[:, None]
    from_ring = torch.einsum("bthj,bhjv->bthv", scores, window.u)
    return torch.exp(window.g_star())[:, None, :, None] * from_checkpoint + from_ring


@dataclass
class StepResult:
    """Everything one verify(+flush) step produces for B live rows, float64.

    y, u: [B, T, HV, V]; k_append: [B, T, H, K]; g_append: [B, T, HV] (in the ring's g format);
    flush: [B] bool (P >= flush_min); state_hist: [B, HV, V, K] (S_hist: the folded checkpoint
    on flush rows).
    """

    y: torch.Tensor
    u: torch.Tensor
    k_append: torch.Tensor
    g_append: torch.Tensor
    flush: torch.Tensor
    state_hist: torch.Tensor


StepImpl = Callable[[torch.Tensor, RingWindow, TokenInputs, int], StepResult]


def _g_append(
    tokens: TokenInputs, window: RingWindow, flush: torch.Tensor, g_ring_format: GRingFormat
) -> torch.Tensor:
    if g_ring_format == "per_token":
        return tokens.g.clone()
    gamma = torch.cumsum(tokens.g, dim=1)  # [B, T, HV]
    absolute = window.g_star()[:, None, :] + gamma
    return torch.where(flush[:, None, None], gamma, absolute)


def verify_flush_closed_form(
    checkpoint: torch.Tensor,
    window: RingWindow,
    tokens: TokenInputs,
    flush_min: int,
    g_ring_format: GRingFormat = "cumulative",
) -> StepResult:
    """One step in the closed UT/WY form of kernel-spec 2.3 (what the kernels compute).

    gamma_s = sum_{i<=s} g_i; Gamma_sr = exp(gamma_s - gamma_r) (r <= s, from differences, never
    exp(gamma_s) * exp(-gamma_r), so strong decay gives 0 and not inf * 0);
    R = v - exp(gamma) S_hist k_hat; U = (I + diag(beta) L)^-1 diag(beta) R with
    L_sr = Gamma_sr (k_s . k_r) for r < s;
    y_s = exp(gamma_s) S_hist q_hat_s + sum_{r<=s} Gamma_sr (q_s . k_r) u_r.
    """
    T = tokens.num_tokens
    gamma = torch.cumsum(tokens.g, dim=1).permute(0, 2, 1)  # [B, HV, T]
    lower_incl = torch.tril(torch.ones(T, T, dtype=torch.bool, device=gamma.device))
    strictly_lower = torch.tril(lower_incl, diagonal=-1)
    diff = gamma[..., :, None] - gamma[..., None, :]
    decay = torch.exp(torch.where(lower_incl, diff, float("-inf")))  # Gamma, 0 above the diagonal

    k_hat = tokens.k_hat.permute(0, 2, 1, 3)  # [B, HV, T, K]
    q_hat = tokens.q_hat.permute(0, 2, 1, 3)
    beta = tokens.beta.permute(0, 2, 1)  # [B, HV, T]
    hk = project_history(checkpoint, window, tokens.k_hat).permute(0, 2, 1, 3)  # [B, HV, T, V]
    hq = project_history(checkpoint, window, tokens.q_hat).permute(0, 2, 1, 3)
    residual = tokens.v.permute(0, 2, 1, 3) - torch.exp(gamma)[..., None] * hk

    kk = k_hat @ k_hat.transpose(-1, -2)
    lower = torch.where(strictly_lower, decay * kk, 0.0)
    eye = torch.eye(T, dtype=lower.dtype, device=lower.device)
    system = eye + beta[..., :, None] * lower
    corrections = torch.linalg.solve_triangular(
        system, beta[..., None] * residual, upper=False, unitriangular=True
    )  # [B, HV, T, V]
    qk = torch.where(lower_incl, decay * (q_hat @ k_hat.transpose(-1, -2)), 0.0)
    y = torch.exp(gamma)[..., None] * hq + qk @ corrections

    flush = window.hist_len >= flush_min
    return StepResult(
        y=y.permute(0, 2, 1, 3),
        u=corrections.permute(0, 2, 1, 3),
        k_append=tokens.k_hat_key.clone(),
        g_append=_g_append(tokens, window, flush, g_ring_format),
        flush=flush,
        state_hist=reconstruct_state(checkpoint, window),
    )


def verify_flush_token_by_token(
    checkpoint: torch.Tensor,
    window: RingWindow,
    tokens: TokenInputs,
    flush_min: int,
    g_ring_format: GRingFormat = "cumulative",
) -> StepResult:
    """The same step via S_hist and the plain recurrence: the cross-check of the closed form."""
    state_hist = reconstruct_state(checkpoint, window)
    rec = recurrent_gated_delta_rule(state_hist, tokens)
    flush = window.hist_len >= flush_min
    return StepResult(
        y=rec.y,
        u=rec.u,
        k_append=tokens.k_hat_key.clone(),
        g_append=_g_append(tokens, window, flush, g_ring_format),
        flush=flush,
        state_hist=state_hist,
    )


def commit_cursors(
    hist_len: torch.Tensor,
    cache_base: torch.Tensor,
    accepted: torch.Tensor,
    flush_min: int,
    state_indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """The caller-owned cursor commit of kernel-spec 2.6, in place; returns the [B] bool flush mask.

    verify row (P < flush_min): len += n.  flush row: base = (base + P) & 31, len = n.
    Rows whose `state_indices` entry is negative (pad rows) are left alone.
    """
    P = hist_len.long()
    n = accepted.to(device=hist_len.device).long()
    flushed = P >= flush_min
    if state_indices is not None:
        flushed = flushed & (state_indices.to(hist_len.device) >= 0)
        live = state_indices.to(hist_len.device) >= 0
    else:
        live = torch.ones_like(flushed)
    new_base = torch.where(flushed, (cache_base.long() + P) & RING_MASK, cache_base.long())
    new_len = torch.where(flushed, n, P + n)
    cache_base.copy_(torch.where(live, new_base, cache_base.long()).to(cache_base.dtype))
    hist_len.copy_(torch.where(live, new_len, P).to(hist_len.dtype))
    return flushed


def reset_cursors(hist_len: torch.Tensor, cache_base: torch.Tensor, rows: torch.Tensor) -> None:
    """A new request (or a recycled block) starts with len = 0, base = 0; its rings are not read."""
    hist_len[rows] = 0
    cache_base[rows] = 0


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def gated_delta_rule_mtp_ucache_flush(
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    softplus_beta: float = 1.0,
    softplus_threshold: float = 20.0,
    q: torch.Tensor | None = None,
    k: torch.Tensor | None = None,
    v: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    initial_state_source: torch.Tensor | None = None,
    initial_state_indices: torch.Tensor | None = None,
    output_state_indices: torch.Tensor | None = None,
    intermediate_states_buffer: torch.Tensor | None = None,
    accepted_steps: torch.Tensor | None = None,
    ssm_state_indices: torch.Tensor | None = None,
    disable_state_update: bool = False,
    use_qk_l2norm_in_kernel: bool = True,
    scale: float | None = None,
    output: torch.Tensor | None = None,
    disable_output: bool = False,
    recovery_steps: int = 0,
    k_cache: torch.Tensor | None = None,
    u_cache: torch.Tensor | None = None,
    g_cache: torch.Tensor | None = None,
    hist_len: torch.Tensor | None = None,
    cache_base: torch.Tensor | None = None,
    flush_min: int | None = None,
    restart_hist_on_flush: bool = True,
    pdl_trigger: bool = False,
    *,
    g_ring_format: GRingFormat = "cumulative",
    step_impl: StepImpl | None = None,
) -> torch.Tensor:
    """The float64 oracle behind the exact `gated_delta_rule_mtp_ucache_flush` keyword contract
    (kernel-spec 1.3).

    Any device, any storage dtypes: everything is computed in float64 and rounded once when
    written into the caller's tensors. T may be 1..8 (the kernels support a subset). Pad rows
    (initial_state_indices < 0) write nothing, not even their output rows. Writes: output rows,
    the T appended ring rows per live row, and pool[s] <- S_hist on flush rows; nothing else.
    With restart_hist_on_flush=True the standalone commit of kernel-spec 1.8 runs afterwards.
    `step_impl` replaces the closed-form step (e.g. emulation.verify_flush_emulated).
    """
    del disable_state_update, pdl_trigger  # accepted and ignored, as upstream
    _require(
        softplus_beta == 1.0 and softplus_threshold == 20.0,
        "softplus_beta must be 1.0 and softplus_threshold 20.0",
    )
    _require(use_qk_l2norm_in_kernel, "use_qk_l2norm_in_kernel must be True")
    for name, value in (
        ("output_state_indices", output_state_indices),
        ("intermediate_states_buffer", intermediate_states_buffer),
        ("accepted_steps", accepted_steps),
        ("ssm_state_indices", ssm_state_indices),
    ):
        if value is not None:
            raise NotImplementedError(f"{name} must be None for the ucache kernel")
    if disable_output or recovery_steps != 0:
        raise NotImplementedError("disable_output and recovery_steps are not supported")
    for name, value in (
        ("q", q),
        ("k", k),
        ("v", v),
        ("b", b),
        ("initial_state_source", initial_state_source),
    ):
        _require(value is not None, f"{name} is required")
    for name, value in (
        ("k_cache", k_cache),
        ("u_cache", u_cache),
        ("g_cache", g_cache),
        ("hist_len", hist_len),
    ):
        _require(value is not None, f"{name} is required (ring state)")
    assert q is not None and k is not None and v is not None and b is not None
    assert initial_state_source is not None and k_cache is not None and u_cache is not None
    assert g_cache is not None and hist_len is not None
    batch, num_tokens, num_k_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2], v.shape[3]
    pool = initial_state_source.shape[0]
    _require(
        1 <= num_tokens <= MAX_T,
        f"T={num_tokens} unsupported: the oracle supports T in [1, {MAX_T}]",
    )
    _require(tuple(k.shape) == tuple(q.shape), f"k {tuple(k.shape)} must match q {tuple(q.shape)}")
    _require(tuple(v.shape[:2]) == (batch, num_tokens), f"v {tuple(v.shape)} must be [B, T, HV, V]")
    _require(
        tuple(a.shape) == (batch, num_tokens, num_v_heads), f"a {tuple(a.shape)} must be [B, T, HV]"
    )
    _require(tuple(b.shape) == tuple(a.shape), f"b {tuple(b.shape)} must match a {tuple(a.shape)}")
    _require(
        num_v_heads % num_k_heads == 0, f"HV={num_v_heads} must be a multiple of H={num_k_heads}"
    )
    _require(
        tuple(initial_state_source.shape) == (pool, num_v_heads, head_v, head_k),
        f"initial_state_source {tuple(initial_state_source.shape)} must be [pool, HV, V, K]",
    )
    _require(
        tuple(k_cache.shape) == (pool, num_k_heads, RING_SLOTS, head_k),
        f"k_cache must be [pool, H, 32, K], got {tuple(k_cache.shape)}",
    )
    _require(
        tuple(u_cache.shape) == (pool, num_v_heads, RING_SLOTS, head_v),
        f"u_cache must be [pool, HV, 32, V], got {tuple(u_cache.shape)}",
    )
    _require(
        tuple(g_cache.shape) == (pool, num_v_heads, RING_SLOTS),
        f"g_cache must be [pool, HV, 32], got {tuple(g_cache.shape)}",
    )
    _require(
        g_cache.dtype in (torch.float32, torch.float64),
        f"g_cache must be float32, got {g_cache.dtype}",
    )
    _require(
        hist_len.shape == (batch,) and not hist_len.is_floating_point(),
        "hist_len must be an int tensor [B]",
    )
    if flush_min is None:
        flush_min = default_flush_min(num_tokens)
    check_flush_min(flush_min, num_tokens)

    device = q.device
    indices = (
        torch.arange(batch, device=device, dtype=torch.int32)
        if initial_state_indices is None
        else initial_state_indices.to(device)
    )
    base = (
        torch.zeros(batch, dtype=torch.int32, device=device) if cache_base is None else cache_base
    )
    _require(
        indices.shape == (batch,) and not indices.is_floating_point(),
        "initial_state_indices must be an int tensor [B]",
    )
    _require(
        base.shape == (batch,) and not base.is_floating_point(),
        "cache_base must be an int tensor [B]",
    )
    live = indices >= 0
    slots = indices[live].long()
    P = hist_len.to(device)[live].long()
    base_live = base.to(device)[live].long()
    _require(bool((slots < pool).all()), f"initial_state_indices must be < pool={pool}")
    _require(
        slots.unique().numel() == slots.numel(),
        "live initial_state_indices must be unique within a batch",
    )
    _require(
        bool(((P >= 0) & (P <= W_RING)).all()),
        f"hist_len out of legal range [0, {W_RING}]: {P.tolist()}",
    )
    _require(
        bool(((base_live >= 0) & (base_live < RING_SLOTS)).all()),
        f"cache_base out of legal range [0, {RING_SLOTS})",
    )

    if output is None or tuple(output.shape) != (batch, num_tokens, num_v_heads, head_v):
        output = torch.full(
            (batch, num_tokens, num_v_heads, head_v), float("nan"), dtype=v.dtype, device=device
        )

    if slots.numel() > 0:
        rows = live.nonzero()[:, 0]
        tokens = prepare_tokens(q[rows], k[rows], v[rows], a[rows], b[rows], A_log, dt_bias, scale)
        checkpoint = initial_state_source[slots].double()
        window = gather_window(k_cache, u_cache, g_cache, slots, base_live, P, g_ring_format)
        if step_impl is None:
            result = verify_flush_closed_form(checkpoint, window, tokens, flush_min, g_ring_format)
        else:
            result = step_impl(checkpoint, window, tokens, flush_min)
        output[rows] = result.y.to(output.dtype)
        appends = append_slots(base_live, P, num_tokens)
        for s in range(num_tokens):
            k_cache[slots, :, appends[:, s]] = result.k_append[:, s].to(k_cache.dtype)
            u_cache[slots, :, appends[:, s]] = result.u[:, s].to(u_cache.dtype)
            g_cache[slots, :, appends[:, s]] = result.g_append[:, s].to(g_cache.dtype)
        if bool(result.flush.any()):
            initial_state_source[slots[result.flush]] = result.state_hist[result.flush].to(
                initial_state_source.dtype
            )

    if restart_hist_on_flush:
        if cache_base is None:
            raise ValueError("restart_hist_on_flush=True needs a caller-owned cache_base tensor")
        flushed = (hist_len >= flush_min) & live.to(hist_len.device)
        cache_base.copy_(torch.where(flushed, (cache_base + hist_len) & RING_MASK, cache_base))
        hist_len.copy_(torch.where(flushed, torch.zeros_like(hist_len), hist_len))
    return output
