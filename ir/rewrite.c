/* rewrite.c: the rewrite API passes use (replace all uses, set one operand, erase a node) and
 * topological ordering (topo_order, sort).
 *
 * Every function here keeps the def-use lists exact (ir_impl.h invariants; asserted after each
 * mutation when built with LOOM_DEBUG, as the asan config does). Schedule validity
 * (defs above uses) is the caller's job after replace_all_uses; loom_ir_graph_sort restores it
 * and the verifier checks it.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

static const char *node_label(const loom_ir_graph *g, loom_ir_node_id id, char *buf, size_t len) {
    const loom_ir_node *n = loom_ir_node_get(g, id);
    char lab[96];
    if (n->n_out)
        snprintf(buf, len, "node %s = %s (#%u)", ir_value_label(g, n->out[0], lab, sizeof lab),
                 loom_ir_op_info_get(n->op)->name, id);
    else
        snprintf(buf, len, "node %s (#%u)", loom_ir_op_info_get(n->op)->name, id);
    return buf;
}

static bool live_value(const loom_ir_graph *g, loom_ir_value_id v) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    return val && val->kind != LOOM_IR_VALUE_DEAD;
}

loom_status loom_ir_replace_all_uses(loom_ir_graph *g, loom_ir_value_id from, loom_ir_value_id to,
                                     loom_error *err) {
    char a[96], b[96], ta[96], tb[96];
    if (!live_value(g, from) || !live_value(g, to))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: replace %s by %s: no such "
                              "value", ir_value_label(g, from, a, sizeof a),
                              ir_value_label(g, to, b, sizeof b));
    const loom_ir_type *tf = &loom_ir_value_get(g, from)->type, *tt = &loom_ir_value_get(g, to)->type;
    if (!loom_ir_type_equal(tf, tt))
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: replace %s : %s by %s : %s: types differ",
                              ir_value_label(g, from, a, sizeof a),
                              loom_ir_type_format(g, tf, ta, sizeof ta),
                              ir_value_label(g, to, b, sizeof b),
                              loom_ir_type_format(g, tt, tb, sizeof tb));
    if (from == to) return LOOM_OK;
    value_rec *rf = ir_value_rec(g, from), *rt = ir_value_rec(g, to);
    if (rt->n_uses + rf->n_uses > rt->cap_uses) {
        uint32_t cap = rt->n_uses + rf->n_uses;
        loom_ir_use *p = realloc(rt->uses, cap * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
        rt->uses = p;
        rt->cap_uses = cap;
    }
    /* The node defining `to` keeps reading `from` (y = f(x); replace(x, y) inserts f). */
    loom_ir_node_id keep = loom_ir_value_get(g, to)->def;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rf->n_uses; i++) {
        loom_ir_use u = rf->uses[i];
        if (u.node == keep) {
            rf->uses[kept++] = u;
            continue;
        }
        ir_node_mut(g, u.node)->in[u.slot] = to;
        rt->uses[rt->n_uses++] = u;
    }
    rf->n_uses = kept;
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].value == from) g->outputs[i].value = to;
    LOOM_DEBUG_ASSERT(ir_check_structure(g, NULL) == LOOM_OK);
    return LOOM_OK;
}

loom_status loom_ir_node_set_input(loom_ir_graph *g, loom_ir_node_id id, uint32_t slot,
                                   loom_ir_value_id v, loom_error *err) {
    char nb[160], a[96], ta[96], tb[96];
    loom_ir_node *n = ir_node_mut(g, id);
    if (!n || n->erased)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: set input: no node #%u", id);
    if (slot >= n->n_in)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s has no operand %u",
                              node_label(g, id, nb, sizeof nb), slot);
    if (!live_value(g, v))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: operand %u: no value %u",
                              node_label(g, id, nb, sizeof nb), slot, v);
    const loom_ir_type *old = &loom_ir_value_get(g, n->in[slot])->type;
    const loom_ir_type *nt = &loom_ir_value_get(g, v)->type;
    if (!loom_ir_type_equal(old, nt))
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s: operand %u is %s, %s is %s",
                              node_label(g, id, nb, sizeof nb), slot,
                              loom_ir_type_format(g, old, ta, sizeof ta),
                              ir_value_label(g, v, a, sizeof a),
                              loom_ir_type_format(g, nt, tb, sizeof tb));
    if (!ir_add_use(g, v, id, slot))
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    ir_remove_use(g, n->in[slot], id, slot);
    n->in[slot] = v;
    LOOM_DEBUG_ASSERT(ir_check_structure(g, NULL) == LOOM_OK);
    return LOOM_OK;
}

