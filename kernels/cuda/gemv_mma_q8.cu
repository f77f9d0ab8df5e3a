// gemv_mma_q8.cu: the matmul family for Q8_0 weights on the INT8 tensor cores (session 35): GEMV
// and GEMM (any N) with the plain (+bias, 1..3 segments), add and SwiGLU-pair epilogues, and the
// folded RMSNorm. Default path; LOOM_GEMV_MMA_Q8=0 (or LOOM_GEMV_MMA=0) keeps Q8_0 on the
// warp-per-row kernels of gemv.cu / gemm.cu, which are also the fallback when a launch fails and
// the path of weights this file does not take (mma_q8_seg_ok: rows of K % 256 != 0, unaligned).
//
// The product. One mma.sync m16n8k32 s8.s8 -> s32 is one Q8_0 block (32 int8 quants, one f16 d)
// of 16 rows: A = the quants as they are, B = x as 4 exact int8 limbs, staged as
// q4k_i8_body.cuh stages them (stage_q4i8: the same k permutation, lane t's k-slots 4t.. and
// 16 + 4t.. holding the block's values 8t..8t+3 and 8t+4..8t+7, so its A registers of rows g
// and g + 8 are the row's quant bytes 8t..8t+7; two tokens an n8 tile, token 2p + e in columns
// 4e + j = limb j). Lane t's columns (2t, 2t+1) are limbs 2 (t & 1), +1 of token 2p + (t >> 1):
// C = 256 D_a + D_b is exact in s32 (|D_a| <= 32 * 128 * 64 = 2^18), and per block and row, in
// FP32, P += d * float(C); once a super-block (8 blocks, x's scale s), acc += P * (w_t / s) with
// w_t = 2^16 (t even) or 1. After the K loop lanes t and t ^ 1 are summed (q4_i8_lane_sum), then
// warps and cluster ranks in reduce_partials' fixed order. A GEMM token's integers and float
// steps are the GEMV's (its columns, lanes and order), so a GEMM token == the GEMV's bits.
//
// The wide GEMM (from kQ8WideMin tokens; q8_wide below): a block = 4 tiles x 16 tokens, x staged
// once a super-block for its 4 tiles, each warp walking the GEMV's split-K partials in
// reduce_partials' order: the same bits a token. x's limbs come from one pre-pass a matmul
// (session 36; LOOM_GEMM_WIDE_Q8, below): at N = 512 the 4B pair (2 x 9728 x 2560) takes 715 us,
// one of its matrices in 4-token groups 1,351.
//
// The weights. A Q8_0 block is 34 bytes, so a block's quants are only 2-byte aligned; a row's
// super-block (8 blocks, 272 bytes = 17 chunks of 16) is 16-byte aligned where K % 256 == 0 and
// the weights are. Each warp copies its 16 rows' super-block (4,352 bytes) into shared memory by
// cp.async (9 chunks a lane, lane + 32 i; rows past the segment repeat its last row), requested
// before the PDL wait (weights are constant), and a lane reads its words back: for even blocks
// (quants at 2 mod 4) three words and two byte permutes, for odd ones two aligned words; each
// block's d is one more (broadcast) word. GEMV: 2 stages a warp (the next super-block in flight
// during this one's math); GEMM: 1 (4 tokens' limbs take the room), the words read into
// registers before the stage is refilled.
//
// Launch geometry (as gemv_mma.cu): 128-thread blocks; a block owns a 16-row tile of one segment
// and 1 token (GEMV) or 4 (GEMM groups, the last possibly ragged); the K share's super-blocks go
// to the warps round robin; on sm_90 a cluster of S blocks (mma_pick_split, from the shape only)
// splits K. The pair: warps 0, 1 take the gate's rows of the tile, warps 2, 3 the up's, each
// over half the K share (the partials of the other matrix are zeros in reduce_partials' sum),
// and the store writes silu(gate) * up, or without epilogue (two segments of equal rows) both
// outputs: the same dots either way. Fixed order everywhere: deterministic.
//
// Folded RMSNorm (NORM): as gemv_mma_q6k.cu, the block's token scales (norm.cuh
// block_rms_scales) after the PDL wait, each staged value (x * scale) * w[k]: bit for bit
// loom_cuda_rms_norm followed by the plain kernel.
//
// Numeric contract: |y - y_cpu| <= 1e-5 * sum_k |W x| (+1e-30) against the CPU twin, as the
// other INT8 bodies (the products and integer sums exact, x keeps 24 bits of its super-block's
// max, float(C) rounds at 2^-24); not bit-identical to the warp-per-row kernels.
//
// Cost counted before measuring (per warp and 16-row super-block of 4,352 bytes, GEMV): 9
// LDGSTS, 56 LDS.32 (2 rows x (8 blocks' 2-3 quant words + d)), 16 PRMT, 16 d conversions, 8
// IMMA, 4 LDS.128 (B), fold 48 (per block and row LEA, I2F, FFMA), x staging ~60: ~230, i.e.
// ~0.05 a byte against the Q4_K body's ~0.14 (320 a 2,304-byte step): the stream, not the
// issue, should bound it. Measured (H200, bench/NOTES.md 2.7): the 8B GEMV at 84% of copy, the
// 4B pair at 76%; a 4B Q8_0 model 3.76 -> 2.20-2.24 ms/token, prefill 400 -> ~5,000-5,300 t/s,
// ~8,900 t/s with the limb pre-pass (session 36, bench/NOTES.md 2.8).
#include "kernels/cuda/q4k_i8_body.cuh"

