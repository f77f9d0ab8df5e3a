/* graph.c: the graph container: arena, chunked value/node storage, declarations (symbols,
 * inputs, weights, state, outputs), metadata, read access, use lists and clone.
 *
 * Values and nodes are stored in fixed chunks of IR_CHUNK records that are never moved, so ids
 * and public pointers stay valid for the graph's lifetime (see ir_impl.h for the invariants).
 * Every allocation failure leaves the graph as it was and returns LOOM_ERR_OUT_OF_MEMORY.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

/* ---- arena ---- */

void *ir_arena_alloc(loom_ir_graph *g, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_block *b = g->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = g->arena;
        b->used = 0;
        b->cap = cap;
        g->arena = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

char *ir_arena_strdup(loom_ir_graph *g, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = ir_arena_alloc(g, n);
    if (p) memcpy(p, s, n);
    return p;
}

bool ir_id_list_push(id_list *l, uint32_t v) {
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 16;
        uint32_t *p = realloc(l->v, cap * sizeof *p);
        if (!p) return false;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

bool ir_name_is_plain(const char *s) {
    if (!s || !*s) return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* ---- lifetime ---- */

loom_ir_graph *loom_ir_graph_create(void) {
    loom_ir_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->first = g->last = g->insert_before = LOOM_IR_NO_NODE;
    return g;
}

void loom_ir_graph_destroy(loom_ir_graph *g) {
    if (!g) return;
    for (uint32_t v = 0; v < g->n_values; v++) free(ir_value_rec(g, v)->uses);
    for (uint32_t c = 0; c < g->n_value_chunks; c++) free(g->value_chunks[c]);
    for (uint32_t c = 0; c < g->n_node_chunks; c++) free(g->node_chunks[c]);
    free(g->value_chunks);
    free(g->node_chunks);
    free(g->inputs.v);
    free(g->weights.v);
    free(g->states.v);
    free(g->outputs);
    free(g->meta);
    while (g->arena) {
        arena_block *next = g->arena->next;
        free(g->arena);
        g->arena = next;
    }
    free(g);
}

/* ---- storage ---- */

value_rec *ir_value_rec(const loom_ir_graph *g, loom_ir_value_id v) {
    if (v >= g->n_values) return NULL;
    return &g->value_chunks[v >> IR_CHUNK_BITS][v & (IR_CHUNK - 1)];
}

loom_ir_node *ir_node_mut(const loom_ir_graph *g, loom_ir_node_id n) {
    if (n >= g->n_nodes) return NULL;
    return &g->node_chunks[n >> IR_CHUNK_BITS][n & (IR_CHUNK - 1)];
}

/* Chunk tables grow by one calloc'd chunk of IR_CHUNK records when full; records never move. */
loom_ir_value_id ir_new_value(loom_ir_graph *g, loom_ir_value_kind kind, const loom_ir_type *t) {
    if (g->n_values >= UINT32_MAX - IR_CHUNK) return LOOM_IR_NO_VALUE;
    if (g->n_values == g->n_value_chunks * (uint32_t)IR_CHUNK) {
        value_rec **p = realloc(g->value_chunks, (g->n_value_chunks + 1) * sizeof *p);
        if (!p) return LOOM_IR_NO_VALUE;
        g->value_chunks = p;
        if (!(p[g->n_value_chunks] = calloc(IR_CHUNK, sizeof **p))) return LOOM_IR_NO_VALUE;
        g->n_value_chunks++;
    }
    loom_ir_value_id id = g->n_values++;
    value_rec *r = ir_value_rec(g, id);
    r->pub.kind = kind;
    r->pub.type = *t;
    r->pub.def = LOOM_IR_NO_NODE;
    return id;
}

loom_ir_node_id ir_new_node(loom_ir_graph *g) {
    if (g->n_nodes >= UINT32_MAX - IR_CHUNK) return LOOM_IR_NO_NODE;
    if (g->n_nodes == g->n_node_chunks * (uint32_t)IR_CHUNK) {
        loom_ir_node **p = realloc(g->node_chunks, (g->n_node_chunks + 1) * sizeof *p);
        if (!p) return LOOM_IR_NO_NODE;
        g->node_chunks = p;
        if (!(p[g->n_node_chunks] = calloc(IR_CHUNK, sizeof **p))) return LOOM_IR_NO_NODE;
        g->n_node_chunks++;
    }
    loom_ir_node_id id = g->n_nodes++;
    loom_ir_node *n = ir_node_mut(g, id); /* zeroed by calloc, never reused */
    n->prev = n->next = LOOM_IR_NO_NODE;
    return id;
}

bool ir_add_use(loom_ir_graph *g, loom_ir_value_id v, loom_ir_node_id n, uint32_t slot) {
    value_rec *r = ir_value_rec(g, v);
    if (r->n_uses == r->cap_uses) {
        uint32_t cap = r->cap_uses ? r->cap_uses * 2 : 4;
        loom_ir_use *p = realloc(r->uses, cap * sizeof *p);
        if (!p) return false;
        r->uses = p;
        r->cap_uses = cap;
    }
    r->uses[r->n_uses++] = (loom_ir_use){n, slot};
    return true;
}

void ir_remove_use(loom_ir_graph *g, loom_ir_value_id v, loom_ir_node_id n, uint32_t slot) {
    value_rec *r = ir_value_rec(g, v);
    for (uint32_t i = 0; i < r->n_uses; i++)
        if (r->uses[i].node == n && r->uses[i].slot == slot) {
            r->uses[i] = r->uses[--r->n_uses];
            return;
        }
    LOOM_ASSERT(!"use to remove is missing");
}

void ir_link_node(loom_ir_graph *g, loom_ir_node_id id, loom_ir_node_id before) {
    loom_ir_node *n = ir_node_mut(g, id);
    if (before == LOOM_IR_NO_NODE) {
        n->prev = g->last;
        n->next = LOOM_IR_NO_NODE;
        if (g->last != LOOM_IR_NO_NODE) ir_node_mut(g, g->last)->next = id;
        else g->first = id;
        g->last = id;
    } else {
        loom_ir_node *b = ir_node_mut(g, before);
        n->prev = b->prev;
        n->next = before;
        if (b->prev != LOOM_IR_NO_NODE) ir_node_mut(g, b->prev)->next = id;
        else g->first = id;
        b->prev = id;
    }
}

void ir_unlink_node(loom_ir_graph *g, loom_ir_node_id id) {
    loom_ir_node *n = ir_node_mut(g, id);
    if (n->prev != LOOM_IR_NO_NODE) ir_node_mut(g, n->prev)->next = n->next;
    else g->first = n->next;
    if (n->next != LOOM_IR_NO_NODE) ir_node_mut(g, n->next)->prev = n->prev;
    else g->last = n->prev;
    n->prev = n->next = LOOM_IR_NO_NODE;
}

/* ---- symbols ---- */

loom_status loom_ir_add_symbol(loom_ir_graph *g, const char *name, int64_t max, int64_t *dim,
                               loom_error *err) {
    if (!name || !ir_name_is_plain(name) || (name[0] >= '0' && name[0] <= '9') ||
        strlen(name) > 63)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: symbol name '%.64s' is not "
                              "an identifier of at most 63 characters", name ? name : "(null)");
    if (max < 1)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: symbol %s: max %lld must be "
                              ">= 1", name, (long long)max);
    if (loom_ir_symbol_find(g, name) != 0 || loom_ir_find_value(g, name) != LOOM_IR_NO_VALUE)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: symbol %s declared twice",
                              name);
    if (g->n_symbols == LOOM_IR_MAX_SYMBOLS)
        return loom_error_set(err, LOOM_ERR_LIMIT, "ir: symbol %s: more than %d symbols", name,
                              LOOM_IR_MAX_SYMBOLS);
    char *s = ir_arena_strdup(g, name);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    g->symbols[g->n_symbols] = (loom_ir_symbol){s, max};
    if (dim) *dim = LOOM_IR_DIM_SYM(g->n_symbols);
    g->n_symbols++;
    return LOOM_OK;
}

