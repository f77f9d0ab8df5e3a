/* pretok_test.c: the building blocks under the tokenizer: Unicode property tables, the UTF-8
 * sanitizer, and the pre-tokenizer split of every named pre-tokenizer on hand-written strings
 * (digits, contractions, Unicode letters and numbers, whitespace runs, symbols, CJK). The expected
 * splits (pretok_cases.inc) come from an independent engine, Python's `regex` module running the
 * original patterns (gen_pretok_cases.py); the splits here run through a synthetic "gpt2"
 * vocabulary per pre-tokenizer name written with the GGUF writer.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "loaders/pretok.h"
#include "loaders/unicode.h"
#include "tests/tokenizer/synth.h"

#include "tests/tokenizer/pretok_cases.inc"

/* ---- Unicode properties --------------------------------------------------------------------- */

Test(unicode, categories_come_from_the_unicode_data) {
    struct {
        uint32_t cp;
        uint8_t want;
    } cases[] = {
        {'A', LOOM_UCP_LETTER}, {'z', LOOM_UCP_LETTER}, {0xE9, LOOM_UCP_LETTER},   /* é */
        {0x65E5, LOOM_UCP_LETTER},                                                 /* 日 */
        {0x3B1, LOOM_UCP_LETTER},                                                  /* α */
        {'7', LOOM_UCP_NUMBER}, {0xBD, LOOM_UCP_NUMBER},                            /* ½ (No) */
        {0x663, LOOM_UCP_NUMBER},                                                  /* ٣ (Nd) */
        {0x2162, LOOM_UCP_NUMBER},                                                 /* Ⅲ (Nl) */
        {'!', LOOM_UCP_PUNCT}, {'_', LOOM_UCP_PUNCT}, {0x3002, LOOM_UCP_PUNCT},     /* 。 */
        {'$', LOOM_UCP_SYMBOL}, {'+', LOOM_UCP_SYMBOL}, {'`', LOOM_UCP_SYMBOL},
        {0x1F600, LOOM_UCP_SYMBOL},                                                /* 😀 */
        {0x301, LOOM_UCP_MARK},                                                    /* combining acute */
        {' ', LOOM_UCP_SEPARATOR | LOOM_UCP_WHITESPACE},
        {0xA0, LOOM_UCP_SEPARATOR | LOOM_UCP_WHITESPACE},
        {0x3000, LOOM_UCP_SEPARATOR | LOOM_UCP_WHITESPACE},
        {0x2028, LOOM_UCP_SEPARATOR | LOOM_UCP_WHITESPACE},
        {'\n', LOOM_UCP_OTHER | LOOM_UCP_WHITESPACE}, {0x85, LOOM_UCP_OTHER | LOOM_UCP_WHITESPACE},
        {0x1C, LOOM_UCP_OTHER}, /* a control that is not White_Space */
        {0x200B, LOOM_UCP_OTHER}, /* zero width space: Cf, not White_Space */
        {0xE000, LOOM_UCP_OTHER}, /* private use */
        {0x378, LOOM_UCP_UNDEFINED}, {0x10FFFF, LOOM_UCP_UNDEFINED}, {0x110000, LOOM_UCP_UNDEFINED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(loom_ucp_flags(cases[i].cp), cases[i].want, "U+%04X: flags 0x%02x, want 0x%02x",
                     cases[i].cp, loom_ucp_flags(cases[i].cp), cases[i].want);
    cr_expect_str_neq(loom_unicode_version(), "");
}

Test(unicode, lenient_decoder_matches_llama_cpp) {
    const unsigned char s[] = {'a', 0xC3, 0xA9, 0xE6, 0x97, 0xA5, 0xF0, 0x9F, 0x98, 0x80, 0xFF, 0xC3, 'b', 0xE6};
    uint32_t want[] = {'a', 0xE9, 0x65E5, 0x1F600, 0xFFFD, 0xFFFD, 'b', 0xFFFD};
    size_t i = 0, k = 0;
    while (i < sizeof s) {
        cr_assert_lt(k, sizeof want / sizeof want[0]);
        uint32_t cp = loom_utf8_next(s, sizeof s, &i);
        cr_expect_eq(cp, want[k], "codepoint %zu: U+%04X, want U+%04X", k, cp, want[k]);
        k++;
    }
    cr_expect_eq(k, sizeof want / sizeof want[0]);
}

/* Feeds the chunks through one sanitizer and returns the concatenated output. */
static const char *sanitize(const char *const *chunks, size_t n) {
    static char out[256];
    loom_utf8_sanitizer st;
    loom_utf8_sanitizer_init(&st);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) w += loom_utf8_sanitize(&st, chunks[i], strlen(chunks[i]), out + w);
    w += loom_utf8_sanitize_flush(&st, out + w);
    out[w] = '\0';
    return out;
}

Test(unicode, sanitizer_joins_split_characters_and_replaces_ill_formed_ones) {
    const char *split[] = {"a\xE6\x97", "\xA5" "b", "\xF0", "\x9F\x98", "\x80"};
    cr_expect_str_eq(sanitize(split, 5), "a\xE6\x97\xA5" "b\xF0\x9F\x98\x80");
    const char *overlong[] = {"\xC0\xAF" "x"};
    cr_expect_str_eq(sanitize(overlong, 1), "\xEF\xBF\xBD\xEF\xBF\xBDx");
    const char *surrogate[] = {"\xED\xA0\x80"}; /* ED then a byte outside 80..9F */
    cr_expect_str_eq(sanitize(surrogate, 1), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    const char *broken[] = {"\xE6\x97", "z"}; /* an unfinished character, then ASCII */
    cr_expect_str_eq(sanitize(broken, 2), "\xEF\xBF\xBDz");
    const char *tail[] = {"ok\xF0\x9F\x98"}; /* unfinished at the end: flushed as one U+FFFD */
    cr_expect_str_eq(sanitize(tail, 1), "ok\xEF\xBF\xBD");
    const char *big[] = {"\xF4\x90\x80\x80"}; /* > U+10FFFF */
    cr_expect_str_eq(sanitize(big, 1), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

/* ---- pre-tokenizer splits ------------------------------------------------------------------- */

static loom_tokenizer *bytes_only(const char *pre) {
    synth_bpe s = {pre, NULL, 0, NULL, 0};
    return synth_tokenizer(synth_bpe_writer(&s));
}

Test(pretok, every_named_pretokenizer_splits_like_the_reference_regexes) {
    const char *cur = NULL;
    loom_tokenizer *t = NULL;
    size_t n_checked = 0;
    for (size_t c = 0; c < sizeof pretok_cases / sizeof pretok_cases[0]; c++) {
        const struct pretok_case *pc = &pretok_cases[c];
        if (!cur || strcmp(cur, pc->pre) != 0) {
            loom_tokenizer_destroy(t);
            t = bytes_only(pc->pre);
            cur = pc->pre;
            cr_assert_str_eq(loom_tokenizer_pre_name(t), pc->pre);
        }
        const char *text = pretok_texts[pc->text];
        size_t len = strlen(text), *ends = NULL, n = 0;
        loom_error err = {0};
        cr_assert_eq(loom_tokenizer_pretokenize(t, text, len, &ends, &n, &err), LOOM_OK, "%s", err.msg);
        size_t start = 0, k = 0;
        for (; k < n && pc->words[k]; k++) {
            size_t wl = strlen(pc->words[k]);
            cr_expect(ends[k] - start == wl && memcmp(text + start, pc->words[k], wl) == 0,
                      "%s, text %d, word %zu: got '%.*s', want '%s'", pc->pre, pc->text, k,
                      (int)(ends[k] - start), text + start, pc->words[k]);
            start = ends[k];
        }
        size_t want_n = 0;
        while (pc->words[want_n]) want_n++;
        cr_expect_eq(n, want_n, "%s, text %d: %zu words, want %zu", pc->pre, pc->text, n, want_n);
        free(ends);
        n_checked++;
    }
    loom_tokenizer_destroy(t);
    cr_expect_geq(n_checked, 80);
}

Test(pretok, hand_written_expectations) {
    /* A few splits written out by hand, independent of any engine. */
    struct {
        const char *pre, *text;
        const char *words[12];
    } cases[] = {
        {"gpt-2", "it's 2024!", {"it", "'s", " 2024", "!", NULL}},
        {"gpt-2", "IT'S", {"IT", "'", "S", NULL}},               /* case-sensitive contraction */
        {"llama-bpe", "IT'S", {"IT", "'S", NULL}},               /* case-insensitive */
        {"llama-bpe", "1234567", {"123", "456", "7", NULL}},     /* \p{N}{1,3} */
        {"qwen2", "1234", {"1", "2", "3", "4", NULL}},           /* \p{N} */
        {"starcoder", "a12 b", {"a", "1", "2", " b", NULL}},
        {"gpt-2", "a   b", {"a", "  ", " b", NULL}},             /* \s+(?!\S) leaves one space */
        {"llama-bpe", "a\n\n b", {"a", "\n\n", " b", NULL}},     /* \s*[\r\n]+ */
        {"falcon", "1234567 x", {"123", "456", "7", " x", NULL}}, /* [0-9]{3} after gpt-2 */
        {"deepseek-coder", "ab12", {"ab", "1", "2", NULL}},
        {"gpt-2", "\xC3\xA9t\xC3\xA9 \xCE\xB1\xCE\xB2", {"\xC3\xA9t\xC3\xA9", " \xCE\xB1\xCE\xB2", NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_tokenizer *t = bytes_only(cases[c].pre);
        size_t *ends = NULL, n = 0, start = 0;
        loom_error err = {0};
        cr_assert_eq(loom_tokenizer_pretokenize(t, cases[c].text, strlen(cases[c].text), &ends, &n, &err), LOOM_OK);
        size_t k = 0;
        for (; k < n && cases[c].words[k]; k++) {
            size_t wl = strlen(cases[c].words[k]);
            cr_expect(ends[k] - start == wl && !memcmp(cases[c].text + start, cases[c].words[k], wl),
                      "case %zu (%s) word %zu: got '%.*s' want '%s'", c, cases[c].pre, k,
                      (int)(ends[k] - start), cases[c].text + start, cases[c].words[k]);
            start = ends[k];
        }
        cr_expect(k == n && cases[c].words[k] == NULL, "case %zu (%s): %zu words", c, cases[c].pre, n);
        free(ends);
        loom_tokenizer_destroy(t);
    }
}

Test(pretok, names_map_to_their_split) {
    cr_expect_eq(loom_pretok_find("llama-bpe")->type, LOOM_PRETOK_LLAMA3);
    cr_expect(loom_pretok_find("llama-bpe")->ignore_merges);
    cr_expect_eq(loom_pretok_find("mpt")->type, LOOM_PRETOK_GPT2);
    cr_expect_eq(loom_pretok_find("refact")->type, LOOM_PRETOK_STARCODER);
    cr_expect_null(loom_pretok_find("no-such-pre"));
    cr_expect_not_null(strstr(loom_pretok_names(), "deepseek-coder"));
}

Test(pretok, long_whitespace_and_digit_runs_are_linear) {
    /* 200k spaces followed by a letter, and 200k digits: must finish quickly and partition. */
    size_t n = 200000;
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    size_t *ends = malloc((n + 1) * sizeof *ends), *scratch = malloc((n + 1) * sizeof *scratch);
    for (size_t i = 0; i < n; i++) cps[i] = ' ';
    cps[n] = 'x';
    for (int p = 0; p < LOOM_PRETOK_COUNT; p++) {
        size_t k = loom_pretok_split((loom_pretok)p, cps, n + 1, ends, scratch);
        cr_expect_geq(k, 1);
        cr_expect_eq(ends[k - 1], n + 1, "%s", loom_pretok_type_name((loom_pretok)p));
    }
    for (size_t i = 0; i < n; i++) cps[i] = '0' + i % 10;
    size_t k = loom_pretok_split(LOOM_PRETOK_LLAMA3, cps, n, ends, scratch);
    cr_expect_eq(k, (n + 2) / 3);
    free(cps);
    free(ends);
    free(scratch);
}
