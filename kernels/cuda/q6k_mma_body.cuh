// q6k_mma_body.cuh: the Q6_K tensor-core tile body (gemv_mma_q6k.cu's design: the product as two
// exact f16 mma chains sh (q - 32) and sl (q - 32), the k permutation, the cp.async windows of
// the 210-byte blocks in shared memory, the split-K reduction): everything one 128-thread block
// does for one 16-row tile of a Q6_K segment and 1 (GEMV) or up to 8 (GEMM) tokens, as the
// device function q6k_tile(). gemv_mma_q6k.cu's kernels are q6k_tile over their grid;
// gemv_mma.cu's mixed Q4_K_M triple kernel runs it for the triple's V tiles beside the Q4_K
// tiles of Q and K, so both give the same bits (same body, same split S, same reduction order).
//
// Invariants: the shared memory a block needs is Q6Smem (one struct, so a caller can overlay it
// with another body's in a union); the body reads blockIdx/gridDim nowhere (the caller passes
// tile, rank, S and the first token); every thread of the block calls q6k_tile, and with S > 1
// every block of the cluster (ranks 0..S-1 = blockIdx.x of a cluster laid along x).
// The design, the costs and the numeric contract are in gemv_mma_q6k.cu's opening comment.
#pragma once

#include "kernels/cuda/mma_common.cuh"

namespace loom_cuda {
namespace q6k {

constexpr int kTileRows = 16;
constexpr int kGemmTok = 8;
constexpr int kChunks = 14;                     // 16-byte chunks a row window: (b & 15) + 210 <= 224
constexpr int kPitch = kChunks * 16;            // bytes a row in the staging buffer
constexpr int kTileBytes = kTileRows * kPitch;  // 3584: one warp's super-block of a tile
static_assert(kTileRows * kChunks == 7 * 32, "7 chunks a lane");

constexpr uint32_t kHm1032 = 0xE408E408u;  // half2(-1032): 1024 + (sh + 8) -> sh
constexpr uint32_t kHm64h = 0xD408D408u;   // half2(-64.5): (1024 + sh + 8) / 16 -> sh / 16
constexpr uint32_t kHm1056 = 0xE420E420u;  // half2(-1056)
constexpr uint32_t kHm1536 = 0xE600E600u;  // half2(-1536)

// cp.async of one 16-byte-aligned chunk, `bytes` (0..16) of it read, the rest zero-filled.
__device__ __forceinline__ void cp_async16_n(void *smem, const void *gmem, int bytes) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem),
                 "r"(bytes)
                 : "memory");
}

struct Q6Args {
    Seg seg[3];
    int64_t tile0[4];  // first tile of each segment; tile0[nseg] = total tiles
    int nseg;
    int epi;           // EPI_PLAIN (+bias) or EPI_ADD
    const float *x;    // [n][K]
    int64_t K;
    int n;
    PreNorm norm;      // NORM kernels: the RMSNorm folded into the x staging
};

// The segment (0..nseg-1) of tile `tile` of a's ranges (every Q6_K tile body).
__device__ __forceinline__ int q6_seg_of(const Q6Args &a, int64_t tile) {
    int si = 0;
    if (a.nseg > 1 && tile >= a.tile0[1]) si = 1;
    if (a.nseg > 2 && tile >= a.tile0[2]) si = 2;
    return si;
}

