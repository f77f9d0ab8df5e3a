/* lower.c: GGUF metadata -> loom IR step graph of a llama / qwen2 / qwen3 decoder.
 *
 * The graph is built from primitive ops only (get_rows, rms_norm, mul, add, matmul, reshape,
 * rope, kv_write, attention, silu) in the order of llama.cpp's llm_build_llama / _qwen2 /
 * _qwen3, so its numbers can be compared with ggml's. Fusion is left to passes/.
 *
 * Invariants: every weight referenced by the graph exists in the file with the expected shape
 * and a computable type (checked before the first node is built); the graph verifies; nothing is
 * read from tensor data (only names, types, shapes, offsets), so lowering a multi-gigabyte model
 * costs microseconds and the graph may outlive the file handle.
 */
#include "loaders/lower.h"

#include "ir/serialize/source_id.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUPPORTED_ARCHS "llama, qwen2, qwen3"
#define SUPPORTED_TYPES "F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K"

void loom_lower_options_init(loom_lower_options *o) {
    memset(o, 0, sizeof *o);
    o->kv_dtype = LOOM_IR_F32;
}

/* ---------------------------------------------------------------- hyperparameters */

/* Reads `<arch>.<suffix>` as u32 into *out; when absent, *out = dflt (dflt < 0: required). */
static loom_status get_u32_key(const loom_gguf *g, const char *arch, const char *suffix,
                               int64_t dflt, int32_t *out, loom_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    loom_error e = {0};
    loom_status st = loom_gguf_get_u32(g, key, &v, &e);
    if (st == LOOM_ERR_NOT_FOUND) {
        if (dflt < 0)
            return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                                  "lower: required metadata key '%s' is missing", key);
        *out = (int32_t)dflt;
        return LOOM_OK;
    }
    if (st) return loom_error_set(err, st, "lower: %s", e.msg);
    if (v == 0 || v > INT32_MAX)
        return loom_error_set(err, LOOM_ERR_FORMAT, "lower: metadata '%s' = %u is out of range",
                              key, v);
    *out = (int32_t)v;
    return LOOM_OK;
}

static loom_status get_f32_key(const loom_gguf *g, const char *key, float dflt, float *out,
                               loom_error *err) {
    loom_error e = {0};
    loom_status st = loom_gguf_get_f32(g, key, out, &e);
    if (st == LOOM_ERR_NOT_FOUND) {
        *out = dflt;
        return LOOM_OK;
    }
    if (st) return loom_error_set(err, st, "lower: %s", e.msg);
    if (!isfinite(*out) || *out <= 0.0f)
        return loom_error_set(err, LOOM_ERR_FORMAT, "lower: metadata '%s' = %g must be > 0", key,
                              (double)*out);
    return LOOM_OK;
}

