/* attention.c: causal GQA attention of N query tokens over one layer's KV cache (F32, F16 or
 * INT8 with per-row scales), the reference for decode (N = 1) and batched prefill.
 *
 * Work split: the N * n_head (token, head) pairs over the pool; each pair is computed whole by
 * one thread, two passes over its visible cache rows 0 .. pos0 + t: scores (float32 dot in i
 * order, scaled) into a per-worker scratch row, then softmax weights and the weighted sum of V
 * rows in j order (contract in cpu_kernels.h). Cache rows are decoded to float one at a time
 * into per-worker scratch. The scratch comes from a workspace (cpu_workspace.h): the caller's,
 * or one made for the call. Results do not depend on the thread count or the workspace.
 */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

typedef struct attn_job {
    const float *q;
    const void *k, *v;
    const float *k_scales, *v_scales;
    loom_kv_layout kv;
    loom_attn_params p;
    int64_t group; /* query heads per KV head */
    float *out;
    float *scratch;       /* per worker: scratch_stride floats */
    int64_t scratch_stride;
} attn_job;

/* The cache row (pos, h) as floats: a pointer into an F32 cache, or decoded into buf. */
static const float *cache_row(const attn_job *j, const void *cache, const float *scales,
                              int64_t pos, int64_t h, float *buf) {
    const int64_t D = j->kv.head_dim, row = pos * j->kv.n_kv_head + h;
    switch (j->kv.type) {
    case LOOM_KV_F32:
        return (const float *)cache + row * D;
    case LOOM_KV_F16: {
        const uint16_t *src = (const uint16_t *)cache + row * D;
        const float *f16 = loom_cpu_f16_table();
        for (int64_t i = 0; i < D; i++) buf[i] = f16[src[i]];
        return buf;
    }
    case LOOM_KV_INT8: {
        const int8_t *src = (const int8_t *)cache + row * D;
        const float d = scales[row];
        for (int64_t i = 0; i < D; i++) buf[i] = (float)src[i] * d;
        return buf;
    }
    }
    LOOM_ASSERT(!"unknown cache type");
    return NULL;
}

static void attn_range(void *ctx, int64_t begin, int64_t end, int worker) {
    const attn_job *j = ctx;
    const int64_t D = j->kv.head_dim, H = j->p.n_head;
    float *scores = j->scratch + (int64_t)worker * j->scratch_stride;
    float *buf = scores + j->p.pos0 + j->p.n_tokens;
    float *acc = buf + D;
    for (int64_t item = begin; item < end; item++) {
        const int64_t t = item / H, h = item % H, kvh = h / j->group;
        const int64_t last = j->p.pos0 + t; /* inclusive */
        const float *q = j->q + (t * H + h) * D;
        float m = -INFINITY;
        for (int64_t pos = 0; pos <= last; pos++) {
            const float *k = cache_row(j, j->k, j->k_scales, pos, kvh, buf);
            float s = 0.0f;
            for (int64_t i = 0; i < D; i++) s += q[i] * k[i];
            s *= j->p.scale;
            scores[pos] = s;
            m = s > m ? s : m;
        }
        float z = 0.0f;
        for (int64_t pos = 0; pos <= last; pos++) {
            scores[pos] = expf(scores[pos] - m);
            z += scores[pos];
        }
        for (int64_t i = 0; i < D; i++) acc[i] = 0.0f;
        for (int64_t pos = 0; pos <= last; pos++) {
            const float *v = cache_row(j, j->v, j->v_scales, pos, kvh, buf);
            const float e = scores[pos];
            for (int64_t i = 0; i < D; i++) acc[i] += e * v[i];
        }
        float *o = j->out + (t * H + h) * D;
        for (int64_t i = 0; i < D; i++) o[i] = acc[i] / z;
    }
}

loom_status loom_cpu_attention_ws(const float *q, const void *k_cache, const float *k_scales,
                                  const void *v_cache, const float *v_scales,
                                  const loom_kv_layout *kv, const loom_attn_params *p, float *out,
                                  loom_cpu_workspace *ws, loom_error *err) {
    loom_status s = loom_cpu_check_kv_layout("attention", kv, err);
    if (s != LOOM_OK) return s;
    if (!p) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "attention: params are NULL");
    if (p->n_tokens < 0 || p->n_head < 0 || p->pos0 < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "attention: negative size (tokens %lld, heads %lld, pos0 %lld)",
                              (long long)p->n_tokens, (long long)p->n_head, (long long)p->pos0);
    if (p->n_head > 0 && (kv->n_kv_head <= 0 || p->n_head % kv->n_kv_head != 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "attention: n_head %lld is not a multiple of n_kv_head %lld",
                              (long long)p->n_head, (long long)kv->n_kv_head);
    if (p->pos0 > kv->n_ctx || p->n_tokens > kv->n_ctx - p->pos0)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "attention: positions %lld .. %lld + %lld exceed the cache of %lld "
                              "positions",
                              (long long)p->pos0, (long long)p->pos0, (long long)p->n_tokens,
                              (long long)kv->n_ctx);
    if (!isfinite(p->scale))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "attention: scale %g is not finite",
                              (double)p->scale);
    const int64_t items = p->n_tokens * p->n_head, D = kv->head_dim;
    if (items == 0 || D == 0) return LOOM_OK;
    if (!q || !k_cache || !v_cache || !out)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "attention: %s is NULL",
                              !q ? "q" : !k_cache ? "k_cache" : !v_cache ? "v_cache" : "out");
    if (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "attention: INT8 cache without %s scales", !k_scales ? "K" : "V");

    attn_job j = {.q = q, .k = k_cache, .v = v_cache, .k_scales = k_scales, .v_scales = v_scales,
                  .kv = *kv, .p = *p, .group = p->n_head / kv->n_kv_head, .out = out};
    j.scratch_stride = p->pos0 + p->n_tokens + 2 * D;
    const int workers = loom_cpu_get_threads();
    j.scratch = loom_cpu_workspace_reserve(ws, (size_t)workers * (size_t)j.scratch_stride,
                                           "attention", err);
    if (!j.scratch) return LOOM_ERR_OUT_OF_MEMORY;
    loom_cpu_parallel_for(items, (p->pos0 + p->n_tokens) * D * 2, attn_range, &j);
    return LOOM_OK;
}

loom_status loom_cpu_attention(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p, float *out,
                               loom_error *err) {
    loom_cpu_workspace ws = {0};
    loom_status st = loom_cpu_attention_ws(q, k_cache, k_scales, v_cache, v_scales, kv, p, out,
                                           &ws, err);
    loom_cpu_workspace_free(&ws);
    return st;
}
