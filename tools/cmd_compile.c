/* cmd_compile.c: `loom compile`, GGUF -> verified step graph -> protobuf file and statistics.
 *
 * Lowers the model (loaders/lower.h), applies a pass pipeline (default -O2), verifies, and
 * writes the graph with ir/serialize (via OUT.tmp renamed over OUT). `--stats` prints what the
 * graph holds: the count of each op, the nodes and the values; with `--json` as one JSON object
 * {"ops": {"<op>": count, ...}, "nodes": N, "values": N, "passes": [{"name", "nodes_before",
 * "nodes_after", "rewrites", "ms"}, ...], "layers": [{"<op>": count, ...}, ...]} on stdout (ops
 * in op-table order, only those present; "layers" holds the op counts of each decoder layer, see
 * layer_of_nodes). Without --json the per-layer counts are printed once when all layers agree.
 * `--plan [--streams N]` prints the execution plan (executor/plan.h) without any backend: the
 * activation arena, the sum of intermediates, the lower bound, streams and waits; with `--json`
 * as `"plan": {"arena_bytes": A, "sum_bytes": S, "lower_bound_bytes": L, "streams": N, ...}`
 * (inside the --stats object, or alone in one). Exit codes: 0 success, 1 runtime error, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/plan.h"
#include "ir/ir.h"
#include "ir/serialize/serialize.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"
#include "passes/passes.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom compile MODEL.gguf [-o GRAPH.pb] [--passes LIST|-O0|-O2] [--stats [--json]]\n"
            "\n"
            "Lowers a GGUF model (llama, qwen2, qwen3) to loom's step graph, optimizes it with a\n"
            "pass pipeline, verifies it and writes it as a protobuf file (weights stay in the GGUF;\n"
            "the graph refers to them).\n"
            "\n"
            "  -o FILE             write the graph (protobuf) to FILE\n"
            "  --passes LIST       comma-separated pass names, or a level -O0 / -O2 (also --passes=LIST)\n"
            "  -O0, -O2            no passes / the default pipeline (default: -O2)\n"
            "  --verify-each       run the verifier after every pass\n"
            "  --print-after NAME  print the graph after pass NAME (stderr; also --print-after=NAME)\n"
            "  --print-after-all   print the graph after every pass (stderr)\n"
            "  --stats             print the op counts, nodes and values, and per-pass statistics\n"
            "  --json              with --stats / --plan: one JSON object on stdout\n"
            "  --plan              print the execution plan (no GPU needed): activation arena,\n"
            "                      sum of intermediates, lower bound, streams, waits\n"
            "  --streams N         streams for --plan (default 1: serial)\n"
            "  --ctx N             context length (KV cache rows; default min(context_length, 4096))\n"
            "  --max-tokens N      largest step T (default 512)\n"
            "  --kv f32|f16        KV cache dtype (default f32)\n"
            "  --last-logits       logits of each step's last token only (input last_row)\n"
            "  --print             print the graph's text form on stdout\n"
            "  -h, --help          this help\n");
}

/* The plan's figures as a JSON member `"plan": {...}` (no braces around it). */
static void plan_json(const loom_exec_plan *p, char *buf, size_t len) {
    snprintf(buf, len,
             "\"plan\": {\"arena_bytes\": %llu, \"sum_bytes\": %llu, \"lower_bound_bytes\": %llu, "
             "\"streams\": %u, \"blocks\": %u, \"inplace\": %u, \"waits\": %u}",
             (unsigned long long)loom_exec_plan_arena_bytes(p),
             (unsigned long long)loom_exec_plan_sum_bytes(p),
             (unsigned long long)loom_exec_plan_lower_bound_bytes(p), loom_exec_plan_streams(p),
             loom_exec_plan_block_count(p), loom_exec_plan_inplace_count(p),
             loom_exec_plan_wait_count(p));
}

