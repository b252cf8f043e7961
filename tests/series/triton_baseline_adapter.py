"""The series' Triton ReplaySSM baseline behind the `gated_delta_rule_mtp_ucache_flush` contract.

Point the conformance suite's `triton_vllm` backend at this file
(GDN_TRITON_BASELINE_MODULE=tests/series/triton_baseline_adapter.py). It drives the patched
vLLM op `gdn_replayssm_spec_decode` (verify + flush launches) exactly as the fused kernel is
driven: request-keyed hist_len/cache_base, caller-owned cursor commit, negative indices retire a
row, index 0 is a legal slot. The patched vLLM tree is found through GDN_SERIES_VLLM_ROOT (a
folder holding vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py), default the
repository's vllm/ checkout. The g ring holds the cumulative log-decay since the checkpoint,
the same contents as the fused kernels, and pad rows are left untouched.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import torch

RING_SLOTS = 32
W_RING = 16
SUPPORTED_T = (1, 2, 3, 4, 5, 6, 7, 8)
G_RING_FORMAT = "cumulative"
PAD_OUTPUT_POLICY = "untouched"
OP_MODULE = "vllm.model_executor.layers.mamba.ops.gdn_replayssm_spec_decode"

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]


def vllm_root() -> Path:
    """The patched vLLM tree the op is loaded from."""
    return Path(os.environ.get("GDN_SERIES_VLLM_ROOT", _REPO / "vllm"))


def _load_ops() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_gdn_series_vllm_triton_shim", _HERE / "vllm_triton_shim.py"
    )
    assert spec is not None and spec.loader is not None
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    root = vllm_root()
    path = root.joinpath(*OP_MODULE.split(".")).with_suffix(".py")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: apply the series (scripts/apply.sh) or set GDN_SERIES_VLLM_ROOT"
        )
    return shim.load(root, OP_MODULE)


ops = _load_ops()

# Fields of the op's GdnReplaySSMLaunchConfig (block_v, block_k, num_warps, num_stages,
# max_registers) for every call; the benchmark's sweep sets them, empty = the op's own table.
LAUNCH_OVERRIDES: dict[str, int | None] = {}


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
    scale: float | None = None,
    output: torch.Tensor | None = None,
    k_cache: torch.Tensor | None = None,
    u_cache: torch.Tensor | None = None,
    g_cache: torch.Tensor | None = None,
    hist_len: torch.Tensor | None = None,
    cache_base: torch.Tensor | None = None,
    flush_min: int | None = None,
    restart_hist_on_flush: bool = True,
    use_qk_l2norm_in_kernel: bool = True,
    **unsupported: object,
) -> torch.Tensor:
    """One verify+flush step of the Triton baseline (two launches); returns [B, T, HV, V]."""
    bad = {key: val for key, val in unsupported.items() if val not in (None, False, 0)}
    if bad:
        raise NotImplementedError(f"the Triton baseline does not support {sorted(bad)}")
    if softplus_beta != 1.0 or not use_qk_l2norm_in_kernel:
        raise NotImplementedError("softplus_beta must be 1 and the q/k L2 norm in-kernel")
    for name, tensor in (
        ("q", q),
        ("k", k),
        ("v", v),
        ("b", b),
        ("initial_state_source", initial_state_source),
        ("k_cache", k_cache),
        ("u_cache", u_cache),
        ("g_cache", g_cache),
        ("hist_len", hist_len),
    ):
        if tensor is None:
            raise ValueError(f"{name} is required")
    assert q is not None and k is not None and v is not None and b is not None
    assert initial_state_source is not None and hist_len is not None
    batch, num_tokens, num_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2:]
    if num_tokens not in SUPPORTED_T:
        raise NotImplementedError(f"T={num_tokens} is not supported (T in {SUPPORTED_T})")
    if flush_min is None:
        flush_min = W_RING - num_tokens + 1
    device = q.device
    if initial_state_indices is None:
        initial_state_indices = torch.arange(batch, dtype=torch.int32, device=device)
    indices = initial_state_indices.to(torch.int32).contiguous()
    if cache_base is None:
        if restart_hist_on_flush:
            raise ValueError("restart_hist_on_flush=True needs a caller-owned cache_base")
        base = torch.zeros(batch, dtype=torch.int32, device=device)
    else:
        base = cache_base
    query_start_loc = torch.arange(
        0, batch * num_tokens + 1, num_tokens, dtype=torch.int32, device=device
    )
    if (
        output is not None
        and output.shape == (batch, num_tokens, num_v_heads, head_v)
        and output.dtype == v.dtype
        and output.is_contiguous()
    ):
        out = output
    else:
        out = torch.empty(batch, num_tokens, num_v_heads, head_v, dtype=v.dtype, device=device)
    launch = (
        {"launch_config": ops.GdnReplaySSMLaunchConfig(**LAUNCH_OVERRIDES)}
        if LAUNCH_OVERRIDES
        else {}
    )
    ops.gdn_replayssm_spec_decode(
        q.reshape(batch * num_tokens, num_heads, head_k),
        k.reshape(batch * num_tokens, num_heads, head_k),
        v.reshape(batch * num_tokens, num_v_heads, head_v),
        a.reshape(batch * num_tokens, num_v_heads),
        b.reshape(batch * num_tokens, num_v_heads),
        A_log,
        dt_bias,
        initial_state_source,
        k_cache,
        u_cache,
        g_cache,
        indices,
        hist_len,
        base,
        query_start_loc,
        num_tokens,
        flush_min,
        scale=scale,
        out=out.view(batch * num_tokens, num_v_heads, head_v),
        pad_slot_id=-1,
        softplus_threshold=softplus_threshold,
        **launch,
    )
    if restart_hist_on_flush:
        # The fused kernels' standalone commit: flushed rows restart after their window.
        flushed = hist_len >= flush_min
        base.copy_((base + hist_len * flushed) & (RING_SLOTS - 1))
        hist_len.masked_fill_(flushed, 0)
    if output is not None and out is not output:
        output.copy_(out)
        return output
    return out
