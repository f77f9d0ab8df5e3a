/* builder_test.c: type inference of every op (accepted cases with their result types) and the
 * builder's refusals (status + a message naming the op and its operands), table-driven over the
 * text form; plus the C builders: chaining, attribute defaults, nothing added on refusal. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static const char *base =
    "symbol T max=16\n"
    "input %tok : i32[T]\n"
    "input %pos : i32[T]\n"
    "input %x : f32[T,256]\n"
    "input %x3 : f32[T,4,64]\n"
    "input %r : f32[T,128]\n"
    "input %k3 : f32[T,2,64]\n"
    "weight @w : q4_k[128,256]\n"
    "weight @w2 : q6_k[128,256]\n"
    "weight @wbig : q4_k[256,256]\n"
    "weight @wk : q4_k[128,512]\n"
    "weight @wq40 : q4_0[128,256]\n"
    "weight @nw : f32[256]\n"
    "weight @hw : f32[64]\n"
    "weight @emb : q8_0[100,256]\n"
    "weight @b : f32[128]\n"
    "weight @nh : f16[256]\n"
    "state @kc : f16[32,128]\n"
    "state @vc : f16[32,2,64]\n"
    "state @vshort : f16[16,2,64]\n"
    "state @v32 : f32[32,2,64]\n";

/* Parses base + line; returns the status and the message in err. */
static loom_status try_line(const char *line, loom_ir_graph **g, loom_error *err) {
    char text[4096];
    snprintf(text, sizeof text, "%s%s\n", base, line);
    return loom_ir_parse(text, strlen(text), g, err);
}

typedef struct { const char *line, *types; } good_case;

static const good_case good[] = {
    {"%y = get_rows(@emb, %tok)", "f32[T,256]"},
    {"%y = rms_norm(%x) {eps=1e-5}", "f32[T,256]"},
    {"%y = mul(%x, @nw)", "f32[T,256]"},
    {"%y = add(%x, %x)", "f32[T,256]"},
    {"%y = mul(%x3, @hw)", "f32[T,4,64]"},
    {"%y = add(%r, @b)", "f32[T,128]"},
    {"%y = matmul(%x, @w)", "f32[T,128]"},
    {"%y = matmul(%x, @wbig)", "f32[T,256]"},
    {"%y = reshape(%x) {shape=[T,4,64]}", "f32[T,4,64]"},
    {"%y = reshape(%x3) {shape=[T,256]}", "f32[T,256]"},
    {"%y = rope(%x3, %pos) {mode=neox, n_rot=64, freq_base=1e6}", "f32[T,4,64]"},
    {"%y = rope(%x3, %pos) {mode=norm, n_rot=32, freq_base=1e4, freq_scale=0.25}",
     "f32[T,4,64]"},
    {"%y = kv_write(@kc, %r, %pos)", "f16[32,128]"},
    {"%y = kv_write(@vc, %r, %pos)", "f16[32,2,64]"},
    {"%y = attention(%x, @kc, @vc, %pos) {n_head=4, n_kv_head=2, head_dim=64, scale=0.125}",
     "f32[T,256]"},
    {"%y = attention(%x3, @kc, @vc, %pos) {n_head=4, n_kv_head=2, head_dim=64, scale=0.125}",
     "f32[T,256]"},
    {"%y = silu(%x)", "f32[T,256]"},
    {"%y = softmax(%x3)", "f32[T,4,64]"},
    {"%y = argmax(%x)", "i32[T]"},
    {"%y = convert(%x) {dtype=f16}", "f16[T,256]"},
    {"%y = fused_rms_norm(%x3, @hw) {eps=1e-6}", "f32[T,4,64]"},
    {"%y = fused_rms_norm(%x, @nw) {eps=1e-6}", "f32[T,256]"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @wbig)", "f32[T,128], f32[T,128], f32[T,256]"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @w, @b, @b, @b)",
     "f32[T,128], f32[T,128], f32[T,128]"},
    {"%y = matmul_pair(%x, @w, @w2) {swiglu=1}", "f32[T,128]"},
    {"%a, %b = matmul_pair(%x, @w, @wbig) {swiglu=0}", "f32[T,128], f32[T,256]"},
    {"%y = matmul_add(%x, @w, %r)", "f32[T,128]"},
    /* prenorm: the norm weight last, norm_eps (0 is allowed with the operand). */
    {"%y = matmul(%x, @w, @nw) {norm_eps=1e-6}", "f32[T,128]"},
    {"%y = matmul(%x, @w, @nw)", "f32[T,128]"},
    {"%y = matmul_pair(%x, @w, @w2, @nw) {swiglu=1, norm_eps=1e-5}", "f32[T,128]"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @wbig, @nw) {norm_eps=1e-6}",
     "f32[T,128], f32[T,128], f32[T,256]"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @w, @b, @b, @b, @nw) {norm_eps=1e-6}",
     "f32[T,128], f32[T,128], f32[T,128]"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", "f16[32,128], f16[32,2,64], f32[T,4,64]"},
    {"%k, %v, %q = rope_kv_write(@vc, @kc, %x3, %k3, %k3, %pos, @hw, @hw) {eps=1e-6, mode=norm, "
     "n_rot=32, freq_base=1e4}", "f16[32,2,64], f16[32,128], f32[T,4,64]"},
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=4, n_kv_head=2, head_dim=64, scale=0.125}",
     "f16[32,128], f16[32,2,64], f32[T,256]"},
    {"%k, %v, %y = rope_kv_attention(@vc, @kc, %x3, %k3, %k3, %pos, @hw, @hw) {eps=1e-6, "
     "mode=norm, n_rot=32, freq_base=1e4, n_head=4, n_kv_head=2, head_dim=64, scale=0.125}",
     "f16[32,2,64], f16[32,128], f32[T,256]"},
};

