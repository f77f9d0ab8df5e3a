// softmax.cu: softmax and argmax over rows of vocabulary size (152K and more).
//
// Launch geometry. Fast path (rows of more than one chunk, scratch available): two launches.
//   1. grid (chunks, rows), 128 threads: each block reduces one chunk of 4096 values to a
//      partial (softmax: max m_c and sum_c of expf(x - m_c); argmax: best value and index).
//   2. softmax: grid (chunks, rows): each block combines the row's partials (M = max m_c,
//      Z = sum_c sum_c * exp(m_c - M) in double, in chunk order) and writes its chunk;
//      argmax: one block per row combines the partials.
// Simple path (short rows, or no scratch while capturing a graph): one block per row, three
// passes (max, sum, write) / one pass for argmax.
// Memory traffic: softmax reads x twice and writes y once (the second read of a 16 KB chunk
// hits L2); argmax reads x once. Partials are 8 bytes per chunk.
// Numeric contract: softmax y = expf(x - M) / Z with Z accumulated in double: within 1e-6
// relative (+1e-12 absolute) of the CPU per element (device expf, other summation order).
// argmax is bit-exact: the first index of the largest value; NaNs ignored; all-NaN row -> 0.
#include <math.h>

#include "kernels/cuda/common.cuh"

namespace loom_cuda {
namespace {

constexpr int64_t kChunk = 4096;

// argmax candidate order: a is better than b (NaN never better; ties -> lower index).
__device__ __forceinline__ bool better(float av, int64_t ai, float bv, int64_t bi) {
    if (ai < 0 || isnan(av)) return false;
    if (bi < 0) return true;
    return av > bv || (av == bv && ai < bi);
}

// Block-wide reductions over 128 threads (fixed order).
__device__ float block_max(float v, float *sh) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = fmaxf(fmaxf(sh[0], sh[1]), fmaxf(sh[2], sh[3]));
    __syncthreads();
    return r;
}

__device__ double block_sum_d(double v, double *sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = (sh[0] + sh[1]) + (sh[2] + sh[3]);
    __syncthreads();
    return r;
}

__device__ void block_argmax(float *v, int64_t *i, float *shv, int64_t *shi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, o);
        int64_t oi = __shfl_xor_sync(0xffffffffu, *i, o);
        if (better(ov, oi, *v, *i)) { *v = ov; *i = oi; }
    }
    if ((threadIdx.x & 31) == 0) { shv[threadIdx.x >> 5] = *v; shi[threadIdx.x >> 5] = *i; }
    __syncthreads();
    *v = shv[0]; *i = shi[0];
    for (int w = 1; w < kWarps; w++)
        if (better(shv[w], shi[w], *v, *i)) { *v = shv[w]; *i = shi[w]; }
    __syncthreads();
}

// ---- softmax ------------------------------------------------------------------------------
static __global__ void __launch_bounds__(kThreads)
softmax_simple_kernel(const float *x, int64_t n, float *y) {
    pdl_launch_dependents();
    pdl_wait();
    __shared__ float shf[kWarps];
    __shared__ double shd[kWarps];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, xr[i]);
    m = block_max(m, shf);
    double z = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) z += (double)expf(xr[i] - m);
    z = block_sum_d(z, shd);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) yr[i] = (float)((double)expf(xr[i] - m) / z);
}

static __global__ void __launch_bounds__(kThreads)
softmax_partial_kernel(const float *x, int64_t n, int64_t chunks, float2 *part) {
    pdl_launch_dependents();
    pdl_wait();
    __shared__ float shf[kWarps];
    __shared__ double shd[kWarps];
    const int64_t row = blockIdx.y, c = blockIdx.x;
    const float *xr = x + row * n;
    const int64_t lo = c * kChunk, hi = lo + kChunk < n ? lo + kChunk : n;
    float m = -INFINITY;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) m = fmaxf(m, xr[i]);
    m = block_max(m, shf);
    double z = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) z += (double)expf(xr[i] - m);
    z = block_sum_d(z, shd);
    if (threadIdx.x == 0) part[row * chunks + c] = make_float2(m, (float)z);
}

static __global__ void __launch_bounds__(kThreads)
softmax_final_kernel(const float *x, int64_t n, int64_t chunks, const float2 *part, float *y) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t row = blockIdx.y, c = blockIdx.x;
    const float2 *pr = part + row * chunks;
    float M = -INFINITY;
    for (int64_t j = 0; j < chunks; j++) M = fmaxf(M, pr[j].x);
    double Z = 0.0;
    for (int64_t j = 0; j < chunks; j++)
        if (pr[j].x != -INFINITY) Z += (double)pr[j].y * exp((double)pr[j].x - (double)M);
    const float *xr = x + row * n;
    float *yr = y + row * n;
    const int64_t lo = c * kChunk, hi = lo + kChunk < n ? lo + kChunk : n;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads)
        yr[i] = (float)((double)expf(xr[i] - M) / Z);
}

