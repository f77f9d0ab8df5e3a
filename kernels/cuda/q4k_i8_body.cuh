// q4k_i8_body.cuh: the INT8 tensor-core body of the Q4_K matmul (LOOM_GEMV_MMA_Q4K_V=2;
// gemv_mma.cu's q4k_tile runs it in place of the f16 hi + lo body v11 for every Q4_K mma matmul:
// plain, add, pair + SwiGLU, the folded-RMSNorm kernels, the Q4_K tiles of the mixed Q4_K_M
// triple, and the GEMM). Same tile, K split, register prefetch (GEMV), reduction order and
// epilogue as v11; another product and another x staging, so other bits than V = 1 (same
// tolerance).
//
// The product. One mma.sync m16n8k32 u8.s8 -> s32 is one Q4_K sub-block m (32 values, one 6-bit
// scale and min). The k permutation: lane t's k-slots 4t..4t+3 hold the sub-block's values
// 8t..8t+3, k-slots 16+4t..16+4t+3 the values 8t+4..8t+7, so its A registers of rows g and
// g+8 are 8 contiguous quant bytes of the row (bytes 32c + 8t .. +7 of chunk c = m / 2: one
// 8-byte load a row and chunk serves two mma) masked in place: w & 0x0F0F0F0F (even m: q) or
// w & 0xF0F0F0F0 (odd m: 16 q, unsigned), one LOP3 per 4 values.
// B = x as 4 exact int8 limbs: per super-block and token a power-of-two scale s puts max |x s|
// in [2^29, 2^30), X = rint(x s) = 2^24 L0 + 2^16 L1 + 2^8 L2 + L3 (balanced digits, as
// q6k_i8_body.cuh's stage_i8). A Q4_K sub-block has one scale for all 32 values, so a token needs
// only 4 columns (limb j over all 32 k-slots): an n8 tile holds TWO tokens (token 2p + e in
// columns 4e + j). Lane t's accumulator columns (2t, 2t+1) are limbs 2 (t & 1), +1 of token
// 2p + (t >> 1). The GEMV stages its one token in columns 0..3 (4..7 stay zero: the same mma
// and instruction count as any layout); the GEMM's 8 tokens are 4 tiles, so a token costs half
// the mma, IMADs, B loads and folds of one-token tiles.
// The scale: D = sum q L (even m) or sum 16 q L (odd m), exact; I += (16 sc or sc) * D by one
// IMAD a row and column (4 a lane and mma), |I| < 2^29. The mins: a second u8.s8 mma a sub-block
// with A = the row's 6-bit min in every byte, accumulated in the mma itself (M = sum m L: no
// IMAD; integer sums, so the order does not change a bit). Fold once a super-block in FP32,
// fixed order: F = fma(256, float(I_a), float(I_b)), acc += (d * (w_t / (16 s))) * F, then
// acc -= (dmin * (w_t / s)) * Fm (Fm of M the same way), w_t = 2^16 (t even) or 1; after the K
// loop lanes t and t ^ 1 are summed by one xor shuffle (q4_i8_lane_sum), then warps and ranks.
// A GEMM token's integers and float steps are the GEMV's (same columns within its tile, same
// lanes), so a GEMM token == the GEMV's bits.
//
// Numeric contract: as the f16 body, |y - y_cpu| <= 1e-5 * sum_k |W x| (+1e-30): the products
// and integer sums are exact, x keeps 24 bits of the super-block's max (q6k_i8_body.cuh's error
// analysis: an x whose values span more than ~2^20 inside one super-block loses its smallest).
//
// Cost (per warp and 16-row super-block, counted when written): GEMV loads 10 (8 LDG.64 + 2
// headers), A 32 LOP3, scales/mins ~12 + 24 PRMT, 16 IMMA, 32 IMAD, B 4 LDS.128, fold ~20, x
// staging ~60: ~230 SASS against v11's 432. The build's SASS (cuobjdump, sm_90a, the innermost
// loop of the tile GEMV) has more: 320 a step for one matrix (354 until session 28 dropped the
// prefetch's 32 conditional register copies, gemv_mma.cu kPingPong), 551 for the pair's two,
// i.e. ~90 of address, staging and loop work the count above leaves out (bench/NOTES.md 7,
// sessions 27-28; session 29 loaded the tiles from two bases with immediate offsets, 551 -> 513
// a pair step, and measured the decode step even: not kept).
// GEMM: the A work once for 8 tokens, then per token 8 IMMA, 16 IMAD, 2 LDS.128 and half a fold.
// Measured: bench/NOTES.md 2.4.
//
// Q5_K (the Q5 template parameters, gemv_mma.cu's kQ5Rows layout, session 34): Q4_K's header,
// 6-bit scales and mins and sub-blocks, each value's fifth bit in the block's 32 qh bytes (bit m
// of byte l for value l of sub-block m). The lane loads its 8 qh bytes of both rows beside the
// chunks (2 more LDG.64), and each A register becomes q + 16 hb by a shift, two masks and an OR
// (q4_i8_a): the rest, the limbs, mins, fold and GEMM, is Q4_K's. Measured: bench/NOTES.md 2.6.
#pragma once

