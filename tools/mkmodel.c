/* mkmodel.c: writes deterministic random-weight llama / qwen3 GGUF models (see mkmodel.h).
 *
 * Layout and names follow llama.cpp (and the golden models in shared/testdata): token_embd,
 * per layer attn_norm, attn_q/k/v/output, [attn_q_norm, attn_k_norm for qwen3], ffn_norm,
 * ffn_gate/up/down, then output_norm and output; ggml order, so ne[0] is the row length
 * (attn_q.weight is [n_embd, n_head*head_dim]). The tokenizer is synthetic: the 256 GPT-2 byte
 * tokens, `tok<ID>` fillers, then `<|endoftext|>` (BOS) and `<|im_end|>` (EOS), no merges.
 *
 * Speed: tensors are produced by the GGUF writer's fill callback straight into the mapped
 * output file; each fill splits its rows over pthreads. Random values come from a counter-based
 * generator (splitmix64 of a per-row key plus the column), so a row's values depend only on
 * (seed, tensor index, row, column): the bytes are the same for every thread count.
 */
#include "tools/mkmodel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/gguf.h"

void loom_mkmodel_config_init(loom_mkmodel_config *c, const char *arch) {
    *c = (loom_mkmodel_config){
        .arch = arch,
        .n_layer = 2,
        .n_embd = 256,
        .n_ff = 768,
        .n_head = 4,
        .n_head_kv = 2,
        .head_dim = 64,
        .n_vocab = 512,
        .n_ctx = 4096,
        .quant = "q4_k_m",
        .seed = 1,
        .n_threads = 0,
    };
}

/* ---- quantization choice ----------------------------------------------------------------- */

typedef struct {
    const char *name;
    loom_ggml_type type;   /* type of the matrices (the majority's for the _m schemes) */
    uint32_t file_type;    /* general.file_type, llama.cpp's llama_ftype */
    bool mixed;            /* _m: Q6_K for output.weight and use_more_bits' attn_v / ffn_down */
} quant_scheme;

static const quant_scheme schemes[] = {
    {"q4_k_m", LOOM_GGML_Q4_K, 15, true}, {"q4_k", LOOM_GGML_Q4_K, 14, false},
    {"q5_k_m", LOOM_GGML_Q5_K, 17, true}, {"q5_k", LOOM_GGML_Q5_K, 16, false},
    {"q6_k", LOOM_GGML_Q6_K, 18, false},  {"q8_0", LOOM_GGML_Q8_0, 7, false},
    {"f16", LOOM_GGML_F16, 1, false},     {"f32", LOOM_GGML_F32, 0, false},
};

