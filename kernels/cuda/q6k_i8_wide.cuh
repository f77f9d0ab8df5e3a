// q6k_i8_wide.cuh: the wide prefill GEMM of the INT8 Q6_K body (LOOM_GEMM_WIDE=1 with
// LOOM_GEMV_MMA_Q6K_V=2; gemv_mma_q6k.cu launches it for n >= kWideMinN tokens). Same
// integers and folds as q6k_i8_body.cuh's GEMM, so every token's outputs are its GEMV's bits;
// what changes is who does which part of the work.
//
// Geometry. A block = 4 warps on 4 adjacent 16-row tiles (64 rows; warp w owns tile 4 z + w,
// z = blockIdx.z) and NT = 16 or 32 tokens (blockIdx.y); no cluster. All four warps walk the
// same super-blocks in the same order, so the x of one super-block is converted to limbs once
// a block (each warp stages NT / 4 of the tokens with q6k_i8_body.cuh's stage_i8, the same
// digits and warp scale) into a shared stage that serves the 64 rows -- or, with the pre-pass
// (PRE, LOOM_GEMM_WIDE_Q6K 5-7, the default 7), copied by cp.async from the limbs that
// q6_limbs_prepass staged once for the whole matmul. A warp decodes its tile's A (q - 32 as s8)
// and the sub-block scales once a super-block and runs the tokens over them, two a mma. Its
// weight window for the next super-block is requested (cp.async, one stage) as soon as the A
// registers are built.
//
// Bit identity with the GEMV (and the 8-token GEMM). The GEMV of a tile adds up 4 S partials
// (cluster rank r, warp w: super-blocks p = 4 r + w, p + 4 S, ... with S = mma_pick_split of the
// shape), each an FP32 fold chain per lane, then the 4 lanes of a row (xor 1, xor 2), then
// reduce_partials: rank sum = ((P(r,0) + P(r,1)) + P(r,2)) + P(r,3), total = rank 0's sum, then
// + rank 1's, ... A wide warp walks the partials one after the other in exactly that order
// (p = 0 .. 4 S - 1, each partial's super-blocks ascending), ends each with the same lane sums,
// and combines the results in reduce_partials' order (partials with no super-block add the
// same zeros). Integer sums are exact, so the order of the IMAD inside a super-block is free.
//
// The token-pair body (session 9, pq6). The product is m16n8k16 s8.s8 (one sub-block a mma)
// whose 8 B columns are TWO tokens x 4 limbs (column g: token 2 pr + (g >> 2), limb g & 3):
// every B byte is data, and the lane's word is read straight from the GEMM's k32 stage (I8Stage:
// sub-block u's word of limb j sits at k32 lane 16 u + 4 j + t, so k16 lane L reads slot
// (16 u + (L & 15)) ^ 4 h of its own token): 2 LDS.128, 8 IMMA k16, 32 IMAD a token and
// super-block, no select. The D lane's columns 2t, 2t+1 are token 2 pr + (t >> 1), limbs
// 2 (t & 1), +1, and a mma covers ONE sub-block u, so the lane keeps u = 0 and u = 1 apart: its
// I[u] over the 8 sub-blocks (h, i, u) is exactly the GEMV lane 2 u + (t & 1)'s I, folded the
// same way into that lane's accumulator (acc[pr][u][row]). The GEMV's end of a partial, a + xor 1
// then + xor 2, is (acc(u0,l0) + acc(u0,l1)) + (acc(u1,l0) + acc(u1,l1)) in every lane (IEEE
// addition commutes): here one xor-1 shuffle per u and an add in the lane, then one xor-3 swap
// puts token 4 jj + t in lane t (q6_store's layout). Registers: A 32 + scales 32 (both halves
// of k, all 16 sub-blocks a row) + 4 accumulators a pair.
// NBUF = 2: the x stage double buffered, the next super-block's x loaded into registers while the
// tokens run (16 tokens: 46.3 KB). NBUF = 1 (32 tokens: 32 KB of stage + 14.3 KB of windows
// under 48 KB): one stage, x loaded when staged, two __syncthreads a super-block (the other
// block of the SM covers the staging; pg4 measured two stages slower at 66 KB).
// (Session 8's kernel, one k32 mma a token with a zero half in every B and 16 SEL a token and
// super-block, measured slower than this body in every row of relays pq6-R1..R3 and was removed
// in session 10 with its switch value LOOM_GEMM_WIDE_Q6K=1; bench/NOTES.md 2.1.)
#pragma once

