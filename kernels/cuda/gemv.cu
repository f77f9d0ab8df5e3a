// gemv.cu: quantized matrix-vector products y[M] = W[M x K] x[K] and their fused variants
// (add, pair with optional SwiGLU epilogue, triple with per-matrix types and biases), plus the
// launchers of the whole matmul family. Q4_K and Q5_K segments go to the tensor-core kernels of
// gemv_mma.cu, Q6_K segments (plain and add epilogues) to gemv_mma_q6k.cu and Q8_0 segments to
// gemv_mma_q8.cu, for any N (the default; LOOM_GEMV_MMA=0 keeps all four here,
// LOOM_GEMV_MMA_Q6K=0 only Q6_K, LOOM_GEMV_MMA_Q8=0 only Q8_0); the kernels below serve every
// other type, and N > 1 goes to gemm.cu in chunks of 32 tokens.
//
// Launch geometry: 128-thread blocks, one warp per output row, 4 rows per block, grid
// ceil(rows / 4) over the concatenated rows of all segments (a triple's Q, K and V rows follow
// each other; a warp finds its segment with unrolled compares, no dynamic parameter indexing).
// All-Q8_0 or all-Q5_K segments: two rows a warp, 8 a block (gemv_rows2: one read of x for
// both).
// Each warp walks its row in passes of four super-blocks (Q4_K/Q5_K), one (Q6_K), sixteen Q8_0
// blocks, or 256 F16/BF16 / 128 F32 values; lanes own fixed byte groups (quant_blocks.cuh), so
// one pass is one coalesced read. The fast path issues the loads of UNROLL passes (default in
// runtime.cu, LOOM_GEMV_UNROLL) before using them, to keep bytes in flight; the simple path
// (LOOM_FAST_GEMV=0) does one pass at a time with byte loads for Q4_K/Q5_K. Partials are summed per lane in pass order,
// then a xor-butterfly warp reduction; lane 0 applies the epilogue and writes.
//
// Folded RMSNorm (the loom_cuda_*_normed launchers; the plain launchers are the same calls with
// no norm): every kernel of the family normalizes x itself, no norm launch and no scratch:
// the mma kernels while staging x, the warp-per-row GEMV/GEMM through XNormed reads
// (quant_blocks.cuh) after a block reduction of the token scale (norm.cuh). A triple whose V
// is Q6_K launches twice (Q4_K mma, Q6_K mma; both normalize) or, LOOM_GEMV_TRIPLE_MIXED=1,
// once (gemv_mma.cu's mixed kernel, the same bits). Bit for bit
// loom_cuda_rms_norm followed by the plain launcher of the same path; the norm weight must be
// 16-byte aligned (read as float4 beside x).
//
// Memory traffic: every weight byte once from DRAM (streamed), x (K floats) from L1/L2 by
// every warp, y written once. Nothing dequantized is ever stored.
//
// Numeric contract: float32 accumulation in a fixed order, deterministic run to run. Against
// the CPU twin (which sums in another order): |y - y_cpu| <= 1e-5 * sum_k |W[m,k] x[k]| + tiny,
// per element. The uint32 and byte paths of Q4_K/Q5_K are bit-identical; the GEMM (gemm.cu)
// is bit-identical per token; matmul_add equals dot + residual; pair/SwiGLU equals
// silu(dot_a) * dot_b with silu as loom_silu (device expf: within 2 ulp of glibc's).
// Requirements: x 16-byte aligned (read as float4 / float2); K a multiple of the type's block
// size. Q4_K/Q5_K weights not 16-byte aligned take the byte path.
#include <stdio.h>

#include <type_traits>

#include "kernels/cuda/matmul.cuh"

