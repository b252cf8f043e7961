"""Feasibility probe for v9's state path (kernels/NOTES.md "Session 10"), compiled on the CPU.

One CTA of 128 threads stages half a 128x128 16-bit state (64 rows x 256 bytes, contiguous in
the pool) into shared memory with bulk async copies (`cp.async.bulk ... mbarrier::complete_tx`),
one 256-byte copy per row at a padded pitch of 272 bytes (so that `ldmatrix` reads of 8 rows hit
8 different bank groups), all signalled on one mbarrier that expects 16384 bytes; every thread
waits on the barrier's phase and reads one 8x8 matrix quad with `ldmatrix.x4`, then writes its
four 32-bit words out. No registers hold the state while it is in flight.

    mkdir DIR && CUTE_DSL_ARCH=sm_90a CUTE_DSL_KEEP=ptx CUTE_DSL_DUMP_DIR=DIR \
        python tests/kernels/_bulk_stage_probe.py

Prints one JSON line with the compile time; the PTX lands in DIR.
"""

# no `from __future__ import annotations`: CuTe-DSL evaluates the kernels' annotations
import json
import time

ROWS, ROW_BYTES, PITCH = 64, 256, 272  # half a state at BV=128, K=128, 16-bit; pitch padded
THREADS = 128


def build() -> object:
    import cuda.bindings.driver as cuda_drv
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32, Int64
    from cutlass.cute.runtime import make_ptr
    from cutlass.memory import SmemAllocator

    @cute.kernel
    def kernel(state: cute.Pointer, out: cute.Pointer, row0: Int64) -> None:
        tid = cute.arch.thread_idx()[0]
        warp = tid // 32
        lane = tid % 32
        smem = SmemAllocator()
        stage = smem.allocate_array(cutlass.Int8, ROWS * PITCH, byte_alignment=128)
        mbar = smem.allocate_array(Int64, 1, byte_alignment=8)
        if tid == 0:
            cute.arch.mbarrier_init(mbar, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()
        if warp == 0:
            if lane == 0:
                cute.arch.inline_ptx(
                    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{$r0}], {$r1};",
                    read_only_args=[mbar.toint(), Int32(ROWS * ROW_BYTES)],
                )
            cute.arch.sync_warp()
            # two rows per lane: 64 copies of 256 bytes, each landing at its padded pitch
            for i in cutlass.range_constexpr(2):
                r = lane * 2 + i
                src = state + (row0 + Int64(r)) * Int64(ROW_BYTES // 2)
                dst = stage + r * PITCH
                cute.arch.inline_ptx(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                    " [{$r0}], [{$r1}], {$r2}, [{$r3}];",
                    read_only_args=[dst.toint(), src.toint(), Int32(ROW_BYTES), mbar.toint()],
                )
        cute.arch.mbarrier_wait(mbar, 0)
        # ldmatrix.x4: lanes 0-15 address rows 0-15 of the warp's 16-row slice at bytes 0-15
        # (matrices 0 and 1), lanes 16-31 the same rows at bytes 16-31 (matrices 2 and 3); at a
        # 272-byte pitch (68 words) row r starts at bank 4r mod 32: 8 rows, 8 distinct groups
        row = warp * 16 + lane % 16
        addr = stage + row * PITCH + (lane // 16) * 16
        words = cute.arch.inline_ptx(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{$w0}, {$w1}, {$w2}, {$w3}}, [{$r0}];",
            write_only_types=[Int32] * 4,
            read_only_args=[addr.toint()],
        )
        cute.arch.inline_ptx(
            "st.global.v4.b32 [{$r0}], {{$r1}, {$r2}, {$r3}, {$r4}};",
            read_only_args=[out + tid * 4, words[0], words[1], words[2], words[3]],
        )

    @cute.jit
    def launch(
        state: cute.Pointer, out: cute.Pointer, row0: Int64, stream: cuda_drv.CUstream
    ) -> None:
        kernel(state, out, row0).launch(grid=(1, 1, 1), block=(THREADS, 1, 1), stream=stream)

    gm = cute.AddressSpace.gmem
    args = [
        make_ptr(cutlass.Float16, 256, gm, assumed_align=16),
        make_ptr(Int32, 256, gm, assumed_align=16),
        Int64(0),
        cuda_drv.CUstream(0),
    ]
    return cute.compile(launch, *args)


def main() -> None:
    t0 = time.time()
    build()
    print(json.dumps({"compile_s": round(time.time() - t0, 2)}))


if __name__ == "__main__":
    main()
