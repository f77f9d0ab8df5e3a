/* executor.h: runs a verified loom IR graph, one step at a time, on a backend.
 *
 * An executor (loom_exec) binds a graph to a backend: it resolves every weight to a pointer
 * through the caller's callback (weights stay where they are, e.g. in the mmap'd GGUF; the
 * executor never copies them), allocates the state (KV cache, zeroed) and a buffer plan for the
 * intermediates, then runs steps: the caller binds the symbols (T) and the graph inputs
 * (`tokens`, `positions`), every node runs in program order through the backend's run_node, and
 * outputs are read back. State persists from step to step; positions are the caller's business
 * (the session layer in api/ tracks them).
 *
 * Memory and streams come from the plan (executor/plan.h), made once at create: one activation
 * arena holding every intermediate at offsets chosen from (stream-aware) lifetimes, sized for
 * the symbols' declared maxima; reshape results alias their operand, the state results of
 * state-writing ops (kv_write, rope_kv_write: loom_ir_op_state_results) alias the written
 * state, in-place ops (ops.def) write over their dying first operand. With n_streams > 1
 * a backend with the stream members runs independent branches on different streams.
 *
 * Backends: a loom_exec_backend is a vtable (below) plus its private state. The CPU backend
 * (loom_exec_cpu_backend_create) dispatches every op of ops.def, primitive and fused, to
 * kernels/cpu. A CUDA backend implements the same vtable (alloc/upload/download move device
 * memory; map_weight makes weights visible to the device).
 *
 *   loom_exec_backend *cpu; loom_exec *e;
 *   loom_exec_cpu_backend_create(0, &cpu, &err);
 *   loom_exec_create(graph, cpu, resolve_weight, gguf, &e, &err);   // e now owns cpu
 *   int64_t T = 3; int32_t tok[3] = {...}, pos[3] = {0, 1, 2};
 *   loom_exec_binding in[2] = {{"tokens", tok}, {"positions", pos}};
 *   loom_exec_run(e, &T, in, 2, &err);
 *   loom_exec_read_output(e, "logits", logits, sizeof logits, &err);
 *   loom_exec_destroy(e);
 *
 * Ownership: the executor borrows the graph (it must outlive the executor and not change) and
 * owns the backend passed to create (destroyed with it, also when create fails). Weight pointers
 * are borrowed (the resolver's owner keeps them mapped). Thread safety: one thread per executor.
 */
#ifndef LOOM_EXECUTOR_H
#define LOOM_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A value as a backend sees it during a step: its buffer and its type with symbols bound. */
typedef struct loom_exec_tensor {
    void *data;                     /* backend memory (host memory for the CPU backend) */
    const void *host;               /* graph inputs: the caller's host copy; NULL otherwise */
    loom_ir_dtype dtype;
    uint32_t rank;
    int64_t dims[LOOM_IR_MAX_DIMS]; /* outermost first, every symbol bound */
    int64_t numel;                  /* product of dims */
} loom_exec_tensor;

typedef struct loom_exec_backend loom_exec_backend;

/* A weight as map_weight sees it. */
typedef struct loom_exec_weight {
    loom_ir_dtype dtype;
    int64_t rows, cols; /* a matrix [rows, cols] (rank 2); 0, 0 otherwise */
    bool matmul_only;   /* every use is the weight operand of a matmul-family node, and it is
                         * not a graph output: only those kernels read it */
    bool in_triple;     /* some use is a weight operand of a matmul_triple node */
} loom_exec_weight;