namespace loom_cuda {

// LOOM_GEMM_WIDE_Q8 (runtime.cu): the wide GEMM's x staging, 2 (the default) = the limb
// pre-pass, 1 = in the block (the form without scratch, forced).
int gemm_wide_q8_form();

namespace {

using q6k::kTileRows;
using q6k::Q6Args;

constexpr int kQ8Sb = 8 * kQ80Bytes;                       // 272: a row's super-block
constexpr int kQ8TileBytes = kTileRows * kQ8Sb;           // 4,352: a warp's stage
constexpr int kQ8Chunks = kQ8TileBytes / 16;              // 272
constexpr int kQ8LaneChunks = (kQ8Chunks + 31) / 32;      // 9
constexpr int kQ8RowWords = kQ8Sb / 4;                    // 68
constexpr int kQ8Tok = 4;                                 // GEMM tokens a block

// A block's shared memory: ST weight stages a warp, the warps' limb stages, the norm's scratch,
// the GEMV's split sums (reduce_partials' xch; the reduction's partials reuse wbuf).
template <int NT, int NMAT, bool NORM>
struct Q8Smem {
    static constexpr int kSt = NT == 1 ? 2 : 1;
    __align__(16) uint8_t wbuf[kWarps][kSt][kQ8TileBytes];
    Q4I8Stage<NT> stage[kWarps];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
    float xch[xch_floats(NT == 1 && NMAT == 1)];
};

// One super-block of a warp's rows g, g + 8 as mma operands: A registers a[m][0..3] of block m
// (rows g, g+8: quant bytes 8t..8t+3 in a0 / a1, 8t+4..8t+7 in a2 / a3) and the blocks' d.
struct Q8Words {
    uint32_t a[8][4];
    float dg[8], d8[8];
};

// Reads lane (g, t)'s words of a staged super-block (wb: the warp's stage, rows 272 bytes apart).
__device__ __forceinline__ void q8_words(const uint32_t *wb, int lane, Q8Words &q) {
    const int g = lane >> 2, t = lane & 3;
    const uint32_t *rg = wb + kQ8RowWords * g, *r8 = rg + kQ8RowWords * 8;
    const uint32_t *pg = rg + 2 * t, *p8 = r8 + 2 * t;
#pragma unroll
    for (int m = 0; m < 8; m++) {
        const int o = (34 * m + 2) >> 2;  // the word holding the block's quant byte 0 (+ 2t)
        if (m % 2 == 0) {  // quants at 2 mod 4: bytes 2, 3 of one word and 0, 1 of the next
            const uint32_t g0 = pg[o], g1 = pg[o + 1], g2 = pg[o + 2];
            const uint32_t e0 = p8[o], e1 = p8[o + 1], e2 = p8[o + 2];
            q.a[m][0] = __byte_perm(g0, g1, 0x5432);
            q.a[m][2] = __byte_perm(g1, g2, 0x5432);
            q.a[m][1] = __byte_perm(e0, e1, 0x5432);
            q.a[m][3] = __byte_perm(e1, e2, 0x5432);
            q.dg[m] = f16_bits_to_f32((uint16_t)(rg[34 * m / 4] & 0xFFFFu));
            q.d8[m] = f16_bits_to_f32((uint16_t)(r8[34 * m / 4] & 0xFFFFu));
        } else {  // aligned quants; d in the high half of the word before
            q.a[m][0] = pg[o];
            q.a[m][2] = pg[o + 1];
            q.a[m][1] = p8[o];
            q.a[m][3] = p8[o + 1];
            q.dg[m] = f16_bits_to_f32((uint16_t)(rg[(34 * m - 2) / 4] >> 16));
            q.d8[m] = f16_bits_to_f32((uint16_t)(r8[(34 * m - 2) / 4] >> 16));
        }
    }
}

// acc[p] (rows g, g+8) += the super-block's share of token 2p + (t >> 1) (limbs 2 (t & 1), +1).
template <int NT>
__device__ __forceinline__ void q8_superblock(const Q8Words &q, const Q4I8Stage<NT> &st, int lane,
                                              float (&acc)[Q4I8Stage<NT>::kTiles][2]) {
    constexpr int T = Q4I8Stage<NT>::kTiles;
    const int t = lane & 3;
    const float wt = (t & 1) ? 1.0f : 65536.0f;
#pragma unroll
    for (int p = 0; p < T; p++) {
        float P[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t b0[4], b1[4];
            q4_i8_b<NT>(st, p, h, lane, b0, b1);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int m = 4 * h + i;
                int d[4];
                q6k::mma_s8s8_k32(d, q.a[m][0], q.a[m][1], q.a[m][2], q.a[m][3], b0[i], b1[i]);
                P[0] = __fmaf_rn(q.dg[m], __int2float_rn(d[0] * 256 + d[1]), P[0]);
                P[1] = __fmaf_rn(q.d8[m], __int2float_rn(d[2] * 256 + d[3]), P[1]);
            }
        }
        const float sw = __fmul_rn(st.sinv[2 * p + (t >> 1)], wt);
        acc[p][0] = __fmaf_rn(P[0], sw, acc[p][0]);
        acc[p][1] = __fmaf_rn(P[1], sw, acc[p][1]);
    }
}

// A warp's copy of its 16 rows' super-blocks of segment s from row r0 into shared memory:
// chunk c = lane + 32 i of a stage is row c / 17 (rows past the segment repeat its last row),
// 16-byte column c % 17; off[i] its offset from the tile's first row (< 16 row_bytes <= 2^30).
struct Q8Copy {
    const uint8_t *base;
    int off[kQ8LaneChunks];
};
__device__ __forceinline__ Q8Copy q8_copy(const Seg &s, int64_t r0, int lane) {
    Q8Copy c;
    c.base = s.w + r0 * s.row_bytes;
#pragma unroll
    for (int i = 0; i < kQ8LaneChunks; i++) {
        const int ch = lane + 32 * i, r = ch / 17;
        const int64_t rr = r0 + r < s.rows ? r : s.rows - 1 - r0;
        c.off[i] = (int)rr * (int)s.row_bytes + 16 * (ch % 17);
    }
    return c;
}
// Requests super-block sb (none past nsb) into the stage buf, and commits a group either way.
__device__ __forceinline__ void q8_issue(const Q8Copy &c, uint8_t *buf, int64_t sb, int64_t nsb,
                                         int lane) {
    if (sb < nsb) {
        const uint8_t *src = c.base + sb * kQ8Sb;
#pragma unroll
        for (int i = 0; i < kQ8LaneChunks; i++)
            if (lane + 32 * i < kQ8Chunks)
                cp_async16(buf + 16 * (lane + 32 * i), src + c.off[i], true);
    }
    cp_async_commit();
}

// Stages token tok's values xa, xc of super-block sb (stage_q4i8), RMS-normed first when NORM:
// (x * sc) * w with the norm weight at nwb + the same positions (nwb NULL: 1.0).
template <int NT, bool NORM>
__device__ __forceinline__ void q8_stage(Q4I8Stage<NT> &st, int tok, float4 xa, float4 xc,
                                         float sc, const float *nwb, int64_t sb, int lane) {
    if constexpr (NORM) {
        float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
        if (nwb) {
            nwa = ld_x4(nwb + sb * 256);
            nwc = ld_x4(nwb + sb * 256 + kQ4I8Xc);
        }
        stage_q4i8<NT>(st, tok, rms_apply4(xa, sc, nwa), rms_apply4(xc, sc, nwc), lane);
    } else {
        stage_q4i8<NT>(st, tok, xa, xc, lane);
    }
}

// A pair's outputs of one tile from its dots g(e), u(e) (e = j * 2 + k, for_each_output's
// layout): silu(g) * u into seg[0].y (EPI_SWIGLU), else both outputs (+ bias). The pair without
// epilogue runs the same kernels, so it gives the SwiGLU pair's dots.
template <int NL, typename G, typename U>
__device__ __forceinline__ void q8_pair_store(const Q6Args &a, int64_t r0, int tok0, int ntok,
                                              int lane, G g, U u) {
    const Seg &s0 = a.seg[0], &s1 = a.seg[1];
    q6k::for_each_output<NL>(r0, s0.rows, tok0, ntok, lane,
                             [&](int j, int k, int64_t i, int64_t r) {
        const float y0 = g(j * 2 + k), y1 = u(j * 2 + k);
        if (a.epi == EPI_SWIGLU) {
            s0.y[i] = __fmul_rn(silu_f(y0), y1);
        } else {
            s0.y[i] = s0.bias ? __fadd_rn(y0, s0.bias[r]) : y0;
            s1.y[i] = s1.bias ? __fadd_rn(y1, s1.bias[r]) : y1;
        }
    });
}

// The block's work for one tile: tile `tile` of a.tile0's ranges, K share `rank` of S, tokens
// tok0 .. tok0 + NT - 1 (of a.n). NMAT = 2: the pair (a.seg[0] gate, a.seg[1] up; q8_pair_store).
template <int NT, int NMAT, bool NORM>
__device__ __forceinline__ void q8_tile(const Q6Args &a, Q8Smem<NT, NMAT, NORM> &sm, int64_t tile,
                                        int rank, int S, int tok0) {
    constexpr int ST = Q8Smem<NT, NMAT, NORM>::kSt;
    constexpr int T = Q4I8Stage<NT>::kTiles;
    constexpr int NL = NT < 4 ? 1 : NT / 4;  // tokens a lane stores (for_each_output)
    constexpr int NV = NMAT * NL * 2;
    constexpr int WPM = kWarps / NMAT;  // warps a matrix
    constexpr bool XCH = NT == 1 && NMAT == 1;
    pdl_launch_dependents();
    if (XCH) cluster_start(S);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int mw = NMAT == 2 ? w / WPM : 0, kw = w % WPM;  // the warp's matrix and K slot
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int si = NMAT == 2 ? 0 : q6k::q6_seg_of(a, tile);
    const Seg &s = a.seg[si];
    const Seg &sw = a.seg[NMAT == 2 ? mw : si];  // the segment whose weights this warp reads
    const int64_t r0 = (tile - a.tile0[si]) * kTileRows;
    // q8_copy / q8_issue spelled out: their struct cost these kernels 2 registers and the 8B
    // GEMV ~10% (H200, session 35: 17.4 -> 19.2 us; bench/NOTES.md 2.7)
    int roff[kQ8LaneChunks];
#pragma unroll
    for (int i = 0; i < kQ8LaneChunks; i++) {
        const int c = lane + 32 * i, r = c / 17;
        const int64_t rr = r0 + r < sw.rows ? r : sw.rows - 1 - r0;
        roff[i] = (int)rr * (int)sw.row_bytes + 16 * (c % 17);
    }
    const uint8_t *wbase = sw.w + r0 * sw.row_bytes;
    const int64_t nsb = a.K / 256;
    const int64_t step = (int64_t)WPM * S;
    int64_t sb = (int64_t)WPM * rank + kw;
    auto issue = [&](uint8_t *buf, int64_t sq) {
        if (sq < nsb) {
            const uint8_t *src = wbase + sq * kQ8Sb;
#pragma unroll
            for (int i = 0; i < kQ8LaneChunks; i++)
                if (lane + 32 * i < kQ8Chunks)
                    cp_async16(buf + 16 * (lane + 32 * i), src + roff[i], true);
        }
        cp_async_commit();
    };
#pragma unroll
    for (int q = 0; q < ST; q++) issue(sm.wbuf[w][q], sb + q * step);

    Q4I8Stage<NT> &st = sm.stage[w];
    q4_i8_stage_init<NT>(st, lane);
    __syncwarp();
    float acc[T][2];
#pragma unroll
    for (int p = 0; p < T; p++) acc[p][0] = acc[p][1] = 0.0f;
    pdl_wait();
    const int xoff = q4_i8_xoff(lane);
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    const int kx = (int)a.K;  // NT * K < 2^31 (K <= 2^26 / 34 * 32 a row)
    float4 xa[NT], xc[NT];
    auto load_x = [&](int64_t b, float4 (&pa)[NT], float4 (&pc)[NT]) {
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i == 0 || i < ntok) {
                const float *p = xb + b * 256 + i * kx;
                pa[i] = ld_x4(p);
                pc[i] = ld_x4(p + kQ4I8Xc);
            }
    };
    constexpr bool kPrefetchX = NT == 1;  // the GEMV: the next super-block's x during this one
    if (kPrefetchX && sb < nsb) load_x(sb, xa, xc);
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    if (NORM)
        block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart,
                             sm.nscale);
    for (int q = 0; sb < nsb; sb += step, q = q + 1 == ST ? 0 : q + 1) {
        float4 nxa[NT], nxc[NT];
        const bool more = sb + step < nsb;
        if (kPrefetchX && more) load_x(sb + step, nxa, nxc);
        if (!kPrefetchX) load_x(sb, xa, xc);
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i == 0 || i < ntok)
                q8_stage<NT, NORM>(st, i, xa[i], xc[i], NORM ? sm.nscale[i] : 1.0f, nwb, sb, lane);
        cp_async_wait<ST - 1>();
        __syncwarp();
        Q8Words qw;
        q8_words(reinterpret_cast<const uint32_t *>(sm.wbuf[w][q]), lane, qw);
        __syncwarp();  // every lane has read stage q: refill it (the GEMM's only stage)
        issue(sm.wbuf[w][q], sb + ST * step);
        q8_superblock<NT>(qw, st, lane, acc);
        __syncwarp();  // every lane has read the limbs before the next staging
        if (kPrefetchX && more) {
#pragma unroll
            for (int i = 0; i < NT; i++) { xa[i] = nxa[i]; xc[i] = nxc[i]; }
        }
    }
    cp_async_wait<0>();

    // lanes t, t ^ 1, then warps 0..3 and ranks 0..S-1; the pair's other matrix is zeros
    float v[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) v[i] = 0.0f;
    if (NMAT == 2 && mw == 1) q4_i8_lane_sum<NT, NL>(acc, v + NL * 2, lane);
    else q4_i8_lane_sum<NT, NL>(acc, v, lane);
    __syncthreads();  // every warp is done with wbuf: it holds the reduction's partials
    reduce_partials<NV, false, XCH>(v, reinterpret_cast<float *>(&sm.wbuf[0][0][0]), S, nullptr,
                                    sm.xch);
    if (rank != 0 || w != 0) return;
    if constexpr (NMAT == 2) {
        q8_pair_store<NL>(a, r0, tok0, ntok, lane, [&](int e) { return v[e]; },
                          [&](int e) { return v[NL * 2 + e]; });
    } else {
        q6k::q6_store<NL>(a, s, r0, tok0, ntok, lane, v);
    }
}