loom_status loom_lower_read_hparams(const loom_gguf *g, loom_lower_hparams *hp, loom_error *err) {
    memset(hp, 0, sizeof *hp);
    const char *arch = NULL;
    loom_error e = {0};
    if (loom_gguf_get_string(g, "general.architecture", &arch, &e))
        return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                              "lower: no usable 'general.architecture' (%s); supported: " SUPPORTED_ARCHS,
                              e.msg);
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3"))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "lower: architecture '%.64s' is not supported; supported: " SUPPORTED_ARCHS,
                              arch);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch);
    loom_status st;
    if ((st = get_u32_key(g, arch, "block_count", -1, &hp->n_layer, err)) ||
        (st = get_u32_key(g, arch, "embedding_length", -1, &hp->n_embd, err)) ||
        (st = get_u32_key(g, arch, "feed_forward_length", -1, &hp->n_ff, err)) ||
        (st = get_u32_key(g, arch, "attention.head_count", -1, &hp->n_head, err)) ||
        (st = get_u32_key(g, arch, "attention.head_count_kv", hp->n_head, &hp->n_head_kv, err)) ||
        (st = get_u32_key(g, arch, "context_length", 2048, &hp->n_ctx_train, err)))
        return st;
    /* Each layer has at least nine tensors: a larger count cannot be right, and bounding it
     * keeps a hostile file from sizing allocations. */
    if ((uint64_t)hp->n_layer * 9 > loom_gguf_n_tensors(g))
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "lower: %s.block_count %d needs at least %llu tensors; the file has %zu",
                              arch, hp->n_layer, (unsigned long long)hp->n_layer * 9,
                              loom_gguf_n_tensors(g));
    if (hp->n_embd % hp->n_head)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "lower: embedding_length %d is not a multiple of head_count %d",
                              hp->n_embd, hp->n_head);
    int32_t value_length;
    if ((st = get_u32_key(g, arch, "attention.key_length", hp->n_embd / hp->n_head,
                          &hp->head_dim, err)) ||
        (st = get_u32_key(g, arch, "attention.value_length", hp->head_dim, &value_length, err)) ||
        (st = get_u32_key(g, arch, "rope.dimension_count", hp->head_dim, &hp->n_rot, err)))
        return st;
    if (value_length != hp->head_dim)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "lower: key_length %d != value_length %d is not supported (only "
                              "equal key and value head sizes)",
                              hp->head_dim, value_length);
    if (hp->n_head % hp->n_head_kv)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "lower: head_count %d is not a multiple of head_count_kv %d",
                              hp->n_head, hp->n_head_kv);
    if (hp->n_rot % 2 || hp->n_rot > hp->head_dim)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "lower: rope.dimension_count %d must be even and <= head_dim %d",
                              hp->n_rot, hp->head_dim);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if ((st = get_f32_key(g, key, 1e-5f, &hp->rms_eps, err))) return st;
    /* llama.cpp's default when the file has no freq_base (stories260K has none). */
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    if ((st = get_f32_key(g, key, 10000.0f, &hp->rope_freq_base, err))) return st;
    /* Linear RoPE scaling: rope.scaling.type "linear" + rope.scaling.factor, or the older
     * rope.scale_linear. Other scaling types change the math: refused. */
    hp->rope_freq_scale = 1.0f;
    const char *stype = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (loom_gguf_find(g, key) && loom_gguf_get_string(g, key, &stype, &e) == LOOM_OK &&
        strcmp(stype, "none") && strcmp(stype, "linear"))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "lower: rope scaling '%.32s' (%s) is not supported; supported: "
                              "none, linear",
                              stype, key);
    float factor = 0.0f;
    if (!stype || strcmp(stype, "none")) {
        snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
        if ((st = get_f32_key(g, key, 0.0f, &factor, err))) return st;
        if (factor == 0.0f) {
            snprintf(key, sizeof key, "%s.rope.scale_linear", arch);
            if ((st = get_f32_key(g, key, 0.0f, &factor, err))) return st;
        }
        if (factor != 0.0f) hp->rope_freq_scale = 1.0f / factor;
    }
    hp->rope_neox = strcmp(arch, "llama") != 0;
    hp->has_qk_norm = !strcmp(arch, "qwen3");
    hp->has_qkv_bias = !strcmp(arch, "qwen2");
    const loom_gguf_tensor *emb = loom_gguf_find_tensor(g, "token_embd.weight");
    if (!emb)
        return loom_error_set(err, LOOM_ERR_NOT_FOUND,
                              "lower: tensor 'token_embd.weight' is missing (%s model)", arch);
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
        return loom_error_set(err, LOOM_ERR_FORMAT,
                              "lower: tensor 'token_embd.weight' has %u dims, expected [%d, n_vocab]",
                              emb->n_dims, hp->n_embd);
    hp->n_vocab = (int32_t)emb->ne[1];
    /* Llama 3.1-style per-frequency RoPE factors change the rotation: refuse rather than run
     * with the wrong angles. */
    if (loom_gguf_find_tensor(g, "rope_freqs.weight"))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "lower: tensor 'rope_freqs.weight' (RoPE frequency factors, Llama "
                              "3.1 style) is not supported; supported RoPE scaling: none, linear");
    hp->tied_output = loom_gguf_find_tensor(g, "output.weight") == NULL;
    return LOOM_OK;
}