static const quant_scheme *find_scheme(const char *name) {
    for (size_t i = 0; name != NULL && i < sizeof schemes / sizeof schemes[0]; i++)
        if (strcmp(schemes[i].name, name) == 0) return &schemes[i];
    return NULL;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between. */
static bool use_more_bits(int layer, int n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

loom_ggml_type loom_mkmodel_tensor_type(const loom_mkmodel_config *c, const char *name, int64_t row_len) {
    if (has_suffix(name, "_norm.weight")) return LOOM_GGML_F32;
    const quant_scheme *q = find_scheme(c->quant);
    LOOM_ASSERT(q != NULL);
    loom_ggml_type t = q->type;
    if (q->mixed) {
        int layer = -1, end = 0;
        char kind[32];
        if (strcmp(name, "output.weight") == 0) {
            t = LOOM_GGML_Q6_K;
        } else if (sscanf(name, "blk.%d.%31[a-z_].weight%n", &layer, kind, &end) == 2 &&
                   name[end] == '\0' && (strcmp(kind, "attn_v") == 0 || strcmp(kind, "ffn_down") == 0) &&
                   use_more_bits(layer, (int)c->n_layer)) {
            t = LOOM_GGML_Q6_K;
        }
    }
    const loom_ggml_type_info *ti = loom_ggml_type_get(t);
    if (row_len % ti->block_size != 0) t = row_len % LOOM_QK8_0 == 0 ? LOOM_GGML_Q8_0 : LOOM_GGML_F16;
    return t;
}

loom_status loom_mkmodel_check(const loom_mkmodel_config *c, loom_error *err) {
    const char *bad = NULL;
    if (c->arch == NULL || (strcmp(c->arch, "llama") != 0 && strcmp(c->arch, "qwen3") != 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "mkmodel: arch '%s': must be llama or qwen3",
                              c->arch ? c->arch : "(null)");
    if (find_scheme(c->quant) == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "mkmodel: quant '%s': must be q4_k_m, q4_k, q5_k_m, q5_k, q6_k, q8_0, f16 or f32",
                              c->quant ? c->quant : "(null)");
    const uint32_t lim = 1u << 20;
    if (c->n_layer < 1 || c->n_layer > 4096) bad = "layers must be 1..4096";
    else if (c->n_embd < 1 || c->n_embd > lim) bad = "hidden must be 1..2^20";
    else if (c->n_ff < 1 || c->n_ff > lim) bad = "ffn must be 1..2^20";
    else if (c->n_head < 1 || c->n_head > 4096) bad = "heads must be 1..4096";
    else if (c->n_head_kv < 1 || c->n_head % c->n_head_kv != 0) bad = "kv-heads must divide heads";
    else if (c->head_dim < 2 || c->head_dim > 4096 || c->head_dim % 2 != 0) bad = "head-dim must be even, 2..4096";
    else if (c->n_vocab < 258 || c->n_vocab > (1u << 24)) bad = "vocab must be 258..2^24 (256 byte tokens + 2 specials)";
    else if (c->n_ctx < 1) bad = "ctx must be >= 1";
    if (bad != NULL) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "mkmodel: %s", bad);
    return LOOM_OK;
}

/* ---- random values ----------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t row_key(uint64_t seed, uint32_t tensor, int64_t row) {
    return mix64(mix64(mix64(seed + 0x9e3779b97f4a7c15ull) + tensor) + (uint64_t)row);
}

/* n values mean + std * g, g ~ sum of four 16-bit uniforms, centred and scaled to unit
 * variance (integer arithmetic, then one float multiply-add: identical on every machine). */
static void random_row(uint64_t key, float mean, float std, float *out, int64_t n) {
    const float scale = std / 37837.23f; /* sqrt(4 * (65536^2 - 1) / 12) */
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = mix64(key + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
        int32_t s = (int32_t)(r & 0xffff) + (int32_t)((r >> 16) & 0xffff) +
                    (int32_t)((r >> 32) & 0xffff) + (int32_t)(r >> 48) - 131070;
        float v = scale * (float)s; /* two statements: no fused multiply-add, same bits anywhere */
        out[i] = mean + v;
    }
}

/* ---- tensors ----------------------------------------------------------------------------- */

typedef struct {
    char name[64];
    loom_ggml_type type;
    uint32_t n_dims;
    int64_t ne[2];
    float mean, std;
    uint32_t index;
    uint64_t seed;
    int n_threads;
} tensor_spec;

typedef struct {
    const tensor_spec *t;
    uint8_t *dst;
    int64_t row_begin, row_end, row_bytes;
    loom_status status;
} fill_job;

static void *fill_rows(void *arg) {
    fill_job *j = arg;
    const tensor_spec *t = j->t;
    int64_t n = t->ne[0];
    float *buf = malloc((size_t)n * sizeof(float));
    if (buf == NULL) {
        j->status = LOOM_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    j->status = LOOM_OK;
    for (int64_t r = j->row_begin; r < j->row_end && j->status == LOOM_OK; r++) {
        random_row(row_key(t->seed, t->index, r), t->mean, t->std, buf, n);
        j->status = loom_quantize_row(t->type, buf, j->dst + r * j->row_bytes, n);
    }
    free(buf);
    return NULL;
}

/* The writer's fill callback: rows split into contiguous chunks, one pthread per chunk. */
static loom_status fill_tensor(void *ctx, void *dst, uint64_t nbytes, loom_error *err) {
    const tensor_spec *t = ctx;
    int64_t rows = t->n_dims > 1 ? t->ne[1] : 1;
    int64_t row_bytes = loom_ggml_row_bytes(t->type, t->ne[0]);
    LOOM_ASSERT(row_bytes > 0 && (uint64_t)(row_bytes * rows) == nbytes);
    int64_t work = rows * t->ne[0];
    int n = t->n_threads;
    if (n > rows) n = (int)rows;
    if ((int64_t)n > work / 65536 + 1) n = (int)(work / 65536 + 1); /* small tensors: fewer threads */
    if (n < 1) n = 1;
    fill_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    bool *started = calloc((size_t)n, sizeof *started);
    loom_status s = LOOM_OK;
    if (jobs == NULL || tids == NULL || started == NULL) {
        s = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "mkmodel: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        jobs[i] = (fill_job){.t = t, .dst = dst, .row_bytes = row_bytes, .row_begin = rows * i / n,
                             .row_end = rows * (i + 1) / n};
        /* chunk 0 runs on this thread; a chunk whose thread cannot start runs here too */
        started[i] = i > 0 && pthread_create(&tids[i], NULL, fill_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < n; i++)
        if (!started[i]) fill_rows(&jobs[i]);
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        if (jobs[i].status != LOOM_OK && s == LOOM_OK)
            s = loom_error_set(err, jobs[i].status, "mkmodel: tensor '%s': %s while generating rows",
                               t->name, loom_status_name(jobs[i].status));
    }
done:
    free(jobs);
    free(tids);
    free(started);
    return s;
}

/* Appends one tensor spec (2-D when ne1 > 0). */
static void add_spec(tensor_spec *specs, uint32_t *n, const loom_mkmodel_config *c, const char *name,
                     int64_t ne0, int64_t ne1, bool is_norm, int n_threads) {
    tensor_spec *t = &specs[*n];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 > 0 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 > 0 ? ne1 : 1;
    t->type = loom_mkmodel_tensor_type(c, name, ne0);
    t->mean = is_norm ? 1.0f : 0.0f;
    t->std = is_norm ? 0.1f : 0.02f;
    t->index = *n;
    t->seed = c->seed;
    t->n_threads = n_threads;
    (*n)++;
}

/* ---- tokenizer --------------------------------------------------------------------------- */

/* GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for
 * U+0100 onwards in byte order. Writes the UTF-8 of byte b's token into out (>= 3 bytes). */
static void byte_token(int b, char *out) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    uint32_t cp = (uint32_t)b;
    if (!printable) {
        int k = 0;
        for (int i = 0; i < b; i++)
            if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) k++;
        cp = 256u + (uint32_t)k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = '\0';
    }
}

