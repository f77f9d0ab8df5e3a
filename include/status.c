/* status.c: loom_error formatting and the assertion handler (see loom/status.h). */
#include "loom/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

loom_status loom_error_set(loom_error *err, loom_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

loom_status loom_error_prefix(loom_error *err, const char *fmt, ...) {
    if (!err) return LOOM_OK;
    char old[LOOM_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%s", old);
    return err->status;
}

const char *loom_status_name(loom_status status) {
    switch (status) {
    case LOOM_OK: return "ok";
    case LOOM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LOOM_ERR_FORMAT: return "format";
    case LOOM_ERR_OUT_OF_MEMORY: return "out of memory";
    case LOOM_ERR_IO: return "io";
    case LOOM_ERR_UNSUPPORTED: return "unsupported";
    case LOOM_ERR_CUDA: return "cuda";
    case LOOM_ERR_NOT_FOUND: return "not found";
    case LOOM_ERR_TYPE: return "type";
    case LOOM_ERR_VERIFY: return "verify";
    case LOOM_ERR_LIMIT: return "limit";
    }
    return "unknown";
}

void loom_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "loom: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
