// matmul.cuh: what the matmul files share: gemv.cu (the launchers; warp-per-row GEMV),
// gemm.cu (warp-per-row GEMM, N = 2..32 per pass), gemv_mma.cu (tensor cores, Q4_K / Q5_K, any
// N), gemv_mma_q6k.cu (Q6_K) and gemv_mma_q8.cu (Q8_0): the segment description of one weight
// matrix and the entry points. `norm` (NULL: none) folds an RMSNorm of x into the kernel
// (norm.cuh): every entry point then gives bit for bit loom_cuda_rms_norm followed by itself, but
// mma_matmul (the Q4_K / Q5_K tensor-core kernels), which takes the scale last (norm.cuh).
#pragma once

#include <atomic>

#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/quant_blocks.cuh"

namespace loom_cuda {

// Epilogues. PLAIN: y = dot (+ bias[r] when bias). ADD: y = dot + residual (index as y).
// SWIGLU (gemv.cu, gemv_mma.cu): y = silu(dot_A) * dot_B. SWIGLU_FINISH (gemm.cu's second pass):
// y = silu(y) * dot, y holding dot_A from the first pass.
enum Epi : int { EPI_PLAIN = 0, EPI_ADD = 1, EPI_SWIGLU = 2, EPI_SWIGLU_FINISH = 3 };

struct Seg {
    const uint8_t *w;     // rows * row_bytes bytes
    float *y;             // [N][rows]
    const float *bias;    // [rows] or NULL
    const float *resid;   // [N][rows] (EPI_ADD) or NULL
    int64_t rows;
    int64_t row_bytes;
    int type;             // loom_ggml_type
    int wide;             // word loads (Q4_K/Q5_K) / 16-byte loads (F16/BF16/F32) allowed
    int tiles;            // the type's tiles (cpu_kernels.h: LOOM_WEIGHT_Q4K_TILES for Q4_K,
                          // LOOM_WEIGHT_Q6K_TILES for Q6_K; rows % 16 == 0), else rows back to back
};

// Bytes from a block of a Q4_K row to the row's next block: 144, or 16 x 144 in tiles.
__host__ __device__ constexpr int q4k_block_stride(bool tiles) {
    return tiles ? 16 * kQ4KBytes : kQ4KBytes;
}
// The same for Q6_K: 210, or 16 x 212 in tiles (padded blocks).
__host__ __device__ constexpr int q6k_block_stride(bool tiles) {
    return tiles ? 16 * LOOM_Q6K_TILE_PITCH : kQ6KBytes;
}

// Row r's first byte (its block 0): rows back to back, or (tiles) 16-row tiles of 16 row_bytes
// bytes whose rows start 144 bytes apart. gemv_mma.cu's q4_tile_rows spells the same address
// with the layout as a template parameter. Session 17 tried one spelling for both: seg_row
// called there (the layout then a run-time value) spilled four tensor-core kernels, and a
// shared template helper called from here spilled gemv.cu's two-row Q4_K kernels (up to 196
// bytes), so the two stay apart.
__host__ __device__ __forceinline__ const uint8_t *seg_row(const Seg &s, int64_t r) {
    return s.tiles ? s.w + (r >> 4) * 16 * s.row_bytes + (r & 15) * kQ4KBytes
                   : s.w + r * s.row_bytes;
}
// The same for a Q6_K segment, whose tiles pad each block to LOOM_Q6K_TILE_PITCH bytes.
__host__ __device__ __forceinline__ const uint8_t *seg_row_q6(const Seg &s, int64_t r) {
    constexpr int64_t P = LOOM_Q6K_TILE_PITCH;
    return s.tiles ? s.w + (r >> 4) * 16 * (s.row_bytes / kQ6KBytes) * P + (r & 15) * P
                   : s.w + r * s.row_bytes;
}
// Row r's first byte and the block stride of a segment of type T (the warp-per-row kernels).
template <int T>
__host__ __device__ __forceinline__ const uint8_t *seg_row_t(const Seg &s, int64_t r) {
    if constexpr (T == LOOM_GGML_Q6_K) return seg_row_q6(s, r);
    else return seg_row(s, r);
}
template <int T>
__host__ __device__ constexpr int block_stride_t(bool tiles) {
    return T == LOOM_GGML_Q6_K ? q6k_block_stride(tiles) : q4k_block_stride(tiles);
}

// silu exactly as loom_silu: x / (1 + expf(-x)), IEEE division.
__device__ __forceinline__ float silu_f(float x) {
    return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
}

// y[t][r] for t < n (n <= 32), one launch over the rows of seg. Bit-identical per token to the
// GEMV of the same segment. x is [n][K], 16-byte aligned rows.
loom_status gemm_launch(const Seg &seg, const float *x, int64_t n, int64_t K, int epi,
                        const PreNorm *norm, loom_error *err, cudaStream_t stream);

// gemv_mma.cu: which kernels gemv.cu's run_matmul gives a call's segments (not the SwiGLU
// pair's) while the mma paths are on: Q4_K / Q5_K ones (mma_seg_ok) into mm, Q6_K ones into m6
// while LOOM_GEMV_MMA_Q6K is on, Q8_0 ones (mma_q8_seg_ok) into m8 while LOOM_GEMV_MMA_Q8 is on,
// the rest (the warp-per-row kernels) into rest, each in order; the counts through nm, n6, n8,
// nrest. loom_cuda_matmul_scratch_bytes (gemv_mma.cu) asks the same.
void route_segments(const Seg *seg, int nseg, Seg *mm, int *nm, Seg *m6, int *n6, Seg *m8,
                    int *n8, Seg *rest, int *nrest);

// Whether run_matmul sends segments to the tensor-core paths at all (LOOM_FAST_GEMV and
// LOOM_GEMV_MMA not 0; else every matmul runs the warp-per-row kernels).
inline bool mma_paths_on() { return fast(SW_FAST_GEMV) && fast(SW_GEMV_MMA); }

// gemv_mma.cu (tensor cores): true when the segment's type and alignment have an mma path.
bool mma_seg_ok(const Seg &s);
// Whether two mma segments can share one launch: one type (Q4_K or Q5_K) and one layout.
inline bool mma_same_launch(const Seg &a, const Seg &b) {
    return a.type == b.type && a.tiles == b.tiles;
}

// The whole matmul over n >= 1 tokens (any n: one launch per 65535 x 8 tokens) for segments
// that all pass mma_seg_ok: epi EPI_PLAIN (nseg 1..3, biases), EPI_ADD (nseg 1) or EPI_SWIGLU
// (seg[0] gate, seg[1] up, output seg[0].y). Not bit-identical to gemv.cu / gemm.cu; a pair of
// equal shapes gives the same dots with and without SwiGLU.
loom_status mma_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K, int64_t n,
                       const PreNorm *norm, loom_error *err, cudaStream_t stream);

