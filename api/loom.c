/* loom.c: the C API of include/loom.h: models (GGUF -> lowered graph, or a protobuf graph
 * checked against its GGUF), sessions (an executor plus the position bookkeeping), generation.
 *
 * Invariants: a model owns its GGUF mapping and its verified graph; every weight the graph
 * references was checked against the mapped file (name, type, shape, offset, size) when a
 * session binds it, so kernels never read outside the file. A session's pos counts the tokens
 * whose keys/values are in the cache; a failed eval leaves pos (and so what later steps see)
 * as it was.
 */
#include "loom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/loom_impl.h"
#include "executor/cuda_backend.h"
#include "executor/executor.h"
#include "ir/serialize/serialize.h"
#include "loaders/gguf.h"
#include "loaders/graph_check.h"
#include "loaders/lower.h"
#include "passes/passes.h"

struct loom_model {
    loom_gguf *gguf;
    loom_ir_graph *graph;
    char arch[16];
    int32_t n_vocab, n_ctx, max_tokens;
    bool last_only; /* logits f32[1,n_vocab] of the step's last token (input `last_row`) */
    uint32_t t_index;          /* symbol T's index (step sizes), resolved once at load */
    loom_ir_value_id logits_v; /* the `logits` output, resolved once at load */
};

struct loom_session {
    loom_model *m;
    loom_exec *exec;
    int32_t n_ctx, pos;
    float *logits; /* [rows][n_vocab] of the last eval, when read into our own buffer */
    const float *view; /* or: the executor's view of the logits output (a mapped output) */
    int32_t rows;
    size_t logits_cap; /* floats */
    int32_t *positions; /* [max_tokens] */
};

/* ---------------------------------------------------------------- models */

void loom_model_options_init(loom_model_options *o) {
    memset(o, 0, sizeof *o);
    o->passes = "-O2";
}

static int64_t meta_int(const loom_ir_graph *g, const char *key, int64_t dflt) {
    const loom_ir_meta *m = loom_ir_meta_get(g, key);
    return m && m->kind == LOOM_IR_META_INT ? m->i : dflt;
}

/* Reads the facts the API needs from the graph: the `logits` output [T, n_vocab], the `tokens`
 * and `positions` inputs, symbol T, and the KV length from the metadata. */
static loom_status model_describe(loom_model *m, loom_error *err) {
    const loom_ir_graph *g = m->graph;
    loom_ir_value_id lv = loom_ir_find_output(g, "logits");
    loom_ir_value_id tv = loom_ir_find_value(g, "tokens");
    loom_ir_value_id pv = loom_ir_find_value(g, "positions");
    int64_t T = loom_ir_symbol_find(g, "T");
    if (lv == LOOM_IR_NO_VALUE || tv == LOOM_IR_NO_VALUE || pv == LOOM_IR_NO_VALUE || !T)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "model: the graph lacks the step interface (symbol T, inputs "
                              "'tokens' and 'positions', output 'logits')");
    const loom_ir_value *l = loom_ir_value_get(g, lv);
    loom_ir_value_id last = loom_ir_find_value(g, "last_row");
    m->last_only = last != LOOM_IR_NO_VALUE;
    if (loom_ir_input_count(g) != 2u + m->last_only)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "model: the graph has %u inputs; the step interface has tokens, "
                              "positions and optionally last_row",
                              loom_ir_input_count(g));
    if (l->type.dtype != LOOM_IR_F32 || l->type.rank != 2 ||
        l->type.dims[0] != (m->last_only ? 1 : T) ||
        l->type.dims[1] < 1 || l->type.dims[1] > INT32_MAX)
        return loom_error_set(err, LOOM_ERR_FORMAT, "model: output 'logits' is not f32[%s,n_vocab]",
                              m->last_only ? "1" : "T");
    m->n_vocab = (int32_t)l->type.dims[1];
    m->t_index = loom_ir_dim_sym_index(T);
    m->logits_v = lv;
    m->max_tokens = (int32_t)loom_ir_symbol_at(g, loom_ir_dim_sym_index(T))->max;
    m->n_ctx = (int32_t)meta_int(g, "loom.n_ctx", 0);
    if (m->n_ctx < 1) {
        /* No metadata: the first state value's rows are the context length. */
        if (loom_ir_state_count(g) == 0)
            return loom_error_set(err, LOOM_ERR_FORMAT, "model: the graph states no context length");
        m->n_ctx = (int32_t)loom_ir_value_get(g, loom_ir_state_at(g, 0))->type.dims[0];
    }
    const loom_ir_meta *a = loom_ir_meta_get(g, "loom.arch");
    snprintf(m->arch, sizeof m->arch, "%s", a && a->kind == LOOM_IR_META_STRING ? a->s : "?");
    return LOOM_OK;
}

