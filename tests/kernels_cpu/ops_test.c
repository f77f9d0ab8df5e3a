/* ops_test.c: RMSNorm, RoPE (hand-computed values for both modes, and a random check against
 * a double reference), elementwise ops, embedding, softmax, argmax and the F16 conversions.
 */
#include <float.h>

#include "test_util.h"

/* ---- rms_norm ------------------------------------------------------------------------------ */

static void rms_reference(const float *x, const float *w, int64_t rows, int64_t d, float eps,
                          double *out) {
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
        double sc = 1.0 / sqrt(ss / d + eps);
        for (int64_t i = 0; i < d; i++) out[r * d + i] = x[r * d + i] * sc * (w ? w[i] : 1.0);
    }
}

Test(rms_norm, matches_double_reference_whole_rows_and_per_head) {
    rng r = {11};
    /* (rows, d): whole rows of hidden size, and per head rows of head_dim inside [N, H*D]. */
    const int64_t cases[][2] = {{1, 256}, {7, 2560}, {33, 64}, {3 * 32, 128}, {5, 172}, {2, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t rows = cases[c][0], d = cases[c][1];
        float *x = random_floats(&r, rows * d, 3.0f), *w = random_floats(&r, d, 1.5f);
        float *y = malloc(rows * d * sizeof(float));
        double *ref = malloc(rows * d * sizeof(double));
        for (int with_w = 0; with_w < 2; with_w++) {
            const float *wp = with_w ? w : NULL;
            poison(y, rows * d);
            cr_assert_eq(loom_cpu_rms_norm(x, wp, rows, d, 1e-6f, y, NULL), LOOM_OK);
            rms_reference(x, wp, rows, d, 1e-6f, ref);
            for (int64_t i = 0; i < rows * d; i++)
                cr_assert(fabs(y[i] - ref[i]) <= 4 * FLT_EPSILON * fabs(ref[i]) + 1e-30,
                          "rows %lld d %lld weight %d: y[%lld] = %.9g, ref %.9g", (long long)rows,
                          (long long)d, with_w, (long long)i, y[i], ref[i]);
            /* In place gives the same bits. */
            float *z = malloc(rows * d * sizeof(float));
            memcpy(z, x, rows * d * sizeof(float));
            cr_assert_eq(loom_cpu_rms_norm(z, wp, rows, d, 1e-6f, z, NULL), LOOM_OK);
            cr_assert(memcmp(z, y, rows * d * sizeof(float)) == 0);
            free(z);
        }
        free(x);
        free(w);
        free(y);
        free(ref);
    }
}

Test(rms_norm, eps_matters_and_zero_row_is_zero) {
    float x[4] = {0, 0, 0, 0}, y[4];
    cr_assert_eq(loom_cpu_rms_norm(x, NULL, 1, 4, 1e-5f, y, NULL), LOOM_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(y[i], 0.0f);
    float a[2] = {1e-3f, -1e-3f}, b[2];
    cr_assert_eq(loom_cpu_rms_norm(a, NULL, 1, 2, 1e-6f, b, NULL), LOOM_OK);
    /* mean(x²) = 1e-6, so scale = 1/sqrt(2e-6). */
    cr_assert_float_eq(b[0], (float)(1e-3 / sqrt(2e-6)), 1e-5);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_rms_norm(a, NULL, 1, -2, 1e-6f, b, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_cpu_rms_norm(NULL, NULL, 1, 2, 1e-6f, b, &err), LOOM_ERR_INVALID_ARGUMENT);
}

/* ---- rope ---------------------------------------------------------------------------------- */

/* x = (1, 2, 3, 4), head_dim 4, n_rot 4, pos 3, base 10000: theta0 = 3, theta1 = 3 * 10000^-0.5
 * = 0.03. NORM rotates (x0, x1) by theta0 and (x2, x3) by theta1; NEOX rotates (x0, x2) by
 * theta0 and (x1, x3) by theta1. */
Test(rope, hand_computed_norm_and_neox) {
    const double t0 = 3.0, t1 = 0.03;
    const double c0 = cos(t0), s0 = sin(t0), c1 = cos(t1), s1 = sin(t1);
    const double norm[4] = {1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1};
    const double neox[4] = {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 1 * s0 + 3 * c0, 2 * s1 + 4 * c1};
    const int32_t pos[1] = {3};
    for (int mode = 0; mode < 2; mode++) {
        float q[4] = {1, 2, 3, 4}, k[4] = {1, 2, 3, 4};
        loom_rope_params p = {.n_tokens = 1, .n_head = 1, .n_kv_head = 1, .head_dim = 4,
                              .n_rot = 4, .mode = mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM,
                              .freq_base = 10000.0f, .freq_scale = 1.0f};
        cr_assert_eq(loom_cpu_rope(q, k, pos, &p, NULL), LOOM_OK);
        const double *want = mode ? neox : norm;
        for (int i = 0; i < 4; i++) {
            cr_assert(fabs(q[i] - want[i]) < 2e-6, "mode %d q[%d] = %.8f, want %.8f", mode, i,
                      q[i], want[i]);
            cr_assert_eq(q[i], k[i], "k gets the same rotation");
        }
    }
}

/* n_rot < head_dim leaves the tail alone; freq_scale 0.5 halves the angles (pos 6 at scale 0.5
 * is pos 3 at scale 1); position 0 is the identity. */
Test(rope, partial_rotation_linear_scaling_and_position_zero) {
    const int32_t pos6[1] = {6}, pos3[1] = {3}, pos0[1] = {0};
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8], c[8];
    memcpy(b, a, sizeof a);
    memcpy(c, a, sizeof a);
    loom_rope_params p = {.n_tokens = 1, .n_head = 1, .head_dim = 8, .n_rot = 4,
                          .mode = LOOM_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 0.5f};
    cr_assert_eq(loom_cpu_rope(a, NULL, pos6, &p, NULL), LOOM_OK);
    p.freq_scale = 1.0f;
    cr_assert_eq(loom_cpu_rope(b, NULL, pos3, &p, NULL), LOOM_OK);
    for (int i = 0; i < 8; i++) cr_assert(fabsf(a[i] - b[i]) < 1e-6f, "dim %d", i);
    for (int i = 4; i < 8; i++) cr_assert_eq(a[i], (float)(i + 1), "dim %d passes through", i);
    cr_assert(fabsf(a[0] - 1.0f) > 1e-3f, "dim 0 rotated");
    cr_assert_eq(loom_cpu_rope(c, NULL, pos0, &p, NULL), LOOM_OK);
    for (int i = 0; i < 8; i++) cr_assert_eq(c[i], (float)(i + 1));
}

/* Random heads at many positions against a double rotation of llama.cpp's float angles. */
Test(rope, random_against_reference) {
    rng r = {12};
    const int64_t dims[][3] = {{64, 64, 4}, {128, 128, 2}, {128, 64, 1}, {8, 8, 2}}; /* D, n_rot, GQA */
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++)
        for (int mode = 0; mode < 2; mode++) {
            const int64_t D = dims[c][0], n_rot = dims[c][1], T = 5, KVH = 2, H = KVH * dims[c][2];
            float *q = random_floats(&r, T * H * D, 1.0f), *k = random_floats(&r, T * KVH * D, 1.0f);
            float *q0 = malloc(T * H * D * sizeof(float));
            memcpy(q0, q, T * H * D * sizeof(float));
            int32_t pos[5] = {0, 1, 17, 1000, 40000};
            loom_rope_params p = {.n_tokens = T, .n_head = H, .n_kv_head = KVH, .head_dim = D,
                                  .n_rot = n_rot, .mode = mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM,
                                  .freq_base = mode ? 1e6f : 1e4f, .freq_scale = 1.0f};
            cr_assert_eq(loom_cpu_rope(q, k, pos, &p, NULL), LOOM_OK);
            const float theta_scale = powf(p.freq_base, -2.0f / (float)n_rot);
            for (int64_t t = 0; t < T; t++) {
                float theta = (float)pos[t];
                for (int64_t i = 0; i < n_rot / 2; i++, theta *= theta_scale) {
                    const double cth = cos((double)theta), sth = sin((double)theta);
                    for (int64_t h = 0; h < H; h++) {
                        const float *src = q0 + (t * H + h) * D;
                        const float *got = q + (t * H + h) * D;
                        int64_t ia = mode ? i : 2 * i, ib = mode ? i + n_rot / 2 : 2 * i + 1;
                        double ra = src[ia] * cth - src[ib] * sth, rb = src[ia] * sth + src[ib] * cth;
                        cr_assert(fabs(got[ia] - ra) < 1e-5 && fabs(got[ib] - rb) < 1e-5,
                                  "D %lld mode %d t %lld h %lld pair %lld", (long long)D, mode,
                                  (long long)t, (long long)h, (long long)i);
                    }
                }
            }
            free(q);
            free(k);
            free(q0);
        }
}