Test(builder, infers_every_op) {
    bool seen[LOOM_IR_OP_COUNT] = {false};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        loom_ir_graph *g = NULL;
        loom_error err = {0};
        loom_status st = try_line(good[i].line, &g, &err);
        cr_assert_eq(st, LOOM_OK, "%s: %s", good[i].line, err.msg);
        const loom_ir_node *n = loom_ir_node_get(g, loom_ir_last_node(g));
        seen[n->op] = true;
        char types[256] = "", tb[96];
        for (uint32_t o = 0; o < n->n_out; o++) {
            if (o) strcat(types, ", ");
            strcat(types, loom_ir_type_format(g, &loom_ir_value_get(g, n->out[o])->type, tb,
                                              sizeof tb));
        }
        cr_expect_str_eq(types, good[i].types, "%s", good[i].line);
        loom_ir_graph_destroy(g);
    }
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++)
        cr_expect(seen[op], "no accepted case for op %s", loom_ir_op_info_get(op)->name);
}

typedef struct { const char *line; loom_status st; const char *msg; } bad_case;

static const bad_case bad[] = {
    {"%y = matmul(%x, @wk)", LOOM_ERR_TYPE, "ir: matmul(%x, @wk): operand 1 is q4_k[128,512]: K must equal x's last dim 256"},
    {"%y = matmul(%x, %x)", LOOM_ERR_TYPE, "matmul(%x, %x): operand 1 must be a weight"},
    {"%y = matmul(%x, @wq40)", LOOM_ERR_UNSUPPORTED, "q4_0 is not computable"},
    {"%y = matmul(@w, @w)", LOOM_ERR_TYPE, "operand 0 must be an activation"},
    {"%y = matmul(%tok, @w)", LOOM_ERR_TYPE, "operand 0 is i32[T]: expected f32"},
    {"%y = mul(%x, @hw)", LOOM_ERR_TYPE, "mul(%x, @hw): operand 1 is f32[64]"},
    {"%y = add(%tok, %x)", LOOM_ERR_TYPE, "add(%tok, %x): operand 0 is i32[T]"},
    {"%y = add(%x, @kc)", LOOM_ERR_TYPE, "operand 1"},
    {"%y = rms_norm(%x)", LOOM_ERR_INVALID_ARGUMENT, "rms_norm needs attribute eps"},
    {"%y = rms_norm(%x) {eps=1e-5, n_rot=2}", LOOM_ERR_INVALID_ARGUMENT, "has no attribute n_rot"},
    {"%y = rms_norm(%x) {eps=-1}", LOOM_ERR_INVALID_ARGUMENT, "eps -1 must be"},
    {"%y = rms_norm(%x, %x) {eps=1}", LOOM_ERR_INVALID_ARGUMENT, "takes 1..1 operands, got 2"},
    {"%y = reshape(%x) {shape=[T,4,32]}", LOOM_ERR_TYPE, "element counts differ"},
    {"%y = reshape(%x) {shape=[256,16]}", LOOM_ERR_TYPE, "element counts differ"},
    {"%y = rope(%x, %pos) {mode=norm, n_rot=64, freq_base=1e4}", LOOM_ERR_TYPE,
     "operand 0 is f32[T,256]: expected f32 of rank 3..3"},
    {"%y = rope(%x3, %pos) {mode=norm, n_rot=65, freq_base=1e4}", LOOM_ERR_INVALID_ARGUMENT,
     "n_rot 65 must be even"},
    {"%y = rope(%x3, %r) {mode=norm, n_rot=64, freq_base=1e4}", LOOM_ERR_TYPE,
     "operand 1 (positions) is f32[T,128]: expected i32[T]"},
    {"%y = rope(%x3, %pos) {mode=norm, n_rot=64, freq_base=0}", LOOM_ERR_INVALID_ARGUMENT,
     "freq_base 0"},
    {"%y = kv_write(%x, %r, %pos)", LOOM_ERR_TYPE, "operand 0 must be a KV cache"},
    {"%y = kv_write(@kc, %x, %pos)", LOOM_ERR_TYPE, "kv_write(@kc, %x, %pos): operand 1 is "
                                                    "f32[T,256]: its rows must hold the cache's "
                                                    "128 values"},
    {"%y = attention(%x, @kc, @vc, %pos) {n_head=3, n_kv_head=2, head_dim=64, scale=1}",
     LOOM_ERR_INVALID_ARGUMENT, "n_kv_head dividing n_head"},
    {"%y = attention(%x, @kc, @vc, %pos) {n_head=8, n_kv_head=2, head_dim=32, scale=1}",
     LOOM_ERR_TYPE, "k cache) is f16[32,128]: expected [C,64]"},
    {"%y = attention(%x, %r, @vc, %pos) {n_head=4, n_kv_head=2, head_dim=64, scale=1}",
     LOOM_ERR_TYPE, "operand 1 must be a KV cache"},
    {"%y = argmax(%tok)", LOOM_ERR_TYPE, "argmax(%tok): operand 0 is i32[T]"},
    {"%y = convert(@w) {dtype=f32}", LOOM_ERR_TYPE, "convert(@w): operand 0 is q4_k"},
    {"%y = convert(%x) {dtype=q4_k}", LOOM_ERR_INVALID_ARGUMENT, "convert makes f32"},
    {"%y = get_rows(@emb, %x)", LOOM_ERR_TYPE, "operand 1 (ids) is f32[T,256]"},
    {"%y = get_rows(@wq40, %tok)", LOOM_ERR_TYPE, "operand 0 (table)"},
    {"%y = fused_rms_norm(%x, @hw) {eps=1e-6}", LOOM_ERR_TYPE,
     "operand 1 (w) is f32[64]: expected a float vector f32[256]"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2)", LOOM_ERR_INVALID_ARGUMENT,
     "takes 4..8 operands, got 3"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @w, @b, @b)", LOOM_ERR_INVALID_ARGUMENT,
     "(4, 5, 7 or 8 operands), got 6"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @w, @b) {norm_eps=1e-6}", LOOM_ERR_TYPE,
     "operand 4 (norm weight) is f32[128]: expected a float vector f32[256]"},
    {"%y = matmul(%x, @w) {norm_eps=1e-6}", LOOM_ERR_INVALID_ARGUMENT,
     "norm_eps 1e-06 without a norm weight operand: must be 0"},
    {"%y = matmul(%x, @w, @nh) {norm_eps=1e-6}", LOOM_ERR_TYPE,
     "operand 2 (norm weight) is f16[256]: it must be f32"},
    {"%y = matmul(%x, @w, %x) {norm_eps=1e-6}", LOOM_ERR_TYPE,
     "operand 2 (norm weight) is f32[T,256]: expected a float vector f32[256]"},
    {"%y = matmul_pair(%x, @w, @w2, @nw) {swiglu=1, norm_eps=-1}", LOOM_ERR_INVALID_ARGUMENT,
     "norm_eps -1 must be finite and >= 0"},
    {"%y = matmul_add(%x, @w, %r, @nw)", LOOM_ERR_INVALID_ARGUMENT, "takes 3..3 operands"},
    {"%a, %b, %c = matmul_triple(%x, @w, @w2, @wbig, @b, @b, @b)", LOOM_ERR_TYPE,
     "operand 6 (bias) is f32[128]"},
    {"%y = matmul_pair(%x, @w, @wbig) {swiglu=1}", LOOM_ERR_TYPE, "same rows"},
    {"%y = matmul_pair(%x, @w, @w2) {swiglu=2}", LOOM_ERR_INVALID_ARGUMENT, "must be 0 or 1"},
    {"%y = matmul_add(%x, @w, %x)", LOOM_ERR_TYPE,
     "operand 2 (residual) is f32[T,256]: expected the product's f32[T,128]"},
    {"%y = silu(%nope)", LOOM_ERR_NOT_FOUND, "undefined value %nope"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %k3, %pos, @hw) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_INVALID_ARGUMENT, "(6 or 8 operands), got 7"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %k3, %pos) {eps=1e-6, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_INVALID_ARGUMENT, "eps 1e-06 without norm weights: must be 0"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %x3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "operand 4 (v) is f32[T,4,64]: expected k's f32[T,2,64]"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %x3, %x3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "operand 0 (k cache) is f16[32,128]: its rows must hold "
     "the 256 values of k's heads"},
    {"%k, %v, %q = rope_kv_write(@kc, @kc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "operands 0 and 1 are one cache"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %k3, %pos, @nw, @hw) {eps=1e-6, "
     "mode=neox, n_rot=64, freq_base=1e6}", LOOM_ERR_TYPE,
     "operand 6 (q_norm) is f32[256]: expected a float vector f32[64]"},
    {"%k, %v, %q = rope_kv_write(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=66, "
     "freq_base=1e6}", LOOM_ERR_INVALID_ARGUMENT, "n_rot 66 must be even, >= 2 and <= the head "
     "dim 64"},
    {"%k, %v, %q = rope_kv_write(%r, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "operand 0 must be a KV cache"},
    {"%k, %v, %q = rope_kv_write(@kc, @vshort, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "operands 0 and 1 (K and V caches) are f16[32,128] and "
     "f16[16,2,64]: they must have the same positions, row size and dtype"},
    {"%k, %v, %q = rope_kv_write(@kc, @v32, %x3, %k3, %k3, %pos) {eps=0, mode=neox, n_rot=64, "
     "freq_base=1e6}", LOOM_ERR_TYPE, "must have the same positions, row size and dtype"},
    /* rope_kv_attention: rope_kv_write's rules, and attention's attributes matching q and k. */
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %x3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=4, n_kv_head=2, head_dim=64, scale=0.125}", LOOM_ERR_TYPE,
     "ir: rope_kv_attention(@kc, @vc, %x3, %k3, %x3, %pos): operand 4 (v) is f32[T,4,64]: "
     "expected k's f32[T,2,64]"},
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=8, n_kv_head=2, head_dim=64, scale=0.125}", LOOM_ERR_TYPE,
     "n_head 8, n_kv_head 2, head_dim 64 do not match q f32[T,4,64] and k f32[T,2,64]"},
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=4, n_kv_head=4, head_dim=64, scale=0.125}", LOOM_ERR_TYPE,
     "do not match"},
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=4, n_kv_head=3, head_dim=64, scale=0.125}",
     LOOM_ERR_INVALID_ARGUMENT, "need >= 1 and n_kv_head dividing n_head"},
    {"%k, %v, %y = rope_kv_attention(@kc, @vc, %x3, %k3, %k3, %pos) {eps=0, mode=neox, "
     "n_rot=64, freq_base=1e6, n_head=4, n_kv_head=2, head_dim=64}", LOOM_ERR_INVALID_ARGUMENT,
     "rope_kv_attention needs attribute scale"},
};

