/* fuse_norm_matmul.c: pass `fuse-norm-matmul`, an RMSNorm folded into the matmul it feeds.
 *
 *   %xn = fused_rms_norm(%x, @nw) {eps}       ->   %q, %k, %v = matmul_triple(%x, @Wq, @Wk, @Wv,
 *   %q, %k, %v = matmul_triple(%xn, @Wq,               @nw) {norm_eps=eps}
 *                              @Wk, @Wv)
 *
 * and alike for matmul_pair (the FFN norm): the node keeps its operands and attributes and gains
 * @nw as its last operand with norm_eps (ops.def "prenorm"), so the kernels normalize x while
 * they stage it and the norm's launch and its [T,K] result go away. The final norm stays before
 * the lm head's matmul: there every one of its ~19K blocks (151936 rows) would redo the 10 KB
 * reduction, 166 us folded against 146 us norm + matmul (H200, bench/RESULTS session 4), while
 * the triple and the pair, a few hundred blocks each, gain ~2 us a norm. Fires when %xn is
 * used only as that node's x (the driver's intermediate rule), the node has no prenorm yet and
 * @nw is an f32 vector [K] (checked by inferring the fused node; an f16 norm weight stays a
 * separate norm). What a backend's kernels need of @nw is the backend's business, not this
 * pass's: the CUDA kernels read it as float4, and the CUDA backend runs a node whose @nw is not
 * 16-byte aligned on the device (a mapped GGUF at such an offset) as the norm then the matmul
 * (loom_exec_cuda_prenorm_folds). Run it after fuse-qkv and fuse-gate-up, which take plain
 * matmuls only, and before cse, which may give %xn a second user.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

/* The fused node's operands (the root's with the norm's input as x, plus the norm weight) and
 * attributes (the root's with norm_eps set to the norm's eps). */
static void operands(const loom_ir_graph *g, const loom_match *m,
                     loom_ir_value_id in[LOOM_IR_MAX_INPUTS], uint32_t *n_in,
                     loom_ir_attr attrs[LOOM_IR_MAX_ATTRS]) {
    const loom_ir_node *mm = loom_match_node(g, m, 0), *norm = loom_match_node(g, m, 1);
    for (uint32_t i = 0; i < mm->n_in; i++) in[i] = mm->in[i];
    in[0] = norm->in[0];
    in[mm->n_in] = norm->in[1];
    *n_in = mm->n_in + 1u;
    for (uint32_t i = 0; i < mm->n_attrs; i++) {
        attrs[i] = mm->attrs[i];
        if (attrs[i].id == LOOM_IR_ATTR_NORM_EPS)
            attrs[i] = loom_ir_attr_float(LOOM_IR_ATTR_NORM_EPS,
                                          loom_ir_node_attr_float(norm, LOOM_IR_ATTR_EPS, 0));
    }
}

static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *mm = loom_match_node(g, m, 0);
    if (loom_pass_has_prenorm(mm) || mm->n_in >= LOOM_IR_MAX_INPUTS) return false;
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS];
    loom_ir_attr attrs[LOOM_IR_MAX_ATTRS];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs);
    return loom_pass_infers_as(g, mm->op, in, n_in, attrs, mm->n_attrs, mm->out, mm->n_out);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *mm = loom_match_node(g, m, 0);
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS];
    loom_ir_attr attrs[LOOM_IR_MAX_ATTRS];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs);
    return loom_pass_fuse(g, m, mm->op, in, n_in, attrs, mm->n_attrs, mm->out, mm->n_out, err);
}

#define NORM_INTO(OP, NAME)                                                                  \
    {.name = NAME, .root = LOOM_IR_OP_##OP, .chain = {{0, 0, LOOM_IR_OP_FUSED_RMS_NORM}},   \
     .n_chain = 1, .guard = guard, .rewrite = rewrite}

static const loom_pattern patterns[] = {
    NORM_INTO(MATMUL_TRIPLE, "matmul_triple(fused_rms_norm(x), ...)"),
    NORM_INTO(MATMUL_PAIR, "matmul_pair(fused_rms_norm(x), ...)"),
};

loom_status loom_pass_fuse_norm_matmul(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, patterns, sizeof patterns / sizeof *patterns, 0, n_rewrites, err);
}
