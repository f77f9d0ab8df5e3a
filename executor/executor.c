/* executor.c: binding a graph to a backend, memory from the plan, and running steps.
 *
 * The plan (executor/plan.h) fixes the program order, each node's stream and the events it
 * waits for, and the activation arena: every node result that owns memory is a block at an
 * offset of one arena allocation; views and state versions share their root's memory; inputs,
 * weights and state live outside the arena. At create every node must pass the backend's
 * supports_op (a pure query), then reserve_node (optional) sizes the backend's own buffers for
 * it. The executor allocates the arena once at create, points every root at its offset, and
 * runs a step as: upload the inputs, replay_step (a backend that captured an earlier step of
 * this shape replays it; then only synchronize), begin_step (the backend forks its streams),
 * per node set_stream (with the events to wait for), run_node and, where some node waits for
 * it, record; end_step (join), synchronize.
 * Backends without the stream members run the nodes in program order, which the plan's
 * lifetimes also respect.
 * Invariant: two roots share arena bytes only when the plan orders every access of one before
 * the other (tests/plan checks it by brute force), except in-place hand-overs, where the
 * kernel's contract allows out == in.
 */
#include "executor/executor.h"

#include <stdlib.h>
#include <string.h>

#include "executor/backend_common.h"
#include "executor/plan.h"

