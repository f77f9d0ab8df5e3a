/* session.c: the end-to-end checks' model + session set-up (see session.h). */
#include "tests/common/session.h"

loom_status loom_test_session_open(const char *path, int32_t n_ctx, int32_t max_tokens,
                                   loom_cache_type cache, const loom_session_options *so,
                                   loom_test_session *t, loom_error *err) {
    return loom_test_session_open_passes(path, NULL, n_ctx, max_tokens, cache, so, t, err);
}

loom_status loom_test_session_open_passes(const char *path, const char *passes, int32_t n_ctx,
                                          int32_t max_tokens, loom_cache_type cache,
                                          const loom_session_options *so, loom_test_session *t,
                                          loom_error *err) {
    loom_model_options mo;
    loom_model_options_init(&mo);
    if (passes) mo.passes = passes;
    mo.n_ctx = n_ctx;
    mo.max_tokens = max_tokens;
    mo.cache_type = cache;
    t->model = NULL;
    t->session = NULL;
    loom_status st = loom_model_load(path, &mo, &t->model, err);
    if (!st) st = loom_session_create(t->model, so, &t->session, err);
    if (st) loom_test_session_close(t);
    return st;
}

void loom_test_session_close(loom_test_session *t) {
    loom_session_destroy(t->session);
    loom_model_destroy(t->model);
    t->session = NULL;
    t->model = NULL;
}
