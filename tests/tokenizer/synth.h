/* synth.h: test helpers that write small synthetic vocabularies with loom's GGUF writer and open
 * them again, so the tokenizer can be tested on models that have no file in the test data (the
 * gpt2 pre-tokenizers, special tokens, hostile metadata). Header-only, used by the tests of this
 * package only.
 * Byte-level tokens and merges are spelled with bl_encode (byte_level.h).
 */
#ifndef LOOM_TESTS_TOKENIZER_SYNTH_H
#define LOOM_TESTS_TOKENIZER_SYNTH_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/gguf.h"
#include "loaders/tokenizer.h"
#include "tests/tokenizer/byte_level.h"

/* Writes w to a fresh temporary file, opens it and unlinks it (the mapping stays valid).
 * Destroys w. */
__attribute__((unused)) static loom_gguf *synth_open(loom_gguf_writer *w) {
    static int counter;
    const char *dir = getenv("TEST_TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/synth_%d_%d.gguf", dir ? dir : "/tmp", (int)getpid(), counter++);
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "write: %s", err.msg);
    loom_gguf_writer_destroy(w);
    loom_gguf *g = NULL;
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "open: %s", err.msg);
    unlink(path);
    return g;
}

static loom_gguf_writer *synth_writer(void) {
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK, "%s", err.msg);
    return w;
}

/* A byte-level BPE vocabulary: the 256 byte tokens (id = byte), then each word of words (plain
 * text, byte-level spelled here) with the chain of merges that builds it left to right, then the
 * special tokens (type CONTROL, or USER_DEFINED when their text starts with "<u:"). pre may be
 * NULL (no tokenizer.ggml.pre key). Word i has id 256 + i when the words are distinct. */
typedef struct {
    const char *pre;
    const char *const *words;
    size_t n_words;
    const char *const *specials;
    size_t n_specials;
} synth_bpe;

__attribute__((unused)) static loom_gguf_writer *synth_bpe_writer(const synth_bpe *s) {
    size_t n = 256 + s->n_words + s->n_specials, nm = 0;
    char **toks = calloc(n, sizeof *toks);
    int32_t *types = calloc(n, sizeof *types);
    char **merges = calloc(4096, sizeof *merges);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        toks[b] = malloc(4);
        bl_encode(&c, 1, toks[b]);
        types[b] = LOOM_TOKEN_NORMAL;
    }
    for (size_t i = 0; i < s->n_words; i++) {
        const char *wd = s->words[i];
        size_t len = strlen(wd);
        toks[256 + i] = malloc(2 * len + 1);
        bl_encode(wd, len, toks[256 + i]);
        types[256 + i] = LOOM_TOKEN_NORMAL;
        /* merge chain: prefix(k bytes) + byte k, for k = 1 .. len-1 */
        for (size_t k = 1; k < len && nm < 4096; k++) {
            char left[256], right[8];
            bl_encode(wd, k, left);
            bl_encode(wd + k, 1, right);
            merges[nm] = malloc(strlen(left) + strlen(right) + 2);
            sprintf(merges[nm], "%s %s", left, right);
            nm++;
        }
    }
    for (size_t i = 0; i < s->n_specials; i++) {
        toks[256 + s->n_words + i] = strdup(s->specials[i]);
        types[256 + s->n_words + i] =
            strncmp(s->specials[i], "<u:", 3) == 0 ? LOOM_TOKEN_USER_DEFINED : LOOM_TOKEN_CONTROL;
    }
    loom_gguf_writer *w = synth_writer();
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", &err), LOOM_OK);
    if (s->pre) cr_assert_eq(loom_gguf_writer_set_string(w, "tokenizer.ggml.pre", s->pre, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, n, &err),
                 LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_I32, types, n, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", (const char *const *)merges, nm, &err),
                 LOOM_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++) free(toks[i]);
    for (size_t i = 0; i < nm; i++) free(merges[i]);
    free(toks);
    free(types);
    free(merges);
    return w;
}

/* Builds the tokenizer of w (destroys w); fails the test when creation fails. */
__attribute__((unused)) static loom_tokenizer *synth_tokenizer(loom_gguf_writer *w) {
    loom_gguf *g = synth_open(w);
    loom_tokenizer *t = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_tokenizer_create(g, &t, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_close(g);
    return t;
}

/* Creates the tokenizer of w expecting failure with status want; returns the message. */
__attribute__((unused)) static const char *synth_expect_error(loom_gguf_writer *w, loom_status want) {
    static loom_error err;
    memset(&err, 0, sizeof err);
    loom_gguf *g = synth_open(w);
    loom_tokenizer *t = NULL;
    loom_status st = loom_tokenizer_create(g, &t, &err);
    loom_gguf_close(g);
    cr_assert_eq(st, want, "status %d (want %d): %s", st, want, err.msg);
    cr_assert_null(t);
    return err.msg;
}

#endif /* LOOM_TESTS_TOKENIZER_SYNTH_H */
