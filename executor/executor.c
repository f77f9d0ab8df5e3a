/* executor.c: binding a graph to a backend, the buffer plan, and running steps.
 *
 * Every value has a root: a node result that owns a buffer is its own root; a reshape result
 * (VIEW op) has its operand's root; a kv_write result (WRITES_STATE op) has the state's root;
 * inputs, weights and state are roots with their own memory. The plan walks the program once:
 * a root's buffer is live from its defining node to the last node that reads it or any value
 * rooted in it (graph outputs: to the end). Buffers freed by earlier roots are reused by later
 * roots needing at most their size (best fit); an in-place op (ops.def flag) writes over its first
 * operand when that operand's root dies at the node and its buffer is big enough.
 * Invariant: two roots share a buffer only when their live ranges do not overlap, except the
 * in-place hand-over, where the kernel's contract allows out == in.
 */
#include "executor/executor.h"

#include <stdlib.h>
#include <string.h>

enum { NO_BUF = -1 };

typedef struct buffer {
    size_t bytes;
    void *data;
} buffer;

struct loom_exec {
    const loom_ir_graph *g;
    loom_exec_backend *be;
    uint32_t n_values;
    loom_ir_value_id *root; /* [n_values] root of each value (LOOM_IR_NO_VALUE for dead) */
    int32_t *buf_of;        /* [n_values] buffer index of node roots and inputs, else NO_BUF */
    void **ptr;             /* [n_values] memory of roots: weights, state, buffers */
    const void **host;      /* [n_values] host copy of graph inputs during a step */
    buffer *bufs;
    uint32_t n_bufs;
    uint32_t n_nodes;
    loom_ir_node_id *order; /* program order */
    int64_t sym[LOOM_IR_MAX_SYMBOLS]; /* symbols of the last step (0: none yet) */
    bool ran;
    loom_exec_stats stats;
};

static void *mem_alloc(loom_exec *e, size_t bytes, bool zero, loom_error *err) {
    void *p = NULL;
    if (e->be->vt->alloc(e->be, bytes ? bytes : 1, zero, &p, err)) return NULL;
    return p;
}

/* ---------------------------------------------------------------- plan */

static loom_ir_value_id root_of(loom_exec *e, loom_ir_value_id v) {
    return v < e->n_values ? e->root[v] : LOOM_IR_NO_VALUE;
}

static int64_t max_bytes(const loom_ir_graph *g, const loom_ir_value *v) {
    return loom_ir_type_bytes(g, &v->type, NULL);
}

/* Takes a free buffer of at least `bytes` (the smallest such), or makes a new one. */
static int32_t take_buffer(loom_exec *e, bool *is_free, size_t bytes) {
    int32_t best = NO_BUF;
    for (uint32_t i = 0; i < e->n_bufs; i++)
        if (is_free[i] && e->bufs[i].bytes >= bytes &&
            (best == NO_BUF || e->bufs[i].bytes < e->bufs[best].bytes))
            best = (int32_t)i;
    if (best != NO_BUF) {
        is_free[best] = false;
        return best;
    }
    e->bufs[e->n_bufs] = (buffer){bytes, NULL};
    is_free[e->n_bufs] = false;
    return (int32_t)e->n_bufs++;
}

