"""Producer / consumer streaming probe (issue #6, session 26): can a CTA whose one producer warp
keeps the next rows' states in flight stream them at flashinfer's rate while its consumer warps
spend a serial tail on every row?

The shipped kernel's verify-only loss on the H200 is phase 5's serial tail (kernels/NOTES.md,
"Session 25": without phase 5 it streams at flashinfer's DRAM rate and beats it by 3-5 %). The
producer / consumer kernel sketched there would hide that tail behind the next rows' copies. Before
any of the real math moves into such a kernel, this probe times the structure alone on the real
state pool of a grid point (same rows, same slots, cold L2), in one process with flashinfer and
the shipped kernel:

| tensor | shape                | dtype | access                                       |
|--------|----------------------|-------|----------------------------------------------|
| pool   | [pool, HV, 128, 128] | bf16  | read: row z's state of head h (32 KB), once  |
| idx    | [B]                  | int32 | read: the row's pool slot (all >= 0 here)    |
| out    | [B * HV, 1024]       | bf16  | written: 2 KB per (row, head), like T=4's    |
|        |                      |       | u + output rows (a checksum of the state)    |

Kernels (items = B * HV, item i = row i // HV, head i % HV, as the real grid orders them):
- `plain`: one item per CTA, 4 warps (today's shape): thread 0 arms an mbarrier and issues the
  item's bulk copies, every warp waits, reads its quarter of the stage, spins `tail` cycles and
  writes its 2 KB. 32 KB of shared memory: 6 CTAs/SM.
- `pc`: persistent CTAs (`ctas` per SM), 4 (or 8) consumer warps + 1 producer warp, `stages`
  32 KB stages with full / empty mbarriers. The producer's lane 0 walks the CTA's items, waits
  for a free stage and issues its copies; the consumers wait for the stage, read it, release it,
  then spin the tail and write: the tail runs while the producer refills the stage.

`tail` (clock cycles, ~1.98 GHz on the H200 / H100 SXM) stands in for phases 1-5's serial work per
item. A clock spin issues few instructions, so it stands for the math's latency but not for its
issue pressure; the `wN` form of TAIL (session 27) runs N iterations of four independent fp32 FMA
chains per consumer thread instead (~6 warp instructions per iteration: w200 ~ 1.2 k per warp
per item, the shipped kernel's ~4.8 k per row over 4 warps), whose result reaches the output only
under a condition that never holds, so the checksum stays the state's.

Reading: if `pc` at tail ~ phase 5's cost streams at or below flashinfer where `plain`
with the same tail does not, the producer / consumer kernel is worth building; if `pc` cannot
reach the floor even at tail 0, it is not (at that residency).

Run (GPU): python3 -m bench.pc_probe --hv 32 64 --batch 32 256 --json out.json
"""

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ITEM_ELEMS = 128 * 128  # one (row, value head) state
ITEM_BYTES = ITEM_ELEMS * 2  # bf16
OUT_ELEMS = 1024  # 2 KB written per item (T=4: u + output rows of 128 bf16 each)
WARP_CHOICES = (4, 8)  # consumer warps per CTA (plain: 4)
MODES = ("plain", "pc")
MAX_SMEM = 227 * 1024  # usable shared memory per SM on SM90 (1 KB per CTA reserved)

_CACHE: dict[tuple, Any] = {}


