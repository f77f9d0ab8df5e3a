// gemv_mma.cu: the matmul family (GEMV, GEMM, and their add / pair+SwiGLU / triple epilogues)
// for Q4_K weights on the tensor cores, the default path since session 2, and for Q5_K weights
// on the INT8 body below since session 34 (LOOM_GEMV_MMA=0 selects the warp-per-row kernels of
// gemv.cu / gemm.cu, which remain the fallback for every other type and for weights that are
// not 16-byte aligned).
//
// The product. mma.sync m16n8k16 (f16 x f16 -> f32) with A = the quantized weights and
// B = the activations. A holds sc * q (Q4_K: 6-bit scale times 4-bit quant, <= 945: exact in
// f16), made from the packed nibbles without conversions: (w & 0x000F000F) | 0x64006400 is
// half2(1024 + q, 1024 + q'), and one HFMA2 with (sc, -1024 sc) gives sc * q exactly (high
// nibbles: mask 0x00F000F0, HFMA2 with (sc/16, -64 sc)). B holds x in f16 as hi + lo
// (x_hi = f16(x s), x_lo = f16(x s - x_hi), s a power of two per super-block and token that
// brings max|x| to [2^14, 2^15)): ~22 bits of x survive. Token i uses mma columns 2i (hi) and
// 2i+1 (lo), so lane (g = lane/4, t = lane%4) holds rows g and g+8 of token t in c0+c1 and
// c2+c3: no shuffles. The mins go through a second mma chain over the same B fragments, with
// A = the 6-bit min of each value's sub-block (so no sums of x are needed). Per super-block and
// row, in FP32:  acc += (d / s) * C - (dmin / s) * M,  C = sum sc q x s,  M = sum m x s.
// k permutation: lane t owns quant chunk t (32 bytes: sub-blocks 2t and 2t+1) of rows g and
// g+8, so it decodes only 2 of the 8 scales and mins; each warp stages x for its super-block
// in shared memory in exactly the permuted fragment order (one LDS.128 per lane per 2 mma).
//
// Launch geometry: 128-thread blocks; a block owns a tile of 16 rows (of one segment; the
// pair's two matrices both, for its SwiGLU epilogue) and 1 token (GEMV) or up to 8 (GEMM: two
// n-tiles that share every decoded A fragment); grid (S, token groups, tiles). The 4 warps take the super-blocks i of the block's K share by i % 4; on
// sm_90 S > 1 splits K over a cluster of S blocks (super-blocks i with (i / 4) % S == rank),
// whose partial sums meet in distributed shared memory. Reductions run in a fixed order (warps
// 0..3, then cluster ranks 0..S-1), and S depends only on the matrix shape, so results are
// deterministic and a GEMM token is bit-identical to the GEMV of that token (the per-token
// instruction sequence is the same; mma columns are independent).
//
// The INT8 body (LOOM_GEMV_MMA_Q4K_V=2, q4k_i8_body.cuh; bench/NOTES.md 2.4): the same tiles,
// split, prefetch, reduction and epilogue with another product (m16n8k32 u8.s8, x as 4 exact
// int8 limbs, the scale by IMAD, the mins by a second mma) in q4k_tile's I8 instantiations.
// Q5_K runs it too (layout kQ5Rows below): Q4_K's header, 6-bit scales and mins and 32-value
// sub-blocks, each value's fifth bit from the block's qh bytes; GGUF rows only, no tiles.
//
// The Q4_K_M triple in one launch (gemv_mma_mixed, LOOM_GEMV_TRIPLE_MIXED=1; bench/NOTES.md
// 2.3): the GEMV of Q4_K Q/K and Q6_K V as one grid whose blocks run either this file's tile
// body (q4k_tile) or q6k_mma_body.cuh's (q6k_tile), each part with the split its own launch
// would take, so the results are bit for bit those of the two launches.
//
// The wide GEMM (LOOM_GEMM_WIDE, gemm_wide_q4k below; f16 body, n >= the switch's threshold):
// a block of 4 warps = 4 tiles x 32 tokens, each weight tile decoded once for its 32 tokens and
// x staged once for the 4 tiles, each warp walking the GEMV's split-K partials itself in
// reduce_partials' order: the same bits per token, ~2.5x faster at N = 512. The INT8 body has its
// own (gemm_wide_q4k_i8, session 9: 2.9x its 8-token GEMM at N = 512; session 11: x converted to
// limbs once a matmul by a pre-pass into the kernel scratch, 0.56-0.76x the f16 one at N = 512).
//
// Weight layouts (TL, a template parameter of the Q4_K kernels here but the traced ones; MmaArgs::
// tiles picks it at launch): GGUF's rows, or LOOM_WEIGHT_Q4K_TILES (cpu_kernels.h), where a warp's super-block of
// 16 rows is one 2,304-byte run instead of 16 runs of 144 bytes 1-5 KB apart: the same loads at
// other addresses, so the same bits (conformance --tiles), and the 4B decode layer 1.2 us
// faster (bench/NOTES.md 7, session 15). Compile-time because a runtime block stride spilled in
// these 125-128-register kernels; tiles run the INT8 body only (the f16 pair spilled with them).
//
// Memory traffic: each weight byte once from DRAM per token group (a GEMM of n tokens re-reads
// each 16-row tile for every group of 8, from L2: the groups of a tile are adjacent blocks).
// x through L2/L1 once per block, y written once.
//
// The GEMV's loads (bench/NOTES.md section 7, "Session 12, gtr": the per-block trace of
// cuda_bench --gemv-trace). A warp's first super-block is requested before the PDL wait (one
// matrix into registers, the pair into L2); one matrix then holds the next super-block in
// registers and asks L2 for the one after it (the lookahead: a step waits for L2, not DRAM), and
// its add reads resid right after the wait instead of after the reduction (relay gtr-R3: the
// 4B layer graph 41.9 -> 40.9 us, decode +1.7-2.0% tokens/s). The pair takes neither: an L2
// lookahead (R2) or reloading each matrix right after its math (R3) made it 3-4 us slower, as
// did its first super-block in registers or every super-block in L2 before the wait (R1).
//
// Folded RMSNorm (the NORM kernels, loom_cuda_*_normed), scale last (norm.cuh): each staged x
// value is x * w[k] (the norm weight read as float4 beside x; w = 1.0 without a weight) and
// q4_store multiplies every finished dot by its token's scale, which has loom_cuda_rms_norm's
// bits. The GEMM (and the wide GEMMs, or their limb pre-pass) computes its tokens' scales
// right after pdl_wait; the GEMV's warps only leave their partials of the scale there (x from
// L2, K floats a block) and the storing warp finishes it after the reduction's barrier, so no
// barrier holds the first super-block for the norm (session 16: the norm's reduction at the
// start cost the normed GEMVs ~1 us a launch, bench/NOTES.md 7). GEMM tokens equal the GEMV;
// the result is within the family's tolerance of loom_cuda_rms_norm + the plain kernel, not
// its bits. The NORM GEMV does not prefetch x a super-block ahead (the partials have just
// brought x into L1; the 8 registers would spill at 128).
//
// Numeric contract: as gemv.cu (|y - y_cpu| <= 1e-5 * sum_k |W[m,k] x[k]| per element against
// the CPU twin): products sc*q*x_hi are exact, x carries ~22 bits, accumulation is FP32 in the
// tensor cores (16 steps a super-block) and in FMA folds. NOT bit-identical to the
// warp-per-row kernels (another summation order). Requires: Q4_K (or Q5_K), K % 256 == 0,
// weights and x 16-byte aligned.
//
// Cost (SASS of the GEMV kernel, sm_90a, nvdisasm): 432 instructions per warp and super-block
// of 16 rows (4096 weights) = 3.4 lane-instructions per weight (v8 warp-per-row: ~7.8): 144 for
// the nibbles (LOP3 + HFMA2 per 2 weights, a shift per word), 32 HMMA, ~55 x staging, ~40 scale
// decode, ~30 register moves of the prefetch double buffer, the rest addresses and folds.
#include <stdio.h>

#include <type_traits>

#include "kernels/cuda/q4k_i8_body.cuh"

