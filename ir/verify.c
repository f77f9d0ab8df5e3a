/* verify.c: the IR verifier. Checks every rule of ir.h on a graph, in an order that reports the
 * most basic problem first (structure, then cycles, then schedule, then types), and returns the
 * first problem found as LOOM_ERR_VERIFY with "verify: node %N = op (#id): reason".
 *
 * The builder already refuses ill-typed nodes; the verifier exists for graphs changed by
 * rewrites (set_input, replace_all_uses, erase) and graphs read from outside (protobuf), and as
 * the judge every pass test runs after the pass.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

__attribute__((format(printf, 4, 5))) static loom_status bad(const loom_ir_graph *g,
                                                              loom_ir_node_id id, loom_error *err,
                                                              const char *fmt, ...) {
    char msg[LOOM_ERROR_MSG_MAX], head[160] = "", lab[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (id != LOOM_IR_NO_NODE) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        const loom_ir_op_info *oi = loom_ir_op_info_get(n->op);
        if (n->n_out && n->out[0] < loom_ir_value_bound(g))
            snprintf(head, sizeof head, "node %s = %s (#%u): ",
                     ir_value_label(g, n->out[0], lab, sizeof lab), oi ? oi->name : "?", id);
        else
            snprintf(head, sizeof head, "node %s (#%u): ", oi ? oi->name : "?", id);
    }
    return loom_error_set(err, LOOM_ERR_VERIFY, "verify: %s%s", head, msg);
}

static bool live(const loom_ir_graph *g, loom_ir_value_id v) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    return val && val->kind != LOOM_IR_VALUE_DEAD;
}

/* Declarations: listed values have the right kind, weights a consistent size, state/weights
 * constant dims; every INPUT/WEIGHT/STATE value is listed exactly where its kind says. */
static loom_status check_decls(const loom_ir_graph *g, loom_error *err) {
    const id_list *lists[3] = {&g->inputs, &g->weights, &g->states};
    const loom_ir_value_kind kinds[3] = {LOOM_IR_VALUE_INPUT, LOOM_IR_VALUE_WEIGHT,
                                         LOOM_IR_VALUE_STATE};
    uint32_t declared = 0;
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < lists[k]->n; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, lists[k]->v[i]);
            if (!v || v->kind != kinds[k] || !v->name)
                return bad(g, LOOM_IR_NO_NODE, err, "declaration %u of kind %d is not a value "
                           "of that kind", i, (int)kinds[k]);
            if (loom_ir_find_value(g, v->name) != lists[k]->v[i])
                return bad(g, LOOM_IR_NO_NODE, err, "name %s declared twice", v->name);
            if (kinds[k] == LOOM_IR_VALUE_WEIGHT) {
                int64_t bytes = loom_ir_type_bytes(g, &v->type, NULL);
                if (bytes < 0 || (uint64_t)bytes != v->size)
                    return bad(g, LOOM_IR_NO_NODE, err, "weight @%s: size %llu does not match "
                               "its type (%lld bytes)", v->name, (unsigned long long)v->size,
                               (long long)bytes);
            }
            declared++;
        }
    uint32_t n_decl_values = 0;
    for (uint32_t v = 0; v < loom_ir_value_bound(g); v++) {
        loom_ir_value_kind k = loom_ir_value_get(g, v)->kind;
        if (k == LOOM_IR_VALUE_INPUT || k == LOOM_IR_VALUE_WEIGHT || k == LOOM_IR_VALUE_STATE)
            n_decl_values++;
    }
    if (n_decl_values != declared)
        return bad(g, LOOM_IR_NO_NODE, err, "%u input/weight/state values but %u declarations "
                   "(a weight or state referenced but not declared)", n_decl_values, declared);
    return LOOM_OK;
}

/* Per node: op, arity, operands exist, results defined once by this node, use lists. */
loom_status ir_check_structure(const loom_ir_graph *g, loom_error *err) {
    uint32_t count = 0;
    uint64_t operand_refs = 0;
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE; id = ir_node_mut(g, id)->next) {
        const loom_ir_node *n = ir_node_mut(g, id);
        const loom_ir_op_info *oi = loom_ir_op_info_get(n->op);
        if (++count > g->n_live_nodes || n->erased)
            return bad(g, LOOM_IR_NO_NODE, err, "program order list is corrupt at node #%u", id);
        if (!oi) return bad(g, id, err, "unknown op id %d", (int)n->op);
        if (n->n_attrs > LOOM_IR_MAX_ATTRS)
            return bad(g, id, err, "%u attributes (at most %d)", n->n_attrs, LOOM_IR_MAX_ATTRS);
        if (n->n_in < oi->min_in || n->n_in > oi->max_in || n->n_out < 1 ||
            n->n_out > oi->max_out)
            return bad(g, id, err, "%u operands / %u results (op takes %u..%u / at most %u)",
                       n->n_in, n->n_out, oi->min_in, oi->max_in, oi->max_out);
        for (uint32_t i = 0; i < n->n_in; i++) {
            if (!live(g, n->in[i]))
                return bad(g, id, err, "operand %u refers to value %u, which does not exist", i,
                           n->in[i]);
            const value_rec *r = ir_value_rec(g, n->in[i]);
            bool found = false;
            for (uint32_t u = 0; u < r->n_uses && !found; u++)
                found = r->uses[u].node == id && r->uses[u].slot == i;
            if (!found) return bad(g, id, err, "operand %u is missing from its use list", i);
        }
        operand_refs += n->n_in;
        for (uint32_t o = 0; o < n->n_out; o++) {
            const loom_ir_value *v = loom_ir_value_get(g, n->out[o]);
            if (!v || v->kind != LOOM_IR_VALUE_NODE || v->def != id || v->def_slot != o)
                return bad(g, id, err, "result %u (value %u) is not defined by this node "
                           "(defined twice or not a node result)", o, n->out[o]);
        }
    }
    if (count != g->n_live_nodes)
        return bad(g, LOOM_IR_NO_NODE, err, "%u nodes in program order, %u live", count,
                   g->n_live_nodes);
    uint64_t use_entries = 0;
    for (uint32_t v = 0; v < g->n_values; v++) {
        const value_rec *r = ir_value_rec(g, v);
        use_entries += r->n_uses;
        if (r->pub.kind == LOOM_IR_VALUE_NODE) {
            const loom_ir_node *d = loom_ir_node_get(g, r->pub.def);
            if (!d || d->erased || r->pub.def_slot >= d->n_out || d->out[r->pub.def_slot] != v)
                return bad(g, LOOM_IR_NO_NODE, err, "value %u claims node #%u as its definition,"
                           " which does not define it", v, r->pub.def);
        }
    }
    if (use_entries != operand_refs)
        return bad(g, LOOM_IR_NO_NODE, err, "use lists hold %llu entries for %llu operands",
                   (unsigned long long)use_entries, (unsigned long long)operand_refs);
    return LOOM_OK;
}