static loom_status set_tokenizer(loom_gguf_writer *w, uint32_t n_vocab, loom_error *err) {
    loom_status s = LOOM_ERR_OUT_OF_MEMORY;
    const char **toks = malloc((size_t)n_vocab * sizeof *toks);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    char *text = malloc((size_t)n_vocab * 16);
    if (toks == NULL || types == NULL || text == NULL) {
        loom_error_set(err, s, "mkmodel: out of memory for %u tokens", n_vocab);
        goto done;
    }
    for (uint32_t i = 0; i < n_vocab; i++) {
        char *t = text + (size_t)i * 16;
        if (i < 256) byte_token((int)i, t);
        else if (i == n_vocab - 2) snprintf(t, 16, "<|endoftext|>");
        else if (i == n_vocab - 1) snprintf(t, 16, "<|im_end|>");
        else snprintf(t, 16, "tok%u", i);
        toks[i] = t;
        types[i] = i >= n_vocab - 2 ? 3 : 1; /* control : normal */
    }
    if ((s = loom_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", err)) ||
        (s = loom_gguf_writer_set_string(w, "tokenizer.ggml.pre", "default", err)) ||
        (s = loom_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", toks, n_vocab, err)) ||
        (s = loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_I32, types, n_vocab, err)) ||
        (s = loom_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", NULL, 0, err)) ||
        (s = loom_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", n_vocab - 2, err)) ||
        (s = loom_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", n_vocab - 1, err)) ||
        (s = loom_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false, err)))
        goto done;
    s = LOOM_OK;
done:
    free(toks);
    free(types);
    free(text);
    return s;
}

/* ---- the model --------------------------------------------------------------------------- */

static loom_status set_hparams(loom_gguf_writer *w, const loom_mkmodel_config *c, loom_error *err) {
    bool qwen3 = strcmp(c->arch, "qwen3") == 0;
    char key[128], name[64];
    loom_status s;
#define ARCH_KEY(suffix) (snprintf(key, sizeof key, "%s.%s", c->arch, suffix), key)
    snprintf(name, sizeof name, "loom-mkmodel-%s", c->arch);
    if ((s = loom_gguf_writer_set_string(w, "general.architecture", c->arch, err)) ||
        (s = loom_gguf_writer_set_string(w, "general.name", name, err)) ||
        (s = loom_gguf_writer_set_u32(w, "general.file_type", find_scheme(c->quant)->file_type, err)) ||
        (s = loom_gguf_writer_set_u32(w, "general.quantization_version", 2, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("block_count"), c->n_layer, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("context_length"), c->n_ctx, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("embedding_length"), c->n_embd, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("feed_forward_length"), c->n_ff, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count"), c->n_head, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count_kv"), c->n_head_kv, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("attention.key_length"), c->head_dim, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("attention.value_length"), c->head_dim, err)) ||
        (s = loom_gguf_writer_set_u32(w, ARCH_KEY("rope.dimension_count"), c->head_dim, err)) ||
        (s = loom_gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base"), qwen3 ? 1e6f : 1e4f, err)) ||
        (s = loom_gguf_writer_set_f32(w, ARCH_KEY("attention.layer_norm_rms_epsilon"),
                                      qwen3 ? 1e-6f : 1e-5f, err)))
        return s;
    if (!qwen3 && (s = loom_gguf_writer_set_u32(w, ARCH_KEY("vocab_size"), c->n_vocab, err))) return s;
#undef ARCH_KEY
    return LOOM_OK;
}

loom_status loom_mkmodel_write(const loom_mkmodel_config *c, const char *path, loom_error *err) {
    loom_status s = loom_mkmodel_check(c, err);
    if (s != LOOM_OK) return s;
    bool qwen3 = strcmp(c->arch, "qwen3") == 0;
    int n_threads = c->n_threads;
    if (n_threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cores > 0 ? (int)(cores < 1024 ? cores : 1024) : 1;
    }
    int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    uint32_t max_specs = 3 + 11 * c->n_layer;
    tensor_spec *specs = calloc(max_specs, sizeof *specs);
    loom_gguf_writer *w = NULL;
    if (specs == NULL) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "mkmodel: out of memory");
    uint32_t n = 0;
    char name[64];
    add_spec(specs, &n, c, "token_embd.weight", c->n_embd, c->n_vocab, false, n_threads);
    for (uint32_t l = 0; l < c->n_layer; l++) {
#define BLK(x) (snprintf(name, sizeof name, "blk.%u.%s.weight", l, x), name)
        add_spec(specs, &n, c, BLK("attn_norm"), c->n_embd, 0, true, n_threads);
        add_spec(specs, &n, c, BLK("attn_q"), c->n_embd, q_dim, false, n_threads);
        add_spec(specs, &n, c, BLK("attn_k"), c->n_embd, kv_dim, false, n_threads);
        add_spec(specs, &n, c, BLK("attn_v"), c->n_embd, kv_dim, false, n_threads);
        add_spec(specs, &n, c, BLK("attn_output"), q_dim, c->n_embd, false, n_threads);
        if (qwen3) {
            add_spec(specs, &n, c, BLK("attn_q_norm"), c->head_dim, 0, true, n_threads);
            add_spec(specs, &n, c, BLK("attn_k_norm"), c->head_dim, 0, true, n_threads);
        }
        add_spec(specs, &n, c, BLK("ffn_norm"), c->n_embd, 0, true, n_threads);
        add_spec(specs, &n, c, BLK("ffn_gate"), c->n_embd, c->n_ff, false, n_threads);
        add_spec(specs, &n, c, BLK("ffn_up"), c->n_embd, c->n_ff, false, n_threads);
        add_spec(specs, &n, c, BLK("ffn_down"), c->n_ff, c->n_embd, false, n_threads);
#undef BLK
    }
    add_spec(specs, &n, c, "output_norm.weight", c->n_embd, 0, true, n_threads);
    add_spec(specs, &n, c, "output.weight", c->n_embd, c->n_vocab, false, n_threads);
    LOOM_ASSERT(n <= max_specs);

    if ((s = loom_gguf_writer_create(&w, err)) || (s = set_hparams(w, c, err)) ||
        (s = set_tokenizer(w, c->n_vocab, err)))
        goto done;
    for (uint32_t i = 0; i < n; i++)
        if ((s = loom_gguf_writer_add_tensor(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne,
                                             fill_tensor, &specs[i], err)))
            goto done;
    s = loom_gguf_writer_write(w, path, err);
done:
    loom_gguf_writer_destroy(w);
    free(specs);
    return s;
}
