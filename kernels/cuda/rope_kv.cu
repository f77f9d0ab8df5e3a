// rope_kv.cu: the attention prologue of one layer in one launch (the IR's rope_kv_write): per
// head the optional RMSNorm x weight of Q and K, RoPE of both (NORM and NEOX), the roped K and
// V written into the KV cache (F32, F16 or INT8 with a per-row absmax scale) at each token's
// position, the roped Q out. Positions are read by the kernel from DEVICE memory (pos[T]), and
// the grid depends only on T and the head counts, so a captured CUDA graph replays at any
// position with no re-capture.
//
// Launch geometry: 128-thread blocks (4 warps), one warp per head row: T * n_head Q rows, then
// T * n_kv_head K rows; the warp of K row (t, h) also writes V row (t, h). Each warp stages its
// row in shared memory (head_dim floats; head_dim <= 2048): load + sum of squares, scale and
// weight in place, rotate the pairs in place (a lane owns whole pairs), store/convert.
// Latency (a decode step runs this on ~10 blocks, so it is a chain of memory round trips, not
// bandwidth): for head_dim <= 256 (kVpl values a lane) a lane issues all its loads at once into
// registers (the norm weight before pdl_wait: constant; q or k, v and the position after it),
// so a row costs one round trip instead of one per 32 values and per pass; the V row goes to
// the cache from shared memory too. Larger head_dim take the same steps in strided loops. Both
// paths do the same operations in the same order (same bits). (LOOM_ROPE_KV_REG=0, which forced
// the loop path for the A/B of bench/NOTES.md 7.8, measured no different end to end and was
// removed in session 11: the variable is no longer read.)
// Memory traffic: q, k, v read once (K/V rows of INT8 a second time from shared memory / L1),
// q_out and the two cache rows written once, the norm weights read per row (L1/L2 hits).
// Numeric contract (CPU twin loom_cpu_rope_kv_write): the norm as norm.cu (sum of squares in
// double, scale = (float)(1/sqrt(mean + eps)), (x * scale) * w in float32, no contraction):
// within 1e-5 relative (in practice equal); the angles as rope.cu (theta_scale = powf on the
// host, t = (float)pos multiplied i times in float32, theta = freq_scale * t bit-identical; cos
// and sin by a double range reduction and __sincosf, abs error < 1e-6), the rotation in IEEE
// float32 with no contraction: q_out within 1e-4 absolute of max(1, max |value|) for |pos| <
// 32768. The K cache holds those roped values converted by kv_store.cuh, as kv_write (F16 nearest
// even; INT8 amax / 127 with ties-to-even quantization), so it is within that tolerance plus
// one F16 rounding or one INT8 step; the V cache is bit-exact. A token whose position is
// outside 0 .. n_ctx - 1 writes no cache row (the executor checks positions on the host).
// Also here: loom_cuda_rope_kv_attention_at, the decode prologue + attention of one layer: on
// sm_90 (v6 shapes, LOOM_ATTN_FUSED on, the default) the prologue runs inside the attention
// kernel (attention_v5.cu, FP: rope.cuh's norm and angle code and kv_store's, so the same bits),
// else this
// file's launch followed by attention_at.
#include <math.h>

#include "kernels/cuda/kv_store.cuh"
#include "kernels/cuda/rope.cuh"

