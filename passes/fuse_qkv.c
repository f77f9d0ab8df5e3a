/* fuse_qkv.c: pass `fuse-qkv`, the attention's Q, K and V projections in one node.
 *
 *   %q = matmul(%x, @Wq)
 *   %k = matmul(%x, @Wk)               ->   %q, %k, %v = matmul_triple(%x, @Wq, @Wk, @Wv)
 *   %v = matmul(%x, @Wv)
 *
 * Fires when %x feeds exactly three matmuls (as their input, operand 0): with two or four the
 * grouping would be a guess. The weights may be of any mix of types (q4_k, q4_k, q6_k). When
 * each product feeds only a bias add, add(%q, @bq) etc. (qwen2), the biases ride along:
 * matmul_triple(%x, @Wq, @Wk, @Wv, @bq, @bk, @bv) replaces the three adds. Results keep the
 * matmuls' program order.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

/* The bias of product p when its only use is add(p, b) with a rank-1 b; else LOOM_IR_NO_VALUE.
 * *add receives the add node. */
static loom_ir_value_id bias_of(const loom_ir_graph *g, loom_ir_value_id p, loom_ir_node_id *add) {
    if (!loom_pass_single_use(g, p)) return LOOM_IR_NO_VALUE;
    loom_ir_use u = loom_ir_value_use_at(g, p, 0);
    const loom_ir_node *n = loom_ir_node_get(g, u.node);
    if (n->op != LOOM_IR_OP_ADD || u.slot != 0 || loom_ir_value_get(g, n->in[1])->type.rank != 1)
        return LOOM_IR_NO_VALUE;
    *add = u.node;
    return n->in[1];
}

/* Match: node 0..2 the matmuls in program order; when the biases ride along, n_nodes = 6 with
 * nodes 3..5 the bias adds and val[0..2] the biases (the rewrite tells the cases by n_nodes). */
static bool guard(const loom_ir_graph *g, loom_match *m) {
    loom_ir_value_id x = loom_match_node(g, m, 0)->in[0];
    if (loom_pass_users(g, x, LOOM_IR_OP_MATMUL, 0, m->node, 3) != 3) return false;
    m->n_nodes = 3;
    for (uint32_t i = 0; i < 3; i++)
        if (loom_pass_has_prenorm(loom_match_node(g, m, i))) return false;
    loom_ir_value_id in[7] = {x}, old[3];
    uint32_t n_bias = 0;
    for (uint32_t i = 0; i < 3; i++) {
        const loom_ir_node *mm = loom_match_node(g, m, i);
        in[1 + i] = mm->in[1];
        old[i] = mm->out[0];
        m->val[i] = bias_of(g, mm->out[0], &m->node[3 + i]);
        n_bias += m->val[i] != LOOM_IR_NO_VALUE;
    }
    if (n_bias == 3) {
        m->n_nodes = 6;
        for (uint32_t i = 0; i < 3; i++) {
            in[4 + i] = m->val[i];
            old[i] = loom_match_node(g, m, 3 + i)->out[0];
        }
        if (loom_pass_infers_as(g, LOOM_IR_OP_MATMUL_TRIPLE, in, 7, NULL, 0, old, 3)) return true;
        m->n_nodes = 3; /* biases that do not fit: fuse the products alone */
        for (uint32_t i = 0; i < 3; i++) old[i] = loom_match_node(g, m, i)->out[0];
    }
    return loom_pass_infers_as(g, LOOM_IR_OP_MATMUL_TRIPLE, in, 4, NULL, 0, old, 3);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    bool bias = m->n_nodes == 6;
    loom_ir_value_id in[7] = {loom_match_node(g, m, 0)->in[0]}, old[3];
    for (uint32_t i = 0; i < 3; i++) {
        in[1 + i] = loom_match_node(g, m, i)->in[1];
        if (bias) in[4 + i] = m->val[i];
        old[i] = loom_match_node(g, m, bias ? 3 + i : i)->out[0];
    }
    return loom_pass_fuse(g, m, LOOM_IR_OP_MATMUL_TRIPLE, in, bias ? 7 : 4, NULL, 0, old, 3, err);
}

static const loom_pattern pattern = {
    .name = "three matmuls of x",
    .root = LOOM_IR_OP_MATMUL,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_qkv(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
