/* refusal_test.c: loading refuses every kind of bad message with a clear error.
 *
 * Crafted messages are made by unpacking a valid one (LAYER_TEXT) with protobuf-c, mutating the
 * structs, packing again and appending a correct checksum trailer, so each case reaches the
 * check it is about (not just the checksum). Then: every truncation, every one-bit corruption,
 * random garbage, hostile lengths and counts, and a newer format version.
 *
 * LAYER_TEXT's nodes in program order (file order): 0 get_rows, 1 fused_rms_norm,
 * 2 matmul_triple, 3 reshape, 4 rms_norm, 5 mul, 6 rope, 7 reshape, 8 fused_rms_norm, 9 rope,
 * 10 kv_write, 11 kv_write, 12 attention, 13 matmul_add, 14 fused_rms_norm,
 * 15 matmul_pair{swiglu=1}, 16 matmul_pair{swiglu=0}, 17 silu, 18 mul, 19 add, 20 matmul,
 * 21 add, 22 matmul, 23 softmax, 24 convert, 25 argmax. Values: 0 tokens, 1 positions,
 * 2..14 weights, 15..16 state, 17.. node results.
 */
#include <stdio.h>

#include "ir/serialize/loom_graph.pb-c.h"
#include "ser_test_util.h"

/* ---- helpers ---- */

static uint8_t *layer_bytes(size_t *len) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    uint8_t *b;
    serialize_ok(g, &b, len);
    loom_ir_graph_destroy(g);
    return b;
}

/* Packs m with a correct checksum trailer (the writer's format). */
static uint8_t *pack_sealed(Loompb__Graph *m, size_t *len) {
    m->has_checksum = false;
    size_t n = loompb__graph__get_packed_size(m);
    uint8_t *b = malloc(n + LOOM_IR_CHECKSUM_TRAILER);
    cr_assert(b);
    cr_assert_eq(loompb__graph__pack(m, b), n);
    uint64_t sum = loom_ir_message_checksum(b, n);
    b[n] = 0xC1;
    b[n + 1] = 0x3E;
    for (int i = 0; i < 8; i++) b[n + 2 + i] = (uint8_t)(sum >> (8 * i));
    *len = n + LOOM_IR_CHECKSUM_TRAILER;
    return b;
}

/* Replaces a string owned by an unpacked message (system allocator). */
static void set_str(char **field, const char *s) {
    free(*field);
    *field = s ? strdup(s) : NULL;
}

static void grow_u32(uint32_t **a, size_t *n, size_t new_n, uint32_t fill) {
    *a = realloc(*a, new_n * sizeof **a);
    for (size_t i = *n; i < new_n; i++) (*a)[i] = fill;
    *n = new_n;
}

typedef void (*mutator)(Loompb__Graph *m);

/* Loads LAYER_TEXT's message after fn changed it; returns the status, err gets the message. */
static loom_status load_mutated(mutator fn, loom_error *err) {
    size_t len;
    uint8_t *valid = layer_bytes(&len);
    Loompb__Graph *m = loompb__graph__unpack(NULL, len, valid);
    cr_assert(m);
    fn(m);
    size_t n;
    uint8_t *b = pack_sealed(m, &n);
    loompb__graph__free_unpacked(m, NULL);
    loom_ir_graph *g = (loom_ir_graph *)1;
    memset(err, 0, sizeof *err);
    loom_status st = loom_ir_deserialize(b, n, &g, err);
    if (st == LOOM_OK) {
        loom_ir_graph_destroy(g);
    } else {
        cr_assert(g == NULL, "no graph on failure");
        cr_assert_eq(err->status, st);
        cr_assert(strncmp(err->msg, "deserialize: ", 13) == 0, "prefix: %s", err->msg);
    }
    free(b);
    free(valid);
    return st;
}

/* ---- the crafted cases ---- */

