/* exec_plan_test.c: the executor running on the plan (CPU backend), and the CUDA backend's
 * refusal on a machine without a usable GPU.
 *
 * - Every golden model runs S7 through the C API with 1 and 4 streams: the logits are
 *   bit-identical (the CPU backend runs the plan's order; only memory placement differs) and
 *   match `<model>.S7.deq.logits.bin` within 1e-4 of each row's range (testdata README); the
 *   session's arena is the plan's (<= 1.10 x its lower bound).
 * - Without a usable GPU (this test machine), a CUDA session fails at once with
 *   LOOM_ERR_UNSUPPORTED and a message saying no usable CUDA device, and `loom run --backend
 *   cuda` exits 1 with that message before loading anything; the CPU backend still works after.
 *   On a machine with a GPU these two cases are skipped.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/loom_impl.h"
#include "loom.h"
#include "tests/common/session.h"
#include "tests/common/testdata.h"

static const int32_t S7[] = {338, 281, 93, 503, 475, 149, 364};

static float *run_s7(const char *path, int32_t streams, int32_t *V) {
    loom_session_options so;
    loom_session_options_init(&so);
    so.n_streams = streams;
    loom_test_session t;
    loom_error err = {0};
    cr_assert(!loom_test_session_open(path, 64, 16, LOOM_CACHE_F32, &so, &t, &err), "%s", err.msg);
    loom_session *s = t.session;
    loom_exec_stats st;
    loom_session_exec_stats(s, &st);
    cr_assert(st.activation_bytes * 100 <= st.activation_lower_bound * 110,
              "%s: arena %llu > 1.10 x %llu", path, (unsigned long long)st.activation_bytes,
              (unsigned long long)st.activation_lower_bound);
    cr_assert_leq(st.n_streams, (uint32_t)streams);
    cr_assert(!loom_session_eval(s, S7, 7, &err), "%s", err.msg);
    int32_t rows = 0;
    const float *l = loom_session_logits(s, &rows);
    cr_assert_eq(rows, 7);
    *V = loom_model_n_vocab(t.model);
    float *copy = malloc((size_t)rows * *V * sizeof *copy);
    cr_assert(copy);
    memcpy(copy, l, (size_t)rows * *V * sizeof *copy);
    loom_test_session_close(&t);
    return copy;
}

Test(exec_plan, golden_logits_identical_across_streams) {
    const char *d = loom_test_testdata("golden/sequences.txt");
    static const char *names[] = {"tiny_llama_f32", "tiny_llama_f16", "tiny_llama_q8_0",
                                  "tiny_llama_q6_k", "tiny_llama_q5_k", "tiny_llama_q4_k",
                                  "tiny_qwen3_q4km", "tiny_qwen2_q4km"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[1024], ref_path[1024];
        snprintf(path, sizeof path, "%s/golden/%s.gguf", d, names[i]);
        snprintf(ref_path, sizeof ref_path, "%s/golden/%s.S7.deq.logits.bin", d, names[i]);
        int32_t V1, V4;
        float *a = run_s7(path, 1, &V1), *b = run_s7(path, 4, &V4);
        cr_assert_eq(V1, V4);
        cr_assert(!memcmp(a, b, (size_t)7 * V1 * sizeof *a), "%s: streams 1 vs 4 differ", names[i]);
        FILE *f = fopen(ref_path, "rb");
        cr_assert(f, "%s", ref_path);
        int32_t hdr[2];
        cr_assert_eq(fread(hdr, sizeof hdr, 1, f), 1);
        cr_assert(hdr[0] == 7 && hdr[1] == V1);
        float *ref = malloc((size_t)7 * V1 * sizeof *ref);
        cr_assert_eq(fread(ref, sizeof *ref, (size_t)7 * V1, f), (size_t)7 * V1);
        fclose(f);
        for (int r = 0; r < 7; r++) {
            float lo = ref[r * V1], hi = lo, md = 0;
            for (int v = 0; v < V1; v++) {
                float x = ref[r * V1 + v];
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
                float dd = fabsf(x - a[r * V1 + v]);
                md = dd > md ? dd : md;
            }
            cr_assert(md <= 1e-4f * (hi - lo), "%s row %d: max diff %g of range %g", names[i], r,
                      md, hi - lo);
        }
        free(ref);
        free(a);
        free(b);
    }
}

/* The `loom` binary in the runfiles (or bazel-bin when run by hand). */
static const char *loom_bin(void) {
    static char path[2048];
    loom_test_runfile(path, sizeof path, "tools/loom");
    return path;
}

