/* golden_test.c: the CPU kernels composed into a whole decoder forward pass (llama, qwen2,
 * qwen3) on the golden GGUF models of ../shared/testdata, against the logits ggml's CPU backend
 * computed with dequantized weights (`.deq.logits.bin`). This checks the kernels' numeric
 * contracts where unit tests cannot: RoPE modes and angles, GQA mapping, norm epsilon, the
 * SwiGLU order and the tensor orientation of real files.
 *
 * The forward pass here is written straight against cpu_kernels.h, with the fused kernels
 * (matmul_triple with biases, matmul_pair with SwiGLU, matmul_add into the residual): it is a
 * test harness, not the executor. Checked per model and sequence:
 * - one prefill with an F32 cache: every row within 1e-4 of the row's logit range (README),
 *   same argmax wherever the reference's top two are further apart than that;
 * - token by token, and two prefill chunks: bit-identical to the single prefill;
 * - F16 cache within 1e-2 of the range (README); INT8 cache within 2e-2 (our stated bound).
 */
#include <float.h>
#include <stdio.h>

#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "test_util.h"

typedef struct layer {
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm; /* q_norm/k_norm: qwen3 only */
    const float *bias[3];                                /* qwen2 only */
    loom_kweight qkv[3], wo, gate, up, down;
} layer;

typedef struct model {
    loom_gguf *g;
    int64_t n_layer, E, F, H, KVH, D, V, n_rot;
    float eps, freq_base;
    loom_rope_mode mode;
    bool qk_norm;
    loom_kweight embd, output;
    const float *out_norm;
    layer *layers;
} model;

static const loom_gguf_tensor *tensor(const model *m, const char *fmt, int64_t l) {
    char name[128];
    snprintf(name, sizeof name, fmt, (int)l);
    return loom_gguf_find_tensor(m->g, name);
}

static loom_kweight weight(const model *m, const char *fmt, int64_t l) {
    const loom_gguf_tensor *t = tensor(m, fmt, l);
    cr_assert_not_null(t, "tensor %s (layer %lld) missing", fmt, (long long)l);
    return (loom_kweight){.data = t->data, .type = t->type, .rows = t->ne[1], .cols = t->ne[0]};
}

static const float *vec(const model *m, const char *fmt, int64_t l, int64_t n) {
    const loom_gguf_tensor *t = tensor(m, fmt, l);
    if (!t) return NULL;
    cr_assert_eq(t->type, LOOM_GGML_F32, "%s is F32", t->name);
    cr_assert_eq(t->ne[0], n, "%s has %lld values", t->name, (long long)n);
    return t->data;
}

static int64_t key_u32(const model *m, const char *arch, const char *key, int64_t dflt) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    uint32_t v;
    if (loom_gguf_get_u32(m->g, name, &v, NULL) != LOOM_OK) {
        cr_assert_geq(dflt, 0, "key %s missing", name);
        return dflt;
    }
    return v;
}

static float key_f32(const model *m, const char *arch, const char *key, float dflt) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    float v;
    return loom_gguf_get_f32(m->g, name, &v, NULL) == LOOM_OK ? v : dflt;
}