/* The weight resolver handed to the executor: the tensor of the mapped GGUF that w names, after
 * checking it is exactly what the graph says. */
static loom_status resolve_weight(void *ctx, const loom_ir_value *w, const void **data,
                                  loom_error *err) {
    const loom_gguf *g = ctx;
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, w->name);
    if (!t)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                              "weight '%s': no such tensor in the GGUF file", w->name);
    bool same_shape = t->n_dims == w->type.rank;
    for (uint32_t i = 0; same_shape && i < t->n_dims; i++)
        same_shape = t->ne[i] == w->type.dims[w->type.rank - 1 - i];
    if ((uint32_t)t->type != (uint32_t)w->type.dtype || !same_shape ||
        t->file_offset != w->offset || t->nbytes != w->size)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "weight '%s': the graph says type %u, offset %llu, %llu bytes; the "
                              "GGUF has type %u, offset %llu, %llu bytes%s",
                              w->name, (unsigned)w->type.dtype, (unsigned long long)w->offset,
                              (unsigned long long)w->size, (unsigned)t->type,
                              (unsigned long long)t->file_offset, (unsigned long long)t->nbytes,
                              same_shape ? "" : " (and another shape)");
    *data = t->data;
    return LOOM_OK;
}

/* A protobuf graph: loads it, finds its GGUF (gguf_path, else source.file next to the graph),
 * and checks the two belong together. */
static loom_status load_graph_file(loom_model *m, const char *path, const char *gguf_path,
                                   loom_error *err) {
    loom_status st = loom_ir_load(path, &m->graph, err);
    if (st) return st;
    char buf[4096];
    if (!gguf_path) {
        const loom_ir_meta *name = loom_ir_meta_get(m->graph, "source.file");
        if (!name || name->kind != LOOM_IR_META_STRING)
            return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                                  "the graph names no source GGUF file; give it in "
                                  "loom_model_options.gguf_path (loom run: -m)");
        const char *slash = strrchr(path, '/');
        int dir = slash ? (int)(slash - path + 1) : 0;
        snprintf(buf, sizeof buf, "%.*s%s", dir, path, name->s);
        gguf_path = buf;
    }
    if ((st = loom_gguf_open(gguf_path, &m->gguf, err))) {
        if (gguf_path == buf)
            loom_error_prefix(err, "the graph's source GGUF (give another in "
                                   "loom_model_options.gguf_path; loom run: -m): ");
        return st;
    }
    if ((st = loom_ir_check_against_gguf(m->graph, m->gguf, err)))
        loom_error_prefix(err, "checking against %s: ", gguf_path);
    return st;
}

static bool is_gguf_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    if (!f) return false;
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(magic, "GGUF", 4);
}

/* Loads path (a GGUF when gguf is given or the file says so; gguf, already opened from path,
 * is taken over). */