// The wide GEMM (from kQ8WideMin tokens; LOOM_GEMM_WIDE): a block of 4 warps = 4 weight tiles
// (NMAT = 1: warp w the tile 4 z + w; the pair: warps 0, 1 the gate's tiles 2 z, 2 z + 1, warps
// 2, 3 the up's) x kQ8WideTok tokens, x staged once a super-block for the whole block, so the
// staging is shared by 4 tiles and each A by 16 tokens. Staged by whom (LOOM_GEMM_WIDE_Q8):
// PRE (2, the default) copies the limbs (cp.async) that one pre-pass a matmul staged into the
// kernel scratch (q4k_i8_body.cuh q4_limbs_prepass without the limb sums; NORM is the
// pre-pass's then) in two halves of a super-block, tokens 0..7 and 8..15, each copied while the
// other's tiles run (two whole stages would pass 48 KB beside the weight stages); 1 (and PRE
// where the scratch cannot grow) each block converts its tokens' x itself into one stage (warp
// w its tokens 4 w .. 4 w + 3). The same limbs either way, so the same bits. Every warp walks the
// super-blocks in the GEMV's partial order (ranks r < S, K slots kw < WPM, then sb = WPM r + kw
// + k WPM S), summing as the GEMV does: each partial from 0 by q8_superblock, its lanes t, t ^ 1,
// then the partials of a rank in kw order (the pair's two zero partials of the other matrix
// added too), then the ranks in order: a token's bits are the GEMV's.
constexpr int kQ8WideTok = 16;
constexpr int kQ8WideMin = 16;  // tokens from which mma_q8_matmul runs the wide GEMM