// ---- argmax -------------------------------------------------------------------------------
static __global__ void __launch_bounds__(kThreads)
argmax_kernel(const float *x, int64_t n, int64_t chunk, int64_t chunks, float *pv, int64_t *pi,
              int32_t *out) {
    pdl_launch_dependents();
    pdl_wait();
    __shared__ float shv[kWarps];
    __shared__ int64_t shi[kWarps];
    const int64_t row = blockIdx.y, c = blockIdx.x;
    const float *xr = x + row * n;
    const int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads)
        if (better(xr[i], i, bv, bi)) { bv = xr[i]; bi = i; }
    block_argmax(&bv, &bi, shv, shi);
    if (threadIdx.x != 0) return;
    if (out) out[row] = bi < 0 ? 0 : (int32_t)bi;
    else { pv[row * chunks + c] = bv; pi[row * chunks + c] = bi; }
}

static __global__ void __launch_bounds__(kThreads)
argmax_final_kernel(const float *pv, const int64_t *pi, int64_t chunks, int32_t *out) {
    pdl_launch_dependents();
    pdl_wait();
    __shared__ float shv[kWarps];
    __shared__ int64_t shi[kWarps];
    const int64_t row = blockIdx.x;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t j = threadIdx.x; j < chunks; j += kThreads)
        if (better(pv[row * chunks + j], pi[row * chunks + j], bv, bi)) {
            bv = pv[row * chunks + j];
            bi = pi[row * chunks + j];
        }
    block_argmax(&bv, &bi, shv, shi);
    if (threadIdx.x == 0) out[row] = bi < 0 ? 0 : (int32_t)bi;
}

loom_status check(const char *what, const void *x, int64_t rows, int64_t n, const void *y,
                  loom_error *err) {
    if (rows < 0 || n < 0 || rows > 65535)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: rows = %lld, n = %lld (rows <= 65535)", what,
                 (long long)rows, (long long)n);
    if (rows > 0 && n > 0 && (!x || !y)) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL pointer", what);
    return LOOM_OK;
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_softmax(const float *x, int64_t rows, int64_t n, float *y,
                                         loom_error *err, cudaStream_t stream) {
    loom_status st = check("softmax", x, rows, n, y, err);
    if (st != LOOM_OK || rows == 0 || n == 0) return st;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    float2 *part = chunks > 1 ? (float2 *)scratch((size_t)(rows * chunks) * sizeof(float2), stream)
                              : nullptr;
    if (part) {
        dim3 grid((unsigned)chunks, (unsigned)rows);
        CUDA_CHECK(launch(softmax_partial_kernel, grid, kThreads, 0, stream, x, n, chunks, part));
        CUDA_CHECK(launch(softmax_final_kernel, grid, kThreads, 0, stream, x, n, chunks, part, y));
        return LOOM_OK;
    }
    CUDA_CHECK(launch(softmax_simple_kernel, (unsigned)rows, kThreads, 0, stream, x, n, y));
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_argmax(const float *x, int64_t rows, int64_t n, int32_t *out,
                                        loom_error *err, cudaStream_t stream) {
    loom_status st = check("argmax", x, rows, n, out, err);
    if (st != LOOM_OK || rows == 0) return st;
    if (n == 0) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "argmax: empty rows");
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    void *sc = chunks > 1 ? scratch((size_t)(rows * chunks) * (sizeof(float) + sizeof(int64_t)),
                                    stream)
                          : nullptr;
    if (sc) {
        int64_t *pi = (int64_t *)sc;
        float *pv = (float *)(pi + rows * chunks);
        CUDA_CHECK(launch(argmax_kernel, dim3((unsigned)chunks, (unsigned)rows), kThreads, 0, stream,
                          x, n, kChunk, chunks, pv, pi, nullptr));
        CUDA_CHECK(launch(argmax_final_kernel, (unsigned)rows, kThreads, 0, stream,
                          pv, pi, chunks, out));
        return LOOM_OK;
    }
    CUDA_CHECK(launch(argmax_kernel, dim3(1, (unsigned)rows), kThreads, 0, stream,
                      x, n, n, 1, nullptr, nullptr, out));
    return LOOM_OK;
}