namespace loom_cuda {
namespace {

#ifndef LOOM_GEMV_MINB
#define LOOM_GEMV_MINB 5
#endif
constexpr int kMinBlocks = LOOM_GEMV_MINB;  // blocks an SM the Q4_K/Q5_K kernels are built for

struct GemvArgs {
    Seg seg[3];
    int nseg;
    int epi;
    const float *x;
    int64_t K;
    int normed;    // the RMSNorm `norm` folded into the x reads (the NORM kernels)
    PreNorm norm;
};

// XS: the x source (quant_blocks.cuh: XPlain, or XNormed for a folded RMSNorm).
template <int T, bool WIDE, int UNROLL, class XS>
__device__ __forceinline__ float row_dot(const uint8_t *row, int bs, const XS &x, int64_t K,
                                         int lane) {
    using L = Lane<T>;
    const int64_t np = n_passes<T>(K);
    float acc = 0.0f;
    for (int64_t p0 = 0; p0 < np; p0 += UNROLL) {
        typename L::Raw raw[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (p0 + u < np) raw[u] = L::template load<WIDE>(row, bs, p0 + u, lane, K);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (p0 + u < np) {
                const typename L::X xv = L::template loadx<WIDE>(x, p0 + u, lane, K);
                const typename L::W w = L::template prep<WIDE>(raw[u], row, bs, p0 + u, lane, K);
                acc = __fadd_rn(acc, L::dotw(w, xv));
            }
        }
    }
    return acc;
}

// Two rows' dots of one type over the same x, each pass's x read once for both (Q8_0 and Q5_K,
// whose lanes read x from L1 at four and ~six times their weight bytes: bench/NOTES.md 2.5).
// Each row takes row_dot's operations in row_dot's order, so either result is row_dot's bits.
// (Kept beside row_dot rather than one R-row template: written as row_dot over R rows, R = 1
// changed the registers of 25 warp-per-row kernels and spilled four, the Q4_K_M triple among
// them.) Neither type is ever in tiles, so the block stride is unused.
template <int T, bool WIDE, int UNROLL, class XS>
__device__ __forceinline__ void row_dot2(const uint8_t *row0, const uint8_t *row1, const XS &x,
                                         int64_t K, int lane, float &d0, float &d1) {
    using L = Lane<T>;
    const int64_t np = n_passes<T>(K);
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int64_t p0 = 0; p0 < np; p0 += UNROLL) {
        typename L::Raw raw0[UNROLL], raw1[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (p0 + u < np) {
                raw0[u] = L::template load<WIDE>(row0, 0, p0 + u, lane, K);
                raw1[u] = L::template load<WIDE>(row1, 0, p0 + u, lane, K);
            }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (p0 + u < np) {
                const typename L::X xv = L::template loadx<WIDE>(x, p0 + u, lane, K);
                const typename L::W w0 = L::template prep<WIDE>(raw0[u], row0, 0, p0 + u, lane, K);
                acc0 = __fadd_rn(acc0, L::dotw(w0, xv));
                const typename L::W w1 = L::template prep<WIDE>(raw1[u], row1, 0, p0 + u, lane, K);
                acc1 = __fadd_rn(acc1, L::dotw(w1, xv));
            }
        }
    }
    d0 = acc0;
    d1 = acc1;
}

template <int UNROLL, class XS>
__device__ __forceinline__ float row_dot_any(const Seg &s, int64_t r, const XS &x, int64_t K, int lane) {
    const uint8_t *row = seg_row(s, r);
    const int bs = q4k_block_stride(s.tiles);
    const bool w = s.wide != 0;
    switch (s.type) {  // (Q4_K's tile address; Q6_K takes its own)
    case LOOM_GGML_Q4_K:
        return w ? row_dot<LOOM_GGML_Q4_K, true, UNROLL>(row, bs, x, K, lane)
                 : row_dot<LOOM_GGML_Q4_K, false, UNROLL>(row, bs, x, K, lane);
    case LOOM_GGML_Q5_K:
        return w ? row_dot<LOOM_GGML_Q5_K, true, UNROLL>(row, bs, x, K, lane)
                 : row_dot<LOOM_GGML_Q5_K, false, UNROLL>(row, bs, x, K, lane);
    case LOOM_GGML_Q6_K:
        return row_dot<LOOM_GGML_Q6_K, true, UNROLL>(seg_row_q6(s, r), q6k_block_stride(s.tiles),
                                                     x, K, lane);
    case LOOM_GGML_Q8_0: return row_dot<LOOM_GGML_Q8_0, true, UNROLL>(row, bs, x, K, lane);
    case LOOM_GGML_F16:
        return w ? row_dot<LOOM_GGML_F16, true, UNROLL>(row, bs, x, K, lane)
                 : row_dot<LOOM_GGML_F16, false, UNROLL>(row, bs, x, K, lane);
    case LOOM_GGML_BF16:
        return w ? row_dot<LOOM_GGML_BF16, true, UNROLL>(row, bs, x, K, lane)
                 : row_dot<LOOM_GGML_BF16, false, UNROLL>(row, bs, x, K, lane);
    case LOOM_GGML_F32:
        return w ? row_dot<LOOM_GGML_F32, true, UNROLL>(row, bs, x, K, lane)
                 : row_dot<LOOM_GGML_F32, false, UNROLL>(row, bs, x, K, lane);
    default: return 0.0f;
    }
}

// The dot of segment row r: specialized on the segment's type T (its registers only), or
// T < 0: a run-time switch over every type (the generic kernel, for rare type mixes).
template <int UNROLL, int T, class XS>
__device__ __forceinline__ float seg_dot(const Seg &s, int64_t r, const XS &x, int64_t K,
                                         int lane) {
    if constexpr (T < 0) {
        return row_dot_any<UNROLL>(s, r, x, K, lane);
    } else if constexpr (T == LOOM_GGML_Q6_K) {
        return row_dot<T, true, UNROLL>(seg_row_q6(s, r), q6k_block_stride(s.tiles), x, K, lane);
    } else if constexpr (T == LOOM_GGML_Q8_0) {
        return row_dot<T, true, UNROLL>(s.w + r * s.row_bytes, 0, x, K, lane);
    } else {
        const uint8_t *row = seg_row(s, r);
        const int bs = q4k_block_stride(s.tiles);
        return s.wide ? row_dot<T, true, UNROLL>(row, bs, x, K, lane)
                      : row_dot<T, false, UNROLL>(row, bs, x, K, lane);
    }
}

// Segment i's rows have type Ti (or any type when Ti < 0).
// Occupancy the kernel is built for (v8, bench/NOTES.md 2: with the cheaper Q4_K/Q5_K scale
// decode of quant_blocks.cuh, 128 -> 96 registers, 4 -> 5 blocks an SM): kMinBlocks for the
// Q4_K kernels at the default prefetch depth (more would spill), 4 for Q5_K's (two rows a warp
// since session 34: 128 registers, 5 spilled), else 1 (the compiler's choice, ~128 registers).
// (v7's scale decode at 1 block, LOOM_GEMV_V8=0, the same bits and slower in every row, was
// removed in session 11.)
template <int UNROLL, int T0>
constexpr int gemv_min_blocks() {
    if (UNROLL != 2) return 1;
    return T0 == LOOM_GGML_Q4_K ? kMinBlocks : T0 == LOOM_GGML_Q5_K ? 4 : 1;
}

// Row r of the concatenated segments: its segment and its row there (r < the rows in all).
__device__ __forceinline__ Seg seg_of(const GemvArgs &a, int64_t &r) {
    if (a.nseg > 1 && r >= a.seg[0].rows) {
        r -= a.seg[0].rows;
        if (a.nseg > 2 && r >= a.seg[1].rows) {
            r -= a.seg[1].rows;
            return a.seg[2];
        }
        return a.seg[1];
    }
    return a.seg[0];
}

// All-Q8_0 or all-Q5_K segments (T): a warp computes two dots over the same x (row_dot2): a
// SwiGLU pair's gate and up rows r, or rows 2 g and 2 g + 1 of the concatenated segments
// (kRowsPerWarp2: the launcher's grid), each with its own epilogue; the bits of gemv_kernel's
// one dot a row.
constexpr int kRowsPerWarp2 = 2;
__host__ __device__ constexpr bool rows2_type(int t) {
    return t == LOOM_GGML_Q8_0 || t == LOOM_GGML_Q5_K;
}
template <int UNROLL, int T, bool NORM>
__device__ __forceinline__ void gemv_rows2(const GemvArgs &a, double *npart, int lane) {
    const int64_t g = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    const bool glu = a.epi == EPI_SWIGLU;
    int64_t total = a.seg[0].rows;
    for (int i = 1; i < a.nseg && !glu; i++) total += a.seg[i].rows;
    int64_t r0 = glu ? g : kRowsPerWarp2 * g, r1 = glu ? g : r0 + 1;
    const bool ok0 = r0 < total, ok1 = r1 < total;
    const Seg s0 = seg_of(a, r0);
    const Seg s1 = glu ? a.seg[1] : ok1 ? seg_of(a, r1) : s0;
    if (!ok1) r1 = r0;  // a last odd row: its dot twice, one store
    if (ok0) {  // before the dependent-launch wait: the rows' first 4 KB into L2 (gemv_kernel)
        const int64_t o = (int64_t)lane * 128;
        if (o < s0.row_bytes) prefetch_l2(s0.w + r0 * s0.row_bytes + o);
        if (o < s1.row_bytes) prefetch_l2(s1.w + r1 * s1.row_bytes + o);
    }
    pdl_wait();
    float nsc = 1.0f;
    if (NORM) nsc = block_rms_scale(a.x, a.K, a.norm, npart);
    if (!ok0) return;
    using XS = typename std::conditional<NORM, XNormed, XPlain>::type;
    XS xs;
    if constexpr (NORM) xs = XNormed{a.x, a.norm.w, nsc};
    else xs = XPlain{a.x};
    const uint8_t *w0 = s0.w + r0 * s0.row_bytes, *w1 = s1.w + r1 * s1.row_bytes;
    float d0, d1;
    if (T == LOOM_GGML_Q8_0 || (s0.wide && s1.wide))  // (Q8_0 has only the word path)
        row_dot2<T, true, UNROLL>(w0, w1, xs, a.K, lane, d0, d1);
    else if constexpr (T != LOOM_GGML_Q8_0)
        row_dot2<T, false, UNROLL>(w0, w1, xs, a.K, lane, d0, d1);
    d0 = warp_sum(d0);
    d1 = warp_sum(d1);
    if (glu) {
        if (lane == 0) s0.y[r0] = __fmul_rn(silu_f(d0), d1);
        return;
    }
    auto finish = [&](const Seg &s, int64_t r, float v) {
        if (a.epi == EPI_ADD) v = __fadd_rn(v, s.resid[r]);
        else if (s.bias) v = __fadd_rn(v, s.bias[r]);
        if (lane == 0) s.y[r] = v;
    };
    finish(s0, r0, d0);
    if (ok1) finish(s1, r1, d1);
}

// NORM: x is RMS-normalized as it is read (XNormed, norm.cuh): the block computes the token's
// scale after pdl_wait (every warp takes part, rows or not), then the passes read
// (x * scale) * w[k]; bit for bit loom_cuda_rms_norm followed by the plain kernel.
template <int UNROLL, int T0, int T1, int T2, bool NORM>
static __global__ void __launch_bounds__(kThreads, (gemv_min_blocks<UNROLL, T0>()))
    gemv_kernel(const GemvArgs a) {
    pdl_launch_dependents();
    __shared__ double npart[NORM ? kWarps : 1];
    const int lane = threadIdx.x & 31;
    if constexpr (rows2_type(T0) && T1 == T0 && T2 == T0) {
        gemv_rows2<UNROLL, T0, NORM>(a, npart, lane);
        return;
    }
    int64_t r = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    int si = 0;
    Seg s = a.seg[0];
    if (a.epi != EPI_SWIGLU) {
        if (a.nseg > 1 && r >= s.rows) {
            r -= s.rows;
            s = a.seg[1];
            si = 1;
            if (a.nseg > 2 && r >= s.rows) {
                r -= s.rows;
                s = a.seg[2];
                si = 2;
            }
        }
    }
    // Before the dependent-launch wait (common.cuh): the first 4 KB of the row (and of the
    // SwiGLU's second row) into L2, so the weights' DRAM latency overlaps the previous kernel.
    if (r < s.rows) {
        const int64_t o = (int64_t)lane * 128;
        if (o < s.row_bytes && !s.tiles) prefetch_l2(s.w + r * s.row_bytes + o);
        if (a.epi == EPI_SWIGLU && o < a.seg[1].row_bytes && !a.seg[1].tiles)
            prefetch_l2(a.seg[1].w + r * a.seg[1].row_bytes + o);
    }
    pdl_wait();
    float nsc = 1.0f;
    if (NORM) nsc = block_rms_scale(a.x, a.K, a.norm, npart);
    if (r >= s.rows) return;
    using XS = typename std::conditional<NORM, XNormed, XPlain>::type;
    XS xs;
    if constexpr (NORM) xs = XNormed{a.x, a.norm.w, nsc};
    else xs = XPlain{a.x};
    float v;
    if constexpr (T0 == T1 && T1 == T2) {
        // One call site for every segment and both SwiGLU matrices: the unrolled pass body
        // exists once in the binary (several copies thrashed the instruction cache).
        float d0 = 0.0f, d1 = 0.0f;
        const int nm = a.epi == EPI_SWIGLU ? 2 : 1;
#pragma unroll 1
        for (int m = 0; m < nm; m++) {
            const float t = warp_sum(seg_dot<UNROLL, T0>(m ? a.seg[1] : s, r, xs, a.K, lane));
            if (m == 0) d0 = t;
            else d1 = t;
        }
        v = a.epi == EPI_SWIGLU ? __fmul_rn(silu_f(d0), d1) : d0;
    } else {
        if (si == 0) v = seg_dot<UNROLL, T0>(s, r, xs, a.K, lane);
        else if (si == 1) v = seg_dot<UNROLL, T1>(s, r, xs, a.K, lane);
        else v = seg_dot<UNROLL, T2>(s, r, xs, a.K, lane);
        v = warp_sum(v);
        if (a.epi == EPI_SWIGLU) {
            float u = warp_sum(seg_dot<UNROLL, T1>(a.seg[1], r, xs, a.K, lane));
            v = __fmul_rn(silu_f(v), u);
        }
    }
    if (a.epi == EPI_ADD) v = __fadd_rn(v, s.resid[r]);
    else if (a.epi != EPI_SWIGLU && s.bias) v = __fadd_rn(v, s.bias[r]);
    if (lane == 0) s.y[r] = v;
}

template <int U, bool NORM>
void launch_types(const GemvArgs &a, dim3 grid, cudaStream_t stream) {
    const int t0 = a.seg[0].type;
    const int t1 = a.nseg > 1 ? a.seg[1].type : t0;
    const int t2 = a.nseg > 2 ? a.seg[2].type : t1;
    const bool same = t0 == t1 && t1 == t2;
    if (same && t0 == LOOM_GGML_Q4_K)
        (void)launch(gemv_kernel<U, LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, NORM>, grid, kThreads, 0, stream, a);
    else if (same && t0 == LOOM_GGML_Q5_K)
        (void)launch(gemv_kernel<U, LOOM_GGML_Q5_K, LOOM_GGML_Q5_K, LOOM_GGML_Q5_K, NORM>, grid, kThreads, 0, stream, a);
    else if (same && t0 == LOOM_GGML_Q6_K)
        (void)launch(gemv_kernel<U, LOOM_GGML_Q6_K, LOOM_GGML_Q6_K, LOOM_GGML_Q6_K, NORM>, grid, kThreads, 0, stream, a);
    else if (same && t0 == LOOM_GGML_Q8_0)
        (void)launch(gemv_kernel<U, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, NORM>, grid, kThreads, 0, stream, a);
    else if (same && t0 == LOOM_GGML_F16)
        (void)launch(gemv_kernel<U, LOOM_GGML_F16, LOOM_GGML_F16, LOOM_GGML_F16, NORM>, grid, kThreads, 0, stream, a);
    else if (t0 == LOOM_GGML_Q4_K && t1 == LOOM_GGML_Q4_K && t2 == LOOM_GGML_Q6_K)
        (void)launch(gemv_kernel<U, LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K, NORM>, grid, kThreads, 0, stream, a);
    else
        (void)launch(gemv_kernel<U, -1, -1, -1, NORM>, grid, kThreads, 0, stream, a);
}

loom_status gemv_launch_unroll(const GemvArgs &a, int unroll, loom_error *err,
                               cudaStream_t stream) {
    int64_t rows = a.seg[0].rows;
    if (a.epi != EPI_SWIGLU)
        for (int i = 1; i < a.nseg; i++) rows += a.seg[i].rows;
    if (rows == 0) return LOOM_OK;
    const int t0 = a.seg[0].type;  // all Q8_0 or all Q5_K: gemv_rows2's two rows a warp
    bool rows2 = rows2_type(t0);
    for (int i = 1; i < a.nseg; i++) rows2 = rows2 && a.seg[i].type == t0;
    const int64_t per =
        rows2 && unroll != 1 && a.epi != EPI_SWIGLU ? kRowsPerWarp2 * kWarps : kWarps;
    dim3 grid((unsigned)((rows + per - 1) / per));
    // By type: a Q4_K/Q5_K pass is 4 blocks and a Q8_0 one 16 (2: the 4B Q8_0 model's decode
    // 3.96-3.99 -> 3.75-3.76 ms/token against 4, bench/NOTES.md 2.5), others 1 block or less.
    if (unroll == 0)
        unroll = (t0 == LOOM_GGML_Q4_K || t0 == LOOM_GGML_Q5_K || t0 == LOOM_GGML_Q8_0) ? 2 : 4;
    if (unroll == 1)  // the simple path: one pass at a time, the generic kernel
        (void)launch(a.normed ? gemv_kernel<1, -1, -1, -1, true> : gemv_kernel<1, -1, -1, -1, false>,
                     grid, kThreads, 0, stream, a);
    else if (unroll >= 4)
        a.normed ? launch_types<4, true>(a, grid, stream) : launch_types<4, false>(a, grid, stream);
    else
        a.normed ? launch_types<2, true>(a, grid, stream) : launch_types<2, false>(a, grid, stream);
    LAUNCH_CHECK();
    return LOOM_OK;
}

int g_gemv_fallback_logged = 0;

// Fast path, then (if its launch fails) the simple path: one pass at a time, byte loads.
loom_status gemv_launch(GemvArgs a, loom_error *err, cudaStream_t stream) {
    if (fast(SW_FAST_GEMV)) {
        loom_status st = gemv_launch_unroll(a, gemv_unroll(), err, stream);
        if (st == LOOM_OK) return st;
        log_fallback_once(&g_gemv_fallback_logged, "gemv", err);
    }
    for (int i = 0; i < a.nseg; i++)
        if (a.seg[i].type == LOOM_GGML_Q4_K || a.seg[i].type == LOOM_GGML_Q5_K) a.seg[i].wide = 0;
    return gemv_launch_unroll(a, 1, err, stream);
}

extern "C" bool loom_cuda_normed_scale_last(void) {
    return mma_paths_on();  // run_matmul's routing of Q4_K and Q5_K
}

extern "C" bool loom_cuda_q4k_tiles_preferred(void) {
    // run_matmul's routing of Q4_K, on the INT8 body (the only one that reads tiles)
    return mma_paths_on() && mma_q4k_variant() == 2;
}

extern "C" bool loom_cuda_q6k_tiles_preferred(void) {
    // run_matmul's routing of Q6_K (route_segments), on the INT8 body (tiles run no other)
    return mma_paths_on() && fast(SW_GEMV_MMA_Q6K) && mma_q6k_variant() == 2;
}

// Validates w against K and fills a segment. `what` names the kernel for messages.
loom_status make_seg(const char *what, loom_kweight w, int64_t K, float *y, const float *bias,
                     const float *resid, Seg *s, loom_error *err) {
    if (!weight_type_ok(w.type))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "%s: weight type %d is not supported on CUDA", what,
                 (int)w.type);
    if (w.rows < 0 || w.cols != K)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: weight is %lld x %lld, expected K = %lld", what,
                 (long long)w.rows, (long long)w.cols, (long long)K);
    if (loom_ggml_row_bytes((uint32_t)w.type, K) < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: K = %lld is not a multiple of %lld", what,
                 (long long)K, (long long)loom_ggml_type_get((uint32_t)w.type)->block_size);
    if (w.rows > 0 && (!w.data || !y))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL weight or output", what);
    s->w = (const uint8_t *)w.data;
    s->y = y;
    s->bias = bias;
    s->resid = resid;
    s->rows = w.rows;
    s->row_bytes = loom_ggml_row_bytes((uint32_t)w.type, K);
    s->type = w.type;
    if (w.layout != LOOM_WEIGHT_ROWS && loom_weight_bytes(w.type, w.rows, K, w.layout) < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "%s: weight layout %d with type %s and %lld rows (LOOM_WEIGHT_Q4K_TILES needs "
                 "Q4_K, LOOM_WEIGHT_Q6K_TILES Q6_K, both rows a multiple of 16)",
                 what, (int)w.layout, loom_ggml_type_get((uint32_t)w.type)->name, (long long)w.rows);
    s->tiles = w.layout != LOOM_WEIGHT_ROWS;
    uintptr_t addr = (uintptr_t)w.data;
    if (w.type == LOOM_GGML_Q4_K || w.type == LOOM_GGML_Q5_K)
        s->wide = fast(SW_Q4K_U32) && addr % 16 == 0;
    else if (w.type == LOOM_GGML_F16 || w.type == LOOM_GGML_BF16 || w.type == LOOM_GGML_F32)
        s->wide = K % 8 == 0 && addr % 16 == 0;
    else
        s->wide = 1;
    return LOOM_OK;
}