/* More pairs than one angle table holds (rope.c makes 128 pairs at a time on the stack): every
 * pair is bit for bit the single-pass float formula, across the table's chunk boundaries. */
Test(rope, long_rotation_is_bit_exact_across_angle_chunks) {
    rng r = {31};
    const int64_t D = 640, n_rot = 600, H = 2, T = 2; /* 300 pairs: chunks of 128, 128, 44 */
    for (int mode = 0; mode < 2; mode++) {
        float *q = random_floats(&r, T * H * D, 1.0f), *q0 = malloc(T * H * D * sizeof(float));
        memcpy(q0, q, T * H * D * sizeof(float));
        const int32_t pos[2] = {7, 4321};
        loom_rope_params p = {.n_tokens = T, .n_head = H, .head_dim = D, .n_rot = n_rot,
                              .mode = mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM,
                              .freq_base = 1e4f, .freq_scale = 0.5f};
        cr_assert_eq(loom_cpu_rope(q, NULL, pos, &p, NULL), LOOM_OK);
        const float theta_scale = powf(p.freq_base, -2.0f / (float)n_rot);
        for (int64_t t = 0; t < T; t++) {
            float theta = (float)pos[t];
            for (int64_t i = 0; i < n_rot / 2; i++, theta *= theta_scale) {
                const float c = cosf(p.freq_scale * theta), sn = sinf(p.freq_scale * theta);
                for (int64_t h = 0; h < H; h++) {
                    const float *src = q0 + (t * H + h) * D, *got = q + (t * H + h) * D;
                    int64_t ia = mode ? i : 2 * i, ib = mode ? i + n_rot / 2 : 2 * i + 1;
                    const float ra = src[ia] * c - src[ib] * sn, rb = src[ia] * sn + src[ib] * c;
                    cr_assert(got[ia] == ra && got[ib] == rb, "mode %d t %lld h %lld pair %lld",
                              mode, (long long)t, (long long)h, (long long)i);
                }
            }
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = n_rot; i < D; i++)
                    cr_assert_eq(q[(t * H + h) * D + i], q0[(t * H + h) * D + i]);
        }
        free(q);
        free(q0);
    }
}

