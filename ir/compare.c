/* compare.c: deep clone (same ids) and structural equality of two graphs.
 *
 * Equality walks both graphs in declaration and program order, mapping a's values to b's as it
 * goes (declarations by position, node results by position), so ids, holes and result names do
 * not matter, while names of declarations, types, offsets, attributes and the schedule do.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

/* ---- clone ---- */

static bool clone_list(id_list *dst, const id_list *src) {
    if (!src->n) return true;
    dst->v = malloc(src->n * sizeof *dst->v);
    if (!dst->v) return false;
    memcpy(dst->v, src->v, src->n * sizeof *dst->v);
    dst->n = dst->cap = src->n;
    return true;
}

static bool clone_body(loom_ir_graph *c, const loom_ir_graph *g) {
    for (uint32_t i = 0; i < g->n_symbols; i++) {
        c->symbols[i] = g->symbols[i];
        if (!(c->symbols[i].name = ir_arena_strdup(c, g->symbols[i].name))) return false;
    }
    c->n_symbols = g->n_symbols;
    for (uint32_t v = 0; v < g->n_values; v++) {
        const value_rec *r = ir_value_rec(g, v);
        if (ir_new_value(c, r->pub.kind, &r->pub.type) == LOOM_IR_NO_VALUE) return false;
        value_rec *d = ir_value_rec(c, v);
        d->pub = r->pub;
        if (r->pub.name && !(d->pub.name = ir_arena_strdup(c, r->pub.name))) return false;
        if (r->n_uses) {
            if (!(d->uses = malloc(r->n_uses * sizeof *d->uses))) return false;
            memcpy(d->uses, r->uses, r->n_uses * sizeof *d->uses);
            d->n_uses = d->cap_uses = r->n_uses;
        }
    }
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        if (ir_new_node(c) == LOOM_IR_NO_NODE) return false;
        loom_ir_node *d = ir_node_mut(c, id);
        *d = *ir_node_mut(g, id);
        for (uint32_t a = 0; a < d->n_attrs; a++) {
            loom_ir_attr *at = &d->attrs[a];
            if (at->kind == LOOM_IR_ATTR_KIND_STRING) {
                if (!(at->u.s = ir_arena_strdup(c, at->u.s))) return false;
            } else if (at->kind == LOOM_IR_ATTR_KIND_INTS || at->kind == LOOM_IR_ATTR_KIND_SHAPE) {
                int64_t *p = ir_arena_alloc(c, (at->count ? at->count : 1) * sizeof *p);
                if (!p) return false;
                if (at->count) memcpy(p, at->u.ints, at->count * sizeof *p);
                at->u.ints = p;
            }
        }
    }
    c->n_live_nodes = g->n_live_nodes;
    c->first = g->first;
    c->last = g->last;
    c->insert_before = g->insert_before;
    if (!clone_list(&c->inputs, &g->inputs) || !clone_list(&c->weights, &g->weights) ||
        !clone_list(&c->states, &g->states))
        return false;
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (loom_ir_add_output(c, g->outputs[i].name, g->outputs[i].value, NULL)) return false;
    for (uint32_t i = 0; i < g->n_meta; i++) {
        const loom_ir_meta *m = &g->meta[i];
        loom_status st = m->kind == LOOM_IR_META_INT     ? loom_ir_meta_set_int(c, m->key, m->i, NULL)
                         : m->kind == LOOM_IR_META_FLOAT ? loom_ir_meta_set_float(c, m->key, m->f, NULL)
                                                         : loom_ir_meta_set_string(c, m->key, m->s, NULL);
        if (st) return false;
    }
    return true;
}

loom_ir_graph *loom_ir_graph_clone(const loom_ir_graph *g, loom_error *err) {
    loom_ir_graph *c = loom_ir_graph_create();
    if (!c || !clone_body(c, g)) {
        loom_ir_graph_destroy(c);
        loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: clone: out of memory");
        return NULL;
    }
    return c;
}

/* ---- equality ---- */

typedef struct eq {
    const loom_ir_graph *a, *b;
    loom_ir_value_id *map; /* a's value id -> b's, NO_VALUE when not yet mapped */
    loom_error *diff;
} eq;

