"""Multi-step conformance harness: drives one backend through many verify(+flush) steps.

The harness owns a float64 "true" recurrent state per request, which advances only by the accepted
tokens. Every step it:
  1. writes fresh random inputs into static buffers (same tensors every step, so CUDA graphs work),
     poisons the output with NaN and (on most steps) the stale ring rows with NaN or +-Inf;
  2. snapshots the watched pool slots (used slots plus unused ones) and block-stride padding;
  3. computes, in float64, the oracle's expectation from the backend's own pre-step state ("local")
     and the token-by-token truth from the true state;
  4. calls the backend with the exact kernel keyword contract and `restart_hist_on_flush=False`;
  5. checks (a) the T draft outputs against the truth and the local oracle; (b) after the caller
     commit, checkpoint + live window against the true state; (c) every ring row outside the
     append slots bit for bit (live window included), and the appended k/u/g rows by value;
     (d) verify rows leave the pool bit-identical, flush rows fold to S_hist; (e) pad rows and
     unused pool slots untouched (and block-stride padding); (f) is covered because the stale rows
     hold NaN/Inf while (a)-(e) are checked;
  6. commits the cursors (kernel-spec 2.6) and optionally recycles requests (len = base = 0).
Every step yields a StepReport with max and mean relative error per metric, so drift is visible.

Usage:
    handle = get_backend("flashinfer").load("serving")
    report = ConformanceHarness(handle, HarnessConfig(num_tokens=4, steps=100)).run()
    assert report.ok, report.failure_text()
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

from kernels.reference import replay
from kernels.reference.backends import KernelHandle
from kernels.reference.gating import TokenInputs, prepare_tokens
from kernels.reference.recurrence import recurrent_gated_delta_rule
from kernels.reference.tolerances import Tolerance, tolerance_for

GateRegime = Literal["mixed", "no_decay", "strong_decay", "beta_zero", "degenerate"]
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def fresh_seed() -> int:
    """GDN_TEST_SEED pins the seed; otherwise a fresh one from os.urandom (print it on failure)."""
    pinned = os.environ.get("GDN_TEST_SEED")
    if pinned:
        return int(pinned)
    return int.from_bytes(os.urandom(4), "little")


@dataclass
class HarnessConfig:
    """One multi-step scenario. Defaults: a small compact-layout GQA batch with random accepts."""

    num_requests: int = 6
    pad_rows: int = 0  # extra batch rows with state index -1 (they must write nothing)
    extra_pool_slots: int = 5  # pool slots no request uses (must stay untouched)
    num_k_heads: int = 2
    num_v_heads: int = 4
    head_dim: int = 128  # K == V
    num_tokens: int = 4  # T
    flush_min: int | None = None  # None: W_RING - T + 1
    steps: int = 40
    layout: Literal["compact", "vllm"] = (
        "compact"  # vllm: packed q/k/v rows, a/b views, strided pools
    )
    page_pad_elems: int = (
        0  # > 0: block-strided pools, dim-0 stride = dense + pad (padding checked)
    )
    page_stride_elems: int | None = (
        None  # explicit dim-0 stride for every pool (64-bit offsets case)
    )
    gates: GateRegime = "mixed"
    zero_qk_prob: float = 0.0  # probability that a q or k row is exactly zero
    initial_hist: list[int] | None = None  # P per request at step 0; default random in [0, 16]
    initial_base: list[int] | None = None  # base per request at step 0; default random in [0, 32)
    accepted: Literal["random", "all", "one"] | int = "random"
    shuffle_batch: bool = (
        True  # requests change batch position every step (cursors are request-keyed)
    )
    recycle_prob: float = 0.0  # per request per step: replaced by a new request (len = base = 0)
    poison_stale: bool = True  # stale ring rows hold NaN / +-Inf on two steps out of three
    misaligned_cursors: bool = False  # index/hist/base tensors start 4 bytes into their buffers
    cuda_graph: bool = False  # capture the call once (step 1) and replay it
    # > 0: each step only a random subset of at least this many requests runs, so the batch size
    # changes from step to step (one compiled kernel must serve every B); idle requests' slots must
    # stay untouched. Not with cuda_graph (static buffers).
    min_active: int = 0
    watch_unused: int = 4  # unused slots snapshotted when the pool is too large to watch entirely
    seed: int | None = None
    fail_fast: bool = True  # stop at the first failing step

    @property
    def batch(self) -> int:
        return self.num_requests + self.pad_rows

    def resolved_flush_min(self) -> int:
        fm = replay.default_flush_min(self.num_tokens) if self.flush_min is None else self.flush_min
        replay.check_flush_min(fm, self.num_tokens)
        return fm


@dataclass
class StepReport:
    step: int
    live_rows: int
    flush_rows: int
    wrap_rows: int  # rows whose window or appends cross physical row 31 -> 0
    errors: dict[str, tuple[float, float]]  # metric -> (max, mean) over blocks
    failures: list[str] = field(default_factory=list)


@dataclass
class RunReport:
    backend: str
    arm: str
    layout: str
    seed: int
    config: dict[str, Any]
    tolerance: dict[str, float]
    steps: list[StepReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(not s.failures for s in self.steps) and not self.drift_failures()

    def failures(self, limit: int = 10) -> list[str]:
        found = [f for s in self.steps for f in s.failures] + self.drift_failures()
        return found[:limit]

    def failure_text(self) -> str:
        head = (
            f"{self.backend}/{self.arm}/{self.layout} seed={self.seed} (GDN_TEST_SEED={self.seed})"
        )
        return head + "\n" + "\n".join(self.failures())

    def metric_series(self, name: str, which: int = 0) -> list[float]:
        """Per-step max (which=0) or mean (which=1) of one metric; NaN where not measured."""
        return [s.errors[name][which] if name in s.errors else math.nan for s in self.steps]

    def drift_failures(self) -> list[str]:
        """Long runs (>= 100 steps): the state error must not grow (protocol bugs accumulate)."""
        if len(self.steps) < 100:
            return []
        series = self.metric_series("state_true", 1)
        tenth = len(series) // 10
        early = _nanmean(series[tenth : 2 * tenth])
        late = _nanmean(series[-tenth:])
        growth = self.tolerance["drift_growth"]
        floor = self.tolerance["abs_floor"]
        if not late <= growth * max(early, floor):
            return [
                f"drift: mean state error of the last tenth {late:.3e} > {growth} x "
                f"second tenth's {early:.3e}"
            ]
        return []

    def summary(self) -> dict[str, Any]:
        metrics = sorted({name for s in self.steps for name in s.errors})
        out: dict[str, Any] = {
            "backend": self.backend,
            "arm": self.arm,
            "layout": self.layout,
            "seed": self.seed,
            "steps": len(self.steps),
            "flush_rows": sum(s.flush_rows for s in self.steps),
            "wrap_rows": sum(s.wrap_rows for s in self.steps),
            "ok": self.ok,
            "failures": self.failures(),
        }
        for name in metrics:
            maxima = [m for m in self.metric_series(name, 0) if not math.isnan(m)]
            means = [m for m in self.metric_series(name, 1) if not math.isnan(m)]
            out[f"{name}_max"] = max(maxima) if maxima else None
            out[f"{name}_mean"] = sum(means) / len(means) if means else None
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "config": self.config,
            "tolerance": self.tolerance,
            "per_step": [asdict(s) for s in self.steps],
        }


def _nanmean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def block_rel_error(
    x: torch.Tensor,
    ref: torch.Tensor,
    block_dims: tuple[int, ...],
    abs_floor: float,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """||x - ref|| / max(||ref||, scale, abs_floor * sqrt(numel)) per block (norms over block_dims).

    `scale` (one value per block) is the magnitude the rounding errors are proportional to, when
    that exceeds ||ref|| (see output_scale).

    NaN or Inf anywhere in a block gives NaN/Inf, which fails every `err <= tol` comparison.
    """
    x = x.double()
    ref = ref.double()
    numel = math.prod(ref.shape[d] for d in block_dims)
    diff = (x - ref).pow(2).sum(block_dims).sqrt()
    norm = ref.pow(2).sum(block_dims).sqrt()
    if scale is not None:
        norm = torch.maximum(norm, scale.to(norm))
    return diff / norm.clamp_min(abs_floor * math.sqrt(numel))


def output_scale(q_hat: torch.Tensor, state_norms: torch.Tensor) -> torch.Tensor:
    """Typical |y| of a (row, value head) block: sqrt(sum_t (|q_hat_t| |S_t|_F / sqrt(K))^2).

    y_t = S_t q_hat_t is a 128-term dot product per element, and a kernel rounds q_hat and S_t
    (kernel-spec 2.7), so its absolute error scales with |q_hat_t| |S_t|, not with |y_t|: when
    q_hat_t happens to be nearly orthogonal to the rows of S_t, |y_t| is small and a plain relative
    error would flag rounding. A protocol bug gives errors of the typical size |q_hat| |S| / sqrt(K)
    (what y is for a random direction), so it still stands out against this scale.
    q_hat: [B, T, HV, K]; state_norms: [B, T, HV] -> [B, HV].
    """
    per_token = torch.linalg.vector_norm(q_hat, dim=-1) * state_norms / math.sqrt(q_hat.shape[-1])
    return torch.linalg.vector_norm(per_token, dim=1)


def bits_differ(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Elementwise bit inequality (NaN == NaN when the bits match)."""
    kind = _BITS[before.element_size()]
    return before.view(kind) != after.view(kind)