loom_status check_x(const char *what, const float *x, int64_t n, int64_t K, loom_error *err) {
    if (n < 0 || K < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: negative size (n = %lld, K = %lld)", what,
                 (long long)n, (long long)K);
    if (n > 0 && K > 0 && (!x || (uintptr_t)x % 16 != 0))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: x must be a 16-byte aligned device pointer",
                 what);
    return LOOM_OK;
}

const PreNorm *norm_of(const GemvArgs &a) { return a.normed ? &a.norm : nullptr; }

int g_mma_fallback_logged = 0;
int g_mma_q6k_fallback_logged = 0;
int g_mixed_fallback_logged = 0;
int g_mma_q8_fallback_logged = 0;

loom_status run_matmul_rows(GemvArgs a, int64_t n, loom_error *err, cudaStream_t stream);

// Runs segments over n tokens. Default: the Q4_K segments (or the Q5_K ones) in one mma launch
// for all n tokens (gemv_mma.cu), the Q6_K segments in another (gemv_mma_q6k.cu; a Q4_K_M
// triple's V, Q6_K down projections, the lm head), the others on the warp-per-row kernels below.
// LOOM_GEMV_MMA=0 or LOOM_FAST_GEMV=0: warp-per-row only; LOOM_GEMV_MMA_Q6K=0: Q6_K on the
// warp-per-row kernels. A failed mma launch logs once and falls back to the warp-per-row kernels.
// The Q8_0 segments (mma_q8_seg_ok) run on gemv_mma_q8.cu in one more launch
// (LOOM_GEMV_MMA_Q8=0: the warp-per-row kernels).
// LOOM_GEMV_TRIPLE_MIXED=1: a GEMV with both Q4_K and Q6_K segments (the Q4_K_M triple) runs
// them in one launch (gemv_mma.cu mma_triple_mixed, the same bits) where the shape allows; a
// failed mixed launch logs once and runs the two launches (Q5_K + Q6_K: always two).
loom_status run_matmul(GemvArgs a, int64_t n, loom_error *err, cudaStream_t stream) {
    if (n == 0) return LOOM_OK;
    if (!mma_paths_on()) return run_matmul_rows(a, n, err, stream);
    if (a.epi == EPI_SWIGLU) {
        const bool q8 = mma_q8_pair_ok(a.seg[0], a.seg[1]);
        if (!q8 && (!mma_seg_ok(a.seg[0]) || !mma_seg_ok(a.seg[1]) ||
                    !mma_same_launch(a.seg[0], a.seg[1])))
            return run_matmul_rows(a, n, err, stream);
        loom_status st = q8 ? mma_q8_matmul(a.seg, 2, a.epi, a.x, a.K, n, norm_of(a), err, stream)
                            : mma_matmul(a.seg, 2, a.epi, a.x, a.K, n, norm_of(a), err, stream);
        if (st == LOOM_OK) return st;
        log_fallback_once(q8 ? &g_mma_q8_fallback_logged : &g_mma_fallback_logged,
                          q8 ? "matmul (mma Q8_0)" : "matmul (mma)", err);
        return run_matmul_rows(a, n, err, stream);
    }
    Seg mm[3], m6[3], m8[3];
    GemvArgs rest = a;
    int nm, n6, n8;
    route_segments(a.seg, a.nseg, mm, &nm, m6, &n6, m8, &n8, rest.seg, &rest.nseg);
    bool mixed = false;
    if (nm > 0 && n6 > 0 && a.epi == EPI_PLAIN && gemv_triple_mixed()) {
        loom_status st = mma_triple_mixed(mm, nm, m6, n6, a.x, a.K, n, norm_of(a), &mixed, err,
                                          stream);
        if (st != LOOM_OK) {
            log_fallback_once(&g_mixed_fallback_logged, "matmul (mma, Q4_K + Q6_K in one launch)", err);
            mixed = false;
        }
    }
    if (nm > 0 && !mixed) {
        loom_status st = mma_matmul(mm, nm, a.epi, a.x, a.K, n, norm_of(a), err, stream);
        if (st != LOOM_OK) {
            log_fallback_once(&g_mma_fallback_logged, "matmul (mma)", err);
            return run_matmul_rows(a, n, err, stream);
        }
    }
    if (n6 > 0 && !mixed) {  // Q6_K (gemv_mma_q6k.cu); a failed launch leaves those rows to the kernels below
        // A triple's Q6_K segments (a.nseg == 3) in rows keep the f16 body below 64 tokens (in
        // tiles: INT8): the mixed kernel runs them so, and the GEMM and the two launches must
        // give the same bits (matmul.cuh); longer prefills take the INT8 wide GEMM
        // (gemv_mma_q6k.cu q6k_body).
        loom_status st = mma_q6k_matmul(m6, n6, a.epi, a.x, a.K, n, norm_of(a), a.nseg == 3, err,
                                        stream);
        if (st != LOOM_OK) {
            log_fallback_once(&g_mma_q6k_fallback_logged, "matmul (mma Q6_K)", err);
            for (int i = 0; i < n6; i++) rest.seg[rest.nseg++] = m6[i];
        }
    }
    if (n8 > 0) {  // Q8_0 (gemv_mma_q8.cu); a failed launch leaves those rows to the kernels below
        loom_status st = mma_q8_matmul(m8, n8, a.epi, a.x, a.K, n, norm_of(a), err, stream);
        if (st != LOOM_OK) {
            log_fallback_once(&g_mma_q8_fallback_logged, "matmul (mma Q8_0)", err);
            for (int i = 0; i < n8; i++) rest.seg[rest.nseg++] = m8[i];
        }
    }
    return rest.nseg > 0 ? run_matmul_rows(rest, n, err, stream) : LOOM_OK;
}

