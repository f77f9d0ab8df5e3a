// norm.cu: fused RMSNorm x weight, y = x / sqrt(mean(x^2) + eps) * weight, over `rows` rows of
// d values; the per-head Q/K norm is the same call with rows = N * heads and d = head_dim.
//
// Launch geometry: one 128-thread block per row (grid = rows, capped with a row-stride loop).
// Fast path (LOOM_FAST_NORM): float4 loads/stores when d % 4 == 0 and x, y (and the weight)
// are 16-byte aligned; simple path: scalar (norm.cuh's rms_vec is that rule). Block
// reduction (norm.cuh, shared with the matmuls that fold the norm in): warp butterfly, then 4
// partials in shared memory (32 bytes), combined in a fixed order.
// Memory traffic: x read twice (the second read hits L1/L2 for d <= 16K), weight once, y
// written once.
// Numeric contract: sum of squares in double (as the CPU twin), scale = (float)(1/sqrt(mean +
// eps)), y = (x * scale) * w in float32 with no contraction: within 1e-5 relative of the CPU
// per element (in practice equal). y may alias x.
#include "kernels/cuda/norm.cuh"

namespace loom_cuda {
namespace {

// The row reduction and the scale are norm.cuh's (shared with the matmul kernels that fold
// the norm into their x staging: same operations, same order, same bits).
template <bool VEC>
static __global__ void __launch_bounds__(kThreads)
rms_kernel(const float *x, const float *w, int64_t rows, int64_t d, float eps, float *y) {
    // Dependents first, then the wait: the next kernel's launch overlaps this one (it still
    // waits for this grid's completion before touching y); 2 us -> 0.7 us a norm in a graph
    // (lead, bench/launch_floor.cu, 2026-11-30).
    pdl_launch_dependents();
    pdl_wait();
    __shared__ double part[kWarps];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double ss = warp_sum_d(rms_partial<VEC>(xr, d, threadIdx.x));
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
        __syncthreads();
        const float scale = rms_scale(part, d, eps);
        __syncthreads();  // part is reused by the next row
        if (VEC) {
#pragma unroll 4
            for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
                float4 v = reinterpret_cast<const float4 *>(xr)[i];
                float4 o;
                o.x = __fmul_rn(v.x, scale); o.y = __fmul_rn(v.y, scale);
                o.z = __fmul_rn(v.z, scale); o.w = __fmul_rn(v.w, scale);
                if (w) {
                    float4 g = reinterpret_cast<const float4 *>(w)[i];
                    o.x = __fmul_rn(o.x, g.x); o.y = __fmul_rn(o.y, g.y);
                    o.z = __fmul_rn(o.z, g.z); o.w = __fmul_rn(o.w, g.w);
                }
                reinterpret_cast<float4 *>(yr)[i] = o;
            }
        } else {
            for (int64_t i = threadIdx.x; i < d; i += kThreads) {
                float o = __fmul_rn(xr[i], scale);
                yr[i] = w ? __fmul_rn(o, w[i]) : o;
            }
        }
    }
}

int g_norm_fallback_logged = 0;

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_rms_norm(const float *x, const float *weight, int64_t rows,
                                          int64_t d, float eps, float *y, loom_error *err,
                                          cudaStream_t stream) {
    if (rows < 0 || d < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rms_norm: rows = %lld, d = %lld", (long long)rows,
                 (long long)d);
    if (rows == 0 || d == 0) return LOOM_OK;
    if (!x || !y) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rms_norm: NULL x or y");
    unsigned grid = (unsigned)(rows < 65535 ? rows : 65535);
    if (rms_vec(d, x, y, weight)) {
        cudaError_t e = launch(rms_kernel<true>, grid, kThreads, 0, stream,
                               x, weight, rows, d, eps, y);
        if (e == cudaSuccess) return LOOM_OK;
        loom_error why = {};
        cuda_fail(&why, e, "rms_kernel<true>", __func__, __FILE__, __LINE__);
        log_fallback_once(&g_norm_fallback_logged, "rms_norm", &why);
    }
    CUDA_CHECK(launch(rms_kernel<false>, grid, kThreads, 0, stream, x, weight, rows, d, eps, y));
    return LOOM_OK;
}
