/* models_test.c: the real models of ../shared/testdata/models end to end, and sampling.
 *
 * stories260K (a trained TinyStories model): BOS + "Once upon a time" greedily continues with
 * the 40 tokens of ", there was a little girl named Lily. She loved to play outside in the park.
 * One day, she saw a big, red ball." (checked as text through the model's own tokenizer).
 * llama-2-tiny-random (F16, 32000-token vocabulary, near-tie logits): loads, runs, and two runs
 * give the same tokens. Sampling: greedy is argmax; a seed fixes the draws; top-k 1 and a tiny
 * top-p are greedy; temperature 1 draws tokens with their softmax frequencies.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/loom_impl.h"
#include "loaders/tokenizer.h"
#include "loom.h"
#include "tests/common/testdata.h"

static loom_model *load(const char *file) {
    char path[1200];
    snprintf(path, sizeof path, "%s/models/%s", loom_test_testdata("models/stories260K.gguf"), file);
    loom_model_options o;
    loom_model_options_init(&o);
    o.n_ctx = 128;
    loom_error err = {0};
    loom_model *m = NULL;
    cr_assert_eq(loom_model_load(path, &o, &m, &err), LOOM_OK, "%s", err.msg);
    return m;
}

Test(models, stories260k_once_upon_a_time) {
    loom_model *m = load("stories260K.gguf");
    cr_assert_str_eq(loom_model_arch(m), "llama");
    cr_assert_eq(loom_model_n_vocab(m), 512);
    loom_error err = {0};
    loom_session *s = NULL;
    cr_assert_eq(loom_session_create(m, NULL, &s, &err), LOOM_OK, "%s", err.msg);
    loom_tokenizer *tok = NULL;
    cr_assert_eq(loom_tokenizer_create(loom_model_gguf(m), &tok, &err), LOOM_OK, "%s", err.msg);
    loom_token *ids = NULL;
    size_t n = 0;
    const char *prompt = "Once upon a time";
    cr_assert_eq(loom_tokenizer_encode(tok, prompt, strlen(prompt), true, false, &ids, &n, &err),
                 LOOM_OK, "%s", err.msg);
    int32_t want_prompt[] = {1, 403, 407, 261, 378};
    cr_assert_eq(n, 5);
    for (size_t i = 0; i < n; i++) cr_assert_eq(ids[i], want_prompt[i]);
    int32_t out[40], n_out = 0;
    cr_assert_eq(loom_generate(s, want_prompt, 5, 40, NULL, NULL, NULL, out, &n_out, &err),
                 LOOM_OK, "%s", err.msg);
    cr_assert_eq(n_out, 40);
    loom_token gen[40];
    for (int i = 0; i < 40; i++) gen[i] = out[i];
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(loom_tokenizer_decode(tok, gen, 40, 0, &text, &len, &err), LOOM_OK, "%s", err.msg);
    cr_expect_str_eq(text,
                     ", there was a little girl named Lily. She loved to play outside in the park. "
                     "One day, she saw a big, red ball.");
    free(text);
    free(ids);
    loom_tokenizer_destroy(tok);
    loom_session_destroy(s);
    loom_model_destroy(m);
}

static void run_tiny_random(int32_t *out, int32_t *n_out, uint64_t seed, float temp) {
    loom_model *m = load("llama-2-tiny-random.gguf");
    cr_assert_eq(loom_model_n_vocab(m), 32000);
    loom_error err = {0};
    loom_session *s = NULL;
    loom_sampler *sp = NULL;
    loom_sampler_options so;
    loom_sampler_options_init(&so);
    so.seed = seed;
    so.temperature = temp;
    cr_assert_eq(loom_sampler_create(&so, &sp, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_session_create(m, NULL, &s, &err), LOOM_OK, "%s", err.msg);
    int32_t prompt[] = {1, 15043, 29892, 3186};
    cr_assert_eq(loom_generate(s, prompt, 4, 24, sp, NULL, NULL, out, n_out, &err), LOOM_OK, "%s",
                 err.msg);
    int32_t rows;
    const float *l = loom_session_logits(s, &rows);
    cr_assert_eq(rows, 1);
    for (int i = 0; i < 32000; i++) cr_assert(isfinite(l[i]), "logit %d is %g", i, l[i]);
    loom_sampler_destroy(sp);
    loom_session_destroy(s);
    loom_model_destroy(m);
}

Test(models, llama2_tiny_random_runs_deterministically) {
    int32_t a[24], b[24], c[24], d[24], na, nb, nc, nd;
    run_tiny_random(a, &na, 0, 0.0f);
    run_tiny_random(b, &nb, 0, 0.0f);
    cr_assert_eq(na, 24);
    cr_assert_eq(nb, 24);
    cr_assert_arr_eq(a, b, sizeof a);
    run_tiny_random(c, &nc, 42, 0.8f);
    run_tiny_random(d, &nd, 42, 0.8f);
    cr_assert_arr_eq(c, d, sizeof c, "the same seed must give the same tokens");
    for (int i = 0; i < 24; i++) cr_assert(c[i] >= 0 && c[i] < 32000);
}

/* ---------------------------------------------------------------- sampler */

static loom_sampler *sampler(float temp, int32_t top_k, float top_p, uint64_t seed) {
    loom_sampler_options o;
    loom_sampler_options_init(&o);
    o.temperature = temp;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    loom_error err = {0};
    loom_sampler *s = NULL;
    cr_assert_eq(loom_sampler_create(&o, &s, &err), LOOM_OK, "%s", err.msg);
    return s;
}

