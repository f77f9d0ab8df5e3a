/* lower_test.c: lowering GGUF metadata to the step graph (loaders/lower.h).
 *
 * - Every model of ../shared/testdata lowers to a graph that verifies, with the op counts of the
 *   unfused decoder per layer, the hyperparameters in the metadata (defaults where a key is
 *   missing: stories260K has no rope.freq_base, qwen2 no key_length), NORM/NEOX RoPE per
 *   architecture, qwen2's biases and qwen3's Q/K norms.
 * - Small models written with the GGUF writer: tied output (no output.weight), linear RoPE
 *   scaling, and the refusals (another architecture, a missing tensor, a wrong shape, an
 *   unsupported weight type, a missing required key), each naming what is wrong and listing
 *   what is supported.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"
#include "tests/common/testdata.h"

/* ---------------------------------------------------------------- helpers */

typedef struct op_counts {
    int n[LOOM_IR_OP_COUNT];
} op_counts;

static op_counts count_ops(const loom_ir_graph *g) {
    op_counts c = {{0}};
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        c.n[loom_ir_node_get(g, id)->op]++;
    return c;
}

static int64_t meta_i(const loom_ir_graph *g, const char *key) {
    const loom_ir_meta *m = loom_ir_meta_get(g, key);
    cr_assert(m && m->kind == LOOM_IR_META_INT, "metadata %s missing or not an int", key);
    return m->i;
}

static double meta_f(const loom_ir_graph *g, const char *key) {
    const loom_ir_meta *m = loom_ir_meta_get(g, key);
    cr_assert(m && m->kind == LOOM_IR_META_FLOAT, "metadata %s missing or not a float", key);
    return m->f;
}

static const char *meta_s(const loom_ir_graph *g, const char *key) {
    const loom_ir_meta *m = loom_ir_meta_get(g, key);
    cr_assert(m && m->kind == LOOM_IR_META_STRING, "metadata %s missing or not a string", key);
    return m->s;
}

static loom_ir_graph *lower_file(const char *path, loom_gguf **file) {
    loom_error err = {0};
    loom_gguf *f = NULL;
    loom_ir_graph *g = NULL;
    cr_assert_eq(loom_gguf_open(path, &f, &err), LOOM_OK, "%s", err.msg);
    loom_lower_options o;
    loom_lower_options_init(&o);
    o.n_ctx = 256;
    o.max_tokens = 64;
    o.source_path = path;
    cr_assert_eq(loom_lower_gguf(f, &o, &g, &err), LOOM_OK, "%s: %s", path, err.msg);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    if (file) *file = f;
    else loom_gguf_close(f);
    return g;
}

/* The first node of op `op`, or NULL. */
static const loom_ir_node *first_op(const loom_ir_graph *g, loom_ir_op op) {
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        if (loom_ir_node_get(g, id)->op == op) return loom_ir_node_get(g, id);
    return NULL;
}

/* ---------------------------------------------------------------- the test models */

typedef struct model_case {
    const char *file, *arch;
    int layers, head_dim, n_rot, n_vocab;
    double freq_base;
    bool neox, bias, qk_norm;
} model_case;

