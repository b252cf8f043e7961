"""Stage 1 of the gated delta rule: gates and normalisation, in float64.

kernel-spec.md section 2.1:
    g_t    = -exp(A_log[h]) * softplus(a_t + dt_bias[h])   (no threshold, softplus beta 1)
    beta_t = sigmoid(b_t)
    k_hat  = k / sqrt(|k|^2 + EPS),  q_hat = scale * q / sqrt(|q|^2 + EPS)

`prepare_tokens` turns the kernel's raw inputs (any dtype, any device) into one float64
`TokenInputs` bundle that every later stage (recurrence, replay) consumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

EPS = 1e-6  # inside the L2 norm: rsqrt(sum x^2 + EPS), kernel-spec 1.2


def gate_log_decay(A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    """g = -exp(A_log) * softplus(a + dt_bias), float64, always <= 0.

    A_log and dt_bias are [HV]; a is [..., HV]. softplus is computed exactly as
    log(1 + e^x) = logaddexp(0, x) (upstream applies no threshold).
    """
    x = a.double() + dt_bias.double()
    return -torch.exp(A_log.double()) * torch.logaddexp(torch.zeros_like(x), x)


def gate_beta(b: torch.Tensor) -> torch.Tensor:
    """beta = sigmoid(b), float64."""
    return torch.sigmoid(b.double())


def l2_normalize(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim, float64. A zero row maps to zero."""
    x = x.double()
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def value_to_key_head(
    num_v_heads: int, num_k_heads: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """GQA head map: value head hv reads key head hv // (HV // H). Returns a long tensor [HV]."""
    if num_k_heads <= 0 or num_v_heads % num_k_heads != 0:
        raise ValueError(f"HV={num_v_heads} must be a positive multiple of H={num_k_heads}")
    group = num_v_heads // num_k_heads
    return torch.arange(num_v_heads, device=device) // group


@dataclass
class TokenInputs:
    """Per-token float64 quantities for B rows, T tokens, HV value heads.

    q_hat, k_hat: [B, T, HV, K] (already expanded to value heads; q_hat includes `scale`)
    k_hat_key:    [B, T, H, K]  (one row per key head: what the k ring stores)
    v:            [B, T, HV, V]
    g, beta:      [B, T, HV]
    """

    q_hat: torch.Tensor
    k_hat: torch.Tensor
    k_hat_key: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return self.q_hat.shape[1]

    def select_rows(self, rows: torch.Tensor) -> TokenInputs:
        """Rows `rows` (long index or bool mask over B)."""
        return TokenInputs(*(t[rows] for t in self._tensors()))

    def first_tokens(self, n: int) -> TokenInputs:
        return TokenInputs(*(t[:, :n] for t in self._tensors()))

    def _tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.q_hat, self.k_hat, self.k_hat_key, self.v, self.g, self.beta)


def prepare_tokens(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float | None = None,
) -> TokenInputs:
    """Kernel inputs to TokenInputs: q, k [B,T,H,K]; v [B,T,HV,V]; a, b [B,T,HV]; A_log/dt_bias [HV]

    `scale` defaults to 1/sqrt(K) as in the kernel contract.
    """
    num_k_heads, head_k = q.shape[2], q.shape[3]
    num_v_heads = v.shape[2]
    if k.shape != q.shape:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must have the same shape")
    if scale is None:
        scale = 1.0 / math.sqrt(head_k)
    head_map = value_to_key_head(num_v_heads, num_k_heads, q.device)
    q_hat_key = l2_normalize(q) * scale
    k_hat_key = l2_normalize(k)
    return TokenInputs(
        q_hat=q_hat_key[:, :, head_map],
        k_hat=k_hat_key[:, :, head_map],
        k_hat_key=k_hat_key,
        v=v.double(),
        g=gate_log_decay(A_log, a, dt_bias),
        beta=gate_beta(b),
    )