template <int NMAT, bool PRE>
struct Q8WideSmem {
    __align__(16) uint8_t wbuf[kWarps][kQ8TileBytes];
    Q4I8Stage<PRE ? kQ8WideTok / 2 : kQ8WideTok> stage[PRE ? 2 : 1];  // PRE: the two halves
    double npart[PRE ? 1 : kQ8WideTok * kWarps];
    float nscale[PRE ? 1 : kQ8WideTok];
    float up[NMAT == 2 ? 2 * (kQ8WideTok / 4) * 2 * 32 : 1];  // the pair: the up warps' totals
    // each lane's sum of its rank's partials so far (touched once a partial; in registers they
    // cost PRE's kernel the third block an SM)
    float rank[kWarps][Q4I8Stage<kQ8WideTok>::kTiles * 2][32];
};

template <int NMAT, bool NORM, bool PRE>
__device__ __forceinline__ void q8_wide(const Q6Args &a, Q8WideSmem<NMAT, PRE> &sm, int64_t quad,
                                        int S, int tok0, const Q4Limbs &L) {
    static_assert(!(PRE && NORM), "the pre-pass applies the norm");
    constexpr int NT = kQ8WideTok, T = Q4I8Stage<NT>::kTiles, NL = NT / 4;
    constexpr int WPM = kWarps / NMAT;
    constexpr int kTilesB = kWarps / NMAT;  // tiles a block
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int mw = NMAT == 2 ? w / 2 : 0;
    const int64_t ntiles = a.tile0[NMAT == 2 ? 1 : a.nseg];
    int64_t tile = quad * kTilesB + (NMAT == 2 ? w % 2 : w);
    const bool live = tile < ntiles;
    if (!live) tile = ntiles - 1;  // (computed, never stored)
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int si = NMAT == 2 ? 0 : q6k::q6_seg_of(a, tile);
    const Seg &s = a.seg[si];
    const Seg &sw = a.seg[NMAT == 2 ? mw : si];
    const int64_t r0 = (tile - a.tile0[si]) * kTileRows;
    const Q8Copy cp = q8_copy(sw, r0, lane);
    const int64_t nsb = a.K / 256, step = (int64_t)WPM * S;
    // the walk: partial (r, kw), its k-th super-block WPM r + kw + k step
    int r = 0, kw = 0;
    int64_t sb = 0;
    auto advance = [&]() {  // the next super-block of the walk (sb >= nsb: done)
        sb += step;
        while (sb >= nsb && r < S) {
            if (++kw == WPM) {
                kw = 0;
                ++r;
            }
            sb = r < S ? (int64_t)WPM * r + kw : nsb;
        }
    };
    q8_issue(cp, sm.wbuf[w], sb, nsb, lane);
    // (visible after the loop's first barrier; PRE copies the pre-pass's zeros)
    if constexpr (!PRE) {
        if (w == 0) q4_i8_stage_init<NT>(sm.stage[0], lane);
    }
    pdl_wait();
    if (NORM)
        block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart,
                             sm.nscale);
    if constexpr (PRE) {  // the walk's first super-block's first half
        if (sb < nsb) q4_limbs_copy<NT / 2>(L, sb, tok0, sm.stage[0]);
        cp_async_commit();
    }
    const int xoff = q4_i8_xoff(lane);
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    float acc[T][2], tot[T][2];
    float(&rank)[T * 2][32] = sm.rank[w];