#include "kernels/cuda/q6k_i8_body.cuh"

namespace loom_cuda {
namespace q6k {

// LOOM_GEMM_WIDE=1: the wide GEMM from this many tokens on (gemv_mma_q6k.cu), below it the
// 8-token GEMM. Relay pg6-R1 (H200, session 8's wide kernel): wide / 8-token at N = 32 1.70x
// slower (4B down + add 183 vs 108 us: 80 blocks for 132 SMs), at N = 64 0.89x (188 vs 210),
// N = 128 0.83x, N = 512 0.58x.
constexpr int kWideMinN = 64;

template <int NT, int NBUF, bool NORM>
struct Q6WideSmem {
    __align__(16) uint8_t wbuf[kWarps][kTileBytes];
    I8Stage<NT> stage[NBUF];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
};

// d = A (s8, 16x16: rows g, g+8) times B (s8, 16x8), from zero.
__device__ __forceinline__ void mma_s8s8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%7,%7,%7,%7};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// The A of one super-block of rows g, g+8 (row windows at og, o8 of the warp buffer wb): q - 32
// as s8, q6_superblock_i8's GEMM build (SA: the same instructions and values), in ag[u][h][i]
// (row g; a8: row g+8) for mma (h, i) of sub-blocks u, the scales of all 16 sub-blocks a row
// (sg[u][h][i]: byte 2 (i & 1) + u of scale word 2 h + (i >> 1), sign-extended), as each lane's
// D rows need them, and the rows' d.
struct Q6WideA {
    uint32_t ag[2][2][4], a8[2][2][4];
    int sg[2][2][4], s8[2][2][4];
    float dg, d8;
};

__device__ __forceinline__ void q6_wide_a(const uint32_t *wb, int og, int o8, int lane,
                                          Q6WideA &A) {
    const int t = lane & 3;
    const uint32_t *pg = wb + ((og + 4 * t) >> 2), *p8 = wb + ((o8 + 4 * t) >> 2);
    const uint32_t fg = (uint32_t)(og & 2) * 8, f8 = (uint32_t)(o8 & 2) * 8;
    const uint32_t *rg = wb + (og >> 2), *r8 = wb + (o8 >> 2);
    uint32_t scg[4], sc8[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        scg[k] = __funnelshift_r(rg[48 + k], rg[49 + k], fg);
        sc8[k] = __funnelshift_r(r8[48 + k], r8[49 + k], f8);
    }
    A.dg = f16_bits_to_f32((uint16_t)(rg[52] >> fg));
    A.d8 = f16_bits_to_f32((uint16_t)(r8[52] >> f8));
    auto hs = [](uint32_t x) { return (x + 0x60606060u) ^ 0x80808080u; };
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t qlg[2][2], ql8[2][2], qhg[2], qh8[2];
        q6_words(pg, p8, fg, f8, h, qlg, ql8, qhg, qh8);
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const uint32_t Mg = qhg[u] & 0x33333333u, Ng = qhg[u] & 0xCCCCCCCCu;
            const uint32_t M8 = qh8[u] & 0x33333333u, N8 = qh8[u] & 0xCCCCCCCCu;
            A.ag[u][h][0] = sel_nib(qlg[0][u], hs(Mg << 4)); A.a8[u][h][0] = sel_nib(ql8[0][u], hs(M8 << 4));
            A.ag[u][h][1] = sel_nib(qlg[1][u], hs(Ng << 2)); A.a8[u][h][1] = sel_nib(ql8[1][u], hs(N8 << 2));
            A.ag[u][h][2] = sel_nib(qlg[0][u] >> 4, hs(Mg)); A.a8[u][h][2] = sel_nib(ql8[0][u] >> 4, hs(M8));
            A.ag[u][h][3] = sel_nib(qlg[1][u] >> 4, hs(Ng >> 2)); A.a8[u][h][3] = sel_nib(ql8[1][u] >> 4, hs(N8 >> 2));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t b = (uint32_t)(2 * (i & 1) + u), sel = b | (b | 8u) * 0x1110u;
                A.sg[u][h][i] = sext_byte(scg[2 * h + (i >> 1)], sel);
                A.s8[u][h][i] = sext_byte(sc8[2 * h + (i >> 1)], sel);
            }
        }
    }
}

