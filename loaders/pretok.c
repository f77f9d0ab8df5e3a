/* pretok.c: the pre-tokenizer splits of pretok.h.
 *
 * A split stage reads fragments (as end offsets into the codepoint array) and writes finer
 * fragments. Two kinds of stage:
 *  - "custom" stages (gpt-2, llama3/qwen2) walk a fragment and cut it into consecutive words,
 *    mirroring llama.cpp's hand-written splitters, including their use of "out of range" past
 *    the fragment's end (lookahead never crosses a fragment boundary);
 *  - "regex" stages find the leftmost match of a simple expression from each position, emit the
 *    unmatched text before it as a fragment of its own, then the match, and continue after it,
 *    which is what std::regex_iterator does in llama.cpp's generic path.
 * Invariant: the output of every stage partitions the same codepoints, in order, into non-empty
 * fragments, so a word count never exceeds the codepoint count.
 */
#include "loaders/pretok.h"

#include <string.h>

#include "loaders/unicode.h"
#include "loom/status.h"

/* ---- names ---------------------------------------------------------------------------------- */

static const loom_pretok_info infos[] = {
    {"default", LOOM_PRETOK_DEFAULT, false, false},
    {"gpt-2", LOOM_PRETOK_GPT2, false, false},
    {"phi-2", LOOM_PRETOK_GPT2, false, false},
    {"jina-es", LOOM_PRETOK_GPT2, false, false},
    {"jina-de", LOOM_PRETOK_GPT2, false, false},
    {"mpt", LOOM_PRETOK_GPT2, false, false},
    {"olmo", LOOM_PRETOK_GPT2, false, false},
    {"llama3", LOOM_PRETOK_LLAMA3, true, true},
    {"llama-v3", LOOM_PRETOK_LLAMA3, true, true},
    {"llama-bpe", LOOM_PRETOK_LLAMA3, true, true},
    {"falcon3", LOOM_PRETOK_LLAMA3, true, true},
    {"pixtral", LOOM_PRETOK_LLAMA3, true, true},
    {"dbrx", LOOM_PRETOK_LLAMA3, false, false},
    {"smaug-bpe", LOOM_PRETOK_LLAMA3, false, false},
    {"qwen2", LOOM_PRETOK_QWEN2, false, false},
    {"deepseek-r1-qwen", LOOM_PRETOK_QWEN2, false, false},
    {"megrez", LOOM_PRETOK_QWEN2, false, false},
    {"stablelm2", LOOM_PRETOK_QWEN2, false, false},
    {"deepseek-llm", LOOM_PRETOK_DEEPSEEK_LLM, false, false},
    {"deepseek-coder", LOOM_PRETOK_DEEPSEEK_CODER, false, false},
    {"falcon", LOOM_PRETOK_FALCON, false, false},
    {"starcoder", LOOM_PRETOK_STARCODER, false, false},
    {"refact", LOOM_PRETOK_STARCODER, false, false},
    {"command-r", LOOM_PRETOK_STARCODER, false, false},
    {"smollm", LOOM_PRETOK_STARCODER, false, false},
    {"codeshell", LOOM_PRETOK_STARCODER, false, false},
    {"exaone", LOOM_PRETOK_STARCODER, false, false},
};

const loom_pretok_info *loom_pretok_find(const char *name) {
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++)
        if (!strcmp(infos[i].name, name)) return &infos[i];
    return NULL;
}

const char *loom_pretok_names(void) {
    return "default, gpt-2, phi-2, jina-es, jina-de, mpt, olmo, llama3, llama-v3, llama-bpe, "
           "falcon3, pixtral, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, megrez, stablelm2, "
           "deepseek-llm, deepseek-coder, falcon, starcoder, refact, command-r, smollm, "
           "codeshell, exaone";
}

const char *loom_pretok_type_name(loom_pretok p) {
    static const char *const names[LOOM_PRETOK_COUNT] = {
        "default", "gpt-2", "llama3", "qwen2", "deepseek-llm", "deepseek-coder", "falcon",
        "starcoder"};
    return (unsigned)p < LOOM_PRETOK_COUNT ? names[p] : "?";
}

/* ---- output of a stage ---------------------------------------------------------------------- */

typedef struct {
    const uint32_t *cp;
    size_t *out;    /* fragment ends written so far */
    size_t n_out;
    size_t prev;    /* end of the last fragment written */
} emitter;

/* Closes a fragment at e (ignored when empty), returns its length. */
static size_t emit(emitter *em, size_t e) {
    size_t len = e - em->prev;
    LOOM_DEBUG_ASSERT(e >= em->prev);
    if (len) em->out[em->n_out++] = e;
    em->prev = e;
    return len;
}