namespace loom_cuda {

// LOOM_GEMM_WIDE_Q4K_I8 (runtime.cu): the wide INT8 GEMM's form, 5 (the default) = on the limb
// pre-pass, 4 = staging x in the block (the form without scratch, forced).
int gemm_wide_q4k_i8_form();

namespace {

constexpr int kTileRows = 16;
constexpr int kGemmTok = 8;  // tokens a GEMM block: 2 n-tiles, token 4j+t in columns 8j+2t, 8j+2t+1

// ---- Q4_K -------------------------------------------------------------------------------
// The bytes lane (g, t) loads for one super-block: header (d, dmin, 12 scale bytes) and quant
// chunk t (32 bytes) of rows g and g+8.
struct Q4Raw {
    uint4 h0, h8, qa0, qb0, qa8, qb8;
};

__device__ __forceinline__ Q4Raw q4_load(const uint8_t *rg, const uint8_t *r8, int64_t sb,
                                         int t, int bs) {
    const uint8_t *bg = rg + sb * bs, *b8 = r8 + sb * bs;
    Q4Raw r;
    r.qa0 = ldg16(bg + 16 + 32 * t);
    r.qb0 = ldg16(bg + 32 + 32 * t);
    r.qa8 = ldg16(b8 + 16 + 32 * t);
    r.qb8 = ldg16(b8 + 32 + 32 * t);
    r.h0 = ldg16(bg);
    r.h8 = ldg16(b8);
    return r;
}

// Scale constants of sub-blocks 2t (even: low nibbles) and 2t+1 (odd: high nibbles) of a row.
struct Q4Sc {
    uint32_t se, nse, so, nso, me, mo;  // half2: (sc_e, sc_e), (-1024 sc_e), (sc_o/16), (-64 sc_o), (m_e, m_e), (m_o, m_o)
    float d, dmin;
};

__device__ __forceinline__ Q4Sc q4_scales(const uint4 &hd, bool hit, uint32_t sel_e,
                                          uint32_t sel_o) {
    // Sub-blocks 0-3: sc = S0 & 63, m = S1 & 63; 4-7: low 4 bits from S2's nibbles, top 2 bits
    // from bits 6-7 of S0 / S1. Lanes t >= 2 (hit) own sub-blocks 4-7.
    const uint32_t S0 = hd.y, S1 = hd.z, S2 = hd.w;
    const int sh = hit ? 2 : 0;
    const uint32_t xs = hit ? S2 : S0, xm = hit ? (S2 >> 4) : S1;
    const uint32_t scw = (xs & 0x0F0F0F0Fu) | ((S0 >> sh) & 0x30303030u);
    const uint32_t mw = (xm & 0x0F0F0F0Fu) | ((S1 >> sh) & 0x30303030u);
    Q4Sc s;
    s.se = hadd2(__byte_perm(scw, 0x64646464u, sel_e), kHm1024);
    s.nse = hmul2(s.se, kHm1024);
    s.so = hfma2(__byte_perm(scw, 0x64646464u, sel_o), kH16th, kHm64);
    s.nso = hmul2(s.so, kHm1024);
    s.me = hadd2(__byte_perm(mw, 0x64646464u, sel_e), kHm1024);
    s.mo = hadd2(__byte_perm(mw, 0x64646464u, sel_o), kHm1024);
    s.d = f16_bits_to_f32((uint16_t)(hd.x & 0xFFFFu));
    s.dmin = f16_bits_to_f32((uint16_t)(hd.x >> 16));
    return s;
}

__device__ __forceinline__ uint32_t q4w(const uint4 &a, const uint4 &b, int i) {
    return i == 0 ? a.x : i == 1 ? a.y : i == 2 ? a.z : i == 3 ? a.w
         : i == 4 ? b.x : i == 5 ? b.y : i == 6 ? b.z : b.w;
}

// One super-block of rows g, g+8 against the staged x: acc[0] (row g), acc[1] (row g+8) of the
// token in this lane's slot t. ncol: staged columns (2 x tokens); lanes g >= ncol use B = 0.
// Two mma chains over the same B: C = sum sc q x s (A = sc q) and M = sum m x s (A = the
// sub-block's min, the same for all its values), then acc += (d/s) C - (dmin/s) M.
template <int NT, int NCH>
__device__ __forceinline__ void q4_superblock(const Q4Raw &r, const Stage<NT> &st, int lane,
                                              int ncol, bool hit, uint32_t sel_e,
                                              uint32_t sel_o, float (&acc)[(NT + 3) / 4][2]) {
    constexpr int NTL = (NT + 3) / 4;  // n-tiles: the A registers of a step serve all of them
    const int g = lane >> 2, t = lane & 3;
    const Q4Sc s0 = q4_scales(r.h0, hit, sel_e, sel_o);
    const Q4Sc s8 = q4_scales(r.h8, hit, sel_e, sel_o);
    // NCH = 2: four independent accumulator chains (C and M, even and odd sp) halve the mma
    // latency a super-block waits for (the pair, with two matrices in flight, keeps 2).
    float c[2][NTL][4] = {}, cm[2][NTL][4] = {};
    // A of the min chain: the same for all 16 steps (slots 2t,2t+1 hold sub-block 2t, slots
    // 2t+8,2t+9 sub-block 2t+1): built once, no register copies per mma.
    const uint32_t mq0 = s0.me, mq1 = s8.me, mq2 = s0.mo, mq3 = s8.mo;
#pragma unroll
    for (int sp = 0; sp < 8; sp++) {
        const int ch = NCH == 2 ? (sp & 1) : 0;
        const uint32_t w0 = q4w(r.qa0, r.qb0, sp), w8 = q4w(r.qa8, r.qb8, sp);
        const uint32_t v0 = w0 >> 8, v8 = w8 >> 8;
        // step 2sp: bytes 0, 2 of the word; low nibbles (sub-block 2t) in slots 2t, 2t+1, high
        // nibbles (sub-block 2t+1) in slots 2t+8, 2t+9. Step 2sp+1: bytes 1, 3.
        const uint32_t a0 = hfma2(and_or<0x000F000Fu>(w0, kH1024), s0.se, s0.nse);
        const uint32_t a1 = hfma2(and_or<0x000F000Fu>(w8, kH1024), s8.se, s8.nse);
        const uint32_t a2 = hfma2(and_or<0x00F000F0u>(w0, kH1024), s0.so, s0.nso);
        const uint32_t a3 = hfma2(and_or<0x00F000F0u>(w8, kH1024), s8.so, s8.nso);
        const uint32_t a4 = hfma2(and_or<0x000F000Fu>(v0, kH1024), s0.se, s0.nse);
        const uint32_t a5 = hfma2(and_or<0x000F000Fu>(v8, kH1024), s8.se, s8.nse);
        const uint32_t a6 = hfma2(and_or<0x00F000F0u>(v0, kH1024), s0.so, s0.nso);
        const uint32_t a7 = hfma2(and_or<0x00F000F0u>(v8, kH1024), s8.so, s8.nso);
#pragma unroll
        for (int j = 0; j < NTL; j++) {
            const bool bon = 8 * j + g < ncol;
            const uint4 b = bon ? st.frag[(sp * 2 * NT + 8 * j + g) * 4 + t] : make_uint4(0u, 0u, 0u, 0u);
            mma16816(c[ch][j], a0, a1, a2, a3, b.x, b.y);
            mma16816(cm[ch][j], mq0, mq1, mq2, mq3, b.x, b.y);
            mma16816(c[ch][j], a4, a5, a6, a7, b.z, b.w);
            mma16816(cm[ch][j], mq0, mq1, mq2, mq3, b.z, b.w);
        }
    }
#pragma unroll
    for (int j = 0; j < NTL; j++) {
        const float inv = st.sinv[4 * j + t];
        // row g: columns 2t (hi) + 2t+1 (lo) = elements 0, 1; row g+8: elements 2, 3
        const float c0 = __fadd_rn(__fadd_rn(c[0][j][0], c[0][j][1]), __fadd_rn(c[1][j][0], c[1][j][1]));
        const float m0 = __fadd_rn(__fadd_rn(cm[0][j][0], cm[0][j][1]), __fadd_rn(cm[1][j][0], cm[1][j][1]));
        const float c8 = __fadd_rn(__fadd_rn(c[0][j][2], c[0][j][3]), __fadd_rn(c[1][j][2], c[1][j][3]));
        const float m8 = __fadd_rn(__fadd_rn(cm[0][j][2], cm[0][j][3]), __fadd_rn(cm[1][j][2], cm[1][j][3]));
        acc[j][0] = fmaf(__fmul_rn(s0.d, inv), c0, acc[j][0]);
        acc[j][0] = fmaf(-__fmul_rn(s0.dmin, inv), m0, acc[j][0]);
        acc[j][1] = fmaf(__fmul_rn(s8.d, inv), c8, acc[j][1]);
        acc[j][1] = fmaf(-__fmul_rn(s8.dmin, inv), m8, acc[j][1]);
    }
}

struct MmaArgs {
    Seg seg[3];
    int64_t tile0[4];  // first tile of each segment; tile0[nseg] = total tiles
    int nseg;
    int epi;           // EPI_PLAIN (+bias), EPI_ADD, EPI_SWIGLU (seg[0] gate, seg[1] up)
    const float *x;    // [n][K]
    int64_t K;
    int n;
    PreNorm norm;      // NORM kernels: the RMSNorm folded into the x staging
    int tiles;         // every segment in LOOM_WEIGHT_Q4K_TILES, else all rows back to back:
                       // the launchers pick the kernels' TL (the layout is compile-time there;
                       // seg[0]'s type, Q4_K or Q5_K, the same for every segment, picks too)
};

// The Q4_K kernels' weight layout (their TL template parameter): GGUF's Q4_K rows, Q4_K in
// LOOM_WEIGHT_Q4K_TILES, or GGUF's Q5_K rows (the INT8 body only, q4k_i8_body.cuh's Q5: Q4_K's
// header, scales and sub-blocks with a fifth bit from qh, 176-byte blocks; MmaArgs' segment
// type picks it). A row's blocks lie ly_stride(TL) bytes apart.
enum : int { kQ4Rows = 0, kQ4Tiles = 1, kQ5Rows = 2 };
__host__ __device__ constexpr int ly_stride(int TL) {
    return TL == kQ5Rows ? (int)kQ5KBytes : q4k_block_stride(TL == kQ4Tiles);
}

// Writes a tile's outputs from the reduced dots v[(m * NTL + j) * 2 + k] (matrix m, n-tile j,
// row g + 8k; for_each_output's layout): y = dot (+ bias[r]), dot + resid[i] (EPI_ADD),
// silu(dot_0) * dot_1 (the pair's SwiGLU) or the pair's two outputs. s: the tile's segment.
// rv (the GEMV, one matrix): EPI_ADD's resid values read beforehand, rv[j * 2 + k] for v's
// element; nullptr: read here. SC (a folded RMSNorm, scale last: norm.cuh): every dot times its
// token's scale first, nsc[4 j + t] for the block's token 4 j + t.
template <int NTL, int NMAT, bool SC = false>
__device__ __forceinline__ void q4_store(const MmaArgs &a, const Seg &s, int64_t r0, int tok0,
                                         int ntok, int lane, const float (&v)[NMAT * NTL * 2],
                                         const float *rv = nullptr, const float *nsc = nullptr) {
    q6k::for_each_output<NTL>(r0, s.rows, tok0, ntok, lane, [&](int j, int k, int64_t i, int64_t r) {
        const float sc = SC ? nsc[4 * j + (lane & 3)] : 1.0f;
        float y = v[j * 2 + k], y1 = v[((NMAT - 1) * NTL + j) * 2 + k];
        if (SC) {
            y = __fmul_rn(y, sc);
            y1 = __fmul_rn(y1, sc);
        }
        if (NMAT == 2 && a.epi == EPI_SWIGLU) {
            y = __fmul_rn(silu_f(y), y1);
        } else if (NMAT == 2) {  // the pair without epilogue: both outputs
            const Seg &s1 = a.seg[1];
            s1.y[i] = s1.bias ? __fadd_rn(y1, s1.bias[r]) : y1;
            if (s.bias) y = __fadd_rn(y, s.bias[r]);
        } else if (a.epi == EPI_ADD) {
            y = __fadd_rn(y, rv ? rv[j * 2 + k] : s.resid[i]);
        } else if (s.bias) {
            y = __fadd_rn(y, s.bias[r]);
        }
        s.y[i] = y;
    });
}

// TL: the layout (kQ4Rows, kQ4Tiles: LOOM_WEIGHT_Q4K_TILES, cpu_kernels.h, or kQ5Rows).
// Tile `tile` of a's ranges: its segment (returned; one matrix a tile, the pair's tiles hold
// both matrices' rows), its first row r0, and the pointers wg / w8 to rows g and g + 8 of each
// matrix, their block sb at + sb * ly_stride(TL) (rows past the segment repeat its last row).
// Uniform over the block but for g.
template <int NMAT, int TL>
__device__ __forceinline__ int q4_tile_rows(const MmaArgs &a, int64_t tile, int g, int64_t &r0,
                                            const uint8_t *(&wg)[NMAT], const uint8_t *(&w8)[NMAT]) {
    int si = 0;
    if (NMAT == 1) {
        if (a.nseg > 1 && tile >= a.tile0[1]) si = 1;
        if (a.nseg > 2 && tile >= a.tile0[2]) si = 2;
    }
    const Seg &s = a.seg[si];
    r0 = (tile - a.tile0[si]) * kTileRows;
    const int64_t rg = r0 + g < s.rows ? r0 + g : s.rows - 1;
    const int64_t r8 = r0 + g + 8 < s.rows ? r0 + g + 8 : s.rows - 1;
#pragma unroll
    for (int m = 0; m < NMAT; m++) {
        const Seg &sm = NMAT == 1 ? s : a.seg[m];
        if (TL == kQ4Tiles) {  // the tile at r0 * row_bytes as in rows, its rows 144 bytes apart
            wg[m] = sm.w + r0 * sm.row_bytes + (rg - r0) * kQ4KBytes;
            w8[m] = sm.w + r0 * sm.row_bytes + (r8 - r0) * kQ4KBytes;
        } else {
            wg[m] = sm.w + rg * sm.row_bytes;
            w8[m] = sm.w + r8 * sm.row_bytes;
        }
    }
    return si;
}

// NT: tokens staged per block (1: the GEMV; 8: GEMM groups in 2 n-tiles that share each
// decoded A, the last group possibly ragged).
// NMAT: 2 for the pair (both matrices' rows of the tile; SwiGLU or two outputs), else 1.
// NORM: a folded RMSNorm, scale last (see the file's opening comment): staged values x * w[k],
// the norm weight's float4s loaded beside x's; the dots times the token's scale at the store.
// Occupancy (the kernels that run it): 4 blocks an SM for the GEMV (<= 128 registers), 2 for
// the GEMM groups (8 tokens: 188-190 registers in the ptxas report, no spills).
// The block's work as a device function (as q6k_mma_body.cuh's q6k_tile), so that the mixed
// Q4_K_M triple kernel runs the same body: tile `tile` of a.tile0's ranges, K share `rank` of S
// (cluster rank; rank 0 reduces), tokens from tok0; sm: the block's shared memory (Q4Smem).
// I8: the INT8 body (q4k_i8_body.cuh, LOOM_GEMV_MMA_Q4K_V=2): x staged as int8 limbs.
template <int NT, int NMAT, bool NORM, bool I8, int NW = kWarps>
struct Q4Smem {
    std::conditional_t<I8, Q4I8Stage<NT>, Stage<NT>> stage[NW];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
    float red[kWarps * NMAT * ((NT + 3) / 4) * 2 * 32];
    float xch[xch_floats(NT == 1 && NMAT == 1)];  // reduce_partials_as, XCH
};

// TR: the traced GEMV (cuda_bench --gemv-trace): slot is its trace slot, the block's record
// (gt_rec) stamped after the PDL wait, the norm scales, the first super-block's staging and
// math, each warp's loop, the reductions and the store (mma_common.cuh's gt_* helpers).
// NW: the block's warps; 3 (the pair GEMV, launch_q4k_n) runs the 4-warp block's work and bits,
// warp 2 doing warps 2 and 3's super-blocks one after the other (common.cuh vwarp_end).
template <int NT, int NMAT, bool NORM, bool I8, bool TR = false, int NW = kWarps, int TL = kQ4Rows>
__device__ __forceinline__ void q4k_tile(const MmaArgs &a, Q4Smem<NT, NMAT, NORM, I8, NW> &sm,
                                         int64_t tile, int rank, int S, int tok0,
                                         unsigned long long *slot = nullptr) {
    pdl_launch_dependents();
    // one matrix, one token: the split's sums meet in rank 0's xch (mma_common.cuh)
    constexpr bool kXch = NT == 1 && NMAT == 1;
    if (kXch) cluster_start(S);
    double *npart = sm.npart;
    float *nscale = sm.nscale;
    constexpr int NTL = (NT + 3) / 4;
    float *red = sm.red;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const uint8_t *wg[NMAT], *w8[NMAT];
    int64_t r0;
    const Seg &s = a.seg[q4_tile_rows<NMAT, TL>(a, tile, g, r0, wg, w8)];
    const bool hit = t >= 2;
    const uint32_t e = 2 * (t & 1);
    const uint32_t sel_e = e * 0x101u + 0x4040u, sel_o = (e + 1) * 0x101u + 0x4040u;
    const int ncol = 2 * ntok;

    // f16 body: lane t holds token 4j + t of n-tile j; INT8: every token, a quarter of its sum
    constexpr int NA = I8 ? (NT + 1) / 2 : NTL;  // INT8: a tile (2 tokens) a slot
    float acc[NMAT][NA][2];
#pragma unroll
    for (int m = 0; m < NMAT; m++)
#pragma unroll
        for (int j = 0; j < NA; j++) acc[m][j][0] = acc[m][j][1] = 0.0f;

    auto &st = sm.stage[w];
    if constexpr (I8) {
        q4_i8_stage_init<NT>(st, lane);
        __syncwarp();
    }
    // (32-bit super-block counters: K / 256 < 2^31; they save the lean INT8 pair registers)
    const int nsb = (int)(a.K / 256);
    const int step = kWarps * S;
    // this lane's x values of a super-block: xa at xoff + 0..3, xc at xoff + XC + 0..3
    const int xoff = I8 ? q4_i8_xoff(lane) : 64 * (lane & 3) + 4 * (lane >> 2);
    constexpr int XC = I8 ? kQ4I8Xc : 32;
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    int sb = kWarps * rank + w;
    // One matrix: the next super-block's weights are loaded before this one is used (register
    // double buffer). The pair loads two matrices a step, which keeps as many bytes in flight
    // without the second buffer (that would spill).
    constexpr bool kPrefetch = NMAT == 1;
    // The INT8 body on the tile layout (the defaults) alternates two register sets instead of
    // copying the prefetched one into place each step (-34 of 354 SASS a step, bench/NOTES.md 7
    // session 28); the other one-matrix forms spill with two sets and keep the copy.
    constexpr bool kPingPong = kPrefetch && I8 && TL == kQ4Tiles;
    static_assert(NW == kWarps || (NT == 1 && !kPrefetch && !TR), "fewer warps: the pair GEMV");
    const int vend = vwarp_end<NW>(w);  // this warp's virtual warps: w .. vend - 1
    using Raw = std::conditional_t<I8, Q4RawI8, Q4Raw>;
    auto load = [&](int m, int64_t b) -> Raw {
        if constexpr (I8) return q4_load_i8<TL == kQ5Rows>(wg[m], w8[m], b, t, ly_stride(TL));
        else return q4_load(wg[m], w8[m], b, t, ly_stride(TL));
    };
    Raw cur[NMAT];
    // x of the super-block in hand for the staged tokens (L2); the GEMV loads it with the
    // weights, one super-block ahead; the GEMM in batches of XB tokens when staging.
    // (NORM: not prefetched; the scale's reduction has just read the token's x, so the staging
    // loads hit L1, and the 8 registers it saves keep the GEMV at 128 without spills; Q5_K,
    // whose qh words take 4 more a weight set, neither.)
    constexpr bool kPrefetchX = kPrefetch && NT == 1 && !NORM && TL != kQ5Rows;
    constexpr int XB = NT < 4 ? NT : (I8 ? 2 : 4);
    float4 xa[XB], xc[XB];
    auto load_x = [&](int64_t b, int i0, float4 *pa, float4 *pc) {
#pragma unroll
        for (int i = 0; i < XB; i++) {
            if (i0 + i == 0 || i0 + i < ntok) {
                const float *p = xb + (int64_t)(i0 + i) * a.K + b * 256;
                pa[i] = ld_x4(p);
                pc[i] = ld_x4(p + XC);
            }
        }
    };
    // NORM: the norm weight at this lane's x positions of super-block b (1.0 without weight:
    // the same bits as no multiply), shared by the staged tokens.
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    auto load_nw = [&](int64_t b, float4 &pa, float4 &pc) {
        if (NORM && nwb) {
            pa = ld_x4(nwb + b * 256);
            pc = ld_x4(nwb + b * 256 + XC);
        }
    };
    // One matrix: the first super-block's weights are requested before pdl_wait (common.cuh):
    // they are constant, so their DRAM latency overlaps the previous kernel's tail; x (its
    // output) and y (which it may still read) only after. (The 4-warp pair asks L2 for its first
    // super-block instead: into registers before the wait it measured slower, relay gtr-R1; the
    // 3-warp pair, launched in order, nothing: with the L2 requests it was slower, session 13.)
    if (kPrefetch && sb < nsb) {
#pragma unroll
        for (int m = 0; m < NMAT; m++) cur[m] = load(m, sb);
    } else if (NW == kWarps && sb < nsb) {  // the pair: its first super-block into L2 only
#pragma unroll
        for (int m = 0; m < NMAT; m++) {
            prefetch_l2(wg[m] + sb * ly_stride(TL) + 64 * t);
            prefetch_l2(w8[m] + sb * ly_stride(TL) + 64 * t);
        }
    }
    pdl_wait();
    gt_release<TR>(slot);
    // The GEMV's add (one matrix): warp 0 of rank 0 reads its outputs' resid now, so that the
    // store after the reduction does not wait for it.
    constexpr bool kEarlyResid = NT == 1 && NMAT == 1;
    [[maybe_unused]] float rv[NTL * 2];
    if constexpr (kEarlyResid) {
        if (a.epi == EPI_ADD && rank == 0 && w == 0) {
            q6k::for_each_output<NTL>(r0, s.rows, tok0, ntok, lane,
                                      [&](int j, int k, int64_t i, int64_t) {
                                          rv[j * 2 + k] = s.resid[i];
                                      });
        }
    }
    if (kPrefetchX && sb < nsb) load_x(sb, 0, xa, xc);
    // NORM, scale last (norm.cuh): the GEMV's warps leave the partials of the scale here and the
    // storing warp takes the scale after the reduction's barrier, so no barrier waits for the
    // norm before the first super-block; the GEMM's scales first, as the wide GEMMs take them.
    // Who computes the four partials: on the INT8 body two warps take two each, the 4-warp
    // block's warps 2, 3 or the 3-warp pair's warps 0, 1 (those with fewer super-blocks at the 4B
    // shapes, K / 256 = 10), and the others go straight to their weights (4B decode -0.02 ms a
    // token against each warp its own, bench/NOTES.md 7 session 16; choosing between the two by
    // the shape at run time measured as slow as each warp its own); on the f16 body (whose
    // mixed triple spilled with it) each warp its own. (The traced GEMV takes its scale here,
    // as the GEMM: the double-precision scale at the store, beside its stamps' registers,
    // spilled it.)
    if constexpr (NORM && NT == 1 && !TR) {
        const int pw = NW == kWarps ? w - 2 : w;  // I8: the partial warps are pw = 0, 1
        const int v0 = I8 ? 2 * pw : w;
        const int v1 = I8 ? (pw == 0 || pw == 1 ? 2 * pw + 2 : v0) : vwarp_end<NW>(w);
        rms_partials_of(a.x + (int64_t)tok0 * a.K, a.K, a.norm, npart, v0, v1);
    } else if constexpr (NORM) {
        block_rms_scales<NT, NW>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, npart, nscale);
    }
    gt_mark<TR>(slot, 4);
    // This warp's sums of its partials, v[(m * NTL + j) * 2 + k] (acc is left lane-summed).
    constexpr int NV = NMAT * NTL * 2;
    auto partials = [&](float (&v)[NV]) {
#pragma unroll
        for (int m = 0; m < NMAT; m++) {
            if constexpr (I8) {
                q4_i8_lane_sum<NT, NTL>(acc[m], v + m * NTL * 2, lane);
            } else {
#pragma unroll
                for (int j = 0; j < NTL; j++)
#pragma unroll
                    for (int k = 0; k < 2; k++) v[(m * NTL + j) * 2 + k] = acc[m][j][k];
            }
        }
    };
    int vw = w;  // the virtual warp this warp runs (NW == kWarps: w)
    // NW < kWarps: after each virtual warp but this warp's last, its partials as that warp leaves
    // them, then the next one's super-blocks from a fresh sum (NW == kWarps: never)
    auto next_vwarp = [&]() {
        if constexpr (NW < kWarps) {
            if (vw + 1 == vend) return false;
            float pv[NV];
            partials(pv);
            stash_partials<NV>(pv, vw, red);
#pragma unroll
            for (int m = 0; m < NMAT; m++)
#pragma unroll
                for (int j = 0; j < NA; j++) acc[m][j][0] = acc[m][j][1] = 0.0f;
            vw++;
            sb = kWarps * rank + vw;
            return true;
        }
        return false;
    };
    // One super-block step on the weights c (and x cxa, cxc) in hand; one matrix: first the next
    // super-block's into n (nxa, nxc).
    auto run_step = [&](Raw (&c)[NMAT], float4 (&cxa)[XB], float4 (&cxc)[XB], Raw (&n)[NMAT],
                        float4 (&nxa)[XB], float4 (&nxc)[XB]) {
        if (!kPrefetch) {
#pragma unroll
            for (int m = 0; m < NMAT; m++) c[m] = load(m, sb);
        }
        if (kPrefetch && sb + step < nsb) {
#pragma unroll
            for (int m = 0; m < NMAT; m++) n[m] = load(m, sb + step);
            if (kPrefetchX) load_x(sb + step, 0, nxa, nxc);
        }
        // One matrix's L2 lookahead: the super-block after the one in flight (sb + 2 step) into
        // L2, so that its register load next step waits for L2, not DRAM.
        if constexpr (NT == 1 && kPrefetch) {
            const int la = sb + 2 * step;
            if (la < nsb) {
#pragma unroll
                for (int m = 0; m < NMAT; m++) {
                    prefetch_l2(wg[m] + (int64_t)la * ly_stride(TL) + 64 * t);
                    prefetch_l2(w8[m] + (int64_t)la * ly_stride(TL) + 64 * t);
                }
            }
        }
        // The norm weights of this super-block (constant, L2-resident: every block reads them),
        // used a few instructions on; held one step ahead (8 registers) they spilled the GEMV.
        float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
        load_nw(sb, nwa, nwc);
        __syncwarp();
#pragma unroll
        for (int i0 = 0; i0 < NT; i0 += XB) {
            if (!kPrefetchX) load_x(sb, i0, cxa, cxc);
            if constexpr (I8) {
#pragma unroll
                for (int i = 0; i < XB; i++) {
                    if (i0 + i == 0 || i0 + i < ntok) {
                        if (NORM) {
                            stage_q4i8<NT>(st, i0 + i, norm_w4(cxa[i], nwa),
                                           norm_w4(cxc[i], nwc), lane);
                        } else {
                            stage_q4i8<NT>(st, i0 + i, cxa[i], cxc[i], lane);
                        }
                    }
                }
            } else {
                stage_tokens<NT, XB, NORM, true>(st, i0, cxa, cxc, ntok, nscale, nwa, nwc, lane);
            }
        }
        __syncwarp();
        if (sb < step) gt_mark<TR>(slot, 5);  // (the first step)
#pragma unroll
        for (int m = 0; m < NMAT; m++) {
            if constexpr (I8)
                q4_superblock_i8<NT, TL == kQ5Rows, TL == kQ5Rows && NMAT == 2>(c[m], st, lane, acc[m]);
            else q4_superblock<NT, NMAT == 1 ? 2 : 1>(c[m], st, lane, ncol, hit, sel_e, sel_o, acc[m]);
        }
        if (sb < step) gt_mark<TR>(slot, 6);
    };
    do {
        if constexpr (kPingPong) {
            Raw alt[NMAT];
            float4 axa[XB], axc[XB];
            ping_pong(sb, nsb, step, [&](int set) {
                if (set == 0) run_step(cur, xa, xc, alt, axa, axc);
                else run_step(alt, axa, axc, cur, xa, xc);
            });
        } else {
            for (; sb < nsb; sb += step) {
                Raw nxt[NMAT];
                float4 nxa[XB], nxc[XB];
                run_step(cur, xa, xc, nxt, nxa, nxc);
                if (kPrefetch && sb + step < nsb) {  // (~30 moves a step: see kPingPong)
#pragma unroll
                    for (int m = 0; m < NMAT; m++) cur[m] = nxt[m];
                    if (kPrefetchX) {
#pragma unroll
                        for (int i = 0; i < XB; i++) { xa[i] = nxa[i]; xc[i] = nxc[i]; }
                    }
                }
            }
        }
    } while (next_vwarp());