#include "kernels/cuda/q6k_i8_body.cuh"

namespace loom_cuda {

// The bytes lane (g, t) loads for one super-block: headers (d, dmin, 12 scale bytes) of rows g
// and g+8, and bytes 8t..8t+7 of each 32-byte quant chunk c of both rows; Q5_K (Q5) also bytes
// 8t..8t+7 of both rows' qh (bit m of byte l: bit 4 of value l of sub-block m).
struct Q4RawI8 {
    uint4 h0, h8;
    uint2 q0[4], q8[4];
    uint2 qh0, qh8;  // Q5 only
};

// Q5_K: the same header and quant chunks as Q4_K (and the same 6-bit scales and mins), with the
// 32 qh bytes between them: 176 bytes a block.
template <bool Q5 = false>
__device__ __forceinline__ Q4RawI8 q4_load_i8(const uint8_t *rg, const uint8_t *r8, int64_t sb,
                                              int t, int bs) {
    const uint8_t *bg = rg + sb * bs, *b8 = r8 + sb * bs;
    constexpr int kQs = Q5 ? 48 : 16;
    Q4RawI8 r;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        r.q0[c] = __ldg(reinterpret_cast<const uint2 *>(bg + kQs + 32 * c + 8 * t));
        r.q8[c] = __ldg(reinterpret_cast<const uint2 *>(b8 + kQs + 32 * c + 8 * t));
    }
    if constexpr (Q5) {
        r.qh0 = __ldg(reinterpret_cast<const uint2 *>(bg + 16 + 8 * t));
        r.qh8 = __ldg(reinterpret_cast<const uint2 *>(b8 + 16 + 8 * t));
    }
    r.h0 = ldg16(bg);
    r.h8 = ldg16(b8);
    return r;
}

// x offset of lane L's values in a super-block (the k permutation above): xa at + 0..3,
// xc at + 4..7; stage_i8 puts them in k-slots 4t.. (b0) and 16 + 4t.. (b1) of mma L >> 2.
__device__ __forceinline__ int q4_i8_xoff(int lane) { return 32 * (lane >> 2) + 8 * (lane & 3); }
constexpr int kQ4I8Xc = 4;  // xc's offset from xa's

// Per-warp staging of one super-block of x for NT tokens as int8 limbs, two tokens a tile (an
// n8 mma tile: token 2p + e in columns 4e + j = limb j over all 32 k-slots). b[p][q][lane]: the
// (b0, b1) of mma 2q and of mma 2q + 1 for that mma lane (one LDS.128 a lane and 2 mma);
// sinv[tok] = 1 / s (0 for a ragged group's missing tokens and the GEMV's empty second token).
template <int NT>
struct Q4I8Stage {
    static constexpr int kTiles = (NT + 1) / 2;
    uint4 b[kTiles][4][32];
    float sinv[2 * kTiles];
};

// Zeroes the stage (once a tile): the columns of tokens it never stages (the GEMV's second
// token, a ragged group's missing ones) stay 0, with 1 / s = 0.
template <int NT>
__device__ __forceinline__ void q4_i8_stage_init(Q4I8Stage<NT> &st, int lane) {
    constexpr int T = Q4I8Stage<NT>::kTiles;
    for (int i = lane; i < T * 4 * 32; i += 32) (&st.b[0][0][0])[i] = make_uint4(0u, 0u, 0u, 0u);
    if (lane < 2 * T) st.sinv[lane] = 0.0f;
}