class ConformanceHarness:
    """Drives `handle` through `config.steps` steps; see the module docstring for the checks."""

    def __init__(
        self, handle: KernelHandle, config: HarnessConfig, tolerance: Tolerance | None = None
    ) -> None:
        cfg = config
        if cfg.num_tokens not in handle.supported_t:
            raise ValueError(
                f"{handle.backend} supports T in {handle.supported_t}, not {cfg.num_tokens}"
            )
        if cfg.num_v_heads % cfg.num_k_heads:
            raise ValueError("num_v_heads must be a multiple of num_k_heads")
        self.handle = handle
        self.cfg = cfg
        self.tol = tolerance or tolerance_for(handle.arm.name)
        self.seed = cfg.seed if cfg.seed is not None else fresh_seed()
        self.gen = torch.Generator().manual_seed(self.seed)
        self.pad_gen = torch.Generator().manual_seed(self.seed ^ 0x5EED)
        if cfg.min_active and cfg.cuda_graph:
            raise ValueError("min_active (varying batch) cannot be combined with cuda_graph")
        self.device = torch.device(handle.device)
        self.flush_min = cfg.resolved_flush_min()
        self.step_index = 0
        self.graph: Any = None
        arm = handle.arm
        self.io, self.state_dtype, self.ring_dtype, self.g_dtype = (
            arm.io,
            arm.state,
            arm.ring,
            arm.g,
        )
        self.report = RunReport(
            backend=handle.backend,
            arm=arm.name,
            layout=cfg.layout,
            seed=self.seed,
            config={k: v for k, v in asdict(cfg).items()},
            tolerance=asdict(self.tol),
        )
        self._setup_pools()
        self._setup_buffers()
        self._setup_gates()
        self._setup_requests()

    # ------------------------------------------------------------------ setup
    def _randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale

    def _rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def _randint(self, low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.gen)

    def _alloc_pool(self, inner: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        cfg = self.cfg
        dense = math.prod(inner)
        inner_strides = tuple(math.prod(inner[i + 1 :]) for i in range(len(inner)))
        if cfg.page_stride_elems is not None:
            stride0 = cfg.page_stride_elems
            if stride0 < dense:
                raise ValueError(f"page_stride_elems {stride0} < dense page {dense}")
            flat = torch.empty(
                (self.pool_slots - 1) * stride0 + dense, dtype=dtype, device=self.device
            )
            return flat.as_strided((self.pool_slots, *inner), (stride0, *inner_strides))
        if cfg.page_pad_elems:
            backing = torch.empty(
                self.pool_slots, dense + cfg.page_pad_elems, dtype=dtype, device=self.device
            )
            # own generator: the main stream stays identical across layouts (layout equivalence)
            pad = torch.randn(self.pool_slots, cfg.page_pad_elems, generator=self.pad_gen)
            backing[:, dense:] = pad.to(dtype)
            self.paddings.append(backing[:, dense:])
            return backing[:, :dense].view(self.pool_slots, *inner)
        return torch.empty(self.pool_slots, *inner, dtype=dtype, device=self.device)

    def _setup_pools(self) -> None:
        cfg = self.cfg
        H, HV, D = cfg.num_k_heads, cfg.num_v_heads, cfg.head_dim
        huge = cfg.page_stride_elems is not None
        self.pool_slots = cfg.num_requests + cfg.extra_pool_slots
        self.paddings: list[torch.Tensor] = []
        self.pool = self._alloc_pool((HV, D, D), self.state_dtype)
        self.k_cache = self._alloc_pool((H, replay.RING_SLOTS, D), self.ring_dtype)
        self.u_cache = self._alloc_pool((HV, replay.RING_SLOTS, D), self.ring_dtype)
        self.g_cache = self._alloc_pool((HV, replay.RING_SLOTS), self.g_dtype)
        perm = torch.randperm(self.pool_slots, generator=self.gen)
        if huge:  # the highest slots: their offsets need 64-bit arithmetic
            slots = torch.arange(self.pool_slots - cfg.num_requests, self.pool_slots)[
                torch.randperm(cfg.num_requests, generator=self.gen)
            ]
        else:
            slots = perm[: cfg.num_requests].clone()
            if 0 not in slots.tolist():  # slot 0 (vLLM's null block) is a normal slot
                slots[int(self._randint(0, cfg.num_requests, (1,)))] = 0
        self.request_slot = slots.long()
        unused = sorted(set(range(self.pool_slots)) - set(slots.tolist()))
        if huge or self.pool_slots > 64:
            unused = unused[: cfg.watch_unused]
        self.watch = torch.tensor(sorted(slots.tolist() + unused), dtype=torch.long)
        self.unused_watched = torch.tensor(unused, dtype=torch.long)
        self.watch_pos = {int(s): i for i, s in enumerate(self.watch.tolist())}
        # realistic, never-zero content in every watched slot (request windows are rewritten later)
        for slot in self.watch.tolist():
            self.pool[slot] = self._randn(HV, D, D, scale=0.1).to(self.state_dtype)
            k_rows = torch.nn.functional.normalize(self._randn(H, replay.RING_SLOTS, D), dim=-1)
            self.k_cache[slot] = k_rows.to(self.ring_dtype)
            self.u_cache[slot] = self._randn(HV, replay.RING_SLOTS, D, scale=0.3).to(
                self.ring_dtype
            )
            g_rows = -torch.cumsum(self._rand(HV, replay.RING_SLOTS) * 0.3 + 0.003, dim=-1)
            self.g_cache[slot] = g_rows.to(self.g_dtype)

    def _setup_buffers(self, batch: int | None = None) -> None:
        cfg = self.cfg
        B = cfg.batch if batch is None else batch
        T, H, HV, D = cfg.num_tokens, cfg.num_k_heads, cfg.num_v_heads, cfg.head_dim
        self.buffer_batch = B
        dev, io = self.device, self.io
        if cfg.layout == "vllm":
            # q/k/v: last-dim slices of the packed conv output; a/b: b first, then a (stride 2*HV)
            self.qkv_packed = torch.empty(B, T, 2 * H * D + HV * D, dtype=io, device=dev)
            self.q = self.qkv_packed[..., : H * D].unflatten(-1, (H, D))
            self.k = self.qkv_packed[..., H * D : 2 * H * D].unflatten(-1, (H, D))
            self.v = self.qkv_packed[..., 2 * H * D :].unflatten(-1, (HV, D))
            self.ba = torch.empty(B * T, 2 * HV, dtype=io, device=dev)
            self.b = self.ba[:, :HV].view(B, T, HV)
            self.a = self.ba[:, HV:].view(B, T, HV)
        else:
            self.q = torch.empty(B, T, H, D, dtype=io, device=dev)
            self.k = torch.empty(B, T, H, D, dtype=io, device=dev)
            self.v = torch.empty(B, T, HV, D, dtype=io, device=dev)
            self.a = torch.empty(B, T, HV, dtype=io, device=dev)
            self.b = torch.empty(B, T, HV, dtype=io, device=dev)
        offset = 1 if cfg.misaligned_cursors else 0
        cursor_bufs = torch.zeros(3, B + offset, dtype=torch.int32, device=dev)
        self.indices, self.hist_len, self.cache_base = (row[offset:] for row in cursor_bufs)
        self.output = torch.empty(B, T, HV, D, dtype=io, device=dev)

    def _round_param(self, x: torch.Tensor) -> torch.Tensor:
        # Upstream's wrapper casts A_log and dt_bias to the IO dtype (kernel-spec 2.7, item 1):
        # that bf16 represents make the cast exact, so the truth uses what the kernel uses.
        return x.to(torch.bfloat16).to(self.io).float().to(self.device)

    def _setup_gates(self) -> None:
        HV = self.cfg.num_v_heads
        regimes = self._head_regimes()
        A_log = torch.empty(HV, dtype=torch.float64)
        for h, regime in enumerate(regimes):
            if regime == "no_decay":
                A_log[h] = -30.0  # exp(-30) ~ 1e-13: g ~ 0
            elif regime == "strong_decay":
                A_log[h] = 3.0  # with a ~ 8: g ~ -160 per token
            else:
                A_log[h] = -4.5 + 6.0 * float(self._rand(1))  # U(-4.5, 1.5): weak to strong decay
        self.head_regimes = regimes
        self.A_log = self._round_param(A_log)
        self.dt_bias = self._round_param(self._randn(HV, scale=0.5))
        self.scale = 1.0 / math.sqrt(self.cfg.head_dim)

    def _head_regimes(self) -> list[str]:
        HV, gates = self.cfg.num_v_heads, self.cfg.gates
        if gates == "degenerate":
            cycle = ["no_decay", "strong_decay", "beta_zero", "mixed"]
            return [cycle[h % 4] for h in range(HV)]
        return [gates] * HV

    def _random_tokens(self, rows: int, T: int) -> dict[str, torch.Tensor]:
        """IO-dtype inputs on the device: q, k [rows, T, H, K]; v; a, b [rows, T, HV]."""
        cfg = self.cfg
        H, HV, D = cfg.num_k_heads, cfg.num_v_heads, cfg.head_dim
        q, k = self._randn(rows, T, H, D), self._randn(rows, T, H, D)
        if cfg.zero_qk_prob > 0:
            q = q * (self._rand(rows, T, H, 1) >= cfg.zero_qk_prob)
            k = k * (self._rand(rows, T, H, 1) >= cfg.zero_qk_prob)
        v = self._randn(rows, T, HV, D)
        a = self._randn(rows, T, HV)
        b = self._randn(rows, T, HV, scale=1.5)
        for h, regime in enumerate(self.head_regimes):
            if regime == "strong_decay":
                a[..., h] += 8.0
            elif regime == "beta_zero":
                b[..., h] = -30.0  # sigmoid(-30) ~ 1e-13: u ~ 0, the state only decays
        out = {"q": q, "k": k, "v": v, "a": a, "b": b}
        # one host-to-device copy for all five (each copy from pageable memory is a host sync)
        flat = torch.cat([t.to(self.io).flatten() for t in out.values()]).to(self.device)
        pieces = flat.split([t.numel() for t in out.values()])
        return {
            name: piece.view(t.shape) for (name, t), piece in zip(out.items(), pieces, strict=True)
        }

    def _tokens(self, t: dict[str, torch.Tensor]) -> TokenInputs:
        return prepare_tokens(
            t["q"], t["k"], t["v"], t["a"], t["b"], self.A_log, self.dt_bias, self.scale
        )

    def _setup_requests(self) -> None:
        """Per request: a checkpoint, a live window written by a real recurrence, the true state."""
        cfg = self.cfg
        R = cfg.num_requests
        hist = cfg.initial_hist or self._randint(0, replay.W_RING + 1, (R,)).tolist()
        base = cfg.initial_base or self._randint(0, replay.RING_SLOTS, (R,)).tolist()
        if len(hist) != R or len(base) != R:
            raise ValueError("initial_hist and initial_base need one entry per request")
        self.req_hist = [int(p) for p in hist]
        self.req_base = [int(x) for x in base]
        HV, D = cfg.num_v_heads, cfg.head_dim
        self.true_state = torch.empty(R, HV, D, D, dtype=torch.float64, device=self.device)
        for r in range(R):
            self._prefill(r, self.req_hist[r], self.req_base[r])

    def _prefill(self, r: int, length: int, base: int) -> None:
        slot = int(self.request_slot[r])
        checkpoint = self.pool[slot].double().unsqueeze(0)
        if length == 0:
            self.true_state[r] = checkpoint[0]
            return
        raw = self._random_tokens(1, length)
        tokens = self._tokens(raw)
        rec = recurrent_gated_delta_rule(checkpoint, tokens)
        g_rows = tokens.g[0] if self.handle.g_ring_format == "per_token" else tokens.g[0].cumsum(0)
        for j in range(length):
            row = (base + j) & replay.RING_MASK
            self.k_cache[slot, :, row] = tokens.k_hat_key[0, j].to(self.ring_dtype)
            self.u_cache[slot, :, row] = rec.u[0, j].to(self.ring_dtype)
            self.g_cache[slot, :, row] = g_rows[j].to(self.g_dtype)
        self.true_state[r] = rec.final_state[0]

    # ------------------------------------------------------------------ one step
    def _gather(self) -> dict[str, torch.Tensor]:
        w = self.watch.to(self.device)
        return {
            "pool": self.pool[w],
            "k": self.k_cache[w],
            "u": self.u_cache[w],
            "g": self.g_cache[w],
        }

    def _poison_stale(self, slots: torch.Tensor, stale: torch.Tensor) -> None:
        """Ring rows outside the live windows get NaN (step % 3 == 0) or +-Inf (== 1).

        slots: [L] device long; stale: [L, 32] device bool (rows outside [base, base + P)).
        """
        mode = self.step_index % 3
        if not self.cfg.poison_stale or mode == 2:
            return
        value = float("nan") if mode == 0 else float("inf") * (1 if self.step_index % 2 else -1)
        for ring, mask in (
            (self.k_cache, stale[:, None, :, None]),
            (self.u_cache, stale[:, None, :, None]),
            (self.g_cache, stale[:, None, :]),
        ):
            ring[slots] = torch.where(mask, torch.full_like(ring[slots], value), ring[slots])

    def _call_backend(self) -> torch.Tensor:
        def call() -> torch.Tensor:
            return self.handle.fn(
                self.A_log,
                self.a,
                self.dt_bias,
                q=self.q,
                k=self.k,
                v=self.v,
                b=self.b,
                initial_state_source=self.pool,
                initial_state_indices=self.indices,
                scale=self.scale,
                output=self.output,
                k_cache=self.k_cache,
                u_cache=self.u_cache,
                g_cache=self.g_cache,
                hist_len=self.hist_len,
                cache_base=self.cache_base,
                flush_min=self.flush_min,
                restart_hist_on_flush=False,
            )

        if not self.cfg.cuda_graph or self.step_index == 0:
            return call()
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.graph_result = call()
        self.graph.replay()
        return self.graph_result

    def step(self) -> StepReport:
        """One step; device work is queued and read back once, so a step costs few host syncs."""
        cfg, tol = self.cfg, self.tol
        B, T, R = cfg.batch, cfg.num_tokens, cfg.num_requests
        dev, fm = self.device, self.flush_min
        # ---- host-side plan: batch layout, cursors, accepted counts, expected commit
        order = torch.randperm(R, generator=self.gen) if cfg.shuffle_batch else torch.arange(R)
        if cfg.min_active:
            active = int(self._randint(min(cfg.min_active, R), R + 1, (1,)))
            order = order[:active]
            B = active + cfg.pad_rows
        if B != self.buffer_batch:
            self._setup_buffers(B)
        pads = set(torch.randperm(B, generator=self.gen)[: cfg.pad_rows].tolist())
        row_req = [-1] * B
        free_rows = [i for i in range(B) if i not in pads]
        for i, r in zip(free_rows, order.tolist(), strict=True):
            row_req[i] = r
        live_rows = [i for i in range(B) if row_req[i] >= 0]
        pad_rows = [i for i in range(B) if row_req[i] < 0]
        L = len(live_rows)
        reqs = [row_req[i] for i in live_rows]
        slots = [int(self.request_slot[r]) for r in reqs]
        hists = [self.req_hist[r] for r in reqs]
        bases = [self.req_base[r] for r in reqs]
        if cfg.accepted == "random":
            accepted = self._randint(1, T + 1, (L,))
        elif cfg.accepted == "all":
            accepted = torch.full((L,), T)
        elif cfg.accepted == "one":
            accepted = torch.ones(L, dtype=torch.long)
        else:
            accepted = torch.full((L,), int(cfg.accepted))
        flush_host = [p >= fm for p in hists]
        new_hist = [
            n if f else p + n for p, n, f in zip(hists, accepted.tolist(), flush_host, strict=True)
        ]
        new_base = [
            (bs + p) & replay.RING_MASK if f else bs
            for bs, p, f in zip(bases, hists, flush_host, strict=True)
        ]
        idx_row = [-1] * B
        hist_row, base_row, n_row = [0] * B, [0] * B, [0] * B
        for j, i in enumerate(live_rows):
            idx_row[i], hist_row[i], base_row[i] = slots[j], hists[j], bases[j]
            n_row[i] = int(accepted[j])
        stale = [
            [((r - bs) & replay.RING_MASK) >= p for r in range(replay.RING_SLOTS)]
            for bs, p in zip(bases, hists, strict=True)
        ]
        flush_idx = [j for j in range(L) if flush_host[j]]
        verify_idx = [j for j in range(L) if not flush_host[j]]
        # one host-to-device transfer for all the integer metadata
        ints = [
            idx_row,
            hist_row,
            base_row,
            n_row,  # [B] each
            [self.watch_pos[s] for s in slots],
            slots,
            hists,
            bases,
            live_rows,
            reqs,  # [L]
            new_hist,
            new_base,  # [L]
        ]
        packed = torch.tensor([x for row in ints for x in row], dtype=torch.long)
        sizes = [len(row) for row in ints]
        (idx_d, hist_d, base_d, n_d, pos, slots_d, P, base, live, req_t, P_new, base_new) = (
            packed.to(dev).split(sizes)
        )
        extra = [int(x) for row in stale for x in row]
        host_sets = [
            flush_idx,
            verify_idx,
            pad_rows,
            [self.watch_pos[int(s)] for s in self.unused_watched],
        ]
        set_sizes = [len(x) for x in host_sets]
        small = torch.tensor([x for row in host_sets for x in row] + extra, dtype=torch.long).to(
            dev
        )
        flush_j, verify_j, pad_d, unused_pos, stale_flat = small.split([*set_sizes, len(extra)])
        stale_d = stale_flat.bool().view(L, replay.RING_SLOTS)
        self.indices.copy_(idx_d)
        self.hist_len.copy_(hist_d)
        self.cache_base.copy_(base_d)
        raw = self._random_tokens(B, T)
        for name in ("q", "k", "v", "a", "b"):
            getattr(self, name).copy_(raw[name])
        self.output.fill_(float("nan"))
        self._poison_stale(slots_d, stale_d)

        # ---- expectations: local oracle from the pre-step state, truth from the true state
        before = self._gather()
        paddings_before = [p.clone() for p in self.paddings]
        tokens = self._tokens(raw).select_rows(live)
        fmt = self.handle.g_ring_format
        window = replay.gather_window(before["k"], before["u"], before["g"], pos, base, P, fmt)
        local = replay.verify_flush_closed_form(before["pool"][pos], window, tokens, fm, fmt)
        truth = recurrent_gated_delta_rule(self.true_state[req_t], tokens, accepted)

        y_all = self._call_backend()
        after = self._gather()

        # ---- checks, queued on the device
        metrics: dict[str, tuple[torch.Tensor, float, str]] = {}
        flags: dict[str, torch.Tensor] = {}
        floor = tol.abs_floor
        y_live = y_all[live]
        y_scale = output_scale(tokens.q_hat, truth.state_norms)
        metrics["y_true"] = (
            block_rel_error(y_live, truth.y, (1, 3), floor, y_scale),
            tol.y_true_rel,
            "y vs truth",
        )
        metrics["y_local"] = (
            block_rel_error(y_live, local.y, (1, 3), floor, y_scale),
            tol.y_local_rel,
            "y vs oracle",
        )
        # (c) ring rows: only the append slots of live rows may change
        appends = replay.append_slots(base, P, T)  # [L, T]
        allowed = torch.zeros(len(self.watch), replay.RING_SLOTS, dtype=torch.bool, device=dev)
        allowed[pos[:, None], appends] = True
        ring_bad: dict[str, torch.Tensor] = {}
        for name in ("k", "u", "g"):
            changed = bits_differ(before[name], after[name])  # [W, heads, 32(, D)]
            changed = changed.any(dim=3).any(dim=1) if name != "g" else changed.any(dim=1)
            ring_bad[name] = changed & ~allowed
            flags[f"ring_{name}_outside_appends"] = ring_bad[name].any()
        k_app = after["k"][pos[:, None], :, appends]  # [L, T, H, K]
        u_app = after["u"][pos[:, None], :, appends]  # [L, T, HV, V]
        g_app = after["g"][pos[:, None], :, appends]  # [L, T, HV]
        metrics["k_append"] = (
            block_rel_error(k_app, local.k_append, (1, 3), floor),
            tol.k_rel,
            "k ring",
        )
        metrics["u_append"] = (block_rel_error(u_app, local.u, (1, 3), floor), tol.u_rel, "u ring")
        g_err = (g_app.double() - local.g_append).abs() - tol.g_rtol * local.g_append.abs()
        metrics["g_append_excess"] = (g_err.amax(dim=1), tol.g_atol, "g ring: |err| - rtol|ref|")
        # (d) pool: verify rows bit-identical, flush rows folded
        pool_changed = bits_differ(before["pool"], after["pool"]).flatten(1).any(dim=1)
        flags["verify_row_wrote_checkpoint"] = pool_changed[pos[verify_j]].any()
        may_fold = torch.zeros(len(self.watch), dtype=torch.bool, device=dev)
        may_fold[pos[flush_j]] = True
        flags["checkpoint_written_outside_flush_rows"] = (pool_changed & ~may_fold).any()
        if flush_idx:
            folded = after["pool"][pos[flush_j]]
            fold_err = block_rel_error(folded, local.state_hist[flush_j], (2, 3), floor)
            metrics["fold"] = (fold_err, tol.fold_rel, "flushed checkpoint vs S_hist")
        # (e) unused slots, pad rows, block-stride padding
        if unused_pos.numel():
            touched = pool_changed[unused_pos].any()
            for name in ("k", "u", "g"):
                touched |= bits_differ(before[name][unused_pos], after[name][unused_pos]).any()
            flags["unused_slot_written"] = touched
        if pad_rows:
            pad_out = self.output[pad_d]
            untouched = torch.isnan(pad_out).all()
            if self.handle.pad_output_policy == "untouched_or_zero":
                untouched |= (pad_out == 0).all()
            flags["pad_rows_wrote_output"] = ~untouched
        for i, (pb, pa) in enumerate(zip(paddings_before, self.paddings, strict=True)):
            flags[f"block_stride_padding_{i}_written"] = bits_differ(pb, pa).any()

        # ---- caller commit (kernel-spec 2.6) on the device buffers; the host plan must agree
        replay.commit_cursors(self.hist_len, self.cache_base, n_d, fm, self.indices)
        flags["commit_disagrees_with_plan"] = (self.hist_len[live] != P_new).any() | (
            self.cache_base[live] != base_new
        ).any()
        assert truth.accepted_state is not None
        self.true_state[req_t] = truth.accepted_state
        # (b) checkpoint + committed window vs truth
        win_new = replay.gather_window(
            after["k"], after["u"], after["g"], pos, base_new, P_new, fmt
        )
        rebuilt = replay.reconstruct_state(after["pool"][pos], win_new)
        metrics["state_true"] = (
            block_rel_error(rebuilt, truth.accepted_state, (2, 3), floor),
            tol.state_true_rel,
            "checkpoint + window vs truth",
        )

        # ---- one device-to-host transfer of every number and flag
        names = list(metrics)
        numbers = torch.stack(
            [torch.stack([m[0].max(), m[0].mean()]).double() for m in metrics.values()]
            + [torch.stack([f.double(), f.double()]) for f in flags.values()]
        ).cpu()
        errors: dict[str, tuple[float, float]] = {}
        failures: list[str] = []
        ctx = _RowContext(reqs, slots, hists, bases, flush_host)
        for i, name in enumerate(names):
            worst, mean = float(numbers[i, 0]), float(numbers[i, 1])
            errors[name] = (worst, mean)
            err, bound, what = metrics[name]
            if not worst <= bound:
                flat = torch.nan_to_num(err.reshape(err.shape[0], -1), nan=math.inf)
                bad = int(flat.max(dim=1).values.argmax())
                head = int(flat[bad].argmax())
                failures.append(
                    f"step {self.step_index}: {name} max {worst:.3e} > {bound:.1e} ({what}); "
                    f"worst {ctx.describe(bad)} head {head}"
                )
        for i, name in enumerate(flags, start=len(names)):
            if float(numbers[i, 0]):
                if name.startswith("ring_"):
                    ring = name.split("_")[1]
                    failures.append(
                        self._describe_ring_violation(ring, ring_bad[ring], pos, P, base)
                    )
                else:
                    failures.append(f"step {self.step_index}: {name.replace('_', ' ')}")
        for r, p, bs in zip(reqs, new_hist, new_base, strict=True):
            self.req_hist[r], self.req_base[r] = p, bs

        self._recycle()
        wraps = sum(
            1 for p, bs in zip(hists, bases, strict=True) if bs + p + T - 1 >= replay.RING_SLOTS
        )
        report = StepReport(
            step=self.step_index,
            live_rows=L,
            flush_rows=len(flush_idx),
            wrap_rows=wraps,
            errors=errors,
            failures=failures,
        )
        self.report.steps.append(report)
        self.step_index += 1
        return report

    def _recycle(self) -> None:
        cfg = self.cfg
        if cfg.recycle_prob <= 0:
            return
        HV, D = cfg.num_v_heads, cfg.head_dim
        for r in range(cfg.num_requests):
            if float(self._rand(1)) < cfg.recycle_prob:
                slot = int(self.request_slot[r])
                self.pool[slot] = self._randn(HV, D, D, scale=0.1).to(self.state_dtype)
                self.true_state[r] = self.pool[slot].double()
                self.req_hist[r], self.req_base[r] = 0, 0  # rings keep stale rows: never read

    def _describe_ring_violation(
        self, name: str, bad: torch.Tensor, pos: torch.Tensor, P: torch.Tensor, base: torch.Tensor
    ) -> str:
        w_idx, row = (int(x) for x in bad.nonzero()[0])
        slot = int(self.watch[w_idx])
        where = "unused slot"
        matches = (pos == w_idx).nonzero()
        if matches.numel():
            i = int(matches[0])
            logical = (row - int(base[i])) & replay.RING_MASK
            where = f"slot of live row (P={int(P[i])}, base={int(base[i])}, logical row {logical})"
        count = int(bad.sum())
        return (
            f"step {self.step_index}: {name} ring changed outside the append slots: "
            f"slot {slot} physical row {row}, {where}; {count} (slot,row) pairs in all"
        )

    def run(self, steps: int | None = None) -> RunReport:
        for _ in range(self.cfg.steps if steps is None else steps):
            report = self.step()
            if report.failures and self.cfg.fail_fast:
                break
        return self.report

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The backend-visible state (for eager-vs-graph and layout-equivalence comparisons)."""
        return {"pool": self.pool, "k": self.k_cache, "u": self.u_cache, "g": self.g_cache}


@dataclass
class _RowContext:
    reqs: list[int]
    slots: list[int]
    hists: list[int]
    bases: list[int]
    flush: list[bool]

    def describe(self, i: int) -> str:
        kind = "flush" if self.flush[i] else "verify"
        return (
            f"request {self.reqs[i]} (slot {self.slots[i]}, P={self.hists[i]}, "
            f"base={self.bases[i]}, {kind})"
        )