struct loom_exec {
    const loom_ir_graph *g;
    loom_exec_backend *be;
    loom_exec_plan *plan;
    uint32_t n_values;
    loom_ir_value_id *root; /* [n_values] root of each value (LOOM_IR_NO_VALUE for dead) */
    void **ptr;             /* [n_values] memory of roots: weights, state, inputs, arena blocks,
                               mapped outputs (the backend's pointer) */
    void **view;            /* [n_values] the host's view of a mapped output (map_output), else
                               NULL */
    const void **host;      /* [n_values] host copy of graph inputs during a step */
    void *in_mem;           /* the graph inputs' memory: one allocation, one upload a step */
    char *in_image;         /* the host image of in_mem a step uploads (backends with upload) */
    size_t *in_off;         /* [graph inputs] each input's offset in in_mem (64-byte aligned) */
    void *arena;            /* the activation arena (NULL when it is empty) */
    uint32_t n_nodes;
    loom_ir_node_id *order; /* program order */
    loom_exec_tensor *ins;  /* [graph inputs] what a replay_step gets */
    int32_t t_sym;          /* index of symbol T, -1 when absent */
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

static int64_t max_bytes(const loom_ir_graph *g, const loom_ir_value *v) {
    return loom_ir_type_bytes(g, &v->type, NULL);
}

/* Bytes of state value v as the backend stores it (vtable state_bytes); -1 when its graph type
 * is too large or empty. */
static int64_t state_size(const loom_exec *e, loom_ir_value_id v) {
    int64_t b = max_bytes(e->g, loom_ir_value_get(e->g, v));
    if (b <= 0 || !e->be->vt->state_bytes) return b > 0 ? b : -1;
    size_t s = e->be->vt->state_bytes(e->be, e->g, v, (size_t)b);
    return s == 0 ? b : s > (size_t)INT64_MAX ? -1 : (int64_t)s;
}

/* The plan's question (loom_exec_plan_external_fn) about v, a root of its own that no node reads:
 * a graph output such as v may live where the host reads it (vtable map_output). True when the
 * backend placed it so: the plan then leaves it out of the arena (no bytes, no in-place
 * hand-over: it runs out of place). The plan asks once per value, so an output listed twice is
 * offered once. */
static bool place_external_output(void *ctx, loom_ir_value_id v, uint64_t bytes) {
    loom_exec *e = ctx;
    void *dev = NULL, *host = NULL;
    if (!bytes || !loom_ir_value_is_output(e->g, v) ||
        !e->be->vt->map_output(e->be, e->g, v, (size_t)bytes, &dev, &host))
        return false;
    e->ptr[v] = dev;
    e->view[v] = host;
    return true;
}

/* Builds the plan (mapping the outputs the backend takes as it goes), allocates the arena and
 * the input buffers, and points every root at its memory. */
static loom_status plan(loom_exec *e, uint32_t n_streams, loom_error *err) {
    const loom_ir_graph *g = e->g;
    loom_status st = loom_exec_plan_create_external(
        g, n_streams, e->be->vt->map_output ? place_external_output : NULL, e, &e->plan, err);
    if (st) return st;
    for (uint32_t v = 0; v < e->n_values; v++) e->root[v] = loom_exec_plan_root(e->plan, v);
    for (uint32_t i = 0; i < loom_exec_plan_node_count(e->plan); i++)
        e->order[i] = loom_exec_plan_node_at(e->plan, i);
    /* Graph inputs share one buffer of their own, each at its largest size: a step uploads them
     * in one copy (a device backend pays a copy's latency once, not once an input). */
    size_t in_bytes = 0;
    for (uint32_t i = 0; i < loom_ir_input_count(g); i++) {
        loom_ir_value_id v = loom_ir_input_at(g, i);
        int64_t b = max_bytes(g, loom_ir_value_get(g, v));
        if (b < 0 || (uint64_t)b > SIZE_MAX - 63 - in_bytes)
            return loom_error_set(err, LOOM_ERR_LIMIT, "executor: input '%s' is too large",
                                  loom_ir_value_get(g, v)->name);
        e->in_off[i] = in_bytes;
        in_bytes += ((size_t)b + 63) & ~(size_t)63;
    }
    if (in_bytes) {
        if (!(e->in_mem = mem_alloc(e, in_bytes, false, err)))
            return err && err->status ? err->status : LOOM_ERR_OUT_OF_MEMORY;
        if (e->be->vt->upload && !(e->in_image = calloc(1, in_bytes)))
            return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "executor: out of memory");
        for (uint32_t i = 0; i < loom_ir_input_count(g); i++)
            e->ptr[loom_ir_input_at(g, i)] = (char *)e->in_mem + e->in_off[i];
    }
    uint64_t arena = loom_exec_plan_arena_bytes(e->plan);
    if (arena > SIZE_MAX)
        return loom_error_set(err, LOOM_ERR_LIMIT, "executor: arena of %llu bytes is too large",
                              (unsigned long long)arena);
    if (arena && !(e->arena = mem_alloc(e, (size_t)arena, false, err)))
        return err && err->status ? err->status : LOOM_ERR_OUT_OF_MEMORY;
    for (uint32_t v = 0; v < e->n_values; v++) {
        uint32_t b = e->root[v] == v ? loom_exec_plan_block_of(e->plan, v) : LOOM_PLAN_NO_BLOCK;
        if (b != LOOM_PLAN_NO_BLOCK)
            e->ptr[v] = (char *)e->arena + loom_exec_plan_block_at(e->plan, b)->offset;
    }
    e->stats.activation_bytes = arena;
    e->stats.activation_sum = loom_exec_plan_sum_bytes(e->plan);
    e->stats.activation_lower_bound = loom_exec_plan_lower_bound_bytes(e->plan);
    e->stats.n_buffers = loom_exec_plan_block_count(e->plan);
    e->stats.n_streams = loom_exec_plan_streams(e->plan);
    return LOOM_OK;
}

/* ---------------------------------------------------------------- create / destroy */

