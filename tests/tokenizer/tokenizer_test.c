/* tokenizer_test.c: the tokenizer end to end.
 *  - Conformance: every vocabulary in $LOOM_TESTDATA/vocab (llama.cpp's test vectors) encodes
 *    every test string to exactly the listed ids, and decodes back to the string.
 *  - stories260K: BOS + "Once upon a time" is 1 403 407 261 378; byte fallback round trips.
 *  - The streaming decoder on characters split across byte tokens, and on broken sequences.
 *  - Synthetic vocabularies (GGUF writer): merges by rank, ignore_merges, special tokens with and
 *    without parse_special, end-of-generation detection, and hostile metadata (missing keys,
 *    wrong types, ids out of range, unknown model / pre-tokenizer) with clear errors.
 * Tests that need the shared test data skip without LOOM_TESTDATA, and fail instead when
 * LOOM_REQUIRE_TESTDATA=1.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loaders/tokenizer.h"
#include "tests/common/testdata.h"
#include "tests/tokenizer/synth.h"

/* ---- shared test data ----------------------------------------------------------------------- */

static loom_tokenizer *open_tokenizer(const char *path) {
    loom_gguf *g = NULL;
    loom_tokenizer *t = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s: %s", path, err.msg);
    cr_assert_eq(loom_tokenizer_create(g, &t, &err), LOOM_OK, "%s: %s", path, err.msg);
    loom_gguf_close(g);
    return t;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Checks one vocab file against its .inp/.out; returns the number of strings checked. */
static size_t check_vocab(const char *gguf_path) {
    char path[2100];
    size_t inp_len, out_len;
    snprintf(path, sizeof path, "%s.inp", gguf_path);
    char *inp = loom_test_read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s.out", gguf_path);
    char *out = loom_test_read_file(path, &out_len);

    double t0 = now_s();
    loom_tokenizer *t = open_tokenizer(gguf_path);
    double load_s = now_s() - t0;
    cr_expect_lt(load_s, 1.0, "%s: loading took %.3f s", gguf_path, load_s);

    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep), checked = 0;
    char *p = inp, *end = inp + inp_len, *line = out;
    for (;;) {
        char *m = memmem(p, (size_t)(end - p), sep, sl);
        if (!m) break;
        char *nl = strchr(line, '\n');
        cr_assert_not_null(nl, "%s: .out has fewer lines than .inp has strings", gguf_path);
        *nl = '\0';
        size_t len = (size_t)(m - p);

        loom_token *ids = NULL;
        size_t n = 0;
        loom_error err = {0};
        cr_assert_eq(loom_tokenizer_encode(t, p, len, false, false, &ids, &n, &err), LOOM_OK, "%s", err.msg);
        /* compare with the expected ids */
        char *q = line;
        size_t k = 0;
        for (;; k++) {
            while (*q == ' ') q++;
            if (!*q) break;
            long want = strtol(q, &q, 10);
            cr_expect(k < n && ids[k] == want, "%s: string %zu ('%.*s'): id %zu is %d, want %ld", gguf_path,
                      checked, (int)len, p, k, k < n ? ids[k] : -1, want);
        }
        cr_expect_eq(n, k, "%s: string %zu ('%.*s'): %zu ids, want %zu", gguf_path, checked, (int)len, p, n, k);

        /* round trip (every test string is well-formed UTF-8) */
        char *text = NULL;
        size_t tl = 0;
        cr_assert_eq(loom_tokenizer_decode(t, ids, n, LOOM_DECODE_STRIP_SPACE, &text, &tl, &err), LOOM_OK);
        cr_expect(tl == len && memcmp(text, p, len) == 0, "%s: string %zu decodes to '%s', want '%.*s'",
                  gguf_path, checked, text, (int)len, p);
        free(text);
        free(ids);
        checked++;
        p = m + sl;
        line = nl + 1;
    }
    loom_tokenizer_destroy(t);
    free(inp);
    free(out);
    return checked;
}

