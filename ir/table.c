/* table.c: the op and attribute tables built from ops.def, dtype names, type helpers and
 * attribute constructors/accessors. Pure functions over static data; no graph mutation.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

static const loom_ir_op_info op_table[LOOM_IR_OP_COUNT] = {
#define LOOM_IR_OP_DEF(ID, nm, min_in, max_in, max_out, fl, at, dc) \
    [LOOM_IR_OP_##ID] = {#nm, min_in, max_in, max_out, fl, at, dc},
#include "ir/ops.def"
};

static const loom_ir_attr_info attr_table[LOOM_IR_ATTR_ID_COUNT] = {
#define LOOM_IR_ATTR_DEF(ID, nm, KIND, opt, di, df, names, dc) \
    [LOOM_IR_ATTR_##ID] = {#nm, LOOM_IR_ATTR_KIND_##KIND, (opt) != 0, (opt) == 2, di, df, names, dc},
#include "ir/ops.def"
};

_Static_assert(LOOM_IR_MAX_INPUTS >= 8 && LOOM_IR_MAX_OUTPUTS >= 3, "ops.def arities fit a node");

const loom_ir_op_info *loom_ir_op_info_get(loom_ir_op op) {
    return (unsigned)op < LOOM_IR_OP_COUNT ? &op_table[op] : NULL;
}

const loom_ir_attr_info *loom_ir_attr_info_get(loom_ir_attr_id id) {
    return (unsigned)id < LOOM_IR_ATTR_ID_COUNT ? &attr_table[id] : NULL;
}

bool loom_ir_op_from_name(const char *name, loom_ir_op *out) {
    for (int i = 0; i < LOOM_IR_OP_COUNT; i++)
        if (!strcmp(op_table[i].name, name)) {
            *out = (loom_ir_op)i;
            return true;
        }
    return false;
}

uint32_t loom_ir_op_state_results(loom_ir_op op) {
    const loom_ir_op_info *oi = loom_ir_op_info_get(op);
    if (!oi || !(oi->flags & LOOM_IR_OPF_WRITES_STATE)) return 0;
    return oi->flags & LOOM_IR_OPF_WRITES_STATE2 ? 2 : 1;
}

bool loom_ir_attr_elided(const loom_ir_attr *a) {
    const loom_ir_attr_info *ai = loom_ir_attr_info_get((loom_ir_attr_id)a->id);
    if (!ai || !ai->elide_default) return false;
    if (a->kind == LOOM_IR_ATTR_KIND_FLOAT) return !memcmp(&a->u.f, &ai->default_f, sizeof a->u.f);
    return (a->kind == LOOM_IR_ATTR_KIND_INT || a->kind == LOOM_IR_ATTR_KIND_ENUM ||
            a->kind == LOOM_IR_ATTR_KIND_DTYPE) && a->u.i == ai->default_i;
}

uint32_t loom_ir_prenorm_slot(loom_ir_op op, uint32_t n_in) {
    switch (op) {
    case LOOM_IR_OP_MATMUL: return n_in == 3 ? 2 : LOOM_IR_NO_SLOT;
    case LOOM_IR_OP_MATMUL_PAIR: return n_in == 4 ? 3 : LOOM_IR_NO_SLOT;
    case LOOM_IR_OP_MATMUL_TRIPLE: return n_in == 5 || n_in == 8 ? n_in - 1 : LOOM_IR_NO_SLOT;
    default: return LOOM_IR_NO_SLOT;
    }
}

bool loom_ir_attr_from_name(const char *name, loom_ir_attr_id *out) {
    for (int i = 0; i < LOOM_IR_ATTR_ID_COUNT; i++)
        if (!strcmp(attr_table[i].name, name)) {
            *out = (loom_ir_attr_id)i;
            return true;
        }
    return false;
}

/* ---- dtypes ---- */

static const struct { loom_ir_dtype dt; const char *name; } dtype_names[] = {
    {LOOM_IR_F32, "f32"},   {LOOM_IR_F16, "f16"},   {LOOM_IR_BF16, "bf16"}, {LOOM_IR_I32, "i32"},
    {LOOM_IR_Q4_0, "q4_0"}, {LOOM_IR_Q4_1, "q4_1"}, {LOOM_IR_Q5_0, "q5_0"}, {LOOM_IR_Q5_1, "q5_1"},
    {LOOM_IR_Q8_0, "q8_0"}, {LOOM_IR_Q2_K, "q2_k"}, {LOOM_IR_Q3_K, "q3_k"}, {LOOM_IR_Q4_K, "q4_k"},
    {LOOM_IR_Q5_K, "q5_k"}, {LOOM_IR_Q6_K, "q6_k"},
};
enum { N_DTYPES = sizeof dtype_names / sizeof dtype_names[0] };