static const model_case cases[] = {
    {"golden/tiny_qwen3_q4km.gguf", "qwen3", 2, 64, 64, 512, 1e6, true, false, true},
    {"golden/tiny_qwen2_q4km.gguf", "qwen2", 2, 64, 64, 512, 1e6, true, true, false},
    {"golden/tiny_llama_f32.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"golden/tiny_llama_f16.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"golden/tiny_llama_q8_0.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"golden/tiny_llama_q6_k.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"golden/tiny_llama_q5_k.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"golden/tiny_llama_q4_k.gguf", "llama", 2, 64, 64, 512, 1e4, false, false, false},
    {"models/stories260K.gguf", "llama", 5, 8, 8, 512, 1e4, false, false, false},
    {"models/llama-2-tiny-random.gguf", "llama", 1, 4, 4, 32000, 1e4, false, false, false},
};

Test(lower, every_test_model_lowers_with_the_decoder_op_counts) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const model_case *c = &cases[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, c->file);
        loom_ir_graph *g = lower_file(path, NULL);
        cr_assert_str_eq(meta_s(g, "loom.arch"), c->arch, "%s", c->file);
        int L = c->layers;
        cr_assert_eq(meta_i(g, "loom.n_layer"), L, "%s", c->file);
        cr_assert_eq(meta_i(g, "loom.head_dim"), c->head_dim, "%s", c->file);
        cr_assert_eq(meta_i(g, "loom.n_rot"), c->n_rot, "%s", c->file);
        cr_assert_eq(meta_i(g, "loom.n_vocab"), c->n_vocab, "%s", c->file);
        cr_assert_eq(meta_i(g, "loom.n_ctx"), 256);
        cr_assert_eq(meta_i(g, "loom.max_tokens"), 64);
        cr_assert_float_eq(meta_f(g, "loom.rope_freq_base"), c->freq_base, 1e-3, "%s", c->file);
        cr_assert_str_eq(meta_s(g, "loom.rope_mode"), c->neox ? "neox" : "norm", "%s", c->file);
        cr_assert_eq(strlen(meta_s(g, "source.checksum")), 16);
        cr_assert(strstr(c->file, meta_s(g, "source.file")), "%s", meta_s(g, "source.file"));
        op_counts n = count_ops(g);
        int qk = c->qk_norm ? 2 : 0, bias = c->bias ? 3 : 0;
        cr_expect_eq(n.n[LOOM_IR_OP_GET_ROWS], 1, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_RMS_NORM], (2 + qk) * L + 1, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_MUL], (3 + qk) * L + 1, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_MATMUL], 7 * L + 1, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_ADD], (2 + bias) * L, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_RESHAPE], 3 * L, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_ROPE], 2 * L, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_KV_WRITE], 2 * L, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_ATTENTION], L, "%s", c->file);
        cr_expect_eq(n.n[LOOM_IR_OP_SILU], L, "%s", c->file);
        for (int op = LOOM_IR_OP_FUSED_RMS_NORM; op < LOOM_IR_OP_COUNT; op++)
            cr_expect_eq(n.n[op], 0, "%s: lowering made a fused op", c->file);
        cr_assert_eq(loom_ir_state_count(g), 2u * L);
        /* Interface: tokens/positions i32[T], logits f32[T, n_vocab]. */
        const loom_ir_value *logits = loom_ir_value_get(g, loom_ir_find_output(g, "logits"));
        cr_assert_eq(logits->type.rank, 2);
        cr_assert_eq(logits->type.dims[1], c->n_vocab);
        cr_assert(loom_ir_dim_is_sym(logits->type.dims[0]));
        cr_assert_neq(loom_ir_find_value(g, "tokens"), LOOM_IR_NO_VALUE);
        cr_assert_neq(loom_ir_find_value(g, "positions"), LOOM_IR_NO_VALUE);
        /* Attributes of the first rope and attention. */
        const loom_ir_node *rope = first_op(g, LOOM_IR_OP_ROPE);
        cr_assert_eq(loom_ir_node_attr_int(rope, LOOM_IR_ATTR_MODE, -1),
                     c->neox ? LOOM_IR_ROPE_NEOX : LOOM_IR_ROPE_NORM);
        cr_assert_eq(loom_ir_node_attr_int(rope, LOOM_IR_ATTR_N_ROT, -1), c->n_rot);
        const loom_ir_node *attn = first_op(g, LOOM_IR_OP_ATTENTION);
        cr_assert_float_eq(loom_ir_node_attr_float(attn, LOOM_IR_ATTR_SCALE, 0),
                           1.0 / sqrt((double)c->head_dim), 1e-6);
        /* The text form round-trips. */
        loom_error err = {0};
        char *text = loom_ir_print_string(g, &err);
        cr_assert(text, "%s", err.msg);
        loom_ir_graph *g2 = NULL;
        cr_assert_eq(loom_ir_parse(text, strlen(text), &g2, &err), LOOM_OK, "%s", err.msg);
        cr_assert(loom_ir_graph_equal(g, g2, &err), "%s", err.msg);
        free(text);
        loom_ir_graph_destroy(g2);
        loom_ir_graph_destroy(g);
    }
}

