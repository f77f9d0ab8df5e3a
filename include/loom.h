/* loom.h: loom's public C API (first version): load a model, run it on a backend, sample tokens.
 *
 * A model (loom_model) is a verified step graph plus the GGUF file its weights live in (mapped
 * read-only, never copied). It comes from a GGUF file (lowered from its metadata) or from a
 * protobuf graph written by `loom compile` (checked against its GGUF before use). A session
 * (loom_session) runs a model on one backend and holds the KV cache: tokens are evaluated in
 * steps of up to loom_model_max_tokens() at positions pos..pos+T-1, after which the logits of
 * every token of the last call can be read. A sampler (loom_sampler) picks the next token from
 * a logits row: greedy, or temperature / top-k / top-p with a seed (deterministic per seed).
 *
 *   loom_error err = {0};
 *   loom_model *m = NULL; loom_session *s = NULL;
 *   if (loom_model_load("model.gguf", NULL, &m, &err) ||
 *       loom_session_create(m, NULL, &s, &err)) { fprintf(stderr, "%s\n", err.msg); ... }
 *   int32_t prompt[] = {1, 403, 407}, out[16]; int32_t n_out = 0;
 *   loom_generate(s, prompt, 3, 16, NULL, NULL, NULL, out, &n_out, &err);  // greedy
 *   loom_session_destroy(s); loom_model_destroy(m);
 *
 * Errors: every fallible call returns a loom_status (LOOM_OK = 0) and writes a message into the
 * caller's loom_error (may be NULL). Nothing in the library exits or prints.
 * Ownership: every handle is created by a _load/_create call and freed by its _destroy
 * (destroy(NULL) is a no-op). A session borrows its model: destroy sessions before the model.
 * Threads: one session per thread is safe; a model may be shared by sessions on several threads
 * (it is immutable after load). The process-wide state loom uses is the CPU kernels' thread
 * pool, whose size the last session created with a non-zero n_threads sets (results never
 * depend on it), and on CUDA the kernels' device scratch and split counters, with a lock and a
 * count of CUDA sessions around them: a CUDA step holds the lock from its launch to its end, so
 * concurrent CUDA evals run one after another, and the last CUDA session destroyed frees the
 * scratch.
 * Backends: cpu always; cuda (session option) when a usable GPU is present, with several
 * streams, CUDA graphs for decode steps, F16/F32 or INT8 KV; see executor/cuda_backend.h.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_model loom_model;
typedef struct loom_session loom_session;
typedef struct loom_sampler loom_sampler;

/* ---- models ---------------------------------------------------------------------------- */

/* Element type of the KV cache (part of the graph: the cache is graph state). */
typedef enum loom_cache_type {
    LOOM_CACHE_F32 = 0, /* exact: reproduces F32 references within 1e-4 of the logit range */
    LOOM_CACHE_F16 = 1, /* half the memory; within 1e-2 of the logit range */
} loom_cache_type;

typedef struct loom_model_options {
    /* For a protobuf graph: the GGUF holding its weights. NULL: the file named in the graph,
     * looked up next to the graph. Ignored for a GGUF. */
    const char *gguf_path;
    /* Lowering (GGUF only): largest step T (0: 512) and context length (0: the model's
     * context_length, capped at 4096). */
    int32_t max_tokens;
    int32_t n_ctx;
    /* GGUF only: pass pipeline applied after lowering (passes/passes.h): comma-separated names
     * ("fuse-qkv,dce") or a level ("-O2" the default optimizations, "-O0"). Default (options_init,
     * and opts == NULL): "-O2". NULL or "": none.
     * An unknown name is LOOM_ERR_INVALID_ARGUMENT listing the known passes. */
    const char *passes;
    /* KV cache element type (GGUF only; a protobuf graph keeps the one it was compiled with). */
    loom_cache_type cache_type;
    /* GGUF only: compute the logits of each eval's last token only (loom_session_logits then
     * returns one row). Saves the output projection of every other prompt token. */
    bool last_logits_only;
} loom_model_options;

/* Fills opts with the defaults above. */
void loom_model_options_init(loom_model_options *opts);

/* Loads path: a `.gguf` is lowered from its metadata, anything else is read as a protobuf graph
 * (LOOM_ERR_UNSUPPORTED while loom is built without the serializer). opts may be NULL.
 * On failure *out is NULL and err says what and where. */
loom_status loom_model_load(const char *path, const loom_model_options *opts, loom_model **out,
                            loom_error *err);
void loom_model_destroy(loom_model *m); /* NULL is a no-op */

int32_t loom_model_n_vocab(const loom_model *m);
int32_t loom_model_n_ctx(const loom_model *m);      /* context length the graph was built for */
int32_t loom_model_max_tokens(const loom_model *m); /* largest T of one step */
const char *loom_model_arch(const loom_model *m);   /* "llama", "qwen2", "qwen3"; owned by m */

/* ---- sessions -------------------------------------------------------------------------- */

typedef enum loom_backend_kind {
    LOOM_BACKEND_CPU = 0,
    LOOM_BACKEND_CUDA = 1, /* without a usable GPU: LOOM_ERR_UNSUPPORTED at session create */
} loom_backend_kind;

/* KV cache storage of a session (CUDA): the model's cache type, or int8 rows with one float
 * scale per (position, KV head) (looser accuracy, see the README). */
typedef enum loom_session_kv {
    LOOM_SESSION_KV_AS_MODEL = 0,
    LOOM_SESSION_KV_INT8 = 1,
} loom_session_kv;

