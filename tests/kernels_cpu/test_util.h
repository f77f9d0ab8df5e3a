/* test_util.h: helpers the kernels_cpu tests share: a seeded generator, random weights of any
 * supported type (quantized by kernels/quant), and the whole-matrix dequantization the naive
 * double-precision references use (tests may copy whole matrices; kernels may not).
 */
#ifndef LOOM_TESTS_KERNELS_CPU_TEST_UTIL_H
#define LOOM_TESTS_KERNELS_CPU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

typedef struct rng { uint64_t s; } rng;

static inline uint64_t rng_next(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float rng_uniform(rng *r) {
    return (float)((double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static inline float *random_floats(rng *r, int64_t n, float amp) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = amp * rng_uniform(r);
    return v;
}

/* A random M x K weight of `type`: random floats in [-1, 1) quantized row by row. */
static inline loom_kweight random_weight(rng *r, loom_ggml_type type, int64_t m, int64_t k) {
    int64_t rb = loom_ggml_row_bytes((uint32_t)type, k);
    cr_assert_geq(rb, 0, "row bytes of type %d, k %lld", (int)type, (long long)k);
    uint8_t *data = malloc((size_t)(m * rb > 0 ? m * rb : 1));
    cr_assert_not_null(data);
    float *row = random_floats(r, k, 1.0f);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < k; j++) row[j] = rng_uniform(r);
        cr_assert_eq(loom_quantize_row(type, row, data + i * rb, k), LOOM_OK);
    }
    free(row);
    return (loom_kweight){.data = data, .type = type, .rows = m, .cols = k};
}

/* The whole weight dequantized (tests only). */
static inline float *dequant_weight(const loom_kweight *w) {
    int64_t rb = loom_ggml_row_bytes((uint32_t)w->type, w->cols);
    float *out = malloc((size_t)(w->rows * w->cols > 0 ? w->rows * w->cols : 1) * sizeof(float));
    cr_assert_not_null(out);
    for (int64_t i = 0; i < w->rows; i++)
        cr_assert_eq(loom_dequantize_row(w->type, (const uint8_t *)w->data + i * rb,
                                         out + i * w->cols, w->cols),
                     LOOM_OK);
    return out;
}

static inline void free_weight(loom_kweight *w) { free((void *)w->data); }

/* NaN poison, so an unwritten output element fails a comparison. */
static inline void poison(float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) v[i] = NAN;
}

#endif /* LOOM_TESTS_KERNELS_CPU_TEST_UTIL_H */