Test(conformance, every_vocab_file_matches_llama_cpp_ids) {
    const char *td = loom_test_testdata(NULL);
    char dirpath[1024];
    snprintf(dirpath, sizeof dirpath, "%s/vocab", td);
    DIR *dir = opendir(dirpath);
    cr_assert_not_null(dir, "%s: cannot open", dirpath);
    size_t files = 0, strings = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 5, ".gguf") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dirpath, de->d_name);
        strings += check_vocab(path);
        files++;
    }
    closedir(dir);
    cr_expect_geq(files, 2, "expected at least the llama-spm and gpt-2 vocabularies");
    cr_expect_geq(strings, 2 * 40);
}

Test(conformance, vocab_metadata) {
    const char *td = loom_test_testdata(NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", td);
    loom_tokenizer *t = open_tokenizer(path);
    cr_expect_eq(loom_tokenizer_kind_of(t), LOOM_TOKENIZER_BPE);
    cr_expect_eq(loom_tokenizer_n_vocab(t), 50257);
    cr_expect_str_eq(loom_tokenizer_pre_name(t), "gpt-2");
    cr_expect(loom_tokenizer_is_eog(t, 50256)); /* <|endoftext|> */
    /* parse_special: <|endoftext|> in the text is the token, or its characters without it */
    loom_token *ids;
    size_t n;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_encode(t, "a<|endoftext|>", 14, false, true, &ids, &n, &err), LOOM_OK);
    cr_expect(n == 2 && ids[1] == 50256, "n=%zu", n);
    free(ids);
    cr_assert_eq(loom_tokenizer_encode(t, "a<|endoftext|>", 14, false, false, &ids, &n, &err), LOOM_OK);
    cr_expect_gt(n, 2);
    for (size_t i = 0; i < n; i++) cr_expect_neq(ids[i], 50256);
    free(ids);
    loom_tokenizer_destroy(t);

    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", td);
    t = open_tokenizer(path);
    cr_expect_eq(loom_tokenizer_kind_of(t), LOOM_TOKENIZER_SPM);
    cr_expect_eq(loom_tokenizer_bos(t), 1);
    cr_expect_eq(loom_tokenizer_eos(t), 2);
    cr_expect(loom_tokenizer_add_bos(t));
    size_t len;
    cr_expect_str_eq(loom_tokenizer_token_text(t, 13, &len), "<0x0A>");
    const char *piece = loom_tokenizer_piece(t, 13, &len);
    cr_expect(len == 1 && piece[0] == '\n');
    cr_assert_eq(loom_tokenizer_encode(t, "<s>x", 4, false, true, &ids, &n, &err), LOOM_OK);
    cr_expect(n >= 2 && ids[0] == 1, "control token <s> matched with parse_special");
    free(ids);
    loom_tokenizer_destroy(t);
}

/* ---- stories260K ---------------------------------------------------------------------------- */

static loom_tokenizer *stories(void) {
    const char *td = loom_test_testdata(NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", td);
    return open_tokenizer(path);
}

Test(stories, once_upon_a_time_with_bos) {
    loom_tokenizer *t = stories();
    loom_token *ids;
    size_t n;
    loom_error err = {0};
    const char *s = "Once upon a time";
    cr_assert_eq(loom_tokenizer_encode(t, s, strlen(s), true, false, &ids, &n, &err), LOOM_OK, "%s", err.msg);
    loom_token want[] = {1, 403, 407, 261, 378};
    cr_assert_eq(n, 5, "%zu ids", n);
    for (size_t i = 0; i < 5; i++) cr_expect_eq(ids[i], want[i], "id %zu: %d want %d", i, ids[i], want[i]);
    char *text;
    size_t tl;
    cr_assert_eq(loom_tokenizer_decode(t, ids, n, LOOM_DECODE_STRIP_SPACE, &text, &tl, &err), LOOM_OK);
    cr_expect_str_eq(text, s);
    free(text);
    cr_assert_eq(loom_tokenizer_decode(t, ids, n, LOOM_DECODE_SPECIAL, &text, &tl, &err), LOOM_OK);
    cr_expect_str_eq(text, "<s> Once upon a time");
    free(text);
    free(ids);
    cr_expect(loom_tokenizer_add_bos(t));
    cr_expect(loom_tokenizer_is_eog(t, loom_tokenizer_eos(t)));
    cr_expect_eq(loom_tokenizer_pad(t), LOOM_TOKEN_NULL); /* the file says 0xFFFFFFFF */
    loom_tokenizer_destroy(t);
}

Test(stories, byte_fallback_round_trips_multibyte_text) {
    loom_tokenizer *t = stories();
    const char *s = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!"; /* café 日本 😀! */
    loom_token *ids;
    size_t n;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_encode(t, s, strlen(s), false, false, &ids, &n, &err), LOOM_OK);
    size_t n_bytes = 0;
    for (size_t i = 0; i < n; i++) n_bytes += loom_tokenizer_token_type(t, ids[i]) == LOOM_TOKEN_BYTE;
    cr_expect_geq(n_bytes, 6, "the CJK characters and the emoji need byte tokens (%zu)", n_bytes);
    char *text;
    size_t tl;
    cr_assert_eq(loom_tokenizer_decode(t, ids, n, LOOM_DECODE_STRIP_SPACE, &text, &tl, &err), LOOM_OK);
    cr_expect_str_eq(text, s);
    free(text);
    free(ids);
    loom_tokenizer_destroy(t);
}

