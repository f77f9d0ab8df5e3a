/* tokenizer.c: building a loom_tokenizer from GGUF metadata, the vocabulary accessors, decoding
 * and the streaming decoder (encoding lives in tokenizer_encode.c).
 *
 * Loading reads only tokenizer.ggml.* keys and validates each before use: types, array lengths
 * against the vocabulary size, special ids against [0, n_vocab). Defaults follow llama.cpp
 * (llama: BOS 1, EOS 2, UNK 0, add_bos, space prefix; gpt2: BOS = EOS = 11 when in range, no BOS
 * unless the pre-tokenizer or add_bos_token asks). A default id outside the vocabulary is
 * dropped; an explicit one is an error. Tokens whose text marks an end of turn (<|im_end|>, ...)
 * are made control tokens that end generation, as llama.cpp does.
 *
 * Every token's decoded bytes (its "piece") are computed once here: SPM pieces turn U+2581 into a
 * space and <0xXX> into the byte, byte-level BPE pieces map each codepoint back through GPT-2's
 * byte table, control/unknown/user-defined tokens keep their text. Decoding then only concatenates
 * pieces through the UTF-8 sanitizer (unicode.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/tokenizer_impl.h"
#include "loaders/unicode.h"
#include "loom/hash.h"

/* ---- hashing and the index tables ----------------------------------------------------------- */

uint64_t loom_tok_hash(const char *s, size_t n) {
    uint64_t h = loom_fnv1a64(LOOM_FNV1A64_BASIS, s, n);
    return h ^ (h >> 29);
}

uint64_t loom_tok_hash_pair(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = loom_tok_hash(a, na);
    return (h * 0x9e3779b97f4a7c15ull) ^ loom_tok_hash(b, nb) ^ (uint64_t)na;
}

static loom_status table_init(index_table *tb, size_t count, loom_error *err) {
    size_t cap = 16;
    while (cap < 2 * count) cap <<= 1;
    tb->slots = calloc(cap, sizeof *tb->slots);
    tb->mask = cap - 1;
    if (!tb->slots)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu-slot table)",
                              cap);
    return LOOM_OK;
}

static void table_free(index_table *tb) {
    free(tb->slots);
}

/* Stores value + 1 under hash h (the caller checked the key is not there). */
static void table_put(index_table *tb, uint64_t h, uint32_t value) {
    size_t k = h & tb->mask;
    while (tb->slots[k].value) k = (k + 1) & tb->mask;
    tb->slots[k].value = value + 1;
    tb->slots[k].hash = (uint32_t)(h >> 32);
}

loom_token loom_tok_lookup(const loom_tokenizer *t, const char *text, size_t len) {
    uint64_t h = loom_tok_hash(text, len);
    const index_table *tb = &t->tok_index;
    for (size_t i = h & tb->mask;; i = (i + 1) & tb->mask) {
        uint32_t v = tb->slots[i].value;
        if (v == 0) return LOOM_TOKEN_NULL;
        if (tb->slots[i].hash == (uint32_t)(h >> 32)) {
            const tok_entry *e = &t->tok[v - 1];
            if (e->text_len == len && memcmp(t->text + e->text_off, text, len) == 0)
                return (loom_token)(v - 1);
        }
    }
}

int32_t loom_tok_merge_rank(const loom_tokenizer *t, const char *a, size_t na, const char *b,
                            size_t nb) {
    if (t->n_merges == 0) return -1;
    uint64_t h = loom_tok_hash_pair(a, na, b, nb);
    const index_table *tb = &t->merge_index;
    for (size_t i = h & tb->mask;; i = (i + 1) & tb->mask) {
        uint32_t v = tb->slots[i].value;
        if (v == 0) return -1;
        if (tb->slots[i].hash == (uint32_t)(h >> 32)) {
            const merge_entry *m = &t->merges[v - 1];
            const char *s = t->merge_text + m->off;
            if (m->left_len == na && m->right_len == nb && memcmp(s, a, na) == 0 &&
                memcmp(s + na, b, nb) == 0)
                return (int32_t)(v - 1);
        }
    }
}