loom_status loom_ir_node_erase(loom_ir_graph *g, loom_ir_node_id id, loom_error *err) {
    char nb[160], ub[160], lab[96];
    loom_ir_node *n = ir_node_mut(g, id);
    if (!n || n->erased)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: erase: no node #%u", id);
    for (uint32_t o = 0; o < n->n_out; o++) {
        value_rec *r = ir_value_rec(g, n->out[o]);
        if (r->n_uses)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: cannot erase %s: result "
                                  "%s is still used by %s", node_label(g, id, nb, sizeof nb),
                                  ir_value_label(g, n->out[o], lab, sizeof lab),
                                  node_label(g, r->uses[0].node, ub, sizeof ub));
        if (loom_ir_value_is_output(g, n->out[o]))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: cannot erase %s: result "
                                  "%s is a graph output", node_label(g, id, nb, sizeof nb),
                                  ir_value_label(g, n->out[o], lab, sizeof lab));
    }
    for (uint32_t i = 0; i < n->n_in; i++) ir_remove_use(g, n->in[i], id, i);
    for (uint32_t o = 0; o < n->n_out; o++) {
        value_rec *r = ir_value_rec(g, n->out[o]);
        r->pub.kind = LOOM_IR_VALUE_DEAD;
    }
    if (g->insert_before == id) g->insert_before = LOOM_IR_NO_NODE;
    ir_unlink_node(g, id);
    n->erased = true;
    g->n_live_nodes--;
    LOOM_DEBUG_ASSERT(ir_check_structure(g, NULL) == LOOM_OK);
    return LOOM_OK;
}

/* Iterative DFS over operand definitions, visiting roots in program order: each node is emitted
 * after the definitions of its operands, and otherwise in its current relative order. */
loom_status loom_ir_topo_order(const loom_ir_graph *g, loom_ir_node_id *order, uint32_t *n_order,
                               loom_error *err) {
    enum { WHITE, GRAY, BLACK };
    uint32_t nb = g->n_nodes ? g->n_nodes : 1;
    uint8_t *color = calloc(nb, 1);
    struct frame { loom_ir_node_id node; uint32_t next_in; } *stack = malloc(nb * sizeof *stack);
    if (!color || !stack) {
        free(color);
        free(stack);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    }
    uint32_t k = 0;
    loom_status st = LOOM_OK;
    for (loom_ir_node_id root = g->first; root != LOOM_IR_NO_NODE && !st;
         root = ir_node_mut(g, root)->next) {
        if (color[root] != WHITE) continue;
        uint32_t sp = 0;
        stack[sp++] = (struct frame){root, 0};
        color[root] = GRAY;
        while (sp && !st) {
            struct frame *f = &stack[sp - 1];
            const loom_ir_node *n = ir_node_mut(g, f->node);
            if (f->next_in < n->n_in) {
                const loom_ir_value *v = loom_ir_value_get(g, n->in[f->next_in++]);
                if (!v || v->kind != LOOM_IR_VALUE_NODE) continue;
                const loom_ir_node *d = loom_ir_node_get(g, v->def);
                if (!d || d->erased) continue;
                if (color[v->def] == GRAY) {
                    char lb[160];
                    st = loom_error_set(err, LOOM_ERR_VERIFY, "verify: %s: cycle through its "
                                        "operand %u", node_label(g, f->node, lb, sizeof lb),
                                        f->next_in - 1);
                } else if (color[v->def] == WHITE) {
                    color[v->def] = GRAY;
                    stack[sp++] = (struct frame){v->def, 0};
                }
            } else {
                color[f->node] = BLACK;
                order[k++] = f->node;
                sp--;
            }
        }
    }
    free(color);
    free(stack);
    if (!st) *n_order = k;
    return st;
}

loom_status loom_ir_graph_sort(loom_ir_graph *g, loom_error *err) {
    loom_ir_node_id *order = malloc((g->n_live_nodes ? g->n_live_nodes : 1) * sizeof *order);
    if (!order) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    uint32_t n = 0;
    loom_status st = loom_ir_topo_order(g, order, &n, err);
    if (!st) {
        LOOM_ASSERT(n == g->n_live_nodes);
        g->first = g->last = LOOM_IR_NO_NODE;
        for (uint32_t i = 0; i < n; i++) ir_link_node(g, order[i], LOOM_IR_NO_NODE);
        LOOM_DEBUG_ASSERT(ir_check_structure(g, NULL) == LOOM_OK);
    }
    free(order);
    return st;
}