Test(stories, streaming_decoder_emits_only_complete_characters) {
    loom_tokenizer *t = stories();
    loom_token e6 = loom_tokenizer_find(t, "<0xE6>", 6), x97 = loom_tokenizer_find(t, "<0x97>", 6),
               xa5 = loom_tokenizer_find(t, "<0xA5>", 6), f0 = loom_tokenizer_find(t, "<0xF0>", 6);
    cr_assert(e6 >= 0 && x97 >= 0 && xa5 >= 0 && f0 >= 0);
    loom_detok *d;
    loom_error err = {0};
    cr_assert_eq(loom_detok_create(t, 0, &d, &err), LOOM_OK);
    const char *s;
    size_t len;
    /* 日 = E6 97 A5 over three tokens: nothing until the last */
    cr_assert_eq(loom_detok_feed(d, e6, &s, &len, &err), LOOM_OK);
    cr_expect_eq(len, 0);
    cr_assert_eq(loom_detok_feed(d, x97, &s, &len, &err), LOOM_OK);
    cr_expect_eq(len, 0);
    cr_assert_eq(loom_detok_feed(d, xa5, &s, &len, &err), LOOM_OK);
    cr_expect(len == 3 && !memcmp(s, "\xE6\x97\xA5", 3));
    /* a broken sequence: E6 then a normal token -> U+FFFD, then the token's text */
    loom_token once = 403; /* "▁Once" */
    cr_assert_eq(loom_detok_feed(d, e6, &s, &len, &err), LOOM_OK);
    cr_expect_eq(len, 0);
    cr_assert_eq(loom_detok_feed(d, once, &s, &len, &err), LOOM_OK);
    cr_expect(len == 8 && !memcmp(s, "\xEF\xBF\xBD Once", 8), "got '%.*s'", (int)len, s);
    /* unfinished at the end: flush gives U+FFFD and resets */
    cr_assert_eq(loom_detok_feed(d, f0, &s, &len, &err), LOOM_OK);
    cr_expect_eq(len, 0);
    loom_detok_flush(d, &s, &len);
    cr_expect(len == 3 && !memcmp(s, "\xEF\xBF\xBD", 3));
    loom_detok_flush(d, &s, &len);
    cr_expect_eq(len, 0);
    /* ids outside the vocabulary are refused */
    cr_expect_eq(loom_detok_feed(d, 512, &s, &len, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_detok_feed(d, -3, &s, &len, &err), LOOM_ERR_INVALID_ARGUMENT);
    /* control tokens print nothing unless asked */
    cr_assert_eq(loom_detok_feed(d, 1, &s, &len, &err), LOOM_OK);
    cr_expect_eq(len, 0);
    loom_detok_destroy(d);
    cr_assert_eq(loom_detok_create(t, LOOM_DECODE_SPECIAL | LOOM_DECODE_STRIP_SPACE, &d, &err), LOOM_OK);
    cr_assert_eq(loom_detok_feed(d, 1, &s, &len, &err), LOOM_OK);
    cr_expect_str_eq(s, "<s>");
    cr_assert_eq(loom_detok_feed(d, once, &s, &len, &err), LOOM_OK);
    cr_expect_str_eq(s, " Once", "strip applies to the first non-empty piece only");
    loom_detok_destroy(d);
    loom_detok_destroy(NULL);
    loom_tokenizer_destroy(t);
}

Test(stories, decode_never_returns_ill_formed_utf8) {
    loom_tokenizer *t = stories();
    loom_token ids[3] = {loom_tokenizer_find(t, "<0xFF>", 6), loom_tokenizer_find(t, "<0xC3>", 6), 403};
    char *text;
    size_t len;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_decode(t, ids, 3, 0, &text, &len, &err), LOOM_OK);
    cr_expect_str_eq(text, "\xEF\xBF\xBD\xEF\xBF\xBD Once");
    free(text);
    loom_token bad = 100000;
    cr_expect_eq(loom_tokenizer_decode(t, &bad, 1, 0, &text, &len, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_null(text);
    loom_tokenizer_destroy(t);
}

/* ---- synthetic byte-level BPE vocabularies -------------------------------------------------- */

static loom_token *enc(loom_tokenizer *t, const char *s, bool parse_special, size_t *n) {
    loom_token *ids;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_encode(t, s, strlen(s), false, parse_special, &ids, n, &err), LOOM_OK, "%s", err.msg);
    return ids;
}

Test(synthetic, merges_build_words_inside_pretokenizer_splits) {
    const char *words[] = {"Hello", " world", "'s", " 123"};
    synth_bpe s = {"gpt-2", words, 4, NULL, 0};
    loom_tokenizer *t = synth_tokenizer(synth_bpe_writer(&s));
    size_t n;
    loom_token *ids = enc(t, "Hello world's 123", false, &n);
    cr_assert_eq(n, 4, "%zu ids", n);
    for (int i = 0; i < 4; i++) cr_expect_eq(ids[i], 256 + i);
    free(ids);
    /* the same text without the word boundary the split gives: "Helloworld" is two words? no:
     * one word, and the merges for "Hello" still apply inside it */
    ids = enc(t, "Helloworld", false, &n);
    cr_expect(n == 6 && ids[0] == 256, "n=%zu", n);
    free(ids);
    /* a byte with no merge stays a byte token; decode returns the text */
    ids = enc(t, "Hello\xC3\xA9\t", false, &n);
    char *text;
    size_t len;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_decode(t, ids, n, 0, &text, &len, &err), LOOM_OK);
    cr_expect_str_eq(text, "Hello\xC3\xA9\t");
    free(text);
    free(ids);
    loom_tokenizer_destroy(t);
}

