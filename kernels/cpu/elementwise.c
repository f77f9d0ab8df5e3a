/* elementwise.c: add, mul, silu, swiglu, bias add and the F16 <-> F32 conversions.
 *
 * Plain float32 loops, one rounding per operation, so a fused kernel that applies the same
 * formula (loom_silu(a) * b, dot + bias, dot + residual) to the same inputs gives the same bits.
 * Every output may alias an input (each element is read before it is written).
 */
#include "kernels/cpu/cpu_internal.h"

/* The shared argument check of the n-element kernels: n >= 0, pointers non-NULL when n > 0. */
static loom_status check_n(const char *who, int64_t n, const void *a, const void *b,
                           const void *y, loom_error *err) {
    if (n < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: negative length %lld", who,
                              (long long)n);
    if (n > 0 && (!a || !b || !y))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: NULL %s", who,
                              !a ? "input" : !b ? "second input" : "output");
    return LOOM_OK;
}

loom_status loom_cpu_add(const float *a, const float *b, int64_t n, float *y, loom_error *err) {
    loom_status s = check_n("add", n, a, b, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    return LOOM_OK;
}

loom_status loom_cpu_mul(const float *a, const float *b, int64_t n, float *y, loom_error *err) {
    loom_status s = check_n("mul", n, a, b, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
    return LOOM_OK;
}

loom_status loom_cpu_silu(const float *x, int64_t n, float *y, loom_error *err) {
    loom_status s = check_n("silu", n, x, x, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) y[i] = loom_silu(x[i]);
    return LOOM_OK;
}

loom_status loom_cpu_swiglu(const float *gate, const float *up, int64_t n, float *y,
                            loom_error *err) {
    loom_status s = check_n("swiglu", n, gate, up, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) y[i] = loom_silu(gate[i]) * up[i];
    return LOOM_OK;
}

loom_status loom_cpu_bias_add(float *y, const float *bias, int64_t rows, int64_t m,
                              loom_error *err) {
    if (rows < 0 || m < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "bias_add: negative shape [%lld, %lld]", (long long)rows,
                              (long long)m);
    loom_status s = check_n("bias_add", rows * m, y, bias, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < m; i++) y[r * m + i] = y[r * m + i] + bias[i];
    return LOOM_OK;
}

loom_status loom_cpu_f16_to_f32(const uint16_t *src, int64_t n, float *dst, loom_error *err) {
    loom_status s = check_n("f16_to_f32", n, src, src, dst, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) dst[i] = loom_fp16_to_fp32(src[i]);
    return LOOM_OK;
}

loom_status loom_cpu_f32_to_f16(const float *src, int64_t n, uint16_t *dst, loom_error *err) {
    loom_status s = check_n("f32_to_f16", n, src, src, dst, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) dst[i] = loom_fp32_to_fp16(src[i]);
    return LOOM_OK;
}
