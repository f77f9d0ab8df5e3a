/* golden_test.c: loom's CPU backend against the reference logits of ../shared/testdata/golden.
 *
 * For every golden model and token sequence, the prompt is evaluated as one prefill step and
 * every row of logits is compared with `<model>.<seq>.deq.logits.bin` (weights dequantized to
 * F32, plain F32 math, computed by an independent implementation): max |diff| within 1e-4 of the
 * row's logit range, and the same argmax wherever the reference's top two are further apart
 * than that. Also: prefill == token-by-token decode, two prefill chunks == one, and the
 * refusals (empty prompt, out-of-vocabulary id, context overflow).
 * Missing testdata: skipped, or failed when LOOM_REQUIRE_TESTDATA=1.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "tests/common/testdata.h"

/* Reads sequence `name` (S1, S7, S33) of golden/sequences.txt into toks; returns its length. */
static int read_sequence(const char *dir, const char *name, int32_t *toks, int cap) {
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/golden/sequences.txt", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    int n = -1;
    size_t nl = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, nl) || line[nl] != '=') continue;
        n = 0;
        for (char *p = line + nl + 1; *p && *p != '\n';) {
            cr_assert(n < cap);
            toks[n++] = (int32_t)strtol(p, &p, 10);
            if (*p == ',') p++;
        }
    }
    fclose(f);
    cr_assert(n > 0, "sequence %s not in %s", name, path);
    return n;
}

/* Reads a logits file; returns rows (malloc'ed, caller frees) and sets *n_tok, *n_vocab. */
static float *read_logits(const char *path, int32_t *n_tok, int32_t *n_vocab) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    int32_t hdr[2];
    cr_assert(fread(hdr, 4, 2, f) == 2);
    size_t n = (size_t)hdr[0] * (size_t)hdr[1];
    float *x = malloc(n * sizeof *x);
    cr_assert(x && fread(x, sizeof *x, n, f) == n, "short read in %s", path);
    fclose(f);
    *n_tok = hdr[0];
    *n_vocab = hdr[1];
    return x;
}

/* Compares one row with the tolerance of testdata/README.md. Returns the relative error. */
static double check_row(const char *what, int row, const float *got, const float *ref, int n) {
    float mx = ref[0], mn = ref[0];
    int a_ref = 0, a_got = 0, second = -1;
    double maxdiff = 0;
    for (int i = 0; i < n; i++) {
        if (ref[i] > mx) mx = ref[i];
        if (ref[i] < mn) mn = ref[i];
        if (ref[i] > ref[a_ref]) a_ref = i;
        if (got[i] > got[a_got]) a_got = i;
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= maxdiff)) maxdiff = d; /* NaN propagates */
    }
    for (int i = 0; i < n; i++)
        if (i != a_ref && (second < 0 || ref[i] > ref[second])) second = i;
    double range = (double)mx - mn, rel = maxdiff / range;
    cr_expect(rel <= 1e-4, "%s row %d: max |diff| %g is %g of the range %g (limit 1e-4)", what, row,
              maxdiff, rel, range);
    if ((double)ref[a_ref] - ref[second] > 1e-4 * range)
        cr_expect_eq(a_got, a_ref, "%s row %d: argmax %d, reference %d (margin %g)", what, row,
                     a_got, a_ref, (double)ref[a_ref] - ref[second]);
    return rel;
}

typedef struct { const char *model, *seqs[3]; } golden_case;
static const golden_case cases[] = {
    {"tiny_qwen3_q4km", {"S1", "S7", "S33"}}, {"tiny_llama_f32", {"S7", "S33"}},
    {"tiny_llama_f16", {"S7", "S33"}},        {"tiny_llama_q8_0", {"S7", "S33"}},
    {"tiny_llama_q6_k", {"S7", "S33"}},       {"tiny_llama_q5_k", {"S7", "S33"}},
    {"tiny_llama_q4_k", {"S7", "S33"}},       {"tiny_qwen2_q4km", {"S7", "S33"}},
};

static loom_model *load_with(const char *dir, const char *model, int32_t n_ctx,
                             const char *passes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, model);
    loom_model_options o;
    loom_model_options_init(&o);
    o.n_ctx = n_ctx;
    o.passes = passes;
    loom_error err = {0};
    loom_model *m = NULL;
    cr_assert_eq(loom_model_load(path, &o, &m, &err), LOOM_OK, "%s", err.msg);
    return m;
}

static loom_model *load(const char *dir, const char *model, int32_t n_ctx) {
    return load_with(dir, model, n_ctx, NULL);
}

static loom_session *session(loom_model *m) {
    loom_error err = {0};
    loom_session *s = NULL;
    cr_assert_eq(loom_session_create(m, NULL, &s, &err), LOOM_OK, "%s", err.msg);
    return s;
}

