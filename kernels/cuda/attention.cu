// attention.cu: flash attention over the KV cache for decode (one query token, GQA, split-KV
// with a combine kernel) and batched causal prefill (N query tokens in one launch).
//
// Launch geometry: 128-thread blocks; grid (n_kv_head * head_groups, N tokens, splits). A
// block owns up to G = 8 query heads that share one KV head (GQA: kv_head = head / (n_head /
// n_kv_head)), one query token t (which sees positions 0 .. pos0 + t) and one contiguous range
// of those positions (split-KV: `splits` blocks per head over parts of a long context; a second
// kernel combines their partial (max, sum, output) triples). The block walks its range in
// tiles of 64 positions:
//   1. scores: thread (j = tid/2, half = tid%2) loads half of K row j with 16-byte loads and
//      dots it with the G query heads held in shared memory; the two halves meet by a shuffle;
//      s[g][j] = scale * dot goes to shared memory only (masked positions get -inf);
//   2. online softmax: warp w updates heads w and w+4: tile max, m_new, p = exp(s - m_new),
//      l = l * exp(m_old - m_new) + sum p;
//   3. V: thread (grp, c) owns dims 8c .. 8c+7 (one 16-byte F16 load a position) and the
//      tile positions j = grp (mod NG), NG = 128 / (D / 8) position groups, accumulating
//      acc[g][e] = acc[g][e] * corr[g] + sum_j p[g][j] * V[j][8c + e] in registers;
//      the groups' sums meet once, at the end, in shared memory (fixed order).
// The fast path (LOOM_FAST_ATTN) uses G = min(8, n_head / n_kv_head) and enough splits to give
// the GPU about eight blocks per multiprocessor (at most 128); the simple path uses G = 1 and
// no split.
// Shared memory (GM = heads a block, 1..8): q GM x 128 + p GM x 64 + final sum NG x GM x D
// (= 1024 GM) + 3 GM floats: 38.1 KB at GM = 8, 19 KB at GM = 4 (sm_87 budget: 48 KB).
//
// Memory traffic: every K and V row of the visible range is read once per block; with G
// covering a whole GQA group, once per KV head (decode). Scores never leave shared memory.
// Split partials: (D + 2) floats per head and split.
//
// Numeric contract: float32 online softmax; K and V decoded as the CPU does (f16 -> f32, int8
// -> q * d, with d applied after the dot for K). Within 1e-4 of max |out| of the CPU twin for
// F32/F16 caches (INT8 likewise, both decode the same codes). head_dim 64 or 128.
#include <math.h>

#include "kernels/cuda/common.cuh"

