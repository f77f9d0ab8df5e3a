/* tokenizer_impl.h: the layout of loom_tokenizer, shared by tokenizer.c (loading, decoding) and
 * tokenizer_encode.c (special-token splitting, SPM and BPE merging). Not a public header.
 *
 * Invariants after create: every token has its text in `text` (NUL-terminated copies, len may be
 * 0 for an empty token, which is then never matched); the token map holds each distinct
 * non-empty text once (the lowest id wins for duplicates); special ids are LOOM_TOKEN_NULL or
 * inside [0, n_vocab); `special` lists the ids of control/unknown/user-defined tokens with
 * non-empty text, longest text first (ties by id).
 */
#ifndef LOOM_LOADERS_TOKENIZER_IMPL_H
#define LOOM_LOADERS_TOKENIZER_IMPL_H

#include <stdint.h>

#include "loaders/pretok.h"
#include "loaders/tokenizer.h"

typedef struct tok_entry {
    uint64_t text_off;  /* into text arena */
    uint32_t text_len;
    uint32_t piece_len; /* decoded bytes, at piece_off in the piece arena */
    uint64_t piece_off;
    float score;
    uint8_t type;       /* loom_token_type */
    uint8_t eog;        /* ends generation */
} tok_entry;

typedef struct merge_entry {
    uint64_t off;       /* left then right bytes, contiguous, in the merge arena */
    uint32_t left_len, right_len;
} merge_entry;          /* rank = index */

/* Open-addressing table (linear probing) of uint32 values: a slot holds index + 1 (0 = empty)
 * next to 32 bits of the key's hash, so a probe touches one cache line. */
typedef struct index_slot {
    uint32_t value;
    uint32_t hash;      /* high half of the 64-bit hash */
} index_slot;

typedef struct index_table {
    index_slot *slots;
    size_t mask;        /* capacity - 1 (capacity a power of two, >= 2 * count) */
} index_table;

struct loom_tokenizer {
    loom_tokenizer_kind kind;
    char model_name[16];
    char pre_name[64];
    const loom_pretok_info *pre; /* NULL for SPM */

    uint32_t n_vocab;
    tok_entry *tok;
    char *text;                  /* token texts */
    char *pieces;                /* decoded pieces */
    size_t max_piece_len;
    index_table tok_index;       /* text -> id */

    uint32_t n_merges;
    merge_entry *merges;
    char *merge_text;
    index_table merge_index;     /* (left, right) -> rank */

    loom_token bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    loom_token byte_token[256];  /* SPM byte fallback: <0xXX> (or the raw byte) */
    uint8_t byte_enc[256][2];    /* GPT-2 bytes_to_unicode, as UTF-8 (1 or 2 bytes) */
    uint8_t byte_enc_len[256];

    loom_token *special;         /* see file comment */
    size_t n_special;
};

uint64_t loom_tok_hash(const char *s, size_t n);
uint64_t loom_tok_hash_pair(const char *a, size_t na, const char *b, size_t nb);
/* Token id of text[0..len), or LOOM_TOKEN_NULL. */
loom_token loom_tok_lookup(const loom_tokenizer *t, const char *text, size_t len);
/* Rank of the merge (a, b), or -1. */
int32_t loom_tok_merge_rank(const loom_tokenizer *t, const char *a, size_t na, const char *b,
                            size_t nb);

#endif /* LOOM_LOADERS_TOKENIZER_IMPL_H */