// Copies super-block sb of the warp's 16 rows into buf (lane: chunks lane + 32 i, i < 7, chunk
// c = row * 14 + col, so buf + 16 c is its place). roff[i]: byte offset of chunk i's row from
// the tile's first row (rows past the segment clamped to its last row). Bytes of a window past
// its block are copied but never used. TAIL (the segment's last super-block in its last tile,
// a warp-uniform case): a chunk reaching past wend, the segment's end, is copied with 2-byte
// loads up to the block's end and zeros after (a 16-byte read would leave the allocation).
// TL: the segment in LOOM_WEIGHT_Q6K_TILES (cpu_kernels.h): block sb of the tile's 16 rows is
// one run of 16 x 212 = 3,392 bytes at + sb x 3,392 (16-byte aligned), copied as it lies (chunk
// c of the run at buf + 16 c: row i at buf + 212 i, q6_offsets), so a lane's sources are its
// chunks at fixed distances (no row or column arithmetic); roff unused, no tail.
constexpr int kTlChunks = kTileRows * LOOM_Q6K_TILE_PITCH / 16;  // 212
static_assert(kTlChunks * 16 == kTileRows * LOOM_Q6K_TILE_PITCH && kTlChunks <= 7 * 32 &&
                  kTlChunks * 16 <= kTileBytes,
              "a tile's super-block run: whole chunks, at most 7 a lane, inside a warp buffer");
template <bool TAIL, bool TL = false>
__device__ __forceinline__ void q6_issue(uint8_t *buf, const uint8_t *tile_w, const int (&roff)[7],
                                         int64_t sb, int lane, const uint8_t *wend) {
    const uint8_t *base = tile_w + sb * q6k_block_stride(TL);
    if constexpr (TL) {
        const uint8_t *src = base + 16 * lane;  // (chunk lane + 32 i at + 512 i: immediates)
        uint8_t *dst = buf + 16 * lane;
#pragma unroll
        for (int i = 0; i < 7; i++)
            if (lane + 32 * i < kTlChunks) cp_async16_n(dst + 512 * i, src + 512 * i, 16);
    } else {
#pragma unroll
        for (int i = 0; i < 7; i++) {
            const int c = lane + 32 * i;
            const int col = c - (c / kChunks) * kChunks;
            const uint8_t *b = base + roff[i];
            const uint8_t *a = reinterpret_cast<const uint8_t *>(
                (reinterpret_cast<uintptr_t>(b) & ~(uintptr_t)15) + 16 * col);
            if (!TAIL || a + 16 <= wend) {
                cp_async16_n(buf + 16 * c, a, 16);
            } else {
                const uint8_t *end = b + kQ6KBytes;
#pragma unroll
                for (int k = 0; k < 16; k += 2)
                    reinterpret_cast<uint16_t *>(buf + 16 * c)[k / 2] =
                        a + k < end ? __ldg(reinterpret_cast<const unsigned short *>(a + k))
                                    : (uint16_t)0;
            }
        }
    }
}

// The weight window of a warp's 16-row tile (the three Q6_K tile bodies: q6k_tile,
// q6k_i8_body.cuh's q6k_i8_tile and q6k_i8_wide.cuh's wide GEMM), rows r0 .. r0 + 15 of
// segment s; rows past the segment repeat its last row. TL: s in LOOM_WEIGHT_Q6K_TILES (the
// INT8 bodies only): rows 212 bytes apart inside the tile's runs, every window 4-byte aligned
// at the same offset at every super-block (3,392 = 0 mod 16), and the last window of the
// segment ends at its padding's end, so no tail.
struct Q6Win {
    const uint8_t *w;    // the tile's first row
    const uint8_t *end;  // the segment's end (q6_issue's wend)
    bool tail;           // the segment's last tile
    int roff[7];         // q6_issue's byte offsets of this lane's chunk rows from w (rows)
    // The addresses of rows g and g + 8 (mod 16: the offset of their block inside the 16-byte
    // aligned window, which in rows moves by 210 mod 16 = 2 a super-block; q6_offsets).
    uint32_t ag, a8;
};