#pragma unroll
    for (int p = 0; p < T; p++) acc[p][0] = acc[p][1] = 0.0f;
    int pr = 0, pkw = 0;  // the partial acc holds
    // acc (partial (pr, pkw)) into the rank's sum, then (its last K slot) the rank into the total;
    // acc = 0 for the next partial (pr, pkw)
    auto close_partial = [&]() {
#pragma unroll
        for (int p = 0; p < T; p++)
#pragma unroll
            for (int k = 0; k < 2; k++) {
                float v = __fadd_rn(acc[p][k], __shfl_xor_sync(0xffffffffu, acc[p][k], 1));
                v = pkw == 0 ? v : __fadd_rn(rank[2 * p + k][lane], v);
                if (NMAT == 2 && pkw == WPM - 1) {  // the other matrix's two zero partials
                    v = __fadd_rn(v, 0.0f);
                    v = __fadd_rn(v, 0.0f);
                }
                rank[2 * p + k][lane] = v;
                acc[p][k] = 0.0f;
                if (pkw == WPM - 1) tot[p][k] = pr == 0 ? v : __fadd_rn(tot[p][k], v);
            }
        if (++pkw == WPM) {
            pkw = 0;
            ++pr;
        }
    };
    // closes the partials before (r1, kw1), those without super-blocks (nsb < 4: S = 1 and
    // warps without work in the GEMV) as the zeros they are there
    auto close_until = [&](int r1, int kw1) {
        while (pr < r1 || (pr == r1 && pkw < kw1)) close_partial();
    };
    // this warp's weights of super-block sb read into registers, and the walk's next super-block
    // requested into the stage they leave
    auto take_weights = [&]() {
        Q8Words qw;
        q8_words(reinterpret_cast<const uint32_t *>(sm.wbuf[w]), lane, qw);
        __syncwarp();  // every lane has read the stage
        advance();
        q8_issue(cp, sm.wbuf[w], sb, nsb, lane);
        return qw;
    };
    while (sb < nsb) {
        close_until(r, kw);
        if constexpr (PRE) {
            cp_async_wait<0>();
            // the first half and (each warp) its weights are in place, and every warp is done
            // with the second half: this super-block's into it
            __syncthreads();
            q4_limbs_copy<NT / 2>(L, sb, tok0 + NT / 2, sm.stage[1]);
            cp_async_commit();
            const Q8Words qw = take_weights();
            q8_superblock<NT / 2>(qw, sm.stage[0], lane, *reinterpret_cast<float(*)[T / 2][2]>(&acc[0]));
            cp_async_wait<1>();  // the second half (the next weights may still be in flight)
            // the second half is in place, and every warp is done with the first: the next
            // super-block's into it
            __syncthreads();
            if (sb < nsb) q4_limbs_copy<NT / 2>(L, sb, tok0, sm.stage[0]);
            cp_async_commit();
            q8_superblock<NT / 2>(qw, sm.stage[1], lane, *reinterpret_cast<float(*)[T / 2][2]>(&acc[T / 2]));
        } else {
            __syncthreads();  // every warp has read the previous limbs
#pragma unroll
            for (int j = 0; j < 4; j++) {  // this warp's tokens
                const int i = 4 * w + j;
                if (i < ntok) {
                    const float *p = xb + sb * 256 + (int64_t)i * a.K;
                    q8_stage<NT, NORM>(sm.stage[0], i, ld_x4(p), ld_x4(p + kQ4I8Xc),
                                       NORM ? sm.nscale[i] : 1.0f, nwb, sb, lane);
                }
            }
            cp_async_wait<0>();
            __syncthreads();  // the limbs and (each warp) its weights are in place
            q8_superblock<NT>(take_weights(), sm.stage[0], lane, acc);
        }
    }
    close_until(S, 0);
    cp_async_wait<0>();
    float v[NL * 2];
    q4_i8_lane_move<NT, NL>(tot, v, lane);  // the GEMV's store layout
    if constexpr (NMAT == 2) {
        float *up = sm.up + (w % 2) * (NL * 2 * 32);
        if (mw == 1) {
#pragma unroll
            for (int i = 0; i < NL * 2; i++) up[i * 32 + lane] = v[i];
        }
        __syncthreads();
        if (mw == 1 || !live) return;
        q8_pair_store<NL>(a, r0, tok0, ntok, lane, [&](int e) { return v[e]; },
                          [&](int e) { return up[e * 32 + lane]; });
    } else {
        if (!live) return;
        q6k::q6_store<NL>(a, s, r0, tok0, ntok, lane, v);
    }
}

