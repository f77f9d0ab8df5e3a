/* fuse_norm_weight.c: pass `fuse-norm-weight`.
 *
 *   %n = rms_norm(%x) {eps}            ->   %y = fused_rms_norm(%x, %w) {eps}
 *   %y = mul(%n, %w)
 *
 * Covers the norms before attention and FFN, the final norm, and qwen3's per-head Q/K norms
 * (rms_norm over [T,H,D] times a [D] weight). %n must be used by the mul only and not be a
 * graph output (the driver's rule for chain nodes); %w must be the float vector fused_rms_norm
 * takes, of the mul's broadcast shape (checked by inferring the fused op).
 */
#include "passes/passes.h"
#include "passes/pattern.h"

static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *mul = loom_match_node(g, m, 0), *norm = loom_match_node(g, m, 1);
    loom_ir_value_id w = mul->in[0] == norm->out[0] ? mul->in[1] : mul->in[0]; /* other operand */
    if (w == norm->out[0]) return false; /* mul(n, n) */
    m->val[0] = w;
    loom_ir_value_id in[2] = {norm->in[0], w};
    return loom_pass_infers_as(g, LOOM_IR_OP_FUSED_RMS_NORM, in, 2, norm->attrs, norm->n_attrs,
                               mul->out, 1);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *mul = loom_match_node(g, m, 0), *norm = loom_match_node(g, m, 1);
    loom_ir_value_id in[2] = {norm->in[0], m->val[0]};
    return loom_pass_fuse(g, m, LOOM_IR_OP_FUSED_RMS_NORM, in, 2, norm->attrs, norm->n_attrs,
                          mul->out, 1, err);
}

static const loom_pattern pattern = {
    .name = "mul(rms_norm(x), w)",
    .root = LOOM_IR_OP_MUL,
    .chain = {{0, LOOM_PATTERN_ANY_SLOT, LOOM_IR_OP_RMS_NORM}},
    .n_chain = 1,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_norm_weight(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