Test(synthetic, llama3_takes_whole_words_that_are_tokens) {
    /* "abc" is a token but the only merge is "a b": gpt-2 gives "ab" "c", llama3 (ignore_merges)
     * takes the token "abc" at once. */
    const char *words[] = {"ab"};
    for (int k = 0; k < 2; k++) {
        synth_bpe s = {k ? "llama-bpe" : "gpt-2", words, 1, (const char *const[]){"abc"}, 1};
        loom_gguf_writer *w = synth_bpe_writer(&s);
        /* make "abc" a normal token */
        int32_t types[258];
        for (int i = 0; i < 258; i++) types[i] = LOOM_TOKEN_NORMAL;
        loom_error err = {0};
        cr_assert_eq(loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_I32, types, 258, &err), LOOM_OK);
        loom_tokenizer *t = synth_tokenizer(w);
        size_t n;
        loom_token *ids = enc(t, "abc", false, &n);
        if (k) {
            cr_expect(n == 1 && ids[0] == 257, "llama3: n=%zu", n);
            cr_expect(loom_tokenizer_add_bos(t), "llama3 adds BOS by default");
        } else {
            cr_expect(n == 2 && ids[0] == 256 && ids[1] == 'c', "gpt-2: n=%zu", n);
            cr_expect(!loom_tokenizer_add_bos(t));
        }
        free(ids);
        loom_tokenizer_destroy(t);
    }
}