// Stages token `tok`'s x of one super-block (whole warp). Lane L brings the values
// q4_i8_xoff(L) + 0..3 (xa: k-slots 4t.. of mma m = L >> 2, t = L & 3) and + 4..7 (xc: k-slots
// 16 + 4t..); their limbs (mma_common.cuh i8_limbs) go to mma lane (4 (tok & 1) + j, t): limb j
// of xa / xc is its (b0, b1).
// l (out): [xa / xc][limb j], the 4 values' limb j, one byte each (the wide GEMM's limb sums).
template <int NT>
__device__ __forceinline__ void stage_q4i8(Q4I8Stage<NT> &st, int tok, float4 xa, float4 xc,
                                           int lane, uint32_t (&l)[2][4]) {
    const float v[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
    const int e = i8_limbs(v, l);
    const int t = lane & 3, m = lane >> 2;
    uint2 *b = reinterpret_cast<uint2 *>(&st.b[tok >> 1][m >> 1][0]);
#pragma unroll
    for (int j = 0; j < 4; j++) b[2 * (4 * (4 * (tok & 1) + j) + t) + (m & 1)] = make_uint2(l[0][j], l[1][j]);
    if (lane == 0) st.sinv[tok] = __uint_as_float((uint32_t)(254 - e) << 23);
}
template <int NT>
__device__ __forceinline__ void stage_q4i8(Q4I8Stage<NT> &st, int tok, float4 xa, float4 xc,
                                           int lane) {
    uint32_t l[2][4];
    stage_q4i8<NT>(st, tok, xa, xc, lane, l);
}

// Scale (or min) byte i (0..3) of word w, zero-extended.
__device__ __forceinline__ int q4_byte(uint32_t w, int i) {
    return (int)__byte_perm(w, 0u, 0x4440u | (uint32_t)i);
}
// Byte i of w in all four bytes (the min chain's A).
__device__ __forceinline__ uint32_t q4_bcast(uint32_t w, int i) {
    return __byte_perm(w, 0u, (uint32_t)i * 0x1111u);
}
// d = A * B (u8.s8, from zero).
__device__ __forceinline__ void mma_u8s8_k32_z(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
    const int zero[4] = {0, 0, 0, 0};
    q6k::mma_u8s8_k32(d, a0, a1, a2, a3, b0, b1, zero);
}

// The A registers of sub-block m = 4h + i of rows g, g+8 (chunk 2h + i / 2, nibble i & 1), its
// min's A (a0 = a2: row g, a1 = a3: row g+8) and the rows' scales (16 sc for even m, whose D
// lacks the factor 16 that the odd m's masked high nibbles carry).
struct Q4I8A {
    uint32_t a[4], am[2];
    int sg, s8;
};

// Q5 (Q5_K): every sub-block's A holds q + 16 hb (0..31; odd m's nibble shifted down, as 16 q
// + 256 hb would not fit a byte), so every scale is 16 sc and I, F and the fold are Q4_K's
// (|I| < 2^30: 8 sub-blocks of 16 * 63 * 32 * 31 * 128). hq: the half whose qh bits the
// sub-block takes (m = 4 hq + i; h itself where r holds the whole super-block).
template <bool Q5 = false>
__device__ __forceinline__ Q4I8A q4_i8_a(const Q4RawI8 &r, const uint32_t (&scw)[2][2],
                                         const uint32_t (&mnw)[2][2], int h, int i, int hq) {
    const uint2 wg = r.q0[2 * h + (i >> 1)], w8 = r.q8[2 * h + (i >> 1)];
    Q4I8A q;
    if constexpr (Q5) {
        const int sh = 4 * (i & 1), m = 4 * hq + i;
        auto v = [&](uint32_t w, uint32_t hb) {
            return ((w >> sh) & 0x0F0F0F0Fu) | (((hb >> m) & 0x01010101u) << 4);
        };
        q.a[0] = v(wg.x, r.qh0.x);
        q.a[1] = v(w8.x, r.qh8.x);
        q.a[2] = v(wg.y, r.qh0.y);
        q.a[3] = v(w8.y, r.qh8.y);
        q.sg = q4_byte(scw[0][h], i) << 4;
        q.s8 = q4_byte(scw[1][h], i) << 4;
    } else {
        const uint32_t mk = (i & 1) ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
        q.a[0] = wg.x & mk;
        q.a[1] = w8.x & mk;
        q.a[2] = wg.y & mk;
        q.a[3] = w8.y & mk;
        q.sg = q4_byte(scw[0][h], i) << ((i & 1) ? 0 : 4);
        q.s8 = q4_byte(scw[1][h], i) << ((i & 1) ? 0 : 4);
    }
    q.am[0] = q4_bcast(mnw[0][h], i);
    q.am[1] = q4_bcast(mnw[1][h], i);
    return q;
}

// Tile p's B registers of sub-blocks 4h .. 4h + 3 (two LDS.128).
template <int NT>
__device__ __forceinline__ void q4_i8_b(const Q4I8Stage<NT> &st, int p, int h, int lane,
                                        uint32_t (&b0)[4], uint32_t (&b1)[4]) {
    const uint4 e = st.b[p][2 * h][lane], o = st.b[p][2 * h + 1][lane];
    b0[0] = e.x; b1[0] = e.y; b0[1] = e.z; b1[1] = e.w;
    b0[2] = o.x; b1[2] = o.y; b0[3] = o.z; b1[3] = o.w;
}

// One sub-block's scaled product for one token (the GEMV's and the wide GEMM's step): D = A x B
// by one IMMA from zero, then I += sc * D (rows g: I[0..1] with sg, g+8: I[2..3] with s8).
__device__ __forceinline__ void q4_i8_scaled(const uint32_t (&a)[4], int sg, int s8, uint32_t b0,
                                             uint32_t b1, int (&I)[4]) {
    int d[4];
    mma_u8s8_k32_z(d, a[0], a[1], a[2], a[3], b0, b1);
    I[0] += sg * d[0];
    I[1] += sg * d[1];
    I[2] += s8 * d[2];
    I[3] += s8 * d[3];
}

// The two mma of one sub-block for one token (the GEMV and the 8-token GEMM): q4_i8_scaled,
// then M += min * (limb sums) in the min mma's accumulator.
__device__ __forceinline__ void q4_i8_mma(const Q4I8A &q, uint32_t b0, uint32_t b1, int (&I)[4],
                                          int (&M)[4]) {
    q4_i8_scaled(q.a, q.sg, q.s8, b0, b1, I);
    q6k::mma_u8s8_k32(M, q.am[0], q.am[1], q.am[0], q.am[1], b0, b1, M);
}

// acc (rows g, g+8) += the folded super-block of one token: limbs (0, 1) for even t, (2, 3) for
// odd t, F = 256 I_a + I_b at weight 2^16 or 1 (/ 16 for I).
// M: the min sums, int (the GEMV's IMMA chain) or float (the wide GEMM's HMMA: the same
// integers exactly, |M| < 2^22).
__device__ __forceinline__ float q4_i8_f(int v) { return __int2float_rn(v); }
__device__ __forceinline__ float q4_i8_f(float v) { return v; }
template <typename MT>
__device__ __forceinline__ void q4_i8_fold(const int (&I)[4], const MT (&M)[4], float sinv,
                                           float dg, float mg, float d8, float m8, int t,
                                           float (&acc)[2]) {
    const float wt = (t & 1) ? 1.0f : 65536.0f;
    const float sw = __fmul_rn(sinv, wt), sw16 = __fmul_rn(sw, 0.0625f);
    const float Fg = __fmaf_rn(256.0f, __int2float_rn(I[0]), __int2float_rn(I[1]));
    const float F8 = __fmaf_rn(256.0f, __int2float_rn(I[2]), __int2float_rn(I[3]));
    const float Mg = __fmaf_rn(256.0f, q4_i8_f(M[0]), q4_i8_f(M[1]));
    const float M8 = __fmaf_rn(256.0f, q4_i8_f(M[2]), q4_i8_f(M[3]));
    acc[0] = __fmaf_rn(__fmul_rn(dg, sw16), Fg, acc[0]);
    acc[0] = __fmaf_rn(-__fmul_rn(mg, sw), Mg, acc[0]);
    acc[1] = __fmaf_rn(__fmul_rn(d8, sw16), F8, acc[1]);
    acc[1] = __fmaf_rn(-__fmul_rn(m8, sw), M8, acc[1]);
}

// The 6-bit scale and min words of a super-block's rows g, g+8 (scw, mnw [row g / g+8][sub-blocks
// 0-3 / 4-7], a byte a sub-block: 0-3 sc = S0 & 63, m = S1 & 63; 4-7 the low 4 bits from S2's
// nibbles, the top 2 from bits 6-7 of S0 / S1: the f16 body's q4_scales, all 8 of both rows) and
// the rows' d and dmin.
__device__ __forceinline__ void q4_i8_scales(const Q4RawI8 &r, uint32_t (&scw)[2][2],
                                             uint32_t (&mnw)[2][2], float &dg, float &mg,
                                             float &d8, float &m8) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint4 &hd = k ? r.h8 : r.h0;
        const uint32_t S0 = hd.y, S1 = hd.z, S2 = hd.w;
        scw[k][0] = S0 & 0x3F3F3F3Fu;
        mnw[k][0] = S1 & 0x3F3F3F3Fu;
        scw[k][1] = (S2 & 0x0F0F0F0Fu) | ((S0 >> 2) & 0x30303030u);
        mnw[k][1] = ((S2 >> 4) & 0x0F0F0F0Fu) | ((S1 >> 2) & 0x30303030u);
    }
    dg = f16_bits_to_f32((uint16_t)(r.h0.x & 0xFFFFu));
    mg = f16_bits_to_f32((uint16_t)(r.h0.x >> 16));
    d8 = f16_bits_to_f32((uint16_t)(r.h8.x & 0xFFFFu));
    m8 = f16_bits_to_f32((uint16_t)(r.h8.x >> 16));
}