namespace loom_cuda {
namespace {

constexpr int kTile = 64, kMaxG = 8, kMaxD = 128, kMaxSplits = 128;

struct AttnArgs {
    const float *q;
    const void *kc, *vc;
    const float *ks, *vs;
    float *out;
    float *part;  // [N][n_head][splits][D + 2] when splits > 1
    const int32_t *pos_dev;  // device position of query 0 (the _at launcher), else NULL
    int64_t n_kv_head, n_head, pos0, n_tokens, n_ctx;
    float scale;
    int group;    // n_head / n_kv_head
    int G;        // heads a block
    int hgroups;  // ceil(group / G)
    int splits;   // gridDim.z: the most splits a block may find in use
};

// Position of query 0: the launcher's value, or the device value clamped to 0 .. n_ctx - N (a
// device position out of range can neither fault nor read unwritten rows past the cache).
__device__ __forceinline__ int64_t query_pos0(const AttnArgs &a) {
    if (!a.pos_dev) return a.pos0;
    const int64_t p = *a.pos_dev;
    return p < 0 ? 0 : (p > a.n_ctx - a.n_tokens ? a.n_ctx - a.n_tokens : p);
}

// Splits in use for this position: the same function of (pos0 + N, a.splits) in both
// launchers, so a grid sized from n_ctx partitions the positions exactly as a grid sized from
// the position does (the _at results are bit-identical to the by-value ones).
__device__ __forceinline__ int splits_used(const AttnArgs &a, int64_t pos0) {
    const int64_t ntiles = (pos0 + a.n_tokens + kTile - 1) / kTile;
    return (int)min((int64_t)a.splits, ntiles);
}

template <int KVT>
__device__ __forceinline__ void load16(const void *base, int64_t elem, float *v, int &n) {
    // Loads 16 bytes at element `elem` and decodes them into v (n values).
    if (KVT == LOOM_KV_F32) {
        float4 f = *reinterpret_cast<const float4 *>((const float *)base + elem);
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
        n = 4;
    } else if (KVT == LOOM_KV_F16) {
        uint4 u = *reinterpret_cast<const uint4 *>((const uint16_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = f16_bits_to_f32((uint16_t)(w[i] & 0xFFFF));
            v[2 * i + 1] = f16_bits_to_f32((uint16_t)(w[i] >> 16));
        }
        n = 8;
    } else {
        uint4 u = *reinterpret_cast<const uint4 *>((const int8_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = (float)(int8_t)((w[i >> 2] >> (8 * (i & 3))) & 0xFF);
        n = 16;
    }
}

// Loads 8 consecutive cache elements at `elem` (16-, 8- or 32-byte aligned) as floats.
template <int KVT>
__device__ __forceinline__ void load8(const void *base, int64_t elem, float *v) {
    if (KVT == LOOM_KV_F32) {
        const float4 *p = reinterpret_cast<const float4 *>((const float *)base + elem);
        float4 f0 = p[0], f1 = p[1];
        v[0] = f0.x; v[1] = f0.y; v[2] = f0.z; v[3] = f0.w;
        v[4] = f1.x; v[5] = f1.y; v[6] = f1.z; v[7] = f1.w;
    } else if (KVT == LOOM_KV_F16) {
        uint4 u = *reinterpret_cast<const uint4 *>((const uint16_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = f16_bits_to_f32((uint16_t)(w[i] & 0xFFFF));
            v[2 * i + 1] = f16_bits_to_f32((uint16_t)(w[i] >> 16));
        }
    } else {
        uint2 u = *reinterpret_cast<const uint2 *>((const int8_t *)base + elem);
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = (float)(int8_t)(((i < 4 ? u.x : u.y) >> (8 * (i & 3))) & 0xFF);
    }
}

template <int D, int KVT, int GM>
static __global__ void __launch_bounds__(kThreads, 1) attn_kernel(const AttnArgs a) {
    constexpr int kPer = KVT == LOOM_KV_F32 ? 4 : (KVT == LOOM_KV_F16 ? 8 : 16);
    constexpr int TPR = D / 8;         // threads per V row (8 dims each)
    constexpr int NG = kThreads / TPR; // position groups in phase 3
    __shared__ __align__(16) float qs[GM][kMaxD];
    __shared__ float red[NG][GM][D];  // 8 GM KB: final sum over position groups
    __shared__ float ps[GM][kTile];
    __shared__ float m_sh[GM], l_sh[GM], corr_sh[GM];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kvh = blockIdx.x / a.hgroups, hg = blockIdx.x % a.hgroups;
    const int h0 = kvh * a.group + hg * a.G;
    const int G = min(a.G, a.group - hg * a.G);
    const int64_t t = blockIdx.y;
    const int64_t pos0 = query_pos0(a);
    const int splits = splits_used(a, pos0);
    if ((int)blockIdx.z >= splits) return;  // a split beyond this position's range
    const int64_t L = pos0 + t + 1;  // visible positions 0 .. L-1
    const int64_t ntiles = (L + kTile - 1) / kTile;
    const int64_t tiles_per = (ntiles + splits - 1) / splits;
    const int64_t lo = (int64_t)blockIdx.z * tiles_per * kTile;
    const int64_t hi = min(L, lo + tiles_per * kTile);
    const int64_t row_stride = a.n_kv_head * D;  // elements between positions

    for (int i = tid; i < GM * D; i += kThreads) {
        const int g = i / D, d = i % D;
        qs[g][d] = g < G ? a.q[(t * a.n_head + h0 + g) * D + d] : 0.0f;
    }
    if (tid < GM) { m_sh[tid] = -INFINITY; l_sh[tid] = 0.0f; }
    float acc[GM][8];
#pragma unroll
    for (int g = 0; g < GM; g++)
#pragma unroll
        for (int e = 0; e < 8; e++) acc[g][e] = 0.0f;
    __syncthreads();

    for (int64_t j0 = lo; j0 < hi; j0 += kTile) {
        // 1. scores
        {
            const int j = tid >> 1, half = tid & 1;
            const int64_t pos = j0 + j;
            float dot[GM];
#pragma unroll
            for (int g = 0; g < GM; g++) dot[g] = 0.0f;
            if (pos < hi) {
                const int64_t e0 = pos * row_stride + (int64_t)kvh * D + half * (D / 2);
#pragma unroll
                for (int c = 0; c < (D / 2) / kPer; c++) {
                    float v[16];
                    int n;
                    load16<KVT>(a.kc, e0 + c * kPer, v, n);
#pragma unroll
                    for (int g = 0; g < GM; g++) {
                        if (g < G) {
#pragma unroll
                            for (int e = 0; e < kPer; e++)
                                dot[g] = fmaf(qs[g][half * (D / 2) + c * kPer + e], v[e], dot[g]);
                        }
                    }
                }
            }
            const float ksc = (KVT == LOOM_KV_INT8 && pos < hi)
                                  ? a.ks[pos * a.n_kv_head + kvh] : 1.0f;
#pragma unroll
            for (int g = 0; g < GM; g++) {
                float s = dot[g] + __shfl_xor_sync(0xffffffffu, dot[g], 1);
                if (half == 0 && g < G)
                    ps[g][j] = pos < hi ? s * ksc * a.scale : -INFINITY;
            }
        }
        __syncthreads();
        // 2. online softmax, warp w owns heads w and w + 4
        for (int g = warp; g < G; g += kWarps) {
            float s0 = ps[g][lane], s1 = ps[g][lane + 32];
            float mt = warp_max(fmaxf(s0, s1));
            float mo = m_sh[g], mn = fmaxf(mo, mt);
            float p0 = mn == -INFINITY ? 0.0f : expf(s0 - mn);
            float p1 = mn == -INFINITY ? 0.0f : expf(s1 - mn);
            ps[g][lane] = p0;
            ps[g][lane + 32] = p1;
            float sum = warp_sum(p0 + p1);
            __syncwarp();  // every lane has read m_sh[g] before lane 0 rewrites it
            if (lane == 0) {
                float corr = mo == -INFINITY ? 0.0f : expf(mo - mn);
                corr_sh[g] = corr;
                l_sh[g] = l_sh[g] * corr + sum;
                m_sh[g] = mn;
            }
        }
        __syncthreads();
        // 3. V accumulation: thread (grp, c) owns dims 8c .. 8c+7 and the tile positions
        //    j = grp, grp + NG, ... (one 16-, 8- or 32-byte load per position)
        {
            const int c = tid % TPR, grp = tid / TPR;
#pragma unroll
            for (int g = 0; g < GM; g++) {
                if (g < G) {
                    const float cr = corr_sh[g];
#pragma unroll
                    for (int e = 0; e < 8; e++) acc[g][e] *= cr;
                }
            }
            const int jn = (int)min((int64_t)kTile, hi - j0);
#pragma unroll 2
            for (int j = grp; j < jn; j += NG) {
                const int64_t pos = j0 + j;
                float v[8];
                load8<KVT>(a.vc, pos * row_stride + (int64_t)kvh * D + 8 * c, v);
                if (KVT == LOOM_KV_INT8) {
                    const float vsc = a.vs[pos * a.n_kv_head + kvh];
#pragma unroll
                    for (int e = 0; e < 8; e++) v[e] *= vsc;
                }
#pragma unroll
                for (int g = 0; g < GM; g++) {
                    if (g < G) {
                        const float pg = ps[g][j];
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[g][e] = fmaf(pg, v[e], acc[g][e]);
                    }
                }
            }
        }
        __syncthreads();
    }

    // sum the NG position groups' accumulators (fixed order), then thread d < D writes dim d
    {
        const int c = tid % TPR, grp = tid / TPR;
#pragma unroll
        for (int g = 0; g < GM; g++) {
            if (g < G) {
#pragma unroll
                for (int e = 0; e < 8; e++) red[grp][g][8 * c + e] = acc[g][e];
            }
        }
    }
    __syncthreads();
    if (tid >= D) return;
#pragma unroll
    for (int g = 0; g < GM; g++) {
        if (g >= G) break;
        float o = 0.0f;
        for (int grp = 0; grp < NG; grp++) o += red[grp][g][tid];
        const int64_t h = h0 + g;
        if (splits == 1) {
            a.out[(t * a.n_head + h) * D + tid] = o / l_sh[g];
        } else {
            float *pp = a.part + ((t * a.n_head + h) * a.splits + blockIdx.z) * (D + 2);
            pp[tid] = o;
            if (tid == 0) { pp[D] = m_sh[g]; pp[D + 1] = l_sh[g]; }
        }
    }
}

// Combines the split partials: grid (n_head, N), thread per dim. Nothing to do when this
// position used one split (the main kernel wrote out itself).
static __global__ void __launch_bounds__(kThreads)
attn_combine_kernel(const AttnArgs a, int D) {
    const int splits = splits_used(a, query_pos0(a));
    if (splits == 1) return;
    const int64_t n_head = a.n_head, h = blockIdx.x, t = blockIdx.y;
    const float *pp = a.part + (t * n_head + h) * a.splits * (D + 2);
    float *out = a.out;
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) M = fmaxf(M, pp[s * (D + 2) + D]);
    for (int d = threadIdx.x; d < D; d += kThreads) {
        float num = 0.0f, den = 0.0f;
        for (int s = 0; s < splits; s++) {
            const float m = pp[s * (D + 2) + D];
            if (m == -INFINITY) continue;
            const float w = expf(m - M);
            num = fmaf(w, pp[s * (D + 2) + d], num);
            den = fmaf(w, pp[s * (D + 2) + D + 1], den);
        }
        out[(t * n_head + h) * D + d] = num / den;
    }
}

template <int D, int GM>
void launch_g(const AttnArgs &a, int kvt, dim3 grid, cudaStream_t stream) {
    if (kvt == LOOM_KV_F32) attn_kernel<D, LOOM_KV_F32, GM><<<grid, kThreads, 0, stream>>>(a);
    else if (kvt == LOOM_KV_F16) attn_kernel<D, LOOM_KV_F16, GM><<<grid, kThreads, 0, stream>>>(a);
    else attn_kernel<D, LOOM_KV_INT8, GM><<<grid, kThreads, 0, stream>>>(a);
}

// Heads a block: the compile-time bound GM (1, 2, 4 or 8) is the smallest >= a.G, so the
// accumulators and shared arrays are sized for the GQA group at hand.
template <int D>
void launch_d(const AttnArgs &a, int kvt, dim3 grid, cudaStream_t stream) {
    if (a.G <= 1) launch_g<D, 1>(a, kvt, grid, stream);
    else if (a.G <= 2) launch_g<D, 2>(a, kvt, grid, stream);
    else if (a.G <= 4) launch_g<D, 4>(a, kvt, grid, stream);
    else launch_g<D, 8>(a, kvt, grid, stream);
}

loom_status run(AttnArgs a, int kvt, int64_t D, int64_t N, loom_error *err,
                cudaStream_t stream) {
    dim3 grid((unsigned)(a.n_kv_head * a.hgroups), (unsigned)N, (unsigned)a.splits);
    if (D == 64) launch_d<64>(a, kvt, grid, stream);
    else launch_d<128>(a, kvt, grid, stream);
    LAUNCH_CHECK();
    if (a.splits > 1) {
        attn_combine_kernel<<<dim3((unsigned)a.n_head, (unsigned)N), kThreads, 0, stream>>>(
            a, (int)D);
        LAUNCH_CHECK();
    }
    return LOOM_OK;
}

int g_attn_fallback_logged = 0;

// Checks everything but the position; the by-value launcher checks that itself.
static loom_status check_attn(const float *q, const void *k_cache, const float *k_scales,
                              const void *v_cache, const float *v_scales,
                              const loom_kv_layout *kv, const loom_attn_params *p,
                              const float *out, loom_error *err) {
    if (!kv || !p) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: NULL layout or params");
    const int64_t D = kv->head_dim, N = p->n_tokens;
    if (N < 0 || p->n_head <= 0 || kv->n_kv_head <= 0 || p->n_head % kv->n_kv_head != 0 ||
        N > kv->n_ctx)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention: bad shape (N %lld, heads %lld/%lld, n_ctx %lld)", (long long)N,
                 (long long)p->n_head, (long long)kv->n_kv_head, (long long)kv->n_ctx);
    if (D != 64 && D != 128)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "attention: head_dim %lld (CUDA supports 64 and 128)",
                 (long long)D);
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "attention: cache type %d", (int)kv->type);
    if (N > 65535) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: N = %lld > 65535", (long long)N);
    if (N > 0 && (!q || !k_cache || !v_cache || !out ||
                  (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales))))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: NULL pointer");
    if ((uintptr_t)k_cache % 16 != 0 || (uintptr_t)v_cache % 16 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: K/V caches must be 16-byte aligned");
    return LOOM_OK;
}

// Runs attention with query 0 at `pos0` (pos_dev NULL) or at *pos_dev. `L_grid` is the largest
// pos0 + N the grid must cover: the position itself (by value) or n_ctx (_at).
static loom_status launch_attn(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p, int64_t pos0,
                               const int32_t *pos_dev, int64_t L_grid, float *out,
                               loom_error *err, cudaStream_t stream) {
    const int64_t D = kv->head_dim, N = p->n_tokens;
    AttnArgs a = {};
    a.q = q; a.kc = k_cache; a.vc = v_cache; a.ks = k_scales; a.vs = v_scales; a.out = out;
    a.pos_dev = pos_dev;
    a.n_kv_head = kv->n_kv_head; a.n_head = p->n_head; a.pos0 = pos0; a.scale = p->scale;
    a.n_tokens = N; a.n_ctx = kv->n_ctx;
    a.group = (int)(p->n_head / kv->n_kv_head);
    if (fast(SW_FAST_ATTN)) {
        AttnArgs f = a;
        f.G = a.group < kMaxG ? a.group : kMaxG;
        f.hgroups = (f.group + f.G - 1) / f.G;
        const int64_t blocks = kv->n_kv_head * f.hgroups * N;
        const int64_t ntiles = (L_grid + kTile - 1) / kTile;
        // The split count depends on the shape only (never on the position): ~8 blocks per SM,
        // and N * splits <= kMaxSplits so that the partials fit loom_cuda_scratch_bytes_for.
        int64_t smax = (8 * sm_count() + blocks - 1) / blocks;
        if (smax > kMaxSplits / N) smax = kMaxSplits / N;
        int64_t splits = smax < ntiles ? smax : ntiles;
        if (splits < 1) splits = 1;
        if (splits > 1) {
            size_t bytes = (size_t)(N * p->n_head * splits * (D + 2)) * sizeof(float);
            f.part = (float *)scratch(bytes, stream);
            if (!f.part) splits = 1;
        }
        f.splits = (int)splits;
        loom_status st = run(f, kv->type, D, N, err, stream);
        if (st == LOOM_OK) return st;
        log_fallback_once(&g_attn_fallback_logged, "attention", err);
    }
    a.G = 1;
    a.hgroups = a.group;
    a.splits = 1;
    return run(a, kv->type, D, N, err, stream);
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_attention(const float *q, const void *k_cache,
                                           const float *k_scales, const void *v_cache,
                                           const float *v_scales, const loom_kv_layout *kv,
                                           const loom_attn_params *p, float *out,
                                           loom_error *err, cudaStream_t stream) {
    loom_status st = check_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, out, err);
    if (st != LOOM_OK) return st;
    if (p->pos0 < 0 || p->pos0 + p->n_tokens > kv->n_ctx)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention: positions %lld .. %lld + %lld outside the cache of %lld",
                 (long long)p->pos0, (long long)p->pos0, (long long)p->n_tokens,
                 (long long)kv->n_ctx);
    if (p->n_tokens == 0) return LOOM_OK;
    return launch_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, p->pos0, nullptr,
                       p->pos0 + p->n_tokens, out, err, stream);
}

extern "C" loom_status loom_cuda_attention_at(const float *q, const void *k_cache,
                                              const float *k_scales, const void *v_cache,
                                              const float *v_scales, const loom_kv_layout *kv,
                                              const loom_attn_params *p, const int32_t *d_pos0,
                                              float *out, loom_error *err, cudaStream_t stream) {
    loom_status st = check_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, out, err);
    if (st != LOOM_OK) return st;
    if (!d_pos0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention_at: NULL device position");
    if (p->n_tokens == 0) return LOOM_OK;
    return launch_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, 0, d_pos0, kv->n_ctx, out,
                       err, stream);
}
