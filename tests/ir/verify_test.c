/* verify_test.c: one negative test per verifier rule. Each starts from a graph that verifies,
 * breaks one rule (through the public rewrite API where it allows it, else through the graph
 * layout of ir_impl.h, as a corrupt deserializer or a buggy pass would), and checks the verifier
 * names the node and the reason. */
#include <criterion/criterion.h>
#include <string.h>

#include "ir/ir_impl.h"

static const char *text =
    "symbol T max=8\n"
    "input %x : f32[T,64]\n"
    "input %pos : i32[T]\n"
    "weight @w : f32[64,64]\n"
    "state @kc : f32[16,64]\n"
    "%a = silu(%x)\n"                      /* %0, node #0 */
    "%b = matmul(%a, @w)\n"                /* %1, node #1 */
    "%c = add(%b, %a)\n"                   /* %2, node #2 */
    "%k = kv_write(@kc, %c, %pos)\n"       /* %3, node #3 */
    "output y = %c\n";

/* The graph of src, which must parse and verify. */
static loom_ir_graph *parse_verified(const char *src) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse(src, strlen(src), &g, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    return g;
}

static loom_ir_graph *fresh(void) { return parse_verified(text); }

static void expect_fail(loom_ir_graph *g, const char *want) {
    loom_error err = {0};
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_ERR_VERIFY, "verifier accepted the broken graph");
    cr_assert(strstr(err.msg, want) != NULL, "got '%s', want '%s'", err.msg, want);
    cr_assert(!strncmp(err.msg, "verify: ", 8), "%s", err.msg);
    loom_ir_graph_destroy(g);
}

static loom_ir_node_id nth(const loom_ir_graph *g, int k) {
    loom_ir_node_id id = loom_ir_first_node(g);
    while (k--) id = loom_ir_node_get(g, id)->next;
    return id;
}

Test(verify, good_graph_passes) {
    loom_ir_graph_destroy(fresh());
}

Test(verify, single_definition) {
    loom_ir_graph *g = fresh();
    /* Node #2 claims node #1's result as its own: %1 defined twice. */
    ir_node_mut(g, nth(g, 2))->out[0] = loom_ir_node_get(g, nth(g, 1))->out[0];
    expect_fail(g, "(#2): result 0 (value 5) is not defined by this node");
}

Test(verify, no_use_before_definition) {
    loom_ir_graph *g = fresh();
    loom_error err = {0};
    /* Public API: a node inserted above the definition of its operand. */
    loom_ir_set_insert_point(g, nth(g, 0));
    loom_ir_value_id a = loom_ir_node_get(g, nth(g, 1))->out[0]; /* the matmul's %b */
    cr_assert_neq(loom_ir_silu(g, a, &err), LOOM_IR_NO_VALUE, "%s", err.msg);
    expect_fail(g, "node %0 = silu (#4): operand 0 %2 is used before its definition");
}

Test(verify, no_cycles) {
    loom_ir_graph *g = fresh();
    loom_error err = {0};
    /* silu(%x) now reads add's result, which depends on the silu: a cycle. Types agree. */
    loom_ir_value_id c = loom_ir_node_get(g, nth(g, 2))->out[0];
    cr_assert_eq(loom_ir_node_set_input(g, nth(g, 0), 0, c, &err), LOOM_OK, "%s", err.msg);
    expect_fail(g, "cycle through its operand");
}

Test(verify, operand_types_match_signature) {
    loom_ir_graph *g = fresh();
    /* The weight's type changes under the matmul (as a corrupt message could make it). */
    value_rec *w = ir_value_rec(g, loom_ir_find_value(g, "w"));
    w->pub.type.dims[1] = 32;
    w->pub.size = 64 * 32 * 4;
    expect_fail(g, "node %1 = matmul (#1): ir: matmul(%0, @w): operand 1 is f32[64,32]: K");
}

Test(verify, result_types_match_inference) {
    loom_ir_graph *g = fresh();
    ir_value_rec(g, loom_ir_node_get(g, nth(g, 2))->out[0])->pub.type.dims[1] = 65;
    expect_fail(g, "node %2 = add (#2): result 0 is f32[T,65], inference gives f32[T,64]");
}