/* ---- metadata helpers ----------------------------------------------------------------------- */

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

/* The array under key, or NULL when absent; LOOM_ERR_TYPE unless it is an array whose elements
 * pass ok_elem; LOOM_ERR_FORMAT when shorter than min_n. */
static loom_status get_array(const loom_gguf *g, const char *key, bool (*ok_elem)(loom_gguf_type),
                             const char *want, uint64_t min_n, const loom_gguf_value **out,
                             loom_error *err) {
    *out = NULL;
    const loom_gguf_value *v = loom_gguf_find(g, key);
    if (!v) return LOOM_OK;
    if (v->type != LOOM_GGUF_ARRAY)
        return loom_error_set(err, LOOM_ERR_TYPE, "tokenizer: key '%s' holds a %s, expected an array of %s",
                              key, loom_gguf_type_name(v->type), want);
    if (!ok_elem(v->arr.elem_type))
        return loom_error_set(err, LOOM_ERR_TYPE,
                              "tokenizer: key '%s' is an array of %s, expected an array of %s", key,
                              loom_gguf_type_name(v->arr.elem_type), want);
    if (v->arr.n < min_n)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "tokenizer: key '%s' has %llu entries, fewer than the %llu tokens", key,
                              (unsigned long long)v->arr.n, (unsigned long long)min_n);
    *out = v;
    return LOOM_OK;
}

static bool elem_string(loom_gguf_type ty) { return ty == LOOM_GGUF_STRING; }
static bool elem_score(loom_gguf_type ty) {
    return ty == LOOM_GGUF_F32 || ty == LOOM_GGUF_F64 || ty == LOOM_GGUF_I32;
}

/* A special id. A default outside the vocabulary becomes LOOM_TOKEN_NULL. An explicit value must
 * be an integer; -1 (or 0xFFFFFFFF, as converters write it) means "none"; any other value outside
 * the vocabulary is an error, except for ids loom never uses (lenient: padding), which are
 * dropped. */
static loom_status get_special(const loom_gguf *g, const char *key, uint32_t n_vocab, bool lenient,
                               loom_token *id, loom_error *err) {
    if (*id != LOOM_TOKEN_NULL && (uint32_t)*id >= n_vocab) *id = LOOM_TOKEN_NULL;
    const loom_gguf_value *v = loom_gguf_find(g, key);
    if (!v) return LOOM_OK;
    if (!loom_gguf_type_is_int(v->type))
        return loom_error_set(err, LOOM_ERR_TYPE, "tokenizer: key '%s' holds a %s, expected an integer",
                              key, loom_gguf_type_name(v->type));
    bool is_signed = loom_gguf_type_is_signed(v->type);
    if (is_signed ? v->i64 == -1 : v->u64 == UINT32_MAX || v->u64 == UINT64_MAX) {
        *id = LOOM_TOKEN_NULL;
        return LOOM_OK;
    }
    bool out = is_signed ? (v->i64 < 0 || (uint64_t)v->i64 >= n_vocab) : v->u64 >= n_vocab;
    if (out && lenient) {
        *id = LOOM_TOKEN_NULL;
        return LOOM_OK;
    }
    if (out)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "tokenizer: key '%s' = %lld is outside the vocabulary [0, %u)", key,
                              is_signed ? (long long)v->i64 : (long long)v->u64, n_vocab);
    *id = (loom_token)(is_signed ? v->i64 : (int64_t)v->u64);
    return LOOM_OK;
}

/* ---- pieces --------------------------------------------------------------------------------- */

static void init_byte_encoding(loom_tokenizer *t) {
    /* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
     * U+0100.. in byte order. */
    int next = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + next++);
        char buf[4];
        size_t n = loom_utf8_encode(cp, buf);
        LOOM_ASSERT(n <= 2);
        memcpy(t->byte_enc[b], buf, n);
        t->byte_enc_len[b] = (uint8_t)n;
    }
}