/* ---------------------------------------------------------------- weights */

typedef struct lower_ctx {
    const loom_gguf *gguf;
    loom_ir_graph *g;
    const loom_lower_hparams *hp;
    loom_error *err;
} lower_ctx;

static bool type_computable(loom_ggml_type t) {
    switch (t) {
    case LOOM_GGML_F32: case LOOM_GGML_F16: case LOOM_GGML_BF16: case LOOM_GGML_Q8_0:
    case LOOM_GGML_Q4_K: case LOOM_GGML_Q5_K: case LOOM_GGML_Q6_K:
        return true;
    default:
        return false;
    }
}

/* Declares GGUF tensor `name` as a weight after checking it: present (unless optional, then
 * *out = LOOM_IR_NO_VALUE), ggml shape ne == {d0, d1} (d1 == 0: a vector of d0), a computable
 * type (vectors: F32/F16/BF16). IR dims are the reverse of ggml's ne. */
static loom_status weight(lower_ctx *c, const char *name, int64_t d0, int64_t d1, bool optional,
                          loom_ir_value_id *out) {
    *out = LOOM_IR_NO_VALUE;
    const loom_gguf_tensor *t = loom_gguf_find_tensor(c->gguf, name);
    if (!t) {
        if (optional) return LOOM_OK;
        return loom_error_set(c->err, LOOM_ERR_NOT_FOUND,
                              "lower: tensor '%s' is missing (required by a %s model)", name,
                              c->hp->arch);
    }
    uint32_t want_dims = d1 ? 2 : 1;
    bool shape_ok = t->n_dims == want_dims && t->ne[0] == d0 && (!d1 || t->ne[1] == d1);
    if (!shape_ok) {
        char got[96] = "", want[64];
        for (uint32_t i = 0; i < t->n_dims; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                     (long long)t->ne[i]);
        if (d1) snprintf(want, sizeof want, "%lld, %lld", (long long)d0, (long long)d1);
        else snprintf(want, sizeof want, "%lld", (long long)d0);
        return loom_error_set(c->err, LOOM_ERR_FORMAT,
                              "lower: tensor '%s' has shape [%s], expected [%s] (ggml order)",
                              name, got, want);
    }
    const loom_ggml_type_info *ti = loom_ggml_type_get(t->type);
    const char *tname = ti ? ti->name : "?";
    if (d1 ? !type_computable(t->type)
           : !(t->type == LOOM_GGML_F32 || t->type == LOOM_GGML_F16 || t->type == LOOM_GGML_BF16))
        return loom_error_set(c->err, LOOM_ERR_UNSUPPORTED,
                              "lower: tensor '%s' has type %s; supported: %s", name, tname,
                              d1 ? SUPPORTED_TYPES : "F32, F16, BF16 (vectors)");
    int64_t dims[2] = {d1 ? d1 : d0, d0};
    loom_ir_type ty = loom_ir_type_make((loom_ir_dtype)t->type, want_dims, dims);
    return loom_ir_add_weight(c->g, name, &ty, t->file_offset, t->nbytes, out, c->err);
}

typedef struct layer_weights {
    loom_ir_value_id attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo;
    loom_ir_value_id ffn_norm, gate, up, down;
} layer_weights;