static void print_plan(const loom_exec_plan *p) {
    uint64_t a = loom_exec_plan_arena_bytes(p), s = loom_exec_plan_sum_bytes(p),
             l = loom_exec_plan_lower_bound_bytes(p);
    printf("plan: %u nodes on %u stream(s), %u cross-stream waits\n", loom_exec_plan_node_count(p),
           loom_exec_plan_streams(p), loom_exec_plan_wait_count(p));
    printf("  activation arena   %12llu bytes (%.2f MiB), %.3f x the lower bound\n",
           (unsigned long long)a, a / 1048576.0, l ? (double)a / (double)l : 0.0);
    printf("  lower bound        %12llu bytes (most bytes alive at one time)\n",
           (unsigned long long)l);
    printf("  sum of results     %12llu bytes (no reuse), %u blocks, %u in-place hand-overs\n",
           (unsigned long long)s, loom_exec_plan_block_count(p), loom_exec_plan_inplace_count(p));
    uint32_t per[LOOM_PLAN_MAX_STREAMS] = {0};
    for (uint32_t i = 0; i < loom_exec_plan_node_count(p); i++) per[loom_exec_plan_stream_of(p, i)]++;
    for (uint32_t s2 = 0; s2 < loom_exec_plan_streams(p); s2++)
        printf("  stream %u: %u nodes\n", s2, per[s2]);
    printf("  (weights, inputs and the KV cache are outside the arena)\n");
}

/* The decoder layer of a weight or state name ("blk.N.*", "kv.N.*"), or -1. */
static int name_layer(const char *name) {
    const char *digits = !strncmp(name, "blk.", 4) ? name + 4 : !strncmp(name, "kv.", 3) ? name + 3 : NULL;
    if (!digits || *digits < '0' || *digits > '9') return -1;
    return (int)strtol(digits, NULL, 10);
}

/* Assigns each node result a layer: a node reading a weight or state belongs to that tensor's
 * layer (-1 for token_embd, output_norm, output); a node reading none (reshape, rope, silu...)
 * inherits the highest layer of its operands. Returns an array indexed by value id (-1: no
 * layer), or NULL when out of memory; *n_layer receives 1 + the highest layer seen. */
static int *layer_of_nodes(const loom_ir_graph *g, int *n_layer) {
    uint32_t bound = loom_ir_value_bound(g);
    int *layer = malloc((bound ? bound : 1) * sizeof *layer);
    if (!layer) return NULL;
    for (uint32_t v = 0; v < bound; v++) layer[v] = -1;
    *n_layer = 0;
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        int l = -1;
        bool reads_tensor = false;
        for (int i = 0; i < n->n_in; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, n->in[i]);
            if (v->kind == LOOM_IR_VALUE_WEIGHT || v->kind == LOOM_IR_VALUE_STATE) {
                int t = name_layer(v->name);
                l = reads_tensor && t < l ? l : t;
                reads_tensor = true;
            } else if (!reads_tensor && v->kind == LOOM_IR_VALUE_NODE && layer[n->in[i]] > l) {
                l = layer[n->in[i]];
            }
        }
        for (int o = 0; o < n->n_out; o++) layer[n->out[o]] = l;
        if (l + 1 > *n_layer) *n_layer = l + 1;
    }
    return layer;
}

static void print_op_counts_json(const uint32_t *count) {
    printf("{");
    bool first = true;
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++) {
        if (!count[op]) continue;
        printf("%s\"%s\": %u", first ? "" : ", ", loom_ir_op_info_get((loom_ir_op)op)->name, count[op]);
        first = false;
    }
    printf("}");
}

