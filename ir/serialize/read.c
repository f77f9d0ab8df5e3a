/* read.c: protobuf bytes -> graph (loom_ir_deserialize) and files -> graph (loom_ir_load).
 *
 * Nothing in the message is trusted. The order of checks:
 *  1. unpack under an allocation budget of BUDGET_PER_BYTE * len + BUDGET_BASE bytes, so a
 *     hostile count cannot make protobuf-c (or us: every array below is sized by a count of
 *     message elements, each of which costs at least one byte) allocate more than the message
 *     size justifies;
 *  2. the format version, then the trailing checksum (truncation and corruption);
 *  3. symbols, metadata, declarations (inputs, weights, state) through the IR's declaration API;
 *  4. every node's op, arity and value ids; each node-result value defined by exactly one node;
 *  5. a topological order of the nodes (an iterative DFS that keeps the file order where it is
 *     already valid; a back edge is a cycle);
 *  6. each node rebuilt with loom_ir_build, which re-infers its types and refuses operand
 *     mismatches; the stored result types must equal the inferred ones;
 *  7. outputs, then loom_ir_verify over the whole graph.
 * Every failure frees everything and names the element ("node 12 (matmul): ...").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir/serialize/loom_graph.pb-c.h"
#include "ir/serialize/serialize.h"
#include "ir/serialize/serialize_impl.h"

/* ---- bounded allocation for protobuf-c ---- */

/* A submessage costs at least 2 bytes on the wire (tag + length) and unpacks into at most 104
 * bytes (the largest, a Value struct of 96 bytes, plus its pointer); a packed element or string
 * byte into at most 8; an unknown field (>= 2 bytes) into 24 + its bytes. So no message needs
 * more than ~52 bytes per input byte, and this budget never refuses a valid one (the test
 * refusal::dense_counts_within_budget unpacks the densest kind). */
enum { BUDGET_PER_BYTE = 128, BUDGET_BASE = 64 * 1024 };

typedef struct budget {
    size_t left;
} budget;

static void *budget_alloc(void *data, size_t size) {
    budget *b = data;
    if (size > b->left) return NULL;
    b->left -= size;
    return malloc(size ? size : 1);
}

static void budget_free(void *data, void *ptr) {
    (void)data;
    free(ptr);
}

/* ---- the reader ---- */

typedef struct reader {
    const Loompb__Graph *m;
    loom_ir_graph *g;
    loom_error *e;
    uint32_t *map;        /* file value id -> graph value id (NO_VALUE until made) */
    uint32_t *defined_by; /* file value id -> file node index defining it (UINT32_MAX: none) */
    uint32_t *order;      /* node indices in build order */
} reader;

static const char *op_label(const Loompb__Node *n) { return n->op ? n->op : "(no op)"; }

/* Reads a stored type; rank and dims are checked here, dtype in check_values. */
static loom_status read_type(reader *r, size_t vi, const Loompb__Value *v, loom_ir_type *t) {
    if (v->n_dims > LOOM_IR_MAX_DIMS)
        return loom_error_set(r->e, LOOM_ERR_FORMAT, "value %zu: %zu dims (at most %d)", vi,
                              v->n_dims, LOOM_IR_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->dtype = (loom_ir_dtype)v->dtype;
    t->rank = (uint32_t)v->n_dims;
    uint32_t n_sym = loom_ir_symbol_count(r->g);
    for (size_t k = 0; k < v->n_dims; k++) {
        int64_t d = v->dims[k];
        if (d == 0 || (d < 0 && loom_ir_dim_sym_index(d) >= n_sym))
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "value %zu: dim %zu is %" PRId64 " (neither an extent >= 1 nor "
                                  "one of the %u symbols)", vi, k, d, n_sym);
        t->dims[k] = d;
    }
    return LOOM_OK;
}

