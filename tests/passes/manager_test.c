/* manager_test.c: the registry, pipeline parsing (names, -O0, -O2, the default, unknown names
 * listing the known ones), the manager's statistics, verify-each, dumps and the `passes`
 * metadata, and the pattern driver (fixed point, benefit order, the sweep cap as LOOM_ERR_LIMIT).
 */
#include <stdio.h>

#include "pass_test.h"
#include "passes/pattern.h"
#include "tests/common/testdata.h"

#define LAYER_DIR "tests/passes/graphs/"

Test(registry, every_pass_is_listed_once_with_a_doc) {
    const char *want[] = {"fuse-norm-weight", "fuse-qkv",         "fuse-gate-up",
                          "fuse-residual-add", "fuse-rope-kv-write", "fuse-rope-kv-attention",
                          "fuse-norm-matmul", "fuse-matmul-pair", "cse",
                          "dce"};
    cr_assert_eq(loom_pass_count(), sizeof want / sizeof *want);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const loom_pass_info *p = loom_pass_find(want[i]);
        cr_assert(p && p->run && p->doc && *p->doc, "%s", want[i]);
        for (uint32_t j = 0; j < loom_pass_count(); j++)
            if (loom_pass_at(j) != p) cr_assert_str_neq(loom_pass_at(j)->name, want[i]);
    }
    cr_assert_null(loom_pass_find("fuse-everything"));
    cr_assert_null(loom_pass_at(loom_pass_count()));
}