static void print_stats(const loom_ir_graph *g, const loom_pass_manager *pm, bool json,
                        const char *extra) {
    uint32_t count[LOOM_IR_OP_COUNT] = {0}, nodes = 0, values = 0;
    int n_layer = 0;
    int *layer = layer_of_nodes(g, &n_layer);
    uint32_t(*per_layer)[LOOM_IR_OP_COUNT] = layer && n_layer ? calloc((size_t)n_layer, sizeof *per_layer) : NULL;
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        count[n->op]++;
        nodes++;
        if (per_layer && layer[n->out[0]] >= 0) per_layer[layer[n->out[0]]][n->op]++;
    }
    free(layer);
    for (uint32_t v = 0; v < loom_ir_value_bound(g); v++)
        if (loom_ir_value_get(g, v)->kind != LOOM_IR_VALUE_DEAD) values++;
    if (json) {
        printf("{\"ops\": ");
        print_op_counts_json(count);
        printf(", \"nodes\": %u, \"values\": %u, \"passes\": [", nodes, values);
        for (uint32_t i = 0; pm && i < loom_pass_manager_stat_count(pm); i++) {
            const loom_pass_stat *st = loom_pass_manager_stat_at(pm, i);
            printf("%s{\"name\": \"%s\", \"nodes_before\": %u, \"nodes_after\": %u, "
                   "\"rewrites\": %u, \"ms\": %.3f}",
                   i ? ", " : "", st->name, st->nodes_before, st->nodes_after, st->rewrites, st->ms);
        }
        printf("], \"layers\": [");
        for (int l = 0; per_layer && l < n_layer; l++) {
            printf("%s", l ? ", " : "");
            print_op_counts_json(per_layer[l]);
        }
        printf("]%s%s}\n", extra ? ", " : "", extra ? extra : "");
        free(per_layer);
        return;
    }
    /* The name columns are as wide as the longest name shown (at least 20 and 16 characters,
     * the widths of the short names' tables), so the number columns stay aligned. */
    if (pm && loom_pass_manager_stat_count(pm)) {
        int w = 20;
        for (uint32_t i = 0; i < loom_pass_manager_stat_count(pm); i++) {
            int len = (int)strlen(loom_pass_manager_stat_at(pm, i)->name);
            if (len > w) w = len;
        }
        printf("%-*s %8s %8s %9s %9s\n", w, "pass", "before", "after", "rewrites", "ms");
        for (uint32_t i = 0; i < loom_pass_manager_stat_count(pm); i++) {
            const loom_pass_stat *st = loom_pass_manager_stat_at(pm, i);
            printf("%-*s %8u %8u %9u %9.3f\n", w, st->name, st->nodes_before, st->nodes_after,
                   st->rewrites, st->ms);
        }
        printf("\n");
    }
    int w = 16;
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++) {
        int len = (int)strlen(loom_ir_op_info_get((loom_ir_op)op)->name);
        if (count[op] && len > w) w = len;
    }
    printf("%-*s %s\n", w, "op", "count");
    for (int op = 0; op < LOOM_IR_OP_COUNT; op++)
        if (count[op]) printf("%-*s %u\n", w, loom_ir_op_info_get((loom_ir_op)op)->name, count[op]);
    printf("nodes %u, values %u (inputs %u, weights %u, state %u)\n", nodes, values,
           loom_ir_input_count(g), loom_ir_weight_count(g), loom_ir_state_count(g));
    bool same = per_layer != NULL;
    for (int l = 1; same && l < n_layer; l++)
        same = !memcmp(per_layer[l], per_layer[0], sizeof per_layer[0]);
    if (same) {
        printf("each of the %d layers:", n_layer);
        for (int op = 0; op < LOOM_IR_OP_COUNT; op++)
            if (per_layer[0][op]) printf(" %s %u", loom_ir_op_info_get((loom_ir_op)op)->name, per_layer[0][op]);
        printf("\n");
    } else if (per_layer) {
        printf("layers differ in their ops (see --json \"layers\")\n");
    }
    free(per_layer);
}

