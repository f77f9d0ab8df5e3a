/* fuse_gate_up.c: pass `fuse-gate-up`, the SwiGLU FFN in one node.
 *
 *   %g = matmul(%x, @Wg)
 *   %u = matmul(%x, @Wu)               ->   %y = matmul_pair(%x, @Wg, @Wu) {swiglu=1}
 *   %s = silu(%g)
 *   %y = mul(%s, %u)     (or mul(%u, %s))
 *
 * Both matmuls read the same %x; %g, %u and %s are used inside the pattern only and are no
 * graph outputs (driver rule); gate and up have the same width (checked by inferring the fused
 * op against the mul's type). Two patterns, one per operand order of the mul.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

/* Match slots in both patterns: 0 mul, 1 silu, 2 gate matmul, 3 up matmul. */
static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *mul = loom_match_node(g, m, 0);
    const loom_ir_node *gate = loom_match_node(g, m, 2), *up = loom_match_node(g, m, 3);
    loom_ir_value_id in[3] = {gate->in[0], gate->in[1], up->in[1]};
    loom_ir_attr swiglu = loom_ir_attr_int(LOOM_IR_ATTR_SWIGLU, 1);
    return gate->in[0] == up->in[0] && !loom_pass_has_prenorm(gate) &&
           !loom_pass_has_prenorm(up) &&
           loom_pass_infers_as(g, LOOM_IR_OP_MATMUL_PAIR, in, 3, &swiglu, 1, mul->out, 1);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *mul = loom_match_node(g, m, 0);
    const loom_ir_node *gate = loom_match_node(g, m, 2), *up = loom_match_node(g, m, 3);
    loom_ir_value_id in[3] = {gate->in[0], gate->in[1], up->in[1]};
    loom_ir_attr swiglu = loom_ir_attr_int(LOOM_IR_ATTR_SWIGLU, 1);
    return loom_pass_fuse(g, m, LOOM_IR_OP_MATMUL_PAIR, in, 3, &swiglu, 1, mul->out, 1, err);
}

static const loom_pattern patterns[] = {
    {.name = "mul(silu(x.Wg), x.Wu)", .root = LOOM_IR_OP_MUL, .n_chain = 3,
     .chain = {{0, 0, LOOM_IR_OP_SILU}, {1, 0, LOOM_IR_OP_MATMUL}, {0, 1, LOOM_IR_OP_MATMUL}},
     .guard = guard, .rewrite = rewrite},
    {.name = "mul(x.Wu, silu(x.Wg))", .root = LOOM_IR_OP_MUL, .n_chain = 3,
     .chain = {{0, 1, LOOM_IR_OP_SILU}, {1, 0, LOOM_IR_OP_MATMUL}, {0, 0, LOOM_IR_OP_MATMUL}},
     .guard = guard, .rewrite = rewrite},
};

loom_status loom_pass_fuse_gate_up(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, patterns, 2, 0, n_rewrites, err);
}
