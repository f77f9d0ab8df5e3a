// q6k_i8_body.cuh: the INT8 tensor-core body of the Q6_K matmul (LOOM_GEMV_MMA_Q6K_V=2;
// gemv_mma_q6k.cu's kernels run q6k_i8_tile over their grid). Same tile, weight windows, stages,
// split-K and reduction order as q6k_mma_body.cuh's f16 bodies (it reuses q6_issue and the
// block layout), another product and another x staging, so other bits than V = 0 / 1.
//
// The product. One mma.sync m16n8k32 u8.s8 -> s32 covers TWO Q6_K sub-blocks of 16 values,
// (h, i, u = 0) in k-slots 0..15 and (h, i, u = 1) in 16..31 (value 128h + 32i + 16u + l; mma
// m = 4h + i, 8 a super-block). A = the 6-bit q as unsigned bytes, built per 4 values from one
// ql word and the qh word already split once into M = qh & 0x33.. and N = qh & 0xCC..:
// q(i=0) = sel(ql0, M << 4), q(1) = sel(ql1, N << 2), q(2) = sel(ql0 >> 4, M),
// q(3) = sel(ql1 >> 4, N >> 2) with sel(a, b) = (a & 0x0F..) | (b & 0xF0..), one LOP3
// (bits 4-7 of b hold the two high bits and zeros, so no second mask). Lane t holds bytes
// 4t..4t+3 of every 16-byte run (the sub-block's values l = 4t..4t+3).
// B = x as 4 exact int8 limbs: per super-block and token a power-of-two scale s puts
// max |x s| in [2^29, 2^30), X = rint(x s) = 2^24 L0 + 2^16 L1 + 2^8 L2 + L3 (balanced digits:
// the bytes of (X + 0x808080) ^ 0x808080). Column c = 4u + j holds limb j of sub-block u's
// values (zeros in the other sub-block's k-slots), so every lane's two columns (2t, 2t+1)
// belong to ONE sub-block (u = t >> 1): its int8 scale multiplies the exact s32 sums with one
// IMAD a row and column (4 a lane and mma), and all 8 columns carry data (GEMV: 4 limbs of 2
// sub-blocks; GEMM: one n8 tile a token, 8 tokens = 8 tiles, so a token's columns, sums and
// fold are the GEMV's: GEMM token == GEMV bits).
// The -32, GEMV: a second mma per m, s8.s8 with A = -32 in every byte, gives -32 * (the
// column's limb sum over the sub-block), exact, as the accumulator the main mma starts from.
// GEMM: A = q - 32 as s8 directly (the high nibble (h - 2) mod 16 = ((16 h + 0x60) ^ 0x80) >> 4
// from the qh operand: 2 more instructions a word, built once for the 8 tokens, instead of 64
// offset mma a super-block). Either way D = sum (q - 32) L exactly (the same integers: GEMM
// token == GEMV bits), |D| <= 2^16; I = sum over the lane's 8 sub-blocks of sc D, |I| < 2^26.
// Fold once a super-block in FP32, fixed order: lane t's limbs are (0, 1) (t even: weight
// 2^24, 2^16) or (2, 3) (t odd: 2^8, 1): F = fma(256, float(I_a), float(I_b)),
// acc += (d * (w_t / s)) * F with w_t = 2^16 or 1 (exact products). After the K loop each
// row's 4 lane partials are summed by two xor shuffles (the same bits in every lane), then the
// block and cluster order of reduce_partials.
//
// Numeric contract: as the f16 bodies, |y - y_cpu| <= 1e-5 * sum_k |W x| (+1e-30). Error
// analysis: the products and the integer sums are exact; x loses at most 2^-31 of the
// super-block's max |x| (X is exact where |x s| >= 2^23, i.e. values within 2^-7 of the max keep
// all 24 bits); float(I) rounds at 2^-24 relative, the fold and the K accumulation in FP32 as
// the f16 bodies. An x whose values span more than ~2^20 inside one super-block loses its
// smallest values (the f16 hi + lo keeps 22 bits of each value down to 2^-39 of the max).
//
// Cost counted before measuring (per warp and 16-row super-block, GEMV): loads 72 (12 words a
// row and lane, each two LDS.32 + a funnel shift: the block is only 2-byte aligned; one LDS
// where the warp's windows are 4-byte aligned, which for rows a multiple of 4 bytes long is
// every other warp: the AL body) + scales and d ~40, A 88 (11 per 4 words), 16 IMMA, 32 IMAD,
// 16 PRMT (sign-extended scales), fold ~16, x staging ~72 (8 F2I, 16 byte transposes), weight
// copy ~35: ~400 SASS against the f16 V = 1 loop's 706. Measured (H200, bench/NOTES.md 2.1 R2,
// against V = 1 in the same call): lm head 143 -> 112 us (68% of copy), 4B ffn down + add 16.8
// -> 12.6, 8B gemv 22.0 -> 17.2; the GEMM slower (4B down N = 512 1217 -> 1541 us: the 8 tokens'
// limb staging, 256 IMAD and 64 SEL a super-block).
//
// Shared memory: the f16 bodies' weight stages plus, a warp, the limbs: GEMV 2 KB (each lane's
// (b0, b1) pair staged with its zero half, written once: no selects), GEMM 1 KB a token (the
// lane's word, put into b0 or b1 by a select: 8 tokens of pairs would not fit) -- 36.9 KB and
// 47.5 KB a block (under sm_87's 48 KB).
#pragma once

