/* matmul_test.c: the matmul family against a naive double-precision reference (weights
 * dequantized with loom_dequantize_row, then plain loops), thread-count and batch independence,
 * and the fused variants against their unfused composition (bit for bit), including the
 * _normed forms (RMSNorm folded in) against loom_cpu_rms_norm followed by the plain call,
 * and every type bit for bit against the numeric contract written out in scalar code.
 *
 * Tolerance: the kernel sums K products in float32 over 8 lanes, so its error is at most about
 * (K/8 + 3) float roundings of sum_k |w_k x_k|; the tests allow (K/8 + 8) * FLT_EPSILON of it.
 * A wrong block decode or a wrong row/column is off by O(1) of that sum and fails.
 */
#include <float.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/cpu_workspace.h"
#include "test_util.h"

static const loom_ggml_type all_types[] = {LOOM_GGML_F32,  LOOM_GGML_F16,  LOOM_GGML_BF16,
                                           LOOM_GGML_Q8_0, LOOM_GGML_Q4_K, LOOM_GGML_Q5_K,
                                           LOOM_GGML_Q6_K};
enum { N_TYPES = sizeof all_types / sizeof all_types[0] };

typedef struct shape { int64_t m, k, n; } shape;
static const shape shapes[] = {
    {1, 256, 1}, {37, 256, 3}, {131, 512, 1}, {67, 768, 33}, {5, 1024, 8}, {3, 256, 17},
    {97, 2560, 2},
};

/* Checks y[N, M] against the double reference of x[N, K] · W[M, K]ᵀ (+ add[N, M] if given). */
static void check_against_reference(const loom_kweight *w, const float *x, int64_t n,
                                    const float *add, const float *y, const char *what) {
    float *wd = dequant_weight(w);
    const int64_t M = w->rows, K = w->cols;
    for (int64_t t = 0; t < n; t++)
        for (int64_t m = 0; m < M; m++) {
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)wd[m * K + k] * (double)x[t * K + k];
                ref += p;
                mag += fabs(p);
            }
            if (add) {
                ref += add[t * M + m];
                mag += fabs(add[t * M + m]);
            }
            double tol = ((double)K / 8 + 8) * FLT_EPSILON * mag + 1e-30;
            double got = y[t * M + m];
            cr_assert(fabs(got - ref) <= tol,
                      "%s type %d M %lld K %lld N %lld: y[%lld,%lld] = %.9g, reference %.9g "
                      "(tol %.3g)",
                      what, (int)w->type, (long long)M, (long long)K, (long long)n, (long long)t,
                      (long long)m, got, ref, tol);
        }
    free(wd);
}

Test(matmul, matches_double_reference_all_types_and_shapes) {
    rng r = {1};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const shape s = shapes[si];
            loom_kweight w = random_weight(&r, all_types[ti], s.m, s.k);
            float *x = random_floats(&r, s.n * s.k, 1.0f);
            float *y = malloc((size_t)(s.n * s.m) * sizeof(float));
            poison(y, s.n * s.m);
            loom_error err = {0};
            cr_assert_eq(loom_cpu_matmul(x, s.n, w, y, &err), LOOM_OK, "%s", err.msg);
            check_against_reference(&w, x, s.n, NULL, y, "matmul");
            free(x);
            free(y);
            free_weight(&w);
        }
}

/* F32 rows may have any length (stories260K's ffn is 172). */
Test(matmul, f32_row_length_not_a_multiple_of_anything) {
    rng r = {2};
    const int64_t ks[] = {1, 7, 172, 259, 300};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        loom_kweight w = random_weight(&r, LOOM_GGML_F32, 13, ks[i]);
        float *x = random_floats(&r, 3 * ks[i], 1.0f);
        float y[3 * 13];
        poison(y, 3 * 13);
        cr_assert_eq(loom_cpu_matmul(x, 3, w, y, NULL), LOOM_OK);
        check_against_reference(&w, x, 3, NULL, y, "matmul f32");
        free(x);
        free_weight(&w);
    }
}

/* The numeric contract (cpu_kernels.h) written out in scalar code: the weight row dequantized
 * by loom_dequantize_row, products summed in float32 into lane k % 8 in increasing k, the lanes
 * combined ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). The kernel must give these bits exactly, in
 * every build (this file also runs as matmul_test_baseline, on the kernels without AVX2). */