uint32_t loom_ir_symbol_count(const loom_ir_graph *g) { return g->n_symbols; }

const loom_ir_symbol *loom_ir_symbol_at(const loom_ir_graph *g, uint32_t i) {
    return i < g->n_symbols ? &g->symbols[i] : NULL;
}

int64_t loom_ir_symbol_find(const loom_ir_graph *g, const char *name) {
    for (uint32_t i = 0; i < g->n_symbols; i++)
        if (!strcmp(g->symbols[i].name, name)) return LOOM_IR_DIM_SYM(i);
    return 0;
}

/* ---- declarations ---- */

static const char *kind_word(loom_ir_value_kind k) {
    switch (k) {
    case LOOM_IR_VALUE_INPUT: return "input";
    case LOOM_IR_VALUE_WEIGHT: return "weight";
    case LOOM_IR_VALUE_STATE: return "state";
    default: return "value";
    }
}

/* Checks a declared type: known dtype, rank, dims >= 1 or declared symbols, constant if asked. */
static loom_status check_decl_type(const loom_ir_graph *g, loom_ir_value_kind kind,
                                   const char *name, const loom_ir_type *t, bool constant,
                                   loom_error *err) {
    const char *kw = kind_word(kind);
    if (!loom_ir_dtype_name(t->dtype))
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s: unknown dtype id %d", kw, name,
                              (int)t->dtype);
    if (t->rank > LOOM_IR_MAX_DIMS)
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s: rank %u > %d", kw, name, t->rank,
                              LOOM_IR_MAX_DIMS);
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t d = t->dims[i];
        if (d == 0)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s: dim %u is 0", kw, name, i);
        if (loom_ir_dim_is_sym(d) && loom_ir_dim_sym_index(d) >= g->n_symbols)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s: dim %u is an undeclared "
                                  "symbol", kw, name, i);
        if (loom_ir_dim_is_sym(d) && constant)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s: dims must be constants", kw,
                                  name);
    }
    return LOOM_OK;
}