static loom_status model_load(const char *path, loom_gguf *gguf, const loom_model_options *opts,
                              loom_model **out, loom_error *err) {
    *out = NULL;
    if (!path) {
        loom_gguf_close(gguf);
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "model: no path given");
    }
    loom_model_options o;
    loom_model_options_init(&o);
    if (opts) o = *opts;
    loom_model *m = calloc(1, sizeof *m);
    if (!m) {
        loom_gguf_close(gguf);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "model: out of memory");
    }
    m->gguf = gguf;
    loom_status st;
    if (gguf || is_gguf_file(path)) {
        loom_lower_options lo;
        loom_lower_options_init(&lo);
        lo.max_tokens = o.max_tokens;
        lo.n_ctx = o.n_ctx;
        lo.source_path = path;
        if (o.cache_type != LOOM_CACHE_F32 && o.cache_type != LOOM_CACHE_F16) {
            st = loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "model: unknown cache type %d",
                                (int)o.cache_type);
            goto fail;
        }
        lo.kv_dtype = o.cache_type == LOOM_CACHE_F16 ? LOOM_IR_F16 : LOOM_IR_F32;
        lo.last_logits_only = o.last_logits_only;
        if ((!m->gguf && (st = loom_gguf_open(path, &m->gguf, err))) ||
            (st = loom_lower_gguf(m->gguf, &lo, &m->graph, err)))
            goto fail;
        if (o.passes && *o.passes && (st = loom_pass_run_pipeline(m->graph, o.passes, true, err)))
            goto fail;
    } else {
        if ((st = load_graph_file(m, path, o.gguf_path, err))) goto fail;
    }
    if ((st = model_describe(m, err))) goto fail;
    *out = m;
    return LOOM_OK;
fail:
    if (err) loom_error_prefix(err, "loading %s: ", path);
    loom_model_destroy(m);
    return st;
}

loom_status loom_model_load(const char *path, const loom_model_options *opts, loom_model **out,
                            loom_error *err) {
    return model_load(path, NULL, opts, out, err);
}

loom_status loom_model_load_gguf(loom_gguf *gguf, const char *path,
                                 const loom_model_options *opts, loom_model **out,
                                 loom_error *err) {
    if (!gguf) {
        *out = NULL;
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "model: no GGUF given");
    }
    return model_load(path, gguf, opts, out, err);
}

void loom_model_destroy(loom_model *m) {
    if (!m) return;
    loom_ir_graph_destroy(m->graph);
    loom_gguf_close(m->gguf);
    free(m);
}

int32_t loom_model_n_vocab(const loom_model *m) { return m->n_vocab; }
int32_t loom_model_n_ctx(const loom_model *m) { return m->n_ctx; }
int32_t loom_model_max_tokens(const loom_model *m) { return m->max_tokens; }
const char *loom_model_arch(const loom_model *m) { return m->arch; }
const loom_ir_graph *loom_model_graph(const loom_model *m) { return m->graph; }
const loom_gguf *loom_model_gguf(const loom_model *m) { return m->gguf; }

/* ---------------------------------------------------------------- sessions */

void loom_session_options_init(loom_session_options *o) {
    memset(o, 0, sizeof *o);
    o->cuda_graphs = -1;
}

/* The CUDA backend is linked only into binaries that list //executor:cuda; elsewhere these
 * weak references are NULL and a CUDA session is refused with a clear message. */
extern loom_status loom_exec_cuda_backend_create(const loom_cuda_backend_options *o,
                                                 loom_exec_backend **out, loom_error *err)
    __attribute__((weak));
extern bool loom_exec_cuda_backend_info(loom_exec_backend *b, loom_cuda_backend_info *out)
    __attribute__((weak));

/* The backend a session asks for. */
static loom_status make_backend(const loom_session_options *o, loom_exec_backend **be,
                                loom_error *err) {
    if (o->backend == LOOM_BACKEND_CPU) {
        if (o->kv != LOOM_SESSION_KV_AS_MODEL)
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "the INT8 KV cache needs the cuda backend");
        return loom_exec_cpu_backend_create(o->n_threads, be, err);
    }
    if (o->backend != LOOM_BACKEND_CUDA)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "unknown backend %d (cpu, cuda)",
                              (int)o->backend);
    if (!loom_exec_cuda_backend_create)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "this program was built without the CUDA backend "
                              "(link //executor:cuda); use the cpu backend");
    loom_cuda_backend_options co;
    memset(&co, 0, sizeof co);
    co.device = o->device;
    co.kv_int8 = o->kv == LOOM_SESSION_KV_INT8;
    co.weights = o->weights == LOOM_SESSION_WEIGHTS_COPY     ? LOOM_CUDA_WEIGHTS_COPY
                 : o->weights == LOOM_SESSION_WEIGHTS_MAPPED ? LOOM_CUDA_WEIGHTS_MAPPED
                                                             : LOOM_CUDA_WEIGHTS_AUTO;
    co.graphs = o->cuda_graphs;
    co.progress = o->progress;
    co.progress_ctx = o->progress_ctx;
    return loom_exec_cuda_backend_create(&co, be, err);
}

