/* fuse_matmul_pair.c: pass `fuse-matmul-pair`, the worked example of docs/writing-a-pass.md.
 *
 *   %a = matmul(%x, @W0)               ->   %a, %b = matmul_pair(%x, @W0, @W1) {swiglu=0}
 *   %b = matmul(%x, @W1)
 *
 * Two matmuls of one input read it once. Fires when %x feeds exactly two matmuls (operand 0);
 * results keep program order. Not in -O2: there fuse-qkv and fuse-gate-up already take every
 * such group of a llama/qwen layer. Useful where gate and up do not end in SwiGLU, or by hand:
 * `loom compile M --passes fuse-norm-weight,fuse-matmul-pair`.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

/* Match: node 0, 1 the two matmuls in program order. */
static bool guard(const loom_ir_graph *g, loom_match *m) {
    loom_ir_value_id x = loom_match_node(g, m, 0)->in[0];
    if (loom_pass_users(g, x, LOOM_IR_OP_MATMUL, 0, m->node, 2) != 2) return false;
    m->n_nodes = 2;
    const loom_ir_node *a = loom_match_node(g, m, 0), *b = loom_match_node(g, m, 1);
    if (loom_pass_has_prenorm(a) || loom_pass_has_prenorm(b)) return false;
    loom_ir_value_id in[3] = {x, a->in[1], b->in[1]}, old[2] = {a->out[0], b->out[0]};
    loom_ir_attr swiglu = loom_ir_attr_int(LOOM_IR_ATTR_SWIGLU, 0);
    return loom_pass_infers_as(g, LOOM_IR_OP_MATMUL_PAIR, in, 3, &swiglu, 1, old, 2);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *a = loom_match_node(g, m, 0), *b = loom_match_node(g, m, 1);
    loom_ir_value_id in[3] = {a->in[0], a->in[1], b->in[1]}, old[2] = {a->out[0], b->out[0]};
    loom_ir_attr swiglu = loom_ir_attr_int(LOOM_IR_ATTR_SWIGLU, 0);
    return loom_pass_fuse(g, m, LOOM_IR_OP_MATMUL_PAIR, in, 3, &swiglu, 1, old, 2, err);
}

static const loom_pattern pattern = {
    .name = "two matmuls of x",
    .root = LOOM_IR_OP_MATMUL,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_matmul_pair(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