#include "kernels/cuda/q6k_mma_body.cuh"

namespace loom_cuda {
namespace q6k {

// Per-warp staging of one super-block of x for NT tokens as int8 limbs; sinv[tok] = 1 / s.
// GEMM: b[tok][p][slot] = the B words of mma m = 4p .. 4p+3 for lane slot ^ 4p. GEMV (kPair):
// b[0][p][slot] = (b0, b1) of mma 2p and of 2p + 1 for lane slot ^ 4 (p & 1). (The swizzles
// keep the staging stores at most 2-way bank conflicted; each read is one LDS.128 a lane.)
template <int NT>
struct I8Stage {
    static constexpr bool kPair = NT == 1;
    uint4 b[NT][kPair ? 4 : 2][32];
    float sinv[NT < 4 ? 4 : NT];
};

template <int NT, int ST, bool NORM>
struct Q6I8Smem {
    __align__(16) uint8_t wbuf[kWarps][ST][kTileBytes];
    I8Stage<NT> stage[kWarps];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
    float xch[xch_floats(NT == 1)];  // the GEMV's split sums (reduce_partials)
};

// d = the u8 A (16x32, rows g/g+8) times the s8 B (32x8) plus c, exact in s32.
__device__ __forceinline__ void mma_u8s8_k32(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1,
                                             const int (&c)[4]) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]),
          "r"(c[3]));
}

// d = A (s8: q - 32) times B, from zero: the GEMM's product (no offset mma, see below).
__device__ __forceinline__ void mma_s8s8_k32(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%10,%10,%10,%10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}

// d = -32 * (the sum of each B column over the k-slots): the s8.s8 mma with every A byte -32.
__device__ __forceinline__ void mma_m32_k32(int (&d)[4], uint32_t b0, uint32_t b1) {
    const uint32_t m = 0xE0E0E0E0u;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(m), "r"(m), "r"(m), "r"(m), "r"(b0), "r"(b1), "r"(0));
}

// (a & 0x0F0F0F0F) | (b & 0xF0F0F0F0) in one LOP3 (lut 0xE4 = (A & C) | (B & ~C) for the
// operands in the order a, b, mask: 0xF0 & 0xAA | 0xCC & 0x55).
__device__ __forceinline__ uint32_t sel_nib(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(d) : "r"(a), "r"(b), "n"(0x0F0F0F0Fu));
    return d;
}

// Byte `sel` of w, sign-extended (prmt's sign-replicate selectors; sel = b | (8|b) << 4 ...).
__device__ __forceinline__ int sext_byte(uint32_t w, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(d) : "r"(w), "r"(sel));
    return (int)d;
}

