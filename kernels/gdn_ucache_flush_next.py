"""Fused GDN ReplaySSM "ucache" verify + flush kernel (CuTe-DSL), a drop-in for flashinfer's (v12e).

gdn-ucache's own implementation of the ``gated_delta_rule_mtp_ucache_flush`` contract
(``/work/shared/research/kernel-spec.md`` section 1) for nvidia-cutlass-dsl 4.8.0. vLLM loads this
file by path through ``VLLM_GDN_UCACHE_MODULE``; it imports nothing from the project.

Tensor contract (B = rows incl. pad rows, T = draft window 2..8, H key heads, HV value heads,
K = V = 128; IO / ST / RING = dtypes chosen at import, see the module constants):

| tensor                | shape                | dtype | layout accepted               | access    |
|-----------------------|----------------------|-------|-------------------------------|-----------|
| q, k                  | [B, T, H, 128]       | IO    | any B/T strides; head st. 128 | read      |
| v                     | [B, T, HV, 128]      | IO    | same                          | read      |
| a, b                  | [B, T, HV]           | IO    | any B/T strides; head st. 1   | read      |
| A_log, dt_bias        | [HV]                 | float | read in fp32                  | read      |
| initial_state_source  | [pool, HV, 128, 128] | ST    | inner dense; dim 0 % 8 == 0   | r; w flush|
| k_cache               | [pool, H, 32, 128]   | RING  | inner dense; dim 0 % 8 == 0   | r; append |
| u_cache               | [pool, HV, 32, 128]  | RING  | inner dense; dim 0 % 8 == 0   | r; append |
| g_cache               | [pool, HV, 32]       | fp32  | inner dense; dim 0 any        | r; append |
| initial_state_indices | [B]                  | int32 | < 0: pad row                  | read      |
| hist_len, cache_base  | [B]                  | int32 | request-keyed                 | read (*)  |
| output                | [B, T, HV, 128]      | IO    | in place if head stride 128   | written   |

(*) the host commits them after the launch when restart_hist_on_flush=True. Pad rows write nothing
(not even their output rows).

Design (kernels/NOTES.md has the numbers): grid (128 / BV, HV, B), 128 threads. Every per-value-row
quantity depends on the state only through its own row, so a CTA owns BV rows of one (request,
value head) tile and recomputes the tiny key-side quantities (norms, Gram, window scores). Small
batches get 128 / BV times more CTAs; large batches make one pass over the state.
- State projection [S0 rows] x [k^; q^]^T with mma.sync m16n8k16 (fp32 accumulate). How the state
  reaches the MMA is the launch knob `late` (LATE_MODES; launch_config's table picks it):
  small batches (late 0-3) load each thread's state slice into registers with 16-byte loads, in an
  order that *is* its MMA A-fragment order (the K-permutation is applied identically to the B
  operand); from B=32 on (late 10 and 13) each warp's 16-row state tile (4 KB contiguous in the
  pool) goes into one reused 16 KB shared stage by two 2 KB bulk async copies on the warp's
  mbarrier, issued at entry so the state is in flight during the prologue, with the MMA rows
  permuted (row m <- tile row (m % 2) * 8 + m // 2) so that every 16-byte fragment read is free
  of bank conflicts. [k^; q^] is split into hi + lo 16-bit parts (two MMAs): the product is ~fp32
  accurate although the MMA takes 16-bit operands. late13 writes those x fragments in the
  prologue and the Gram reads its A rows from them (no fp32 [k; q] tile: 36.4 KB per CTA).
- Window scores kc_j . x and the Gram [k^; q^] . k^ with mma.sync on two warps (same split).
- Flush fold (w o U_win)[rows, 16] x KC[16, 128] with mma.sync, accumulator initialised with
  e^{G*} S0 from the projection's operand (registers or the stage), then written back once
  with 16-byte stores (optionally with stochastic rounding).
- One row per CTA (the default, non-persistent): the cursor-independent loads (q/k rows as 16-byte
  vectors, the v slice, the gates) are issued before the cursors return, and the ring windows and
  the g row go to shared memory by cp.async right after them, so a CTA waits for two dependent
  DRAM trips (cursors, then state + windows), not one per phase. The L2 norms reduce in registers
  over the 16 lanes of a [k; q] row.
- Epilogue on mma.sync, in the projection's accumulator layout: the history term U_win^T SW
  (A = the u window by ldmatrix.trans from padded rows), then the solve U = R M^T with
  M = (I + A)^-1 diag(beta) formed once per CTA, and the outputs O = e^gamma HX_q + U C^T; fp32
  operands enter as hi + lo pairs. (Folding both into one product [U | O] = [0 | e^gamma HX_q] +
  R [M; C M]^T shortens the dependent MMA chain but measured 2-8 % slower on the H200 in one
  process: results/kernel/k7, kernels/NOTES.md.) u-ring appends and outputs are predicated
  16-bit stores from the same accumulators. g and k rings are appended by one CTA per value head /
  key head.
- Ring windows stay in their 16-bit dtype in shared memory (~28 KB per CTA at BV=128, T=4). In
  the register modes registers bound the CTAs per SM (launch bounds in the table); the bulk modes
  ask for the 228 KiB carve-out (the kernel op's cu_attrs) and shared memory bounds them: 227 KiB
  usable, 1 KiB reserved per CTA, so late10 (44.4 KB) runs 5 CTAs/SM and late13 (36.4 KB) 6.
- Persistent mode (launch_config: nprog < B programs along the batch): each CTA walks rows z0,
  z0 + nprog, ...; the next row's cursors and first state tiles are loaded during the current row
  and (prefetch 1/2) its ring windows, q/k/v rows and gates go into a second shared-memory buffer
  by cp.async, so a row's work starts with its data on chip. With late13 (chain, BV=128) each
  row instead runs the one-row prologue at its start and the next row's first state tile is
  copied into the stage right after this row's last read of it, so that copy flies during this
  row's epilogue (same shared memory: 6 CTAs/SM; the launch bound = the CTAs per SM).

Deliberate differences from flashinfer 0.7.2.post1 (same contract otherwise):
- every T in 2..8 (num_speculative_tokens 1..7) runs natively, not only {4, 8};
- q/k/v, a/b and all pools may be strided / block-strided with *any* batch size: strides are
  arguments, so one cubin serves every B and pool (flashinfer compiles one per launch-row count
  and pool geometry in that mode);
  the strided-layout assumptions flashinfer leaves unchecked (head stride, unit element stride) are
  checked here;
- A_log and dt_bias are read in fp32 (no rounding to the IO dtype);
- [k^; q^] enters every MMA as hi + lo parts and the solve is fp32 (more accurate than
  flashinfer's 16-bit Tmat/QT/R); softplus uses a stable form (no overflow);
- optional stochastic rounding of the folded checkpoint (GDN_UCACHE_STATE_SR=1, off by default).

Instructions: mma.sync, ldmatrix, ld/st.global (16-byte vectors), cp.async, cp.async.bulk with
mbarrier (sm_90+), shfl, exit; no wgmma/tcgen05 and no TMA tensor maps, so the same code compiles
for sm_90a and sm_100a. Tested on: SM90 (H200: conformance and timing against flashinfer,
2026-12-05, results/kernel/v10-k6; v12's table from H200 sweeps of 2026-12-06,
results/kernel/s21-h200; v12b's B >= 8 changes from an H100's sweeps, and the conformance of
every table entry on an H100, 2026-12-06, results/kernel/v12-k6, results/kernel/v12b-k6; v12c
likewise, results/kernel/v12c-k6; v12d: conformance of every table entry and candidate, its table
and its grid in three processes per arm on an H200, 2026-12-06, results/kernel/v12d-k6).
Launch tables: _TUNED_T4 (chosen on the H200; every card not named H100 / H800) and
_TUNED_T4_H100 (v12c's, chosen on an H100; H100 / H800), GDN_UCACHE_TABLE=h200|h100 forcing one
(results/kernel/table-h100).
SM100 (B200) is compile-checked only (CI builds sm_100a).

Versions (kernels/NOTES.md has every measurement): v5b (registers only; shipped in sessions 6-11)
is this file's late 0-3; v10 (session 12) adds the bulk-copy modes: late10 at B=32..127 and
late13 at B >= 128 (results/kernel/k14), and its table (session 16, results/kernel/v10-k6) turns
on the load-order knobs where they won: actfirst at B = 1..7 (and HV=32 B = 8..31), t1early + t1l2
at B >= 128 (+ wvearly at HV 32/64), t1early at HV=48 B = 32..127. Since v10 shipped, this file
(next) adds two knobs, off by default: dsreg (late13 at 7 CTAs/SM) and nobar (results/kernel/k16:
conformance passed; timed on an H100 only, where they gain nothing), and (session 17) late13 with
persistent CTAs (chain; candidates bv128+late13+persist6/7; measured in sessions 18-19: correct,
slower), and (session 19) tepi: each tile's epilogue right after its projection, while the warp's
next tile is in flight (correct; 1-2 % slower on an H100 once measured cleanly in session 20).
Session 20 added afe (the affine epilogue), ostage (16-byte u / output rows) and stef (the state
stream evict-first in L2); session 21 added tproj (the projection transposed: 11.6 % fewer
instructions, flashinfer's count). All four are correct and off by default; on an H100 they are
within 1.5 % of the table (kernels/NOTES.md "Session 20", "Session 21"). v12 (session 22) is
this file with ostage on at B >= 128 and 64 rows per CTA (bv64) at B = 1 for HV 48 / 64
(results/kernel/v12-k6). v12b (session 23) takes afe (with late10 + t1early) at B = 32 for every
HV and at HV=48 B >= 128, t1early at HV=48 B = 8 and actfirst at HV=64 B = 8, from an H100's k6
sweep (results/kernel/v12b-k6: 83 / 90 grid points at or below flashinfer there, v12 79). v12c
(session 24) adds ostage (16-byte u / output rows) to those late10 + t1early + afe entries but
HV=64's, from a second H100's k6 sweep (results/kernel/v12c-k6: geometric mean of ours / fi 0.886,
v12b 0.891; 81 / 90 points at or below flashinfer, the losses verify-only and within 3.2 %). v12d
(session 25) is v12c's table re-chosen on an H200 by the same rule: late13 + t1early + t1l2 +
wvearly + ostage at HV=48 B >= 128 and HV=64 B = 32, late13 + t1early + t1l2 + wvearly at HV=32
B = 8 (results/kernel/v12d-k6: 70 / 90 points at or below flashinfer on the H200, median of three
processes; every loss is verify-only at B >= 32, or 20 % flush at B = 32, within 8.6 %). v12e
(session 30) keeps v12d's device code and table for the H200 and gives H100 / H800 cards v12c's
table back (_launch_table; results/kernel/table-h100: on one H100 it wins at all four entries
where the two differ, by 2.1 %). The other late modes (4-9, 11, 12) were measured experiments;
they live in git history before the cleanup that removed them (kernels/NOTES.md).
"""

import contextlib
import dataclasses
import os
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch

__all__ = [
    "gated_delta_rule_mtp_ucache_flush",
    "GdnDecodeUCacheFlushKernel",  # noqa: F822 - defined lazily (module __getattr__)
    "K_DIM",
    "V_DIM_C",
    "W_RING",
    "RING_SLOTS",
    "RING_MASK",
]

K_DIM = 128
V_DIM_C = 128
W_RING = 16
RING_SLOTS = 32
RING_MASK = RING_SLOTS - 1
EPS = 1e-6
THREADS = 128
# the `stagN` timing experiment delays odd CTAs among the first STAG_CTAS (one H200 wave at
# 7 CTAs/SM is 924)
STAG_CTAS = 1024
T_MIN, T_MAX = 2, 8


def _dtype_from_env(var: str, default: torch.dtype | None) -> torch.dtype | None:
    raw = os.environ.get(var, "").strip().lower()
    if raw == "":
        return default
    if raw in ("bf16", "bfloat16"):
        return torch.bfloat16
    if raw in ("fp16", "float16", "half"):
        return torch.float16
    raise ValueError(f"{var}={raw!r}: expected one of bf16/bfloat16 or fp16/float16/half")


IO_TORCH: torch.dtype = _dtype_from_env("GDN_UCACHE_IO_DTYPE", torch.bfloat16)  # type: ignore[assignment]


def _sub_dtype_from_env(var: str) -> torch.dtype:
    dt = _dtype_from_env(var, None)
    if dt is None or dt == IO_TORCH:
        return IO_TORCH
    if dt == torch.float16 and IO_TORCH == torch.bfloat16:
        return dt  # mixed mode: fp16 pool / ring with bf16 activations
    raise ValueError(
        f"{var}={os.environ.get(var)!r} is not allowed with GDN_UCACHE_IO_DTYPE="
        f"{'bf16' if IO_TORCH == torch.bfloat16 else 'fp16'}: use '' (= IO dtype), the IO dtype, "
        "or fp16 with bf16 IO"
    )


ST_TORCH: torch.dtype = _sub_dtype_from_env("GDN_UCACHE_STATE_DTYPE")
RING_TORCH: torch.dtype = _sub_dtype_from_env("GDN_UCACHE_RING_DTYPE")
STATE_SR: bool = os.environ.get("GDN_UCACHE_STATE_SR", "0").strip() not in (
    "",
    "0",
    "false",
    "False",
)
# Read for compatibility with flashinfer's environment; this kernel is always native-T and takes
# any q/k/v and a/b strides, so they change nothing here.
_NATIVE_T = os.environ.get("SGLANG_GDN_WY_NATIVE_T", "1") == "1"
_STRIDED_QKV = os.environ.get("SGLANG_GDN_WY_STRIDED_QKV", "0") == "1"
_NATIVE_AB = os.environ.get("SGLANG_GDN_WY_NATIVE_AB", "1") == "1"

_CACHE: dict[tuple, Any] = {}
_F32_CACHE: dict[int, torch.Tensor] = {}
_ZERO_BASE: dict[tuple, torch.Tensor] = {}


# --------------------------------------------------------------------------------------------
# Device code (CuTe-DSL). Imported lazily so that the module (constants, validation) loads
# without cutlass; the kernel class is defined on first use.
# --------------------------------------------------------------------------------------------
def _skip_number(skip: Iterable[str], prefix: str) -> int:
    """The sum of N over the `prefixN` tokens of GDN_UCACHE_SKIP (0 without one)."""
    return sum(
        int(x[len(prefix) :]) for x in skip if x.startswith(prefix) and x[len(prefix) :].isdigit()
    )


