// norm.cu: fused RMSNorm x weight, y = x / sqrt(mean(x^2) + eps) * weight, over `rows` rows of
// d values; the per-head Q/K norm is the same call with rows = N * heads and d = head_dim.
//
// Launch geometry: one 128-thread block per row (grid = rows, capped with a row-stride loop).
// Fast path (LOOM_FAST_NORM): float4 loads/stores when d % 4 == 0 and x, y are 16-byte
// aligned; simple path: scalar. Block reduction: warp butterfly, then 4 partials in shared
// memory (32 bytes), combined in a fixed order.
// Memory traffic: x read twice (the second read hits L1/L2 for d <= 16K), weight once, y
// written once.
// Numeric contract: sum of squares in double (as the CPU twin), scale = (float)(1/sqrt(mean +
// eps)), y = (x * scale) * w in float32 with no contraction: within 1e-5 relative of the CPU
// per element (in practice equal). y may alias x.
#include "kernels/cuda/common.cuh"

namespace loom_cuda {
namespace {

template <bool VEC>
static __global__ void __launch_bounds__(kThreads)
rms_kernel(const float *x, const float *w, int64_t rows, int64_t d, float eps, float *y) {
    pdl_wait();
    pdl_launch_dependents();
    __shared__ double part[kWarps];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double ss = 0.0;
        if (VEC) {
            for (int64_t i = threadIdx.x; i < d / 4; i += kThreads) {
                float4 v = reinterpret_cast<const float4 *>(xr)[i];
                ss += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z +
                      (double)v.w * v.w;
            }
        } else {
            for (int64_t i = threadIdx.x; i < d; i += kThreads) ss += (double)xr[i] * xr[i];
        }
        ss = warp_sum_d(ss);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
        __syncthreads();
        double tot = (part[0] + part[1]) + (part[2] + part[3]);
        __syncthreads();  // part is reused by the next row
        const float scale = (float)(1.0 / sqrt(tot / (double)d + (double)eps));
        if (VEC) {
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
    const bool vec = d % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)y % 16 == 0 &&
                     (!weight || (uintptr_t)weight % 16 == 0);
    if (vec && fast(SW_FAST_NORM)) {
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
