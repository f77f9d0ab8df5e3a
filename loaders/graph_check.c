/* graph_check.c: a graph's weight references and source identity against an opened GGUF file
 * (see graph_check.h). */
#include "loaders/graph_check.h"

#include <inttypes.h>
#include <string.h>

#include "ir/serialize/source_id.h"

/* The IR's outermost-first dims of t, or the GGUF's ne reversed, with outer 1s dropped, into
 * out; returns the count. */
static uint32_t trim_outer_ones(const int64_t *outer_first, uint32_t n, int64_t *out) {
    uint32_t k = 0;
    while (k + 1 < n && outer_first[k] == 1) k++;
    for (uint32_t i = k; i < n; i++) out[i - k] = outer_first[i];
    return n - k;
}

static void format_ne(const loom_gguf_tensor *t, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "ne={");
    for (uint32_t i = 0; i < t->n_dims && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, i ? "," : "", t->ne[i]);
    if (used < len) snprintf(buf + used, len - used, "}");
}

static loom_status check_source(const loom_ir_graph *g, const loom_gguf *f, loom_error *err) {
    const loom_ir_meta *file = loom_ir_meta_get(g, "source.file");
    const char *name = file && file->kind == LOOM_IR_META_STRING ? file->s : "?";
    const loom_ir_meta *size = loom_ir_meta_get(g, "source.size");
    if (size && (size->kind != LOOM_IR_META_INT || size->i < 0 ||
                 (uint64_t)size->i != loom_gguf_file_size(f)))
        return loom_error_set(err, LOOM_ERR_VERIFY,
                              "graph check: the graph was made from '%s' of %" PRId64 " bytes; "
                              "this file has %" PRIu64 " bytes", name,
                              size->kind == LOOM_IR_META_INT ? size->i : -1,
                              loom_gguf_file_size(f));
    const loom_ir_meta *sum = loom_ir_meta_get(g, "source.checksum");
    if (sum) {
        char have[LOOM_IR_CHECKSUM_LEN];
        loom_ir_gguf_checksum(loom_gguf_file_bytes(f), loom_gguf_data_offset(f), have);
        if (sum->kind != LOOM_IR_META_STRING || strcmp(sum->s, have) != 0)
            return loom_error_set(err, LOOM_ERR_VERIFY,
                                  "graph check: the graph was made from '%s' with header checksum "
                                  "%s; this file's is %s (another or a modified file)", name,
                                  sum->kind == LOOM_IR_META_STRING ? sum->s : "?", have);
    }
    return LOOM_OK;
}

static loom_status check_weight(const loom_ir_graph *g, const loom_gguf *f, loom_ir_value_id id,
                                loom_error *err) {
    const loom_ir_value *v = loom_ir_value_get(g, id);
    const loom_gguf_tensor *t = loom_gguf_find_tensor(f, v->name);
    if (!t)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                              "graph check: weight '%s': no such tensor in the GGUF file", v->name);
    char want[96], ne[96];
    loom_ir_type_format(g, &v->type, want, sizeof want);
    format_ne(t, ne, sizeof ne);
    if ((int)v->type.dtype != (int)t->type) {
        const loom_ggml_type_info *ti = loom_ggml_type_get((uint32_t)t->type);
        return loom_error_set(err, LOOM_ERR_VERIFY,
                              "graph check: weight '%s': graph says %s, the file's tensor has "
                              "ggml type %s", v->name, want, ti ? ti->name : "?");
    }
    int64_t a[LOOM_IR_MAX_DIMS], b[LOOM_GGUF_MAX_DIMS], rev[LOOM_GGUF_MAX_DIMS];
    for (uint32_t i = 0; i < t->n_dims; i++) rev[i] = t->ne[t->n_dims - 1 - i];
    uint32_t na = trim_outer_ones(v->type.dims, v->type.rank, a);
    uint32_t nb = trim_outer_ones(rev, t->n_dims, b);
    if (na != nb || memcmp(a, b, na * sizeof a[0]) != 0)
        return loom_error_set(err, LOOM_ERR_VERIFY,
                              "graph check: weight '%s': graph says %s, the file's tensor has "
                              "%s (ggml order)", v->name, want, ne);
    if (v->offset != t->file_offset || v->size != t->nbytes)
        return loom_error_set(err, LOOM_ERR_VERIFY,
                              "graph check: weight '%s': graph says %" PRIu64 " bytes at offset %"
                              PRIu64 ", the file has %" PRIu64 " bytes at offset %" PRIu64,
                              v->name, v->size, v->offset, t->nbytes, t->file_offset);
    return LOOM_OK;
}

loom_status loom_ir_check_against_gguf(const loom_ir_graph *g, const loom_gguf *f, loom_error *err) {
    if (!g || !f) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "graph check: NULL argument");
    loom_status st = check_source(g, f, err);
    for (uint32_t i = 0; !st && i < loom_ir_weight_count(g); i++)
        st = check_weight(g, f, loom_ir_weight_at(g, i), err);
    return st;
}

loom_status loom_ir_set_source_from_gguf(loom_ir_graph *g, const loom_gguf *f, const char *path,
                                         loom_error *err) {
    if (!g || !f || !path)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "graph source: NULL argument");
    return loom_ir_set_source(g, path, loom_gguf_file_size(f), loom_gguf_file_bytes(f),
                              loom_gguf_data_offset(f), err);
}