loom_status loom_backend_available(loom_backend_kind backend, loom_error *err) {
    if (backend == LOOM_BACKEND_CPU) return LOOM_OK;
    loom_session_options o;
    loom_session_options_init(&o);
    o.backend = backend;
    loom_exec_backend *be = NULL;
    loom_status st = make_backend(&o, &be, err);
    loom_exec_backend_destroy(be);
    return st;
}

loom_status loom_session_create(loom_model *m, const loom_session_options *opts,
                                loom_session **out, loom_error *err) {
    *out = NULL;
    if (!m) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "session: no model");
    loom_session_options o;
    loom_session_options_init(&o);
    if (opts) o = *opts;
    if (o.n_streams < 0 || o.n_streams > 16)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "session: %d streams is outside 0..16", o.n_streams);
    if (o.n_ctx < 0 || o.n_ctx > m->n_ctx)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "session: context length %d is outside 1..%d (the graph's KV cache; "
                              "lower the model with a larger n_ctx)",
                              o.n_ctx, m->n_ctx);
    loom_session *s = calloc(1, sizeof *s);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "session: out of memory");
    s->m = m;
    s->n_ctx = o.n_ctx ? o.n_ctx : m->n_ctx;
    s->positions = calloc((size_t)m->max_tokens, sizeof *s->positions);
    loom_exec_backend *be = NULL;
    loom_status st;
    if (!s->positions) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "session: out of memory");
        goto fail;
    }
    loom_exec_options eo;
    loom_exec_options_init(&eo);
    eo.n_streams = o.n_streams > 1 ? (uint32_t)o.n_streams : 1;
    if ((st = make_backend(&o, &be, err)) ||
        (st = loom_exec_create_ex(m->graph, be, resolve_weight, m->gguf, &eo, &s->exec, err)))
        goto fail;
    *out = s;
    return LOOM_OK;
fail:
    loom_error_prefix(err, "session: ");
    loom_session_destroy(s);
    return st;
}

void loom_session_destroy(loom_session *s) {
    if (!s) return;
    loom_exec_host_free(s->exec, s->logits);
    loom_exec_destroy(s->exec);
    free(s->positions);
    free(s);
}

loom_status loom_session_eval(loom_session *s, const int32_t *tokens, int32_t n, loom_error *err) {
    int32_t V = s->m->n_vocab;
    if (n < 1 || !tokens)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "eval: empty prompt (need at least one token)");
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "eval: token %d at index %d is outside the vocabulary 0..%d",
                                  tokens[i], i, V - 1);
    if ((int64_t)s->pos + n > s->n_ctx)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "eval: %d tokens after %d would exceed the context length %d", n,
                              s->pos, s->n_ctx);
    /* A mapped logits output holds the answer itself when one step makes all of it: the last
     * row only, or every row of a prompt of one step. */
    const bool direct = loom_exec_output_mapped(s->exec, s->m->logits_v) &&
                        (s->m->last_only || n <= s->m->max_tokens);
    size_t need = (size_t)(s->m->last_only ? 1 : n) * (size_t)V;
    if (!direct && need > s->logits_cap) {
        /* The backend's host memory: on CUDA the logits download lands there directly. */
        float *p = loom_exec_host_alloc(s->exec, need * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "eval: out of memory for logits");
        loom_exec_host_free(s->exec, s->logits);
        s->logits = p;
        s->logits_cap = need;
    }
    s->rows = 0;
    s->view = NULL;
    for (int32_t done = 0; done < n;) {
        int32_t T = n - done < s->m->max_tokens ? n - done : s->m->max_tokens;
        for (int32_t t = 0; t < T; t++) s->positions[t] = s->pos + done + t;
        int64_t sym[LOOM_IR_MAX_SYMBOLS] = {0};
        sym[s->m->t_index] = T;
        int32_t last_row = T - 1;
        loom_exec_binding in[3] = {{"tokens", tokens + done},
                                   {"positions", s->positions},
                                   {"last_row", &last_row}};
        loom_status st = loom_exec_run(s->exec, sym, in, 2 + s->m->last_only, err);
        if (!st && !direct) {
            /* Last-only logits: each chunk overwrites row 0; the final chunk's is the answer. */
            float *dst = s->logits + (s->m->last_only ? 0 : (size_t)done * V);
            size_t rows = s->m->last_only ? 1 : (size_t)T;
            st = loom_exec_read_value(s->exec, s->m->logits_v, dst, rows * V * sizeof(float),
                                      NULL, err);
        }
        if (st) {
            loom_error_prefix(err, "eval at position %d: ", s->pos + done);
            return st;
        }
        done += T;
    }
    if (direct) s->view = loom_exec_output_view(s->exec, s->m->logits_v);
    s->rows = s->m->last_only ? 1 : n;
    s->pos += n;
    return LOOM_OK;
}

