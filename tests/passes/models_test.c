/* models_test.c: the default pipeline (-O2) on every llama/qwen test model: the golden models
 * of $LOOM_TESTDATA/golden (llama in six weight types, qwen3, qwen2), models/stories260K,
 * models/llama-2-tiny-random, and a qwen3 made by mkmodel (always available).
 *
 * - Op counts per layer: each layer holds exactly matmul_triple (the attention norm folded in
 *   as its prenorm), rope_kv_attention (the attention with its prologue, qwen3's per-head Q/K
 *   norms inside: 8 operands, else 6), matmul_add, matmul_pair (the FFN norm folded in),
 *   matmul_add, in that order
 *   (reshape views aside); before the layers only the embedding, after them the final
 *   fused_rms_norm and the output matmul (no prenorm: see passes/fuse_norm_matmul.c).
 * - Logits: -O2 equals -O0 on the CPU backend within 1e-5 (max |diff| / the row's logit range)
 *   and, on the golden models, still matches `<model>.S7.deq.logits.bin` within 1e-4 of the
 *   range (testdata README). -O2 without fuse-rope-kv-write, without fuse-rope-kv-attention, and
 *   without fuse-norm-matmul, give the same logits bit for bit (their CPU kernels run the
 *   unfused chain's float operations in the same order).
 * A node belongs to layer L when it reads a `blk.L.` weight or `kv.L.` state; other nodes
 * belong to the layer of the node before them. Missing testdata: skipped (failed when
 * LOOM_REQUIRE_TESTDATA=1), except the mkmodel case.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/loom_impl.h"
#include "ir/ir.h"
#include "loom.h"
#include "tests/common/testdata.h"
#include "tools/mkmodel.h"

static loom_model *load(const char *path, const char *passes) {
    loom_model_options o;
    loom_model_options_init(&o);
    o.passes = passes;
    o.n_ctx = 64;
    o.max_tokens = 16;
    loom_model *m = NULL;
    loom_error err = {0};
    cr_assert(!loom_model_load(path, &o, &m, &err), "%s", err.msg);
    return m;
}

/* ---- op counts per layer ---- */

/* Layer of the weight/state named s ("blk.3.x" / "kv.3.k"), -1 for others. */
static int layer_of_name(const char *s) {
    if (!s) return -1;
    if (!strncmp(s, "blk.", 4)) return atoi(s + 4);
    if (!strncmp(s, "kv.", 3)) return atoi(s + 3);
    return -1;
}

/* Checks the -O2 graph of a model: every layer's op sequence (reshape aside) is `want`, its
 * triple and pair with a prenorm, the prologue is get_rows, the epilogue the final norm and the
 * output matmul. */