    gt_loop_end<TR>(slot);
    // Warps 0..3 in order, then cluster ranks 0..S-1 in order.
    float v[NV];
    partials(v);
    reduce_partials_as<NV, TR, kXch>(v, vend - 1, red, S, slot, sm.xch);
    // (TR: the block's end; warp 0 of rank 0 after its store)
    // (warp 0's super-blocks: every rank has some, mma_pick_split)
    auto end = [&]() { gt_end<TR>(slot, S, NMAT, (nsb - 1 - kWarps * rank) / step + 1, nsb); };
    if (rank != 0 || w != 0) {
        end();
        return;
    }
    if constexpr (NORM && NT == 1) {  // (every warp's npart is visible: the reduction's barrier)
        const float sc = TR ? nscale[0] : rms_scale(npart, a.K, a.norm.eps);
#pragma unroll
        for (int i = 0; i < NV; i++) v[i] = __fmul_rn(v[i], sc);
    }
    constexpr bool kSc = NORM && NT > 1;  // the GEMM: q4_store takes each token's scale
    if constexpr (kEarlyResid) q4_store<NTL, NMAT, kSc>(a, s, r0, tok0, ntok, lane, v, rv, nscale);
    else q4_store<NTL, NMAT, kSc>(a, s, r0, tok0, ntok, lane, v, nullptr, nscale);
    end();
}

// NW = 3 (the pair GEMV): 5 blocks an SM at 128 registers (4 of 4 warps).
template <int NT, int NMAT, bool NORM, bool I8, int NW = kWarps, int TL = kQ4Rows>
static __global__ void __launch_bounds__(NW * 32, NW < kWarps ? 5 : NT == 1 ? 4 : 2)
    gemv_mma_q4k(const MmaArgs a) {
    __shared__ Q4Smem<NT, NMAT, NORM, I8, NW> sm;
    q4k_tile<NT, NMAT, NORM, I8, false, NW, TL>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x,
                                            (int)blockIdx.y * NT);
}