static loom_status add_decl(loom_ir_graph *g, loom_ir_value_kind kind, const char *name,
                            const loom_ir_type *t, uint64_t offset, uint64_t size,
                            loom_ir_value_id *out, loom_error *err) {
    const char *kw = kind_word(kind);
    if (!name || !*name)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s without a name", kw);
    if (strlen(name) > 255)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s name longer than 255", kw);
    if (kind == LOOM_IR_VALUE_INPUT && (!ir_name_is_plain(name) || (name[0] >= '0' &&
                                                                    name[0] <= '9')))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: input name '%s' must be "
                              "[A-Za-z_.-][A-Za-z0-9_.-]*", name);
    if (loom_ir_find_value(g, name) != LOOM_IR_NO_VALUE || loom_ir_symbol_find(g, name) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s %s: name already declared",
                              kw, name);
    loom_status st = check_decl_type(g, kind, name, t, kind != LOOM_IR_VALUE_INPUT, err);
    if (st) return st;
    char tb[96];
    if (loom_ir_type_numel(g, t, NULL) < 0)
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s %s : %s: element count overflows "
                              "(symbols at their maximum)", kw, name,
                              loom_ir_type_format(g, t, tb, sizeof tb));
    if (kind == LOOM_IR_VALUE_INPUT && t->dtype != LOOM_IR_F32 && t->dtype != LOOM_IR_I32)
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: input %s : %s: inputs are f32 or i32",
                              name, loom_ir_type_format(g, t, tb, sizeof tb));
    if (kind == LOOM_IR_VALUE_STATE && t->dtype != LOOM_IR_F32 && t->dtype != LOOM_IR_F16 &&
        t->dtype != LOOM_IR_BF16)
        return loom_error_set(err, LOOM_ERR_TYPE, "ir: state %s : %s: state is f32, f16 or bf16",
                              name, loom_ir_type_format(g, t, tb, sizeof tb));
    if (kind == LOOM_IR_VALUE_WEIGHT) {
        int64_t bytes = loom_ir_type_bytes(g, t, NULL);
        if (bytes < 0)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: weight %s : %s: row length is not a "
                                  "multiple of the block size (or size overflows)", name,
                                  loom_ir_type_format(g, t, tb, sizeof tb));
        if (size == 0) size = (uint64_t)bytes;
        if (size != (uint64_t)bytes)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: weight %s : %s: size %llu, the shape "
                                  "needs %lld bytes", name, loom_ir_type_format(g, t, tb, sizeof tb),
                                  (unsigned long long)size, (long long)bytes);
        if (offset > UINT64_MAX - size)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: weight %s: offset + size "
                                  "overflows", name);
    }
    id_list *list = kind == LOOM_IR_VALUE_INPUT ? &g->inputs
                    : kind == LOOM_IR_VALUE_WEIGHT ? &g->weights : &g->states;
    char *s = ir_arena_strdup(g, name);
    if (!s || !ir_id_list_push(list, LOOM_IR_NO_VALUE)) /* reserve the list slot first */
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    loom_ir_value_id v = ir_new_value(g, kind, t);
    if (v == LOOM_IR_NO_VALUE) {
        list->n--;
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    }
    list->v[list->n - 1] = v;
    value_rec *r = ir_value_rec(g, v);
    r->pub.name = s;
    if (kind == LOOM_IR_VALUE_WEIGHT) {
        r->pub.offset = offset;
        r->pub.size = size;
    }
    if (out) *out = v;
    return LOOM_OK;
}