// Token pair pr's share of one super-block: acc[u][0] (row g), acc[u][1] (row g+8) of token
// 2 pr + (t >> 1) += the fold of the GEMV lane 2 u + (t & 1) (limbs 2 (t & 1), +1 of sub-blocks u).
template <int NT>
__device__ __forceinline__ void q6_wide_pair(const Q6WideA &A, const I8Stage<NT> &st, int pr,
                                             int lane, float (&acc)[2][2]) {
    const int t = lane & 3;
    const int tb = 2 * pr + (lane >> 4);  // the token of this lane's B column (g >> 2)
    const int td = 2 * pr + (t >> 1);     // the token of its D columns
    const float sw = __fmul_rn(st.sinv[td], (t & 1) ? 1.0f : 65536.0f);
    const float swg = __fmul_rn(A.dg, sw), sw8 = __fmul_rn(A.d8, sw);
#pragma unroll
    for (int u = 0; u < 2; u++) {
        int I[4] = {0, 0, 0, 0};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 bw = st.b[tb][h][(16 * u + (lane & 15)) ^ (4 * h)];
            const uint32_t bv[4] = {bw.x, bw.y, bw.z, bw.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int d[4];
                mma_s8s8_k16(d, A.ag[u][h][i], A.a8[u][h][i], bv[i]);
                I[0] += A.sg[u][h][i] * d[0];
                I[1] += A.sg[u][h][i] * d[1];
                I[2] += A.s8[u][h][i] * d[2];
                I[3] += A.s8[u][h][i] * d[3];
            }
        }
        const float Fg = __fmaf_rn(256.0f, __int2float_rn(I[0]), __int2float_rn(I[1]));
        const float F8 = __fmaf_rn(256.0f, __int2float_rn(I[2]), __int2float_rn(I[3]));
        acc[u][0] = __fmaf_rn(swg, Fg, acc[u][0]);
        acc[u][1] = __fmaf_rn(sw8, F8, acc[u][1]);
    }
}

// Ends partial p (of 4 S) of every token: the GEMV's lane sums of a row (above), lane t keeping
// tokens 4 jj + t (the reduce_partials layout), then combined in reduce_partials' order:
// rs = P(r, 0) + P(r, 1) + ..., tot = rs(0) + rs(1) + ... acc is zeroed for the next partial.
template <int NT>
__device__ __forceinline__ void q6_wide_partial(float (&acc)[NT / 2][2][2], int p, int lane,
                                                float (&rs)[NT / 2], float (&tot)[NT / 2]) {
    const int t = lane & 3;
#pragma unroll
    for (int jj = 0; jj < NT / 4; jj++)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            float r[2];
#pragma unroll
            for (int q = 0; q < 2; q++) {  // pairs 2 jj (tokens 4 jj, +1), 2 jj + 1 (+2, +3)
                float s[2];
#pragma unroll
                for (int u = 0; u < 2; u++) {
                    const float a = acc[2 * jj + q][u][k];
                    s[u] = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 1));
                }
                r[q] = __fadd_rn(s[0], s[1]);  // lanes 0, 1: token 4 jj + 2 q; 2, 3: + 1
            }
            // lane t takes token 4 jj + t: lanes 1 and 2 swap (r[0] of lane 2, r[1] of lane 1)
            const float got = __shfl_xor_sync(0xffffffffu, t == 2 ? r[0] : r[1], 3);
            const float x = t == 0 ? r[0] : t == 3 ? r[1] : got;
            const int i = jj * 2 + k;
            rs[i] = (p & 3) == 0 ? x : __fadd_rn(rs[i], x);
            if ((p & 3) == 3) tot[i] = p == 3 ? rs[i] : __fadd_rn(tot[i], rs[i]);
        }