// One super-block of rows g, g+8 against the staged limbs of NT tokens: acc[p][0] (row g),
// acc[p][1] (row g+8) += this lane's share of token 2p + (t >> 1) (its limbs 2 (t & 1), +1).
// The GEMV builds A half a super-block at a time and keeps two min chains (even / odd m); the
// GEMM walks the halves in a loop (h not unrolled: registers), each half's A built once for
// its tiles. Integer sums, so both orders give the same bits a token.
// EACH (the GEMV): each sub-block's A built right before its mma, not a half's four first (the
// register use differs: the Q5_K pair spilled with the four first on sm_87, its normed one-matrix
// GEMV with EACH on sm_90a).
template <int NT, bool Q5 = false, bool EACH = false>
__device__ __forceinline__ void q4_superblock_i8(const Q4RawI8 &r, const Q4I8Stage<NT> &st,
                                                 int lane, float (&acc)[Q4I8Stage<NT>::kTiles][2]) {
    constexpr int T = Q4I8Stage<NT>::kTiles;
    const int t = lane & 3;
    uint32_t scw[2][2], mnw[2][2];
    float dg, mg, d8, m8;
    q4_i8_scales(r, scw, mnw, dg, mg, d8, m8);
    if constexpr (NT == 1) {
        int I[4] = {0, 0, 0, 0}, M[2][4] = {};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t b0[4], b1[4];
            if constexpr (EACH) {
                q4_i8_b<NT>(st, 0, h, lane, b0, b1);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    q4_i8_mma(q4_i8_a<Q5>(r, scw, mnw, h, i, h), b0[i], b1[i], I, M[i & 1]);
            } else {
                Q4I8A q[4];
#pragma unroll
                for (int i = 0; i < 4; i++) q[i] = q4_i8_a<Q5>(r, scw, mnw, h, i, h);
                q4_i8_b<NT>(st, 0, h, lane, b0, b1);
#pragma unroll
                for (int i = 0; i < 4; i++) q4_i8_mma(q[i], b0[i], b1[i], I, M[i & 1]);
            }
        }
        int Ms[4];
#pragma unroll
        for (int k = 0; k < 4; k++) Ms[k] = M[0][k] + M[1][k];
        q4_i8_fold(I, Ms, st.sinv[t >> 1], dg, mg, d8, m8, t, acc[0]);
    } else {
        int I[T][4], M[T][4];
#pragma unroll
        for (int p = 0; p < T; p++)
#pragma unroll
            for (int k = 0; k < 4; k++) I[p][k] = M[p][k] = 0;
#pragma unroll 1
        for (int h = 0; h < 2; h++) {
            Q4RawI8 rh;  // this half's chunks in q0/q8[0..1], its scale and min words at [k][0]
            rh.q0[0] = h ? r.q0[2] : r.q0[0];
            rh.q0[1] = h ? r.q0[3] : r.q0[1];
            rh.q8[0] = h ? r.q8[2] : r.q8[0];
            rh.q8[1] = h ? r.q8[3] : r.q8[1];
            if constexpr (Q5) {
                rh.qh0 = r.qh0;
                rh.qh8 = r.qh8;
            }
            const uint32_t sw[2][2] = {{h ? scw[0][1] : scw[0][0], 0u}, {h ? scw[1][1] : scw[1][0], 0u}};
            const uint32_t mw[2][2] = {{h ? mnw[0][1] : mnw[0][0], 0u}, {h ? mnw[1][1] : mnw[1][0], 0u}};
            Q4I8A q[4];
#pragma unroll
            for (int i = 0; i < 4; i++) q[i] = q4_i8_a<Q5>(rh, sw, mw, 0, i, h);
#pragma unroll
            for (int p = 0; p < T; p++) {
                uint32_t b0[4], b1[4];
                q4_i8_b<NT>(st, p, h, lane, b0, b1);
#pragma unroll
                for (int i = 0; i < 4; i++) q4_i8_mma(q[i], b0[i], b1[i], I[p], M[p]);
            }
        }
#pragma unroll
        for (int p = 0; p < T; p++)
            q4_i8_fold(I[p], M[p], st.sinv[2 * p + (t >> 1)], dg, mg, d8, m8, t, acc[p]);
    }
}