Test(builder, refuses_mismatches_naming_op_and_operands) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        loom_ir_graph *g = (loom_ir_graph *)1;
        loom_error err = {0};
        loom_status st = try_line(bad[i].line, &g, &err);
        cr_expect_eq(st, bad[i].st, "%s: status %s, msg %s", bad[i].line, loom_status_name(st),
                     err.msg);
        cr_expect_null(g, "%s", bad[i].line);
        cr_expect(strstr(err.msg, bad[i].msg) != NULL, "%s:\n  got  '%s'\n  want '%s'",
                  bad[i].line, err.msg, bad[i].msg);
    }
}

/* The C builders: declarations, chaining of one-liners, nothing added on a refusal. */
Test(builder, c_api_chain_and_refusal_leaves_graph_unchanged) {
    loom_ir_graph *g = loom_ir_graph_create();
    loom_error err = {0};
    int64_t T;
    cr_assert_eq(loom_ir_add_symbol(g, "T", 8, &T, &err), LOOM_OK);
    int64_t dx[] = {T, 64}, dw[] = {32, 64}, dn[] = {64};
    loom_ir_type tx = loom_ir_type_make(LOOM_IR_F32, 2, dx);
    loom_ir_type tw = loom_ir_type_make(LOOM_IR_Q8_0, 2, dw);
    loom_ir_type tn = loom_ir_type_make(LOOM_IR_F32, 1, dn);
    loom_ir_value_id x, w, nw;
    cr_assert_eq(loom_ir_add_input(g, "x", &tx, &x, &err), LOOM_OK);
    cr_assert_eq(loom_ir_add_weight(g, "w", &tw, 100, 0, &w, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_value_get(g, w)->size, 32 * 2 * 34); /* computed: 2 blocks a row */
    cr_assert_eq(loom_ir_add_weight(g, "nw", &tn, 0, 0, &nw, &err), LOOM_OK);

    loom_ir_value_id y = loom_ir_mul(g, loom_ir_rms_norm(g, x, 1e-5f, &err), nw, &err);
    y = loom_ir_matmul(g, y, w, &err);
    cr_assert_neq(y, LOOM_IR_NO_VALUE, "%s", err.msg);
    cr_assert_eq(loom_ir_node_count(g), 3);

    /* A refusal adds nothing, and a chain after it keeps the first message. */
    uint32_t nodes = loom_ir_node_count(g), values = loom_ir_value_bound(g);
    loom_ir_value_id bad1 = loom_ir_matmul(g, x, x, &err);
    cr_assert_eq(bad1, LOOM_IR_NO_VALUE);
    cr_assert_eq(err.status, LOOM_ERR_TYPE);
    char first[LOOM_ERROR_MSG_MAX];
    strcpy(first, err.msg);
    cr_assert_eq(loom_ir_silu(g, loom_ir_add(g, bad1, x, &err), &err), LOOM_IR_NO_VALUE);
    cr_assert_str_eq(err.msg, first);
    cr_assert_eq(loom_ir_node_count(g), nodes);
    cr_assert_eq(loom_ir_value_bound(g), values);
    cr_assert_eq(loom_ir_value_use_count(g, x), 1); /* only rms_norm */

    /* Optional attributes are filled with defaults; attrs come sorted by id. */
    int64_t d3[] = {T, 1, 64};
    loom_ir_value_id x3 = loom_ir_reshape(g, x, 3, d3, &err);
    loom_ir_type tp = loom_ir_type_make(LOOM_IR_I32, 1, &T);
    loom_ir_value_id pos;
    cr_assert_eq(loom_ir_add_input(g, "pos", &tp, &pos, &err), LOOM_OK);
    loom_ir_attr a[] = {loom_ir_attr_float(LOOM_IR_ATTR_FREQ_BASE, 1e4f),
                        loom_ir_attr_int(LOOM_IR_ATTR_N_ROT, 64),
                        loom_ir_attr_int(LOOM_IR_ATTR_MODE, LOOM_IR_ROPE_NEOX)};
    loom_ir_value_id in[] = {x3, pos}, out[LOOM_IR_MAX_OUTPUTS];
    loom_ir_node_id nid;
    cr_assert_eq(loom_ir_build(g, LOOM_IR_OP_ROPE, in, 2, a, 3, out, &nid, &err), LOOM_OK, "%s",
                 err.msg);
    const loom_ir_node *n = loom_ir_node_get(g, nid);
    cr_assert_eq(n->n_attrs, 4);
    cr_assert_float_eq(loom_ir_node_attr_float(n, LOOM_IR_ATTR_FREQ_SCALE, -1), 1.0f, 0);
    cr_assert_eq(loom_ir_node_attr_int(n, LOOM_IR_ATTR_MODE, -1), LOOM_IR_ROPE_NEOX);
    for (uint32_t i = 1; i < n->n_attrs; i++) cr_assert_lt(n->attrs[i - 1].id, n->attrs[i].id);
    cr_assert_eq(out[1], LOOM_IR_NO_VALUE);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph_destroy(g);
}

Test(builder, declarations_refused) {
    loom_ir_graph *g = loom_ir_graph_create();
    loom_error err = {0};
    int64_t T, d[] = {4, 100};
    cr_assert_eq(loom_ir_add_symbol(g, "T", 8, &T, &err), LOOM_OK);
    cr_assert_eq(loom_ir_add_symbol(g, "T", 8, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_ir_add_symbol(g, "U", 0, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    loom_ir_type tq = loom_ir_type_make(LOOM_IR_Q4_K, 2, d); /* 100 is not a multiple of 256 */
    cr_assert_eq(loom_ir_add_weight(g, "w", &tq, 0, 0, NULL, &err), LOOM_ERR_TYPE);
    cr_assert(strstr(err.msg, "weight w") && strstr(err.msg, "block size"), "%s", err.msg);
    loom_ir_type tf = loom_ir_type_make(LOOM_IR_F32, 2, d);
    cr_assert_eq(loom_ir_add_weight(g, "w", &tf, 0, 7, NULL, &err), LOOM_ERR_TYPE);
    cr_assert(strstr(err.msg, "size 7, the shape needs 1600 bytes"), "%s", err.msg);
    int64_t ds[] = {T, 4};
    loom_ir_type tsym = loom_ir_type_make(LOOM_IR_F32, 2, ds);
    cr_assert_eq(loom_ir_add_weight(g, "w", &tsym, 0, 0, NULL, &err), LOOM_ERR_TYPE);
    cr_assert_eq(loom_ir_add_state(g, "s", &tsym, NULL, &err), LOOM_ERR_TYPE);
    loom_ir_type tq8 = loom_ir_type_make(LOOM_IR_Q8_0, 2, (int64_t[]){4, 32});
    cr_assert_eq(loom_ir_add_state(g, "s", &tq8, NULL, &err), LOOM_ERR_TYPE);
    cr_assert_eq(loom_ir_add_input(g, "x", &tq8, NULL, &err), LOOM_ERR_TYPE);
    loom_ir_type tbad = loom_ir_type_make(LOOM_IR_F32, 2, (int64_t[]){LOOM_IR_DIM_SYM(5), 4});
    cr_assert_eq(loom_ir_add_input(g, "x", &tbad, NULL, &err), LOOM_ERR_TYPE);
    cr_assert_eq(loom_ir_add_input(g, "x", &tsym, NULL, &err), LOOM_OK);
    cr_assert_eq(loom_ir_add_weight(g, "x", &tf, 0, 0, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "already declared"), "%s", err.msg);
    cr_assert_eq(loom_ir_add_output(g, "o", 999, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_ir_input_count(g), 1);
    cr_assert_eq(loom_ir_weight_count(g), 0);
    cr_assert_eq(loom_ir_state_count(g), 0);
    loom_ir_graph_destroy(g);
}

Test(builder, metadata_set_replace_get) {
    loom_ir_graph *g = loom_ir_graph_create();
    loom_error err = {0};
    cr_assert_eq(loom_ir_meta_set_int(g, "a.b", 5, &err), LOOM_OK);
    cr_assert_eq(loom_ir_meta_set_string(g, "s", "hi", &err), LOOM_OK);
    cr_assert_eq(loom_ir_meta_set_float(g, "a.b", 2.5, &err), LOOM_OK);
    cr_assert_eq(loom_ir_meta_set_int(g, "bad key", 1, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_ir_meta_count(g), 2);
    const loom_ir_meta *m = loom_ir_meta_get(g, "a.b");
    cr_assert_eq(m->kind, LOOM_IR_META_FLOAT);
    cr_assert_eq(m->f, 2.5);
    cr_assert_str_eq(loom_ir_meta_at(g, 1)->s, "hi");
    cr_assert_null(loom_ir_meta_get(g, "nope"));
    loom_ir_graph_destroy(g);
}

Test(builder, op_table_lookups) {
    loom_ir_op op;
    cr_assert(loom_ir_op_from_name("matmul_triple", &op));
    cr_assert_eq(op, LOOM_IR_OP_MATMUL_TRIPLE);
    cr_assert(loom_ir_op_info_get(op)->flags & LOOM_IR_OPF_FUSED);
    cr_assert_not(loom_ir_op_info_get(LOOM_IR_OP_MATMUL)->flags & LOOM_IR_OPF_FUSED);
    cr_assert_not(loom_ir_op_from_name("nope", &op));
    cr_assert_null(loom_ir_op_info_get(LOOM_IR_OP_COUNT));
    loom_ir_dtype dt;
    cr_assert(loom_ir_dtype_from_name("Q6_K", &dt));
    cr_assert_eq(dt, LOOM_IR_Q6_K);
    cr_assert_str_eq(loom_ir_dtype_name(LOOM_IR_BF16), "bf16");
    cr_assert(loom_ir_dtype_computable(LOOM_IR_Q5_K));
    cr_assert_not(loom_ir_dtype_computable(LOOM_IR_Q4_0));
    cr_assert_not(loom_ir_dtype_computable(LOOM_IR_I32));
}

/* The one ENUM name lookup (printer, parser, verifier and ir/serialize all use it): mode is
 * "norm,neox" in ops.def. */
Test(builder, enum_attr_lookups) {
    char buf[8];
    int64_t v = -7;
    cr_assert(loom_ir_attr_enum_name(LOOM_IR_ATTR_MODE, 1, buf, sizeof buf));
    cr_assert_str_eq(buf, "neox");
    cr_assert(loom_ir_attr_enum_name(LOOM_IR_ATTR_MODE, 0, buf, sizeof buf));
    cr_assert_str_eq(buf, "norm");
    cr_assert_not(loom_ir_attr_enum_name(LOOM_IR_ATTR_MODE, 2, buf, sizeof buf));
    cr_assert_not(loom_ir_attr_enum_name(LOOM_IR_ATTR_MODE, -1, buf, sizeof buf));
    cr_assert_not(loom_ir_attr_enum_name(LOOM_IR_ATTR_MODE, 1, buf, 4)); /* no room for the NUL */
    cr_assert_not(loom_ir_attr_enum_name(LOOM_IR_ATTR_EPS, 0, buf, sizeof buf)); /* not an ENUM */
    cr_assert(loom_ir_attr_enum_value(LOOM_IR_ATTR_MODE, "neox", 4, &v));
    cr_assert_eq(v, 1);
    cr_assert(loom_ir_attr_enum_value(LOOM_IR_ATTR_MODE, "norm,", 4, &v)); /* only name_len bytes */
    cr_assert_eq(v, 0);
    v = -7;
    cr_assert_not(loom_ir_attr_enum_value(LOOM_IR_ATTR_MODE, "ne", 2, &v)); /* no prefixes */
    cr_assert_not(loom_ir_attr_enum_value(LOOM_IR_ATTR_MODE, "norm,neox", 9, &v));
    cr_assert_not(loom_ir_attr_enum_value(LOOM_IR_ATTR_EPS, "norm", 4, &v));
    cr_assert_eq(v, -7);
}