Test(golden, all_models_all_positions_match_reference) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    int checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, cases[c].model);
        FILE *probe = fopen(path, "rb");
        cr_assert(probe, "golden model missing: %s", path);
        fclose(probe);
        loom_model *m = load(dir, cases[c].model, 64);
        loom_session *s = session(m);
        for (int q = 0; q < 3 && cases[c].seqs[q]; q++) {
            int32_t toks[64];
            int n = read_sequence(dir, cases[c].seqs[q], toks, 64);
            char lp[1024], what[256];
            snprintf(lp, sizeof lp, "%s/golden/%s.%s.deq.logits.bin", dir, cases[c].model,
                     cases[c].seqs[q]);
            snprintf(what, sizeof what, "%s.%s", cases[c].model, cases[c].seqs[q]);
            int32_t rn, rv;
            float *ref = read_logits(lp, &rn, &rv);
            cr_assert_eq(rn, n, "%s: %d rows for %d tokens", lp, rn, n);
            cr_assert_eq(rv, loom_model_n_vocab(m), "%s: vocab %d vs model %d", lp, rv,
                         loom_model_n_vocab(m));
            loom_error err = {0};
            loom_session_reset(s);
            cr_assert_eq(loom_session_eval(s, toks, n, &err), LOOM_OK, "%s: %s", what, err.msg);
            int32_t rows = 0;
            const float *got = loom_session_logits(s, &rows);
            cr_assert_eq(rows, n);
            for (int r = 0; r < n; r++) check_row(what, r, got + (size_t)r * rv, ref + (size_t)r * rv, rv);
            free(ref);
            checked++;
        }
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
    cr_assert_eq(checked, 17); /* every .deq.logits.bin of golden/ */
}

/* Relative difference of two logits rows: max |a-b| / max(range of b). */
static double row_rel(const float *a, const float *b, int n) {
    float mx = b[0], mn = b[0];
    double d = 0;
    for (int i = 0; i < n; i++) {
        if (b[i] > mx) mx = b[i];
        if (b[i] < mn) mn = b[i];
        double x = fabs((double)a[i] - b[i]);
        if (!(x <= d)) d = x;
    }
    return d / ((double)mx - mn);
}

Test(golden, prefill_equals_single_steps_and_chunks) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    const char *models[] = {"tiny_qwen3_q4km", "tiny_qwen2_q4km", "tiny_llama_q8_0"};
    for (size_t mi = 0; mi < 3; mi++) {
        int32_t toks[64];
        int n = read_sequence(dir, "S33", toks, 64);
        loom_model *m = load(dir, models[mi], 64);
        int V = loom_model_n_vocab(m);
        loom_session *s = session(m);
        loom_error err = {0};
        cr_assert_eq(loom_session_eval(s, toks, n, &err), LOOM_OK, "%s", err.msg);
        float *full = malloc((size_t)n * V * sizeof *full);
        memcpy(full, loom_session_logits(s, NULL), (size_t)n * V * sizeof *full);
        loom_session_reset(s);
        for (int t = 0; t < n; t++) {
            cr_assert_eq(loom_session_eval(s, toks + t, 1, &err), LOOM_OK, "%s", err.msg);
            int32_t rows;
            const float *one = loom_session_logits(s, &rows);
            cr_assert_eq(rows, 1);
            double rel = row_rel(one, full + (size_t)t * V, V);
            cr_expect(rel <= 1e-4, "%s: step %d differs from prefill by %g", models[mi], t, rel);
        }
        cr_assert_eq(loom_session_pos(s), n);
        /* Two chunks (13 + 20 tokens) == one prefill. */
        loom_session_reset(s);
        cr_assert_eq(loom_session_eval(s, toks, 13, &err), LOOM_OK, "%s", err.msg);
        for (int t = 0; t < 13; t++)
            cr_expect(row_rel(loom_session_logits(s, NULL) + (size_t)t * V, full + (size_t)t * V, V) <= 1e-4);
        cr_assert_eq(loom_session_eval(s, toks + 13, n - 13, &err), LOOM_OK, "%s", err.msg);
        for (int t = 13; t < n; t++) {
            double rel = row_rel(loom_session_logits(s, NULL) + (size_t)(t - 13) * V,
                                 full + (size_t)t * V, V);
            cr_expect(rel <= 1e-4, "%s: chunked row %d differs by %g", models[mi], t, rel);
        }
        free(full);
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
}