/* The byte that codepoint cp stands for in byte-level BPE text, or -1. */
static int byte_of_codepoint(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    int k = (int)(cp - 256), seen = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (!printable && seen++ == k) return b;
    }
    return -1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Writes the piece of token e (text s[0..n)) to out (room for n bytes); returns its length. */
static size_t make_piece(const loom_tokenizer *t, const tok_entry *e, const char *s, size_t n,
                         char *out, const int *cp_to_byte) {
    switch (e->type) {
    case LOOM_TOKEN_CONTROL:
    case LOOM_TOKEN_UNKNOWN:
    case LOOM_TOKEN_USER_DEFINED: memcpy(out, s, n); return n;
    case LOOM_TOKEN_BYTE:
        if (t->kind == LOOM_TOKENIZER_SPM && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' &&
            hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            out[0] = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            return 1;
        }
        return 0;
    case LOOM_TOKEN_NORMAL: break;
    default: return 0; /* unused / undefined: nothing, like llama.cpp */
    }
    size_t w = 0;
    if (t->kind == LOOM_TOKENIZER_SPM) {
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
                out[w++] = ' ';
                i += 3;
            } else
                out[w++] = s[i++];
        }
        return w;
    }
    for (size_t i = 0; i < n;) {
        size_t start = i;
        uint32_t cp = loom_utf8_next((const unsigned char *)s, n, &i);
        int b = cp < 0x200 ? cp_to_byte[cp] : -1;
        if (b >= 0 && cp != 0xFFFD)
            out[w++] = (char)b;
        else { /* not a byte-level character: keep its bytes as they are */
            memcpy(out + w, s + start, i - start);
            w += i - start;
        }
    }
    return w;
}

/* ---- create / destroy ----------------------------------------------------------------------- */

void loom_tokenizer_destroy(loom_tokenizer *t) {
    if (!t) return;
    free(t->tok);
    free(t->text);
    free(t->pieces);
    table_free(&t->tok_index);
    free(t->merges);
    free(t->merge_text);
    table_free(&t->merge_index);
    free(t->special);
    free(t);
}

static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
};
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>",
};