static void m_unknown_op(Loompb__Graph *m) { set_str(&m->nodes[17]->op, "frobnicate"); }
static void m_no_op(Loompb__Graph *m) { set_str(&m->nodes[17]->op, NULL); }
static void m_dangling_operand(Loompb__Graph *m) { m->nodes[5]->inputs[1] = (uint32_t)m->n_values + 7; }
static void m_dangling_result(Loompb__Graph *m) { m->nodes[0]->outputs[0] = 100000; }
static void m_dangling_output(Loompb__Graph *m) { m->outputs[0]->value = (uint32_t)m->n_values; }
static void m_cycle(Loompb__Graph *m) { m->nodes[1]->inputs[0] = m->nodes[2]->outputs[0]; }
static void m_long_cycle(Loompb__Graph *m) { m->nodes[1]->inputs[0] = m->nodes[21]->outputs[0]; }
static void m_self_cycle(Loompb__Graph *m) { m->nodes[17]->inputs[0] = m->nodes[17]->outputs[0]; }
static void m_stored_type(Loompb__Graph *m) { m->values[m->nodes[0]->outputs[0]]->dims[1] = 255; }
static void m_stored_dtype(Loompb__Graph *m) {
    Loompb__Value *v = m->values[m->nodes[22]->outputs[0]];
    v->has_dtype = true;
    v->dtype = 1; /* f16 */
}
static void m_operand_type(Loompb__Graph *m) { m->nodes[19]->inputs[1] = 0; /* %tokens */ }
static void m_result_count(Loompb__Graph *m) { m->nodes[15]->attrs[0]->i = 0; /* swiglu */ }
static void m_defined_twice(Loompb__Graph *m) { m->nodes[3]->outputs[0] = m->nodes[2]->outputs[0]; }
static void m_decl_as_result(Loompb__Graph *m) { m->nodes[0]->outputs[0] = 2; }
static void m_never_defined(Loompb__Graph *m) {
    m->values = realloc(m->values, (m->n_values + 1) * sizeof *m->values);
    Loompb__Value *v = malloc(sizeof *v);
    loompb__value__init(v);
    m->values[m->n_values++] = v;
}
static void m_unknown_attr(Loompb__Graph *m) { set_str(&m->nodes[1]->attrs[0]->name, "epsilon"); }
static void m_attr_kind(Loompb__Graph *m) {
    m->nodes[1]->attrs[0]->value_case = LOOMPB__ATTR__VALUE_I;
    m->nodes[1]->attrs[0]->i = 1;
}
static void m_attr_twice(Loompb__Graph *m) {
    Loompb__Node *n = m->nodes[1];
    n->attrs = realloc(n->attrs, 2 * sizeof *n->attrs);
    Loompb__Attr *a = malloc(sizeof *a);
    loompb__attr__init(a);
    a->name = strdup("eps");
    a->value_case = LOOMPB__ATTR__VALUE_F;
    a->f = 1e-5f;
    n->attrs[n->n_attrs++] = a;
}
static void m_missing_attr(Loompb__Graph *m) {
    Loompb__Node *n = m->nodes[1];
    loompb__attr__free_unpacked(n->attrs[0], NULL);
    n->n_attrs = 0;
}
static void m_bad_enum(Loompb__Graph *m) {
    for (size_t i = 0; i < m->nodes[6]->n_attrs; i++)
        if (!strcmp(m->nodes[6]->attrs[i]->name, "mode")) set_str(&m->nodes[6]->attrs[i]->s, "sideways");
}
static void m_bad_dtype_attr(Loompb__Graph *m) { set_str(&m->nodes[24]->attrs[0]->s, "f8"); }
static void m_bad_shape_attr(Loompb__Graph *m) { m->nodes[3]->attrs[0]->ints->v[0] = -9; }
static void m_unknown_dtype(Loompb__Graph *m) {
    m->values[17]->has_dtype = true;
    m->values[17]->dtype = 99;
}
static void m_five_dims(Loompb__Graph *m) {
    Loompb__Value *v = m->values[2];
    v->dims = realloc(v->dims, 5 * sizeof *v->dims);
    for (size_t i = v->n_dims; i < 5; i++) v->dims[i] = 1;
    v->n_dims = 5;
}
static void m_bad_symbol(Loompb__Graph *m) { m->values[0]->dims[0] = -5; }
static void m_zero_dim(Loompb__Graph *m) { m->values[3]->dims[0] = 0; }
static void m_dup_name(Loompb__Graph *m) { set_str(&m->values[3]->name, "token_embd.weight"); }
static void m_no_name(Loompb__Graph *m) { set_str(&m->values[3]->name, NULL); }
static void m_result_named(Loompb__Graph *m) { set_str(&m->values[20]->name, "sneaky"); }
static void m_weight_size(Loompb__Graph *m) { m->values[2]->size += 1; }
static void m_offset_on_input(Loompb__Graph *m) {
    m->values[0]->has_offset = true;
    m->values[0]->offset = 5;
}
static void m_bad_kind(Loompb__Graph *m) {
    m->values[0]->has_kind = true;
    m->values[0]->kind = (Loompb__ValueKind)7;
}
static void m_newer_version(Loompb__Graph *m) { m->format_version = LOOM_IR_FORMAT_VERSION + 1; }
static void m_no_version(Loompb__Graph *m) { m->has_format_version = false; }
static void m_version_zero(Loompb__Graph *m) { m->format_version = 0; }
static void m_meta_twice(Loompb__Graph *m) { set_str(&m->metadata[0]->key, "source.file"); }
static void m_meta_no_value(Loompb__Graph *m) { m->metadata[0]->value_case = LOOMPB__META__VALUE__NOT_SET; }
static void m_too_many_operands(Loompb__Graph *m) {
    grow_u32(&m->nodes[5]->inputs, &m->nodes[5]->n_inputs, LOOM_IR_MAX_INPUTS + 1, 0);
}
static void m_extra_operand(Loompb__Graph *m) {
    grow_u32(&m->nodes[17]->inputs, &m->nodes[17]->n_inputs, 2, 0);
}
static void m_no_results(Loompb__Graph *m) { m->nodes[25]->n_outputs = 0; }
static void m_output_no_name(Loompb__Graph *m) { set_str(&m->outputs[1]->name, NULL); }
static void m_output_dup(Loompb__Graph *m) { set_str(&m->outputs[1]->name, "logits"); }
static void m_symbol_max(Loompb__Graph *m) { m->symbols[0]->max = 0; }
static void m_symbol_dup(Loompb__Graph *m) {
    m->symbols = realloc(m->symbols, 2 * sizeof *m->symbols);
    Loompb__Symbol *s = malloc(sizeof *s);
    loompb__symbol__init(s);
    s->name = strdup("T");
    s->has_max = true;
    s->max = 4;
    m->symbols[m->n_symbols++] = s;
}