static float contract_dot(const float *w, const float *x, int64_t K) {
    float l[8] = {0};
    for (int64_t k = 0; k < K; k++) {
        const float p = w[k] * x[k];
        l[k % 8] = l[k % 8] + p;
    }
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

Test(matmul, bit_identical_to_the_scalar_definition) {
    rng r = {11};
    const shape more[] = {{7, 1, 2}, {9, 172, 3}, {5, 300, 9}};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] + 3; si++) {
            const bool odd = si >= sizeof shapes / sizeof shapes[0];
            if (odd && all_types[ti] != LOOM_GGML_F32) continue; /* rows of any length: F32 */
            const shape s = odd ? more[si - sizeof shapes / sizeof shapes[0]] : shapes[si];
            loom_kweight w = random_weight(&r, all_types[ti], s.m, s.k);
            float *wd = dequant_weight(&w);
            float *x = random_floats(&r, s.n * s.k, 1.0f);
            float *y = malloc((size_t)(s.n * s.m) * sizeof(float));
            poison(y, s.n * s.m);
            cr_assert_eq(loom_cpu_matmul(x, s.n, w, y, NULL), LOOM_OK);
            for (int64_t t = 0; t < s.n; t++)
                for (int64_t m = 0; m < s.m; m++) {
                    const float want = contract_dot(wd + m * s.k, x + t * s.k, s.k);
                    cr_assert(memcmp(&want, &y[t * s.m + m], sizeof want) == 0,
                              "type %d M %lld K %lld N %lld: y[%lld,%lld] = %.9g, the "
                              "definition %.9g",
                              (int)all_types[ti], (long long)s.m, (long long)s.k, (long long)s.n,
                              (long long)t, (long long)m, y[t * s.m + m], want);
                }
            free(wd);
            free(x);
            free(y);
            free_weight(&w);
        }
}

Test(matmul, result_independent_of_thread_count_and_batch) {
    rng r = {3};
    const int64_t M = 97, K = 512, N = 9;
    for (int ti = 0; ti < N_TYPES; ti++) {
        loom_kweight w = random_weight(&r, all_types[ti], M, K);
        float *x = random_floats(&r, N * K, 1.0f);
        float *y1 = malloc(N * M * sizeof(float)), *yt = malloc(N * M * sizeof(float));
        loom_cpu_set_threads(1);
        cr_assert_eq(loom_cpu_get_threads(), 1);
        cr_assert_eq(loom_cpu_matmul(x, N, w, y1, NULL), LOOM_OK);
        const int counts[] = {2, 3, 7, 16};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            loom_cpu_set_threads(counts[c]);
            cr_assert_eq(loom_cpu_get_threads(), counts[c]);
            poison(yt, N * M);
            cr_assert_eq(loom_cpu_matmul(x, N, w, yt, NULL), LOOM_OK);
            cr_assert(memcmp(y1, yt, N * M * sizeof(float)) == 0,
                      "type %d: %d threads differ from 1 thread", (int)all_types[ti], counts[c]);
        }
        /* Each token alone (the GEMV) gives the same bits as the batch. */
        for (int64_t t = 0; t < N; t++) {
            float row[97];
            cr_assert_eq(loom_cpu_matmul(x + t * K, 1, w, row, NULL), LOOM_OK);
            cr_assert(memcmp(row, y1 + t * M, M * sizeof(float)) == 0,
                      "type %d: token %lld alone differs from the batch", (int)all_types[ti],
                      (long long)t);
        }
        loom_cpu_set_threads(0);
        cr_assert_geq(loom_cpu_get_threads(), 1);
        free(x);
        free(y1);
        free(yt);
        free_weight(&w);
    }
}

Test(matmul, add_equals_matmul_then_add_and_may_run_in_place) {
    rng r = {4};
    const int64_t M = 70, K = 512, N = 5;
    loom_kweight w = random_weight(&r, LOOM_GGML_Q4_K, M, K);
    float *x = random_floats(&r, N * K, 1.0f), *res = random_floats(&r, N * M, 2.0f);
    float *y = malloc(N * M * sizeof(float)), *ref = malloc(N * M * sizeof(float));
    cr_assert_eq(loom_cpu_matmul(x, N, w, ref, NULL), LOOM_OK);
    cr_assert_eq(loom_cpu_add(ref, res, N * M, ref, NULL), LOOM_OK);
    poison(y, N * M);
    cr_assert_eq(loom_cpu_matmul_add(x, N, w, res, y, NULL), LOOM_OK);
    cr_assert(memcmp(y, ref, N * M * sizeof(float)) == 0);
    check_against_reference(&w, x, N, res, y, "matmul_add");
    /* In place: y aliases the residual. */
    memcpy(y, res, N * M * sizeof(float));
    cr_assert_eq(loom_cpu_matmul_add(x, N, w, y, y, NULL), LOOM_OK);
    cr_assert(memcmp(y, ref, N * M * sizeof(float)) == 0);
    free(x);
    free(res);
    free(y);
    free(ref);
    free_weight(&w);
}