Test(synthetic, special_tokens_are_matched_whole) {
    const char *specials[] = {"<|im_end|>", "<|im_start|>", "<u:tool>"};
    synth_bpe s = {"qwen2", NULL, 0, specials, 3};
    loom_tokenizer *t = synth_tokenizer(synth_bpe_writer(&s));
    loom_token im_end = 256, im_start = 257, tool = 258;
    size_t n;
    loom_token *ids = enc(t, "<|im_start|>a<|im_end|><u:tool>b", true, &n);
    loom_token want[] = {im_start, 'a', im_end, tool, 'b'};
    cr_assert_eq(n, 5, "n=%zu", n);
    for (int i = 0; i < 5; i++) cr_expect_eq(ids[i], want[i]);
    free(ids);
    /* without parse_special: control tokens are plain text, user-defined ones still match */
    ids = enc(t, "<|im_end|><u:tool>", false, &n);
    cr_expect_eq(n, 11, "n=%zu", n);
    cr_expect_eq(ids[0], '<');
    cr_expect_eq(ids[n - 1], tool);
    free(ids);
    cr_expect(loom_tokenizer_is_eog(t, im_end));
    cr_expect(!loom_tokenizer_is_eog(t, im_start));
    cr_expect_eq(loom_tokenizer_eot(t), im_end);
    /* decode: control text only with LOOM_DECODE_SPECIAL; user-defined always */
    loom_token seq[] = {im_start, 'h', 'i', im_end, tool};
    char *text;
    size_t len;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_decode(t, seq, 5, 0, &text, &len, &err), LOOM_OK);
    cr_expect_str_eq(text, "hi<u:tool>");
    free(text);
    cr_assert_eq(loom_tokenizer_decode(t, seq, 5, LOOM_DECODE_SPECIAL, &text, &len, &err), LOOM_OK);
    cr_expect_str_eq(text, "<|im_start|>hi<|im_end|><u:tool>");
    free(text);
    loom_tokenizer_destroy(t);
}

Test(synthetic, missing_pre_means_default_and_bos_request_needs_a_bos) {
    synth_bpe s = {NULL, NULL, 0, NULL, 0};
    loom_tokenizer *t = synth_tokenizer(synth_bpe_writer(&s));
    cr_expect_str_eq(loom_tokenizer_pre_name(t), "");
    cr_expect_eq(loom_tokenizer_bos(t), 11, "gpt2 default BOS id");
    size_t n;
    loom_token *ids;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_encode(t, "", 0, true, false, &ids, &n, &err), LOOM_OK);
    cr_expect(n == 1 && ids[0] == 11);
    free(ids);
    cr_assert_eq(loom_tokenizer_encode(t, "", 0, false, false, &ids, &n, &err), LOOM_OK);
    cr_expect_eq(n, 0);
    free(ids);
    loom_tokenizer_destroy(t);
}

/* ---- hostile metadata ----------------------------------------------------------------------- */

static loom_gguf_writer *base_bpe(void) {
    synth_bpe s = {"gpt-2", NULL, 0, NULL, 0};
    return synth_bpe_writer(&s);
}

Test(hostile, missing_model_key) {
    loom_gguf_writer *w = synth_writer();
    const char *toks[] = {"a", "b"};
    loom_error err = {0};
    loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", toks, 2, &err);
    const char *msg = synth_expect_error(w, LOOM_ERR_NOT_FOUND);
    cr_expect_not_null(strstr(msg, "tokenizer.ggml.model"), "%s", msg);
}

Test(hostile, unknown_model_is_named_with_the_supported_ones) {
    loom_gguf_writer *w = base_bpe();
    loom_error err = {0};
    loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "bert", &err);
    const char *msg = synth_expect_error(w, LOOM_ERR_UNSUPPORTED);
    cr_expect(strstr(msg, "'bert'") && strstr(msg, "llama") && strstr(msg, "gpt2"), "%s", msg);
}

Test(hostile, unknown_pretokenizer_is_named_with_the_supported_ones) {
    loom_gguf_writer *w = base_bpe();
    loom_error err = {0};
    loom_gguf_writer_set_string(w, "tokenizer.ggml.pre", "klingon", &err);
    const char *msg = synth_expect_error(w, LOOM_ERR_UNSUPPORTED);
    cr_expect(strstr(msg, "'klingon'") && strstr(msg, "qwen2") && strstr(msg, "llama-bpe"), "%s", msg);
}