static loom_status read_symbols(reader *r) {
    for (size_t i = 0; i < r->m->n_symbols; i++) {
        const Loompb__Symbol *s = r->m->symbols[i];
        if (!s->name) return loom_error_set(r->e, LOOM_ERR_FORMAT, "symbol %zu: no name", i);
        int64_t dim;
        loom_status st = loom_ir_add_symbol(r->g, s->name, s->max, &dim, r->e);
        if (st) return loom_error_prefix(r->e, "symbol %zu: ", i);
    }
    return LOOM_OK;
}

/* Sets a metadata entry, refusing a key that is already set (a file must not say it twice). */
static loom_status meta_once(reader *r, const char *key, const char *where) {
    if (!key) return loom_error_set(r->e, LOOM_ERR_FORMAT, "%s: no key", where);
    if (loom_ir_meta_get(r->g, key))
        return loom_error_set(r->e, LOOM_ERR_FORMAT, "%s: metadata key '%s' given twice", where,
                              key);
    return LOOM_OK;
}

static loom_status read_metadata(reader *r) {
    const Loompb__Graph *m = r->m;
    loom_status st = LOOM_OK;
    if (m->source) {
        const Loompb__GgufIdentity *s = m->source;
        if (s->file_name) st = loom_ir_meta_set_string(r->g, SER_KEY_SOURCE_FILE, s->file_name, r->e);
        if (!st && s->has_file_size)
            st = loom_ir_meta_set_int(r->g, SER_KEY_SOURCE_SIZE, s->file_size, r->e);
        if (!st && s->checksum)
            st = loom_ir_meta_set_string(r->g, SER_KEY_SOURCE_CHECKSUM, s->checksum, r->e);
        if (st) return loom_error_prefix(r->e, "source: ");
    }
    for (size_t i = 0; i < m->n_metadata; i++) {
        const Loompb__Meta *e = m->metadata[i];
        char where[48];
        snprintf(where, sizeof where, "metadata %zu", i);
        if ((st = meta_once(r, e->key, where))) return st;
        switch (e->value_case) {
        case LOOMPB__META__VALUE_I: st = loom_ir_meta_set_int(r->g, e->key, e->i, r->e); break;
        case LOOMPB__META__VALUE_F: st = loom_ir_meta_set_float(r->g, e->key, e->f, r->e); break;
        case LOOMPB__META__VALUE_S: st = loom_ir_meta_set_string(r->g, e->key, e->s, r->e); break;
        default:
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "metadata %zu ('%s'): no value", i, e->key);
        }
        if (st) return loom_error_prefix(r->e, "metadata %zu: ", i);
    }
    if (m->n_passes > 0) {
        if ((st = meta_once(r, SER_KEY_PASSES, "passes"))) return st;
        size_t len = 0;
        for (size_t i = 0; i < m->n_passes; i++) len += strlen(m->passes[i]) + 1;
        char *joined = malloc(len); /* len >= 1: bounded by the message size */
        if (!joined) return loom_error_set(r->e, LOOM_ERR_OUT_OF_MEMORY, "passes: out of memory");
        char *p = joined;
        for (size_t i = 0; i < m->n_passes; i++) {
            size_t n = strlen(m->passes[i]);
            memcpy(p, m->passes[i], n);
            p += n;
            *p++ = i + 1 < m->n_passes ? ',' : '\0';
        }
        st = loom_ir_meta_set_string(r->g, SER_KEY_PASSES, joined, r->e);
        free(joined);
        if (st) return loom_error_prefix(r->e, "passes: ");
    }
    return LOOM_OK;
}