typedef struct refusal {
    const char *name;
    mutator fn;
    loom_status status;
    const char *needle; /* must appear in the message */
} refusal;

static const refusal cases[] = {
    {"unknown op", m_unknown_op, LOOM_ERR_UNSUPPORTED, "unknown op 'frobnicate'"},
    {"node without op", m_no_op, LOOM_ERR_FORMAT, "node 17: no op"},
    {"dangling operand", m_dangling_operand, LOOM_ERR_FORMAT, "dangling"},
    {"dangling result", m_dangling_result, LOOM_ERR_FORMAT, "dangling"},
    {"dangling output", m_dangling_output, LOOM_ERR_FORMAT, "dangling"},
    {"cycle of two", m_cycle, LOOM_ERR_VERIFY, "cycle"},
    {"long cycle", m_long_cycle, LOOM_ERR_VERIFY, "cycle"},
    {"self cycle", m_self_cycle, LOOM_ERR_VERIFY, "uses its own result"},
    {"stored shape differs", m_stored_type, LOOM_ERR_TYPE, "inference gives f32[T,256]"},
    {"stored dtype differs", m_stored_dtype, LOOM_ERR_TYPE, "inference gives"},
    {"operand type mismatch", m_operand_type, LOOM_ERR_TYPE, "node 19 (add)"},
    {"result count mismatch", m_result_count, LOOM_ERR_TYPE, "results stored"},
    {"value defined twice", m_defined_twice, LOOM_ERR_FORMAT, "defined twice"},
    {"declaration as result", m_decl_as_result, LOOM_ERR_FORMAT, "not a node result"},
    {"result never defined", m_never_defined, LOOM_ERR_FORMAT, "no node defines it"},
    {"unknown attribute", m_unknown_attr, LOOM_ERR_FORMAT, "unknown attribute 'epsilon'"},
    {"attribute of wrong kind", m_attr_kind, LOOM_ERR_FORMAT, "wrong kind"},
    {"attribute twice", m_attr_twice, LOOM_ERR_FORMAT, "given twice"},
    {"missing attribute", m_missing_attr, LOOM_ERR_INVALID_ARGUMENT, "node 1 (fused_rms_norm)"},
    {"unknown enum value", m_bad_enum, LOOM_ERR_FORMAT, "unknown value 'sideways'"},
    {"unknown dtype attribute", m_bad_dtype_attr, LOOM_ERR_FORMAT, "unknown dtype 'f8'"},
    {"bad shape attribute", m_bad_shape_attr, LOOM_ERR_FORMAT, "neither an extent nor a symbol"},
    {"unknown value dtype", m_unknown_dtype, LOOM_ERR_FORMAT, "unknown dtype id 99"},
    {"five dims", m_five_dims, LOOM_ERR_FORMAT, "5 dims"},
    {"unknown symbol", m_bad_symbol, LOOM_ERR_FORMAT, "value 0: dim 0"},
    {"zero dim", m_zero_dim, LOOM_ERR_FORMAT, "value 3: dim 0 is 0"},
    {"duplicate name", m_dup_name, 0, "value 3: "},
    {"declaration without name", m_no_name, LOOM_ERR_FORMAT, "without a name"},
    {"named node result", m_result_named, LOOM_ERR_FORMAT, "has a name"},
    {"weight size wrong", m_weight_size, 0, "value 2: "},
    {"offset on an input", m_offset_on_input, LOOM_ERR_FORMAT, "not a weight"},
    {"unknown value kind", m_bad_kind, LOOM_ERR_FORMAT, "unknown kind 7"},
    {"newer format version", m_newer_version, LOOM_ERR_UNSUPPORTED, "newer than this build"},
    {"no format version", m_no_version, LOOM_ERR_FORMAT, "no format version"},
    {"format version 0", m_version_zero, LOOM_ERR_FORMAT, "no format version"},
    {"metadata key twice", m_meta_twice, LOOM_ERR_FORMAT, "'source.file' given twice"},
    {"metadata without value", m_meta_no_value, LOOM_ERR_FORMAT, "no value"},
    {"too many operands", m_too_many_operands, LOOM_ERR_FORMAT, "9 operands"},
    {"wrong arity", m_extra_operand, 0, "node 17 (silu)"},
    {"node without results", m_no_results, LOOM_ERR_FORMAT, "0 results"},
    {"output without name", m_output_no_name, LOOM_ERR_FORMAT, "output 1: no name"},
    {"duplicate output", m_output_dup, 0, "output 1: "},
    {"symbol max 0", m_symbol_max, 0, "symbol 0: "},
    {"duplicate symbol", m_symbol_dup, 0, "symbol 1: "},
};

