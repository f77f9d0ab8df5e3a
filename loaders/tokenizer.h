/* tokenizer.h: text <-> token ids for GGUF models, built from the file's tokenizer.ggml.* keys
 * alone, producing the ids llama.cpp produces.
 *
 * Models (tokenizer.ggml.model):
 *  - "llama": SentencePiece-style BPE. A space is prefixed to the text (add_space_prefix,
 *    default true) and after every special token, spaces become U+2581, pairs of adjacent
 *    pieces merge by highest token score, and characters with no token fall back to <0xXX>
 *    byte tokens.
 *  - "gpt2": byte-level BPE. The text is split into words by the pre-tokenizer that
 *    tokenizer.ggml.pre names (pretok.h lists them), each word's bytes are mapped to printable
 *    codepoints (GPT-2's bytes_to_unicode) and merged by rank (tokenizer.ggml.merges).
 * Special tokens: with parse_special, control/unknown/user-defined tokens written in the text are
 * matched whole (longest first) before BPE runs; without it only user-defined ones are.
 *
 * Decoding concatenates token pieces (byte tokens give their byte, U+2581 gives a space, byte-level
 * pieces their bytes) and only ever returns well-formed UTF-8: a character split across tokens is
 * joined, anything ill-formed becomes U+FFFD. loom_detok does the same incrementally for streaming.
 *
 *   loom_tokenizer *tok; loom_error err = {0};
 *   if (loom_tokenizer_create(gguf, &tok, &err)) { fprintf(stderr, "%s\n", err.msg); ... }
 *   loom_token *ids; size_t n;
 *   loom_tokenizer_encode(tok, "Hello", 5, loom_tokenizer_add_bos(tok), false, &ids, &n, &err);
 *   loom_detok *d; loom_detok_create(tok, 0, &d, &err);
 *   for (each generated id) { const char *s; size_t len;
 *       loom_detok_feed(d, id, &s, &len, &err); fwrite(s, 1, len, stdout); }
 *   ... loom_detok_flush(d, &s, &len); fwrite(...); loom_detok_destroy(d); free(ids);
 *   loom_tokenizer_destroy(tok);
 *
 * Ownership: the tokenizer copies everything it needs; the loom_gguf may be closed after create.
 * A tokenizer is immutable after create: encode/decode may run from several threads at once. A
 * loom_detok belongs to one thread and must not outlive its tokenizer.
 */
#ifndef LOOM_LOADERS_TOKENIZER_H
#define LOOM_LOADERS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loaders/gguf.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t loom_token;
#define LOOM_TOKEN_NULL ((loom_token)-1)

typedef enum loom_tokenizer_kind {
    LOOM_TOKENIZER_SPM = 1, /* "llama" */
    LOOM_TOKENIZER_BPE = 2, /* "gpt2" */
} loom_tokenizer_kind;

/* Token types, with the values of tokenizer.ggml.token_type. */
typedef enum loom_token_type {
    LOOM_TOKEN_UNDEFINED = 0,
    LOOM_TOKEN_NORMAL = 1,
    LOOM_TOKEN_UNKNOWN = 2,
    LOOM_TOKEN_CONTROL = 3,
    LOOM_TOKEN_USER_DEFINED = 4,
    LOOM_TOKEN_UNUSED = 5,
    LOOM_TOKEN_BYTE = 6,
} loom_token_type;

typedef struct loom_tokenizer loom_tokenizer;

/* Builds the tokenizer of g. Errors: LOOM_ERR_NOT_FOUND for a missing required key
 * (tokenizer.ggml.model, tokenizer.ggml.tokens), LOOM_ERR_TYPE for a key of the wrong type,
 * LOOM_ERR_FORMAT for inconsistent data (array shorter than the vocabulary, a BOS/EOS/UNK/EOT/EOM
 * id outside it, a merge that is not "left right", add_bos_token without a BOS),
 * LOOM_ERR_UNSUPPORTED for an unknown model or pre-tokenizer (the message names it and lists the
 * supported ones). Lenient where real files need it: an id of -1 (0xFFFFFFFF) means "none", an
 * out-of-range padding id is dropped, duplicate token texts map to their lowest id, and a "gpt2"
 * file without merges is accepted (words then stay one token per byte). On failure *out is NULL. */
loom_status loom_tokenizer_create(const loom_gguf *g, loom_tokenizer **out, loom_error *err);
void loom_tokenizer_destroy(loom_tokenizer *t); /* NULL is a no-op */

/* Tokenizes text[0..len) (any bytes; NUL is an ordinary byte). add_bos prepends the BOS token
 * (LOOM_ERR_INVALID_ARGUMENT when the vocabulary has none); pass loom_tokenizer_add_bos(t) to do
 * what the model asks for. parse_special: see the file comment. *ids is malloc'ed (free() it,
 * NULL when *n is 0). */