/* Declarations in file order; node results only get their kind and fields checked. */
static loom_status read_values(reader *r) {
    for (size_t i = 0; i < r->m->n_values; i++) {
        const Loompb__Value *v = r->m->values[i];
        if (!loom_ir_dtype_name((loom_ir_dtype)v->dtype))
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "value %zu: unknown dtype id %u", i,
                                  v->dtype);
        loom_ir_type t;
        loom_status st = read_type(r, i, v, &t);
        if (st) return st;
        bool weight = v->kind == LOOMPB__VALUE_KIND__VALUE_WEIGHT;
        if (!weight && (v->has_offset || v->has_size))
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "value %zu: offset/size given for a value that is not a weight",
                                  i);
        loom_ir_value_id id = LOOM_IR_NO_VALUE;
        switch (v->kind) {
        case LOOMPB__VALUE_KIND__VALUE_NODE:
            if (v->name)
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "value %zu: a node result has a name ('%s')", i, v->name);
            continue;
        case LOOMPB__VALUE_KIND__VALUE_INPUT:
        case LOOMPB__VALUE_KIND__VALUE_WEIGHT:
        case LOOMPB__VALUE_KIND__VALUE_STATE:
            if (!v->name)
                return loom_error_set(r->e, LOOM_ERR_FORMAT, "value %zu: declaration without a name",
                                      i);
            if (v->kind == LOOMPB__VALUE_KIND__VALUE_INPUT)
                st = loom_ir_add_input(r->g, v->name, &t, &id, r->e);
            else if (weight)
                st = loom_ir_add_weight(r->g, v->name, &t, v->offset, v->size, &id, r->e);
            else
                st = loom_ir_add_state(r->g, v->name, &t, &id, r->e);
            if (st) return loom_error_prefix(r->e, "value %zu: ", i);
            r->map[i] = id;
            break;
        default:
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "value %zu: unknown kind %d", i,
                                  (int)v->kind);
        }
    }
    return LOOM_OK;
}

/* Ops, arities, ids; fills defined_by. */
static loom_status check_nodes(reader *r) {
    const Loompb__Graph *m = r->m;
    for (size_t j = 0; j < m->n_nodes; j++) {
        const Loompb__Node *n = m->nodes[j];
        loom_ir_op op;
        if (!n->op) return loom_error_set(r->e, LOOM_ERR_FORMAT, "node %zu: no op", j);
        if (!loom_ir_op_from_name(n->op, &op))
            return loom_error_set(r->e, LOOM_ERR_UNSUPPORTED,
                                  "node %zu: unknown op '%s' (not in this build's op table)", j,
                                  n->op);
        if (n->n_inputs > LOOM_IR_MAX_INPUTS || n->n_outputs == 0 ||
            n->n_outputs > LOOM_IR_MAX_OUTPUTS || n->n_attrs > LOOM_IR_MAX_ATTRS)
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "node %zu (%s): %zu operands, %zu results, %zu attributes "
                                  "(limits %d, 1..%d, %d)", j, n->op, n->n_inputs, n->n_outputs,
                                  n->n_attrs, LOOM_IR_MAX_INPUTS, LOOM_IR_MAX_OUTPUTS,
                                  LOOM_IR_MAX_ATTRS);
        for (size_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= m->n_values)
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "node %zu (%s): operand %zu is value %u, which does not "
                                      "exist (%zu values): dangling id", j, n->op, k, n->inputs[k],
                                      m->n_values);
        for (size_t k = 0; k < n->n_outputs; k++) {
            uint32_t v = n->outputs[k];
            if (v >= m->n_values)
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "node %zu (%s): result %zu is value %u, which does not "
                                      "exist (%zu values): dangling id", j, n->op, k, v,
                                      m->n_values);
            if (m->values[v]->kind != LOOMPB__VALUE_KIND__VALUE_NODE)
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "node %zu (%s): result %zu is value %u, a declaration "
                                      "('%s'), not a node result", j, n->op, k, v,
                                      m->values[v]->name ? m->values[v]->name : "");
            if (r->defined_by[v] != UINT32_MAX)
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "value %u is defined twice (by nodes %u and %zu)", v,
                                      r->defined_by[v], j);
            r->defined_by[v] = (uint32_t)j;
        }
    }
    for (size_t i = 0; i < m->n_values; i++)
        if (m->values[i]->kind == LOOMPB__VALUE_KIND__VALUE_NODE && r->defined_by[i] == UINT32_MAX)
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "value %zu is a node result, but no node defines it", i);
    return LOOM_OK;
}