Test(refusal, crafted_messages) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_error err;
        loom_status st = load_mutated(cases[i].fn, &err);
        cr_expect_neq(st, LOOM_OK, "%s: accepted", cases[i].name);
        if (cases[i].status)
            cr_expect_eq(st, cases[i].status, "%s: status %s, want %s (%s)", cases[i].name,
                         loom_status_name(st), loom_status_name(cases[i].status), err.msg);
        cr_expect(strstr(err.msg, cases[i].needle) != NULL, "%s: message lacks '%s': %s",
                  cases[i].name, cases[i].needle, err.msg);
        cr_log_info("%-26s -> %s", cases[i].name, err.msg);
    }
}

/* The unmutated message passes the same path (the harness itself accepts valid input). */
static void m_nothing(Loompb__Graph *m) { (void)m; }
Test(refusal, unmutated_message_loads) {
    loom_error err;
    cr_assert_eq(load_mutated(m_nothing, &err), LOOM_OK, "%s", err.msg);
}

/* Nodes stored out of order (but acyclic) are sorted: same graph, same bytes as the writer's. */
static void m_rotate_nodes(Loompb__Graph *m) {
    Loompb__Node *first = m->nodes[0];
    memmove(m->nodes, m->nodes + 1, (m->n_nodes - 1) * sizeof *m->nodes);
    m->nodes[m->n_nodes - 1] = first;
}
Test(refusal, out_of_order_nodes_are_sorted) {
    size_t len;
    uint8_t *valid = layer_bytes(&len);
    Loompb__Graph *m = loompb__graph__unpack(NULL, len, valid);
    cr_assert(m);
    m_rotate_nodes(m);
    size_t n;
    uint8_t *b = pack_sealed(m, &n);
    loompb__graph__free_unpacked(m, NULL);
    cr_assert(n != len || memcmp(b, valid, n) != 0, "the mutation changed the bytes");
    loom_ir_graph *g = deserialize_ok(b, n);
    uint8_t *again;
    size_t n2;
    serialize_ok(g, &again, &n2);
    cr_assert(n2 == len && memcmp(again, valid, len) == 0, "sorted graph writes the original bytes");
    free(again);
    free(b);
    free(valid);
    loom_ir_graph_destroy(g);
}

/* ---- truncation, corruption, garbage, hostile sizes ---- */

static void expect_refused(const uint8_t *b, size_t n, const char *what) {
    loom_ir_graph *g = (loom_ir_graph *)1;
    loom_error err = {0};
    loom_status st = loom_ir_deserialize(b, n, &g, &err);
    cr_assert_neq(st, LOOM_OK, "%s: accepted", what);
    cr_assert(g == NULL, "%s: graph set on failure", what);
    cr_assert(err.msg[0] != '\0', "%s: no message", what);
}