// The traced GEMV (INT8 body; cuda_bench --gemv-trace): slot from gemv_trace_next().
template <int NMAT, bool NORM>
static __global__ void __launch_bounds__(kThreads, 4) gemv_mma_q4k_tr(const MmaArgs a,
                                                                     unsigned long long *slot) {
    __shared__ Q4Smem<1, NMAT, NORM, true> sm;
    gt_begin(slot);
    q4k_tile<1, NMAT, NORM, true, true>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x, 0, slot);
}

// Launches of the 3-warp pair GEMV so far (loom_cuda_matmul_pair3_launches: tests check it ran).
static std::atomic<int64_t> g_pair3_launches{0};

// Warps a block of the pair GEMV (S ranks, `blocks` blocks): 3 where its blocks fill the SMs in
// one wave at 5 blocks of 3 warps an SM but not at 4 of 4 (the 4B pair, 608 blocks on the
// H200's 132 SMs: 1.15 waves at 4 warps, 0.92 at 3; a 3-warp block takes 4 of the 10 super-blocks
// a warp at K = 2560 instead of 3). LOOM_GEMV_PAIR_WARPS = 3 or 4 forces it.
static int pair_warps(int S, int64_t blocks) {
    if (const int f = gemv_pair_warps()) return f;
    const int64_t sms = sm_count();
    return S == 1 && blocks > 4 * sms && blocks <= 5 * sms ? 3 : kWarps;
}

template <int NT, int NMAT, bool NORM, int TL>
cudaError_t launch_q4k_n(const MmaArgs &a, bool i8, int S, int64_t groups, cudaStream_t stream) {
    const dim3 grid((unsigned)S, (unsigned)groups, (unsigned)a.tile0[a.nseg]);
    const dim3 cl((unsigned)S, 1, 1);
    if (NT == 1 && i8 && !TL) {  // (the traced kernels read rows back to back)
        if (unsigned long long *slot = gemv_trace_next())
            return launch_cluster(gemv_mma_q4k_tr<NMAT, NORM>, grid, cl, kThreads, 0, stream, a, slot);
    }
    // (Q5_K: 4 warps always; its normed pair spilled at 3)
    if constexpr (NT == 1 && NMAT == 2 && TL != kQ5Rows) {
        // In order, without PDL: its blocks fill every SM, and launched early (with the first
        // super-block's L2 requests) they slowed the 4B decode step at long contexts: 2.22
        // ms/token at 4K against 2.02 with 4 warps (at 512 1.80 against 1.88); in order and
        // without the requests 1.97 at 4K, 1.79 at 512 (bench/NOTES.md 7, "Session 13, pw3").
        if (pair_warps(S, (int64_t)S * a.tile0[a.nseg]) == 3) {
            g_pair3_launches.fetch_add(1, std::memory_order_relaxed);
            if (TL || i8)
                return launch_cluster_in_order(gemv_mma_q4k<1, 2, NORM, true, 3, TL>, grid, cl,
                                               3 * 32, 0, stream, a);
            if constexpr (!TL)
                return launch_cluster_in_order(gemv_mma_q4k<1, 2, NORM, false, 3>, grid, cl,
                                               3 * 32, 0, stream, a);
        }
    }
    // Tiles take the INT8 body only (the f16 body's pair spilled with them on sm_87 and sm_90a),
    // and Q5_K has no other.
    if (TL || i8) return launch_cluster(gemv_mma_q4k<NT, NMAT, NORM, true, kWarps, TL>, grid, cl, kThreads, 0, stream, a);
    if constexpr (!TL) return launch_cluster(gemv_mma_q4k<NT, NMAT, NORM, false>, grid, cl, kThreads, 0, stream, a);
    return cudaErrorInvalidValue;  // (not reached: TL)
}

template <int NT, int NMAT>
cudaError_t launch_q4k(const MmaArgs &a, bool norm, bool i8, int S, int64_t groups,
                       cudaStream_t stream) {
    if (a.tiles)
        return norm ? launch_q4k_n<NT, NMAT, true, kQ4Tiles>(a, i8, S, groups, stream)
                    : launch_q4k_n<NT, NMAT, false, kQ4Tiles>(a, i8, S, groups, stream);
    if (a.seg[0].type == LOOM_GGML_Q5_K)
        return norm ? launch_q4k_n<NT, NMAT, true, kQ5Rows>(a, i8, S, groups, stream)
                    : launch_q4k_n<NT, NMAT, false, kQ5Rows>(a, i8, S, groups, stream);
    return norm ? launch_q4k_n<NT, NMAT, true, kQ4Rows>(a, i8, S, groups, stream)
                : launch_q4k_n<NT, NMAT, false, kQ4Rows>(a, i8, S, groups, stream);
}

// ---- The wide GEMM (LOOM_GEMM_WIDE, bench/NOTES.md 4, session 8 pg4) ------------------------
// The GEMM above re-decodes a tile's weights and re-stages x for every group of 8 tokens. The
// wide kernel decodes each weight tile of a super-block ONCE for kWideTok tokens and stages
// each token's x ONCE for 4 tiles: a block of 4 warps owns 4 consecutive 16-row tiles (warp w
// tile 4 blockIdx.y + w; the pair: both matrices of it) and kWideTok tokens (blockIdx.x). All
// warps walk the same super-blocks in the same order, so the block stages x of a super-block
// for all its tokens into one shared Stage (each warp stage_token()s tokens w, w + 4, ...:
// the GEMV's arithmetic, NORM's scales by block_rms_scales as the GEMM's), and each warp
// decodes its tile's A fragments of that super-block into registers (q4_decode: the
// instructions of q4_superblock) and runs every n-tile of 4 tokens against them (q4_ntile:
// q4_superblock's mma chains and fold for one n-tile).
// Bit identity with the GEMV (per token): no cluster; a warp walks the GEMV's partials itself,
// in reduce_partials' order: for rank r = 0..S-1 and warp q = 0..3, partial p = 4r + q sums
// super-blocks p, p + 4S, ... from 0 (the fold of q4_superblock); a rank's value is
// ((p0 + p1) + p2) + p3 and the total ((R0 + R1) + ...) (S = 1: R0 itself), with the S the
// GEMV of the shape takes (mma_pick_split; SPLIT: S > 1). Epilogue q4_store, as the GEMV's.
// Shared memory: one Stage of kWideTok tokens (32 KB) + the norm scratch, two syncs a
// super-block (stage, then compute); each warp's next super-block weights are loaded right
// after its A is decoded (one matrix; the pair after its n-tiles), in flight during the
// n-tiles and the next staging. (A double-buffered stage, 66 KB dynamic, one barrier a
// super-block, measured 5-10% slower: relay pg4-R1, bench/NOTES.md 4.) Registers: 222-228
// (one matrix), 238-255 (the pair), 0 spills on sm_87 and sm_90a; 2 blocks an SM.
// Measured (relay pg4-R1, H200): 4B Q4_K 9728 x 2560 at N = 512 1259 -> 485 us, N = 32 91.7
// -> 52; O + add 2560 x 4096 N = 512 631 -> 222; 8B 14336 x 4096 N = 512 2557 -> 1109.
// LOOM_GEMM_WIDE=1: wide from this many tokens on (relay pg4-R2: at N = 16 the 4B 9728 x 2560
// GEMM 47.0 -> 31.7 us, the normed SwiGLU pair 86.5 -> 74.2; N = 32 91.4 -> 51.5).
constexpr int kWideMinQ4 = 16;

// Tokens a wide block: 32 (the pair with S > 1: 16, its shared memory would exceed 48 KB).
template <int NMAT, bool SPLIT>
constexpr int kWideTok = NMAT == 2 && SPLIT ? 16 : 32;

// The A operands of one super-block of a tile's rows g, g+8 (q4_superblock's a0..a7 of each
// step sp, the min chain's mq, the folds' d and dmin).
struct Q4Dec {
    uint32_t a[8][8];
    uint32_t mq[4];
    float d0, dmin0, d8, dmin8;
};

__device__ __forceinline__ void q4_decode(const Q4Raw &r, bool hit, uint32_t sel_e,
                                          uint32_t sel_o, Q4Dec &A) {
    const Q4Sc s0 = q4_scales(r.h0, hit, sel_e, sel_o);
    const Q4Sc s8 = q4_scales(r.h8, hit, sel_e, sel_o);
    A.mq[0] = s0.me; A.mq[1] = s8.me; A.mq[2] = s0.mo; A.mq[3] = s8.mo;
    A.d0 = s0.d; A.dmin0 = s0.dmin; A.d8 = s8.d; A.dmin8 = s8.dmin;
#pragma unroll
    for (int sp = 0; sp < 8; sp++) {
        const uint32_t w0 = q4w(r.qa0, r.qb0, sp), w8 = q4w(r.qa8, r.qb8, sp);
        const uint32_t v0 = w0 >> 8, v8 = w8 >> 8;
        A.a[sp][0] = hfma2(and_or<0x000F000Fu>(w0, kH1024), s0.se, s0.nse);
        A.a[sp][1] = hfma2(and_or<0x000F000Fu>(w8, kH1024), s8.se, s8.nse);
        A.a[sp][2] = hfma2(and_or<0x00F000F0u>(w0, kH1024), s0.so, s0.nso);
        A.a[sp][3] = hfma2(and_or<0x00F000F0u>(w8, kH1024), s8.so, s8.nso);
        A.a[sp][4] = hfma2(and_or<0x000F000Fu>(v0, kH1024), s0.se, s0.nse);
        A.a[sp][5] = hfma2(and_or<0x000F000Fu>(v8, kH1024), s8.se, s8.nse);
        A.a[sp][6] = hfma2(and_or<0x00F000F0u>(v0, kH1024), s0.so, s0.nso);
        A.a[sp][7] = hfma2(and_or<0x00F000F0u>(v8, kH1024), s8.so, s8.nso);
    }
}

