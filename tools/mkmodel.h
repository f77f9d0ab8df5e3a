/* mkmodel.h: deterministic random-weight GGUF models with llama.cpp's keys and tensor names
 * (the engine behind `loom mkmodel`; tests call it directly).
 *
 *   loom_mkmodel_config c;
 *   loom_mkmodel_config_init(&c, "qwen3");
 *   c.n_layer = 4;
 *   loom_error err = {0};
 *   if (loom_mkmodel_write(&c, "m.gguf", &err)) fprintf(stderr, "%s\n", err.msg);
 *
 * Determinism: every value is a function of (seed, tensor index, row, column) alone, so the same
 * config writes the same bytes whatever the thread count. Weights: matrices ~ N(0, 0.02^2), norm
 * vectors ~ N(1, 0.1^2), drawn from a cheap approximate Gaussian (sum of four uniforms; |x| <
 * 3.47 sigma), which keeps activations finite through any depth the CLI allows.
 */
#ifndef LOOM_TOOLS_MKMODEL_H
#define LOOM_TOOLS_MKMODEL_H

#include <stdint.h>

#include "kernels/quant/quant.h"
#include "loom/status.h"

typedef struct loom_mkmodel_config {
    const char *arch;   /* "llama" or "qwen3" (qwen3 adds attn_q_norm / attn_k_norm) */
    uint32_t n_layer;   /* block_count */
    uint32_t n_embd;    /* embedding_length (hidden) */
    uint32_t n_ff;      /* feed_forward_length */
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;  /* key_length = value_length = rope.dimension_count */
    uint32_t n_vocab;   /* >= 258: 256 byte tokens, ..., <|endoftext|>, <|im_end|> */
    uint32_t n_ctx;     /* context_length */
    const char *quant;  /* q4_k_m, q4_k, q5_k, q6_k, q8_0, f16 or f32 */
    uint64_t seed;
    int n_threads;      /* <= 0: one per online core */
} loom_mkmodel_config;

/* Fills c with the defaults for arch (a tiny model shaped like the golden test models: 2
 * layers, hidden 256, ffn 768, 4 heads / 2 KV heads, head_dim 64, vocab 512, ctx 4096, q4_k_m,
 * seed 1). arch is stored as given. */
void loom_mkmodel_config_init(loom_mkmodel_config *c, const char *arch);

/* Checks a config: LOOM_ERR_INVALID_ARGUMENT with a message naming the bad field. */
loom_status loom_mkmodel_check(const loom_mkmodel_config *c, loom_error *err);

/* The ggml type mkmodel stores for tensor `name` (e.g. "blk.3.ffn_down.weight") of a model with
 * this config, whose rows hold row_len values. Q4_K_M follows llama.cpp: Q6_K for output.weight
 * and for attn_v / ffn_down in the layers llama.cpp's use_more_bits picks (the first and last
 * eighth and every third layer between), Q4_K for the other matrices; norms are F32. A K-quant
 * whose 256-value block does not divide row_len falls back to Q8_0 (or F16 if 32 does not
 * divide it either). */
loom_ggml_type loom_mkmodel_tensor_type(const loom_mkmodel_config *c, const char *name, int64_t row_len);

/* Writes the model to path (through PATH.tmp, renamed on success). LOOM_ERR_INVALID_ARGUMENT
 * for a bad config, LOOM_ERR_IO / LOOM_ERR_OUT_OF_MEMORY with a message otherwise. */
loom_status loom_mkmodel_write(const loom_mkmodel_config *c, const char *path, loom_error *err);

#endif /* LOOM_TOOLS_MKMODEL_H */
