// kv.cu: KV-cache write: src[T, n_kv_head, head_dim] (float) into the cache rows of positions
// pos0 .. pos0+T-1, as F32, F16 or INT8 with a per-row absmax scale.
//
// Launch geometry: 128-thread blocks, one warp per cache row (T * n_kv_head rows, 4 a block);
// lanes stride the row. INT8 takes the row's absmax with a warp butterfly first.
// Memory traffic: src read once (twice for INT8, second from L1), the cache row written once.
// Numeric contract: bit-exact with the CPU twin. F16: round to nearest even. INT8: amax =
// max |x|, d = amax / 127, id = d ? 1/d : 0, q = rint(x * id) (ties to even), all IEEE single
// operations; scales[row] = d.
#include "kernels/cuda/common.cuh"

namespace loom_cuda {
namespace {

static __global__ void __launch_bounds__(kThreads)
kv_kernel(const float *src, int64_t rows, int64_t row0, int64_t D, void *cache, float *scales,
          int type) {
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float *s = src + r * D;
    const int64_t cr = row0 + r;  // cache row = pos * n_kv_head + h
    if (type == LOOM_KV_F32) {
        float *dst = (float *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = s[i];
    } else if (type == LOOM_KV_F16) {
        uint16_t *dst = (uint16_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = __half_as_ushort(__float2half_rn(s[i]));
    } else {
        float amax = 0.0f;
        for (int64_t i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(s[i]));
        amax = warp_max(amax);
        const float d = __fdiv_rn(amax, 127.0f);
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        int8_t *dst = (int8_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) {
            int q = __float2int_rn(__fmul_rn(s[i], id));
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            dst[i] = (int8_t)q;
        }
        if (lane == 0) scales[cr] = d;
    }
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_kv_write(const float *src, int64_t n_tokens, int64_t pos0,
                                          void *cache, float *scales, const loom_kv_layout *kv,
                                          loom_error *err, cudaStream_t stream) {
    if (!kv) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "kv_write: NULL layout");
    if (n_tokens < 0 || pos0 < 0 || pos0 + n_tokens > kv->n_ctx || kv->n_kv_head <= 0 ||
        kv->head_dim <= 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "kv_write: positions %lld..%lld outside the cache of %lld (heads %lld, D %lld)",
                 (long long)pos0, (long long)(pos0 + n_tokens), (long long)kv->n_ctx,
                 (long long)kv->n_kv_head, (long long)kv->head_dim);
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "kv_write: cache type %d", (int)kv->type);
    if (n_tokens == 0) return LOOM_OK;
    if (!src || !cache || (kv->type == LOOM_KV_INT8 && !scales))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "kv_write: NULL src, cache or INT8 scales");
    const int64_t rows = n_tokens * kv->n_kv_head;
    kv_kernel<<<(unsigned)((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(
        src, rows, pos0 * kv->n_kv_head, kv->head_dim, cache, scales, (int)kv->type);
    LAUNCH_CHECK();
    return LOOM_OK;
}
