/* rope.c: rotary position embedding, in place on Q [T, n_head, D] and K [T, n_kv_head, D].
 *
 * Angles as llama.cpp's CPU backend computes them (ggml_rope_cache_init with no YaRN
 * extrapolation): theta_scale = powf(base, -2/n_rot); per token t = (float)pos, and for pair
 * i = 0, 1, ... theta_i = freq_scale * t, then t *= theta_scale; cos/sin by cosf/sinf. The
 * angles of a token are computed once and shared by all its heads, ROPE_CHUNK pairs at a time into
 * a table on the stack (nothing is allocated; theta runs on across chunks, so every angle is the
 * one a single pass gives). NORM rotates (x[2i], x[2i+1]), NEOX rotates (x[i], x[i + n_rot/2]);
 * dims from n_rot on pass through.
 */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

enum { ROPE_CHUNK = 128 }; /* pairs per angle table: all of them for head_dim <= 256 */

/* Rotates pairs i0 .. i0 + n - 1 of every head of x by the table cs (cos, sin of pair i0 + i at
 * cs[2i], cs[2i + 1]). */
static void rotate_heads(float *x, int64_t n_heads, int64_t D, int64_t n_rot, loom_rope_mode mode,
                         int64_t i0, int64_t n, const float *cs) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * D;
        for (int64_t i = i0; i < i0 + n; i++) {
            const float c = cs[2 * (i - i0)], s = cs[2 * (i - i0) + 1];
            float *a = mode == LOOM_ROPE_NEOX ? &v[i] : &v[2 * i];
            float *b = mode == LOOM_ROPE_NEOX ? &v[i + half] : &v[2 * i + 1];
            const float x0 = *a, x1 = *b;
            *a = x0 * c - x1 * s;
            *b = x0 * s + x1 * c;
        }
    }
}

loom_status loom_cpu_rope(float *q, float *k, const int32_t *pos, const loom_rope_params *p,
                          loom_error *err) {
    if (!p) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "rope: params are NULL");
    if (p->n_tokens < 0 || p->n_head < 0 || (k && p->n_kv_head < 0) || p->head_dim < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope: negative size (tokens %lld, heads %lld, kv heads %lld, "
                              "head_dim %lld)",
                              (long long)p->n_tokens, (long long)p->n_head,
                              (long long)p->n_kv_head, (long long)p->head_dim);
    if (p->mode != LOOM_ROPE_NORM && p->mode != LOOM_ROPE_NEOX)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "rope: mode %d (supported: 0 NORM, 2 NEOX)", (int)p->mode);
    if (p->n_rot < 2 || p->n_rot % 2 != 0 || p->n_rot > p->head_dim)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope: n_rot %lld must be even and in [2, head_dim = %lld]",
                              (long long)p->n_rot, (long long)p->head_dim);
    if (!(p->freq_base > 0.0f) || !(p->freq_scale > 0.0f))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rope: freq_base %g and freq_scale %g must be > 0",
                              (double)p->freq_base, (double)p->freq_scale);
    if (p->n_tokens == 0) return LOOM_OK;
    if (!pos || (!q && p->n_head > 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "rope: %s is NULL",
                              !pos ? "positions" : "q");

    float cs[2 * ROPE_CHUNK]; /* (cos, sin) per pair */
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    const int64_t D = p->head_dim, half = p->n_rot / 2;
    for (int64_t t = 0; t < p->n_tokens; t++) {
        float theta = (float)pos[t];
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
            const int64_t n = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
            for (int64_t i = 0; i < n; i++) {
                const float angle = p->freq_scale * theta;
                cs[2 * i] = cosf(angle);
                cs[2 * i + 1] = sinf(angle);
                theta *= theta_scale;
            }
            if (q) rotate_heads(q + t * p->n_head * D, p->n_head, D, p->n_rot, p->mode, i0, n, cs);
            if (k)
                rotate_heads(k + t * p->n_kv_head * D, p->n_kv_head, D, p->n_rot, p->mode, i0, n,
                             cs);
        }
    }
    return LOOM_OK;
}
