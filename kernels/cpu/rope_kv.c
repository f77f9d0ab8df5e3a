/* rope_kv.c: the attention prologue of one layer in one call (the IR's rope_kv_write): the
 * optional per-head RMSNorm x weight of Q and K, RoPE of both, K (roped) and V into the KV cache
 * at each token's position, the roped Q out.
 *
 * It is the unfused chain by construction: the norm is loom_cpu_rms_norm (rows of head_dim),
 * the rotation loom_cpu_rope (both tensors in one call: one angle table per token, the same
 * cosf/sinf values a call per tensor computes), the writes loom_cpu_kv_write one token at a
 * time (positions need not be consecutive). So every output, the cache bytes included, is bit
 * for bit what fused_rms_norm/rms_norm+mul, rope and kv_write give on the CPU backend. Every
 * position is checked before anything is written. The roped K lives in a workspace's scratch
 * (cpu_workspace.h): the caller's, or one made for the call.
 */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

loom_status loom_cpu_rope_kv_write_ws(const float *q, const float *k, const float *v,
                                      const int32_t *pos, const float *q_norm,
                                      const float *k_norm, float eps, const loom_rope_params *p,
                                      void *k_cache, float *k_scales, void *v_cache,
                                      float *v_scales, const loom_kv_layout *kv, float *q_out,
                                      loom_cpu_workspace *ws, loom_error *err) {
    loom_status st = loom_cpu_check_kv_layout("rope_kv_write", kv, err);
    if (st) return st;
    if (!p) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "rope_kv_write: params are NULL");
    if (p->n_tokens < 0 || p->n_head < 0 || p->n_kv_head != kv->n_kv_head ||
        p->head_dim != kv->head_dim)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope_kv_write: tokens %lld, heads %lld/%lld, head_dim %lld do not "
                              "fit the cache layout (heads %lld, head_dim %lld)",
                              (long long)p->n_tokens, (long long)p->n_head,
                              (long long)p->n_kv_head, (long long)p->head_dim,
                              (long long)kv->n_kv_head, (long long)kv->head_dim);
    if ((q_norm == NULL) != (k_norm == NULL))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope_kv_write: q_norm and k_norm are both given or both NULL");
    const int64_t T = p->n_tokens, D = p->head_dim, qrow = p->n_head * D, krow = kv->n_kv_head * D;
    if (T == 0) return LOOM_OK;
    if (!q || !k || !v || !pos || !q_out || !k_cache || !v_cache)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope_kv_write: q, k, v, pos, q_out or a cache is NULL");
    if (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope_kv_write: INT8 caches without scale arrays");
    for (int64_t t = 0; t < T; t++)
        if (pos[t] < 0 || pos[t] >= kv->n_ctx)
            return loom_error_set(err, LOOM_ERR_LIMIT,
                                  "rope_kv_write: position %d of token %lld is outside the cache "
                                  "of %lld positions", pos[t], (long long)t, (long long)kv->n_ctx);
    float *kr = loom_cpu_workspace_reserve(ws, (size_t)(T * krow), "rope_kv_write", err);
    if (!kr) return LOOM_ERR_OUT_OF_MEMORY;
    if (q_norm) {
        st = loom_cpu_rms_norm(q, q_norm, T * p->n_head, D, eps, q_out, err);
        if (!st) st = loom_cpu_rms_norm(k, k_norm, T * kv->n_kv_head, D, eps, kr, err);
    } else {
        if (q_out != q) memmove(q_out, q, (size_t)(T * qrow) * sizeof *q_out);
        memcpy(kr, k, (size_t)(T * krow) * sizeof *kr);
    }
    if (!st) st = loom_cpu_rope(q_out, kr, pos, p, err);
    for (int64_t t = 0; t < T && !st; t++) {
        st = loom_cpu_kv_write(kr + t * krow, 1, pos[t], k_cache, k_scales, kv, err);
        if (!st) st = loom_cpu_kv_write(v + t * krow, 1, pos[t], v_cache, v_scales, kv, err);
    }
    return st;
}

loom_status loom_cpu_rope_kv_write(const float *q, const float *k, const float *v,
                                   const int32_t *pos, const float *q_norm, const float *k_norm,
                                   float eps, const loom_rope_params *p, void *k_cache,
                                   float *k_scales, void *v_cache, float *v_scales,
                                   const loom_kv_layout *kv, float *q_out, loom_error *err) {
    loom_cpu_workspace ws = {0};
    loom_status st = loom_cpu_rope_kv_write_ws(q, k, v, pos, q_norm, k_norm, eps, p, k_cache,
                                               k_scales, v_cache, v_scales, kv, q_out, &ws, err);
    loom_cpu_workspace_free(&ws);
    return st;
}