// Lane t takes token 4 jj + t (tile 2 jj + (t >> 1), held by lanes 2 (t & 1) and 2 (t & 1) + 1
// of its row, already lane-summed) into v[jj * 2 + k]: the f16 body's layout, so q4k_tile's
// reduction and epilogue serve both bodies (gemv_mma_q8.cu's wide GEMM moves its finished sums).
template <int NT, int NL>
__device__ __forceinline__ void q4_i8_lane_move(const float (&acc)[Q4I8Stage<NT>::kTiles][2],
                                                float *v, int lane) {
    constexpr int T = Q4I8Stage<NT>::kTiles;
    const int t = lane & 3;
    const int src = (lane & ~3) | ((t & 1) << 1);
#pragma unroll
    for (int jj = 0; jj < NL; jj++)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const float x0 = __shfl_sync(0xffffffffu, acc[2 * jj][k], src);
            float x = x0;
            if (2 * jj + 1 < T) {
                const float x1 = __shfl_sync(0xffffffffu, acc[2 * jj + 1 < T ? 2 * jj + 1 : 0][k], src);
                x = (t >> 1) ? x1 : x0;
            }
            v[jj * 2 + k] = x;
        }
}
// After the K loop: lanes t and t ^ 1 (limbs 0, 1 and 2, 3 of one token) summed (the same bits
// in both), then q4_i8_lane_move.
template <int NT, int NL>
__device__ __forceinline__ void q4_i8_lane_sum(float (&acc)[Q4I8Stage<NT>::kTiles][2], float *v,
                                               int lane) {
    constexpr int T = Q4I8Stage<NT>::kTiles;
#pragma unroll
    for (int p = 0; p < T; p++)
#pragma unroll
        for (int k = 0; k < 2; k++)
            acc[p][k] = __fadd_rn(acc[p][k], __shfl_xor_sync(0xffffffffu, acc[p][k], 1));
    q4_i8_lane_move<NT, NL>(acc, v, lane);
}