static int special_cmp_ctx_len(const loom_tokenizer *t, loom_token a, loom_token b) {
    uint32_t la = t->tok[a].text_len, lb = t->tok[b].text_len;
    if (la != lb) return la > lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Insertion into the sorted special list would be quadratic for big lists; sort with a simple
 * merge sort instead (qsort has no context argument in C11). */
static void sort_special(const loom_tokenizer *t, loom_token *a, loom_token *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_special(t, a, tmp, h);
    sort_special(t, a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = special_cmp_ctx_len(t, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static loom_status load_merges(loom_tokenizer *t, const loom_gguf_value *mv, loom_error *err) {
    uint64_t n = mv->arr.n, bytes = 0;
    if (n > UINT32_MAX - 1)
        return loom_error_set(err, LOOM_ERR_FORMAT, "tokenizer: %s: %llu merges is too many", KEY_MERGES,
                              (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) bytes += mv->arr.items[i].str.len;
    t->merges = calloc(n ? n : 1, sizeof *t->merges);
    t->merge_text = malloc(bytes ? bytes : 1);
    if (!t->merges || !t->merge_text)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %llu merges",
                              (unsigned long long)n);
    loom_status st = table_init(&t->merge_index, n, err);
    if (st) return st;
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = mv->arr.items[i].str.ptr;
        uint64_t len = mv->arr.items[i].str.len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL; /* first space after byte 0 */
        if (!sp)
            return loom_error_set(err, LOOM_ERR_FORMAT,
                                  "tokenizer: %s[%llu] = '%.40s' is not two pieces separated by a space",
                                  KEY_MERGES, (unsigned long long)i, s);
        size_t la = (size_t)(sp - s), lb = (size_t)(len - la - 1);
        if (lb == 0)
            return loom_error_set(err, LOOM_ERR_FORMAT, "tokenizer: %s[%llu] = '%.40s' has an empty right piece",
                                  KEY_MERGES, (unsigned long long)i, s);
        if (loom_tok_merge_rank(t, s, la, sp + 1, lb) >= 0) continue; /* duplicate: first wins */
        merge_entry *m = &t->merges[t->n_merges];
        m->off = off;
        m->left_len = (uint32_t)la;
        m->right_len = (uint32_t)lb;
        memcpy(t->merge_text + off, s, la);
        memcpy(t->merge_text + off + la, sp + 1, lb);
        off += la + lb;
        table_put(&t->merge_index, loom_tok_hash_pair(s, la, sp + 1, lb), t->n_merges++);
    }
    return LOOM_OK;
}

static loom_status build(loom_tokenizer *t, const loom_gguf *g, loom_error *err) {
    loom_status st;
    const char *model = NULL, *pre = NULL;
    if (!loom_gguf_find(g, KEY_MODEL))
        return loom_error_set(err, LOOM_ERR_NOT_FOUND, "tokenizer: key '%s' is missing (no tokenizer in this file)",
                              KEY_MODEL);
    if ((st = loom_gguf_get_string(g, KEY_MODEL, &model, err))) return st;
    if (!strcmp(model, "llama"))
        t->kind = LOOM_TOKENIZER_SPM;
    else if (!strcmp(model, "gpt2"))
        t->kind = LOOM_TOKENIZER_BPE;
    else
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "tokenizer: unknown tokenizer model '%.64s' (%s); supported: llama, gpt2",
                              model, KEY_MODEL);
    snprintf(t->model_name, sizeof t->model_name, "%s", model);

    if ((st = loom_gguf_get_opt_string(g, KEY_PRE, &pre, err))) return st;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre ? pre : "");
    if (t->kind == LOOM_TOKENIZER_BPE) {
        t->pre = loom_pretok_find(pre && *pre ? pre : "default");
        if (!t->pre)
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "tokenizer: unknown pre-tokenizer '%.64s' (%s); supported: %s", pre,
                                  KEY_PRE, loom_pretok_names());
        t->ignore_merges = t->pre->ignore_merges;
    }

    const loom_gguf_value *tv, *sv, *yv, *gv;
    if ((st = get_array(g, KEY_TOKENS, elem_string, "string", 0, &tv, err))) return st;
    if (!tv) return loom_error_set(err, LOOM_ERR_NOT_FOUND, "tokenizer: key '%s' is missing", KEY_TOKENS);
    if (tv->arr.n == 0)
        return loom_error_set(err, LOOM_ERR_FORMAT, "tokenizer: key '%s' is an empty array", KEY_TOKENS);
    if (tv->arr.n >= INT32_MAX)
        return loom_error_set(err, LOOM_ERR_FORMAT, "tokenizer: %llu tokens is too many",
                              (unsigned long long)tv->arr.n);
    uint32_t n = (uint32_t)tv->arr.n;
    t->n_vocab = n;
    if ((st = get_array(g, KEY_SCORES, elem_score, "f32", n, &sv, err))) return st;
    if ((st = get_array(g, KEY_TYPES, loom_gguf_type_is_int, "i32", n, &yv, err))) return st;
    if ((st = get_array(g, KEY_MERGES, elem_string, "string", 0, &gv, err))) return st;

    /* tokens, texts, scores, types */
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += tv->arr.items[i].str.len + 1;
    t->tok = calloc(n, sizeof *t->tok);
    t->text = malloc(bytes);
    t->pieces = malloc(bytes);
    if (!t->tok || !t->text || !t->pieces)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %u tokens", n);
    if ((st = table_init(&t->tok_index, n, err))) return st;
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        tok_entry *e = &t->tok[i];
        const loom_gguf_value *s = &tv->arr.items[i];
        if (s->str.len > UINT32_MAX)
            return loom_error_set(err, LOOM_ERR_FORMAT, "tokenizer: token %u is %llu bytes long", i,
                                  (unsigned long long)s->str.len);
        e->text_off = off;
        e->text_len = (uint32_t)s->str.len;
        memcpy(t->text + off, s->str.ptr, s->str.len);
        t->text[off + s->str.len] = '\0';
        off += s->str.len + 1;
        e->score = 0.0f;
        if (sv) {
            if (sv->arr.elem_type == LOOM_GGUF_I32)
                e->score = (float)loom_gguf_array_i64(sv, i);
            else
                e->score = (float)loom_gguf_array_f64(sv, i);
        }
        e->type = LOOM_TOKEN_NORMAL;
        if (yv) {
            int64_t ty = loom_gguf_array_i64(yv, i);
            e->type = ty >= 1 && ty <= 6 ? (uint8_t)ty : LOOM_TOKEN_UNDEFINED;
        }
        if (e->text_len == 0) continue;
        const char *txt = t->text + e->text_off;
        if (loom_tok_lookup(t, txt, e->text_len) != LOOM_TOKEN_NULL) continue; /* first id wins */
        table_put(&t->tok_index, loom_tok_hash(txt, e->text_len), i);
    }
    if (t->kind == LOOM_TOKENIZER_BPE && gv && (st = load_merges(t, gv, err))) return st;

    /* special ids and flags */
    bool spm = t->kind == LOOM_TOKENIZER_SPM;
    t->bos = spm ? 1 : 11;
    t->eos = spm ? 2 : 11;
    t->unk = spm ? 0 : LOOM_TOKEN_NULL;
    t->pad = t->eot = t->eom = LOOM_TOKEN_NULL;
    if ((st = get_special(g, "tokenizer.ggml.bos_token_id", n, false, &t->bos, err)) ||
        (st = get_special(g, "tokenizer.ggml.eos_token_id", n, false, &t->eos, err)) ||
        (st = get_special(g, "tokenizer.ggml.unknown_token_id", n, false, &t->unk, err)) ||
        (st = get_special(g, "tokenizer.ggml.padding_token_id", n, true, &t->pad, err)) ||
        (st = get_special(g, "tokenizer.ggml.eot_token_id", n, false, &t->eot, err)) ||
        (st = get_special(g, "tokenizer.ggml.eom_token_id", n, false, &t->eom, err)))
        return st;
    t->add_bos = spm ? true : t->pre->add_bos;
    t->add_eos = false;
    t->add_space_prefix = spm;
    if ((st = loom_gguf_get_opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) ||
        (st = loom_gguf_get_opt_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) ||
        (st = loom_gguf_get_opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)))
        return st;
    if (t->add_bos && t->bos == LOOM_TOKEN_NULL)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "tokenizer: add_bos_token is true but the vocabulary has no BOS token");
    if (t->add_eos && t->eos == LOOM_TOKEN_NULL)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "tokenizer: add_eos_token is true but the vocabulary has no EOS token");

    /* end-of-generation tokens */
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        loom_token id = loom_tok_lookup(t, eog_texts[i], strlen(eog_texts[i]));
        if (id == LOOM_TOKEN_NULL) continue;
        t->tok[id].eog = 1;
        t->tok[id].type = LOOM_TOKEN_CONTROL;
    }
    if (t->eot == LOOM_TOKEN_NULL)
        for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0] && t->eot == LOOM_TOKEN_NULL; i++)
            t->eot = loom_tok_lookup(t, eot_texts[i], strlen(eot_texts[i]));
    if (t->eom == LOOM_TOKEN_NULL) t->eom = loom_tok_lookup(t, "<|eom_id|>", 10);
    if (t->eos != LOOM_TOKEN_NULL) t->tok[t->eos].eog = 1;
    if (t->eot != LOOM_TOKEN_NULL) t->tok[t->eot].eog = 1;
    if (t->eom != LOOM_TOKEN_NULL) t->tok[t->eom].eog = 1;

    /* pieces */
    init_byte_encoding(t);
    int cp_to_byte[0x200];
    for (uint32_t c = 0; c < 0x200; c++) cp_to_byte[c] = byte_of_codepoint(c);
    off = 0;
    for (uint32_t i = 0; i < n; i++) {
        tok_entry *e = &t->tok[i];
        e->piece_off = off;
        e->piece_len = (uint32_t)make_piece(t, e, t->text + e->text_off, e->text_len, t->pieces + off,
                                            cp_to_byte);
        if (e->piece_len > t->max_piece_len) t->max_piece_len = e->piece_len;
        off += e->piece_len;
    }

    /* SPM byte fallback */
    for (int b = 0; b < 256; b++) {
        char hex[8], raw[1] = {(char)b};
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_token[b] = loom_tok_lookup(t, hex, 6);
        if (t->byte_token[b] == LOOM_TOKEN_NULL) t->byte_token[b] = loom_tok_lookup(t, raw, 1);
    }

    /* special tokens matched in text, longest first */
    size_t ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t ty = t->tok[i].type;
        ns += (ty == LOOM_TOKEN_CONTROL || ty == LOOM_TOKEN_UNKNOWN || ty == LOOM_TOKEN_USER_DEFINED) &&
              t->tok[i].text_len > 0;
    }
    t->special = malloc((ns ? ns : 1) * sizeof *t->special);
    loom_token *tmp = malloc((ns ? ns : 1) * sizeof *tmp);
    if (!t->special || !tmp) {
        free(tmp);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t ty = t->tok[i].type;
        if ((ty == LOOM_TOKEN_CONTROL || ty == LOOM_TOKEN_UNKNOWN || ty == LOOM_TOKEN_USER_DEFINED) &&
            t->tok[i].text_len > 0)
            t->special[t->n_special++] = (loom_token)i;
    }
    sort_special(t, t->special, tmp, t->n_special);
    free(tmp);
    return LOOM_OK;
}