// Blocks an SM asked of ptxas: 2, or with B3 3 on sm_90 (168 registers), 2 on sm_87, where 168
// spilled 4 bytes. launch_wide_q8 takes B3 for PRE from two token blocks on: 3 blocks an SM made
// the 4B pair at N = 512 815 -> 715 us and the 9728 x 2560 GEMM at N = 32 45 -> 35, but at N = 16
// (one token block, 152 blocks on 132 SMs) 27 -> 34 (bench/NOTES.md 2.8). (Staging x in the
// block: its one-matrix kernel needs 173 registers on sm_90a.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kQ8B3 = 2;
#else
constexpr int kQ8B3 = 3;
#endif
template <int NMAT, bool NORM, bool PRE, bool B3 = false>
static __global__ void __launch_bounds__(kThreads, B3 ? kQ8B3 : 2) gemm_wide_q8(const Q6Args a, int S,
                                                                   const Q4Limbs L) {
    __shared__ Q8WideSmem<NMAT, PRE> sm;
    q8_wide<NMAT, NORM, PRE>(a, sm, blockIdx.z, S, (int)blockIdx.y * kQ8WideTok, L);
}

// The limb pre-pass (one block a token, npad blocks; q4k_i8_body.cuh, without the limb sums).
template <bool NORM>
static __global__ void __launch_bounds__(kThreads) q8_prepass(const float *x, int64_t K, int n,
                                                              const PreNorm norm, const Q4Limbs L) {
    q4_limbs_prepass<NORM, false>(x, K, n, norm, L);
}

