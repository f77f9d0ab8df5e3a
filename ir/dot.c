/* dot.c: Graphviz rendering of a graph (`loom dump x --dot | dot -Tsvg > x.svg`).
 *
 * Shapes: inputs are blue inverted houses, weights grey notes, state (KV cache) yellow
 * cylinders, outputs green houses; primitive ops are white rounded boxes, fused ops orange,
 * filled, bold and double-bordered so a fused layer stands out. Edges run from a definition to
 * each use, labelled with the result slot for multi-result nodes. Labels use the text form's
 * names (%N numbering, @weight) so the picture and `loom dump x` agree.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

/* Writes s escaped for a double-quoted DOT string; newlines become left-justified breaks. */
static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if (*s == '\n') fputs("\\l", f);
        else if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

static void value_name(const loom_ir_graph *g, const uint32_t *num, loom_ir_value_id v, char *buf,
                       size_t len) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (val->kind == LOOM_IR_VALUE_NODE) snprintf(buf, len, "%%%u", num[v]);
    else if (val->kind == LOOM_IR_VALUE_INPUT) snprintf(buf, len, "%%%s", val->name);
    else snprintf(buf, len, "@%s", val->name);
}

/* The DOT id of the vertex that produces value v. */
static void source_id(const loom_ir_graph *g, loom_ir_value_id v, char *buf, size_t len) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (val->kind == LOOM_IR_VALUE_NODE) snprintf(buf, len, "n%u", val->def);
    else snprintf(buf, len, "v%u", v);
}

static loom_status node_label(const loom_ir_graph *g, const uint32_t *num, const loom_ir_node *n,
                              char **out) {
    char *buf = NULL, tb[128];
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return LOOM_ERR_OUT_OF_MEMORY;
    for (uint32_t o = 0; o < n->n_out; o++) {
        value_name(g, num, n->out[o], tb, sizeof tb);
        fprintf(m, "%s%s", o ? ", " : "", tb);
    }
    fprintf(m, " = %s\n", loom_ir_op_info_get(n->op)->name);
    if (ir_printed_attr_count(n)) {
        ir_print_attrs(m, g, n);
        fputc('\n', m);
    }
    for (uint32_t o = 0; o < n->n_out; o++)
        fprintf(m, "%s%s", o ? ", " : "",
                loom_ir_type_format(g, &loom_ir_value_get(g, n->out[o])->type, tb, sizeof tb));
    fputc('\n', m);
    if (fclose(m) != 0) {
        free(buf);
        return LOOM_ERR_OUT_OF_MEMORY;
    }
    *out = buf;
    return LOOM_OK;
}

loom_status loom_ir_print_dot(const loom_ir_graph *g, FILE *f, loom_error *err) {
    uint32_t *num = ir_result_numbers(g);
    if (!num) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: dot: out of memory");
    char tb[128], src[32];
    fputs("digraph loom {\n"
          "  rankdir=TB;\n"
          "  node [fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n",
          f);
    static const struct { const char *attrs; } style[3] = {
        {"shape=invhouse, style=filled, fillcolor=\"#cfe2ff\""},
        {"shape=note, style=filled, fillcolor=\"#e9ecef\""},
        {"shape=cylinder, style=filled, fillcolor=\"#fff3bf\""},
    };
    const id_list *lists[3] = {&g->inputs, &g->weights, &g->states};
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < lists[k]->n; i++) {
            loom_ir_value_id v = lists[k]->v[i];
            const loom_ir_value *val = loom_ir_value_get(g, v);
            fprintf(f, "  v%u [%s, label=\"%s", v, style[k].attrs, k == 0 ? "%" : "@");
            put_escaped(f, val->name);
            fputs("\\n", f);
            put_escaped(f, loom_ir_type_format(g, &val->type, tb, sizeof tb));
            fputs("\"];\n", f);
        }
    loom_status st = LOOM_OK;
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE && !st;
         id = ir_node_mut(g, id)->next) {
        const loom_ir_node *n = ir_node_mut(g, id);
        char *label;
        if ((st = node_label(g, num, n, &label))) break;
        bool fused = (loom_ir_op_info_get(n->op)->flags & LOOM_IR_OPF_FUSED) ||
                     loom_ir_prenorm_slot(n->op, n->n_in) != LOOM_IR_NO_SLOT;
        fprintf(f, "  n%u [shape=box, %s, label=\"", id,
                fused ? "style=\"filled,bold\", fillcolor=\"#ffa94d\", peripheries=2, penwidth=2"
                      : "style=\"rounded,filled\", fillcolor=white");
        put_escaped(f, label);
        fputs("\"];\n", f);
        free(label);
        for (uint32_t i = 0; i < n->n_in; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, n->in[i]);
            source_id(g, n->in[i], src, sizeof src);
            if (v->kind == LOOM_IR_VALUE_NODE && loom_ir_node_get(g, v->def)->n_out > 1)
                fprintf(f, "  %s -> n%u [label=\"%u\"];\n", src, id, v->def_slot);
            else
                fprintf(f, "  %s -> n%u;\n", src, id);
        }
    }
    for (uint32_t i = 0; i < g->n_outputs && !st; i++) {
        fprintf(f, "  o%u [shape=house, style=filled, fillcolor=\"#d3f9d8\", label=\"", i);
        put_escaped(f, g->outputs[i].name);
        fputs("\"];\n", f);
        source_id(g, g->outputs[i].value, src, sizeof src);
        fprintf(f, "  %s -> o%u;\n", src, i);
    }
    fputs("}\n", f);
    free(num);
    if (st) return loom_error_set(err, st, "ir: dot: out of memory");
    if (ferror(f)) return loom_error_set(err, LOOM_ERR_IO, "ir: dot: write error");
    return LOOM_OK;
}