static void model_open(model *m, const char *path) {
    memset(m, 0, sizeof *m);
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &m->g, &err), LOOM_OK, "%s", err.msg);
    const char *arch;
    cr_assert_eq(loom_gguf_get_string(m->g, "general.architecture", &arch, &err), LOOM_OK);
    m->mode = strcmp(arch, "llama") == 0 ? LOOM_ROPE_NORM : LOOM_ROPE_NEOX;
    m->qk_norm = strcmp(arch, "qwen3") == 0;
    m->n_layer = key_u32(m, arch, "block_count", -1);
    m->E = key_u32(m, arch, "embedding_length", -1);
    m->F = key_u32(m, arch, "feed_forward_length", -1);
    m->H = key_u32(m, arch, "attention.head_count", -1);
    m->KVH = key_u32(m, arch, "attention.head_count_kv", m->H);
    m->D = key_u32(m, arch, "attention.key_length", m->E / m->H);
    m->n_rot = key_u32(m, arch, "rope.dimension_count", m->D);
    m->eps = key_f32(m, arch, "attention.layer_norm_rms_epsilon", 1e-5f);
    m->freq_base = key_f32(m, arch, "rope.freq_base", 10000.0f);
    m->embd = weight(m, "token_embd.weight", 0);
    m->V = m->embd.rows;
    m->output = tensor(m, "output.weight", 0) ? weight(m, "output.weight", 0) : m->embd;
    m->out_norm = vec(m, "output_norm.weight", 0, m->E);
    m->layers = calloc((size_t)m->n_layer, sizeof(layer));
    for (int64_t l = 0; l < m->n_layer; l++) {
        layer *L = &m->layers[l];
        L->attn_norm = vec(m, "blk.%d.attn_norm.weight", l, m->E);
        L->ffn_norm = vec(m, "blk.%d.ffn_norm.weight", l, m->E);
        L->q_norm = vec(m, "blk.%d.attn_q_norm.weight", l, m->D);
        L->k_norm = vec(m, "blk.%d.attn_k_norm.weight", l, m->D);
        cr_assert_eq(L->q_norm != NULL, m->qk_norm);
        L->qkv[0] = weight(m, "blk.%d.attn_q.weight", l);
        L->qkv[1] = weight(m, "blk.%d.attn_k.weight", l);
        L->qkv[2] = weight(m, "blk.%d.attn_v.weight", l);
        L->bias[0] = vec(m, "blk.%d.attn_q.bias", l, m->H * m->D);
        L->bias[1] = vec(m, "blk.%d.attn_k.bias", l, m->KVH * m->D);
        L->bias[2] = vec(m, "blk.%d.attn_v.bias", l, m->KVH * m->D);
        L->wo = weight(m, "blk.%d.attn_output.weight", l);
        L->gate = weight(m, "blk.%d.ffn_gate.weight", l);
        L->up = weight(m, "blk.%d.ffn_up.weight", l);
        L->down = weight(m, "blk.%d.ffn_down.weight", l);
    }
}

static void model_close(model *m) {
    free(m->layers);
    loom_gguf_close(m->g);
}

/* The KV state of a session: per layer a K and a V cache of one layout. */
typedef struct state {
    loom_kv_layout kv;
    void **k, **v;
    float **ks, **vs;
} state;

static void state_init(state *s, const model *m, loom_kv_type type, int64_t n_ctx) {
    s->kv = (loom_kv_layout){.type = type, .n_ctx = n_ctx, .n_kv_head = m->KVH, .head_dim = m->D};
    const size_t es = type == LOOM_KV_F32 ? 4 : type == LOOM_KV_F16 ? 2 : 1;
    s->k = calloc((size_t)m->n_layer, sizeof(void *));
    s->v = calloc((size_t)m->n_layer, sizeof(void *));
    s->ks = calloc((size_t)m->n_layer, sizeof(float *));
    s->vs = calloc((size_t)m->n_layer, sizeof(float *));
    for (int64_t l = 0; l < m->n_layer; l++) {
        s->k[l] = calloc((size_t)(n_ctx * m->KVH * m->D), es);
        s->v[l] = calloc((size_t)(n_ctx * m->KVH * m->D), es);
        if (type == LOOM_KV_INT8) {
            s->ks[l] = calloc((size_t)(n_ctx * m->KVH), sizeof(float));
            s->vs[l] = calloc((size_t)(n_ctx * m->KVH), sizeof(float));
        }
    }
}

static void state_free(state *s, const model *m) {
    for (int64_t l = 0; l < m->n_layer; l++) {
        free(s->k[l]);
        free(s->v[l]);
        free(s->ks[l]);
        free(s->vs[l]);
    }
    free(s->k);
    free(s->v);
    free(s->ks);
    free(s->vs);
}