// Wide GEMMs run on the pre-pass's limbs so far (loom_cuda_matmul_q8_pre_launches: tests check
// the path ran).
std::atomic<int64_t> g_q8_pre_launches{0};

// pre (LOOM_GEMM_WIDE_Q8=2): the pre-pass into the kernel scratch (runtime.cu scratch(): grown
// only outside stream capture), then the wide GEMM copying its limbs; where the scratch is
// short, the wide GEMM that stages x itself (the same bits).
template <int NMAT>
cudaError_t launch_wide_q8(const Q6Args &a, bool norm, int S, bool pre, cudaStream_t stream) {
    constexpr int kTilesB = kWarps / NMAT;
    const int64_t tiles = a.tile0[NMAT == 2 ? 1 : a.nseg];
    const dim3 grid(1u, (unsigned)((a.n + kQ8WideTok - 1) / kQ8WideTok),
                    (unsigned)((tiles + kTilesB - 1) / kTilesB));
    if (void *buf = pre ? scratch(q4_limbs_bytes(a.n, a.K, false), stream) : nullptr) {
        const Q4Limbs L = q4_limbs_at(buf, a.n, a.K, false);
        const cudaError_t e = launch(norm ? q8_prepass<true> : q8_prepass<false>,
                                     dim3((unsigned)L.npad), kThreads, 0, stream, a.x, a.K,
                                     (int)a.n, a.norm, L);
        if (e != cudaSuccess) return e;
        g_q8_pre_launches.fetch_add(1, std::memory_order_relaxed);
        return a.n > kQ8WideTok
                   ? launch(gemm_wide_q8<NMAT, false, true, true>, grid, kThreads, 0, stream, a, S, L)
                   : launch(gemm_wide_q8<NMAT, false, true>, grid, kThreads, 0, stream, a, S, L);
    }
    return launch(norm ? gemm_wide_q8<NMAT, true, false> : gemm_wide_q8<NMAT, false, false>, grid,
                  kThreads, 0, stream, a, S, Q4Limbs{});
}

// Occupancy: 4 blocks an SM for the GEMV (<= 128 registers; 45 KB of shared memory a block),
// 2 for the GEMM.
template <int NT, int NMAT, bool NORM>
static __global__ void __launch_bounds__(kThreads, NT == 1 ? 4 : 2) gemv_mma_q8(const Q6Args a) {
    __shared__ Q8Smem<NT, NMAT, NORM> sm;
    q8_tile<NT, NMAT, NORM>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x,
                            (int)blockIdx.y * NT);
}