Test(verify, attributes_complete) {
    loom_ir_graph *g;
    loom_error err = {0};
    const char *t = "input %x : f32[4]\n%y = rms_norm(%x) {eps=1e-6}\n";
    cr_assert_eq(loom_ir_parse(t, strlen(t), &g, &err), LOOM_OK, "%s", err.msg);
    ir_node_mut(g, loom_ir_first_node(g))->n_attrs = 0;
    expect_fail(g, "node %0 = rms_norm (#0): attributes: ir: rms_norm needs attribute eps");
}

Test(verify, operands_exist) {
    loom_ir_graph *g = fresh();
    ir_node_mut(g, nth(g, 1))->in[1] = 4242;
    expect_fail(g, "node %1 = matmul (#1): operand 1 refers to value 4242, which does not "
                   "exist");
}

Test(verify, weights_and_state_declared) {
    loom_ir_graph *g = fresh();
    loom_error err = {0};
    /* A weight value that no declaration lists, put under the matmul. */
    loom_ir_type t = loom_ir_value_get(g, loom_ir_find_value(g, "w"))->type;
    loom_ir_value_id ghost = ir_new_value(g, LOOM_IR_VALUE_WEIGHT, &t);
    ir_value_rec(g, ghost)->pub.name = "ghost";
    cr_assert_eq(loom_ir_node_set_input(g, nth(g, 1), 1, ghost, &err), LOOM_OK, "%s", err.msg);
    expect_fail(g, "referenced but not declared");
}

Test(verify, weight_size_consistent) {
    loom_ir_graph *g = fresh();
    ir_value_rec(g, loom_ir_find_value(g, "w"))->pub.size = 5;
    expect_fail(g, "weight @w: size 5 does not match its type (16384 bytes)");
}

Test(verify, outputs_defined) {
    loom_ir_graph *g = fresh();
    g->outputs[0].value = 777;
    expect_fail(g, "output y refers to value 777, which is not defined");
}

Test(verify, state_version_written_once) {
    loom_ir_graph *g = fresh();
    loom_error err = {0};
    loom_ir_value_id kc = loom_ir_find_value(g, "kc");
    loom_ir_value_id c = loom_ir_node_get(g, nth(g, 2))->out[0];
    /* The builder allows it (types are fine); the verifier refuses the second writer. */
    cr_assert_neq(loom_ir_kv_write(g, kc, c, loom_ir_find_value(g, "pos"), &err),
                  LOOM_IR_NO_VALUE, "%s", err.msg);
    expect_fail(g, "cache @kc is also written by node #4");
}

Test(verify, use_lists_consistent) {
    loom_ir_graph *g = fresh();
    ir_value_rec(g, loom_ir_find_value(g, "x"))->n_uses = 0;
    expect_fail(g, "node %0 = silu (#0): operand 0 is missing from its use list");
}

Test(verify, program_order_list) {
    loom_ir_graph *g = fresh();
    g->n_live_nodes = 3;
    expect_fail(g, "program order list is corrupt");
}

/* The remaining checks of verify.c, one case each (a corrupt message or a buggy pass could
 * produce every one of them; the builder and parser never do). */

Test(verify, declaration_of_the_wrong_kind) {
    loom_ir_graph *g = fresh();
    g->inputs.v[0] = loom_ir_find_value(g, "w"); /* the weight listed as an input */
    expect_fail(g, "declaration 0 of kind");
}

Test(verify, name_declared_twice) {
    loom_ir_graph *g = fresh();
    ir_value_rec(g, loom_ir_find_value(g, "w"))->pub.name = "x";
    expect_fail(g, "name x declared twice");
}

Test(verify, unknown_op) {
    loom_ir_graph *g = fresh();
    ir_node_mut(g, nth(g, 0))->op = (loom_ir_op)999;
    expect_fail(g, "(#0): unknown op id 999");
}

Test(verify, attribute_count_bounded) {
    loom_ir_graph *g = fresh();
    ir_node_mut(g, nth(g, 0))->n_attrs = LOOM_IR_MAX_ATTRS + 1;
    expect_fail(g, "node %0 = silu (#0): ");
}