#pragma unroll
    for (int j = 0; j < NT / 2; j++) acc[j][0][0] = acc[j][0][1] = acc[j][1][0] = acc[j][1][1] = 0.0f;
}

// The x limbs of a whole matmul, staged once (PRE: q6_limbs_prepass below): super-block sb's
// stage of token j is the 1 KB at X + (sb * npad + j) * 64 (I8Stage's b[j] layout), its 1 / s at
// SI[sb * npad + j]; tokens n .. npad - 1 (npad = n rounded up to 32) hold zeros.
struct Q6Limbs {
    const uint4 *X;
    const float *SI;
    int npad;
};

// Bytes of the Q6Limbs of n tokens of K values (the scratch the PRE launches need).
inline size_t q6_limbs_bytes(int64_t n, int64_t K) {
    return (size_t)(K / 256) * (size_t)limbs_npad(n) * (1024 + sizeof(float));
}

// The pre-pass: block x = token, its 4 warps stage super-blocks w, w + 4, ... with stage_i8 (the
// same limbs and warp scale as every Q6_K INT8 GEMM; NORM: the token's RMS scale from
// block_rms_scales first, then rms_apply4 per value, as the GEMMs stage normed x) into a shared
// slot, then copy it to L (16-byte stores). Tokens past n: zeros.
template <bool NORM>
__device__ __forceinline__ void q6_limbs_prepass(const float *x, int64_t K, int n,
                                                 const PreNorm &norm, uint4 *X, float *SI,
                                                 int npad) {
    __shared__ I8Stage<kWarps> st;
    __shared__ double npart[NORM ? kWarps : 1];
    __shared__ float nscale[1];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, tok = (int)blockIdx.x;
    const int64_t nsb = K / 256;
    pdl_wait();
    if (tok >= n) {
        for (int64_t sb = w; sb < nsb; sb += kWarps) {
            uint4 *d = X + (sb * npad + tok) * 64;
            d[lane] = d[lane + 32] = make_uint4(0u, 0u, 0u, 0u);
            if (lane == 0) SI[sb * npad + tok] = 0.0f;
        }
        return;
    }
    const float *xr = x + (int64_t)tok * K;
    if (NORM) block_rms_scales<1>(xr, K, 1, K, norm, npart, nscale);
    const int xoff = 32 * (lane >> 2) + 4 * (lane & 3);
    const float *nwb = NORM && norm.w ? norm.w + xoff : nullptr;
    for (int64_t sb = w; sb < nsb; sb += kWarps) {
        float4 nwa, nwc;
        q6_norm_w(nwb, sb, nwa, nwc);
        stage_i8_x<kWarps, NORM>(st, w, ld_x4(xr + sb * 256 + xoff), ld_x4(xr + sb * 256 + xoff + 16),
                                 NORM ? nscale[0] : 1.0f, nwa, nwc, lane);
        __syncwarp();
        uint4 *d = X + (sb * npad + tok) * 64;
        const uint4 *s = &st.b[w][0][0];
        d[lane] = s[lane];
        d[lane + 32] = s[lane + 32];
        if (lane == 0) SI[sb * npad + tok] = st.sinv[w];
        __syncwarp();  // the slot is read before the next super-block overwrites it
    }
}

