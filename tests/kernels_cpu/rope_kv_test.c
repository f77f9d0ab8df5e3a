/* rope_kv_test.c: the CPU twin of the attention prologue, loom_cpu_rope_kv_write, against the
 * chain it replaces (loom_cpu_rms_norm, loom_cpu_rope, loom_cpu_kv_write) byte for byte, for
 * F32, F16 and INT8 caches, both rope modes, with and without norms, positions out of order; and
 * its refusals (a position outside the cache writes nothing; one norm without the other; a
 * layout that does not match the params); the workspace form (cpu_workspace.h) byte for byte.
 */
#include <stdio.h>

#include "kernels/cpu/cpu_workspace.h"
#include "test_util.h"

static size_t elem(loom_kv_type t) { return t == LOOM_KV_F32 ? 4 : t == LOOM_KV_F16 ? 2 : 1; }

Test(rope_kv_write, equals_norm_rope_kv_write_chain_byte_for_byte) {
    rng r = {11};
    const int64_t T = 5, H = 6, Hkv = 2, D = 32, C = 16;
    const int32_t pos[5] = {9, 3, 4, 15, 0};
    for (int t = 0; t < 3; t++)
        for (int mode = 0; mode < 2; mode++)
            for (int norms = 0; norms < 2; norms++) {
                loom_kv_layout kv = {(loom_kv_type)t, C, Hkv, D};
                loom_rope_params p = {T, H, Hkv, D, mode ? 16 : 32,
                                      mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM, 1e4f, 0.5f};
                float *q = random_floats(&r, T * H * D, 2), *k = random_floats(&r, T * Hkv * D, 2);
                float *v = random_floats(&r, T * Hkv * D, 2);
                float *qw = random_floats(&r, D, 1), *kw = random_floats(&r, D, 1);
                size_t cb = (size_t)(C * Hkv * D) * elem(kv.type), sb = (size_t)(C * Hkv) * 4;
                uint8_t *c[4];
                float *s[4];
                for (int i = 0; i < 4; i++) {
                    c[i] = malloc(cb), s[i] = malloc(sb);
                    memset(c[i], 0xA5, cb), memset(s[i], 0xA5, sb);
                }
                bool i8 = kv.type == LOOM_KV_INT8;
                float *qo = malloc((size_t)(T * H * D) * 4), *q2 = malloc((size_t)(T * H * D) * 4);
                float *k2 = malloc((size_t)(T * Hkv * D) * 4);
                /* fused */
                cr_assert_eq(loom_cpu_rope_kv_write(q, k, v, pos, norms ? qw : NULL,
                                                    norms ? kw : NULL, 1e-6f, &p, c[0],
                                                    i8 ? s[0] : NULL, c[1], i8 ? s[1] : NULL, &kv,
                                                    qo, NULL),
                             LOOM_OK);
                /* the chain, as the executor runs the unfused ops */
                memcpy(q2, q, (size_t)(T * H * D) * 4);
                memcpy(k2, k, (size_t)(T * Hkv * D) * 4);
                if (norms) {
                    cr_assert_eq(loom_cpu_rms_norm(q2, qw, T * H, D, 1e-6f, q2, NULL), LOOM_OK);
                    cr_assert_eq(loom_cpu_rms_norm(k2, kw, T * Hkv, D, 1e-6f, k2, NULL), LOOM_OK);
                }
                loom_rope_params pq = p, pk = p;
                pq.n_kv_head = 0;
                pk.n_head = Hkv, pk.n_kv_head = 0;
                cr_assert_eq(loom_cpu_rope(q2, NULL, pos, &pq, NULL), LOOM_OK);
                cr_assert_eq(loom_cpu_rope(k2, NULL, pos, &pk, NULL), LOOM_OK);
                for (int64_t i = 0; i < T; i++) {
                    cr_assert_eq(loom_cpu_kv_write(k2 + i * Hkv * D, 1, pos[i], c[2],
                                                   i8 ? s[2] : NULL, &kv, NULL), LOOM_OK);
                    cr_assert_eq(loom_cpu_kv_write(v + i * Hkv * D, 1, pos[i], c[3],
                                                   i8 ? s[3] : NULL, &kv, NULL), LOOM_OK);
                }
                char what[64];
                snprintf(what, sizeof what, "type %d mode %d norms %d", t, mode, norms);
                cr_assert(!memcmp(qo, q2, (size_t)(T * H * D) * 4), "q_out %s", what);
                cr_assert(!memcmp(c[0], c[2], cb) && !memcmp(s[0], s[2], sb), "K cache %s", what);
                cr_assert(!memcmp(c[1], c[3], cb) && !memcmp(s[1], s[3], sb), "V cache %s", what);
                cr_assert(memcmp(qo, q, (size_t)(T * H * D) * 4), "q_out is q: nothing rotated");
                for (int i = 0; i < 4; i++) free(c[i]), free(s[i]);
                free(q), free(k), free(v), free(qw), free(kw), free(qo), free(q2), free(k2);
            }
}

/* The workspace form (the CPU backend's, one workspace per session) writes the same bytes as
 * the plain form, with one workspace reused over calls of several sizes. */
