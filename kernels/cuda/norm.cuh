// norm.cuh: the RMSNorm row reduction, ONE definition for norm.cu and for the matmul kernels
// that fold the norm into their x staging (gemv_mma.cu, gemv_mma_q6k.cu, gemv.cu, gemm.cu;
// the loom_cuda_*_normed launchers).
//
// Invariant: a row's scale comes from the same operations in the same order wherever it is
// computed (so a fused graph gives the unfused one's scale, and its bits where the norm is applied
// to x as the norm launcher applies it): thread i of a 128-thread
// block sums, in double, the squares of the row's float4 groups i, i + 128, ... (VEC: the norm
// launcher's float4 path) or of its elements i, i + 128, ... (scalar path), each float4 as
// ((x^2 + y^2) + z^2) + w^2 added to the running sum in increasing i; then warp_sum_d's
// butterfly; then the four warp partials as (p0 + p1) + (p2 + p3); scale = (float)(1 /
// sqrt(sum / d + eps)). A normalized value is __fmul_rn(__fmul_rn(x, scale), w[k]) (w NULL: the first product; a
// weight of 1 would give the same bits). Products of two floats are exact in double, so FMA
// contraction cannot change a sum; the explicit _rn operations pin the rest.
// Scale last: the Q4_K tensor-core matmuls (gemv_mma.cu) stage x * w[k] (norm_w4) and multiply
// each finished dot by the scale, y = scale * (W (x * w)): the scale's bits as above, the dot's
// other bits than the norm launcher + the plain matmul (within the family's tolerance), and the
// GEMV needs the scale only at its store, so no barrier waits for it before the first weights.
// Which order the norm launcher takes (VEC or scalar) depends on d % 4, the pointers'
// alignment and LOOM_FAST_NORM: rms_vec() is that rule, so a fused launcher picks the order
// the unfused norm would have used.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

// What a matmul kernel needs to normalize its x rows (norm.cu's contract). w: [K] device
// floats or NULL; vec: the summation order (rms_vec).
struct PreNorm {
    const float *w;
    float eps;
    int vec;
};

// The order loom_cuda_rms_norm takes for rows of d values at x (in) and y (out) with weight w.
inline bool rms_vec(int64_t d, const void *x, const void *y, const float *w) {
    return d % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)y % 16 == 0 &&
           (!w || (uintptr_t)w % 16 == 0) && fast(SW_FAST_NORM);
}

__device__ __forceinline__ double sq_d(float v) { return __dmul_rn((double)v, (double)v); }
// A float4 group's sum of squares: ((x^2 + y^2) + z^2) + w^2.
__device__ __forceinline__ double sq4_d(float4 v) {
    return __dadd_rn(__dadd_rn(__dadd_rn(sq_d(v.x), sq_d(v.y)), sq_d(v.z)), sq_d(v.w));
}

// Thread tid's (of kThreads) partial sum of squares of row xr[d], in the order above. The loads
// of a batch (kRmsBatch float4 or floats a thread) are all issued before the first add, so a
// thread waits for one L2 round trip a batch, not one a value (this sits on the critical path
// of every matmul block that folds the norm in, right after the PDL wait).
constexpr int kRmsBatch = 8;
template <bool VEC>
__device__ __forceinline__ double rms_partial(const float *xr, int64_t d, int tid) {
    double ss = 0.0;
    if (VEC) {
        const int64_t n4 = d / 4;
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        for (int64_t i0 = tid; i0 < n4; i0 += (int64_t)kRmsBatch * kThreads) {
            float4 v[kRmsBatch];
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < n4) v[j] = x4[i0 + j * kThreads];
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < n4)
                    ss = __dadd_rn(ss, sq4_d(v[j]));
        }
    } else {
        for (int64_t i0 = tid; i0 < d; i0 += (int64_t)kRmsBatch * kThreads) {
            float v[kRmsBatch];
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < d) v[j] = xr[i0 + j * kThreads];
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < d) ss = __dadd_rn(ss, sq_d(v[j]));
        }
    }
    return ss;
}

// The scale from the four warp partials part[0..3] of a row of d values.
static_assert(kWarps == 4, "rms_scale combines four warp partials");
__device__ __forceinline__ float rms_scale(const double *part, int64_t d, float eps) {
    const double tot = __dadd_rn(__dadd_rn(part[0], part[1]), __dadd_rn(part[2], part[3]));
    return (float)(1.0 / sqrt(tot / (double)d + (double)eps));
}

// x normalized: (x * scale) * w, the w of 1.0f when there is no weight (the same bits).
__device__ __forceinline__ float rms_apply(float x, float scale, float w) {
    return __fmul_rn(__fmul_rn(x, scale), w);
}
__device__ __forceinline__ float4 rms_apply4(float4 x, float scale, float4 w) {
    return make_float4(rms_apply(x.x, scale, w.x), rms_apply(x.y, scale, w.y),
                       rms_apply(x.z, scale, w.z), rms_apply(x.w, scale, w.w));
}
// x * w, the staged value of the scale-last matmuls (the bits of rms_apply4 with scale 1).
__device__ __forceinline__ float4 norm_w4(float4 x, float4 w) {
    return make_float4(__fmul_rn(x.x, w.x), __fmul_rn(x.y, w.y), __fmul_rn(x.z, w.z),
                       __fmul_rn(x.w, w.w));
}

