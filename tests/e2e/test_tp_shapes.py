"""Per-rank ReplaySSM page shapes at TP=1/2/4 against the series' calculator (#9), on CPU.

The calculator is the series' own code (`patches/` applied onto the vLLM base in vllm/, loaded
by `tools.e2e.series_calc` without vLLM's dependencies). The expectations below are the kernel
contract's pool shapes (research/kernel-spec.md section 1: k ring [pool, H, 32, K], u ring
[pool, HV, 32, V], g ring [pool, HV, 32], checkpoint [pool, HV, V, K]) with the heads split
evenly over ranks, which is how the GDN layer shards its projections.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.e2e import series_calc

ROOT = Path(__file__).resolve().parents[2]
RING_SLOTS = 32  # kernel-spec: RING_SLOTS, the physical ring depth per (slot, head)
K = V = 128
CONV_KERNEL = 4
# (name, H, HV): Qwen3.5 GDN geometries (research/ecosystem.md section 4) and the tiny model.
GEOMETRIES = [
    ("tiny", 2, 4),
    ("35B-A3B/9B", 16, 32),
    ("27B", 16, 48),
    ("122B/397B", 16, 64),
]


@pytest.fixture(scope="module")
def calc() -> type:
    try:
        return series_calc.series_calculator(ROOT)
    except series_calc.SeriesSourceError as exc:
        pytest.skip(f"series sources unavailable: {exc}")


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize(("name", "h", "hv"), GEOMETRIES)
@pytest.mark.parametrize("num_spec", [3, 7])
def test_replay_page_per_rank(calc: type, name: str, h: int, hv: int, tp: int, num_spec: int):
    if h % tp:
        with pytest.raises(AssertionError, match="divisible"):
            calc.gated_delta_net_replayssm_spec_state_shape(tp, h, hv, K, V, CONV_KERNEL, num_spec)
        return
    conv, ckpt, u_ring, k_ring, g_ring = calc.gated_delta_net_replayssm_spec_state_shape(
        tp, h, hv, K, V, CONV_KERNEL, num_spec
    )
    conv_dim = 2 * h * K + hv * V
    assert conv == (conv_dim // tp, CONV_KERNEL - 1 + num_spec), "rolls back by shifting"
    assert ckpt == (hv // tp, V, K), "one checkpoint per request, not one per draft"
    assert u_ring == (hv // tp, RING_SLOTS, V)
    assert k_ring == (h // tp, RING_SLOTS, K)
    assert g_ring == (hv // tp, RING_SLOTS)
    # The GQA ratio survives sharding: each rank's value heads map onto its own key heads.
    assert u_ring[0] // k_ring[0] == hv // h


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_native_page_matches_checkpoint_shape(calc: type, tp: int) -> None:
    conv, state = calc.gated_delta_net_state_shape(tp, 16, 32, K, V, CONV_KERNEL, 3)
    _, ckpt, *_ = calc.gated_delta_net_replayssm_spec_state_shape(tp, 16, 32, K, V, CONV_KERNEL, 3)
    assert state == ckpt, "the checkpoint is the native recurrent state, same shape"
    assert conv == (2 * 16 * K // tp + 32 * V // tp, CONV_KERNEL - 1 + 3)


def test_conv_orientation_follows_vllm_layout() -> None:
    sources = (
        series_calc.patched_sources(ROOT, (series_calc.MAMBA_UTILS,))
        if (ROOT / "vllm/.git").exists()
        else pytest.skip("vllm/ not populated")
    )
    calc_sd = series_calc.load_shape_calculator(
        sources[series_calc.MAMBA_UTILS], RING_SLOTS, conv_dim_first=False
    )
    conv, *_ = calc_sd.gated_delta_net_replayssm_spec_state_shape(2, 16, 32, K, V, 4, 3)
    assert conv == (6, (2 * 16 * K + 32 * V) // 2)


def test_state_bytes_per_request(calc: type) -> None:
    """Memory column of the e2e table: 35B-A3B geometry, 30 GDN layers' worth per layer x 1."""
    cfg = {
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": K,
        "linear_value_head_dim": V,
        "linear_conv_kernel_dim": 4,
        "layer_types": ["linear_attention"],
    }
    state = 32 * V * K
    conv = (2 * 16 * K + 32 * V) * 2  # bf16 per conv column
    assert series_calc.gdn_state_bytes_per_request(calc, cfg, "nospec") == conv * 3 + state * 4
    assert series_calc.gdn_state_bytes_per_request(calc, cfg, "native") == conv * 6 + state * 4 * 4
    replay = series_calc.gdn_state_bytes_per_request(calc, cfg, "replay", state_dtype="float16")
    rings = (32 * 32 * V + 16 * 32 * K) * 2 + 32 * 32 * 4
    assert replay == conv * 6 + state * 2 + rings
    # TP=2 halves everything per rank.
    assert (
        series_calc.gdn_state_bytes_per_request(calc, cfg, "replay", tp=2, state_dtype="float16")
        * 2
        == replay
    )
