/* session.h: the model + session set-up that the end-to-end checks repeat (tests/plan's
 * exec_plan_test under Criterion, tests/gpu_e2e's e2e_check as a plain C program on the GPU
 * machine), so it uses no Criterion: failures come back as a status and a message.
 *
 *     loom_test_session t;
 *     if (loom_test_session_open(path, 128, 32, LOOM_CACHE_F32, &so, &t, &err)) fail(err.msg);
 *     ... loom_session_eval(t.session, ...) ...
 *     loom_test_session_close(&t);
 */
#ifndef LOOM_TESTS_COMMON_SESSION_H
#define LOOM_TESTS_COMMON_SESSION_H

#include <stdint.h>

#include "loom.h"

typedef struct loom_test_session {
    loom_model *model;     /* owned; NULL when closed or not opened */
    loom_session *session; /* owned, on model */
} loom_test_session;

/* Loads the model at path with loom_model_options_init's defaults except n_ctx, max_tokens and
 * cache, then creates a session on it with so (NULL: loom_session_options_init's defaults).
 * On failure returns the status with err set, and *t holds nothing (both members NULL). */
loom_status loom_test_session_open(const char *path, int32_t n_ctx, int32_t max_tokens,
                                   loom_cache_type cache, const loom_session_options *so,
                                   loom_test_session *t, loom_error *err);

/* The same with the pass pipeline `passes` (NULL: the default -O2), e.g. -O2 less one fusion
 * to compare a fused graph with the unfused one. */
loom_status loom_test_session_open_passes(const char *path, const char *passes, int32_t n_ctx,
                                          int32_t max_tokens, loom_cache_type cache,
                                          const loom_session_options *so, loom_test_session *t,
                                          loom_error *err);

/* Destroys the session, then the model; both NULL afterwards. A closed or failed t is a no-op. */
void loom_test_session_close(loom_test_session *t);

#endif /* LOOM_TESTS_COMMON_SESSION_H */
