/* attention_test.c: KV cache writes (F32 copy, F16 rounding, INT8 round trip within d/2) and
 * causal GQA attention against a double reference over shapes (head_dim 8/64/128, GQA 1/2/4,
 * N 1..33, pos0 0 and later), thread-count independence, batched prefill == one token at a
 * time (bit for bit), and the workspace form (cpu_workspace.h) == the plain one.
 */
#include <float.h>

#include "kernels/cpu/cpu_workspace.h"
#include "test_util.h"

static size_t elem_size(loom_kv_type t) {
    return t == LOOM_KV_F32 ? 4 : t == LOOM_KV_F16 ? 2 : 1;
}

/* A cache of layout kv, poisoned (0xff bytes: NaN halves and floats, -1 int8). */
typedef struct cache {
    loom_kv_layout kv;
    void *data;
    float *scales;
} cache;

static cache cache_new(loom_kv_type type, int64_t n_ctx, int64_t n_kv_head, int64_t head_dim) {
    cache c = {.kv = {.type = type, .n_ctx = n_ctx, .n_kv_head = n_kv_head, .head_dim = head_dim}};
    size_t n = (size_t)(n_ctx * n_kv_head * head_dim);
    c.data = malloc(n * elem_size(type));
    memset(c.data, 0xff, n * elem_size(type));
    c.scales = type == LOOM_KV_INT8 ? malloc((size_t)(n_ctx * n_kv_head) * sizeof(float)) : NULL;
    if (c.scales) poison(c.scales, n_ctx * n_kv_head);
    return c;
}

static void cache_free(cache *c) {
    free(c->data);
    free(c->scales);
}

/* Cache element (row, i) decoded as the kernels must decode it. */
static double cache_get(const cache *c, int64_t row, int64_t i) {
    const int64_t e = row * c->kv.head_dim + i;
    switch (c->kv.type) {
    case LOOM_KV_F32: return ((const float *)c->data)[e];
    case LOOM_KV_F16: return loom_fp16_to_fp32(((const uint16_t *)c->data)[e]);
    case LOOM_KV_INT8: return (double)((const int8_t *)c->data)[e] * c->scales[row];
    }
    return NAN;
}

/* ---- kv_write ------------------------------------------------------------------------------ */

Test(kv_write, f32_f16_int8_rows_land_at_their_positions) {
    rng r = {21};
    const int64_t n_ctx = 10, KVH = 2, D = 64, T = 3, pos0 = 4;
    float *src = random_floats(&r, T * KVH * D, 2.0f);
    src[5] = 0.0f;
    for (int ty = 0; ty < 3; ty++) {
        cache c = cache_new((loom_kv_type)ty, n_ctx, KVH, D);
        loom_error err = {0};
        cr_assert_eq(loom_cpu_kv_write(src, T, pos0, c.data, c.scales, &c.kv, &err), LOOM_OK, "%s",
                     err.msg);
        for (int64_t row = 0; row < n_ctx * KVH; row++) {
            const bool written = row >= pos0 * KVH && row < (pos0 + T) * KVH;
            const float *x = src + (row - pos0 * KVH) * D;
            float amax = 0;
            if (written)
                for (int64_t i = 0; i < D; i++) amax = fmaxf(amax, fabsf(x[i]));
            for (int64_t i = 0; i < D; i++) {
                const size_t es = elem_size(c.kv.type);
                const uint8_t *byte = (const uint8_t *)c.data + (row * D + i) * es;
                if (!written) {
                    for (size_t b = 0; b < es; b++) cr_assert_eq(byte[b], 0xff, "row %lld touched",
                                                                 (long long)row);
                    continue;
                }
                double got = cache_get(&c, row, i);
                if (ty == LOOM_KV_F32) cr_assert_eq(got, x[i]);
                if (ty == LOOM_KV_F16)
                    cr_assert_eq(((const uint16_t *)c.data)[row * D + i], loom_fp32_to_fp16(x[i]));
                if (ty == LOOM_KV_INT8) {
                    const double d = amax / 127.0;
                    cr_assert(fabs(c.scales[row] - d) <= 1e-7 * d);
                    cr_assert(fabs(got - x[i]) <= d / 2 + 4 * FLT_EPSILON * amax,
                              "row %lld i %lld: %.8g vs %.8g (d %.3g)", (long long)row,
                              (long long)i, got, x[i], d);
                }
            }
            if (ty == LOOM_KV_INT8 && written) {
                /* The largest element maps to +-127 exactly. */
                int maxq = 0;
                for (int64_t i = 0; i < D; i++) {
                    int q = ((const int8_t *)c.data)[row * D + i];
                    maxq = abs(q) > maxq ? abs(q) : maxq;
                }
                cr_assert_eq(maxq, 127);
            }
        }
        cache_free(&c);
    }
    free(src);
}

