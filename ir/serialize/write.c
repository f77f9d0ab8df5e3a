/* write.c: graph -> protobuf bytes (loom_ir_serialize) and files (loom_ir_save).
 *
 * The message is assembled as protobuf-c structs that point into the graph where they can (names,
 * dims, int lists are the graph's own memory; protobuf-c only reads them while packing) and into
 * one writer context for what must be made (id lists, enum names, split pass names). Values get
 * canonical ids (inputs, weights, state, then node results in program order) through `map`, so
 * the bytes depend only on the graph's structure, not its internal ids or holes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/serialize/loom_graph.pb-c.h"
#include "ir/serialize/serialize.h"
#include "ir/serialize/serialize_impl.h"
#include "loom/hash.h"

uint64_t loom_ir_message_checksum(const void *bytes, size_t len) {
    return loom_fnv1a64(LOOM_FNV1A64_BASIS, bytes, len);
}

/* ---- the writer context ---- */

enum { ENUM_NAME_MAX = 32 };

/* Per node: the message, its id lists and attributes (fixed sizes from ir.h). */
typedef struct node_msg {
    Loompb__Node msg;
    uint32_t in[LOOM_IR_MAX_INPUTS];
    uint32_t out[LOOM_IR_MAX_OUTPUTS];
    Loompb__Attr attr[LOOM_IR_MAX_ATTRS];
    Loompb__Attr *attr_p[LOOM_IR_MAX_ATTRS];
    Loompb__IntList list[LOOM_IR_MAX_ATTRS];
    char enum_name[LOOM_IR_MAX_ATTRS][ENUM_NAME_MAX];
} node_msg;

typedef struct writer {
    uint32_t *map; /* graph value id -> file value id (UINT32_MAX: not written) */
    Loompb__Value *values;
    Loompb__Value **values_p;
    node_msg *nodes;
    Loompb__Node **nodes_p;
    Loompb__Symbol *symbols;
    Loompb__Symbol **symbols_p;
    Loompb__Meta *meta;
    Loompb__Meta **meta_p;
    Loompb__Output *outputs;
    Loompb__Output **outputs_p;
    char *passes_buf;   /* a copy of the `passes` string, split in place */
    char **passes_p;
} writer;

static void writer_free(writer *w) {
    free(w->map);
    free(w->values);
    free(w->values_p);
    free(w->nodes);
    free(w->nodes_p);
    free(w->symbols);
    free(w->symbols_p);
    free(w->meta);
    free(w->meta_p);
    free(w->outputs);
    free(w->outputs_p);
    free(w->passes_buf);
    free(w->passes_p);
}

/* calloc of n records of size, n may be 0 (returns a valid pointer then). */
static void *alloc_n(size_t n, size_t size) { return calloc(n ? n : 1, size); }

/* Appends value v of g as the next file value. */
static void put_value(writer *w, const loom_ir_graph *g, loom_ir_value_id v, size_t *n_values) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    Loompb__Value *m = &w->values[*n_values];
    loompb__value__init(m);
    if (val->kind != LOOM_IR_VALUE_NODE) {
        m->has_kind = true;
        m->kind = val->kind == LOOM_IR_VALUE_INPUT    ? LOOMPB__VALUE_KIND__VALUE_INPUT
                  : val->kind == LOOM_IR_VALUE_WEIGHT ? LOOMPB__VALUE_KIND__VALUE_WEIGHT
                                                      : LOOMPB__VALUE_KIND__VALUE_STATE;
        m->name = (char *)val->name;
    }
    if (val->type.dtype != LOOM_IR_F32) {
        m->has_dtype = true;
        m->dtype = (uint32_t)val->type.dtype;
    }
    m->n_dims = val->type.rank;
    m->dims = (int64_t *)val->type.dims;
    if (val->kind == LOOM_IR_VALUE_WEIGHT) {
        m->has_offset = m->has_size = true;
        m->offset = val->offset;
        m->size = val->size;
    }
    w->values_p[*n_values] = m;
    w->map[v] = (uint32_t)*n_values;
    (*n_values)++;
}