// Stages token `tok`'s x of one super-block (whole warp). Lane L brings the values
// 32 (L >> 2) + 4 (L & 3) + 0..3 (xa: sub-block u = 0 of mma m = L >> 2) and + 16 (xc: u = 1).
template <int NT>
__device__ __forceinline__ void stage_i8(I8Stage<NT> &st, int tok, float4 xa, float4 xc,
                                         int lane) {
    const float v[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
    uint32_t l[2][4];
    const int e = i8_limbs(v, l);
    const int tq = lane & 3, m = lane >> 2;
    constexpr bool kPair = I8Stage<NT>::kPair;
    const int p = kPair ? m >> 1 : m >> 2;
    uint32_t *b = reinterpret_cast<uint32_t *>(&st.b[tok][p][0]);
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col_lane = 4 * (4 * u + j) + tq;  // the mma lane (g = 4u + j, t = tq)
            if (kPair) b[4 * (col_lane ^ (4 * (p & 1))) + 2 * (m & 1) + u] = l[u][j];
            else b[4 * (col_lane ^ (4 * p)) + (m & 3)] = l[u][j];
        }
    if (lane == 0) st.sinv[tok] = __uint_as_float((uint32_t)(254 - e) << 23);
}

// The norm weight at this lane's staged x positions of super-block b (stage_i8's xa, xc): nwb =
// the weight + the lane's offset; without one (nwb NULL) 1.0, the same bits as no multiply.
__device__ __forceinline__ void q6_norm_w(const float *nwb, int64_t b, float4 &nwa, float4 &nwc) {
    nwa = make_float4(1.f, 1.f, 1.f, 1.f);
    nwc = nwa;
    if (nwb) {
        nwa = ld_x4(nwb + b * 256);
        nwc = ld_x4(nwb + b * 256 + 16);
    }
}

// stage_i8 of x as loaded (every Q6_K INT8 staging: the GEMV and GEMM, the wide GEMM, the
// pre-pass). NORM: x RMS-normalized first, (x * sc) * w (rms_apply4; sc the token's scale, nwa /
// nwc from q6_norm_w): bit for bit loom_cuda_rms_norm followed by the plain kernel.
template <int NT, bool NORM>
__device__ __forceinline__ void stage_i8_x(I8Stage<NT> &st, int tok, float4 xa, float4 xc,
                                           float sc, float4 nwa, float4 nwc, int lane) {
    if (NORM) stage_i8<NT>(st, tok, rms_apply4(xa, sc, nwa), rms_apply4(xc, sc, nwc), lane);
    else stage_i8<NT>(st, tok, xa, xc, lane);
}

// This lane's quant words of half h of a super-block (the INT8 bodies' A operands): ql of runs
// n = 4h + 2jj + u, qh of runs 8 + 2h + u, of rows g (words from pg, funnel shift fg) and g + 8
// (p8, f8).
__device__ __forceinline__ void q6_words(const uint32_t *pg, const uint32_t *p8, uint32_t fg,
                                         uint32_t f8, int h, uint32_t (&qlg)[2][2],
                                         uint32_t (&ql8)[2][2], uint32_t (&qhg)[2],
                                         uint32_t (&qh8)[2]) {
#pragma unroll
    for (int u = 0; u < 2; u++) {
#pragma unroll
        for (int jj = 0; jj < 2; jj++) {
            const int n = 4 * h + 2 * jj + u;
            qlg[jj][u] = __funnelshift_r(pg[4 * n], pg[4 * n + 1], fg);
            ql8[jj][u] = __funnelshift_r(p8[4 * n], p8[4 * n + 1], f8);
        }
        const int n = 8 + 2 * h + u;
        qhg[u] = __funnelshift_r(pg[4 * n], pg[4 * n + 1], fg);
        qh8[u] = __funnelshift_r(p8[4 * n], p8[4 * n + 1], f8);
    }
}