/* Where a CUDA session's weights live: AUTO maps the file's memory on integrated GPUs (Jetson)
 * and copies it to device memory on discrete ones; COPY / MAPPED force one. */
typedef enum loom_session_weights {
    LOOM_SESSION_WEIGHTS_AUTO = 0,
    LOOM_SESSION_WEIGHTS_COPY = 1,
    LOOM_SESSION_WEIGHTS_MAPPED = 2,
} loom_session_weights;

typedef struct loom_session_options {
    loom_backend_kind backend;
    int32_t n_ctx;     /* KV cache length; 0: the model's n_ctx (may not exceed it) */
    int32_t n_threads; /* CPU threads; 0: as they are (one per online core by default) */
    int32_t n_streams; /* 0 or 1: serial; 2..16: independent branches on several CUDA streams
                        * (the CPU backend runs them in order, same results) */
    loom_session_kv kv;             /* CUDA only */
    loom_session_weights weights;   /* CUDA only */
    int32_t cuda_graphs;            /* -1 (default): on unless LOOM_CUDA_GRAPHS=0; 0 off; 1 on */
    int32_t device;                 /* CUDA device ordinal */
    /* Optional: loading progress (bytes of weights made visible to the device so far). */
    void (*progress)(void *ctx, uint64_t bytes_done);
    void *progress_ctx;
} loom_session_options;

void loom_session_options_init(loom_session_options *opts);

/* LOOM_OK when `backend` can run here: cpu always; cuda when a usable GPU and driver are
 * present (otherwise LOOM_ERR_UNSUPPORTED saying why). Cheap; nothing stays allocated. */
loom_status loom_backend_available(loom_backend_kind backend, loom_error *err);

/* Creates a session over m (borrowed; m must outlive it) and allocates its KV cache.
 * opts may be NULL. */
loom_status loom_session_create(loom_model *m, const loom_session_options *opts,
                                loom_session **out, loom_error *err);
void loom_session_destroy(loom_session *s); /* NULL is a no-op */

/* Evaluates n tokens at positions pos..pos+n-1 (pos = loom_session_pos before the call),
 * in steps of at most loom_model_max_tokens, and advances pos by n. Refused, leaving the
 * session unchanged: n < 1, a token outside [0, n_vocab), pos + n > n_ctx (LOOM_ERR_LIMIT). */
loom_status loom_session_eval(loom_session *s, const int32_t *tokens, int32_t n, loom_error *err);

/* The logits of the tokens of the last successful eval: row-major [*n_rows][n_vocab] floats,
 * owned by the session, valid until its next eval/reset/destroy; one row per token, or only the
 * last token's row when the model computes last logits only. NULL (and *n_rows 0) before any
 * eval and after an eval that failed while running (a refused eval keeps the earlier ones).
 * n_rows may be NULL. */
const float *loom_session_logits(const loom_session *s, int32_t *n_rows);

int32_t loom_session_pos(const loom_session *s); /* tokens held in the KV cache */

/* What a session holds and did, for reports and tests. */
typedef struct loom_session_stats {
    uint64_t weight_bytes;     /* weights bound (mapped or copied to the device) */
    uint64_t kv_bytes;         /* KV cache as stored (INT8: int8 rows + scales) */
    uint64_t activation_bytes; /* the activation arena */
    /* CUDA sessions (0 elsewhere): decode-step CUDA graphs instantiated, updated in place after
     * a re-capture, and launched (the first capture and every replay). With graphs on, a
     * generation instantiates once and replays every later decode step: 1, 0, decode steps. */
    uint64_t graph_instantiations, graph_updates, graph_launches;
} loom_session_stats;
void loom_session_get_stats(loom_session *s, loom_session_stats *out);
/* Forgets every token (pos = 0). */
void loom_session_reset(loom_session *s);

/* ---- sampling -------------------------------------------------------------------------- */

typedef struct loom_sampler_options {
    float temperature; /* <= 0: greedy (argmax, lowest id on ties) */
    int32_t top_k;     /* 0: no top-k filter */
    float top_p;       /* >= 1: no nucleus filter */
    uint64_t seed;
} loom_sampler_options;

void loom_sampler_options_init(loom_sampler_options *opts); /* greedy, seed 0 */
loom_status loom_sampler_create(const loom_sampler_options *opts, loom_sampler **out,
                                loom_error *err);
void loom_sampler_destroy(loom_sampler *s); /* NULL is a no-op */
/* Picks a token from logits[0..n_vocab). Deterministic for a given seed and call sequence. */
int32_t loom_sampler_sample(loom_sampler *s, const float *logits, int32_t n_vocab);

/* Evaluates the prompt as one prefill (chunked by max_tokens), then samples n_gen tokens, each
 * evaluated as one decode step (the last one is not evaluated). sampler NULL: greedy.
 * out (caller-owned, room for n_gen ids) receives the tokens; *n_out how many were made (the
 * count made so far also on failure). Stops early when stop_at(ctx, token) returns true
 * (stop_at may be NULL); the stopping token is included in out. The prompt extends whatever
 * the session already holds. */
typedef bool (*loom_token_fn)(void *ctx, int32_t token);
loom_status loom_generate(loom_session *s, const int32_t *prompt, int32_t n_prompt,
                          int32_t n_gen, loom_sampler *sampler, loom_token_fn stop_at,
                          void *stop_ctx, int32_t *out, int32_t *n_out, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
