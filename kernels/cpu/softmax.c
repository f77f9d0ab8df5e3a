/* softmax.c: softmax and argmax over rows (the vocabulary: 152K values and more).
 *
 * softmax: m = max, e_i = expf(x_i - m) stored in y, Z = sum of e_i in double, y_i = e_i / Z
 * (the division in double, rounded once to float). y may alias x. A row holding +inf or NaN
 * gives NaNs (as the math does); -inf entries give 0.
 * argmax: the first index of the largest value; NaNs are skipped; a row of only NaNs gives 0.
 */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

static loom_status check_rows(const char *who, int64_t rows, int64_t n, const void *x,
                              const void *y, loom_error *err) {
    if (rows < 0 || n < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: negative shape [%lld, %lld]",
                              who, (long long)rows, (long long)n);
    if (rows > 0 && n > 0 && (!x || !y))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who,
                              !x ? "input" : "output");
    return LOOM_OK;
}

loom_status loom_cpu_softmax(const float *x, int64_t rows, int64_t n, float *y,
                             loom_error *err) {
    loom_status s = check_rows("softmax", rows, n, x, y, err);
    if (s != LOOM_OK) return s;
    for (int64_t r = 0; r < rows && n > 0; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m = xr[0];
        for (int64_t i = 1; i < n; i++) m = xr[i] > m ? xr[i] : m;
        double z = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float e = expf(xr[i] - m);
            yr[i] = e;
            z += e;
        }
        for (int64_t i = 0; i < n; i++) yr[i] = (float)((double)yr[i] / z);
    }
    return LOOM_OK;
}

loom_status loom_cpu_argmax(const float *x, int64_t rows, int64_t n, int32_t *out,
                            loom_error *err) {
    loom_status s = check_rows("argmax", rows, n, x, out, err);
    if (s != LOOM_OK) return s;
    if (n > INT32_MAX)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "argmax: row of %lld values does not fit an int32 index",
                              (long long)n);
    if (rows > 0 && n == 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "argmax: empty rows");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (!isnan(xr[i]) && (best < 0 || xr[i] > xr[best])) best = i;
        out[r] = best < 0 ? 0 : (int32_t)best;
    }
    return LOOM_OK;
}