/* Topological order of the nodes into r->order: a node after the definers of its operands,
 * otherwise file order. Iterative DFS (a hostile chain cannot overflow the stack). */
static loom_status sort_nodes(reader *r) {
    const Loompb__Graph *m = r->m;
    size_t n = m->n_nodes;
    uint8_t *state = calloc(n ? n : 1, 1); /* 0 new, 1 on the stack, 2 placed */
    struct frame { uint32_t node, slot; } *stack = malloc((n ? n : 1) * sizeof *stack);
    if (!state || !stack) {
        free(state);
        free(stack);
        return loom_error_set(r->e, LOOM_ERR_OUT_OF_MEMORY, "out of memory sorting %zu nodes", n);
    }
    size_t placed = 0;
    loom_status st = LOOM_OK;
    for (size_t root = 0; root < n && !st; root++) {
        if (state[root]) continue;
        size_t sp = 0;
        stack[sp++] = (struct frame){(uint32_t)root, 0};
        state[root] = 1;
        while (sp > 0) {
            struct frame *f = &stack[sp - 1];
            const Loompb__Node *node = m->nodes[f->node];
            if (f->slot < node->n_inputs) {
                uint32_t v = node->inputs[f->slot++];
                uint32_t d = r->defined_by[v];
                if (d == UINT32_MAX || state[d] == 2) continue;
                if (state[d] == 1) {
                    if (d == f->node)
                        st = loom_error_set(r->e, LOOM_ERR_VERIFY,
                                            "cycle: node %u (%s) uses its own result (value %u)",
                                            f->node, op_label(node), v);
                    else
                        st = loom_error_set(r->e, LOOM_ERR_VERIFY,
                                            "cycle: node %u (%s) uses value %u of node %u (%s), "
                                            "which depends on node %u", f->node, op_label(node), v,
                                            d, op_label(m->nodes[d]), f->node);
                    break;
                }
                state[d] = 1;
                stack[sp++] = (struct frame){d, 0};
            } else {
                state[f->node] = 2;
                r->order[placed++] = f->node;
                sp--;
            }
        }
    }
    free(state);
    free(stack);
    return st;
}