// The warp-per-row kernels: the GEMV for n == 1, else GEMM launches per segment and chunk.
loom_status run_matmul_rows(GemvArgs a, int64_t n, loom_error *err, cudaStream_t stream) {
    if (n == 0) return LOOM_OK;
    if (n == 1) return gemv_launch(a, err, stream);
    for (int64_t t0 = 0; t0 < n; t0 += 32) {
        int64_t nt = n - t0 < 32 ? n - t0 : 32;
        const float *x = a.x + t0 * a.K;
        if (a.epi == EPI_SWIGLU) {
            Seg sa = a.seg[0], sb = a.seg[1];
            sa.y += t0 * sa.rows;
            sb.y = sa.y;
            loom_status st = gemm_launch(sa, x, nt, a.K, EPI_PLAIN, norm_of(a), err, stream);
            if (st != LOOM_OK) return st;
            st = gemm_launch(sb, x, nt, a.K, EPI_SWIGLU_FINISH, norm_of(a), err, stream);
            if (st != LOOM_OK) return st;
            continue;
        }
        for (int i = 0; i < a.nseg; i++) {
            Seg s = a.seg[i];
            s.y += t0 * s.rows;
            if (s.resid) s.resid += t0 * s.rows;
            loom_status st = gemm_launch(s, x, nt, a.K, a.epi, norm_of(a), err, stream);
            if (st != LOOM_OK) return st;
        }
    }
    return LOOM_OK;
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

// Fills a.normed / a.norm from the launcher's norm (NULL: none) after checking it. The norm
// weight is read as float4 beside x, so it must be 16-byte aligned like x.
static loom_status set_norm(const char *what, const loom_prenorm *norm, const float *x, int64_t K,
                            GemvArgs *a, loom_error *err) {
    if (!norm) return LOOM_OK;
    if (!(norm->eps >= 0.0f))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: norm eps %g is not >= 0", what,
                 (double)norm->eps);
    if ((uintptr_t)norm->weight % 16 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "%s: norm weight must be a 16-byte aligned device pointer (or NULL)", what);
    a->normed = 1;
    // The summation order the norm launcher would take writing into a buffer like x.
    a->norm = PreNorm{norm->weight, norm->eps, rms_vec(K, x, x, norm->weight) ? 1 : 0};
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_matmul_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                               loom_kweight w, float *y, loom_error *err,
                                               cudaStream_t stream) {
    const char *what = norm ? "matmul_normed" : "matmul";
    loom_status st = check_x(what, x, n, w.cols, err);
    if (st != LOOM_OK) return st;
    GemvArgs a = {};
    st = make_seg(what, w, w.cols, y, nullptr, nullptr, &a.seg[0], err);
    if (st == LOOM_OK) st = set_norm(what, norm, x, w.cols, &a, err);
    if (st != LOOM_OK) return st;
    a.nseg = 1;
    a.epi = EPI_PLAIN;
    a.x = x;
    a.K = w.cols;
    return run_matmul(a, n, err, stream);
}