static void check_layers(const char *what, const loom_ir_graph *g, bool qk_norm) {
    static const char *want[] = {"matmul_triple", "rope_kv_attention", "matmul_add",
                                 "matmul_pair", "matmul_add"};
    size_t n_want = sizeof want / sizeof *want;
    const loom_ir_meta *nl = loom_ir_meta_get(g, "loom.n_layer");
    cr_assert(nl);
    int n_layer = (int)nl->i, cur = -1; /* -1: before the layers, n_layer: after */
    char got[66][512];
    memset(got, 0, sizeof got);
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next) {
        const loom_ir_node *n = loom_ir_node_get(g, id);
        for (uint32_t i = 0; i < n->n_in; i++) {
            const loom_ir_value *v = loom_ir_value_get(g, n->in[i]);
            if (v->kind != LOOM_IR_VALUE_WEIGHT && v->kind != LOOM_IR_VALUE_STATE) continue;
            int l = layer_of_name(v->name);
            if (l >= 0) cur = l;
            else if (cur >= 0) cur = n_layer; /* output_norm / output after the layers */
        }
        if (n->op == LOOM_IR_OP_RESHAPE) continue;
        bool wants_norm = n->op == LOOM_IR_OP_MATMUL_TRIPLE || n->op == LOOM_IR_OP_MATMUL_PAIR;
        cr_expect_eq(loom_ir_prenorm_slot(n->op, n->n_in) != LOOM_IR_NO_SLOT, wants_norm,
                     "%s: %s with%s a prenorm", what, loom_ir_op_info_get(n->op)->name,
                     wants_norm ? "out" : "");
        if (n->op == LOOM_IR_OP_ROPE_KV_ATTENTION)
            cr_expect_eq(n->n_in, qk_norm ? 8 : 6, "%s: rope_kv_attention with%s the Q/K norms",
                         what, qk_norm ? "" : "out");
        cr_assert(cur >= -1 && cur <= n_layer && n_layer < 64, "%s: layer %d", what, cur);
        char *s = got[cur + 1];
        size_t k = strlen(s);
        snprintf(s + k, sizeof got[0] - k, "%s%s", k ? " " : "", loom_ir_op_info_get(n->op)->name);
    }
    char want_s[512] = "";
    for (size_t i = 0; i < n_want; i++)
        snprintf(want_s + strlen(want_s), sizeof want_s - strlen(want_s), "%s%s", i ? " " : "",
                 want[i]);
    cr_expect_str_eq(got[0], "get_rows", "%s: before the layers: %s", what, got[0]);
    for (int l = 0; l < n_layer; l++)
        cr_expect_str_eq(got[l + 1], want_s, "%s: layer %d is\n  %s\nwant\n  %s", what, l,
                         got[l + 1], want_s);
    cr_expect_str_eq(got[n_layer + 1], "fused_rms_norm matmul", "%s: after the layers: %s", what,
                     got[n_layer + 1]);
    const loom_ir_meta *p = loom_ir_meta_get(g, "passes");
    cr_expect(p && p->kind == LOOM_IR_META_STRING && !strcmp(p->s,
              "fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"
              "fuse-rope-kv-attention,fuse-norm-matmul,cse,dce"), "%s", what);
}

/* ---- logits ---- */

/* max |a - b| over the row / (max - min of ref). */
static double row_rel(const float *a, const float *ref, int n) {
    float mx = ref[0], mn = ref[0];
    double d = 0;
    for (int i = 0; i < n; i++) {
        mx = fmaxf(mx, ref[i]);
        mn = fminf(mn, ref[i]);
        d = fmax(d, fabs((double)a[i] - ref[i]));
    }
    return d / fmax((double)mx - mn, 1e-30);
}

static float *eval(loom_model *m, const int32_t *toks, int n, int32_t *rows) {
    loom_session *s = NULL;
    loom_error err = {0};
    cr_assert(!loom_session_create(m, NULL, &s, &err), "%s", err.msg);
    cr_assert(!loom_session_eval(s, toks, n, &err), "%s", err.msg);
    const float *l = loom_session_logits(s, rows);
    size_t bytes = (size_t)*rows * (size_t)loom_model_n_vocab(m) * sizeof(float);
    float *copy = malloc(bytes);
    cr_assert(copy);
    memcpy(copy, l, bytes);
    loom_session_destroy(s);
    return copy;
}

/* Loads path at -O0 and -O2, checks the -O2 layers and that both give the same logits for
 * toks; with ref (golden .deq logits, n rows) also that -O2 matches it. */
