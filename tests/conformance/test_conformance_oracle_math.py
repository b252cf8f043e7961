"""Oracle self-consistency on CPU (kernel-spec 2.2-2.9).

Closed UT/WY form vs the token-by-token recurrence, ring reconstruction vs the plain recurrent
state, gates at the extremes, and the kernel contract's read/write sets. Fresh random inputs every
run; GDN_TEST_SEED pins the seed."""

from __future__ import annotations

import math

import pytest
import torch

from kernels.reference import replay
from kernels.reference.gating import (
    gate_beta,
    gate_log_decay,
    l2_normalize,
    prepare_tokens,
    value_to_key_head,
)
from kernels.reference.harness import fresh_seed
from kernels.reference.recurrence import recurrent_gated_delta_rule

F64 = torch.float64


@pytest.fixture
def gen() -> torch.Generator:
    seed = fresh_seed()
    print(f"GDN_TEST_SEED={seed}")
    return torch.Generator().manual_seed(seed)


def _inputs(
    gen: torch.Generator, B: int, T: int, H: int, HV: int, D: int, decay: float = 1.0
) -> tuple[torch.Tensor, ...]:
    q = torch.randn(B, T, H, D, generator=gen, dtype=F64)
    k = torch.randn(B, T, H, D, generator=gen, dtype=F64)
    v = torch.randn(B, T, HV, D, generator=gen, dtype=F64)
    a = torch.randn(B, T, HV, generator=gen, dtype=F64)
    b = torch.randn(B, T, HV, generator=gen, dtype=F64)
    A_log = -4.5 + 6 * torch.rand(HV, generator=gen, dtype=F64) + math.log(decay)
    dt_bias = 0.5 * torch.randn(HV, generator=gen, dtype=F64)
    return q, k, v, a, b, A_log, dt_bias


def _rings(gen: torch.Generator, pool: int, H: int, HV: int, D: int):
    """Arbitrary ring contents (a window need not come from a recurrence for the math to hold)."""
    state = 0.1 * torch.randn(pool, HV, D, D, generator=gen, dtype=F64)
    k_cache = l2_normalize(torch.randn(pool, H, 32, D, generator=gen, dtype=F64))
    u_cache = 0.3 * torch.randn(pool, HV, 32, D, generator=gen, dtype=F64)
    g_cache = -torch.cumsum(0.3 * torch.rand(pool, HV, 32, generator=gen, dtype=F64), -1)
    return state, k_cache, u_cache, g_cache


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x - ref).norm() / ref.norm().clamp_min(1e-300))


@pytest.mark.parametrize("T", range(1, 9))
def test_closed_form_matches_token_by_token(gen: torch.Generator, T: int) -> None:
    B, H, HV, D, pool = 5, 2, 4, 32, 7
    state, k_cache, u_cache, g_cache = _rings(gen, pool, H, HV, D)
    # stale rows beyond P hold NaN/Inf: the masks must keep them out (kernel-spec 2.9 item 10)
    g_cache[:, :, 20:] = float("nan")
    u_cache[:, :, 24:] = float("inf")
    slots = torch.randperm(pool, generator=gen)[:B]
    fm = replay.default_flush_min(T)
    P = torch.tensor([0, fm - 1, fm, 16, 5])
    base = torch.tensor([0, 31, 9, 30, 3])
    base = torch.where(base + P > 20, base % 4, base)  # keep the NaN rows (20..31) outside windows
    tokens = prepare_tokens(*_inputs(gen, B, T, H, HV, D))
    window = replay.gather_window(k_cache, u_cache, g_cache, slots, base, P)
    closed = replay.verify_flush_closed_form(state[slots], window, tokens, fm)
    plain = replay.verify_flush_token_by_token(state[slots], window, tokens, fm)
    assert _rel(closed.y, plain.y) < 1e-12
    assert _rel(closed.u, plain.u) < 1e-12
    assert torch.equal(closed.g_append, plain.g_append)
    assert closed.flush.tolist() == [False, False, True, True, False]
    assert torch.isfinite(closed.y).all()