/* The backend interface. Members marked optional may be NULL. */
typedef struct loom_exec_backend_vtable {
    const char *name; /* "cpu" */
    /* True when the backend can run node n of g (op, operand types, attributes). The executor
     * asks for every node at create and refuses the graph naming the first unsupported one. */
    bool (*supports_op)(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n);
    /* Optional: called once for every node at create, after supports_op accepted it and before
     * any step, so the backend can size what it keeps for the graph's nodes (scratch, staging
     * buffers at the largest T); supports_op itself stays a query without side effects. An
     * error refuses the graph (the executor names the node). */
    loom_status (*reserve_node)(loom_exec_backend *b, const loom_ir_graph *g,
                                const loom_ir_node *n, loom_error *err);
    /* Backend memory of `bytes` (> 0), 64-byte aligned; zeroed when `zero`. */
    loom_status (*alloc)(loom_exec_backend *b, size_t bytes, bool zero, void **out,
                         loom_error *err);
    void (*free)(loom_exec_backend *b, void *p); /* NULL is a no-op */
    /* Optional: makes weight bytes (host memory, e.g. the mmap'd file) usable by the backend;
     * *out receives the pointer kernels get. NULL member: the host pointer is used as is. w
     * says what the weight is and how the graph uses it (a backend may lay the bytes out for its
     * kernels where every use allows, e.g. the CUDA backend's Q4_K tiles). */
    loom_status (*map_weight)(loom_exec_backend *b, const void *host, size_t bytes,
                              const loom_exec_weight *w, const void **out, loom_error *err);
    /* Optional: releases what map_weight made. */
    void (*unmap_weight)(loom_exec_backend *b, const void *mapped);
    /* Optional: host -> backend and backend -> host copies (NULL: memcpy). An upload may be
     * asynchronous: src may be reused once it returns, and the copy is ordered before the
     * step's work (and a replay_step); it is complete after a download or the step's end. A
     * download is synchronous. */
    loom_status (*upload)(loom_exec_backend *b, void *dst, const void *src, size_t bytes,
                          loom_error *err);
    loom_status (*download)(loom_exec_backend *b, void *dst, const void *src, size_t bytes,
                            loom_error *err);
    /* Optional: host memory that downloads fill fastest (CUDA: page-locked, copied into
     * directly), for the buffers a program reads outputs into step after step; NULL when out
     * of memory. host_free releases it (NULL is a no-op). NULL members: malloc / free. */
    void *(*host_alloc)(loom_exec_backend *b, size_t bytes);
    void (*host_free)(loom_exec_backend *b, void *p);
    /* Runs one node: in[i] / out[i] are its operands / results (weights: data is the mapped
     * pointer, dtype the ggml type). Errors name the node's op and the problem. */
    loom_status (*run_node)(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n,
                            const loom_exec_tensor *in, const loom_exec_tensor *out,
                            loom_error *err);
    /* Optional: waits until every node issued so far has finished (end of a step). */
    loom_status (*synchronize)(loom_exec_backend *b, loom_error *err);
    /* Optional, streams (executor/plan.h). begin_step: after the step's inputs are uploaded
     * and before its first node; n_streams and n_nodes come from the plan, n_tokens is the
     * step's T; the backend forks its streams from the main one (and may start capturing).
     * set_stream: later run_node calls go to `stream`, after waiting for the events recorded
     * after the nodes of program indices waits[0..n_waits) of this step. record: records the
     * event of program index i on the current stream. end_step: joins every stream into the
     * main one (ok false: the step failed; abandon a capture), before synchronize. */
    loom_status (*begin_step)(loom_exec_backend *b, uint32_t n_streams, uint32_t n_nodes,
                              int64_t n_tokens, loom_error *err);
    loom_status (*set_stream)(loom_exec_backend *b, uint32_t stream, const uint32_t *waits,
                              uint32_t n_waits, loom_error *err);
    loom_status (*record)(loom_exec_backend *b, uint32_t i, loom_error *err);
    loom_status (*end_step)(loom_exec_backend *b, bool ok, loom_error *err);
    /* Optional: asked after the inputs are uploaded and before begin_step. Returns true when
     * the backend ran the whole step itself, by replaying what it captured of an earlier step
     * of the same shape (n_streams, n_tokens) whose buffers were the same (they are fixed for
     * the executor's life; the inputs were just uploaded into them); *st then holds the
     * step's status and the executor skips begin_step, the nodes and end_step and only
     * synchronizes. inputs[0..n_inputs) are the graph inputs of this step (data: backend
     * buffers, host: the caller's copies), for the checks the nodes would have made (positions
     * inside the cache). False: nothing was done, run the step normally. */
    bool (*replay_step)(loom_exec_backend *b, uint32_t n_streams, int64_t n_tokens,
                        const loom_exec_tensor *inputs, uint32_t n_inputs, loom_status *st,
                        loom_error *err);
    /* Optional: the bytes the backend stores state value v in, given its graph type's size
     * graph_bytes (> 0); a backend may store state in another form (the CUDA backend's INT8 KV
     * cache: int8 rows + scales). NULL member or a return of 0: graph_bytes. Asked once per
     * state value at create; the executor allocates, zeroes and reports that many bytes. */
    size_t (*state_bytes)(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                          size_t graph_bytes);
    /* Optional: memory for graph output v, which only its producing node writes (no other value
     * shares its memory and no node reads it), to live in where the host reads it without a
     * download: *dev receives the pointer kernels write, *host the host's view of the same bytes
     * (CUDA: page-locked host memory mapped into the device, filled by the producing kernel as
     * it runs, so no copy follows the step). Asked once per such output at create, while the
     * plan is made (loom_exec_plan_create_external), which then leaves it out of the arena.
     * False: nothing allocated, the output stays in the activation arena (always correct).
     * unmap_output releases it. */
    bool (*map_output)(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                       size_t bytes, void **dev, void **host);
    void (*unmap_output)(loom_exec_backend *b, void *dev, void *host);
    /* Optional: zeroes `bytes` of backend memory at p (NULL: upload of zeros / memset). */
    loom_status (*zero)(loom_exec_backend *b, void *p, size_t bytes, loom_error *err);
    /* Optional: measures the backend's copy bandwidth into *gbs, in GB/s (1e9 bytes a second),
     * read + write counted (2 x the bytes of each copy), over buffers the backend picks large
     * enough to leave its caches (CPU: 512 MiB by the kernel threads; CUDA: 1 GiB device to
     * device); for rooflines. Allocates them for the call. NULL member: not available
     * (loom_exec_backend_copy_bandwidth refuses with LOOM_ERR_UNSUPPORTED). */
    loom_status (*copy_bandwidth)(loom_exec_backend *b, double *gbs, loom_error *err);
    /* Frees the backend itself. */
    void (*destroy)(loom_exec_backend *b);
} loom_exec_backend_vtable;

