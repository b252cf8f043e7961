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


def _ldmatrix_x4_trans(smem: np.ndarray, addr: dict) -> dict:
    """ldmatrix .x4 .trans on a 2-D array of 16-bit elements: lane t gives (row, col) of row t % 8
    of matrix t // 8 (8 consecutive elements); lane l receives, for each matrix i, the pair
    (M_i[2 (l % 4)][l // 4], M_i[2 (l % 4) + 1][l // 4])."""
    mats = []
    for i in range(4):
        rows = [
            smem[addr[8 * i + r][0], addr[8 * i + r][1] : addr[8 * i + r][1] + 8] for r in range(8)
        ]
        mats.append(np.array(rows))
    return {
        ln: [mats[i][[2 * (ln % 4), 2 * (ln % 4) + 1], ln // 4] for i in range(4)]
        for ln in range(32)
    }


def _epilogue_reference(d, uwin, sw, eg, v, gam, beta, amat, cmat, T):
    """The per-row epilogue (history, residual, forward substitution, outputs) in plain loops."""
    rows = d.shape[0]
    hx = eg * d + uwin.T @ sw  # [rows, NX]
    U, Y = np.zeros((rows, T)), np.zeros((rows, T))
    for r in range(rows):
        for s in range(T):
            egs = np.exp(gam[s])
            u = beta[s] * (v[s, r] - egs * hx[r, s]) - sum(amat[s, q] * U[r, q] for q in range(s))
            U[r, s] = u
            Y[r, s] = egs * hx[r, T + s] + sum(cmat[s, q] * U[r, q] for q in range(s + 1))
    return U, Y


def _epilogue_inputs(rng: np.random.Generator, T: int) -> tuple:
    """Random operands of one 16-row tile's phase 5, in _epilogue_reference's order: the
    projections S0 X^T [16, 2T], the u window [j, row], the window scores sw [16, 2T], e^{G*},
    v [T, 16], cumulative log-decays, betas, A (strictly lower) and C (lower)."""
    NX = 2 * T
    d = rng.standard_normal((16, NX))
    uwin = rng.standard_normal((16, 16))
    sw = rng.standard_normal((16, NX))
    eg = 0.8
    v = rng.standard_normal((T, 16))
    gam = -np.cumsum(rng.uniform(0.01, 0.3, T))
    beta = rng.uniform(0.2, 0.9, T)
    amat = np.tril(rng.standard_normal((T, T)) * 0.3, -1)
    cmat = np.tril(rng.standard_normal((T, T)) * 0.3)
    return d, uwin, sw, eg, v, gam, beta, amat, cmat


def test_mma_epilogue_fragments() -> None:
    """Phase 5 of kernels/gdn_ucache_flush.py: u window by ldmatrix.trans from padded rows,
    HX in the projection's accumulators, the solve as U = R M^T and the outputs as
    e^gamma HX_q + U C^T, with the kernel's column bookkeeping (k columns carry U, q columns
    carry the outputs), for every T."""
    rng = np.random.default_rng(3)
    for T in range(2, 9):
        NX = 2 * T
        NXP = 8 if NX <= 8 else 16
        BV, tile = 64, 2
        UWS = BV + 8
        d, uwin, sw, eg, v, gam, beta, amat, cmat = _epilogue_inputs(rng, T)
        smem_u = np.zeros((16, UWS))
        smem_u[:, tile * 16 : tile * 16 + 16] = uwin
        # M = (I + A)^-1 diag(beta), column t by the kernel's forward substitution
        mmat = np.zeros((T, T))
        for t in range(T):
            col = []
            for s in range(T):
                m = beta[s] if s == t else 0.0
                for r in range(s):
                    m -= amat[s, r] * col[r]
                col.append(m)
                mmat[s, t] = m
        ref_u, ref_o = _epilogue_reference(d, uwin, sw, eg, v, gam, beta, amat, cmat, T)

        def at(M, i, j, ok):  # the kernel's clamped, masked smem reads
            return M[i, j] if ok else 0.0

        addr = {
            ln: ((ln % 8) + 8 * ((ln // 8) // 2), tile * 16 + 8 * ((ln // 8) % 2))
            for ln in range(32)
        }
        ua = _ldmatrix_x4_trans(smem_u, addr)
        out_u, out_o = np.full((16, T), np.nan), np.full((16, T), np.nan)
        acc = []
        for nt in range(NXP // 8):
            cin = {}
            bsw = {}
            for ln in range(32):
                g, c = ln // 4, ln % 4
                cin[ln] = [
                    eg
                    * at(d, g + 8 * (e // 2), nt * 8 + 2 * c + e % 2, nt * 8 + 2 * c + e % 2 < NX)
                    for e in range(4)
                ]
                n_b = nt * 8 + g
                bsw[ln] = [
                    np.array(
                        [
                            at(sw, 2 * c + 8 * hf, n_b, n_b < NX),
                            at(sw, 2 * c + 8 * hf + 1, n_b, n_b < NX),
                        ]
                    )
                    for hf in (0, 1)
                ]
            acc.append(_mma(ua, bsw, cin))
        cols = {
            ln: [
                (n < T, T <= n < 2 * T, min(max(n if n < T else n - T, 0), T - 1))
                for nt in range(NXP // 8)
                for n in (nt * 8 + 2 * (ln % 4), nt * 8 + 2 * (ln % 4) + 1)
            ]
            for ln in range(32)
        }
        ra, cq, bm = {}, {}, {}
        for ln in range(32):
            g, c = ln // 4, ln % 4
            res, q = [], []
            for e in range(4):
                ks, qs, tok = cols[ln][e % 2]
                row = g + 8 * (e // 2)
                hxv = acc[0][ln][e]
                res.append(v[tok, row] - np.exp(gam[tok]) * hxv if ks else 0.0)
                q.append(np.exp(gam[tok]) * hxv if qs else 0.0)
            ra[ln] = [np.array(res[0:2]), np.array(res[2:4]), np.zeros(2), np.zeros(2)]
            cq[ln] = q
            bm[ln] = [
                np.array(
                    [
                        at(mmat, g, 2 * c, g < T and 2 * c < T),
                        at(mmat, g, 2 * c + 1, g < T and 2 * c + 1 < T),
                    ]
                ),
                np.zeros(2),
            ]
        dd = _mma(ra, bm, cq)
        au = {}
        for ln in range(32):
            uu = [dd[ln][e] if cols[ln][e % 2][0] else 0.0 for e in range(4)]
            au[ln] = [np.array(uu[0:2]), np.array(uu[2:4]), np.zeros(2), np.zeros(2)]
        fin = []
        for nt in range(NXP // 8):
            bc, cin = {}, {}
            for ln in range(32):
                g, c = ln // 4, ln % 4
                s_b = nt * 8 + g - T
                ok = 0 <= s_b < T
                sbc = min(max(s_b, 0), T - 1)
                bc[ln] = [
                    np.array(
                        [
                            at(cmat, sbc, 2 * c, ok and 2 * c < T),
                            at(cmat, sbc, 2 * c + 1, ok and 2 * c + 1 < T),
                        ]
                    ),
                    np.zeros(2),
                ]
                if nt == 0:
                    cin[ln] = dd[ln]
                else:
                    cin[ln] = []
                    for e in range(4):
                        _, qs, tok = cols[ln][2 * nt + e % 2]
                        cin[ln].append(np.exp(gam[tok]) * acc[nt][ln][e] if qs else 0.0)
            fin.append(_mma(au, bc, cin))
        for nt in range(NXP // 8):
            for ln in range(32):
                g = ln // 4
                for e in range(4):
                    ks, qs, tok = cols[ln][2 * nt + e % 2]
                    row = g + 8 * (e // 2)
                    if ks:
                        out_u[row, tok] = fin[nt][ln][e]
                    if qs:
                        out_o[row, tok] = fin[nt][ln][e]
        assert np.abs(out_u - ref_u).max() < 1e-9, T
        assert np.abs(out_o - ref_o).max() < 1e-9, T


def _xb_index(nt: int, part: int, w: int, lane: int, parts: int) -> int:
    """Word (nt, part, w) of lane in the smem-staged x fragments (next's smem_bfrag)."""
    return ((nt * parts + part) * 16 + w) * 32 + lane


def _xb_build_source(eidx: int, parts: int) -> tuple[int, int, int]:
    """(row n, first column, part) of word eidx in phase 3's build loop (next)."""
    ln, wd = eidx % 32, (eidx // 32) % 16
    hl, ntb = (eidx // 512) % parts, eidx // (512 * parts)
    colb = (ln % 4) * 8 + 32 * (wd // 4) + 2 * (wd % 4)
    return ntb * 8 + ln // 4, colb, hl


def test_late13_phase1_writes_phase3s_fragment_words() -> None:
    """late13: the thread of row r holding columns 8 q .. 8 q + 7 writes pair j to word
    4 (q // 4) + j of lane 4 (r % 8) + q % 4 (next's qk_rows_to_smem with xb): exactly the word
    phase 3's build fills with that pair, for both parts and both n-tiles."""
    for parts in (1, 2):
        seen = set()
        for r in range(16):
            for q in range(16):
                for j in range(4):
                    for part in range(parts):
                        wd, ln = 4 * (q // 4) + j, 4 * (r % 8) + q % 4
                        idx = _xb_index(r // 8, part, wd, ln, parts)
                        assert _xb_build_source(idx, parts) == (r, 8 * q + 2 * j, part)
                        seen.add(idx)
        assert len(seen) == 2 * parts * 16 * 32  # every word of both n-tiles, once


def test_late13_gram_reads_its_a_rows_from_the_b_words() -> None:
    """late13's Gram (small_mma with a_from_b): A = X (rows r < 16, K-permuted as the state) times
    B = X^T; lane (g, c)'s A words for rows g + 8 (q % 2) at k-step (i, h) are its own B words
    (nt = q % 2, w = 4 i + 2 h + q // 2). The emulated MMA equals X_perm X_perm^T."""
    rng = np.random.default_rng()
    X = rng.standard_normal((16, 128))
    gram = np.zeros((16, 16))
    for nt in range(2):
        acc = {lane: np.zeros(4) for lane in range(32)}
        for i in range(4):
            for h in range(2):

                def bword(lane: int, nt_: int, w: int) -> np.ndarray:
                    g, c = lane // 4, lane % 4
                    col = c * 8 + 32 * (w // 4) + 2 * (w % 4)
                    return X[nt_ * 8 + g, col : col + 2]

                a = {
                    lane: [bword(lane, q % 2, 4 * i + 2 * h + q // 2) for q in range(4)]
                    for lane in range(32)
                }
                b = {
                    lane: [bword(lane, nt, 4 * i + 2 * h + e) for e in range(2)]
                    for lane in range(32)
                }
                acc = _mma(a, b, acc)
        for lane in range(32):
            g, c = lane // 4, lane % 4
            for e in range(4):
                gram[g + 8 * (e // 2), nt * 8 + 2 * c + e % 2] = acc[lane][e]
    np.testing.assert_allclose(gram, X @ X.T, rtol=1e-12, atol=1e-9)


def _xb_index_tproj(w: int, part: int, lane: int) -> int:
    """tproj's xb layout (next's xb_index with tproj): per k-step w // 2 and lane the 16 bytes
    [hi w0, lo w0, hi w1, lo w1]."""
    return ((w // 2) * 32 + lane) * 4 + (w % 2) * 2 + part


def test_tproj_layout_holds_every_fragment_word_once() -> None:
    """Phase 3's build loop (and late13's phase 1) write word (wd, part) of lane ln to
    _xb_index_tproj: with one n-tile and both parts, a bijection onto the 1024 words."""
    seen = {
        _xb_index_tproj(w, part, ln) for w in range(16) for part in range(2) for ln in range(32)
    }
    assert seen == set(range(2 * 16 * 32))


def test_tproj_transposed_projection_matches_the_table() -> None:
    """tproj: A = [X hi; X lo] read as one 16-byte word group per lane and k-step, B = the
    state tile's MMA rows g + 8 r (the lane's own chunk words 2 h, 2 h + 1), two 8-column MMAs
    per k-step; lane (g, c) then writes hi + lo of columns 2 c + e2 to tile row 8 e2 + c + 4 r,
    column x = g. The result is the table's projection S X^T (X = hi + lo) for every tile row
    and x, in the bulk stage's row permutation (MMA row m = tile row (m % 2) 8 + m // 2)."""
    rng = np.random.default_rng()
    S = rng.standard_normal((16, 128))  # tile rows
    x_hi, x_lo = rng.standard_normal((8, 128)), 1e-3 * rng.standard_normal((8, 128))
    s_mma = S[[(m % 2) * 8 + m // 2 for m in range(16)]]  # the stage's row order
    xb = np.zeros((2 * 16 * 32, 2))
    for ln in range(32):
        for w in range(16):
            col = (ln % 4) * 8 + 32 * (w // 4) + 2 * (w % 4)
            for part, xp in enumerate((x_hi, x_lo)):
                xb[_xb_index_tproj(w, part, ln)] = xp[ln // 4, col : col + 2]
    acc = [{ln: np.zeros(4) for ln in range(32)} for _ in range(2)]
    for ks in range(8):
        i, h = ks // 2, ks % 2
        a = {ln: [xb[(ks * 32 + ln) * 4 + q] for q in range(4)] for ln in range(32)}
        for r in range(2):
            b = {
                ln: [_chunk_word(s_mma, ln, r, i, 2 * h), _chunk_word(s_mma, ln, r, i, 2 * h + 1)]
                for ln in range(32)
            }
            acc[r] = _mma(a, b, acc[r])
    ds = np.full((16, 8), np.nan)  # poisoned: every (row, x) must be written
    for r in range(2):
        for ln in range(32):
            g, c = ln // 4, ln % 4
            for e2 in range(2):
                ds[8 * e2 + c + 4 * r, g] = acc[r][ln][e2] + acc[r][ln][2 + e2]
    np.testing.assert_allclose(ds, S @ (x_hi + x_lo).T, rtol=1e-12, atol=1e-9)


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round to bfloat16 (nearest even) through float32 bits."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def _split_bf16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hi = _bf16(x)
    return hi, _bf16(x - hi)


def _afe_lmat(mmat: np.ndarray, cmat: np.ndarray, gam: np.ndarray, T: int) -> np.ndarray:
    """L as next's GR_WARP builds it (lane n = row n, column loop c), afe."""
    NX = 2 * T
    L = np.zeros((NX, NX))
    for lane in range(NX):
        for c in range(NX):
            if c < T:
                s = min(max(lane - T, 0), T - 1)
                w = [(1.0 if lane == r else 0.0) if lane < T else cmat[s, r] for r in range(T)]
                L[lane, c] = -sum(w[r] * mmat[r, c] for r in range(T)) * np.exp(gam[c])
            else:
                L[lane, c] = np.exp(gam[c - T]) if lane == c else 0.0
    return L


def test_afe_affine_epilogue_matches_phase_5() -> None:
    """afe (next): [U | O] = Z0 + (e^{G*} P) L^T with Z0 = phase 5 at P = 0 and L from M, C and
    the gates, read through the bulk modes' permuted MMA rows (Z0 via ds), the projection's
    accumulators as the A operand [P hi | P lo] (K = 16) against [L hi; L hi] and [L lo; 0]:
    equal to the plain per-row epilogue within the bf16 hi/lo split's ~2^-16, for T = 2..4."""
    rng = np.random.default_rng()
    for T in range(2, 5):
        NX = 2 * T
        d, uwin, sw, eg, v, gam, beta, amat, cmat = _epilogue_inputs(rng, T)
        mmat = np.linalg.inv(np.eye(T) + amat) @ np.diag(beta)
        ref_u, ref_o = _epilogue_reference(d, uwin, sw, eg, v, gam, beta, amat, cmat, T)
        z_u, z_o = _epilogue_reference(0 * d, uwin, sw, eg, v, gam, beta, amat, cmat, T)
        z0 = np.zeros((16, 8))
        z0[:, :T], z0[:, T:NX] = z_u, z_o
        L = _afe_lmat(mmat, cmat, gam, T)
        L8 = np.zeros((8, 8))
        L8[:NX, :NX] = L
        l_hi, l_lo = _split_bf16(L8)
        a, b1, b2, cz = {}, {}, {}, {}
        for ln in range(32):
            g, c = ln // 4, ln % 4
            prow = [(g % 2) * 8 + g // 2, (g % 2) * 8 + g // 2 + 4]  # MMA rows g, g + 8
            p = np.array(
                [
                    eg * d[prow[e // 2], 2 * c + e % 2] if 2 * c + e % 2 < NX else 0.0
                    for e in range(4)
                ]
            )
            hi, lo = _split_bf16(p)
            a[ln] = [hi[0:2], hi[2:4], lo[0:2], lo[2:4]]
            b1[ln] = [l_hi[g, 2 * c : 2 * c + 2], l_hi[g, 2 * c : 2 * c + 2]]
            b2[ln] = [l_lo[g, 2 * c : 2 * c + 2], np.zeros(2)]
            cz[ln] = [z0[prow[e // 2], 2 * c + e % 2] for e in range(4)]
        fin = _mma(a, b2, _mma(a, b1, cz))
        out_u, out_o = np.full((16, T), np.nan), np.full((16, T), np.nan)
        for ln in range(32):
            g, c = ln // 4, ln % 4
            for e in range(4):
                n, row = 2 * c + e % 2, (g % 2) * 8 + g // 2 + 4 * (e // 2)
                if n < T:
                    out_u[row, n] = fin[ln][e]
                elif n < NX:
                    out_o[row, n - T] = fin[ln][e]
        scale = max(np.abs(ref_u).max(), np.abs(ref_o).max())
        assert np.abs(out_u - ref_u).max() < 1e-4 * scale, T
        assert np.abs(out_o - ref_o).max() < 1e-4 * scale, T
        # and the split matters: L rounded to bf16 once is visibly worse than hi + lo
        assert np.abs(l_hi + l_lo - L8).max() < 2.0**-15 * np.abs(L8).max()