// One super-block of rows g, g+8 (row windows at og, o8 bytes of the warp buffer) against the
// staged limbs of NT tokens: acc[j][0] (row g), acc[j][1] (row g+8) += this lane's share of
// token j (limbs 2 (t & 1), +1 of sub-blocks u = t >> 1).
template <int NT, bool AL>
__device__ __forceinline__ void q6_superblock_i8(const uint32_t *wb, int og, int o8,
                                                 const I8Stage<NT> &st, int lane,
                                                 float (&acc)[NT][2]) {
    const int t = lane & 3, g = lane >> 2;
    const bool lo = g < 4;  // column g: sub-block u = g >> 2 (k-slots 0..15 or 16..31)
    const uint32_t *pg = wb + ((og + 4 * t) >> 2), *p8 = wb + ((o8 + 4 * t) >> 2);
    // AL: every row window 4-byte aligned (the caller knows): no funnel shifts, one load a word
    const uint32_t fg = AL ? 0u : (uint32_t)(og & 2) * 8, f8 = AL ? 0u : (uint32_t)(o8 & 2) * 8;
    const uint32_t *rg = wb + (og >> 2), *r8 = wb + (o8 >> 2);
    // scale words (bytes 192..207) and d (208, 209) of both rows
    uint32_t scg[4], sc8[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        scg[k] = __funnelshift_r(rg[48 + k], rg[49 + k], fg);
        sc8[k] = __funnelshift_r(r8[48 + k], r8[49 + k], f8);
    }
    const float dg = f16_bits_to_f32((uint16_t)(rg[52] >> fg));
    const float d8 = f16_bits_to_f32((uint16_t)(r8[52] >> f8));
    // sign-extending selectors of the lane's scale bytes 2 (i & 1) + u, u = t >> 1
    const uint32_t b0s = (uint32_t)(t >> 1), b1s = b0s + 2;
    const uint32_t sel0 = b0s | (b0s | 8u) * 0x1110u, sel1 = b1s | (b1s | 8u) * 0x1110u;
    int I[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) I[j][0] = I[j][1] = I[j][2] = I[j][3] = 0;
    // GEMM: one half at a time (both unrolled, the scheduler hoists h = 1's loads: spills)
#pragma unroll(NT == 1 ? 2 : 1)
    for (int h = 0; h < 2; h++) {
        uint32_t qlg[2][2], ql8[2][2], qhg[2], qh8[2];
        q6_words(pg, p8, fg, f8, h, qlg, ql8, qhg, qh8);
        uint32_t Mg[2], Ng[2], M8[2], N8[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            Mg[u] = qhg[u] & 0x33333333u; Ng[u] = qhg[u] & 0xCCCCCCCCu;
            M8[u] = qh8[u] & 0x33333333u; N8[u] = qh8[u] & 0xCCCCCCCCu;
        }
        // A of mma m = 4h + i (rows g, g+8; sub-blocks u = 0, 1) and the rows' scales. SA (the
        // GEMM): A = q - 32 as s8, its high nibble (h - 2) mod 16 = (h + 6) ^ 8 from the qh
        // operand as (x + 0x60..) ^ 0x80.. (no carries: the low nibbles hold <= 3, h + 6 <= 9),
        // two instructions a word shared by the 8 tokens, for 64 offset mma a super-block.
        constexpr bool SA = NT > 1;
        auto hs = [](uint32_t x) { return SA ? (x + 0x60606060u) ^ 0x80808080u : x; };
        uint32_t ag[4][2], a8[4][2];
        int sg[4], s8[4];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            ag[0][u] = sel_nib(qlg[0][u], hs(Mg[u] << 4)); a8[0][u] = sel_nib(ql8[0][u], hs(M8[u] << 4));
            ag[1][u] = sel_nib(qlg[1][u], hs(Ng[u] << 2)); a8[1][u] = sel_nib(ql8[1][u], hs(N8[u] << 2));
            ag[2][u] = sel_nib(qlg[0][u] >> 4, hs(Mg[u])); a8[2][u] = sel_nib(ql8[0][u] >> 4, hs(M8[u]));
            ag[3][u] = sel_nib(qlg[1][u] >> 4, hs(Ng[u] >> 2)); a8[3][u] = sel_nib(ql8[1][u] >> 4, hs(N8[u] >> 2));
        }
        // (h may be a loop variable: no register array indexed by it)
        const uint32_t wg[2] = {h ? scg[2] : scg[0], h ? scg[3] : scg[1]};
        const uint32_t w8[2] = {h ? sc8[2] : sc8[0], h ? sc8[3] : sc8[1]};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            // sub-block 8h + 2i + u: word 2h + i / 2, byte 2 (i & 1) + u
            const uint32_t sel = (i & 1) ? sel1 : sel0;
            sg[i] = sext_byte(wg[i >> 1], sel);
            s8[i] = sext_byte(w8[i >> 1], sel);
        }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            uint32_t b0[4], b1[4];
            if (I8Stage<NT>::kPair) {  // (b0, b1) pairs staged with their zeros
                const uint4 e = st.b[j][2 * h][lane], o = st.b[j][2 * h + 1][lane ^ 4];
                b0[0] = e.x; b1[0] = e.y; b0[1] = e.z; b1[1] = e.w;
                b0[2] = o.x; b1[2] = o.y; b0[3] = o.z; b1[3] = o.w;
            } else {  // the lane's words; b0 or b1 by its column's sub-block
                const uint4 bw = st.b[j][h][lane ^ (4 * h)];
                const uint32_t bv[4] = {bw.x, bw.y, bw.z, bw.w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    b0[i] = lo ? bv[i] : 0u;
                    b1[i] = lo ? 0u : bv[i];
                }
            }
            // (the mma asm is volatile: program order, the four offsets ahead of their users)
            int off[4][4];
            if (!SA) {
#pragma unroll
                for (int i = 0; i < 4; i++) mma_m32_k32(off[i], b0[i], b1[i]);
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int d[4];
                if (SA) mma_s8s8_k32(d, ag[i][0], a8[i][0], ag[i][1], a8[i][1], b0[i], b1[i]);
                else mma_u8s8_k32(d, ag[i][0], a8[i][0], ag[i][1], a8[i][1], b0[i], b1[i], off[i]);
                I[j][0] += sg[i] * d[0];
                I[j][1] += sg[i] * d[1];
                I[j][2] += s8[i] * d[2];
                I[j][3] += s8[i] * d[3];
            }
        }
    }
    // limbs (0, 1) for even t, (2, 3) for odd t: F = 256 I_a + I_b, weight 2^16 or 1
    const float wt = (t & 1) ? 1.0f : 65536.0f;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const float sw = __fmul_rn(st.sinv[j], wt);
        const float Fg = __fmaf_rn(256.0f, __int2float_rn(I[j][0]), __int2float_rn(I[j][1]));
        const float F8 = __fmaf_rn(256.0f, __int2float_rn(I[j][2]), __int2float_rn(I[j][3]));
        acc[j][0] = __fmaf_rn(__fmul_rn(dg, sw), Fg, acc[j][0]);
        acc[j][1] = __fmaf_rn(__fmul_rn(d8, sw), F8, acc[j][1]);
    }
}