/* Fills node message nm from node n; operands must already be numbered. */
static loom_status put_node(writer *w, const loom_ir_node *n, node_msg *nm, loom_error *err) {
    const loom_ir_op_info *info = loom_ir_op_info_get(n->op);
    LOOM_ASSERT(info != NULL);
    loompb__node__init(&nm->msg);
    nm->msg.op = (char *)info->name;
    for (uint32_t i = 0; i < n->n_in; i++) {
        LOOM_ASSERT(w->map[n->in[i]] != UINT32_MAX); /* verified: defined above its use */
        nm->in[i] = w->map[n->in[i]];
    }
    nm->msg.n_inputs = n->n_in;
    nm->msg.inputs = nm->in;
    for (uint32_t i = 0; i < n->n_out; i++) nm->out[i] = w->map[n->out[i]];
    nm->msg.n_outputs = n->n_out;
    nm->msg.outputs = nm->out;
    uint32_t n_attrs = 0; /* written: elided attributes (loom_ir_attr_elided) are left out */
    for (uint32_t j = 0; j < n->n_attrs; j++) {
        const loom_ir_attr *a = &n->attrs[j];
        const loom_ir_attr_info *ai = loom_ir_attr_info_get((loom_ir_attr_id)a->id);
        LOOM_ASSERT(ai != NULL);
        if (loom_ir_attr_elided(a)) continue;
        uint32_t i = n_attrs++;
        Loompb__Attr *m = &nm->attr[i];
        loompb__attr__init(m);
        m->name = (char *)ai->name;
        switch ((loom_ir_attr_kind)a->kind) {
        case LOOM_IR_ATTR_KIND_INT:
            m->value_case = LOOMPB__ATTR__VALUE_I;
            m->i = a->u.i;
            break;
        case LOOM_IR_ATTR_KIND_FLOAT:
            m->value_case = LOOMPB__ATTR__VALUE_F;
            m->f = a->u.f;
            break;
        case LOOM_IR_ATTR_KIND_INTS:
        case LOOM_IR_ATTR_KIND_SHAPE:
            loompb__int_list__init(&nm->list[i]);
            nm->list[i].n_v = a->count;
            nm->list[i].v = (int64_t *)a->u.ints;
            m->value_case = LOOMPB__ATTR__VALUE_INTS;
            m->ints = &nm->list[i];
            break;
        case LOOM_IR_ATTR_KIND_STRING:
            m->value_case = LOOMPB__ATTR__VALUE_S;
            m->s = (char *)a->u.s;
            break;
        case LOOM_IR_ATTR_KIND_ENUM:
            if (!loom_ir_attr_enum_name((loom_ir_attr_id)a->id, a->u.i, nm->enum_name[i],
                                        ENUM_NAME_MAX))
                return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                      "serialize: node %s: attribute %s has no value %lld",
                                      info->name, ai->name, (long long)a->u.i);
            m->value_case = LOOMPB__ATTR__VALUE_S;
            m->s = nm->enum_name[i];
            break;
        case LOOM_IR_ATTR_KIND_DTYPE: {
            const char *dn = loom_ir_dtype_name((loom_ir_dtype)a->u.i);
            if (!dn)
                return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                      "serialize: node %s: attribute %s holds dtype id %lld",
                                      info->name, ai->name, (long long)a->u.i);
            m->value_case = LOOMPB__ATTR__VALUE_S;
            m->s = (char *)dn;
            break;
        }
        default:
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "serialize: node %s: attribute %s of unknown kind %u",
                                  info->name, ai->name, (unsigned)a->kind);
        }
        nm->attr_p[i] = m;
    }
    nm->msg.n_attrs = n_attrs;
    nm->msg.attrs = nm->attr_p;
    return LOOM_OK;
}

