/* cpu_workspace.h: the allocation-free forms of the CPU kernels that need scratch memory
 * (attention, rope_kv_write, the matmuls with a folded RMSNorm), for callers that run them step
 * after step: the executor's CPU backend keeps one workspace per backend instance (per session)
 * and passes it to every call.
 *
 * The plain forms in cpu_kernels.h keep the CUDA twins' exact parameter lists and are these
 * functions with a workspace of their own for the one call (tests, one-off callers). Results do
 * not depend on the form nor on the workspace's history: bit for bit the same. A workspace
 * serves one call at a time (one per thread); it only grows, to the largest call's need, until
 * loom_cpu_workspace_free.
 *
 *   loom_cpu_workspace ws = {0};
 *   for (...) st = loom_cpu_attention_ws(q, k, NULL, v, NULL, &kv, &p, out, &ws, &err);
 *   loom_cpu_workspace_free(&ws);
 */
#ifndef LOOM_KERNELS_CPU_WORKSPACE_H
#define LOOM_KERNELS_CPU_WORKSPACE_H

#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"

typedef struct loom_cpu_workspace {
    float *data; /* owned; NULL until a call needs scratch */
    size_t cap;  /* floats at data */
} loom_cpu_workspace;

/* Frees the scratch; ws is then empty (and reusable). NULL is a no-op. */
void loom_cpu_workspace_free(loom_cpu_workspace *ws);

/* loom_cpu_attention (cpu_kernels.h), its scratch (per worker: the visible positions' scores and
 * two head_dim rows) in ws. LOOM_ERR_OUT_OF_MEMORY when ws cannot grow. */
loom_status loom_cpu_attention_ws(const float *q, const void *k_cache, const float *k_scales,
                                  const void *v_cache, const float *v_scales,
                                  const loom_kv_layout *kv, const loom_attn_params *p, float *out,
                                  loom_cpu_workspace *ws, loom_error *err);

/* loom_cpu_rope_kv_write (cpu_kernels.h), its scratch (the normed, roped K of all tokens) in ws.
 * LOOM_ERR_OUT_OF_MEMORY when ws cannot grow. */
loom_status loom_cpu_rope_kv_write_ws(const float *q, const float *k, const float *v,
                                      const int32_t *pos, const float *q_norm,
                                      const float *k_norm, float eps, const loom_rope_params *p,
                                      void *k_cache, float *k_scales, void *v_cache,
                                      float *v_scales, const loom_kv_layout *kv, float *q_out,
                                      loom_cpu_workspace *ws, loom_error *err);

/* loom_cpu_matmul_normed / _pair_normed / _triple_normed (cpu_kernels.h), the normalized x
 * (n * K floats) in ws. LOOM_ERR_OUT_OF_MEMORY when ws cannot grow. */
loom_status loom_cpu_matmul_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                      loom_kweight w, float *y, loom_cpu_workspace *ws,
                                      loom_error *err);
loom_status loom_cpu_matmul_pair_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                           loom_kweight a, loom_kweight b,
                                           loom_pair_epilogue epilogue, float *ya, float *yb,
                                           loom_cpu_workspace *ws, loom_error *err);
loom_status loom_cpu_matmul_triple_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                             const loom_kweight w[3], const float *const bias[3],
                                             float *const y[3], loom_cpu_workspace *ws,
                                             loom_error *err);

#endif /* LOOM_KERNELS_CPU_WORKSPACE_H */