template <int NT, int NMAT>
cudaError_t launch_q8(const Q6Args &a, bool norm, int S, int64_t groups, cudaStream_t stream) {
    const dim3 grid((unsigned)S, (unsigned)groups, (unsigned)a.tile0[NMAT == 2 ? 1 : a.nseg]);
    return launch_cluster(norm ? gemv_mma_q8<NT, NMAT, true> : gemv_mma_q8<NT, NMAT, false>, grid,
                          dim3((unsigned)S, 1, 1), kThreads, 0, stream, a);
}

// Tokens a launch at most (token groups of kQ8Tok: 65535 a launch).
constexpr int64_t kPerLaunch = 65535 * (int64_t)kQ8Tok;

// Whether a launch of nn tokens runs the wide GEMM (LOOM_GEMM_WIDE: 1 from kQ8WideMin tokens,
// n >= 2 from n, 0 never), and the wide GEMM's limbs come from the pre-pass (LOOM_GEMM_WIDE_Q8).
bool q8_wide_for(int64_t nn) {
    const int w = gemm_wide_from(kQ8WideMin);
    return w != 0 && nn >= w;
}
bool q8_pre(int64_t K) { return gemm_wide_q8_form() == 2 && K >= 256; }

}  // namespace

size_t mma_q8_scratch_bytes(int64_t n, int64_t K) {
    const int64_t nn = n < kPerLaunch ? n : kPerLaunch;  // the largest launch
    return q8_wide_for(nn) && q8_pre(K) ? q4_limbs_bytes(nn, K, false) : 0;
}

bool mma_q8_seg_ok(const Seg &s) {
    return s.type == LOOM_GGML_Q8_0 && !s.tiles && ((uintptr_t)s.w % 16) == 0 &&
           s.row_bytes % kQ8Sb == 0 && s.row_bytes <= (int64_t)1 << 26;
}

loom_status mma_q8_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K, int64_t n,
                          const PreNorm *norm, loom_error *err, cudaStream_t stream) {
    if (n <= 0) return LOOM_OK;
    // the pair's kernels: SwiGLU, and two matrices of equal rows without epilogue (the same dots)
    const bool pair =
        nseg == 2 && seg[0].rows == seg[1].rows && (epi == EPI_SWIGLU || epi == EPI_PLAIN);
    if (nseg < 1 || nseg > 3 || (epi != EPI_PLAIN && epi != EPI_ADD && epi != EPI_SWIGLU) ||
        (epi == EPI_ADD && nseg != 1) || (epi == EPI_SWIGLU && !pair))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "matmul (mma Q8_0): %d segments with epilogue %d",
                 nseg, epi);
    Q6Args a = {};
    int64_t tiles = 0;
    a.nseg = nseg;
    for (int i = 0; i < nseg; i++) {
        a.seg[i] = seg[i];
        a.tile0[i] = tiles;
        if (!pair || i == 0) tiles += (seg[i].rows + kTileRows - 1) / kTileRows;
    }
    for (int i = nseg; i < 4; i++) a.tile0[i] = tiles;
    if (tiles == 0) return LOOM_OK;
    if (tiles > 65535)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "matmul (mma Q8_0): %lld row tiles > 65535",
                 (long long)tiles);
    a.epi = epi;
    a.x = x;
    a.K = K;
    if (norm) a.norm = *norm;
    const bool nm = norm != nullptr;
    const int S = mma_pick_split(pair ? 2 * tiles : tiles, K / 256);  // gemv_mma.cu's rule
    const bool pre = q8_pre(K);
    for (int64_t t0 = 0; t0 < n; t0 += kPerLaunch) {
        const int64_t nn = n - t0 < kPerLaunch ? n - t0 : kPerLaunch;
        const Q6Args b = token_slice(a, t0, nn);
        const int64_t groups = nn == 1 ? 1 : (nn + kQ8Tok - 1) / kQ8Tok;
        cudaError_t e;
        if (q8_wide_for(nn))
            e = pair ? launch_wide_q8<2>(b, nm, S, pre, stream)
                     : launch_wide_q8<1>(b, nm, S, pre, stream);
        else if (pair) e = nn > 1 ? launch_q8<kQ8Tok, 2>(b, nm, S, groups, stream)
                             : launch_q8<1, 2>(b, nm, S, groups, stream);
        else e = nn > 1 ? launch_q8<kQ8Tok, 1>(b, nm, S, groups, stream)
                        : launch_q8<1, 1>(b, nm, S, groups, stream);
        CUDA_CHECK(e);
    }
    return LOOM_OK;
}

}  // namespace loom_cuda

extern "C" int64_t loom_cuda_matmul_q8_pre_launches(void) {
    return loom_cuda::g_q8_pre_launches.load();
}