#define OK(call)                                                                                 \
    do {                                                                                         \
        loom_error e_ = {0};                                                                     \
        cr_assert_eq((call), LOOM_OK, "%s: %s", #call, e_.msg);                                  \
    } while (0)

/* Runs T tokens at positions pos0.. and writes their logits [T, V]. */
static void forward(const model *m, state *s, const int32_t *tokens, int64_t T, int64_t pos0,
                    float *logits) {
    const int64_t E = m->E, D = m->D, H = m->H, KVH = m->KVH;
    float *x = malloc(T * E * sizeof(float)), *h = malloc(T * E * sizeof(float));
    float *q = malloc(T * H * D * sizeof(float)), *k = malloc(T * KVH * D * sizeof(float));
    float *v = malloc(T * KVH * D * sizeof(float)), *att = malloc(T * H * D * sizeof(float));
    float *ff = malloc(T * m->F * sizeof(float));
    int32_t *pos = malloc(T * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(pos0 + t);
    loom_rope_params rp = {.n_tokens = T, .n_head = H, .n_kv_head = KVH, .head_dim = D,
                           .n_rot = m->n_rot, .mode = m->mode, .freq_base = m->freq_base,
                           .freq_scale = 1.0f};
    loom_attn_params ap = {.n_tokens = T, .n_head = H, .pos0 = pos0,
                           .scale = 1.0f / sqrtf((float)D)};

    OK(loom_cpu_embed(m->embd, tokens, T, x, &e_));
    for (int64_t l = 0; l < m->n_layer; l++) {
        const layer *L = &m->layers[l];
        OK(loom_cpu_rms_norm(x, L->attn_norm, T, E, m->eps, h, &e_));
        float *const outs[3] = {q, k, v};
        OK(loom_cpu_matmul_triple(h, T, L->qkv, L->bias, outs, &e_));
        if (m->qk_norm) {
            OK(loom_cpu_rms_norm(q, L->q_norm, T * H, D, m->eps, q, &e_));
            OK(loom_cpu_rms_norm(k, L->k_norm, T * KVH, D, m->eps, k, &e_));
        }
        OK(loom_cpu_rope(q, k, pos, &rp, &e_));
        OK(loom_cpu_kv_write(k, T, pos0, s->k[l], s->ks[l], &s->kv, &e_));
        OK(loom_cpu_kv_write(v, T, pos0, s->v[l], s->vs[l], &s->kv, &e_));
        OK(loom_cpu_attention(q, s->k[l], s->ks[l], s->v[l], s->vs[l], &s->kv, &ap, att, &e_));
        OK(loom_cpu_matmul_add(att, T, L->wo, x, x, &e_));
        OK(loom_cpu_rms_norm(x, L->ffn_norm, T, E, m->eps, h, &e_));
        OK(loom_cpu_matmul_pair(h, T, L->gate, L->up, LOOM_PAIR_SWIGLU, ff, NULL, &e_));
        OK(loom_cpu_matmul_add(ff, T, L->down, x, x, &e_));
    }
    OK(loom_cpu_rms_norm(x, m->out_norm, T, E, m->eps, h, &e_));
    OK(loom_cpu_matmul(h, T, m->output, logits, &e_));
    free(x);
    free(h);
    free(q);
    free(k);
    free(v);
    free(att);
    free(ff);
    free(pos);
}

/* Reads a logits file: int32 n_tokens, int32 n_vocab, then the floats. */
static float *read_logits(const char *path, int64_t *n_tokens, int64_t *n_vocab) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int32_t hdr[2];
    cr_assert_eq(fread(hdr, 4, 2, f), 2u);
    *n_tokens = hdr[0];
    *n_vocab = hdr[1];
    float *v = malloc((size_t)(hdr[0] * hdr[1]) * sizeof(float));
    cr_assert_eq(fread(v, sizeof(float), (size_t)(hdr[0] * hdr[1]), f), (size_t)(hdr[0] * hdr[1]));
    fclose(f);
    return v;
}

/* Largest |a - b| of a row over the reference row's range. */
static double row_error(const float *a, const float *ref, int64_t n) {
    float lo = ref[0], hi = ref[0];
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = fminf(lo, ref[i]);
        hi = fmaxf(hi, ref[i]);
        worst = fmax(worst, fabs((double)a[i] - ref[i]));
    }
    return worst / (hi - lo);
}

static void check_rows(const float *got, const float *ref, int64_t T, int64_t V, double tol,
                       const char *what) {
    double worst = 0;
    for (int64_t t = 0; t < T; t++) {
        const float *g = got + t * V, *r = ref + t * V;
        double e = row_error(g, r, V);
        worst = fmax(worst, e);
        cr_assert(e <= tol, "%s: row %lld error %.3g of the range (tolerance %.3g)", what,
                  (long long)t, e, tol);
        /* Same argmax unless the reference's top two are within the tolerance. */
        int32_t ag, ar;
        OK(loom_cpu_argmax(g, 1, V, &ag, &e_));
        OK(loom_cpu_argmax(r, 1, V, &ar, &e_));
        float lo = r[0], hi = r[0], second = -INFINITY;
        for (int64_t i = 0; i < V; i++) {
            lo = fminf(lo, r[i]);
            hi = fmaxf(hi, r[i]);
            if (i != ar) second = fmaxf(second, r[i]);
        }
        if (r[ar] - second > tol * (hi - lo))
            cr_assert_eq(ag, ar, "%s: row %lld argmax %d, reference %d", what, (long long)t, ag,
                         ar);
    }
    if (getenv("LOOM_GOLDEN_VERBOSE")) fprintf(stderr, "%s: worst row error %.3g\n", what, worst);
}