/* Splits the metadata into Graph.source / Graph.passes and the generic list. */
static loom_status put_metadata(writer *w, const loom_ir_graph *g, Loompb__Graph *m,
                                Loompb__GgufIdentity *src, loom_error *err) {
    uint32_t n_meta = loom_ir_meta_count(g);
    w->meta = alloc_n(n_meta, sizeof *w->meta);
    w->meta_p = alloc_n(n_meta, sizeof *w->meta_p);
    if (!w->meta || !w->meta_p)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "serialize: out of memory");
    bool has_source = false;
    for (uint32_t i = 0; i < n_meta; i++) {
        const loom_ir_meta *e = loom_ir_meta_at(g, i);
        if (e->kind == LOOM_IR_META_STRING && !strcmp(e->key, SER_KEY_SOURCE_FILE)) {
            src->file_name = (char *)e->s;
            has_source = true;
        } else if (e->kind == LOOM_IR_META_INT && !strcmp(e->key, SER_KEY_SOURCE_SIZE)) {
            src->has_file_size = true;
            src->file_size = e->i;
            has_source = true;
        } else if (e->kind == LOOM_IR_META_STRING && !strcmp(e->key, SER_KEY_SOURCE_CHECKSUM)) {
            src->checksum = (char *)e->s;
            has_source = true;
        } else if (e->kind == LOOM_IR_META_STRING && !strcmp(e->key, SER_KEY_PASSES) && e->s[0]) {
            size_t len = strlen(e->s), n = 1;
            for (size_t k = 0; k < len; k++) n += e->s[k] == ',';
            w->passes_buf = malloc(len + 1);
            w->passes_p = calloc(n, sizeof *w->passes_p);
            if (!w->passes_buf || !w->passes_p)
                return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "serialize: out of memory");
            memcpy(w->passes_buf, e->s, len + 1);
            char *p = w->passes_buf;
            for (size_t k = 0; k < n; k++) {
                w->passes_p[k] = p;
                char *comma = strchr(p, ',');
                if (comma) {
                    *comma = '\0';
                    p = comma + 1;
                }
            }
            m->n_passes = n;
            m->passes = w->passes_p;
        } else {
            Loompb__Meta *mm = &w->meta[m->n_metadata];
            loompb__meta__init(mm);
            mm->key = (char *)e->key;
            switch (e->kind) {
            case LOOM_IR_META_INT:
                mm->value_case = LOOMPB__META__VALUE_I;
                mm->i = e->i;
                break;
            case LOOM_IR_META_FLOAT:
                mm->value_case = LOOMPB__META__VALUE_F;
                mm->f = e->f;
                break;
            case LOOM_IR_META_STRING:
                mm->value_case = LOOMPB__META__VALUE_S;
                mm->s = (char *)e->s;
                break;
            }
            w->meta_p[m->n_metadata++] = mm;
        }
    }
    m->metadata = w->meta_p;
    if (has_source) m->source = src;
    return LOOM_OK;
}