Test(sampler, greedy_topk1_and_tiny_topp_pick_the_argmax) {
    float l[6] = {0.1f, 2.0f, -1.0f, 3.5f, 3.4f, 0.0f};
    cr_assert_eq(loom_sampler_sample(NULL, l, 6), 3);
    loom_sampler *g = sampler(0.0f, 0, 1.0f, 0), *k1 = sampler(1.0f, 1, 1.0f, 7),
                 *p = sampler(1.0f, 0, 1e-6f, 7);
    for (int i = 0; i < 50; i++) {
        cr_assert_eq(loom_sampler_sample(g, l, 6), 3);
        cr_assert_eq(loom_sampler_sample(k1, l, 6), 3);
        cr_assert_eq(loom_sampler_sample(p, l, 6), 3);
    }
    loom_sampler_destroy(g);
    loom_sampler_destroy(k1);
    loom_sampler_destroy(p);
}

Test(sampler, seeded_draws_repeat_and_follow_softmax) {
    float l[3] = {0.0f, logf(3.0f), -INFINITY};
    loom_sampler *a = sampler(1.0f, 0, 1.0f, 123), *b = sampler(1.0f, 0, 1.0f, 123),
                 *c = sampler(1.0f, 0, 1.0f, 124);
    int count[3] = {0}, same_c = 0;
    for (int i = 0; i < 4000; i++) {
        int x = loom_sampler_sample(a, l, 3);
        cr_assert_eq(loom_sampler_sample(b, l, 3), x);
        same_c += loom_sampler_sample(c, l, 3) == x;
        count[x]++;
    }
    cr_assert_eq(count[2], 0, "a token of probability 0 was drawn");
    cr_assert(fabs(count[1] / 4000.0 - 0.75) < 0.03, "p(token 1) = %g, want 0.75", count[1] / 4000.0);
    cr_assert(same_c < 4000, "another seed gave the very same 4000 draws");
    loom_sampler_destroy(a);
    loom_sampler_destroy(b);
    loom_sampler_destroy(c);
}

Test(sampler, top_k_and_top_p_restrict_the_candidates) {
    float l[4] = {1.0f, 0.9f, 0.8f, 0.7f};
    loom_sampler *k2 = sampler(1.0f, 2, 1.0f, 5), *p = sampler(1.0f, 0, 0.5f, 5);
    int seen_k[4] = {0}, seen_p[4] = {0};
    for (int i = 0; i < 2000; i++) {
        seen_k[loom_sampler_sample(k2, l, 4)]++;
        seen_p[loom_sampler_sample(p, l, 4)]++;
    }
    cr_assert(seen_k[0] && seen_k[1] && !seen_k[2] && !seen_k[3]);
    /* softmax(l) ~ {0.29, 0.26, 0.24, 0.21}: the top two reach 0.5. */
    cr_assert(seen_p[0] && seen_p[1] && !seen_p[2] && !seen_p[3]);
    loom_sampler_destroy(k2);
    loom_sampler_destroy(p);
}

Test(sampler, bad_options_are_refused) {
    loom_sampler_options o;
    loom_sampler_options_init(&o);
    o.top_p = 0.0f;
    loom_error err = {0};
    loom_sampler *s = (loom_sampler *)1;
    cr_assert_eq(loom_sampler_create(&o, &s, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_null(s);
    cr_assert(strstr(err.msg, "top_p"), "%s", err.msg);
}

/* loom_session_get_stats: the CPU session's KV bytes are the graph's caches (f32 and f16 halve),
 * the weights those the graph binds, and no CUDA graph counters. */
Test(models, session_stats_report_the_kv_cache_and_no_graphs_on_cpu) {
    const char *td = loom_test_testdata("golden/tiny_llama_q8_0.gguf");
    char path[1200];
    snprintf(path, sizeof path, "%s/golden/tiny_llama_q8_0.gguf", td);
    uint64_t kv[2] = {0, 0};
    for (int f16 = 0; f16 < 2; f16++) {
        loom_model_options mo;
        loom_model_options_init(&mo);
        mo.n_ctx = 64;
        mo.cache_type = f16 ? LOOM_CACHE_F16 : LOOM_CACHE_F32;
        loom_model *m = NULL;
        loom_session *s = NULL;
        loom_error err = {0};
        cr_assert_eq(loom_model_load(path, &mo, &m, &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_session_create(m, NULL, &s, &err), LOOM_OK, "%s", err.msg);
        int32_t toks[3] = {338, 281, 93};
        cr_assert_eq(loom_session_eval(s, toks, 3, &err), LOOM_OK, "%s", err.msg);
        loom_session_stats st;
        loom_session_get_stats(s, &st);
        loom_exec_stats es;
        loom_session_exec_stats(s, &es);
        cr_assert_eq(st.kv_bytes, es.state_bytes);
        cr_assert_eq(st.weight_bytes, es.weight_bytes);
        cr_assert(st.weight_bytes > 0 && st.activation_bytes > 0);
        cr_assert_eq(st.graph_instantiations + st.graph_updates + st.graph_launches, 0);
        kv[f16] = st.kv_bytes;
        loom_session_destroy(s);
        loom_model_destroy(m);
    }
    cr_assert(kv[0] > 0 && kv[0] == 2 * kv[1], "f32 %llu, f16 %llu", (unsigned long long)kv[0],
              (unsigned long long)kv[1]);
}