Test(verify, arity_matches_the_op) {
    loom_ir_graph *g = fresh();
    ir_node_mut(g, nth(g, 0))->n_in = 2; /* silu takes one operand */
    expect_fail(g, "node %0 = silu (#0): 2 operands / 1 results (op takes 1..1");
}

Test(verify, value_claims_a_node_that_does_not_define_it) {
    loom_ir_graph *g = fresh();
    loom_ir_type t = loom_ir_value_get(g, loom_ir_find_value(g, "x"))->type;
    loom_ir_value_id v = ir_new_value(g, LOOM_IR_VALUE_NODE, &t);
    ir_value_rec(g, v)->pub.def = nth(g, 0);
    ir_value_rec(g, v)->pub.def_slot = 0;
    expect_fail(g, "claims node #0 as its definition, which does not define it");
}

Test(verify, use_list_without_stray_entries) {
    loom_ir_graph *g = fresh();
    cr_assert(ir_add_use(g, loom_ir_find_value(g, "x"), nth(g, 1), 3)); /* no such operand */
    expect_fail(g, "use lists hold 9 entries for 8 operands");
}

Test(verify, result_count_matches_inference) {
    loom_ir_graph *g;
    loom_error err = {0};
    const char *t = "input %x : f32[4,64]\nweight @w : f32[32,64]\n"
                    "%y = matmul_pair(%x, @w, @w) {swiglu=1}\noutput y = %y\n";
    cr_assert_eq(loom_ir_parse(t, strlen(t), &g, &err), LOOM_OK, "%s", err.msg);
    ir_node_mut(g, loom_ir_first_node(g))->attrs[0].u.i = 0; /* swiglu=0 gives two results */
    expect_fail(g, "node %0 = matmul_pair (#0): has 1 results, its operands and attributes "
                   "give 2");
}

/* The fused attention (rope_kv_attention): a graph read from outside whose attention attributes
 * disagree with its operands, and a cache version it writes that another node writes too, are
 * refused naming the node. */
static const char *fused_text =
    "symbol T max=8\n"
    "input %q : f32[T,4,16]\n"
    "input %k : f32[T,2,16]\n"
    "input %pos : i32[T]\n"
    "state @kc : f16[8,2,16]\n"
    "state @vc : f16[8,2,16]\n"
    "%kc, %vc, %a = rope_kv_attention(@kc, @vc, %q, %k, %k, %pos) {eps=0, mode=neox, n_rot=16, "
    "freq_base=1e6, n_head=4, n_kv_head=2, head_dim=16, scale=0.25}\n" /* %0..%2, node #0 */
    "%b = silu(%a)\n"                                                  /* %3, node #1 */
    "output b = %b\n";

static loom_ir_graph *fresh_fused(void) { return parse_verified(fused_text); }

Test(verify, rope_kv_attention_attributes_match_its_operands) {
    loom_ir_graph *g = fresh_fused();
    loom_ir_node *n = ir_node_mut(g, nth(g, 0));
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].id == LOOM_IR_ATTR_HEAD_DIM) n->attrs[i].u.i = 32;
    expect_fail(g, "node %0 = rope_kv_attention (#0): ir: rope_kv_attention(@kc, @vc, %q, %k, "
                   "%k, %pos): n_head 4, n_kv_head 2, head_dim 32 do not match");
}

Test(verify, rope_kv_attention_writes_a_cache_version_once) {
    loom_ir_graph *g = fresh_fused();
    loom_error err = {0};
    /* A kv_write of the same state version (the builder allows it, the verifier does not). */
    cr_assert_neq(loom_ir_kv_write(g, loom_ir_find_value(g, "vc"),
                                   loom_ir_find_value(g, "k"), loom_ir_find_value(g, "pos"), &err),
                  LOOM_IR_NO_VALUE, "%s", err.msg);
    expect_fail(g, "node %0 = rope_kv_attention (#0): cache @vc is also written by node #2");
}

Test(verify, rope_kv_attention_needs_every_attribute) {
    loom_ir_graph *g = fresh_fused();
    ir_node_mut(g, nth(g, 0))->n_attrs--; /* scale dropped, as a corrupt file might */
    expect_fail(g, "node %0 = rope_kv_attention (#0): attributes: ir: rope_kv_attention needs "
                   "attribute scale");
}