Test(matmul, pair_equals_two_matmuls_and_swiglu) {
    rng r = {5};
    const int64_t M = 77, K = 768;
    for (int64_t N = 1; N <= 12; N += 11) {
        loom_kweight a = random_weight(&r, LOOM_GGML_Q4_K, M, K);
        loom_kweight b = random_weight(&r, LOOM_GGML_Q6_K, M, K);
        float *x = random_floats(&r, N * K, 1.0f);
        float *ra = malloc(N * M * sizeof(float)), *rb = malloc(N * M * sizeof(float));
        float *ya = malloc(N * M * sizeof(float)), *yb = malloc(N * M * sizeof(float));
        cr_assert_eq(loom_cpu_matmul(x, N, a, ra, NULL), LOOM_OK);
        cr_assert_eq(loom_cpu_matmul(x, N, b, rb, NULL), LOOM_OK);
        poison(ya, N * M);
        poison(yb, N * M);
        cr_assert_eq(loom_cpu_matmul_pair(x, N, a, b, LOOM_PAIR_NONE, ya, yb, NULL), LOOM_OK);
        cr_assert(memcmp(ya, ra, N * M * sizeof(float)) == 0);
        cr_assert(memcmp(yb, rb, N * M * sizeof(float)) == 0);

        cr_assert_eq(loom_cpu_swiglu(ra, rb, N * M, ra, NULL), LOOM_OK);
        poison(ya, N * M);
        cr_assert_eq(loom_cpu_matmul_pair(x, N, a, b, LOOM_PAIR_SWIGLU, ya, NULL, NULL), LOOM_OK);
        cr_assert(memcmp(ya, ra, N * M * sizeof(float)) == 0, "swiglu epilogue differs");
        free(x);
        free(ra);
        free(rb);
        free(ya);
        free(yb);
        free_weight(&a);
        free_weight(&b);
    }
}

Test(matmul, pair_with_different_row_counts) {
    rng r = {6};
    loom_kweight a = random_weight(&r, LOOM_GGML_Q8_0, 40, 256);
    loom_kweight b = random_weight(&r, LOOM_GGML_F16, 9, 256);
    float *x = random_floats(&r, 2 * 256, 1.0f);
    float ya[80], yb[18];
    poison(ya, 80);
    poison(yb, 18);
    cr_assert_eq(loom_cpu_matmul_pair(x, 2, a, b, LOOM_PAIR_NONE, ya, yb, NULL), LOOM_OK);
    check_against_reference(&a, x, 2, NULL, ya, "pair a");
    check_against_reference(&b, x, 2, NULL, yb, "pair b");
    loom_error err = {0};
    cr_assert_eq(loom_cpu_matmul_pair(x, 2, a, b, LOOM_PAIR_SWIGLU, ya, NULL, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "SwiGLU") != NULL, "%s", err.msg);
    free(x);
    free_weight(&a);
    free_weight(&b);
}

Test(matmul, triple_mixed_types_with_and_without_bias) {
    rng r = {7};
    const int64_t K = 512, N = 6;
    const loom_ggml_type types[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    const int64_t rows[3] = {64, 32, 32};
    loom_kweight w[3];
    float *bias[3], *y[3], *ref[3];
    for (int i = 0; i < 3; i++) {
        w[i] = random_weight(&r, types[i], rows[i], K);
        bias[i] = random_floats(&r, rows[i], 0.5f);
        y[i] = malloc(N * rows[i] * sizeof(float));
        ref[i] = malloc(N * rows[i] * sizeof(float));
        poison(y[i], N * rows[i]);
    }
    float *x = random_floats(&r, N * K, 1.0f);
    cr_assert_eq(loom_cpu_matmul_triple(x, N, w, NULL, y, NULL), LOOM_OK);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(loom_cpu_matmul(x, N, w[i], ref[i], NULL), LOOM_OK);
        cr_assert(memcmp(y[i], ref[i], N * rows[i] * sizeof(float)) == 0, "output %d", i);
        cr_assert_eq(loom_cpu_bias_add(ref[i], bias[i], N, rows[i], NULL), LOOM_OK);
        poison(y[i], N * rows[i]);
    }
    const float *const biases[3] = {bias[0], bias[1], bias[2]};
    cr_assert_eq(loom_cpu_matmul_triple(x, N, w, biases, y, NULL), LOOM_OK);
    for (int i = 0; i < 3; i++) {
        cr_assert(memcmp(y[i], ref[i], N * rows[i] * sizeof(float)) == 0, "biased output %d", i);
        free_weight(&w[i]);
        free(bias[i]);
        free(y[i]);
        free(ref[i]);
    }
    free(x);
}