Test(hostile, wrong_types) {
    loom_error err = {0};
    loom_gguf_writer *w = base_bpe();
    loom_gguf_writer_set_u32(w, "tokenizer.ggml.model", 7, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "tokenizer.ggml.model"));

    w = base_bpe();
    uint32_t nums[3] = {1, 2, 3};
    loom_gguf_writer_set_array(w, "tokenizer.ggml.tokens", LOOM_GGUF_U32, nums, 3, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "tokenizer.ggml.tokens"));

    w = base_bpe();
    loom_gguf_writer_set_string(w, "tokenizer.ggml.tokens", "abc", &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "tokenizer.ggml.tokens"));

    w = base_bpe();
    float f[256] = {0};
    loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_F32, f, 256, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "token_type"));

    w = base_bpe();
    loom_gguf_writer_set_string(w, "tokenizer.ggml.bos_token_id", "one", &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "bos_token_id"));

    w = base_bpe();
    loom_gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 1, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "add_bos_token"));

    w = base_bpe();
    loom_gguf_writer_set_array(w, "tokenizer.ggml.merges", LOOM_GGUF_U32, nums, 3, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_TYPE), "merges"));
}

Test(hostile, inconsistent_data) {
    loom_error err = {0};
    loom_gguf_writer *w = base_bpe();
    float scores[10] = {0};
    loom_gguf_writer_set_array(w, "tokenizer.ggml.scores", LOOM_GGUF_F32, scores, 10, &err);
    const char *msg = synth_expect_error(w, LOOM_ERR_FORMAT);
    cr_expect(strstr(msg, "scores") && strstr(msg, "256"), "%s", msg);

    w = base_bpe();
    loom_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1000, &err);
    msg = synth_expect_error(w, LOOM_ERR_FORMAT);
    cr_expect(strstr(msg, "eos_token_id") && strstr(msg, "1000"), "%s", msg);

    w = base_bpe();
    const char *bad_merge[] = {"abc"};
    loom_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", bad_merge, 1, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_FORMAT), "merges[0]"));

    w = base_bpe();
    loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", NULL, 0, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_FORMAT), "empty"));

    w = base_bpe(); /* asks for BOS but has none */
    loom_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0xFFFFFFFFu, &err);
    loom_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_FORMAT), "BOS"));

    w = synth_writer(); /* no tokens at all */
    loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "llama", &err);
    cr_expect_not_null(strstr(synth_expect_error(w, LOOM_ERR_NOT_FOUND), "tokenizer.ggml.tokens"));
}

Test(hostile, unused_ids_out_of_range_are_tolerated) {
    loom_error err = {0};
    loom_gguf_writer *w = base_bpe();
    loom_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 99999, &err);
    loom_tokenizer *t = synth_tokenizer(w);
    cr_expect_eq(loom_tokenizer_pad(t), LOOM_TOKEN_NULL);
    loom_tokenizer_destroy(t);
}

Test(hostile, spm_without_byte_tokens_falls_back_to_unk_or_errors) {
    loom_error err = {0};
    for (int with_unk = 0; with_unk < 2; with_unk++) {
        loom_gguf_writer *w = synth_writer();
        const char *toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a"};
        int32_t types[] = {2, 3, 3, 1, 1};
        loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "llama", &err);
        loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", toks, 5, &err);
        loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_I32, types, 5, &err);
        if (!with_unk) loom_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu, &err);
        loom_tokenizer *t = synth_tokenizer(w);
        loom_token *ids;
        size_t n;
        loom_status st = loom_tokenizer_encode(t, "a z", 3, false, false, &ids, &n, &err);
        if (with_unk) {
            cr_assert_eq(st, LOOM_OK, "%s", err.msg);
            loom_token want[] = {3, 4, 3, 0};
            cr_assert_eq(n, 4);
            for (int i = 0; i < 4; i++) cr_expect_eq(ids[i], want[i]);
            free(ids);
        } else {
            cr_expect_eq(st, LOOM_ERR_UNSUPPORTED);
            cr_expect_not_null(strstr(err.msg, "0x7A"), "%s", err.msg);
        }
        loom_tokenizer_destroy(t);
    }
    loom_tokenizer_destroy(NULL);
}