// ---- The wide GEMM's pieces (gemv_mma.cu gemm_wide_q4k_i8; bench/NOTES.md 2.4, session 9) ----
// A block stages x once for 4 tiles and decodes each tile's A once for NT tokens. Besides the
// GEMV's limbs, the stage holds each token's limb sums per sub-block, Sx[m][j] = sum of limb j
// over sub-block m's 32 values (|Sx| <= 4096), as the B operand of ONE m16n8k16 f16 mma a tile
// that gives the min term M = sum_m min_m Sx[m][j] for both tokens and all 4 limbs: k = 2 m + u,
// B[2m][c] = Sx & 63, B[2m + 1][c] = Sx >> 6 (exact in f16), A[r][2m] = min_m, A[r][2m + 1] =
// 64 min_m. Every product and partial sum is an integer below 2^22, so the FP32 result is the
// integer M of the GEMV's min IMMA chain exactly (the fold's inputs, hence its bits, are the
// GEMV's), at one HMMA a tile instead of 8 IMMA.
template <int NT>
struct Q4I8WStage {
    Q4I8Stage<NT> q;                           // the GEMV's limbs (two tokens a tile) and 1 / s
    uint2 sx[Q4I8Stage<NT>::kTiles][32];       // tile p's min B fragment (b0, b1) of mma lane L
};

// Stages token tok (whole warp): stage_q4i8, then the limb sums. Lane L holds 8 values of
// sub-block m = L >> 2; its 4 lanes' byte sums (dp4a) meet by two xor shuffles (limbs packed
// two a word: |Sx| < 2^15), lane t keeps limb t and writes B[2m..2m+1][4 (tok & 1) + t] as one
// half2 (Sx & 63, Sx >> 6) into fragment lane 4 c + (m & 3), register m >> 2.
template <int NT>
__device__ __forceinline__ void stage_q4i8w(Q4I8WStage<NT> &st, int tok, float4 xa, float4 xc,
                                            int lane) {
    uint32_t l[2][4];
    stage_q4i8<NT>(st.q, tok, xa, xc, lane, l);
    int s[4];
#pragma unroll
    for (int j = 0; j < 4; j++) s[j] = __dp4a((int)l[1][j], 0x01010101, __dp4a((int)l[0][j], 0x01010101, 0));
    int p01 = s[0] + (int)((uint32_t)s[1] << 16), p23 = s[2] + (int)((uint32_t)s[3] << 16);
    p01 += __shfl_xor_sync(0xffffffffu, p01, 1);
    p23 += __shfl_xor_sync(0xffffffffu, p23, 1);
    p01 += __shfl_xor_sync(0xffffffffu, p01, 2);
    p23 += __shfl_xor_sync(0xffffffffu, p23, 2);
    const int t = lane & 3, m = lane >> 2;
    const int P = t < 2 ? p01 : p23;
    const int lo = (int)((uint32_t)P << 16) >> 16;
    const int S = (t & 1) ? (P - lo) >> 16 : lo;
    const __half2 h = __floats2half2_rn((float)(S & 63), (float)(S >> 6));
    uint32_t *dst = reinterpret_cast<uint32_t *>(&st.sx[tok >> 1][4 * (4 * (tok & 1) + t) + (m & 3)]);
    dst[m >> 2] = *reinterpret_cast<const uint32_t *>(&h);
}

// One super-block of a tile's rows g, g+8 decoded for the wide GEMM: the A registers and scales
// of the 8 sub-blocks (q4_i8_a's, the GEMV's values), the min HMMA's A (half2 (min, 64 min) of
// sub-blocks t and t + 4, rows g and g + 8) and the rows' d, dmin.
struct Q4I8Dec {
    uint32_t a[8][4];
    int sg[8], s8[8];
    uint32_t mq[4];
    float dg, mg, d8, m8;
};

__device__ __forceinline__ uint32_t q4_min_h2(uint32_t w, int i) {
    const float m = (float)q4_byte(w, i);
    const __half2 h = __floats2half2_rn(m, __fmul_rn(64.0f, m));
    return *reinterpret_cast<const uint32_t *>(&h);
}

template <bool Q5 = false>
__device__ __forceinline__ void q4_i8_decode(const Q4RawI8 &r, int t, Q4I8Dec &A) {
    uint32_t scw[2][2], mnw[2][2];
    q4_i8_scales(r, scw, mnw, A.dg, A.mg, A.d8, A.m8);
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const Q4I8A q = q4_i8_a<Q5>(r, scw, mnw, h, i, h);
#pragma unroll
            for (int k = 0; k < 4; k++) A.a[4 * h + i][k] = q.a[k];
            A.sg[4 * h + i] = q.sg;
            A.s8[4 * h + i] = q.s8;
        }
    A.mq[0] = q4_min_h2(mnw[0][0], t);
    A.mq[1] = q4_min_h2(mnw[1][0], t);
    A.mq[2] = q4_min_h2(mnw[0][1], t);
    A.mq[3] = q4_min_h2(mnw[1][1], t);
}

