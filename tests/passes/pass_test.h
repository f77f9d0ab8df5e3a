/* pass_test.h: helpers for the pass tests, written in the IR's text form.
 *
 *   expect_pass(loom_pass_fuse_qkv, INPUT_TEXT, EXPECTED_TEXT, 1);
 * parses INPUT_TEXT, runs the pass, verifies the result, and asserts it is structurally equal
 * (loom_ir_graph_equal) to the parsed EXPECTED_TEXT and made exactly that many rewrites;
 * `expect_unchanged` is the negative form (no rewrite, graph equal to the input). Failures print
 * both texts and the first difference.
 */
#ifndef LOOM_TESTS_PASS_TEST_H
#define LOOM_TESTS_PASS_TEST_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

static inline loom_ir_graph *parse_or_die(const char *text) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    loom_status st = loom_ir_parse(text, strlen(text), &g, &err);
    cr_assert(!st, "parse: %s\n%s", err.msg, text);
    return g;
}

static inline void expect_pass(loom_pass_fn pass, const char *in, const char *want,
                               uint32_t want_rewrites) {
    loom_ir_graph *g = parse_or_die(in), *w = parse_or_die(want);
    loom_error err = {0}, diff = {0};
    uint32_t n = 0;
    loom_status st = pass(g, &n, &err);
    cr_assert(!st, "pass failed: %s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "result does not verify: %s", err.msg);
    char *got = loom_ir_print_string(g, &err);
    cr_assert(got);
    cr_assert(loom_ir_graph_equal(g, w, &diff), "%s\n--- got:\n%s\n--- want:\n%s", diff.msg, got,
              want);
    cr_assert_eq(n, want_rewrites, "rewrites: got %u, want %u\n%s", n, want_rewrites, got);
    free(got);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(w);
}

static inline void expect_unchanged(loom_pass_fn pass, const char *in) {
    expect_pass(pass, in, in, 0);
}

#endif