/* Converts the attributes of file node j to IR attributes (lists point into the message). */
static loom_status read_attrs(reader *r, size_t j, const Loompb__Node *n,
                              loom_ir_attr attrs[LOOM_IR_MAX_ATTRS]) {
    uint32_t seen = 0;
    for (size_t k = 0; k < n->n_attrs; k++) {
        const Loompb__Attr *a = n->attrs[k];
        loom_ir_attr_id id;
        if (!a->name || !loom_ir_attr_from_name(a->name, &id))
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "node %zu (%s): unknown attribute '%s'",
                                  j, n->op, a->name ? a->name : "");
        if (seen & (1u << id))
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "node %zu (%s): attribute %s given twice",
                                  j, n->op, a->name);
        seen |= 1u << id;
        const loom_ir_attr_info *info = loom_ir_attr_info_get(id);
        static const Loompb__Attr__ValueCase want[] = {
            [LOOM_IR_ATTR_KIND_INT] = LOOMPB__ATTR__VALUE_I,
            [LOOM_IR_ATTR_KIND_FLOAT] = LOOMPB__ATTR__VALUE_F,
            [LOOM_IR_ATTR_KIND_INTS] = LOOMPB__ATTR__VALUE_INTS,
            [LOOM_IR_ATTR_KIND_SHAPE] = LOOMPB__ATTR__VALUE_INTS,
            [LOOM_IR_ATTR_KIND_STRING] = LOOMPB__ATTR__VALUE_S,
            [LOOM_IR_ATTR_KIND_ENUM] = LOOMPB__ATTR__VALUE_S,
            [LOOM_IR_ATTR_KIND_DTYPE] = LOOMPB__ATTR__VALUE_S,
        };
        if ((unsigned)info->kind >= sizeof want / sizeof want[0] || a->value_case != want[info->kind])
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "node %zu (%s): attribute %s holds the wrong kind of value", j,
                                  n->op, a->name);
        switch (info->kind) {
        case LOOM_IR_ATTR_KIND_INT: attrs[k] = loom_ir_attr_int(id, a->i); break;
        case LOOM_IR_ATTR_KIND_FLOAT: attrs[k] = loom_ir_attr_float(id, a->f); break;
        case LOOM_IR_ATTR_KIND_INTS:
        case LOOM_IR_ATTR_KIND_SHAPE:
            if (!a->ints || a->ints->n_v > UINT32_MAX)
                return loom_error_set(r->e, LOOM_ERR_FORMAT, "node %zu (%s): attribute %s: bad list",
                                      j, n->op, a->name);
            if (info->kind == LOOM_IR_ATTR_KIND_SHAPE) {
                uint32_t n_sym = loom_ir_symbol_count(r->g);
                if (a->ints->n_v < 1 || a->ints->n_v > LOOM_IR_MAX_DIMS)
                    return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                          "node %zu (%s): attribute %s has %zu dims (1..%d)", j,
                                          n->op, a->name, a->ints->n_v, LOOM_IR_MAX_DIMS);
                for (size_t d = 0; d < a->ints->n_v; d++) {
                    int64_t x = a->ints->v[d];
                    if (x == 0 || (x < 0 && loom_ir_dim_sym_index(x) >= n_sym))
                        return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                              "node %zu (%s): attribute %s: dim %zu is %" PRId64
                                              " (neither an extent nor a symbol)", j, n->op,
                                              a->name, d, x);
                }
            }
            attrs[k] = loom_ir_attr_ints(id, a->ints->v, (uint32_t)a->ints->n_v);
            break;
        case LOOM_IR_ATTR_KIND_STRING: attrs[k] = loom_ir_attr_string(id, a->s); break;
        case LOOM_IR_ATTR_KIND_ENUM: {
            int64_t idx;
            if (!loom_ir_attr_enum_value(id, a->s, strlen(a->s), &idx))
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "node %zu (%s): attribute %s: unknown value '%s' (one of %s)",
                                      j, n->op, a->name, a->s, info->enum_names);
            attrs[k] = loom_ir_attr_int(id, idx);
            break;
        }
        case LOOM_IR_ATTR_KIND_DTYPE: {
            loom_ir_dtype dt;
            if (!loom_ir_dtype_from_name(a->s, &dt))
                return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                      "node %zu (%s): attribute %s: unknown dtype '%s'", j, n->op,
                                      a->name, a->s);
            attrs[k] = loom_ir_attr_int(id, dt);
            break;
        }
        default:
            return loom_error_set(r->e, LOOM_ERR_FORMAT, "node %zu (%s): attribute %s: bad kind",
                                  j, n->op, a->name);
        }
    }
    return LOOM_OK;
}