/* What map_weight is told of weight v (loom_exec_weight). */
static loom_exec_weight weight_desc(const loom_ir_graph *g, loom_ir_value_id v) {
    const loom_ir_value *w = loom_ir_value_get(g, v);
    loom_exec_weight d = {w->type.dtype, 0, 0, false, false};
    if (w->type.rank == 2) {
        d.rows = w->type.dims[0];
        d.cols = w->type.dims[1];
    }
    const uint32_t nu = loom_ir_value_use_count(g, v);
    d.matmul_only = nu > 0 && !loom_ir_value_is_output(g, v);
    for (uint32_t i = 0; i < nu && d.matmul_only; i++) {
        const loom_ir_use u = loom_ir_value_use_at(g, v, i);
        const loom_ir_op op = loom_ir_node_get(g, u.node)->op;
        d.matmul_only = (op == LOOM_IR_OP_MATMUL || op == LOOM_IR_OP_MATMUL_ADD ||
                         op == LOOM_IR_OP_MATMUL_PAIR || op == LOOM_IR_OP_MATMUL_TRIPLE) &&
                        u.slot >= 1 && u.slot <= (uint32_t)loom_exec_matmul_weights(op);
        d.in_triple = d.in_triple || op == LOOM_IR_OP_MATMUL_TRIPLE;
    }
    return d;
}

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
            const loom_exec_weight d = weight_desc(g, v);
            if ((st = e->be->vt->map_weight(e->be, host, w->size, &d, &mapped, err))) return st;
            host = mapped;
        }
        e->ptr[v] = (void *)host;
        e->stats.weight_bytes += w->size;
    }
    for (uint32_t i = 0; i < loom_ir_state_count(g); i++) {
        loom_ir_value_id v = loom_ir_state_at(g, i);
        int64_t b = state_size(e, v);
        if (b <= 0)
            return loom_error_set(err, LOOM_ERR_LIMIT, "executor: state '%s' is too large",
                                  loom_ir_value_get(g, v)->name);
        if (!(e->ptr[v] = mem_alloc(e, (size_t)b, true, err)))
            return err && err->status ? err->status : LOOM_ERR_OUT_OF_MEMORY;
        e->stats.state_bytes += (uint64_t)b;
    }
    return LOOM_OK;
}

void loom_exec_options_init(loom_exec_options *o) {
    memset(o, 0, sizeof *o);
    o->n_streams = 1;
}

loom_status loom_exec_create(const loom_ir_graph *g, loom_exec_backend *backend,
                             loom_exec_weight_fn resolve, void *resolve_ctx, loom_exec **out,
                             loom_error *err) {
    return loom_exec_create_ex(g, backend, resolve, resolve_ctx, NULL, out, err);
}

loom_status loom_exec_create_ex(const loom_ir_graph *g, loom_exec_backend *backend,
                                loom_exec_weight_fn resolve, void *resolve_ctx,
                                const loom_exec_options *opts, loom_exec **out, loom_error *err) {
    *out = NULL;
    loom_exec_options o;
    loom_exec_options_init(&o);
    if (opts) o = *opts;
    if (o.n_streams < 1 || o.n_streams > LOOM_PLAN_MAX_STREAMS) {
        loom_exec_backend_destroy(backend);
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "executor: streams %u outside 1..%d",
                              o.n_streams, LOOM_PLAN_MAX_STREAMS);
    }
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
    e->ptr = calloc(nv, sizeof *e->ptr);
    e->view = calloc(nv, sizeof *e->view);
    e->host = calloc(nv, sizeof *e->host);
    e->order = calloc(loom_ir_node_count(g) + 1, sizeof *e->order);
    e->ins = calloc(loom_ir_input_count(g) + 1, sizeof *e->ins);
    e->in_off = calloc(loom_ir_input_count(g) + 1, sizeof *e->in_off);
    if (!e->root || !e->ptr || !e->view || !e->host || !e->order || !e->ins || !e->in_off) {
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
        if (backend->vt->reserve_node && (st = backend->vt->reserve_node(backend, g, n, err))) {
            loom_error_prefix(err, "executor: node %u (%s): ", id,
                              loom_ir_op_info_get(n->op)->name);
            goto fail;
        }
        e->n_nodes++;
    }
    e->t_sym = -1;
    {
        int64_t t = loom_ir_symbol_find(g, "T");
        if (t) e->t_sym = (int32_t)loom_ir_dim_sym_index(t);
    }
    if ((st = bind_weights_and_state(e, resolve, resolve_ctx, err)) ||
        (st = plan(e, o.n_streams, err)))
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
    e->be->vt->free(e->be, e->in_mem);
    if (e->view)
        for (uint32_t v = 0; v < e->n_values; v++)
            if (e->view[v]) e->be->vt->unmap_output(e->be, e->ptr[v], e->view[v]);
    e->be->vt->free(e->be, e->arena);
    loom_exec_backend_destroy(e->be);
    loom_exec_plan_destroy(e->plan);
    free(e->root);
    free(e->ptr);
    free(e->view);
    free(e->host);
    free(e->order);
    free(e->ins);
    free(e->in_off);
    free(e->in_image);
    free(e);
}

