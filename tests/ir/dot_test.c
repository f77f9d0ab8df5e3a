/* dot_test.c: Graphviz output. Structure is checked always (one digraph, balanced braces and
 * quotes, every edge endpoint declared, fused ops styled apart from primitive ones); when the
 * `dot` program is installed the output is also rendered to SVG by it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"

/* The DOT text of g (the caller frees it). */
static char *dot_of_graph(const loom_ir_graph *g) {
    loom_error err = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f, "open_memstream failed");
    cr_assert_eq(loom_ir_print_dot(g, f, &err), LOOM_OK, "%s", err.msg);
    fclose(f);
    return buf;
}

/* The DOT text of the graph in the text file at path (the caller frees it). */
static char *dot_of(const char *path) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse_file(path, &g, &err), LOOM_OK, "%s", err.msg);
    char *buf = dot_of_graph(g);
    loom_ir_graph_destroy(g);
    return buf;
}

/* How many nodes are drawn in the fused style (double border). */
static int fused_nodes(const char *dot) {
    int n = 0;
    for (const char *p = strstr(dot, "peripheries=2"); p; p = strstr(p + 1, "peripheries=2")) n++;
    return n;
}

/* True when vertex `id` (e.g. "n3") is declared on a line of its own. */
static bool declared(const char *dot, const char *id) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n  %s [", id);
    return strstr(dot, pat) != NULL;
}

static void check_structure(const char *dot) {
    cr_assert(!strncmp(dot, "digraph loom {\n", 15));
    cr_assert(!strcmp(dot + strlen(dot) - 2, "}\n"));
    int depth = 0, quotes = 0;
    for (const char *p = dot; *p; p++) {
        if (*p == '\\') {
            p++;
            continue;
        }
        if (*p == '"') quotes ^= 1;
        else if (!quotes && *p == '{') depth++;
        else if (!quotes && *p == '}') depth--;
        cr_assert_geq(depth, 0);
    }
    cr_assert_eq(depth, 0);
    cr_assert_eq(quotes, 0);
    int edges = 0;
    for (const char *p = strstr(dot, " -> "); p; p = strstr(p + 4, " -> ")) {
        const char *ls = p;
        while (ls > dot && ls[-1] != '\n') ls--;
        char from[32] = "", to[32] = "";
        cr_assert_eq(sscanf(ls, " %31[a-z0-9] -> %31[a-z0-9]", from, to), 2);
        cr_assert(declared(dot, from), "edge from undeclared %s", from);
        cr_assert(declared(dot, to), "edge to undeclared %s", to);
        edges++;
    }
    cr_assert_gt(edges, 10);
}

Test(dot, fused_layer_is_well_formed_and_distinct) {
    char *dot = dot_of("tests/ir/graphs/qwen3_1layer_fused.loom");
    check_structure(dot);
    /* 5 fused_rms_norm, 1 matmul_triple, 1 matmul_pair, 2 matmul_add: filled, double-bordered. */
    int fused = fused_nodes(dot);
    cr_assert_eq(fused, 9, "fused nodes drawn distinctly: %d", fused);
    cr_assert(strstr(dot, "= matmul_triple\\l"), "op names in labels");
    cr_assert(strstr(dot, "label=\"1\""), "multi-result edges carry the slot");
    cr_assert(strstr(dot, "shape=cylinder"), "state drawn as a cylinder");
    cr_assert(strstr(dot, "shape=house"), "outputs drawn");
    free(dot);
}

/* The attention with its prologue (rope_kv_attention, three results: two cache versions and the
 * output): drawn as a fused node with its nine attributes, its cache results' edges carrying
 * their slot. */
Test(dot, rope_kv_attention_is_a_fused_node) {
    static const char *text =
        "symbol T max=4\n"
        "input %q : f32[T,4,16]\n"
        "input %k : f32[T,2,16]\n"
        "input %positions : i32[T]\n"
        "weight @qw : f32[16]\n"
        "state @kc : f16[8,2,16]\n"
        "state @vc : f16[8,2,16]\n"
        "%kc, %vc, %a = rope_kv_attention(@kc, @vc, %q, %k, %k, %positions, @qw, @qw) "
        "{eps=1e-6, mode=neox, n_rot=16, freq_base=1e6, n_head=4, n_kv_head=2, head_dim=16, "
        "scale=0.25}\n"
        "%b = silu(%a)\n%c = attention(%b, %kc, %vc, %positions) {n_head=4, n_kv_head=2, "
        "head_dim=16, scale=0.25}\n%d = silu(%c)\n%e = silu(%d)\n%f = silu(%e)\n"
        "%g = silu(%f)\n%h = silu(%g)\noutput h = %h\n";
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse(text, strlen(text), &g, &err), LOOM_OK, "%s", err.msg);
    char *dot = dot_of_graph(g);
    check_structure(dot);
    cr_assert(strstr(dot, "= rope_kv_attention\\l"), "%s", dot);
    cr_assert(strstr(dot, "head_dim=16"), "%s", dot);
    cr_assert_eq(fused_nodes(dot), 1, "%s", dot);
    cr_assert(strstr(dot, "label=\"1\""), "the V cache result's edge carries its slot: %s", dot);
    free(dot);
    loom_ir_graph_destroy(g);
}

Test(dot, unfused_layer_has_no_fused_style) {
    char *dot = dot_of("tests/ir/graphs/llama_1layer.loom");
    check_structure(dot);
    cr_assert_null(strstr(dot, "peripheries=2"));
    free(dot);
}

Test(dot, renders_with_graphviz) {
    const char *dot_bin = NULL;
    static const char *cands[] = {"/usr/bin/dot", "/usr/local/bin/dot"};
    for (size_t i = 0; i < 2; i++)
        if (access(cands[i], X_OK) == 0) dot_bin = cands[i];
    if (!dot_bin) cr_skip_test("graphviz `dot` not installed; structure is checked elsewhere");
    char *dot = dot_of("tests/ir/graphs/qwen3_1layer_fused.loom");
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    char in[512], out[512], cmd[1600];
    snprintf(in, sizeof in, "%s/loom_dot_test_%d.dot", tmp, (int)getpid());
    snprintf(out, sizeof out, "%s/loom_dot_test_%d.svg", tmp, (int)getpid());
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    fputs(dot, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s -Tsvg '%s' -o '%s' 2>&1", dot_bin, in, out);
    cr_assert_eq(system(cmd), 0, "dot rejected the output");
    f = fopen(out, "r");
    cr_assert_not_null(f);
    char head[4096] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    fclose(f);
    cr_assert(strstr(head, "<svg"), "no svg produced");
    remove(in);
    remove(out);
    free(dot);
}