// The kernel scratch mma_matmul takes for n tokens (the wide INT8 GEMM's limb pre-pass), by its
// own rule; 0: none.
size_t mma_scratch_bytes(const Seg *seg, int nseg, int epi, int64_t K, int64_t n);

// gemv_mma_q6k.cu (tensor cores, Q6_K; both layouts): true when the segment is Q6_K with 16-byte aligned
// weights (the kernel copies 16-byte-aligned windows around each 210-byte block, whose offset
// in the window must be even) and rows of at most 2^26 bytes (a tile's row offsets are ints).
bool mma_q6k_seg_ok(const Seg &s);

// The whole matmul over n >= 1 tokens for 1..3 segments that all pass mma_q6k_seg_ok: epi
// EPI_PLAIN (biases) or EPI_ADD (nseg 1). One launch per 65535 x 8 tokens; a GEMM token is
// bit-identical to the GEMV of that token; not bit-identical to gemv.cu / gemm.cu. The loop
// body is LOOM_GEMV_MMA_Q6K_V's, except that f16 (a triple's Q6_K segments, gemv.cu) keeps
// the f16 body below 64 tokens where that switch selects the INT8 one (bench/NOTES.md 2.3: the
// triple's V runs inside the mixed Q4_K_M kernel on the f16 body, and its GEMM of up to 63
// tokens gives the same bits; from 64 tokens on the INT8 wide GEMM, bench/NOTES.md 7.18).
// Segments in LOOM_WEIGHT_Q6K_TILES (all or none of them) take the INT8 body whatever f16 and
// the switch say.
loom_status mma_q6k_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K,
                           int64_t n, const PreNorm *norm, bool f16, loom_error *err,
                           cudaStream_t stream);