// The block's work: tiles 4 quad .. 4 quad + 3 (warp w: tile 4 quad + w, if it exists) for
// tokens tok0 .. tok0 + NT - 1 (of a.n), S the GEMV's split of the shape, NBUF x stages (see
// above); q6k_i8_tile's contract otherwise (epilogues, the folded norm, the weight windows and
// their tail). PRE: the stages are cp.async copies of the pre-pass's limbs (L) instead of staged
// from x (NORM is then the pre-pass's business: call with NORM = false). TL: the weights in
// LOOM_WEIGHT_Q6K_TILES (q6_win).
template <int NT, int NBUF, bool NORM, bool PRE = false, bool TL = false>
__device__ __forceinline__ void q6k_i8_wide(const Q6Args &a, Q6WideSmem<NT, NBUF, NORM> &sm,
                                            int64_t quad, int S, int tok0,
                                            const Q6Limbs &L = Q6Limbs{}) {
    static_assert(NT % (2 * kWarps) == 0, "pairs; each warp stages NT / 4 tokens");
    static_assert(!(PRE && NORM), "the pre-pass applies the norm");
    constexpr int TW = NT / kWarps;      // tokens a warp stages
    constexpr bool kPrefetch = NBUF == 2 && !PRE;  // the next x in registers while the tokens run
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int64_t tile = quad * kWarps + w;
    const bool valid = tile < a.tile0[a.nseg];
    const int si = q6_seg_of(a, tile);
    const Seg &s = a.seg[si];
    const int64_t r0 = valid ? (tile - a.tile0[si]) * kTileRows : 0;
    const Q6Win win = q6_win<TL>(s, r0, lane);
    const int64_t nsb = a.K / 256;
    const int P = kWarps * S;
    uint8_t *wbuf = sm.wbuf[w];
    auto issue = [&](int64_t sq) {
        if (valid) q6_issue_sb<TL>(wbuf, win, sq, nsb, lane);
        cp_async_commit();
    };
    // PRE: the block's NT tokens of super-block b into stage st (NT / 2 chunks of 16 bytes a
    // thread; 1 / s in the first NT / 4 threads' chunks), one commit group with the window.
    auto copy_stage = [&](int64_t b, I8Stage<NT> &st) {
        if (PRE) {
            const uint4 *src = L.X + ((int64_t)b * L.npad + tok0) * 64;
            uint4 *dst = &st.b[0][0][0];
#pragma unroll
            for (int i = 0; i < NT / 2; i++) cp_async16(dst + threadIdx.x + kThreads * i, src + threadIdx.x + kThreads * i, true);
            if (threadIdx.x < NT / 4)
                cp_async16(&st.sinv[4 * threadIdx.x], L.SI + (int64_t)b * L.npad + tok0 + 4 * threadIdx.x, true);
        }
    };
    issue(0);
    // Tokens past ntok (a ragged last group; a pair may hold one): zero limbs and 1 / s, set
    // once in every stage (the staging writes only tokens below ntok; PRE copies the zeros).
    for (int b = 0; b < (PRE ? 0 : NBUF); b++)
        for (int j = ntok; j < NT; j++) {
            for (int i = threadIdx.x; i < 2 * 32; i += kThreads)
                (&sm.stage[b].b[j][0][0])[i] = make_uint4(0u, 0u, 0u, 0u);
            if (threadIdx.x == 0) sm.stage[b].sinv[j] = 0.0f;
        }
    pdl_wait();
    const int xoff = 32 * (lane >> 2) + 4 * (lane & 3);
    const int kx = (int)a.K;
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    if (NORM) block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart, sm.nscale);
    constexpr int XR = kPrefetch ? TW : 1;
    float4 xa[XR], xc[XR];
    auto load_x = [&](int64_t b) {
#pragma unroll
        for (int i = 0; i < TW; i++) {
            const int j = w + kWarps * i;
            if (j < ntok) {
                const float *p = xb + b * 256 + j * kx;
                xa[i] = ld_x4(p);
                xc[i] = ld_x4(p + 16);
            }
        }
    };
    auto stage_x = [&](int64_t b, I8Stage<NT> &st) {
        // (q6_norm_w's lines in place: through the helper the 32-token normed kernel, at 255
        // registers, spilled 4-8 bytes, sm_90a and sm_87)
        float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
        if (NORM && nwb) {
            nwa = ld_x4(nwb + b * 256);
            nwc = ld_x4(nwb + b * 256 + 16);
        }
#pragma unroll
        for (int i = 0; i < TW; i++) {
            const int j = w + kWarps * i;
            if (j < ntok) {
                float4 va, vc;
                if (kPrefetch) {
                    va = xa[i];
                    vc = xc[i];
                } else {
                    const float *p = xb + b * 256 + j * kx;
                    va = ld_x4(p);
                    vc = ld_x4(p + 16);
                }
                stage_i8_x<NT, NORM>(st, j, va, vc, NORM ? sm.nscale[j] : 1.0f, nwa, nwc, lane);
            }
        }
    };
    if (PRE) {
        copy_stage(0, sm.stage[0]);
        cp_async_commit();
    } else {
        if (kPrefetch) load_x(0);
        stage_x(0, sm.stage[0]);
        __syncthreads();
    }

    float acc[NT / 2][2][2], rs[NT / 2], tot[NT / 2];