loom_status loom_ir_add_input(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                              loom_ir_value_id *out, loom_error *err) {
    return add_decl(g, LOOM_IR_VALUE_INPUT, name, type, 0, 0, out, err);
}

loom_status loom_ir_add_weight(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                               uint64_t offset, uint64_t size, loom_ir_value_id *out,
                               loom_error *err) {
    return add_decl(g, LOOM_IR_VALUE_WEIGHT, name, type, offset, size, out, err);
}

loom_status loom_ir_add_state(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                              loom_ir_value_id *out, loom_error *err) {
    return add_decl(g, LOOM_IR_VALUE_STATE, name, type, 0, 0, out, err);
}

loom_status loom_ir_add_output(loom_ir_graph *g, const char *name, loom_ir_value_id v,
                               loom_error *err) {
    if (!name || !ir_name_is_plain(name) || strlen(name) > 255)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: output name '%.64s' must be "
                              "[A-Za-z0-9_.-]{1,255}", name ? name : "(null)");
    if (loom_ir_find_output(g, name) != LOOM_IR_NO_VALUE)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: output %s declared twice",
                              name);
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!val || val->kind == LOOM_IR_VALUE_DEAD)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: output %s: value %u does not "
                              "exist", name, v);
    if (g->n_outputs == g->cap_outputs) {
        uint32_t cap = g->cap_outputs ? g->cap_outputs * 2 : 4;
        ir_output *p = realloc(g->outputs, cap * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
        g->outputs = p;
        g->cap_outputs = cap;
    }
    char *s = ir_arena_strdup(g, name);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    g->outputs[g->n_outputs++] = (ir_output){s, v};
    return LOOM_OK;
}

uint32_t loom_ir_input_count(const loom_ir_graph *g) { return g->inputs.n; }
uint32_t loom_ir_weight_count(const loom_ir_graph *g) { return g->weights.n; }
uint32_t loom_ir_state_count(const loom_ir_graph *g) { return g->states.n; }
uint32_t loom_ir_output_count(const loom_ir_graph *g) { return g->n_outputs; }