static void check_model(const char *path, bool qk_norm, const int32_t *toks, int n,
                        const char *ref_path) {
    loom_model *m0 = load(path, "-O0"), *m2 = load(path, "-O2");
    /* -O2 less one fusion each: fuse-rope-kv-write (and so the attention fold too),
     * fuse-rope-kv-attention, fuse-norm-matmul. */
    static const char *less[3][2] = {
        {"fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-norm-matmul,cse,dce",
         "fuse-rope-kv-write"},
        {"fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"
         "fuse-norm-matmul,cse,dce",
         "fuse-rope-kv-attention"},
        {"fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"
         "fuse-rope-kv-attention,cse,dce",
         "fuse-norm-matmul"}};
    check_layers(path, loom_model_graph(m2), qk_norm);
    cr_assert_null(loom_ir_meta_get(loom_model_graph(m0), "passes"));
    int32_t r0, r2, ru, V = loom_model_n_vocab(m0);
    float *a = eval(m0, toks, n, &r0), *b = eval(m2, toks, n, &r2);
    cr_assert(r0 == n && r2 == n);
    for (int k = 0; k < 3; k++) {
        loom_model *mu = load(path, less[k][0]);
        float *u = eval(mu, toks, n, &ru);
        cr_assert(ru == n);
        cr_expect(!memcmp(b, u, (size_t)n * V * sizeof *b),
                  "%s: -O2 logits differ from -O2 without %s", path, less[k][1]);
        free(u);
        loom_model_destroy(mu);
    }
    for (int r = 0; r < n; r++) {
        double rel = row_rel(b + (size_t)r * V, a + (size_t)r * V, V);
        cr_expect(rel <= 1e-5, "%s row %d: -O2 differs from -O0 by %g of the range", path, r, rel);
    }
    if (ref_path) {
        FILE *f = fopen(ref_path, "rb");
        cr_assert(f, "cannot open %s", ref_path);
        int32_t hdr[2];
        cr_assert(fread(hdr, 4, 2, f) == 2 && hdr[0] == n && hdr[1] == V, "%s", ref_path);
        float *ref = malloc((size_t)n * V * sizeof *ref);
        cr_assert(ref && fread(ref, sizeof *ref, (size_t)n * V, f) == (size_t)n * V);
        fclose(f);
        for (int r = 0; r < n; r++) {
            double rel = row_rel(b + (size_t)r * V, ref + (size_t)r * V, V);
            cr_expect(rel <= 1e-4, "%s row %d: -O2 is %g of the range from the reference", path,
                      r, rel);
        }
        free(ref);
    }
    free(a);
    free(b);
    loom_model_destroy(m0);
    loom_model_destroy(m2);
}

Test(models, golden_models) {
    static const char *names[] = {"tiny_llama_f32", "tiny_llama_f16", "tiny_llama_q8_0",
                                  "tiny_llama_q6_k", "tiny_llama_q5_k", "tiny_llama_q4_k",
                                  "tiny_qwen3_q4km", "tiny_qwen2_q4km"};
    static const int32_t s7[] = {338, 281, 93, 503, 475, 149, 364}; /* golden/sequences.txt S7 */
    const char *dir = loom_test_testdata("golden/sequences.txt");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[1024], ref[1024];
        snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, names[i]);
        snprintf(ref, sizeof ref, "%s/golden/%s.S7.deq.logits.bin", dir, names[i]);
        check_model(path, strstr(names[i], "qwen3") != NULL, s7, 7, ref);
    }
}

Test(models, stories260k_and_llama2_tiny_random) {
    const char *dir = loom_test_testdata("golden/sequences.txt");
    char path[1024];
    static const int32_t once[] = {1, 403, 407, 261, 378}; /* BOS "Once upon a time" */
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", dir);
    check_model(path, false, once, 5, NULL);
    static const int32_t toks[] = {1, 450, 4996, 17354, 1701};
    snprintf(path, sizeof path, "%s/models/llama-2-tiny-random.gguf", dir);
    check_model(path, false, toks, 5, NULL);
}

Test(models, mkmodel_qwen3) {
    const char *tmp = getenv("TEST_TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/passes_qwen3.gguf", tmp && *tmp ? tmp : "/tmp");
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "qwen3");
    c.n_layer = 3;
    c.n_ctx = 128;
    c.seed = 5;
    loom_error err = {0};
    cr_assert(!loom_mkmodel_write(&c, path, &err), "%s", err.msg);
    static const int32_t toks[] = {1, 2, 300, 77, 5, 260};
    check_model(path, true, toks, 6, NULL);
    remove(path);
}
