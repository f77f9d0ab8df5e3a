/* print.c: the text form printer (syntax in ir.h; parse.c reads it back).
 *
 * Stable output: declarations in declaration order (symbols, metadata, inputs, weights, state),
 * then the nodes in program order with results numbered %0, %1, ... in that order, then the
 * outputs. Floats print as the shortest text that reads back to the same bits and always look
 * like floats ("1.0", "1e-06"), so print(parse(print(g))) == print(g) byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

/* Writes s as a C-like quoted string. */
static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* A declaration name after its sigil, quoted when it has characters outside [A-Za-z0-9_.-]. */
static void put_name(FILE *f, char sigil, const char *name) {
    fputc(sigil, f);
    if (ir_name_is_plain(name)) fputs(name, f);
    else put_quoted(f, name);
}

static void put_type(FILE *f, const loom_ir_graph *g, const loom_ir_type *t) {
    char buf[128];
    fputs(loom_ir_type_format(g, t, buf, sizeof buf), f);
}

static void put_value(FILE *f, const loom_ir_graph *g, const uint32_t *num, loom_ir_value_id v) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!val || val->kind == LOOM_IR_VALUE_DEAD) fprintf(f, "%%?%u", v);
    else if (val->kind == LOOM_IR_VALUE_INPUT) put_name(f, '%', val->name);
    else if (val->kind != LOOM_IR_VALUE_NODE) put_name(f, '@', val->name);
    else if (num[v] != UINT32_MAX) fprintf(f, "%%%u", num[v]);
    else fprintf(f, "%%?%u", v);
}

static void put_dims(FILE *f, const loom_ir_graph *g, const int64_t *d, uint32_t n) {
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++) {
        char db[64];
        if (i) fputc(',', f);
        fputs(ir_dim_format(g, d[i], db, sizeof db), f);
    }
    fputc(']', f);
}

static void put_attr(FILE *f, const loom_ir_graph *g, const loom_ir_attr *a) {
    char buf[64];
    fprintf(f, "%s=", loom_ir_attr_info_get((loom_ir_attr_id)a->id)->name);
    switch ((loom_ir_attr_kind)a->kind) {
    case LOOM_IR_ATTR_KIND_FLOAT:
        ir_format_float(a->u.f, true, buf, sizeof buf);
        fputs(buf, f);
        break;
    case LOOM_IR_ATTR_KIND_INTS:
        fputc('[', f);
        for (uint32_t i = 0; i < a->count; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)a->u.ints[i]);
        fputc(']', f);
        break;
    case LOOM_IR_ATTR_KIND_SHAPE:
        put_dims(f, g, a->u.ints, a->count);
        break;
    case LOOM_IR_ATTR_KIND_STRING:
        put_quoted(f, a->u.s);
        break;
    case LOOM_IR_ATTR_KIND_ENUM:
        if (loom_ir_attr_enum_name((loom_ir_attr_id)a->id, a->u.i, buf, sizeof buf)) fputs(buf, f);
        else fprintf(f, "%lld", (long long)a->u.i);
        break;
    case LOOM_IR_ATTR_KIND_DTYPE: {
        const char *n = loom_ir_dtype_name((loom_ir_dtype)a->u.i);
        if (n) fputs(n, f);
        else fprintf(f, "%lld", (long long)a->u.i);
        break;
    }
    default:
        fprintf(f, "%lld", (long long)a->u.i);
    }
}

uint32_t ir_printed_attr_count(const loom_ir_node *n) {
    uint32_t k = 0;
    for (uint32_t a = 0; a < n->n_attrs; a++) k += !loom_ir_attr_elided(&n->attrs[a]);
    return k;
}

void ir_print_attrs(FILE *f, const loom_ir_graph *g, const loom_ir_node *n) {
    fputc('{', f);
    for (uint32_t a = 0, k = 0; a < n->n_attrs; a++) {
        if (loom_ir_attr_elided(&n->attrs[a])) continue;
        if (k++) fputs(", ", f);
        put_attr(f, g, &n->attrs[a]);
    }
    fputc('}', f);
}

static void put_node(FILE *f, const loom_ir_graph *g, const uint32_t *num, const loom_ir_node *n) {
    for (uint32_t o = 0; o < n->n_out; o++) {
        if (o) fputs(", ", f);
        put_value(f, g, num, n->out[o]);
    }
    fprintf(f, " = %s(", loom_ir_op_info_get(n->op)->name);
    for (uint32_t i = 0; i < n->n_in; i++) {
        if (i) fputs(", ", f);
        put_value(f, g, num, n->in[i]);
    }
    fputc(')', f);
    if (ir_printed_attr_count(n)) {
        fputc(' ', f);
        ir_print_attrs(f, g, n);
    }
    fputs(" : ", f);
    for (uint32_t o = 0; o < n->n_out; o++) {
        if (o) fputs(", ", f);
        put_type(f, g, &loom_ir_value_get(g, n->out[o])->type);
    }
    fputc('\n', f);
}

loom_status loom_ir_print(const loom_ir_graph *g, FILE *f, loom_error *err) {
    uint32_t *num = ir_result_numbers(g);
    if (!num) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: print: out of memory");
    char buf[64];
    for (uint32_t i = 0; i < g->n_symbols; i++)
        fprintf(f, "symbol %s max=%lld\n", g->symbols[i].name, (long long)g->symbols[i].max);
    for (uint32_t i = 0; i < g->n_meta; i++) {
        const loom_ir_meta *m = &g->meta[i];
        fprintf(f, "meta %s = ", m->key);
        if (m->kind == LOOM_IR_META_INT) {
            fprintf(f, "%lld", (long long)m->i);
        } else if (m->kind == LOOM_IR_META_FLOAT) {
            ir_format_float(m->f, false, buf, sizeof buf);
            fputs(buf, f);
        } else {
            put_quoted(f, m->s);
        }
        fputc('\n', f);
    }
    const id_list *lists[3] = {&g->inputs, &g->weights, &g->states};
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < lists[k]->n; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, lists[k]->v[i]);
            fputs(k == 0 ? "input " : k == 1 ? "weight " : "state ", f);
            put_name(f, k == 0 ? '%' : '@', v->name);
            fputs(" : ", f);
            put_type(f, g, &v->type);
            if (k == 1)
                fprintf(f, " offset=%llu size=%llu", (unsigned long long)v->offset,
                        (unsigned long long)v->size);
            fputc('\n', f);
        }
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE; id = ir_node_mut(g, id)->next)
        put_node(f, g, num, ir_node_mut(g, id));
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        fprintf(f, "output %s = ", g->outputs[i].name);
        put_value(f, g, num, g->outputs[i].value);
        fputc('\n', f);
    }
    free(num);
    if (ferror(f)) return loom_error_set(err, LOOM_ERR_IO, "ir: print: write error");
    return LOOM_OK;
}

char *loom_ir_print_string(const loom_ir_graph *g, loom_error *err) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: print: out of memory");
        return NULL;
    }
    loom_status st = loom_ir_print(g, f, err);
    if (fclose(f) != 0 && !st) st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: print: "
                                                    "out of memory");
    if (st) {
        free(buf);
        return NULL;
    }
    return buf;
}