loom_ir_value_id loom_ir_input_at(const loom_ir_graph *g, uint32_t i) {
    return i < g->inputs.n ? g->inputs.v[i] : LOOM_IR_NO_VALUE;
}
loom_ir_value_id loom_ir_weight_at(const loom_ir_graph *g, uint32_t i) {
    return i < g->weights.n ? g->weights.v[i] : LOOM_IR_NO_VALUE;
}
loom_ir_value_id loom_ir_state_at(const loom_ir_graph *g, uint32_t i) {
    return i < g->states.n ? g->states.v[i] : LOOM_IR_NO_VALUE;
}

loom_ir_value_id loom_ir_output_at(const loom_ir_graph *g, uint32_t i, const char **name) {
    if (i >= g->n_outputs) return LOOM_IR_NO_VALUE;
    if (name) *name = g->outputs[i].name;
    return g->outputs[i].value;
}

loom_ir_value_id loom_ir_find_value(const loom_ir_graph *g, const char *name) {
    const id_list *lists[3] = {&g->inputs, &g->weights, &g->states};
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < lists[k]->n; i++)
            if (!strcmp(ir_value_rec(g, lists[k]->v[i])->pub.name, name)) return lists[k]->v[i];
    return LOOM_IR_NO_VALUE;
}

loom_ir_value_id loom_ir_find_output(const loom_ir_graph *g, const char *name) {
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->outputs[i].name, name)) return g->outputs[i].value;
    return LOOM_IR_NO_VALUE;
}

/* ---- metadata ---- */

static loom_status meta_slot(loom_ir_graph *g, const char *key, loom_ir_meta **out,
                             loom_error *err) {
    if (!key || !ir_name_is_plain(key) || strlen(key) > 255)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: metadata key '%.64s' must be "
                              "[A-Za-z0-9_.-]{1,255}", key ? key : "(null)");
    for (uint32_t i = 0; i < g->n_meta; i++)
        if (!strcmp(g->meta[i].key, key)) {
            *out = &g->meta[i];
            return LOOM_OK;
        }
    if (g->n_meta == g->cap_meta) {
        uint32_t cap = g->cap_meta ? g->cap_meta * 2 : 16;
        loom_ir_meta *p = realloc(g->meta, cap * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
        g->meta = p;
        g->cap_meta = cap;
    }
    char *k = ir_arena_strdup(g, key);
    if (!k) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    loom_ir_meta *m = &g->meta[g->n_meta++];
    memset(m, 0, sizeof *m);
    m->key = k;
    *out = m;
    return LOOM_OK;
}

loom_status loom_ir_meta_set_int(loom_ir_graph *g, const char *key, int64_t v, loom_error *err) {
    loom_ir_meta *m;
    loom_status st = meta_slot(g, key, &m, err);
    if (st) return st;
    m->kind = LOOM_IR_META_INT;
    m->i = v;
    m->f = 0;
    m->s = NULL;
    return LOOM_OK;
}

loom_status loom_ir_meta_set_float(loom_ir_graph *g, const char *key, double v,
                                   loom_error *err) {
    loom_ir_meta *m;
    loom_status st = meta_slot(g, key, &m, err);
    if (st) return st;
    m->kind = LOOM_IR_META_FLOAT;
    m->f = isnan(v) ? (double)NAN : v; /* (loom_ir_attr_float: one NaN, as the text form has) */
    m->i = 0;
    m->s = NULL;
    return LOOM_OK;
}

loom_status loom_ir_meta_set_string(loom_ir_graph *g, const char *key, const char *v,
                                    loom_error *err) {
    if (!v) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: metadata %s: NULL", key);
    char *s = ir_arena_strdup(g, v);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "ir: out of memory");
    loom_ir_meta *m;
    loom_status st = meta_slot(g, key, &m, err);
    if (st) return st;
    m->kind = LOOM_IR_META_STRING;
    m->s = s;
    m->i = 0;
    m->f = 0;
    return LOOM_OK;
}