// n-tile j (tokens 4j .. 4j+3 of the Stage) of one decoded super-block into acc (row g, g+8 of
// token 4j + t): q4_superblock's chains (NCH) and fold for that n-tile, the same instructions.
template <int NT, int NCH>
__device__ __forceinline__ void q4_ntile(const Q4Dec &A, const Stage<NT> &st, int j, int lane,
                                         float (&acc)[2]) {
    const int g = lane >> 2, t = lane & 3;
    float c[2][4] = {}, cm[2][4] = {};
#pragma unroll
    for (int sp = 0; sp < 8; sp++) {
        const int ch = NCH == 2 ? (sp & 1) : 0;
        const uint4 b = st.frag[(sp * 2 * NT + 8 * j + g) * 4 + t];
        mma16816(c[ch], A.a[sp][0], A.a[sp][1], A.a[sp][2], A.a[sp][3], b.x, b.y);
        mma16816(cm[ch], A.mq[0], A.mq[1], A.mq[2], A.mq[3], b.x, b.y);
        mma16816(c[ch], A.a[sp][4], A.a[sp][5], A.a[sp][6], A.a[sp][7], b.z, b.w);
        mma16816(cm[ch], A.mq[0], A.mq[1], A.mq[2], A.mq[3], b.z, b.w);
    }
    const float inv = st.sinv[4 * j + t];
    const float c0 = __fadd_rn(__fadd_rn(c[0][0], c[0][1]), __fadd_rn(c[1][0], c[1][1]));
    const float m0 = __fadd_rn(__fadd_rn(cm[0][0], cm[0][1]), __fadd_rn(cm[1][0], cm[1][1]));
    const float c8 = __fadd_rn(__fadd_rn(c[0][2], c[0][3]), __fadd_rn(c[1][2], c[1][3]));
    const float m8 = __fadd_rn(__fadd_rn(cm[0][2], cm[0][3]), __fadd_rn(cm[1][2], cm[1][3]));
    acc[0] = fmaf(__fmul_rn(A.d0, inv), c0, acc[0]);
    acc[0] = fmaf(-__fmul_rn(A.dmin0, inv), m0, acc[0]);
    acc[1] = fmaf(__fmul_rn(A.d8, inv), c8, acc[1]);
    acc[1] = fmaf(-__fmul_rn(A.dmin8, inv), m8, acc[1]);
}

// tot (SPLIT): each lane's sum of the ranks done so far; rk1 (the pair): matrix 1's sum of
// the current rank's partials (both in registers spilled the pair); each element written and
// read by its own lane only.
// (I8: the INT8 body's stage, gemm_wide_q4k_i8; NBUF: its stages, 2 with the pre-pass.)
template <int NT, int NMAT, bool NORM, bool SPLIT, bool I8 = false, int NBUF = 1>
struct WideSmem {
    std::conditional_t<I8, Q4I8WStage<NT>, Stage<NT>> stage[NBUF];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
    float tot[SPLIT ? kWarps * NMAT * NT / 2 * 32 : 1];
    float rk1[NMAT == 2 ? kWarps * NT / 2 * 32 : 1];
};

// The end of partial p = 4 r + q (of np) in a wide warp's walk, both bodies: each matrix m's
// partial (part(m, v) writes this lane's values v[j * 2 + k]: token 4 j + t, row g + 8 k) is added
// to rank r's sum ((p0 + p1) + p2) + p3 (rk; the pair's matrix 1 in rk1, element e at rk1[e *
// 32]), and once p closes rank r (SPLIT) the rank's sum to the ranks' (tot, likewise: ((R0 + R1)
// + ...)): reduce_partials' order. Each element is written and read by its own lane only.
template <int NTL, int NMAT, bool SPLIT, typename Part>
__device__ __forceinline__ void wide_end_partial(int p, int np, Part part,
                                                 float (&rk)[NMAT][NTL][2], float *rk1,
                                                 float *tot) {
    const bool first = (p % kWarps) == 0;
#pragma unroll
    for (int m = 0; m < NMAT; m++) {
        float v[NTL * 2];
        part(m, v);
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int k = 0; k < 2; k++) {
                float &r = m == 1 ? rk1[(j * 2 + k) * 32] : rk[m][j][k];
                r = first ? v[j * 2 + k] : __fadd_rn(r, v[j * 2 + k]);
            }
    }
    if (SPLIT && ((p + 1) % kWarps == 0 || p + 1 == np)) {
        const bool r0f = p < kWarps;
#pragma unroll
        for (int m = 0; m < NMAT; m++)
#pragma unroll
            for (int j = 0; j < NTL; j++)
#pragma unroll
                for (int k = 0; k < 2; k++) {
                    const float r = m == 1 ? rk1[(j * 2 + k) * 32] : rk[m][j][k];
                    float &o = tot[((m * NTL + j) * 2 + k) * 32];
                    o = r0f ? r : __fadd_rn(o, r);
                }
    }
}

// After the walk: the tile's outputs, the ranks' sum (SPLIT: tot) or rank 0's (rk, rk1), through
// q4_store (the GEMV's epilogue; SC: times the block's token scales nsc, scale last).
template <int NTL, int NMAT, bool SPLIT, bool SC = false>
__device__ __forceinline__ void wide_store(const MmaArgs &a, const Seg &s, int64_t r0, int tok0,
                                           int ntok, int lane, const float (&rk)[NMAT][NTL][2],
                                           const float *rk1, const float *tot,
                                           const float *nsc = nullptr) {
    float v[NMAT * NTL * 2];
#pragma unroll
    for (int m = 0; m < NMAT; m++)
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int k = 0; k < 2; k++)
                v[(m * NTL + j) * 2 + k] = SPLIT ? tot[((m * NTL + j) * 2 + k) * 32]
                                           : m == 1 ? rk1[(j * 2 + k) * 32] : rk[m][j][k];
    q4_store<NTL, NMAT, SC>(a, s, r0, tok0, ntok, lane, v, nullptr, nsc);
}

template <int NT, int NMAT, bool NORM, bool SPLIT, bool TL>
static __global__ void __launch_bounds__(kThreads, 2) gemm_wide_q4k(const MmaArgs a, int S) {
    __shared__ WideSmem<NT, NMAT, NORM, SPLIT> sm;
    pdl_launch_dependents();
    constexpr int NTL = NT / 4;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int tok0 = (int)blockIdx.x * NT;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int64_t tiles = a.tile0[a.nseg];
    const bool live = (int64_t)blockIdx.y * kWarps + w < tiles;  // warp-uniform
    const int64_t tile = live ? (int64_t)blockIdx.y * kWarps + w : tiles - 1;
    const uint8_t *wg[NMAT], *w8[NMAT];
    int64_t r0;
    const Seg &s = a.seg[q4_tile_rows<NMAT, TL>(a, tile, g, r0, wg, w8)];
    const bool hit = t >= 2;
    const uint32_t e = 2 * (t & 1);
    const uint32_t sel_e = e * 0x101u + 0x4040u, sel_o = (e + 1) * 0x101u + 0x4040u;
    const int nsb = (int)(a.K / 256);
    const int step = kWarps * S;
    const int np = step < nsb ? step : nsb;  // the non-empty partials: p = 0 .. np - 1
    const int xoff = 64 * (lane & 3) + 4 * (lane >> 2);
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;

    // pt: the partial in progress; rk: its rank's sum so far; tot (SPLIT, shared memory, this
    // lane's column): the ranks' sum, element (m * NTL + j) * 2 + k at tot[that * 32].
    // (The pair keeps matrix 1's rk in shared memory, rk1: rk[1] stays unused.)
    float pt[NMAT][NTL][2], rk[NMAT][NTL][2];
    float *tot = sm.tot + (SPLIT ? w * NMAT * NTL * 2 * 32 + lane : 0);
    float *rk1 = sm.rk1 + (NMAT == 2 ? w * NTL * 2 * 32 + lane : 0);
#pragma unroll
    for (int m = 0; m < NMAT; m++)
#pragma unroll
        for (int j = 0; j < NTL; j++) rk[m][j][0] = rk[m][j][1] = 0.0f;

    Q4Raw cur[NMAT];
    if (live && nsb > 0) {
#pragma unroll
        for (int m = 0; m < NMAT; m++) cur[m] = q4_load(wg[m], w8[m], 0, t, ly_stride(TL));
    }
    pdl_wait();
    if (NORM) block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart, sm.nscale);
    Stage<NT> &st = sm.stage[0];

#pragma unroll 1
    for (int p = 0; p < np; p++) {
#pragma unroll
        for (int m = 0; m < NMAT; m++)
#pragma unroll
            for (int j = 0; j < NTL; j++) pt[m][j][0] = pt[m][j][1] = 0.0f;
#pragma unroll 1
        for (int sb = p; sb < nsb; sb += step) {
            __syncthreads();  // every warp is done with the previous super-block's stage
            float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
            if (NORM && nwb) {
                nwa = ld_x4(nwb + (int64_t)sb * 256);
                nwc = ld_x4(nwb + (int64_t)sb * 256 + 32);
            }
#pragma unroll
            for (int i0 = 0; i0 < NT; i0 += 4 * kWarps) {
                float4 xa[4], xc[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int tk = i0 + kWarps * i + w;
                    if (tk < ntok) {
                        const float *px = xb + (int64_t)tk * a.K + (int64_t)sb * 256;
                        xa[i] = ld_x4(px);
                        xc[i] = ld_x4(px + 32);
                    }
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int tk = i0 + kWarps * i + w;
                    if (tk < ntok) {
                        if (NORM) {  // scale last (norm.cuh)
                            stage_token<NT>(st, tk, norm_w4(xa[i], nwa), norm_w4(xc[i], nwc), lane);
                        } else {
                            stage_token<NT>(st, tk, xa[i], xc[i], lane);
                        }
                    }
                }
            }
            __syncthreads();
            if (live) {
                const int nx = sb + step < nsb ? sb + step : p + 1;  // the walk's next super-block
#pragma unroll
                for (int m = 0; m < NMAT; m++) {
                    // (The pair reloads a matrix's buffer after its n-tiles: its two buffers in
                    // flight beside matrix 0's A spilled.)
                    const bool more = sb + step < nsb || p + 1 < np;
                    Q4Dec A;
                    if (NMAT == 2) {  // (recomputed here: 3 registers fewer across the pair's loop)
                        const int tt = threadIdx.x & 3;
                        const uint32_t ee = 2 * (tt & 1);
                        q4_decode(cur[m], tt >= 2, ee * 0x101u + 0x4040u, (ee + 1) * 0x101u + 0x4040u, A);
                    } else {
                        q4_decode(cur[m], hit, sel_e, sel_o, A);
                    }
                    if (NMAT == 1 && more) cur[m] = q4_load(wg[m], w8[m], nx, t, ly_stride(TL));
#pragma unroll
                    for (int j = 0; j < NTL; j++)
                        if (4 * j < ntok) q4_ntile<NT, NMAT == 1 ? 2 : 1>(A, st, j, lane, pt[m][j]);
                    if (NMAT == 2 && more) cur[m] = q4_load(wg[m], w8[m], nx, t, ly_stride(TL));
                }
            }
        }
        wide_end_partial<NTL, NMAT, SPLIT>(p, np, [&](int m, float *v) {
#pragma unroll
            for (int j = 0; j < NTL; j++) {
                v[j * 2] = pt[m][j][0];
                v[j * 2 + 1] = pt[m][j][1];
            }
        }, rk, rk1, tot);
    }
    if (!live) return;
    wide_store<NTL, NMAT, SPLIT, NORM>(a, s, r0, tok0, ntok, lane, rk, rk1, tot, sm.nscale);
}

// ---- The wide GEMM on the INT8 body (LOOM_GEMV_MMA_Q4K_V=2; bench/NOTES.md 2.4, session 9) ----
// gemm_wide_q4k's block, walk and combination order with q4k_i8_body.cuh's product: the block
// stages x of a super-block once as the GEMV's int8 limbs plus each token's per-sub-block limb
// sums (stage_q4i8w), each warp decodes its tile's A once a super-block (q4_i8_decode: the
// GEMV's A bytes and scales) and runs its tiles of two tokens (q4_i8_wtile: the GEMV's IMMA and
// IMAD for I, one HMMA of the limb sums for the min term M, the same integers as the GEMV's min
// IMMA chain, then the GEMV's fold). A partial ends with the GEMV's lane sum (q4_i8_lane_sum),
// then the partials combine in reduce_partials' order as in gemm_wide_q4k: every token == its
// V = 2 GEMV bits. Tokens a block: kWideTokI8 = 16 (one matrix: 3 blocks an SM, LEAN below).
// (Measured slower and removed: in session 10 the min term by the GEMV's IMMA chain a sub-block,
// 11-19% slower, and the pair at 32 tokens, no gain; in session 11 one matrix at 32 tokens,
// slower than 16 on every Qwen3 shape (relay q4w-R3), and 32 tokens on the limb pre-pass (relay
// p32-R1: at N = 512 Q+K -5% and the pair -2%, but O and down +4-5%; slower at N <= 128 except
// Q+K at 128, even, and the 8B pair at 32, -5%); bench/NOTES.md 2.4.)
constexpr int kWideTokI8 = 16;

