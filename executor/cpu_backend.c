/* cpu_backend.c: the CPU backend of the executor: every op of ir/ops.def on kernels/cpu.
 *
 * Memory is host memory (aligned_alloc, 64 bytes); weights are used where they are (the mmap'd
 * GGUF). run_node maps one IR node to one kernel call (or a short loop of them), translating
 * the IR's shapes into the kernels' sizes: a matmul over x[...,K] is N = numel/K rows, a norm
 * over [...,D] is numel/D rows, broadcasting adds/muls repeat b over a's leading rows.
 * Positions: kv_write and attention take a first position and consecutive rows; a step whose
 * positions are not consecutive (allowed by the IR) runs token by token. Every position is
 * checked against the cache length before anything is written.
 * Float vectors stored as f16/bf16 (norm weights, biases) are widened into a scratch buffer;
 * attention, rope_kv_write and the matmuls with a folded RMSNorm (prenorm, ops.def) take their
 * scratch from the backend's workspace (one per backend, so per session; it grows to the largest
 * step's need), so no step allocates; rope_kv_attention runs as rope_kv_write into the backend's
 * q_buf (grown alike) and attention on it, the unfused pair's calls. The matmul family always
 * runs through the _normed kernels, which are the plain ones when the node has no prenorm.
 */
#include <stdlib.h>
#include <string.h>

#include "executor/backend_common.h"
#include "executor/executor.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_workspace.h"

typedef struct cpu_backend {
    float *scratch; /* widened f16/bf16 vectors */
    size_t scratch_cap;
    loom_cpu_workspace ws; /* attention's and rope_kv_write's scratch */
    float *q_buf;          /* rope_kv_attention: the roped q between its two kernel calls */
    size_t q_cap;          /* floats at q_buf */
} cpu_backend;

static bool is_float_vec_type(loom_ir_dtype t) {
    return t == LOOM_IR_F32 || t == LOOM_IR_F16 || t == LOOM_IR_BF16;
}

static bool is_cache_type(loom_ir_dtype t) { return t == LOOM_IR_F32 || t == LOOM_IR_F16; }

static bool cpu_supports(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n) {
    (void)b;
    const loom_ir_value *in0 = loom_ir_value_get(g, n->in[0]);
    switch (n->op) {
    case LOOM_IR_OP_GET_ROWS:
        return loom_exec_is_weight_type(in0->type.dtype);
    case LOOM_IR_OP_MUL: case LOOM_IR_OP_ADD:
        return in0->type.dtype == LOOM_IR_F32 &&
               is_float_vec_type(loom_ir_value_get(g, n->in[1])->type.dtype);
    case LOOM_IR_OP_MATMUL: case LOOM_IR_OP_MATMUL_ADD:
    case LOOM_IR_OP_MATMUL_PAIR: case LOOM_IR_OP_MATMUL_TRIPLE:
        return loom_exec_matmul_operands_ok(g, n);
    case LOOM_IR_OP_KV_WRITE:
        return is_cache_type(in0->type.dtype);
    case LOOM_IR_OP_ROPE_KV_WRITE: case LOOM_IR_OP_ROPE_KV_ATTENTION:
        return in0->type.dtype == loom_ir_value_get(g, n->in[1])->type.dtype &&
               is_cache_type(in0->type.dtype);
    case LOOM_IR_OP_ATTENTION:
        return is_cache_type(loom_ir_value_get(g, n->in[1])->type.dtype) &&
               loom_ir_value_get(g, n->in[1])->type.dtype ==
                   loom_ir_value_get(g, n->in[2])->type.dtype;
    case LOOM_IR_OP_FUSED_RMS_NORM:
        return is_float_vec_type(loom_ir_value_get(g, n->in[1])->type.dtype);
    case LOOM_IR_OP_RMS_NORM: case LOOM_IR_OP_RESHAPE: case LOOM_IR_OP_ROPE:
    case LOOM_IR_OP_SILU: case LOOM_IR_OP_SOFTMAX: case LOOM_IR_OP_ARGMAX:
    case LOOM_IR_OP_CONVERT:
        return true;
    default:
        return false;
    }
}

static loom_status cpu_alloc(loom_exec_backend *b, size_t bytes, bool zero, void **out,
                             loom_error *err) {
    (void)b;
    size_t rounded = (bytes + 63) / 64 * 64;
    *out = aligned_alloc(64, rounded ? rounded : 64);
    if (!*out)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate %zu bytes",
                              bytes);
    if (zero) memset(*out, 0, rounded);
    return LOOM_OK;
}

static void cpu_free(loom_exec_backend *b, void *p) {
    (void)b;
    free(p);
}