Test(manager, unknown_pass_or_level_lists_the_known_ones) {
    loom_pass_manager *pm = (void *)1;
    loom_error err = {0};
    cr_assert_eq(loom_pass_manager_create("fuse-qkv,fuse-everything", NULL, &pm, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_null(pm);
    cr_assert(strstr(err.msg, "'fuse-everything'") && strstr(err.msg, "fuse-gate-up") &&
              strstr(err.msg, "dce"), "%s", err.msg);
    cr_assert_eq(loom_pass_manager_create("fuse-qkv,,dce", NULL, &pm, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_pass_manager_create("-O3", NULL, &pm, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "-O0") && strstr(err.msg, "-O2"), "%s", err.msg);
    loom_pass_options o;
    loom_pass_options_init(&o);
    o.print_after = "fuse-all";
    cr_assert_eq(loom_pass_manager_create("-O2", &o, &pm, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "fuse-all") && strstr(err.msg, "fuse-qkv"), "%s", err.msg);
}

/* The qwen3 layer of tests/ir/graphs through `pipeline`; returns the manager (stats). */
static loom_pass_manager *run_layer(const char *pipeline, loom_pass_options *o,
                                    loom_ir_graph **out) {
    char *text = loom_test_read_file(LAYER_DIR "qwen3_1layer.loom", NULL);
    loom_ir_graph *g = parse_or_die(text);
    free(text);
    loom_pass_manager *pm;
    loom_error err = {0};
    o->verify_each = true;
    cr_assert(!loom_pass_manager_create(pipeline, o, &pm, &err), "%s", err.msg);
    cr_assert(!loom_pass_manager_run(pm, g, &err), "%s", err.msg);
    *out = g;
    return pm;
}

Test(manager, default_pipeline_gives_the_fused_layer_with_stats_and_metadata) {
    const char *levels[] = {NULL, "", "-O2", LOOM_PASS_PIPELINE_O2};
    char *want_text = loom_test_read_file(LAYER_DIR "qwen3_1layer_o2.loom", NULL);
    loom_ir_graph *want = parse_or_die(want_text);
    free(want_text);
    loom_error err = {0};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
        loom_pass_options o;
        loom_pass_options_init(&o);
        loom_ir_graph *g;
        loom_pass_manager *pm = run_layer(levels[i], &o, &g);
        cr_assert(loom_ir_graph_equal(g, want, &err), "%s", err.msg);
        const loom_ir_meta *m = loom_ir_meta_get(g, "passes");
        cr_assert(m && m->kind == LOOM_IR_META_STRING);
        cr_assert_str_eq(m->s, LOOM_PASS_PIPELINE_O2);
        /* Per pass: name, nodes before/after chained, rewrites. */
        const char *names[] = {"fuse-norm-weight",   "fuse-qkv",
                               "fuse-gate-up",       "fuse-residual-add",
                               "fuse-rope-kv-write", "fuse-rope-kv-attention",
                               "fuse-norm-matmul",   "cse",
                               "dce"};
        const uint32_t rewrites[] = {5, 1, 1, 2, 1, 1, 2, 0, 0};
        cr_assert_eq(loom_pass_manager_stat_count(pm), 9);
        uint32_t nodes = 31; /* qwen3_1layer.loom */
        for (uint32_t k = 0; k < 9; k++) {
            const loom_pass_stat *s = loom_pass_manager_stat_at(pm, k);
            cr_assert_str_eq(s->name, names[k]);
            cr_assert_eq(s->nodes_before, nodes);
            cr_assert_eq(s->rewrites, rewrites[k], "%s: %u rewrites", s->name, s->rewrites);
            cr_assert(s->ms >= 0);
            nodes = s->nodes_after;
        }
        cr_assert_eq(nodes, 11);
        cr_assert_eq(nodes, loom_ir_node_count(g));
        cr_assert_null(loom_pass_manager_stat_at(pm, 9));
        loom_pass_manager_destroy(pm);
        loom_ir_graph_destroy(g);
    }
    loom_ir_graph_destroy(want);
}

Test(manager, o0_changes_nothing_and_runs_append_to_the_metadata) {
    loom_pass_options o;
    loom_pass_options_init(&o);
    loom_ir_graph *g;
    loom_pass_manager *pm = run_layer("-O0", &o, &g);
    cr_assert_eq(loom_pass_manager_stat_count(pm), 0);
    cr_assert_null(loom_ir_meta_get(g, "passes"));
    loom_pass_manager_destroy(pm);
    loom_error err = {0};
    cr_assert(!loom_pass_run_pipeline(g, "fuse-qkv", true, &err), "%s", err.msg);
    cr_assert(!loom_pass_run_pipeline(g, "dce,cse", true, &err), "%s", err.msg);
    cr_assert_str_eq(loom_ir_meta_get(g, "passes")->s, "fuse-qkv,dce,cse");
    loom_ir_graph_destroy(g);
}

Test(manager, print_after_and_print_after_all) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    loom_pass_options o;
    loom_pass_options_init(&o);
    o.dump = f;
    o.print_after = "fuse-qkv";
    loom_ir_graph *g;
    loom_pass_manager_destroy(run_layer("fuse-norm-weight,fuse-qkv,dce", &o, &g));
    loom_ir_graph_destroy(g);
    fflush(f);
    cr_assert(!strncmp(buf, "after fuse-qkv:\n", 16), "%.200s", buf);
    cr_assert(strstr(buf, "matmul_triple(") && strstr(buf, "fused_rms_norm("));
    cr_assert_null(strstr(buf, "after dce:"));
    cr_assert_null(strstr(buf, "after fuse-norm-weight:"));
    fclose(f);
    free(buf);
    f = open_memstream(&buf, &len);
    loom_pass_options_init(&o);
    o.dump = f;
    o.print_after_all = true;
    loom_pass_manager_destroy(run_layer("fuse-norm-weight,fuse-qkv,dce", &o, &g));
    loom_ir_graph_destroy(g);
    fflush(f);
    const char *a = strstr(buf, "after fuse-norm-weight:\n"), *b = strstr(buf, "after fuse-qkv:\n"),
               *c = strstr(buf, "after dce:\n");
    cr_assert(a && b && c && a < b && b < c, "%s", buf);
    /* Each dump is the text form: it parses back. */
    loom_ir_graph *back = parse_or_die(strchr(c, '\n') + 1);
    loom_ir_graph_destroy(back);
    fclose(f);
    free(buf);
}

/* ---- the driver ---- */

/* A broken pattern: silu(x) -> silu(x) again, forever. */
static loom_status resilu(loom_ir_graph *g, const loom_match *m, loom_error *err) {
    const loom_ir_node *n = loom_match_node(g, m, 0);
    return loom_pass_fuse(g, m, LOOM_IR_OP_SILU, n->in, 1, NULL, 0, n->out, 1, err);
}

Test(driver, a_pattern_that_never_settles_hits_the_cap) {
    loom_ir_graph *g = parse_or_die("input %x : f32[4]\n%y = silu(%x)\noutput y = %y\n");
    loom_pattern p = {.name = "silu again", .root = LOOM_IR_OP_SILU, .rewrite = resilu};
    loom_error err = {0};
    uint32_t n = 0;
    cr_assert_eq(loom_pattern_apply(g, &p, 1, 5, &n, &err), LOOM_ERR_LIMIT);
    cr_assert_eq(n, 5);
    cr_assert(strstr(err.msg, "5 sweeps") && strstr(err.msg, "silu again"), "%s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "%s", err.msg); /* the graph stays valid */
    loom_ir_graph_destroy(g);
}

static int fired_a, fired_b;
static bool count_a(const loom_ir_graph *g, loom_match *m) { (void)g, (void)m; fired_a++; return false; }
static bool count_b(const loom_ir_graph *g, loom_match *m) { (void)g, (void)m; fired_b = fired_a + 1; return false; }

Test(driver, higher_benefit_is_tried_first_and_no_match_is_a_fixed_point) {
    loom_ir_graph *g = parse_or_die("input %x : f32[4]\n%y = silu(%x)\noutput y = %y\n");
    loom_pattern p[2] = {
        {.name = "a", .root = LOOM_IR_OP_SILU, .guard = count_a, .rewrite = resilu, .benefit = 1},
        {.name = "b", .root = LOOM_IR_OP_SILU, .guard = count_b, .rewrite = resilu, .benefit = 2},
    };
    loom_error err = {0};
    uint32_t n = 7;
    cr_assert(!loom_pattern_apply(g, p, 2, 0, &n, &err), "%s", err.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(fired_b, 1, "b (benefit 2) ran before a"); /* a had not run yet */
    cr_assert_eq(fired_a, 1);
    loom_ir_graph_destroy(g);
}

Test(driver, rewrite_that_moves_a_use_above_its_definition_is_rescheduled) {
    /* fuse-qkv when a use of the first product sits between the matmuls: the fused node goes
     * before the last matmul, the driver's stable sort then moves the early use below it. */
    loom_ir_graph *g = parse_or_die("symbol T max=4\ninput %x : f32[T,64]\n"
                                    "weight @a : f32[64,64]\nweight @b : f32[32,64]\n"
                                    "%q = matmul(%x, @a)\n%s = silu(%q)\n"
                                    "%k = matmul(%x, @b)\n%v = matmul(%x, @b)\n"
                                    "output s = %s\noutput k = %k\noutput v = %v\n");
    loom_error err = {0};
    uint32_t n = 0;
    cr_assert(!loom_pass_fuse_qkv(g, &n, &err) && n == 1, "%s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "%s", err.msg);
    loom_ir_graph *want = parse_or_die("symbol T max=4\ninput %x : f32[T,64]\n"
                                       "weight @a : f32[64,64]\nweight @b : f32[32,64]\n"
                                       "%q, %k, %v = matmul_triple(%x, @a, @b, @b)\n%s = silu(%q)\n"
                                       "output s = %s\noutput k = %k\noutput v = %v\n");
    cr_assert(loom_ir_graph_equal(g, want, &err), "%s", err.msg);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(want);
}

/* ---- scale: a deep model's graph ---- */

/* Appends one unfused qwen3 layer (tiny shapes) reading %x<l> and writing %x<l+1>. */
static void append_layer(char *s, size_t cap, int l) {
    size_t k = strlen(s);
    snprintf(s + k, cap - k,
             "weight @blk.%1$d.attn_norm.weight : f32[256]\n"
             "weight @blk.%1$d.attn_q.weight : q4_k[256,256]\n"
             "weight @blk.%1$d.attn_k.weight : q4_k[128,256]\n"
             "weight @blk.%1$d.attn_v.weight : q6_k[128,256]\n"
             "weight @blk.%1$d.attn_q_norm.weight : f32[64]\n"
             "weight @blk.%1$d.attn_k_norm.weight : f32[64]\n"
             "weight @blk.%1$d.attn_output.weight : q4_k[256,256]\n"
             "weight @blk.%1$d.ffn_norm.weight : f32[256]\n"
             "weight @blk.%1$d.ffn_gate.weight : q4_k[768,256]\n"
             "weight @blk.%1$d.ffn_up.weight : q4_k[768,256]\n"
             "weight @blk.%1$d.ffn_down.weight : q6_k[256,768]\n"
             "state @kv.%1$d.k : f32[64,128]\nstate @kv.%1$d.v : f32[64,128]\n"
             "%%n1_%1$d = rms_norm(%%x%1$d) {eps=1e-6}\n"
             "%%h1_%1$d = mul(%%n1_%1$d, @blk.%1$d.attn_norm.weight)\n"
             "%%q%1$d = matmul(%%h1_%1$d, @blk.%1$d.attn_q.weight)\n"
             "%%k%1$d = matmul(%%h1_%1$d, @blk.%1$d.attn_k.weight)\n"
             "%%v%1$d = matmul(%%h1_%1$d, @blk.%1$d.attn_v.weight)\n"
             "%%q3_%1$d = reshape(%%q%1$d) {shape=[T,4,64]}\n"
             "%%k3_%1$d = reshape(%%k%1$d) {shape=[T,2,64]}\n"
             "%%qn%1$d = rms_norm(%%q3_%1$d) {eps=1e-6}\n"
             "%%qw%1$d = mul(%%qn%1$d, @blk.%1$d.attn_q_norm.weight)\n"
             "%%kn%1$d = rms_norm(%%k3_%1$d) {eps=1e-6}\n"
             "%%kw%1$d = mul(%%kn%1$d, @blk.%1$d.attn_k_norm.weight)\n"
             "%%qr%1$d = rope(%%qw%1$d, %%positions) {mode=neox, n_rot=64, freq_base=1e6}\n"
             "%%kr%1$d = rope(%%kw%1$d, %%positions) {mode=neox, n_rot=64, freq_base=1e6}\n"
             "%%kr2_%1$d = reshape(%%kr%1$d) {shape=[T,128]}\n"
             "%%kc%1$d = kv_write(@kv.%1$d.k, %%kr2_%1$d, %%positions)\n"
             "%%vc%1$d = kv_write(@kv.%1$d.v, %%v%1$d, %%positions)\n"
             "%%att%1$d = attention(%%qr%1$d, %%kc%1$d, %%vc%1$d, %%positions) "
             "{n_head=4, n_kv_head=2, head_dim=64, scale=0.125}\n"
             "%%ao%1$d = matmul(%%att%1$d, @blk.%1$d.attn_output.weight)\n"
             "%%xa%1$d = add(%%ao%1$d, %%x%1$d)\n"
             "%%n2_%1$d = rms_norm(%%xa%1$d) {eps=1e-6}\n"
             "%%h2_%1$d = mul(%%n2_%1$d, @blk.%1$d.ffn_norm.weight)\n"
             "%%g%1$d = matmul(%%h2_%1$d, @blk.%1$d.ffn_gate.weight)\n"
             "%%u%1$d = matmul(%%h2_%1$d, @blk.%1$d.ffn_up.weight)\n"
             "%%gs%1$d = silu(%%g%1$d)\n"
             "%%gu%1$d = mul(%%gs%1$d, %%u%1$d)\n"
             "%%d%1$d = matmul(%%gu%1$d, @blk.%1$d.ffn_down.weight)\n"
             "%%x%2$d = add(%%d%1$d, %%xa%1$d)\n",
             l, l + 1);
}

Test(manager, deep_model_fuses_every_layer) {
    enum { L = 64 };
    size_t cap = (size_t)L * 4096 + 4096;
    char *s = calloc(cap, 1);
    cr_assert(s);
    strcpy(s, "symbol T max=16\ninput %tokens : i32[T]\ninput %positions : i32[T]\n"
              "weight @token_embd.weight : q4_k[512,256]\n"
              "%x0 = get_rows(@token_embd.weight, %tokens)\n");
    for (int l = 0; l < L; l++) append_layer(s, cap, l);
    size_t k = strlen(s);
    snprintf(s + k, cap - k, "weight @output_norm.weight : f32[256]\n"
                             "weight @output.weight : q6_k[512,256]\n"
                             "%%nf = rms_norm(%%x%d) {eps=1e-6}\n%%hf = mul(%%nf, @output_norm.weight)\n"
                             "%%logits = matmul(%%hf, @output.weight)\noutput logits = %%logits\n", L);
    loom_ir_graph *g = parse_or_die(s);
    free(s);
    cr_assert_eq(loom_ir_node_count(g), 1 + L * 27 + 3);
    loom_pass_manager *pm;
    loom_pass_options o;
    loom_pass_options_init(&o);
    o.verify_each = true;
    loom_error err = {0};
    cr_assert(!loom_pass_manager_create("-O2", &o, &pm, &err) && !loom_pass_manager_run(pm, g, &err),
              "%s", err.msg);
    uint32_t count[LOOM_IR_OP_COUNT] = {0};
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        count[loom_ir_node_get(g, id)->op]++;
    cr_assert_eq(count[LOOM_IR_OP_FUSED_RMS_NORM], 2 * L + 1); /* the layers' folded in */
    cr_assert_eq(count[LOOM_IR_OP_MATMUL_TRIPLE], L);
    cr_assert_eq(count[LOOM_IR_OP_MATMUL_PAIR], L);
    cr_assert_eq(count[LOOM_IR_OP_MATMUL_ADD], 2 * L);
    cr_assert_eq(count[LOOM_IR_OP_MATMUL], 1);
    cr_assert_eq(count[LOOM_IR_OP_MUL] + count[LOOM_IR_OP_ADD] + count[LOOM_IR_OP_RMS_NORM] +
                 count[LOOM_IR_OP_SILU], 0);
    double ms = 0;
    for (uint32_t i = 0; i < loom_pass_manager_stat_count(pm); i++)
        ms += loom_pass_manager_stat_at(pm, i)->ms;
    cr_log_info("-O2 on %u layers: %.2f ms", L, ms);
    loom_pass_manager_destroy(pm);
    loom_ir_graph_destroy(g);
}

Test(manager, verify_each_names_the_pass_after_which_the_graph_fails) {
    loom_ir_graph *g = parse_or_die("symbol T max=4\ninput %x : f32[T,64]\ninput %pos : i32[T]\n"
                                    "state @kc : f32[16,64]\n%a = kv_write(@kc, %x, %pos)\n");
    /* A second write of the same cache version: the builder allows it, the verifier does not. */
    loom_error err = {0};
    cr_assert_neq(loom_ir_kv_write(g, loom_ir_find_value(g, "kc"), loom_ir_find_value(g, "x"),
                                   loom_ir_find_value(g, "pos"), &err),
                  LOOM_IR_NO_VALUE, "%s", err.msg);
    cr_assert_eq(loom_pass_run_pipeline(g, "cse,dce", true, &err), LOOM_ERR_VERIFY, "%s", err.msg);
    cr_assert(strstr(err.msg, "pass cse: the graph fails to verify: verify: ") &&
                  strstr(err.msg, "written at most once"),
              "%s", err.msg);
    loom_ir_graph_destroy(g);
}