static loom_status plan(loom_exec *e, loom_error *err) {
    const loom_ir_graph *g = e->g;
    uint32_t nv = e->n_values;
    loom_status st = LOOM_OK;
    int64_t *last = malloc(nv * sizeof *last);
    bool *is_free = calloc(nv + 1, sizeof *is_free);
    e->bufs = calloc(nv + 1, sizeof *e->bufs);
    if (!last || !is_free || !e->bufs) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "executor: out of memory planning");
        goto done;
    }
    for (uint32_t v = 0; v < nv; v++) {
        const loom_ir_value *val = loom_ir_value_get(g, v);
        last[v] = -1;
        e->buf_of[v] = NO_BUF;
        e->root[v] = val->kind == LOOM_IR_VALUE_DEAD ? LOOM_IR_NO_VALUE : v;
    }
    /* Roots (program order defines operands first) and last uses. */
    for (uint32_t i = 0; i < e->n_nodes; i++) {
        const loom_ir_node *n = loom_ir_node_get(g, e->order[i]);
        uint32_t flags = loom_ir_op_info_get(n->op)->flags;
        if (flags & (LOOM_IR_OPF_VIEW | LOOM_IR_OPF_WRITES_STATE)) e->root[n->out[0]] = e->root[n->in[0]];
        for (uint32_t k = 0; k < n->n_in; k++) last[root_of(e, n->in[k])] = i;
        for (uint32_t k = 0; k < n->n_out; k++)
            if (last[root_of(e, n->out[k])] < (int64_t)i) last[root_of(e, n->out[k])] = i;
    }
    for (uint32_t i = 0; i < loom_ir_output_count(g); i++)
        last[root_of(e, loom_ir_output_at(g, i, NULL))] = INT64_MAX;

    /* Graph inputs get buffers of their own (uploaded each step). */
    for (uint32_t i = 0; i < loom_ir_input_count(g); i++) {
        loom_ir_value_id v = loom_ir_input_at(g, i);
        int64_t b = max_bytes(g, loom_ir_value_get(g, v));
        if (b < 0) {
            st = loom_error_set(err, LOOM_ERR_LIMIT, "executor: input '%s' is too large",
                                loom_ir_value_get(g, v)->name);
            goto done;
        }
        e->buf_of[v] = (int32_t)e->n_bufs;
        e->bufs[e->n_bufs++] = (buffer){(size_t)b, NULL};
    }
    uint32_t first_node_buf = e->n_bufs;

    for (uint32_t i = 0; i < e->n_nodes; i++) {
        const loom_ir_node *n = loom_ir_node_get(g, e->order[i]);
        uint32_t flags = loom_ir_op_info_get(n->op)->flags;
        int32_t handed = NO_BUF; /* buffer handed from in[0] to out[0] */
        for (uint32_t k = 0; k < n->n_out; k++) {
            loom_ir_value_id o = n->out[k];
            if (e->root[o] != o) continue; /* a view or a state version */
            int64_t b = max_bytes(g, loom_ir_value_get(g, o));
            if (b < 0) {
                st = loom_error_set(err, LOOM_ERR_LIMIT,
                                    "executor: result of node %u (%s) is too large", e->order[i],
                                    loom_ir_op_info_get(n->op)->name);
                goto done;
            }
            e->stats.activation_sum += (uint64_t)b;
            loom_ir_value_id r = root_of(e, n->in[0]);
            if (k == 0 && (flags & LOOM_IR_OPF_INPLACE) && last[r] == (int64_t)i &&
                e->buf_of[r] >= (int32_t)first_node_buf && e->bufs[e->buf_of[r]].bytes >= (size_t)b) {
                e->buf_of[o] = handed = e->buf_of[r];
            } else {
                e->buf_of[o] = take_buffer(e, is_free, (size_t)b);
            }
        }
        /* Release roots whose last reader is this node (inputs first, then unused results). */
        for (uint32_t k = 0; k < n->n_in + n->n_out; k++) {
            loom_ir_value_id r = root_of(e, k < n->n_in ? n->in[k] : n->out[k - n->n_in]);
            if (last[r] != (int64_t)i || e->buf_of[r] < (int32_t)first_node_buf) continue;
            if (k < n->n_in && e->buf_of[r] == handed) continue; /* lives on as out[0] */
            is_free[e->buf_of[r]] = true;
        }
    }
    for (uint32_t i = first_node_buf; i < e->n_bufs; i++) e->stats.activation_bytes += e->bufs[i].bytes;
    e->stats.n_buffers = e->n_bufs - first_node_buf;
    for (uint32_t i = 0; i < e->n_bufs; i++) {
        e->bufs[i].data = mem_alloc(e, e->bufs[i].bytes, false, err);
        if (!e->bufs[i].data) {
            st = err && err->status ? err->status : LOOM_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    for (uint32_t v = 0; v < nv; v++)
        if (e->root[v] == v && e->buf_of[v] != NO_BUF) e->ptr[v] = e->bufs[e->buf_of[v]].data;
done:
    free(last);
    free(is_free);
    return st;
}

/* ---------------------------------------------------------------- create / destroy */

static loom_status bind_weights_and_state(loom_exec *e, loom_exec_weight_fn resolve, void *ctx,
                                          loom_error *err) {
    const loom_ir_graph *g = e->g;
    for (uint32_t i = 0; i < loom_ir_weight_count(g); i++) {
        loom_ir_value_id v = loom_ir_weight_at(g, i);
        const loom_ir_value *w = loom_ir_value_get(g, v);
        const void *host = NULL;
        loom_status st = resolve(ctx, w, &host, err);
        if (st) return st;
        if (e->be->vt->map_weight) {
            const void *mapped = NULL;
            if ((st = e->be->vt->map_weight(e->be, host, w->size, &mapped, err))) return st;
            host = mapped;
        }
        e->ptr[v] = (void *)host;
        e->stats.weight_bytes += w->size;
    }
    for (uint32_t i = 0; i < loom_ir_state_count(g); i++) {
        loom_ir_value_id v = loom_ir_state_at(g, i);
        int64_t b = max_bytes(g, loom_ir_value_get(g, v));
        if (b <= 0)
            return loom_error_set(err, LOOM_ERR_LIMIT, "executor: state '%s' is too large",
                                  loom_ir_value_get(g, v)->name);
        if (!(e->ptr[v] = mem_alloc(e, (size_t)b, true, err)))
            return err && err->status ? err->status : LOOM_ERR_OUT_OF_MEMORY;
        e->stats.state_bytes += (uint64_t)b;
    }
    return LOOM_OK;
}

loom_status loom_exec_create(const loom_ir_graph *g, loom_exec_backend *backend,
                             loom_exec_weight_fn resolve, void *resolve_ctx, loom_exec **out,
                             loom_error *err) {
    *out = NULL;
    if (!g || !backend || !resolve) {
        loom_exec_backend_destroy(backend);
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: create needs a graph, a backend and a weight resolver");
    }
    loom_status st = loom_ir_verify(g, err);
    if (st) {
        loom_error_prefix(err, "executor: ");
        loom_exec_backend_destroy(backend);
        return st;
    }
    loom_exec *e = calloc(1, sizeof *e);
    if (!e) {
        loom_exec_backend_destroy(backend);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "executor: out of memory");
    }
    e->g = g;
    e->be = backend;
    e->n_values = loom_ir_value_bound(g);
    uint32_t nv = e->n_values ? e->n_values : 1;
    e->root = calloc(nv, sizeof *e->root);
    e->buf_of = calloc(nv, sizeof *e->buf_of);
    e->ptr = calloc(nv, sizeof *e->ptr);
    e->host = calloc(nv, sizeof *e->host);
    e->order = calloc(loom_ir_node_count(g) + 1, sizeof *e->order);
    if (!e->root || !e->buf_of || !e->ptr || !e->host || !e->order) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "executor: out of memory");
        goto fail;
    }
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        if (!backend->vt->supports_op(backend, g, n)) {
            st = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                "executor: backend %s cannot run node %u (%s)", backend->vt->name,
                                id, loom_ir_op_info_get(n->op)->name);
            goto fail;
        }
        e->order[e->n_nodes++] = id;
    }
    if ((st = bind_weights_and_state(e, resolve, resolve_ctx, err)) || (st = plan(e, err)))
        goto fail;
    *out = e;
    return LOOM_OK;
