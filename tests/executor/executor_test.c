/* executor_test.c: the executor and its CPU backend on graphs written in the IR's text form.
 *
 * - Every fused op (fused_rms_norm, matmul_triple with biases, matmul_pair with and without the
 *   SwiGLU epilogue, matmul_add) gives bit for bit what its primitive chain gives (the kernels
 *   promise it), on a mix of weight types (Q4_K, Q6_K, Q8_0, F32).
 * - kv_write + attention against a double-precision reference, over two steps; a step with
 *   non-consecutive positions gives the rows of a consecutive run.
 * - softmax, argmax, convert, reshape dispatch.
 * - The buffer plan reuses memory; refusals: unbound input, position past the cache, a node the
 *   backend cannot run.
 * - A backend's reserve_node comes once for every node, right after supports_op accepted it, and
 *   its error refuses the graph with the node named.
 * - The CPU backend measures its copy bandwidth (vtable copy_bandwidth, > 0 GB/s); a backend
 *   without the member is refused with LOOM_ERR_UNSUPPORTED.
 * Weights live in test memory and are handed over by a resolver, as the GGUF mapping is.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "executor/backend_common.h"
#include "executor/executor.h"
#include "executor/plan.h"
#include "ir/ir.h"
#include "kernels/quant/quant.h"

/* ---------------------------------------------------------------- fixtures */

typedef struct named_buf {
    const char *name;
    void *data;
    size_t bytes;
} named_buf;

typedef struct weights {
    named_buf w[16];
    int n;
} weights;

static loom_status resolve(void *ctx, const loom_ir_value *w, const void **data, loom_error *err) {
    weights *ws = ctx;
    for (int i = 0; i < ws->n; i++)
        if (!strcmp(ws->w[i].name, w->name)) {
            if (ws->w[i].bytes != w->size)
                return loom_error_set(err, LOOM_ERR_FORMAT, "weight %s: %zu bytes, graph says %llu",
                                      w->name, ws->w[i].bytes, (unsigned long long)w->size);
            *data = ws->w[i].data;
            return LOOM_OK;
        }
    return loom_error_set(err, LOOM_ERR_NOT_FOUND, "no weight %s", w->name);
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / 8388608.0) - 1.0f;
}

/* Adds weight `name` of rows x cols values ~ scale * U(-1,1) (+ offset), quantized to type. */
static void add_weight(weights *ws, const char *name, loom_ggml_type type, int64_t rows,
                       int64_t cols, float scale, float offset) {
    int64_t rb = loom_ggml_row_bytes(type, cols);
    cr_assert(rb > 0);
    float *f = malloc((size_t)cols * sizeof *f);
    char *q = malloc((size_t)(rb * rows));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) f[c] = offset + scale * frand();
        cr_assert_eq(loom_quantize_row(type, f, q + r * rb, cols), LOOM_OK);
    }
    free(f);
    ws->w[ws->n++] = (named_buf){name, q, (size_t)(rb * rows)};
}

static void free_weights(weights *ws) {
    for (int i = 0; i < ws->n; i++) free(ws->w[i].data);
}

static loom_ir_graph *parse(const char *text) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse(text, strlen(text), &g, &err), LOOM_OK, "%s", err.msg);
    return g;
}

static loom_exec *exec_create(const loom_ir_graph *g, weights *ws) {
    loom_exec_backend *be = NULL;
    loom_exec *e = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_exec_cpu_backend_create(2, &be, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_create(g, be, resolve, ws, &e, &err), LOOM_OK, "%s", err.msg);
    return e;
}

/* ---------------------------------------------------------------- fused == unfused */

static const char *decl =
    "symbol T max=4\n"
    "input %x : f32[T,256]\n"
    "input %r : f32[T,64]\n"
    "weight @n : f32[256]\n"
    "weight @a : q4_k[64,256]\n"
    "weight @b : q6_k[64,256]\n"
    "weight @c : q8_0[32,256]\n"
    "weight @ba : f32[64]\n"
    "weight @bb : f32[64]\n"
    "weight @bc : f32[32]\n";

static const char *unfused =
    "%h0 = rms_norm(%x) {eps=1e-5}\n"
    "%h = mul(%h0, @n)\n"
    "%qa = matmul(%h, @a)\n"
    "%qb = matmul(%h, @b)\n"
    "%qc = matmul(%h, @c)\n"
    "%ta = add(%qa, @ba)\n"
    "%tb = add(%qb, @bb)\n"
    "%tc = add(%qc, @bc)\n"
    "%s = silu(%qa)\n"
    "%sw = mul(%s, %qb)\n"
    "%ma = add(%qa, %r)\n"
    "output h = %h\n"
    "output t0 = %ta\n"
    "output t1 = %tb\n"
    "output t2 = %tc\n"
    "output pa = %qa\n"
    "output pb = %qb\n"
    "output sw = %sw\n"
    "output ma = %ma\n";

static const char *fused =
    "%h = fused_rms_norm(%x, @n) {eps=1e-5}\n"
    "%ta, %tb, %tc = matmul_triple(%h, @a, @b, @c, @ba, @bb, @bc)\n"
    "%pa, %pb = matmul_pair(%h, @a, @b) {swiglu=0}\n"
    "%sw = matmul_pair(%h, @a, @b) {swiglu=1}\n"
    "%ma = matmul_add(%h, @a, %r)\n"
    "output h = %h\n"
    "output t0 = %ta\n"
    "output t1 = %tb\n"
    "output t2 = %tc\n"
    "output pa = %pa\n"
    "output pb = %pb\n"
    "output sw = %sw\n"
    "output ma = %ma\n";