static void cpu_destroy(loom_exec_backend *b) {
    cpu_backend *c = b->impl;
    free(c->scratch);
    free(c->q_buf);
    loom_cpu_workspace_free(&c->ws);
    free(c);
    free(b);
}

/* ---------------------------------------------------------------- helpers */

/* f32 data of a float vector t (widened into scratch slot `slot` of two when f16/bf16). */
static loom_status float_vec(cpu_backend *c, const loom_exec_tensor *t, int slot,
                             const float **out, loom_error *err) {
    if (t->dtype == LOOM_IR_F32) {
        *out = t->data;
        return LOOM_OK;
    }
    size_t need = 2 * (size_t)t->numel;
    if (c->scratch_cap < need) {
        float *p = realloc(c->scratch, need * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cpu backend: out of memory");
        c->scratch = p;
        c->scratch_cap = need;
    }
    float *dst = c->scratch + (size_t)slot * (size_t)t->numel;
    const uint16_t *src = t->data;
    for (int64_t i = 0; i < t->numel; i++)
        dst[i] = t->dtype == LOOM_IR_F16 ? loom_fp16_to_fp32(src[i]) : loom_bf16_to_fp32(src[i]);
    *out = dst;
    return LOOM_OK;
}

/* y = a (op) b with b repeated over a's leading rows. */
static loom_status binary(cpu_backend *c, const loom_exec_tensor *a, const loom_exec_tensor *b,
                          const loom_exec_tensor *y, bool is_add, loom_error *err) {
    const float *bv;
    loom_status st = float_vec(c, b, 0, &bv, err);
    if (st) return st;
    if (b->numel == 0) return LOOM_OK;
    return is_add ? loom_cpu_add_bcast(a->data, a->numel, bv, b->numel, y->data, err)
                  : loom_cpu_mul_bcast(a->data, a->numel, bv, b->numel, y->data, err);
}

static loom_status convert(const loom_exec_tensor *x, const loom_exec_tensor *y, loom_error *err) {
    if (x->dtype == y->dtype) {
        if (x->data != y->data)
            memmove(y->data, x->data, (size_t)x->numel * loom_exec_elem_bytes(x->dtype));
        return LOOM_OK;
    }
    if (x->dtype == LOOM_IR_F16 && y->dtype == LOOM_IR_F32)
        return loom_cpu_f16_to_f32(x->data, x->numel, y->data, err);
    if (x->dtype == LOOM_IR_F32 && y->dtype == LOOM_IR_F16)
        return loom_cpu_f32_to_f16(x->data, x->numel, y->data, err);
    /* The rest through float. */
    for (int64_t i = 0; i < x->numel; i++) {
        float v;
        switch (x->dtype) {
        case LOOM_IR_F32: v = ((const float *)x->data)[i]; break;
        case LOOM_IR_F16: v = loom_fp16_to_fp32(((const uint16_t *)x->data)[i]); break;
        case LOOM_IR_BF16: v = loom_bf16_to_fp32(((const uint16_t *)x->data)[i]); break;
        case LOOM_IR_I32: v = (float)((const int32_t *)x->data)[i]; break;
        default: return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "convert from this dtype");
        }
        switch (y->dtype) {
        case LOOM_IR_F32: ((float *)y->data)[i] = v; break;
        case LOOM_IR_F16: ((uint16_t *)y->data)[i] = loom_fp32_to_fp16(v); break;
        case LOOM_IR_BF16: ((uint16_t *)y->data)[i] = loom_fp32_to_bf16(v); break;
        case LOOM_IR_I32: ((int32_t *)y->data)[i] = (int32_t)v; break;
        default: return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "convert to this dtype");
        }
    }
    return LOOM_OK;
}

/* rope_kv_write's work for node n (rope_kv_write or rope_kv_attention: in = k_cache, v_cache,
 * q [T,Hq,D], k, v [T,Hkv,D], pos [, q_norm, k_norm]; out[0..1] the caches, aliases of in[0..1]),
 * the roped q into q_out. */
static loom_status rope_kv_write(cpu_backend *c, const loom_ir_node *n, const loom_exec_tensor *in,
                                 const loom_exec_tensor *out, float *q_out, loom_error *err) {
    loom_kv_layout kv = loom_exec_kv_layout(&in[0], in[3].dims[1], in[3].dims[2]);
    loom_rope_params p = loom_exec_rope_params(n, &in[2]);
    p.n_kv_head = kv.n_kv_head;
    bool norms = n->n_in == 8;
    return loom_cpu_rope_kv_write_ws(in[2].data, in[3].data, in[4].data, in[5].data,
                                     norms ? in[6].data : NULL, norms ? in[7].data : NULL,
                                     loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0), &p,
                                     out[0].data, NULL, out[1].data, NULL, &kv, q_out, &c->ws,
                                     err);
}