fail:
    loom_exec_destroy(e);
    return st;
}

void loom_exec_destroy(loom_exec *e) {
    if (!e) return;
    const loom_ir_graph *g = e->g;
    if (e->ptr) {
        for (uint32_t i = 0; i < loom_ir_state_count(g); i++)
            e->be->vt->free(e->be, e->ptr[loom_ir_state_at(g, i)]);
        if (e->be->vt->unmap_weight)
            for (uint32_t i = 0; i < loom_ir_weight_count(g); i++)
                if (e->ptr[loom_ir_weight_at(g, i)])
                    e->be->vt->unmap_weight(e->be, e->ptr[loom_ir_weight_at(g, i)]);
    }
    if (e->bufs)
        for (uint32_t i = 0; i < e->n_bufs; i++) e->be->vt->free(e->be, e->bufs[i].data);
    loom_exec_backend_destroy(e->be);
    free(e->bufs);
    free(e->root);
    free(e->buf_of);
    free(e->ptr);
    free(e->host);
    free(e->order);
    free(e);
}

void loom_exec_backend_destroy(loom_exec_backend *b) {
    if (b) b->vt->destroy(b);
}

/* ---------------------------------------------------------------- running */

/* The tensor view of v for this step. */
static loom_status tensor_of(loom_exec *e, loom_ir_value_id v, loom_exec_tensor *t,
                             loom_error *err) {
    const loom_ir_value *val = loom_ir_value_get(e->g, v);
    memset(t, 0, sizeof *t);
    t->data = e->ptr[e->root[v]];
    t->host = e->host[v];
    t->dtype = val->type.dtype;
    t->rank = val->type.rank;
    t->numel = 1;
    for (uint32_t d = 0; d < val->type.rank; d++) {
        int64_t x = val->type.dims[d];
        t->dims[d] = loom_ir_dim_is_sym(x) ? e->sym[loom_ir_dim_sym_index(x)] : x;
        t->numel *= t->dims[d];
    }
    if (!t->data && t->numel)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "executor: value %u has no memory", v);
    return LOOM_OK;
}

