/* dump_test.c: the `loom dump` command end to end (the built binary from //tools:loom): text
 * output equals the library's printing of the same file, --dot gives a digraph, -o writes a
 * file, and usage errors / bad files give exit codes 2 / 1 with a message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ir/ir.h"

static const char *graph = "tests/ir/graphs/qwen3_1layer_fused.loom";

/* Runs cmd, returns its exit code and its stdout (+stderr) in a malloc'd string. */
static int run(const char *cmd, char **out) {
    char full[2048];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    cr_assert_not_null(p);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (size_t k; (k = fread(buf + len, 1, cap - len - 1, p)) > 0;) {
        len += k;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    int status = pclose(p);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(dump, text_equals_library_print) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse_file(graph, &g, &err), LOOM_OK, "%s", err.msg);
    char *want = loom_ir_print_string(g, &err), *got;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tools/loom dump %s", graph);
    cr_assert_eq(run(cmd, &got), 0, "%s", got);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
    loom_ir_graph_destroy(g);
}

Test(dump, dot_and_output_file) {
    char *got, cmd[1024], path[512];
    snprintf(cmd, sizeof cmd, "tools/loom dump %s --dot", graph);
    cr_assert_eq(run(cmd, &got), 0, "%s", got);
    cr_assert(!strncmp(got, "digraph loom {", 14), "%s", got);
    cr_assert(strstr(got, "matmul_triple"));
    free(got);
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/dump_test_out.loom", tmp);
    snprintf(cmd, sizeof cmd, "tools/loom dump %s -o %s", graph, path);
    cr_assert_eq(run(cmd, &got), 0, "%s", got);
    cr_assert_str_eq(got, "");
    free(got);
    loom_ir_graph *a, *b;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse_file(graph, &a, &err), LOOM_OK);
    cr_assert_eq(loom_ir_parse_file(path, &b, &err), LOOM_OK, "%s", err.msg);
    cr_assert(loom_ir_graph_equal(a, b, &err), "%s", err.msg);
    loom_ir_graph_destroy(a);
    loom_ir_graph_destroy(b);
    remove(path);
}

Test(dump, errors) {
    char *got;
    cr_assert_eq(run("tools/loom dump", &got), 2);
    cr_assert(strstr(got, "usage: loom dump FILE"), "%s", got);
    free(got);
    cr_assert_eq(run("tools/loom dump x.loom --bogus", &got), 2);
    cr_assert(strstr(got, "unknown option '--bogus'"), "%s", got);
    free(got);
    cr_assert_eq(run("tools/loom dump x.unknown", &got), 2);
    cr_assert(strstr(got, "unknown file kind; supported: .loom"), "%s", got);
    free(got);
    cr_assert_eq(run("tools/loom dump /nonexistent/g.loom", &got), 1);
    cr_assert(strstr(got, "loom dump: /nonexistent/g.loom: cannot open"), "%s", got);
    free(got);
}

Test(dump, ops_lists_the_op_table) {
    char *got;
    cr_assert_eq(run("tools/loom dump --ops", &got), 0, "%s", got);
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++) {
        char line[64];
        snprintf(line, sizeof line, "%s ", loom_ir_op_info_get((loom_ir_op)op)->name);
        cr_expect(strstr(got, line), "op %s missing from --ops", line);
    }
    cr_assert(strstr(got, "matmul_triple   in 4..8  out <=3  fused\n"), "%s", got);
    cr_assert(strstr(got, "{norm_eps=...} (optional)"), "%s", got);
    free(got);
}