// The block's work for one tile with the INT8 body: q6k_tile's contract (q6k_mma_body.cuh),
// its weight copy, stages, split and reduction order; x staged as limbs (stage_i8).
// TR: the traced GEMV (slot: its trace slot; gemv_mma.cu q4k_tile's stamps, kind 3). TL: the
// weights in LOOM_WEIGHT_Q6K_TILES (q6_win): every window 4-byte aligned, the GEMM's too.
template <int NT, int ST, bool NORM, bool TR = false, bool TL = false>
__device__ __forceinline__ void q6k_i8_tile(const Q6Args &a, Q6I8Smem<NT, ST, NORM> &sm,
                                            int64_t tile, int rank, int S, int tok0,
                                            unsigned long long *slot = nullptr) {
    pdl_launch_dependents();
    if (NT == 1) cluster_start(S);  // the GEMV: the split's sums meet in rank 0's xch
    auto &wbuf = sm.wbuf;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int si = q6_seg_of(a, tile);
    const Seg &s = a.seg[si];
    const int64_t r0 = (tile - a.tile0[si]) * kTileRows;
    const Q6Win win = q6_win<TL>(s, r0, lane);

    float acc[NT][2];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = 0.0f;
    I8Stage<NT> &st = sm.stage[w];
    // Tokens past ntok (a ragged GEMM group): zero limbs and 1 / s; the GEMV's pair layout:
    // the zero halves. Set once (staging writes only the limbs).
    constexpr int kSlots = (I8Stage<NT>::kPair ? 4 : 2) * 32;
    for (int j = I8Stage<NT>::kPair ? 0 : ntok; j < NT; j++) {
        for (int i = lane; i < kSlots; i += 32) (&st.b[j][0][0])[i] = make_uint4(0u, 0u, 0u, 0u);
        if (lane == 0 && j >= ntok) st.sinv[j] = 0.0f;
    }
    __syncwarp();
    const int64_t nsb = a.K / 256;
    const int64_t step = (int64_t)kWarps * S;
    const int xoff = 32 * (lane >> 2) + 4 * (lane & 3);  // stage_i8's values: xoff, xoff + 16
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    int64_t sb = (int64_t)kWarps * rank + w;
    // The warp's row windows all 4-byte aligned at every one of its super-blocks: rows a
    // multiple of 4 bytes apart, the first at an address = 2 sb (mod 4) from it, sb's parity
    // fixed (step = 4 S). Then the GEMV's loads skip the funnel shifts (half the warps; in
    // tiles every warp, and the GEMM's too).
    const bool al =
        TL || (NT == 1 && (s.row_bytes & 3) == 0 && ((win.ag + 2u * (uint32_t)sb) & 3u) == 0);
#pragma unroll
    for (int q = 0; q < ST; q++) {
        const int64_t sq = sb + q * step;
        if (sq < nsb) {
            q6_issue_sb<TL>(wbuf[w][q], win, sq, nsb, lane);
        }
        cp_async_commit();
    }
    pdl_wait();
    gt_release<TR>(slot);
    [[maybe_unused]] const int64_t sb0 = sb;
    constexpr bool kPrefetchX = NT == 1;
    constexpr int XB = NT < 4 ? NT : 4;
    float4 xa[XB], xc[XB];
    const int kx = (int)a.K;  // NT * K < 2^31 (K <= 2^26 bytes / 210 * 256 a row)
    auto load_x = [&](int64_t b, int i0, float4 *pa, float4 *pc) {
#pragma unroll
        for (int i = 0; i < XB; i++) {
            if (i0 + i == 0 || i0 + i < ntok) {
                // (32-bit token offsets: 64-bit ones held for 8 tokens cost the GEMM a spill)
                const float *p = xb + b * 256 + (i0 + i) * kx;
                pa[i] = ld_x4(p);
                pc[i] = ld_x4(p + 16);
            }
        }
    };
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    if (kPrefetchX && sb < nsb) load_x(sb, 0, xa, xc);
    if (NORM) block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart, sm.nscale);
    gt_mark<TR>(slot, 4);
    for (int q = 0; sb < nsb; sb += step, q = q + 1 == ST ? 0 : q + 1) {
        float4 nxa[XB], nxc[XB];
        const bool more = sb + step < nsb;
        if (kPrefetchX && more) load_x(sb + step, 0, nxa, nxc);
        float4 nwa, nwc;
        q6_norm_w(nwb, sb, nwa, nwc);
        __syncwarp();
#pragma unroll
        for (int i0 = 0; i0 < NT; i0 += XB) {
            if (!kPrefetchX) load_x(sb, i0, xa, xc);
#pragma unroll
            for (int i = 0; i < XB; i++)
                if (i0 + i == 0 || i0 + i < ntok)
                    stage_i8_x<NT, NORM>(st, i0 + i, xa[i], xc[i], NORM ? sm.nscale[i0 + i] : 1.0f,
                                         nwa, nwc, lane);
        }
        cp_async_wait<ST - 1>();
        __syncwarp();
        if (sb == sb0) gt_mark<TR>(slot, 5);
        const uint32_t *wb = reinterpret_cast<const uint32_t *>(wbuf[w][q]);
        int og, o8;
        q6_offsets<TL>(win, sb, g, og, o8);
        if (al) q6_superblock_i8<NT, true>(wb, og, o8, st, lane, acc);
        else q6_superblock_i8<NT, false>(wb, og, o8, st, lane, acc);
        if (sb == sb0) gt_mark<TR>(slot, 6);
        __syncwarp();  // every lane has read buffer q (and the x stage) before they are refilled
        const int64_t sn = sb + ST * step;
        if (sn < nsb) {
            q6_issue_sb<TL>(wbuf[w][q], win, sn, nsb, lane);
        }
        cp_async_commit();
        if (kPrefetchX && more) {
#pragma unroll
            for (int i = 0; i < XB; i++) { xa[i] = nxa[i]; xc[i] = nxc[i]; }
        }
    }
    cp_async_wait<0>();
    gt_loop_end<TR>(slot);

    // The 4 lanes of a row (t) in a fixed order (the same bits in each), then warps 0..3 and
    // cluster ranks 0..S-1 (reduce_partials). Lane t keeps tokens t, t + 4 (GEMM; GEMV: token 0).
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            acc[j][k] = __fadd_rn(acc[j][k], __shfl_xor_sync(0xffffffffu, acc[j][k], 1));
            acc[j][k] = __fadd_rn(acc[j][k], __shfl_xor_sync(0xffffffffu, acc[j][k], 2));
        }
    constexpr int NL = NT < 4 ? 1 : NT / 4;  // tokens a lane writes
    float v[NL * 2];
