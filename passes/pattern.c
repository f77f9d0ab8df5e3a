/* pattern.c: the pattern driver (match a root op and its producer chain, guard, rewrite, to a
 * fixed point under a sweep cap) and the matching/rewriting helpers of pattern.h.
 *
 * Each sweep visits a snapshot of the program taken when it starts, so nodes erased or built by
 * a rewrite never disturb the walk: erased ones are skipped, new ones are seen by the next
 * sweep. Matching is greedy and does not backtrack (an ANY_SLOT step takes the first operand that
 * fits).
 */
#include "passes/pattern.h"

#include <stdlib.h>
#include <string.h>

const loom_ir_node *loom_pass_def(const loom_ir_graph *g, loom_ir_value_id v, loom_ir_op op) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!val || val->kind != LOOM_IR_VALUE_NODE) return NULL;
    const loom_ir_node *n = loom_ir_node_get(g, val->def);
    return n && !n->erased && (op == LOOM_IR_OP_COUNT || n->op == op) ? n : NULL;
}

bool loom_pass_single_use(const loom_ir_graph *g, loom_ir_value_id v) {
    return loom_ir_value_use_count(g, v) == 1 && !loom_ir_value_is_output(g, v);
}

bool loom_pass_same_type(const loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b) {
    const loom_ir_value *va = loom_ir_value_get(g, a), *vb = loom_ir_value_get(g, b);
    return va && vb && loom_ir_type_equal(&va->type, &vb->type);
}

bool loom_pass_before(const loom_ir_graph *g, loom_ir_node_id a, loom_ir_node_id b) {
    for (loom_ir_node_id id = loom_ir_node_get(g, a)->next; id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        if (id == b) return true;
    return false;
}

uint32_t loom_pass_users(const loom_ir_graph *g, loom_ir_value_id v, loom_ir_op op, uint32_t slot,
                         loom_ir_node_id *out, uint32_t cap) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < loom_ir_value_use_count(g, v); i++) {
        loom_ir_use u = loom_ir_value_use_at(g, v, i);
        if (u.slot != slot || loom_ir_node_get(g, u.node)->op != op) continue;
        if (n < cap) { /* insertion in program order */
            uint32_t j = n;
            while (j > 0 && loom_pass_before(g, u.node, out[j - 1])) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = u.node;
        } else { /* keep the cap earliest */
            for (uint32_t j = 0; j < cap; j++)
                if (loom_pass_before(g, u.node, out[j])) {
                    memmove(&out[j + 1], &out[j], (cap - j - 1) * sizeof *out);
                    out[j] = u.node;
                    break;
                }
        }
        n++;
    }
    return n;
}

bool loom_pass_infers_as(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                         uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                         const loom_ir_value_id *want, uint32_t n_want) {
    loom_ir_type out[LOOM_IR_MAX_OUTPUTS];
    uint32_t n_out = 0;
    loom_error ignored = {0};
    if (loom_ir_infer(g, op, in, n_in, attrs, n_attrs, out, &n_out, &ignored) || n_out != n_want)
        return false;
    for (uint32_t i = 0; i < n_out; i++)
        if (!loom_ir_type_equal(&out[i], &loom_ir_value_get(g, want[i])->type)) return false;
    return true;
}

static bool in_match(const loom_match *m, loom_ir_node_id id) {
    for (uint32_t i = 0; i < m->n_nodes; i++)
        if (m->node[i] == id) return true;
    return false;
}

/* Every result of node id is no graph output and used only inside the match. */
static bool is_intermediate(const loom_ir_graph *g, const loom_match *m, loom_ir_node_id id) {
    const loom_ir_node *n = loom_ir_node_get(g, id);
    for (uint32_t r = 0; r < n->n_out; r++) {
        if (loom_ir_value_is_output(g, n->out[r])) return false;
        for (uint32_t u = 0; u < loom_ir_value_use_count(g, n->out[r]); u++)
            if (!in_match(m, loom_ir_value_use_at(g, n->out[r], u).node)) return false;
    }
    return true;
}

/* Matches p's chain from root; the intermediate rule is checked once the chain is complete
 * (a use by a later chain node is a use inside the match). */
static bool match_chain(const loom_ir_graph *g, const loom_pattern *p, loom_ir_node_id root,
                        loom_match *m) {
    memset(m, 0, sizeof *m);
    m->node[0] = root;
    m->n_nodes = 1;
    for (uint32_t s = 0; s < p->n_chain; s++) {
        const loom_pattern_step *st = &p->chain[s];
        LOOM_ASSERT(st->from < m->n_nodes);
        const loom_ir_node *base = loom_ir_node_get(g, m->node[st->from]);
        uint32_t lo = st->slot == LOOM_PATTERN_ANY_SLOT ? 0 : st->slot;
        uint32_t hi = st->slot == LOOM_PATTERN_ANY_SLOT ? base->n_in : st->slot + 1u;
        bool found = false;
        for (uint32_t slot = lo; slot < hi && slot < base->n_in && !found; slot++) {
            const loom_ir_value *v = loom_ir_value_get(g, base->in[slot]);
            const loom_ir_node *d = loom_pass_def(g, base->in[slot], st->op);
            if (!d || in_match(m, v->def)) continue;
            m->node[m->n_nodes++] = v->def;
            found = true;
        }
        if (!found) return false;
    }
    for (uint32_t i = 1; i < m->n_nodes; i++)
        if (!is_intermediate(g, m, m->node[i])) return false;
    return true;
}