static const uint32_t OUT_OF_RANGE = 0xFFFFFFFFu;

/* Codepoint and flags at pos with llama.cpp's out-of-range convention: past the fragment the
 * codepoint is OUT_OF_RANGE and the flags are 0; inside it "has flags" is always true (an
 * unassigned codepoint counts as present). */
#define CPT(p) ((p) < end ? cp[p] : OUT_OF_RANGE)
#define FL(p) ((p) < end ? loom_ucp_flags(cp[p]) : 0u)
#define IN(p) ((p) < end)

static bool is_ws(unsigned f) { return f & LOOM_UCP_WHITESPACE; }
static bool is_l(unsigned f) { return f & LOOM_UCP_LETTER; }
static bool is_n(unsigned f) { return f & LOOM_UCP_NUMBER; }

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* ---- custom stages -------------------------------------------------------------------------- */

/* 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when fold): the match length at pos, or 0. ASCII
 * folding is exact: no other codepoint lower-cases to these letters (gen_unicode.py checks). */
static size_t contraction(const uint32_t *cp, size_t pos, size_t end, bool fold) {
    if (cp[pos] != '\'' || pos + 1 >= end) return 0;
    uint32_t a = fold ? ascii_lower(cp[pos + 1]) : cp[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end) return 0;
    uint32_t b = fold ? ascii_lower(cp[pos + 2]) : cp[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* The whitespace alternatives both patterns end with, for the nws whitespace characters at pos
 * (pos < end): '\s+(?!\S)' (all but the last, which goes with the next word), '\s+' (the run
 * reaches the end), else the character at pos alone (no alternative matched). Emits the piece
 * and returns the position after it. */
static size_t ws_tail(emitter *em, size_t pos, size_t end, size_t nws) {
    if (nws > 1 && IN(pos + nws)) pos += nws - 1;
    else if (nws > 0) pos += nws;
    else pos++;
    emit(em, pos);
    return pos;
}

static void split_gpt2(emitter *em, size_t start, size_t end) {
    const uint32_t *cp = em->cp;
    size_t pos = start;
    while (pos < end) {
        uint32_t c = cp[pos];
        size_t k = contraction(cp, pos, end, false);
        if (k) {
            pos += emit(em, pos + k);
            continue;
        }
        unsigned f2 = c == ' ' ? FL(pos + 1) : FL(pos);
        bool f2_in = c == ' ' ? IN(pos + 1) : true;
        if (is_l(f2)) { /* ' ?\p{L}+' */
            pos += (c == ' ');
            while (is_l(FL(pos))) pos++;
            emit(em, pos);
            continue;
        }
        if (is_n(f2)) { /* ' ?\p{N}+' */
            pos += (c == ' ');
            while (is_n(FL(pos))) pos++;
            emit(em, pos);
            continue;
        }
        if (!(is_ws(f2) || is_l(f2) || is_n(f2)) && f2_in) { /* ' ?[^\s\p{L}\p{N}]+' */
            pos += (c == ' ');
            while (IN(pos) && !(is_ws(FL(pos)) || is_l(FL(pos)) || is_n(FL(pos)))) pos++;
            emit(em, pos);
            continue;
        }
        size_t nws = 0;
        while (is_ws(FL(pos + nws))) nws++;
        pos = ws_tail(em, pos, end, nws);
    }
}

/* llama3 (max_digits 3) and qwen2 (max_digits 1). */
static void split_llama3(emitter *em, size_t start, size_t end, size_t max_digits) {
    const uint32_t *cp = em->cp;
    size_t pos = start;
    while (pos < end) {
        uint32_t c = cp[pos];
        unsigned f = FL(pos);
        size_t k = contraction(cp, pos, end, true);
        if (k) {
            pos += emit(em, pos + k);
            continue;
        }
        /* '[^\r\n\p{L}\p{N}]?\p{L}+' */
        if (!(c == '\r' || c == '\n' || is_n(f)) && (is_l(f) || is_l(FL(pos + 1)))) {
            pos++;
            while (is_l(FL(pos))) pos++;
            emit(em, pos);
            continue;
        }
        if (is_n(f)) { /* '\p{N}{1,max}', repeatedly */
            size_t ini = pos;
            while (is_n(FL(pos))) {
                if (++pos - ini >= max_digits) {
                    emit(em, pos);
                    ini = pos;
                }
            }
            emit(em, pos);
            continue;
        }
        /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
        unsigned f2 = c == ' ' ? FL(pos + 1) : f;
        bool f2_in = c == ' ' ? IN(pos + 1) : true;
        if (!(is_ws(f2) || is_l(f2) || is_n(f2)) && f2_in) {
            pos += (c == ' ');
            while (IN(pos) && !(is_ws(FL(pos)) || is_l(FL(pos)) || is_n(FL(pos)))) pos++;
            while (CPT(pos) == '\r' || CPT(pos) == '\n') pos++;
            emit(em, pos);
            continue;
        }
        size_t nws = 0, last_crlf_end = 0;
        while (is_ws(FL(pos + nws))) {
            uint32_t c2 = cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_crlf_end = pos + nws + 1;
            nws++;
        }
        if (last_crlf_end > 0) { /* '\s*[\r\n]+' */
            pos = last_crlf_end;
            emit(em, pos);
            continue;
        }
        pos = ws_tail(em, pos, end, nws);
    }
}

/* ---- regex stages --------------------------------------------------------------------------- */

/* A matcher returns the length of the match starting exactly at pos (0: none). */
typedef size_t (*matcher)(const uint32_t *cp, size_t pos, size_t end);

static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    for (size_t i = 0; i < n && r[i][0] <= c; i++)
        if (c <= r[i][1]) return true;
    return false;
}

/* deepseek-llm's letter class, from its tokenizer.json as llama.cpp spells it (sorted). */
static const uint32_t ds_letters[][2] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
/* deepseek-llm's punctuation class [!-/:-~！-／：-～‘-‟　-。] (sorted). */
static const uint32_t ds_punct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F},
    {0xFF1A, 0xFF5E},
};
/* The CJK class [一-龥ࠀ-一가-퟿] shared by both deepseek pre-tokenizers (sorted, merged). */
static const uint32_t cjk[][2] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

