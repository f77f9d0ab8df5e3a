/* tokenizer_encode.c: text -> token ids, following llama.cpp's llama-vocab.cpp step by step so
 * the ids agree with it:
 *  1. special tokens written in the text are cut out first (longest text first; each one splits
 *     every remaining text fragment at its non-overlapping occurrences, left to right);
 *  2. each text fragment is tokenized on its own:
 *     - SPM: prefix a space (first fragment and after a special token, if add_space_prefix),
 *       replace ' ' by U+2581, start from one symbol per UTF-8 character, and repeatedly merge
 *       the adjacent pair whose concatenation is the highest-scoring token (ties: leftmost);
 *       a final symbol that is no token becomes its <0xXX> byte tokens;
 *     - BPE: split into words (pretok.h), map each word's bytes to GPT-2's printable codepoints,
 *       start from one symbol per character and repeatedly apply the lowest-rank merge (ties:
 *       leftmost); with ignore_merges a word that is a whole token is taken at once.
 * Both merge loops use a binary heap of candidate pairs; a candidate is stale (skipped) once
 * either side has changed, which the total byte size detects because symbols only grow.
 * Cost: O(n log n) per fragment/word in its length.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "loaders/tokenizer_impl.h"
#include "loaders/unicode.h"

/* ---- growable id vector --------------------------------------------------------------------- */

typedef struct {
    loom_token *v;
    size_t n, cap;
    bool oom;
} idvec;

static void push(idvec *iv, loom_token id) {
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 64;
        loom_token *v = realloc(iv->v, cap * sizeof *v);
        if (!v) {
            iv->oom = true;
            return;
        }
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = id;
}

/* ---- symbols and the pair heap -------------------------------------------------------------- */

typedef struct {
    int32_t prev, next;
    uint32_t off, n; /* bytes text[off .. off+n) of the current string; n == 0: merged away */
} sym;

typedef struct {
    double key;      /* SPM: -score; BPE: rank. Smallest first. */
    int32_t left, right;
    uint32_t size;   /* bytes of left + right when pushed */
} pair;

typedef struct {
    sym *syms;
    size_t n_syms, cap_syms;
    pair *heap;
    size_t n_heap, cap_heap;
    bool oom;
} work;