Test(matmul, bad_arguments_are_refused_with_a_message) {
    float x[512] = {0}, y[64];
    uint8_t data[4096] = {0};
    loom_error err = {0};
    loom_kweight q40 = {.data = data, .type = LOOM_GGML_Q4_0, .rows = 2, .cols = 32};
    cr_assert_eq(loom_cpu_matmul(x, 1, q40, y, &err), LOOM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "Q4_0") != NULL, "%s", err.msg);

    loom_kweight bad_k = {.data = data, .type = LOOM_GGML_Q4_K, .rows = 2, .cols = 128};
    cr_assert_eq(loom_cpu_matmul(x, 1, bad_k, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "128") != NULL, "%s", err.msg);

    loom_kweight ok = {.data = data, .type = LOOM_GGML_Q8_0, .rows = 2, .cols = 64};
    cr_assert_eq(loom_cpu_matmul(x, -1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_cpu_matmul(NULL, 1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_cpu_matmul(x, 0, ok, NULL, &err), LOOM_OK, "N = 0 is a no-op");

    loom_kweight w3[3] = {ok, ok, {.data = data, .type = LOOM_GGML_Q8_0, .rows = 2, .cols = 32}};
    float *ys[3] = {y, y + 8, y + 16};
    cr_assert_eq(loom_cpu_matmul_triple(x, 1, w3, NULL, ys, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "weight 2") != NULL, "%s", err.msg);
    cr_assert_eq(loom_cpu_matmul_pair(x, 1, ok, ok, (loom_pair_epilogue)7, y, y, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
}

/* LOOM_WEIGHT_Q4K_TILES (cpu_kernels.h): each 144-byte block moved to its place in the tile,
 * none changed; the refusals; and the CPU kernels refuse tiled weights (a CUDA device layout). */
Test(weight_layout, q4k_to_tiles_moves_each_block_to_its_tile_place) {
    rng r = {41};
    const int64_t M = 48, K = 768, nb = K / 256, rb = nb * 144;
    loom_kweight w = random_weight(&r, LOOM_GGML_Q4_K, M, K);
    uint8_t *t = malloc((size_t)(M * rb));
    loom_error err = {0};
    cr_assert_eq(loom_cpu_q4k_to_tiles(w, t, &err), LOOM_OK, "%s", err.msg);
    const uint8_t *src = w.data;
    for (int64_t row = 0; row < M; row++)
        for (int64_t j = 0; j < nb; j++)
            cr_assert(memcmp(t + row / 16 * 16 * rb + (16 * j + row % 16) * 144,
                             src + row * rb + j * 144, 144) == 0,
                      "row %lld block %lld", (long long)row, (long long)j);
    free(t);
    free_weight(&w);
}

Test(weight_layout, q4k_to_tiles_refuses_other_types_rows_and_layouts) {
    uint8_t data[16 * 210] = {0}, out[16 * 210];
    loom_error err = {0};
    loom_kweight q6 = {.data = data, .type = LOOM_GGML_Q6_K, .rows = 16, .cols = 256};
    cr_assert_eq(loom_cpu_q4k_to_tiles(q6, out, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "Q6_K") != NULL, "%s", err.msg);
    loom_kweight r8 = {.data = data, .type = LOOM_GGML_Q4_K, .rows = 8, .cols = 256};
    cr_assert_eq(loom_cpu_q4k_to_tiles(r8, out, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "8 rows") != NULL, "%s", err.msg);
    loom_kweight ok = {.data = data, .type = LOOM_GGML_Q4_K, .rows = 16, .cols = 256};
    cr_assert_eq(loom_cpu_q4k_to_tiles(ok, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    ok.layout = LOOM_WEIGHT_Q4K_TILES;
    cr_assert_eq(loom_cpu_q4k_to_tiles(ok, out, &err), LOOM_ERR_UNSUPPORTED);
    float x[256] = {0}, y[16];
    cr_assert_eq(loom_cpu_matmul(x, 1, ok, y, &err), LOOM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "layout") != NULL, "%s", err.msg);
}

/* LOOM_WEIGHT_Q6K_TILES: each 210-byte block moved to its padded place in the tile and followed
 * by two zero bytes (the destination starts poisoned), none changed; loom_weight_bytes. */
Test(weight_layout, q6k_to_tiles_moves_and_pads_each_block) {
    rng r = {43};
    const int64_t M = 32, K = 512, nb = K / 256, rb = nb * 210, pb = LOOM_Q6K_TILE_PITCH;
    cr_assert_eq(pb, 212);
    loom_kweight w = random_weight(&r, LOOM_GGML_Q6_K, M, K);
    const int64_t tb = loom_weight_bytes(LOOM_GGML_Q6_K, M, K, LOOM_WEIGHT_Q6K_TILES);
    cr_assert_eq(tb, M * nb * pb);
    uint8_t *t = malloc((size_t)tb);
    memset(t, 0xA5, (size_t)tb);
    loom_error err = {0};
    cr_assert_eq(loom_cpu_q6k_to_tiles(w, t, &err), LOOM_OK, "%s", err.msg);
    const uint8_t *src = w.data;
    for (int64_t row = 0; row < M; row++)
        for (int64_t j = 0; j < nb; j++) {
            const uint8_t *o = t + row / 16 * 16 * nb * pb + (16 * j + row % 16) * pb;
            cr_assert(memcmp(o, src + row * rb + j * 210, 210) == 0, "row %lld block %lld",
                      (long long)row, (long long)j);
            cr_assert(o[210] == 0 && o[211] == 0, "row %lld block %lld padding", (long long)row,
                      (long long)j);
        }
    free(t);
    free_weight(&w);
}

Test(weight_layout, q6k_to_tiles_and_weight_bytes_refuse_bad_shapes) {
    uint8_t data[16 * 210] = {0}, out[16 * 212];
    loom_error err = {0};
    loom_kweight q4 = {.data = data, .type = LOOM_GGML_Q4_K, .rows = 16, .cols = 256};
    cr_assert_eq(loom_cpu_q6k_to_tiles(q4, out, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "Q4_K") != NULL && strstr(err.msg, "Q6_K") != NULL, "%s", err.msg);
    loom_kweight r8 = {.data = data, .type = LOOM_GGML_Q6_K, .rows = 8, .cols = 256};
    cr_assert_eq(loom_cpu_q6k_to_tiles(r8, out, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "8 rows") != NULL, "%s", err.msg);
    loom_kweight ok = {.data = data, .type = LOOM_GGML_Q6_K, .rows = 16, .cols = 256};
    cr_assert_eq(loom_cpu_q6k_to_tiles(ok, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    ok.layout = LOOM_WEIGHT_Q6K_TILES;
    cr_assert_eq(loom_cpu_q6k_to_tiles(ok, out, &err), LOOM_ERR_UNSUPPORTED);
    float x[256] = {0}, y[16];
    cr_assert_eq(loom_cpu_matmul(x, 1, ok, y, &err), LOOM_ERR_UNSUPPORTED);
    /* sizes: rows, each tile layout only for its type and rows % 16 */
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, 16, 256, LOOM_WEIGHT_ROWS), 16 * 210);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q4_K, 32, 512, LOOM_WEIGHT_Q4K_TILES), 32 * 288);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, 16, 256, LOOM_WEIGHT_Q4K_TILES), -1);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q4_K, 16, 256, LOOM_WEIGHT_Q6K_TILES), -1);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, 8, 256, LOOM_WEIGHT_Q6K_TILES), -1);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, 16, 300, LOOM_WEIGHT_ROWS), -1);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, 16, 256, (loom_weight_layout)7), -1);
    cr_assert_eq(loom_weight_bytes(LOOM_GGML_Q6_K, INT64_MAX / 16 * 16, 256 * 1024,
                                   LOOM_WEIGHT_Q6K_TILES), -1);
}

