/* fuse_rope_kv_write.c: pass `fuse-rope-kv-write`, an attention's prologue in one node.
 *
 *   %qn = fused_rms_norm(%q, @qw) {eps}        (qwen3 only; both norms or neither)
 *   %kn = fused_rms_norm(%k, @kw) {eps}
 *   %qr = rope(%qn, %pos) {rope}
 *   %kr = rope(%kn, %pos) {rope}          ->   %kc, %vc, %qr = rope_kv_write(@kv.k, @kv.v, %q, %k,
 *   %kc = kv_write(@kv.k, %kr, %pos)                %v, %pos, @qw, @kw) {eps, rope}
 *   %vc = kv_write(@kv.v, %v, %pos)            %a = attention(%qr, %kc, %vc, %pos) {...}
 *   %a = attention(%qr, %kc, %vc, %pos) {...}
 *
 * Rooted at the attention, which says which Q, K cache and V cache belong together; it stays.
 * Fires when the roped q, roped k and both cache versions are used only there (the driver's
 * intermediate rule), both ropes and both writes take one positions value and the ropes have
 * equal attributes. The norms ride along when both rope inputs are single-use fused_rms_norms
 * of one eps with f32 weights; otherwise they stay outside (eps = 0). Shapes and dtypes are
 * checked by inferring the fused op. Run it after fuse-norm-weight.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

enum { ATT, ROPE_Q, KV_K, KV_V, ROPE_K, NORM_Q, NORM_K }; /* match slots */

static bool same_rope(const loom_ir_node *a, const loom_ir_node *b) {
    return loom_ir_node_attr_int(a, LOOM_IR_ATTR_MODE, 0) ==
               loom_ir_node_attr_int(b, LOOM_IR_ATTR_MODE, 0) &&
           loom_ir_node_attr_int(a, LOOM_IR_ATTR_N_ROT, 0) ==
               loom_ir_node_attr_int(b, LOOM_IR_ATTR_N_ROT, 0) &&
           loom_ir_node_attr_float(a, LOOM_IR_ATTR_FREQ_BASE, 0) ==
               loom_ir_node_attr_float(b, LOOM_IR_ATTR_FREQ_BASE, 0) &&
           loom_ir_node_attr_float(a, LOOM_IR_ATTR_FREQ_SCALE, 0) ==
               loom_ir_node_attr_float(b, LOOM_IR_ATTR_FREQ_SCALE, 0);
}

/* The fused node's operands (*n_in: 6, or 8 when the match holds the norms) and attributes;
 * old[] the values it replaces. */
static void operands(const loom_ir_graph *g, const loom_match *m, loom_ir_value_id in[8],
                     uint32_t *n_in, loom_ir_attr attrs[5], loom_ir_value_id old[3]) {
    const loom_ir_node *rq = loom_match_node(g, m, ROPE_Q), *rk = loom_match_node(g, m, ROPE_K);
    const loom_ir_node *wk = loom_match_node(g, m, KV_K), *wv = loom_match_node(g, m, KV_V);
    bool norms = m->n_nodes == 7;
    const loom_ir_node *nq = norms ? loom_match_node(g, m, NORM_Q) : NULL;
    const loom_ir_node *nk = norms ? loom_match_node(g, m, NORM_K) : NULL;
    loom_ir_value_id v[8] = {wk->in[0], wv->in[0], norms ? nq->in[0] : rq->in[0],
                             norms ? nk->in[0] : rk->in[0], wv->in[1], rq->in[1],
                             norms ? nq->in[1] : 0, norms ? nk->in[1] : 0};
    for (int i = 0; i < 8; i++) in[i] = v[i];
    *n_in = norms ? 8 : 6;
    attrs[0] = loom_ir_attr_float(LOOM_IR_ATTR_EPS,
                                  norms ? loom_ir_node_attr_float(nq, LOOM_IR_ATTR_EPS, 0) : 0.0f);
    attrs[1] = loom_ir_attr_int(LOOM_IR_ATTR_MODE, loom_ir_node_attr_int(rq, LOOM_IR_ATTR_MODE, 0));
    attrs[2] = loom_ir_attr_int(LOOM_IR_ATTR_N_ROT, loom_ir_node_attr_int(rq, LOOM_IR_ATTR_N_ROT, 0));
    attrs[3] = loom_ir_attr_float(LOOM_IR_ATTR_FREQ_BASE,
                                  loom_ir_node_attr_float(rq, LOOM_IR_ATTR_FREQ_BASE, 0));
    attrs[4] = loom_ir_attr_float(LOOM_IR_ATTR_FREQ_SCALE,
                                  loom_ir_node_attr_float(rq, LOOM_IR_ATTR_FREQ_SCALE, 0));
    old[0] = wk->out[0];
    old[1] = wv->out[0];
    old[2] = rq->out[0];
}

static bool fits(const loom_ir_graph *g, const loom_match *m) {
    loom_ir_value_id in[8], old[3];
    loom_ir_attr attrs[5];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs, old);
    return loom_pass_infers_as(g, LOOM_IR_OP_ROPE_KV_WRITE, in, n_in, attrs, 5, old, 3);
}

static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *rq = loom_match_node(g, m, ROPE_Q), *rk = loom_match_node(g, m, ROPE_K);
    const loom_ir_node *wk = loom_match_node(g, m, KV_K), *wv = loom_match_node(g, m, KV_V);
    loom_ir_value_id pos = rq->in[1];
    if (rk->in[1] != pos || wk->in[2] != pos || wv->in[2] != pos || !same_rope(rq, rk))
        return false;
    const loom_ir_node *nq = loom_pass_def(g, rq->in[0], LOOM_IR_OP_FUSED_RMS_NORM);
    const loom_ir_node *nk = loom_pass_def(g, rk->in[0], LOOM_IR_OP_FUSED_RMS_NORM);
    if (nq && nk && nq != nk && loom_pass_single_use(g, rq->in[0]) &&
        loom_pass_single_use(g, rk->in[0]) &&
        loom_ir_node_attr_float(nq, LOOM_IR_ATTR_EPS, 0) ==
            loom_ir_node_attr_float(nk, LOOM_IR_ATTR_EPS, 0)) {
        m->node[NORM_Q] = loom_ir_value_get(g, rq->in[0])->def;
        m->node[NORM_K] = loom_ir_value_get(g, rk->in[0])->def;
        m->n_nodes = 7;
        if (fits(g, m)) return true;
        m->n_nodes = 5; /* norms that do not fit (f16 weights, ...): they stay outside */
    }
    return fits(g, m);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    loom_ir_value_id in[8], old[3];
    loom_ir_attr attrs[5];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs, old);
    return loom_pass_fuse(g, m, LOOM_IR_OP_ROPE_KV_WRITE, in, n_in, attrs, 5, old, 3, err);
}

static const loom_pattern pattern = {
    .name = "attention(rope(q), kv_write(rope(k)), kv_write(v))",
    .root = LOOM_IR_OP_ATTENTION,
    .chain = {{ATT, 0, LOOM_IR_OP_ROPE},
              {ATT, 1, LOOM_IR_OP_KV_WRITE},
              {ATT, 2, LOOM_IR_OP_KV_WRITE},
              {KV_K, 1, LOOM_IR_OP_ROPE}},
    .n_chain = 4,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_rope_kv_write(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