static loom_status layer_weights_declare(lower_ctx *c, int l, layer_weights *w) {
    const loom_lower_hparams *hp = c->hp;
    int64_t E = hp->n_embd, D = hp->head_dim, q_dim = (int64_t)hp->n_head * D,
            kv_dim = (int64_t)hp->n_head_kv * D, F = hp->n_ff;
    char n[96];
    loom_status st;
#define W(field, suffix, d0, d1, opt)                                      \
    do {                                                                   \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                        \
        if ((st = weight(c, n, d0, d1, opt, &w->field))) return st;        \
    } while (0)
    W(attn_norm, "attn_norm.weight", E, 0, false);
    W(wq, "attn_q.weight", E, q_dim, false);
    W(wk, "attn_k.weight", E, kv_dim, false);
    W(wv, "attn_v.weight", E, kv_dim, false);
    /* Biases: qwen2 requires them; llama files (some Mistral-style fine-tunes) may carry them. */
    bool need_bias = hp->has_qkv_bias;
    W(bq, "attn_q.bias", q_dim, 0, !need_bias);
    W(bk, "attn_k.bias", kv_dim, 0, !need_bias);
    W(bv, "attn_v.bias", kv_dim, 0, !need_bias);
    if (hp->has_qk_norm) {
        W(q_norm, "attn_q_norm.weight", D, 0, false);
        W(k_norm, "attn_k_norm.weight", D, 0, false);
    } else {
        w->q_norm = w->k_norm = LOOM_IR_NO_VALUE;
    }
    W(wo, "attn_output.weight", q_dim, E, false);
    W(ffn_norm, "ffn_norm.weight", E, 0, false);
    W(gate, "ffn_gate.weight", E, F, false);
    W(up, "ffn_up.weight", E, F, false);
    W(down, "ffn_down.weight", F, E, false);
#undef W
    return LOOM_OK;
}

/* ---------------------------------------------------------------- graph */