/* Builds the nodes in r->order through the IR builder and checks the stored result types. */
static loom_status build_nodes(reader *r) {
    const Loompb__Graph *m = r->m;
    for (size_t o = 0; o < m->n_nodes; o++) {
        size_t j = r->order[o];
        const Loompb__Node *n = m->nodes[j];
        loom_ir_op op;
        LOOM_ASSERT(loom_ir_op_from_name(n->op, &op)); /* checked in check_nodes */
        loom_ir_value_id in[LOOM_IR_MAX_INPUTS];
        for (size_t k = 0; k < n->n_inputs; k++) {
            in[k] = r->map[n->inputs[k]];
            LOOM_ASSERT(in[k] != LOOM_IR_NO_VALUE); /* declared, or built earlier in order */
        }
        loom_ir_attr attrs[LOOM_IR_MAX_ATTRS];
        loom_status st = read_attrs(r, j, n, attrs);
        if (st) return st;
        loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS];
        loom_ir_node_id nid;
        st = loom_ir_build(r->g, op, in, (uint32_t)n->n_inputs, attrs, (uint32_t)n->n_attrs, out,
                           &nid, r->e);
        if (st) return loom_error_prefix(r->e, "node %zu (%s): ", j, n->op);
        const loom_ir_node *built = loom_ir_node_get(r->g, nid);
        if (built->n_out != n->n_outputs)
            return loom_error_set(r->e, LOOM_ERR_TYPE,
                                  "node %zu (%s): %zu results stored, inference gives %u", j,
                                  n->op, n->n_outputs, (unsigned)built->n_out);
        for (size_t k = 0; k < n->n_outputs; k++) {
            size_t vi = n->outputs[k];
            loom_ir_type stored;
            if ((st = read_type(r, vi, m->values[vi], &stored))) return st;
            const loom_ir_value *made = loom_ir_value_get(r->g, out[k]);
            if (!loom_ir_type_equal(&stored, &made->type)) {
                char a[96], b[96];
                loom_ir_type_format(r->g, &stored, a, sizeof a);
                loom_ir_type_format(r->g, &made->type, b, sizeof b);
                return loom_error_set(r->e, LOOM_ERR_TYPE,
                                      "node %zu (%s): result %zu (value %zu) stored as %s, but "
                                      "inference gives %s", j, n->op, k, vi, a, b);
            }
            r->map[vi] = out[k];
        }
    }
    return LOOM_OK;
}

static loom_status read_outputs(reader *r) {
    for (size_t i = 0; i < r->m->n_outputs; i++) {
        const Loompb__Output *o = r->m->outputs[i];
        if (!o->name) return loom_error_set(r->e, LOOM_ERR_FORMAT, "output %zu: no name", i);
        if (o->value >= r->m->n_values)
            return loom_error_set(r->e, LOOM_ERR_FORMAT,
                                  "output %zu ('%s'): value %u does not exist (%zu values): "
                                  "dangling id", i, o->name, o->value, r->m->n_values);
        loom_status st = loom_ir_add_output(r->g, o->name, r->map[o->value], r->e);
        if (st) return loom_error_prefix(r->e, "output %zu: ", i);
    }
    return LOOM_OK;
}

/* The message must end with the checksum field over every byte before it. */
static loom_status check_trailer(reader *r, const uint8_t *bytes, size_t len) {
    if (!r->m->has_checksum || len < LOOM_IR_CHECKSUM_TRAILER)
        return loom_error_set(r->e, LOOM_ERR_FORMAT,
                              "no trailing checksum: the message is truncated");
    const uint8_t *t = bytes + len - LOOM_IR_CHECKSUM_TRAILER;
    uint64_t stored = 0;
    for (int i = 0; i < 8; i++) stored |= (uint64_t)t[2 + i] << (8 * i);
    uint64_t have = loom_ir_message_checksum(bytes, len - LOOM_IR_CHECKSUM_TRAILER);
    if (t[0] != 0xC1 || t[1] != 0x3E || stored != r->m->checksum)
        return loom_error_set(r->e, LOOM_ERR_FORMAT,
                              "the checksum is not the last field: the message is truncated or "
                              "corrupted");
    if (stored != have)
        return loom_error_set(r->e, LOOM_ERR_FORMAT,
                              "checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64
                              "): the message is corrupted", stored, have);
    return LOOM_OK;
}

