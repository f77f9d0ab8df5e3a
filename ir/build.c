/* build.c: adding nodes. loom_ir_build normalizes the attributes, infers the result types
 * (infer.c), and only then allocates: the node, its result values, copies of list/string
 * attributes and its operand uses. On any failure nothing observable has changed (a node record
 * or arena bytes may be consumed, never linked or visible).
 * Also the one-line builders for lowering (loom_ir_matmul, ...), which chain errors.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

void loom_ir_set_insert_point(loom_ir_graph *g, loom_ir_node_id before) {
    const loom_ir_node *n = loom_ir_node_get(g, before);
    g->insert_before = n && !n->erased ? before : LOOM_IR_NO_NODE;
}

/* Makes room for `extra` more uses of r so that linking cannot fail. */
static bool reserve_uses(value_rec *r, uint32_t extra) {
    if (r->n_uses + extra <= r->cap_uses) return true;
    uint32_t cap = r->cap_uses ? r->cap_uses * 2 : 4;
    if (cap < r->n_uses + extra) cap = r->n_uses + extra;
    loom_ir_use *p = realloc(r->uses, cap * sizeof *p);
    if (!p) return false;
    r->uses = p;
    r->cap_uses = cap;
    return true;
}

/* Copies the graph-external payload of normalized attributes into the arena. */
static bool own_attrs(loom_ir_graph *g, loom_ir_attr *a, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (a[i].kind == LOOM_IR_ATTR_KIND_STRING) {
            const char *s = ir_arena_strdup(g, a[i].u.s);
            if (!s) return false;
            a[i].u.s = s;
        } else if (a[i].kind == LOOM_IR_ATTR_KIND_INTS || a[i].kind == LOOM_IR_ATTR_KIND_SHAPE) {
            int64_t *p = ir_arena_alloc(g, (a[i].count ? a[i].count : 1) * sizeof *p);
            if (!p) return false;
            if (a[i].count) memcpy(p, a[i].u.ints, a[i].count * sizeof *p);
            a[i].u.ints = p;
        }
    }
    return true;
}

loom_status loom_ir_build(loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                          uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                          loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS], loom_ir_node_id *n_node,
                          loom_error *err) {
    if (!loom_ir_op_info_get(op))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: unknown op id %d", (int)op);
    if (n_in > LOOM_IR_MAX_INPUTS || n_attrs > 64 || (n_in && !in) || (n_attrs && !attrs))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: bad operand/attribute "
                              "arrays", loom_ir_op_info_get(op)->name);
    loom_ir_attr norm[LOOM_IR_MAX_ATTRS];
    uint32_t n_norm, n_out;
    loom_ir_type types[LOOM_IR_MAX_OUTPUTS];
    loom_status st = ir_normalize_attrs(op, attrs, n_attrs, norm, &n_norm, err);
    if (st) return st;
    if ((st = ir_infer_normalized(g, op, in, n_in, norm, n_norm, types, &n_out, err))) return st;

    /* Reserve everything that can fail before linking anything. */
    if (!own_attrs(g, norm, n_norm)) goto oom;
    for (uint32_t i = 0; i < n_in; i++)
        if (!reserve_uses(ir_value_rec(g, in[i]), n_in)) goto oom;
    loom_ir_node_id id = ir_new_node(g);
    if (id == LOOM_IR_NO_NODE) goto oom;
    loom_ir_value_id res[LOOM_IR_MAX_OUTPUTS];
    for (uint32_t o = 0; o < n_out; o++) {
        res[o] = ir_new_value(g, LOOM_IR_VALUE_NODE, &types[o]);
        if (res[o] == LOOM_IR_NO_VALUE) {
            /* Values made so far stay as unreferenced DEAD holes; the node record is a hole. */
            for (uint32_t k = 0; k < o; k++) ir_value_rec(g, res[k])->pub.kind = LOOM_IR_VALUE_DEAD;
            ir_node_mut(g, id)->erased = true;
            goto oom;
        }
    }

    loom_ir_node *n = ir_node_mut(g, id);
    n->op = op;
    n->n_in = (uint8_t)n_in;
    n->n_out = (uint8_t)n_out;
    n->n_attrs = (uint8_t)n_norm;
    for (uint32_t i = 0; i < n_in; i++) n->in[i] = in[i];
    for (uint32_t i = n_in; i < LOOM_IR_MAX_INPUTS; i++) n->in[i] = LOOM_IR_NO_VALUE;
    for (uint32_t o = 0; o < LOOM_IR_MAX_OUTPUTS; o++)
        n->out[o] = o < n_out ? res[o] : LOOM_IR_NO_VALUE;
    memcpy(n->attrs, norm, n_norm * sizeof *norm);
    for (uint32_t o = 0; o < n_out; o++) {
        value_rec *r = ir_value_rec(g, res[o]);
        r->pub.def = id;
        r->pub.def_slot = o;
    }
    for (uint32_t i = 0; i < n_in; i++) LOOM_ASSERT(ir_add_use(g, in[i], id, i));
    ir_link_node(g, id, g->insert_before);
    g->n_live_nodes++;
    if (out)
        for (uint32_t o = 0; o < LOOM_IR_MAX_OUTPUTS; o++)
            out[o] = o < n_out ? res[o] : LOOM_IR_NO_VALUE;
    if (n_node) *n_node = id;
    LOOM_DEBUG_ASSERT(ir_check_structure(g, NULL) == LOOM_OK);
    return LOOM_OK;
oom:
    return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: %s: out of memory",
                          loom_ir_op_info_get(op)->name);
}

/* ---- one-line builders ---- */