#pragma unroll
    for (int jj = 0; jj < NL; jj++)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            float x = acc[4 * jj][k];
#pragma unroll
            for (int tt = 1; tt < 4 && 4 * jj + tt < NT; tt++)
                if (t == tt) x = acc[4 * jj + tt][k];
            v[jj * 2 + k] = x;
        }
    __syncthreads();
    reduce_partials<NL * 2, TR, NT == 1>(v, reinterpret_cast<float *>(&wbuf[0][0][0]), S, slot,
                                         sm.xch);
    // (TR: the block's end; warp 0 of rank 0 after its store)
    auto end = [&]() { gt_end<TR>(slot, S, 3, sb0 < nsb ? (int)((nsb - 1 - sb0) / step + 1) : 0, (int)nsb); };
    if (rank != 0 || w != 0) {
        end();
        return;
    }
    q6_store<NL>(a, s, r0, tok0, ntok, lane, v);
    end();
}

// The persistent GEMV (NT = 1, S = 1, no folded norm; gemv_mma_q6k.cu launches it for matrices
// of many waves, the lm head): a block walks tiles blockIdx.x, + gridDim.x, ... and runs each
// exactly as q6k_i8_tile's GEMV does (the same super-blocks a warp, windows, staging, sums and
// store: the same bits), but a warp requests the next tile's first ST super-blocks as soon as
// its last one of this tile has landed (its buffers are free), before the block's reduction and
// store (the next tile's first x after it): an SM's bytes in flight no longer drain at each
// tile's end as they do between the blocks of the one-tile GEMV. The reduction's partials
// alternate between two buffers by tile parity, so one barrier a tile suffices.
template <int ST>
struct Q6PersistSmem {
    __align__(16) uint8_t wbuf[kWarps][ST][kTileBytes];
    I8Stage<1> stage[kWarps];
    float red[2][kWarps * 2 * 32];
};