void loom_exec_backend_destroy(loom_exec_backend *b) {
    if (b) b->vt->destroy(b);
}

loom_status loom_exec_backend_copy_bandwidth(loom_exec_backend *b, double *gbs, loom_error *err) {
    *gbs = 0;
    if (!b->vt->copy_bandwidth)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "backend %s does not measure its copy bandwidth", b->vt->name);
    return b->vt->copy_bandwidth(b, gbs, err);
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
    loom_status st = LOOM_OK;
    loom_exec_tensor in[LOOM_IR_MAX_INPUTS], out[LOOM_IR_MAX_OUTPUTS];
    const loom_exec_backend_vtable *vt = e->be->vt;
    uint32_t n_streams = loom_exec_plan_streams(e->plan);
    bool began = false;
    size_t in_end = 0; /* the uploaded part of in_image */
    for (uint32_t i = 0; i < n_in; i++) {
        loom_ir_value_id v = loom_ir_input_at(g, i);
        const char *name = loom_ir_value_get(g, v)->name;
        const void *data = NULL;
        for (uint32_t k = 0; k < n_inputs; k++)
            if (!strcmp(inputs[k].name, name)) data = inputs[k].data;
        int64_t bytes = loom_ir_type_bytes(g, &loom_ir_value_get(g, v)->type, e->sym);
        if (!data || bytes < 0) {
            st = loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "executor: input '%s' has no data",
                                name);
            goto done;
        }
        if (vt->upload) {
            memcpy(e->in_image + e->in_off[i], data, (size_t)bytes);
            if (e->in_off[i] + (size_t)bytes > in_end) in_end = e->in_off[i] + (size_t)bytes;
        } else {
            memcpy(e->ptr[v], data, (size_t)bytes);
        }
        e->host[v] = data;
    }
    if (in_end && (st = vt->upload(e->be, e->in_mem, e->in_image, in_end, err))) goto done;
    int64_t T = e->t_sym >= 0 ? e->sym[e->t_sym] : 1;
    if (vt->replay_step) {
        for (uint32_t i = 0; i < n_in; i++)
            if ((st = tensor_of(e, loom_ir_input_at(g, i), &e->ins[i], err))) goto done;
        if (vt->replay_step(e->be, n_streams, T, e->ins, n_in, &st, err)) {
            if (st) goto done;
            goto sync;
        }
    }
    if (vt->begin_step) {
        began = true; /* a failed begin_step may have opened a capture: end_step(false) closes it */
        if ((st = vt->begin_step(e->be, n_streams, e->n_nodes, T, err))) goto done;
    }
    for (uint32_t i = 0; i < e->n_nodes; i++) {
        const loom_ir_node *n = loom_ir_node_get(g, e->order[i]);
        if (vt->set_stream) {
            uint32_t n_waits;
            const uint32_t *waits = loom_exec_plan_waits(e->plan, i, &n_waits);
            if ((st = vt->set_stream(e->be, loom_exec_plan_stream_of(e->plan, i), waits, n_waits,
                                     err)))
                goto done;
        }
        for (uint32_t k = 0; k < n->n_in; k++)
            if ((st = tensor_of(e, n->in[k], &in[k], err))) goto done;
        for (uint32_t k = 0; k < n->n_out; k++)
            if ((st = tensor_of(e, n->out[k], &out[k], err))) goto done;
        if ((st = vt->run_node(e->be, g, n, in, out, err))) {
            loom_error_prefix(err, "executor: node %u (%s): ", e->order[i],
                              loom_ir_op_info_get(n->op)->name);
            goto done;
        }
        if (vt->record && loom_exec_plan_records(e->plan, i) && (st = vt->record(e->be, i, err)))
            goto done;
    }
    if (vt->end_step) {
        began = false;
        if ((st = vt->end_step(e->be, true, err))) goto done;
    }