#define NR(a) (sizeof(a) / sizeof((a)[0]))

static bool c_ds_letter(uint32_t c) { return in_ranges(c, ds_letters, NR(ds_letters)); }
static bool c_ds_punct(uint32_t c) { return in_ranges(c, ds_punct, NR(ds_punct)); }
static bool c_cjk(uint32_t c) { return in_ranges(c, cjk, NR(cjk)); }
static bool c_letter(uint32_t c) { return is_l(loom_ucp_flags(c)); }
static bool c_number(uint32_t c) { return is_n(loom_ucp_flags(c)); }
static bool c_punct(uint32_t c) { return loom_ucp_flags(c) & LOOM_UCP_PUNCT; }
static bool c_ws(uint32_t c) { return is_ws(loom_ucp_flags(c)); }
static bool c_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }
/* [\p{P}\$\+<=>\^~\|] and, for falcon, the same with a backquote */
static bool c_punct_sym(uint32_t c) {
    return c_punct(c) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|';
}
static bool c_punct_sym_bq(uint32_t c) { return c_punct_sym(c) || c == '`'; }

static size_t run(const uint32_t *cp, size_t pos, size_t end, bool (*cls)(uint32_t)) {
    size_t p = pos;
    while (p < end && cls(cp[p])) p++;
    return p - pos;
}
/* '\s?C+' */
static size_t ws_opt_run(const uint32_t *cp, size_t pos, size_t end, bool (*cls)(uint32_t)) {
    if (c_ws(cp[pos]) && pos + 1 < end && cls(cp[pos + 1])) return 1 + run(cp, pos + 1, end, cls);
    return run(cp, pos, end, cls);
}

static size_t m_crlf(const uint32_t *cp, size_t pos, size_t end) {
    (void)end;
    return cp[pos] == '\r' || cp[pos] == '\n';
}
static size_t m_number1(const uint32_t *cp, size_t pos, size_t end) {
    (void)end;
    return c_number(cp[pos]);
}
static size_t m_numbers(const uint32_t *cp, size_t pos, size_t end) {
    return run(cp, pos, end, c_number);
}
static size_t m_digits3(const uint32_t *cp, size_t pos, size_t end) {
    return pos + 3 <= end && c_ascii_digit(cp[pos]) && c_ascii_digit(cp[pos + 1]) &&
                   c_ascii_digit(cp[pos + 2])
               ? 3
               : 0;
}
static size_t m_punct_sym(const uint32_t *cp, size_t pos, size_t end) {
    return run(cp, pos, end, c_punct_sym);
}
static size_t m_punct_sym_bq(const uint32_t *cp, size_t pos, size_t end) {
    return run(cp, pos, end, c_punct_sym_bq);
}
static size_t m_cjk(const uint32_t *cp, size_t pos, size_t end) { return run(cp, pos, end, c_cjk); }
static size_t m_ds_letters(const uint32_t *cp, size_t pos, size_t end) {
    return ws_opt_run(cp, pos, end, c_ds_letter);
}
static size_t m_ds_punct(const uint32_t *cp, size_t pos, size_t end) {
    return ws_opt_run(cp, pos, end, c_ds_punct);
}
static size_t m_ws_letters(const uint32_t *cp, size_t pos, size_t end) {
    return ws_opt_run(cp, pos, end, c_letter);
}
static size_t m_ws_punct(const uint32_t *cp, size_t pos, size_t end) {
    return ws_opt_run(cp, pos, end, c_punct);
}