/* Greedy continuation: the 16 tokens of `<model>.<seq>.deq.greedy16.txt` (comma-separated ids). */
Test(golden, greedy16_matches_reference) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    int checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_model *m = load(dir, cases[c].model, 64);
        loom_session *s = session(m);
        for (int q = 0; q < 3 && cases[c].seqs[q]; q++) {
            int32_t toks[64], want[16], got[16], n_got = 0;
            int n = read_sequence(dir, cases[c].seqs[q], toks, 64);
            char path[1024];
            snprintf(path, sizeof path, "%s/golden/%s.%s.deq.greedy16.txt", dir, cases[c].model,
                     cases[c].seqs[q]);
            FILE *f = fopen(path, "rb");
            cr_assert(f, "cannot open %s", path);
            int nw = 0;
            while (nw < 16 && fscanf(f, "%d%*[, \n]", &want[nw]) == 1) nw++;
            fclose(f);
            cr_assert_eq(nw, 16, "%s: %d ids", path, nw);
            loom_error err = {0};
            loom_session_reset(s);
            cr_assert_eq(loom_generate(s, toks, n, 16, NULL, NULL, NULL, got, &n_got, &err), LOOM_OK,
                         "%s", err.msg);
            cr_assert_eq(n_got, 16);
            for (int i = 0; i < 16; i++)
                cr_expect_eq(got[i], want[i], "%s.%s: generated token %d is %d, reference %d",
                             cases[c].model, cases[c].seqs[q], i, got[i], want[i]);
            cr_expect_eq(loom_session_pos(s), n + 15);
            checked++;
        }
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
    cr_assert_eq(checked, 17);
}

/* A graph lowered with max_tokens 8 runs the 33-token prompt in five steps (8+8+8+8+1) inside
 * one eval and still matches the reference at every position. */
Test(golden, eval_longer_than_max_tokens_is_chunked) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    char path[1024], lp[1024];
    snprintf(path, sizeof path, "%s/golden/tiny_qwen2_q4km.gguf", dir);
    snprintf(lp, sizeof lp, "%s/golden/tiny_qwen2_q4km.S33.deq.logits.bin", dir);
    loom_model_options o;
    loom_model_options_init(&o);
    o.n_ctx = 40;
    o.max_tokens = 8;
    loom_error err = {0};
    loom_model *m = NULL;
    cr_assert_eq(loom_model_load(path, &o, &m, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_model_max_tokens(m), 8);
    cr_assert_eq(loom_model_n_ctx(m), 40);
    loom_session *s = session(m);
    int32_t toks[64], rn, rv, rows = 0;
    int n = read_sequence(dir, "S33", toks, 64);
    float *ref = read_logits(lp, &rn, &rv);
    cr_assert_eq(loom_session_eval(s, toks, n, &err), LOOM_OK, "%s", err.msg);
    const float *got = loom_session_logits(s, &rows);
    cr_assert_eq(rows, n);
    for (int r = 0; r < n; r++)
        check_row("tiny_qwen2_q4km.S33 (max_tokens 8)", r, got + (size_t)r * rv, ref + (size_t)r * rv, rv);
    free(ref);
    loom_session_destroy(s);
    loom_model_destroy(m);
}

/* An F16 KV cache: within 1e-2 of the range (testdata/README.md), same argmax where the
 * reference's margin exceeds that. */
Test(golden, f16_kv_cache_within_its_tolerance) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    const char *models[] = {"tiny_qwen3_q4km", "tiny_llama_f32"};
    for (int mi = 0; mi < 2; mi++) {
        char path[1024], lp[1024];
        snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, models[mi]);
        snprintf(lp, sizeof lp, "%s/golden/%s.S33.deq.logits.bin", dir, models[mi]);
        loom_model_options o;
        loom_model_options_init(&o);
        o.n_ctx = 40;
        o.cache_type = LOOM_CACHE_F16;
        loom_error err = {0};
        loom_model *m = NULL;
        cr_assert_eq(loom_model_load(path, &o, &m, &err), LOOM_OK, "%s", err.msg);
        loom_session *s = session(m);
        int32_t toks[64], rn, rv;
        int n = read_sequence(dir, "S33", toks, 64);
        float *ref = read_logits(lp, &rn, &rv);
        cr_assert_eq(loom_session_eval(s, toks, n, &err), LOOM_OK, "%s", err.msg);
        const float *got = loom_session_logits(s, NULL);
        double worst = 0;
        for (int r = 0; r < n; r++) {
            double rel = row_rel(got + (size_t)r * rv, ref + (size_t)r * rv, rv);
            if (rel > worst) worst = rel;
        }
        cr_expect(worst <= 1e-2, "%s: F16 cache differs by %g of the range", models[mi], worst);
        cr_expect(worst > 0, "%s: an F16 cache cannot be exact; was it used?", models[mi]);
        free(ref);
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
}