def test_reconstruction_equals_recurrent_state(gen: torch.Generator) -> None:
    """Prefix equivalence: a window written by the recurrence reconstructs the recurrent state."""
    B, H, HV, D, T = 3, 2, 4, 32, 16
    state = 0.1 * torch.randn(B, HV, D, D, generator=gen, dtype=F64)
    tokens = prepare_tokens(*_inputs(gen, B, T, H, HV, D))
    rec = recurrent_gated_delta_rule(state, tokens, accepted=torch.tensor([0, 7, 16]))
    k_cache = torch.full((B, H, 32, D), float("nan"), dtype=F64)
    u_cache = torch.full((B, HV, 32, D), float("nan"), dtype=F64)
    g_cache = torch.full((B, HV, 32), float("nan"), dtype=F64)
    base = torch.tensor([5, 27, 20])
    rows = replay.window_slots(base)
    for b in range(B):
        k_cache[b][:, rows[b]] = tokens.k_hat_key[b].transpose(0, 1)
        u_cache[b][:, rows[b]] = rec.u[b].transpose(0, 1)
        g_cache[b][:, rows[b]] = tokens.g[b].cumsum(0).transpose(0, 1)
    P = torch.tensor([0, 7, 16])
    window = replay.gather_window(k_cache, u_cache, g_cache, torch.arange(B), base, P)
    rebuilt = replay.reconstruct_state(state, window)
    assert rec.accepted_state is not None
    assert _rel(rebuilt, rec.accepted_state) < 1e-12
    assert torch.equal(rebuilt[0], state[0])  # P = 0: S_hist = S0 exactly
    # the per-token g format reconstructs the same state
    g_tok = torch.full((B, HV, 32), float("nan"), dtype=F64)
    for b in range(B):
        g_tok[b][:, rows[b]] = tokens.g[b].transpose(0, 1)
    window_tok = replay.gather_window(
        k_cache, u_cache, g_tok, torch.arange(B), base, P, "per_token"
    )
    assert _rel(replay.reconstruct_state(state, window_tok), rec.accepted_state) < 1e-12


def test_history_projection_equals_state_product(gen: torch.Generator) -> None:
    B, H, HV, D, pool, T = 4, 1, 2, 16, 4, 4
    state, k_cache, u_cache, g_cache = _rings(gen, pool, H, HV, D)
    window = replay.gather_window(
        k_cache,
        u_cache,
        g_cache,
        torch.arange(B),
        torch.tensor([0, 30, 16, 7]),
        torch.tensor([16, 9, 0, 1]),
    )
    x = torch.randn(B, T, HV, D, generator=gen, dtype=F64)
    direct = torch.einsum("bhvk,bthk->bthv", replay.reconstruct_state(state, window), x)
    assert _rel(replay.project_history(state, window, x), direct) < 1e-12


def test_gates() -> None:
    a = torch.tensor([-50.0, 0.0, 30.0, 100.0], dtype=F64)
    g = gate_log_decay(torch.zeros(4, dtype=F64), a, torch.zeros(4, dtype=F64))
    expected = -torch.log1p(torch.exp(a))  # no threshold: exact softplus, also at 30 and 100
    assert torch.allclose(g, expected, rtol=1e-15, atol=0)
    assert (g <= 0).all()
    assert gate_beta(torch.tensor([-40.0])).item() < 1e-15
    assert torch.equal(l2_normalize(torch.zeros(2, 8)), torch.zeros(2, 8, dtype=F64))
    x = torch.tensor([[3.0, 4.0]])
    assert torch.allclose(l2_normalize(x), x.double() / math.sqrt(25 + 1e-6))
    assert value_to_key_head(8, 2).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(ValueError, match="multiple"):
        value_to_key_head(6, 4)