def check_config(
    mode: str, stages: int, ctas: int, copy_bytes: int, tail: int, warps: int = 4, work: int = 0
) -> None:
    """Raise ValueError naming what to change if the configuration cannot be built."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {MODES}")
    if copy_bytes % 16 or ITEM_BYTES % copy_bytes or not 1024 <= copy_bytes <= ITEM_BYTES:
        raise ValueError(
            f"copy_bytes={copy_bytes}: expected a multiple of 16 in 1024..{ITEM_BYTES} "
            f"that divides {ITEM_BYTES}"
        )
    if not 0 <= tail < 1 << 20:
        raise ValueError(f"tail={tail}: expected clock cycles in 0..{(1 << 20) - 1}")
    if not 0 <= work < 1 << 16 or (work and tail):
        raise ValueError(
            f"work={work}, tail={tail}: expected FMA-loop iterations in 0..{(1 << 16) - 1}, "
            "with tail 0 (a tail is cycles or work, not both)"
        )
    if warps not in WARP_CHOICES or (mode == "plain" and warps != 4):
        raise ValueError(f"warps={warps}: expected one of {WARP_CHOICES} (plain: 4)")
    if mode == "pc":
        if not 2 <= stages <= 6:
            raise ValueError(f"stages={stages}: expected 2..6")
        need = ctas * (stages * ITEM_BYTES + 1024 + 128)
        if not 1 <= ctas or need > MAX_SMEM:
            raise ValueError(
                f"ctas={ctas} x stages={stages}: {need} bytes of shared memory per SM "
                f"(> {MAX_SMEM}); lower ctas or stages"
            )


def _build_class() -> type:
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import BFloat16, Float32, Int32, Int64
    from cutlass.memory import SmemAllocator

    def lds_v4(addr: Any) -> tuple:
        return cute.arch.inline_ptx(
            "ld.shared.v4.b32 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];",
            write_only_types=[Int32] * 4,
            read_only_args=[addr],
        )

    def stg_v4(ptr: Any, w: list) -> None:
        cute.arch.inline_ptx(
            "st.global.v4.b32 [{$r0}], {{$r1}, {$r2}, {$r3}, {$r4}};",
            read_only_args=[ptr, w[0], w[1], w[2], w[3]],
        )

    @cute.jit
    def arm_and_copy(src: Any, dst: Any, mbar: Any, copy_bytes: cutlass.Constexpr) -> None:
        """Arm `mbar` for one item's bytes, then copy the item (ITEM_BYTES contiguous at `src`)
        to `dst` in copy_bytes pieces that complete on it. One thread calls this."""
        cute.arch.inline_ptx(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{$r0}], {$r1};",
            read_only_args=[mbar.toint(), Int32(ITEM_BYTES)],
        )
        for c in cutlass.range_constexpr(ITEM_BYTES // copy_bytes):
            cute.arch.inline_ptx(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                " [{$r0}], [{$r1}], {$r2}, [{$r3}];",
                read_only_args=[
                    (dst + c * (copy_bytes // 2)).toint(),
                    (src + c * (copy_bytes // 2)).toint(),
                    Int32(copy_bytes),
                    mbar.toint(),
                ],
            )

    def stg_v2(ptr: Any, w: list) -> None:
        cute.arch.inline_ptx(
            "st.global.v2.b32 [{$r0}], {{$r1}, {$r2}};", read_only_args=[ptr, w[0], w[1]]
        )

    @cute.jit
    def read_share(stage: Any, tid: Any, nthreads: cutlass.Constexpr) -> list:
        """The xor of this consumer thread's share of the stage: bytes tid * 16 + j * 16 *
        nthreads (16-byte reads, a warp's 32 lanes on 512 contiguous bytes: no bank conflicts)."""
        acc = [Int32(0)] * 4
        base = stage.toint() + tid * 16
        for j in cutlass.range_constexpr(ITEM_BYTES // (16 * nthreads)):
            w = lds_v4(base + j * 16 * nthreads)
            acc = [acc[i] ^ w[i] for i in range(4)]
        return acc

    @cute.jit
    def spin(cycles: cutlass.Constexpr) -> None:
        """Busy for `cycles` clock cycles (the stand-in for a row's serial work)."""
        if cutlass.const_expr(cycles > 0):
            t0 = cute.arch.clock64()
            elapsed = Int64(0)
            while elapsed < Int64(cycles):
                elapsed = cute.arch.clock64() - t0

    @cute.jit
    def busy(iters: cutlass.Constexpr, acc: list) -> list:
        """`iters` iterations of four independent fp32 FMA chains seeded from acc (issue
        pressure like the math's); acc comes back unchanged unless the chains' sum is -1, which
        sums of positive terms never are (ptxas cannot know: the loop stays)."""
        if cutlass.const_expr(iters > 0):
            x = [Float32(acc[i] & Int32(255)) for i in range(4)]
            for _ in cutlass.range(iters, unroll=1):
                x = [x[i] * Float32(0.999) + Float32(1.0) for i in range(4)]
            hit = (x[0] + x[1]) + (x[2] + x[3]) == Float32(-1.0)
            acc = [acc[0] ^ cutlass.select_(hit, Int32(1), Int32(0)), acc[1], acc[2], acc[3]]
        return acc

    @cute.jit
    def item_src(pool: Any, idx: Any, hv: Any, pool_s0: Any, item: Any) -> Any:
        """Item `item`'s state: row item // hv, head item % hv, at the row's pool slot."""
        z = item // hv
        h = item - z * hv
        slot = cute.arch.load(idx + z, Int32)
        return pool + (Int64(slot) * pool_s0 + Int64(h) * Int64(ITEM_ELEMS))

    @cute.jit
    def finish(
        out: Any,
        acc: list,
        item: Any,
        tid: Any,
        tail: cutlass.Constexpr,
        nthreads: cutlass.Constexpr,
        work: cutlass.Constexpr,
    ) -> None:
        """The tail (spin or FMA work), then this thread's part of the item's 2 KB: its 16
        bytes (128 consumer threads), or 8 bytes (256: the 4 words folded to 2), so both forms
        write 2 KB."""
        spin(tail)
        acc = busy(work, acc)
        per = OUT_ELEMS * 2 // nthreads  # bytes per thread
        dst = out + (Int64(item) * Int64(OUT_ELEMS) + Int64(tid * (per // 2)))
        if cutlass.const_expr(per == 16):
            stg_v4(dst.toint(), acc)
        else:
            stg_v2(dst.toint(), [acc[0] ^ acc[2], acc[1] ^ acc[3]])

    class StreamProbe:
        def __init__(
            self, mode: str, stages: int, ctas: int, copy_bytes: int, tail: int, warps: int,
            work: int,
        ):  # fmt: skip
            # built only by compile_probe, which has checked the configuration
            self.warps = warps
            self.consumers = 32 * warps
            self.mode = mode
            self.stages = stages if mode == "pc" else 1
            self.ctas = ctas
            self.copy_bytes = copy_bytes
            self.tail = tail
            self.work = work
            self.threads = self.consumers + (32 if mode == "pc" else 0)

        @cute.jit
        def __call__(
            self,
            pool: cute.Pointer,
            idx: cute.Pointer,
            out: cute.Pointer,
            items: Int32,
            hv: Int32,
            pool_s0: Int64,
            nprog: Int32,
            stream: cuda_drv.CUstream,
        ) -> None:
            self.kernel(pool, idx, out, items, hv, pool_s0, nprog).launch(
                grid=(nprog, 1, 1),
                block=(self.threads, 1, 1),
                stream=stream,
                min_blocks_per_mp=self.ctas if self.mode == "pc" else 1,
                preferred_smem_carveout=100,
            )

        @cute.kernel
        def kernel(
            self,
            pool: cute.Pointer,
            idx: cute.Pointer,
            out: cute.Pointer,
            items: Int32,
            hv: Int32,
            pool_s0: Int64,
            nprog: Int32,
        ) -> None:
            NS = self.stages
            tid = cute.arch.thread_idx()[0]
            cta = cute.arch.block_idx()[0]
            warp = tid // 32
            lane = tid % 32
            smem = SmemAllocator()
            stage0 = smem.allocate_array(BFloat16, NS * ITEM_ELEMS, byte_alignment=128)
            full = smem.allocate_array(Int64, NS, byte_alignment=8)
            empty = smem.allocate_array(Int64, NS, byte_alignment=8)
            if tid == 0:
                for s in cutlass.range_constexpr(NS):
                    cute.arch.mbarrier_init(full + s, 1)
                    cute.arch.mbarrier_init(empty + s, self.warps)  # one per consumer warp
                cute.arch.mbarrier_init_fence()
            cute.arch.sync_threads()

            if cutlass.const_expr(self.mode == "plain"):
                if tid == 0:
                    src = item_src(pool, idx, hv, pool_s0, cta)
                    arm_and_copy(src, stage0, full, self.copy_bytes)
                cute.arch.mbarrier_wait(full, 0)
                acc = read_share(stage0, tid, self.consumers)
                finish(out, acc, cta, tid, self.tail, self.consumers, self.work)
            else:
                n_mine = (items - cta + nprog - Int32(1)) // nprog
                if warp == self.warps:  # the producer: the warp after the consumers
                    if lane == 0:
                        for it in cutlass.range(n_mine, unroll=1):
                            s = it % NS
                            n = it // NS
                            if n > 0:
                                cute.arch.mbarrier_wait(empty + s, (n - 1) % 2)
                            arm_and_copy(
                                item_src(pool, idx, hv, pool_s0, cta + it * nprog),
                                stage0 + s * ITEM_ELEMS,
                                full + s,
                                self.copy_bytes,
                            )
                else:
                    for it in cutlass.range(n_mine, unroll=1):
                        s = it % NS
                        cute.arch.mbarrier_wait(full + s, (it // NS) % 2)
                        acc = read_share(stage0 + s * ITEM_ELEMS, tid, self.consumers)
                        cute.arch.sync_warp()
                        if lane == 0:
                            cute.arch.mbarrier_arrive(empty + s)
                        finish(
                            out, acc, cta + it * nprog, tid, self.tail, self.consumers, self.work
                        )

    return StreamProbe


_CLASS: list[type] = []


def compile_probe(
    mode: str, stages: int, ctas: int, copy_bytes: int, tail: int, warps: int = 4, work: int = 0
) -> Any:
    """The compiled probe for exactly these compile-time constants (cached)."""
    check_config(mode, stages, ctas, copy_bytes, tail, warps, work)
    pc = mode == "pc"
    key = (mode, stages if pc else 1, ctas if pc else 0, copy_bytes, tail, warps, work)
    if key in _CACHE:
        return _CACHE[key]
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32, Int64
    from cutlass.cute.runtime import make_ptr

    if not _CLASS:
        _CLASS.append(_build_class())
    probe = _CLASS[0](mode, stages, ctas, copy_bytes, tail, warps, work)
    gm = cute.AddressSpace.gmem
    args = [
        make_ptr(cutlass.BFloat16, 256, gm, assumed_align=16),
        make_ptr(cutlass.Int32, 256, gm, assumed_align=4),
        make_ptr(cutlass.BFloat16, 256, gm, assumed_align=16),
        Int32(1),
        Int32(1),
        Int64(0),
        Int32(1),
        cuda_drv.CUstream(0),
    ]
    # the whole 228 KiB carve-out, applied the way the shipped kernel applies it (a launch
    # config's carve-out is not, under cute.compile's executor: kernels/gdn_ucache_flush_next.py)
    from kernels.gdn_ucache_flush_next import _preferred_carveout

    with _preferred_carveout(100):
        fn = cute.compile(probe, *args)
    _CACHE[key] = fn
    return fn


def run_probe(
    fn: Any, mode: str, ctas: int, pool: torch.Tensor, idx: torch.Tensor, out: torch.Tensor
) -> None:
    """One launch on the live tensors (pool [P, HV, 128, 128] bf16, idx [B] int32)."""
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32, Int64
    from cutlass.cute.runtime import make_ptr

    gm = cute.AddressSpace.gmem
    hv = pool.shape[1]
    items = idx.shape[0] * hv
    nsm = torch.cuda.get_device_properties(pool.device).multi_processor_count
    nprog = items if mode == "plain" else min(items, nsm * ctas)
    stream = cuda_drv.CUstream(torch.cuda.current_stream(pool.device).cuda_stream)
    fn(
        make_ptr(cutlass.BFloat16, pool.data_ptr(), gm, assumed_align=16),
        make_ptr(cutlass.Int32, idx.data_ptr(), gm, assumed_align=4),
        make_ptr(cutlass.BFloat16, out.data_ptr(), gm, assumed_align=16),
        Int32(items),
        Int32(hv),
        Int64(pool.stride(0)),
        Int32(nprog),
        stream,
    )


def expected_checksum(pool: torch.Tensor, idx: torch.Tensor, warps: int = 4) -> torch.Tensor:
    """What every item's 2 KB must hold ([B * HV, 512] int32): per consumer thread t of n = 32 *
    warps, the xor over j of the 16 bytes at byte t * 16 + j * 16 n of the item's state, as 4
    words (n = 128), or folded to 2 (words 0 ^ 2, 1 ^ 3: n = 256)."""
    n = 32 * warps
    hv = pool.shape[1]
    words = pool[idx.long()].reshape(idx.shape[0] * hv, ITEM_ELEMS).view(torch.int32)
    words = words.reshape(-1, ITEM_BYTES // (16 * n), n, 4)
    acc = words[:, 0]
    for j in range(1, words.shape[1]):
        acc = acc ^ words[:, j]
    if warps == 8:
        acc = acc[..., :2] ^ acc[..., 2:]
    return acc.reshape(acc.shape[0], -1)


def parse_config(text: str) -> tuple[str, int, int, int, int, int, int]:
    """`plain:TAIL` or `pc:STAGES:CTAS:TAIL[:WARPS[:COPY]]` (WARPS consumer warps, default 4;
    COPY bytes per bulk copy, default 4096; TAIL clock cycles, or `wN`: N FMA-loop iterations)
    -> (mode, stages, ctas, copy, tail, warps, work)."""
    parts = text.split(":")

    def tail_work(token: str) -> tuple[int, int]:
        return (0, int(token[1:])) if token.startswith("w") else (int(token), 0)

    try:
        if parts[0] == "plain" and len(parts) == 2:
            tail, work = tail_work(parts[1])
            return "plain", 1, 1, 4096, tail, 4, work
        if parts[0] == "pc" and len(parts) in (4, 5, 6):
            warps = int(parts[4]) if len(parts) >= 5 else 4
            copy = int(parts[5]) if len(parts) == 6 else 4096
            tail, work = tail_work(parts[3])
            return "pc", int(parts[1]), int(parts[2]), copy, tail, warps, work
    except ValueError:
        pass
    raise ValueError(
        f"config {text!r}: expected plain:TAIL or pc:STAGES:CTAS:TAIL[:WARPS[:COPY]] (integers;"
        " TAIL may be wN)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hv", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 256])
    ap.add_argument(
        "--configs",
        nargs="+",
        # tails of 0 / ~1 / ~2 us (1.98 GHz): a CTA of the shipped kernel lives ~7 us at
        # B=256 verify-only (20.7 waves of 792 CTAs in ~150 us), most of it waiting for its
        # state; 2-3 CTAs/SM of pc leave each consumer group 2-3 us per row. The shipped kernel
        # issues ~4.8 k warp instructions per row (k22-h200: 79.0 M / 16384 rows at HV=64
        # B=256), ~1.9 per SM cycle at its rate: 3 CTAs x 4 consumer warps may be too few warps
        # to hide that math's latencies, hence the :8 forms (8 consumer warps, 24 per SM).
        # pc:2:2 is what a real stage fits: 32 KB of state + ~11 KB of windows / activations
        # (T=4) per stage, two stages per CTA, two CTAs per SM (kernels/NOTES.md "Session 26").
        # :1024 = 32 copies per row, about what a real producer issues (8 of state, 2 + 2 of
        # ring windows, 1 g row, 3T q / k / v rows): can one lane issue them fast enough?
        default=[
            "plain:0",
            "plain:2000",
            "plain:4000",
            "pc:2:3:0",
            "pc:2:3:2000",
            "pc:2:3:4000",
            "pc:3:2:0",
            "pc:3:2:2000",
            "pc:3:2:4000",
            "pc:6:1:2000",
            "pc:2:3:2000:8",
            "pc:2:3:4000:8",
            "pc:2:2:2000:8",
            "pc:2:2:4000:8",
            "pc:2:2:2000:8:1024",
            # issue pressure (session 27): plain with the shipped kernel's ~1.2 k instructions
            # per warp per row, pc:2:2 with 8 warps sharing the row's ~4.8 k (w100) or twice it
            "plain:w200",
            "pc:2:2:w100:8",
            "pc:2:2:w200:8",
        ],  # fmt: skip
    )
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    try:
        configs = [parse_config(c) for c in args.configs]
        for c in configs:
            check_config(*c)
    except ValueError as e:
        ap.error(str(e))  # exit 2 with the usage line and what to change, no traceback
    if not torch.cuda.is_available():
        print("# pc_probe: no CUDA device; nothing timed", flush=True)
        return 0
    from bench.bench_ucache import (
        HBM_BYTES_PER_S,
        Point,
        capture_graph,
        load_backends,
        time_graphs,
    )

    handles = load_backends("serving", ["flashinfer", "ours"])
    scrub = torch.ones((256 << 20) // 4, device="cuda")
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    names = [*handles, *args.configs]
    for i, n in enumerate(names):
        print(f"# column {i}: {n}")
    print(f"{'HV':>3s} {'B':>4s} {'floor':>7s} " + " ".join(f"{i:>7d}" for i in range(len(names))))
    for hv in args.hv:
        for B in args.batch:
            first = next(iter(handles.values()))
            point = Point(first, B, 16, hv, 4, 0.0, seed=B * 1000 + hv)
            pool = point.args["initial_state_source"]
            idx = point.args["initial_state_indices"]
            out = torch.empty(B * hv, OUT_ELEMS, device="cuda", dtype=torch.bfloat16)
            graphs = {n: capture_graph(h.fn, point, 1) for n, h in handles.items()}
            want = {w: expected_checksum(pool, idx, w) for w in {c[5] for c in configs}}
            bad = []
            for text, config in zip(args.configs, configs, strict=True):
                mode, ctas, warps = config[0], config[2], config[5]
                fn = compile_probe(*config)
                out.fill_(float("nan"))  # poisoned: every item must be written
                run_probe(fn, mode, ctas, pool, idx, out)
                torch.cuda.synchronize()
                if not torch.equal(out.view(torch.int32), want[warps]):
                    bad.append(text)
                call = functools.partial(run_probe, fn, mode, ctas, pool, idx, out)
                graphs[text] = capture_graph(call, _Noop(), 1)
            us = time_graphs(graphs, scrub, args.reps, 1)
            state_bytes = B * hv * ITEM_BYTES
            floor = (state_bytes + B * hv * OUT_ELEMS * 2) / HBM_BYTES_PER_S * 1e6
            print(
                f"{hv:3d} {B:4d} {floor:7.1f} " + " ".join(f"{us[n]:7.1f}" for n in names),
                flush=True,
            )
            if bad:
                print(f"# HV={hv} B={B}: WRONG checksum from {bad}", flush=True)
            rows.append(dict(HV=hv, B=B, floor_us=floor, us=us, wrong=bad))
    print(f"# pc_probe: wall {time.time() - t0:.0f} s", flush=True)
    table = ratio_table(names, rows)
    print(table, flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(columns=names, rows=rows), indent=1) + "\n")
        args.json.with_suffix(".md").write_text(table + "\n")
    return 1 if any(r["wrong"] for r in rows) else 0


def ratio_table(names: list[str], rows: list[dict[str, Any]]) -> str:
    """Markdown: per point, each column's time over flashinfer's and over the floor (taken in
    the same process), wrong-checksum columns marked."""
    head = "| HV | B | floor us | " + " | ".join(f"{n} /fi (/floor)" for n in names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for r in rows:
        fi = r["us"].get("flashinfer")
        cells = []
        for n in names:
            us = r["us"][n]
            vs_fi = f"{us / fi:.3f}" if fi else "-"
            mark = " WRONG" if n in r["wrong"] else ""
            cells.append(f"{vs_fi} ({us / r['floor_us']:.2f}){mark}")
        lines.append(f"| {r['HV']} | {r['B']} | {r['floor_us']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class _Noop:
    """A `Point` stand-in whose call runs fn without inputs."""

    def call(self, fn: Any) -> Any:
        return fn()


if __name__ == "__main__":
    raise SystemExit(main())