/* Kernels called from several threads at once: one caller gets the pool, the others run on
 * their own thread; every result must still be the single-threaded one. */
typedef struct concurrent_arg {
    const loom_kweight *w;
    const float *x;
    const float *want;
    int64_t n;
    int mismatches;
} concurrent_arg;

static void *concurrent_main(void *p) {
    concurrent_arg *a = p;
    float *y = malloc(a->n * a->w->rows * sizeof(float));
    for (int rep = 0; rep < 20; rep++) {
        poison(y, a->n * a->w->rows);
        if (loom_cpu_matmul(a->x, a->n, *a->w, y, NULL) != LOOM_OK ||
            memcmp(y, a->want, a->n * a->w->rows * sizeof(float)) != 0)
            a->mismatches++;
    }
    free(y);
    return NULL;
}

Test(matmul, concurrent_callers_get_correct_results) {
    rng r = {8};
    const int64_t M = 120, K = 512, N = 4;
    enum { CALLERS = 3 };
    loom_kweight w = random_weight(&r, LOOM_GGML_Q5_K, M, K);
    float *x[CALLERS], *want[CALLERS];
    concurrent_arg args[CALLERS];
    pthread_t th[CALLERS];
    loom_cpu_set_threads(1);
    for (int i = 0; i < CALLERS; i++) {
        x[i] = random_floats(&r, N * K, 1.0f);
        want[i] = malloc(N * M * sizeof(float));
        cr_assert_eq(loom_cpu_matmul(x[i], N, w, want[i], NULL), LOOM_OK);
        args[i] = (concurrent_arg){.w = &w, .x = x[i], .want = want[i], .n = N};
    }
    loom_cpu_set_threads(2);
    for (int i = 0; i < CALLERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, concurrent_main, &args[i]), 0);
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(args[i].mismatches, 0, "caller %d: %d wrong results", i,
                     args[i].mismatches);
        free(x[i]);
        free(want[i]);
    }
    loom_cpu_set_threads(0);
    free_weight(&w);
}