// Tile p (tokens 2p, 2p + 1) of one decoded super-block: acc (rows g, g+8) += this lane's fold,
// the GEMV's per-token integers (I by IMMA + IMAD, M by the HMMA above) and fold.
template <int NT>
__device__ __forceinline__ void q4_i8_wtile(const Q4I8Dec &A, const Q4I8WStage<NT> &st, int p,
                                            int lane, float (&acc)[2]) {
    const int t = lane & 3;
    int I[4] = {0, 0, 0, 0};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t b0[4], b1[4];
        q4_i8_b<NT>(st.q, p, h, lane, b0, b1);
#pragma unroll
        for (int i = 0; i < 4; i++)
            q4_i8_scaled(A.a[4 * h + i], A.sg[4 * h + i], A.s8[4 * h + i], b0[i], b1[i], I);
    }
    float M[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint2 sx = st.sx[p][lane];
    mma16816(M, A.mq[0], A.mq[1], A.mq[2], A.mq[3], sx.x, sx.y);
    q4_i8_fold(I, M, st.q.sinv[2 * p + (t >> 1)], A.dg, A.mg, A.d8, A.m8, t, acc);
}

// ---- The limb pre-pass (LOOM_GEMM_WIDE_Q4K_I8=5, session 11; Q8_0: LOOM_GEMM_WIDE_Q8=2) ------
// The wide GEMM's stage of a super-block (Q4I8WStage: the limbs, 1 / s and the limb sums of its
// tokens) converted ONCE for the whole matmul into the kernel scratch, so that every block copies
// it (cp.async) instead of staging x itself: super-block sb, token pair P (tokens 2P, 2P + 1):
// the tile's limbs Q4I8Stage::b[P] at X + (sb * npairs + P) * 128 (2 KB), its limb-sum fragment
// Q4I8WStage::sx[P] at SX + (sb * npairs + P) * 32 (256 B), token j's 1 / s at SI[sb * npad + j];
// npad = n rounded up to 32 (npairs = npad / 2), tokens n .. npad - 1 all zeros (a ragged block's
// missing tokens, as the in-block stage's zeroing). The values are stage_q4i8w's, so the GEMM's
// bits do not change. Without SUMS (the Q8_0 wide GEMM, gemv_mma_q8.cu, which stages the same
// limbs by stage_q4i8 and has no min term) there is no SX and no NS.
struct Q4Limbs {
    uint4 *X;
    uint2 *SX;  // SUMS only
    float *SI;
    float *NS;  // SUMS and a folded norm: [npad] each token's RMS scale (scale last, norm.cuh)
    int npad;
};

// Bytes of the Q4Limbs of n tokens of K values (the scratch the pre-pass launches need).
inline size_t q4_limbs_bytes(int64_t n, int64_t K, bool sums) {
    return ((size_t)(K / 256) * ((sums ? 1024 + 128 : 1024) + sizeof(float)) +
            (sums ? sizeof(float) : 0)) *
           (size_t)limbs_npad(n);
}

// The Q4Limbs of n tokens of K values laid out in buf (q4_limbs_bytes(n, K, sums) bytes).
inline Q4Limbs q4_limbs_at(void *buf, int64_t n, int64_t K, bool sums) {
    Q4Limbs L;
    L.npad = (int)limbs_npad(n);
    const int64_t nsb = K / 256, pairs = nsb * (int64_t)(L.npad / 2);
    L.X = static_cast<uint4 *>(buf);
    L.SX = sums ? reinterpret_cast<uint2 *>(L.X + pairs * 128) : nullptr;
    L.SI = sums ? reinterpret_cast<float *>(L.SX + pairs * 32) : reinterpret_cast<float *>(L.X + pairs * 128);
    L.NS = sums ? L.SI + nsb * L.npad : nullptr;
    return L;
}

