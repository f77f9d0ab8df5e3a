/* fuse_residual_add.c: pass `fuse-residual-add`.
 *
 *   %p = matmul(%x, @W)                ->   %y = matmul_add(%x, @W, %r)
 *   %y = add(%p, %r)     (or add(%r, %p))
 *
 * The residual adds after the attention output and FFN down projections. %p must feed the add
 * only and not be a graph output; %r must have exactly the product's type (so a bias vector,
 * which add broadcasts, never fuses: matmul_add takes a full-shape residual).
 */
#include "passes/passes.h"
#include "passes/pattern.h"

static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *add = loom_match_node(g, m, 0), *mm = loom_match_node(g, m, 1);
    loom_ir_value_id r = add->in[0] == mm->out[0] ? add->in[1] : add->in[0]; /* other operand */
    if (r == mm->out[0] || loom_pass_has_prenorm(mm)) return false; /* add(p, p); normed x */
    m->val[0] = r;
    loom_ir_value_id in[3] = {mm->in[0], mm->in[1], r};
    return loom_pass_infers_as(g, LOOM_IR_OP_MATMUL_ADD, in, 3, NULL, 0, add->out, 1);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *add = loom_match_node(g, m, 0), *mm = loom_match_node(g, m, 1);
    loom_ir_value_id in[3] = {mm->in[0], mm->in[1], m->val[0]};
    return loom_pass_fuse(g, m, LOOM_IR_OP_MATMUL_ADD, in, 3, NULL, 0, add->out, 1, err);
}

static const loom_pattern pattern = {
    .name = "add(matmul(x, W), r)",
    .root = LOOM_IR_OP_ADD,
    .chain = {{0, LOOM_PATTERN_ANY_SLOT, LOOM_IR_OP_MATMUL}},
    .n_chain = 1,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_residual_add(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