/* A model lowered for last-token logits gives exactly the last row of the full logits, also
 * when the eval runs in several steps (max_tokens 8). */
Test(golden, last_logits_only_is_the_last_row) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    int32_t toks[64];
    int n = read_sequence(dir, "S33", toks, 64);
    loom_model *full = load(dir, "tiny_qwen3_q4km", 40);
    loom_session *sf = session(full);
    loom_error err = {0};
    cr_assert_eq(loom_session_eval(sf, toks, n, &err), LOOM_OK, "%s", err.msg);
    const float *want = loom_session_logits(sf, NULL) + (size_t)(n - 1) * 512;
    for (int max_tokens = 0; max_tokens <= 8; max_tokens += 8) {
        char path[1024];
        snprintf(path, sizeof path, "%s/golden/tiny_qwen3_q4km.gguf", dir);
        loom_model_options o;
        loom_model_options_init(&o);
        o.n_ctx = 40;
        o.max_tokens = max_tokens;
        o.last_logits_only = true;
        loom_model *m = NULL;
        cr_assert_eq(loom_model_load(path, &o, &m, &err), LOOM_OK, "%s", err.msg);
        loom_session *s = session(m);
        cr_assert_eq(loom_session_eval(s, toks, n, &err), LOOM_OK, "%s", err.msg);
        int32_t rows = 0;
        const float *got = loom_session_logits(s, &rows);
        cr_assert_eq(rows, 1);
        cr_assert(!memcmp(got, want, 512 * sizeof(float)), "max_tokens %d: last row differs",
                  max_tokens);
        int32_t gen[4], n_gen = 0;
        cr_assert_eq(loom_generate(s, toks, 1, 4, NULL, NULL, NULL, gen, &n_gen, &err), LOOM_OK,
                     "%s", err.msg);
        cr_assert_eq(n_gen, 4);
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
    loom_session_destroy(sf);
    loom_model_destroy(full);
}

/* The -O2 pipeline (fused ops) gives the unoptimized graph's logits within 1e-5 of the range
 * and still matches the reference, on every golden model. */
Test(golden, optimized_graph_matches_unoptimized_and_reference) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    int32_t toks[64];
    int n = read_sequence(dir, "S33", toks, 64);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_model *m0 = load(dir, cases[c].model, 40), *m2 = load_with(dir, cases[c].model, 40, "-O2");
        loom_session *s0 = session(m0), *s2 = session(m2);
        loom_error err = {0};
        cr_assert_eq(loom_session_eval(s0, toks, n, &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_session_eval(s2, toks, n, &err), LOOM_OK, "%s", err.msg);
        char lp[1024], what[256];
        snprintf(lp, sizeof lp, "%s/golden/%s.S33.deq.logits.bin", dir, cases[c].model);
        snprintf(what, sizeof what, "%s.S33 -O2", cases[c].model);
        int32_t rn, rv;
        float *ref = read_logits(lp, &rn, &rv);
        const float *a = loom_session_logits(s0, NULL), *b = loom_session_logits(s2, NULL);
        for (int r = 0; r < n; r++) {
            double rel = row_rel(b + (size_t)r * rv, a + (size_t)r * rv, rv);
            cr_expect(rel <= 1e-5, "%s row %d: optimized differs by %g", what, r, rel);
            check_row(what, r, b + (size_t)r * rv, ref + (size_t)r * rv, rv);
        }
        free(ref);
        loom_session_destroy(s0);
        loom_session_destroy(s2);
        loom_model_destroy(m0);
        loom_model_destroy(m2);
    }
}

Test(golden, refusals) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    loom_model *m = load(dir, "tiny_qwen3_q4km", 16);
    loom_session *s = session(m);
    loom_error err = {0};
    int32_t toks[20] = {1, 2, 3};
    cr_assert_eq(loom_session_eval(s, toks, 0, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "empty"), "%s", err.msg);
    toks[1] = 512;
    cr_assert_eq(loom_session_eval(s, toks, 3, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "512"), "%s", err.msg);
    toks[1] = -1;
    cr_assert_eq(loom_session_eval(s, toks, 3, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_session_pos(s), 0, "a refused eval leaves the session unchanged");
    for (int i = 0; i < 20; i++) toks[i] = i;
    cr_assert_eq(loom_session_eval(s, toks, 17, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "context"), "%s", err.msg);
    cr_assert_eq(loom_session_eval(s, toks, 16, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_session_eval(s, toks, 1, &err), LOOM_ERR_LIMIT);
    cr_assert_eq(loom_session_pos(s), 16);
    loom_session_destroy(s);
    loom_model_destroy(m);
}