static loom_status set_metadata(lower_ctx *c, const loom_lower_options *o, int64_t n_ctx) {
    const loom_lower_hparams *hp = c->hp;
    loom_ir_graph *g = c->g;
    loom_error *err = c->err;
    /* The same identity loom_ir_set_source records; source.file only when the path is known. */
    uint64_t size = loom_gguf_file_size(c->gguf), header = loom_gguf_data_offset(c->gguf);
    char sum[LOOM_IR_CHECKSUM_LEN];
    loom_ir_gguf_checksum(loom_gguf_file_bytes(c->gguf), header < size ? header : size, sum);
    const char *base = o->source_path ? strrchr(o->source_path, '/') : NULL;
    base = base ? base + 1 : o->source_path;
    loom_status st;
    if ((st = loom_ir_meta_set_string(g, "loom.arch", hp->arch, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_layer", hp->n_layer, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_embd", hp->n_embd, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_ff", hp->n_ff, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_head", hp->n_head, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_head_kv", hp->n_head_kv, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.head_dim", hp->head_dim, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_vocab", hp->n_vocab, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_rot", hp->n_rot, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_ctx", n_ctx, err)) ||
        (st = loom_ir_meta_set_int(g, "loom.n_ctx_train", hp->n_ctx_train, err)) ||
        (st = loom_ir_meta_set_float(g, "loom.rms_eps", hp->rms_eps, err)) ||
        (st = loom_ir_meta_set_float(g, "loom.rope_freq_base", hp->rope_freq_base, err)) ||
        (st = loom_ir_meta_set_float(g, "loom.rope_freq_scale", hp->rope_freq_scale, err)) ||
        (st = loom_ir_meta_set_string(g, "loom.rope_mode", hp->rope_neox ? "neox" : "norm", err)) ||
        (st = loom_ir_meta_set_int(g, "loom.tied_output", hp->tied_output, err)) ||
        (base && (st = loom_ir_meta_set_string(g, "source.file", base, err))) ||
        (st = loom_ir_meta_set_int(g, "source.size", (int64_t)size, err)) ||
        (st = loom_ir_meta_set_string(g, "source.checksum", sum, err)))
        return st;
    return LOOM_OK;
}

/* Builds layer l on the residual stream x [T,E]; returns the new residual stream. Builder calls
 * chain through LOOM_IR_NO_VALUE, so the block is checked once at the end. */
static loom_ir_value_id build_layer(lower_ctx *c, int l, const layer_weights *w,
                                    loom_ir_value_id x, loom_ir_value_id pos, int64_t T) {
    const loom_lower_hparams *hp = c->hp;
    loom_ir_graph *g = c->g;
    loom_error *err = c->err;
    int64_t H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim;
    char name[64];

    loom_ir_value_id h = loom_ir_mul(g, loom_ir_rms_norm(g, x, hp->rms_eps, err), w->attn_norm, err);
    loom_ir_value_id q = loom_ir_matmul(g, h, w->wq, err);
    loom_ir_value_id k = loom_ir_matmul(g, h, w->wk, err);
    loom_ir_value_id v = loom_ir_matmul(g, h, w->wv, err);
    if (w->bq != LOOM_IR_NO_VALUE) q = loom_ir_add(g, q, w->bq, err);
    if (w->bk != LOOM_IR_NO_VALUE) k = loom_ir_add(g, k, w->bk, err);
    if (w->bv != LOOM_IR_NO_VALUE) v = loom_ir_add(g, v, w->bv, err);
    int64_t q3[3] = {T, H, D}, kv3[3] = {T, Hkv, D};
    q = loom_ir_reshape(g, q, 3, q3, err);
    k = loom_ir_reshape(g, k, 3, kv3, err);
    v = loom_ir_reshape(g, v, 3, kv3, err);
    if (hp->has_qk_norm) {
        q = loom_ir_mul(g, loom_ir_rms_norm(g, q, hp->rms_eps, err), w->q_norm, err);
        k = loom_ir_mul(g, loom_ir_rms_norm(g, k, hp->rms_eps, err), w->k_norm, err);
    }
    int mode = hp->rope_neox ? LOOM_IR_ROPE_NEOX : LOOM_IR_ROPE_NORM;
    q = loom_ir_rope(g, q, pos, mode, hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, err);
    k = loom_ir_rope(g, k, pos, mode, hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, err);
    snprintf(name, sizeof name, "kv.%d.k", l);
    loom_ir_value_id kc = loom_ir_kv_write(g, loom_ir_find_value(g, name), k, pos, err);
    snprintf(name, sizeof name, "kv.%d.v", l);
    loom_ir_value_id vc = loom_ir_kv_write(g, loom_ir_find_value(g, name), v, pos, err);
    loom_ir_value_id a = loom_ir_attention(g, q, kc, vc, pos, H, Hkv, D,
                                           1.0f / sqrtf((float)D), err);
    x = loom_ir_add(g, loom_ir_matmul(g, a, w->wo, err), x, err);

    h = loom_ir_mul(g, loom_ir_rms_norm(g, x, hp->rms_eps, err), w->ffn_norm, err);
    loom_ir_value_id gate = loom_ir_matmul(g, h, w->gate, err);
    loom_ir_value_id up = loom_ir_matmul(g, h, w->up, err);
    loom_ir_value_id ff = loom_ir_mul(g, loom_ir_silu(g, gate, err), up, err);
    return loom_ir_add(g, loom_ir_matmul(g, ff, w->down, err), x, err);
}

static loom_status lower(lower_ctx *c, const loom_lower_options *o) {
    const loom_lower_hparams *hp = c->hp;
    loom_ir_graph *g = c->g;
    loom_error *err = c->err;
    int64_t max_tokens = o->max_tokens > 0 ? o->max_tokens : 512;
    int64_t n_ctx = o->n_ctx > 0 ? o->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (max_tokens > n_ctx) max_tokens = n_ctx;
    if (o->kv_dtype != LOOM_IR_F32 && o->kv_dtype != LOOM_IR_F16)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "lower: KV cache dtype %s is not supported; supported: f32, f16",
                              loom_ir_dtype_name(o->kv_dtype) ? loom_ir_dtype_name(o->kv_dtype) : "?");
    loom_status st;
    int64_t T;
    if ((st = set_metadata(c, o, n_ctx)) ||
        (st = loom_ir_meta_set_int(g, "loom.max_tokens", max_tokens, err)) ||
        (st = loom_ir_add_symbol(g, "T", max_tokens, &T, err)))
        return st;

    /* Declarations: inputs, then every weight (checked), then the KV cache state. */
    loom_ir_value_id tokens, pos, emb, out_norm, out_w, last_row = LOOM_IR_NO_VALUE;
    loom_ir_type ti = loom_ir_type_make(LOOM_IR_I32, 1, &T);
    int64_t one = 1;
    loom_ir_type t1 = loom_ir_type_make(LOOM_IR_I32, 1, &one);
    if ((st = loom_ir_add_input(g, "tokens", &ti, &tokens, err)) ||
        (st = loom_ir_add_input(g, "positions", &ti, &pos, err)) ||
        (o->last_logits_only && (st = loom_ir_add_input(g, "last_row", &t1, &last_row, err))) ||
        (st = loom_ir_meta_set_string(g, "loom.logits", o->last_logits_only ? "last" : "all", err)) ||
        (st = weight(c, "token_embd.weight", hp->n_embd, hp->n_vocab, false, &emb)))
        return st;
    layer_weights *lw = calloc((size_t)hp->n_layer, sizeof *lw);
    if (!lw) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "lower: out of memory");
    for (int l = 0; l < hp->n_layer; l++)
        if ((st = layer_weights_declare(c, l, &lw[l]))) goto done;
    if ((st = weight(c, "output_norm.weight", hp->n_embd, 0, false, &out_norm))) goto done;
    if (hp->tied_output) out_w = emb;
    else if ((st = weight(c, "output.weight", hp->n_embd, hp->n_vocab, false, &out_w))) goto done;
    int64_t cache_dims[3] = {n_ctx, hp->n_head_kv, hp->head_dim};
    loom_ir_type tc = loom_ir_type_make(o->kv_dtype, 3, cache_dims);
    for (int l = 0; l < hp->n_layer; l++) {
        char name[64];
        loom_ir_value_id unused;
        snprintf(name, sizeof name, "kv.%d.k", l);
        if ((st = loom_ir_add_state(g, name, &tc, &unused, err))) goto done;
        snprintf(name, sizeof name, "kv.%d.v", l);
        if ((st = loom_ir_add_state(g, name, &tc, &unused, err))) goto done;
    }

    /* The step. */
    loom_ir_value_id x = loom_ir_get_rows(g, emb, tokens, err);
    for (int l = 0; l < hp->n_layer && x != LOOM_IR_NO_VALUE; l++)
        x = build_layer(c, l, &lw[l], x, pos, T);
    if (last_row != LOOM_IR_NO_VALUE) x = loom_ir_get_rows(g, x, last_row, err);
    x = loom_ir_mul(g, loom_ir_rms_norm(g, x, hp->rms_eps, err), out_norm, err);
    x = loom_ir_matmul(g, x, out_w, err);
    if (x == LOOM_IR_NO_VALUE) {
        st = err && err->status ? err->status : LOOM_ERR_INVALID_ARGUMENT;
        if (err) loom_error_prefix(err, "lower: building the %s graph: ", hp->arch);
        goto done;
    }
    if ((st = loom_ir_add_output(g, "logits", x, err))) goto done;
    if ((st = loom_ir_verify(g, err))) loom_error_prefix(err, "lower: the lowered graph fails to verify: ");
done:
    free(lw);
    return st;
}

loom_status loom_lower_gguf(const loom_gguf *gguf, const loom_lower_options *opts,
                            loom_ir_graph **out, loom_error *err) {
    *out = NULL;
    loom_lower_options o;
    loom_lower_options_init(&o);
    if (opts) o = *opts;
    if (o.max_tokens < 0 || o.n_ctx < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "lower: max_tokens %d and n_ctx %d must be >= 0 (0: default)",
                              o.max_tokens, o.n_ctx);
    loom_lower_hparams hp;
    loom_status st = loom_lower_read_hparams(gguf, &hp, err);
    if (st) return st;
    loom_ir_graph *g = loom_ir_graph_create();
    if (!g) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "lower: out of memory");
    loom_error local = {0};
    lower_ctx c = {gguf, g, &hp, err ? err : &local};
    if (err) err->status = LOOM_OK;
    if ((st = lower(&c, &o))) {
        loom_ir_graph_destroy(g);
        return st;
    }
    *out = g;
    return LOOM_OK;
}