const float *loom_session_logits(const loom_session *s, int32_t *n_rows) {
    if (n_rows) *n_rows = s->rows;
    return !s->rows ? NULL : s->view ? s->view : s->logits;
}

int32_t loom_session_pos(const loom_session *s) { return s->pos; }

void loom_session_get_stats(loom_session *s, loom_session_stats *out) {
    memset(out, 0, sizeof *out);
    loom_exec_stats es;
    loom_exec_get_stats(s->exec, &es);
    out->weight_bytes = es.weight_bytes;
    out->kv_bytes = es.state_bytes;
    out->activation_bytes = es.activation_bytes;
    loom_cuda_backend_info ci;
    if (loom_session_cuda_info(s, &ci)) {
        out->graph_instantiations = ci.graph_instantiations;
        out->graph_updates = ci.graph_updates;
        out->graph_launches = ci.graph_launches;
    }
}

void loom_session_exec_stats(const loom_session *s, loom_exec_stats *out) {
    loom_exec_get_stats(s->exec, out);
}

bool loom_session_cuda_info(loom_session *s, loom_cuda_backend_info *out) {
    memset(out, 0, sizeof *out);
    return loom_exec_cuda_backend_info &&
           loom_exec_cuda_backend_info(loom_exec_get_backend(s->exec), out);
}

loom_status loom_session_copy_bandwidth(loom_session *s, double *gbs, loom_error *err) {
    return loom_exec_backend_copy_bandwidth(loom_exec_get_backend(s->exec), gbs, err);
}

void loom_session_reset(loom_session *s) {
    /* Attention reads only rows 0..pos, each rewritten before it is read again, so forgetting
     * the tokens needs no clearing of the cache. */
    s->pos = 0;
    s->rows = 0;
}

/* ---------------------------------------------------------------- generation */

loom_status loom_generate(loom_session *s, const int32_t *prompt, int32_t n_prompt,
                          int32_t n_gen, loom_sampler *sampler, loom_token_fn stop_at,
                          void *stop_ctx, int32_t *out, int32_t *n_out, loom_error *err) {
    int32_t made = 0;
    if (!n_out) n_out = &made;
    *n_out = 0;
    if (n_gen < 0 || (n_gen > 0 && !out))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "generate: n_gen %d needs n_gen >= 0 and room for the tokens", n_gen);
    loom_status st = loom_session_eval(s, prompt, n_prompt, err);
    if (st) return st;
    int32_t V = s->m->n_vocab;
    for (int32_t i = 0; i < n_gen; i++) {
        const float *last = loom_session_logits(s, NULL) + (size_t)(s->rows - 1) * V;
        int32_t tok = loom_sampler_sample(sampler, last, V);
        out[(*n_out)++] = tok;
        if (stop_at && stop_at(stop_ctx, tok)) break;
        if (i + 1 < n_gen && (st = loom_session_eval(s, &tok, 1, err))) return st;
    }
    return LOOM_OK;
}
