/* cse.c: pass `cse`, common subexpression elimination.
 *
 * Two nodes of the same op with the same operands (same value ids, in order) and equal
 * attributes compute the same results: the later one's uses move to the earlier one and the
 * later one is erased. Ops that write state are never merged (each kv_write is an effect). The
 * candidates for a node are the other users of its first operand, so the pass is linear in the
 * uses rather than quadratic in the nodes. Program order is unchanged: the kept node is the
 * earlier one, above every use of the erased one.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static bool same_attr(const loom_ir_attr *a, const loom_ir_attr *b) {
    if (a->id != b->id || a->kind != b->kind) return false;
    switch ((loom_ir_attr_kind)a->kind) {
    case LOOM_IR_ATTR_KIND_FLOAT:
        return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
    case LOOM_IR_ATTR_KIND_INTS:
    case LOOM_IR_ATTR_KIND_SHAPE:
        return a->count == b->count &&
               (!a->count || !memcmp(a->u.ints, b->u.ints, a->count * sizeof *a->u.ints));
    case LOOM_IR_ATTR_KIND_STRING:
        return !strcmp(a->u.s, b->u.s);
    default:
        return a->u.i == b->u.i;
    }
}

static bool same_computation(const loom_ir_node *a, const loom_ir_node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->n_attrs != b->n_attrs)
        return false;
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in[i] != b->in[i]) return false;
    for (uint32_t i = 0; i < a->n_attrs; i++)
        if (!same_attr(&a->attrs[i], &b->attrs[i])) return false;
    return true;
}

loom_status loom_pass_cse(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    uint32_t n = 0, bound = loom_ir_node_bound(g);
    loom_status st = LOOM_OK;
    uint32_t *pos = malloc((bound ? bound : 1) * sizeof *pos); /* program position of each node */
    if (!pos) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cse: out of memory");
        goto done;
    }
    uint32_t k = 0;
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        pos[id] = k++;
    for (loom_ir_node_id id = loom_ir_first_node(g), next; id != LOOM_IR_NO_NODE; id = next) {
        const loom_ir_node *node = loom_ir_node_get(g, id);
        next = node->next;
        if ((loom_ir_op_info_get(node->op)->flags & LOOM_IR_OPF_WRITES_STATE) || !node->n_in)
            continue;
        for (uint32_t u = 0; u < loom_ir_value_use_count(g, node->in[0]); u++) {
            loom_ir_node_id o = loom_ir_value_use_at(g, node->in[0], u).node;
            if (o == id || pos[o] > pos[id] || !same_computation(loom_ir_node_get(g, o), node))
                continue;
            for (uint32_t r = 0; r < node->n_out && !st; r++)
                st = loom_ir_replace_all_uses(g, node->out[r], loom_ir_node_get(g, o)->out[r], err);
            if (st || (st = loom_ir_node_erase(g, id, err))) goto done;
            n++;
            break;
        }
    }
done:
    free(pos);
    if (n_rewrites) *n_rewrites = n;
    if (st) loom_error_prefix(err, "cse: ");
    return st;
}
