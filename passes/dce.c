/* dce.c: pass `dce`, dead code elimination.
 *
 * Erases every node whose results are all unused and none is a graph output, except nodes that
 * write state (kv_write: the write is the effect, ops.def flag WRITES_STATE). Walks the program
 * backwards, so a whole dead chain goes in one walk (a node's users come after it).
 */
#include "passes/passes.h"

static bool dead(const loom_ir_graph *g, const loom_ir_node *n) {
    if (loom_ir_op_info_get(n->op)->flags & LOOM_IR_OPF_WRITES_STATE) return false;
    for (uint32_t r = 0; r < n->n_out; r++)
        if (loom_ir_value_use_count(g, n->out[r]) || loom_ir_value_is_output(g, n->out[r]))
            return false;
    return true;
}

loom_status loom_pass_dce(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    uint32_t n = 0;
    loom_status st = LOOM_OK;
    for (loom_ir_node_id id = loom_ir_last_node(g), prev; id != LOOM_IR_NO_NODE; id = prev) {
        const loom_ir_node *node = loom_ir_node_get(g, id);
        prev = node->prev;
        if (!dead(g, node)) continue;
        if ((st = loom_ir_node_erase(g, id, err))) break;
        n++;
    }
    if (n_rewrites) *n_rewrites = n;
    return st;
}