/* ---------------------------------------------------------------- written models */

/* A 1-layer llama-like file: E=32, 2 heads of 16, 1 KV head, F=64, V=40. Hooks change it. */
typedef struct spec {
    const char *arch;
    const char *skip;       /* a tensor left out */
    const char *bad_shape;  /* a tensor written with its dims swapped/grown */
    const char *q4_0;       /* a matrix written as Q4_0 */
    bool no_block_count;
    uint32_t layers;        /* block_count written (0: 1) */
    bool no_output;
    bool rope_freqs;        /* add a rope_freqs.weight tensor */
    float rope_linear;      /* rope.scaling.factor (type linear) when > 0 */
} spec;

static char *write_model(const spec *s) {
    static char path[256];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(path, sizeof path, "%s/lower_XXXXXX", tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    loom_error err = {0};
    loom_gguf_writer *w = NULL;
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    const char *arch = s->arch ? s->arch : "llama";
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    cr_assert_eq(loom_gguf_writer_set_string(w, "general.architecture", arch, &err), LOOM_OK);
    if (!s->no_block_count)
        loom_gguf_writer_set_u32(w, KEY("block_count"), s->layers ? s->layers : 1, &err);
    loom_gguf_writer_set_u32(w, KEY("embedding_length"), 32, &err);
    loom_gguf_writer_set_u32(w, KEY("feed_forward_length"), 64, &err);
    loom_gguf_writer_set_u32(w, KEY("attention.head_count"), 2, &err);
    loom_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 1, &err);
    loom_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f, &err);
    if (s->rope_linear > 0) {
        loom_gguf_writer_set_string(w, KEY("rope.scaling.type"), "linear", &err);
        loom_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), s->rope_linear, &err);
    }
#undef KEY
    struct { const char *name; int64_t ne0, ne1; } t[] = {
        {"token_embd.weight", 32, 40},       {"blk.0.attn_norm.weight", 32, 0},
        {"blk.0.attn_q.weight", 32, 32},     {"blk.0.attn_k.weight", 32, 16},
        {"blk.0.attn_v.weight", 32, 16},     {"blk.0.attn_output.weight", 32, 32},
        {"blk.0.ffn_norm.weight", 32, 0},    {"blk.0.ffn_gate.weight", 32, 64},
        {"blk.0.ffn_up.weight", 32, 64},     {"blk.0.ffn_down.weight", 64, 32},
        {"output_norm.weight", 32, 0},       {"output.weight", 32, 40},
    };
    static char zeros[64 * 64 * 4];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (s->skip && !strcmp(s->skip, t[i].name)) continue;
        if (s->no_output && !strcmp(t[i].name, "output.weight")) continue;
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        if (s->bad_shape && !strcmp(s->bad_shape, t[i].name)) ne[1] += 8;
        loom_ggml_type type = s->q4_0 && !strcmp(s->q4_0, t[i].name) ? LOOM_GGML_Q4_0 : LOOM_GGML_F32;
        uint32_t nd = ne[1] ? 2 : 1;
        int64_t bytes = loom_ggml_row_bytes(type, ne[0]) * (nd == 2 ? ne[1] : 1);
        cr_assert_eq(loom_gguf_writer_add_tensor_data(w, t[i].name, type, nd, ne, zeros,
                                                      (uint64_t)bytes, &err),
                     LOOM_OK, "%s", err.msg);
    }
    if (s->rope_freqs) {
        int64_t ne[1] = {8};
        cr_assert_eq(loom_gguf_writer_add_tensor_data(w, "rope_freqs.weight", LOOM_GGML_F32, 1, ne,
                                                      zeros, 32, &err),
                     LOOM_OK, "%s", err.msg);
    }
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
    return path;
}

/* Lowers the model of s; returns the status, err and (on success) the graph. */
static loom_status lower_spec(const spec *s, loom_error *err, loom_ir_graph **g) {
    char *path = write_model(s);
    loom_gguf *f = NULL;
    *g = NULL;
    cr_assert_eq(loom_gguf_open(path, &f, err), LOOM_OK, "%s", err->msg);
    loom_status st = loom_lower_gguf(f, NULL, g, err);
    loom_gguf_close(f);
    unlink(path);
    return st;
}