// PRE (LOOM_GEMM_WIDE_Q4K_I8=5, the default since session 11): the stages are cp.async copies of
// what the limb pre-pass (q4_limbs_prepass) staged once for the whole matmul into the kernel
// scratch (L), two stages (one for the pair with SPLIT: 48 KB), the next super-block's copy in
// flight during this one's tiles, one barrier a super-block; NORM: the pre-pass staged x * w and
// its scales (L.NS), which the store applies (scale last, norm.cuh). Relay pre-R1 (H200): 4B
// N = 512 O + add 272 -> 171 us, ffn down + add 608 -> 375, Q+K normed 385 -> 197, the pair
// normed 1,098 -> 633 (bench/NOTES.md 2.4).
template <int NMAT, bool NORM, bool SPLIT, bool PRE, int TL>
static __global__ void __launch_bounds__(kThreads, NMAT == 1 ? 3 : 2)
    gemm_wide_q4k_i8(const MmaArgs a, int S, const Q4Limbs L) {
    constexpr int NT = kWideTokI8;
    // LEAN (one matrix, 3 blocks an SM): the next super-block's weights go to L2 only
    // (prefetch) and into registers at the start of their step.
    constexpr bool LEAN = NMAT == 1;
    constexpr int NBUF = PRE && !(NMAT == 2 && SPLIT) ? 2 : 1;
    __shared__ WideSmem<NT, NMAT, NORM, SPLIT, true, NBUF> sm;
    pdl_launch_dependents();
    constexpr int NTL = NT / 4, NP = NT / 2;  // lane-sum slots, two-token tiles
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int tok0 = (int)blockIdx.x * NT;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int64_t tiles = a.tile0[a.nseg];
    const bool live = (int64_t)blockIdx.y * kWarps + w < tiles;  // warp-uniform
    const int64_t tile = live ? (int64_t)blockIdx.y * kWarps + w : tiles - 1;
    const uint8_t *wg[NMAT], *w8[NMAT];
    int64_t r0;
    const Seg &s = a.seg[q4_tile_rows<NMAT, TL>(a, tile, g, r0, wg, w8)];
    const int nsb = (int)(a.K / 256);
    const int step = kWarps * S;
    const int np = step < nsb ? step : nsb;  // the non-empty partials: p = 0 .. np - 1
    const int xoff = q4_i8_xoff(lane);
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;

    // pa: this lane's quarter sums of the partial in progress (tile pp's token 2 pp + (t >> 1));
    // rk / rk1 / tot as gemm_wide_q4k's (after the lane sum: token 4 j + t).
    float pa[NMAT][NP][2], rk[NMAT][NTL][2];
    float *tot = sm.tot + (SPLIT ? w * NMAT * NTL * 2 * 32 + lane : 0);
    float *rk1 = sm.rk1 + (NMAT == 2 ? w * NTL * 2 * 32 + lane : 0);
#pragma unroll
    for (int m = 0; m < NMAT; m++)
#pragma unroll
        for (int j = 0; j < NTL; j++) rk[m][j][0] = rk[m][j][1] = 0.0f;

    Q4RawI8 cur[NMAT];
    if (live && nsb > 0 && !LEAN) {
#pragma unroll
        for (int m = 0; m < NMAT; m++) cur[m] = q4_load_i8<TL == kQ5Rows>(wg[m], w8[m], 0, t, ly_stride(TL));
    }
    // Tokens never staged (a ragged block) keep zero columns and 1 / s = 0 (ordered before the
    // first staging by the loop's barrier; PRE copies the pre-pass's zeros).
    if (!PRE) {
        uint4 *z = reinterpret_cast<uint4 *>(&sm.stage);
        for (int i = threadIdx.x; i < (int)(sizeof(sm.stage) / sizeof(uint4)); i += kThreads)
            z[i] = make_uint4(0u, 0u, 0u, 0u);
    }
    pdl_wait();
    if (NORM && !PRE) block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, sm.npart, sm.nscale);
    if (PRE && nsb > 0) {  // the walk's first super-block, 0
        q4_limbs_copy<NT>(L, 0, tok0, sm.stage[0]);
        cp_async_commit();
    }
    int c = 0;  // the stage of the current super-block (PRE with two stages alternates)

#pragma unroll 1
    for (int p = 0; p < np; p++) {
#pragma unroll
        for (int m = 0; m < NMAT; m++)
#pragma unroll
            for (int j = 0; j < NP; j++) pa[m][j][0] = pa[m][j][1] = 0.0f;
#pragma unroll 1
        for (int sb = p; sb < nsb; sb += step) {
            // the walk's next super-block, if any (computed where used: live across the staging
            // they cost the normed kernel a spill on sm_87)
            auto next_sb = [&]() { return sb + step < nsb ? sb + step : p + 1; };
            auto has_next = [&]() { return sb + step < nsb || p + 1 < np; };
            if (PRE) {
                cp_async_wait<0>();
                // every thread's chunks of stage c have landed, and every warp is done with the
                // other stage (the previous super-block's), which now takes the next one
                __syncthreads();
                if (NBUF == 2 && has_next()) {
                    q4_limbs_copy<NT>(L, next_sb(), tok0, sm.stage[c ^ 1]);
                    cp_async_commit();
                }
            } else {
                Q4I8WStage<NT> &st = sm.stage[0];
                __syncthreads();  // every warp is done with the previous super-block's stage
                float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
                if (NORM && nwb) {
                    nwa = ld_x4(nwb + (int64_t)sb * 256);
                    nwc = ld_x4(nwb + (int64_t)sb * 256 + kQ4I8Xc);
                }
#pragma unroll
                for (int i0 = 0; i0 < NT; i0 += 4 * kWarps) {
                    float4 xa[4], xc[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int tk = i0 + kWarps * i + w;
                        if (tk < ntok) {
                            const float *px = xb + (int64_t)tk * a.K + (int64_t)sb * 256;
                            xa[i] = ld_x4(px);
                            xc[i] = ld_x4(px + kQ4I8Xc);
                        }
                    }
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int tk = i0 + kWarps * i + w;
                        if (tk < ntok) {
                            if (NORM) {  // scale last (norm.cuh)
                                stage_q4i8w<NT>(st, tk, norm_w4(xa[i], nwa), norm_w4(xc[i], nwc),
                                                lane);
                            } else {
                                stage_q4i8w<NT>(st, tk, xa[i], xc[i], lane);
                            }
                        }
                    }
                }
                __syncthreads();
            }
            if (live) {
                const Q4I8WStage<NT> &st = sm.stage[c];
                const int nx = next_sb();
#pragma unroll
                for (int m = 0; m < NMAT; m++) {
                    const bool more = sb + step < nsb || p + 1 < np;
                    Q4I8Dec A;
                    if (LEAN) cur[m] = q4_load_i8<TL == kQ5Rows>(wg[m], w8[m], sb, t, ly_stride(TL));
                    q4_i8_decode<TL == kQ5Rows>(cur[m], t, A);
                    if (LEAN && more) {
                        prefetch_l2(wg[m] + (int64_t)nx * ly_stride(TL) + 64 * t);
                        prefetch_l2(w8[m] + (int64_t)nx * ly_stride(TL) + 64 * t);
                    } else if (NMAT == 1 && more) {
                        cur[m] = q4_load_i8<TL == kQ5Rows>(wg[m], w8[m], nx, t, ly_stride(TL));
                    }
#pragma unroll
                    for (int pp = 0; pp < NP; pp++)
                        if (2 * pp < ntok) q4_i8_wtile<NT>(A, st, pp, lane, pa[m][pp]);
                    if (NMAT == 2 && more) cur[m] = q4_load_i8<TL == kQ5Rows>(wg[m], w8[m], nx, t, ly_stride(TL));
                }
            }
            if (PRE && NBUF == 1 && has_next()) {
                __syncthreads();  // every warp is done with the one stage
                q4_limbs_copy<NT>(L, next_sb(), tok0, sm.stage[0]);
                cp_async_commit();
            }
            if (NBUF == 2) c ^= 1;
        }
        // (the partial's lane sum first: the GEMV's)
        wide_end_partial<NTL, NMAT, SPLIT>(p, np, [&](int m, float *v) {
            q4_i8_lane_sum<NT, NTL>(pa[m], v, lane);
        }, rk, rk1, tot);
    }
    if (!live) return;
    wide_store<NTL, NMAT, SPLIT, NORM>(a, s, r0, tok0, ntok, lane, rk, rk1, tot,
                                      PRE ? L.NS + tok0 : sm.nscale);
}

// The limb pre-pass (one block a token, npad blocks; q4k_i8_body.cuh).
template <bool NORM>
static __global__ void __launch_bounds__(kThreads) q4_prepass(const float *x, int64_t K, int n,
                                                              const PreNorm norm, const Q4Limbs L) {
    q4_limbs_prepass<NORM, true>(x, K, n, norm, L);
}

// The pre-pass into the kernel scratch (runtime.cu scratch(): grown only outside stream capture;
// q4_limbs_bytes(n, K, true) bytes), then the wide INT8 GEMM reading it. Returns
// cudaErrorMemoryAllocation, having launched nothing, when the scratch is short (the caller
// then runs the kernel that stages x itself: the same bits).
template <int NMAT, int TL>
cudaError_t launch_wide_pre(const MmaArgs &a, bool norm, int S, dim3 grid, cudaStream_t stream) {
    void *buf = scratch(q4_limbs_bytes(a.n, a.K, true), stream);
    if (!buf) return cudaErrorMemoryAllocation;
    const Q4Limbs L = q4_limbs_at(buf, a.n, a.K, true);
    cudaError_t e = launch(norm ? q4_prepass<true> : q4_prepass<false>, dim3((unsigned)L.npad),
                           kThreads, 0, stream, a.x, a.K, a.n, a.norm, L);
    if (e != cudaSuccess) return e;
    if (norm) {
        if (S > 1) return launch(gemm_wide_q4k_i8<NMAT, true, true, true, TL>, grid, kThreads, 0, stream, a, S, L);
        return launch(gemm_wide_q4k_i8<NMAT, true, false, true, TL>, grid, kThreads, 0, stream, a, S, L);
    }
    if (S > 1) return launch(gemm_wide_q4k_i8<NMAT, false, true, true, TL>, grid, kThreads, 0, stream, a, S, L);
    return launch(gemm_wide_q4k_i8<NMAT, false, false, true, TL>, grid, kThreads, 0, stream, a, S, L);
}

// i8: the INT8 kernels, on the limb pre-pass where pre (q4_plan's rule) and the scratch is there,
// else staging x in the block; else the f16 body's.
template <int NMAT, bool NORM, int TL>
cudaError_t launch_wide_n(const MmaArgs &a, bool i8, bool pre, int S, cudaStream_t stream) {
    constexpr int NT1 = kWideTok<NMAT, false>, NTS = kWideTok<NMAT, true>;
    const int NT = i8 ? kWideTokI8 : (S > 1 ? NTS : NT1);
    const dim3 grid((unsigned)((a.n + NT - 1) / NT),
                    (unsigned)((a.tile0[a.nseg] + kWarps - 1) / kWarps), 1);
    if (i8 && pre) {  // without scratch (a capture) the kernels below, the same bits
        const cudaError_t e = launch_wide_pre<NMAT, TL>(a, NORM, S, grid, stream);
        if (e != cudaErrorMemoryAllocation) return e;
        (void)cudaGetLastError();
    }
    if (TL || i8) {  // (tiles and Q5_K: the INT8 body only, as launch_q4k_n)
        const Q4Limbs none = {};
        if (S > 1) return launch(gemm_wide_q4k_i8<NMAT, NORM, true, false, TL>, grid, kThreads, 0, stream, a, S, none);
        return launch(gemm_wide_q4k_i8<NMAT, NORM, false, false, TL>, grid, kThreads, 0, stream, a, S, none);
    }
    if constexpr (!TL) {
        if (S > 1) return launch(gemm_wide_q4k<NTS, NMAT, NORM, true, false>, grid, kThreads, 0, stream, a, S);
        return launch(gemm_wide_q4k<NT1, NMAT, NORM, false, false>, grid, kThreads, 0, stream, a, S);
    }
    return cudaErrorInvalidValue;  // (not reached: TL)
}

template <int NMAT>
cudaError_t launch_wide(const MmaArgs &a, bool norm, bool i8, bool pre, int S, cudaStream_t stream) {
    if (a.tiles)
        return norm ? launch_wide_n<NMAT, true, kQ4Tiles>(a, i8, pre, S, stream)
                    : launch_wide_n<NMAT, false, kQ4Tiles>(a, i8, pre, S, stream);
    if (a.seg[0].type == LOOM_GGML_Q5_K)
        return norm ? launch_wide_n<NMAT, true, kQ5Rows>(a, i8, pre, S, stream)
                    : launch_wide_n<NMAT, false, kQ5Rows>(a, i8, pre, S, stream);
    return norm ? launch_wide_n<NMAT, true, kQ4Rows>(a, i8, pre, S, stream)
                : launch_wide_n<NMAT, false, kQ4Rows>(a, i8, pre, S, stream);
}

