"""The harness must catch protocol bugs: each mutant below breaks one rule of kernel-spec 1.7/2.x
and must be reported as a failure within a few steps (rounding-sized errors must not be)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from kernels.reference import replay
from kernels.reference.arms import ARMS
from kernels.reference.backends import KernelHandle
from kernels.reference.gating import prepare_tokens
from kernels.reference.harness import ConformanceHarness, HarnessConfig, fresh_seed
from kernels.reference.recurrence import recurrent_gated_delta_rule


def _mutant(bug: str) -> Callable[..., torch.Tensor]:
    """The oracle's contract function with one deliberate bug (compact layout, T <= 8)."""

    def fn(A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor, **kw: Any) -> torch.Tensor:
        q, k, v, b = kw["q"], kw["k"], kw["v"], kw["b"]
        pool, k_cache, u_cache, g_cache = (
            kw["initial_state_source"],
            kw["k_cache"],
            kw["u_cache"],
            kw["g_cache"],
        )
        idx, hist, base, out = (
            kw["initial_state_indices"],
            kw["hist_len"],
            kw["cache_base"],
            kw["output"],
        )
        T = q.shape[1]
        fm = kw["flush_min"]
        if bug == "cursors_of_wrong_row":
            hist, base = hist.roll(1), base.roll(1)
        live = (idx >= 0).nonzero()[:, 0]
        slots, P, bs = idx[live].long(), hist[live].long(), base[live].long()
        tokens = prepare_tokens(
            q[live], k[live], v[live], a[live], b[live], A_log, dt_bias, kw["scale"]
        )
        window = replay.gather_window(k_cache, u_cache, g_cache, slots, bs, P)
        if bug == "reads_stale_rows":
            window = replay.gather_window(
                k_cache, u_cache, g_cache, slots, bs, torch.full_like(P, 16)
            )
            window.hist_len = P
        res = replay.verify_flush_closed_form(pool[slots].double(), window, tokens, fm)
        y, u, g_app, flush = res.y, res.u, res.g_append, res.flush
        if bug == "absolute_g_on_flush":
            g_app = torch.where(flush[:, None, None], g_app + window.g_star()[:, None], g_app)
        if bug == "local_g_on_verify":
            g_app = torch.cumsum(tokens.g, dim=1)
        if bug == "scale_ignored":
            y = y * q.shape[-1] ** 0.5
        out[live] = y.to(out.dtype)
        if bug == "pad_rows_write_output":
            out[(idx < 0).nonzero()[:, 0]] = 0
        appends = replay.append_slots(
            bs, P if bug != "append_ignores_P" else torch.zeros_like(P), T
        )
        for s in range(T):
            k_cache[slots, :, appends[:, s]] = res.k_append[:, s].to(k_cache.dtype)
            u_cache[slots, :, appends[:, s]] = u[:, s].to(u_cache.dtype)
            g_cache[slots, :, appends[:, s]] = g_app[:, s].to(g_cache.dtype)
        if bug == "clears_window_on_flush":
            for i in flush.nonzero()[:, 0].tolist():
                rows = replay.window_slots(bs[i : i + 1])[0, : int(P[i])]
                u_cache[slots[i]][:, rows] = 0
        folded = res.state_hist
        if bug == "fold_includes_drafts":
            folded = recurrent_gated_delta_rule(res.state_hist, tokens).final_state
        target = flush if bug != "verify_rows_fold" else torch.ones_like(flush)
        if bug != "no_fold" and bool(target.any()):
            pool[slots[target]] = folded[target].to(pool.dtype)
        if bug == "writes_unused_slot":
            pool[pool.shape[0] - 1] += 1
        return out

    return fn


BUGS = [
    "no_fold",
    "absolute_g_on_flush",
    "local_g_on_verify",
    "append_ignores_P",
    "pad_rows_write_output",
    "reads_stale_rows",
    "clears_window_on_flush",
    "fold_includes_drafts",
    "verify_rows_fold",
    "cursors_of_wrong_row",
    "scale_ignored",
    "writes_unused_slot",
]


@pytest.mark.parametrize("arm", ["f64", "serving"])
@pytest.mark.parametrize("bug", BUGS)
def test_harness_reports_bug(bug: str, arm: str) -> None:
    handle = KernelHandle(
        backend=f"mutant:{bug}",
        arm=ARMS[arm],
        layout="compact",
        fn=_mutant(bug),
        device="cpu",
        supported_t=(4, 8),
    )
    config = HarnessConfig(
        num_requests=5,
        pad_rows=2,
        extra_pool_slots=3,
        num_k_heads=1,
        num_v_heads=2,
        head_dim=16,
        num_tokens=4,
        steps=30,
        seed=fresh_seed(),
    )
    report = ConformanceHarness(handle, config).run()
    assert not report.ok, f"{bug} went unnoticed (seed {report.seed})"


def test_correct_mutant_baseline_passes() -> None:
    """The mutant scaffold without a bug must pass: failures above come from the bugs."""
    handle = KernelHandle(
        backend="mutant:none",
        arm=ARMS["serving"],
        layout="compact",
        fn=_mutant("none"),
        device="cpu",
        supported_t=(4, 8),
    )
    config = HarnessConfig(
        num_requests=5,
        pad_rows=2,
        num_k_heads=1,
        num_v_heads=2,
        head_dim=16,
        steps=30,
        seed=fresh_seed(),
    )
    report = ConformanceHarness(handle, config).run()
    assert report.ok, report.failure_text()