const char *loom_ir_dtype_name(loom_ir_dtype dt) {
    for (int i = 0; i < N_DTYPES; i++)
        if (dtype_names[i].dt == dt) return dtype_names[i].name;
    return NULL;
}

bool loom_ir_dtype_from_name(const char *name, loom_ir_dtype *out) {
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcasecmp(dtype_names[i].name, name)) {
            *out = dtype_names[i].dt;
            return true;
        }
    return false;
}

bool loom_ir_dtype_computable(loom_ir_dtype dt) {
    if (!loom_ir_dtype_name(dt) || dt == LOOM_IR_I32) return false;
    const loom_ggml_type_info *ti = loom_ggml_type_get((uint32_t)dt);
    return ti && ti->computable;
}

/* ---- types ---- */

loom_ir_type loom_ir_type_make(loom_ir_dtype dt, uint32_t rank, const int64_t *dims) {
    loom_ir_type t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (uint32_t i = 0; i < rank && i < LOOM_IR_MAX_DIMS; i++) t.dims[i] = dims[i];
    return t;
}

bool loom_ir_type_equal(const loom_ir_type *a, const loom_ir_type *b) {
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static int64_t dim_value(const loom_ir_graph *g, int64_t d, const int64_t *sym_values) {
    if (!loom_ir_dim_is_sym(d)) return d;
    uint32_t s = loom_ir_dim_sym_index(d);
    if (s >= loom_ir_symbol_count(g)) return -1;
    return sym_values ? sym_values[s] : loom_ir_symbol_at(g, s)->max;
}

int64_t loom_ir_type_numel(const loom_ir_graph *g, const loom_ir_type *t,
                           const int64_t *sym_values) {
    int64_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t d = dim_value(g, t->dims[i], sym_values);
        if (d < 0) return -1;
        if (d != 0 && n > INT64_MAX / d) return -1;
        n *= d;
    }
    return n;
}

int64_t loom_ir_type_bytes(const loom_ir_graph *g, const loom_ir_type *t,
                           const int64_t *sym_values) {
    if (t->rank == 0) {
        const loom_ggml_type_info *ti = loom_ggml_type_get((uint32_t)t->dtype);
        return ti && ti->block_size == 1 ? ti->type_size : -1;
    }
    if (t->rank > LOOM_IR_MAX_DIMS) return -1;
    int64_t ne[LOOM_IR_MAX_DIMS]; /* ggml order: the row (the last IR dim) first */
    for (uint32_t i = 0; i < t->rank; i++) {
        ne[i] = dim_value(g, t->dims[t->rank - 1 - i], sym_values);
        if (ne[i] < 0) return -1;
    }
    int64_t bytes = loom_ggml_tensor_bytes((uint32_t)t->dtype, t->rank, ne);
    return bytes < 0 ? -1 : bytes;
}

const char *ir_dim_format(const loom_ir_graph *g, int64_t d, char *buf, size_t len) {
    const loom_ir_symbol *s =
        loom_ir_dim_is_sym(d) && g ? loom_ir_symbol_at(g, loom_ir_dim_sym_index(d)) : NULL;
    if (s) snprintf(buf, len, "%s", s->name);
    else if (loom_ir_dim_is_sym(d)) snprintf(buf, len, "?sym%u", loom_ir_dim_sym_index(d));
    else snprintf(buf, len, "%lld", (long long)d);
    return buf;
}

char *loom_ir_type_format(const loom_ir_graph *g, const loom_ir_type *t, char *buf, size_t len) {
    if (!len) return buf;
    const char *dn = loom_ir_dtype_name(t->dtype);
    size_t o = 0;
    int k = dn ? snprintf(buf, len, "%s[", dn) : snprintf(buf, len, "dtype%d[", (int)t->dtype);
    o = k > 0 ? (size_t)k : 0;
    for (uint32_t i = 0; i < t->rank && i < LOOM_IR_MAX_DIMS && o < len; i++) {
        char db[64];
        k = snprintf(buf + o, len - o, "%s%s", i ? "," : "", ir_dim_format(g, t->dims[i], db,
                                                                          sizeof db));
        o += k > 0 ? (size_t)k : 0;
    }
    if (o < len) snprintf(buf + o, len - o, "]");
    buf[len - 1] = '\0';
    return buf;
}

/* ---- attributes ---- */