static void split_regex(emitter *em, size_t start, size_t end, matcher m) {
    size_t pos = start;
    while (pos < end) {
        size_t k = m(em->cp, pos, end);
        if (k) {
            emit(em, pos);     /* unmatched text before the match, if any */
            emit(em, pos + k); /* the match */
            pos += k;
        } else
            pos++;
    }
    emit(em, end);
}

/* '\s+$': the whitespace run that ends the fragment, if any, is the only match. */
static void split_trailing_ws(emitter *em, size_t start, size_t end) {
    size_t p = end;
    while (p > start && c_ws(em->cp[p - 1])) p--;
    emit(em, p);
    emit(em, end);
}

/* ---- pipelines ------------------------------------------------------------------------------ */

typedef enum { S_GPT2, S_LLAMA3, S_QWEN2, S_TRAILING_WS, S_REGEX } stage_kind;
typedef struct {
    stage_kind kind;
    matcher m;
} stage;

typedef struct {
    size_t n;
    stage s[6];
} pipeline;

static const pipeline pipelines[LOOM_PRETOK_COUNT] = {
    [LOOM_PRETOK_DEFAULT] = {4, {{S_REGEX, m_punct_sym}, {S_GPT2, NULL}, {S_REGEX, m_numbers},
                                 {S_REGEX, m_digits3}}},
    [LOOM_PRETOK_GPT2] = {1, {{S_GPT2, NULL}}},
    [LOOM_PRETOK_LLAMA3] = {1, {{S_LLAMA3, NULL}}},
    [LOOM_PRETOK_QWEN2] = {1, {{S_QWEN2, NULL}}},
    [LOOM_PRETOK_DEEPSEEK_LLM] = {6, {{S_REGEX, m_crlf}, {S_REGEX, m_ds_letters},
                                      {S_REGEX, m_ds_punct}, {S_TRAILING_WS, NULL},
                                      {S_REGEX, m_cjk}, {S_REGEX, m_numbers}}},
    [LOOM_PRETOK_DEEPSEEK_CODER] = {5, {{S_REGEX, m_crlf}, {S_REGEX, m_ws_letters},
                                        {S_REGEX, m_ws_punct}, {S_REGEX, m_cjk},
                                        {S_REGEX, m_number1}}},
    [LOOM_PRETOK_FALCON] = {3, {{S_REGEX, m_punct_sym_bq}, {S_GPT2, NULL}, {S_REGEX, m_digits3}}},
    [LOOM_PRETOK_STARCODER] = {2, {{S_REGEX, m_number1}, {S_GPT2, NULL}}},
};

size_t loom_pretok_split(loom_pretok p, const uint32_t *cps, size_t n, size_t *ends,
                         size_t *scratch) {
    LOOM_ASSERT((unsigned)p < LOOM_PRETOK_COUNT);
    if (n == 0) return 0;
    const pipeline *pl = &pipelines[p];
    size_t *in = scratch, *out = ends;
    size_t n_in = 1;
    in[0] = n;
    for (size_t si = 0; si < pl->n; si++) {
        const stage *st = &pl->s[si];
        emitter em = {cps, out, 0, 0};
        size_t start = 0;
        for (size_t f = 0; f < n_in; f++) {
            size_t end = in[f];
            em.prev = start;
            switch (st->kind) {
            case S_GPT2: split_gpt2(&em, start, end); break;
            case S_LLAMA3: split_llama3(&em, start, end, 3); break;
            case S_QWEN2: split_llama3(&em, start, end, 1); break;
            case S_TRAILING_WS: split_trailing_ws(&em, start, end); break;
            case S_REGEX: split_regex(&em, start, end, st->m); break;
            }
            /* a custom stage ends exactly at the fragment's end; close it defensively */
            emit(&em, end);
            start = end;
        }
        LOOM_DEBUG_ASSERT(em.n_out <= n && em.out[em.n_out - 1] == n);
        n_in = em.n_out;
        size_t *t = in;
        in = out;
        out = t;
    }
    if (in != ends) memcpy(ends, in, n_in * sizeof *ends);
    return n_in;
}