Test(rope, bad_parameters) {
    float q[8] = {0};
    int32_t pos[1] = {0};
    loom_error err = {0};
    loom_rope_params p = {.n_tokens = 1, .n_head = 1, .head_dim = 8, .n_rot = 9,
                          .mode = LOOM_ROPE_NORM, .freq_base = 1e4f, .freq_scale = 1.0f};
    cr_assert_eq(loom_cpu_rope(q, NULL, pos, &p, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "n_rot") != NULL, "%s", err.msg);
    p.n_rot = 8;
    p.mode = (loom_rope_mode)1;
    cr_assert_eq(loom_cpu_rope(q, NULL, pos, &p, &err), LOOM_ERR_UNSUPPORTED);
    p.mode = LOOM_ROPE_NORM;
    p.freq_base = 0.0f;
    cr_assert_eq(loom_cpu_rope(q, NULL, pos, &p, &err), LOOM_ERR_INVALID_ARGUMENT);
}

/* ---- elementwise --------------------------------------------------------------------------- */

Test(elementwise, formulas_and_in_place) {
    rng r = {13};
    const int64_t n = 1000;
    float *a = random_floats(&r, n, 8.0f), *b = random_floats(&r, n, 3.0f);
    float *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    cr_assert_eq(loom_cpu_add(a, b, n, y, NULL), LOOM_OK);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(y[i], a[i] + b[i]);
    cr_assert_eq(loom_cpu_mul(a, b, n, y, NULL), LOOM_OK);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(y[i], a[i] * b[i]);
    cr_assert_eq(loom_cpu_silu(a, n, y, NULL), LOOM_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(y[i] - a[i] / (1.0 + exp(-(double)a[i]))) <= 1e-6 * (1 + fabs(a[i])));
    cr_assert_eq(loom_cpu_swiglu(a, b, n, z, NULL), LOOM_OK);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(z[i], y[i] * b[i], "swiglu = silu(a) * b");
    memcpy(y, a, n * sizeof(float));
    cr_assert_eq(loom_cpu_swiglu(y, b, n, y, NULL), LOOM_OK);
    cr_assert(memcmp(y, z, n * sizeof(float)) == 0, "in place");
    /* bias add over [rows, m] */
    float yb[6] = {1, 2, 3, 4, 5, 6}, bias[3] = {10, 20, 30};
    cr_assert_eq(loom_cpu_bias_add(yb, bias, 2, 3, NULL), LOOM_OK);
    const float want[6] = {11, 22, 33, 14, 25, 36};
    for (int i = 0; i < 6; i++) cr_assert_eq(yb[i], want[i]);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_add(NULL, b, 3, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_cpu_add(a, b, -1, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_cpu_add(NULL, NULL, 0, NULL, &err), LOOM_OK);
    free(a);
    free(b);
    free(y);
    free(z);
}

Test(convert, f16_round_trip_and_rounding) {
    const float src[6] = {1.0f, -2.5f, 65504.0f, 1.0f + 1.0f / 4096, 1e-8f, INFINITY};
    uint16_t h[6];
    float back[6];
    cr_assert_eq(loom_cpu_f32_to_f16(src, 6, h, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_f16_to_f32(h, 6, back, NULL), LOOM_OK);
    cr_assert_eq(h[0], 0x3c00);
    cr_assert_eq(back[1], -2.5f);
    cr_assert_eq(back[2], 65504.0f);
    cr_assert_eq(back[3], 1.0f, "1 + 2^-12 ties to even 1.0");
    cr_assert_eq(back[4], 0.0f);
    cr_assert(isinf(back[5]));
    for (uint32_t v = 0; v < 65536; v += 7) {
        uint16_t in = (uint16_t)v, out;
        float f;
        loom_cpu_f16_to_f32(&in, 1, &f, NULL);
        if (isnan(f)) continue;
        loom_cpu_f32_to_f16(&f, 1, &out, NULL);
        cr_assert_eq(out, in, "half 0x%04x round trip", v);
    }
}

/* ---- embedding ----------------------------------------------------------------------------- */

Test(embed, rows_of_every_type_and_bad_ids) {
    rng r = {14};
    const loom_ggml_type types[] = {LOOM_GGML_F32, LOOM_GGML_F16, LOOM_GGML_BF16, LOOM_GGML_Q8_0,
                                    LOOM_GGML_Q4_K, LOOM_GGML_Q5_K, LOOM_GGML_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int64_t V = 50, D = 512;
        loom_kweight table = random_weight(&r, types[ti], V, D);
        float *full = dequant_weight(&table);
        const int32_t ids[4] = {49, 0, 7, 7};
        float *out = malloc(4 * D * sizeof(float));
        poison(out, 4 * D);
        cr_assert_eq(loom_cpu_embed(table, ids, 4, out, NULL), LOOM_OK);
        for (int t = 0; t < 4; t++)
            cr_assert(memcmp(out + t * D, full + ids[t] * D, D * sizeof(float)) == 0,
                      "type %d token %d", (int)types[ti], t);
        const int32_t bad[2] = {3, 50};
        poison(out, 4 * D);
        loom_error err = {0};
        cr_assert_eq(loom_cpu_embed(table, bad, 2, out, &err), LOOM_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(err.msg, "50") != NULL, "%s", err.msg);
        cr_assert(isnan(out[0]), "nothing written on error");
        const int32_t neg[1] = {-1};
        cr_assert_eq(loom_cpu_embed(table, neg, 1, out, &err), LOOM_ERR_INVALID_ARGUMENT);
        free(out);
        free(full);
        free_weight(&table);
    }
}

/* ---- softmax, argmax ----------------------------------------------------------------------- */

Test(softmax, vocab_row_against_double_and_sums_to_one) {
    rng r = {15};
    const int64_t n = 152064, rows = 2;
    float *x = random_floats(&r, rows * n, 20.0f), *y = malloc(rows * n * sizeof(float));
    x[5] = -INFINITY;
    poison(y, rows * n);
    cr_assert_eq(loom_cpu_softmax(x, rows, n, y, NULL), LOOM_OK);
    for (int64_t row = 0; row < rows; row++) {
        const float *xr = x + row * n, *yr = y + row * n;
        double m = -INFINITY, z = 0, sum = 0;
        for (int64_t i = 0; i < n; i++) m = xr[i] > m ? xr[i] : m;
        for (int64_t i = 0; i < n; i++) z += exp(xr[i] - m);
        for (int64_t i = 0; i < n; i++) {
            double ref = exp(xr[i] - m) / z;
            /* expf's argument x - m is rounded to float: relative error up to |x - m| ulps. */
            double tol = ref == 0 ? 0 : ref * (1e-6 + FLT_EPSILON * fabs(xr[i] - m));
            cr_assert(fabs(yr[i] - ref) <= tol, "row %lld i %lld: %.9g vs %.9g",
                      (long long)row, (long long)i, yr[i], ref);
            sum += yr[i];
        }
        cr_assert(fabs(sum - 1.0) < 1e-4, "sum %.9g", sum);
    }
    cr_assert_eq(y[5], 0.0f);
    /* In place: same bits. */
    cr_assert_eq(loom_cpu_softmax(x, rows, n, x, NULL), LOOM_OK);
    cr_assert(memcmp(x, y, rows * n * sizeof(float)) == 0);
    free(x);
    free(y);
}

Test(argmax, first_max_ignores_nan) {
    const float x[3][5] = {{1, 3, 2, 3, -1}, {NAN, -5, NAN, -4, -4.5f}, {NAN, NAN, NAN, NAN, NAN}};
    int32_t out[3] = {-1, -1, -1};
    cr_assert_eq(loom_cpu_argmax(&x[0][0], 3, 5, out, NULL), LOOM_OK);
    cr_assert_eq(out[0], 1, "first of the tied maxima");
    cr_assert_eq(out[1], 3);
    cr_assert_eq(out[2], 0);
    rng r = {16};
    float *big = random_floats(&r, 151936, 1.0f);
    big[151935] = 2.0f;
    int32_t one;
    cr_assert_eq(loom_cpu_argmax(big, 1, 151936, &one, NULL), LOOM_OK);
    cr_assert_eq(one, 151935);
    free(big);
}

Test(elementwise, broadcast_add_mul_equal_their_plain_forms) {
    rng r = {17};
    const int64_t rows = 6, nb = 40, n = rows * nb;
    float *a = random_floats(&r, n, 4.0f), *b = random_floats(&r, nb, 2.0f);
    float *y = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    memcpy(ref, a, n * sizeof(float));
    cr_assert_eq(loom_cpu_bias_add(ref, b, rows, nb, NULL), LOOM_OK);
    poison(y, n);
    cr_assert_eq(loom_cpu_add_bcast(a, n, b, nb, y, NULL), LOOM_OK);
    cr_assert(memcmp(y, ref, n * sizeof(float)) == 0, "add_bcast == bias_add");
    cr_assert_eq(loom_cpu_mul_bcast(a, n, b, nb, y, NULL), LOOM_OK);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(y[i], a[i] * b[i % nb]);
    /* nb == n is the plain form. */
    float *full = random_floats(&r, n, 1.0f);
    cr_assert_eq(loom_cpu_mul(a, full, n, ref, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_mul_bcast(a, n, full, n, y, NULL), LOOM_OK);
    cr_assert(memcmp(y, ref, n * sizeof(float)) == 0);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_add_bcast(a, n, b, 7, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "240") != NULL, "%s", err.msg);
    cr_assert_eq(loom_cpu_mul_bcast(a, n, b, 0, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    free(a);
    free(b);
    free(y);
    free(ref);
    free(full);
}

Test(convert, all_type_pairs) {
    const float f[6] = {1.5f, -2.25f, 3.999f, -7.5f, 100000.0f, NAN};
    uint16_t h[6], bf[6];
    int32_t i[6];
    float back[6];
    cr_assert_eq(loom_cpu_convert(f, LOOM_GGML_F32, h, LOOM_GGML_F16, 6, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_convert(f, LOOM_GGML_F32, bf, LOOM_GGML_BF16, 6, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_convert(f, LOOM_GGML_F32, i, LOOM_GGML_I32, 6, NULL), LOOM_OK);
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(h[k], loom_fp32_to_fp16(f[k]));
        cr_assert_eq(bf[k], loom_fp32_to_bf16(f[k]));
    }
    const int32_t want_i[6] = {1, -2, 3, -7, 100000, 0};
    for (int k = 0; k < 6; k++) cr_assert_eq(i[k], want_i[k], "element %d", k);
    cr_assert_eq(loom_cpu_convert(h, LOOM_GGML_F16, back, LOOM_GGML_F32, 6, NULL), LOOM_OK);
    cr_assert_eq(back[0], 1.5f);
    cr_assert(isinf(back[4]), "100000 overflows half");
    cr_assert_eq(loom_cpu_convert(bf, LOOM_GGML_BF16, back, LOOM_GGML_F32, 6, NULL), LOOM_OK);
    cr_assert_eq(back[1], -2.25f);
    cr_assert_eq(loom_cpu_convert(i, LOOM_GGML_I32, h, LOOM_GGML_F16, 6, NULL), LOOM_OK);
    cr_assert_eq(h[3], loom_fp32_to_fp16(-7.0f));
    const float big[2] = {3e9f, -3e9f};
    cr_assert_eq(loom_cpu_convert(big, LOOM_GGML_F32, i, LOOM_GGML_I32, 2, NULL), LOOM_OK);
    cr_assert_eq(i[0], INT32_MAX);
    cr_assert_eq(i[1], INT32_MIN);
    float same[2];
    cr_assert_eq(loom_cpu_convert(f, LOOM_GGML_F32, same, LOOM_GGML_F32, 2, NULL), LOOM_OK);
    cr_assert_eq(same[1], f[1]);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_convert(f, LOOM_GGML_Q4_K, same, LOOM_GGML_F32, 2, &err),
                 LOOM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "Q4_K") != NULL, "%s", err.msg);
}

/* The kernels decode blocks with their own loops (decode.c); they must give exactly the bits of
 * loom_dequantize_row, on arbitrary blocks (random bytes, finite f16 scales), not only on ones
 * our quantizer writes. Checked through the embedding, which decodes whole rows. */
Test(embed, decode_bit_identical_to_dequantize_row_on_random_blocks) {
    rng r = {18};
    const struct { loom_ggml_type type; int d_offsets[2]; int n_d; } types[] = {
        {LOOM_GGML_F16, {0, 0}, 0},  {LOOM_GGML_BF16, {0, 0}, 0}, {LOOM_GGML_Q8_0, {0, 0}, 1},
        {LOOM_GGML_Q4_K, {0, 2}, 2}, {LOOM_GGML_Q5_K, {0, 2}, 2}, {LOOM_GGML_Q6_K, {208, 0}, 1},
    };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const loom_ggml_type type = types[ti].type;
        const loom_ggml_type_info *info = loom_ggml_type_get((uint32_t)type);
        const int64_t V = 64, D = 1024, rb = loom_ggml_row_bytes((uint32_t)type, D);
        uint8_t *data = malloc((size_t)(V * rb));
        for (int64_t i = 0; i < V * rb; i++) data[i] = (uint8_t)rng_next(&r);
        /* Finite block scales; a few bf16/f16 NaN or inf values are fine as plain elements but
         * compare NaN payloads, so make plain F16/BF16 elements finite too. */
        for (int64_t blk = 0; blk < V * rb / info->type_size; blk++) {
            uint8_t *b = data + blk * info->type_size;
            for (int k = 0; k < types[ti].n_d; k++) {
                uint16_t h = loom_fp32_to_fp16(rng_uniform(&r) * 0.01f);
                memcpy(b + types[ti].d_offsets[k], &h, 2);
            }
            if (info->block_size == 1 && (b[1] & 0x7f) >= 0x7c) b[1] &= 0x3f;
        }
        loom_kweight table = {.data = data, .type = type, .rows = V, .cols = D};
        float *want = dequant_weight(&table), *got = malloc(V * D * sizeof(float));
        int32_t *ids = malloc(V * sizeof(int32_t));
        for (int64_t i = 0; i < V; i++) ids[i] = (int32_t)i;
        cr_assert_eq(loom_cpu_embed(table, ids, V, got, NULL), LOOM_OK);
        for (int64_t i = 0; i < V * D; i++)
            cr_assert(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "%s value %lld: %.9g vs %.9g", info->name, (long long)i, got[i], want[i]);
        free(data);
        free(want);
        free(got);
        free(ids);
    }
}

Test(copy_bandwidth, measures_and_refuses_tiny_sizes) {
    double gbs = -1;
    loom_error err = {0};
    cr_assert_eq(loom_cpu_copy_bandwidth(1000, &gbs, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "1000 bytes is below the 1 MiB minimum"), "%s", err.msg);
    cr_assert_eq(gbs, 0);
    cr_assert_eq(loom_cpu_copy_bandwidth((size_t)8 << 20, &gbs, &err), LOOM_OK, "%s", err.msg);
    cr_assert(gbs > 0.1 && gbs < 1e5, "%g GB/s", gbs);
}
