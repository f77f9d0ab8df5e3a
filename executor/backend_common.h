/* backend_common.h: helpers shared by the executor's backends (cpu_backend.c, cuda_backend.c);
 * internal to executor/, not part of the public API.
 *
 * Only what means the same in every backend lives here: which IR dtypes are weight types, the
 * kernel-weight view of a tensor, an element's byte size for plain copies, the position check of
 * kv_write/attention, the F32/F16 cache layout with its head geometry and a rope node's
 * kernel parameters. Backend-specific
 * decisions (supported ops, INT8 caches, where positions live) stay in the backends. All
 * functions are pure (no allocation, no global state).
 */
#ifndef LOOM_EXECUTOR_BACKEND_COMMON_H
#define LOOM_EXECUTOR_BACKEND_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor/executor.h"
#include "kernels/cpu/cpu_kernels.h"
#include "loom/status.h"

/* True for the dtypes a weight (matmul / get_rows operand) may have: F32, F16, BF16, Q8_0,
 * Q4_K, Q5_K, Q6_K. */
bool loom_exec_is_weight_type(loom_ir_dtype t);

/* The number of weight operands (in[1] ..) of a matmul-family op: 3 for matmul_triple, 2 for
 * matmul_pair, 1 for matmul and matmul_add. */
int loom_exec_matmul_weights(loom_ir_op op);

/* For a matmul-family node (matmul, matmul_add, matmul_pair, matmul_triple): true when every
 * weight operand has a weight dtype and every bias of a triple and the prenorm weight are F32.
 * The kernels of both backends take the same weight types, so this part of supports_op is
 * shared. */
bool loom_exec_matmul_operands_ok(const loom_ir_graph *g, const loom_ir_node *n);

/* The prenorm of matmul-family node n (ops.def: its trailing norm weight and norm_eps) as the
 * _normed kernels take it: NULL when n has none (the kernels then run the plain matmul), else pn
 * filled with the norm weight's data (in[] are n's operand tensors; the weight is F32, which
 * inference guarantees) and eps, and pn returned. */
const loom_prenorm *loom_exec_prenorm(const loom_ir_node *n, const loom_exec_tensor *in,
                                      loom_prenorm *pn);

/* The kernels' view of weight t: [M,K] with K its last dim (a [K] vector is one row). t->rank
 * must be >= 1; a zero K gives M = 0. */
loom_kweight loom_exec_kweight_of(const loom_exec_tensor *t);

/* Bytes of one element for same-dtype copies: 2 for F16/BF16, 4 for every other dtype the
 * executor copies (F32, I32). */
size_t loom_exec_elem_bytes(loom_ir_dtype t);

/* Checks that every pos[0..n-1] lies in 0..n_ctx-1 (LOOM_ERR_LIMIT naming the position and token
 * otherwise) and sets *consecutive to whether pos[t] == pos[0] + t for every t (true for n == 0).
 * On error *consecutive is unspecified. */
loom_status loom_exec_check_positions(const int32_t *pos, int64_t n, int64_t n_ctx,
                                      bool *consecutive, loom_error *err);

/* Head geometry of an F32/F16 cache tensor [n_ctx, n_kv_head, head_dim] or [n_ctx, row]
 * (then one head of width row). */
void loom_exec_cache_heads(const loom_exec_tensor *cache, int64_t *n_kv_head, int64_t *head_dim);

/* The F32/F16 kernel layout of cache (F16 when its dtype is F16, F32 otherwise) with n_ctx =
 * dims[0] and the given head geometry. */
loom_kv_layout loom_exec_kv_layout(const loom_exec_tensor *cache, int64_t n_kv_head,
                                   int64_t head_dim);

/* The kernels' rope parameters of rope node n over x [n_tokens, n_head, head_dim]: n_rot, mode
 * (NEOX or NORM), freq_base (default 10000) and freq_scale (default 1) from n's attributes;
 * n_kv_head = 0 (one tensor). */
loom_rope_params loom_exec_rope_params(const loom_ir_node *n, const loom_exec_tensor *x);

/* Parses a comma-separated list of IR op names (as in ir/ops.def, e.g. "attention,matmul_add")
 * into set[op] = true; an empty or NULL list sets nothing. An empty name, or one that is not
 * an op, is LOOM_ERR_INVALID_ARGUMENT naming it and its byte offset in the list,
 * with what = the list's origin (e.g. an environment variable) at the start of the message;
 * set may then be partly written. */
loom_status loom_exec_parse_op_list(const char *list, const char *what,
                                    bool set[LOOM_IR_OP_COUNT], loom_error *err);

#endif