@pytest.mark.parametrize("regime", ["beta_zero", "no_decay", "strong_decay", "zero_rows"])
def test_degenerate_inputs_stay_finite(gen: torch.Generator, regime: str) -> None:
    B, H, HV, D, pool, T = 3, 1, 2, 16, 3, 8
    state, k_cache, u_cache, g_cache = _rings(gen, pool, H, HV, D)
    q, k, v, a, b, A_log, dt_bias = _inputs(gen, B, T, H, HV, D)
    if regime == "beta_zero":
        b = torch.full_like(b, -40.0)
    elif regime == "no_decay":
        A_log = torch.full_like(A_log, -40.0)
    elif regime == "strong_decay":
        A_log, a = torch.full_like(A_log, 5.0), a + 30.0  # g ~ -4500 per token
        g_cache = g_cache * 1e4
    else:
        q[:, ::2] = 0
        k[:, 1::2] = 0
    tokens = prepare_tokens(q, k, v, a, b, A_log, dt_bias)
    P = torch.tensor([16, 8, 0])
    # bases without wrap: the synthetic g rings decrease along physical rows, as real windows do
    base = torch.tensor([0, 3, 0])
    window = replay.gather_window(k_cache, u_cache, g_cache, torch.arange(B), base, P)
    closed = replay.verify_flush_closed_form(state, window, tokens, 9)
    plain = replay.verify_flush_token_by_token(state, window, tokens, 9)
    for t in (closed.y, closed.u, closed.state_hist):
        assert torch.isfinite(t).all()
    assert _rel(closed.y, plain.y) < 1e-10
    if regime == "beta_zero":
        assert closed.u.abs().max() < 1e-12  # u = 0: the state only decays
    if regime == "zero_rows":
        assert torch.equal(tokens.k_hat[:, 1::2], torch.zeros_like(tokens.k_hat[:, 1::2]))
        assert torch.equal(closed.y[:, ::2], torch.zeros_like(closed.y[:, ::2]))


def _contract_setup(gen: torch.Generator, T: int = 4, dtype: torch.dtype = F64):
    B, H, HV, D, pool = 5, 2, 4, 16, 8
    state, k_cache, u_cache, g_cache = _rings(gen, pool, H, HV, D)
    q, k, v, a, b, A_log, dt_bias = _inputs(gen, B, T, H, HV, D)
    kwargs = dict(
        q=q.to(dtype),
        k=k.to(dtype),
        v=v.to(dtype),
        b=b.to(dtype),
        initial_state_source=state.to(dtype),
        initial_state_indices=torch.tensor([3, -1, 0, 6, 5], dtype=torch.int32),
        k_cache=k_cache.to(dtype),
        u_cache=u_cache.to(dtype),
        g_cache=g_cache.float(),
        hist_len=torch.tensor([13, 0, 16, 4, 0], dtype=torch.int32),
        cache_base=torch.tensor([30, 0, 20, 31, 7], dtype=torch.int32),
        output=torch.full((B, T, HV, D), float("nan"), dtype=dtype),
        restart_hist_on_flush=False,
    )
    return (A_log, a.to(dtype), dt_bias), kwargs


def test_contract_read_write_sets(gen: torch.Generator) -> None:
    """Appends exactly at (base+P+s)&31; window, other rows, pad rows, unused slots, verify pools
    untouched; flush rows fold; g local on flush rows, absolute on verify rows."""
    args, kw = _contract_setup(gen)
    before = {
        name: kw[name].clone() for name in ("initial_state_source", "k_cache", "u_cache", "g_cache")
    }
    hist, base = kw["hist_len"].clone(), kw["cache_base"].clone()
    out = replay.gated_delta_rule_mtp_ucache_flush(*args, **kw)
    assert out is kw["output"]
    assert torch.isnan(out[1]).all()  # pad row: output untouched
    assert torch.isfinite(out[[0, 2, 3, 4]]).all()
    assert torch.equal(kw["hist_len"], hist) and torch.equal(kw["cache_base"], base)
    live = {3: 0, 0: 2, 6: 3, 5: 4}  # slot -> batch row
    for slot in range(8):
        for name in ("k_cache", "u_cache", "g_cache"):
            changed = (
                (before[name][slot] != kw[name][slot]).flatten(2).any(-1).any(0)
                if name != "g_cache"
                else (before[name][slot] != kw[name][slot]).any(0)
            )
            rows = set(changed.nonzero().flatten().tolist())
            if slot in live:
                row = live[slot]
                expected = {(int(base[row]) + int(hist[row]) + s) & 31 for s in range(4)}
                assert rows <= expected, (name, slot, rows, expected)
            else:
                assert not rows, (name, slot)
        pool_changed = not torch.equal(
            before["initial_state_source"][slot], kw["initial_state_source"][slot]
        )
        assert pool_changed == (slot in (3, 0)), slot  # rows 0 (P=13) and 2 (P=16) flush
    # g appends: local (gamma) on flush rows, G* + gamma on verify rows
    g_new = kw["g_cache"]
    flush_first = g_new[3, :, (30 + 13) & 31].double()
    verify_first = g_new[6, :, (31 + 4) & 31].double()
    G_star_verify = before["g_cache"][6, :, (31 + 3) & 31]
    A_log, a, dt_bias = args
    g0 = gate_log_decay(A_log, a[:, 0], dt_bias).float().double()  # [B, HV], token 0 per row
    assert torch.allclose(flush_first, g0[0].float().double(), rtol=1e-6)  # local on a flush row
    expected = (G_star_verify.double() + g0[3]).float().double()  # absolute on a verify row
    assert torch.allclose(verify_first, expected, rtol=1e-6)


