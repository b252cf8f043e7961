"""The register layouts the kernel relies on, checked lane by lane against a plain matmul (CPU).

kernels/gdn_ucache_flush.py never stages the state in shared memory: thread (g, c) of a warp loads
rows g and g+8 of a 16-row tile, columns c*8 + 32 i + 0..7 (i < 4), as four 16-byte chunks, and uses
word w of chunk i directly as mma.sync m16n8k16 A-fragment registers, with the B operand permuted
the same way along K. The fold reuses the chunks as the C accumulator of 16 n-tiles. This test
emulates the PTX fragment layouts (row-major A, column-major B, C/D) and the kernel's index
formulas, so a change to either side fails here, not on the GPU.
"""

from __future__ import annotations

import numpy as np


def _mma(a_frag: dict, b_frag: dict, c_frag: dict) -> dict:
    """m16n8k16: D = A[16x16] B[16x8] + C, with PTX's per-lane fragment layout."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, c = lane // 4, lane % 4
        a0, a1, a2, a3 = a_frag[lane]
        A[g, 2 * c : 2 * c + 2], A[g + 8, 2 * c : 2 * c + 2] = a0, a1
        A[g, 2 * c + 8 : 2 * c + 10], A[g + 8, 2 * c + 8 : 2 * c + 10] = a2, a3
        b0, b1 = b_frag[lane]
        B[2 * c : 2 * c + 2, g], B[2 * c + 8 : 2 * c + 10, g] = b0, b1
    D = A @ B
    out = {}
    for lane in range(32):
        g, c = lane // 4, lane % 4
        out[lane] = np.array(
            [D[g, 2 * c], D[g, 2 * c + 1], D[g + 8, 2 * c], D[g + 8, 2 * c + 1]]
        ) + np.asarray(c_frag[lane])
    return out


def _chunk_word(M: np.ndarray, lane: int, rr: int, i: int, w: int) -> np.ndarray:
    """Register pair w of 16-byte chunk i of row g + 8 rr, as the kernel loads it."""
    g, c = lane // 4, lane % 4
    col = c * 8 + 32 * i + 2 * w
    return M[g + 8 * rr, col : col + 2]


def test_state_projection_fragments() -> None:
    rng = np.random.default_rng(1)
    S, X = rng.standard_normal((16, 128)), rng.standard_normal((8, 128))
    acc = {lane: np.zeros(4) for lane in range(32)}
    for ks in range(8):  # k-step = (chunk i, half h)
        i, h = ks // 2, ks % 2
        a = {
            ln: [
                _chunk_word(S, ln, 0, i, 2 * h),
                _chunk_word(S, ln, 1, i, 2 * h),
                _chunk_word(S, ln, 0, i, 2 * h + 1),
                _chunk_word(S, ln, 1, i, 2 * h + 1),
            ]
            for ln in range(32)
        }
        # B: x_n at the same columns, n = g (build_bx: word 4 i + e of x_{nt*8+g})
        b = {
            ln: [
                X[ln // 4, (ln % 4) * 8 + 32 * i + 4 * h : (ln % 4) * 8 + 32 * i + 4 * h + 2],
                X[ln // 4, (ln % 4) * 8 + 32 * i + 4 * h + 2 : (ln % 4) * 8 + 32 * i + 4 * h + 4],
            ]
            for ln in range(32)
        }
        acc = _mma(a, b, acc)
    ref = S @ X.T
    for ln in range(32):
        g, c = ln // 4, ln % 4
        for e in range(4):
            assert abs(acc[ln][e] - ref[g + 8 * (e // 2), 2 * c + e % 2]) < 1e-9


def test_fold_fragments_map_onto_the_state_chunks() -> None:
    rng = np.random.default_rng(2)
    S, W, KC, eg = (
        rng.standard_normal((16, 128)),
        rng.standard_normal((16, 16)),
        rng.standard_normal((16, 128)),
        0.7,
    )
    new = np.zeros((16, 128))
    for t16 in range(16):
        i, wd = t16 // 4, t16 % 4
        a, b, cin = {}, {}, {}
        for ln in range(32):
            g, c = ln // 4, ln % 4
            a[ln] = [
                W[g, 2 * c : 2 * c + 2],
                W[g + 8, 2 * c : 2 * c + 2],
                W[g, 2 * c + 8 : 2 * c + 10],
                W[g + 8, 2 * c + 8 : 2 * c + 10],
            ]
            # the kernel's packed fold operand kb[(t16, half, lane)]
            pcol = (g // 2) * 8 + 32 * i + 2 * wd + (g % 2)
            b[ln] = [KC[[2 * c + 8 * half, 2 * c + 8 * half + 1], pcol] for half in (0, 1)]
            cin[ln] = (
                np.concatenate([_chunk_word(S, ln, 0, i, wd), _chunk_word(S, ln, 1, i, wd)]) * eg
            )
        d = _mma(a, b, cin)
        for ln in range(32):
            g, c = ln // 4, ln % 4
            col = c * 8 + 32 * i + 2 * wd
            new[g, col : col + 2], new[g + 8, col : col + 2] = d[ln][:2], d[ln][2:]
    assert np.abs(new - (eg * S + W @ KC)).max() < 1e-9