#pragma unroll
    for (int j = 0; j < NT / 2; j++) acc[j][0][0] = acc[j][0][1] = acc[j][1][0] = acc[j][1][1] = 0.0f;
#pragma unroll
    for (int i = 0; i < NT / 2; i++) rs[i] = tot[i] = 0.0f;
    int p = 0, c = 0;
    int64_t sb = 0;
    for (;;) {
        int64_t sn = sb + P;
        int pn = p;
        if (sn >= nsb) {
            pn = p + 1;
            while (pn < P && pn >= nsb) pn++;
            sn = pn < P ? pn : -1;
        }
        cp_async_wait<0>();
        if (PRE) __syncthreads();  // every thread's stage chunks (and windows) have landed
        else __syncwarp();
        Q6WideA A;
        if (valid) {
            const uint32_t *wb = reinterpret_cast<const uint32_t *>(wbuf);
            int og, o8;
            q6_offsets<TL>(win, sb, g, og, o8);
            q6_wide_a(wb, og, o8, lane, A);
        }
        __syncwarp();  // every lane has read the window before it is refilled
        if (sn >= 0) {
            if (valid) q6_issue_sb<TL>(wbuf, win, sn, nsb, lane);
            if (PRE && NBUF == 2) copy_stage(sn, sm.stage[c ^ 1]);  // read at the last barrier
            cp_async_commit();
            if (kPrefetch) load_x(sn);
        }
        if (valid) {
            const I8Stage<NT> &st = sm.stage[c];
            if (ntok == NT) {  // a full group: one basic block, the pairs' chains interleave
#pragma unroll
                for (int j = 0; j < NT / 2; j++) q6_wide_pair<NT>(A, st, j, lane, acc[j]);
            } else {
#pragma unroll
                for (int j = 0; j < NT / 2; j++)
                    if (2 * j < ntok) q6_wide_pair<NT>(A, st, j, lane, acc[j]);
            }
        }
        if (pn != p) {
            q6_wide_partial<NT>(acc, p, lane, rs, tot);
            for (int e = p + 1; e < pn || (sn < 0 && e < P); e++)
                q6_wide_partial<NT>(acc, e, lane, rs, tot);
        }
        if (sn < 0) break;
        if (PRE) {
            if (NBUF == 1) {
                __syncthreads();  // every warp has read the stage
                copy_stage(sn, sm.stage[0]);
                cp_async_commit();
            } else {
                c ^= 1;
            }
        } else if (NBUF == 2) {
            stage_x(sn, sm.stage[c ^ 1]);
            __syncthreads();
            c ^= 1;
        } else {
            __syncthreads();  // every warp has read the stage
            stage_x(sn, sm.stage[0]);
            __syncthreads();
        }
        sb = sn;
        p = pn;
    }
    cp_async_wait<0>();
    if (!valid) return;
    q6_store<NT / 4>(a, s, r0, tok0, ntok, lane, tot);
}

}  // namespace q6k
}  // namespace loom_cuda