loom_status loom_tokenizer_encode(const loom_tokenizer *t, const char *text, size_t len, bool add_bos,
                                  bool parse_special, loom_token **ids, size_t *n, loom_error *err);

/* Decode flags. */
enum {
    LOOM_DECODE_SPECIAL = 1,     /* render control/unknown tokens as their text (else nothing) */
    LOOM_DECODE_STRIP_SPACE = 2, /* drop the leading space the "llama" space prefix added (first
                                    non-empty piece only; no-op when add_space_prefix is off) */
};

/* Decodes ids[0..n) to well-formed UTF-8: *text is malloc'ed and NUL-terminated, *len excludes the
 * NUL. decode(encode(s)) == s for well-formed s without special tokens, with STRIP_SPACE on "llama"
 * models. Errors: LOOM_ERR_INVALID_ARGUMENT for an id outside [0, n_vocab). */
loom_status loom_tokenizer_decode(const loom_tokenizer *t, const loom_token *ids, size_t n,
                                  unsigned flags, char **text, size_t *len, loom_error *err);

/* Streaming decoder: feed ids one at a time, receive the text that became complete. */
typedef struct loom_detok loom_detok;
loom_status loom_detok_create(const loom_tokenizer *t, unsigned flags, loom_detok **out,
                              loom_error *err);
void loom_detok_destroy(loom_detok *d); /* NULL is a no-op */
/* *text, *len: well-formed UTF-8 completed by this token (maybe empty: a partial character is held
 * back until the token that completes or breaks it). Valid until the next call on d. */
loom_status loom_detok_feed(loom_detok *d, loom_token id, const char **text, size_t *len,
                            loom_error *err);
/* End of stream: returns what is held back (an unfinished character becomes U+FFFD) and resets d
 * for a new stream. Valid until the next call on d. */
void loom_detok_flush(loom_detok *d, const char **text, size_t *len);

/* Vocabulary. Ids outside [0, n_vocab) give NULL / LOOM_TOKEN_UNDEFINED / false. */
uint32_t loom_tokenizer_n_vocab(const loom_tokenizer *t);
loom_tokenizer_kind loom_tokenizer_kind_of(const loom_tokenizer *t);
const char *loom_tokenizer_model_name(const loom_tokenizer *t); /* "llama" / "gpt2" */
const char *loom_tokenizer_pre_name(const loom_tokenizer *t);   /* tokenizer.ggml.pre, or "" */
/* The vocabulary text of id as stored in the file ("▁Hello", "Ġworld", "<0x0A>"). */
const char *loom_tokenizer_token_text(const loom_tokenizer *t, loom_token id, size_t *len);
/* The bytes id decodes to, control tokens included (may be a partial UTF-8 character). */
const char *loom_tokenizer_piece(const loom_tokenizer *t, loom_token id, size_t *len);
float loom_tokenizer_score(const loom_tokenizer *t, loom_token id);
loom_token_type loom_tokenizer_token_type(const loom_tokenizer *t, loom_token id);
/* The id whose vocabulary text is text[0..len), or LOOM_TOKEN_NULL. */
loom_token loom_tokenizer_find(const loom_tokenizer *t, const char *text, size_t len);

/* Special ids: LOOM_TOKEN_NULL when the model has none. */
loom_token loom_tokenizer_bos(const loom_tokenizer *t);
loom_token loom_tokenizer_eos(const loom_tokenizer *t);
loom_token loom_tokenizer_eot(const loom_tokenizer *t);
loom_token loom_tokenizer_unk(const loom_tokenizer *t);
loom_token loom_tokenizer_pad(const loom_tokenizer *t);
bool loom_tokenizer_add_bos(const loom_tokenizer *t); /* tokenizer.ggml.add_bos_token or default */
bool loom_tokenizer_add_eos(const loom_tokenizer *t);
/* Whether generation should stop at id: EOS, EOT, EOM and end-of-turn tokens the vocabulary
 * names (<|eot_id|>, <|im_end|>, <|endoftext|>, <end_of_turn>, ...). */
bool loom_tokenizer_is_eog(const loom_tokenizer *t, loom_token id);

/* Debugging: the word boundaries (byte offsets into text, each word's end) the pre-tokenizer of a
 * "gpt2" tokenizer produces for text[0..len) taken as one fragment (no special-token splitting);
 * for "llama" the whole text is one word. *ends is malloc'ed. */
loom_status loom_tokenizer_pretokenize(const loom_tokenizer *t, const char *text, size_t len,
                                       size_t **ends, size_t *n, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_LOADERS_TOKENIZER_H */