// ---- The Q4_K_M triple in one launch (bench/NOTES.md 2.3) --------------------------------
// A block runs either a Q4_K tile (q4k_tile: Q or K) or a Q6_K tile (q6k::q6k_tile: V), chosen
// by its cluster slot (blockIdx.z: the Q6_K part's slots first or last, mma_triple_mixed's
// rule: the part with the longer blocks first when the grid exceeds one wave), with each
// part's own split S, the one its own launch would
// take (mma_pick_split of its shape: same super-blocks a warp, same reduction order, so the
// same bits as the two launches). The cluster is C = max(s4, s6) blocks along x, and a part
// with S = 1 < C gives each of the C blocks its own tile (no cluster barrier); parts whose S
// is neither 1 nor C are not mixed (mma_triple_mixed declines).
struct MixArgs {
    MmaArgs q4;       // the Q4_K segments (Q, K): tile ranges as mma_matmul's (NMAT 1)
    q6k::Q6Args q6;   // the Q6_K segment(s) (V): tile ranges as mma_q6k_matmul's
    int s4, s6;       // each part's split: 1 or C = gridDim.x
    int64_t slots6;   // cluster slots of the Q6_K part
    int64_t first6;   // its first slot: 0 (V first) or the Q4_K part's slot count (V last)
};

// One shared-memory block for either body (the Q6_K part's is the larger: 33 KB for the GEMV on
// the f16 body, 37 KB on the INT8 one; 4 blocks an SM still fit on sm_87 and sm_90).
template <int NT, int ST, bool NORM, bool I8, bool T6 = false>
union MixSmem {
    Q4Smem<NT, 1, NORM, I8> q4;
    typename std::conditional<T6, q6k::Q6I8Smem<NT, ST, NORM>, q6k::Q6Smem<NT, ST, NORM>>::type q6;
};

// I8: the Q4_K tiles on the INT8 body (LOOM_GEMV_MMA_Q4K_V=2), as their two-launch path runs
// them. The V tiles: in rows on the f16 body, T6 (TL only) in LOOM_WEIGHT_Q6K_TILES on the INT8
// one, as mma_q6k_matmul runs each (4 blocks an SM either way: 0 spills at 128 registers, the
// INT8 form only since the tiles' aligned windows; session 6 had measured it at 3 blocks an SM,
// slower, bench/NOTES.md 2.3 R3 and 7 "Session 18").
template <int NT, int ST, bool NORM, bool I8, bool TL, bool T6 = false>
static __global__ void __launch_bounds__(kThreads, NT == 1 ? 4 : 2)
    gemv_mma_mixed(const MixArgs m) {
    static_assert(!T6 || (TL && I8), "tiled V beside tiled Q / K on the INT8 body");
    __shared__ MixSmem<NT, ST, NORM, I8, T6> sm;
    const int c = (int)blockIdx.x, C = (int)gridDim.x;
    const int tok0 = (int)blockIdx.y * NT;
    const int64_t slot = blockIdx.z, s6 = slot - m.first6;
    if (s6 >= 0 && s6 < m.slots6) {  // block-uniform branch
        const int64_t tile = s6 * (C / m.s6) + c / m.s6;
        if (tile >= m.q6.tile0[m.q6.nseg]) return;  // only where s6 == 1: no cluster barrier
        if constexpr (T6)
            q6k::q6k_i8_tile<NT, ST, NORM, false, true>(m.q6, sm.q6, tile, c % m.s6, m.s6, tok0);
        else
            q6k::q6k_tile<NT, ST, NORM>(m.q6, sm.q6, tile, c % m.s6, m.s6, tok0);
    } else {
        const int64_t tile = (m.first6 ? slot : slot - m.slots6) * (C / m.s4) + c / m.s4;
        if (tile >= m.q4.tile0[m.q4.nseg]) return;
        q4k_tile<NT, 1, NORM, I8, false, kWarps, TL>(m.q4, sm.q4, tile, c % m.s4, m.s4, tok0);
    }
}

// The traced normed mixed triple (INT8 Q4_K tiles; cuda_bench --gemv-trace): the Q4_K blocks
// write q4k_tile's record, the Q6_K blocks only their start and end (kind 4).
static __global__ void __launch_bounds__(kThreads, 4)
    gemv_mma_mixed_tr(const MixArgs m, unsigned long long *slot) {
    constexpr bool NORM = true;
    __shared__ MixSmem<1, 2, NORM, true> sm;
    gt_begin(slot);
    const int c = (int)blockIdx.x, C = (int)gridDim.x;
    const int64_t slot_i = blockIdx.z, s6 = slot_i - m.first6;
    if (s6 >= 0 && s6 < m.slots6) {
        const int64_t tile = s6 * (C / m.s6) + c / m.s6;
        if (tile >= m.q6.tile0[m.q6.nseg]) return;
        q6k::q6k_tile<1, 2, NORM>(m.q6, sm.q6, tile, c % m.s6, m.s6, 0);
        gt_end<true>(slot, m.s6, 4, 0, (int)(m.q6.K / 256));
    } else {
        const int64_t tile = (m.first6 ? slot_i : slot_i - m.slots6) * (C / m.s4) + c / m.s4;
        if (tile >= m.q4.tile0[m.q4.nseg]) return;
        q4k_tile<1, 1, NORM, true, true>(m.q4, sm.q4, tile, c % m.s4, m.s4, 0, slot);
    }
}

// Fills seg[0..n) and the tile ranges (tile0[i] = first tile of segment i, tile0[n] = the total)
// of a matmul's segments; returns the total.
int64_t fill_tiles(Seg *dst, int64_t *tile0, const Seg *src, int n) {
    int64_t tiles = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = src[i];
        tile0[i] = tiles;
        tiles += (src[i].rows + kTileRows - 1) / kTileRows;
    }
    tile0[n] = tiles;
    return tiles;
}

}  // namespace

// Cluster size for `tiles` 16-row tiles and nsb super-blocks a row (both mma paths): as many
// ranks as stay resident in one wave, each warp keeping >= 2 super-blocks; 1 before sm_90.
// LOOM_GEMV_MMA_SPLIT (1, 2, 4, 8) forces it where it fits.
int mma_pick_split(int64_t tiles, int64_t nsb) {
    if (cc_major() < 9) return 1;
    int S = gemv_mma_split();
    if (S <= 0) {
        // The largest S whose blocks are all resident at once (4 a SM; bench 2026-11-29: at
        // 160 tiles S = 2 beat 1, 4 and 8, which need a second wave).
        const int64_t resident = 4 * (int64_t)sm_count();
        S = 1;
        while (S < kMaxSplit && tiles * 2 * S <= resident && nsb >= (int64_t)kWarps * 2 * S) S *= 2;
    }
    while (S > 1 && nsb < (int64_t)kWarps * S) S /= 2;  // every rank gets work
    return S;
}

bool mma_seg_ok(const Seg &s) {
    return (s.type == LOOM_GGML_Q4_K || s.type == LOOM_GGML_Q5_K) && ((uintptr_t)s.w % 16) == 0 &&
           s.row_bytes % 16 == 0;
}

void route_segments(const Seg *seg, int nseg, Seg *mm, int *nm, Seg *m6, int *n6, Seg *m8,
                    int *n8, Seg *rest, int *nrest) {
    const bool q6 = fast(SW_GEMV_MMA_Q6K), q8 = fast(SW_GEMV_MMA_Q8);
    *nm = *n6 = *n8 = *nrest = 0;
    for (int i = 0; i < nseg; i++) {
        if (mma_seg_ok(seg[i])) mm[(*nm)++] = seg[i];
        else if (q6 && mma_q6k_seg_ok(seg[i])) m6[(*n6)++] = seg[i];
        else if (q8 && mma_q8_seg_ok(seg[i])) m8[(*n8)++] = seg[i];
        else rest[(*nrest)++] = seg[i];
    }
    // One mma launch reads one type and layout (mma_same_launch, mma_q6k_matmul's TL): Q4_K /
    // Q5_K (or Q6_K) segments that mix them take the warp-per-row kernels, which read any.
    for (int i = 1; i < *nm; i++)
        if (!mma_same_launch(mm[i], mm[0])) {
            for (int j = 0; j < *nm; j++) rest[(*nrest)++] = mm[j];
            *nm = 0;
            break;
        }
    for (int i = 1; i < *n6; i++)
        if (m6[i].tiles != m6[0].tiles) {
            for (int j = 0; j < *n6; j++) rest[(*nrest)++] = m6[j];
            *n6 = 0;
            break;
        }
}

// Launches of the wide GEMM so far (loom_cuda_matmul_wide_launches: tests check the path ran).
static std::atomic<int64_t> g_wide_launches{0};

// Tokens a launch of mma_matmul at most (token groups of kGemmTok: 65535 a launch).
static constexpr int64_t kPerLaunch = 65535 * (int64_t)kGemmTok;

// What mma_matmul runs for one launch of n tokens over segments seg (written once, for it and
// for the scratch query mma_scratch_bytes): nmat (2: two matrices of one shape from the same x,
// the pair with or without SwiGLU, share the block: one staging of x for both, and the same dots
// bit for bit in both epilogues), the row tiles (of one matrix for the pair), whether the wide
// GEMM runs (either body: gemm_wide_q4k, gemm_wide_q4k_i8; the GEMV, n = 1, never) and whether
// on the limb pre-pass. LOOM_GEMM_WIDE = n >= 2: wide from n tokens on; 0: never; 1 (the
// default): from kWideMinQ4 tokens on, and on the INT8 body only where its blocks (16 tokens x
// 4 tiles) number at least 0.4 x the SMs: below that the 8-token GEMM (S x ceil(n / 8) x tiles
// blocks) fills the GPU better. Relay pre-R1 (H200, 132 SMs, N = 16, 8-token vs wide on the
// pre-pass): 4B attention output + add 2560 x 4096 30.2 vs 36.2 us (40 blocks), ffn down + add
// 2560 x 9728 60.8 vs 75.9 (40); Q+K 5120 x 2560 normed 51.6 vs 24.1 (80), the pair 2 x 9728
// 106.7 vs 41.2 (152); at N = 32 the wide kernel won every shape (O 51.0 vs 36.4: 80 blocks).
// Relay p32-R1 (8B, N = 16): attention output + add 4096 x 4096 40.8 vs 34.7 (64 blocks: half
// the SMs, 66, had sent it to the 8-token GEMM), down + add 4096 x 14336 111.5 vs 111.8 (64);
// 0.4 x 132 = 52.8 lies between the 4B's 40 and the 8B's 64.
struct Q4Plan {
    int nmat;
    int64_t tiles;
    bool i8, wide, pre;
};

static Q4Plan q4_plan(const Seg *seg, int nseg, int epi, int64_t n) {
    Q4Plan p;
    p.nmat = epi == EPI_SWIGLU || (epi == EPI_PLAIN && nseg == 2 && seg[0].rows == seg[1].rows) ? 2 : 1;
    p.tiles = 0;
    for (int i = 0; i < (p.nmat == 2 ? 1 : nseg); i++) p.tiles += (seg[i].rows + kTileRows - 1) / kTileRows;
    // (tiles and Q5_K: the INT8 body only, launch_q4k_n)
    p.i8 = mma_q4k_variant() == 2 || seg[0].tiles || seg[0].type == LOOM_GGML_Q5_K;
    const int wset = gemm_wide_min();
    if (wset == 1) {
        const int64_t blocks = (n + kWideTokI8 - 1) / kWideTokI8 * ((p.tiles + kWarps - 1) / kWarps);
        p.wide = n >= kWideMinQ4 && (!p.i8 || 5 * blocks >= 2 * (int64_t)sm_count());
    } else {
        p.wide = wset > 1 && n >= wset;
    }
    p.pre = p.wide && p.i8 && gemm_wide_q4k_i8_form() == 5;
    return p;
}