extern "C" loom_status loom_cuda_matmul(const float *x, int64_t n, loom_kweight w, float *y,
                                        loom_error *err, cudaStream_t stream) {
    return loom_cuda_matmul_normed(x, nullptr, n, w, y, err, stream);
}

extern "C" loom_status loom_cuda_matmul_add(const float *x, int64_t n, loom_kweight w,
                                            const float *residual, float *y, loom_error *err,
                                            cudaStream_t stream) {
    loom_status st = check_x("matmul_add", x, n, w.cols, err);
    if (st != LOOM_OK) return st;
    if (n > 0 && w.rows > 0 && !residual)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "matmul_add: NULL residual");
    GemvArgs a = {};
    st = make_seg("matmul_add", w, w.cols, y, nullptr, residual, &a.seg[0], err);
    if (st != LOOM_OK) return st;
    a.nseg = 1;
    a.epi = EPI_ADD;
    a.x = x;
    a.K = w.cols;
    return run_matmul(a, n, err, stream);
}

extern "C" loom_status loom_cuda_matmul_pair_normed(const float *x, const loom_prenorm *norm,
                                                    int64_t n, loom_kweight wa, loom_kweight wb,
                                                    loom_pair_epilogue epilogue, float *ya,
                                                    float *yb, loom_error *err,
                                                    cudaStream_t stream) {
    const char *what = norm ? "matmul_pair_normed" : "matmul_pair";
    loom_status st = check_x(what, x, n, wa.cols, err);
    if (st != LOOM_OK) return st;
    if (epilogue != LOOM_PAIR_NONE && epilogue != LOOM_PAIR_SWIGLU)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: unknown epilogue %d", what, (int)epilogue);
    const bool swiglu = epilogue == LOOM_PAIR_SWIGLU;
    if (swiglu && wa.rows != wb.rows)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: SwiGLU needs equal rows (%lld, %lld)", what,
                 (long long)wa.rows, (long long)wb.rows);
    GemvArgs a = {};
    st = make_seg(what, wa, wa.cols, ya, nullptr, nullptr, &a.seg[0], err);
    if (st == LOOM_OK)
        st = make_seg(what, wb, wa.cols, swiglu ? ya : yb, nullptr, nullptr, &a.seg[1], err);
    if (st == LOOM_OK) st = set_norm(what, norm, x, wa.cols, &a, err);
    if (st != LOOM_OK) return st;
    a.nseg = 2;
    a.epi = swiglu ? EPI_SWIGLU : EPI_PLAIN;
    a.x = x;
    a.K = wa.cols;
    return run_matmul(a, n, err, stream);
}