// The pre-pass: block x = token, its 4 warps stage super-blocks w, w + 4, ... into a warp's
// one-pair stage, then copy the token's half of it (limb words 16 e .. 16 e + 15 of each of the
// 4 registers' rows, sum words 16 e .. 16 e + 15, 1 / s; e = token & 1) to L. Tokens past n:
// zeros. SUMS (Q4_K): stage_q4i8w, and NORM scale last as the Q4_K wide GEMM's staging (x * w
// per value, the token's RMS scale from block_rms_scales into NS[token]); without SUMS (Q8_0):
// stage_q4i8, and NORM scale first as the Q8_0 GEMMs stage (rms_apply4: bit for bit the norm
// launcher, then the plain matmul).
template <bool NORM, bool SUMS>
__device__ __forceinline__ void q4_limbs_prepass(const float *x, int64_t K, int n,
                                                 const PreNorm &norm, const Q4Limbs &L) {
    __shared__ Q4I8WStage<2> st[kWarps];
    __shared__ double npart[NORM ? kWarps : 1];
    __shared__ float nscale[1];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, tok = (int)blockIdx.x, e = tok & 1;
    const int64_t nsb = K / 256, npairs = L.npad / 2;
    pdl_wait();
    if (tok >= n) {
        for (int64_t sb = w; sb < nsb; sb += kWarps) {
            uint4 *d = L.X + (sb * npairs + tok / 2) * 128 + 16 * e;
            for (int i = lane; i < 64; i += 32) d[32 * (i >> 4) + (i & 15)] = make_uint4(0u, 0u, 0u, 0u);
            if (SUMS && lane < 16) L.SX[(sb * npairs + tok / 2) * 32 + 16 * e + lane] = make_uint2(0u, 0u);
            if (lane == 0) L.SI[sb * L.npad + tok] = 0.0f;
        }
        if (SUMS && NORM && threadIdx.x == 0) L.NS[tok] = 0.0f;
        return;
    }
    const float *xr = x + (int64_t)tok * K;
    if (NORM) {
        block_rms_scales<1>(xr, K, 1, K, norm, npart, nscale);
        if (SUMS && threadIdx.x == 0) L.NS[tok] = nscale[0];
    }
    const int xoff = q4_i8_xoff(lane);
    const float *nwb = NORM && norm.w ? norm.w + xoff : nullptr;
    Q4I8WStage<2> &s = st[w];
    for (int64_t sb = w; sb < nsb; sb += kWarps) {
        float4 xa = ld_x4(xr + sb * 256 + xoff), xc = ld_x4(xr + sb * 256 + xoff + kQ4I8Xc);
        if (NORM) {
            float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
            if (nwb) {
                nwa = ld_x4(nwb + sb * 256);
                nwc = ld_x4(nwb + sb * 256 + kQ4I8Xc);
            }
            xa = SUMS ? norm_w4(xa, nwa) : rms_apply4(xa, nscale[0], nwa);
            xc = SUMS ? norm_w4(xc, nwc) : rms_apply4(xc, nscale[0], nwc);
        }
        if (SUMS) stage_q4i8w<2>(s, e, xa, xc, lane);
        else stage_q4i8<2>(s.q, e, xa, xc, lane);
        __syncwarp();
        uint4 *d = L.X + (sb * npairs + tok / 2) * 128 + 16 * e;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int i = lane + 32 * r;  // register row i >> 4, word 16 e + (i & 15)
            d[32 * (i >> 4) + (i & 15)] = s.q.b[0][i >> 4][16 * e + (i & 15)];
        }
        if (SUMS && lane < 16) L.SX[(sb * npairs + tok / 2) * 32 + 16 * e + lane] = s.sx[0][16 * e + lane];
        if (lane == 0) L.SI[sb * L.npad + tok] = s.q.sinv[e];
        __syncwarp();  // the slot is read before the next super-block overwrites it
    }
}

// The block's NT tokens (from tok0, even) of super-block b copied from L into the stage with
// cp.async (whole block; the caller commits and waits): NT / 2 limb chunks of 16 bytes a thread
// into q, with sx (the Q4_K wide GEMM's limb sums; nullptr: none) NT / 16 sum chunks, the 1 / s
// of NT tokens in the first NT / 4 threads.
template <int NT>
__device__ __forceinline__ void q4_limbs_copy(const Q4Limbs &L, int64_t b, int tok0,
                                              Q4I8Stage<NT> &q, uint2 *sx) {
    static_assert(NT % 8 == 0 && kThreads == 128, "whole chunks a thread");
    constexpr int kThr = kThreads;
    const int tid = threadIdx.x;
    const int64_t P0 = b * (L.npad / 2) + tok0 / 2;
    const uint4 *xs = L.X + P0 * 128;
    uint4 *xd = &q.b[0][0][0];
#pragma unroll
    for (int i = 0; i < NT / 2; i++) cp_async16(xd + tid + kThr * i, xs + tid + kThr * i, true);
    if (sx) {
        const uint4 *ss = reinterpret_cast<const uint4 *>(L.SX + P0 * 32);
        uint4 *sd = reinterpret_cast<uint4 *>(sx);
#pragma unroll
        for (int i = 0; i < NT / 16; i++) cp_async16(sd + tid + kThr * i, ss + tid + kThr * i, true);
    }
    if (tid < NT / 4) cp_async16(&q.sinv[4 * tid], L.SI + b * L.npad + tok0 + 4 * tid, true);
}
template <int NT>
__device__ __forceinline__ void q4_limbs_copy(const Q4Limbs &L, int64_t b, int tok0,
                                              Q4I8WStage<NT> &st) {
    static_assert(NT % 16 == 0, "whole sum chunks a thread");
    q4_limbs_copy<NT>(L, b, tok0, st.q, &st.sx[0][0]);
}
template <int NT>
__device__ __forceinline__ void q4_limbs_copy(const Q4Limbs &L, int64_t b, int tok0,
                                              Q4I8Stage<NT> &st) {
    q4_limbs_copy<NT>(L, b, tok0, st, nullptr);
}

}  // namespace loom_cuda