def test_contract_restart_hist_on_flush_and_guards(gen: torch.Generator) -> None:
    args, kw = _contract_setup(gen)
    kw["restart_hist_on_flush"] = True
    replay.gated_delta_rule_mtp_ucache_flush(*args, **kw)
    assert kw["hist_len"].tolist() == [0, 0, 0, 4, 0]
    assert kw["cache_base"].tolist() == [(30 + 13) & 31, 0, (20 + 16) & 31, 31, 7]
    for change, message in (
        (
            dict(hist_len=torch.tensor([17, 0, 0, 0, 0], dtype=torch.int32)),
            "hist_len out of legal range",
        ),
        (
            dict(cache_base=torch.tensor([32, 0, 0, 0, 0], dtype=torch.int32)),
            "cache_base out of legal range",
        ),
        (dict(flush_min=14), "flush_min"),
        (dict(initial_state_indices=torch.tensor([3, 3, 0, 1, 2], dtype=torch.int32)), "unique"),
        (dict(restart_hist_on_flush=True, cache_base=None), "caller-owned cache_base"),
    ):
        _, fresh = _contract_setup(gen)
        fresh.update(change)
        with pytest.raises(ValueError, match=message):
            replay.gated_delta_rule_mtp_ucache_flush(*args, **fresh)
    _, fresh = _contract_setup(gen)
    with pytest.raises(NotImplementedError):
        replay.gated_delta_rule_mtp_ucache_flush(*args, **fresh, recovery_steps=1)
    with pytest.raises(ValueError, match="T=9"):
        _, nine = _contract_setup(gen, T=9)
        replay.gated_delta_rule_mtp_ucache_flush(*_contract_setup(gen, T=9)[0], **nine)


def test_contract_pad_rows_match_unpadded_run(gen: torch.Generator) -> None:
    args, kw = _contract_setup(gen, dtype=torch.bfloat16)
    keep = torch.tensor([0, 2, 3, 4])
    unpadded = {
        key: (
            value[keep]
            if key
            in ("q", "k", "v", "b", "initial_state_indices", "hist_len", "cache_base", "output")
            else value.clone()
            if isinstance(value, torch.Tensor)
            else value
        )
        for key, value in kw.items()
    }
    replay.gated_delta_rule_mtp_ucache_flush(args[0], args[1][keep], args[2], **unpadded)
    replay.gated_delta_rule_mtp_ucache_flush(*args, **kw)
    assert torch.equal(kw["output"][keep], unpadded["output"])
    for name in ("initial_state_source", "k_cache", "u_cache", "g_cache"):
        assert torch.equal(kw[name], unpadded[name]), name


def test_commit_cursors_and_cadence() -> None:
    hist = torch.tensor([12, 13, 16, 0, 5], dtype=torch.int32)
    base = torch.tensor([31, 30, 20, 0, 9], dtype=torch.int32)
    idx = torch.tensor([0, 1, 2, 3, -1], dtype=torch.int32)
    flushed = replay.commit_cursors(hist, base, torch.tensor([4, 1, 3, 2, 4]), 13, idx)
    assert flushed.tolist() == [False, True, True, False, False]
    assert hist.tolist() == [16, 1, 3, 2, 5]  # pad row untouched
    assert base.tolist() == [31, (30 + 13) & 31, (20 + 16) & 31, 0, 9]
    # kernel-spec 2.6 cadence table (T = 4, lazy flush_min 13): n -> steps per cycle
    for n, cycle in ((4, 4), (3, 5), (2, 7), (1, 13)):
        h, bs = torch.tensor([n], dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
        flush_steps = []
        for step in range(60):
            if bool(replay.commit_cursors(h, bs, torch.tensor([n]), 13)[0]):
                flush_steps.append(step)
            assert 0 <= int(h[0]) <= 16
        gaps = {b - a for a, b in zip(flush_steps, flush_steps[1:], strict=False)}
        assert gaps == {cycle}, (n, gaps)