template <bool TL = false>
__device__ __forceinline__ Q6Win q6_win(const Seg &s, int64_t r0, int lane) {
    Q6Win v;
    const int g = lane >> 2;
    const int last = (int)(s.rows - 1 - r0);
    // from a row to the next inside the 16-row run of a super-block
    const int pitch = TL ? LOOM_Q6K_TILE_PITCH : (int)s.row_bytes;
    if (TL) {
        const int64_t tb = 16 * (s.row_bytes / kQ6KBytes) * LOOM_Q6K_TILE_PITCH;  // a tile
        v.w = s.w + (r0 >> 4) * tb;
        v.end = s.w + (s.rows >> 4) * tb;
    } else {
        v.w = s.w + r0 * s.row_bytes;
        v.end = s.w + s.rows * s.row_bytes;
    }
    v.tail = !TL && r0 + kTileRows >= s.rows;
#pragma unroll
    for (int i = 0; i < 7; i++) {
        const int r = (lane + 32 * i) / kChunks;
        v.roff[i] = TL ? 0 : (r < last ? r : last) * pitch;  // (q6_issue's TL form needs none)
    }
    const int rowg = g < last ? g : last, row8 = g + 8 < last ? g + 8 : last;
    v.ag = (uint32_t)reinterpret_cast<uintptr_t>(v.w + (int64_t)rowg * pitch);
    v.a8 = (uint32_t)reinterpret_cast<uintptr_t>(v.w + (int64_t)row8 * pitch);
    return v;
}

// Where rows g and g + 8 of super-block sb lie in a warp buffer (q6_issue's windows: the row's
// place plus its block's offset inside the 16-byte aligned window). In tiles (TL) the buffer
// holds the run as it lies: row i at 212 i (4-byte aligned) at every super-block.
template <bool TL = false>
__device__ __forceinline__ void q6_offsets(const Q6Win &win, int64_t sb, int g, int &og, int &o8) {
    if (TL) {
        og = g * LOOM_Q6K_TILE_PITCH;
        o8 = (g + 8) * LOOM_Q6K_TILE_PITCH;
    } else {
        const uint32_t sh = (uint32_t)sb * 2u;  // 210 sb mod 16 = 2 sb mod 16
        og = g * kPitch + (int)((win.ag + sh) & 15u);
        o8 = (g + 8) * kPitch + (int)((win.a8 + sh) & 15u);
    }
}

// q6_issue of super-block sb (of nsb) of the window into buf, the tail form where it applies.
template <bool TL = false>
__device__ __forceinline__ void q6_issue_sb(uint8_t *buf, const Q6Win &v, int64_t sb, int64_t nsb,
                                            int lane) {
    if (!TL && v.tail && sb == nsb - 1) q6_issue<true>(buf, v.w, v.roff, sb, lane, v.end);
    else q6_issue<false, TL>(buf, v.w, v.roff, sb, lane, v.end);
}

// 16 bytes at an even byte offset o of the warp buffer, as 4 words (5 aligned loads, funnel
// shifts), from the word address p = wb + (o >> 2) and the shift sh = (o & 2) * 8: a row's
// loads share one base ((o + 4k) >> 2 = (o >> 2) + k, (o + 4k) & 2 = o & 2).
__device__ __forceinline__ void lds16w(const uint32_t *p, uint32_t sh, uint32_t (&w)[4]) {
    const uint32_t a0 = p[0], a1 = p[1], a2 = p[2], a3 = p[3], a4 = p[4];
    w[0] = __funnelshift_r(a0, a1, sh);
    w[1] = __funnelshift_r(a1, a2, sh);
    w[2] = __funnelshift_r(a2, a3, sh);
    w[3] = __funnelshift_r(a3, a4, sh);
}

// The four scale bytes of a lane's sub-blocks (8h + 2i + u, i = 0..3) of a row as (sl bytes,
// sh + 8 bytes), and d.
struct Q6Sc {
    uint32_t sl, shb;
    float d;
};

// Q6Sc of the row at window offset o0 (even) of the warp buffer wb, from the row's word base
// r = wb + (o0 >> 2) and shift sh = (o0 & 2) * 8.
__device__ __forceinline__ Q6Sc q6_scales_w(const uint32_t *r, uint32_t sh, int h, int u) {
    const uint32_t *p = r + 48 + 2 * h;  // byte 192 + 8h
    const uint32_t a0 = p[0], a1 = p[1], a2 = p[2];
    const uint32_t s0 = __funnelshift_r(a0, a1, sh), s1 = __funnelshift_r(a1, a2, sh);
    const uint32_t S = __byte_perm(s0, s1, u ? 0x7531u : 0x6420u);
    Q6Sc q;
    q.sl = S & 0x0F0F0F0Fu;
    q.shb = ((S >> 4) & 0x0F0F0F0Fu) ^ 0x08080808u;
    // d: bytes 208, 209 of the block, one half of the word at r + 52 (sh is 0 or 16)
    q.d = f16_bits_to_f32((uint16_t)(r[52] >> sh));
    return q;
}