sync:
    if (vt->synchronize && (st = vt->synchronize(e->be, err))) goto done;
    e->ran = true;
done:
    if (began && vt->end_step) {
        loom_error ignored = {0};
        (void)vt->end_step(e->be, false, &ignored); /* abandon the step (and any capture) */
    }
    for (uint32_t i = 0; i < n_in; i++) e->host[loom_ir_input_at(g, i)] = NULL;
    return st;
}

loom_status loom_exec_read_output(loom_exec *e, const char *name, void *dst, size_t capacity,
                                  size_t *bytes, loom_error *err) {
    if (bytes) *bytes = 0;
    loom_ir_value_id v = loom_ir_find_output(e->g, name);
    if (v == LOOM_IR_NO_VALUE)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND, "executor: the graph has no output '%s'", name);
    return loom_exec_read_value(e, v, dst, capacity, bytes, err);
}

loom_status loom_exec_read_value(loom_exec *e, loom_ir_value_id v, void *dst, size_t capacity,
                                 size_t *bytes, loom_error *err) {
    if (bytes) *bytes = 0;
    const char *name = NULL;
    for (uint32_t i = 0; i < loom_ir_output_count(e->g) && !name; i++) {
        const char *oname = NULL;
        if (loom_ir_output_at(e->g, i, &oname) == v) name = oname ? oname : "?";
    }
    if (!name)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND, "executor: value %u is not an output", v);
    if (!e->ran)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: output '%s' read before a successful step", name);
    int64_t b = loom_ir_type_bytes(e->g, &loom_ir_value_get(e->g, v)->type, e->sym);
    if (b < 0 || (size_t)b > capacity)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "executor: output '%s' needs %lld bytes, the buffer has %zu", name,
                              (long long)b, capacity);
    const void *src = e->ptr[e->root[v]];
    if (e->view[e->root[v]]) {
        memcpy(dst, e->view[e->root[v]], (size_t)b); /* the step synchronized */
    } else if (e->be->vt->download) {
        loom_status st = e->be->vt->download(e->be, dst, src, (size_t)b, err);
        if (st) return st;
    } else {
        memcpy(dst, src, (size_t)b);
    }
    if (bytes) *bytes = (size_t)b;
    return LOOM_OK;
}

const void *loom_exec_output_view(const loom_exec *e, loom_ir_value_id v) {
    return e->ran && v < e->n_values ? e->view[v] : NULL;
}

bool loom_exec_output_mapped(const loom_exec *e, loom_ir_value_id v) {
    return v < e->n_values && e->view[v];
}

void *loom_exec_host_alloc(loom_exec *e, size_t bytes) {
    if (e->be->vt->host_alloc) return e->be->vt->host_alloc(e->be, bytes);
    return malloc(bytes);
}

void loom_exec_host_free(loom_exec *e, void *p) {
    if (!e || !p) return;
    if (e->be->vt->host_free) e->be->vt->host_free(e->be, p);
    else free(p);
}

loom_status loom_exec_reset_state(loom_exec *e, loom_error *err) {
    const loom_ir_graph *g = e->g;
    for (uint32_t i = 0; i < loom_ir_state_count(g); i++) {
        loom_ir_value_id v = loom_ir_state_at(g, i);
        size_t b = (size_t)state_size(e, v); /* > 0: create allocated it so */
        void *p = e->ptr[v];
        if (e->be->vt->zero) {
            loom_status st = e->be->vt->zero(e->be, p, b, err);
            if (st) return st;
            continue;
        }
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

const loom_exec_plan *loom_exec_get_plan(const loom_exec *e) { return e->plan; }

loom_exec_backend *loom_exec_get_backend(loom_exec *e) { return e->be; }