namespace loom_cuda {
namespace {

constexpr int64_t kMaxHeadDim = LOOM_CUDA_ROPE_KV_MAX_HEAD_DIM;  // kWarps * D floats <= 32 KB

struct PrologueArgs {
    const float *q, *k, *v;
    const int32_t *pos;
    const float *q_norm, *k_norm;  // both or neither
    float eps, theta_scale, freq_scale;
    int64_t T, nh, nkv, D, half, n_ctx;
    int neox, type;
    void *k_cache, *v_cache;
    float *k_scales, *v_scales;
    float *q_out;
};

// Values of a row a lane holds in the register path (head_dim <= 32 * kVpl).
constexpr int kVpl = 8;

// REG: the register path (head_dim <= 32 * kVpl); else strided loops over any head_dim.
template <bool REG>
static __global__ void __launch_bounds__(kThreads) prologue_kernel(PrologueArgs a) {
    pdl_launch_dependents();
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r = (int64_t)blockIdx.x * kWarps + warp, nq = a.T * a.nh;
    if (r >= nq + a.T * a.nkv) return;  // whole warps leave together (no memory touched)
    const bool is_q = r < nq;
    const int64_t t = is_q ? r / a.nh : (r - nq) / a.nkv, h = is_q ? r % a.nh : (r - nq) % a.nkv;
    const int64_t D = a.D;
    const float *src = is_q ? a.q + (t * a.nh + h) * D : a.k + (t * a.nkv + h) * D;
    const float *vsrc = a.v + (t * a.nkv + h) * D;
    const float *w = is_q ? a.q_norm : a.k_norm;
    float *s = smem + (int64_t)warp * D;

    float xv[REG ? kVpl : 1], vv[REG ? kVpl : 1], wv[REG ? kVpl : 1];
    if (REG) {  // constant: requested before the wait
#pragma unroll
        for (int j = 0; j < kVpl; j++) wv[j] = w && lane + 32 * j < D ? w[lane + 32 * j] : 0.0f;
    }
    pdl_wait();
    const int32_t p = a.pos[t];
    if constexpr (REG) {
#pragma unroll
        for (int j = 0; j < kVpl; j++) {
            const bool in = lane + 32 * j < D;
            xv[j] = in ? src[lane + 32 * j] : 0.0f;
            vv[j] = in && !is_q ? vsrc[lane + 32 * j] : 0.0f;
        }
        head_norm_rope<kVpl>(s, xv, wv, w != nullptr, D, a.eps, a.half, a.neox != 0, p,
                             a.theta_scale, a.freq_scale, lane);
    } else {
        double ss = 0.0;
        for (int64_t i = lane; i < D; i += 32) {
            const float x = src[i];
            s[i] = x;
            if (w) ss += (double)x * x;
        }
        if (w) {
            ss = warp_sum_d(ss);
            const float scale = (float)(1.0 / sqrt(ss / (double)D + (double)a.eps));
            for (int64_t i = lane; i < D; i += 32) s[i] = __fmul_rn(__fmul_rn(s[i], scale), w[i]);
        }
        __syncwarp();
        for (int64_t i = lane; i < a.half; i += 32)
            rope_rotate_pair(s, i, a.half, a.neox != 0, p, a.theta_scale, a.freq_scale);
        __syncwarp();
    }

    if (is_q) {
        float *dst = a.q_out + (t * a.nh + h) * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = s[i];
        return;
    }
    if (p < 0 || p >= a.n_ctx) return;  // only a bad device position gets here
    const int64_t cr = (int64_t)p * a.nkv + h;
    kv_store_row(s, D, a.type, a.k_cache, a.k_scales, cr, lane);
    if (REG) {  // the V row through the same shared row (the K store above has read it)
        __syncwarp();
#pragma unroll
        for (int j = 0; j < kVpl; j++)
            if (lane + 32 * j < D) s[lane + 32 * j] = vv[j];
        __syncwarp();
        kv_store_row(s, D, a.type, a.v_cache, a.v_scales, cr, lane);
    } else {
        kv_store_row(vsrc, D, a.type, a.v_cache, a.v_scales, cr, lane);
    }
}

// The parameter checks of rope_kv_write (also those of the prologue folded into attention).
static loom_status check_prologue(const loom_rope_params *p, const loom_kv_layout *kv, float eps,
                                  const float *q_norm, const float *k_norm, loom_error *err) {
    if (!p || !kv) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_write: NULL params or layout");
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "rope_kv_write: cache type %d", (int)kv->type);
    if (p->n_tokens < 0 || p->n_head < 0 || kv->n_ctx < 0 || p->n_kv_head != kv->n_kv_head ||
        p->head_dim != kv->head_dim || p->n_kv_head < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope_kv_write: tokens %lld, heads %lld/%lld, head_dim %lld do not fit the cache "
                 "layout (n_ctx %lld, heads %lld, head_dim %lld)",
                 (long long)p->n_tokens, (long long)p->n_head, (long long)p->n_kv_head,
                 (long long)p->head_dim, (long long)kv->n_ctx, (long long)kv->n_kv_head,
                 (long long)kv->head_dim);
    if (p->head_dim < 2 || p->head_dim > kMaxHeadDim || p->n_rot < 2 || p->n_rot % 2 != 0 ||
        p->n_rot > p->head_dim)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED,
                 "rope_kv_write: head_dim %lld (2..%lld) and n_rot %lld (even, <= head_dim)",
                 (long long)p->head_dim, (long long)kMaxHeadDim, (long long)p->n_rot);
    if (p->mode != LOOM_ROPE_NORM && p->mode != LOOM_ROPE_NEOX)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_write: unknown mode %d", (int)p->mode);
    if (!(p->freq_base > 0.0f) || !(p->freq_scale > 0.0f) || !(eps >= 0.0f))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope_kv_write: freq_base %g, freq_scale %g must be > 0 and eps %g >= 0",
                 (double)p->freq_base, (double)p->freq_scale, (double)eps);
    if ((q_norm == NULL) != (k_norm == NULL))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope_kv_write: q_norm and k_norm are both given or both NULL");
    return LOOM_OK;
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_rope_kv_write(const float *q, const float *k, const float *v,
                                               const int32_t *pos, const float *q_norm,
                                               const float *k_norm, float eps,
                                               const loom_rope_params *p, void *k_cache,
                                               float *k_scales, void *v_cache, float *v_scales,
                                               const loom_kv_layout *kv, float *q_out,
                                               loom_error *err, cudaStream_t stream) {
    loom_status st = check_prologue(p, kv, eps, q_norm, k_norm, err);
    if (st != LOOM_OK) return st;
    const int64_t rows = p->n_tokens * (p->n_head + p->n_kv_head);
    if (rows == 0) return LOOM_OK;
    if (!q || !k || !v || !pos || !q_out || !k_cache || !v_cache ||
        (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales)))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope_kv_write: NULL q, k, v, pos, q_out, cache or INT8 scales");
    PrologueArgs a;
    a.q = q, a.k = k, a.v = v, a.pos = pos, a.q_norm = q_norm, a.k_norm = k_norm, a.eps = eps;
    a.theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);  // as the CPU twin computes it
    a.freq_scale = p->freq_scale;
    a.T = p->n_tokens, a.nh = p->n_head, a.nkv = p->n_kv_head, a.D = p->head_dim;
    a.half = p->n_rot / 2, a.n_ctx = kv->n_ctx;
    a.neox = p->mode == LOOM_ROPE_NEOX, a.type = (int)kv->type;
    a.k_cache = k_cache, a.v_cache = v_cache, a.k_scales = k_scales, a.v_scales = v_scales;
    a.q_out = q_out;
    const unsigned grid = (unsigned)((rows + kWarps - 1) / kWarps);
    const size_t shmem = (size_t)kWarps * (size_t)p->head_dim * sizeof(float);
    if (p->head_dim <= 32 * kVpl)
        CUDA_CHECK(launch(prologue_kernel<true>, grid, kThreads, shmem, stream, a));
    else
        CUDA_CHECK(launch(prologue_kernel<false>, grid, kThreads, shmem, stream, a));
    return LOOM_OK;
}