Test(executor, fused_ops_equal_their_primitive_chains_bit_for_bit) {
    weights ws = {0};
    add_weight(&ws, "n", LOOM_GGML_F32, 1, 256, 0.1f, 1.0f);
    add_weight(&ws, "a", LOOM_GGML_Q4_K, 64, 256, 0.05f, 0.0f);
    add_weight(&ws, "b", LOOM_GGML_Q6_K, 64, 256, 0.05f, 0.0f);
    add_weight(&ws, "c", LOOM_GGML_Q8_0, 32, 256, 0.05f, 0.0f);
    add_weight(&ws, "ba", LOOM_GGML_F32, 1, 64, 0.1f, 0.0f);
    add_weight(&ws, "bb", LOOM_GGML_F32, 1, 64, 0.1f, 0.0f);
    add_weight(&ws, "bc", LOOM_GGML_F32, 1, 32, 0.1f, 0.0f);
    char text_u[4096], text_f[4096];
    snprintf(text_u, sizeof text_u, "%s%s", decl, unfused);
    snprintf(text_f, sizeof text_f, "%s%s", decl, fused);
    loom_ir_graph *gu = parse(text_u), *gf = parse(text_f);
    loom_exec *eu = exec_create(gu, &ws), *ef = exec_create(gf, &ws);
    float x[3 * 256], r[3 * 64];
    for (int i = 0; i < 3 * 256; i++) x[i] = frand();
    for (int i = 0; i < 3 * 64; i++) r[i] = frand();
    int64_t T = 3;
    loom_exec_binding in[2] = {{"x", x}, {"r", r}};
    loom_error err = {0};
    cr_assert_eq(loom_exec_run(eu, &T, in, 2, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_run(ef, &T, in, 2, &err), LOOM_OK, "%s", err.msg);
    const char *outs[] = {"h", "t0", "t1", "t2", "pa", "pb", "sw", "ma"};
    for (int o = 0; o < 8; o++) {
        float a[3 * 256], b[3 * 256];
        size_t na = 0, nb = 0;
        cr_assert_eq(loom_exec_read_output(eu, outs[o], a, sizeof a, &na, &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(loom_exec_read_output(ef, outs[o], b, sizeof b, &nb, &err), LOOM_OK, "%s", err.msg);
        cr_assert_eq(na, nb);
        cr_assert_gt(na, 0);
        bool nonzero = false;
        for (size_t i = 0; i < na / 4; i++) nonzero |= a[i] != 0.0f;
        cr_assert(nonzero, "output %s is all zeros", outs[o]);
        cr_expect(!memcmp(a, b, na), "output %s: fused differs from unfused", outs[o]);
    }
    loom_exec_destroy(eu);
    loom_exec_destroy(ef);
    loom_ir_graph_destroy(gu);
    loom_ir_graph_destroy(gf);
    free_weights(&ws);
}

/* ---------------------------------------------------------------- attention over the cache */

static const char *attn_graph =
    "symbol T max=4\n"
    "input %q : f32[T,4,8]\n"
    "input %k : f32[T,2,8]\n"
    "input %v : f32[T,16]\n"
    "input %positions : i32[T]\n"
    "state @kc : f32[6,2,8]\n"
    "state @vc : f32[6,2,8]\n"
    "%kc1 = kv_write(@kc, %k, %positions)\n"
    "%vc1 = kv_write(@vc, %v, %positions)\n"
    "%a = attention(%q, %kc1, %vc1, %positions) {n_head=4, n_kv_head=2, head_dim=8, scale=0.35}\n"
    "%a3 = reshape(%a) {shape=[T,4,8]}\n"
    "%sm = softmax(%a3)\n"
    "%am = argmax(%a)\n"
    "%h = convert(%a) {dtype=f16}\n"
    "%back = convert(%h) {dtype=f32}\n"
    "output a = %a\n"
    "output sm = %sm\n"
    "output am = %am\n"
    "output back = %back\n";

/* q[p], k[p], v[p]: the vectors of the token at position p (6 positions). */
static float Q[6][4][8], K[6][2][8], V[6][2][8];

static void random_qkv(void) {
    for (int p = 0; p < 6; p++)
        for (int i = 0; i < 32; i++) {
            ((float *)Q[p])[i] = frand();
            if (i < 16) ((float *)K[p])[i] = frand(), ((float *)V[p])[i] = frand();
        }
}

/* Double reference of attention for the token at position p (sees 0..p). */
static void ref_attention(int p, double out[4][8]) {
    for (int h = 0; h < 4; h++) {
        int g = h / 2;
        double s[6], m = -1e300, z = 0;
        for (int j = 0; j <= p; j++) {
            s[j] = 0;
            for (int i = 0; i < 8; i++) s[j] += (double)Q[p][h][i] * K[j][g][i];
            s[j] *= 0.35;
            if (s[j] > m) m = s[j];
        }
        for (int j = 0; j <= p; j++) z += (s[j] = exp(s[j] - m));
        for (int i = 0; i < 8; i++) {
            out[h][i] = 0;
            for (int j = 0; j <= p; j++) out[h][i] += s[j] / z * V[j][g][i];
        }
    }
}

/* Runs tokens at the given positions as one step; writes the attention rows into a. */
static void attn_step(loom_exec *e, const int32_t *pos, int n, float *a) {
    float q[4 * 32], k[4 * 16], v[4 * 16];
    for (int t = 0; t < n; t++) {
        memcpy(q + t * 32, Q[pos[t]], 32 * sizeof(float));
        memcpy(k + t * 16, K[pos[t]], 16 * sizeof(float));
        memcpy(v + t * 16, V[pos[t]], 16 * sizeof(float));
    }
    int64_t T = n;
    loom_exec_binding in[4] = {{"q", q}, {"k", k}, {"v", v}, {"positions", pos}};
    loom_error err = {0};
    cr_assert_eq(loom_exec_run(e, &T, in, 4, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_read_output(e, "a", a, (size_t)n * 32 * sizeof(float), NULL, &err),
                 LOOM_OK, "%s", err.msg);
}

Test(executor, kv_write_and_attention_match_a_reference_over_steps) {
    random_qkv();
    loom_ir_graph *g = parse(attn_graph);
    weights ws = {0};
    loom_exec *e = exec_create(g, &ws);
    /* Step 1: positions 0..2; step 2: positions 3..4. */
    float a[4 * 32];
    int32_t p1[3] = {0, 1, 2}, p2[2] = {3, 4};
    double ref[4][8];
    attn_step(e, p1, 3, a);
    for (int t = 0; t < 3; t++) {
        ref_attention(p1[t], ref);
        for (int i = 0; i < 32; i++)
            cr_assert(fabs(a[t * 32 + i] - ((double *)ref)[i]) < 1e-5, "pos %d [%d]: %g vs %g", p1[t],
                      i, a[t * 32 + i], ((double *)ref)[i]);
    }
    attn_step(e, p2, 2, a);
    for (int t = 0; t < 2; t++) {
        ref_attention(p2[t], ref);
        for (int i = 0; i < 32; i++)
            cr_assert(fabs(a[t * 32 + i] - ((double *)ref)[i]) < 1e-5, "pos %d [%d]", p2[t], i);
    }
    /* The other outputs of the step: argmax of each row of a, softmax of each head, f16 trip. */
    loom_error err = {0};
    int32_t am[2];
    float sm[2 * 32], back[2 * 32];
    cr_assert_eq(loom_exec_read_output(e, "am", am, sizeof am, NULL, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_read_output(e, "sm", sm, sizeof sm, NULL, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_read_output(e, "back", back, sizeof back, NULL, &err), LOOM_OK, "%s", err.msg);
    for (int t = 0; t < 2; t++) {
        int best = 0;
        for (int i = 1; i < 32; i++)
            if (a[t * 32 + i] > a[t * 32 + best]) best = i;
        cr_assert_eq(am[t], best);
        for (int h = 0; h < 4; h++) {
            double s = 0;
            for (int i = 0; i < 8; i++) s += sm[t * 32 + h * 8 + i];
            cr_assert(fabs(s - 1.0) < 1e-5, "softmax row sums to %g", s);
        }
        for (int i = 0; i < 32; i++)
            cr_assert_float_eq(back[t * 32 + i], loom_fp16_to_fp32(loom_fp32_to_fp16(a[t * 32 + i])), 0.0f);
    }
    /* Non-consecutive positions: position 5 then 1 again after rewriting row 1 with its own
     * key/value gives the reference rows (the step runs token by token). */
    int32_t p3[2] = {5, 1};
    attn_step(e, p3, 2, a);
    for (int t = 0; t < 2; t++) {
        ref_attention(p3[t], ref);
        for (int i = 0; i < 32; i++)
            cr_assert(fabs(a[t * 32 + i] - ((double *)ref)[i]) < 1e-5, "pos %d [%d]", p3[t], i);
    }
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);
}

Test(executor, refusals) {
    loom_ir_graph *g = parse(attn_graph);
    weights ws = {0};
    loom_exec *e = exec_create(g, &ws);
    float buf[4 * 32] = {0};
    int32_t pos[2] = {5, 6};
    int64_t T = 2;
    loom_error err = {0};
    loom_exec_binding three[3] = {{"q", buf}, {"k", buf}, {"v", buf}};
    cr_assert_eq(loom_exec_run(e, &T, three, 3, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "positions"), "%s", err.msg);
    loom_exec_binding in[4] = {{"q", buf}, {"k", buf}, {"v", buf}, {"positions", pos}};
    cr_assert_eq(loom_exec_run(e, &T, in, 4, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "kv_write") && strstr(err.msg, "position 6"), "%s", err.msg);
    T = 5;
    cr_assert_eq(loom_exec_run(e, &T, in, 4, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "T = 5"), "%s", err.msg);
    cr_assert_eq(loom_exec_read_output(e, "a", buf, sizeof buf, NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);

    /* A bf16 cache has no CPU kv_write kernel: refused at create, naming the op. */
    loom_ir_graph *gb = parse("symbol T max=2\ninput %k : f32[T,8]\ninput %positions : i32[T]\n"
                              "state @kc : bf16[4,8]\n%w = kv_write(@kc, %k, %positions)\n"
                              "output w = %w\n");
    loom_exec_backend *be = NULL;
    cr_assert_eq(loom_exec_cpu_backend_create(0, &be, &err), LOOM_OK);
    cr_assert_eq(loom_exec_create(gb, be, resolve, &ws, &e, &err), LOOM_ERR_UNSUPPORTED);
    cr_assert_null(e);
    cr_assert(strstr(err.msg, "kv_write") && strstr(err.msg, "cpu"), "%s", err.msg);
    loom_ir_graph_destroy(gb);
}

Test(executor, op_lists_parse_names_and_refuse_bad_ones_with_their_offset) {
    bool set[LOOM_IR_OP_COUNT] = {0};
    loom_error err = {0};
    cr_assert_eq(loom_exec_parse_op_list(NULL, "X", set, &err), LOOM_OK);
    cr_assert_eq(loom_exec_parse_op_list("", "X", set, &err), LOOM_OK);
    for (int i = 0; i < LOOM_IR_OP_COUNT; i++) cr_assert(!set[i]);
    cr_assert_eq(loom_exec_parse_op_list("attention,matmul_add", "X", set, &err), LOOM_OK);
    int n = 0;
    for (int i = 0; i < LOOM_IR_OP_COUNT; i++) n += set[i];
    cr_assert_eq(n, 2);
    cr_assert(set[LOOM_IR_OP_ATTENTION] && set[LOOM_IR_OP_MATMUL_ADD]);
    const struct { const char *list, *says; } bad[] = {
        {"attention,nosuchop", "unknown op 'nosuchop' at byte 10"},
        {",attention", "at byte 0"},
        {"attention,,matmul", "at byte 10"},
        {"attention,", "empty op name at byte 10"},
        {",attention", "empty op name at byte 0"},
        /* longer than any op name (and than the parser's buffer): named whole, not "empty" */
        {"attention,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "unknown op 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' "
         "at byte 10"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(loom_exec_parse_op_list(bad[i].list, "LOOM_X", set, &err),
                     LOOM_ERR_INVALID_ARGUMENT, "%s", bad[i].list);
        cr_assert(strstr(err.msg, bad[i].says) && strstr(err.msg, "LOOM_X"), "%s", err.msg);
    }
}

Test(executor, plan_reuses_buffers_across_layers) {
    /* Eight identical elementwise layers: a plan without reuse needs eight buffers per chain. */
    char text[4096] = "symbol T max=4\ninput %x : f32[T,64]\nweight @w : f32[64]\n";
    char prev[16] = "%x";
    for (int l = 0; l < 8; l++) {
        char line[256];
        snprintf(line, sizeof line, "%%n%d = rms_norm(%s) {eps=1e-5}\n%%m%d = mul(%%n%d, @w)\n"
                 "%%s%d = silu(%%m%d)\n%%y%d = add(%%s%d, %s)\n", l, prev, l, l, l, l, l, l, prev);
        strcat(text, line);
        snprintf(prev, sizeof prev, "%%y%d", l);
    }
    strcat(text, "output y = %y7\n");
    loom_ir_graph *g = parse(text);
    weights ws = {0};
    add_weight(&ws, "w", LOOM_GGML_F32, 1, 64, 0.1f, 1.0f);
    loom_exec *e = exec_create(g, &ws);
    loom_exec_stats st;
    loom_exec_get_stats(e, &st);
    cr_assert_eq(st.activation_sum, 32ull * 4 * 64 * 4);
    /* One 1 KiB block per layer (the in-place ops chain through it), two alive at a time. */
    cr_assert_leq(st.activation_bytes, 3ull * 4 * 64 * 4, "arena %llu for a chain that needs 2 "
                  "or 3 KiB", (unsigned long long)st.activation_bytes);
    cr_assert_geq(st.activation_bytes, st.activation_lower_bound);
    cr_assert_eq(st.weight_bytes, 256);
    /* And the result is still right: compare with a direct computation. */
    float x[2 * 64], y[2 * 64], w[64];
    memcpy(w, ws.w[0].data, sizeof w);
    for (int i = 0; i < 128; i++) x[i] = frand();
    int64_t T = 2;
    loom_exec_binding in[1] = {{"x", x}};
    loom_error err = {0};
    cr_assert_eq(loom_exec_run(e, &T, in, 1, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_exec_read_output(e, "y", y, sizeof y, NULL, &err), LOOM_OK, "%s", err.msg);
    for (int t = 0; t < 2; t++) {
        float cur[64];
        memcpy(cur, x + t * 64, sizeof cur);
        for (int l = 0; l < 8; l++) {
            double ss = 0;
            for (int i = 0; i < 64; i++) ss += (double)cur[i] * cur[i];
            float sc = 1.0f / sqrtf((float)(ss / 64) + 1e-5f);
            for (int i = 0; i < 64; i++) {
                float m = cur[i] * sc * w[i];
                cur[i] = m / (1.0f + expf(-m)) + cur[i];
            }
        }
        for (int i = 0; i < 64; i++)
            cr_assert(fabsf(cur[i] - y[t * 64 + i]) <= 1e-5f * (1 + fabsf(cur[i])), "[%d,%d] %g vs %g",
                      t, i, cur[i], y[t * 64 + i]);
    }
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);
    free_weights(&ws);
}

/* ---------------------------------------------------------------- backend-sized state */

static const loom_exec_backend_vtable *cpu_vt;

/* A CPU backend running on a copy of its vtable that `patch` edits (the wrappers reach the CPU
 * backend's own members through cpu_vt). */
static loom_exec_backend *patched_cpu_backend(void (*patch)(loom_exec_backend_vtable *vt)) {
    loom_exec_backend *be = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_exec_cpu_backend_create(1, &be, &err), LOOM_OK, "%s", err.msg);
    static loom_exec_backend_vtable vt;
    cpu_vt = be->vt;
    vt = *be->vt;
    patch(&vt);
    be->vt = &vt;
    return be;
}

/* A CPU backend whose vtable asks for more bytes for @kc (as the CUDA backend's INT8 cache asks
 * for fewer) and keeps the graph's size for @vc (return 0); zeroed allocations are logged. */
static size_t zeroed[8];
static int n_zeroed;

static size_t grown_state(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                          size_t graph_bytes) {
    (void)b;
    return !strcmp(loom_ir_value_get(g, v)->name, "kc") ? graph_bytes + 1000 : 0;
}

static loom_status logging_alloc(loom_exec_backend *b, size_t bytes, bool zero, void **out,
                                 loom_error *err) {
    if (zero && n_zeroed < 8) zeroed[n_zeroed++] = bytes;
    return cpu_vt->alloc(b, bytes, zero, out, err);
}

static void grow_state_and_log_allocs(loom_exec_backend_vtable *vt) {
    vt->state_bytes = grown_state;
    vt->alloc = logging_alloc;
}

Test(executor, backend_state_bytes_size_allocate_and_report_the_state) {
    loom_ir_graph *g = parse(attn_graph);
    weights ws = {0};
    loom_exec *e = NULL;
    loom_error err = {0};
    loom_exec_backend *be = patched_cpu_backend(grow_state_and_log_allocs);
    n_zeroed = 0;
    cr_assert_eq(loom_exec_create(g, be, resolve, &ws, &e, &err), LOOM_OK, "%s", err.msg);
    loom_exec_stats st;
    loom_exec_get_stats(e, &st);
    const size_t cache = 6 * 2 * 8 * sizeof(float);
    cr_assert_eq(st.state_bytes, (uint64_t)(cache + 1000 + cache), "state %llu",
                 (unsigned long long)st.state_bytes);
    cr_assert_eq(n_zeroed, 2);
    cr_assert(zeroed[0] + zeroed[1] == 2 * cache + 1000 &&
                  (zeroed[0] == cache + 1000 || zeroed[1] == cache + 1000),
              "allocated %zu and %zu", zeroed[0], zeroed[1]);
    /* The kernels still see the graph's layout at the start of the buffer. */
    for (int i = 0; i < 32; i++) {
        ((float *)Q[0])[i] = frand();
        if (i < 16) ((float *)K[0])[i] = frand(), ((float *)V[0])[i] = frand();
    }
    float a[32];
    double ref[4][8];
    int32_t p0[1] = {0};
    attn_step(e, p0, 1, a);
    ref_attention(0, ref);
    for (int i = 0; i < 32; i++) cr_assert(fabs(a[i] - ((double *)ref)[i]) < 1e-5);
    /* Reading an output by its value id (resolved once) gives what the name gives. */
    float b[32];
    cr_assert_eq(loom_exec_read_value(e, loom_ir_find_output(g, "a"), b, sizeof b, NULL, &err),
                 LOOM_OK, "%s", err.msg);
    cr_assert(memcmp(a, b, sizeof b) == 0);
    cr_assert_eq(loom_exec_read_value(e, loom_ir_find_value(g, "q"), b, sizeof b, NULL, &err),
                 LOOM_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, "not an output"), "%s", err.msg);
    /* The executor's host memory (malloc'd on a backend without host_alloc) takes outputs. */
    float *hb = loom_exec_host_alloc(e, sizeof b);
    cr_assert(hb != NULL);
    cr_assert_eq(loom_exec_read_value(e, loom_ir_find_output(g, "a"), hb, sizeof b, NULL, &err),
                 LOOM_OK, "%s", err.msg);
    cr_assert(memcmp(a, hb, sizeof b) == 0);
    loom_exec_host_free(e, hb);
    loom_exec_host_free(e, NULL);
    loom_exec_host_free(NULL, NULL);
    cr_assert_eq(loom_exec_reset_state(e, &err), LOOM_OK, "%s", err.msg);
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);
}

/* ---------------------------------------------------------------- reserve_node */

/* A CPU backend whose supports_op and reserve_node log their calls: reserve_node must come once
 * for every node, right after supports_op accepted it; it refuses the attention when
 * refuse_attention is set. */
static int n_asked, n_reserved;
static bool reserve_in_order, refuse_attention;

static bool asking_supports(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n) {
    n_asked++;
    return cpu_vt->supports_op(b, g, n);
}

static loom_status logging_reserve(loom_exec_backend *b, const loom_ir_graph *g,
                                   const loom_ir_node *n, loom_error *err) {
    (void)b;
    (void)g;
    if (n_asked != n_reserved + 1) reserve_in_order = false;
    n_reserved++;
    if (refuse_attention && n->op == LOOM_IR_OP_ATTENTION)
        return loom_error_set(err, LOOM_ERR_LIMIT, "test backend: no room");
    return LOOM_OK;
}

static void log_supports_and_reserve(loom_exec_backend_vtable *vt) {
    vt->supports_op = asking_supports;
    vt->reserve_node = logging_reserve;
}

/* Creates an executor for attn_graph on the logging backend; returns the status. */
static loom_status create_logged(const loom_ir_graph *g, loom_error *err) {
    weights ws = {0};
    loom_exec *e = NULL;
    loom_exec_backend *be = patched_cpu_backend(log_supports_and_reserve);
    n_asked = n_reserved = 0;
    reserve_in_order = true;
    loom_status st = loom_exec_create(g, be, resolve, &ws, &e, err); /* owns be either way */
    loom_exec_destroy(e);
    return st;
}

Test(executor, reserve_node_follows_supports_op_for_every_node_and_its_error_names_the_node) {
    loom_ir_graph *g = parse(attn_graph);
    loom_error err = {0};
    refuse_attention = false;
    cr_assert_eq(create_logged(g, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(n_reserved, (int)loom_ir_node_count(g), "reserved %d of %u nodes", n_reserved,
                 loom_ir_node_count(g));
    cr_assert(reserve_in_order, "a node was reserved before supports_op accepted it");
    refuse_attention = true;
    cr_assert_eq(create_logged(g, &err), LOOM_ERR_LIMIT);
    cr_assert(strstr(err.msg, "(attention): test backend: no room") &&
                  strstr(err.msg, "executor: node "),
              "%s", err.msg);
    loom_ir_graph_destroy(g);
}

/* ---------------------------------------------------------------- map_weight's description */

/* A CPU backend whose map_weight records what the executor tells it of each weight (by the order
 * of the graph's weights) and hands the host bytes through unchanged. */
static loom_exec_weight told[16];
static int n_told;

static loom_status recording_map(loom_exec_backend *b, const void *host, size_t bytes,
                                 const loom_exec_weight *w, const void **out, loom_error *err) {
    (void)b;
    (void)bytes;
    (void)err;
    if (n_told < 16) told[n_told++] = *w;
    *out = host;
    return LOOM_OK;
}

static void record_map_weight(loom_exec_backend_vtable *vt) { vt->map_weight = recording_map; }

/* matmul_only (what lets the CUDA backend lay Q4_K / Q6_K weights out in tiles) holds for a
 * weight used only as matmul-family weight operands, and not for a table get_rows reads, a weight
 * both read so and multiplied (tied embeddings), a norm weight (the prenorm operand), or a graph
 * output; in_triple for the weights of a matmul_triple (whose Q6_K V the CUDA backend tiles only
 * beside Q4_K tiles); dtype and shape come along. */
Test(executor, map_weight_is_told_each_weights_type_shape_and_whether_only_matmuls_read_it) {
    static const char *text =
        "symbol T max=4\n"
        "input %ids : i32[T]\n"
        "input %x : f32[T,256]\n"
        "weight @emb : q4_k[32,256]\n"
        "weight @tied : q4_k[48,256]\n"
        "weight @a : q4_k[64,256]\n"
        "weight @b : q4_k[64,256]\n"
        "weight @n : f32[256]\n"
        "weight @o : q8_0[32,256]\n"
        "weight @q : q4_k[32,256]\n"
        "weight @k : q4_k[16,256]\n"
        "weight @v : q6_k[16,256]\n"
        "%e = get_rows(@emb, %ids)\n"
        "%t = get_rows(@tied, %ids)\n"
        "%lt = matmul(%x, @tied)\n"
        "%sw = matmul_pair(%x, @a, @b, @n) {swiglu=1, norm_eps=1e-5}\n"
        "%y = matmul(%x, @o)\n"
        "%tq, %tk, %tv = matmul_triple(%x, @q, @k, @v)\n"
        "output e = %e\n"
        "output t = %t\n"
        "output lt = %lt\n"
        "output sw = %sw\n"
        "output y = %y\n"
        "output tq = %tq\n"
        "output tk = %tk\n"
        "output tv = %tv\n"
        "output w = @o\n";
    loom_ir_graph *g = parse(text);
    weights ws = {0};
    add_weight(&ws, "emb", LOOM_GGML_Q4_K, 32, 256, 1.0f, 0.0f);
    add_weight(&ws, "tied", LOOM_GGML_Q4_K, 48, 256, 1.0f, 0.0f);
    add_weight(&ws, "a", LOOM_GGML_Q4_K, 64, 256, 1.0f, 0.0f);
    add_weight(&ws, "b", LOOM_GGML_Q4_K, 64, 256, 1.0f, 0.0f);
    add_weight(&ws, "n", LOOM_GGML_F32, 1, 256, 0.1f, 1.0f);
    add_weight(&ws, "o", LOOM_GGML_Q8_0, 32, 256, 1.0f, 0.0f);
    add_weight(&ws, "q", LOOM_GGML_Q4_K, 32, 256, 1.0f, 0.0f);
    add_weight(&ws, "k", LOOM_GGML_Q4_K, 16, 256, 1.0f, 0.0f);
    add_weight(&ws, "v", LOOM_GGML_Q6_K, 16, 256, 1.0f, 0.0f);
    loom_exec *e = NULL;
    loom_error err = {0};
    n_told = 0;
    loom_exec_backend *be = patched_cpu_backend(record_map_weight);
    cr_assert_eq(loom_exec_create(g, be, resolve, &ws, &e, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(n_told, (int)loom_ir_weight_count(g));
    for (int i = 0; i < n_told; i++) {
        const loom_ir_value *v = loom_ir_value_get(g, loom_ir_weight_at(g, i));
        const bool tri = !strcmp(v->name, "q") || !strcmp(v->name, "k") || !strcmp(v->name, "v");
        const bool want = !strcmp(v->name, "a") || !strcmp(v->name, "b") || tri;
        cr_assert_eq(told[i].matmul_only, want, "weight %s: matmul_only %d", v->name,
                     (int)told[i].matmul_only);
        cr_assert_eq(told[i].in_triple, tri, "weight %s: in_triple %d", v->name,
                     (int)told[i].in_triple);
        cr_assert_eq(told[i].dtype, v->type.dtype, "weight %s", v->name);
        if (v->type.rank == 2)
            cr_assert(told[i].rows == v->type.dims[0] && told[i].cols == v->type.dims[1],
                      "weight %s: %lld x %lld", v->name, (long long)told[i].rows,
                      (long long)told[i].cols);
        else
            cr_assert(told[i].rows == 0 && told[i].cols == 0, "weight %s", v->name);
    }
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);
    free_weights(&ws);
}

/* ---------------------------------------------------------------- map_output */

/* A CPU backend whose map_output records the outputs it is offered (by name) and, unless
 * refuse_outputs, places them in buffers of its own, counting what unmap_output releases. */
static const char *offered[8];
static int n_offered, n_mapped, n_unmapped;
static bool refuse_outputs;

static bool recording_map_output(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                                 size_t bytes, void **dev, void **host) {
    (void)b;
    const char *name = NULL;
    for (uint32_t i = 0; i < loom_ir_output_count(g); i++)
        if (loom_ir_output_at(g, i, &name) == v) break;
    cr_assert(n_offered < 8);
    offered[n_offered++] = name;
    if (refuse_outputs) return false;
    cr_assert_eq(bytes, (size_t)(4 * 32 * sizeof(float)), "output %s: %zu bytes", name, bytes);
    *dev = *host = calloc(1, bytes);
    cr_assert(*host != NULL);
    n_mapped++;
    return true;
}

static void counting_unmap_output(loom_exec_backend *b, void *dev, void *host) {
    (void)b;
    cr_assert_eq(dev, host);
    n_unmapped++;
    free(host);
}

static void record_map_output(loom_exec_backend_vtable *vt) {
    vt->map_output = recording_map_output;
    vt->unmap_output = counting_unmap_output;
}

static bool was_offered(const char *name) {
    for (int i = 0; i < n_offered; i++)
        if (!strcmp(offered[i], name)) return true;
    return false;
}

Test(executor, map_output_is_offered_only_outputs_with_memory_no_node_reads_and_they_read_alike) {
    /* y: a matmul nobody reads (offered); z: read by s (kept); s: memory of its own (offered);
     * t: silu planned in place over u (offered: mapped, it runs out of place and u keeps its
     * block); w: a reshape, an alias of v's memory (kept). */
    loom_ir_graph *g = parse("symbol T max=4\n"
                             "input %x : f32[T,256]\n"
                             "weight @a : q8_0[32,256]\n"
                             "weight @b : q8_0[32,256]\n"
                             "%y = matmul(%x, @a)\n"
                             "%z = matmul(%x, @b)\n"
                             "%s = silu(%z)\n"
                             "%u = matmul(%x, @b)\n"
                             "%t = silu(%u)\n"
                             "%v = matmul(%x, @a)\n"
                             "%w = reshape(%v) {shape=[T,4,8]}\n"
                             "output y = %y\n"
                             "output z = %z\n"
                             "output s = %s\n"
                             "output t = %t\n"
                             "output w = %w\n");
    weights ws = {0};
    add_weight(&ws, "a", LOOM_GGML_Q8_0, 32, 256, 1.0f, 0.0f);
    add_weight(&ws, "b", LOOM_GGML_Q8_0, 32, 256, 1.0f, 0.0f);
    float x[2 * 256];
    for (int i = 0; i < 2 * 256; i++) x[i] = frand();
    const int64_t T = 2;
    loom_exec_binding in[1] = {{"x", x}};
    loom_error err = {0};
    /* The reference: the plain CPU backend. */
    loom_exec *ref = exec_create(g, &ws);
    cr_assert_eq(loom_exec_run(ref, &T, in, 1, &err), LOOM_OK, "%s", err.msg);
    const char *names[5] = {"y", "z", "s", "t", "w"};
    const bool want_mapped[5] = {true, false, true, true, false};
    float want[5][2 * 32];
    for (int i = 0; i < 5; i++)
        cr_assert_eq(loom_exec_read_output(ref, names[i], want[i], sizeof want[i], NULL, &err),
                     LOOM_OK, "%s", err.msg);
    loom_exec_destroy(ref);
    for (int refuse = 0; refuse < 2; refuse++) {
        refuse_outputs = refuse;
        n_offered = n_mapped = n_unmapped = 0;
        loom_exec *e = NULL;
        loom_exec_backend *be = patched_cpu_backend(record_map_output);
        cr_assert_eq(loom_exec_create(g, be, resolve, &ws, &e, &err), LOOM_OK, "%s", err.msg);
        const loom_exec_plan *p = loom_exec_get_plan(e);
        const loom_ir_value_id t = loom_ir_find_output(g, "t");
        const loom_ir_value_id u = loom_ir_node_get(g, loom_ir_value_get(g, t)->def)->in[0];
        if (refuse) {
            cr_assert_eq(loom_exec_plan_block_of(p, t), loom_exec_plan_block_of(p, u),
                         "t is not planned in place over u");
        } else {
            /* Mapped outputs take no arena block; u keeps its own, which t no longer reuses. */
            cr_assert_neq(loom_exec_plan_block_of(p, u), LOOM_PLAN_NO_BLOCK);
        }
        cr_assert_eq(n_offered, 3, "offered %d outputs", n_offered);
        for (int i = 0; i < 5; i++) {
            const loom_ir_value_id v = loom_ir_find_output(g, names[i]);
            cr_assert_eq(was_offered(names[i]), want_mapped[i], "output %s", names[i]);
            cr_assert_eq(loom_exec_plan_block_of(p, v) == LOOM_PLAN_NO_BLOCK,
                         want_mapped[i] && !refuse, "output %s's arena block", names[i]);
            cr_assert_eq(loom_exec_output_mapped(e, v), want_mapped[i] && !refuse, "output %s",
                         names[i]);
            cr_assert_null(loom_exec_output_view(e, v), "output %s viewed before a step", names[i]);
        }
        /* Without reuse the arena holds y, z, s, u, t and v (w views v), 512 bytes each at
         * T=4; mapped, y, s and t are not in it. */
        loom_exec_stats stats;
        loom_exec_get_stats(e, &stats);
        cr_assert_eq(stats.activation_sum, (refuse ? 6u : 3u) * 4 * 32 * sizeof(float));
        cr_assert_leq(stats.activation_bytes, stats.activation_sum);
        cr_assert_geq(stats.activation_bytes, stats.activation_lower_bound);
        cr_assert_eq(loom_exec_run(e, &T, in, 1, &err), LOOM_OK, "%s", err.msg);
        for (int i = 0; i < 5; i++) {
            const loom_ir_value_id v = loom_ir_find_output(g, names[i]);
            float got[2 * 32];
            cr_assert_eq(loom_exec_read_value(e, v, got, sizeof got, NULL, &err), LOOM_OK, "%s",
                         err.msg);
            cr_assert(memcmp(got, want[i], sizeof got) == 0, "output %s", names[i]);
            const float *view = loom_exec_output_view(e, v);
            if (want_mapped[i] && !refuse) {
                cr_assert(memcmp(view, want[i], sizeof got) == 0, "output %s", names[i]);
            } else {
                cr_assert_null(view, "output %s", names[i]);
            }
        }
        loom_exec_destroy(e);
        cr_assert_eq(n_unmapped, n_mapped);
        cr_assert_eq(n_mapped, refuse ? 0 : 3);
    }
    loom_ir_graph_destroy(g);
    free_weights(&ws);
}

/* ---------------------------------------------------------------- inputs: one upload a step */

/* A CPU backend with an upload (a logged memcpy), as a device backend has. */
static int n_uploads;
static size_t upload_bytes;

static loom_status logging_upload(loom_exec_backend *b, void *dst, const void *src, size_t bytes,
                                  loom_error *err) {
    (void)b;
    (void)err;
    n_uploads++;
    upload_bytes = bytes;
    memcpy(dst, src, bytes);
    return LOOM_OK;
}

static void log_uploads(loom_exec_backend_vtable *vt) { vt->upload = logging_upload; }

Test(executor, a_step_uploads_all_its_inputs_in_one_copy) {
    random_qkv();
    loom_ir_graph *g = parse(attn_graph);
    weights ws = {0};
    loom_exec *e = NULL;
    loom_error err = {0};
    loom_exec_backend *be = patched_cpu_backend(log_uploads);
    cr_assert_eq(loom_exec_create(g, be, resolve, &ws, &e, &err), LOOM_OK, "%s", err.msg);
    float a[4 * 32];
    double ref[4][8];
    int32_t p1[3] = {0, 1, 2}, p2[1] = {3};
    n_uploads = 0;
    attn_step(e, p1, 3, a);
    cr_assert_eq(n_uploads, 1, "%d uploads for 4 inputs", n_uploads);
    /* q, k, v, positions at 64-byte aligned offsets of their largest sizes (T = 4): 512, 256,
     * 256 bytes, then positions' 3 x 4 bytes. */
    cr_assert_eq(upload_bytes, (size_t)(512 + 256 + 256 + 3 * 4));
    attn_step(e, p2, 1, a);
    cr_assert_eq(n_uploads, 2);
    cr_assert_eq(upload_bytes, (size_t)(512 + 256 + 256 + 4));
    ref_attention(3, ref);
    for (int i = 0; i < 32; i++)
        cr_assert(fabs(a[i] - ((double *)ref)[i]) < 1e-5, "pos 3 [%d]: %g vs %g", i, a[i],
                  ((double *)ref)[i]);
    loom_exec_destroy(e);
    loom_ir_graph_destroy(g);
}

/* ---------------------------------------------------------------- copy bandwidth */

static void drop_copy_bandwidth(loom_exec_backend_vtable *vt) { vt->copy_bandwidth = NULL; }

Test(executor, cpu_backend_measures_its_copy_bandwidth_and_a_backend_without_it_refuses) {
    loom_exec_backend *be = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_exec_cpu_backend_create(0, &be, &err), LOOM_OK, "%s", err.msg);
    cr_assert_not_null(be->vt->copy_bandwidth);
    double gbs = 0;
    cr_assert_eq(loom_exec_backend_copy_bandwidth(be, &gbs, &err), LOOM_OK, "%s", err.msg);
    cr_assert_gt(gbs, 0.0);
    loom_exec_backend_destroy(be);
    be = patched_cpu_backend(drop_copy_bandwidth);
    gbs = 1;
    cr_assert_eq(loom_exec_backend_copy_bandwidth(be, &gbs, &err), LOOM_ERR_UNSUPPORTED);
    cr_assert_eq(gbs, 0.0);
    cr_assert(strstr(err.msg, "cpu") && strstr(err.msg, "copy bandwidth"), "%s", err.msg);
    loom_exec_backend_destroy(be);
}
