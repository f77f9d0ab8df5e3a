/* loom/status.h: status codes and the caller-visible error every fallible loom call fills.
 *
 * Contract: a fallible function returns a loom_status; LOOM_OK (0) is success. On failure it
 * writes one human-readable message with the context a user needs (file, field, byte offset,
 * node) into the loom_error the caller passed, if that pointer is not NULL. The error is a
 * plain struct owned by the caller (usually on the stack); it holds no heap memory.
 *
 *   loom_error err = {0};
 *   if (loom_gguf_open(path, &file, &err) != LOOM_OK) fprintf(stderr, "%s\n", err.msg);
 *
 * Two strengths of checks: bad input gets a status and a message; a broken internal invariant
 * hits LOOM_ASSERT, which aborts with file and line. LOOM_DEBUG_ASSERT is the costly kind,
 * compiled in only with -DLOOM_DEBUG=1 (the debug and asan configs). Library code never exits.
 */
#ifndef LOOM_STATUS_H
#define LOOM_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_status {
    LOOM_OK = 0,
    LOOM_ERR_INVALID_ARGUMENT = 1, /* a caller passed something that cannot be right */
    LOOM_ERR_FORMAT = 2,           /* a file or message is malformed */
    LOOM_ERR_OUT_OF_MEMORY = 3,    /* host or device allocation failed */
    LOOM_ERR_IO = 4,               /* open/read/write/mmap failed */
    LOOM_ERR_UNSUPPORTED = 5,      /* well-formed but not handled (type, architecture, op) */
    LOOM_ERR_CUDA = 6,             /* a CUDA runtime call or kernel launch failed */
    LOOM_ERR_NOT_FOUND = 7,        /* a key, tensor, pass or value does not exist */
    LOOM_ERR_TYPE = 8,             /* a value exists but holds another type */
    LOOM_ERR_VERIFY = 9,           /* a graph broke an IR rule */
    LOOM_ERR_LIMIT = 10,           /* a bound was hit: context length, iteration cap */
} loom_status;

enum { LOOM_ERROR_MSG_MAX = 512 };

typedef struct loom_error {
    loom_status status;
    char msg[LOOM_ERROR_MSG_MAX];
} loom_error;

/* Records status and a printf-style message in err (if not NULL) and returns status, so a
 * failure path reads `return loom_error_set(err, LOOM_ERR_FORMAT, "gguf: ...", ...);`. */
loom_status loom_error_set(loom_error *err, loom_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with more context ("loading x.pb: " + old message). */
loom_status loom_error_prefix(loom_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A stable lower-case name for a status ("format", "out of memory", ...). Never NULL. */
const char *loom_status_name(loom_status status);

/* Aborts with file, line and the failed expression. For internal invariants only. */
void loom_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

#define LOOM_ASSERT(cond) ((cond) ? (void)0 : loom_assert_fail(#cond, __FILE__, __LINE__))
#if defined(LOOM_DEBUG) && LOOM_DEBUG
#define LOOM_DEBUG_ASSERT(cond) LOOM_ASSERT(cond)
#else
#define LOOM_DEBUG_ASSERT(cond) ((void)0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* LOOM_STATUS_H */