static int g_fused_fallback_logged = 0;

// The decode prologue + attention of one layer (cuda_kernels.h). Until the fused launch takes
// a shape (or with LOOM_ATTN_FUSED=0) it is exactly rope_kv_write into q_tmp followed by
// attention_at over q_tmp: the reference the fused kernel is held to, bit for bit.
extern "C" loom_status loom_cuda_rope_kv_attention_at(
    const float *q, const float *k, const float *v, const int32_t *d_pos, const float *q_norm,
    const float *k_norm, float eps, const loom_rope_params *rp, void *k_cache, float *k_scales,
    void *v_cache, float *v_scales, const loom_kv_layout *kv, const loom_attn_params *ap,
    float *q_tmp, float *out, loom_error *err, cudaStream_t stream) {
    if (!rp || !kv || !ap)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_attention_at: NULL params or layout");
    if (ap->n_tokens != 1 || rp->n_tokens != 1 || ap->n_head != rp->n_head)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "rope_kv_attention_at: decode only (tokens %lld / %lld, heads %lld / %lld)",
                 (long long)rp->n_tokens, (long long)ap->n_tokens, (long long)rp->n_head,
                 (long long)ap->n_head);
    if (!d_pos || !q_tmp)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_attention_at: NULL device position or q_tmp");
    if (fast(SW_ATTN_FUSED) && cc_major() >= 9 && (uintptr_t)q % 16 == 0) {
        loom_status st = check_prologue(rp, kv, eps, q_norm, k_norm, err);
        if (st != LOOM_OK) return st;
        if (!k || !v || (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales)))
            ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_attention_at: NULL k, v or INT8 scales");
        AttnPrologue pro;
        pro.k = k, pro.v = v, pro.q_norm = q_norm, pro.k_norm = k_norm, pro.eps = eps;
        pro.theta_scale = powf(rp->freq_base, -2.0f / (float)rp->n_rot);  // as rope_kv_write
        pro.freq_scale = rp->freq_scale;
        pro.half = (int)(rp->n_rot / 2), pro.neox = rp->mode == LOOM_ROPE_NEOX;
        st = attention_at_fused(q, k_cache, k_scales, v_cache, v_scales, kv, ap, d_pos, pro, out,
                                err, stream);
        if (st == LOOM_OK || st == LOOM_ERR_INVALID_ARGUMENT) return st;
        if (st == LOOM_ERR_CUDA) log_fallback_once(&g_fused_fallback_logged, "rope_kv_attention", err);
        // LOOM_ERR_UNSUPPORTED (no fused kernel for this shape; nothing was launched) or a
        // failed launch: the two launches below
    }
    loom_status st = loom_cuda_rope_kv_write(q, k, v, d_pos, q_norm, k_norm, eps, rp, k_cache,
                                             k_scales, v_cache, v_scales, kv, q_tmp, err, stream);
    if (st != LOOM_OK) return st;
    return loom_cuda_attention_at(q_tmp, k_cache, k_scales, v_cache, v_scales, kv, ap, d_pos, out,
                                  err, stream);
}