/* attention's work for node n (attention or rope_kv_attention, whose attributes it reads): q
 * [T,Hq*D] against the caches kc, vc at the positions pos_t, into o. Token by token when the
 * positions are not consecutive. */
static loom_status attention(cpu_backend *c, const loom_ir_node *n, const float *q,
                             const loom_exec_tensor *kc, const loom_exec_tensor *vc,
                             const loom_exec_tensor *pos_t, float *o, loom_error *err) {
    loom_kv_layout kv = loom_exec_kv_layout(kc, loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_KV_HEAD, 0),
                                            loom_ir_node_attr_int(n, LOOM_IR_ATTR_HEAD_DIM, 0));
    int64_t H = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_HEAD, 0);
    float scale = loom_ir_node_attr_float(n, LOOM_IR_ATTR_SCALE, 0);
    const int32_t *pos = pos_t->data;
    int64_t T = pos_t->numel, row = H * kv.head_dim;
    bool consecutive;
    loom_status st = loom_exec_check_positions(pos, T, kv.n_ctx, &consecutive, err);
    if (st) return st;
    if (consecutive) {
        loom_attn_params p = {T, H, T ? pos[0] : 0, scale, 0};
        return loom_cpu_attention_ws(q, kc->data, NULL, vc->data, NULL, &kv, &p, o, &c->ws, err);
    }
    for (int64_t t = 0; t < T; t++) {
        loom_attn_params p = {1, H, pos[t], scale, 0};
        if ((st = loom_cpu_attention_ws(q + t * row, kc->data, NULL, vc->data, NULL, &kv, &p,
                                        o + t * row, &c->ws, err)))
            return st;
    }
    return LOOM_OK;
}

/* ---------------------------------------------------------------- dispatch */

