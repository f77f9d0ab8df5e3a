/* cmd_dump.c: `loom dump FILE [--dot] [-o OUT]`: reads a graph and prints its text form, or
 * Graphviz DOT with --dot (`loom dump g.loom --dot | dot -Tsvg > g.svg`). `loom dump --ops`
 * lists the op table (operands, results, flags, attributes, one-line semantics).
 *
 * The reader is chosen by FILE's extension from the `readers` table below (text form, protobuf
 * graph, GGUF model lowered with default options); another kind of file is one more row.
 * Every graph is verified before it is printed, so a dump never shows a graph loom would refuse.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ir/ir.h"
#include "ir/serialize/serialize.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef loom_status (*graph_reader)(const char *path, loom_ir_graph **out, loom_error *err);

/* A GGUF model, lowered with the default options (the graph outlives the file). */
static loom_status read_gguf(const char *path, loom_ir_graph **out, loom_error *err) {
    loom_gguf *f = NULL;
    loom_status st = loom_gguf_open(path, &f, err);
    if (!st) st = loom_lower_gguf(f, NULL, out, err);
    loom_gguf_close(f);
    return st;
}

static const struct {
    const char *ext;
    graph_reader read;
    const char *what;
} readers[] = {
    {".loom", loom_ir_parse_file, "IR text form"},
    {".txt", loom_ir_parse_file, "IR text form"},
    {".pb", loom_ir_load, "protobuf graph (loom compile -o)"},
    {".gguf", read_gguf, "GGUF model, lowered"},
};
enum { N_READERS = sizeof readers / sizeof readers[0] };

/* `loom dump --ops`: the op table (ops.def), so graphs can be written by hand. */
static void print_ops(FILE *f) {
    static const struct { uint32_t flag; const char *name; } flags[] = {
        {LOOM_IR_OPF_ELEMENTWISE, "elementwise"}, {LOOM_IR_OPF_INPLACE, "inplace"},
        {LOOM_IR_OPF_FUSED, "fused"}, {LOOM_IR_OPF_VIEW, "view"},
        {LOOM_IR_OPF_WRITES_STATE, "writes_state"}, {LOOM_IR_OPF_WRITES_STATE2, "writes_state2"},
    };
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++) {
        const loom_ir_op_info *oi = loom_ir_op_info_get((loom_ir_op)op);
        fprintf(f, "%-15s in %u", oi->name, oi->min_in);
        if (oi->max_in != oi->min_in) fprintf(f, "..%u", oi->max_in);
        fprintf(f, "  out <=%u ", oi->max_out);
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
            if (oi->flags & flags[k].flag) fprintf(f, " %s", flags[k].name);
        fprintf(f, "\n    %s\n", oi->doc);
        for (int a = 0; a < LOOM_IR_ATTR_ID_COUNT; a++) {
            if (!(oi->attrs & (1u << a))) continue;
            const loom_ir_attr_info *ai = loom_ir_attr_info_get((loom_ir_attr_id)a);
            fprintf(f, "    {%s=...}%s %s\n", ai->name, ai->optional ? " (optional)" : "",
                    ai->doc);
        }
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: loom dump FILE [--dot] [-o OUT]   |   loom dump --ops\n"
               "  prints the graph in FILE as IR text (default) or Graphviz DOT (--dot),\n"
               "  to OUT or stdout. FILE kinds by extension:");
    for (int i = 0; i < N_READERS; i++) fprintf(f, " %s", readers[i].ext);
    fprintf(f, "\n  e.g. loom dump layer.loom --dot | dot -Tsvg > layer.svg\n");
}

int loom_cmd_dump(int argc, char **argv) {
    const char *path = NULL, *out_path = NULL;
    bool dot = false, ops = false;
    const loom_cli_opt opts[] = {
        {"--dot", LOOM_CLI_FLAG, &dot, 0, 0, NULL},
        {"-o", LOOM_CLI_STRING, &out_path, 0, 0, NULL},
        {"--ops", LOOM_CLI_FLAG, &ops, 0, 0, NULL},
    };
    int pr = loom_cli_parse_opts("loom dump", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "FILE", &path);
    if (pr != LOOM_CLI_GO_ON) return pr;
    if (ops) {
        print_ops(stdout);
        return 0;
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    graph_reader read = NULL;
    size_t len = strlen(path);
    for (int i = 0; i < N_READERS && !read; i++) {
        size_t el = strlen(readers[i].ext);
        if (len > el && !strcasecmp(path + len - el, readers[i].ext)) read = readers[i].read;
    }
    if (!read) {
        fprintf(stderr, "loom dump: %s: unknown file kind; supported:", path);
        for (int i = 0; i < N_READERS; i++)
            fprintf(stderr, " %s (%s)", readers[i].ext, readers[i].what);
        fprintf(stderr, "\n");
        return 2;
    }

    loom_error err = {0};
    loom_ir_graph *g = NULL;
    if (read(path, &g, &err) || loom_ir_verify(g, &err)) {
        fprintf(stderr, "loom dump: %s\n", err.msg);
        loom_ir_graph_destroy(g);
        return 1;
    }
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "loom dump: cannot write %s\n", out_path);
        loom_ir_graph_destroy(g);
        return 1;
    }
    loom_status st = dot ? loom_ir_print_dot(g, f, &err) : loom_ir_print(g, f, &err);
    if (out_path && fclose(f) != 0 && !st) st = loom_error_set(&err, LOOM_ERR_IO, "write error");
    if (!out_path) fflush(stdout);
    loom_ir_graph_destroy(g);
    if (st) {
        fprintf(stderr, "loom dump: %s%s%s\n", out_path ? out_path : "", out_path ? ": " : "",
                err.msg);
        return 1;
    }
    return 0;
}
