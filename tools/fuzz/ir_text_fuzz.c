/* ir_text_fuzz.c: libFuzzer harness of the IR text parser (ir/parse.c) and everything a parsed
 * graph goes through: any input must either be refused with a "parse:" message or give a graph
 * that verifies, prints, parses back to an equal graph, prints identically again, clones equal
 * and renders as DOT. Build and run: bash tools/fuzz/build_ir_text.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    loom_ir_graph *g = NULL, *back = NULL, *clone = NULL;
    loom_error err = {0};
    if (loom_ir_parse((const char *)data, size, &g, &err) != LOOM_OK) {
        if (g || strncmp(err.msg, "parse", 5)) abort();
        return 0;
    }
    if (loom_ir_verify(g, &err) != LOOM_OK) abort();
    char *text = loom_ir_print_string(g, &err);
    if (!text) abort();
    if (loom_ir_parse(text, strlen(text), &back, &err) != LOOM_OK) {
        fprintf(stderr, "printed text does not parse: %s\n%s", err.msg, text);
        abort();
    }
    if (!loom_ir_graph_equal(g, back, &err)) {
        fprintf(stderr, "round trip differs: %s\n", err.msg);
        abort();
    }
    char *again = loom_ir_print_string(back, &err);
    if (!again || strcmp(text, again)) abort();
    clone = loom_ir_graph_clone(g, &err);
    if (!clone || !loom_ir_graph_equal(g, clone, NULL)) abort();
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        if (loom_ir_print_dot(g, null, &err) != LOOM_OK) abort();
        fclose(null);
    }
    free(text);
    free(again);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(back);
    loom_ir_graph_destroy(clone);
    return 0;
}