/* Operands defined above their use (program order). */
static loom_status check_schedule(const loom_ir_graph *g, loom_error *err) {
    uint8_t *defined = calloc(g->n_values ? g->n_values : 1, 1);
    if (!defined) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "verify: out of memory");
    loom_status st = LOOM_OK;
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE && !st;
         id = ir_node_mut(g, id)->next) {
        const loom_ir_node *n = ir_node_mut(g, id);
        for (uint32_t i = 0; i < n->n_in && !st; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, n->in[i]);
            if (v->kind == LOOM_IR_VALUE_NODE && !defined[n->in[i]]) {
                char lab[96];
                st = bad(g, id, err, "operand %u %s is used before its definition", i,
                         ir_value_label(g, n->in[i], lab, sizeof lab));
            }
        }
        for (uint32_t o = 0; o < n->n_out; o++) defined[n->out[o]] = 1;
    }
    free(defined);
    return st;
}

/* Types: attributes complete, inference reproduces the stored results; state written once. */
static loom_status check_types(const loom_ir_graph *g, loom_error *err) {
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE; id = ir_node_mut(g, id)->next) {
        const loom_ir_node *n = ir_node_mut(g, id);
        loom_ir_attr norm[LOOM_IR_MAX_ATTRS];
        loom_ir_type types[LOOM_IR_MAX_OUTPUTS];
        uint32_t n_norm, n_out;
        loom_error e = {0};
        if (ir_normalize_attrs(n->op, n->attrs, n->n_attrs, norm, &n_norm, &e) ||
            n_norm != n->n_attrs)
            return bad(g, id, err, "attributes: %s", e.status ? e.msg : "not normalized");
        if (ir_infer_normalized(g, n->op, n->in, n->n_in, n->attrs, n->n_attrs, types, &n_out,
                                &e))
            return bad(g, id, err, "%s", e.msg);
        if (n_out != n->n_out)
            return bad(g, id, err, "has %u results, its operands and attributes give %u",
                       n->n_out, n_out);
        for (uint32_t o = 0; o < n_out; o++) {
            const loom_ir_type *t = &loom_ir_value_get(g, n->out[o])->type;
            if (!loom_ir_type_equal(t, &types[o])) {
                char a[96], b[96];
                return bad(g, id, err, "result %u is %s, inference gives %s", o,
                           loom_ir_type_format(g, t, a, sizeof a),
                           loom_ir_type_format(g, &types[o], b, sizeof b));
            }
        }
        for (uint32_t s = 0; s < loom_ir_op_state_results(n->op); s++) {
            const value_rec *r = ir_value_rec(g, n->in[s]);
            for (uint32_t u = 0; u < r->n_uses; u++) {
                const loom_ir_node *w = loom_ir_node_get(g, r->uses[u].node);
                if ((r->uses[u].node != id || r->uses[u].slot != s) &&
                    r->uses[u].slot < loom_ir_op_state_results(w->op)) {
                    char lab[96];
                    return bad(g, id, err, "cache %s is also written by node #%u: a cache "
                               "version is written at most once",
                               ir_value_label(g, n->in[s], lab, sizeof lab), r->uses[u].node);
                }
            }
        }
    }
    return LOOM_OK;
}

loom_status loom_ir_verify(const loom_ir_graph *g, loom_error *err) {
    loom_status st = check_decls(g, err);
    if (st || (st = ir_check_structure(g, err))) return st;
    /* Cycles before the schedule: a cycle is always also a use above its definition. */
    loom_ir_node_id *order = malloc((g->n_live_nodes ? g->n_live_nodes : 1) * sizeof *order);
    if (!order) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "verify: out of memory");
    uint32_t n;
    st = loom_ir_topo_order(g, order, &n, err);
    free(order);
    if (st || (st = check_schedule(g, err)) || (st = check_types(g, err))) return st;
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (!live(g, g->outputs[i].value))
            return bad(g, LOOM_IR_NO_NODE, err, "output %s refers to value %u, which is not "
                       "defined", g->outputs[i].name, g->outputs[i].value);
    return LOOM_OK;
}