static loom_ir_attr attr_base(loom_ir_attr_id id) {
    loom_ir_attr a;
    memset(&a, 0, sizeof a);
    a.id = (uint16_t)id;
    const loom_ir_attr_info *ai = loom_ir_attr_info_get(id);
    a.kind = (uint16_t)(ai ? ai->kind : LOOM_IR_ATTR_KIND_NONE);
    return a;
}

loom_ir_attr loom_ir_attr_int(loom_ir_attr_id id, int64_t v) {
    loom_ir_attr a = attr_base(id);
    a.u.i = v;
    return a;
}

loom_ir_attr loom_ir_attr_float(loom_ir_attr_id id, float v) {
    loom_ir_attr a = attr_base(id);
    a.u.f = isnan(v) ? NAN : v;
    return a;
}

loom_ir_attr loom_ir_attr_ints(loom_ir_attr_id id, const int64_t *v, uint32_t n) {
    loom_ir_attr a = attr_base(id);
    a.u.ints = v;
    a.count = n;
    return a;
}

loom_ir_attr loom_ir_attr_string(loom_ir_attr_id id, const char *s) {
    loom_ir_attr a = attr_base(id);
    a.u.s = s;
    return a;
}

const loom_ir_attr *loom_ir_node_attr(const loom_ir_node *n, loom_ir_attr_id id) {
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].id == id) return &n->attrs[i];
    return NULL;
}

int64_t loom_ir_node_attr_int(const loom_ir_node *n, loom_ir_attr_id id, int64_t dflt) {
    const loom_ir_attr *a = loom_ir_node_attr(n, id);
    if (!a || (a->kind != LOOM_IR_ATTR_KIND_INT && a->kind != LOOM_IR_ATTR_KIND_ENUM &&
               a->kind != LOOM_IR_ATTR_KIND_DTYPE))
        return dflt;
    return a->u.i;
}

float loom_ir_node_attr_float(const loom_ir_node *n, loom_ir_attr_id id, float dflt) {
    const loom_ir_attr *a = loom_ir_node_attr(n, id);
    return a && a->kind == LOOM_IR_ATTR_KIND_FLOAT ? a->u.f : dflt;
}

bool ir_attr_equal(const loom_ir_attr *a, const loom_ir_attr *b) {
    if (a->id != b->id || a->kind != b->kind) return false;
    switch ((loom_ir_attr_kind)a->kind) {
    case LOOM_IR_ATTR_KIND_FLOAT:
        return memcmp(&a->u.f, &b->u.f, sizeof(float)) == 0;
    case LOOM_IR_ATTR_KIND_INTS:
    case LOOM_IR_ATTR_KIND_SHAPE:
        if (a->count != b->count) return false;
        return a->count == 0 || memcmp(a->u.ints, b->u.ints, a->count * sizeof(int64_t)) == 0;
    case LOOM_IR_ATTR_KIND_STRING:
        return strcmp(a->u.s, b->u.s) == 0;
    case LOOM_IR_ATTR_KIND_NONE:
        return true;
    default:
        return a->u.i == b->u.i;
    }
}

bool loom_ir_attr_enum_name(loom_ir_attr_id id, int64_t i, char *buf, size_t len) {
    const loom_ir_attr_info *ai = loom_ir_attr_info_get(id);
    if (!ai || !ai->enum_names || i < 0) return false;
    const char *p = ai->enum_names;
    for (int64_t k = 0; k < i; k++) {
        p = strchr(p, ',');
        if (!p) return false;
        p++;
    }
    size_t n = strcspn(p, ",");
    if (n + 1 > len) return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}

bool loom_ir_attr_enum_value(loom_ir_attr_id id, const char *name, size_t name_len,
                             int64_t *out) {
    const loom_ir_attr_info *ai = loom_ir_attr_info_get(id);
    if (!ai || !ai->enum_names) return false;
    const char *p = ai->enum_names;
    for (int64_t k = 0;; k++) {
        size_t n = strcspn(p, ",");
        if (n == name_len && !strncmp(p, name, n)) {
            *out = k;
            return true;
        }
        if (!p[n]) return false;
        p += n + 1;
    }
}

void ir_format_float(double v, bool single, char *buf, size_t len) {
    if (isnan(v)) {
        snprintf(buf, len, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, len, v < 0 ? "-inf" : "inf");
        return;
    }
    if (fabs(v) < 1e15 && v == (double)(int64_t)v) { /* integral: "10000.0", not "1e+04" */
        snprintf(buf, len, "%.1f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v) break;
    }
    if (!strpbrk(buf, ".eEn")) {
        size_t n = strlen(buf);
        if (n + 3 <= len) memcpy(buf + n, ".0", 3);
    }
}