/* A child of fork() has no pool workers; its kernels must still run (and not hang). */
Test(matmul, works_in_a_forked_child) {
    rng r = {9};
    loom_kweight w = random_weight(&r, LOOM_GGML_Q8_0, 200, 512);
    float *x = random_floats(&r, 4 * 512, 1.0f);
    float *want = malloc(4 * 200 * sizeof(float)), *y = malloc(4 * 200 * sizeof(float));
    loom_cpu_set_threads(2);
    cr_assert_eq(loom_cpu_matmul(x, 4, w, want, NULL), LOOM_OK); /* starts the pool */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(30); /* a hang (waiting for workers the child lacks) fails instead of hanging */
        int ok = loom_cpu_matmul(x, 4, w, y, NULL) == LOOM_OK &&
                 memcmp(y, want, 4 * 200 * sizeof(float)) == 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    loom_cpu_set_threads(0);
    free(x);
    free(want);
    free(y);
    free_weight(&w);
}

/* ---- the RMSNorm folded into the matmul (_normed, _normed_ws) ------------------------------ */

/* x normalized as the unfused graph does it (the contract's left-hand side). */
static float *normed_ref(const float *x, const loom_prenorm *p, int64_t n, int64_t k) {
    float *t = malloc((size_t)(n * k > 0 ? n * k : 1) * sizeof(float));
    cr_assert_not_null(t);
    cr_assert_eq(loom_cpu_rms_norm(x, p->weight, n, k, p->eps, t, NULL), LOOM_OK);
    return t;
}

static void assert_same_bits(const float *a, const float *b, int64_t n, const char *what,
                             int type, int64_t k, int64_t tokens) {
    for (int64_t i = 0; i < n; i++)
        cr_assert(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                  "%s type %d K %lld N %lld: element %lld is %.9g, norm+plain gives %.9g", what,
                  type, (long long)k, (long long)tokens, (long long)i, a[i], b[i]);
}

