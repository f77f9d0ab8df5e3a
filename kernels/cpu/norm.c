/* norm.c: RMSNorm over rows, optionally times a weight vector (the fused form), also used per
 * head (rows of head_dim inside [N, H * head_dim]) for the Q/K norms of qwen3.
 *
 * Numeric contract (cpu_kernels.h): sum of squares in double, in order; scale =
 * (float)(1 / sqrt(sum / d + eps)); y[i] = (x[i] * scale) * weight[i] in float32. Each row is read
 * completely before it is written, so y may alias x. Single-threaded: a norm is O(N·D), noise
 * next to the matmuls around it.
 */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

loom_status loom_cpu_rms_norm(const float *x, const float *weight, int64_t rows, int64_t d,
                              float eps, float *y, loom_error *err) {
    if (rows < 0 || d < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "rms_norm: negative shape [%lld, %lld]", (long long)rows,
                              (long long)d);
    if (rows == 0 || d == 0) return LOOM_OK;
    if (!x || !y)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "rms_norm: %s is NULL",
                              !x ? "x" : "y");
    if (!(eps >= 0.0f))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "rms_norm: eps %g is not >= 0",
                              (double)eps);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double sum = 0.0;
        for (int64_t i = 0; i < d; i++) sum += (double)xr[i] * (double)xr[i];
        const float scale = (float)(1.0 / sqrt(sum / (double)d + (double)eps));
        if (weight)
            for (int64_t i = 0; i < d; i++) yr[i] = (xr[i] * scale) * weight[i];
        else
            for (int64_t i = 0; i < d; i++) yr[i] = xr[i] * scale;
    }
    return LOOM_OK;
}