static loom_ir_value_id emit(loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                             uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                             loom_error *err) {
    for (uint32_t i = 0; i < n_in; i++)
        if (in[i] == LOOM_IR_NO_VALUE) {
            if (!err || err->status == LOOM_OK)
                loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: operand %u is "
                               "LOOM_IR_NO_VALUE", loom_ir_op_info_get(op)->name, i);
            return LOOM_IR_NO_VALUE;
        }
    loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS];
    if (loom_ir_build(g, op, in, n_in, attrs, n_attrs, out, NULL, err)) return LOOM_IR_NO_VALUE;
    return out[0];
}

loom_ir_value_id loom_ir_get_rows(loom_ir_graph *g, loom_ir_value_id table, loom_ir_value_id ids,
                                  loom_error *err) {
    loom_ir_value_id in[] = {table, ids};
    return emit(g, LOOM_IR_OP_GET_ROWS, in, 2, NULL, 0, err);
}

loom_ir_value_id loom_ir_rms_norm(loom_ir_graph *g, loom_ir_value_id x, float eps,
                                  loom_error *err) {
    loom_ir_attr a[] = {loom_ir_attr_float(LOOM_IR_ATTR_EPS, eps)};
    return emit(g, LOOM_IR_OP_RMS_NORM, &x, 1, a, 1, err);
}

loom_ir_value_id loom_ir_mul(loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b,
                             loom_error *err) {
    loom_ir_value_id in[] = {a, b};
    return emit(g, LOOM_IR_OP_MUL, in, 2, NULL, 0, err);
}

loom_ir_value_id loom_ir_add(loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b,
                             loom_error *err) {
    loom_ir_value_id in[] = {a, b};
    return emit(g, LOOM_IR_OP_ADD, in, 2, NULL, 0, err);
}

loom_ir_value_id loom_ir_matmul(loom_ir_graph *g, loom_ir_value_id x, loom_ir_value_id w,
                                loom_error *err) {
    loom_ir_value_id in[] = {x, w};
    return emit(g, LOOM_IR_OP_MATMUL, in, 2, NULL, 0, err);
}

loom_ir_value_id loom_ir_reshape(loom_ir_graph *g, loom_ir_value_id x, uint32_t rank,
                                 const int64_t *dims, loom_error *err) {
    loom_ir_attr a[] = {loom_ir_attr_ints(LOOM_IR_ATTR_SHAPE, dims, rank)};
    return emit(g, LOOM_IR_OP_RESHAPE, &x, 1, a, 1, err);
}

loom_ir_value_id loom_ir_rope(loom_ir_graph *g, loom_ir_value_id x, loom_ir_value_id pos,
                              int mode, int64_t n_rot, float freq_base, float freq_scale,
                              loom_error *err) {
    loom_ir_value_id in[] = {x, pos};
    loom_ir_attr a[] = {loom_ir_attr_int(LOOM_IR_ATTR_MODE, mode),
                        loom_ir_attr_int(LOOM_IR_ATTR_N_ROT, n_rot),
                        loom_ir_attr_float(LOOM_IR_ATTR_FREQ_BASE, freq_base),
                        loom_ir_attr_float(LOOM_IR_ATTR_FREQ_SCALE, freq_scale)};
    return emit(g, LOOM_IR_OP_ROPE, in, 2, a, 4, err);
}

loom_ir_value_id loom_ir_kv_write(loom_ir_graph *g, loom_ir_value_id cache, loom_ir_value_id x,
                                  loom_ir_value_id pos, loom_error *err) {
    loom_ir_value_id in[] = {cache, x, pos};
    return emit(g, LOOM_IR_OP_KV_WRITE, in, 3, NULL, 0, err);
}

loom_ir_value_id loom_ir_attention(loom_ir_graph *g, loom_ir_value_id q, loom_ir_value_id k_cache,
                                   loom_ir_value_id v_cache, loom_ir_value_id pos, int64_t n_head,
                                   int64_t n_kv_head, int64_t head_dim, float scale,
                                   loom_error *err) {
    loom_ir_value_id in[] = {q, k_cache, v_cache, pos};
    loom_ir_attr a[] = {loom_ir_attr_int(LOOM_IR_ATTR_N_HEAD, n_head),
                        loom_ir_attr_int(LOOM_IR_ATTR_N_KV_HEAD, n_kv_head),
                        loom_ir_attr_int(LOOM_IR_ATTR_HEAD_DIM, head_dim),
                        loom_ir_attr_float(LOOM_IR_ATTR_SCALE, scale)};
    return emit(g, LOOM_IR_OP_ATTENTION, in, 4, a, 4, err);
}

loom_ir_value_id loom_ir_silu(loom_ir_graph *g, loom_ir_value_id x, loom_error *err) {
    return emit(g, LOOM_IR_OP_SILU, &x, 1, NULL, 0, err);
}

loom_ir_value_id loom_ir_softmax(loom_ir_graph *g, loom_ir_value_id x, loom_error *err) {
    return emit(g, LOOM_IR_OP_SOFTMAX, &x, 1, NULL, 0, err);
}

loom_ir_value_id loom_ir_argmax(loom_ir_graph *g, loom_ir_value_id x, loom_error *err) {
    return emit(g, LOOM_IR_OP_ARGMAX, &x, 1, NULL, 0, err);
}

loom_ir_value_id loom_ir_convert(loom_ir_graph *g, loom_ir_value_id x, loom_ir_dtype dt,
                                 loom_error *err) {
    loom_ir_attr a[] = {loom_ir_attr_int(LOOM_IR_ATTR_DTYPE, dt)};
    return emit(g, LOOM_IR_OP_CONVERT, &x, 1, a, 1, err);
}