Test(kv_write, zero_row_int8_and_bounds) {
    cache c = cache_new(LOOM_KV_INT8, 4, 1, 8);
    float zeros[8] = {0};
    cr_assert_eq(loom_cpu_kv_write(zeros, 1, 3, c.data, c.scales, &c.kv, NULL), LOOM_OK);
    cr_assert_eq(c.scales[3], 0.0f);
    for (int i = 0; i < 8; i++) cr_assert_eq(((int8_t *)c.data)[3 * 8 + i], 0);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_kv_write(zeros, 2, 3, c.data, c.scales, &c.kv, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "4 positions") != NULL, "%s", err.msg);
    cr_assert_eq(loom_cpu_kv_write(zeros, 1, 0, c.data, NULL, &c.kv, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    loom_kv_layout bad = c.kv;
    bad.type = (loom_kv_type)9;
    cr_assert_eq(loom_cpu_kv_write(zeros, 1, 0, c.data, c.scales, &bad, &err), LOOM_ERR_UNSUPPORTED);
    cache_free(&c);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* Double reference over the decoded cache. */
static void attention_reference(const float *q, const cache *k, const cache *v,
                                const loom_attn_params *p, double *out) {
    const int64_t D = k->kv.head_dim, H = p->n_head, KVH = k->kv.n_kv_head;
    double *s = malloc((size_t)(p->pos0 + p->n_tokens) * sizeof(double));
    for (int64_t t = 0; t < p->n_tokens; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kvh = h / (H / KVH), last = p->pos0 + t;
            const float *qv = q + (t * H + h) * D;
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j <= last; j++) {
                double dot = 0;
                for (int64_t i = 0; i < D; i++) dot += qv[i] * cache_get(k, j * KVH + kvh, i);
                s[j] = dot * p->scale;
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j <= last; j++) z += (s[j] = exp(s[j] - m));
            for (int64_t i = 0; i < D; i++) {
                double acc = 0;
                for (int64_t j = 0; j <= last; j++) acc += s[j] * cache_get(v, j * KVH + kvh, i);
                out[(t * H + h) * D + i] = acc / z;
            }
        }
    free(s);
}

typedef struct attn_case { int64_t D, KVH, group, N, pos0; } attn_case;

static const attn_case attn_cases[] = {
    {64, 2, 1, 1, 0},   {64, 2, 2, 7, 0},    {128, 2, 4, 1, 40}, {128, 1, 4, 33, 0},
    {64, 4, 2, 12, 21}, {8, 4, 2, 5, 3},     {128, 8, 1, 2, 100}, {64, 1, 2, 33, 31},
};

/* Fills a cache of n_ctx positions through kv_write (positions 0 .. filled-1) and returns it. */
static cache filled_cache(rng *r, loom_kv_type type, int64_t n_ctx, int64_t KVH, int64_t D,
                          int64_t filled) {
    cache c = cache_new(type, n_ctx, KVH, D);
    float *src = random_floats(r, filled * KVH * D, 1.0f);
    cr_assert_eq(loom_cpu_kv_write(src, filled, 0, c.data, c.scales, &c.kv, NULL), LOOM_OK);
    free(src);
    return c;
}

Test(attention, matches_double_reference_all_cache_types) {
    rng r = {22};
    for (size_t ci = 0; ci < sizeof attn_cases / sizeof attn_cases[0]; ci++)
        for (int ty = 0; ty < 3; ty++) {
            const attn_case ac = attn_cases[ci];
            const int64_t H = ac.KVH * ac.group, n_ctx = ac.pos0 + ac.N + 3;
            cache k = filled_cache(&r, (loom_kv_type)ty, n_ctx, ac.KVH, ac.D, ac.pos0 + ac.N);
            cache v = filled_cache(&r, (loom_kv_type)ty, n_ctx, ac.KVH, ac.D, ac.pos0 + ac.N);
            float *q = random_floats(&r, ac.N * H * ac.D, 2.0f);
            float *out = malloc(ac.N * H * ac.D * sizeof(float));
            double *ref = malloc(ac.N * H * ac.D * sizeof(double));
            poison(out, ac.N * H * ac.D);
            loom_attn_params p = {.n_tokens = ac.N, .n_head = H, .pos0 = ac.pos0,
                                  .scale = 1.0f / sqrtf((float)ac.D)};
            loom_error err = {0};
            cr_assert_eq(loom_cpu_attention(q, k.data, k.scales, v.data, v.scales, &k.kv, &p, out,
                                            &err),
                         LOOM_OK, "%s", err.msg);
            attention_reference(q, &k, &v, &p, ref);
            for (int64_t i = 0; i < ac.N * H * ac.D; i++)
                cr_assert(fabs(out[i] - ref[i]) <= 2e-6,
                          "case %zu type %d: out[%lld] = %.8g, reference %.8g", ci, ty,
                          (long long)i, out[i], ref[i]);
            cache_free(&k);
            cache_free(&v);
            free(q);
            free(out);
            free(ref);
        }
}

/* The causal mask: changing cache rows after a query's position must not change its output,
 * and query t at position 0 just returns V row 0. */
Test(attention, causal_mask_and_first_position) {
    rng r = {23};
    const int64_t D = 64, KVH = 2, H = 4, N = 4, n_ctx = 8;
    cache k = filled_cache(&r, LOOM_KV_F32, n_ctx, KVH, D, n_ctx);
    cache v = filled_cache(&r, LOOM_KV_F32, n_ctx, KVH, D, n_ctx);
    float *q = random_floats(&r, N * H * D, 1.0f);
    float *a = malloc(N * H * D * sizeof(float)), *b = malloc(N * H * D * sizeof(float));
    loom_attn_params p = {.n_tokens = N, .n_head = H, .pos0 = 0, .scale = 0.125f};
    cr_assert_eq(loom_cpu_attention(q, k.data, NULL, v.data, NULL, &k.kv, &p, a, NULL), LOOM_OK);
    for (int64_t h = 0; h < H; h++)
        cr_assert(memcmp(a + h * D, (float *)v.data + (h / 2) * D, D * sizeof(float)) == 0,
                  "position 0, head %lld reads V row of kv head %lld", (long long)h,
                  (long long)(h / 2));
    /* Overwrite positions 4..7 (never visible to queries 0..3). */
    float *junk = random_floats(&r, 4 * KVH * D, 50.0f);
    cr_assert_eq(loom_cpu_kv_write(junk, 4, 4, k.data, NULL, &k.kv, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_kv_write(junk, 4, 4, v.data, NULL, &v.kv, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_attention(q, k.data, NULL, v.data, NULL, &k.kv, &p, b, NULL), LOOM_OK);
    cr_assert(memcmp(a, b, N * H * D * sizeof(float)) == 0);
    cache_free(&k);
    cache_free(&v);
    free(q);
    free(a);
    free(b);
    free(junk);
}

Test(attention, threads_and_prefill_equal_token_by_token) {
    rng r = {24};
    const int64_t D = 128, KVH = 2, H = 8, N = 17, pos0 = 5, n_ctx = 32;
    for (int ty = 0; ty < 3; ty++) {
        cache k = filled_cache(&r, (loom_kv_type)ty, n_ctx, KVH, D, pos0 + N);
        cache v = filled_cache(&r, (loom_kv_type)ty, n_ctx, KVH, D, pos0 + N);
        float *q = random_floats(&r, N * H * D, 1.0f);
        float *one = malloc(N * H * D * sizeof(float)), *many = malloc(N * H * D * sizeof(float));
        loom_attn_params p = {.n_tokens = N, .n_head = H, .pos0 = pos0, .scale = 0.088f};
        loom_cpu_set_threads(1);
        cr_assert_eq(loom_cpu_attention(q, k.data, k.scales, v.data, v.scales, &k.kv, &p, one,
                                        NULL),
                     LOOM_OK);
        loom_cpu_set_threads(3);
        poison(many, N * H * D);
        cr_assert_eq(loom_cpu_attention(q, k.data, k.scales, v.data, v.scales, &k.kv, &p, many,
                                        NULL),
                     LOOM_OK);
        cr_assert(memcmp(one, many, N * H * D * sizeof(float)) == 0, "type %d: 1 vs 3 threads",
                  ty);
        for (int64_t t = 0; t < N; t++) {
            loom_attn_params pt = {.n_tokens = 1, .n_head = H, .pos0 = pos0 + t, .scale = 0.088f};
            float step[8 * 128];
            cr_assert_eq(loom_cpu_attention(q + t * H * D, k.data, k.scales, v.data, v.scales,
                                            &k.kv, &pt, step, NULL),
                         LOOM_OK);
            cr_assert(memcmp(step, one + t * H * D, H * D * sizeof(float)) == 0,
                      "type %d token %lld: decode step differs from prefill", ty, (long long)t);
        }
        loom_cpu_set_threads(0);
        cache_free(&k);
        cache_free(&v);
        free(q);
        free(one);
        free(many);
    }
}

/* The workspace form (what the CPU backend calls, one workspace per session) is bit for bit the
 * plain form whatever the workspace held before, and reuses its scratch: it grows only for a
 * larger call. */
Test(attention, workspace_form_equals_plain_and_reuses_its_scratch) {
    rng r = {25};
    const int64_t D = 64, KVH = 2, H = 4, n_ctx = 40;
    const struct { int64_t N, pos0; } calls[] = {{9, 20}, {1, 3}, {1, 28}, {33, 0}, {2, 37}};
    for (int ty = 0; ty < 3; ty++) {
        cache k = filled_cache(&r, (loom_kv_type)ty, n_ctx, KVH, D, n_ctx);
        cache v = filled_cache(&r, (loom_kv_type)ty, n_ctx, KVH, D, n_ctx);
        float *q = random_floats(&r, 33 * H * D, 1.0f);
        float *a = malloc(33 * H * D * sizeof(float)), *b = malloc(33 * H * D * sizeof(float));
        loom_cpu_workspace ws = {0};
        size_t cap = 0;
        for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
            loom_attn_params p = {.n_tokens = calls[c].N, .n_head = H, .pos0 = calls[c].pos0,
                                  .scale = 0.125f};
            const size_t n = (size_t)(calls[c].N * H * D);
            poison(a, (int64_t)n);
            poison(b, (int64_t)n);
            cr_assert_eq(loom_cpu_attention(q, k.data, k.scales, v.data, v.scales, &k.kv, &p, a,
                                            NULL),
                         LOOM_OK);
            const float *before = ws.data;
            cr_assert_eq(loom_cpu_attention_ws(q, k.data, k.scales, v.data, v.scales, &k.kv, &p,
                                               b, &ws, NULL),
                         LOOM_OK);
            cr_assert(memcmp(a, b, n * sizeof(float)) == 0, "type %d call %zu", ty, c);
            const size_t need = (size_t)loom_cpu_get_threads() *
                                (size_t)(calls[c].pos0 + calls[c].N + 2 * D);
            if (need <= cap) cr_assert_eq(ws.data, before, "call %zu: the scratch was reused", c);
            cap = need > cap ? need : cap;
            cr_assert_eq(ws.cap, cap, "call %zu", c);
        }
        loom_cpu_workspace_free(&ws);
        cr_assert(ws.data == NULL && ws.cap == 0);
        loom_cpu_workspace_free(&ws);
        loom_cpu_workspace_free(NULL);
        cache_free(&k);
        cache_free(&v);
        free(q);
        free(a);
        free(b);
    }
}

Test(attention, bad_parameters) {
    cache c = cache_new(LOOM_KV_F32, 4, 3, 8);
    float q[4 * 8] = {0}, out[4 * 8];
    loom_error err = {0};
    loom_attn_params p = {.n_tokens = 1, .n_head = 4, .pos0 = 0, .scale = 1.0f};
    cr_assert_eq(loom_cpu_attention(q, c.data, NULL, c.data, NULL, &c.kv, &p, out, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "multiple") != NULL, "%s", err.msg);
    p.n_head = 3;
    p.pos0 = 4;
    cr_assert_eq(loom_cpu_attention(q, c.data, NULL, c.data, NULL, &c.kv, &p, out, &err),
                 LOOM_ERR_LIMIT);
    cache_free(&c);
    cache i8 = cache_new(LOOM_KV_INT8, 4, 1, 8);
    p = (loom_attn_params){.n_tokens = 1, .n_head = 1, .pos0 = 0, .scale = 1.0f};
    cr_assert_eq(loom_cpu_attention(q, i8.data, NULL, i8.data, NULL, &i8.kv, &p, out, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cache_free(&i8);
}