loom_status loom_tokenizer_create(const loom_gguf *g, loom_tokenizer **out, loom_error *err) {
    if (!out) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    if (!g) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "tokenizer: gguf handle is NULL");
    loom_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    loom_status st = build(t, g, err);
    if (st) {
        loom_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return LOOM_OK;
}

/* ---- accessors ------------------------------------------------------------------------------ */

static bool valid(const loom_tokenizer *t, loom_token id) { return id >= 0 && (uint32_t)id < t->n_vocab; }

uint32_t loom_tokenizer_n_vocab(const loom_tokenizer *t) { return t->n_vocab; }
loom_tokenizer_kind loom_tokenizer_kind_of(const loom_tokenizer *t) { return t->kind; }
const char *loom_tokenizer_model_name(const loom_tokenizer *t) { return t->model_name; }
const char *loom_tokenizer_pre_name(const loom_tokenizer *t) { return t->pre_name; }

const char *loom_tokenizer_token_text(const loom_tokenizer *t, loom_token id, size_t *len) {
    if (!valid(t, id)) return NULL;
    if (len) *len = t->tok[id].text_len;
    return t->text + t->tok[id].text_off;
}

const char *loom_tokenizer_piece(const loom_tokenizer *t, loom_token id, size_t *len) {
    if (!valid(t, id)) return NULL;
    if (len) *len = t->tok[id].piece_len;
    return t->pieces + t->tok[id].piece_off;
}

