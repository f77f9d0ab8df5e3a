/* fuse_rope_kv_attention.c: pass `fuse-rope-kv-attention`, the attention prologue folded into
 * the attention that reads it.
 *
 *   %kc, %vc, %qr = rope_kv_write(@kv.k, @kv.v,    ->   %kc, %vc, %a = rope_kv_attention(@kv.k,
 *                     %q, %k, %v, %pos, ...) {rope}          @kv.v, %q, %k, %v, %pos, ...)
 *   %a = attention(%qr, %kc, %vc, %pos) {attn}               {rope, attn}
 *
 * Rooted at the attention; fires when its q is result 2 of a rope_kv_write used by nothing
 * else (no other node, no graph output), its caches are that node's results 0 and 1 and both
 * nodes take one positions value. The caches may have further users: they read the fused
 * node's results 0 and 1 after the rewrite (the roped q, used by the attention alone, is no
 * value any more). So the backends can norm and rope q inside the attention launch (decode
 * steps on CUDA) instead of writing it out and reading it back. Run it after fuse-rope-kv-write, which makes the
 * rope_kv_write.
 */
#include "passes/passes.h"
#include "passes/pattern.h"

enum { ATT, RKW, N_ATTRS = 9 }; /* match slots; the fused node's attribute count */

/* The fused node's operands (the rope_kv_write's) and attributes (its five, then the
 * attention's four); old[] the values it replaces (the caches and the attention's output). */
static void operands(const loom_ir_graph *g, const loom_match *m,
                     loom_ir_value_id in[LOOM_IR_MAX_INPUTS], uint32_t *n_in,
                     loom_ir_attr attrs[N_ATTRS], loom_ir_value_id old[3]) {
    const loom_ir_node *att = loom_match_node(g, m, ATT), *rkw = loom_match_node(g, m, RKW);
    for (uint32_t i = 0; i < rkw->n_in; i++) in[i] = rkw->in[i];
    *n_in = rkw->n_in;
    uint32_t k = 0;
    for (uint32_t i = 0; i < rkw->n_attrs; i++) attrs[k++] = rkw->attrs[i];
    for (uint32_t i = 0; i < att->n_attrs; i++) attrs[k++] = att->attrs[i];
    LOOM_ASSERT(k == N_ATTRS);
    old[0] = rkw->out[0];
    old[1] = rkw->out[1];
    old[2] = att->out[0];
}

static bool guard(const loom_ir_graph *g, loom_match *m) {
    const loom_ir_node *att = loom_match_node(g, m, ATT);
    const loom_ir_node *rkw = loom_pass_def(g, att->in[0], LOOM_IR_OP_ROPE_KV_WRITE);
    if (!rkw || att->in[0] != rkw->out[2] || !loom_pass_single_use(g, rkw->out[2]) ||
        att->in[1] != rkw->out[0] || att->in[2] != rkw->out[1] || att->in[3] != rkw->in[5])
        return false;
    m->node[RKW] = loom_ir_value_get(g, att->in[0])->def;
    m->n_nodes = 2;
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS], old[3];
    loom_ir_attr attrs[N_ATTRS];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs, old);
    return loom_pass_infers_as(g, LOOM_IR_OP_ROPE_KV_ATTENTION, in, n_in, attrs, N_ATTRS, old, 3);
}

static loom_status rewrite(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS], old[3];
    loom_ir_attr attrs[N_ATTRS];
    uint32_t n_in;
    operands(g, m, in, &n_in, attrs, old);
    return loom_pass_fuse(g, m, LOOM_IR_OP_ROPE_KV_ATTENTION, in, n_in, attrs, N_ATTRS, old, 3,
                          err);
}

/* No chain: the rope_kv_write's caches may have users outside the match, which the driver's
 * intermediate rule for chain nodes would refuse; the guard finds it and checks the q. */
static const loom_pattern pattern = {
    .name = "attention(rope_kv_write)",
    .root = LOOM_IR_OP_ATTENTION,
    .n_chain = 0,
    .guard = guard,
    .rewrite = rewrite,
};

loom_status loom_pass_fuse_rope_kv_attention(loom_ir_graph *g, uint32_t *n_rewrites,
                                             loom_error *err) {
    return loom_pattern_apply(g, &pattern, 1, 0, n_rewrites, err);
}