Test(matmul_normed, equals_rms_norm_then_matmul_bit_for_bit) {
    rng r = {21};
    loom_cpu_workspace ws = {0};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const shape s = shapes[si];
            loom_kweight w = random_weight(&r, all_types[ti], s.m, s.k);
            /* x of a residual stream: large values, so an unnormalized x fails loudly. */
            float *x = random_floats(&r, s.n * s.k, 40.0f);
            float *x0 = malloc((size_t)(s.n * s.k) * sizeof(float));
            memcpy(x0, x, (size_t)(s.n * s.k) * sizeof(float));
            float *nw = random_floats(&r, s.k, 2.0f);
            float *y = malloc((size_t)(s.n * s.m) * sizeof(float));
            float *ref = malloc((size_t)(s.n * s.m) * sizeof(float));
            for (int with_w = 0; with_w < 2; with_w++) {
                const loom_prenorm p = {.weight = with_w ? nw : NULL, .eps = 1e-6f};
                float *xn = normed_ref(x, &p, s.n, s.k);
                cr_assert_eq(loom_cpu_matmul(xn, s.n, w, ref, NULL), LOOM_OK);
                poison(y, s.n * s.m);
                loom_error err = {0};
                cr_assert_eq(loom_cpu_matmul_normed(x, &p, s.n, w, y, &err), LOOM_OK, "%s",
                             err.msg);
                assert_same_bits(y, ref, s.n * s.m, "matmul_normed", all_types[ti], s.k, s.n);
                poison(y, s.n * s.m);
                cr_assert_eq(loom_cpu_matmul_normed_ws(x, &p, s.n, w, y, &ws, &err), LOOM_OK,
                             "%s", err.msg);
                assert_same_bits(y, ref, s.n * s.m, "matmul_normed_ws", all_types[ti], s.k, s.n);
                check_against_reference(&w, xn, s.n, NULL, y, "matmul_normed");
                free(xn);
            }
            cr_assert(memcmp(x, x0, (size_t)(s.n * s.k) * sizeof(float)) == 0, "x was written");
            /* NULL norm: the plain call. */
            cr_assert_eq(loom_cpu_matmul(x, s.n, w, ref, NULL), LOOM_OK);
            poison(y, s.n * s.m);
            cr_assert_eq(loom_cpu_matmul_normed(x, NULL, s.n, w, y, NULL), LOOM_OK);
            assert_same_bits(y, ref, s.n * s.m, "matmul_normed(NULL)", all_types[ti], s.k, s.n);
            free(x);
            free(x0);
            free(nw);
            free(y);
            free(ref);
            free_weight(&w);
        }
    loom_cpu_workspace_free(&ws);
}

Test(matmul_normed, pair_and_triple_equal_rms_norm_then_the_plain_call) {
    rng r = {22};
    const int64_t K = 768;
    loom_cpu_workspace ws = {0};
    const int64_t ns[] = {1, 3, 12, 33};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t N = ns[ni], M = 37;
        loom_kweight a = random_weight(&r, LOOM_GGML_Q4_K, M, K);
        loom_kweight b = random_weight(&r, LOOM_GGML_Q6_K, M, K);
        float *x = random_floats(&r, N * K, 30.0f);
        float *nw = random_floats(&r, K, 1.5f);
        const loom_prenorm p = {.weight = nw, .eps = 1e-5f};
        float *xn = normed_ref(x, &p, N, K);
        float *ra = malloc(N * M * sizeof(float)), *rb = malloc(N * M * sizeof(float));
        float *ya = malloc(N * M * sizeof(float)), *yb = malloc(N * M * sizeof(float));
        for (int epi = 0; epi < 2; epi++) {
            const loom_pair_epilogue e = epi ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE;
            cr_assert_eq(loom_cpu_matmul_pair(xn, N, a, b, e, ra, rb, NULL), LOOM_OK);
            poison(ya, N * M);
            poison(yb, N * M);
            cr_assert_eq(loom_cpu_matmul_pair_normed_ws(x, &p, N, a, b, e, ya, yb, &ws, NULL),
                         LOOM_OK);
            assert_same_bits(ya, ra, N * M, "pair_normed a", epi, K, N);
            if (!epi) assert_same_bits(yb, rb, N * M, "pair_normed b", epi, K, N);
            poison(ya, N * M);
            cr_assert_eq(loom_cpu_matmul_pair_normed(x, &p, N, a, b, e, ya, yb, NULL), LOOM_OK);
            assert_same_bits(ya, ra, N * M, "pair_normed (own scratch)", epi, K, N);
            poison(ya, N * M);
            cr_assert_eq(loom_cpu_matmul_pair_normed(x, NULL, N, a, b, e, ya, yb, NULL), LOOM_OK);
            cr_assert_eq(loom_cpu_matmul_pair(x, N, a, b, e, ra, rb, NULL), LOOM_OK);
            assert_same_bits(ya, ra, N * M, "pair_normed(NULL)", epi, K, N);
        }
        const int64_t rows[3] = {48, 16, 16};
        const loom_ggml_type types[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
        loom_kweight w[3];
        float *bias[3], *y[3], *ref[3];
        for (int i = 0; i < 3; i++) {
            w[i] = random_weight(&r, types[i], rows[i], K);
            bias[i] = random_floats(&r, rows[i], 0.5f);
            y[i] = malloc(N * rows[i] * sizeof(float));
            ref[i] = malloc(N * rows[i] * sizeof(float));
        }
        const float *const biases[3] = {bias[0], bias[1], bias[2]};
        for (int with_b = 0; with_b < 2; with_b++) {
            const float *const *bb = with_b ? biases : NULL;
            cr_assert_eq(loom_cpu_matmul_triple(xn, N, w, bb, ref, NULL), LOOM_OK);
            for (int i = 0; i < 3; i++) poison(y[i], N * rows[i]);
            cr_assert_eq(loom_cpu_matmul_triple_normed_ws(x, &p, N, w, bb, y, &ws, NULL), LOOM_OK);
            for (int i = 0; i < 3; i++)
                assert_same_bits(y[i], ref[i], N * rows[i], "triple_normed", i, K, N);
            for (int i = 0; i < 3; i++) poison(y[i], N * rows[i]);
            cr_assert_eq(loom_cpu_matmul_triple_normed(x, &p, N, w, bb, y, NULL), LOOM_OK);
            for (int i = 0; i < 3; i++)
                assert_same_bits(y[i], ref[i], N * rows[i], "triple_normed (own)", i, K, N);
            cr_assert_eq(loom_cpu_matmul_triple(x, N, w, bb, ref, NULL), LOOM_OK);
            for (int i = 0; i < 3; i++) poison(y[i], N * rows[i]);
            cr_assert_eq(loom_cpu_matmul_triple_normed(x, NULL, N, w, bb, y, NULL), LOOM_OK);
            for (int i = 0; i < 3; i++)
                assert_same_bits(y[i], ref[i], N * rows[i], "triple_normed(NULL)", i, K, N);
        }
        for (int i = 0; i < 3; i++) {
            free_weight(&w[i]);
            free(bias[i]);
            free(y[i]);
            free(ref[i]);
        }
        free(x);
        free(nw);
        free(xn);
        free(ra);
        free(rb);
        free(ya);
        free(yb);
        free_weight(&a);
        free_weight(&b);
    }
    cr_assert_geq(ws.cap, (size_t)(33 * K), "the workspace grew to the largest call");
    loom_cpu_workspace_free(&ws);
}