__attribute__((format(printf, 2, 3))) static bool differ(eq *e, const char *fmt, ...) {
    if (e->diff) {
        char msg[LOOM_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        loom_error_set(e->diff, LOOM_ERR_VERIFY, "graphs differ: %s", msg);
    }
    return false;
}

static bool same_type(eq *e, const loom_ir_type *ta, const loom_ir_type *tb, const char *what) {
    char x[96], y[96];
    if (loom_ir_type_equal(ta, tb)) return true;
    return differ(e, "%s: %s vs %s", what, loom_ir_type_format(e->a, ta, x, sizeof x),
                  loom_ir_type_format(e->b, tb, y, sizeof y));
}

static bool same_decls(eq *e, const id_list *la, const id_list *lb, const char *kw) {
    if (la->n != lb->n) return differ(e, "%u vs %u %s declarations", la->n, lb->n, kw);
    for (uint32_t i = 0; i < la->n; i++) {
        const loom_ir_value *va = loom_ir_value_get(e->a, la->v[i]);
        const loom_ir_value *vb = loom_ir_value_get(e->b, lb->v[i]);
        char what[320];
        snprintf(what, sizeof what, "%s %u (%s)", kw, i, va->name);
        if (strcmp(va->name, vb->name)) return differ(e, "%s vs %s", what, vb->name);
        if (!same_type(e, &va->type, &vb->type, what)) return false;
        if (va->offset != vb->offset || va->size != vb->size)
            return differ(e, "%s: offset/size %llu/%llu vs %llu/%llu", what,
                          (unsigned long long)va->offset, (unsigned long long)va->size,
                          (unsigned long long)vb->offset, (unsigned long long)vb->size);
        e->map[la->v[i]] = lb->v[i];
    }
    return true;
}

static bool same_meta(eq *e) {
    const loom_ir_graph *a = e->a, *b = e->b;
    if (a->n_meta != b->n_meta) return differ(e, "%u vs %u metadata keys", a->n_meta, b->n_meta);
    for (uint32_t i = 0; i < a->n_meta; i++) {
        const loom_ir_meta *ma = &a->meta[i], *mb = loom_ir_meta_get(b, ma->key);
        if (!mb) return differ(e, "metadata %s missing in the second graph", ma->key);
        bool same = ma->kind == mb->kind &&
                    (ma->kind == LOOM_IR_META_INT     ? ma->i == mb->i
                     : ma->kind == LOOM_IR_META_FLOAT ? !memcmp(&ma->f, &mb->f, sizeof ma->f)
                                                      : !strcmp(ma->s, mb->s));
        if (!same) return differ(e, "metadata %s differs", ma->key);
    }
    return true;
}

static bool same_nodes(eq *e) {
    const loom_ir_graph *a = e->a, *b = e->b;
    if (a->n_live_nodes != b->n_live_nodes)
        return differ(e, "%u vs %u nodes", a->n_live_nodes, b->n_live_nodes);
    loom_ir_node_id ia = a->first, ib = b->first;
    for (uint32_t k = 0; ia != LOOM_IR_NO_NODE && ib != LOOM_IR_NO_NODE; k++) {
        const loom_ir_node *na = loom_ir_node_get(a, ia), *nb = loom_ir_node_get(b, ib);
        const char *opa = loom_ir_op_info_get(na->op)->name;
        char lab[96], lb[96];
        if (na->op != nb->op)
            return differ(e, "node %u: %s vs %s", k, opa, loom_ir_op_info_get(nb->op)->name);
        if (na->n_in != nb->n_in || na->n_out != nb->n_out)
            return differ(e, "node %u (%s): operand/result counts differ", k, opa);
        for (uint32_t i = 0; i < na->n_in; i++)
            if (na->in[i] >= a->n_values || e->map[na->in[i]] != nb->in[i])
                return differ(e, "node %u (%s): operand %u is %s vs %s", k, opa, i,
                              ir_value_label(a, na->in[i], lab, sizeof lab),
                              ir_value_label(b, nb->in[i], lb, sizeof lb));
        for (uint32_t i = 0; i < na->n_attrs; i++)
            if (!ir_attr_equal(&na->attrs[i], &nb->attrs[i]))
                return differ(e, "node %u (%s): attribute %s differs", k, opa,
                              loom_ir_attr_info_get(na->attrs[i].id)->name);
        for (uint32_t o = 0; o < na->n_out; o++) {
            if (na->out[o] >= a->n_values || nb->out[o] >= b->n_values)
                return differ(e, "node %u (%s): result %u is not a value", k, opa, o);
            char what[64];
            snprintf(what, sizeof what, "node %u (%s) result %u", k, opa, o);
            if (!same_type(e, &loom_ir_value_get(a, na->out[o])->type,
                           &loom_ir_value_get(b, nb->out[o])->type, what))
                return false;
            e->map[na->out[o]] = nb->out[o];
        }
        ia = na->next;
        ib = nb->next;
    }
    return true;
}

bool loom_ir_graph_equal(const loom_ir_graph *a, const loom_ir_graph *b, loom_error *diff) {
    eq e = {a, b, NULL, diff};
    if (a->n_symbols != b->n_symbols)
        return differ(&e, "%u vs %u symbols", a->n_symbols, b->n_symbols);
    for (uint32_t i = 0; i < a->n_symbols; i++)
        if (strcmp(a->symbols[i].name, b->symbols[i].name) ||
            a->symbols[i].max != b->symbols[i].max)
            return differ(&e, "symbol %u: %s max=%lld vs %s max=%lld", i, a->symbols[i].name,
                          (long long)a->symbols[i].max, b->symbols[i].name,
                          (long long)b->symbols[i].max);
    if (!same_meta(&e)) return false;
    e.map = malloc((a->n_values ? a->n_values : 1) * sizeof *e.map);
    if (!e.map) return differ(&e, "out of memory while comparing");
    for (uint32_t v = 0; v < a->n_values; v++) e.map[v] = LOOM_IR_NO_VALUE;
    bool ok = same_decls(&e, &a->inputs, &b->inputs, "input") &&
              same_decls(&e, &a->weights, &b->weights, "weight") &&
              same_decls(&e, &a->states, &b->states, "state") && same_nodes(&e);
    if (ok && a->n_outputs != b->n_outputs)
        ok = differ(&e, "%u vs %u outputs", a->n_outputs, b->n_outputs);
    for (uint32_t i = 0; ok && i < a->n_outputs; i++) {
        if (strcmp(a->outputs[i].name, b->outputs[i].name))
            ok = differ(&e, "output %u: %s vs %s", i, a->outputs[i].name, b->outputs[i].name);
        else if (a->outputs[i].value >= a->n_values ||
                 e.map[a->outputs[i].value] != b->outputs[i].value)
            ok = differ(&e, "output %s names different values", a->outputs[i].name);
    }
    free(e.map);
    return ok;
}
