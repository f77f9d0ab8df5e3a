/* backend_common.c: the helpers of backend_common.h shared by the CPU and CUDA backends. Pure
 * functions over IR dtypes and executor tensors; the messages are the backends' own (they were
 * moved here unchanged).
 */
#include "executor/backend_common.h"

#include <string.h>

bool loom_exec_is_weight_type(loom_ir_dtype t) {
    switch (t) {
    case LOOM_IR_F32: case LOOM_IR_F16: case LOOM_IR_BF16: case LOOM_IR_Q8_0:
    case LOOM_IR_Q4_K: case LOOM_IR_Q5_K: case LOOM_IR_Q6_K:
        return true;
    default:
        return false;
    }
}

int loom_exec_matmul_weights(loom_ir_op op) {
    return op == LOOM_IR_OP_MATMUL_TRIPLE ? 3 : op == LOOM_IR_OP_MATMUL_PAIR ? 2 : 1;
}

bool loom_exec_matmul_operands_ok(const loom_ir_graph *g, const loom_ir_node *n) {
    int n_weights = loom_exec_matmul_weights(n->op);
    for (int i = 1; i <= n_weights; i++)
        if (!loom_exec_is_weight_type(loom_ir_value_get(g, n->in[i])->type.dtype)) return false;
    for (uint32_t i = 4; n->op == LOOM_IR_OP_MATMUL_TRIPLE && n->n_in >= 7 && i < 7; i++)
        if (loom_ir_value_get(g, n->in[i])->type.dtype != LOOM_IR_F32) return false; /* biases */
    uint32_t slot = loom_ir_prenorm_slot(n->op, n->n_in);
    return slot == LOOM_IR_NO_SLOT || loom_ir_value_get(g, n->in[slot])->type.dtype == LOOM_IR_F32;
}

const loom_prenorm *loom_exec_prenorm(const loom_ir_node *n, const loom_exec_tensor *in,
                                      loom_prenorm *pn) {
    uint32_t slot = loom_ir_prenorm_slot(n->op, n->n_in);
    if (slot == LOOM_IR_NO_SLOT) return NULL;
    pn->weight = in[slot].data;
    pn->eps = loom_ir_node_attr_float(n, LOOM_IR_ATTR_NORM_EPS, 0);
    return pn;
}

loom_kweight loom_exec_kweight_of(const loom_exec_tensor *t) {
    int64_t cols = t->dims[t->rank - 1];
    return (loom_kweight){t->data, (loom_ggml_type)t->dtype, cols ? t->numel / cols : 0, cols};
}

size_t loom_exec_elem_bytes(loom_ir_dtype t) {
    return t == LOOM_IR_F16 || t == LOOM_IR_BF16 ? 2 : 4;
}

loom_status loom_exec_check_positions(const int32_t *pos, int64_t n, int64_t n_ctx,
                                      bool *consecutive, loom_error *err) {
    *consecutive = true;
    for (int64_t t = 0; t < n; t++) {
        if (pos[t] < 0 || pos[t] >= n_ctx)
            return loom_error_set(err, LOOM_ERR_LIMIT,
                                  "position %d of token %lld is outside the context 0..%lld",
                                  pos[t], (long long)t, (long long)n_ctx - 1);
        if (pos[t] != pos[0] + t) *consecutive = false;
    }
    return LOOM_OK;
}

void loom_exec_cache_heads(const loom_exec_tensor *cache, int64_t *n_kv_head, int64_t *head_dim) {
    *n_kv_head = cache->rank == 3 ? cache->dims[1] : 1;
    *head_dim = cache->rank == 3 ? cache->dims[2] : cache->dims[1];
}

loom_kv_layout loom_exec_kv_layout(const loom_exec_tensor *cache, int64_t n_kv_head,
                                   int64_t head_dim) {
    return (loom_kv_layout){cache->dtype == LOOM_IR_F16 ? LOOM_KV_F16 : LOOM_KV_F32, cache->dims[0],
                            n_kv_head, head_dim};
}

loom_rope_params loom_exec_rope_params(const loom_ir_node *n, const loom_exec_tensor *x) {
    int mode = (int)loom_ir_node_attr_int(n, LOOM_IR_ATTR_MODE, 0);
    return (loom_rope_params){
        .n_tokens = x->dims[0],
        .n_head = x->dims[1],
        .n_kv_head = 0,
        .head_dim = x->dims[2],
        .n_rot = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_ROT, 0),
        .mode = mode == LOOM_IR_ROPE_NEOX ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM,
        .freq_base = loom_ir_node_attr_float(n, LOOM_IR_ATTR_FREQ_BASE, 10000.0f),
        .freq_scale = loom_ir_node_attr_float(n, LOOM_IR_ATTR_FREQ_SCALE, 1.0f),
    };
}

loom_status loom_exec_parse_op_list(const char *list, const char *what,
                                    bool set[LOOM_IR_OP_COUNT], loom_error *err) {
    if (!list) return LOOM_OK;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "%s: empty op name at byte %zu of '%s'", what,
                                  (size_t)(p - list), list);
        /* a name too long for the buffer is no op's name either: the same message, whole */
        loom_ir_op op;
        bool known = len < sizeof name;
        if (known) {
            memcpy(name, p, len);
            name[len] = '\0';
            known = loom_ir_op_from_name(name, &op);
        }
        if (!known)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "%s: unknown op '%.*s' at byte %zu of '%s'", what, (int)len, p,
                                  (size_t)(p - list), list);
        set[op] = true;
        p += len;
        if (*p == ',' && !*++p)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "%s: empty op name at byte %zu of '%s'", what,
                                  (size_t)(p - list), list);
    }
    return LOOM_OK;
}