// HFMA2 constants of sub-block i of a row: A_h = e * H + NH, A_l = e * L + NL with e =
// half2(1024 + q) (i < 2) or half2(1024 + 16 q) (i >= 2).
struct Q6K2 {
    uint32_t H, NH, L, NL;
};

template <int I>
__device__ __forceinline__ Q6K2 q6_consts(const Q6Sc &s) {
    constexpr uint32_t sel = I * 0x101u + 0x4040u;
    const uint32_t lr = __byte_perm(s.sl, 0x64646464u, sel);   // 1024 + sl
    const uint32_t hr = __byte_perm(s.shb, 0x64646464u, sel);  // 1024 + sh + 8
    Q6K2 k;
    if (I < 2) {
        k.L = hadd2(lr, kHm1024);
        k.NL = hmul2(k.L, kHm1056);
        k.H = hadd2(hr, kHm1032);
        k.NH = hmul2(k.H, kHm1056);
    } else {
        k.L = hfma2(lr, kH16th, kHm64);  // sl / 16
        k.NL = hmul2(k.L, kHm1536);      // -96 sl
        k.H = hfma2(hr, kH16th, kHm64h); // sh / 16
        k.NH = hmul2(k.H, kHm1536);
    }
    return k;
}

// half2(1024 + q) (I < 2) or half2(1024 + 16 q) (I >= 2) from ql bytes 0, 2 of q (a word, or
// the word >> 8 for bytes 1, 3) and the qh word hs shifted so that sub-block I's bit pair sits
// at bits 4, 5 (I < 2) or 8, 9 (I >= 2): hw << (4 - 2 (I % 2)) for bytes 0, 2, hw >> (4 + 2 (I % 2))
// for bytes 1, 3 (the same shifts serve I and I + 2).
template <int I>
__device__ __forceinline__ uint32_t q6_e(uint32_t q, uint32_t hs) {
    if constexpr (I < 2) return and_or<0x000F000Fu>(q, and_or<0x00300030u>(hs, kH1024));
    else return and_or<0x00F000F0u>(q, and_or<0x03000300u>(hs, kH1024));
}

// The A registers of step (I, k) of rows g, g+8 for both chains (e: bytes 0, 2; o: bytes 1, 3)
// and its two mma per n-tile; b[j]: the staged x of the step pair, staged permuted (q6k_tile):
// k even .x .y, odd .z .w, register pairs the mma takes as they are (no moves).
template <int NTL>
__device__ __forceinline__ void q6_step(bool odd, uint32_t eg, uint32_t og, uint32_t e8,
                                        uint32_t o8, const Q6K2 &kg, const Q6K2 &k8,
                                        const uint4 (&b)[NTL], float (&ch)[NTL][4],
                                        float (&cl)[NTL][4]) {
    const uint32_t ah0 = hfma2(eg, kg.H, kg.NH), ah1 = hfma2(e8, k8.H, k8.NH);
    const uint32_t ah2 = hfma2(og, kg.H, kg.NH), ah3 = hfma2(o8, k8.H, k8.NH);
    const uint32_t al0 = hfma2(eg, kg.L, kg.NL), al1 = hfma2(e8, k8.L, k8.NL);
    const uint32_t al2 = hfma2(og, kg.L, kg.NL), al3 = hfma2(o8, k8.L, k8.NL);
#pragma unroll
    for (int j = 0; j < NTL; j++) {
        const uint32_t b0 = odd ? b[j].z : b[j].x;
        const uint32_t b1 = odd ? b[j].w : b[j].y;
        mma16816(ch[j], ah0, ah1, ah2, ah3, b0, b1);
        mma16816(cl[j], al0, al1, al2, al3, b0, b1);
    }
}

