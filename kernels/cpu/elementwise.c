/* elementwise.c: add, mul (plain and broadcast), silu, swiglu, bias add and the conversions.
 *
 * Plain float32 loops, one rounding per operation, so a fused kernel that applies the same
 * formula (loom_silu(a) * b, dot + bias, dot + residual) to the same inputs gives the same bits.
 * Every output may alias an input (each element is read before it is written).
 */
#include <math.h>
#include <string.h>

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
    const float *f16 = loom_cpu_f16_table();
    for (int64_t i = 0; i < n; i++) dst[i] = f16[src[i]];
    return LOOM_OK;
}

loom_status loom_cpu_f32_to_f16(const float *src, int64_t n, uint16_t *dst, loom_error *err) {
    loom_status s = check_n("f32_to_f16", n, src, src, dst, err);
    if (s != LOOM_OK) return s;
    for (int64_t i = 0; i < n; i++) dst[i] = loom_fp32_to_fp16(src[i]);
    return LOOM_OK;
}

static loom_status check_bcast(const char *who, int64_t n, int64_t nb, const void *a,
                               const void *b, const void *y, loom_error *err) {
    loom_status s = check_n(who, n, a, b, y, err);
    if (s != LOOM_OK) return s;
    if (n > 0 && (nb <= 0 || n % nb != 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "%s: %lld values do not repeat a broadcast operand of %lld", who,
                              (long long)n, (long long)nb);
    return LOOM_OK;
}

loom_status loom_cpu_add_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                               loom_error *err) {
    loom_status s = check_bcast("add", n, nb, a, b, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t i = 0; i < nb; i++) y[r + i] = a[r + i] + b[i];
    return LOOM_OK;
}

loom_status loom_cpu_mul_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                               loom_error *err) {
    loom_status s = check_bcast("mul", n, nb, a, b, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t i = 0; i < nb; i++) y[r + i] = a[r + i] * b[i];
    return LOOM_OK;
}

/* ---- convert ---------------------------------------------------------------------------- */

static bool convert_type_ok(loom_ggml_type t) {
    return t == LOOM_GGML_F32 || t == LOOM_GGML_F16 || t == LOOM_GGML_BF16 || t == LOOM_GGML_I32;
}

static size_t convert_type_size(loom_ggml_type t) {
    return t == LOOM_GGML_F32 || t == LOOM_GGML_I32 ? 4 : 2;
}

static int32_t float_to_i32(float f) {
    if (isnan(f)) return 0;
    if (f >= 2147483648.0f) return INT32_MAX;
    if (f <= -2147483648.0f) return INT32_MIN;
    return (int32_t)f;
}

loom_status loom_cpu_convert(const void *src, loom_ggml_type src_type, void *dst,
                             loom_ggml_type dst_type, int64_t n, loom_error *err) {
    if (!convert_type_ok(src_type) || !convert_type_ok(dst_type)) {
        const loom_ggml_type_info *si = loom_ggml_type_get((uint32_t)src_type);
        const loom_ggml_type_info *di = loom_ggml_type_get((uint32_t)dst_type);
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "convert: %s -> %s (supported: F32, F16, BF16, I32)",
                              si ? si->name : "unknown", di ? di->name : "unknown");
    }
    loom_status s = check_n("convert", n, src, src, dst, err);
    if (s != LOOM_OK) return s;
    if (src_type == dst_type) {
        if (src != dst) memmove(dst, src, (size_t)n * convert_type_size(src_type));
        return LOOM_OK;
    }
    const float *f32 = src;
    const uint16_t *h = src;
    const int32_t *i32 = src;
    for (int64_t i = 0; i < n; i++) {
        float v;
        switch (src_type) {
        case LOOM_GGML_F32: v = f32[i]; break;
        case LOOM_GGML_F16: v = loom_fp16_to_fp32(h[i]); break;
        case LOOM_GGML_BF16: v = loom_bf16_to_fp32(h[i]); break;
        default: v = (float)i32[i]; break;
        }
        switch (dst_type) {
        case LOOM_GGML_F32: ((float *)dst)[i] = v; break;
        case LOOM_GGML_F16: ((uint16_t *)dst)[i] = loom_fp32_to_fp16(v); break;
        case LOOM_GGML_BF16: ((uint16_t *)dst)[i] = loom_fp32_to_bf16(v); break;
        default: ((int32_t *)dst)[i] = float_to_i32(v); break;
        }
    }
    return LOOM_OK;
}
