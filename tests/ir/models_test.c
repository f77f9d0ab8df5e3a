/* models_test.c: the text form and DOT on every graph of the test models: each GGUF model in
 * $LOOM_TESTDATA/golden is lowered (loaders/lower), verified, printed, parsed back (equal to the
 * lowered graph), printed again (same bytes), cloned (equal) and rendered as DOT. Skipped when
 * the test data is absent, unless LOOM_REQUIRE_TESTDATA=1. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"
#include "tests/common/testdata.h"

Test(models, every_golden_graph_round_trips) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/golden", loom_test_testdata("golden"));
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int models = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".gguf")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        loom_error err = {0};
        loom_gguf *f = NULL;
        loom_ir_graph *g = NULL, *back = NULL, *clone = NULL;
        cr_assert_eq(loom_gguf_open(path, &f, &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_lower_gguf(f, NULL, &g, &err), LOOM_OK, "%s: %s", path, err.msg);
        cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s: %s", path, err.msg);
        char *text = loom_ir_print_string(g, &err);
        cr_assert_not_null(text, "%s", err.msg);
        cr_assert_eq(loom_ir_parse(text, strlen(text), &back, &err), LOOM_OK, "%s: %s", path,
                     err.msg);
        cr_assert(loom_ir_graph_equal(g, back, &err), "%s: %s", path, err.msg);
        char *again = loom_ir_print_string(back, &err);
        cr_assert_str_eq(text, again, "%s: printing is not a fixed point", path);
        clone = loom_ir_graph_clone(back, &err);
        cr_assert(loom_ir_graph_equal(g, clone, &err), "%s: %s", path, err.msg);
        char *dot = NULL;
        size_t dl = 0;
        FILE *m = open_memstream(&dot, &dl);
        cr_assert_eq(loom_ir_print_dot(g, m, &err), LOOM_OK, "%s", err.msg);
        fclose(m);
        cr_assert(dl > 100 && !strncmp(dot, "digraph loom {", 14));
        free(dot);
        free(text);
        free(again);
        loom_ir_graph_destroy(clone);
        loom_ir_graph_destroy(back);
        loom_ir_graph_destroy(g);
        loom_gguf_close(f);
        models++;
    }
    closedir(d);
    cr_assert_geq(models, 8, "found %d golden models", models);
}