int loom_cmd_compile(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *passes = NULL;
    bool stats = false, json = false, print = false, show_plan = false;
    int32_t streams = 1;
    loom_pass_options po;
    loom_pass_options_init(&po);
    loom_lower_options lo;
    loom_lower_options_init(&lo);
    const char *kv = "f32";
    const loom_cli_opt opts[] = {
        {"-o", LOOM_CLI_STRING, &out, 0, 0, NULL},
        {"--passes", LOOM_CLI_STRING, &passes, 0, 0, NULL},
        {"-O0|-O2", LOOM_CLI_SELF, &passes, 0, 0, NULL},
        {"--verify-each", LOOM_CLI_FLAG, &po.verify_each, 0, 0, NULL},
        {"--print-after", LOOM_CLI_STRING, &po.print_after, 0, 0, NULL},
        {"--print-after-all", LOOM_CLI_FLAG, &po.print_after_all, 0, 0, NULL},
        {"--ctx", LOOM_CLI_INT, &lo.n_ctx, 1, INT32_MAX, NULL},
        {"--max-tokens", LOOM_CLI_INT, &lo.max_tokens, 1, INT32_MAX, NULL},
        {"--kv", LOOM_CLI_CHOICE, &kv, 0, 0, "f32|f16"},
        {"--stats", LOOM_CLI_FLAG, &stats, 0, 0, NULL},
        {"--plan", LOOM_CLI_FLAG, &show_plan, 0, 0, NULL},
        {"--streams", LOOM_CLI_INT, &streams, 1, LOOM_PLAN_MAX_STREAMS, NULL},
        {"--json", LOOM_CLI_FLAG, &json, 0, 0, NULL},
        {"--last-logits", LOOM_CLI_FLAG, &lo.last_logits_only, 0, 0, NULL},
        {"--print", LOOM_CLI_FLAG, &print, 0, 0, NULL},
    };
    int pr = loom_cli_parse_opts("loom compile", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "model", &model);
    if (pr != LOOM_CLI_GO_ON) return pr;
    lo.kv_dtype = !strcmp(kv, "f16") ? LOOM_IR_F16 : LOOM_IR_F32;
    if (!model) {
        fprintf(stderr, "loom compile: no model given\n");
        usage(stderr);
        return 2;
    }
    if (json && !stats && !show_plan) {
        fprintf(stderr, "loom compile: --json goes with --stats or --plan\n");
        return 2;
    }
    lo.source_path = model;
    loom_error err = {0};
    loom_gguf *f = NULL;
    loom_ir_graph *g = NULL;
    loom_pass_manager *pm = NULL;
    loom_exec_plan *plan = NULL;
    char plan_buf[512] = "";
    int rc = 1;
    /* An unknown pass is a usage error, found before any work. */
    if (loom_pass_manager_create(passes, &po, &pm, &err)) {
        fprintf(stderr, "loom compile: %s\n", err.msg);
        return 2;
    }
    if (loom_gguf_open(model, &f, &err) || loom_lower_gguf(f, &lo, &g, &err) ||
        loom_pass_manager_run(pm, g, &err) || loom_ir_verify(g, &err))
        goto fail;
    if (out && loom_ir_save(g, out, &err)) goto fail;
    if (print && loom_ir_print(g, stdout, &err)) goto fail;
    if (show_plan) {
        if (loom_exec_plan_create(g, (uint32_t)streams, &plan, &err)) goto fail;
        plan_json(plan, plan_buf, sizeof plan_buf);
    }
    if (stats) print_stats(g, pm, json, show_plan ? plan_buf : NULL);
    if (show_plan && json && !stats) printf("{%s}\n", plan_buf);
    if (show_plan && !json) print_plan(plan);
    if (out && !json)
        fprintf(stderr, "loom compile: wrote %s (%u nodes)\n", out, loom_ir_node_count(g));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "loom compile: %s: %s\n", model, err.msg);
done:
    loom_exec_plan_destroy(plan);
    loom_pass_manager_destroy(pm);
    loom_ir_graph_destroy(g);
    loom_gguf_close(f);
    return rc;
}