// Steps (P, k) and (P + 2, k), k = 0..3, for rows g, g+8 (ql words qg, q8 of region P, qh words
// hg, h8): sub-blocks P and P + 2 share their ql words (low / high nibbles) and qh shifts.
// bcol: this lane's B column in n-tile 0 (g, or g % 2 for the GEMV).
template <int NS, int NTL, int P>
__device__ __forceinline__ void q6_steps(const uint32_t (&qg)[4], const uint32_t (&q8)[4],
                                         const uint32_t (&hg)[4], const uint32_t (&h8)[4],
                                         const Q6Sc &sg, const Q6Sc &s8, const Stage<NS> &st,
                                         int bcol, int t, float (&ch)[2][NTL][4],
                                         float (&cl)[2][NTL][4]) {
    const Q6K2 kg = q6_consts<P>(sg), k8 = q6_consts<P>(s8);
    const Q6K2 kg2 = q6_consts<P + 2>(sg), k82 = q6_consts<P + 2>(s8);
#pragma unroll
    for (int kk = 0; kk < 4; kk += 2) {
        uint4 b[NTL], b2[NTL];
#pragma unroll
        for (int j = 0; j < NTL; j++) {
            b[j] = st.frag[((2 * P + kk / 2) * 2 * NS + 8 * j + bcol) * 4 + t];
            b2[j] = st.frag[((2 * (P + 2) + kk / 2) * 2 * NS + 8 * j + bcol) * 4 + t];
        }
#pragma unroll
        for (int k = kk; k < kk + 2; k++) {
            const uint32_t gq = qg[k] >> 8, gh = hg[k] << (4 - 2 * P), gho = hg[k] >> (4 + 2 * P);
            const uint32_t eq = q8[k] >> 8, eh = h8[k] << (4 - 2 * P), eho = h8[k] >> (4 + 2 * P);
            q6_step<NTL>(k & 1, q6_e<P>(qg[k], gh), q6_e<P>(gq, gho), q6_e<P>(q8[k], eh),
                         q6_e<P>(eq, eho), kg, k8, b, ch[k & 1], cl[k & 1]);
            q6_step<NTL>(k & 1, q6_e<P + 2>(qg[k], gh), q6_e<P + 2>(gq, gho),
                         q6_e<P + 2>(q8[k], eh), q6_e<P + 2>(eq, eho), kg2, k82, b2, ch[k & 1],
                         cl[k & 1]);
        }
    }
}