/* Pattern indexes by decreasing benefit, ties in table order. */
static void order_by_benefit(const loom_pattern *pats, uint32_t n, uint32_t *idx) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        while (j > 0 && pats[idx[j - 1]].benefit < pats[i].benefit) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

loom_status loom_pattern_apply(loom_ir_graph *g, const loom_pattern *pats, uint32_t n_pats,
                               uint32_t max_sweeps, uint32_t *n_rewrites, loom_error *err) {
    uint32_t total = 0, cap = max_sweeps ? max_sweeps : LOOM_PATTERN_DEFAULT_SWEEPS;
    const char *last = NULL;
    loom_status st = LOOM_OK;
    uint32_t *idx = malloc((n_pats ? n_pats : 1) * sizeof *idx);
    loom_ir_node_id *snap = NULL;
    if (!idx) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "pattern driver: out of memory");
        goto done;
    }
    order_by_benefit(pats, n_pats, idx);
    for (uint32_t sweep = 0;; sweep++) {
        uint32_t n = 0, rewrites = 0;
        free(snap);
        snap = malloc((loom_ir_node_count(g) + 1) * sizeof *snap);
        if (!snap) {
            st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "pattern driver: out of memory");
            goto done;
        }
        for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
             id = loom_ir_node_get(g, id)->next)
            snap[n++] = id;
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t k = 0; k < n_pats; k++) {
                const loom_pattern *p = &pats[idx[k]];
                const loom_ir_node *node = loom_ir_node_get(g, snap[i]);
                loom_match m;
                if (node->erased || node->op != p->root || !match_chain(g, p, snap[i], &m) ||
                    (p->guard && !p->guard(g, &m)))
                    continue;
                if ((st = p->rewrite(g, &m, err))) {
                    loom_error_prefix(err, "pattern '%s': ", p->name);
                    goto done;
                }
                rewrites++;
                last = p->name;
                break; /* the root is gone or changed: next node */
            }
        }
        total += rewrites;
        if (!rewrites) break;
        if ((st = loom_ir_graph_sort(g, err))) {
            loom_error_prefix(err, "pattern driver: after pattern '%s': ", last);
            goto done;
        }
        if (sweep + 1 >= cap) {
            st = loom_error_set(err, LOOM_ERR_LIMIT,
                                "pattern driver: still rewriting after %u sweeps (%u rewrites, "
                                "last by pattern '%s'): a pattern matches its own result?",
                                cap, total, last);
            goto done;
        }
    }
done:
    free(snap);
    free(idx);
    if (n_rewrites) *n_rewrites = total;
    return st;
}

loom_status loom_pass_fuse(loom_ir_graph *g, const loom_match *m, loom_ir_op op,
                           const loom_ir_value_id *in, uint32_t n_in, const loom_ir_attr *attrs,
                           uint32_t n_attrs, const loom_ir_value_id *old, uint32_t n_old,
                           loom_error *err) {
    loom_ir_node_id last = m->node[0];
    for (uint32_t i = 1; i < m->n_nodes; i++)
        if (loom_pass_before(g, last, m->node[i])) last = m->node[i];
    loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS];
    loom_ir_node_id fused;
    loom_ir_set_insert_point(g, last);
    loom_status st = loom_ir_build(g, op, in, n_in, attrs, n_attrs, out, &fused, err);
    loom_ir_set_insert_point(g, LOOM_IR_NO_NODE);
    if (st) return st;
    LOOM_ASSERT(n_old == loom_ir_node_get(g, fused)->n_out);
    for (uint32_t i = 0; i < n_old; i++)
        if ((st = loom_ir_replace_all_uses(g, old[i], out[i], err))) return st;
    /* Erase users before producers: repeat until no matched node can go. */
    for (bool progress = true; progress;) {
        progress = false;
        for (uint32_t i = 0; i < m->n_nodes; i++) {
            const loom_ir_node *n = loom_ir_node_get(g, m->node[i]);
            bool dead = !n->erased;
            for (uint32_t r = 0; dead && r < n->n_out; r++)
                dead = !loom_ir_value_use_count(g, n->out[r]) && !loom_ir_value_is_output(g, n->out[r]);
            if (!dead) continue;
            if ((st = loom_ir_node_erase(g, m->node[i], err))) return st;
            progress = true;
        }
    }
    return LOOM_OK;
}