template <int ST, bool TL>
__device__ __forceinline__ void q6k_i8_persist(const Q6Args &a, Q6PersistSmem<ST> &sm) {
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2;
    const int64_t ntiles = a.tile0[a.nseg], nsb = a.K / 256;
    I8Stage<1> &st = sm.stage[w];
    for (int i = lane; i < 4 * 32; i += 32) (&st.b[0][0][0])[i] = make_uint4(0u, 0u, 0u, 0u);
    __syncwarp();
    auto issue_first = [&](const Q6Win &v, bool live) {
#pragma unroll
        for (int q = 0; q < ST; q++) {
            const int64_t sq = w + q * kWarps;
            if (live && sq < nsb) q6_issue_sb<TL>(sm.wbuf[w][q], v, sq, nsb, lane);
            cp_async_commit();
        }
    };
    const int xoff = 32 * (lane >> 2) + 4 * (lane & 3);  // stage_i8's values: xoff, xoff + 16
    const float *xb = a.x + xoff;
    auto load_x = [&](int64_t b, float4 &pa, float4 &pc) {
        pa = ld_x4(xb + b * 256);
        pc = ld_x4(xb + b * 256 + 16);
    };
    int64_t tile = blockIdx.x;
    int si = q6_seg_of(a, tile);
    int64_t r0 = (tile - a.tile0[si]) * kTileRows;
    Q6Win win = q6_win<TL>(a.seg[si], r0, lane);
    issue_first(win, true);  // (weights before the dependent-launch wait, as q6k_i8_tile)
    pdl_wait();
    float4 xa, xc;
    if (w < nsb) load_x(w, xa, xc);
    for (int par = 0; tile < ntiles; par ^= 1) {
        const Seg &s = a.seg[si];
        const bool al = TL || ((s.row_bytes & 3) == 0 && ((win.ag + 2u * (uint32_t)w) & 3u) == 0);
        float acc[1][2] = {{0.0f, 0.0f}};
        int64_t sb = w;
        // One step: weights from stage q, x in (cxa, cxc), the next super-block's x into (nxa, nxc).
        auto run_step = [&](int q, float4 &cxa, float4 &cxc, float4 &nxa, float4 &nxc) {
            if (sb + kWarps < nsb) load_x(sb + kWarps, nxa, nxc);
            __syncwarp();
            stage_i8<1>(st, 0, cxa, cxc, lane);
            cp_async_wait<ST - 1>();
            __syncwarp();
            const uint32_t *wb = reinterpret_cast<const uint32_t *>(sm.wbuf[w][q]);
            int og, o8;
            q6_offsets<TL>(win, sb, g, og, o8);
            if (al) q6_superblock_i8<1, true>(wb, og, o8, st, lane, acc);
            else q6_superblock_i8<1, false>(wb, og, o8, st, lane, acc);
            __syncwarp();  // every lane has read buffer q (and the x stage) before they are refilled
            const int64_t sn = sb + ST * kWarps;
            if (sn < nsb) q6_issue_sb<TL>(sm.wbuf[w][q], win, sn, nsb, lane);
            cp_async_commit();
        };
        // In tiles two steps at a time (common.cuh ping_pong: no copy of the next x into place,
        // a constant stage; the lm head 81.2 -> 78.2 us). The one-tile GEMV above measured
        // slower so (its down projection 10.25 -> 10.52 us) and keeps its loop (bench/NOTES.md
        // 7, session 28). The next tile's first x: below.
        if constexpr (ST == 2 && TL) {
            float4 axa, axc;
            ping_pong(sb, nsb, (int64_t)kWarps, [&](int set) {
                if (set == 0) run_step(0, xa, xc, axa, axc);
                else run_step(1, axa, axc, xa, xc);
            });
        } else {
            for (int q = 0; sb < nsb; sb += kWarps, q = q + 1 == ST ? 0 : q + 1) {
                float4 nxa, nxc;
                run_step(q, xa, xc, nxa, nxc);
                if (sb + kWarps < nsb) { xa = nxa; xc = nxc; }
            }
        }
        cp_async_wait<0>();
        __syncwarp();
        // The next tile's first super-blocks and x, before this tile's reduction.
        const int64_t next = tile + gridDim.x;
        const int64_t cr0 = r0;
        if (next < ntiles) {
            si = q6_seg_of(a, next);
            r0 = (next - a.tile0[si]) * kTileRows;
            win = q6_win<TL>(a.seg[si], r0, lane);
        }
        issue_first(win, next < ntiles);
        // The 4 lanes of a row, then warps 0..3 in order (reduce_partials at S = 1: one barrier).
        float v[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            float x = acc[0][k];
            x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 1));
            v[k] = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 2));
        }
        reduce_partials<2>(v, sm.red[par], 1);
        if (w == 0) q6_store<1>(a, s, cr0, 0, 1, lane, v);
        if (next < ntiles && w < nsb) load_x(w, xa, xc);
        tile = next;
    }
    cp_async_wait<0>();
}

}  // namespace q6k
}  // namespace loom_cuda