float loom_tokenizer_score(const loom_tokenizer *t, loom_token id) {
    return valid(t, id) ? t->tok[id].score : 0.0f;
}
loom_token_type loom_tokenizer_token_type(const loom_tokenizer *t, loom_token id) {
    return valid(t, id) ? (loom_token_type)t->tok[id].type : LOOM_TOKEN_UNDEFINED;
}
loom_token loom_tokenizer_find(const loom_tokenizer *t, const char *text, size_t len) {
    return len ? loom_tok_lookup(t, text, len) : LOOM_TOKEN_NULL;
}
loom_token loom_tokenizer_bos(const loom_tokenizer *t) { return t->bos; }
loom_token loom_tokenizer_eos(const loom_tokenizer *t) { return t->eos; }
loom_token loom_tokenizer_eot(const loom_tokenizer *t) { return t->eot; }
loom_token loom_tokenizer_unk(const loom_tokenizer *t) { return t->unk; }
loom_token loom_tokenizer_pad(const loom_tokenizer *t) { return t->pad; }
bool loom_tokenizer_add_bos(const loom_tokenizer *t) { return t->add_bos; }
bool loom_tokenizer_add_eos(const loom_tokenizer *t) { return t->add_eos; }
bool loom_tokenizer_is_eog(const loom_tokenizer *t, loom_token id) { return valid(t, id) && t->tok[id].eog; }

