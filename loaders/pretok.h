/* pretok.h: the pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre), which split
 * text into words before BPE merges run inside each word. Internal to //loaders:tokenizer
 * (exported for tests).
 *
 * Each pre-tokenizer is llama.cpp's list of regular expressions (llama-vocab.cpp), applied one
 * after another: every expression splits each current fragment into its matches and the text
 * between them, and both kinds become fragments of the next stage. There is no regex engine
 * here: each expression is a hand-written matcher over codepoints and their Unicode properties
 * (unicode.h). The GPT-2 and llama3 expressions follow llama.cpp's own hand-written splitters
 * (unicode.cpp); qwen2's expression, which llama.cpp runs through std::regex, is the llama3 one
 * with single digits, and we checked that the llama3 splitter's alternatives match the regex
 * semantics (leftmost, first alternative wins) for it.
 *
 *   gpt-2/mpt/olmo  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3          (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *                   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2           as llama3 with \p{N} instead of \p{N}{1,3}
 *   starcoder/refact  \p{N}, then gpt-2
 *   falcon          [\p{P}$+<=>^~|`]+, then gpt-2, then [0-9][0-9][0-9]
 *   default         [\p{P}$+<=>^~|]+, then gpt-2, then \p{N}+, then [0-9][0-9][0-9]
 *   deepseek-llm    [\r\n], \s?[cased letters]+, \s?[ASCII/CJK punctuation]+, \s+$, [CJK]+, \p{N}+
 *   deepseek-coder  [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}
 */
#ifndef LOOM_LOADERS_PRETOK_H
#define LOOM_LOADERS_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_pretok {
    LOOM_PRETOK_DEFAULT = 0,
    LOOM_PRETOK_GPT2,
    LOOM_PRETOK_LLAMA3,
    LOOM_PRETOK_QWEN2,
    LOOM_PRETOK_DEEPSEEK_LLM,
    LOOM_PRETOK_DEEPSEEK_CODER,
    LOOM_PRETOK_FALCON,
    LOOM_PRETOK_STARCODER,
    LOOM_PRETOK_COUNT
} loom_pretok;

/* What a tokenizer.ggml.pre name selects. */
typedef struct loom_pretok_info {
    const char *name;     /* as written in GGUF files */
    loom_pretok type;     /* the split */
    bool ignore_merges;   /* a word that is a whole token is taken as is (llama3) */
    bool add_bos;         /* default of tokenizer.ggml.add_bos_token */
} loom_pretok_info;

/* The entry for name, or NULL when it is not supported. */
const loom_pretok_info *loom_pretok_find(const char *name);
/* Comma-separated list of every supported name, for error messages. */
const char *loom_pretok_names(void);
/* A short name of the split ("gpt-2", "llama3", ...). */
const char *loom_pretok_type_name(loom_pretok p);

/* Splits cps[0..n) into words. ends receives each word's end index (exclusive, in codepoints),
 * in order; the last is n. ends and scratch must each hold n entries. Returns the word count
 * (0 when n == 0). Every codepoint belongs to exactly one word. */
size_t loom_pretok_split(loom_pretok p, const uint32_t *cps, size_t n, size_t *ends,
                         size_t *scratch);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_LOADERS_PRETOK_H */