Test(matmul_normed, bad_arguments_are_refused_with_a_message) {
    float x[512] = {0}, y[64];
    uint8_t data[4096] = {0};
    loom_error err = {0};
    loom_kweight ok = {.data = data, .type = LOOM_GGML_Q8_0, .rows = 2, .cols = 64};
    loom_prenorm neg = {.weight = NULL, .eps = -1e-6f}, nan_eps = {.weight = NULL, .eps = NAN};
    cr_assert_eq(loom_cpu_matmul_normed(x, &neg, 1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "matmul_normed") && strstr(err.msg, "eps"), "%s", err.msg);
    cr_assert_eq(loom_cpu_matmul_normed(x, &nan_eps, 1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "eps"), "%s", err.msg);
    const loom_prenorm p = {.weight = NULL, .eps = 1e-6f};
    cr_assert_eq(loom_cpu_matmul_normed(NULL, &p, 1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "matmul_normed") && strstr(err.msg, "x is NULL"), "%s", err.msg);
    cr_assert_eq(loom_cpu_matmul_normed(x, &p, -1, ok, y, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "matmul_normed"), "%s", err.msg);
    loom_kweight q40 = {.data = data, .type = LOOM_GGML_Q4_0, .rows = 2, .cols = 32};
    cr_assert_eq(loom_cpu_matmul_pair_normed(x, &p, 1, ok, q40, LOOM_PAIR_NONE, y, y + 8, &err),
                 LOOM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "matmul_pair_normed") && strstr(err.msg, "Q4_0"), "%s", err.msg);
    cr_assert_eq(loom_cpu_matmul_pair_normed(x, &p, 1, ok, ok, (loom_pair_epilogue)7, y, y, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "matmul_pair_normed"), "%s", err.msg);
    float *ys[3] = {y, y + 8, y + 16};
    cr_assert_eq(loom_cpu_matmul_triple_normed(x, &p, 1, NULL, NULL, ys, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "matmul_triple_normed"), "%s", err.msg);
    loom_kweight w3[3] = {ok, ok, {.data = data, .type = LOOM_GGML_Q8_0, .rows = 2, .cols = 32}};
    cr_assert_eq(loom_cpu_matmul_triple_normed(x, &p, 1, w3, NULL, ys, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "weight 2"), "%s", err.msg);
    /* N = 0 is a no-op, but a bad eps is still refused. */
    cr_assert_eq(loom_cpu_matmul_normed(NULL, &p, 0, ok, NULL, &err), LOOM_OK);
    cr_assert_eq(loom_cpu_matmul_normed(NULL, &neg, 0, ok, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
}