def _build_kernel_class() -> type:  # noqa: C901 - one closure holding the device code
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import BFloat16, Float16, Float32, Int16, Int32, Int64, Uint32
    from cutlass.memory import SmemAllocator

    def _dsl_dtype(dt: torch.dtype) -> type:
        return BFloat16 if dt == torch.bfloat16 else Float16

    # compile-time switches the helpers below read while one kernel is traced (set at the top of
    # kernel(); one trace at a time)
    trace_flags: dict[str, bool] = {"stef": False}

    def _ptx_t(dt: torch.dtype) -> str:
        return "bf16" if dt == torch.bfloat16 else "f16"

    # ---- register-level helpers (inline PTX; traced inside the kernel) ----------------------
    def as_flag(cond: Any) -> Any:
        """A condition as an Int32 0/1 operand of inline PTX (a predicate operand that folds to a
        constant would be printed as an immediate, which PTX does not accept)."""
        return cutlass.select_(cond, Int32(1), Int32(0))

    def ldg_v4(ptr: Any) -> tuple:
        return cute.arch.inline_ptx(
            "ld.global.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];",
            write_only_types=[Int32] * 4,
            read_only_args=[ptr],
        )

    def lds_v4(ptr: Any, again: bool = False) -> tuple:
        """16 bytes from shared memory. `again` gives the fold's re-read its own asm string so
        that the compiler cannot merge it with the projection's read (which would keep the 32
        state words alive from the projection through the fold: the v5b register peak)."""
        tag = " // again" if again else ""
        return cute.arch.inline_ptx(
            "ld.shared.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];" + tag,
            write_only_types=[Int32] * 4,
            read_only_args=[ptr.toint()],
        )

    def lds_v4_at(addr: Any) -> tuple:
        """16 bytes from shared memory at a 32-bit shared address."""
        return cute.arch.inline_ptx(
            "ld.shared.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];",
            write_only_types=[Int32] * 4,
            read_only_args=[addr],
        )

    def nanosleep(ns: Any) -> None:
        cute.arch.inline_ptx("nanosleep.u32 {$r0};", read_only_args=[ns])

    def stg_v4(ptr: Any, w: list) -> None:
        cute.arch.inline_ptx(
            "st.global.v4.b32 [{$r0}], {{$r1}, {$r2}, {$r3}, {$r4}};",
            read_only_args=[ptr, w[0], w[1], w[2], w[3]],
        )

    def ld16(ptr: Any, dt: torch.dtype) -> Any:
        return cute.arch.inline_ptx(
            f"{{ .reg .b16 h; ld.global.b16 h, [{{$r0}}]; cvt.f32.{_ptx_t(dt)} {{$w0}}, h; }}",
            write_only_types=[Float32],
            read_only_args=[ptr],
        )

    def st16(ptr: Any, x: Any, dt: torch.dtype) -> None:
        cute.arch.inline_ptx(
            f"{{ .reg .b16 h; cvt.rn.{_ptx_t(dt)}.f32 h, {{$r1}}; st.global.b16 [{{$r0}}], h; }}",
            read_only_args=[ptr, Float32(x)],
        )

    def pack2(lo: Any, hi: Any, dt: torch.dtype) -> Any:
        return cute.arch.inline_ptx(
            f"cvt.rn.{_ptx_t(dt)}x2.f32 {{$w0}}, {{$r0}}, {{$r1}};",
            write_only_types=[Int32],
            read_only_args=[Float32(hi), Float32(lo)],
        )

    def unpack2(w: Any, dt: torch.dtype) -> tuple:
        if dt == torch.bfloat16:
            return cute.arch.inline_ptx(
                "{ .reg .b32 t0, t1; shl.b32 t0, {$r0}, 16; and.b32 t1, {$r0}, 0xffff0000;"
                " mov.b32 {$w0}, t0; mov.b32 {$w1}, t1; }",
                write_only_types=[Float32, Float32],
                read_only_args=[w],
            )
        return cute.arch.inline_ptx(
            "{ .reg .f16 h0, h1; mov.b32 {h0, h1}, {$r0}; cvt.f32.f16 {$w0}, h0;"
            " cvt.f32.f16 {$w1}, h1; }",
            write_only_types=[Float32, Float32],
            read_only_args=[w],
        )

    def mma16816(dt: torch.dtype, a: list, b: list, c: list) -> tuple:
        t = _ptx_t(dt)
        return cute.arch.inline_ptx(
            f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 "
            "{{$w0}, {$w1}, {$w2}, {$w3}}, {{$r0}, {$r1}, {$r2}, {$r3}}, {{$r4}, {$r5}}, "
            "{{$r6}, {$r7}, {$r8}, {$r9}};",
            write_only_types=[Float32] * 4,
            read_only_args=[a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3]],
        )

    def ldg_v4_either(p_a: Any, p_b: Any, use_a: Any, live: Any) -> tuple:
        """16 bytes from p_a if use_a else from p_b; zeros (no load at all) unless live."""
        return cute.arch.inline_ptx(
            "{ .reg .pred pa, pb, pl; setp.ne.s32 pl, {$r3}, 0; setp.ne.s32 pa, {$r2}, 0;"
            " and.pred pb, pl, !pa; and.pred pa, pl, pa;"
            " mov.b32 {$w0}, 0; mov.b32 {$w1}, 0; mov.b32 {$w2}, 0; mov.b32 {$w3}, 0;"
            " @pa ld.global.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];"
            " @pb ld.global.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r1}]; }",
            write_only_types=[Int32] * 4,
            read_only_args=[
                p_a,
                p_b,
                as_flag(use_a),
                as_flag(live),
            ],
        )

    def ldg_b16(ptr: Any, pinned: bool = False) -> Any:
        """A raw 16-bit element (zero-extended): issued now, converted where it is used (a load
        and its conversion in one asm statement would wait for the data right there). pinned:
        .volatile, which ptxas keeps in program order (otherwise it sinks loads whose use sits
        in a branch into that branch, behind the branch's own DRAM trips)."""
        vol = ".volatile" if pinned else ""
        return cute.arch.inline_ptx(
            f"ld{vol}.global.u16 {{$w0}}, [{{$r0}}];",
            write_only_types=[Int32],
            read_only_args=[ptr],
        )

    def ldg_b32(ptr: Any, pinned: bool = False) -> Any:
        """A 32-bit word (raw bits); pinned as in ldg_b16."""
        vol = ".volatile" if pinned else ""
        return cute.arch.inline_ptx(
            f"ld{vol}.global.b32 {{$w0}}, [{{$r0}}];",
            write_only_types=[Int32],
            read_only_args=[ptr],
        )

    def cvt_b16(x: Any, dt: torch.dtype) -> Any:
        return cute.arch.inline_ptx(
            f"{{ .reg .b16 h; cvt.u16.u32 h, {{$r0}}; cvt.f32.{_ptx_t(dt)} {{$w0}}, h; }}",
            write_only_types=[Float32],
            read_only_args=[x],
        )

    def as_f32(bits: Any) -> Any:
        return cute.arch.inline_ptx(
            "mov.b32 {$w0}, {$r0};", write_only_types=[Float32], read_only_args=[bits]
        )

    def sts_v4_f32(ptr: Any, x: list) -> None:
        cute.arch.inline_ptx(
            "st.shared.v4.f32 [{$r0}], {{$r1}, {$r2}, {$r3}, {$r4}};",
            read_only_args=[
                ptr.toint(),
                Float32(x[0]),
                Float32(x[1]),
                Float32(x[2]),
                Float32(x[3]),
            ],
        )

    def qk_rows_to_smem(
        wq: tuple, r: Any, is_k: Any, xs_ptr: Any, c8: Any, scale: Any, io: torch.dtype,
        ring: torch.dtype, xb: Any = None, xparts: int = 2, st: torch.dtype | None = None,
        tproj: bool = False,
    ) -> list:  # fmt: skip
        """8 elements (one 16-byte load) of row r of [k; q]: L2 norm over the row's 16 lanes, q rows
        scaled, stored as fp32 at xs[r, c8 .. c8 + 7]; returns them packed in the ring dtype (the
        k ring append). Rows past 2T were loaded as zeros and stay zero.
        With xb (late13): no fp32 row; the 4 element pairs go straight into the projection's
        B-fragment words (hi, and lo with the split; the bsmem layout of phase 3's build: word
        4 (q // 4) + j of lane 4 (r % 8) + q % 4 holds the pair at column 8 q + 2 j, q = c8 / 8)."""
        xv = []
        for wd in range(4):
            lo_, hi_ = unpack2(wq[wd], io)
            xv.append(lo_)
            xv.append(hi_)
        ss = xv[0] * xv[0]
        for e in range(1, 8):
            ss = ss + xv[e] * xv[e]
        for o in range(4):  # the row's 16 lanes
            ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=1 << o)
        inv = cute.math.rsqrt(ss + Float32(EPS), fastmath=True)
        inv = cutlass.select_(is_k, inv, inv * scale)
        xv = [x_ * inv for x_ in xv]
        if xb is None:
            sts_v4_f32(xs_ptr + (r * K_DIM + c8), xv[0:4])
            sts_v4_f32(xs_ptr + (r * K_DIM + c8 + 4), xv[4:8])
        else:
            q8 = c8 // 8
            ln = 4 * (r % 8) + q8 % 4
            for j in range(4):
                wd = 4 * (q8 // 4) + j
                hi = pack2(xv[2 * j], xv[2 * j + 1], st)
                xb[xb_index(r // 8, wd, 0, ln, xparts, tproj)] = hi
                if xparts == 2:
                    h0, h1 = unpack2(hi, st)
                    lo = pack2(xv[2 * j] - h0, xv[2 * j + 1] - h1, st)
                    xb[xb_index(r // 8, wd, 1, ln, xparts, tproj)] = lo
        return [pack2(xv[2 * e], xv[2 * e + 1], ring) for e in range(4)]

    def gates_scan(ai: Any, bt: Any, alog: Any, dtb: Any, lane: Any, T: int) -> tuple:
        """Warp 0: lane t < T gets gamma_t = sum_{i <= t} g_i (g_i = -exp(A_log) softplus(a_i +
        dt_bias), an inclusive warp scan: one softplus per lane) and beta_t = sigmoid(b_t)."""
        neg_a = -cute.math.exp(alog, fastmath=False)
        x = ai + dtb
        # stable softplus: max(x, 0) + log1p(exp(-|x|))
        sp = cute.math.max(x, Float32(0.0)) + cute.math.log1p(
            cute.math.exp(-cute.math.absf(x), fastmath=True)
        )
        gsum = cutlass.select_(lane < T, neg_a * sp, Float32(0.0))
        for o in range(3):
            if (1 << o) < T:
                up = cute.arch.shuffle_sync_up(gsum, offset=1 << o)
                gsum = gsum + cutlass.select_(lane >= (1 << o), up, Float32(0.0))
        beta_t = Float32(1.0) / (Float32(1.0) + cute.math.exp(-bt, fastmath=True))
        return gsum, beta_t

    def select_token(vals: list, tl: Any, T: int) -> Any:
        """vals[tl] for a run-time tl < T (a chain of selects)."""
        x = vals[0]
        for i in range(1, T):
            x = cutlass.select_(tl == i, vals[i], x)
        return x

    def split2(x0: Any, x1: Any, dt: torch.dtype) -> tuple:
        """(hi, lo) packed 16-bit pairs with hi + lo = (x0, x1) to ~2x the 16-bit precision."""
        hi = pack2(x0, x1, dt)
        r0, r1 = unpack2(hi, dt)
        return hi, pack2(x0 - r0, x1 - r1, dt)

    def ldsm_x4_trans(ptr: Any) -> tuple:
        """ldmatrix .x4 .trans: lane t addresses row t % 8 of 8x8 matrix t // 8 (16 bytes each)
        and receives word i = (M_i[2 (t % 4)][t // 4], M_i[2 (t % 4) + 1][t // 4])."""
        return cute.arch.inline_ptx(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];",
            write_only_types=[Int32] * 4,
            read_only_args=[ptr.toint()],
        )

    def st16_either(
        p_ring: Any, p_io: Any, x: Any, to_ring: Any, to_io: Any, ring_dt: torch.dtype,
        io_dt: torch.dtype,
    ) -> None:  # fmt: skip
        """Store x as a ring element at p_ring if to_ring, as an output element at p_io if to_io
        (predicated stores: one code path for the k-side and q-side lanes of a quad)."""
        cute.arch.inline_ptx(
            "{ .reg .b16 h0, h1; .reg .pred p, q; setp.ne.s32 p, {$r3}, 0;"
            " setp.ne.s32 q, {$r4}, 0;"
            f" cvt.rn.{_ptx_t(ring_dt)}.f32 h0, {{$r2}}; cvt.rn.{_ptx_t(io_dt)}.f32 h1, {{$r2}};"
            " @p st.global.b16 [{$r0}], h0; @q st.global.b16 [{$r1}], h1; }",
            read_only_args=[
                p_ring,
                p_io,
                Float32(x),
                as_flag(to_ring),
                as_flag(to_io),
            ],
        )

    def sts16_either(
        addr: Any, x: Any, to_ring: Any, ring_dt: torch.dtype, io_dt: torch.dtype
    ) -> None:
        """x rounded to the ring dtype if to_ring, else to the output dtype, as one 16-bit
        shared-memory element at byte address addr (ostage's staging)."""
        cute.arch.inline_ptx(
            "{ .reg .b16 h0, h1, h; .reg .pred p; setp.ne.s32 p, {$r2}, 0;"
            f" cvt.rn.{_ptx_t(ring_dt)}.f32 h0, {{$r1}}; cvt.rn.{_ptx_t(io_dt)}.f32 h1, {{$r1}};"
            " selp.b16 h, h0, h1, p; st.shared.b16 [{$r0}], h; }",
            read_only_args=[addr, Float32(x), as_flag(to_ring)],
        )

    def stg_v4_either(p_a: Any, p_b: Any, w: tuple, to_a: Any, to_b: Any) -> None:
        """16 bytes to p_a if to_a, to p_b if to_b (predicated vector stores)."""
        cute.arch.inline_ptx(
            "{ .reg .pred p, q; setp.ne.s32 p, {$r6}, 0; setp.ne.s32 q, {$r7}, 0;"
            " @p st.global.v4.b32 [{$r0}], {{$r2}, {$r3}, {$r4}, {$r5}};"
            " @q st.global.v4.b32 [{$r1}], {{$r2}, {$r3}, {$r4}, {$r5}}; }",
            read_only_args=[p_a, p_b, w[0], w[1], w[2], w[3], as_flag(to_a), as_flag(to_b)],
        )

    def build_bx(xs: Any, g4: Any, c4: Any, NXP: int, dt: torch.dtype, split: bool) -> tuple:
        """B fragments of x_n[c4*8 + 32 i + 0..7] for n = nt*8 + g4, packed in dtype dt.

        With split, also the residuals x - round(x) (a second 16-bit "lo" operand): two MMAs then
        give the product with x at ~fp32 precision (the state stays exactly as stored).
        """
        his, los = [], []
        for nt in range(NXP // 8):
            hi_regs, lo_regs = [], []
            for i in range(4):
                cb = (nt * 8 + g4) * K_DIM + c4 * 8 + 32 * i
                for e in range(4):
                    x0, x1 = xs[cb + 2 * e], xs[cb + 2 * e + 1]
                    hi = pack2(x0, x1, dt)
                    hi_regs.append(hi)
                    if split:
                        r0, r1 = unpack2(hi, dt)
                        lo_regs.append(pack2(x0 - r0, x1 - r1, dt))
            his.append(hi_regs)
            los.append(lo_regs)
        return his, los

    def small_mma(
        rows_s: Any,
        row_stride: int,
        dt: torch.dtype,
        bx_hl: tuple,
        g4: Any,
        c4: Any,
        NXP: int,
        split_a: bool,
        a_rows: int = 16,
        a_words: bool = False,
        a_from_b: bool = False,
    ) -> list:
        """[16 rows of a smem tile] x [x_0..x_{NXP-1}]^T with the same K-permutation.

        a_from_b (the Gram of late13, A = the x rows themselves): the A words of rows g4 and
        g4 + 8 at k-step (i, h) are the B words of n-tiles 0 and 1 for this lane (x_n[k] for
        n = nt*8 + g4 at the same columns), hi and lo as staged; no fp32 tile is read.

        A is an fp32 tile (packed to dt here) or, with a_words, a tile already packed as 16-bit
        pairs (row_stride in 32-bit words). Rows >= a_rows are zero and not stored. B is (hi, lo)
        split when bx_hl carries lo fragments; split_a also splits an fp32 A (3 MMAs). bx_hl is
        either (hi lists, lo lists) from build_bx or a function (nt, word, part) -> B word
        (part 0 = hi, 1 = lo, None when there is no lo part) reading the smem-staged fragments.
        """
        if callable(bx_hl):
            bword = bx_hl
        else:

            def bword(nt: int, w: int, part: int) -> Any:
                frags = bx_hl[part][nt]
                return frags[w] if frags else None

        accs = []
        for nt in range(NXP // 8):
            ch = [[Float32(0.0)] * 4 for _ in range(4)]  # independent chains: shorter latency
            for ks in range(8):
                i, h = ks // 2, ks % 2
                col = c4 * 8 + 32 * i + 4 * h
                a_hi, a_lo = [], []
                for q_ in range(4):
                    r_ = g4 + 8 * (q_ % 2)
                    cc = col + 2 * (q_ // 2)
                    if 8 * (q_ % 2) >= a_rows:  # compile-time: rows 8..15 are all zero
                        a_hi.append(Int32(0))
                        a_lo.append(Int32(0))
                    elif a_from_b:
                        wa = 4 * i + 2 * h + q_ // 2
                        a_hi.append(bword(q_ % 2, wa, 0))
                        if split_a:
                            a_lo.append(bword(q_ % 2, wa, 1))
                    elif a_words:
                        a_hi.append(rows_s[r_ * row_stride + cc // 2])
                    else:
                        x0, x1 = rows_s[r_ * row_stride + cc], rows_s[r_ * row_stride + cc + 1]
                        hi = pack2(x0, x1, dt)
                        a_hi.append(hi)
                        if split_a:
                            r0, r1 = unpack2(hi, dt)
                            a_lo.append(pack2(x0 - r0, x1 - r1, dt))
                w0, w1 = 4 * i + 2 * h, 4 * i + 2 * h + 1
                p2 = ks % 2
                b_hi = [bword(nt, w0, 0), bword(nt, w1, 0)]
                ch[p2] = list(mma16816(dt, a_hi, b_hi, ch[p2]))
                b_lo0 = bword(nt, w0, 1)
                if b_lo0 is not None:
                    b_lo = [b_lo0, bword(nt, w1, 1)]
                    ch[2 + p2] = list(mma16816(dt, a_hi, b_lo, ch[2 + p2]))
                if split_a:
                    ch[2 + p2] = list(mma16816(dt, a_lo, b_hi, ch[2 + p2]))
            accs.append([(ch[0][e] + ch[1][e]) + (ch[2][e] + ch[3][e]) for e in range(4)])
        return accs

    def ldg_v4_if(ptr: Any, live: Any) -> tuple:
        """16 bytes, or zeros without touching memory unless live (no branch)."""
        return cute.arch.inline_ptx(
            "{ .reg .pred pl; setp.ne.s32 pl, {$r1}, 0;"
            " mov.b32 {$w0}, 0; mov.b32 {$w1}, 0; mov.b32 {$w2}, 0; mov.b32 {$w3}, 0;"
            " @pl ld.global.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}]; }",
            write_only_types=[Int32] * 4,
            read_only_args=[ptr, as_flag(live)],
        )

    def sink_if_magic(ptr: Any, word: Any) -> None:
        """Store `word` only if it equals a magic value (practically never): keeps loads whose
        results nothing else reads alive through ptxas's dead-code elimination (the `sink`
        timing knock-out)."""
        cute.arch.inline_ptx(
            "{ .reg .pred pm; setp.eq.s32 pm, {$r1}, 0x13579bdf;"
            " @pm st.global.b32 [{$r0}], {$r1}; }",
            read_only_args=[ptr, word],
        )

    def state_chunk(
        st_head: Any, v0: Any, warp: Any, ti: int, ntile: int, g4: Any, c4: Any, rr: int, i: int
    ) -> Any:
        """This thread's 16-byte chunk (rr, i) of state tile warp + 4 ti: row g4 + 8 rr, columns
        c4*8 + 32 i + 0..7 (its mma.sync A fragment words). Warps without a tile (BV < 64)
        address a duplicate tile."""
        tile_ld = (warp + 4 * ti) % ntile
        row = st_head + Int64((v0 + tile_ld * 16 + g4 + 8 * rr) * K_DIM + c4 * 8 + 32 * i)
        return cute.recast_ptr(row, dtype=Int32)

    def load_state_tile(
        st_head: Any,
        v0: Any,
        warp: Any,
        ti: int,
        ntile: int,
        g4: Any,
        c4: Any,
        skip: bool,
        live: Any = None,
    ) -> list:
        """16-byte loads of this thread's A fragments of state tile warp + 4 ti (rows g4, g4 + 8;
        columns c4*8 + 32 i + 0..7). Warps without a tile (BV < 64) load a duplicate tile. With
        `live`, the loads are predicated on it (zeros otherwise)."""
        sa_t = []
        for rr in range(2):
            chunks = []
            for i in range(4):
                ptr = state_chunk(st_head, v0, warp, ti, ntile, g4, c4, rr, i)
                if skip:
                    chunks.append((Int32(0),) * 4)
                elif live is None:
                    chunks.append(ldg_v4(ptr))
                else:
                    chunks.append(ldg_v4_if(ptr, live))
            sa_t.append(chunks)
        return sa_t

    # bulk-staged tile of one warp: even rows, then odd rows 64 bytes further (256-byte rows)
    BULK_WARP_WORDS = 1024 + 16  # 4 KB of rows + the 64-byte shift of the odd rows

    def bulk_row(warp: Any, lr: Any) -> Any:
        """Word offset of row lr (0..15) of a warp's bulk-staged tile: even rows packed from the
        warp's base, odd rows from base + 2 KB + 64 bytes. The 8 threads of a 16-byte read phase
        read rows 2q and 2q + 1, which then start 64 bytes apart modulo 128: 8 distinct bank
        quads (a dense 256-byte pitch would put both rows on the same banks: 2-way conflicts)."""
        return warp * BULK_WARP_WORDS + (lr % 2) * (512 + 16) + (lr // 2) * 64

    def bulk_stage_tile(
        st_head: Any,
        stage: Any,
        mbar_w: Any,
        v0: Any,
        warp: Any,
        ti: int,
        ntile: int,
        lane: Any,
    ) -> None:
        """This warp's state tile warp + 4 ti (16 rows x 256 bytes, 4 KB contiguous in the pool)
        into its part of `stage` by two bulk async copies that complete on the warp's mbarrier:
        lanes 0 and 1 copy tile rows 0-7 and 8-15 (2 KB each) to the even-row and odd-row blocks
        of bulk_row's layout (see the kernel's row permutation); lane 0 arms the barrier for the
        4096 bytes first. The copy engine moves the bytes: no load/store-unit instruction per 16
        bytes, no registers in flight."""
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.eq.s32 p, {$r2}, 0;"
            " @p mbarrier.arrive.expect_tx.shared::cta.b64 _, [{$r0}], {$r1}; }",
            read_only_args=[mbar_w.toint(), Int32(16 * 256), lane],
        )
        cute.arch.sync_warp()
        tile_ld = (warp + 4 * ti) % ntile
        hh = lane % 2
        src = st_head + Int64((v0 + tile_ld * 16 + 8 * hh) * K_DIM)
        dst = stage + bulk_row(warp, hh)  # block hh: rows 0-7 / 8-15 of the tile
        if trace_flags["stef"]:
            # stef: the state stream marked evict-first in L2, so the few MB of u / output rows
            # the kernel writes stay in L2 instead of being evicted by the state it streams
            cute.arch.inline_ptx(
                "{ .reg .pred p; .reg .b64 pol; setp.lt.s32 p, {$r3}, 2;"
                " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;"
                " @p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                ".L2::cache_hint [{$r0}], [{$r1}], 2048, [{$r2}], pol; }",
                read_only_args=[dst.toint(), src.toint(), mbar_w.toint(), lane],
            )
            return
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.lt.s32 p, {$r3}, 2;"
            " @p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [{$r0}], [{$r1}], 2048, [{$r2}]; }",
            read_only_args=[dst.toint(), src.toint(), mbar_w.toint(), lane],
        )

    def l2_prefetch_bulk(addr: Any, nbytes: Any, flag: Any) -> None:
        """One bulk L2 prefetch of nbytes (a multiple of 16) at the 16-byte aligned global
        address `addr` (an integer) when flag (Int32) != 0. A hint: no registers, no barrier."""
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.ne.s32 p, {$r2}, 0;"
            " @p cp.async.bulk.prefetch.L2.global [{$r0}], {$r1}; }",
            read_only_args=[addr, Int32(nbytes), flag],
        )

    def l2_prefetch_tile(st_head: Any, v0: Any, warp: Any, ti: int, ntile: int, lane: Any) -> None:
        """Lane 0 asks the copy engine to bring this warp's state tile warp + 4 ti (4 KB
        contiguous) into L2 (no shared memory, no barrier, no effect on results): its bulk copy
        into the stage later hits L2 instead of DRAM."""
        src = st_head + Int64((v0 + ((warp + 4 * ti) % ntile) * 16) * K_DIM)
        l2_prefetch_bulk(src.toint(), Int32(16 * K_DIM * 2), as_flag(lane == 0))

    def l2_prefetch_line(addr: Any, flag: Any) -> None:
        """prefetch.global.L2 of the line holding `addr` (any alignment) when flag != 0."""
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.ne.s32 p, {$r1}, 0; @p prefetch.global.L2 [{$r0}]; }",
            read_only_args=[addr, flag],
        )

    def block_boundary(positive: Any) -> None:
        """A branch that ptxas cannot remove and that is never taken (a kernel argument that is
        always >= 1 tested for < 0; each boundary needs its own argument, else the second test is
        proved redundant and removed): it ends a basic block, and ptxas issues the loads of one
        block before the instructions of the next (it schedules loads within their block, late
        when their use lies beyond it)."""
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.lt.s32 p, {$r0}, 0; @p trap; }", read_only_args=[positive]
        )

    def xpf_token(
        q: Any,
        k: Any,
        v: Any,
        q_sb: Any,
        q_st: Any,
        k_sb: Any,
        k_st: Any,
        v_sb: Any,
        v_st: Any,
        zf: Any,
        t: Any,
        one: Any,
        lead_k: Any,
        ih: Any,
        hv: Any,
        v0: Any,
        BV: int,
    ) -> None:
        """Cross-row L2 prefetch of row zf's token t: its q and k rows of key head ih (only the
        key head's first CTA: lead_k) and its v slice (every CTA: its own columns), one bulk
        prefetch each where 16-byte aligned (checked here: a hint is skipped, never faulted).
        `one` selects one lane: the addresses are the same in every lane, and distinct per-lane
        addresses would make ptxas loop over them (the instruction takes uniform registers)."""
        zf64, t64 = Int64(zf), Int64(t)
        q_a = (q + (zf64 * q_sb + t64 * q_st + Int64(ih * K_DIM))).toint()
        k_a = (k + (zf64 * k_sb + t64 * k_st + Int64(ih * K_DIM))).toint()
        v_a = (v + (zf64 * v_sb + t64 * v_st + Int64(hv * V_DIM_C + v0))).toint()
        for row, nbytes, mine in ((q_a, K_DIM * 2, lead_k), (k_a, K_DIM * 2, lead_k)):
            ok = one & mine & ((row & Int64(15)) == Int64(0))
            l2_prefetch_bulk(row, Int32(nbytes), as_flag(ok))
        l2_prefetch_bulk(v_a, Int32(BV * 2), as_flag(one & ((v_a & Int64(15)) == Int64(0))))

    def xpf_gates(
        a: Any,
        b: Any,
        a_sb: Any,
        a_st: Any,
        b_sb: Any,
        b_st: Any,
        zf: Any,
        live: Any,
        hv: Any,
        lane: Any,
        T: int,
    ) -> None:
        """Cross-row L2 prefetch of row zf's a/b gates of head hv: one line per lane (< 2T)."""
        zf64, tg = Int64(zf), Int64(lane % T)
        a_a = (a + (zf64 * a_sb + tg * a_st + Int64(hv))).toint()
        b_a = (b + (zf64 * b_sb + tg * b_st + Int64(hv))).toint()
        gate = cutlass.select_(lane < T, a_a, b_a)
        l2_prefetch_line(gate, as_flag(live & (lane < 2 * T)))

    def xpf_row(
        pool: Any,
        kc: Any,
        uc: Any,
        gc: Any,
        pool_s0: Any,
        kc_s0: Any,
        uc_s0: Any,
        gc_s0: Any,
        slot_f: Any,
        P_f: Any,
        base_f: Any,
        live: Any,
        lead_v: Any,
        lead_k: Any,
        ih: Any,
        hv: Any,
        v0: Any,
        lane: Any,
        BV: int,
        with_state: bool = True,
    ) -> None:
        """Cross-row L2 prefetch, cursor-dependent part (lane 0 of one warp, warp-uniform
        addresses): row zf's state rows v0..v0+BV of head hv (4 KB per bulk prefetch; not
        without with_state), its live
        u-window rows (lead_v: the value head's first CTA) and k-window rows (lead_k: the key
        head's first CTA), each the ring slots base..base+P-1, at most two contiguous runs of
        256-byte rows, and the lines of its g row's first and last word (lead_v)."""
        s64 = Int64(cutlass.max(slot_f, Int32(0)))
        one = live & (lane == 0)
        n_live = cutlass.min(cutlass.max(P_f, Int32(0)), Int32(W_RING))
        b0 = base_f & Int32(RING_MASK)
        n1 = cutlass.min(n_live, Int32(RING_SLOTS) - b0)
        if with_state:
            st_head = pool + (s64 * pool_s0 + Int64((hv * V_DIM_C + v0) * K_DIM))
            for c in range(BV // 16):  # 4 KB (16 rows) per prefetch, the size t1l2 asks for
                l2_prefetch_bulk(
                    (st_head + Int64(c * 16 * K_DIM)).toint(), Int32(16 * K_DIM * 2), as_flag(one)
                )
        for ring, ring_s0, head, mine in ((uc, uc_s0, hv, lead_v), (kc, kc_s0, ih, lead_k)):
            for r0, nrows in ((b0, n1), (Int32(0), n_live - n1)):
                run = (ring + (s64 * ring_s0 + Int64((head * RING_SLOTS + r0) * K_DIM))).toint()
                l2_prefetch_bulk(
                    run, nrows * Int32(K_DIM * 2), as_flag(one & mine & (nrows > Int32(0)))
                )
        g_row = gc + (s64 * gc_s0 + Int64(hv * RING_SLOTS))
        for word in (0, RING_SLOTS - 1):
            l2_prefetch_line((g_row + Int64(word)).toint(), as_flag(one & lead_v))

    def fold_bfrag(kcs: Any, KPW: int, lane: Any, t16: int, half: int, dt: torch.dtype) -> Any:
        """The fold's B fragment word (t16, half) of this lane from the k window itself (what the
        kb copy holds): {KC[j0][p], KC[j0 + 1][p]} with j0 = 2 c + 8 half and p the column of
        n-tile t16 for lane (g, c), in the state tile's K-permutation."""
        kj = 2 * (lane % 4) + 8 * half
        kg = lane // 4
        kpc = (kg // 2) * 8 + 32 * (t16 // 4) + 2 * (t16 % 4) + (kg % 2)
        return pack2(Float32(kcs[kj * 2 * KPW + kpc]), Float32(kcs[(kj + 1) * 2 * KPW + kpc]), dt)

    def bulk_slot(stage: Any, warp: Any, g4: Any, c4: Any, rr: int, i: int) -> Any:
        """Chunk (rr, i) of thread (g4, c4) in its warp's bulk-staged tile (Int32 words): row
        g4 + 8 rr (bulk_row), columns c4*8 + 32 i + 0..7."""
        return stage + (bulk_row(warp, g4 + 8 * rr) + i * 16 + c4 * 4)

    def proj_to_epilogue_rows(d: list, g4: Any, c4: Any) -> tuple:
        """One 16 x 8 projection tile from the bulk modes' MMA rows to the epilogue's (dsreg).

        In the bulk modes thread (g4, c4) holds tile rows p = (g4 % 2) * 8 + g4 // 2 and p + 4
        (d[0:2] and d[2:4], columns 2 c4 + {0, 1}); the epilogue wants rows g4 and g4 + 8 of the
        same columns. Row r < 8 sits at g4 = 2 (r % 4), row r + 8 at g4 = 2 (r % 4) + 1, each in
        the first pair if r < 4 else the second: 8 shuffles within the lane's column group."""
        src_a = (g4 % 4) * 8 + c4
        second = g4 >= 4
        out = [None] * 4
        for col in range(2):
            for half, src in ((0, src_a), (1, src_a + 4)):
                first_v = cute.arch.shuffle_sync(d[col], src)
                second_v = cute.arch.shuffle_sync(d[2 + col], src)
                out[2 * half + col] = cutlass.select_(second, second_v, first_v)
        return tuple(out)

    def epilogue_operands(
        ks: Any, g4: Any, c4: Any, sw: Any, cmat: Any, mmat: Any, gam: Any, base: Any, P: Any,
        o_st: Any,
    ) -> tuple:  # fmt: skip
        """Phase 5's per-thread operands, once per row: the B fragments SW (history), C (outputs)
        and M (solve) as hi + lo pairs, and per accumulator column of this lane its side, token,
        e^{gamma_token}, ring offset and output offset. Reads sw / cmat / mmat, which phase 3's
        warps wrote: a CTA barrier must order them first."""
        T, NX, NXP = ks.T, ks.NX, ks.NXP
        bf = torch.bfloat16
        r0_ = 2 * c4
        r0c = cutlass.min(r0_, Int32(T - 1))
        r1c = cutlass.min(r0_ + 1, Int32(T - 1))
        # B fragments, once per thread: SW (history), M (solve), C (outputs)
        b_sw = []
        b_c = []
        for nt in range(NXP // 8):
            n_b = nt * 8 + g4
            nbc = cutlass.min(n_b, Int32(NX - 1))
            halves = []
            for hf in range(2):
                j0 = r0_ + 8 * hf
                halves.append(
                    split2(
                        cutlass.select_(n_b < NX, sw[j0 * NX + nbc], Float32(0.0)),
                        cutlass.select_(n_b < NX, sw[(j0 + 1) * NX + nbc], Float32(0.0)),
                        ks.ring,
                    )
                )
            b_sw.append(halves)
            s_b = n_b - T
            ok_c = (s_b >= Int32(0)) & (s_b < T)
            sbc = cutlass.min(cutlass.max(s_b, Int32(0)), Int32(T - 1))
            b_c.append(
                split2(
                    cutlass.select_(ok_c & (r0_ < T), cmat[sbc * T + r0c], Float32(0.0)),
                    cutlass.select_(ok_c & (r0_ + 1 < T), cmat[sbc * T + r1c], Float32(0.0)),
                    bf,
                )
            )
        ok_m = g4 < T
        gmc = cutlass.min(g4, Int32(T - 1))
        b_m = split2(
            cutlass.select_(ok_m & (r0_ < T), mmat[gmc * T + r0c], Float32(0.0)),
            cutlass.select_(ok_m & (r0_ + 1 < T), mmat[gmc * T + r1c], Float32(0.0)),
            bf,
        )
        # per column of this lane: side, token index, e^{gamma_token}, ring offset
        cols = []
        for nt in range(NXP // 8):
            for e2 in range(2):
                n_c = nt * 8 + r0_ + e2
                k_side = n_c < T
                q_side = (n_c >= T) & (n_c < 2 * T)
                tok = cutlass.min(
                    cutlass.max(cutlass.select_(k_side, n_c, n_c - T), Int32(0)),
                    Int32(T - 1),
                )
                egs = cute.math.exp(gam[tok], fastmath=True)
                ring_off = Int64(((base + P + tok) & RING_MASK) * V_DIM_C)
                cols.append((k_side, q_side, tok, egs, ring_off, Int64(tok) * o_st))
        return b_sw, b_c, b_m, cols, r0_

    def epilogue_tile(
        ks: Any, eops: tuple, tile: Any, has_tile: Any, g4: Any, c4: Any, lane: Any, uw16_i: Any,
        ds: Any, pj: tuple | None, eg_star: Any, vs: Any, uc_head: Any, o_head: Any, zero: Any,
        afe_z0: bool = False, sctx: tuple | None = None,
    ) -> list | None:  # fmt: skip
        """Phase 5 for one 16-row tile (kernel docstring): history HX = e^{G*} S0 X^T + U_win^T
        SW, residual R = V - e^{gamma} HX_k, solve U = R M^T, outputs O = e^{gamma} HX_q + U C^T,
        then the u appends and the outputs as predicated 16-bit stores. The projections come
        from ds (this warp's rows: a warp barrier must order them) or, with dsreg, in pj.
        Timing knock-outs (results wrong): `epimath` stores e^{G*} x the projections without the
        math; `epistore` runs the math and keeps it alive by one never-taken store instead of
        the 16-bit stores (session 19: is phase 5's cost its math or its stores?).
        afe_z0: the same math with P = 0 (the affine epilogue's Z0, before the state arrives),
        returned per n-tile in the accumulator layout instead of stored."""
        NX, NXP, UWS, DSP, VSS = ks.NX, ks.NXP, ks.UWS, ks.DSP, ks.VSS
        bf = torch.bfloat16
        b_sw, b_c, b_m, cols, r0_ = eops
        rows = (tile * 16 + g4, tile * 16 + g4 + 8)

        def history_acc_in(nt: int) -> list:
            # e^{G*} S0 X^T of n-tile nt in the accumulator layout (zero past the NX columns)
            out = []
            if afe_z0:
                return [Float32(0.0)] * 4
            for e in range(4):
                n_d = nt * 8 + r0_ + e % 2
                if pj is not None:
                    d_e = pj[e]
                else:
                    d_e = ds[rows[e // 2] * DSP + cutlass.min(n_d, Int32(NX - 1))]
                out.append(cutlass.select_(n_d < NX, eg_star * d_e, Float32(0.0)))
            return out

        if "epimath" in ks.skip and not afe_z0:
            fin = [history_acc_in(nt) for nt in range(NXP // 8)]
            epilogue_stores(ks, fin, cols, rows, has_tile, uc_head, o_head, tile, sctx)
            return None
        # A = u window^T [16 rows x 16 j]: lane t addresses row t % 8 of
        # 8x8 block t // 8 = (j half, row half)
        mi = lane // 8
        ua = ldsm_x4_trans(uw16_i + ((lane % 8 + 8 * (mi // 2)) * UWS + tile * 16 + 8 * (mi % 2)))
        acc = []
        for nt in range(NXP // 8):
            hxc = history_acc_in(nt)
            hxc = mma16816(ks.ring, ua, [b_sw[nt][0][0], b_sw[nt][1][0]], hxc)
            hxc = mma16816(ks.ring, ua, [b_sw[nt][0][1], b_sw[nt][1][1]], hxc)
            acc.append(hxc)
        # residuals (k columns) and e^{gamma} HX_q (q columns) of n-tile 0
        res = []
        cq = []
        for e in range(4):
            k_side, q_side, tok, egs, _, _ = cols[e % 2]
            vv = vs[tok * VSS + rows[e // 2]]
            if ks.vs16:
                vv = cvt_b16(Int32(vv), ks.io)
            res.append(cutlass.select_(k_side, vv - egs * acc[0][e], Float32(0.0)))
            cq.append(cutlass.select_(q_side, egs * acc[0][e], Float32(0.0)))
        ra = [split2(res[0], res[1], bf), split2(res[2], res[3], bf)]
        dd = mma16816(bf, [ra[0][0], ra[1][0], zero, zero], [b_m[0], zero], cq)
        dd = mma16816(bf, [ra[0][1], ra[1][1], zero, zero], [b_m[0], zero], dd)
        dd = mma16816(bf, [ra[0][0], ra[1][0], zero, zero], [b_m[1], zero], dd)
        # U (k columns only) as the A operand of the output MMA
        uu = [cutlass.select_(cols[e % 2][0], dd[e], Float32(0.0)) for e in range(4)]
        ua2 = [split2(uu[0], uu[1], bf), split2(uu[2], uu[3], bf)]
        fin = []
        for nt in range(NXP // 8):
            if nt == 0:
                cin = dd
            else:
                cin = []
                for e in range(4):
                    _, q_side, _, egs, _, _ = cols[2 * nt + e % 2]
                    cin.append(cutlass.select_(q_side, egs * acc[nt][e], Float32(0.0)))
            oo = mma16816(bf, [ua2[0][0], ua2[1][0], zero, zero], [b_c[nt][0], zero], cin)
            oo = mma16816(bf, [ua2[0][1], ua2[1][1], zero, zero], [b_c[nt][0], zero], oo)
            oo = mma16816(bf, [ua2[0][0], ua2[1][0], zero, zero], [b_c[nt][1], zero], oo)
            fin.append(oo)
        if afe_z0:
            return fin
        if "epistore" in ks.skip:
            total = Float32(0.0)
            for nt in range(NXP // 8):
                for e in range(4):
                    total = total + fin[nt][e]
            word = cute.arch.inline_ptx(
                "mov.b32 {$w0}, {$r0};", write_only_types=[Int32], read_only_args=[total]
            )
            sink_if_magic(cute.recast_ptr(o_head + Int64(rows[0] * 2), dtype=Int32), word)
            return None
        epilogue_stores(ks, fin, cols, rows, has_tile, uc_head, o_head, tile, sctx)
        return None

    def afe_result(d: list, eg_star: Any, z: list, w: tuple, zero: Any) -> tuple:
        """afe: [U | O] of one 16 x 8 tile in the projection's accumulator layout, Z0 + (e^{G*} P)
        L^T, as two bf16 MMAs whose K = 16 holds [P hi | P lo] (P's accumulator layout is the A
        layout of K columns 0-7; its lo parts fill 8-15): [P hi | P lo] [L hi; L hi] +
        [P hi | P lo] [L lo; 0] (P lo L lo, ~2^-16 relative, dropped as in the other splits)."""
        bf = torch.bfloat16
        pa = split2(eg_star * d[0], eg_star * d[1], bf)
        pb = split2(eg_star * d[2], eg_star * d[3], bf)
        a = [pa[0], pb[0], pa[1], pb[1]]
        acc = mma16816(bf, a, [w[0], w[0]], z)
        return mma16816(bf, a, [w[1], zero], acc)

    def epilogue_stores(
        ks: Any, fin: list, cols: list, rows: tuple, has_tile: Any, uc_head: Any, o_head: Any,
        tile: Any = None, sctx: tuple | None = None,
    ) -> None:  # fmt: skip
        """Phase 5's results of one tile: k-side columns appended to the u ring, q-side columns
        to the outputs (predicated 16-bit stores). ostage (sctx = (shared address of the tile's
        own ds rows, lane, base, P, o_st)): the 16-bit results go to shared memory as [column]
        [16 rows] (undoing the bulk modes' row permutation), then lane 2 n + h writes the 16
        bytes of rows 8 h .. 8 h + 7 of column n: one 16-byte store per lane, each pair of lanes
        a whole 32-byte sector, instead of 16-bit stores touching half-sectors."""
        if sctx is not None:
            ds_addr, lane, base, P, o_st = sctx
            stg = ds_addr + tile * (16 * ks.DSP * 4)  # this tile's own ds rows
            T = ks.T
            cute.arch.sync_warp()  # every lane has read the tile's ds rows (projections, Z0)
            for nt in range(ks.NXP // 8):
                for e in range(4):
                    k_side = cols[2 * nt + e % 2][0]
                    n_c = nt * 8 + 2 * (lane % 4) + e % 2
                    r = rows[e // 2] - tile * 16
                    sts16_either(stg + (n_c * 16 + r) * 2, fin[nt][e], k_side, ks.ring, ks.io)
            cute.arch.sync_warp()
            # lane 2 n + h: column n (NXP <= 16, so one pass covers every column), rows 8 h ..
            n_l = lane // 2
            half = lane % 2
            live = n_l < ks.NXP
            words = lds_v4_at(stg + cutlass.min(n_l, Int32(ks.NXP - 1)) * 32 + half * 16)
            to_ring = live & (n_l < T)
            to_io = live & (n_l >= T) & (n_l < 2 * T)
            if has_tile is not True:
                to_ring = to_ring & has_tile
                to_io = to_io & has_tile
            tok = cutlass.min(
                cutlass.max(cutlass.select_(n_l < T, n_l, n_l - T), Int32(0)), Int32(T - 1)
            )
            col0 = Int64(tile * 16 + half * 8)
            ring_off = Int64(((base + P + tok) & RING_MASK) * V_DIM_C)
            stg_v4_either(
                cute.recast_ptr(uc_head + (ring_off + col0), dtype=Int32),
                cute.recast_ptr(o_head + (Int64(tok) * o_st + col0), dtype=Int32),
                words,
                to_ring,
                to_io,
            )
            return
        for nt in range(ks.NXP // 8):
            for e in range(4):
                k_side, q_side, _, _, ring_off, out_off = cols[2 * nt + e % 2]
                row64 = Int64(rows[e // 2])
                st16_either(
                    uc_head + (ring_off + row64),
                    o_head + (out_off + row64),
                    fin[nt][e],
                    k_side if has_tile is True else k_side & has_tile,
                    q_side if has_tile is True else q_side & has_tile,
                    ks.ring,
                    ks.io,
                )

    def read_bulk_tile(
        stage: Any,
        warp: Any,
        g4: Any,
        c4: Any,
        skip: bool,
        again: bool = False,
    ) -> list:
        """The A fragments of this warp's bulk-staged tile (layout of load_state_tile)."""
        return [
            [
                (Int32(0),) * 4 if skip else lds_v4(bulk_slot(stage, warp, g4, c4, rr, i), again)
                for i in range(4)
            ]
            for rr in range(2)
        ]

    def stage_next_tile(
        st_head: Any, stage: Any, mbar_w: Any, v0: Any, warp: Any, ti: int, ntile: int, lane: Any
    ) -> None:
        """Copy the warp's tile ti into the reused stage once every lane has read the previous
        one: generic-proxy reads, a warp barrier, a proxy fence, then the async-proxy writes."""
        cute.arch.sync_warp()
        cute.arch.inline_ptx("fence.proxy.async.shared::cta;")
        bulk_stage_tile(st_head, stage, mbar_w, v0, warp, ti, ntile, lane)

    def stage_next_row(
        pool: Any,
        pool_s0: Any,
        slot: Any,
        hv: Any,
        stage: Any,
        mbar_w: Any,
        v0: Any,
        warp: Any,
        ntile: int,
        lane: Any,
        has_next: Any,
        t1l2: bool,
        tiles_per_warp: int,
    ) -> None:
        """chain: the warp's tile 0 of the next row (pool slot `slot`) into the stage once every
        lane has read this row's last tile; only when there is a next row (has_next != 0) and it
        is not a pad row (pad rows consume no mbarrier phase). With t1l2 its later tiles go to
        L2 too. The slot test is made here, not where the slot was loaded (the row's top): a
        compare there would wait for the load before the row's own loads leave."""
        live = (has_next != Int32(0)) & (slot >= Int32(0))
        head = pool + (Int64(cutlass.max(slot, Int32(0))) * pool_s0 + Int64(hv * V_DIM_C * K_DIM))
        lane_or_off = cutlass.select_(live, lane, Int32(32))  # lane 32: no copy
        stage_next_tile(head, stage, mbar_w, v0, warp, 0, ntile, lane_or_off)
        if t1l2:
            for ti in range(1, tiles_per_warp):
                if ntile >= 4 * (ti + 1):
                    l2_prefetch_tile(head, v0, warp, ti, ntile, lane_or_off)

    def prefetch_state_tiles(
        pool: Any,
        pool_s0: Any,
        slot: Any,
        hv: Any,
        v0: Any,
        warp: Any,
        ntile: int,
        g4: Any,
        c4: Any,
        skip: bool,
        n: int,
    ) -> list:
        """The first n state tiles of row `slot` (clamped to 0 for pad rows: never used)."""
        head = pool + (Int64(cutlass.max(slot, Int32(0))) * pool_s0 + Int64(hv * V_DIM_C * K_DIM))
        return [load_state_tile(head, v0, warp, ti, ntile, g4, c4, skip) for ti in range(n)]

    def cp_async16(dst: Any, src: Any, fill: Any, guard: Any = None) -> None:
        """16-byte cp.async global -> shared; zero-fills the 16 bytes when `fill` is false; issues
        nothing at all when `guard` is false."""
        nbytes = cutlass.select_(fill, Int32(16), Int32(0))
        if guard is None:
            cute.arch.inline_ptx(
                "cp.async.cg.shared.global [{$r0}], [{$r1}], 16, {$r2};",
                read_only_args=[dst.toint(), src.toint(), nbytes],
            )
        else:
            # the guard goes in as an integer (a predicate operand that folds to a constant
            # would be printed as an immediate, which PTX does not accept)
            cute.arch.inline_ptx(
                "{ .reg .pred p; setp.ne.s32 p, {$r3}, 0;"
                " @p cp.async.cg.shared.global [{$r0}], [{$r1}], 16, {$r2}; }",
                read_only_args=[
                    dst.toint(),
                    src.toint(),
                    nbytes,
                    as_flag(guard),
                ],
            )

    def cp_async4(dst: Any, src: Any, guard: Any) -> None:
        cute.arch.inline_ptx(
            "{ .reg .pred p; setp.ne.s32 p, {$r2}, 0;"
            " @p cp.async.ca.shared.global [{$r0}], [{$r1}], 4; }",
            read_only_args=[dst.toint(), src.toint(), as_flag(guard)],
        )

    def issue_windows(
        kc: Any,
        uc: Any,
        gc: Any,
        kc_s0: Any,
        uc_s0: Any,
        gc_s0: Any,
        slot: Any,
        P: Any,
        base: Any,
        ih: Any,
        hv: Any,
        v0: Any,
        tid: Any,
        kdst: Any,
        udst: Any,
        gdst: Any,
        BV: int,
        KPW: int,
    ) -> None:
        """cp.async of one row's ring windows into shared memory (no registers while in flight).

        k window: 16 rows x 128 (16-bit) at kdst with KPW-word rows; u window: 16 rows x BV at udst
        with rows of BV + 8 elements (the kernel's UWS);
        g: the whole 32-slot row (fp32) at gdst. Rows j >= P are zero-filled; pad rows (slot < 0)
        read slot 0's addresses with zero-fill only.
        """
        live = slot >= Int32(0)
        s64 = Int64(cutlass.max(slot, Int32(0)))
        kc_head = kc + (s64 * kc_s0 + Int64(ih * RING_SLOTS * K_DIM))
        for i in range(2):
            ci = tid + THREADS * i
            j = ci // 16
            col = (ci % 16) * 8
            src = kc_head + Int64(((base + j) & RING_MASK) * K_DIM + col)
            cp_async16(kdst + (j * 2 * KPW + col), src, live & (j < P))
        uc_head = uc + (s64 * uc_s0 + Int64(hv * RING_SLOTS * V_DIM_C) + Int64(v0))
        for i in range((2 * BV + THREADS - 1) // THREADS):
            ch = tid + THREADS * i
            j = ch // (BV // 8)
            col = (ch % (BV // 8)) * 8
            src = uc_head + Int64(((base + j) & RING_MASK) * V_DIM_C + col)
            guard = None if 2 * BV >= THREADS * (i + 1) else ch < 2 * BV
            cp_async16(udst + (j * (BV + 8) + col), src, live & (j < P), guard)
        g_head = gc + (s64 * gc_s0 + Int64(hv * RING_SLOTS))
        # all 32 g slots (4-byte copies: no alignment assumption on the g pool)
        cp_async4(gdst + (tid % RING_SLOTS), g_head + Int64(tid % RING_SLOTS), tid < RING_SLOTS)
        cute.arch.cp_async_commit_group()

    def ld16_if(ptr: Any, flag: Any, dt: torch.dtype) -> Any:
        """ld16 that loads only when flag != 0 (else 0.0): no branch, no out-of-bounds read."""
        return cute.arch.inline_ptx(
            "{ .reg .b16 h; .reg .pred p; setp.ne.s32 p, {$r1}, 0; mov.b16 h, 0;"
            f" @p ld.global.b16 h, [{{$r0}}]; cvt.f32.{_ptx_t(dt)} {{$w0}}, h; }}",
            write_only_types=[Float32],
            read_only_args=[ptr, Int32(flag)],
        )

    def issue_acts(
        q: Any,
        k: Any,
        v: Any,
        q_sb: Any,
        q_st: Any,
        k_sb: Any,
        k_st: Any,
        v_sb: Any,
        v_st: Any,
        bi: Any,
        live: Any,
        ih: Any,
        hv: Any,
        v0: Any,
        tid: Any,
        qkdst: Any,
        vdst: Any,
        T: int,
        BV: int,
    ) -> None:
        """cp.async of one row's k (rows 0..T-1) and q (rows T..2T-1) head rows and its v slice
        [T, BV] into shared memory (16-bit, as stored). Pad rows copy nothing (their activation
        rows may be phantom). Not committed here (issue_windows commits the group)."""
        bi64 = Int64(bi)
        for i in range((2 * T * 16 + THREADS - 1) // THREADS):
            c = tid + THREADS * i
            r = c // 16
            col = (c % 16) * 8
            tk = cutlass.min(r, Int32(T - 1))
            tq = cutlass.max(r - T, Int32(0))
            src_k = k + (bi64 * k_sb + Int64(tk) * k_st + Int64(ih * K_DIM + col))
            src_q = q + (bi64 * q_sb + Int64(tq) * q_st + Int64(ih * K_DIM + col))
            ok = live if 2 * T * 16 >= THREADS * (i + 1) else live & (c < 2 * T * 16)
            cp_async16(qkdst + (r * K_DIM + col), src_k, live, ok & (r < T))
            cp_async16(qkdst + (r * K_DIM + col), src_q, live, ok & (r >= T))
        for i in range((T * BV // 8 + THREADS - 1) // THREADS):
            c = tid + THREADS * i
            t_ = c // (BV // 8)
            col = (c % (BV // 8)) * 8
            src = v + (bi64 * v_sb + Int64(t_) * v_st + Int64(hv * V_DIM_C) + Int64(v0 + col))
            guard = live if T * BV // 8 >= THREADS * (i + 1) else live & (c < T * BV // 8)
            cp_async16(vdst + (t_ * BV + col), src, live, guard)

    def load_gates(
        a: Any,
        b: Any,
        a_sb: Any,
        a_st: Any,
        b_sb: Any,
        b_st: Any,
        bi: Any,
        slot: Any,
        hv: Any,
        tid: Any,
        T: int,
        dt: torch.dtype,
    ) -> list:
        """a[bi, 0..T-1, hv] and b[bi, tid, hv] for threads tid < T of live rows (else zeros)."""
        flag = as_flag((slot >= Int32(0)) & (tid < T))
        tb = cutlass.min(tid, Int32(T - 1))
        bi64 = Int64(bi)
        vals = [
            ld16_if(a + (bi64 * a_sb + Int64(i) * a_st + Int64(hv)), flag, dt) for i in range(T)
        ]
        vals.append(ld16_if(b + (bi64 * b_sb + Int64(tb) * b_st + Int64(hv)), flag, dt))
        return vals

    def xb_index(nt: Any, w: Any, part: Any, lane: Any, nparts: int, tproj: bool) -> Any:
        """Where word w (0..15: k-step w // 2, pair w % 2) of part (0 = hi, 1 = lo) of n-tile nt
        of lane's [k^; q^] fragments sits in xb (Int32 words). Default: word-major, lane-minor
        (scalar reads conflict-free). tproj (one n-tile, hi and lo): per k-step and lane the 16
        bytes [hi w0, lo w0, hi w1, lo w1], which are exactly the A fragment of [X hi; X lo] in
        the transposed projection (one 16-byte read per lane and k-step)."""
        if tproj:
            return ((w // 2) * 32 + lane) * 4 + (w % 2) * 2 + part
        return ((nt * nparts + part) * 16 + w) * 32 + lane

    def smem_bfrag(xb: Any, lane: Any, xsplit: bool, tproj: bool = False) -> Any:
        """B-fragment reader of the smem-staged [k^; q^] (bsmem layout, state dtype; the lo
        parts only with the hi/lo split)."""
        nparts = 2 if xsplit else 1

        def word(nt: int, w: int, part: int) -> Any:
            if part == 1 and not xsplit:
                return None
            return xb[xb_index(nt, w, part, lane, nparts, tproj)]

        return word

    def hash_u32(x: Any) -> Any:
        # lowbias32 integer hash (public domain, Chris Wellons): cheap, well mixed.
        x = x ^ (x >> 16)
        x = x * Uint32(0x7FEB352D)
        x = x ^ (x >> 15)
        x = x * Uint32(0x846CA68B)
        return x ^ (x >> 16)

    def sr_pack2(lo: Any, hi: Any, dt: torch.dtype, key: Any) -> Any:
        """Stochastically round two fp32 to a packed 16-bit pair; key seeds the hash."""
        out = []
        for e, x in enumerate((lo, hi)):
            r = hash_u32(key ^ Uint32(0x9E3779B9 * (e + 1) & 0xFFFFFFFF))
            if dt == torch.bfloat16:
                # Add uniform bits below bf16's mantissa, truncate (magnitude rounding).
                h = cute.arch.inline_ptx(
                    "{ .reg .b32 xb, rb, s; .reg .pred pn; mov.b32 xb, {$r0};"
                    " and.b32 rb, {$r1}, 0xffff;"
                    " add.u32 s, xb, rb; testp.notanumber.f32 pn, {$r0};"
                    " @pn mov.b32 s, xb; shr.u32 {$w0}, s, 16; }",
                    write_only_types=[Int32],
                    read_only_args=[Float32(x), Int32(r)],
                )
            else:
                # fp16: truncate toward zero, step one ulp away from zero with probability
                # |x - trunc| / ulp. Non-finite values keep round-to-nearest.
                h = cute.arch.inline_ptx(
                    "{ .reg .f16 lo16, hi16, rn16; .reg .b16 lob, hib;"
                    " .reg .f32 lof, hif, d, u, p, ax, alo;"
                    " .reg .pred fin, up; .reg .b32 rb; .reg .f32 rf;"
                    " cvt.rz.f16.f32 lo16, {$r0}; cvt.rn.f16.f32 rn16, {$r0};"
                    " mov.b16 lob, lo16; add.u16 hib, lob, 1; mov.b16 hi16, hib;"
                    " cvt.f32.f16 lof, lo16; cvt.f32.f16 hif, hi16;"
                    " abs.f32 ax, {$r0}; abs.f32 alo, lof; sub.f32 d, ax, alo;"
                    " abs.f32 u, hif; sub.f32 u, u, alo; div.approx.f32 p, d, u;"
                    " shr.u32 rb, {$r1}, 8; cvt.rn.f32.u32 rf, rb; mul.f32 rf, rf, 0f33800000;"
                    " setp.lt.f32 up, rf, p; testp.finite.f32 fin, {$r0};"
                    " testp.finite.f32 fin, hif; and.pred up, up, fin;"
                    " selp.b16 hib, hib, lob, up; mov.b16 lo16, hib;"
                    " testp.finite.f32 fin, {$r0}; @!fin mov.b16 lo16, rn16;"
                    " { .reg .b16 z; mov.b16 z, lo16; cvt.u32.u16 {$w0}, z; } }",
                    write_only_types=[Int32],
                    read_only_args=[Float32(x), Int32(r)],
                )
            out.append(h)
        return (out[0] & Int32(0xFFFF)) | (out[1] << 16)

    # The one-row prologue in two halves: row zr's cursor-independent loads, then those values
    # into shared memory. Called before the row loop (one row per CTA) or at the start of every
    # row (chain). @cute.jit functions, not closures of the kernel: the DSL does not let a
    # function called inside a run-time loop capture the kernel's values (ks = the kernel object,
    # dims = its shape constants).
    @cute.jit
    def row_act_loads(
        ks, dims, zr, tid, c8, ih, hv, v0, q, k, v, a, b, a_log, dt_bias, q_sb, q_st,
        k_sb, k_st, v_sb, v_st, a_sb, a_st, b_sb, b_st,
    ):  # fmt: skip
        T, BV, NX, XR, VSS, XPARTS = dims
        wq_pre = []
        v_pre = []
        # Cursor-independent loads first (a pad row's activation rows are inside their
        # tensors' storage: reading them is harmless, the values are never used).
        if cutlass.const_expr(ks.vec_qk):
            for pss in cutlass.range_constexpr(XR // 8):
                rq1 = tid // 16 + 8 * pss
                rc0 = cutlass.min(rq1, Int32(NX - 1))
                wq_pre.append(
                    ldg_v4_either(
                        k + (Int64(zr) * k_sb + Int64(rc0) * k_st + Int64(ih * K_DIM + c8)),
                        q
                        + (
                            Int64(zr) * q_sb
                            + Int64(cutlass.max(rc0 - T, Int32(0))) * q_st
                            + Int64(ih * K_DIM + c8)
                        ),
                        rc0 < T,
                        rq1 < NX,
                    )
                )
        for i in cutlass.range_constexpr((T * BV + THREADS - 1) // THREADS):
            ev0 = cutlass.min(tid + THREADS * i, Int32(T * BV - 1))
            v_pre.append(
                ldg_b16(
                    v
                    + (
                        Int64(zr) * v_sb
                        + Int64(ev0 // BV) * v_st
                        + Int64(hv * V_DIM_C + v0 + ev0 % BV)
                    )
                )
            )
        # gates: lane t of warp 0 loads a_t, b_t (others a clamped duplicate)
        tl0 = cutlass.min(tid, Int32(T - 1))
        a_pre = ldg_b16(a + (Int64(zr) * a_sb + Int64(tl0) * a_st + Int64(hv)), True)
        b_pre = ldg_b16(b + (Int64(zr) * b_sb + Int64(tl0) * b_st + Int64(hv)), True)
        alog_pre = ldg_b32(cute.recast_ptr(a_log + Int64(hv), dtype=Int32), True)
        dtb_pre = ldg_b32(cute.recast_ptr(dt_bias + Int64(hv), dtype=Int32), True)
        return wq_pre, v_pre, a_pre, b_pre, alog_pre, dtb_pre

    @cute.jit
    def row_acts_to_smem(
        ks, dims, acts, tid, warp, lane, c8, scale, xs_ptr, xb, vs, gam, beta
    ):  # fmt: skip
        T, BV, NX, XR, VSS, XPARTS = dims
        wq_pre, v_pre, a_pre, b_pre, alog_pre, dtb_pre = acts
        kpk_pre = []
        # The cursor-independent part of phase 1, while the state and windows are in
        # flight: normalised [k^; q^] rows, the v slice and the gates into smem (a pad
        # row does it too: its CTA-local smem is never read).
        if cutlass.const_expr(ks.vec_qk):
            for pss in cutlass.range_constexpr(XR // 8):
                rq0 = tid // 16 + 8 * pss
                kpk_pre.append(
                    qk_rows_to_smem(
                        wq_pre[pss],
                        rq0,
                        cutlass.min(rq0, Int32(NX - 1)) < T,
                        xs_ptr,
                        c8,
                        scale,
                        ks.io,
                        ks.ring,
                        xb if ks.xdirect else None,
                        XPARTS,
                        ks.st,
                        ks.tproj,
                    )  # fmt: skip
                )
        for i in cutlass.range_constexpr((T * BV + THREADS - 1) // THREADS):
            ev0 = tid + THREADS * i
            v_el = Int16(v_pre[i]) if ks.vs16 else cvt_b16(v_pre[i], ks.io)
            if cutlass.const_expr(T * BV >= THREADS * (i + 1)):
                vs[(ev0 // BV) * VSS + ev0 % BV] = v_el
            else:
                if ev0 < T * BV:
                    vs[(ev0 // BV) * VSS + ev0 % BV] = v_el
        if warp == 0:
            gsum0, beta0 = gates_scan(
                cvt_b16(a_pre, ks.io), cvt_b16(b_pre, ks.io), as_f32(alog_pre),
                as_f32(dtb_pre), lane, T,
            )  # fmt: skip
            if lane < T:
                gam[lane] = gsum0
                beta[lane] = beta0
        return kpk_pre

    @cute.jit
    def row_g_words(gc, gc_s0, slot_ld, hv, base, P, tid):
        # the g-row words this thread needs, straight from global memory: g_j (threads
        # < 16) and G* (all), so the window weights exist before phase 1's barrier
        g_row0 = gc + (Int64(slot_ld) * gc_s0 + Int64(hv * RING_SLOTS))
        g_words = []
        for g_idx in (base + cutlass.min(tid, Int32(15)), base + P - Int32(1)):
            g_words.append(
                ldg_b32(cute.recast_ptr(g_row0 + Int64(g_idx & RING_MASK), dtype=Int32), True)
            )
        return g_words

    @cute.jit
    def l2_next_row(
        acts, rings, zf, slot_f, P_f, base_f, has_next, warp, lane, ih, hv, v0, BV, T
    ):  # fmt: skip
        # chain (nextl2): what row zf's prologue loads first (its live k/u window rows, g row,
        # q/k/v rows and gates) asked into L2 by warp 3 when this row is done with the stage, so
        # that the row's first DRAM trip after the row-end barrier hits L2 (a hint: results
        # unchanged). Its state is not: tile 0 is being copied, t1l2 prefetches tile 1.
        q, k, v, a, b, q_sb, q_st, k_sb, k_st, v_sb, v_st, a_sb, a_st, b_sb, b_st = acts
        kc, uc, gc, kc_s0, uc_s0, gc_s0 = rings
        mine = (has_next != Int32(0)) & (slot_f >= Int32(0)) & (warp == Int32(3))
        xpf_row(
            None, kc, uc, gc, None, kc_s0, uc_s0, gc_s0, slot_f, P_f, base_f, mine, mine, mine,
            ih, hv, v0, lane, BV, with_state=False,
        )  # fmt: skip
        # a run-time loop over the tokens (see xpf: unrolled, ptxas hoists all T addresses)
        for t_f in cutlass.range(T, unroll=1):
            xpf_token(
                q, k, v, q_sb, q_st, k_sb, k_st, v_sb, v_st, zf, t_f, mine & (lane == Int32(0)),
                mine, ih, hv, v0, BV,
            )  # fmt: skip
        xpf_gates(a, b, a_sb, a_st, b_sb, b_st, zf, mine, hv, lane, T)

    class GdnDecodeUCacheFlushKernel:
        """One compiled variant: static config in __init__, host @cute.jit __call__, device code."""

        def __init__(
            self,
            T: int,
            H: int,
            HV: int,
            BV: int,
            io_dtype: torch.dtype,
            st_dtype: torch.dtype,
            ring_dtype: torch.dtype,
            stochastic_rounding: bool = False,
            pdl_trigger: bool = False,
            xsplit: bool = True,
            mbp: int = 0,
            bsmem: bool = False,
            late: int = 0,
            persist: bool = False,
            prefetch: int = 0,
            skip: tuple = (),
            vec_qk: bool = False,
            carveout: int = -1,
            flags: "LoadFlags | None" = None,
        ) -> None:
            if flags is None:
                flags = resolve_flags(T, BV, late, persist, bsmem, xsplit)
            assert T_MIN <= T <= T_MAX and HV % H == 0 and BV in (16, 32, 64, 128)
            self.T, self.H, self.HV, self.BV = T, H, HV, BV
            self.NX = 2 * T  # rows of the packed [k^; q^] tile
            self.NXP = 8 if self.NX <= 8 else 16  # padded to MMA n-tiles
            self.NTILE = BV // 16  # 16-row MMA tiles per CTA
            self.TILES_PER_WARP = (self.NTILE + 3) // 4
            # warps for the window scores and the Gram: idle warps when BV < 64
            self.SC_WARP = self.NTILE if self.NTILE < 4 else 0
            self.GR_WARP = (self.SC_WARP + 1) % 4
            # rows of the fp32 [k^; q^] tile in smem: rows NX..NXP-1 are zero, rows >= NXP are
            # never stored (the MMAs use constant zeros for them)
            self.XR = self.NXP
            self.KPW = K_DIM // 2 + 4  # 32-bit words per padded k-window row (16-bit pairs)
            # padded smem rows: the u window (16-bit) for conflict-free ldmatrix (8 rows of 16
            # bytes land on 8 distinct bank quads), v (fp32) for the quad-strided epilogue reads
            self.UWS = BV + 8
            self.DSP = self.NX + 1  # padded row of the projections in smem
            self.VSS = BV + 4
            self.io, self.st, self.ring = io_dtype, st_dtype, ring_dtype
            self.io_c, self.st_c, self.ring_c = (
                _dsl_dtype(d) for d in (io_dtype, st_dtype, ring_dtype)
            )
            self.sr = stochastic_rounding and st_dtype in (torch.bfloat16, torch.float16)
            self.pdl = pdl_trigger
            self.xsplit = xsplit
            self.bsmem = bsmem
            # state tiles per warp whose loads wait until the projection phase (fewer registers
            # live through the prologue; their latency overlaps the first tile's MMAs)
            # late=3: one deferred tile, loaded only after the previous tile's projection and fold
            # (fewest live registers; its load latency is then exposed)
            # late=10 / 13 (bulk): every warp's state tiles go through ONE reused shared-memory
            # stage tile (16 KB at BV=128): tile 0 at entry, each later tile into the same slots
            # once every lane of the warp has read the previous one, so no state register lives
            # across the prologue. Each warp-tile is 4 KB contiguous in the pool and goes by TWO
            # bulk async copies of 2 KB (tile rows 0-7 and 8-15) on the warp's mbarrier: the copy
            # engine moves the bytes (per-thread cp.async of the state cost more than the
            # residency it bought: results/kernel/v9s1-k9; one copy per row ran as a 16-pass ELECT
            # loop: results/kernel/k10). The two halves keep a conflict-free placement (bulk_row:
            # rows 8-15 2 KB + 64 bytes after rows 0-7) by permuting which tile row each MMA row
            # holds: MMA row m <- tile row (m % 2) * 8 + m // 2; phase 4 writes its projections,
            # fold inputs and folded rows under the same permutation. BV=64/128 (every warp owns
            # its tiles). The measured experiments late4-9, 11, 12 live in git history before
            # this cleanup (kernels/NOTES.md).
            self.bulk = late in BULK_LATES
            # late=13: late10 without the fp32 [k; q] tile (xs) and without the fold-fragment copy
            # (kb): phase 1 writes the projection's x fragments itself, the Gram reads them as its
            # A operand, the fold builds its k-window fragments from the window: one CTA barrier
            # fewer (the kb build's). At BV=64 it needs 31.5 KB: 7 CTAs/SM with the hi/lo split.
            # The x fragments need 16-byte q/k rows, the fragments in smem and ring dtype ==
            # state dtype (else it is late10 with the fold's fragments from the window).
            self.xdirect = late == 13 and vec_qk and bsmem and ring_dtype == st_dtype
            self.fold_from_window = late == 13
            # the v slice kept as its raw 16-bit elements (exact; converted where the epilogue
            # reads them): -1056 bytes at T=4, which late10 needs for 5 CTAs/SM (45.6 KB +
            # 1 KiB reserved per CTA did not fit 227 KiB five times: ncu, results/kernel/k13)
            self.vs16 = self.bulk
            self.late_seq = late == 3
            # state tiles per warp loaded late (registers) or staged (bulk: all of them)
            late_tiles = min(1 if late == 3 else late, self.TILES_PER_WARP)
            self.late = self.TILES_PER_WARP if self.bulk else late_tiles
            self.mbp = mbp
            # persistent CTAs: grid z = nprog < B programs, each walking rows z0, z0 + nprog, ...
            # and prefetching the next row's cursors and state tiles during the current row
            self.persist = persist
            # bulk modes with persistent CTAs (BV=128): each row runs the one-row prologue at its
            # own start (q/k/v and gate loads, windows by cp.async, the rows into smem) and the
            # next row's first state tile is copied into the stage as soon as this row has read
            # it for the last time, so that copy (and the next cursors) fly during this row's
            # epilogue; no second window buffer (shared memory, hence CTAs/SM, unchanged)
            self.chain = persist and self.bulk
            # persistent CTAs also prefetch the next row's ring windows (k, u, g) into a second
            # shared-memory buffer with cp.async (no registers while in flight)
            self.pf = prefetch >= 1 and persist and not self.chain
            # ... and its q/k/v rows too (cp.async; needs 16-byte aligned activation rows) plus
            # its a/b gates (registers)
            self.pf_act = prefetch >= 2 and persist and not self.chain
            # q/k rows 16-byte aligned (checked on the host): 16 threads per row load 8 elements
            # each with one vector load, the L2 norms reduce over those 16 lanes in registers,
            # and the k ring append is one 16-byte store per thread (no norm pass over smem)
            self.vec_qk = vec_qk and not self.pf_act
            # one row per CTA: every load that does not depend on the cursors (q/k rows, the v
            # slice, the gates) is issued before the cursors return, and the ring windows and the
            # g row go by cp.async right after them: two dependent DRAM trips per CTA, not ~five
            # (chain: the same prologue, at the start of every row)
            self.early = not persist or self.chain
            self.skip = frozenset(
                skip
            )  # timing knock-outs (results are wrong): never in production
            # `padN` knock-out: N more bytes of shared memory per CTA (nothing uses them), to set
            # the CTAs per SM that shared memory allows in residency curves (with `alias`)
            self.pad_bytes = _skip_number(skip, "pad")
            # `stagN` timing experiment (session 25): the odd CTAs among the first STAG_CTAS
            # sleep N ns before their first load, so that the CTAs resident on one SM do not
            # all reach phase 5 (no loads of their own in flight) at the same moment. Results
            # are unchanged; it is a SKIP token because it only exists to be timed.
            self.stag_ns = _skip_number(skip, "stag")
            # preferred shared-memory carve-out in percent (-1: the driver's choice). Without
            # launch bounds the driver may pick a carve-out that holds fewer CTAs than fit in
            # 228 KiB (the removed late7, 45.6 KB: 196 KiB, 4 CTAs/SM; ncu, results/kernel/v9s2-k9)
            self.carveout = carveout
            # the load-order / epilogue knobs, each already reduced to the modes it applies to
            # (resolve_flags: the one place those rules live, so the compile cache's key and
            # this code cannot disagree; what each knob does is documented there)
            self.t1early = flags.t1early
            self.t1l2 = flags.t1l2
            self.wvearly = flags.wvearly
            self.xpf = flags.xpf
            self.dsreg = flags.dsreg
            self.nobar = flags.nobar
            self.actfirst = flags.actfirst
            self.nextl2 = flags.nextl2
            self.tepi = flags.tepi
            self.ostage = flags.ostage
            self.stef = flags.stef
            self.afe = flags.afe
            self.tproj = flags.tproj

        @cute.jit
        def __call__(
            self,
            q: cute.Pointer,
            k: cute.Pointer,
            v: cute.Pointer,
            a: cute.Pointer,
            b: cute.Pointer,
            a_log: cute.Pointer,
            dt_bias: cute.Pointer,
            pool: cute.Pointer,
            kc: cute.Pointer,
            uc: cute.Pointer,
            gc: cute.Pointer,
            idx: cute.Pointer,
            hist: cute.Pointer,
            cbase: cute.Pointer,
            out: cute.Pointer,
            q_sb: Int64,
            q_st: Int64,
            k_sb: Int64,
            k_st: Int64,
            v_sb: Int64,
            v_st: Int64,
            a_sb: Int64,
            a_st: Int64,
            b_sb: Int64,
            b_st: Int64,
            o_sb: Int64,
            o_st: Int64,
            pool_s0: Int64,
            kc_s0: Int64,
            uc_s0: Int64,
            gc_s0: Int64,
            batch: Int32,
            nprog: Int32,
            flush_min: Int32,
            scale: Float32,
            seed: Int32,
            stream: cuda_drv.CUstream,
        ) -> None:
            self.kernel(
                q,
                k,
                v,
                a,
                b,
                a_log,
                dt_bias,
                pool,
                kc,
                uc,
                gc,
                idx,
                hist,
                cbase,
                out,
                q_sb,
                q_st,
                k_sb,
                k_st,
                v_sb,
                v_st,
                a_sb,
                a_st,
                b_sb,
                b_st,
                o_sb,
                o_st,
                pool_s0,
                kc_s0,
                uc_s0,
                gc_s0,
                batch,
                nprog,
                flush_min,
                scale,
                seed,
            ).launch(
                grid=(V_DIM_C // self.BV, self.HV, nprog),
                block=(THREADS, 1, 1),
                stream=stream,
                min_blocks_per_mp=self.mbp,
                preferred_smem_carveout=self.carveout if self.carveout >= 0 else None,
            )

        @cute.kernel
        def kernel(
            self,
            q: cute.Pointer,
            k: cute.Pointer,
            v: cute.Pointer,
            a: cute.Pointer,
            b: cute.Pointer,
            a_log: cute.Pointer,
            dt_bias: cute.Pointer,
            pool: cute.Pointer,
            kc: cute.Pointer,
            uc: cute.Pointer,
            gc: cute.Pointer,
            idx: cute.Pointer,
            hist: cute.Pointer,
            cbase: cute.Pointer,
            out: cute.Pointer,
            q_sb: Int64,
            q_st: Int64,
            k_sb: Int64,
            k_st: Int64,
            v_sb: Int64,
            v_st: Int64,
            a_sb: Int64,
            a_st: Int64,
            b_sb: Int64,
            b_st: Int64,
            o_sb: Int64,
            o_st: Int64,
            pool_s0: Int64,
            kc_s0: Int64,
            uc_s0: Int64,
            gc_s0: Int64,
            batch: Int32,
            nprog: Int32,
            flush_min: Int32,
            scale: Float32,
            seed: Int32,
        ) -> None:
            trace_flags["stef"] = self.stef
            T, NX, NXP, BV, UWS, VSS, DSP = (
                self.T,
                self.NX,
                self.NXP,
                self.BV,
                self.UWS,
                self.VSS,
                self.DSP,
            )
            XR, KPW = self.XR, self.KPW
            HPG = self.HV // self.H
            tid = cute.arch.thread_idx()[0]
            vblk, hv, z0 = cute.arch.block_idx()
            if cutlass.const_expr(self.pdl):
                cute.arch.griddepcontrol_launch_dependents()
            if cutlass.const_expr(self.stag_ns > 0):
                cta = (hv + Int32(self.HV) * z0) * Int32(V_DIM_C // BV) + vblk
                if cta < Int32(STAG_CTAS):
                    if cta % 2 == 1:
                        nanosleep(Int32(self.stag_ns))
            ih = hv // HPG
            v0 = vblk * BV
            warp = tid // 32
            lane = tid % 32
            # Thread (g4, c4) of a warp holds rows g4 and g4 + 8 of its 16-row state tile, columns
            # c4*8 + 32 i + 0..7 (i < 4): exactly its mma.sync A fragments after a K-permutation
            # that the B operand repeats. Warps without a tile (BV < 64) load a duplicate tile and
            # never use it.
            g4 = lane // 4
            c8 = (tid % 16) * 8  # vec_qk: this thread's 8 elements of its [k; q] row
            c4 = lane % 4
            n_early = self.TILES_PER_WARP - self.late
            skip_state = "state" in self.skip

            smem = SmemAllocator()
            NBUF = 2 if self.pf else 1  # window buffers (the prefetching CTA fills the other one)
            # timing knock-out `alias` (results are wrong): the seven large buffers below share
            # one region, so shared memory stops limiting the CTAs per SM; it measures what a
            # kernel whose registers and shared memory both allow 7 CTAs/SM would gain
            # hi (and lo, with the split) 16-bit fragments of [k^; q^]: 4 KB at T=4, 2 KB without
            # the split (GDN_UCACHE_XSPLIT=0)
            XPARTS = 2 if self.xsplit else 1
            n_xb = (NXP // 8) * XPARTS * 16 * 32 if self.bsmem else 4
            big_bytes = max(
                XR * K_DIM * 4, NBUF * 16 * 2 * KPW * 2, NBUF * 16 * UWS * 2, BV * DSP * 4,
                n_xb * 4, 16 * 2 * 32 * 4, T * VSS * 4,
            )  # fmt: skip
            alias_region = (
                smem.allocate_array(Int32, big_bytes // 4 + 4, byte_alignment=16)
                if "alias" in self.skip
                else None
            )

            def big(dt: Any, n: int) -> Any:
                if cutlass.const_expr(alias_region is None):
                    return smem.allocate_array(dt, n, byte_alignment=16)
                return cute.recast_ptr(alias_region, dtype=dt)

            # Shared memory is kept small (~29 KB at BV=128, T=4) so that it never limits the CTAs
            # per SM below what the registers allow: the windows stay in their 16-bit ring dtype.
            xs_ptr = big(Float32, 4 if self.xdirect else XR * K_DIM)
            xs = cute.make_tensor(xs_ptr, cute.make_layout(XR * K_DIM))
            kc16 = big(self.ring_c, NBUF * 16 * 2 * KPW)
            uw16 = big(self.ring_c, NBUF * 16 * UWS)
            graw = smem.allocate_array(Float32, NBUF * RING_SLOTS, byte_alignment=16)
            NBUFA = 2 if self.pf_act else 0  # raw activation buffers (q/k rows, v slice)
            qk16 = smem.allocate_array(self.io_c, max(NBUFA * 2 * T * K_DIM, 8), byte_alignment=16)
            v16 = smem.allocate_array(self.io_c, max(NBUFA * T * BV, 8), byte_alignment=16)
            wv = cute.make_tensor(
                smem.allocate_array(Float32, 16, byte_alignment=16), cute.make_layout(16)
            )
            gam = cute.make_tensor(
                smem.allocate_array(Float32, 8, byte_alignment=16), cute.make_layout(8)
            )
            beta = cute.make_tensor(
                smem.allocate_array(Float32, 8, byte_alignment=16), cute.make_layout(8)
            )
            nrm = cute.make_tensor(
                smem.allocate_array(Float32, 4 * NXP, byte_alignment=16), cute.make_layout(4 * NXP)
            )
            sw = cute.make_tensor(
                smem.allocate_array(Float32, 16 * NX, byte_alignment=16), cute.make_layout(16 * NX)
            )
            amat = cute.make_tensor(
                smem.allocate_array(Float32, T * T, byte_alignment=16), cute.make_layout(T * T)
            )
            cmat = cute.make_tensor(
                smem.allocate_array(Float32, T * T, byte_alignment=16), cute.make_layout(T * T)
            )
            # projections S0 x_n per row, read back in the epilogue's MMA layout (holding them in
            # registers across the fold cost ~36 registers in the register modes; the bulk modes
            # can with dsreg: 72 registers, 8 bytes of spill)
            n_ds = 4 if self.dsreg else BV * DSP
            ds_ptr = big(Float32, n_ds)
            ds = cute.make_tensor(ds_ptr, cute.make_layout(n_ds))
            # M = (I + A)^-1 diag(beta): the token coupling of the solve as one T x T matrix
            mmat = cute.make_tensor(
                smem.allocate_array(Float32, T * T, byte_alignment=16), cute.make_layout(T * T)
            )
            # afe: L (NX x NX), the outputs' coefficients on e^{G*} P: lmat[n * NX + c] (allocated
            # only with afe, so that the other configurations keep their shared-memory layout and
            # PTX; ds stands in, never touched)
            lmat = (
                cute.make_tensor(
                    smem.allocate_array(Float32, NX * NX, byte_alignment=16),
                    cute.make_layout(NX * NX),
                )
                if self.afe
                else ds
            )
            xb_ptr = big(Int32, n_xb)
            xb = cute.make_tensor(xb_ptr, cute.make_layout(n_xb))
            n_kb = 4 if self.fold_from_window else 16 * 2 * 32
            kb = cute.make_tensor(big(Int32, n_kb), cute.make_layout(n_kb))
            vs = cute.make_tensor(
                big(Int16, T * VSS) if self.vs16 else big(Float32, T * VSS),
                cute.make_layout(T * VSS),
            )
            # bulk: the reused stage tile, one per warp (bulk_row's layout: 16 rows x 256 bytes
            # plus the odd rows' 64-byte shift)
            stage = smem.allocate_array(
                Int32,
                4 * BULK_WARP_WORDS if self.bulk else 4,
                byte_alignment=128 if self.bulk else 16,
            )
            # one mbarrier per warp (its tile's bulk copies complete on it)
            mbar_w = smem.allocate_array(Int64, 4, byte_alignment=8) + warp if self.bulk else None
            if cutlass.const_expr(self.pad_bytes > 0):
                smem.allocate_array(Int32, self.pad_bytes // 4, byte_alignment=16)

            # The three cursors are [B] tensors (real for pad rows too): load them together.
            if cutlass.const_expr(self.early):
                slot = ldg_b32(idx + z0)
                P = ldg_b32(hist + z0)
                base = ldg_b32(cbase + z0)
                if cutlass.const_expr(self.xpf > 0):
                    # the cursors of row z0 + xpf (the same trip as ours; clamped in bounds)
                    zf = z0 + Int32(self.xpf)
                    has_f = zf < batch
                    zfc = cutlass.min(zf, batch - Int32(1))
                    # pinned (volatile): otherwise ptxas sinks them into the branch that uses them
                    # (register modes, without actfirst), where warp 3 would then wait a trip
                    slot_f = ldg_b32(idx + zfc, True)
                    P_f = ldg_b32(hist + zfc, True)
                    base_f = ldg_b32(cbase + zfc, True)
                if cutlass.const_expr(self.actfirst):
                    block_boundary(batch)  # the cursor loads first: they start trip 1 (>= 1)
            else:
                slot = cute.arch.load(idx + z0, Int32)
                P = cute.arch.load(hist + z0, Int32)
                base = cute.arch.load(cbase + z0, Int32)

            ab_cur = [Float32(0.0)]
            dims = (T, BV, NX, XR, VSS, XPARTS)
            # (nextl2) the activation and ring tensors as l2_next_row takes them
            nx_acts = (q, k, v, a, b, q_sb, q_st, k_sb, k_st, v_sb, v_st, a_sb, a_st, b_sb, b_st)
            nx_rings = (kc, uc, gc, kc_s0, uc_s0, gc_s0)
            # one row per CTA: the one-row prologue runs once, here, before the row loop (chain runs
            # it at the start of every row)
            prologue_at_entry = self.early and not self.chain
            acts_pre = None
            if cutlass.const_expr(prologue_at_entry):
                acts_pre = row_act_loads(
                    self, dims, z0, tid, c8, ih, hv, v0, q, k, v, a, b, a_log, dt_bias, q_sb,
                    q_st, k_sb, k_st, v_sb, v_st, a_sb, a_st, b_sb, b_st,
                )  # fmt: skip
                if cutlass.const_expr(self.actfirst):
                    # End ptxas's entry block here (a branch it cannot remove; never taken): it
                    # then issues every load above before the first instruction below. Without
                    # it, it issues the cursor loads, then the window copies, which wait for the
                    # cursors, and only then the q/k/v and gate loads (SASS of v5b and late13):
                    # their DRAM trip starts one trip late and the prologue waits for it
                    # (v5b: 9 % of the stall samples at their first use, sass-s10).
                    block_boundary(nprog)  # programs along the batch: >= 1
            if cutlass.const_expr(not self.persist and not self.early):
                # Pad rows retire the whole CTA before touching anything row-keyed (vLLM may pass
                # phantom as_strided rows for them).
                cute.arch.inline_ptx("exit;", predicate=slot < Int32(0))
            # (early: no exit, which ptxas treats as a wall that the early loads sink below; a
            # pad row's state and window loads are predicated off and its work is skipped)

            # ---- phase 0: issue this thread's 16-byte state loads first; they stay in flight
            # through the whole prologue (a persistent CTA issues the next row's loads right
            # after this row's projection, so they fly during its epilogue). Pad rows load slot
            # 0's tiles (never used): loads stay unconditional and in bounds.
            slot_ld = (
                cutlass.max(slot, Int32(0))
                if cutlass.const_expr(self.persist or self.early)
                else slot
            )
            st_head0 = pool + (Int64(slot_ld) * pool_s0 + Int64(hv * V_DIM_C * K_DIM))
            sa_cur = [
                load_state_tile(
                    st_head0,
                    v0,
                    warp,
                    ti,
                    self.NTILE,
                    g4,
                    c4,
                    skip_state,
                    slot >= Int32(0) if self.early else None,
                )  # fmt: skip
                for ti in range(n_early)
            ]
            if cutlass.const_expr(self.pf_act):
                issue_acts(
                    q, k, v, q_sb, q_st, k_sb, k_st, v_sb, v_st, z0, slot >= Int32(0), ih, hv,
                    v0, tid, qk16, v16, T, BV,
                )  # fmt: skip
                ab_cur = load_gates(a, b, a_sb, a_st, b_sb, b_st, z0, slot, hv, tid, T, self.io)
            if cutlass.const_expr(self.pf or prologue_at_entry):
                issue_windows(
                    kc, uc, gc, kc_s0, uc_s0, gc_s0, slot, P, base, ih, hv, v0, tid,
                    kc16, uw16, graw, BV, KPW,
                )  # fmt: skip
            g_pre = []
            if cutlass.const_expr(self.wvearly and prologue_at_entry):
                g_pre = row_g_words(gc, gc_s0, slot_ld, hv, base, P, tid)
            if cutlass.const_expr(self.bulk):
                if lane == 0:
                    cute.arch.mbarrier_init(mbar_w, 1)
                    cute.arch.mbarrier_init_fence()
                cute.arch.sync_warp()
                if cutlass.const_expr(not skip_state):
                    # tile 0 at entry (n_early = 0: every tile is staged); chain: live rows only
                    # (a pad row consumes no mbarrier phase), lane 32 = no lane copies
                    lane_t0 = lane
                    if cutlass.const_expr(self.chain):
                        lane_t0 = cutlass.select_(slot >= Int32(0), lane, Int32(32))
                    bulk_stage_tile(st_head0, stage, mbar_w, v0, warp, 0, self.NTILE, lane_t0)
                    if cutlass.const_expr(self.t1l2):
                        for ti in cutlass.range_constexpr(1, self.TILES_PER_WARP):
                            if cutlass.const_expr(self.NTILE >= 4 * (ti + 1)):
                                l2_prefetch_tile(st_head0, v0, warp, ti, self.NTILE, lane_t0)
            if cutlass.const_expr(self.xpf > 0):
                # row z0 + xpf's bytes into L2 by warp 3, after our own copies were issued
                # (they are on our critical path, these are not). Here, not at entry: a branch
                # there ends ptxas's entry block before our cursors' first use, and it then
                # issued our cursor loads after the activation loads (SASS): one trip later.
                # Row z0 + xpf's cursors are pinned loads: they leave with the loads above.
                # Shared bytes are asked for once: u window and gates by a value head's first
                # CTA, k window and q/k rows by a key head's first CTA (as the ring appends).
                if warp == 3:
                    live_f = has_f & (slot_f >= Int32(0))
                    lead_v = vblk == Int32(0)
                    lead_k = lead_v & ((hv % HPG) == Int32(0))
                    xpf_row(
                        pool, kc, uc, gc, pool_s0, kc_s0, uc_s0, gc_s0, slot_f, P_f, base_f,
                        live_f, lead_v, lead_k, ih, hv, v0, lane, BV,
                    )  # fmt: skip
                    # a run-time loop over the tokens: unrolled, ptxas hoisted all 3 T
                    # addresses (late13 with t1early: 72 -> 100 registers)
                    for t_f in cutlass.range(T, unroll=1):
                        xpf_token(
                            q, k, v, q_sb, q_st, k_sb, k_st, v_sb, v_st, zfc, t_f,
                            live_f & (lane == 0), lead_k, ih, hv, v0, BV,
                        )  # fmt: skip
                    xpf_gates(a, b, a_sb, a_st, b_sb, b_st, zfc, live_f & lead_v, hv, lane, T)
            kpk_pre = []
            if cutlass.const_expr(prologue_at_entry):
                kpk_pre = row_acts_to_smem(
                    self, dims, acts_pre, tid, warp, lane, c8, scale, xs_ptr, xb, vs, gam, beta
                )
            # A persistent CTA walks rows z0, z0 + nprog, ... (nprog = grid z); otherwise one row.
            n_items = Int32(1)
            if cutlass.const_expr(self.persist):
                n_items = (batch - z0 + nprog - Int32(1)) // nprog
            for it in cutlass.range(n_items, unroll=1):
                bi = z0 + it * nprog
                nslot, nP, nbase = slot, P, base
                if cutlass.const_expr(self.persist):
                    # next row's cursors now: their DRAM trip overlaps this row's work
                    bn = cutlass.min(bi + nprog, batch - Int32(1))
                    nslot = cute.arch.load(idx + bn, Int32)
                    nP = cute.arch.load(hist + bn, Int32)
                    nbase = cute.arch.load(cbase + bn, Int32)
                kpk_row = kpk_pre
                g_words = g_pre
                has_next = Int32(0)
                if cutlass.const_expr(self.chain):
                    # the one-row prologue for row bi (its tile 0 is in flight since the previous
                    # row's last stage read, or since entry)
                    has_next = as_flag(it + Int32(1) < n_items)  # (no wait on the next cursors)
                    acts_row = row_act_loads(
                        self, dims, bi, tid, c8, ih, hv, v0, q, k, v, a, b, a_log, dt_bias, q_sb,
                        q_st, k_sb, k_st, v_sb, v_st, a_sb, a_st, b_sb, b_st,
                    )  # fmt: skip
                    issue_windows(
                        kc, uc, gc, kc_s0, uc_s0, gc_s0, slot, P, base, ih, hv, v0, tid,
                        kc16, uw16, graw, BV, KPW,
                    )  # fmt: skip
                    if cutlass.const_expr(self.wvearly):
                        g_words = row_g_words(
                            gc, gc_s0, cutlass.max(slot, Int32(0)), hv, base, P, tid
                        )
                    kpk_row = row_acts_to_smem(
                        self, dims, acts_row, tid, warp, lane, c8, scale, xs_ptr, xb, vs, gam, beta
                    )
                sa_nxt = sa_cur
                ab_nxt = ab_cur
                # this row's window buffers: the k window as 16-bit elements and as 32-bit pairs
                # (the MMA A words), the u window likewise, the g row (prefetch mode)
                buf = it % 2 if cutlass.const_expr(self.pf) else 0
                kc16_i = kc16 + buf * (16 * 2 * KPW)
                uw16_i = uw16 + buf * (16 * UWS)
                graw_i = graw + buf * RING_SLOTS
                kcs_i = cute.make_tensor(kc16_i, cute.make_layout(16 * 2 * KPW))
                kcw_i = cute.make_tensor(
                    cute.recast_ptr(kc16_i, dtype=Int32), cute.make_layout(16 * KPW)
                )
                uws_i = cute.make_tensor(uw16_i, cute.make_layout(16 * UWS))
                uww_i = cute.make_tensor(
                    cute.recast_ptr(uw16_i, dtype=Int32), cute.make_layout(8 * UWS)
                )
                gws_i = cute.make_tensor(graw_i, cute.make_layout(RING_SLOTS))
                qk_i = cute.make_tensor(
                    qk16 + buf * (2 * T * K_DIM), cute.make_layout(2 * T * K_DIM)
                )
                v16_i = cute.make_tensor(v16 + buf * (T * BV), cute.make_layout(T * BV))
                if cutlass.const_expr(self.pf):
                    cute.arch.cp_async_wait_group(0)  # this row's windows have landed ...
                    cute.arch.sync_threads()  # ... for every thread's copies
                if slot >= Int32(0):
                    is_flush = P >= flush_min
                    slot64 = Int64(slot)
                    st_head = pool + (slot64 * pool_s0 + Int64(hv * V_DIM_C * K_DIM))
                    sa_tiles = list(sa_cur)

                    # G* = cumulative log-decay of the last live window row (0 when the window is
                    # empty).
                    g_row = gc + (slot64 * gc_s0 + Int64(hv * RING_SLOTS))
                    g_star = Float32(0.0)
                    eg_star = Float32(1.0)
                    if cutlass.const_expr(not self.early):  # (early: after phase 1's barrier)
                        if P > Int32(0):
                            if cutlass.const_expr(self.pf):
                                g_star = gws_i[(base + P - 1) & RING_MASK]
                            else:
                                g_star = cute.arch.load(
                                    g_row + Int64((base + P - 1) & RING_MASK), Float32
                                )
                        eg_star = cute.math.exp(g_star, fastmath=True)

                    # ---- phase 1: activations, windows, gates -> smem ---------------------------
                    kc_head = kc + (slot64 * kc_s0 + Int64(ih * RING_SLOTS * K_DIM))
                    q_row = q + (Int64(bi) * q_sb + Int64(ih * K_DIM + tid))
                    k_row = k + (Int64(bi) * k_sb + Int64(ih * K_DIM + tid))
                    if cutlass.const_expr(self.vec_qk):
                        # row r = tid // 16 (+ 8 per pass) of [k; q], elements c8 .. c8 + 7
                        k_appends = (vblk == 0) & (hv % HPG == 0)
                        for pss in cutlass.range_constexpr(XR // 8):
                            rq = tid // 16 + 8 * pss
                            rc = cutlass.min(rq, Int32(NX - 1))
                            is_k = rc < T
                            live_r = rq < NX
                            if cutlass.const_expr(self.early):
                                kw = kpk_row[pss]  # (normalised in the prologue)
                            else:
                                wq = ldg_v4_either(
                                    k
                                    + (
                                        Int64(bi) * k_sb + Int64(rc) * k_st + Int64(ih * K_DIM + c8)
                                    ),
                                    q
                                    + (
                                        Int64(bi) * q_sb
                                        + Int64(cutlass.max(rc - T, Int32(0))) * q_st
                                        + Int64(ih * K_DIM + c8)
                                    ),
                                    is_k,
                                    live_r,
                                )
                                kw = qk_rows_to_smem(
                                    wq, rq, is_k, xs_ptr, c8, scale, self.io, self.ring
                                )
                            if k_appends & is_k & live_r:
                                stg_v4(
                                    cute.recast_ptr(
                                        kc_head + Int64(((base + P + rc) & RING_MASK) * K_DIM + c8),
                                        dtype=Int32,
                                    ),
                                    kw,
                                )
                    for r in cutlass.range_constexpr(0 if self.vec_qk else XR):
                        if cutlass.const_expr(r < NX):
                            if cutlass.const_expr(self.pf_act):
                                x = Float32(qk_i[r * K_DIM + tid])  # k rows, then q rows
                            elif cutlass.const_expr(r < T):
                                x = ld16(k_row + Int64(r) * k_st, self.io)
                            else:
                                x = ld16(q_row + Int64(r - T) * q_st, self.io)
                            xs[r * K_DIM + tid] = x
                            ss = x * x
                            for o in cutlass.range_constexpr(5):
                                ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=1 << o)
                            if lane == 0:
                                nrm[warp * NXP + r] = ss
                        else:
                            xs[r * K_DIM + tid] = Float32(0.0)

                    uc_head = uc + (slot64 * uc_s0 + Int64(hv * RING_SLOTS * V_DIM_C) + Int64(v0))
                    if cutlass.const_expr(not (self.pf or self.early)):  # else cp.async
                        for i in cutlass.range_constexpr(2):
                            ci = tid + 128 * i
                            j = ci // 16
                            col = (ci % 16) * 8
                            if j < P:
                                w = ldg_v4(
                                    cute.recast_ptr(
                                        kc_head + Int64(((base + j) & RING_MASK) * K_DIM + col),
                                        dtype=Int32,
                                    )
                                )
                                for e in cutlass.range_constexpr(4):
                                    kcw_i[j * KPW + col // 2 + e] = w[e]
                            else:
                                for e in cutlass.range_constexpr(4):
                                    kcw_i[j * KPW + col // 2 + e] = Int32(0)

                        # u window: 16 rows x BV columns in 16-byte chunks of 8 (2 * BV chunks)
                        for i in cutlass.range_constexpr((2 * BV + THREADS - 1) // THREADS):
                            ch_ = tid + THREADS * i
                            if ch_ < 2 * BV:
                                j = ch_ // (BV // 8)
                                col = (ch_ % (BV // 8)) * 8
                                if j < P:
                                    w = ldg_v4(
                                        cute.recast_ptr(
                                            uc_head
                                            + Int64(((base + j) & RING_MASK) * V_DIM_C + col),
                                            dtype=Int32,
                                        )
                                    )
                                    for e in cutlass.range_constexpr(4):
                                        uww_i[(j * UWS + col) // 2 + e] = w[e]
                                else:
                                    for e in cutlass.range_constexpr(4):
                                        uww_i[(j * UWS + col) // 2 + e] = Int32(0)

                    if cutlass.const_expr(not self.early):  # (early: after phase 1's barrier)
                        if tid < 16:
                            wj = Float32(0.0)
                            if tid < P:
                                if cutlass.const_expr(self.pf):
                                    gj = gws_i[(base + tid) & RING_MASK]
                                else:
                                    gj = cute.arch.load(
                                        g_row + Int64((base + tid) & RING_MASK), Float32
                                    )
                                wj = cute.math.exp(g_star - gj, fastmath=True)
                            wv[tid] = wj

                    if cutlass.const_expr(not self.early):
                        if warp == 0:
                            # (early: done in the prologue) lane t: gamma_t, beta_t; g ring append
                            tl = cutlass.min(lane, Int32(T - 1))
                            if cutlass.const_expr(self.pf_act):
                                ai = select_token(ab_cur, tl, T)
                                bt = ab_cur[T]
                            else:
                                ai = ld16(
                                    a + (Int64(bi) * a_sb + Int64(tl) * a_st + Int64(hv)), self.io
                                )
                                bt = ld16(
                                    b + (Int64(bi) * b_sb + Int64(tl) * b_st + Int64(hv)), self.io
                                )
                            gsum, beta_t = gates_scan(
                                ai,
                                bt,
                                cute.arch.load(a_log + Int64(hv), Float32),
                                cute.arch.load(dt_bias + Int64(hv), Float32),
                                lane,
                                T,
                            )
                            if lane < T:
                                gam[lane] = gsum
                                beta[lane] = beta_t
                                if vblk == 0:
                                    gt = gsum
                                    if not is_flush:
                                        gt = gt + g_star
                                    cute.arch.store(
                                        g_row + Int64((base + P + lane) & RING_MASK), gt
                                    )

                    v_row = v + (Int64(bi) * v_sb + Int64(hv * V_DIM_C) + Int64(v0))
                    for i in cutlass.range_constexpr(
                        0 if self.early else (T * BV + THREADS - 1) // THREADS
                    ):
                        e_ = tid + THREADS * i
                        if e_ < T * BV:
                            t_ = e_ // BV
                            lv = e_ % BV
                            if cutlass.const_expr(self.pf_act):
                                vs[t_ * VSS + lv] = Float32(v16_i[e_])
                            else:
                                vs[t_ * VSS + lv] = ld16(
                                    v_row + (Int64(t_) * v_st + Int64(lv)), self.io
                                )

                    if cutlass.const_expr(self.early):
                        # the windows and the g row (entry)
                        cute.arch.cp_async_wait_group(0)
                    if cutlass.const_expr(self.wvearly):
                        # G* and the window weights from the g words loaded at entry, before this
                        # barrier: it orders wv for the scores and the fold (no barrier of its own)
                        if P > Int32(0):
                            g_star = as_f32(g_words[1])
                        eg_star = cute.math.exp(g_star, fastmath=True)
                        if tid < 16:
                            wj = Float32(0.0)
                            if tid < P:
                                wj = cute.math.exp(g_star - as_f32(g_words[0]), fastmath=True)
                            wv[tid] = wj
                    cute.arch.sync_threads()
                    if cutlass.const_expr(self.early):
                        if cutlass.const_expr(not self.wvearly):
                            # G* (0 for an empty window), the window weights w_j = e^{G* - g_j}
                            # (read after the next barrier) and the g ring append, from the smem
                            # g row
                            if P > Int32(0):
                                g_star = gws_i[(base + P - 1) & RING_MASK]
                            eg_star = cute.math.exp(g_star, fastmath=True)
                            if tid < 16:
                                wj = Float32(0.0)
                                if tid < P:
                                    wj = cute.math.exp(
                                        g_star - gws_i[(base + tid) & RING_MASK], fastmath=True
                                    )
                                wv[tid] = wj
                        if vblk == 0:
                            if tid < T:
                                gt = gam[tid]
                                if not is_flush:
                                    gt = gt + g_star
                                cute.arch.store(g_row + Int64((base + P + tid) & RING_MASK), gt)
                        if cutlass.const_expr(not self.bsmem and not self.wvearly):
                            cute.arch.sync_threads()  # wv before the scores (bsmem has a barrier)

                    # ---- phase 2: L2 norms; ring appends of k (one CTA per key head) and g ------
                    for r in cutlass.range_constexpr(0 if self.vec_qk else NX):
                        tot = nrm[r] + nrm[NXP + r] + nrm[2 * NXP + r] + nrm[3 * NXP + r]
                        inv = cute.math.rsqrt(tot + Float32(EPS), fastmath=True)
                        if cutlass.const_expr(r >= T):
                            inv = inv * scale
                        xs[r * K_DIM + tid] = xs[r * K_DIM + tid] * inv
                    if cutlass.const_expr(not self.vec_qk):
                        if vblk == 0:
                            if hv % HPG == 0:
                                for t_ in cutlass.range_constexpr(T):
                                    kv = xs[t_ * K_DIM + tid]
                                    st16(
                                        kc_head
                                        + Int64(((base + P + t_) & RING_MASK) * K_DIM + tid),
                                        kv,
                                        self.ring,
                                    )
                        cute.arch.sync_threads()  # (with vec_qk, phase 1 did all of it)

                    # ---- phase 3: B fragments of [k^; q^]; window scores and Grams (mma.sync) ---
                    # Thread (g4, c4) holds x_n[c4*8 + 32 i + 0..7] for n = nt*8 + g4 (the
                    # K-permutation of its state fragments), packed in the state dtype (and the
                    # ring dtype if different).
                    if is_flush and cutlass.const_expr(
                        "fold" not in self.skip and not self.fold_from_window
                    ):
                        # Fold B fragments KC[j, col] packed once per CTA in fragment order (lane-
                        # minor, conflict-free reads): word (t16, half, lane) = {KC[j0][p], KC[j0 +
                        # 1][p]} with j0 = 2 c + 8 half and p the column of n-tile t16 for lane (g,
                        # c).
                        for kit in cutlass.range_constexpr(16 * 2 * 32 // THREADS):
                            kidx = tid + THREADS * kit
                            kl = kidx % 32
                            khalf = (kidx // 32) % 2
                            kt = kidx // 64
                            kj = 2 * (kl % 4) + 8 * khalf
                            kg = kl // 4
                            kpc = (kg // 2) * 8 + 32 * (kt // 4) + 2 * (kt % 4) + (kg % 2)
                            kb[kidx] = pack2(
                                Float32(kcs_i[kj * 2 * KPW + kpc]),
                                Float32(kcs_i[(kj + 1) * 2 * KPW + kpc]),
                                self.ring,
                            )
                        cute.arch.sync_threads()

                    if cutlass.const_expr(self.xdirect):
                        # phase 1 wrote the fragments (its barrier orders them); this barrier,
                        # the build's in the other modes, orders the window weights (wv, threads
                        # < 16 after phase 1's barrier) before the scores and the fold read them
                        # (wvearly: written before phase 1's barrier, which orders them)
                        if cutlass.const_expr(not self.wvearly):
                            cute.arch.sync_threads()
                        bx = None
                    elif cutlass.const_expr(self.bsmem):
                        # Fragments staged once per CTA in smem (word-major, lane-minor: conflict-
                        # free), instead of 16-32 registers per thread for the whole projection.
                        for bit in cutlass.range_constexpr(n_xb // THREADS):
                            eidx = tid + THREADS * bit
                            ln = eidx % 32
                            wd_ = (eidx // 32) % 16
                            hl_ = (eidx // 512) % XPARTS
                            ntb = eidx // (512 * XPARTS)
                            colb = (ln % 4) * 8 + 32 * (wd_ // 4) + 2 * (wd_ % 4)
                            nb = ntb * 8 + ln // 4
                            xa0 = xs[nb * K_DIM + colb]
                            xa1 = xs[nb * K_DIM + colb + 1]
                            hib = pack2(xa0, xa1, self.st)
                            ra0, ra1 = unpack2(hib, self.st)
                            xbi = xb_index(ntb, wd_, hl_, ln, XPARTS, True) if self.tproj else eidx
                            if cutlass.const_expr(XPARTS == 2):
                                lob = pack2(xa0 - ra0, xa1 - ra1, self.st)
                                xb[xbi] = cutlass.select_(hl_ == 0, hib, lob)
                            else:
                                xb[xbi] = hib
                        cute.arch.sync_threads()
                        bx = None
                    else:
                        bx = build_bx(xs, g4, c4, NXP, self.st, self.xsplit)

                    xb_word = smem_bfrag(xb, lane, self.xsplit, self.tproj)
                    if warp == self.SC_WARP:
                        # sw[j, n] = w_j (kc_j . x_n); rows j >= P are zero in kcs and w.
                        if cutlass.const_expr(self.bsmem and self.ring == self.st):
                            bx_ring = (
                                xb_word  # no register copy of the fragments: fewer live registers
                            )
                        else:
                            bx_ring = build_bx(xs, g4, c4, NXP, self.ring, self.xsplit)
                        sc_acc = small_mma(
                            kcw_i, KPW, self.ring, bx_ring, g4, c4, NXP, False, a_words=True
                        )
                        for nt in cutlass.range_constexpr(NXP // 8):
                            for e in cutlass.range_constexpr(4):
                                n = nt * 8 + 2 * c4 + (e % 2)
                                jw = g4 + 8 * (e // 2)
                                if n < NX:
                                    sw[jw * NX + n] = sc_acc[nt][e] * wv[jw]
                    if warp == self.GR_WARP:
                        # Gram of [k^; q^] against k^: A_sr = beta_s Gamma_sr (k_s . k_r) for r < s,
                        # C_sr = Gamma_sr (q_s . k_r) for r <= s; Gamma from cumulative-sum
                        # differences.
                        if cutlass.const_expr(self.bsmem):
                            bx_st = xb_word
                        else:
                            bx_st = build_bx(xs, g4, c4, NXP, self.st, self.xsplit)
                        gr_acc = small_mma(
                            xs, K_DIM, self.st, bx_st, g4, c4, NXP, self.xsplit, a_rows=XR,
                            a_from_b=self.xdirect,
                        )  # fmt: skip
                        for e in cutlass.range_constexpr(4):
                            n = 2 * c4 + (e % 2)
                            xr = g4 + 8 * (e // 2)
                            if n < T:
                                if xr < T:
                                    gk = cute.math.exp(gam[xr] - gam[n], fastmath=True)
                                    amat[xr * T + n] = cutlass.select_(
                                        n < xr, beta[xr] * gk * gr_acc[0][e], Float32(0.0)
                                    )
                                else:
                                    if xr < 2 * T:
                                        sq_ = xr - T
                                        gq = cute.math.exp(gam[sq_] - gam[n], fastmath=True)
                                        cmat[sq_ * T + n] = cutlass.select_(
                                            n <= sq_, gq * gr_acc[0][e], Float32(0.0)
                                        )
                        # Column t = lane of M = (I + A)^-1 diag(beta) by forward substitution
                        # (fp32): the per-row solve then is U = R M^T, one MMA in the epilogue.
                        # Entries above the diagonal come out as exact zeros.
                        cute.arch.sync_warp()
                        if lane < T:
                            mcol = []
                            for s_ in cutlass.range_constexpr(T):
                                m_s = cutlass.select_(lane == s_, beta[s_], Float32(0.0))
                                for r_ in cutlass.range_constexpr(s_):
                                    m_s = m_s - amat[s_ * T + r_] * mcol[r_]
                                mcol.append(m_s)
                                mmat[s_ * T + lane] = m_s
                        if cutlass.const_expr(self.afe):
                            # Row n = lane of L: [U | O] = Z0 + (e^{G*} P) L^T, where
                            #   U_n = sum_c M_nc (v_c - e^{gamma_c} HX_c), HX = e^{G*} P + history
                            #   O_s = e^{gamma_s} HX_{T+s} + sum_r C_sr U_r
                            # so L[n, c] = -M_nc e^{gamma_c} (n, c < T), L[T+s, c] = -sum_r C_sr
                            # M_rc e^{gamma_c} (c < T), L[T+s, T+s'] = e^{gamma_s} [s = s'],
                            # L[n < T, c >= T] = 0. fp32; split into hi + lo where it is used.
                            cute.arch.sync_warp()
                            if lane < NX:
                                for c_ in cutlass.range_constexpr(NX):
                                    if cutlass.const_expr(c_ < T):
                                        eg_c = cute.math.exp(gam[c_], fastmath=True)
                                        coef = Float32(0.0)
                                        for r_ in cutlass.range_constexpr(T):
                                            c_sr = cmat[
                                                cutlass.min(
                                                    cutlass.max(lane - T, Int32(0)), Int32(T - 1)
                                                )
                                                * T
                                                + r_
                                            ]
                                            w_r = cutlass.select_(
                                                lane < T,
                                                cutlass.select_(
                                                    lane == r_, Float32(1.0), Float32(0.0)
                                                ),
                                                c_sr,
                                            )
                                            coef = coef + w_r * mmat[r_ * T + c_]
                                        lmat[lane * NX + c_] = -coef * eg_c
                                    else:
                                        eg_c = cute.math.exp(gam[c_ - T], fastmath=True)
                                        lmat[lane * NX + c_] = cutlass.select_(
                                            lane == c_, eg_c, Float32(0.0)
                                        )

                    # ostage: the u / output stores staged in each tile's own ds rows (see
                    # epilogue_stores)
                    sctx = (ds_ptr.toint(), lane, base, P, o_st) if self.ostage else None
                    if cutlass.const_expr(self.afe):
                        # afe: everything of phase 5 that does not need the state, before the
                        # state tiles arrive. A CTA barrier orders phase 3's sw / cmat / mmat /
                        # lmat (other warps' writes); Z0 (phase 5 with P = 0) per tile, moved into
                        # the projection's permuted rows through this warp's own ds rows; the B
                        # fragments of L as hi + lo.
                        cute.arch.sync_threads()
                        eops = epilogue_operands(self, g4, c4, sw, cmat, mmat, gam, base, P, o_st)
                        o_head = out + (Int64(bi) * o_sb + Int64(hv * V_DIM_C + v0))
                        zero = Int32(0)
                        for afe_ti in cutlass.range_constexpr(self.TILES_PER_WARP):
                            afe_tile = warp + 4 * afe_ti
                            if cutlass.const_expr("afez0" in self.skip):
                                # knock-out (results wrong): no Z0 math before the state arrives
                                afe_ze = [Float32(0.0)] * 4
                            else:
                                afe_ze = epilogue_tile(
                                    self, eops, afe_tile, True, g4, c4, lane, uw16_i, ds, None,
                                    eg_star, vs, uc_head, o_head, zero, afe_z0=True,
                                )[0]  # fmt: skip
                            for afe_e in cutlass.range_constexpr(4):
                                afe_n = 2 * c4 + (afe_e % 2)
                                if afe_n < NX:
                                    ds[(afe_tile * 16 + g4 + 8 * (afe_e // 2)) * DSP + afe_n] = (
                                        afe_ze[afe_e]
                                    )
                        cute.arch.sync_warp()  # Z0 in ds, read back at each tile's turn
                        afe_lr = cutlass.min(g4, Int32(NX - 1))
                        afe_c0 = cutlass.min(2 * c4, Int32(NX - 1))
                        afe_c1 = cutlass.min(2 * c4 + 1, Int32(NX - 1))
                        afe_w = split2(
                            cutlass.select_(
                                (g4 < NX) & (2 * c4 < NX), lmat[afe_lr * NX + afe_c0], Float32(0.0)
                            ),
                            cutlass.select_(
                                (g4 < NX) & (2 * c4 + 1 < NX),
                                lmat[afe_lr * NX + afe_c1],
                                Float32(0.0),
                            ),
                            torch.bfloat16,
                        )

                    # ---- phase 4: state projection (+ fold on flush rows) with mma.sync ---------
                    if cutlass.const_expr(not self.late_seq and not self.bulk):
                        for ti in cutlass.range_constexpr(n_early, self.TILES_PER_WARP):
                            sa_tiles.append(
                                load_state_tile(
                                    st_head, v0, warp, ti, self.NTILE, g4, c4, skip_state
                                )
                            )
                    # Projections go to smem (ds) and come back in the epilogue's MMA layout. The
                    # epilogue of a warp without a tile (BV < 64) runs on a duplicate tile with
                    # every store predicated off (tile_info: epilogue tile, owns it).
                    tile_info = []
                    # dsreg: tile ti's projections in the epilogue's layout (rows g4, g4 + 8);
                    # named scalars defined before the run-time tile branch, so that the DSL
                    # carries the values assigned inside it out of it
                    pj0_0 = pj0_1 = pj0_2 = pj0_3 = Float32(0.0)
                    pj1_0 = pj1_1 = pj1_2 = pj1_3 = Float32(0.0)
                    for ti in cutlass.range_constexpr(self.TILES_PER_WARP):
                        owns_all = self.NTILE >= 4 * (ti + 1)  # compile time: every warp has one
                        tile_info.append(
                            (
                                warp + 4 * ti if owns_all else (warp + 4 * ti) % self.NTILE,
                                True if owns_all else warp + 4 * ti < self.NTILE,
                            )
                        )
                        tile = warp + 4 * ti
                        # (a run-time branch even when every warp has the tile: it keeps ptxas
                        # from interleaving the two tiles' projections and folds, ~40 registers)
                        if tile < self.NTILE:
                            lr0 = tile * 16 + g4
                            rows = (lr0, lr0 + 8)
                            if cutlass.const_expr(self.bulk):
                                # MMA row m holds tile row (m % 2) * 8 + m // 2 (halves copies)
                                rows = (
                                    tile * 16 + (g4 % 2) * 8 + g4 // 2,
                                    tile * 16 + (g4 % 2) * 8 + g4 // 2 + 4,
                                )
                                # t1early: a warp owning tile ti + 1 copies it as soon as tile ti
                                # is in registers for the last time: right after this read on a
                                # verify-only row (or with the fold knocked out), after the fold's
                                # re-read on a flush row (below); else at the next tile's turn
                                early_next = (
                                    self.t1early and not skip_state and self.NTILE >= 4 * (ti + 2)
                                )
                                # chain: after this row's last tile, the next row's tile 0, at the
                                # same points (every warp owns TILES_PER_WARP tiles at BV=128)
                                row_next = (
                                    self.chain and not skip_state and ti == self.TILES_PER_WARP - 1
                                )
                                if cutlass.const_expr(
                                    ti > 0 and not skip_state and not self.t1early
                                ):
                                    # every lane of the warp has read tile ti - 1 (the MMAs
                                    # consumed it)
                                    stage_next_tile(
                                        st_head, stage, mbar_w, v0, warp, ti, self.NTILE, lane
                                    )
                                if cutlass.const_expr(not skip_state):
                                    cute.arch.mbarrier_wait(mbar_w, ti % 2)
                                sa = read_bulk_tile(stage, warp, g4, c4, skip_state)
                                if cutlass.const_expr(early_next and "fold" in self.skip):
                                    stage_next_tile(
                                        st_head, stage, mbar_w, v0, warp, ti + 1, self.NTILE, lane
                                    )
                                elif cutlass.const_expr(early_next):
                                    if not is_flush:
                                        stage_next_tile(
                                            st_head, stage, mbar_w, v0, warp, ti + 1, self.NTILE,
                                            lane,
                                        )  # fmt: skip
                                if cutlass.const_expr(row_next and "fold" in self.skip):
                                    stage_next_row(
                                        pool, pool_s0, nslot, hv, stage, mbar_w, v0, warp,
                                        self.NTILE, lane, has_next, self.t1l2,
                                        self.TILES_PER_WARP,
                                    )  # fmt: skip
                                elif cutlass.const_expr(row_next):
                                    if not is_flush:
                                        stage_next_row(
                                            pool, pool_s0, nslot, hv, stage, mbar_w, v0, warp,
                                            self.NTILE, lane, has_next, self.t1l2,
                                            self.TILES_PER_WARP,
                                        )  # fmt: skip
                            elif cutlass.const_expr(self.late_seq and ti >= n_early):
                                sa = load_state_tile(
                                    st_head, v0, warp, ti, self.NTILE, g4, c4, skip_state
                                )
                            else:
                                sa = sa_tiles[ti]
                            if cutlass.const_expr("sink" in self.skip):
                                # knock-out: the state tile's words all reach one predicated
                                # store, so its loads stay with the math skipped (stream time)
                                words = [w for chunks in sa for chunk in chunks for w in chunk]
                                acc = words[0]
                                for w in words[1:]:
                                    acc = acc ^ w
                                sink_if_magic(
                                    state_chunk(st_head, v0, warp, ti, self.NTILE, g4, c4, 0, 0),
                                    acc,
                                )
                            if cutlass.const_expr(self.tproj):
                                # the projection transposed: [X hi; X lo] (A, one 16-byte read
                                # per lane and k-step) times the tile's two 8-row halves (B: two
                                # words of the lane's own 16-byte state reads, already adjacent),
                                # so no register moves assemble A fragments from two reads. Lane
                                # (g4, c4) ends with P[x = g4] of MMA columns 2 c4, 2 c4 + 1 (hi
                                # in accumulator rows g4, lo in g4 + 8), i.e. of tile rows
                                # 8 e2 + c4 + 4 r; the same sums in the same order as below
                                tch = [[[Float32(0.0)] * 4 for _ in range(2)] for _ in range(2)]
                                for ks in cutlass.range_constexpr(0 if "proj" in self.skip else 8):
                                    i, h = ks // 2, ks % 2
                                    xa = lds_v4(xb_ptr + (ks * 32 + lane) * 4)
                                    for r in cutlass.range_constexpr(2):
                                        tch[r][h] = list(
                                            mma16816(
                                                self.st,
                                                list(xa),
                                                [sa[r][i][2 * h], sa[r][i][2 * h + 1]],
                                                tch[r][h],
                                            )
                                        )
                                for r in cutlass.range_constexpr(2):
                                    hl = [tch[r][0][e] + tch[r][1][e] for e in range(4)]
                                    for e2 in cutlass.range_constexpr(2):
                                        if g4 < NX:
                                            ds[(tile * 16 + 8 * e2 + c4 + 4 * r) * DSP + g4] = (
                                                hl[e2] + hl[2 + e2]
                                            )
                            for nt in cutlass.range_constexpr(0 if self.tproj else NXP // 8):
                                # four independent accumulator chains (k-step parity x hi/lo): the
                                # MMA latency chain is 4 deep instead of 16
                                dch = [[Float32(0.0)] * 4 for _ in range(4)]
                                for ks in cutlass.range_constexpr(0 if "proj" in self.skip else 8):
                                    i, h = ks // 2, ks % 2
                                    afr = [
                                        sa[0][i][2 * h],
                                        sa[1][i][2 * h],
                                        sa[0][i][2 * h + 1],
                                        sa[1][i][2 * h + 1],
                                    ]
                                    w0, w1 = 4 * i + 2 * h, 4 * i + 2 * h + 1
                                    if cutlass.const_expr(self.bsmem):
                                        bh = [
                                            xb[((nt * XPARTS) * 16 + w) * 32 + lane]
                                            for w in (w0, w1)
                                        ]
                                        bl = (
                                            [
                                                xb[((nt * XPARTS + 1) * 16 + w) * 32 + lane]
                                                for w in (w0, w1)
                                            ]
                                            if self.xsplit
                                            else None
                                        )
                                    else:
                                        bh = [bx[0][nt][w0], bx[0][nt][w1]]
                                        bl = [bx[1][nt][w0], bx[1][nt][w1]] if self.xsplit else None
                                    dch[ks % 2] = list(mma16816(self.st, afr, bh, dch[ks % 2]))
                                    if cutlass.const_expr(self.xsplit):
                                        dch[2 + ks % 2] = list(
                                            mma16816(self.st, afr, bl, dch[2 + ks % 2])
                                        )
                                d = [
                                    (dch[0][e] + dch[1][e]) + (dch[2][e] + dch[3][e])
                                    for e in range(4)
                                ]
                                if cutlass.const_expr(self.afe):
                                    # [U | O] of this tile: Z0 + (e^{G*} P) L^T, then stored
                                    # Z0 of this tile from its ds rows (written before the
                                    # state arrived), in the projection's permuted rows: read
                                    # here, not held in 8 registers across the waits
                                    afe_zp = []
                                    for afe_e in cutlass.range_constexpr(4):
                                        afe_n = 2 * c4 + (afe_e % 2)
                                        afe_zp.append(
                                            cutlass.select_(
                                                afe_n < NX,
                                                ds[
                                                    rows[afe_e // 2] * DSP
                                                    + cutlass.min(afe_n, NX - 1)
                                                ],
                                                Float32(0.0),
                                            )
                                        )
                                    fin_t = afe_result(d, eg_star, afe_zp, afe_w, zero)
                                    if cutlass.const_expr("epistore" in self.skip):
                                        # knock-out (results wrong): the math kept alive by one
                                        # never-taken store instead of the 16-bit stores
                                        afe_sum = (fin_t[0] + fin_t[1]) + (fin_t[2] + fin_t[3])
                                        sink_if_magic(
                                            cute.recast_ptr(
                                                o_head + Int64(rows[0] * 2), dtype=Int32
                                            ),
                                            cute.arch.inline_ptx(
                                                "mov.b32 {$w0}, {$r0};",
                                                write_only_types=[Int32],
                                                read_only_args=[afe_sum],
                                            ),
                                        )
                                    else:
                                        epilogue_stores(
                                            self, [fin_t], eops[3], rows, True, uc_head, o_head,
                                            tile, sctx,
                                        )  # fmt: skip
                                elif cutlass.const_expr(self.dsreg):
                                    ep = proj_to_epilogue_rows(d, g4, c4)
                                    if cutlass.const_expr(ti == 0):
                                        pj0_0, pj0_1, pj0_2, pj0_3 = ep
                                    else:
                                        pj1_0, pj1_1, pj1_2, pj1_3 = ep
                                else:
                                    for e in cutlass.range_constexpr(4):
                                        n = nt * 8 + 2 * c4 + (e % 2)
                                        lr = rows[e // 2]
                                        if n < NX:
                                            ds[lr * DSP + n] = d[e]

                            if is_flush and cutlass.const_expr("fold" not in self.skip):
                                # A = (w_j u_j)[row, j] rounded to the ring dtype; C = e^{G*} S0.
                                afold = []
                                for rr_j in cutlass.range_constexpr(4):
                                    fr = rr_j % 2
                                    j0 = 2 * c4 + 8 * (rr_j // 2)
                                    lrow = rows[fr]
                                    afold.append(
                                        pack2(
                                            Float32(uws_i[j0 * UWS + lrow]) * wv[j0],
                                            Float32(uws_i[(j0 + 1) * UWS + lrow]) * wv[j0 + 1],
                                            self.ring,
                                        )
                                    )
                                newc = [[[None] * 4 for _ in range(4)] for _ in range(2)]
                                if cutlass.const_expr(self.bulk):
                                    # re-read: shared, not L2
                                    sa = read_bulk_tile(stage, warp, g4, c4, skip_state, True)
                                    if cutlass.const_expr(early_next):  # (set at the read above)
                                        stage_next_tile(
                                            st_head, stage, mbar_w, v0, warp, ti + 1, self.NTILE,
                                            lane,
                                        )  # fmt: skip
                                    if cutlass.const_expr(row_next):
                                        stage_next_row(
                                            pool, pool_s0, nslot, hv, stage, mbar_w, v0, warp,
                                            self.NTILE, lane, has_next, self.t1l2,
                                            self.TILES_PER_WARP,
                                        )  # fmt: skip
                                for t16 in cutlass.range_constexpr(16):
                                    fi, fw = t16 // 4, t16 % 4
                                    if cutlass.const_expr(self.fold_from_window):
                                        bff = [
                                            fold_bfrag(kcs_i, KPW, lane, t16, hf, self.ring)
                                            for hf in range(2)
                                        ]
                                    else:
                                        bff = [
                                            kb[(t16 * 2) * 32 + lane],
                                            kb[(t16 * 2 + 1) * 32 + lane],
                                        ]
                                    l0, h0 = unpack2(sa[0][fi][fw], self.st)
                                    l1, h1 = unpack2(sa[1][fi][fw], self.st)
                                    cin = [l0 * eg_star, h0 * eg_star, l1 * eg_star, h1 * eg_star]
                                    df = mma16816(self.ring, afold, bff, cin)
                                    for fr in cutlass.range_constexpr(2):
                                        if cutlass.const_expr(self.sr):
                                            key = (
                                                Uint32(seed)
                                                ^ hash_u32(
                                                    Uint32(slot) * Uint32(0x9E3779B1)
                                                    ^ Uint32(
                                                        (hv * V_DIM_C + v0 + rows[fr]) * K_DIM
                                                        + c4 * 8
                                                        + 32 * fi
                                                        + 2 * fw
                                                    )
                                                    ^ (Uint32(base) << 27)
                                                )
                                                ^ cute.arch.inline_ptx(
                                                    "mov.b32 {$w0}, {$r0};",
                                                    write_only_types=[Uint32],
                                                    read_only_args=[df[2 * fr]],
                                                )
                                            )
                                            newc[fr][fi][fw] = sr_pack2(
                                                df[2 * fr], df[2 * fr + 1], self.st, key
                                            )
                                        else:
                                            newc[fr][fi][fw] = pack2(
                                                df[2 * fr], df[2 * fr + 1], self.st
                                            )
                                    if cutlass.const_expr(fw == 3):
                                        # chunk fi of both rows is complete: store it now, so that
                                        # only 8 result words (not 32) are live next to the state
                                        # fragments
                                        for fr in cutlass.range_constexpr(2):
                                            frp = st_head + Int64((v0 + rows[fr]) * K_DIM + c4 * 8)
                                            stg_v4(
                                                cute.recast_ptr(frp + Int64(32 * fi), dtype=Int32),
                                                newc[fr][fi],
                                            )
                        if cutlass.const_expr(self.nobar and ti == 0):
                            # phase 3's warps wrote sw / cmat / mmat with no CTA barrier since
                            # (late13); every warp reads them in phase 5: this barrier orders them,
                            # one tile earlier than the end of phase 4 (tile 1 is in flight)
                            cute.arch.sync_threads()
                        if cutlass.const_expr(self.tepi and "epi" not in self.skip):
                            # tepi: this tile's phase 5 now, while the warp's next tile (copied at
                            # its last read: t1early) is in flight, instead of after the last tile
                            if cutlass.const_expr(ti == 0):
                                eops = epilogue_operands(
                                    self, g4, c4, sw, cmat, mmat, gam, base, P, o_st
                                )
                                o_head = out + (Int64(bi) * o_sb + Int64(hv * V_DIM_C + v0))
                                zero = Int32(0)
                            elif cutlass.const_expr(not self.dsreg):
                                cute.arch.sync_warp()  # this tile's ds rows, written by the warp
                            pj = None
                            if cutlass.const_expr(self.dsreg):
                                pj = (
                                    (pj0_0, pj0_1, pj0_2, pj0_3),
                                    (pj1_0, pj1_1, pj1_2, pj1_3),
                                )[ti]
                            epilogue_tile(
                                self, eops, tile_info[ti][0], tile_info[ti][1], g4, c4, lane,
                                uw16_i, ds, pj, eg_star, vs, uc_head, o_head, zero, sctx=sctx,
                            )  # fmt: skip

                    if cutlass.const_expr(self.nextl2):
                        l2_next_row(
                            nx_acts, nx_rings, bn, nslot, nP, nbase, has_next, warp, lane, ih,
                            hv, v0, BV, T,
                        )  # fmt: skip
                    if cutlass.const_expr(not self.nobar):
                        cute.arch.sync_threads()
                    elif cutlass.const_expr(not self.dsreg and not self.tepi):
                        cute.arch.sync_warp()  # this warp's ds rows, written by its own lanes

                    if cutlass.const_expr(self.persist):
                        sa_nxt = prefetch_state_tiles(
                            pool,
                            pool_s0,
                            nslot,
                            hv,
                            v0,
                            warp,
                            self.NTILE,
                            g4,
                            c4,
                            skip_state,
                            n_early,
                        )
                    if cutlass.const_expr(self.pf_act):
                        issue_acts(
                            q, k, v, q_sb, q_st, k_sb, k_st, v_sb, v_st, bn, nslot >= Int32(0),
                            ih, hv, v0, tid, qk16 + (1 - buf) * (2 * T * K_DIM),
                            v16 + (1 - buf) * (T * BV), T, BV,
                        )  # fmt: skip
                        ab_nxt = load_gates(
                            a, b, a_sb, a_st, b_sb, b_st, bn, nslot, hv, tid, T, self.io
                        )
                    if cutlass.const_expr(self.pf):
                        issue_windows(
                            kc, uc, gc, kc_s0, uc_s0, gc_s0, nslot, nP, nbase, ih, hv, v0, tid,
                            kc16 + (1 - buf) * (16 * 2 * KPW), uw16 + (1 - buf) * (16 * UWS),
                            graw + (1 - buf) * RING_SLOTS, BV, KPW,
                        )  # fmt: skip

                    if cutlass.const_expr(self.bulk):
                        # no cp.async group is open here (the bulk copies complete on the
                        # mbarriers): a no-op wait, kept from the cp.async-staged experiments so
                        # that the code is the one measured (results/kernel/k14)
                        cute.arch.cp_async_wait_group(0)
                    # ---- phase 5: history, residual, solve, outputs and u appends on mma.sync ----
                    # In the projection's accumulator layout (rows g4, g4 + 8 of a tile x columns
                    # n = nt*8 + 2 c4 + {0, 1}; columns n < T are k-side, T <= n < 2T q-side):
                    #   HX = e^{G*} S0 X^T + U_win^T SW        (history: A = u window by ldmatrix)
                    #   R  = V - e^{gamma} HX_k                 (k-side columns)
                    #   U  = R M^T,  M = (I + A)^-1 diag(beta)  (the solve as one MMA)
                    #   O  = e^{gamma} HX_q + U C^T             (outputs land on the q columns)
                    # The accumulator of columns < T carries U, of columns >= T carries O. Every
                    # fp32 operand enters as a hi + lo pair; the solve MMAs use bf16 (fp32 range).
                    if cutlass.const_expr(
                        "epi" not in self.skip and not self.tepi and not self.afe
                    ):
                        eops = epilogue_operands(self, g4, c4, sw, cmat, mmat, gam, base, P, o_st)
                        o_head = out + (Int64(bi) * o_sb + Int64(hv * V_DIM_C + v0))
                        zero = Int32(0)
                        for ti in cutlass.range_constexpr(self.TILES_PER_WARP):
                            tile, has_tile = tile_info[ti]
                            pj = None
                            if cutlass.const_expr(self.dsreg):
                                pj = (
                                    (pj0_0, pj0_1, pj0_2, pj0_3),
                                    (pj1_0, pj1_1, pj1_2, pj1_3),
                                )[ti]
                            epilogue_tile(
                                self, eops, tile, has_tile, g4, c4, lane, uw16_i, ds, pj,
                                eg_star, vs, uc_head, o_head, zero, sctx=sctx,
                            )  # fmt: skip
                else:
                    if cutlass.const_expr(self.chain):
                        # this pad row's zero-filling window copies land before the next row's
                        # copies to the same addresses are issued (cp.async groups may complete
                        # in any order)
                        cute.arch.cp_async_wait_group(0)
                        if cutlass.const_expr(not skip_state):
                            stage_next_row(
                                pool, pool_s0, nslot, hv, stage, mbar_w, v0, warp, self.NTILE,
                                lane, has_next, self.t1l2, self.TILES_PER_WARP,
                            )  # fmt: skip
                    if cutlass.const_expr(self.nextl2):
                        l2_next_row(
                            nx_acts, nx_rings, bn, nslot, nP, nbase, has_next, warp, lane, ih,
                            hv, v0, BV, T,
                        )  # fmt: skip
                    if cutlass.const_expr(self.persist):
                        sa_nxt = prefetch_state_tiles(
                            pool,
                            pool_s0,
                            nslot,
                            hv,
                            v0,
                            warp,
                            self.NTILE,
                            g4,
                            c4,
                            skip_state,
                            n_early,
                        )
                    if cutlass.const_expr(self.pf_act):
                        issue_acts(
                            q, k, v, q_sb, q_st, k_sb, k_st, v_sb, v_st, bn, nslot >= Int32(0),
                            ih, hv, v0, tid, qk16 + (1 - buf) * (2 * T * K_DIM),
                            v16 + (1 - buf) * (T * BV), T, BV,
                        )  # fmt: skip
                        ab_nxt = load_gates(
                            a, b, a_sb, a_st, b_sb, b_st, bn, nslot, hv, tid, T, self.io
                        )
                    if cutlass.const_expr(self.pf):
                        issue_windows(
                            kc, uc, gc, kc_s0, uc_s0, gc_s0, nslot, nP, nbase, ih, hv, v0, tid,
                            kc16 + (1 - buf) * (16 * 2 * KPW), uw16 + (1 - buf) * (16 * UWS),
                            graw + (1 - buf) * RING_SLOTS, BV, KPW,
                        )  # fmt: skip
                if cutlass.const_expr(self.persist):
                    cute.arch.sync_threads()  # shared memory is reused by the next row
                    slot, P, base = nslot, nP, nbase
                    sa_cur = sa_nxt
                    ab_cur = ab_nxt
            if cutlass.const_expr(self.pf or self.early):
                cute.arch.cp_async_wait_group(0)  # no copy in flight when the CTA retires
            if cutlass.const_expr(self.bulk and not skip_state and not self.chain):
                if slot < Int32(0):
                    # a pad row never waited for its entry copies (live rows waited for every
                    # phase; waiting again on a completed parity-0 phase would block)
                    cute.arch.mbarrier_wait(mbar_w, 0)

    return GdnDecodeUCacheFlushKernel


_KERNEL_CLASS: type | None = None


def _kernel_class() -> type:
    global _KERNEL_CLASS
    if _KERNEL_CLASS is None:
        _KERNEL_CLASS = _build_kernel_class()
    return _KERNEL_CLASS


def __getattr__(name: str) -> Any:
    # `GdnDecodeUCacheFlushKernel` is exported lazily so that importing the module needs no cutlass.
    if name == "GdnDecodeUCacheFlushKernel":
        return _kernel_class()
    raise AttributeError(name)


# --------------------------------------------------------------------------------------------
# Host side
# --------------------------------------------------------------------------------------------
def _arch_string(device: torch.device | None) -> str:
    env = os.environ.get("CUTE_DSL_ARCH", "").strip()
    if env:
        return env
    if device is None or device.type != "cuda":
        raise ValueError(
            f"gdn_ucache_flush needs CUDA tensors (got device {device}); "
            "or set CUTE_DSL_ARCH to cross-compile"
        )
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


# Launch knob `late`: where each warp's state tiles go and when. The measured experiments
# late4-9, 11 and 12 live in git history before this cleanup (kernels/NOTES.md).
# launch modes that stage the state in shared memory by bulk async copies on per-warp mbarriers
# (one row per CTA)
BULK_LATES = (10, 13)
LATE_MODES = {
    0: "every tile into registers at entry",
    1: "the last tile into registers at the projection",
    2: "two tiles into registers at the projection",
    3: "the last tile into registers after the first tile's projection and fold",
    10: "each warp's state tiles by two 2 KB bulk async copies per 16-row tile into one reused "
    "shared stage on a per-warp mbarrier, permuted MMA rows (BV=64/128)",
    13: "late10 without the fp32 [k; q] tile (phase 1 writes the x fragments, the Gram reads "
    "them) and with the fold's fragments from the k window: 7 CTAs/SM at BV=64 (BV=64/128)",
}


def _flag_knob(name: str, value: bool) -> bool:
    """An on/off launch knob: the environment variable if set (read with int(), as launch_config
    reads it, so one value means the same in both places), else `value`."""
    raw = os.environ.get(name, "").strip()
    return int(raw) != 0 if raw else bool(value)


@dataclasses.dataclass(frozen=True)
class LoadFlags:
    """The load-order / epilogue knobs of one compiled variant, as the device code reads them:
    each already reduced to the launch modes it applies to (resolve_flags). Hashable: part of
    the compile cache's key."""

    t1early: bool = False
    t1l2: bool = False
    wvearly: bool = False
    xpf: int = 0
    actfirst: bool = False
    dsreg: bool = False
    nobar: bool = False
    nextl2: bool = False
    tepi: bool = False
    ostage: bool = False
    stef: bool = False
    afe: bool = False
    tproj: bool = False


# every knob of LoadFlags by name: the launch table's words, GDN_UCACHE_<NAME>, launch_config's keys
FLAG_NAMES = tuple(f.name for f in dataclasses.fields(LoadFlags))


def resolve_flags(
    T: int,
    BV: int,
    late: int,
    persist: bool,
    bsmem: bool,
    xsplit: bool,
    *,
    t1early: bool = False,
    t1l2: bool = False,
    wvearly: bool = False,
    xpf: int = 0,
    actfirst: bool = False,
    dsreg: bool = False,
    nobar: bool = False,
    nextl2: bool = False,
    tepi: bool = False,
    ostage: bool = False,
    stef: bool = False,
    afe: bool = False,
    tproj: bool = False,
) -> LoadFlags:
    """The knobs asked for (launch table, GDN_UCACHE_* or a caller), each kept only where its
    launch mode has it: the one place these rules live. A knob that does not apply is off, so
    variants that compile to the same code share one cache entry."""
    bulk = late in BULK_LATES
    one_row = not persist  # one row per CTA
    # bulk modes with persistent CTAs (session 17)
    chain = bool(persist) and bulk
    # bulk modes: the warp's next tile is copied into the stage as soon as the current one
    # is in registers for the last time: right after the projection's read on a
    # verify-only row, right after the fold's re-read on a flush row (instead of at the
    # next tile's turn). The second dependent DRAM trip then overlaps the projection.
    t1early = bool(t1early) and bulk
    # bulk modes: the warp's later tiles are prefetched into L2 at entry (one bulk
    # prefetch each), so their copies into the reused stage hit L2: the second
    # dependent trip gets shorter, not earlier (t1early makes it earlier)
    t1l2 = bool(t1l2) and bulk
    # one row per CTA (or chain): G* and the window weights from g-row words loaded at entry
    # (global, not the smem copy), written before phase 1's barrier, so late13 loses its
    # phase-3 barrier (it only ordered the weights) and no-bsmem builds theirs
    wvearly = bool(wvearly) and (one_row or chain)
    # one row per CTA: each CTA also asks L2 for what the CTAs of row z + xpf will read
    # (state rows, live window rows, q/k/v rows, gates), so that rows started later find
    # their bytes in L2 (a hint: results unchanged). CTAs are dispatched in row order;
    # xpf rows ahead is a fraction of the rows resident at once (0 = off). Bulk modes
    # only: the register modes serve batches below one wave (nothing to prefetch for),
    # and there the prefetch code cost 11-22 registers (late3: 80 -> 91-102)
    xpf = int(xpf) if bulk and one_row else 0
    # bulk modes at BV=128, T <= 4: the projections stay in registers (each tile's 4 per
    # thread, moved from the permuted MMA rows to the epilogue's rows by 8 shuffles)
    # instead of the ds round trip: -4.6 KB of shared memory, so late13 fits 7 CTAs/SM
    # (k15: 6 vs flashinfer's 7 is the verify-only gap)
    dsreg = bool(dsreg) and bulk and T <= 4 and BV == 128
    # every warp owns its tiles (BV >= 64): the epilogue reads only its own warp's
    # projections, so the CTA barrier between phase 4 and 5 becomes a warp barrier (none
    # with dsreg); k15: 10 % of the stall samples wait at a CTA barrier in the epilogue.
    # phase 3's sw / cmat / mmat (other warps' writes) still need a CTA barrier: it sits at
    # the end of tile 0's turn (session 19; before, nothing ordered them: a race)
    nobar = (bool(nobar) or dsreg) and BV >= 64 and (one_row or chain)
    # one row per CTA: the q/k/v and gate loads leave with the cursor loads, before the
    # window and state copies that wait for the cursors (a block boundary; see there)
    actfirst = bool(actfirst) and one_row
    # chain: the next row's windows, g row, q/k/v rows and gates asked into L2 (warp 3)
    # when its tile-0 copy is issued, so its first DRAM trip after the row-end barrier
    # is an L2 hit (one row ahead, not xpf's rows of other CTAs)
    nextl2 = bool(nextl2) and chain
    # one row per CTA, bulk modes at BV=128 with t1early: each tile's phase 5 right after
    # its projection (and fold), while the warp's next tile is in flight, instead of both
    # after the last one; implies nobar (the CTA barrier that orders phase 3's sw / cmat /
    # mmat moves to the end of tile 0's turn); kernels/NOTES.md, session 19
    tepi = bool(tepi) and bulk and BV == 128 and t1early and one_row
    nobar = nobar or tepi
    # BV >= 64 (every warp owns its tiles, so a tile's ds rows are its warp's alone), not
    # with dsreg (no ds): phase 5's u / output results staged in the tile's own ds rows and
    # written as 16-byte rows (two lanes per 32-byte sector) instead of 16-bit stores.
    # Session 20 (H100): phase 5's cost is its writes (no_epistore runs near no_epi's
    # time), but not their shape: ostage is neutral (results/kernel/k20-h100)
    ostage = bool(ostage) and BV >= 64 and not dsreg
    # bulk modes: the state's bulk copies carry an L2 evict-first policy, so the u /
    # output rows written meanwhile stay in L2. Session 20 (H100): -1.6 % verify-only with
    # a cold L2, neutral warm: the write-backs are deferred, not saved
    # (results/kernel/k21-h100)
    stef = bool(stef) and bulk
    # one row per CTA, bulk modes at BV=128, T <= 4 (affine epilogue): U and the outputs
    # are affine in the projections P = S0 X^T, [U | O] = Z0 + (e^{G*} P) L^T, with L (NX x
    # NX) from M, C and the gates (key side, GR_WARP) and Z0 (P = 0: history window term,
    # residual of v, solve, outputs) per row. Both are computed before the state tiles
    # arrive; after each tile's projection only two MMAs and the stores remain. Session 20
    # (H100): correct, ~1 % faster (results/kernel/k19-h100)
    afe = bool(afe) and bulk and BV == 128 and T <= 4 and one_row and not dsreg and not tepi
    # bulk modes with the smem-staged [k^; q^] (one n-tile, hi/lo split), not with dsreg or
    # afe (they take the projection in its own accumulator layout): the projection
    # transposed, [X hi; X lo] S0^T, so that both operands come straight from 16-byte
    # shared reads (the table's projection spends ~50 register moves per tile assembling A
    # fragments from two reads). Session 21: 11.6 % fewer instructions, flashinfer's
    # count, and the table's time on the H100 and on the H200: issue slots are not what
    # the H200 gap is made of (results/kernel/k24-h100, results/kernel/s21-h200)
    tproj = (
        bool(tproj) and bulk and bool(bsmem) and T <= 4 and bool(xsplit) and not dsreg
        and not afe
    )  # fmt: skip
    return LoadFlags(
        t1early=t1early,
        t1l2=t1l2,
        wvearly=wvearly,
        xpf=xpf,
        actfirst=actfirst,
        dsreg=dsreg,
        nobar=nobar,
        nextl2=nextl2,
        tepi=tepi,
        ostage=ostage,
        stef=stef,
        afe=afe,
        tproj=tproj,
    )


# tproj: at ptxas's default register-usage level (5) the transposed projection compiles to 64
# registers with the state head pointer spilled and reloaded before each tile's bulk copy
# (session 21: 8 bytes of local memory per thread, 0.6-1.4 % slower on an H100,
# results/kernel/k24-h100); level 3 gives the same instructions in 64 registers without it
TPROJ_PTXAS_OPTIONS = "--register-usage-level=3"


def compile_variant(
    T: int,
    H: int,
    HV: int,
    BV: int,
    io_dtype: torch.dtype = IO_TORCH,
    st_dtype: torch.dtype = ST_TORCH,
    ring_dtype: torch.dtype = RING_TORCH,
    stochastic_rounding: bool = STATE_SR,
    pdl_trigger: bool = False,
    arch: str | None = None,
    mbp: int | None = None,
    persist: bool = False,
    late: int = 0,
    prefetch: int = 0,
    vec_qk: bool = True,
    t1early: bool = False,
    t1l2: bool = False,
    wvearly: bool = False,
    xpf: int = 0,
    actfirst: bool = False,
    dsreg: bool = False,
    nobar: bool = False,
    nextl2: bool = False,
    tepi: bool = False,
    afe: bool = False,
    ostage: bool = False,
    stef: bool = False,
    tproj: bool = False,
) -> Any:
    """Compile (or fetch from the cache) the kernel for exactly these compile-time constants.

    vec_qk: q/k rows are 16-byte aligned (16-byte loads; the host checks it per call).
    persist with late 10/13 (chain): BV=128 and prefetch 0 only (the next row's first state tile
    is copied during this row's epilogue; every live row completes two mbarrier phases per warp).
    The load-order / epilogue knobs (t1early, t1l2, wvearly, xpf, actfirst, dsreg, nobar, nextl2,
    tepi, ostage, stef, afe, tproj): GDN_UCACHE_<NAME> overrides each argument (0/1; XPF: rows
    ahead); resolve_flags says what each does and keeps it only in the launch modes that have it,
    and its result is part of the cache key.

    Nothing else is baked in: batch, pool size, every stride and the cursors are run-time values.
    Works without a GPU when CUTE_DSL_ARCH (e.g. sm_90a) is set.
    """
    if os.environ.get("GDN_UCACHE_LATE"):
        late = int(os.environ["GDN_UCACHE_LATE"])
    if late not in LATE_MODES:
        raise ValueError(
            f"late={late} (GDN_UCACHE_LATE or the launch table): expected one of "
            + ", ".join(f"{k} ({v})" for k, v in LATE_MODES.items())
        )
    # bulk-staged modes: every warp owns its tiles (BV >= 64). BV=64 (one tile per warp, both
    # CTAs of a 128-row head in flight at once: no second dependent trip) since session 11.
    bulk_bv = (64, 128)
    if late in BULK_LATES and BV not in bulk_bv:
        need = " or ".join(str(b) for b in bulk_bv)
        raise ValueError(
            f"late={late} (bulk-staged state) needs BV={need} (every warp owns its tiles), got "
            f"BV={BV}: set GDN_UCACHE_BV={bulk_bv[-1]} or another GDN_UCACHE_LATE"
        )
    if late in BULK_LATES and persist and (BV != 128 or int(prefetch) > 0):
        raise ValueError(
            f"late={late} with persistent CTAs (chain) needs BV=128 (two tiles per warp keep the "
            f"mbarrier parity per row) and no second window buffer, got BV={BV}, "
            f"prefetch={prefetch}: set GDN_UCACHE_BV=128 and GDN_UCACHE_PREFETCH=0, or "
            "GDN_UCACHE_PERSIST=0"
        )
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64
    from cutlass.cute.runtime import make_ptr

    arch = arch or os.environ.get("CUTE_DSL_ARCH", "")
    xsplit = os.environ.get("GDN_UCACHE_XSPLIT", "1") != "0"
    if os.environ.get("GDN_UCACHE_MBP"):
        mbp = int(os.environ["GDN_UCACHE_MBP"])
    mbp = int(mbp or 0)  # launch bounds (min CTAs per SM); > 0 needs the GPU at compile time
    bsmem = os.environ.get("GDN_UCACHE_BSMEM", "1") == "1"
    xpf_raw = os.environ.get("GDN_UCACHE_XPF", "").strip()
    xpf = int(xpf_raw) if xpf_raw else int(xpf)
    if not 0 <= xpf < 1 << 16:
        raise ValueError(f"GDN_UCACHE_XPF={xpf}: expected rows ahead in 0..65535 (0 = off)")
    flags = resolve_flags(
        T,
        BV,
        late,
        bool(persist),
        bsmem,
        xsplit,
        t1early=_flag_knob("GDN_UCACHE_T1EARLY", t1early),
        t1l2=_flag_knob("GDN_UCACHE_T1L2", t1l2),
        wvearly=_flag_knob("GDN_UCACHE_WVEARLY", wvearly),
        xpf=xpf,
        actfirst=_flag_knob("GDN_UCACHE_ACTFIRST", actfirst),
        dsreg=_flag_knob("GDN_UCACHE_DSREG", dsreg),
        nobar=_flag_knob("GDN_UCACHE_NOBAR", nobar),
        nextl2=_flag_knob("GDN_UCACHE_NEXTL2", nextl2),
        tepi=_flag_knob("GDN_UCACHE_TEPI", tepi),
        ostage=_flag_knob("GDN_UCACHE_OSTAGE", ostage),
        stef=_flag_knob("GDN_UCACHE_STEF", stef),
        afe=_flag_knob("GDN_UCACHE_AFE", afe),
        tproj=_flag_knob("GDN_UCACHE_TPROJ", tproj),
    )
    skip = tuple(sorted(x for x in os.environ.get("GDN_UCACHE_SKIP", "").split(",") if x))
    # Bulk-staged modes hold 37-46 KB of shared memory per CTA: they ask for the largest
    # carve-out (the driver's own pick gave the removed late7 4 CTAs/SM where 5 fit:
    # results/kernel/v9s2-k9).
    # -1 = no preference (the driver's); GDN_UCACHE_CARVEOUT overrides.
    carveout = int(
        os.environ.get("GDN_UCACHE_CARVEOUT", "").strip() or (100 if late in BULK_LATES else -1)
    )
    if not -1 <= carveout <= 100:
        raise ValueError(
            f"GDN_UCACHE_CARVEOUT={carveout}: expected -1 (the driver's) or a percent 0..100"
        )
    key = (
        "ucache-gdnu-v1",
        str(io_dtype),
        str(st_dtype),
        str(ring_dtype),
        T,
        H,
        HV,
        BV,
        bool(stochastic_rounding),
        bool(pdl_trigger),
        xsplit,
        mbp,
        bsmem,
        late,
        bool(persist),
        int(prefetch) if persist else 0,
        bool(vec_qk) and not (persist and int(prefetch) >= 2),
        skip,
        carveout,
        flags,
        arch,
    )
    fn = _CACHE.get(key)
    if fn is not None:
        return fn
    kern = _kernel_class()(
        T,
        H,
        HV,
        BV,
        io_dtype,
        st_dtype,
        ring_dtype,
        stochastic_rounding,
        pdl_trigger,
        xsplit=xsplit,
        mbp=mbp,
        bsmem=bsmem,
        late=late,
        persist=bool(persist),
        prefetch=int(prefetch),
        skip=skip,
        vec_qk=bool(vec_qk),
        carveout=carveout,
        flags=flags,
    )

    def cdt(dt: torch.dtype) -> type:
        return cutlass.BFloat16 if dt == torch.bfloat16 else cutlass.Float16

    gm = cute.AddressSpace.gmem

    def fake(dt: type, align: int) -> Any:
        return make_ptr(dt, 256, gm, assumed_align=align)

    io, st, ring = cdt(io_dtype), cdt(st_dtype), cdt(ring_dtype)
    args = [
        fake(io, 2),
        fake(io, 2),
        fake(io, 2),
        fake(io, 2),
        fake(io, 2),
        fake(Float32, 4),
        fake(Float32, 4),
        fake(st, 16),
        fake(ring, 16),
        fake(ring, 16),
        fake(Float32, 4),
        fake(Int32, 4),
        fake(Int32, 4),
        fake(Int32, 4),
        fake(io, 2),
        *([Int64(0)] * 16),
        Int32(1),
        Int32(1),
        Int32(1),
        Float32(1.0),
        Int32(0),
        cuda_drv.CUstream(0),
    ]
    compiler = cute.compile
    if flags.tproj:
        compiler = cute.compile[cute.PtxasOptions(TPROJ_PTXAS_OPTIONS)]
    with _preferred_carveout(carveout):
        fn = compiler(kern, *args)
    _CACHE[key] = fn
    return fn


@contextlib.contextmanager
def _preferred_carveout(percent: int) -> Iterator[None]:
    """Compile with CUDA function attribute PREFERRED_SHARED_MEMORY_CARVEOUT = percent (-1: none).

    CuTe-DSL 4.8 applies LaunchConfig.preferred_smem_carveout only to kernels run through its
    JitModule; the default executor our compiled call uses never sets it (no cuFuncSetAttribute
    in its debug log: results/kernel/k12/carveout-probe.log), and the driver then gave late7/late10
    a 196 KiB carve-out: 4 CTAs/SM of 45.6 KB instead of 5. What every launch does apply is the
    kernel op's `cu_attrs` (CuTe-DSL puts max_dynamic_shared_size_bytes there), so the carve-out
    is added to it while this kernel compiles.
    """
    if percent < 0:
        yield
        return
    from cutlass._mlir import ir
    from cutlass._mlir.dialects import cuda as cuda_dialect
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    original = CuTeDSL.__dict__["_generate_cuda_kernel_op"]
    key = str(cuda_dialect.CUFunctionAttribute.preferred_shared_memory_carveout)

    def with_carveout(*args: Any, **kwargs: Any) -> Any:
        op = original.__func__(*args, **kwargs)
        attrs = {na.name: na.attr for na in ir.DictAttr(op.attributes["cu_attrs"])}
        attrs[key] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), percent)
        op.attributes["cu_attrs"] = ir.DictAttr.get(attrs)
        return op

    CuTeDSL._generate_cuda_kernel_op = staticmethod(with_carveout)
    try:
        yield
    finally:
        CuTeDSL._generate_cuda_kernel_op = original


SUPPORTED_T: tuple[int, ...] = tuple(range(T_MIN, T_MAX + 1))
_BV_CHOICES = (16, 32, 64, 128)


_PROPS: dict[int, Any] = {}


def _cuda_props(device: torch.device) -> Any:
    """torch.cuda.get_device_properties of a CUDA device (cached per index); None off CUDA."""
    if device.type != "cuda":
        return None
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _PROPS:
        _PROPS[key] = torch.cuda.get_device_properties(key)
    return _PROPS[key]


def _num_sms(device: torch.device) -> int:
    props = _cuda_props(device)
    return 132 if props is None else props.multi_processor_count


def _device_name(device: torch.device) -> str:
    """The card's name ("NVIDIA H100 80GB HBM3"); "" for a non-CUDA device."""
    props = _cuda_props(device)
    return "" if props is None else props.name


def _pick_bv(batch: int, hv: int, device: torch.device) -> int:
    """Rows of the 128x128 tile per CTA: enough CTAs to fill the GPU twice, else whole tiles."""
    forced = os.environ.get("GDN_UCACHE_BV", "").strip()
    if forced:
        bv = int(forced)
        if bv not in _BV_CHOICES:
            raise ValueError(f"GDN_UCACHE_BV={forced}: expected one of {_BV_CHOICES}")
        return bv
    sms = _num_sms(device)
    for bv in (128, 64, 32):
        if batch * hv * (V_DIM_C // bv) >= 2 * sms:
            return bv
    return 16


# Launch configurations measured fastest on the H200 per (HV, B) at T=4: bench/knockout.py
# `choose` (the smallest mean ratio to flashinfer over 0 / 20 / 100 % flush) over the k5 and
# v7-k4 sweeps (results/kernel/{k5,v7-k4}/sweep-k4-serving.json); both agree that bv128+late3+mbp5
# is best or within 0.5 % at every (HV, B >= 8). Each entry is a '+'-joined knob string as in
# bench/knockout.py (bv = rows per CTA, mbp = launch bounds in CTAs/SM, late = state tiles loaded
# at the projection, persist = persistent CTAs per SM, pf = prefetch level); only configurations
# that passed conformance in the serving and bf16 arms are listed (on the H200 until v12; see
# session 23 below). late3 alone compiles to 80 registers; its launch bound of 5 lets ptxas use
# 96, spill-free (5 CTAs/SM) (bench/ptxas_regs.py, results/kernel/ptxas). B=1 is latency-bound
# (7-9 us at any config).
# Session 11 (results/kernel/k13): late10 with the 228 KiB carve-out and the 16-bit v slice runs
# 5 CTAs/SM and is at or below v5b's mean ratio to flashinfer at every (HV, B >= 32) but HV=32
# B=128 (equal within 0.2 %). Session 12 (results/kernel/k14, one process): late13 (no fp32 [k; q]
# tile, 36.4 KB: 6 CTAs/SM) has the lowest mean ratio at B >= 128 (HV 48/64 by 1-2.5 %, HV=32
# within 0.9 % of late10) and late10 at B=32 (HV 32/48 by 1.5-2 %, HV=64 equal); BV=64 forms
# (two CTAs per head) lose everywhere at B >= 32 (1.00-1.23x late13 at BV=128). Session 22 (v12):
# ostage at B >= 128 (-1.3-1.7 % verify-only in three H200 processes) and bv64 at B = 1 for HV
# 48 / 64 (two H200 processes and an H100 agree), chosen by `knockout.py propose` from session
# 21's H200 sweeps (results/kernel/s21-h200, results/kernel/v12-k6/README.md). Session 23 (v12b):
# late10 + t1early + afe at B = 32 (all HV) and HV=48 B >= 128, t1early at HV=48 B = 8, actfirst
# at HV=64 B = 8, chosen by the same rule from an H100's k6 sweep (no H200 was lent; the H100 has
# the H200's SMs, and B = 8..32 is latency-bound); those entries passed conformance on an H100
# only (results/kernel/v12b-k6/README.md). Session 24 (v12c): + ostage on those entries at B = 32
# for HV 32 / 48 and at HV=48 B >= 128, by the same rule from a second H100's k6 sweep; they
# passed conformance on that H100 (results/kernel/v12c-k6/README.md). Session 25 (v12d): the
# same rule on an H200's k6 sweep (results/kernel/v12d-k6/README.md) moves HV=48 B >= 128 and
# HV=64 B = 32 to late13 + t1early + t1l2 + wvearly + ostage and HV=32 B = 8 to late13 + t1early
# + t1l2 + wvearly; every entry passed conformance on that H200.
_TUNED_T4: dict[int, dict[int, str]] = {
    32: {
        1: "bv32+actfirst",
        8: "bv128+late13+mbp0+t1early+t1l2+wvearly",
        32: "bv128+late10+mbp0+t1early+afe+ostage",
        128: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    },
    48: {
        1: "bv64+actfirst",
        8: "bv128+late10+mbp0+t1early",
        32: "bv128+late10+mbp0+t1early+afe+ostage",
        128: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    },
    64: {
        1: "bv64+actfirst",
        8: "bv128+late3+mbp5+actfirst",
        32: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
        128: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    },
}
# The launch table of H100-class cards (names with "H100" or "H800"; GDN_UCACHE_TABLE overrides
# the choice): v12c's, chosen by the same rule from an H100's k6 sweep (session 24,
# results/kernel/v12c-k6/README.md; every entry passed conformance there and on session 25's H200).
# The two cards have the same SMs and clocks and differ in memory (measured streaming read 3.1 vs
# 4.3 TB/s). On the H200 late13's extra row in flight per SM pays at HV=48 B >= 128 and HV=64
# B = 32; on an H100 late10 + afe (phase 5's state-free math before the state) still wins there:
# session 30, two processes on one H100 (results/kernel/table-h100/README.md): the H100 table
# wins at all four entries where the two differ, 2.1 % on the geometric mean (3.1 % all-flush).
_TUNED_T4_H100: dict[int, dict[int, str]] = {
    32: {
        1: "bv32+actfirst",
        8: "bv128+late3+mbp5+actfirst",
        32: "bv128+late10+mbp0+t1early+afe+ostage",
        128: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    },
    48: {
        1: "bv64+actfirst",
        8: "bv128+late10+mbp0+t1early",
        32: "bv128+late10+mbp0+t1early+afe+ostage",
        128: "bv128+late10+mbp0+t1early+afe+ostage",
    },
    64: {
        1: "bv64+actfirst",
        8: "bv128+late3+mbp5+actfirst",
        32: "bv128+late10+mbp0+t1early+afe",
        128: "bv128+late13+mbp0+t1early+t1l2+wvearly+ostage",
    },
}
# GDN_UCACHE_TABLE value -> the module-level table it names (looked up at call time, so a test
# may replace a table); cards of other names (the H200, and cards never measured) take _TUNED_T4
_TABLE_NAMES = {"h200": "_TUNED_T4", "h100": "_TUNED_T4_H100"}
_H100_CLASS = ("H100", "H800")
_KNOB_ENV = (
    "GDN_UCACHE_BV",
    "GDN_UCACHE_MBP",
    "GDN_UCACHE_LATE",
    "GDN_UCACHE_PERSIST",
    "GDN_UCACHE_PREFETCH",
)


def _config_knobs(name: str) -> dict[str, int]:
    """'bv128+late3+mbp7' -> {'bv': 128, 'late': 3, 'mbp': 7}; 'base' -> {}."""
    out: dict[str, int] = {}
    for part in name.split("+"):
        if part == "base":
            continue
        if part in ("pf", "pf1", "pf2"):
            out["prefetch"] = int(part[2:] or 1)
            continue
        if part in FLAG_NAMES and part != "xpf":  # xpf takes its distance: xpfN below
            out[part] = 1
            continue
        for key in ("bv", "mbp", "late", "persist", "xpf"):
            if part.startswith(key) and part[len(key) :].isdigit():
                out[key] = int(part[len(key) :])
                break
        else:
            raise ValueError(f"unknown launch-config knob {part!r} in {name!r}")
    return out


def _launch_table(device: torch.device | None) -> dict[int, dict[int, str]]:
    """The measured launch table for this card: GDN_UCACHE_TABLE (h200 / h100) if set, else
    _TUNED_T4_H100 on H100-class cards and _TUNED_T4 on every other (and without a device)."""
    forced = os.environ.get("GDN_UCACHE_TABLE", "").strip().lower()
    if forced:
        if forced not in _TABLE_NAMES:
            raise ValueError(
                f"GDN_UCACHE_TABLE={forced!r}: expected one of {', '.join(_TABLE_NAMES)} "
                "(or unset it: the card's name then chooses)"
            )
        return globals()[_TABLE_NAMES[forced]]
    name = _device_name(device) if device is not None else ""
    return globals()[_TABLE_NAMES[_card_table(name)]]


def _card_table(name: str) -> str:
    """The GDN_UCACHE_TABLE key of a card name: h100 for H100-class names, else h200 (also
    bench/knockout.py's rule for the card a sweep recorded)."""
    return "h100" if any(part in name for part in _H100_CLASS) else "h200"


def _tuned(batch: int, hv: int, T: int, device: torch.device | None = None) -> dict[str, int]:
    """The measured configuration of the nearest HV and the largest measured B <= batch, from
    the card's table (_launch_table)."""
    tuned_table = _launch_table(device)
    if T != 4 or not tuned_table or any(os.environ.get(k, "").strip() for k in _KNOB_ENV):
        return {}  # knobs set explicitly: they alone decide (reproducible experiments)
    hv_key = min(tuned_table, key=lambda h: (abs(h - hv), h))
    table = tuned_table[hv_key]
    b_key = max((b for b in table if b <= batch), default=min(table))
    return _config_knobs(table[b_key])


def launch_config(batch: int, hv: int, T: int, device: torch.device) -> dict[str, int]:
    """Launch shape for one call: BV (rows per CTA), launch bounds, late state tiles, programs.

    The card's measured table (_launch_table) where it applies, else the heuristics below; every
    value can be forced for experiments (the table is then ignored): GDN_UCACHE_BV, GDN_UCACHE_MBP,
    GDN_UCACHE_LATE, GDN_UCACHE_PERSIST (CTAs per SM of a persistent grid; 0 = one row per CTA),
    GDN_UCACHE_NPROG, GDN_UCACHE_PREFETCH (persistent only: 1 = cp.async the next row's ring
    windows, 2 = also its q/k/v rows and a/b gates).
    """
    tuned = _tuned(batch, hv, T, device)

    def knob(name: str, key: str, default: int) -> int:
        raw = os.environ.get(name, "").strip()
        return int(raw) if raw else tuned.get(key, default)

    bv = tuned["bv"] if "bv" in tuned else _pick_bv(batch, hv, device)
    # BV=128 grids are limited by how many CTAs (and so state bytes in flight) fit on an SM:
    # launch bounds of 4 CTAs/SM by default (v3.1 rule).
    persist = knob("GDN_UCACHE_PERSIST", "persist", 0)
    nprog = _persistent_programs(batch, hv, bv, device, persist)
    mbp = persist if nprog < batch else (4 if bv == 128 and T <= 4 else 0)
    mbp = knob("GDN_UCACHE_MBP", "mbp", mbp)
    late = knob("GDN_UCACHE_LATE", "late", 0)
    prefetch = knob("GDN_UCACHE_PREFETCH", "prefetch", 0)
    # the load-order / epilogue knobs (LoadFlags), not table-switching: GDN_UCACHE_T1EARLY=1 with
    # the table = the table's modes with it
    flags = {name: knob(f"GDN_UCACHE_{name.upper()}", name, 0) for name in FLAG_NAMES}
    return {"bv": bv, "mbp": mbp, "late": late, "nprog": nprog, "prefetch": prefetch, **flags}


def _persistent_programs(
    batch: int, hv: int, bv: int, device: torch.device, per_sm: int | None = None
) -> int:
    """Programs along the batch for persistent CTAs (per_sm CTAs per SM, default from
    GDN_UCACHE_PERSIST; 0 = off).

    Each program walks ceil(B / nprog) rows; nprog is chosen so that the rows split evenly and
    all CTAs are resident at once. Returns B (one row per CTA) when off or when B is small.
    """
    if per_sm is None:
        per_sm = int(os.environ.get("GDN_UCACHE_PERSIST", "0") or 0)
    if per_sm <= 0:
        return batch
    forced = int(os.environ.get("GDN_UCACHE_NPROG", "0") or 0)  # tests: rows per CTA > 1
    if forced > 0:
        return min(forced, batch)
    slots = per_sm * _num_sms(device) // (hv * (V_DIM_C // bv))
    if slots < 1 or batch <= slots:
        return batch
    rows_each = -(-batch // slots)
    return -(-batch // rows_each)


def _rows_16b(t: torch.Tensor) -> bool:
    """16-byte aligned base and batch/token strides (cp.async of whole 8-element chunks)."""
    return t.data_ptr() % 16 == 0 and t.stride(0) % 8 == 0 and t.stride(1) % 8 == 0


def _as_f32(param: torch.Tensor, name: str, hv: int) -> torch.Tensor:
    """A_log / dt_bias as contiguous fp32 [HV]; casts are cached by tensor id (freed with it)."""
    if param.numel() != hv:
        raise ValueError(f"{name} must have HV={hv} elements, got shape {tuple(param.shape)}")
    if param.dtype == torch.float32 and param.is_contiguous():
        return param.reshape(hv)
    key = id(param)
    hit = _F32_CACHE.get(key)
    if hit is not None and hit.device == param.device:
        return hit
    cast = param.detach().reshape(hv).to(torch.float32).contiguous()
    _F32_CACHE[key] = cast
    weakref.finalize(param, _F32_CACHE.pop, key, None)
    return cast


def _check_inner_dense(t: torch.Tensor, name: str) -> None:
    dense = torch.empty(t.shape[1:], device="meta").stride() if t.dim() > 1 else ()
    if tuple(t.stride()[1:]) != tuple(dense):
        raise NotImplementedError(
            f"{name}: inner dims must be dense (strides {tuple(t.stride())}); only dim 0 may be "
            "block-strided"
        )
    inner = t[0].numel() if t.shape[0] > 0 else 0
    if t.shape[0] > 1 and t.stride(0) < inner:
        raise NotImplementedError(
            f"{name}: dim-0 stride {t.stride(0)} overlaps the inner {inner} elements"
        )


def _check_vec_aligned(t: torch.Tensor, name: str) -> None:
    # 16-byte vector loads/stores of 8 elements: the base and the dim-0 stride must allow them.
    if t.data_ptr() % 16 != 0 or t.stride(0) % 8 != 0:
        raise ValueError(
            f"{name}: needs a 16-byte aligned base and a dim-0 stride that is a multiple of 8 "
            f"elements (got ptr % 16 = {t.data_ptr() % 16}, stride(0) = {t.stride(0)}); "
            "allocate the pool/page with 16-byte granularity"
        )


def _token_view(x: torch.Tensor, name: str, heads: int) -> torch.Tensor:
    """[B, T, heads, 128] with head stride 128 and unit element stride (else a contiguous copy)."""
    if x.stride(-1) == 1 and x.stride(-2) == 128:
        return x
    return x.contiguous()


def _gate_view(x: torch.Tensor) -> torch.Tensor:
    """[B, T, HV] with unit head stride (else a contiguous copy)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def _int32_vec(x: torch.Tensor, name: str, batch: int) -> torch.Tensor:
    assert x.dtype == torch.int32, f"{name} must be int32, got {x.dtype}"
    assert x.dim() == 1 and x.shape[0] == batch, (
        f"{name} must have shape [B]={batch}, got {tuple(x.shape)}"
    )
    return x if x.is_contiguous() else x.contiguous()


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
) -> torch.Tensor:
    """One fused verify(+flush) step for B requests; returns the outputs [B, T, HV, 128] (IO).

    Same contract, argument order, defaults, errors and cursor semantics as flashinfer 0.7.2.post1's
    `gated_delta_rule_mtp_ucache_flush` (kernel-spec section 1), plus T in 2..8, any strides with
    a dynamic batch, and fp32 A_log/dt_bias (see the module docstring).

    Rows with P = hist_len[b] >= flush_min fold their window into the checkpoint
    (pool[s] <- e^{G*} S0 + sum_j w_j u_j k_j^T); every live row appends its T drafts at ring
    rows (cache_base + P + t) & 31. Rows with initial_state_indices < 0 write nothing.
    With restart_hist_on_flush=True (the default) the standalone cursor commit runs afterwards:
    flushed rows get cache_base += hist_len and hist_len = 0; the caller still adds the accepted
    counts. vLLM passes False and commits itself.
    """
    del disable_state_update  # accepted and ignored, as upstream
    # 1. required tensors
    assert q is not None and k is not None and v is not None and b is not None, (
        "q, k, v, b are required"
    )
    assert initial_state_source is not None, "initial_state_source is required"
    # 2. unsupported features
    if recovery_steps != 0:
        raise NotImplementedError("recovery_steps must be 0 for the ucache kernel")
    if disable_output:
        raise NotImplementedError("disable_output is not supported by the ucache kernel")
    for name, value in (
        ("intermediate_states_buffer", intermediate_states_buffer),
        ("accepted_steps", accepted_steps),
        ("ssm_state_indices", ssm_state_indices),
        ("output_state_indices", output_state_indices),
    ):
        if value is not None:
            raise NotImplementedError(f"{name} must be None for the ucache kernel")
    # 3. scalars and the pool dtype
    assert softplus_beta == 1.0, f"softplus_beta must be 1.0, got {softplus_beta}"
    assert softplus_threshold == 20.0, f"softplus_threshold must be 20.0, got {softplus_threshold}"
    assert use_qk_l2norm_in_kernel, "use_qk_l2norm_in_kernel must be True"
    pool = initial_state_source
    assert pool.dtype == ST_TORCH, (
        f"initial_state_source is {pool.dtype} but this module was imported with state dtype "
        f"{ST_TORCH}: set GDN_UCACHE_STATE_DTYPE before import or cast the pool"
    )
    # 4. head dims
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    assert K == K_DIM and V == V_DIM_C, f"K and V must be 128, got K={K} V={V}"
    assert k.shape == q.shape, f"k shape {tuple(k.shape)} must equal q shape {tuple(q.shape)}"
    assert v.shape[:2] == (B, T), f"v shape {tuple(v.shape)} must start with (B, T) = {(B, T)}"
    assert HV % H == 0, f"HV={HV} must be a multiple of H={H}"
    assert a.shape == (B, T, HV) and b.shape == (B, T, HV), (
        f"a and b must be [B, T, HV] = {(B, T, HV)}, got {tuple(a.shape)} and {tuple(b.shape)}"
    )
    # 5. activation dtypes
    for name, t in (("q", q), ("k", k), ("v", v), ("a", a), ("b", b)):
        assert t.dtype == IO_TORCH, (
            f"{name} is {t.dtype} but the IO dtype is {IO_TORCH} (GDN_UCACHE_IO_DTYPE at import)"
        )
    # 6. ring tensors
    for name, t in (
        ("k_cache", k_cache),
        ("u_cache", u_cache),
        ("g_cache", g_cache),
        ("hist_len", hist_len),
    ):
        assert t is not None, f"{name} is required (the ucache kernel needs the ring)"
    # 7. pool layouts
    npool = pool.shape[0]
    assert pool.shape[1:] == (HV, V_DIM_C, K_DIM), (
        f"pool must be [pool, HV, 128, 128], got {tuple(pool.shape)}"
    )
    assert k_cache.dtype == RING_TORCH and u_cache.dtype == RING_TORCH, (
        f"k_cache/u_cache must be {RING_TORCH} (GDN_UCACHE_RING_DTYPE at import), got "
        f"{k_cache.dtype}/{u_cache.dtype}"
    )
    assert k_cache.shape == (npool, H, RING_SLOTS, K_DIM), (
        f"k_cache must be {(npool, H, RING_SLOTS, K_DIM)}, got {tuple(k_cache.shape)}"
    )
    assert u_cache.shape == (npool, HV, RING_SLOTS, V_DIM_C), (
        f"u_cache must be {(npool, HV, RING_SLOTS, V_DIM_C)}, got {tuple(u_cache.shape)}"
    )
    assert g_cache.shape == (npool, HV, RING_SLOTS), (
        f"g_cache must be {(npool, HV, RING_SLOTS)}, got {tuple(g_cache.shape)}"
    )
    assert g_cache.dtype == torch.float32, f"g_cache must be float32, got {g_cache.dtype}"
    for name, t in (
        ("initial_state_source", pool),
        ("k_cache", k_cache),
        ("u_cache", u_cache),
        ("g_cache", g_cache),
    ):
        _check_inner_dense(t, name)
    hist_len_c = _int32_vec(hist_len, "hist_len", B)
    # 8. standalone-commit guards
    if restart_hist_on_flush:
        if cache_base is None:
            raise ValueError(
                "restart_hist_on_flush=True needs a caller-owned cache_base tensor (updated in "
                "place); pass cache_base or restart_hist_on_flush=False"
            )
        assert hist_len.is_contiguous(), (
            "hist_len must be contiguous with restart_hist_on_flush=True"
        )
        assert cache_base.is_contiguous(), (
            "cache_base must be contiguous with restart_hist_on_flush=True"
        )
        capturing = hist_len.is_cuda and torch.cuda.is_current_stream_capturing()
        if B and not capturing:  # host sync, as upstream; skipped inside CUDA-graph capture
            h_min, h_max = int(hist_len.min()), int(hist_len.max())
            assert 0 <= h_min and h_max <= W_RING, (
                f"hist_len out of legal range [0, {W_RING}]: min {h_min}, max {h_max}"
            )
            c_min, c_max = int(cache_base.min()), int(cache_base.max())
            assert 0 <= c_min and c_max < RING_SLOTS, (
                f"cache_base out of legal range [0, {RING_SLOTS}): min {c_min}, max {c_max}"
            )
    # 9. cache_base
    dev = q.device
    if cache_base is None:
        zb = _ZERO_BASE.get((dev, B))
        if zb is None:
            zb = torch.zeros(B, dtype=torch.int32, device=dev)
            _ZERO_BASE[(dev, B)] = zb
        base_c = zb
    else:
        base_c = _int32_vec(cache_base, "cache_base", B)
    # 10. T
    if not T_MIN <= T <= T_MAX:
        raise NotImplementedError(
            f"T={T} is not supported: this kernel runs T in {T_MIN}..{T_MAX} "
            "(num_speculative_tokens 1..7); T=1 is plain decode and T>8 leaves no ring headroom"
        )
    # 11. flush_min
    fm = W_RING - T + 1 if flush_min is None else int(flush_min)
    assert 1 <= fm <= W_RING - T + 1, (
        f"flush_min must be in [1, {W_RING - T + 1}] for T={T}, got {fm}"
    )
    # 13. device
    if dev.type != "cuda":
        raise ValueError(f"gated_delta_rule_mtp_ucache_flush needs CUDA tensors, got {dev}")
    for name, t in (("initial_state_source", pool), ("k_cache", k_cache), ("u_cache", u_cache)):
        _check_vec_aligned(t, name)
    if initial_state_indices is None:
        idx_c = torch.arange(B, dtype=torch.int32, device=dev)
    else:
        assert initial_state_indices.dtype == torch.int32, (
            "initial_state_indices must be int32 (it feeds a 32-bit operand), got "
            f"{initial_state_indices.dtype}"
        )
        idx_c = initial_state_indices.contiguous()
    qv, kv, vv = _token_view(q, "q", H), _token_view(k, "k", H), _token_view(v, "v", HV)
    av, bv_ = _gate_view(a), _gate_view(b)
    alog32 = _as_f32(A_log, "A_log", HV)
    dtb32 = _as_f32(dt_bias, "dt_bias", HV)
    sc = float(K_DIM**-0.5 if scale is None else scale)

    direct = (
        output is not None
        and tuple(output.shape) == (B, T, HV, V_DIM_C)
        and output.dtype == IO_TORCH
        and output.stride(-1) == 1
        and output.stride(-2) == V_DIM_C
    )
    out = output if direct else torch.empty((B, T, HV, V_DIM_C), dtype=IO_TORCH, device=dev)

    if B > 0:
        _launch(
            qv,
            kv,
            vv,
            av,
            bv_,
            alog32,
            dtb32,
            pool,
            k_cache,
            u_cache,
            g_cache,
            idx_c,
            hist_len_c,
            base_c,
            out,
            fm,
            sc,
            T,
            H,
            HV,
            bool(pdl_trigger),
        )
    if output is not None and not direct:
        output.copy_(out)
        out = output
    if restart_hist_on_flush:
        flushed = hist_len >= fm
        cache_base.copy_(((cache_base + hist_len * flushed) & RING_MASK).to(cache_base.dtype))
        hist_len.masked_fill_(flushed, 0)
    return out


_SEED = [0x2545F491]


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    alog: torch.Tensor,
    dtb: torch.Tensor,
    pool: torch.Tensor,
    kc: torch.Tensor,
    uc: torch.Tensor,
    gc: torch.Tensor,
    idx: torch.Tensor,
    hist: torch.Tensor,
    base: torch.Tensor,
    out: torch.Tensor,
    flush_min: int,
    scale: float,
    T: int,
    H: int,
    HV: int,
    pdl: bool,
) -> None:
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64
    from cutlass.cute.runtime import make_ptr

    dev = q.device
    os.environ.setdefault("CUTE_DSL_ARCH", _arch_string(dev))
    batch = q.shape[0]
    cfg = launch_config(batch, HV, T, dev)
    bv, nprog = cfg["bv"], cfg["nprog"]
    prefetch = cfg["prefetch"]
    if prefetch >= 2 and not all(_rows_16b(t) for t in (q, k, v)):
        prefetch = 1  # activation rows not 16-byte aligned: cp.async only the ring windows
    flags = {name: cfg[name] for name in FLAG_NAMES}
    # 16-byte output rows need a 16-byte aligned output (a caller's view may not be)
    flags["ostage"] = bool(cfg["ostage"]) and _rows_16b(out)
    fn = compile_variant(
        T,
        H,
        HV,
        bv,
        IO_TORCH,
        ST_TORCH,
        RING_TORCH,
        STATE_SR,
        pdl,
        mbp=cfg["mbp"],
        persist=nprog < batch,
        late=cfg["late"],
        prefetch=prefetch,
        # 16-byte q/k loads where the rows allow them (GDN_UCACHE_VEC_QK=0 forces the scalar path)
        vec_qk=os.environ.get("GDN_UCACHE_VEC_QK", "1") != "0" and _rows_16b(q) and _rows_16b(k),
        **flags,
    )
    gm = cute.AddressSpace.gmem
    io = cutlass.BFloat16 if IO_TORCH == torch.bfloat16 else cutlass.Float16
    st = cutlass.BFloat16 if ST_TORCH == torch.bfloat16 else cutlass.Float16
    ring = cutlass.BFloat16 if RING_TORCH == torch.bfloat16 else cutlass.Float16

    def p(t: torch.Tensor, dt: type, align: int) -> Any:
        return make_ptr(dt, t.data_ptr(), gm, assumed_align=align)

    if STATE_SR:
        _SEED[0] = (_SEED[0] * 1103515245 + 12345) & 0x7FFFFFFF
    stream = cuda_drv.CUstream(torch.cuda.current_stream(dev).cuda_stream)
    fn(
        p(q, io, 2),
        p(k, io, 2),
        p(v, io, 2),
        p(a, io, 2),
        p(b, io, 2),
        p(alog, Float32, 4),
        p(dtb, Float32, 4),
        p(pool, st, 16),
        p(kc, ring, 16),
        p(uc, ring, 16),
        p(gc, Float32, 4),
        p(idx, Int32, 4),
        p(hist, Int32, 4),
        p(base, Int32, 4),
        p(out, io, 2),
        Int64(q.stride(0)),
        Int64(q.stride(1)),
        Int64(k.stride(0)),
        Int64(k.stride(1)),
        Int64(v.stride(0)),
        Int64(v.stride(1)),
        Int64(a.stride(0)),
        Int64(a.stride(1)),
        Int64(b.stride(0)),
        Int64(b.stride(1)),
        Int64(out.stride(0)),
        Int64(out.stride(1)),
        Int64(pool.stride(0)),
        Int64(kc.stride(0)),
        Int64(uc.stride(0)),
        Int64(gc.stride(0)),
        Int32(batch),
        Int32(nprog),
        Int32(flush_min),
        Float32(scale),
        Int32(_SEED[0]),
        stream,
    )
