/* tokenizer_fuzz.c: libFuzzer harness for loaders/tokenizer (build: tools/fuzz/build_tokenizer.sh).
 *
 * The first input byte picks a mode:
 *  - < 32: the rest is a GGUF file: open it, build its tokenizer (hostile metadata must give an
 *    error, never a crash), and if that works encode and decode a fixed text;
 *  - otherwise: the rest is text for one of the prepared tokenizers (a synthetic byte-level BPE
 *    vocabulary per pre-tokenizer, with merges and special tokens, and stories260K's SentencePiece
 *    vocabulary when LOOM_TESTDATA is set). Properties checked:
 *      decode() output is always well-formed UTF-8;
 *      feeding the ids one by one to loom_detok gives exactly decode()'s text;
 *      BPE: decode(encode(s), SPECIAL) == s for well-formed s;
 *      SPM: decode(encode(s), STRIP_SPACE) == s for well-formed s without U+2581, without
 *           parse_special.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/gguf.h"
#include "loaders/tokenizer.h"
#include "loaders/unicode.h"
#include "tests/tokenizer/byte_level.h"

static loom_tokenizer *toks[16];
static int n_toks, n_bpe;

static loom_tokenizer *synthetic(const char *pre) {
    static const char *const words[] = {"Hello", " world", "'s", " the", "ing", " 123", "123", "\xC3\xA9t\xC3\xA9",
                                        "  ", "\n\n", " \xE6\x97\xA5\xE6\x9C\xAC"};
    static const char *const specials[] = {"<|im_end|>", "<|endoftext|>", "<s>"};
    const size_t nw = sizeof words / sizeof words[0], ns = sizeof specials / sizeof specials[0];
    (void)nw;
    size_t n = 256, nm = 0;
    char *tk[400], *mg[300];
    int32_t types[400];
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        tk[b] = malloc(4);
        bl_encode(&c, 1, tk[b]);
        types[b] = 1;
    }
    /* each word with the chain of merges that builds it; every merge result is a token, as in
     * real BPE vocabularies */
    for (size_t i = 0; i < nw; i++) {
        size_t len = strlen(words[i]);
        for (size_t k = 1; k < len; k++) {
            char l[64], r[8], lr[72];
            bl_encode(words[i], k, l);
            bl_encode(words[i] + k, 1, r);
            snprintf(lr, sizeof lr, "%s%s", l, r);
            bool seen = false;
            for (size_t j = 256; j < n && !seen; j++) seen = !strcmp(tk[j], lr);
            if (seen) continue;
            tk[n] = strdup(lr);
            types[n++] = 1;
            mg[nm] = malloc(strlen(l) + strlen(r) + 2);
            sprintf(mg[nm++], "%s %s", l, r);
        }
    }
    for (size_t i = 0; i < ns; i++) {
        tk[n] = strdup(specials[i]);
        types[n++] = i == 2 ? 4 : 3;
    }
    loom_gguf_writer *w;
    loom_error err = {0};
    loom_gguf_writer_create(&w, &err);
    loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", &err);
    loom_gguf_writer_set_string(w, "tokenizer.ggml.pre", pre, &err);
    loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", (const char *const *)tk, n, &err);
    loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_I32, types, n, &err);
    loom_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", (const char *const *)mg, nm, &err);
    char path[256];
    snprintf(path, sizeof path, "/tmp/tokenizer_fuzz_%d.gguf", (int)getpid());
    if (loom_gguf_writer_write(w, path, &err)) abort();
    loom_gguf_writer_destroy(w);
    loom_gguf *g;
    loom_tokenizer *t;
    if (loom_gguf_open(path, &g, &err) || loom_tokenizer_create(g, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    unlink(path);
    loom_gguf_close(g);
    for (size_t i = 0; i < n; i++) free(tk[i]);
    for (size_t i = 0; i < nm; i++) free(mg[i]);
    return t;
}

static void init(void) {
    if (n_toks) return;
    const char *pres[] = {"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                          "falcon", "starcoder"};
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) toks[n_toks++] = synthetic(pres[i]);
    n_bpe = n_toks;
    const char *td = getenv("LOOM_TESTDATA");
    if (td) {
        char path[1024];
        loom_gguf *g;
        loom_tokenizer *t;
        loom_error err = {0};
        snprintf(path, sizeof path, "%s/models/stories260K.gguf", td);
        if (!loom_gguf_open(path, &g, &err)) {
            if (!loom_tokenizer_create(g, &t, &err)) toks[n_toks++] = t;
            loom_gguf_close(g);
        }
    }
}

static int well_formed(const char *s, size_t n) {
    char *tmp = malloc(LOOM_UTF8_SANITIZE_BOUND(n));
    loom_utf8_sanitizer st;
    loom_utf8_sanitizer_init(&st);
    size_t w = loom_utf8_sanitize(&st, s, n, tmp);
    w += loom_utf8_sanitize_flush(&st, tmp + w);
    int ok = w == n && memcmp(tmp, s, n) == 0;
    free(tmp);
    return ok;
}

static void check_text(loom_tokenizer *t, bool bpe, const char *s, size_t n, bool parse_special) {
    loom_token *ids;
    size_t k;
    loom_error err = {0};
    if (loom_tokenizer_encode(t, s, n, false, parse_special, &ids, &k, &err)) return;
    unsigned flags = bpe ? LOOM_DECODE_SPECIAL : LOOM_DECODE_STRIP_SPACE;
    char *out;
    size_t ol;
    if (loom_tokenizer_decode(t, ids, k, flags, &out, &ol, &err)) abort();
    if (!well_formed(out, ol)) abort();
    /* streaming == one-shot */
    loom_detok *d;
    if (loom_detok_create(t, flags, &d, &err)) abort();
    size_t pos = 0;
    for (size_t i = 0; i < k; i++) {
        const char *p;
        size_t pl;
        if (loom_detok_feed(d, ids[i], &p, &pl, &err)) abort();
        if (pos + pl > ol || memcmp(out + pos, p, pl) != 0) abort();
        pos += pl;
    }
    const char *p;
    size_t pl;
    loom_detok_flush(d, &p, &pl);
    if (pos + pl != ol || memcmp(out + pos, p, pl) != 0) abort();
    loom_detok_destroy(d);
    if (well_formed(s, n)) {
        bool check = bpe || (!parse_special && !memmem(s, n, "\xE2\x96\x81", 3));
        if (check && (ol != n || memcmp(out, s, n) != 0)) abort();
    }
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    if (size < 1) return 0;
    uint8_t mode = data[0];
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    if (mode < 32) {
        loom_gguf *g;
        loom_tokenizer *t;
        loom_error err = {0};
        if (loom_gguf_open_memory(s, n, &g, &err)) return 0;
        if (!loom_tokenizer_create(g, &t, &err)) {
            check_text(t, false, "Hello <s> world 123 \xE6\x97\xA5", 20, true);
            loom_tokenizer_destroy(t);
        }
        loom_gguf_close(g);
        return 0;
    }
    int which = mode % n_toks;
    check_text(toks[which], which < n_bpe, s, n, (mode / n_toks) & 1);
    return 0;
}
