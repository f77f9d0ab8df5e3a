// rope.cu: rotary position embedding in place on q[T, n_head, D] and k[T, n_kv_head, D],
// NORM (adjacent pairs) and NEOX (pairs i, i + n_rot/2) modes, cos/sin computed on the fly.
//
// Launch geometry: 128-thread blocks, one thread per rotated pair: grid-stride over
// T * (n_head + n_kv_head) * n_rot/2 pairs (q heads first, then k heads).
// Memory traffic: each rotated element read and written once; dims >= n_rot are not touched.
// Numeric contract: theta_scale = powf(base, -2/n_rot) is computed ON THE HOST with the same
// powf the CPU twin uses and passed in, then t = (float)pos multiplied by it i times (pair i)
// in float32 as the CPU does, theta = freq_scale * t, so theta is bit-identical; cosf/sinf are
// computed by a double-precision range reduction and __sincosf
// on [-pi, pi] (abs error < 1e-6): within 1e-4 absolute of the CPU for |pos| < 32768, |x| <= 1.
#include <math.h>

#include "kernels/cuda/rope.cuh"

namespace loom_cuda {
namespace {

static __global__ void __launch_bounds__(kThreads)
rope_kernel(float *q, float *k, const int32_t *pos, int64_t T, int64_t nh, int64_t nkv,
            int64_t D, int64_t n_rot, int neox, float theta_scale, float freq_scale) {
    pdl_wait();
    pdl_launch_dependents();
    const int64_t half = n_rot / 2, heads = nh + (k ? nkv : 0);
    const int64_t total = T * heads * half;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = idx % half, th = idx / half, h = th % heads, t = th / heads;
        float *base = h < nh ? q + (t * nh + h) * D : k + (t * nkv + (h - nh)) * D;
        rope_rotate_pair(base, i, half, neox != 0, pos[t], theta_scale, freq_scale);
    }
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_rope(float *q, float *k, const int32_t *pos,
                                      const loom_rope_params *p, loom_error *err,
                                      cudaStream_t stream) {
    if (!p) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope: NULL params");
    if (p->n_tokens < 0 || p->n_head < 0 || p->n_kv_head < 0 || p->head_dim <= 0 ||
        p->n_rot < 2 || p->n_rot % 2 != 0 || p->n_rot > p->head_dim)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope: bad shape (T = %lld, heads %lld/%lld, D = %lld, n_rot = %lld)",
                 (long long)p->n_tokens, (long long)p->n_head, (long long)p->n_kv_head,
                 (long long)p->head_dim, (long long)p->n_rot);
    if (p->mode != LOOM_ROPE_NORM && p->mode != LOOM_ROPE_NEOX)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope: unknown mode %d", (int)p->mode);
    if (p->n_tokens == 0) return LOOM_OK;
    if (!q || !pos) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope: NULL q or pos");
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    const int64_t total = p->n_tokens * (p->n_head + (k ? p->n_kv_head : 0)) * (p->n_rot / 2);
    if (total == 0) return LOOM_OK;
    CUDA_CHECK(launch(rope_kernel, grid_for(total, kThreads), kThreads, 0, stream, q, k, pos,
                      p->n_tokens, p->n_head, p->n_kv_head, p->head_dim, p->n_rot,
                      (int)(p->mode == LOOM_ROPE_NEOX), theta_scale, p->freq_scale));
    return LOOM_OK;
}