static loom_status deserialize_message(reader *r, const uint8_t *bytes, size_t len) {
    const Loompb__Graph *m = r->m;
    if (!m->has_format_version || m->format_version == 0)
        return loom_error_set(r->e, LOOM_ERR_FORMAT, "no format version: not a loom graph");
    if (m->format_version > LOOM_IR_FORMAT_VERSION)
        return loom_error_set(r->e, LOOM_ERR_UNSUPPORTED,
                              "format version %u is newer than this build reads (%d): "
                              "use a newer loom", m->format_version, LOOM_IR_FORMAT_VERSION);
    loom_status st = check_trailer(r, bytes, len);
    if (st) return st;
    if (m->n_values >= UINT32_MAX || m->n_nodes >= UINT32_MAX)
        return loom_error_set(r->e, LOOM_ERR_LIMIT, "too many values or nodes");
    size_t nv = m->n_values ? m->n_values : 1, nn = m->n_nodes ? m->n_nodes : 1;
    r->map = malloc(nv * sizeof *r->map);
    r->defined_by = malloc(nv * sizeof *r->defined_by);
    r->order = malloc(nn * sizeof *r->order);
    r->g = loom_ir_graph_create();
    if (!r->map || !r->defined_by || !r->order || !r->g)
        return loom_error_set(r->e, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < m->n_values; i++) r->map[i] = r->defined_by[i] = UINT32_MAX;
    if ((st = read_symbols(r)) || (st = read_metadata(r)) || (st = read_values(r)) ||
        (st = check_nodes(r)) || (st = sort_nodes(r)) || (st = build_nodes(r)) ||
        (st = read_outputs(r)))
        return st;
    if ((st = loom_ir_verify(r->g, r->e))) return st;
    return LOOM_OK;
}

loom_status loom_ir_deserialize(const void *bytes, size_t len, loom_ir_graph **out,
                                loom_error *err) {
    if (out) *out = NULL;
    if ((!bytes && len) || !out)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "deserialize: NULL argument");
    loom_error e = {0};
    budget b = {len > (SIZE_MAX - BUDGET_BASE) / BUDGET_PER_BYTE
                    ? SIZE_MAX
                    : len * BUDGET_PER_BYTE + BUDGET_BASE};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    Loompb__Graph *m = loompb__graph__unpack(&alloc, len, bytes);
    if (!m)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "deserialize: %zu bytes do not unpack as a loom graph message "
                              "(truncated, corrupted or not protobuf)", len);
    reader r = {.m = m, .e = &e};
    loom_status st = deserialize_message(&r, bytes, len);
    free(r.map);
    free(r.defined_by);
    free(r.order);
    loompb__graph__free_unpacked(m, &alloc);
    if (st) {
        loom_ir_graph_destroy(r.g);
        if (e.status == LOOM_OK) e.status = st;
        loom_error_prefix(&e, "deserialize: ");
        if (err) *err = e;
        return st;
    }
    *out = r.g;
    return LOOM_OK;
}

loom_status loom_ir_load(const char *path, loom_ir_graph **out, loom_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return loom_error_set(err, LOOM_ERR_IO, "load %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return loom_error_set(err, LOOM_ERR_IO, "load %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        fclose(f);
        return loom_error_set(err, LOOM_ERR_IO, "load %s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > LOOM_IR_MAX_FILE_BYTES) {
        fclose(f);
        return loom_error_set(err, LOOM_ERR_LIMIT, "load %s: %lld bytes, more than the %" PRIu64
                              " a graph file may have", path, (long long)sb.st_size,
                              LOOM_IR_MAX_FILE_BYTES);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "load %s: out of memory", path);
    }
    size_t got = fread(buf, 1, size, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != size || rerr) {
        free(buf);
        return loom_error_set(err, LOOM_ERR_IO, "load %s: read %zu of %zu bytes", path, got, size);
    }
    loom_status st = loom_ir_deserialize(buf, size, out, err);
    free(buf);
    if (st) loom_error_prefix(err, "load %s: ", path);
    return st;
}