Test(refusal, every_truncation) {
    size_t len;
    uint8_t *b = layer_bytes(&len);
    char what[64];
    for (size_t n = 0; n < len; n++) {
        snprintf(what, sizeof what, "truncated to %zu of %zu", n, len);
        /* A copy of exactly n bytes, so ASan sees any read past the end. */
        uint8_t *t = malloc(n ? n : 1);
        memcpy(t, b, n);
        expect_refused(t, n, what);
        free(t);
    }
    free(b);
}

Test(refusal, truncation_at_a_field_boundary_says_truncated) {
    size_t len;
    uint8_t *b = layer_bytes(&len);
    /* Dropping just the trailer leaves a well-formed protobuf message. */
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_deserialize(b, len - LOOM_IR_CHECKSUM_TRAILER, &g, &err), LOOM_ERR_FORMAT);
    cr_assert(strstr(err.msg, "truncated"), "%s", err.msg);
    free(b);
}

Test(refusal, every_one_bit_corruption) {
    size_t len;
    uint8_t *b = layer_bytes(&len);
    char what[64];
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            b[i] ^= (uint8_t)(1u << bit);
            snprintf(what, sizeof what, "bit %d of byte %zu flipped", bit, i);
            expect_refused(b, len, what);
            b[i] ^= (uint8_t)(1u << bit);
        }
    }
    /* A corruption that keeps the protobuf well-formed (a letter of an op name) is caught by
     * the checksum, and said so. */
    uint8_t *hit = memmem(b, len, "matmul_add", 10);
    cr_assert(hit);
    hit[1] = 'b';
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_deserialize(b, len, &g, &err), LOOM_ERR_FORMAT);
    cr_assert(strstr(err.msg, "checksum mismatch"), "%s", err.msg);
    free(b);
}

Test(refusal, garbage_bytes) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    uint8_t buf[512];
    for (int iter = 0; iter < 2000; iter++) {
        size_t n = (size_t)(iter % 512);
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[i] = (uint8_t)s;
        }
        expect_refused(buf, n, "random bytes");
    }
    memset(buf, 0, sizeof buf);
    expect_refused(buf, sizeof buf, "zeros");
    memset(buf, 0xFF, sizeof buf);
    expect_refused(buf, sizeof buf, "0xFF bytes");
    expect_refused(buf, 0, "empty input");
}

/* A length prefix claiming 2^40 bytes: refused by unpack, nothing of that size allocated. */
Test(refusal, hostile_length_prefix) {
    uint8_t b[16] = {0x08, 0x01, 0x2A}; /* format_version=1, field 5 (values), length: */
    size_t n = 3;
    uint64_t huge = (uint64_t)1 << 40;
    while (huge >= 0x80) {
        b[n++] = (uint8_t)(huge | 0x80);
        huge >>= 7;
    }
    b[n++] = (uint8_t)huge;
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_deserialize(b, n, &g, &err), LOOM_ERR_FORMAT);
    cr_assert(strstr(err.msg, "unpack"), "%s", err.msg);
}

/* The densest message (100000 empty values, 2 bytes each) unpacks within the allocation budget
 * and is then refused for what it is. */
Test(refusal, dense_counts_within_budget) {
    enum { N = 100000 };
    Loompb__Graph m = LOOMPB__GRAPH__INIT;
    m.has_format_version = true;
    m.format_version = LOOM_IR_FORMAT_VERSION;
    Loompb__Value empty = LOOMPB__VALUE__INIT;
    Loompb__Value **vals = malloc(N * sizeof *vals);
    for (size_t i = 0; i < N; i++) vals[i] = &empty;
    m.n_values = N;
    m.values = vals;
    size_t n;
    uint8_t *b = pack_sealed(&m, &n);
    cr_assert_lt(n, (size_t)3 * N);
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_deserialize(b, n, &g, &err), LOOM_ERR_FORMAT);
    cr_assert(strstr(err.msg, "no node defines it"), "%s", err.msg);
    free(vals);
    free(b);
}

Test(refusal, null_arguments) {
    loom_ir_graph *g;
    loom_error err = {0};
    cr_assert_eq(loom_ir_deserialize(NULL, 4, &g, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(loom_ir_deserialize("x", 1, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    uint8_t *b;
    size_t n;
    cr_assert_eq(loom_ir_serialize(NULL, &b, &n, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(b == NULL && n == 0);
}