struct loom_exec_backend {
    const loom_exec_backend_vtable *vt;
    void *impl; /* the backend's private state */
};

/* The CPU backend: every op of ops.def on kernels/cpu. n_threads > 0 sets the kernel threads;
 * 0 leaves them as they are (one per online core unless set before). The kernel library's pool
 * is process-wide, so the last setting wins; results never depend on it. */
loom_status loom_exec_cpu_backend_create(int n_threads, loom_exec_backend **out, loom_error *err);
/* Destroys a backend that was not handed to loom_exec_create. NULL is a no-op. */
void loom_exec_backend_destroy(loom_exec_backend *b);
/* The backend's copy bandwidth in GB/s (vtable copy_bandwidth) into *gbs (0 on failure);
 * LOOM_ERR_UNSUPPORTED naming the backend when it has no such member. */
loom_status loom_exec_backend_copy_bandwidth(loom_exec_backend *b, double *gbs, loom_error *err);

/* Resolves weight value w (kind WEIGHT: name, ggml dtype, dims, file offset, size) to a pointer
 * to its size bytes, checking that they are what the graph says. */
typedef loom_status (*loom_exec_weight_fn)(void *ctx, const loom_ir_value *w, const void **data,
                                           loom_error *err);

typedef struct loom_exec loom_exec;

/* Options of an executor. */
typedef struct loom_exec_options {
    uint32_t n_streams; /* 1..16 streams for the plan (1: serial; default 1) */
} loom_exec_options;
void loom_exec_options_init(loom_exec_options *o);

/* Verifies g, checks that the backend supports every node, resolves every weight, allocates the
 * state (zeroed) and the planned intermediate buffers. Takes ownership of backend (destroyed on
 * failure too). On failure *out is NULL. */