// Two rows at once (the GEMM prologues): each row's partial exactly as rms_partial's, the
// loads of both rows' float4 batches in flight together. (A row-count template serving both
// measured 111 -> 156 registers in gemm.cu's kernels, so the two stay apart.)
template <bool VEC>
__device__ __forceinline__ void rms_partial2(const float *xa, const float *xb, int64_t d, int tid,
                                             double &sa, double &sb) {
    sa = 0.0;
    sb = 0.0;
    if (VEC) {
        const int64_t n4 = d / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(xa);
        const float4 *b4 = reinterpret_cast<const float4 *>(xb);
        for (int64_t i0 = tid; i0 < n4; i0 += (int64_t)kRmsBatch * kThreads) {
            float4 u[kRmsBatch], v[kRmsBatch];
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < n4) {
                    u[j] = a4[i0 + j * kThreads];
                    v[j] = b4[i0 + j * kThreads];
                }
#pragma unroll
            for (int j = 0; j < kRmsBatch; j++)
                if (i0 + j * kThreads < n4) {
                    sa = __dadd_rn(sa, sq4_d(u[j]));
                    sb = __dadd_rn(sb, sq4_d(v[j]));
                }
        }
    } else {
        sa = rms_partial<false>(xa, d, tid);
        sb = rms_partial<false>(xb, d, tid);
    }
}

// The scale of one row x[d] for the whole (kThreads) block, returned to every thread: each
// computes it from the four warp partials itself (one barrier; part: kWarps doubles of shared
// memory, not reused after). Every thread must call it.
__device__ __forceinline__ float block_rms_scale(const float *x, int64_t d, const PreNorm &n,
                                                 double *part) {
    const int tid = threadIdx.x;
    double ss = n.vec ? rms_partial<true>(x, d, tid) : rms_partial<false>(x, d, tid);
    ss = warp_sum_d(ss);
    if ((tid & 31) == 0) part[tid >> 5] = ss;
    __syncthreads();
    return rms_scale(part, d, n.eps);
}

// The first half of block_rms_scales for one row x[d], without a barrier: the calling warp
// computes the partials of the kWarps block's warps v0 .. v1 - 1 into part[v] (the same bits
// whichever warp computes one). Once every part[0..kWarps) is written and a barrier has made
// them visible, the row's scale is rms_scale(part, d, eps).
__device__ __forceinline__ void rms_partials_of(const float *x, int64_t d, const PreNorm &n,
                                                double *part, int v0, int v1) {
    const int lane = threadIdx.x & 31;
#pragma unroll 1
    for (int v = v0; v < v1; v++) {
        const int vt = 32 * v + lane;  // the kWarps block's thread
        const double s = n.vec ? rms_partial<true>(x, d, vt) : rms_partial<false>(x, d, vt);
        const double sv = warp_sum_d(s);
        if (lane == 0) part[v] = sv;
    }
}

// The scales of rows x + i * ldx (i < nrows <= MAXR, nrows uniform over the block), d values
// each, into scale[i] (shared memory; part: MAXR * kWarps doubles of shared memory). Rows go in
// pairs (their loads together). Every thread of the (kThreads) block must call it; it returns
// after a barrier, scale[] visible.
// NW < kWarps (one row): a block of NW warps computes the kWarps block's partials (the same
// bits).
template <int MAXR, int NW = kWarps>
__device__ __forceinline__ void block_rms_scales(const float *x, int64_t ldx, int nrows,
                                                 int64_t d, const PreNorm &n, double *part,
                                                 float *scale) {
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    if constexpr (NW < kWarps) {  // (its virtual warps, common.cuh vwarp_end)
        static_assert(MAXR == 1, "a block of fewer warps folds one row");
        rms_partials_of(x, d, n, part, w, vwarp_end<NW>(w));
    } else {
#pragma unroll 1
        for (int i = 0; i < MAXR && i < nrows; i += 2) {
            const float *xr = x + (int64_t)i * ldx;
            double sa, sb = 0.0;
            // (MAXR == 1, the GEMVs: the single-row code only; the pair path inlined there cost
            // the Q4_K pair GEMV 4 us at 128 registers, bench/NOTES.md 7.6.)
            if (MAXR > 1 && i + 1 < nrows) {
                if (n.vec) rms_partial2<true>(xr, xr + ldx, d, tid, sa, sb);
                else rms_partial2<false>(xr, xr + ldx, d, tid, sa, sb);
            } else {
                sa = n.vec ? rms_partial<true>(xr, d, tid) : rms_partial<false>(xr, d, tid);
            }
            sa = warp_sum_d(sa);
            if (MAXR > 1) sb = warp_sum_d(sb);
            if (lane == 0) {
                part[i * kWarps + w] = sa;
                if (MAXR > 1 && i + 1 < nrows) part[(i + 1) * kWarps + w] = sb;
            }
        }
    }
    __syncthreads();
    if (tid < nrows && tid < MAXR) scale[tid] = rms_scale(part + tid * kWarps, d, n.eps);
    __syncthreads();
}

}  // namespace loom_cuda