// One super-block of rows g, g+8 from the warp's buffer (row windows at og, o8 bytes, window
// offsets included) against the staged x: acc[j][0] (row g), acc[j][1] (row g+8) of the token
// in this lane's slot t of n-tile j. Each row's loads come from one word base (lds16w).
template <int NS, int NTL>
__device__ __forceinline__ void q6_superblock(const uint32_t *wb, int og, int o8,
                                              const Stage<NS> &st, int lane, int bcol,
                                              float (&acc)[NTL][2]) {
    const int t = lane & 3, h = t >> 1, u = t & 1;
    const uint32_t *rg = wb + (og >> 2), *r8 = wb + (o8 >> 2);
    const uint32_t fg = (uint32_t)(og & 2) * 8, f8 = (uint32_t)(o8 & 2) * 8;
    uint32_t hg[4], h8[4];
    lds16w(rg + 32 + 8 * h + 4 * u, fg, hg);  // byte 128 + 32h + 16u
    lds16w(r8 + 32 + 8 * h + 4 * u, f8, h8);
    const Q6Sc sg = q6_scales_w(rg, fg, h, u);
    const Q6Sc s8 = q6_scales_w(r8, f8, h, u);
    float ch[2][NTL][4] = {}, cl[2][NTL][4] = {};
#pragma unroll
    for (int p = 0; p < 2; p++) {
        uint32_t qg[4], q8[4];
        lds16w(rg + 16 * h + 8 * p + 4 * u, fg, qg);  // byte 64h + 32p + 16u
        lds16w(r8 + 16 * h + 8 * p + 4 * u, f8, q8);
        if (p == 0) q6_steps<NS, NTL, 0>(qg, q8, hg, h8, sg, s8, st, bcol, t, ch, cl);
        else q6_steps<NS, NTL, 1>(qg, q8, hg, h8, sg, s8, st, bcol, t, ch, cl);
    }
#pragma unroll
    for (int j = 0; j < NTL; j++) {
        const float inv = st.sinv[4 * j + t];
        // row g: columns 2t (hi) + 2t+1 (lo) = elements 0, 1; row g+8: elements 2, 3
        const float hg0 = __fadd_rn(__fadd_rn(ch[0][j][0], ch[0][j][1]), __fadd_rn(ch[1][j][0], ch[1][j][1]));
        const float lg0 = __fadd_rn(__fadd_rn(cl[0][j][0], cl[0][j][1]), __fadd_rn(cl[1][j][0], cl[1][j][1]));
        const float h80 = __fadd_rn(__fadd_rn(ch[0][j][2], ch[0][j][3]), __fadd_rn(ch[1][j][2], ch[1][j][3]));
        const float l80 = __fadd_rn(__fadd_rn(cl[0][j][2], cl[0][j][3]), __fadd_rn(cl[1][j][2], cl[1][j][3]));
        acc[j][0] = fmaf(__fmul_rn(sg.d, inv), fmaf(16.0f, hg0, lg0), acc[j][0]);
        acc[j][1] = fmaf(__fmul_rn(s8.d, inv), fmaf(16.0f, h80, l80), acc[j][1]);
    }
}

// The outputs a lane holds after reduce_partials (warp 0 of rank 0) in the tensor-core tiles'
// layout: v[j * 2 + k] is token tok0 + 4j + t (t = lane & 3) at row r0 + g + 8k (g = lane >> 2).
// Calls out(j, k, i, r) for each of them that exists (token < tok0 + ntok, row < rows), i =
// tok * rows + r its element index in the [n][rows] output. (gemv_mma.cu's pair writes its
// SwiGLU epilogue through it too.)
template <int NL, typename Out>
__device__ __forceinline__ void for_each_output(int64_t r0, int64_t rows, int tok0, int ntok,
                                                int lane, Out out) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NL; j++) {
        if (4 * j + t >= ntok) continue;
        const int64_t tok = tok0 + 4 * j + t;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int64_t r = r0 + g + 8 * k;
            if (r >= rows) continue;
            out(j, k, tok * rows + r, r);
        }
    }
}

// Writes a Q6_K tile's outputs (both bodies): y = v (+ bias[r], or + resid[i] for EPI_ADD).
template <int NL>
__device__ __forceinline__ void q6_store(const Q6Args &a, const Seg &s, int64_t r0, int tok0,
                                         int ntok, int lane, const float (&v)[NL * 2]) {
    for_each_output<NL>(r0, s.rows, tok0, ntok, lane, [&](int j, int k, int64_t i, int64_t r) {
        float y = v[j * 2 + k];
        if (a.epi == EPI_ADD) y = __fadd_rn(y, s.resid[i]);
        else if (s.bias) y = __fadd_rn(y, s.bias[r]);
        s.y[i] = y;
    });
}

// The block's work as a device function, so that another kernel can run Q6_K tiles (gemv_mma.cu's
// Q4_K_M triple in one launch): tile `tile` (an index over the segments' tiles, a.tile0), K
// share `rank` of S (the cluster's rank; rank 0 reduces in order, mma_common.cuh
// reduce_partials), tokens tok0 .. tok0 + NT - 1 (of a.n). sm: the block's shared memory
// (Q6Smem; the caller may overlay it with another body's, it is all this body touches).
// Every thread of the block calls it; returns once the tile's outputs are written.
// NT: tokens a block (1: GEMV; 8: GEMM groups, the last possibly ragged). ST: weight stages a
// warp. NORM: x RMS-normalized as it is staged (norm.cuh; as gemv_mma.cu: the tokens' scales
// computed by the block after pdl_wait, then (x * scale) * w[k] per staged value), bit for bit
// loom_cuda_rms_norm followed by the plain kernel. Occupancy (the kernels that call it): 4
// blocks an SM for the GEMV (<= 128 registers), 2 for the GEMM.
template <int NT, int ST, bool NORM>
struct Q6Smem {
    __align__(16) uint8_t wbuf[kWarps][ST][kTileBytes];
    Stage<NT> stage[kWarps];
    double npart[NORM ? NT * kWarps : 1];
    float nscale[NT];
    float xch[xch_floats(NT == 1)];  // the GEMV's split sums (reduce_partials)
};