loom_status loom_exec_create(const loom_ir_graph *g, loom_exec_backend *backend,
                             loom_exec_weight_fn resolve, void *resolve_ctx, loom_exec **out,
                             loom_error *err);
/* The same with options (opts NULL: defaults); loom_exec_create is this with defaults. */
loom_status loom_exec_create_ex(const loom_ir_graph *g, loom_exec_backend *backend,
                                loom_exec_weight_fn resolve, void *resolve_ctx,
                                const loom_exec_options *opts, loom_exec **out, loom_error *err);
void loom_exec_destroy(loom_exec *e); /* NULL is a no-op */

/* A graph input's host data for one step: elements of the input's type, symbols bound. */
typedef struct loom_exec_binding {
    const char *name;
    const void *data;
} loom_exec_binding;

/* Runs one step. sym_values[i] binds symbol i (loom_ir_symbol_at order), 1..max; every graph
 * input must be bound exactly once. On a failure the state may hold partial writes of this step
 * (rows at the step's positions only). */
loom_status loom_exec_run(loom_exec *e, const int64_t *sym_values, const loom_exec_binding *inputs,
                          uint32_t n_inputs, loom_error *err);

/* Copies output `name` of the last step (its type with the last step's symbols) into dst, which
 * has room for `capacity` bytes; *bytes (may be NULL) receives the size copied. */
loom_status loom_exec_read_output(loom_exec *e, const char *name, void *dst, size_t capacity,
                                  size_t *bytes, loom_error *err);

/* The same for output value v (a value id of the graph that is one of its outputs, e.g. from
 * loom_ir_find_output once at setup), without the name lookup; LOOM_ERR_NOT_FOUND when v is
 * not an output. */
loom_status loom_exec_read_value(loom_exec *e, loom_ir_value_id v, void *dst, size_t capacity,
                                 size_t *bytes, loom_error *err);

/* The host's view of output value v after a successful step, when the backend placed v where
 * the host reads it directly (vtable map_output): the last step's bytes, valid until the next
 * step begins (a failed step may have overwritten them). NULL when v is not such an output or
 * no step has succeeded since the last one began; loom_exec_read_value works either way. */
const void *loom_exec_output_view(const loom_exec *e, loom_ir_value_id v);

/* True when output value v lives where the host reads it directly (see above); fixed at create. */
bool loom_exec_output_mapped(const loom_exec *e, loom_ir_value_id v);

/* Host memory to read outputs into, again and again (the backend's host_alloc: page-locked on
 * CUDA, where a download then lands in it without a staging copy; malloc'd otherwise); NULL
 * when out of memory. Release it with loom_exec_host_free on the same executor before
 * loom_exec_destroy (NULL is a no-op for either argument). */
void *loom_exec_host_alloc(loom_exec *e, size_t bytes);
void loom_exec_host_free(loom_exec *e, void *p);

/* Zeroes every state value (a fresh KV cache). */
loom_status loom_exec_reset_state(loom_exec *e, loom_error *err);

/* Memory of the plan, in bytes. */
typedef struct loom_exec_stats {
    uint64_t activation_bytes; /* intermediates after reuse */
    uint64_t activation_sum;   /* intermediates without reuse */
    uint64_t state_bytes;      /* KV cache as the backend stores it (vtable state_bytes) */
    uint64_t weight_bytes;     /* bound weights (not owned) */
    uint32_t n_buffers;        /* arena blocks (executor/plan.h) */
    uint64_t activation_lower_bound; /* most block bytes alive at one time */
    uint32_t n_streams;        /* streams the plan uses */
} loom_exec_stats;
void loom_exec_get_stats(const loom_exec *e, loom_exec_stats *out);

/* The executor's plan (executor/plan.h; owned by e) and backend (owned by e). */
struct loom_exec_plan;
const struct loom_exec_plan *loom_exec_get_plan(const loom_exec *e);
loom_exec_backend *loom_exec_get_backend(loom_exec *e);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_EXECUTOR_H */