static loom_status cpu_run_node(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n,
                                const loom_exec_tensor *in, const loom_exec_tensor *out,
                                loom_error *err) {
    (void)g;
    cpu_backend *c = b->impl;
    loom_status st;
    loom_prenorm pn; /* a matmul-family node's folded RMSNorm (loom_exec_prenorm) */
    const loom_exec_tensor *x = &in[0], *y = &out[0];
    int64_t last = x->rank ? x->dims[x->rank - 1] : 1;
    switch (n->op) {
    case LOOM_IR_OP_GET_ROWS:
        return loom_cpu_embed(loom_exec_kweight_of(x), in[1].data, in[1].numel, y->data, err);
    case LOOM_IR_OP_RMS_NORM:
        return loom_cpu_rms_norm(x->data, NULL, last ? x->numel / last : 0, last,
                                 loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0), y->data, err);
    case LOOM_IR_OP_FUSED_RMS_NORM: {
        const float *w;
        if ((st = float_vec(c, &in[1], 0, &w, err))) return st;
        return loom_cpu_rms_norm(x->data, w, last ? x->numel / last : 0, last,
                                 loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0), y->data, err);
    }
    case LOOM_IR_OP_MUL:
    case LOOM_IR_OP_ADD:
        return binary(c, x, &in[1], y, n->op == LOOM_IR_OP_ADD, err);
    case LOOM_IR_OP_MATMUL:
        return loom_cpu_matmul_normed_ws(x->data, loom_exec_prenorm(n, in, &pn),
                                         last ? x->numel / last : 0, loom_exec_kweight_of(&in[1]),
                                         y->data, &c->ws, err);
    case LOOM_IR_OP_MATMUL_ADD:
        return loom_cpu_matmul_add(x->data, last ? x->numel / last : 0,
                                   loom_exec_kweight_of(&in[1]), in[2].data, y->data, err);
    case LOOM_IR_OP_MATMUL_PAIR: {
        bool swiglu = loom_ir_node_attr_int(n, LOOM_IR_ATTR_SWIGLU, 0) != 0;
        return loom_cpu_matmul_pair_normed_ws(
            x->data, loom_exec_prenorm(n, in, &pn), last ? x->numel / last : 0,
            loom_exec_kweight_of(&in[1]), loom_exec_kweight_of(&in[2]),
            swiglu ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE, y->data, swiglu ? NULL : out[1].data,
            &c->ws, err);
    }
    case LOOM_IR_OP_MATMUL_TRIPLE: {
        loom_kweight w[3] = {loom_exec_kweight_of(&in[1]), loom_exec_kweight_of(&in[2]),
                             loom_exec_kweight_of(&in[3])};
        const float *bias[3] = {NULL, NULL, NULL};
        bool has_bias = n->n_in >= 7; /* 7, or 8 with the prenorm weight last */
        if (has_bias)
            for (int i = 0; i < 3; i++) {
                /* Three slots are needed; widen one at a time only when all are f32. */
                if (in[4 + i].dtype != LOOM_IR_F32)
                    return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                          "matmul_triple biases must be f32 on the CPU backend");
                bias[i] = in[4 + i].data;
            }
        float *ys[3] = {out[0].data, out[1].data, out[2].data};
        return loom_cpu_matmul_triple_normed_ws(x->data, loom_exec_prenorm(n, in, &pn),
                                                last ? x->numel / last : 0, w,
                                                has_bias ? bias : NULL, ys, &c->ws, err);
    }
    case LOOM_IR_OP_RESHAPE:
        if (y->data != x->data)
            memmove(y->data, x->data, (size_t)x->numel * loom_exec_elem_bytes(x->dtype));
        return LOOM_OK;
    case LOOM_IR_OP_ROPE: {
        if (y->data != x->data) memcpy(y->data, x->data, (size_t)x->numel * sizeof(float));
        loom_rope_params p = loom_exec_rope_params(n, x);
        return loom_cpu_rope(y->data, NULL, in[1].data, &p, err);
    }
    case LOOM_IR_OP_KV_WRITE: {
        /* in: cache, x, pos; out aliases the cache. */
        int64_t hkv, d;
        loom_exec_cache_heads(&in[0], &hkv, &d);
        loom_kv_layout kv = loom_exec_kv_layout(&in[0], hkv, d);
        const float *src = in[1].data;
        const int32_t *pos = in[2].data;
        int64_t T = in[2].numel, row = kv.n_kv_head * kv.head_dim;
        bool consecutive;
        if ((st = loom_exec_check_positions(pos, T, kv.n_ctx, &consecutive, err))) return st;
        if (consecutive) return loom_cpu_kv_write(src, T, T ? pos[0] : 0, y->data, NULL, &kv, err);
        for (int64_t t = 0; t < T; t++)
            if ((st = loom_cpu_kv_write(src + t * row, 1, pos[t], y->data, NULL, &kv, err))) return st;
        return LOOM_OK;
    }
    case LOOM_IR_OP_ROPE_KV_WRITE:
        return rope_kv_write(c, n, in, out, out[2].data, err);
    case LOOM_IR_OP_ATTENTION:
        return attention(c, n, x->data, &in[1], &in[2], &in[3], y->data, err);
    case LOOM_IR_OP_ROPE_KV_ATTENTION: {
        /* rope_kv_write with the roped q in the backend's q_buf, then attention on it and the
         * written caches: the same calls as the unfused pair, so the same bits. */
        size_t need = (size_t)in[2].numel;
        if (c->q_cap < need) {
            float *p = realloc(c->q_buf, (need ? need : 1) * sizeof *p);
            if (!p)
                return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate "
                                      "%zu bytes for the roped q of rope_kv_attention",
                                      need * sizeof *p);
            c->q_buf = p;
            c->q_cap = need;
        }
        if ((st = rope_kv_write(c, n, in, out, c->q_buf, err))) return st;
        return attention(c, n, c->q_buf, &out[0], &out[1], &in[5], out[2].data, err);
    }
    case LOOM_IR_OP_SILU:
        return loom_cpu_silu(x->data, x->numel, y->data, err);
    case LOOM_IR_OP_SOFTMAX:
        return loom_cpu_softmax(x->data, last ? x->numel / last : 0, last, y->data, err);
    case LOOM_IR_OP_ARGMAX:
        return loom_cpu_argmax(x->data, last ? x->numel / last : 0, last, y->data, err);
    case LOOM_IR_OP_CONVERT:
        return convert(x, y, err);
    default:
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s has no CPU dispatch",
                              loom_ir_op_info_get(n->op) ? loom_ir_op_info_get(n->op)->name : "?");
    }
}

/* 512 MiB each way, beyond the last-level caches of the machines loom runs on. */
static loom_status cpu_copy_bandwidth(loom_exec_backend *b, double *gbs, loom_error *err) {
    (void)b;
    return loom_cpu_copy_bandwidth((size_t)512 << 20, gbs, err);
}

static const loom_exec_backend_vtable cpu_vtable = {
    .name = "cpu",
    .supports_op = cpu_supports,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .run_node = cpu_run_node,
    .copy_bandwidth = cpu_copy_bandwidth,
    .destroy = cpu_destroy,
};

loom_status loom_exec_cpu_backend_create(int n_threads, loom_exec_backend **out, loom_error *err) {
    *out = NULL;
    if (n_threads < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "cpu backend: n_threads %d < 0",
                              n_threads);
    loom_exec_backend *b = calloc(1, sizeof *b);
    cpu_backend *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cpu backend: out of memory");
    }
    if (n_threads > 0) loom_cpu_set_threads(n_threads);
    b->vt = &cpu_vtable;
    b->impl = c;
    *out = b;
    return LOOM_OK;
}
