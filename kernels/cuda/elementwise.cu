// elementwise.cu: add, mul, silu, swiglu, bias_add, the broadcast add/mul and the f16 <-> f32
// conversions.
//
// Launch geometry: 128-thread blocks, a grid-stride loop over the n elements (grid capped at
// 65535 blocks); bias_add and the broadcast forms walk the n elements and index the repeated
// operand by i % nb (one launch for every row, where the executor used to launch one per row).
// Memory traffic: each input read once, each output written once (coalesced, 4-byte).
// Numeric contract: add, mul, bias_add, add_bcast, mul_bcast and both conversions are bit-exact with the CPU twins
// (single IEEE operations; f32->f16 rounds to nearest even; a NaN stays a NaN but its payload
// may differ). silu and swiglu use x / (1 + expf(-x)) with the device expf (<= 2 ulp from
// glibc's): within 1e-6 relative of the CPU twin. Outputs may alias inputs (same index).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul.cuh"

namespace loom_cuda {
namespace {

enum Op { OP_ADD, OP_MUL, OP_SILU, OP_SWIGLU };

template <int OP>
static __global__ void __launch_bounds__(kThreads)
binary_kernel(const float *a, const float *b, int64_t n, float *y) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v;
        if (OP == OP_ADD) v = __fadd_rn(a[i], b[i]);
        else if (OP == OP_MUL) v = __fmul_rn(a[i], b[i]);
        else if (OP == OP_SILU) v = silu_f(a[i]);
        else v = __fmul_rn(silu_f(a[i]), b[i]);
        y[i] = v;
    }
}

static __global__ void __launch_bounds__(kThreads)
bias_kernel(float *y, const float *bias, int64_t total, int64_t m) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], bias[i % m]);
}

template <int OP>
static __global__ void __launch_bounds__(kThreads)
bcast_kernel(const float *a, int64_t n, const float *b, int64_t nb, float *y) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = OP == OP_ADD ? __fadd_rn(a[i], b[i % nb]) : __fmul_rn(a[i], b[i % nb]);
}

static __global__ void __launch_bounds__(kThreads)
f16_to_f32_kernel(const uint16_t *src, int64_t n, float *dst) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = f16_bits_to_f32(src[i]);
}

static __global__ void __launch_bounds__(kThreads)
f32_to_f16_kernel(const float *src, int64_t n, uint16_t *dst) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __half_as_ushort(__float2half_rn(src[i]));
}

template <int OP>
loom_status binary(const char *what, const float *a, const float *b, int64_t n, float *y,
                   loom_error *err, cudaStream_t stream) {
    if (n < 0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: n = %lld", what, (long long)n);
    if (n == 0) return LOOM_OK;
    if (!a || !y || ((OP == OP_ADD || OP == OP_MUL || OP == OP_SWIGLU) && !b))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL pointer", what);
    CUDA_CHECK(launch(binary_kernel<OP>, grid_for(n, kThreads), kThreads, 0, stream, a, b, n, y));
    return LOOM_OK;
}

template <int OP>
loom_status bcast(const char *what, const float *a, int64_t n, const float *b, int64_t nb,
                  float *y, loom_error *err, cudaStream_t stream) {
    if (n < 0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: n = %lld", what, (long long)n);
    if (n == 0) return LOOM_OK;
    if (nb <= 0 || n % nb != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "%s: %lld values do not repeat a broadcast operand of %lld", what, (long long)n,
                 (long long)nb);
    if (!a || !b || !y) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL pointer", what);
    CUDA_CHECK(launch(bcast_kernel<OP>, grid_for(n, kThreads), kThreads, 0, stream,
                      a, n, b, nb, y));
    return LOOM_OK;
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_add(const float *a, const float *b, int64_t n, float *y,
                                     loom_error *err, cudaStream_t stream) {
    return binary<OP_ADD>("add", a, b, n, y, err, stream);
}
extern "C" loom_status loom_cuda_mul(const float *a, const float *b, int64_t n, float *y,
                                     loom_error *err, cudaStream_t stream) {
    return binary<OP_MUL>("mul", a, b, n, y, err, stream);
}
extern "C" loom_status loom_cuda_silu(const float *x, int64_t n, float *y, loom_error *err,
                                      cudaStream_t stream) {
    return binary<OP_SILU>("silu", x, nullptr, n, y, err, stream);
}
extern "C" loom_status loom_cuda_swiglu(const float *gate, const float *up, int64_t n, float *y,
                                        loom_error *err, cudaStream_t stream) {
    return binary<OP_SWIGLU>("swiglu", gate, up, n, y, err, stream);
}

extern "C" loom_status loom_cuda_add_bcast(const float *a, int64_t n, const float *b, int64_t nb,
                                           float *y, loom_error *err, cudaStream_t stream) {
    return bcast<OP_ADD>("add_bcast", a, n, b, nb, y, err, stream);
}
extern "C" loom_status loom_cuda_mul_bcast(const float *a, int64_t n, const float *b, int64_t nb,
                                           float *y, loom_error *err, cudaStream_t stream) {
    return bcast<OP_MUL>("mul_bcast", a, n, b, nb, y, err, stream);
}

extern "C" loom_status loom_cuda_bias_add(float *y, const float *bias, int64_t rows, int64_t m,
                                          loom_error *err, cudaStream_t stream) {
    if (rows < 0 || m < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "bias_add: rows = %lld, m = %lld", (long long)rows,
                 (long long)m);
    if (rows == 0 || m == 0) return LOOM_OK;
    if (!y || !bias) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "bias_add: NULL pointer");
    CUDA_CHECK(launch(bias_kernel, grid_for(rows * m, kThreads), kThreads, 0, stream,
                      y, bias, rows * m, m));
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_f16_to_f32(const uint16_t *src, int64_t n, float *dst,
                                            loom_error *err, cudaStream_t stream) {
    if (n < 0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "f16_to_f32: n = %lld", (long long)n);
    if (n == 0) return LOOM_OK;
    if (!src || !dst) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "f16_to_f32: NULL pointer");
    CUDA_CHECK(launch(f16_to_f32_kernel, grid_for(n, kThreads), kThreads, 0, stream, src, n, dst));
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_f32_to_f16(const float *src, int64_t n, uint16_t *dst,
                                            loom_error *err, cudaStream_t stream) {
    if (n < 0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "f32_to_f16: n = %lld", (long long)n);
    if (n == 0) return LOOM_OK;
    if (!src || !dst) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "f32_to_f16: NULL pointer");
    CUDA_CHECK(launch(f32_to_f16_kernel, grid_for(n, kThreads), kThreads, 0, stream, src, n, dst));
    return LOOM_OK;
}