/* ---- size ----------------------------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define LOAD_LIMIT_S 5.0 /* sanitizers slow everything down several times */
#else
#define LOAD_LIMIT_S 1.0
#endif

Test(size, a_150k_vocabulary_with_150k_merges_loads_fast_and_round_trips, .timeout = 120) {
    /* Grows a vocabulary the way BPE training does: each new token is an existing token plus one
     * letter, with the merge that makes it (deterministic LCG, no duplicates among recent ones). */
    enum { NV = 150000 };
    char **raw = calloc(NV, sizeof *raw), **tok = calloc(NV, sizeof *tok), **mer = calloc(NV, sizeof *mer);
    uint8_t *rl = calloc(NV, 1);
    uint32_t seed = 12345;
#define RND() (seed = seed * 1664525u + 1013904223u, seed >> 8)
    const char *alpha = " abcdefghijklmnopqrstuvwxyz";
    for (int b = 0; b < 256; b++) {
        raw[b] = malloc(1);
        raw[b][0] = (char)b;
        rl[b] = 1;
    }
    int n = 256, nm = 0;
    while (n < NV) {
        int l = n > 300 && RND() % 4 ? 256 + (int)(RND() % (uint32_t)(n - 256)) : (unsigned char)alpha[RND() % 27];
        char r = alpha[1 + RND() % 26];
        if (rl[l] >= 12) continue;
        char buf[16];
        memcpy(buf, raw[l], rl[l]);
        buf[rl[l]] = r;
        int len = rl[l] + 1, dup = 0;
        for (int k = n - 1; k >= 256 && k >= n - 64 && !dup; k--) dup = rl[k] == len && !memcmp(raw[k], buf, (size_t)len);
        if (dup) continue;
        raw[n] = malloc((size_t)len);
        memcpy(raw[n], buf, (size_t)len);
        rl[n] = (uint8_t)len;
        char L[40], R[4];
        bl_encode(raw[l], rl[l], L);
        bl_encode(&r, 1, R);
        mer[nm] = malloc(strlen(L) + strlen(R) + 2);
        sprintf(mer[nm++], "%s %s", L, R);
        n++;
    }
    for (int i = 0; i < n; i++) {
        tok[i] = malloc(2 * (size_t)rl[i] + 1);
        bl_encode(raw[i], rl[i], tok[i]);
    }
    loom_gguf_writer *w = synth_writer();
    loom_error err = {0};
    loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", &err);
    loom_gguf_writer_set_string(w, "tokenizer.ggml.pre", "qwen2", &err);
    cr_assert_eq(loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)n, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", (const char *const *)mer, (uint64_t)nm, &err), LOOM_OK);
    for (int i = 0; i < n; i++) free(raw[i]), free(tok[i]);
    for (int i = 0; i < nm; i++) free(mer[i]);
    free(raw), free(tok), free(mer), free(rl);

    loom_gguf *g = synth_open(w);
    double t0 = now_s();
    loom_tokenizer *t = NULL;
    cr_assert_eq(loom_tokenizer_create(g, &t, &err), LOOM_OK, "%s", err.msg);
    double load_s = now_s() - t0;
    loom_gguf_close(g);
    cr_expect_eq(loom_tokenizer_n_vocab(t), NV);
    cr_expect_lt(load_s, LOAD_LIMIT_S, "150k-token vocabulary took %.3f s to load", load_s);

    size_t len = 64 * 1024;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = alpha[RND() % 27];
    loom_token *ids;
    size_t k;
    cr_assert_eq(loom_tokenizer_encode(t, text, len, false, false, &ids, &k, &err), LOOM_OK);
    cr_expect_lt(k, len / 2, "merges apply: %zu tokens for %zu bytes", k, len);
    char *back;
    size_t bl;
    cr_assert_eq(loom_tokenizer_decode(t, ids, k, 0, &back, &bl, &err), LOOM_OK);
    cr_expect(bl == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
    free(text);
    loom_tokenizer_destroy(t);
#undef RND
}