Test(rope_kv_write, workspace_form_equals_plain) {
    rng r = {12};
    const int64_t H = 4, Hkv = 2, D = 16, C = 24;
    const int64_t Ts[] = {7, 1, 12, 3};
    loom_cpu_workspace ws = {0};
    for (int ty = 0; ty < 3; ty++)
        for (size_t c = 0; c < sizeof Ts / sizeof Ts[0]; c++) {
            const int64_t T = Ts[c];
            loom_kv_layout kv = {(loom_kv_type)ty, C, Hkv, D};
            loom_rope_params p = {T, H, Hkv, D, D, LOOM_ROPE_NEOX, 1e4f, 1.0f};
            float *q = random_floats(&r, T * H * D, 2), *k = random_floats(&r, T * Hkv * D, 2);
            float *v = random_floats(&r, T * Hkv * D, 2);
            float *qw = random_floats(&r, D, 1), *kw = random_floats(&r, D, 1);
            int32_t pos[12];
            for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)((t * 7 + (int64_t)c) % C);
            size_t cb = (size_t)(C * Hkv * D) * elem(kv.type), sb = (size_t)(C * Hkv) * 4;
            size_t qb = (size_t)(T * H * D) * 4;
            uint8_t *cache[4];
            float *sc[4], *qo[2] = {malloc(qb), malloc(qb)};
            for (int i = 0; i < 4; i++) {
                cache[i] = malloc(cb), sc[i] = malloc(sb);
                memset(cache[i], 0x5A, cb), memset(sc[i], 0x5A, sb);
            }
            bool i8 = kv.type == LOOM_KV_INT8;
            cr_assert_eq(loom_cpu_rope_kv_write(q, k, v, pos, qw, kw, 1e-6f, &p, cache[0],
                                                i8 ? sc[0] : NULL, cache[1], i8 ? sc[1] : NULL,
                                                &kv, qo[0], NULL),
                         LOOM_OK);
            cr_assert_eq(loom_cpu_rope_kv_write_ws(q, k, v, pos, qw, kw, 1e-6f, &p, cache[2],
                                                   i8 ? sc[2] : NULL, cache[3], i8 ? sc[3] : NULL,
                                                   &kv, qo[1], &ws, NULL),
                         LOOM_OK);
            cr_assert(!memcmp(qo[0], qo[1], qb), "type %d T %lld: q_out", ty, (long long)T);
            cr_assert(!memcmp(cache[0], cache[2], cb) && !memcmp(cache[1], cache[3], cb),
                      "type %d T %lld: caches", ty, (long long)T);
            cr_assert(!i8 || (!memcmp(sc[0], sc[2], sb) && !memcmp(sc[1], sc[3], sb)),
                      "type %d T %lld: scales", ty, (long long)T);
            cr_assert_geq(ws.cap, (size_t)(T * Hkv * D));
            for (int i = 0; i < 4; i++) free(cache[i]), free(sc[i]);
            free(qo[0]), free(qo[1]);
            free(q), free(k), free(v), free(qw), free(kw);
        }
    cr_assert_eq(ws.cap, (size_t)(12 * Hkv * D), "grown to the largest call only");
    loom_cpu_workspace_free(&ws);
}

Test(rope_kv_write, refusals_write_nothing) {
    enum { T = 2, H = 2, Hkv = 1, D = 8, C = 4 };
    float q[T * H * D], k[T * Hkv * D], v[T * Hkv * D], qo[T * H * D], w[D];
    for (int i = 0; i < T * H * D; i++) q[i] = (float)i, qo[i] = -1;
    for (int i = 0; i < T * Hkv * D; i++) k[i] = v[i] = 1;
    for (int i = 0; i < D; i++) w[i] = 1;
    float kc[C * Hkv * D], vc[C * Hkv * D];
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    loom_kv_layout kv = {LOOM_KV_F32, C, Hkv, D};
    loom_rope_params p = {T, H, Hkv, D, D, LOOM_ROPE_NEOX, 1e4f, 1.0f};
    loom_error err = {0};
    const int32_t bad[2] = {1, 4};
    cr_assert_eq(loom_cpu_rope_kv_write(q, k, v, bad, NULL, NULL, 0, &p, kc, NULL, vc, NULL, &kv,
                                        qo, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "rope_kv_write") && strstr(err.msg, "position 4 of token 1"), "%s",
              err.msg);
    const int32_t ok[2] = {1, 2};
    cr_assert_eq(loom_cpu_rope_kv_write(q, k, v, ok, w, NULL, 1e-6f, &p, kc, NULL, vc, NULL, &kv,
                                        qo, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "q_norm and k_norm"), "%s", err.msg);
    loom_rope_params p3 = p;
    p3.head_dim = 4, p3.n_rot = 4;
    cr_assert_eq(loom_cpu_rope_kv_write(q, k, v, ok, NULL, NULL, 0, &p3, kc, NULL, vc, NULL, &kv,
                                        qo, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "do not fit the cache layout"), "%s", err.msg);
    for (int i = 0; i < C * Hkv * D; i++) cr_assert(kc[i] == 0 && vc[i] == 0);
    for (int i = 0; i < T * H * D; i++) cr_assert(qo[i] == -1);
}