template <int NT, int ST, bool NORM>
__device__ __forceinline__ void q6k_tile(const Q6Args &a, Q6Smem<NT, ST, NORM> &sm,
                                         int64_t tile, int rank, int S, int tok0) {
    pdl_launch_dependents();
    if (NT == 1) cluster_start(S);  // the GEMV: the split's sums meet in rank 0's xch
    double *npart = sm.npart;
    float *nscale = sm.nscale;
    constexpr int NTL = (NT + 3) / 4;
    auto &wbuf = sm.wbuf;
    Stage<NT> *stage = sm.stage;
    static_assert(sizeof(float) * kWarps * NTL * 2 * 32 <= sizeof(sm.wbuf), "red fits in wbuf");
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int ntok = a.n - tok0 < NT ? a.n - tok0 : NT;
    const int si = q6_seg_of(a, tile);
    const Seg &s = a.seg[si];
    const int64_t r0 = (tile - a.tile0[si]) * kTileRows;
    const Q6Win win = q6_win(s, r0, lane);
    const int ncol = 2 * ntok;

    float acc[NTL][2];
#pragma unroll
    for (int j = 0; j < NTL; j++) acc[j][0] = acc[j][1] = 0.0f;

    Stage<NT> &st = stage[w];
    // B without predicates: the GEMM's columns of absent tokens hold zeros (set once); the
    // GEMV's lanes g >= 2 read column g % 2 again (their mma columns are never used).
    for (int i = lane; i < 8 * 2 * NT * 4; i += 32)
        if ((i >> 2) % (2 * NT) >= ncol) st.frag[i] = make_uint4(0u, 0u, 0u, 0u);
    if (lane < (NT < 4 ? 4 : NT) && lane >= ntok) st.sinv[lane] = 0.0f;
    const int bcol = NT == 1 ? (g & 1) : g;
    const int64_t nsb = a.K / 256;
    const int64_t step = (int64_t)kWarps * S;
    // x of lane (t, sp): the 8 values of steps (i, k0), (i, k0 + 1), i = sp / 2, k0 = 2 (sp % 2):
    // 128h + 32i + 16u + 8 (sp % 2) .. +7.
    const int sp = lane >> 2;
    const int xoff = 128 * (t >> 1) + 32 * (sp >> 1) + 16 * (t & 1) + 8 * (sp & 1);
    const float *xb = a.x + (int64_t)tok0 * a.K + xoff;
    int64_t sb = (int64_t)kWarps * rank + w;
    // Weights before the dependent-launch wait (constant inputs, common.cuh); x and y after.
#pragma unroll
    for (int q = 0; q < ST; q++) {
        const int64_t sq = sb + q * step;
        if (sq < nsb) {
            q6_issue_sb(wbuf[w][q], win, sq, nsb, lane);
        }
        cp_async_commit();
    }
    pdl_wait();
    // The GEMV loads x one super-block ahead (registers); the GEMM from L2 when staging. (At 5
    // blocks an SM without the x prefetch, 96 registers: no better, bench/NOTES.md 2.1.)
    constexpr bool kPrefetchX = NT == 1;
    constexpr int XB = NT < 4 ? NT : 4;
    float4 xa[XB], xc[XB];
    auto load_x = [&](int64_t b, int i0, float4 *pa, float4 *pc) {
#pragma unroll
        for (int i = 0; i < XB; i++) {
            if (i0 + i == 0 || i0 + i < ntok) {
                const float *p = xb + (int64_t)(i0 + i) * a.K + b * 256;
                pa[i] = ld_x4(p);
                pc[i] = ld_x4(p + 4);
            }
        }
    };
    // NORM: the norm weight at this lane's x positions of super-block b (1.0 without weight:
    // the same bits as no multiply), shared by the staged tokens.
    const float *nwb = NORM && a.norm.w ? a.norm.w + xoff : nullptr;
    auto load_nw = [&](int64_t b, float4 &pa, float4 &pc) {
        if (NORM && nwb) {
            pa = ld_x4(nwb + b * 256);
            pc = ld_x4(nwb + b * 256 + 4);
        }
    };
    if (kPrefetchX && sb < nsb) load_x(sb, 0, xa, xc);
    if (NORM) block_rms_scales<NT>(a.x + (int64_t)tok0 * a.K, a.K, ntok, a.K, a.norm, npart, nscale);
    for (int q = 0; sb < nsb; sb += step, q = q + 1 == ST ? 0 : q + 1) {
        float4 nxa[XB], nxc[XB];
        const bool more = sb + step < nsb;
        if (kPrefetchX && more) load_x(sb + step, 0, nxa, nxc);
        // The norm weights of this super-block (constant, L2-resident: every block reads them),
        // used a few instructions on; held one step ahead they spilled the Q4_K GEMV.
        float4 nwa = make_float4(1.f, 1.f, 1.f, 1.f), nwc = nwa;
        load_nw(sb, nwa, nwc);
        __syncwarp();
#pragma unroll
        for (int i0 = 0; i0 < NT; i0 += XB) {
            if (!kPrefetchX) load_x(sb, i0, xa, xc);
            // permuted: each step's two B registers side by side (q6_step)
            float4 pa[XB], pc[XB];
#pragma unroll
            for (int i = 0; i < XB; i++) {
                pa[i] = make_float4(xa[i].x, xc[i].x, xa[i].z, xc[i].z);
                pc[i] = make_float4(xa[i].y, xc[i].y, xa[i].w, xc[i].w);
            }
            stage_tokens<NT, XB, NORM>(st, i0, pa, pc, ntok, nscale,
                                       make_float4(nwa.x, nwc.x, nwa.z, nwc.z),
                                       make_float4(nwa.y, nwc.y, nwa.w, nwc.w), lane);
        }
        cp_async_wait<ST - 1>();
        __syncwarp();
        const uint32_t *wb = reinterpret_cast<const uint32_t *>(wbuf[w][q]);
        int og, o8;
        q6_offsets(win, sb, g, og, o8);
        q6_superblock<NT, NTL>(wb, og, o8, st, lane, bcol, acc);
        __syncwarp();  // every lane has read buffer q (and the x stage) before they are refilled
        const int64_t sn = sb + ST * step;
        if (sn < nsb) {
            q6_issue_sb(wbuf[w][q], win, sn, nsb, lane);
        }
        cp_async_commit();
        if (kPrefetchX && more) {
#pragma unroll
            for (int i = 0; i < XB; i++) { xa[i] = nxa[i]; xc[i] = nxc[i]; }
        }
    }
    cp_async_wait<0>();

    // Warps 0..3 in order, then cluster ranks 0..S-1 in order (v[j * 2 + k]); the partials
    // reuse the weight buffers once every warp is done with them.
    __syncthreads();
    float v[NTL * 2];
#pragma unroll
    for (int j = 0; j < NTL; j++)
#pragma unroll
        for (int k = 0; k < 2; k++) v[j * 2 + k] = acc[j][k];
    reduce_partials<NTL * 2, false, NT == 1>(v, reinterpret_cast<float *>(&wbuf[0][0][0]), S,
                                             nullptr, sm.xch);
    if (rank != 0 || w != 0) return;
    q6_store<NTL>(a, s, r0, tok0, ntok, lane, v);
}

}  // namespace q6k
}  // namespace loom_cuda
