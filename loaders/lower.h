/* lower.h: builds loom's step graph of a decoder from a GGUF file's metadata.
 *
 * Supported architectures: `llama` (also Mistral-style files), `qwen2` (Q/K/V biases) and
 * `qwen3` (per-head Q/K RMSNorm). The graph is one decoder step: graph inputs `tokens` (i32[T])
 * and `positions` (i32[T], the absolute positions pos..pos+T-1 of the tokens), output `logits`
 * (f32[T, n_vocab], one row per token; f32[1, n_vocab] with last_logits_only), state `kv.<layer>.k` / `kv.<layer>.v` (the KV cache,
 * f32[n_ctx, n_head_kv * head_dim]) written by kv_write and read by attention. T is the symbol
 * bound at run time, at most max_tokens; n_ctx is the context length the cache holds. Ops are
 * the unfused primitives (the fusion passes rewrite them later); weights are references to the
 * GGUF's tensors (never copied). The hyperparameters are stored in the graph's metadata under
 * keys loom.arch, loom.n_layer, loom.n_embd, loom.n_ff, loom.n_head, loom.n_head_kv,
 * loom.head_dim, loom.n_vocab, loom.n_rot, loom.n_ctx, loom.n_ctx_train, loom.max_tokens,
 * loom.rms_eps, loom.rope_freq_base, loom.rope_freq_scale, loom.rope_mode ("norm"/"neox"),
 * loom.tied_output; the source file as source.file, source.size and source.checksum (16 hex
 * digits of FNV-1a 64 over the file's bytes [0, data offset): header, metadata, tensor infos).
 *
 *   loom_gguf *g; loom_ir_graph *graph;
 *   loom_lower_options o; loom_lower_options_init(&o);
 *   if (loom_gguf_open(path, &g, &err) || loom_lower_gguf(g, &o, &graph, &err)) ...
 *
 * A file of another architecture, a missing tensor, a tensor of the wrong shape or an
 * unsupported weight type is refused (LOOM_ERR_UNSUPPORTED / LOOM_ERR_NOT_FOUND /
 * LOOM_ERR_FORMAT) with a message naming it and listing what is supported.
 */
#ifndef LOOM_LOWER_H
#define LOOM_LOWER_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_lower_options {
    int32_t max_tokens;      /* largest T of one step; 0: 512 (never more than n_ctx) */
    int32_t n_ctx;           /* KV cache length; 0: the file's context_length, capped at 4096 */
    loom_ir_dtype kv_dtype;  /* KV cache state dtype: LOOM_IR_F32 (default) or LOOM_IR_F16 */
    const char *source_path; /* the GGUF's path, recorded as metadata `source.file` (base
                                name); may be NULL */
    bool last_logits_only;   /* output only the step's last row: an extra input `last_row`
                                (i32[1], = T-1) picks it before the final norm, and `logits` is
                                f32[1,n_vocab] (prefill then skips T-1 output projections) */
} loom_lower_options;

void loom_lower_options_init(loom_lower_options *o);

/* Hyperparameters read from `<arch>.*` keys (defaults applied), as lowering uses them. */
typedef struct loom_lower_hparams {
    char arch[16];          /* "llama", "qwen2", "qwen3" */
    int32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int32_t n_rot;          /* rope.dimension_count; head_dim when absent */
    int32_t n_ctx_train;    /* context_length */
    float rms_eps;          /* layer_norm_rms_epsilon; 1e-5 when absent */
    float rope_freq_base;   /* rope.freq_base; 10000 when absent (as llama.cpp) */
    float rope_freq_scale;  /* 1 / rope.scaling.factor for linear scaling, else 1 */
    int32_t rope_neox;      /* 1: NEOX (rotate halves), 0: NORM (rotate pairs) */
    int32_t has_qkv_bias, has_qk_norm, tied_output;
} loom_lower_hparams;

/* Reads and checks the hyperparameters of g. Unknown architecture: LOOM_ERR_UNSUPPORTED listing
 * the supported ones; a missing required key: LOOM_ERR_NOT_FOUND naming it. */
loom_status loom_lower_read_hparams(const loom_gguf *g, loom_lower_hparams *hp, loom_error *err);

/* Builds the step graph of g. opts may be NULL (defaults). The graph references g's tensors by
 * name/type/shape/offset only, so it may outlive g. On failure *out is NULL. The caller owns
 * *out (loom_ir_graph_destroy). */
loom_status loom_lower_gguf(const loom_gguf *g, const loom_lower_options *opts,
                            loom_ir_graph **out, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_LOWER_H */