static bool pair_less(const pair *a, const pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(work *w, pair p) {
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        pair *h = realloc(w->heap, cap * sizeof *h);
        if (!h) {
            w->oom = true;
            return;
        }
        w->heap = h;
        w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_less(&p, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
}

static pair heap_pop(work *w) {
    pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* One symbol per UTF-8 character of s[0..len) (lead-byte length, clipped at the end). */
static bool make_symbols(work *w, const char *s, size_t len) {
    w->n_syms = 0;
    w->n_heap = 0;
    if (len > w->cap_syms) {
        sym *p = realloc(w->syms, len * sizeof *p);
        if (!p) return false;
        w->syms = p;
        w->cap_syms = len;
    }
    for (size_t off = 0; off < len;) {
        size_t k = loom_utf8_lead_len((unsigned char)s[off]);
        if (k > len - off) k = len - off;
        sym *y = &w->syms[w->n_syms];
        y->prev = (int32_t)w->n_syms - 1;
        off += k;
        y->next = off == len ? -1 : (int32_t)w->n_syms + 1;
        y->off = (uint32_t)(off - k);
        y->n = (uint32_t)k;
        w->n_syms++;
    }
    return true;
}

/* Candidate pair (left, right): pushed when it would form something (a token for SPM, a merge
 * for BPE). */
static void add_pair(const loom_tokenizer *t, work *w, const char *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *a = &w->syms[left], *b = &w->syms[right];
    pair p = {0, left, right, a->n + b->n};
    if (t->kind == LOOM_TOKENIZER_SPM) {
        loom_token id = loom_tok_lookup(t, s + a->off, a->n + b->n);
        if (id == LOOM_TOKEN_NULL) return;
        p.key = -(double)t->tok[id].score;
    } else {
        int32_t r = loom_tok_merge_rank(t, s + a->off, a->n, s + b->off, b->n);
        if (r < 0) return;
        p.key = (double)r;
    }
    heap_push(w, p);
}

static void merge_all(const loom_tokenizer *t, work *w, const char *s) {
    for (size_t i = 1; i < w->n_syms; i++) add_pair(t, w, s, (int32_t)i - 1, (int32_t)i);
    while (w->n_heap > 0 && !w->oom) {
        pair p = heap_pop(w);
        sym *l = &w->syms[p.left], *r = &w->syms[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = p.left;
        add_pair(t, w, s, l->prev, p.left);
        add_pair(t, w, s, p.left, l->next);
    }
}

/* ---- SPM ------------------------------------------------------------------------------------ */

static loom_status spm_fragment(const loom_tokenizer *t, work *w, const char *s, size_t len, idvec *out,
                                loom_error *err) {
    if (len == 0) return LOOM_OK;
    if (!make_symbols(w, s, len)) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    merge_all(t, w, s);
    for (int32_t i = 0; i != -1; i = w->syms[i].next) {
        const sym *y = &w->syms[i];
        loom_token id = loom_tok_lookup(t, s + y->off, y->n);
        if (id != LOOM_TOKEN_NULL) {
            push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) {
            unsigned char b = (unsigned char)s[y->off + j];
            loom_token bt = t->byte_token[b] != LOOM_TOKEN_NULL ? t->byte_token[b] : t->unk;
            if (bt == LOOM_TOKEN_NULL)
                return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                      "tokenizer: byte 0x%02X has no token (<0x%02X>) and there is no unknown token",
                                      b, b);
            push(out, bt);
        }
    }
    return LOOM_OK;
}

/* ---- BPE ------------------------------------------------------------------------------------ */

typedef struct {
    uint32_t *cps;
    size_t *cp_byte; /* byte offset in the fragment where each codepoint starts, plus the end */
    size_t *ends, *scratch;
    char *word;      /* byte-level encoding of one word */
} bpe_bufs;

static void bpe_bufs_free(bpe_bufs *b) {
    free(b->cps);
    free(b->cp_byte);
    free(b->ends);
    free(b->scratch);
    free(b->word);
}

/* Decodes s[0..len) leniently into b (len + 1 slots each) and splits it into words; returns the
 * word count or (size_t)-1 when out of memory. */
static size_t bpe_split(const loom_tokenizer *t, const char *s, size_t len, bpe_bufs *b, size_t *n_cps) {
    size_t cap = len + 1;
    b->cps = malloc(cap * sizeof *b->cps);
    b->cp_byte = malloc(cap * sizeof *b->cp_byte);
    b->ends = malloc(cap * sizeof *b->ends);
    b->scratch = malloc(cap * sizeof *b->scratch);
    b->word = NULL;
    if (!b->cps || !b->cp_byte || !b->ends || !b->scratch) return (size_t)-1;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        b->cp_byte[n] = i;
        b->cps[n++] = loom_utf8_next((const unsigned char *)s, len, &i);
    }
    b->cp_byte[n] = len;
    *n_cps = n;
    return loom_pretok_split(t->pre->type, b->cps, n, b->ends, b->scratch);
}

static loom_status bpe_fragment(const loom_tokenizer *t, work *w, const char *s, size_t len, idvec *out,
                                loom_error *err) {
    if (len == 0) return LOOM_OK;
    bpe_bufs b = {0};
    size_t n_cps = 0, n_words = bpe_split(t, s, len, &b, &n_cps);
    loom_status st = LOOM_OK;
    if (n_words == (size_t)-1 || !(b.word = malloc(8 * n_cps + 1))) {
        bpe_bufs_free(&b);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    size_t start = 0;
    for (size_t wi = 0; wi < n_words; wi++) {
        size_t end = b.ends[wi], wl = 0;
        for (size_t c = start; c < end; c++) { /* codepoint -> UTF-8 -> byte-level characters */
            char u[4];
            size_t k = loom_utf8_encode(b.cps[c], u);
            for (size_t j = 0; j < k; j++) {
                unsigned char by = (unsigned char)u[j];
                memcpy(b.word + wl, t->byte_enc[by], t->byte_enc_len[by]);
                wl += t->byte_enc_len[by];
            }
        }
        start = end;
        const char *wd = b.word;
        if (t->ignore_merges) {
            loom_token id = loom_tok_lookup(t, wd, wl);
            if (id != LOOM_TOKEN_NULL) {
                push(out, id);
                continue;
            }
        }
        if (!make_symbols(w, wd, wl)) {
            st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
            break;
        }
        merge_all(t, w, wd);
        for (int32_t i = 0; i != -1; i = w->syms[i].next) {
            const sym *y = &w->syms[i];
            loom_token id = loom_tok_lookup(t, wd + y->off, y->n);
            if (id != LOOM_TOKEN_NULL) {
                push(out, id);
                continue;
            }
            /* Only in vocabularies where a merge result is no token. llama.cpp tries each byte of
             * the symbol as a one-byte token and drops the bytes that are none; so do we. */
            for (uint32_t j = 0; j < y->n; j++) {
                loom_token bt = loom_tok_lookup(t, wd + y->off + j, 1);
                if (bt != LOOM_TOKEN_NULL) push(out, bt);
            }
        }
    }
    bpe_bufs_free(&b);
    return st;
}

/* ---- special tokens ------------------------------------------------------------------------- */

typedef struct {
    loom_token id; /* LOOM_TOKEN_NULL: text */
    size_t off, len;
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} fragvec;

static bool frag_push(fragvec *f, frag x) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *v = realloc(f->v, cap * sizeof *v);
        if (!v) return false;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return true;
}

/* Splits text into text fragments and special tokens; *out owns its array. */
static bool partition(const loom_tokenizer *t, const char *text, size_t len, bool parse_special,
                      fragvec *out) {
    fragvec cur = {0}, nxt = {0};
    if (len && !frag_push(&cur, (frag){LOOM_TOKEN_NULL, 0, len})) return false;
    for (size_t si = 0; si < t->n_special; si++) {
        loom_token id = t->special[si];
        const tok_entry *e = &t->tok[id];
        if (!parse_special && e->type != LOOM_TOKEN_USER_DEFINED) continue;
        const char *st = t->text + e->text_off;
        size_t sl = e->text_len;
        bool any = false;
        for (size_t i = 0; i < cur.n && !any; i++)
            any = cur.v[i].id == LOOM_TOKEN_NULL && cur.v[i].len >= sl &&
                  memmem(text + cur.v[i].off, cur.v[i].len, st, sl) != NULL;
        if (!any) continue;
        nxt.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            frag f = cur.v[i];
            if (f.id != LOOM_TOKEN_NULL) {
                if (!frag_push(&nxt, f)) goto oom;
                continue;
            }
            while (f.len > 0) {
                const char *m = f.len >= sl ? memmem(text + f.off, f.len, st, sl) : NULL;
                if (!m) {
                    if (!frag_push(&nxt, f)) goto oom;
                    break;
                }
                size_t at = (size_t)(m - text);
                if (at > f.off && !frag_push(&nxt, (frag){LOOM_TOKEN_NULL, f.off, at - f.off})) goto oom;
                if (!frag_push(&nxt, (frag){id, 0, 0})) goto oom;
                f.len -= at + sl - f.off;
                f.off = at + sl;
            }
        }
        fragvec tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    free(nxt.v);
    *out = cur;
    return true;
oom:
    free(cur.v);
    free(nxt.v);
    return false;
}

/* ---- entry points --------------------------------------------------------------------------- */

loom_status loom_tokenizer_encode(const loom_tokenizer *t, const char *text, size_t len, bool add_bos,
                                  bool parse_special, loom_token **ids, size_t *n, loom_error *err) {
    *ids = NULL;
    *n = 0;
    if (!text && len) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "tokenizer: text is NULL");
    if (len > (size_t)UINT32_MAX / 8)
        return loom_error_set(err, LOOM_ERR_LIMIT, "tokenizer: text of %zu bytes is too long", len);
    if (add_bos && t->bos == LOOM_TOKEN_NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "tokenizer: BOS requested but the vocabulary has none");
    idvec out = {0};
    work w = {0};
    fragvec frags = {0};
    char *buf = NULL;
    loom_status st = LOOM_OK;
    if (add_bos) push(&out, t->bos);
    if (!partition(t, text, len, parse_special, &frags)) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    bool prev_special = true; /* SPM: the first fragment gets the space prefix too */
    for (size_t i = 0; i < frags.n && !st; i++) {
        frag f = frags.v[i];
        if (f.id != LOOM_TOKEN_NULL) {
            push(&out, f.id);
            prev_special = true;
            continue;
        }
        const char *s = text + f.off;
        if (t->kind == LOOM_TOKENIZER_BPE) {
            st = bpe_fragment(t, &w, s, f.len, &out, err);
            continue;
        }
        /* SPM: optional ' ' prefix, then ' ' -> U+2581 (3 bytes) */
        char *nb = realloc(buf, 3 * f.len + 3);
        if (!nb) {
            st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
            break;
        }
        buf = nb;
        size_t bl = 0;
        if (t->add_space_prefix && prev_special) {
            memcpy(buf, "\xE2\x96\x81", 3);
            bl = 3;
        }
        for (size_t j = 0; j < f.len; j++) {
            if (s[j] == ' ') {
                memcpy(buf + bl, "\xE2\x96\x81", 3);
                bl += 3;
            } else
                buf[bl++] = s[j];
        }
        st = spm_fragment(t, &w, buf, bl, &out, err);
        prev_special = false;
    }
    if (!st && (out.oom || w.oom)) st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
done:
    free(buf);
    free(frags.v);
    free(w.syms);
    free(w.heap);
    if (st) {
        free(out.v);
        return st;
    }
    *ids = out.v;
    *n = out.n;
    return LOOM_OK;
}

loom_status loom_tokenizer_pretokenize(const loom_tokenizer *t, const char *text, size_t len, size_t **ends,
                                       size_t *n, loom_error *err) {
    *ends = NULL;
    *n = 0;
    if (len == 0) return LOOM_OK;
    size_t *res = malloc(len * sizeof *res);
    if (!res) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    if (t->kind != LOOM_TOKENIZER_BPE) {
        res[0] = len;
        *ends = res;
        *n = 1;
        return LOOM_OK;
    }
    bpe_bufs b = {0};
    size_t n_cps, nw = bpe_split(t, text, len, &b, &n_cps);
    if (nw == (size_t)-1) {
        bpe_bufs_free(&b);
        free(res);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < nw; i++) res[i] = b.cp_byte[b.ends[i]];
    bpe_bufs_free(&b);
    *ends = res;
    *n = nw;
    return LOOM_OK;
}