static void run_model(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "golden/%s.gguf", name);
    const char *dir = loom_test_testdata(path);
    snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, name);
    model m;
    model_open(&m, path);
    const char *seq_names[] = {"S1", "S7", "S33"};
    const int32_t s1[] = {494}, s7[] = {338, 281, 93, 503, 475, 149, 364};
    const int32_t s33[] = {298, 187, 393, 179, 503, 10,  132, 216, 221, 44,  282,
                           35,  60,  187, 275, 57,  441, 23,  40,  123, 50,  457,
                           492, 470, 427, 92,  78,  184, 256, 421, 130, 58,  54};
    const int32_t *seqs[] = {s1, s7, s33};
    const int64_t lens[] = {1, 7, 33};
    int checked = 0;
    for (int si = 0; si < 3; si++) {
        snprintf(path, sizeof path, "%s/golden/%s.%s.deq.logits.bin", dir, name, seq_names[si]);
        int64_t T, V;
        float *ref = read_logits(path, &T, &V);
        if (!ref) continue;
        cr_assert_eq(T, lens[si]);
        cr_assert_eq(V, m.V);
        const int64_t n_ctx = T + 2;
        float *one = malloc(T * V * sizeof(float)), *alt = malloc(T * V * sizeof(float));
        char what[256];

        state s;
        state_init(&s, &m, LOOM_KV_F32, n_ctx);
        forward(&m, &s, seqs[si], T, 0, one);
        state_free(&s, &m);
        snprintf(what, sizeof what, "%s %s prefill", name, seq_names[si]);
        check_rows(one, ref, T, V, 1e-4, what);

        state_init(&s, &m, LOOM_KV_F32, n_ctx);
        for (int64_t t = 0; t < T; t++) forward(&m, &s, seqs[si] + t, 1, t, alt + t * V);
        state_free(&s, &m);
        cr_assert(memcmp(one, alt, T * V * sizeof(float)) == 0,
                  "%s %s: token-by-token logits differ from the prefill", name, seq_names[si]);

        if (T > 1) {
            const int64_t split = T / 2;
            state_init(&s, &m, LOOM_KV_F32, n_ctx);
            forward(&m, &s, seqs[si], split, 0, alt);
            forward(&m, &s, seqs[si] + split, T - split, split, alt + split * V);
            state_free(&s, &m);
            cr_assert(memcmp(one, alt, T * V * sizeof(float)) == 0,
                      "%s %s: two prefill chunks differ from one", name, seq_names[si]);
        }

        state_init(&s, &m, LOOM_KV_F16, n_ctx);
        forward(&m, &s, seqs[si], T, 0, alt);
        state_free(&s, &m);
        snprintf(what, sizeof what, "%s %s F16 cache", name, seq_names[si]);
        check_rows(alt, ref, T, V, 1e-2, what);

        state_init(&s, &m, LOOM_KV_INT8, n_ctx);
        forward(&m, &s, seqs[si], T, 0, alt);
        state_free(&s, &m);
        snprintf(what, sizeof what, "%s %s INT8 cache", name, seq_names[si]);
        check_rows(alt, ref, T, V, 2e-2, what);

        free(one);
        free(alt);
        free(ref);
        checked++;
    }
    cr_assert_gt(checked, 0, "no reference logits for %s", name);
    model_close(&m);
}

Test(golden, tiny_llama_f32) { run_model("tiny_llama_f32"); }
Test(golden, tiny_llama_f16) { run_model("tiny_llama_f16"); }
Test(golden, tiny_llama_q8_0) { run_model("tiny_llama_q8_0"); }
Test(golden, tiny_llama_q6_k) { run_model("tiny_llama_q6_k"); }
Test(golden, tiny_llama_q5_k) { run_model("tiny_llama_q5_k"); }
Test(golden, tiny_llama_q4_k) { run_model("tiny_llama_q4_k"); }
Test(golden, tiny_qwen2_q4km) { run_model("tiny_qwen2_q4km"); }
Test(golden, tiny_qwen3_q4km) { run_model("tiny_qwen3_q4km"); }