extern "C" loom_status loom_cuda_matmul_pair(const float *x, int64_t n, loom_kweight wa,
                                             loom_kweight wb, loom_pair_epilogue epilogue,
                                             float *ya, float *yb, loom_error *err,
                                             cudaStream_t stream) {
    return loom_cuda_matmul_pair_normed(x, nullptr, n, wa, wb, epilogue, ya, yb, err, stream);
}

extern "C" loom_status loom_cuda_matmul_triple_normed(const float *x, const loom_prenorm *norm,
                                                      int64_t n, const loom_kweight w[3],
                                                      const float *const bias[3],
                                                      float *const y[3], loom_error *err,
                                                      cudaStream_t stream) {
    const char *what = norm ? "matmul_triple_normed" : "matmul_triple";
    if (!w || !y) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL w or y", what);
    loom_status st = check_x(what, x, n, w[0].cols, err);
    if (st != LOOM_OK) return st;
    GemvArgs a = {};
    for (int i = 0; i < 3; i++) {
        st = make_seg(what, w[i], w[0].cols, y[i], bias ? bias[i] : nullptr, nullptr, &a.seg[i],
                      err);
        if (st != LOOM_OK) return st;
    }
    st = set_norm(what, norm, x, w[0].cols, &a, err);
    if (st != LOOM_OK) return st;
    a.nseg = 3;
    a.epi = EPI_PLAIN;
    a.x = x;
    a.K = w[0].cols;
    return run_matmul(a, n, err, stream);
}

extern "C" int64_t loom_cuda_matmul_mixed_launches(void) { return g_mixed_launches.load(); }

extern "C" loom_status loom_cuda_matmul_triple(const float *x, int64_t n, const loom_kweight w[3],
                                               const float *const bias[3], float *const y[3],
                                               loom_error *err, cudaStream_t stream) {
    return loom_cuda_matmul_triple_normed(x, nullptr, n, w, bias, y, err, stream);
}