uint32_t loom_ir_meta_count(const loom_ir_graph *g) { return g->n_meta; }

const loom_ir_meta *loom_ir_meta_at(const loom_ir_graph *g, uint32_t i) {
    return i < g->n_meta ? &g->meta[i] : NULL;
}

const loom_ir_meta *loom_ir_meta_get(const loom_ir_graph *g, const char *key) {
    for (uint32_t i = 0; i < g->n_meta; i++)
        if (!strcmp(g->meta[i].key, key)) return &g->meta[i];
    return NULL;
}

/* ---- access ---- */

uint32_t loom_ir_value_bound(const loom_ir_graph *g) { return g->n_values; }
uint32_t loom_ir_node_bound(const loom_ir_graph *g) { return g->n_nodes; }
uint32_t loom_ir_node_count(const loom_ir_graph *g) { return g->n_live_nodes; }
loom_ir_node_id loom_ir_first_node(const loom_ir_graph *g) { return g->first; }
loom_ir_node_id loom_ir_last_node(const loom_ir_graph *g) { return g->last; }

const loom_ir_value *loom_ir_value_get(const loom_ir_graph *g, loom_ir_value_id v) {
    value_rec *r = ir_value_rec(g, v);
    return r ? &r->pub : NULL;
}

const loom_ir_node *loom_ir_node_get(const loom_ir_graph *g, loom_ir_node_id n) {
    return ir_node_mut(g, n);
}

uint32_t loom_ir_value_use_count(const loom_ir_graph *g, loom_ir_value_id v) {
    value_rec *r = ir_value_rec(g, v);
    return r ? r->n_uses : 0;
}

loom_ir_use loom_ir_value_use_at(const loom_ir_graph *g, loom_ir_value_id v, uint32_t i) {
    value_rec *r = ir_value_rec(g, v);
    if (!r || i >= r->n_uses) return (loom_ir_use){LOOM_IR_NO_NODE, 0};
    return r->uses[i];
}

bool loom_ir_value_is_output(const loom_ir_graph *g, loom_ir_value_id v) {
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].value == v) return true;
    return false;
}

uint32_t *ir_result_numbers(const loom_ir_graph *g) {
    uint32_t *map = malloc((g->n_values ? g->n_values : 1) * sizeof *map);
    if (!map) return NULL;
    for (uint32_t v = 0; v < g->n_values; v++) map[v] = UINT32_MAX;
    uint32_t k = 0;
    for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE; id = ir_node_mut(g, id)->next) {
        const loom_ir_node *n = ir_node_mut(g, id);
        for (uint32_t o = 0; o < n->n_out; o++)
            if (n->out[o] < g->n_values) map[n->out[o]] = k++;
    }
    return map;
}

const char *ir_value_label(const loom_ir_graph *g, loom_ir_value_id v, char *buf, size_t len) {
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!val || val->kind == LOOM_IR_VALUE_DEAD) {
        snprintf(buf, len, "%%?%u", v);
    } else if (val->kind == LOOM_IR_VALUE_INPUT) {
        snprintf(buf, len, "%%%s", val->name);
    } else if (val->kind == LOOM_IR_VALUE_WEIGHT || val->kind == LOOM_IR_VALUE_STATE) {
        snprintf(buf, len, "@%s", val->name);
    } else {
        /* The printed number: the count of node results above this one in program order. */
        uint32_t k = 0;
        bool found = false;
        for (loom_ir_node_id id = g->first; id != LOOM_IR_NO_NODE && !found;
             id = ir_node_mut(g, id)->next) {
            const loom_ir_node *n = ir_node_mut(g, id);
            for (uint32_t o = 0; o < n->n_out && !found; o++) {
                if (n->out[o] == v) found = true;
                else k++;
            }
        }
        if (found) snprintf(buf, len, "%%%u", k);
        else snprintf(buf, len, "%%?%u", v);
    }
    return buf;
}