// The kernel scratch mma_q6k_matmul takes for n tokens over K columns (f16 as there, tiles:
// the segments in LOOM_WEIGHT_Q6K_TILES; the wide GEMM's limb pre-pass), by its own rule; 0: none.
size_t mma_q6k_scratch_bytes(int64_t n, int64_t K, bool f16, bool tiles);

// gemv_mma_q8.cu (tensor cores, Q8_0): true when the segment is Q8_0 in GGUF rows with K % 256 ==
// 0 (each row's super-block of 8 blocks 16-byte aligned), 16-byte aligned weights and rows of at
// most 2^26 bytes.
bool mma_q8_seg_ok(const Seg &s);

// The whole matmul over n >= 1 tokens for segments that all pass mma_q8_seg_ok: epi EPI_PLAIN
// (nseg 1..3, biases), EPI_ADD (nseg 1) or EPI_SWIGLU (seg[0] gate, seg[1] up of equal rows,
// output seg[0].y; two EPI_PLAIN segments of equal rows run the same kernels, so they give its
// dots). One launch per 65535 x 4 tokens; a GEMM token is bit-identical to the GEMV
// of that token; not bit-identical to gemv.cu / gemm.cu. norm: as gemv.cu's (bit for bit the
// norm launcher followed by the plain kernel). The wide GEMM's limb pre-pass takes kernel
// scratch (mma_q8_scratch_bytes).
loom_status mma_q8_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K, int64_t n,
                          const PreNorm *norm, loom_error *err, cudaStream_t stream);

// The kernel scratch mma_q8_matmul takes for n tokens over K columns (the wide GEMM's limb
// pre-pass), by its own rule; 0: none.
size_t mma_q8_scratch_bytes(int64_t n, int64_t K);

// Whether run_matmul gives a SwiGLU pair (gate g, up u) to mma_q8_matmul (while
// LOOM_GEMV_MMA_Q8 is on); loom_cuda_matmul_scratch_bytes asks the same.
inline bool mma_q8_pair_ok(const Seg &g, const Seg &u) {
    return fast(SW_GEMV_MMA_Q8) && mma_q8_seg_ok(g) && mma_q8_seg_ok(u);
}

// gemv_mma.cu: the GEMV (n == 1, EPI_PLAIN) of Q4_K segments s4 (1 or 2; not two of equal
// rows, which run as the pair) and Q6_K segments s6 (1..3) in ONE launch, bit for bit the two
// launches mma_matmul(s4) + mma_q6k_matmul(s6) (bench/NOTES.md 2.3). *ran = false (and
// LOOM_OK, nothing launched) where it does not apply: n > 1, another shape of the split (each
// part's S must be 1 or the larger S), Q6_K segments in LOOM_WEIGHT_Q6K_TILES beside Q4_K ones
// in rows. The Q6_K tiles run the body mma_q6k_matmul gives them with f16 = true (the triple's
// role): the f16 body in rows, the INT8 body in LOOM_WEIGHT_Q6K_TILES.
loom_status mma_triple_mixed(const Seg *s4, int n4, const Seg *s6, int n6, const float *x,
                             int64_t K, int64_t n, const PreNorm *norm, bool *ran,
                             loom_error *err, cudaStream_t stream);
// Launches of the mixed kernel so far (conformance: the path was taken; atomic: sessions on
// other threads launch too).
extern std::atomic<int64_t> g_mixed_launches;
// LOOM_GEMV_TRIPLE_MIXED (runtime.cu): 0 the two launches, 1 the mixed kernel (the default;
// slot order by mma_triple_mixed's rule), 2 with the Q6_K tiles last, 3 first.
int gemv_triple_mixed();

}  // namespace loom_cuda