loom_status loom_exec_run(loom_exec *e, const int64_t *sym_values, const loom_exec_binding *inputs,
                          uint32_t n_inputs, loom_error *err) {
    const loom_ir_graph *g = e->g;
    uint32_t n_sym = loom_ir_symbol_count(g);
    for (uint32_t i = 0; i < n_sym; i++) {
        const loom_ir_symbol *s = loom_ir_symbol_at(g, i);
        if (!sym_values || sym_values[i] < 1 || sym_values[i] > s->max)
            return loom_error_set(err, LOOM_ERR_LIMIT, "executor: symbol %s = %lld is outside 1..%lld",
                                  s->name, sym_values ? (long long)sym_values[i] : 0LL,
                                  (long long)s->max);
    }
    uint32_t n_in = loom_ir_input_count(g);
    for (uint32_t i = 0; i < n_in; i++) {
        loom_ir_value_id v = loom_ir_input_at(g, i);
        const char *name = loom_ir_value_get(g, v)->name;
        int found = 0;
        for (uint32_t k = 0; k < n_inputs; k++)
            if (inputs[k].name && !strcmp(inputs[k].name, name)) found++;
        if (found != 1)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "executor: graph input '%s' bound %d times (need exactly once)",
                                  name, found);
    }
    if (n_inputs != n_in)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: %u bindings for %u graph inputs", n_inputs, n_in);
    for (uint32_t i = 0; i < n_sym; i++) e->sym[i] = sym_values[i];
    e->ran = false;
    loom_status st;
    for (uint32_t i = 0; i < n_in; i++) {
        loom_ir_value_id v = loom_ir_input_at(g, i);
        const char *name = loom_ir_value_get(g, v)->name;
        const void *data = NULL;
        for (uint32_t k = 0; k < n_inputs; k++)
            if (!strcmp(inputs[k].name, name)) data = inputs[k].data;
        int64_t bytes = loom_ir_type_bytes(g, &loom_ir_value_get(g, v)->type, e->sym);
        if (!data || bytes < 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "executor: input '%s' has no data",
                                  name);
        if (e->be->vt->upload) {
            if ((st = e->be->vt->upload(e->be, e->ptr[v], data, (size_t)bytes, err))) return st;
        } else {
            memcpy(e->ptr[v], data, (size_t)bytes);
        }
        e->host[v] = data;
    }
    loom_exec_tensor in[LOOM_IR_MAX_INPUTS], out[LOOM_IR_MAX_OUTPUTS];
    for (uint32_t i = 0; i < e->n_nodes; i++) {
        const loom_ir_node *n = loom_ir_node_get(g, e->order[i]);
        for (uint32_t k = 0; k < n->n_in; k++)
            if ((st = tensor_of(e, n->in[k], &in[k], err))) goto done;
        for (uint32_t k = 0; k < n->n_out; k++)
            if ((st = tensor_of(e, n->out[k], &out[k], err))) goto done;
        if ((st = e->be->vt->run_node(e->be, g, n, in, out, err))) {
            loom_error_prefix(err, "executor: node %u (%s): ", e->order[i],
                              loom_ir_op_info_get(n->op)->name);
            goto done;
        }
    }
    if (e->be->vt->synchronize && (st = e->be->vt->synchronize(e->be, err))) goto done;
    e->ran = true;
done:
    for (uint32_t i = 0; i < n_in; i++) e->host[loom_ir_input_at(g, i)] = NULL;
    return st;
}

loom_status loom_exec_read_output(loom_exec *e, const char *name, void *dst, size_t capacity,
                                  size_t *bytes, loom_error *err) {
    if (bytes) *bytes = 0;
    loom_ir_value_id v = loom_ir_find_output(e->g, name);
    if (v == LOOM_IR_NO_VALUE)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND, "executor: the graph has no output '%s'", name);
    if (!e->ran)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: output '%s' read before a successful step", name);
    int64_t b = loom_ir_type_bytes(e->g, &loom_ir_value_get(e->g, v)->type, e->sym);
    if (b < 0 || (size_t)b > capacity)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: output '%s' needs %lld bytes, the buffer has %zu", name,
                              (long long)b, capacity);
    const void *src = e->ptr[e->root[v]];
    if (e->be->vt->download) {
        loom_status st = e->be->vt->download(e->be, dst, src, (size_t)b, err);
        if (st) return st;
    } else {
        memcpy(dst, src, (size_t)b);
    }
    if (bytes) *bytes = (size_t)b;
    return LOOM_OK;
}

loom_status loom_exec_reset_state(loom_exec *e, loom_error *err) {
    const loom_ir_graph *g = e->g;
    for (uint32_t i = 0; i < loom_ir_state_count(g); i++) {
        loom_ir_value_id v = loom_ir_state_at(g, i);
        size_t b = (size_t)max_bytes(g, loom_ir_value_get(g, v));
        void *p = e->ptr[v];
        if (!e->be->vt->upload) {
            memset(p, 0, b);
            continue;
        }
        /* A device backend: upload zeros in chunks. */
        static const char zeros[4096];
        for (size_t off = 0; off < b; off += sizeof zeros) {
            size_t n = b - off < sizeof zeros ? b - off : sizeof zeros;
            loom_status st = e->be->vt->upload(e->be, (char *)p + off, zeros, n, err);
            if (st) return st;
        }
    }
    e->ran = false;
    return LOOM_OK;
}

void loom_exec_get_stats(const loom_exec *e, loom_exec_stats *out) { *out = e->stats; }
