// kv.cu: KV-cache write: src[T, n_kv_head, head_dim] (float) into the cache rows of positions
// pos0 .. pos0+T-1, as F32, F16 or INT8 with a per-row absmax scale.
//
// Launch geometry: 128-thread blocks, one warp per cache row (T * n_kv_head rows, 4 a block);
// lanes stride the row. INT8 takes the row's absmax with a warp butterfly first. The grid
// depends on T and the layout only, never on the position, so loom_cuda_kv_write_at (position
// read from device memory by the kernel) can be captured once in a CUDA graph and replayed.
// Device positions out of range: token t goes to position p = *d_pos0 + t only when
// 0 <= p < n_ctx; other rows are skipped (nothing written, no fault).
// Memory traffic: src read once (twice for INT8, second from L1), the cache row written once.
// Numeric contract: bit-exact with the CPU twin; the conversion of a row is kv_store.cuh's
// (F16 round to nearest even; INT8 per-row absmax scale).
#include "kernels/cuda/kv_store.cuh"

namespace loom_cuda {
namespace {

static __global__ void __launch_bounds__(kThreads)
kv_kernel(const float *src, int64_t rows, int64_t pos0, const int32_t *d_pos0, int64_t nkv,
          int64_t n_ctx, int64_t D, void *cache, float *scales, int type) {
    pdl_launch_dependents();
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (r >= rows) return;
    const int64_t p0 = d_pos0 ? (int64_t)*d_pos0 : pos0;
    const int64_t pos = p0 + r / nkv;
    if (pos < 0 || pos >= n_ctx) return;  // only a device position can get here
    const int64_t cr = pos * nkv + r % nkv;  // cache row = pos * n_kv_head + h
    kv_store_row(src + r * D, D, type, cache, scales, cr, lane);
}

// Validates everything but the position (the by-value launcher checks that itself).
static loom_status check_kv(const float *src, int64_t n_tokens, void *cache, float *scales,
                            const loom_kv_layout *kv, loom_error *err) {
    if (!kv) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "kv_write: NULL layout");
    if (n_tokens < 0 || n_tokens > kv->n_ctx || kv->n_kv_head <= 0 || kv->head_dim <= 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "kv_write: %lld tokens for a cache of %lld (heads %lld, D %lld)",
                 (long long)n_tokens, (long long)kv->n_ctx, (long long)kv->n_kv_head,
                 (long long)kv->head_dim);
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "kv_write: cache type %d", (int)kv->type);
    if (n_tokens > 0 && (!src || !cache || (kv->type == LOOM_KV_INT8 && !scales)))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "kv_write: NULL src, cache or INT8 scales");
    return LOOM_OK;
}

static loom_status launch_kv(const float *src, int64_t n_tokens, int64_t pos0,
                             const int32_t *d_pos0, void *cache, float *scales,
                             const loom_kv_layout *kv, loom_error *err, cudaStream_t stream) {
    const int64_t rows = n_tokens * kv->n_kv_head;
    CUDA_CHECK(launch(kv_kernel, (unsigned)((rows + kWarps - 1) / kWarps), kThreads, 0, stream,
                      src, rows, pos0, d_pos0, kv->n_kv_head, kv->n_ctx, kv->head_dim, cache,
                      scales, (int)kv->type));
    return LOOM_OK;
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_kv_write(const float *src, int64_t n_tokens, int64_t pos0,
                                          void *cache, float *scales, const loom_kv_layout *kv,
                                          loom_error *err, cudaStream_t stream) {
    loom_status st = check_kv(src, n_tokens, cache, scales, kv, err);
    if (st != LOOM_OK) return st;
    if (pos0 < 0 || pos0 + n_tokens > kv->n_ctx)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "kv_write: positions %lld..%lld outside the cache of %lld (heads %lld, D %lld)",
                 (long long)pos0, (long long)(pos0 + n_tokens), (long long)kv->n_ctx,
                 (long long)kv->n_kv_head, (long long)kv->head_dim);
    if (n_tokens == 0) return LOOM_OK;
    return launch_kv(src, n_tokens, pos0, nullptr, cache, scales, kv, err, stream);
}

extern "C" loom_status loom_cuda_kv_write_at(const float *src, int64_t n_tokens,
                                             const int32_t *d_pos0, void *cache, float *scales,
                                             const loom_kv_layout *kv, loom_error *err,
                                             cudaStream_t stream) {
    loom_status st = check_kv(src, n_tokens, cache, scales, kv, err);
    if (st != LOOM_OK) return st;
    if (!d_pos0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "kv_write_at: NULL device position");
    if (n_tokens == 0) return LOOM_OK;
    return launch_kv(src, n_tokens, 0, d_pos0, cache, scales, kv, err, stream);
}