/* ---- decoding ------------------------------------------------------------------------------- */

struct loom_detok {
    const loom_tokenizer *t;
    unsigned flags;
    bool seen_text; /* a non-empty piece went out (STRIP_SPACE applies before that only) */
    loom_utf8_sanitizer san;
    char *buf;      /* LOOM_UTF8_SANITIZE_BOUND(max_piece_len) bytes */
};

static void detok_init(loom_detok *d, const loom_tokenizer *t, unsigned flags) {
    d->t = t;
    d->flags = flags;
    d->seen_text = false;
    loom_utf8_sanitizer_init(&d->san);
}

/* The bytes id contributes under d's flags. */
static const char *detok_piece(loom_detok *d, loom_token id, size_t *len) {
    const tok_entry *e = &d->t->tok[id];
    *len = 0;
    if ((e->type == LOOM_TOKEN_CONTROL || e->type == LOOM_TOKEN_UNKNOWN) && !(d->flags & LOOM_DECODE_SPECIAL))
        return "";
    const char *p = d->t->pieces + e->piece_off;
    size_t n = e->piece_len;
    if (n && !d->seen_text) {
        d->seen_text = true;
        if ((d->flags & LOOM_DECODE_STRIP_SPACE) && d->t->add_space_prefix && p[0] == ' ') {
            p++;
            n--;
        }
    }
    *len = n;
    return p;
}

loom_status loom_detok_create(const loom_tokenizer *t, unsigned flags, loom_detok **out, loom_error *err) {
    if (!out || !t) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "detok: NULL argument");
    *out = NULL;
    loom_detok *d = calloc(1, sizeof *d);
    if (d) d->buf = malloc(LOOM_UTF8_SANITIZE_BOUND(t->max_piece_len) + 1);
    if (!d || !d->buf) {
        if (d) free(d->buf);
        free(d);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "detok: out of memory");
    }
    detok_init(d, t, flags);
    *out = d;
    return LOOM_OK;
}

void loom_detok_destroy(loom_detok *d) {
    if (!d) return;
    free(d->buf);
    free(d);
}

loom_status loom_detok_feed(loom_detok *d, loom_token id, const char **text, size_t *len, loom_error *err) {
    *text = d->buf;
    *len = 0;
    if (!valid(d->t, id))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "detok: token id %d outside the vocabulary [0, %u)",
                              (int)id, d->t->n_vocab);
    size_t n;
    const char *p = detok_piece(d, id, &n);
    *len = loom_utf8_sanitize(&d->san, p, n, d->buf);
    d->buf[*len] = '\0';
    return LOOM_OK;
}

void loom_detok_flush(loom_detok *d, const char **text, size_t *len) {
    *len = loom_utf8_sanitize_flush(&d->san, d->buf);
    d->buf[*len] = '\0';
    *text = d->buf;
    detok_init(d, d->t, d->flags);
}

loom_status loom_tokenizer_decode(const loom_tokenizer *t, const loom_token *ids, size_t n, unsigned flags,
                                  char **text, size_t *len, loom_error *err) {
    *text = NULL;
    *len = 0;
    loom_detok d;
    detok_init(&d, t, flags);
    size_t raw = 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid(t, ids[i]))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "tokenizer: decode: token %zu = %d is outside the vocabulary [0, %u)", i,
                                  (int)ids[i], t->n_vocab);
        raw += t->tok[ids[i]].piece_len;
    }
    char *out = malloc(LOOM_UTF8_SANITIZE_BOUND(raw) + 1);
    if (!out) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: decode: out of memory");
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pn;
        const char *p = detok_piece(&d, ids[i], &pn);
        w += loom_utf8_sanitize(&d.san, p, pn, out + w);
    }
    w += loom_utf8_sanitize_flush(&d.san, out + w);
    out[w] = '\0';
    *text = out;
    *len = w;
    return LOOM_OK;
}