loom_status loom_ir_serialize(const loom_ir_graph *g, uint8_t **bytes, size_t *len,
                              loom_error *err) {
    if (bytes) *bytes = NULL;
    if (len) *len = 0;
    if (!g || !bytes || !len)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "serialize: NULL argument");
    loom_status st = loom_ir_verify(g, err);
    if (st) {
        loom_error_prefix(err, "serialize: refusing an invalid graph: ");
        return st;
    }

    /* Count what gets written. */
    uint32_t n_in = loom_ir_input_count(g), n_w = loom_ir_weight_count(g);
    uint32_t n_st = loom_ir_state_count(g), n_nodes = loom_ir_node_count(g);
    size_t total = (size_t)n_in + n_w + n_st;
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        total += loom_ir_node_get(g, id)->n_out;
    uint32_t n_sym = loom_ir_symbol_count(g), n_out = loom_ir_output_count(g);

    writer w = {0};
    uint32_t bound = loom_ir_value_bound(g);
    w.map = malloc((bound ? bound : 1) * sizeof *w.map);
    w.values = alloc_n(total, sizeof *w.values);
    w.values_p = alloc_n(total, sizeof *w.values_p);
    w.nodes = alloc_n(n_nodes, sizeof *w.nodes);
    w.nodes_p = alloc_n(n_nodes, sizeof *w.nodes_p);
    w.symbols = alloc_n(n_sym, sizeof *w.symbols);
    w.symbols_p = alloc_n(n_sym, sizeof *w.symbols_p);
    w.outputs = alloc_n(n_out, sizeof *w.outputs);
    w.outputs_p = alloc_n(n_out, sizeof *w.outputs_p);
    if (!w.map || !w.values || !w.values_p || !w.nodes || !w.nodes_p || !w.symbols ||
        !w.symbols_p || !w.outputs || !w.outputs_p) {
        writer_free(&w);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "serialize: out of memory");
    }
    for (uint32_t v = 0; v < bound; v++) w.map[v] = UINT32_MAX;

    Loompb__Graph m = LOOMPB__GRAPH__INIT;
    Loompb__GgufIdentity src = LOOMPB__GGUF_IDENTITY__INIT;
    m.has_format_version = true;
    m.format_version = LOOM_IR_FORMAT_VERSION;

    for (uint32_t i = 0; i < n_sym; i++) {
        const loom_ir_symbol *s = loom_ir_symbol_at(g, i);
        loompb__symbol__init(&w.symbols[i]);
        w.symbols[i].name = (char *)s->name;
        w.symbols[i].has_max = true;
        w.symbols[i].max = s->max;
        w.symbols_p[i] = &w.symbols[i];
    }
    m.n_symbols = n_sym;
    m.symbols = w.symbols_p;

    /* Values, canonically numbered; nodes in program order. */
    size_t nv = 0;
    for (uint32_t i = 0; i < n_in; i++) put_value(&w, g, loom_ir_input_at(g, i), &nv);
    for (uint32_t i = 0; i < n_w; i++) put_value(&w, g, loom_ir_weight_at(g, i), &nv);
    for (uint32_t i = 0; i < n_st; i++) put_value(&w, g, loom_ir_state_at(g, i), &nv);
    size_t nn = 0;
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        for (uint32_t k = 0; k < n->n_out; k++) put_value(&w, g, n->out[k], &nv);
        st = put_node(&w, n, &w.nodes[nn], err);
        if (st) {
            writer_free(&w);
            return st;
        }
        w.nodes_p[nn] = &w.nodes[nn].msg;
        nn++;
    }
    LOOM_ASSERT(nv == total && nn == n_nodes);
    m.n_values = nv;
    m.values = w.values_p;
    m.n_nodes = nn;
    m.nodes = w.nodes_p;

    for (uint32_t i = 0; i < n_out; i++) {
        const char *name = NULL;
        loom_ir_value_id v = loom_ir_output_at(g, i, &name);
        LOOM_ASSERT(v != LOOM_IR_NO_VALUE && w.map[v] != UINT32_MAX);
        loompb__output__init(&w.outputs[i]);
        w.outputs[i].name = (char *)name;
        w.outputs[i].has_value = true;
        w.outputs[i].value = w.map[v];
        w.outputs_p[i] = &w.outputs[i];
    }
    m.n_outputs = n_out;
    m.outputs = w.outputs_p;

    st = put_metadata(&w, g, &m, &src, err);
    if (st) {
        writer_free(&w);
        return st;
    }

    size_t size = loompb__graph__get_packed_size(&m);
    uint8_t *buf = malloc(size + LOOM_IR_CHECKSUM_TRAILER);
    if (!buf) {
        writer_free(&w);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "serialize: out of memory (%zu bytes)",
                              size);
    }
    size_t packed = loompb__graph__pack(&m, buf);
    LOOM_ASSERT(packed == size);
    writer_free(&w);
    /* The trailer: exactly what packing `checksum` (field 1000, the last) would append. */
    uint64_t sum = loom_ir_message_checksum(buf, size);
    buf[size] = 0xC1;
    buf[size + 1] = 0x3E;
    for (int i = 0; i < 8; i++) buf[size + 2 + i] = (uint8_t)(sum >> (8 * i));
    *bytes = buf;
    *len = size + LOOM_IR_CHECKSUM_TRAILER;
    return LOOM_OK;
}

loom_status loom_ir_save(const loom_ir_graph *g, const char *path, loom_error *err) {
    if (!g || !path)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "save: NULL argument");
    uint8_t *bytes;
    size_t len;
    loom_status st = loom_ir_serialize(g, &bytes, &len, err);
    if (st) {
        loom_error_prefix(err, "save %s: ", path);
        return st;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(bytes);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "save %s: out of memory", path);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = loom_error_set(err, LOOM_ERR_IO, "save %s: cannot create %s: %s", path, tmp,
                            strerror(errno));
        goto done;
    }
    bool ok = fwrite(bytes, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        st = loom_error_set(err, LOOM_ERR_IO, "save %s: writing %s failed: %s", path, tmp,
                            strerror(saved));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        st = loom_error_set(err, LOOM_ERR_IO, "save %s: renaming %s failed: %s", path, tmp,
                            strerror(saved));
        goto done;
    }
    st = LOOM_OK;
done:
    free(tmp);
    free(bytes);
    return st;
}