Test(lower, tied_output_and_linear_rope_scaling) {
    loom_error err = {0};
    loom_ir_graph *g = NULL;
    spec s = {.no_output = true, .rope_linear = 4.0f};
    cr_assert_eq(lower_spec(&s, &err, &g), LOOM_OK, "%s", err.msg);
    cr_assert_eq(meta_i(g, "loom.tied_output"), 1);
    cr_assert_eq(meta_i(g, "loom.head_dim"), 16);
    cr_assert_eq(meta_i(g, "loom.n_head_kv"), 1);
    /* Defaults: no rope.freq_base, no context_length. */
    cr_assert_float_eq(meta_f(g, "loom.rope_freq_base"), 10000.0, 1e-3);
    cr_assert_eq(meta_i(g, "loom.n_ctx_train"), 2048);
    cr_assert_eq(meta_i(g, "loom.n_ctx"), 2048);
    cr_assert_eq(meta_i(g, "loom.max_tokens"), 512);
    const loom_ir_node *rope = first_op(g, LOOM_IR_OP_ROPE);
    cr_assert_float_eq(loom_ir_node_attr_float(rope, LOOM_IR_ATTR_FREQ_SCALE, 0), 0.25, 1e-7);
    /* The logits come from a matmul by token_embd.weight. */
    const loom_ir_value *logits = loom_ir_value_get(g, loom_ir_find_output(g, "logits"));
    const loom_ir_node *last = loom_ir_node_get(g, logits->def);
    cr_assert_eq(last->op, LOOM_IR_OP_MATMUL);
    cr_assert_str_eq(loom_ir_value_get(g, last->in[1])->name, "token_embd.weight");
    cr_assert_eq(loom_ir_find_value(g, "output.weight"), LOOM_IR_NO_VALUE);
    loom_ir_graph_destroy(g);
}

typedef struct refusal {
    spec s;
    loom_status status;
    const char *must_contain[3];
} refusal;

Test(lower, refusals_name_the_problem_and_what_is_supported) {
    const refusal cases_[] = {
        {{.arch = "gpt2"}, LOOM_ERR_UNSUPPORTED, {"'gpt2'", "llama, qwen2, qwen3", NULL}},
        {{.arch = "qwen2"}, LOOM_ERR_NOT_FOUND, {"blk.0.attn_q.bias", "qwen2", NULL}},
        {{.skip = "blk.0.ffn_up.weight"}, LOOM_ERR_NOT_FOUND, {"blk.0.ffn_up.weight", "missing", NULL}},
        {{.skip = "output_norm.weight"}, LOOM_ERR_NOT_FOUND, {"output_norm.weight", NULL, NULL}},
        {{.bad_shape = "blk.0.attn_k.weight"}, LOOM_ERR_FORMAT,
         {"blk.0.attn_k.weight", "[32, 24]", "expected [32, 16]"}},
        {{.q4_0 = "blk.0.attn_q.weight"}, LOOM_ERR_UNSUPPORTED,
         {"blk.0.attn_q.weight", "Q4_0", "Q4_K"}},
        {{.no_block_count = true}, LOOM_ERR_NOT_FOUND, {"llama.block_count", NULL, NULL}},
        {{.layers = 1000000}, LOOM_ERR_FORMAT, {"block_count 1000000", "12", NULL}},
        {{.rope_freqs = true}, LOOM_ERR_UNSUPPORTED, {"rope_freqs.weight", "linear", NULL}},
    };
    for (size_t i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        loom_error err = {0};
        loom_ir_graph *g = (loom_ir_graph *)1;
        loom_status st = lower_spec(&cases_[i].s, &err, &g);
        cr_expect_eq(st, cases_[i].status, "case %zu: status %d, want %d (%s)", i, st,
                     cases_[i].status, err.msg);
        cr_expect_null(g, "case %zu: a graph despite the error", i);
        for (int k = 0; k < 3 && cases_[i].must_contain[k]; k++)
            cr_expect(strstr(err.msg, cases_[i].must_contain[k]), "case %zu: '%s' lacks '%s'", i,
                      err.msg, cases_[i].must_contain[k]);
    }
}
