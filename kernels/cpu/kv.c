/* kv.c: writing T rows into one KV cache tensor (layout in cpu_kernels.h: [n_ctx][n_kv_head]
 * [head_dim], plus [n_ctx][n_kv_head] float scales for INT8).
 *
 * INT8 rows: amax = max |x|, d = amax / 127, id = d ? 1 / d : 0, q = rintf(x * id) (ties to
 * even under the default rounding mode), clamped to [-127, 127]; the clamp only guards against
 * x * id rounding to 127.00001. Round trip error |x - q * d| <= d / 2 plus float rounding.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

loom_status loom_cpu_check_kv_layout(const char *who, const loom_kv_layout *kv, loom_error *err) {
    if (!kv) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: layout is NULL", who);
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s: cache type %d (supported: 0 F32, 1 F16, 2 INT8)", who,
                              (int)kv->type);
    if (kv->n_ctx < 0 || kv->n_kv_head < 0 || kv->head_dim < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "%s: negative cache shape [%lld, %lld, %lld]", who,
                              (long long)kv->n_ctx, (long long)kv->n_kv_head,
                              (long long)kv->head_dim);
    return LOOM_OK;
}

static void quantize_row_int8(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float v = rintf(x[i] * id);
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[i] = (int8_t)v;
    }
    *scale = d;
}

loom_status loom_cpu_kv_write(const float *src, int64_t n_tokens, int64_t pos0, void *cache,
                              float *scales, const loom_kv_layout *kv, loom_error *err) {
    loom_status s = loom_cpu_check_kv_layout("kv_write", kv, err);
    if (s != LOOM_OK) return s;
    if (n_tokens < 0 || pos0 < 0 || pos0 > kv->n_ctx || n_tokens > kv->n_ctx - pos0)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "kv_write: positions %lld .. %lld + %lld do not fit the cache of "
                              "%lld positions",
                              (long long)pos0, (long long)pos0, (long long)n_tokens,
                              (long long)kv->n_ctx);
    const int64_t D = kv->head_dim, rows = n_tokens * kv->n_kv_head;
    if (rows == 0 || D == 0) return LOOM_OK;
    if (!src || !cache)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "kv_write: %s is NULL",
                              !src ? "src" : "cache");
    if (kv->type == LOOM_KV_INT8 && !scales)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "kv_write: INT8 cache without a scale array");
    const int64_t first = pos0 * kv->n_kv_head; /* first cache row written */
    switch (kv->type) {
    case LOOM_KV_F32:
        memcpy((float *)cache + first * D, src, (size_t)(rows * D) * sizeof(float));
        break;
    case LOOM_KV_F16: {
        uint16_t *dst = (uint16_t *)cache + first * D;
        for (int64_t i = 0; i < rows * D; i++) dst[i] = loom_fp32_to_fp16(src[i]);
        break;
    }
    case LOOM_KV_INT8:
        for (int64_t r = 0; r < rows; r++)
            quantize_row_int8(src + r * D, D, (int8_t *)cache + (first + r) * D,
                              &scales[first + r]);
        break;
    }
    return LOOM_OK;
}
