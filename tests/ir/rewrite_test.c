/* rewrite_test.c: the rewrite API (replace all uses, set input, erase, insert point), def-use
 * lists staying exact, topological sort, clone independence and structural equality with
 * its "where they differ" message. The central case performs a fuse-qkv-like rewrite by hand
 * and checks the result against the expected text. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static loom_ir_graph *parse(const char *t) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse(t, strlen(t), &g, &err), LOOM_OK, "%s", err.msg);
    return g;
}

static const char *decls = "symbol T max=8\n"
                           "input %x : f32[T,64]\n"
                           "weight @wq : q8_0[64,64]\n"
                           "weight @wk : q8_0[32,64]\n"
                           "weight @wv : f16[32,64]\n";

static loom_ir_node_id nth(const loom_ir_graph *g, int k) {
    loom_ir_node_id id = loom_ir_first_node(g);
    while (k--) id = loom_ir_node_get(g, id)->next;
    return id;
}

/* Three matmuls of %x become one matmul_triple built at the end and sorted into place. */
Test(rewrite, hand_made_qkv_fusion_matches_expected_text) {
    char in[2048], want_text[2048];
    snprintf(in, sizeof in, "%s%s", decls,
             "%q = matmul(%x, @wq)\n%k = matmul(%x, @wk)\n%v = matmul(%x, @wv)\n"
             "%s = add(%q, %q)\noutput a = %s\noutput b = %k\noutput c = %v\n");
    snprintf(want_text, sizeof want_text, "%s%s", decls,
             "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv)\n%s = add(%q, %q)\n"
             "output a = %s\noutput b = %k\noutput c = %v\n");
    loom_ir_graph *g = parse(in), *want = parse(want_text);
    loom_error err = {0};
    loom_ir_node_id mm[3] = {nth(g, 0), nth(g, 1), nth(g, 2)};
    loom_ir_value_id x = loom_ir_find_value(g, "x");
    cr_assert_eq(loom_ir_value_use_count(g, x), 3);

    loom_ir_value_id in4[4] = {x}, out[LOOM_IR_MAX_OUTPUTS];
    for (int i = 0; i < 3; i++) in4[1 + i] = loom_ir_node_get(g, mm[i])->in[1];
    cr_assert_eq(loom_ir_build(g, LOOM_IR_OP_MATMUL_TRIPLE, in4, 4, NULL, 0, out, NULL, &err),
                 LOOM_OK, "%s", err.msg);
    for (int i = 0; i < 3; i++) {
        loom_ir_value_id old = loom_ir_node_get(g, mm[i])->out[0];
        cr_assert_eq(loom_ir_replace_all_uses(g, old, out[i], &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_ir_value_use_count(g, old), 0);
        cr_assert_not(loom_ir_value_is_output(g, old));
        cr_assert_eq(loom_ir_node_erase(g, mm[i], &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_ir_value_get(g, old)->kind, LOOM_IR_VALUE_DEAD);
    }
    cr_assert_eq(loom_ir_value_use_count(g, out[0]), 2); /* add(%q, %q) */
    cr_assert_eq(loom_ir_value_use_count(g, x), 1);
    /* The fused node sits after its user: the verifier objects, sort fixes it. */
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_ERR_VERIFY);
    cr_assert(strstr(err.msg, "used before its definition"), "%s", err.msg);
    cr_assert_eq(loom_ir_graph_sort(g, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    cr_assert(loom_ir_graph_equal(g, want, &err), "%s", err.msg);
    char *a = loom_ir_print_string(g, &err), *b = loom_ir_print_string(want, &err);
    cr_assert_str_eq(a, b);
    /* Holes in ids do not leak into the text: it reparses to an equal graph. */
    loom_ir_graph *back = parse(a);
    cr_assert(loom_ir_graph_equal(back, g, &err), "%s", err.msg);
    free(a);
    free(b);
    loom_ir_graph_destroy(back);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(want);
}

Test(rewrite, refusals_change_nothing) {
    char in[1024];
    snprintf(in, sizeof in, "%s%s", decls,
             "%q = matmul(%x, @wq)\n%k = matmul(%x, @wk)\n%s = silu(%k)\noutput o = %q\n");
    loom_ir_graph *g = parse(in);
    loom_error err = {0};
    loom_ir_value_id q = loom_ir_node_get(g, nth(g, 0))->out[0];
    loom_ir_value_id k = loom_ir_node_get(g, nth(g, 1))->out[0];
    /* Types differ: [T,64] vs [T,32]. */
    cr_assert_eq(loom_ir_replace_all_uses(g, k, q, &err), LOOM_ERR_TYPE);
    cr_assert(strstr(err.msg, "replace %1 : f32[T,32] by %0 : f32[T,64]: types differ"), "%s",
              err.msg);
    cr_assert_eq(loom_ir_node_set_input(g, nth(g, 2), 0, q, &err), LOOM_ERR_TYPE);
    cr_assert_eq(loom_ir_node_set_input(g, nth(g, 2), 1, k, &err), LOOM_ERR_INVALID_ARGUMENT);
    /* Erasing a node whose result is used, or is an output. */
    cr_assert_eq(loom_ir_node_erase(g, nth(g, 1), &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "cannot erase node %1 = matmul (#1): result %1 is still used by "
                              "node %2 = silu (#2)"), "%s", err.msg);
    cr_assert_eq(loom_ir_node_erase(g, nth(g, 0), &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "is a graph output"), "%s", err.msg);
    cr_assert_eq(loom_ir_node_count(g), 3);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    /* Erasing bottom-up works and double erase is refused. */
    loom_ir_node_id s = nth(g, 2);
    cr_assert_eq(loom_ir_node_erase(g, s, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_node_erase(g, s, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(loom_ir_node_get(g, s)->erased);
    cr_assert_eq(loom_ir_value_use_count(g, k), 0);
    cr_assert_eq(loom_ir_node_erase(g, nth(g, 1), &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_node_count(g), 1);
    cr_assert_eq(loom_ir_value_use_count(g, loom_ir_find_value(g, "x")), 1);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph_destroy(g);
}

Test(rewrite, insert_point_and_set_input) {
    loom_ir_graph *g = parse("input %x : f32[4]\n%a = silu(%x)\n%b = softmax(%a)\n");
    loom_error err = {0};
    loom_ir_node_id b = nth(g, 1);
    loom_ir_value_id x = loom_ir_find_value(g, "x");
    loom_ir_set_insert_point(g, b);
    loom_ir_value_id c = loom_ir_silu(g, x, &err);
    cr_assert_eq(loom_ir_node_get(g, nth(g, 1))->out[0], c, "inserted before b");
    cr_assert_eq(loom_ir_node_set_input(g, b, 0, c, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_value_use_count(g, c), 1);
    cr_assert_eq(loom_ir_value_use_count(g, loom_ir_node_get(g, nth(g, 0))->out[0]), 0);
    /* Back to appending at the end. */
    loom_ir_set_insert_point(g, LOOM_IR_NO_NODE);
    loom_ir_value_id d = loom_ir_silu(g, c, &err);
    cr_assert_eq(loom_ir_node_get(g, loom_ir_last_node(g))->out[0], d);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    char *s = loom_ir_print_string(g, &err);
    cr_assert_str_eq(s, "input %x : f32[4]\n%0 = silu(%x) : f32[4]\n%1 = silu(%x) : f32[4]\n"
                        "%2 = softmax(%1) : f32[4]\n%3 = silu(%1) : f32[4]\n");
    free(s);
    loom_ir_graph_destroy(g);
}

Test(rewrite, topo_order_and_cycle) {
    loom_ir_graph *g = parse("input %x : f32[4]\n%a = silu(%x)\n%b = silu(%a)\n%c = add(%b, %a)\n");
    loom_error err = {0};
    loom_ir_node_id order[8];
    uint32_t n;
    cr_assert_eq(loom_ir_topo_order(g, order, &n, &err), LOOM_OK);
    cr_assert_eq(n, 3);
    for (uint32_t i = 0; i < n; i++) cr_assert_eq(order[i], nth(g, (int)i), "stable order");
    cr_assert_eq(loom_ir_node_set_input(g, nth(g, 0), 0, loom_ir_node_get(g, nth(g, 2))->out[0],
                                        &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_topo_order(g, order, &n, &err), LOOM_ERR_VERIFY);
    cr_assert(strstr(err.msg, "cycle"), "%s", err.msg);
    cr_assert_eq(loom_ir_graph_sort(g, &err), LOOM_ERR_VERIFY);
    loom_ir_graph_destroy(g);
}

Test(rewrite, clone_is_deep_and_equal) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse_file("tests/ir/graphs/qwen3_1layer.loom", &g, &err), LOOM_OK,
                 "%s", err.msg);
    loom_ir_graph *c = loom_ir_graph_clone(g, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert(loom_ir_graph_equal(g, c, &err), "%s", err.msg);
    cr_assert_eq(loom_ir_verify(c, &err), LOOM_OK, "%s", err.msg);
    /* Same ids in the clone. */
    cr_assert_eq(loom_ir_find_value(c, "blk.0.attn_q.weight"),
                 loom_ir_find_value(g, "blk.0.attn_q.weight"));
    /* Changing the clone leaves the original alone, and equality reports where. */
    loom_ir_node_id last = loom_ir_last_node(c);
    loom_ir_value_id emb = loom_ir_find_value(c, "token_embd.weight");
    cr_assert_eq(loom_ir_meta_set_int(c, "loom.n_layer", 2, &err), LOOM_OK);
    cr_assert_not(loom_ir_graph_equal(g, c, &err));
    cr_assert(strstr(err.msg, "metadata loom.n_layer differs"), "%s", err.msg);
    cr_assert_eq(loom_ir_meta_set_int(c, "loom.n_layer", 1, &err), LOOM_OK);
    cr_assert_eq(loom_ir_node_set_input(c, last, 1, emb, &err), LOOM_ERR_TYPE); /* q4_k vs q6_k */
    loom_ir_value_id outw = loom_ir_find_value(c, "output.weight");
    cr_assert_eq(loom_ir_value_use_count(c, outw), 1);
    loom_ir_value_id x = loom_ir_node_get(c, loom_ir_first_node(c))->out[0];
    loom_ir_value_id hf = loom_ir_node_get(c, last)->in[0];
    cr_assert_eq(loom_ir_replace_all_uses(c, hf, x, &err), LOOM_OK, "%s", err.msg);
    cr_assert_not(loom_ir_graph_equal(g, c, &err));
    cr_assert(strstr(err.msg, "node 30 (matmul): operand 0 is %29 vs %0"), "%s", err.msg);
    cr_assert(loom_ir_graph_equal(g, g, NULL));
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph_destroy(c);
    loom_ir_graph_destroy(g);
}

Test(rewrite, equality_sees_decl_and_attr_differences) {
    loom_ir_graph *a = parse("input %x : f32[4]\n%y = rms_norm(%x) {eps=1e-6}\n");
    loom_ir_graph *b = parse("input %x : f32[4]\n%y = rms_norm(%x) {eps=1e-5}\n");
    loom_ir_graph *c = parse("input %z : f32[4]\n%y = rms_norm(%z) {eps=1e-6}\n");
    loom_ir_graph *d = parse("input %x : f32[4]\n%y = rms_norm(%x) {eps=1e-6}\noutput o = %y\n");
    loom_error err = {0};
    cr_assert_not(loom_ir_graph_equal(a, b, &err));
    cr_assert(strstr(err.msg, "node 0 (rms_norm): attribute eps differs"), "%s", err.msg);
    cr_assert_not(loom_ir_graph_equal(a, c, &err));
    cr_assert(strstr(err.msg, "input 0 (x) vs z"), "%s", err.msg);
    cr_assert_not(loom_ir_graph_equal(a, d, &err));
    cr_assert(strstr(err.msg, "0 vs 1 outputs"), "%s", err.msg);
    loom_ir_graph_destroy(a);
    loom_ir_graph_destroy(b);
    loom_ir_graph_destroy(c);
    loom_ir_graph_destroy(d);
}

/* y = f(x); replace(x, y): f keeps reading x, every other user now reads y. */
Test(rewrite, replace_keeps_the_defining_node_of_the_replacement) {
    loom_ir_graph *g = parse("input %x : f32[4]\n%a = silu(%x)\n%b = softmax(%a)\n"
                             "%c = add(%a, %b)\noutput o = %a\n");
    loom_error err = {0};
    loom_ir_value_id a = loom_ir_node_get(g, nth(g, 0))->out[0];
    loom_ir_set_insert_point(g, nth(g, 1));
    loom_ir_value_id s = loom_ir_silu(g, a, &err);
    cr_assert_eq(loom_ir_replace_all_uses(g, a, s, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_value_use_count(g, a), 1);
    cr_assert_eq(loom_ir_value_use_count(g, s), 2);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    char *t = loom_ir_print_string(g, &err);
    cr_assert_str_eq(t, "input %x : f32[4]\n%0 = silu(%x) : f32[4]\n%1 = silu(%0) : f32[4]\n"
                        "%2 = softmax(%1) : f32[4]\n%3 = add(%1, %2) : f32[4]\noutput o = %1\n");
    free(t);
    loom_ir_graph_destroy(g);
}
