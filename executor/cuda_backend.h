/* cuda_backend.h: the CUDA backend of the executor (executor.h's vtable on kernels/cuda).
 *
 * Every op of ir/ops.def, primitive and fused, is dispatched to a kernels/cuda launcher; the
 * node's stream comes from the plan (executor/plan.h) through the vtable's set_stream/record,
 * and the streams fork from the main stream at a step's start and join it at its end.
 * Decode steps (T = 1) run as one CUDA graph: the first is captured and instantiated, and
 * every later decode step of the same stream count only uploads its inputs (token id, position)
 * into their fixed device buffers and replays it (cudaGraphLaunch): the KV write and attention
 * kernels read the position from the device copy of the `positions` input, so the graph does
 * not change from token to token (info: 1 instantiation, 0 updates, one launch per step). The
 * positions are still checked against the cache on the host before each replay. Should a
 * capture bake a host value (non-consecutive positions) or the kernels' scratch move, the next
 * step is captured again and updates the exec in place (cudaGraphExecUpdate).
 * LOOM_CUDA_GRAPHS=0 in the environment (or options.graphs = 0) disables capture;
 * LOOM_CUDA_GRAPH_REPLAY=0 keeps capture but captures every decode step and updates the exec in
 * place (the behaviour before replay, kept for A/B measurements). Prefill steps
 * run as normal stream launches. LOOM_CUDA_PROFILE=1 times every node with CUDA events (capture
 * off) and prints, for decode and prefill steps apart, the time per op and the rest (launch gaps,
 * event overhead) at destroy.
 *
 * Weights: on a discrete GPU each weight is copied once to device memory; on an integrated GPU
 * (cudaDevAttrIntegrated, e.g. Jetson Orin) the mapping holding them (the mmap'd GGUF) is
 * registered as mapped read-only host memory and kernels get the device alias, never the CPU
 * pointer. options.weights forces either mode. A progress callback sees the bytes loaded.
 *
 * KV cache: the graph's state dtype (f32/f16) unless kv_int8, which stores each cache
 * [n_ctx, n_kv_head, head_dim] as int8 rows with one float scale per (position, KV head): the
 * backend's state_bytes sizes the state buffer for exactly that (data first, scales after,
 * 256-byte aligned), so the executor's state_bytes report is the true KV memory.
 *
 * Errors: every CUDA call is checked (statement, function, file, line in the message, status
 * LOOM_ERR_CUDA); a kernel's failure is prefixed by the executor with the node and op; an
 * allocation failure says how many bytes were asked and how many were free. Without a usable
 * device, create fails at once (LOOM_ERR_UNSUPPORTED, "no usable CUDA device: ...").
 * Threads: one backend per thread; the backend holds no global state of its own (the kernel
 * library's device scratch is process-wide, see cuda_kernels.h).
 */
#ifndef LOOM_EXECUTOR_CUDA_BACKEND_H
#define LOOM_EXECUTOR_CUDA_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "executor/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_cuda_weight_mode {
    LOOM_CUDA_WEIGHTS_AUTO = 0,   /* mapped on integrated GPUs, copied on discrete ones */
    LOOM_CUDA_WEIGHTS_COPY = 1,   /* copied once to device memory */
    LOOM_CUDA_WEIGHTS_MAPPED = 2, /* host memory registered and used through its device alias */
} loom_cuda_weight_mode;

typedef struct loom_cuda_backend_options {
    int device;                   /* CUDA device ordinal (0) */
    loom_cuda_weight_mode weights;
    bool kv_int8;                 /* INT8 KV cache with per-row scales */
    int graphs;                   /* -1: LOOM_CUDA_GRAPHS (default on); 0 off; 1 on */
    /* Optional: called after each weight is made visible, with the bytes so far. */
    void (*progress)(void *ctx, uint64_t bytes_done);
    void *progress_ctx;
} loom_cuda_backend_options;

void loom_cuda_backend_options_init(loom_cuda_backend_options *o);

/* Creates the backend on o->device (o may be NULL: defaults). Fails at once, leaving nothing
 * behind, when no usable device exists (LOOM_ERR_UNSUPPORTED with the runtime's reason). */
loom_status loom_exec_cuda_backend_create(const loom_cuda_backend_options *o,
                                          loom_exec_backend **out, loom_error *err);

/* What the backend did, for reports. */
typedef struct loom_cuda_backend_info {
    int device, cc_major, cc_minor, sm_count;
    bool integrated;
    bool weights_mapped;         /* weights used through registered host memory */
    bool kv_int8;
    bool graphs;                 /* capture enabled (and every node capturable) */
    uint64_t weight_bytes;       /* copied (as laid out on the device) or mapped */
    uint64_t device_bytes;       /* allocated by alloc (arena, inputs, state), now */
    uint64_t graph_instantiations; /* decode graphs instantiated (1 per session normally) */
    uint64_t graph_updates;        /* re-captures applied in place (0 when replay works) */
    uint64_t graph_launches;       /* decode steps run as a graph (first capture + replays) */
    uint64_t host_fallback_nodes; /* nodes run on the host (attention of unsupported head_dim) */
    size_t free_bytes, total_bytes; /* device memory at the time of the call */
} loom_cuda_backend_info;

/* Fills *out when b is a CUDA backend and returns true; false otherwise. */
bool loom_exec_cuda_backend_info(loom_exec_backend *b, loom_cuda_backend_info *out);

/* ---- host-side decisions of the backend: pure, no device needed (tests/executor/
 * cuda_decisions_test.c runs them) ---- */

/* The alignment the _normed kernels need of a folded norm's weight: they read it as float4
 * beside x (kernels/cuda/gemv.cu refuses less). */
enum { LOOM_EXEC_CUDA_PRENORM_ALIGN = 16 };

/* How a matmul-family node with a folded RMSNorm (ops.def prenorm) runs: true for one _normed
 * launch (the kernels normalize x while staging it), false for loom_cuda_rms_norm into the
 * backend's buffer and the plain launcher (the same bits). It folds only for one row of x (a
 * decode step; with more, every block would redo each token's norm), not with
 * LOOM_CUDA_PRENORM=0 (fold_off), and only when norm_weight, its device address, is
 * LOOM_EXEC_CUDA_PRENORM_ALIGN-aligned (a mapped GGUF keeps its file offset's alignment). */
bool loom_exec_cuda_prenorm_folds(const void *norm_weight, int64_t rows, bool fold_off);

/* True when node n of g has a prenorm whose weight may reach the kernels unaligned: a weight
 * value whose file offset is not a multiple of LOOM_EXEC_CUDA_PRENORM_ALIGN. Such a node runs
 * unfolded in decode steps too, so the backend sizes its norm buffer for them. False for a
 * node without prenorm and for a norm weight that is not a file weight (backend memory is
 * aligned). */
bool loom_exec_cuda_prenorm_unaligned(const loom_ir_graph *g, const loom_ir_node *n);

/* False when matmul-family node n of g folds a norm (ops.def prenorm) whose weight the graph
 * computes: the _normed kernels read that weight through the non-coherent path (__ldg), legal
 * only for bytes no kernel writes while they run (kernels/cuda/cuda_kernels.h), so such a node is
 * refused (supports_op; the executor names it; the CPU backend runs it). The weights themselves
 * are graph weights by the IR's rule (ops.def: a matmul's weight operands must be weights). */
bool loom_exec_cuda_matmul_reads_constant(const loom_ir_graph *g, const loom_ir_node *n);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_EXECUTOR_CUDA_BACKEND_H */