loom_status mma_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K, int64_t n,
                       const PreNorm *norm, loom_error *err, cudaStream_t stream) {
    if (n <= 0) return LOOM_OK;
    MmaArgs a = {};
    const Q4Plan plan = q4_plan(seg, nseg, epi, n);
    const int nmat = plan.nmat;
    const int64_t tiles = plan.tiles;
    if (nmat == 2) {
        a.seg[0] = seg[0];
        a.seg[1] = seg[1];
        a.nseg = 1;  // one tile range, both matrices per tile
        a.tile0[0] = 0;
        a.tile0[1] = tiles;
    } else {
        a.nseg = nseg;
        fill_tiles(a.seg, a.tile0, seg, nseg);
    }
    if (tiles == 0) return LOOM_OK;
    if (tiles > 65535)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "matmul (mma): %lld row tiles > 65535", (long long)tiles);
    for (int i = 1; i < nseg; i++)  // (route_segments and run_matmul keep them apart)
        if (!mma_same_launch(seg[i], seg[0]))
            ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                     "matmul (mma): weights of two types or layouts in one launch");
    a.tiles = seg[0].tiles;
    a.epi = epi;
    a.x = x;
    a.K = K;
    if (norm) a.norm = *norm;
    const bool nm = norm != nullptr;
    const bool i8 = plan.i8;
    // The SwiGLU pair counts both matrices, so it splits as the pair without epilogue does
    // (the same S: silu(a) * b of the same bits).
    const int S = mma_pick_split(tiles * nmat, K / 256);
    for (int64_t t0 = 0; t0 < n; t0 += kPerLaunch) {
        const int64_t nn = n - t0 < kPerLaunch ? n - t0 : kPerLaunch;
        const MmaArgs b = token_slice(a, t0, nn);
        const int64_t groups = nn == 1 ? 1 : (nn + kGemmTok - 1) / kGemmTok;
        const Q4Plan pl = nn == n ? plan : q4_plan(seg, nseg, epi, nn);
        cudaError_t e;
        if (pl.wide) {
            e = nmat == 2 ? launch_wide<2>(b, nm, i8, pl.pre, S, stream)
                          : launch_wide<1>(b, nm, i8, pl.pre, S, stream);
            g_wide_launches.fetch_add(1, std::memory_order_relaxed);
        }
        else if (nn == 1)
            e = nmat == 2 ? launch_q4k<1, 2>(b, nm, i8, S, groups, stream)
                          : launch_q4k<1, 1>(b, nm, i8, S, groups, stream);
        else
            e = nmat == 2 ? launch_q4k<kGemmTok, 2>(b, nm, i8, S, groups, stream)
                          : launch_q4k<kGemmTok, 1>(b, nm, i8, S, groups, stream);
        CUDA_CHECK(e);
    }
    return LOOM_OK;
}

size_t mma_scratch_bytes(const Seg *seg, int nseg, int epi, int64_t K, int64_t n) {
    const int64_t nn = n < kPerLaunch ? n : kPerLaunch;  // the largest launch
    return q4_plan(seg, nseg, epi, nn).pre ? q4_limbs_bytes(nn, K, true) : 0;
}

std::atomic<int64_t> g_mixed_launches{0};

template <bool TL>
static cudaError_t launch_mixed(const MixArgs &m, bool norm, bool i8, dim3 grid, dim3 cl,
                                cudaStream_t stream) {
    if (TL && m.q6.seg[0].tiles)  // the V tiles in tiles too (mma_triple_mixed: Q / K in tiles)
        return norm ? launch_cluster(gemv_mma_mixed<1, 2, true, true, true, true>, grid, cl, kThreads, 0, stream, m)
                    : launch_cluster(gemv_mma_mixed<1, 2, false, true, true, true>, grid, cl, kThreads, 0, stream, m);
    if (TL || i8)  // (tiles: the INT8 body only, as launch_q4k_n)
        return norm ? launch_cluster(gemv_mma_mixed<1, 2, true, true, TL>, grid, cl, kThreads, 0, stream, m)
                    : launch_cluster(gemv_mma_mixed<1, 2, false, true, TL>, grid, cl, kThreads, 0, stream, m);
    if constexpr (!TL)
        return norm ? launch_cluster(gemv_mma_mixed<1, 2, true, false, false>, grid, cl, kThreads, 0, stream, m)
                    : launch_cluster(gemv_mma_mixed<1, 2, false, false, false>, grid, cl, kThreads, 0, stream, m);
    return cudaErrorInvalidValue;  // (not reached: TL)
}

loom_status mma_triple_mixed(const Seg *s4, int n4, const Seg *s6, int n6, const float *x,
                             int64_t K, int64_t n, const PreNorm *norm, bool *ran,
                             loom_error *err, cudaStream_t stream) {
    *ran = false;
    // The GEMV only (the GEMM keeps its two launches: the same bits a token either way); the
    // Q6_K tiles on the body the triple's two-launch path runs them on (mma_q6k_matmul's f16
    // role: in rows the f16 body whatever LOOM_GEMV_MMA_Q6K_V says, q6k_tile; in
    // LOOM_WEIGHT_Q6K_TILES the INT8 one, q6k_i8_tile); the Q4_K part one matrix a tile (two
    // Q4_K segments of equal rows run as the pair kernel).
    if (n != 1 || n4 < 1 || n4 > 2 || n6 < 1 || n6 > 3) return LOOM_OK;
    if (n4 == 2 && s4[0].rows == s4[1].rows) return LOOM_OK;
    if (s4[0].type != LOOM_GGML_Q4_K) return LOOM_OK;  // (Q5_K: the two launches)
    // Q6_K tiles (one layout: route_segments) only beside Q4_K tiles (the T6 kernel's pairing)
    if (s6[0].tiles && !s4[0].tiles) return LOOM_OK;
    MixArgs m = {};
    m.q4.nseg = n4;
    m.q6.nseg = n6;
    const int64_t t4 = fill_tiles(m.q4.seg, m.q4.tile0, s4, n4);
    const int64_t t6 = fill_tiles(m.q6.seg, m.q6.tile0, s6, n6);
    if (t4 == 0 || t6 == 0) return LOOM_OK;
    const int S4 = mma_pick_split(t4, K / 256), S6 = mma_pick_split(t6, K / 256);
    const int C = S4 > S6 ? S4 : S6;
    if ((S4 != 1 && S4 != C) || (S6 != 1 && S6 != C)) return LOOM_OK;
    m.s4 = S4;
    m.s6 = S6;
    const int64_t per4 = C / S4, per6 = C / S6;  // tiles a cluster slot
    m.slots6 = (t6 + per6 - 1) / per6;
    const int64_t slots4 = (t4 + per4 - 1) / per4, slots = m.slots6 + slots4;
    // Slot order. One wave (4 blocks an SM): the Q6_K tiles first (their cp.async stages go out
    // first; 4B: 448 blocks, R1 graph 64.2 vs 64.9 us a layer V last). More than one wave: the
    // part whose blocks carry more work first, so the other part's shorter blocks fill the tail
    // (8B: 576 blocks, a Q4_K block 16 super-blocks, a Q6_K one 4 at ~1.6x the instructions
    // (NOTES 2.1: 706 vs 432 SASS): V last, R1 alone 13.6 vs 16.5 us V first).
    // LOOM_GEMV_TRIPLE_MIXED=2 forces V last, 3 V first.
    const int sel = gemv_triple_mixed();
    bool v_first = sel != 2;
    if (sel == 1 && slots * C > 4 * (int64_t)sm_count())
        v_first = 16 * (K / 256 / S6) >= 10 * (K / 256 / S4);
    m.first6 = v_first ? 0 : slots4;
    if (slots > 65535) return LOOM_OK;
    m.q4.tiles = s4[0].tiles;  // (route_segments: one layout)
    m.q4.epi = m.q6.epi = EPI_PLAIN;
    m.q4.x = m.q6.x = x;
    m.q4.K = m.q6.K = K;
    m.q4.n = m.q6.n = 1;
    if (norm) m.q4.norm = m.q6.norm = *norm;
    *ran = true;
    const dim3 grid((unsigned)C, 1, (unsigned)slots), cl((unsigned)C, 1, 1);
    const bool i8 = mma_q4k_variant() == 2;
    cudaError_t e;
    // (traced: the normed triple, as the executor runs it; the plain one's traced kernel spilled)
    unsigned long long *tslot = i8 && norm && !m.q4.tiles ? gemv_trace_next() : nullptr;
    if (tslot)
        e = launch_cluster(gemv_mma_mixed_tr, grid, cl, kThreads, 0, stream, m, tslot);
    else if (m.q4.tiles)
        e = launch_mixed<true>(m, norm != nullptr, i8, grid, cl, stream);
    else
        e = launch_mixed<false>(m, norm != nullptr, i8, grid, cl, stream);
    CUDA_CHECK(e);
    g_mixed_launches.fetch_add(1, std::memory_order_relaxed);
    return LOOM_OK;
}

// The GEMV phase trace's records and state (loom_cuda_gemv_trace; bench/debug only).
__device__ unsigned long long g_gemv_trace[kGtSlots][kGtBlocks][kGtWords];
static bool g_gt_on = false;
static int g_gt_next = 0;

unsigned long long *gemv_trace_next() {
    if (!g_gt_on) return nullptr;
    void *p = nullptr;
    if (cudaGetSymbolAddress(&p, g_gemv_trace) != cudaSuccess) return nullptr;
    return static_cast<unsigned long long *>(p) + (size_t)(g_gt_next++ % kGtSlots) * kGtBlocks * kGtWords;
}

}  // namespace loom_cuda

extern "C" loom_status loom_cuda_gemv_trace(int on, loom_error *err) {
    using namespace loom_cuda;
    if (on) {
        void *p = nullptr;
        CUDA_CHECK(cudaGetSymbolAddress(&p, g_gemv_trace));
        CUDA_CHECK(cudaMemset(p, 0, sizeof(g_gemv_trace)));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    g_gt_on = on != 0;
    g_gt_next = 0;
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_gemv_trace_read(uint64_t *out, size_t n_words, loom_error *err) {
    using namespace loom_cuda;
    const size_t all = sizeof(g_gemv_trace) / sizeof(uint64_t);
    if (!out || n_words > all)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "gemv trace: %zu words (at most %zu)", n_words, all);
    CUDA_CHECK(cudaMemcpyFromSymbol(out, g_gemv_trace, n_words * sizeof(uint64_t)));
    return LOOM_OK;
}

extern "C" int64_t loom_cuda_matmul_wide_launches(void) { return loom_cuda::g_wide_launches.load(); }
extern "C" int64_t loom_cuda_matmul_pair3_launches(void) { return loom_cuda::g_pair3_launches.load(); }

// The scratch of one matmul-family call: gemv.cu run_matmul's routing of its segments
// (route_segments: mma Q4_K, mma Q6_K with a triple's V on the f16 body below 64 tokens, or the
// warp-per-row kernels, which use none), each family's share from its launcher's own rule, the
// largest (the launches run one after the other on the call's stream). A weight without data is
// taken as aligned (the reservation's bound).
extern "C" size_t loom_cuda_matmul_scratch_bytes(loom_matmul_role role, const loom_kweight *w,
                                                 int64_t n) {
    using namespace loom_cuda;
    if (!w || n < 2 || !mma_paths_on()) return 0;
    const int nw = role == LOOM_MATMUL_ROLE_TRIPLE ? 3 : role >= LOOM_MATMUL_ROLE_PAIR ? 2 : 1;
    const int64_t K = w[0].cols;
    if (K < 256) return 0;
    Seg seg[3] = {}, mm[3], m6[3], m8[3], rest[3];
    for (int i = 0; i < nw; i++) {
        seg[i].w = static_cast<const uint8_t *>(w[i].data);
        seg[i].rows = w[i].rows;
        seg[i].row_bytes = loom_ggml_row_bytes((uint32_t)w[i].type, K);
        seg[i].type = (int)w[i].type;
        seg[i].tiles = w[i].layout != LOOM_WEIGHT_ROWS;
    }
    if (role == LOOM_MATMUL_ROLE_SWIGLU) {  // (gemv.cu run_matmul's choice for the pair)
        if (mma_q8_pair_ok(seg[0], seg[1]))
            return mma_q8_scratch_bytes(n, K);
        return mma_seg_ok(seg[0]) && mma_seg_ok(seg[1]) && mma_same_launch(seg[0], seg[1])
                   ? mma_scratch_bytes(seg, 2, EPI_SWIGLU, K, n)
                   : 0;
    }
    int nm, n6, n8, nrest;
    route_segments(seg, nw, mm, &nm, m6, &n6, m8, &n8, rest, &nrest);
    const size_t b4 = nm ? mma_scratch_bytes(mm, nm, role == LOOM_MATMUL_ROLE_ADD ? EPI_ADD : EPI_PLAIN, K, n) : 0;
    const size_t b6 = n6 ? mma_q6k_scratch_bytes(n, K, nw == 3, m6[0].tiles != 0) : 0;
    const size_t b8 = n8 ? mma_q8_scratch_bytes(n, K) : 0;
    const size_t b = b4 > b6 ? b4 : b6;
    return b > b8 ? b : b8;
}