static bool gpu_present(void) {
    loom_error err = {0};
    return loom_backend_available(LOOM_BACKEND_CUDA, &err) == LOOM_OK;
}

Test(exec_plan, cuda_session_refused_without_gpu) {
    if (gpu_present()) cr_skip_test("a usable GPU is present");
    const char *d = loom_test_testdata("golden/sequences.txt");
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/tiny_llama_q4_k.gguf", d);
    loom_model *m = NULL;
    loom_session *s = NULL;
    loom_error err = {0};
    cr_assert(!loom_model_load(path, NULL, &m, &err), "%s", err.msg);
    loom_session_options so;
    loom_session_options_init(&so);
    so.backend = LOOM_BACKEND_CUDA;
    cr_assert_eq(loom_session_create(m, &so, &s, &err), LOOM_ERR_UNSUPPORTED);
    cr_assert_null(s);
    cr_assert(strstr(err.msg, "no usable CUDA device"), "message: %s", err.msg);
    loom_error e2 = {0};
    cr_assert_eq(loom_backend_available(LOOM_BACKEND_CUDA, &e2), LOOM_ERR_UNSUPPORTED);
    cr_assert(strstr(e2.msg, "no usable CUDA device"), "message: %s", e2.msg);
    /* INT8 KV on the CPU is refused, and the CPU backend still works. */
    so.backend = LOOM_BACKEND_CPU;
    so.kv = LOOM_SESSION_KV_INT8;
    cr_assert_eq(loom_session_create(m, &so, &s, &err), LOOM_ERR_UNSUPPORTED);
    so.kv = LOOM_SESSION_KV_AS_MODEL;
    cr_assert(!loom_session_create(m, &so, &s, &err), "%s", err.msg);
    cr_assert(!loom_session_eval(s, S7, 7, &err), "%s", err.msg);
    loom_session_destroy(s);
    loom_model_destroy(m);
}

Test(exec_plan, loom_run_backend_cuda_exits_1) {
    if (gpu_present()) cr_skip_test("a usable GPU is present");
    const char *d = loom_test_testdata("golden/sequences.txt");
    const char *tmp = getenv("TEST_TMPDIR");
    char cmd[4096], errf[1024];
    snprintf(errf, sizeof errf, "%s/run_cuda.err", tmp && *tmp ? tmp : "/tmp");
    snprintf(cmd, sizeof cmd,
             "%s run %s/golden/tiny_llama_q4_k.gguf --tokens 1,2,3 -n 2 --backend cuda "
             ">/dev/null 2>%s",
             loom_bin(), d, errf);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "exit status %d", rc);
    FILE *f = fopen(errf, "r");
    cr_assert(f);
    char buf[2048] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cr_assert(strstr(buf, "no usable CUDA device"), "stderr: %s", buf);
    cr_assert(!strstr(buf, "loading"), "it loaded the model first: %s", buf);
    /* And the CPU run of the same command works. */
    snprintf(cmd, sizeof cmd,
             "%s run %s/golden/tiny_llama_q4_k.gguf --tokens 1,2,3 -n 2 --streams 2 "
             ">/dev/null 2>%s",
             loom_bin(), d, errf);
    rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "cpu run exit status %d", rc);
}
