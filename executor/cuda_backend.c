/* cuda_backend.c: the CUDA backend (cuda_backend.h): every op of ir/ops.def on kernels/cuda,
 * streams and events from the plan, CUDA-graph capture of decode steps, weights copied or
 * mapped.
 *
 * Invariants: every CUDA runtime call goes through CK (statement, function, file, line ->
 * LOOM_ERR_CUDA); a launcher's own status passes through unchanged (the executor prefixes the
 * node and op). Streams: streams[0] is the main stream; uploads, downloads, the fork at a step's
 * start and the join at its end happen on it. Events: one per program index (recorded only where
 * the plan asks), one fork event, one join event per stream. While a capture is open no
 * synchronous call is made (host fallbacks disable capture at create). The kernel library's
 * scratch (split-KV attention, softmax, argmax, the wide prefill GEMMs' x limbs) is shared, so
 * nodes using it are ordered across streams by scratch_ev. Everything allocated is tracked and
 * freed on destroy, also after errors.
 * Matmul-family nodes with a folded RMSNorm (prenorm, ops.def) run the _normed launchers in
 * decode steps (T = 1: no norm launch); in steps of more tokens they run loom_cuda_rms_norm into
 * norm_x and the plain launcher on it (the kernels' contract: the same scale, and the same bits
 * but where the Q4_K tensor-core kernels apply the scale to the finished dots, within the
 * family's tolerance; cuda_kernels.h loom_cuda_normed_scale_last), because
 * there the folded GEMM redoes each token's norm in every block (H200 R1: a prefill pair 186 us
 * folded against 117 us norm + plain) while one launch more per step costs nothing. (Since
 * session 11 the INT8 Q4_K wide GEMM norms each token once, in its x pre-pass, so the fold may
 * pay in those steps too: not measured.)
 * LOOM_CUDA_PRENORM=0 runs decode steps so too (the fold's kernels against one norm launch, in
 * one binary and graph), and so does a node whose norm weight is not 16-byte aligned on the
 * device (the kernels read it as float4; a mapped GGUF keeps its file offset's alignment):
 * passes fold regardless of the backend, the rule is this backend's
 * (loom_exec_cuda_prenorm_folds). norm_x is sized at create by cuda_reserve_node (supports_op only answers) and
 * ordered across streams like the kernel scratch (scratch_ev).
 * rope_kv_attention (the attention prologue folded into the attention): decode steps call
 * loom_cuda_rope_kv_attention_at, other steps rope_kv_write + attention as the unfused nodes;
 * either way the roped q goes through q_buf (allocated at a step's start, before any capture,
 * sized by supports_op for the largest T, ordered across streams like the kernel scratch).
 * Decode-step graphs: the first decode step (T = 1) of a shape (stream count) is captured; the
 * KV write and attention launches read the position from the device copy of the `positions`
 * input (loom_cuda_kv_write_at / loom_cuda_attention_at), so every later decode step only
 * uploads its inputs and replays the graph (replay_step). A replay is refused (the step is
 * captured again and the exec updated in place) when the capture baked a host value
 * (step_baked: a by-value position), when the kernel library's scratch moved, or when the
 * inputs the capture's position checks read are missing; the checks themselves (positions
 * inside the cache) run on the host copies before every replay.
 * Q4_K weights in tiles: a copied (not mapped) Q4_K matrix whose every use is a matmul-family
 * weight operand (loom_exec_weight.matmul_only), rows a multiple of 16, is laid out on the device
 * in LOOM_WEIGHT_Q4K_TILES (loom_cuda_q4k_to_tiles after the upload), which the kernels read a
 * 16-row block at a time as one 2,304-byte run (4B decode 1.76 -> 1.72 ms/token on the H200,
 * bench/NOTES.md 7, session 15); tiled[] (sorted) holds those device pointers, and kweight_of
 * gives their layout to the launchers. LOOM_CUDA_Q4K_TILES=0 keeps every weight in rows, and so
 * do the switches that take the Q4_K matmuls off the INT8 tensor-core body
 * (loom_cuda_q4k_tiles_preferred). Q6_K weights likewise in LOOM_WEIGHT_Q6K_TILES (blocks padded
 * to 212 bytes: 1% more device memory; loom_cuda_q6k_to_tiles; a triple's V only where the Q4_K
 * tiles are on, whose one-launch Q4_K_M triple pairs the two; bench/NOTES.md 7, session 18: the
 * lm head, the Q6_K down projections, the V); LOOM_CUDA_Q6K_TILES=0 keeps them in rows, and so
 * do the switches that take the Q6_K matmuls off the INT8 body (loom_cuda_q6k_tiles_preferred).
 * Mapped outputs (map_output): a plain matmul's f32 graph output that no node reads (the logits)
 * lives in page-locked host memory mapped into the device (cudaHostAlloc mapped), so the lm
 * head's stores cross the bus while it runs and the session reads the logits in place after the
 * step's synchronize: no 0.6 MB download a token (4B decode -1%, bench/NOTES.md 7, session 19);
 * LOOM_CUDA_MAPPED_OUTPUTS=0 keeps every output on the device.
 */
#include "executor/cuda_backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/backend_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_rt.h"

static loom_status cuda_fail(loom_error *err, cudaError_t e, const char *stmt, const char *func,
                             const char *file, int line) {
    (void)cudaGetLastError();
    return loom_error_set(err, LOOM_ERR_CUDA, "cuda backend: %s failed: %s (%s) in %s (%s:%d)",
                          stmt, cudaGetErrorName(e), cudaGetErrorString(e), func, file, line);
}

#define CK(stmt)                                                                   \
    do {                                                                           \
        cudaError_t ck_e_ = (stmt);                                                \
        if (ck_e_ != cudaSuccess) return cuda_fail(err, ck_e_, #stmt, __func__, __FILE__, __LINE__); \
    } while (0)

enum { MAX_STREAMS = 16 };

/* A position check a captured step made, repeated on the host before each replay: the
 * positions at device address dev (n values, an input's buffer) must lie in 0..n_ctx-1. */
typedef struct pos_check {
    const void *dev;
    int64_t n, n_ctx;
    const char *op; /* "kv_write", "attention", ... for the message */
} pos_check;


typedef struct region { /* a registered host mapping (mapped weight mode) */
    char *host;
    size_t bytes;
    char *dev;
} region;

typedef struct cuda_backend {
    loom_cuda_backend_options opt;
    int cc_major, cc_minor, sm_count;
    bool integrated, mapped, graphs_on, host_fallback;
    bool replay_on; /* LOOM_CUDA_GRAPH_REPLAY=0: capture every decode step (the A/B baseline) */
    cudaStream_t streams[MAX_STREAMS];
    uint32_t n_streams_made;
    cudaEvent_t fork_ev, join_ev[MAX_STREAMS], scratch_ev;
    cudaEvent_t *node_ev;
    uint32_t n_node_ev;
    uint32_t step_streams;
    cudaStream_t cur;
    int32_t scratch_stream; /* stream of the last scratch user in this step, -1 none */
    bool capturing;
    bool step_locked; /* this backend holds g_step_mu (a step between launch and synchronize) */
    bool counted;     /* counted in g_backends */
    bool step_baked; /* the open capture baked a per-step host value: not replayable */
    cudaGraphExec_t exec;
    /* What exec was captured for, and whether it may be replayed as it is. */
    bool exec_replayable;
    uint32_t exec_streams;
    const void *exec_scratch;
    pos_check *checks; /* the position checks of exec's capture */
    uint32_t n_checks, cap_checks;
    /* The caches this step has written so far (kv_write, rope_kv_write, rope_kv_attention),
     * each with the device positions it wrote at: for attn_in_order. */
    struct step_write {
        const void *cache, *pos;
    } *writes;
    uint32_t n_writes, cap_writes;
    size_t scratch_need;
    float *norm_x;               /* T > 1 steps: the normalized x of a prenorm node */
    size_t norm_x_bytes, norm_x_need;
    bool prenorm_off;            /* LOOM_CUDA_PRENORM=0: every step uses norm_x */
    bool norm_x_decode;          /* a prenorm weight may be unaligned: T = 1 steps need norm_x */
    float *q_buf;                /* rope_kv_attention: the roped q [T,Hq,D] (q_tmp) */
    size_t q_buf_bytes, q_buf_need;
    region *regions;
    uint32_t n_regions, cap_regions;
    bool tiles_on;          /* Q4_K matmul weights in tiles (LOOM_CUDA_Q4K_TILES, not mapped) */
    bool q6_tiles_on;       /* Q6_K ones (LOOM_CUDA_Q6K_TILES, not mapped) */
    bool map_outputs;       /* a matmul's graph output in mapped host memory (map_output;
                               LOOM_CUDA_MAPPED_OUTPUTS=0 keeps it on the device) */
    const void **tiled;     /* the weights laid out so, sorted by address */
    uint32_t n_tiled, cap_tiled;
    /* Pinned staging of a step's inputs: uploads copy into stage[stage_used..] and enqueue an
     * asynchronous copy from there on streams[0]; the bytes are free again once streams[0] has
     * been synchronized (end of step, a download), when stage_used goes back to 0. */
    char *stage;
    size_t stage_cap, stage_used;
    /* Pinned landing buffer of downloads (the logits of each step): a pageable destination
     * would make the driver stage the copy itself, in smaller pieces. */
    char *down;
    size_t down_cap;
    /* Page-locked blocks of host_alloc (the API's logits buffer): a download into one of them
     * goes there directly, without the landing buffer and its host copy (~30 us for 600 KB of
     * logits a token on the H200 machine). */
    struct host_block {
        void *p;
        size_t bytes;
    } *host;
    uint32_t n_host, cap_host;
    uint64_t weight_bytes, device_bytes;
    uint64_t n_inst, n_update, n_launch, n_fallback;
    /* LOOM_CUDA_PROFILE=1 (graphs off): per-node CUDA-event timing of decode steps, summed per
     * op, printed on stderr at destroy (bench/NOTES.md's decode breakdown). */
    bool profile, prof_step;
    cudaEvent_t *prof_ev; /* [2 * n_prof] start/end per node */
    uint32_t n_prof, node_i;
    cudaEvent_t prof_begin, prof_end;
    loom_ir_op *prof_op;
    int prof_kind; /* 0: decode steps (T = 1), 1: prefill steps */
    int64_t prof_tokens[2];
    double prof_ms[2][LOOM_IR_OP_COUNT], prof_total_ms[2];
    uint64_t prof_count[2][LOOM_IR_OP_COUNT], prof_steps[2];
    /* LOOM_CUDA_PROFILE_SKIP=op[,op...]: decode steps do not launch the nodes of these ops
     * (their outputs keep stale values: timing only). The decode time with a family left out,
     * against the time with everything, is that family's cost in the replayed graph, where
     * events cannot see (bench/NOTES.md section 7). */
    bool skip_op[LOOM_IR_OP_COUNT];
} cuda_backend;

static int64_t last_dim(const loom_ir_value *v) { return v->type.rank ? v->type.dims[v->type.rank - 1] : 1; }

/* The kernel library's process-wide state -- its device scratch (split-KV attention, the
 * two-pass softmax / argmax, the wide GEMMs' x limbs) and the split-KV counters -- serves one
 * step at a time, so a step holds g_step_mu from its launch (begin_step or a replay) to its end
 * (synchronize, or the end_step that abandons it): CUDA sessions on several threads take turns.
 * g_backends counts the live backends; the last one destroyed frees the scratch. */
static pthread_mutex_t g_step_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_backends;

static void step_lock(cuda_backend *c) {
    if (c->step_locked) return;
    pthread_mutex_lock(&g_step_mu);
    c->step_locked = true;
}

static void step_unlock(cuda_backend *c) {
    if (!c->step_locked) return;
    c->step_locked = false;
    pthread_mutex_unlock(&g_step_mu);
}

static void need_scratch(cuda_backend *c, size_t b) {
    if (b > c->scratch_need) c->scratch_need = b;
}

/* The INT8 form of a KV cache of rows_heads (positions x KV heads) rows of d values: the int8
 * data first, padded to 256 bytes, then one float scale per row. Returns the total bytes and
 * sets *scales_at (may be NULL) to the scales' offset. The one definition of that layout: the
 * allocation (cuda_state_bytes) and the kernels' pointers (layout_of) both come from here. */
static uint64_t int8_cache_bytes(uint64_t rows_heads, uint64_t d, uint64_t *scales_at) {
    uint64_t data = (rows_heads * d + 255) / 256 * 256;
    if (scales_at) *scales_at = data;
    return data + rows_heads * sizeof(float);
}

/* The KV cache type the kernels see for a cache of IR dtype t (INT8 when the backend was
 * created so, whatever the graph's cache dtype). */
static loom_kv_type kv_type_of(const cuda_backend *c, loom_ir_dtype t) {
    return c->opt.kv_int8 ? LOOM_KV_INT8 : t == LOOM_IR_F16 ? LOOM_KV_F16 : LOOM_KV_F32;
}

/* supports_op: a query (no side effects); what a node needs of the backend's own buffers is
 * sized by cuda_reserve_node. */
static bool cuda_supports(loom_exec_backend *b, const loom_ir_graph *g, const loom_ir_node *n) {
    const cuda_backend *c = b->impl;
    const loom_ir_value *in0 = loom_ir_value_get(g, n->in[0]);
    switch (n->op) {
    case LOOM_IR_OP_GET_ROWS:
        return loom_exec_is_weight_type(in0->type.dtype);
    case LOOM_IR_OP_MUL: case LOOM_IR_OP_ADD: {
        const loom_ir_value *b1 = loom_ir_value_get(g, n->in[1]);
        return in0->type.dtype == LOOM_IR_F32 && b1->type.dtype == LOOM_IR_F32;
    }
    case LOOM_IR_OP_MATMUL: case LOOM_IR_OP_MATMUL_ADD:
    case LOOM_IR_OP_MATMUL_PAIR: case LOOM_IR_OP_MATMUL_TRIPLE:
        return loom_exec_matmul_operands_ok(g, n) && loom_exec_cuda_matmul_reads_constant(g, n);
    case LOOM_IR_OP_KV_WRITE:
    case LOOM_IR_OP_ATTENTION: {
        const loom_ir_value *cache = loom_ir_value_get(g, n->in[n->op == LOOM_IR_OP_KV_WRITE ? 0 : 1]);
        if (cache->type.dtype != LOOM_IR_F32 && cache->type.dtype != LOOM_IR_F16) return false;
        /* INT8 scales are per (position, KV head): the cache must say its heads. */
        if (c->opt.kv_int8 && cache->type.rank != 3) return false;
        /* An attention the kernels do not take runs on the host (cuda_reserve_node). */
        return n->op == LOOM_IR_OP_KV_WRITE ||
               loom_ir_value_get(g, n->in[2])->type.dtype == cache->type.dtype;
    }
    case LOOM_IR_OP_FUSED_RMS_NORM:
        return loom_ir_value_get(g, n->in[1])->type.dtype == LOOM_IR_F32;
    case LOOM_IR_OP_ROPE_KV_WRITE:   /* caches as kv_write's; head_dim bounded by the kernel */
    case LOOM_IR_OP_ROPE_KV_ATTENTION: { /* and attention's checks */
        const loom_ir_value *vc = loom_ir_value_get(g, n->in[1]);
        if (vc->type.dtype != in0->type.dtype ||
            (in0->type.dtype != LOOM_IR_F32 && in0->type.dtype != LOOM_IR_F16))
            return false;
        if (c->opt.kv_int8 && (in0->type.rank != 3 || vc->type.rank != 3)) return false;
        return last_dim(loom_ir_value_get(g, n->in[3])) <= LOOM_CUDA_ROPE_KV_MAX_HEAD_DIM;
    }
    case LOOM_IR_OP_SOFTMAX: case LOOM_IR_OP_ARGMAX:
        return in0->type.dtype == LOOM_IR_F32;
    case LOOM_IR_OP_CONVERT: {
        loom_ir_dtype to = loom_ir_value_get(g, n->out[0])->type.dtype, from = in0->type.dtype;
        return from == to || (from == LOOM_IR_F16 && to == LOOM_IR_F32) ||
               (from == LOOM_IR_F32 && to == LOOM_IR_F16);
    }
    case LOOM_IR_OP_RMS_NORM: case LOOM_IR_OP_RESHAPE: case LOOM_IR_OP_ROPE: case LOOM_IR_OP_SILU:
        return true;
    default:
        return false;
    }
}

/* Bytes of value v at the graph's largest T into *need when larger; LOOM_ERR_LIMIT naming
 * `what` when the size overflows (the buffer could not be sized). */
static loom_status grow_need(const loom_ir_graph *g, loom_ir_value_id v, size_t *need,
                             const char *what, loom_error *err) {
    int64_t bytes = loom_ir_type_bytes(g, &loom_ir_value_get(g, v)->type, NULL);
    if (bytes < 0)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "cuda backend: %s has no byte size at the largest T (overflow)",
                              what);
    if ((size_t)bytes > *need) *need = (size_t)bytes;
    return LOOM_OK;
}

/* The launcher of matmul-family node n, for loom_cuda_matmul_scratch_bytes. */
static loom_matmul_role matmul_role(const loom_ir_node *n) {
    switch (n->op) {
    case LOOM_IR_OP_MATMUL_ADD: return LOOM_MATMUL_ROLE_ADD;
    case LOOM_IR_OP_MATMUL_PAIR:
        return loom_ir_node_attr_int(n, LOOM_IR_ATTR_SWIGLU, 0) ? LOOM_MATMUL_ROLE_SWIGLU
                                                                 : LOOM_MATMUL_ROLE_PAIR;
    case LOOM_IR_OP_MATMUL_TRIPLE: return LOOM_MATMUL_ROLE_TRIPLE;
    default: return LOOM_MATMUL_ROLE_PLAIN;
    }
}

/* reserve_node: sizes, for node n at the graph's largest T, the kernel library's scratch
 * (attention's split-KV partials, softmax/argmax, the wide prefill GEMMs' x limbs), norm_x (the normalized x of a prenorm node
 * run unfolded; also in decode steps when its weight may be unaligned) and q_buf
 * (rope_kv_attention's roped q), and notes an attention the kernels do not take (it runs on
 * the host; no capture then). Allocation happens at the steps' start (cuda_begin_step). */
static loom_status cuda_reserve_node(loom_exec_backend *b, const loom_ir_graph *g,
                                     const loom_ir_node *n, loom_error *err) {
    cuda_backend *c = b->impl;
    const loom_ir_value *in0 = loom_ir_value_get(g, n->in[0]);
    switch (n->op) {
    case LOOM_IR_OP_MATMUL: case LOOM_IR_OP_MATMUL_ADD:
    case LOOM_IR_OP_MATMUL_PAIR: case LOOM_IR_OP_MATMUL_TRIPLE: {
        int64_t K = last_dim(in0), numel = loom_ir_type_numel(g, &in0->type, NULL);
        if (K > 0 && numel > 0) { /* the weights as the launcher will see them, not yet placed */
            loom_kweight w[3] = {{0}};
            int nw = loom_exec_matmul_weights(n->op);
            for (int i = 0; i < nw && i + 1 < (int)n->n_in; i++) {
                const loom_ir_value *v = loom_ir_value_get(g, n->in[i + 1]);
                int64_t cols = last_dim(v), wn = loom_ir_type_numel(g, &v->type, NULL);
                w[i] = (loom_kweight){NULL, (loom_ggml_type)v->type.dtype, cols ? wn / cols : 0, cols};
            }
            need_scratch(c, loom_cuda_matmul_scratch_bytes(matmul_role(n), w, numel / K));
        }
        if (loom_ir_prenorm_slot(n->op, n->n_in) == LOOM_IR_NO_SLOT) return LOOM_OK;
        if (loom_exec_cuda_prenorm_unaligned(g, n)) c->norm_x_decode = true;
        return grow_need(g, n->in[0], &c->norm_x_need, "the x of a folded norm", err);
    }
    case LOOM_IR_OP_ATTENTION:
    case LOOM_IR_OP_ROPE_KV_ATTENTION: {
        bool fused = n->op == LOOM_IR_OP_ROPE_KV_ATTENTION;
        int64_t hd = fused ? last_dim(loom_ir_value_get(g, n->in[3]))
                           : loom_ir_node_attr_int(n, LOOM_IR_ATTR_HEAD_DIM, 0);
        int64_t nh = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_HEAD, 0);
        loom_ir_dtype cache = loom_ir_value_get(g, n->in[fused ? 0 : 1])->type.dtype;
        if (!loom_cuda_attention_supports(hd, kv_type_of(c, cache))) c->host_fallback = true;
        need_scratch(c, loom_cuda_scratch_bytes_for(nh, hd, 0, 0));
        return fused ? grow_need(g, n->in[2], &c->q_buf_need, "the roped q", err) : LOOM_OK;
    }
    case LOOM_IR_OP_SOFTMAX: case LOOM_IR_OP_ARGMAX: {
        int64_t numel = loom_ir_type_numel(g, &in0->type, NULL), d = last_dim(in0);
        need_scratch(c, loom_cuda_scratch_bytes_for(0, 0, d ? numel / d : 0, d));
        return LOOM_OK;
    }
    default:
        return LOOM_OK;
    }
}

bool loom_exec_cuda_prenorm_folds(const void *norm_weight, int64_t rows, bool fold_off) {
    return rows == 1 && !fold_off && (uintptr_t)norm_weight % LOOM_EXEC_CUDA_PRENORM_ALIGN == 0;
}

bool loom_exec_cuda_matmul_reads_constant(const loom_ir_graph *g, const loom_ir_node *n) {
    const uint32_t slot = loom_ir_prenorm_slot(n->op, n->n_in);
    return slot == LOOM_IR_NO_SLOT || loom_ir_value_get(g, n->in[slot])->kind == LOOM_IR_VALUE_WEIGHT;
}

bool loom_exec_cuda_prenorm_unaligned(const loom_ir_graph *g, const loom_ir_node *n) {
    uint32_t slot = loom_ir_prenorm_slot(n->op, n->n_in);
    if (slot == LOOM_IR_NO_SLOT) return false;
    const loom_ir_value *w = loom_ir_value_get(g, n->in[slot]);
    return w->kind == LOOM_IR_VALUE_WEIGHT && w->offset % LOOM_EXEC_CUDA_PRENORM_ALIGN != 0;
}

/* ---------------------------------------------------------------- memory */

static loom_status alloc_fail(loom_error *err, cudaError_t e, size_t bytes, const char *what) {
    (void)cudaGetLastError();
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) (void)cudaGetLastError();
    return loom_error_set(err, e == 2 /* cudaErrorMemoryAllocation */ ? LOOM_ERR_OUT_OF_MEMORY
                                                                        : LOOM_ERR_CUDA,
                          "cuda backend: cannot allocate %zu bytes (%.1f MiB) for %s: %s; device "
                          "has %.1f MiB free of %.1f MiB",
                          bytes, bytes / 1048576.0, what, cudaGetErrorString(e), fr / 1048576.0,
                          tot / 1048576.0);
}

static loom_status cuda_alloc(loom_exec_backend *b, size_t bytes, bool zero, void **out,
                              loom_error *err) {
    cuda_backend *c = b->impl;
    *out = NULL;
    size_t rounded = (bytes + 255) / 256 * 256;
    cudaError_t e = cudaMalloc(out, rounded ? rounded : 256);
    if (e != cudaSuccess) {
        *out = NULL;
        return alloc_fail(err, e, rounded, "activations/state");
    }
    if (zero) {
        e = cudaMemsetAsync(*out, 0, rounded, c->streams[0]);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->streams[0]);
        if (e != cudaSuccess) {
            cudaFree(*out);
            *out = NULL;
            return cuda_fail(err, e, "cudaMemsetAsync(zero)", __func__, __FILE__, __LINE__);
        }
    }
    c->device_bytes += rounded;
    return LOOM_OK;
}

/* INT8 KV: every state value (the graph's caches are its only state) is stored as
 * int8_cache_bytes of its [n_ctx, n_kv_head, head_dim] F32/F16 type; otherwise as the graph
 * says. */
static size_t cuda_state_bytes(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                               size_t graph_bytes) {
    cuda_backend *c = b->impl;
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!c->opt.kv_int8 || val->type.rank != 3 ||
        (val->type.dtype != LOOM_IR_F32 && val->type.dtype != LOOM_IR_F16))
        return graph_bytes;
    uint64_t d = (uint64_t)last_dim(val), numel = (uint64_t)loom_ir_type_numel(g, &val->type, NULL);
    return d ? (size_t)int8_cache_bytes(numel / d, d, NULL) : graph_bytes;
}

static void cuda_free(loom_exec_backend *b, void *p) {
    (void)b;
    if (p) cudaFree(p);
}

static loom_status cuda_zero(loom_exec_backend *b, void *p, size_t bytes, loom_error *err) {
    cuda_backend *c = b->impl;
    CK(cudaMemsetAsync(p, 0, bytes, c->streams[0]));
    CK(cudaStreamSynchronize(c->streams[0]));
    return LOOM_OK;
}

/* The device's copy bandwidth (vtable copy_bandwidth): a device-to-device copy of 1 GiB, far
 * beyond the L2, best of 5 after a warm-up, counted as read + write (2 x bytes per copy). */
static loom_status cuda_copy_bandwidth(loom_exec_backend *b, double *gbs, loom_error *err) {
    cuda_backend *c = b->impl;
    const size_t bytes = (size_t)1 << 30;
    void *src = NULL, *dst = NULL;
    cudaEvent_t a = NULL, z = NULL;
    loom_status st = LOOM_OK;
    cudaError_t e = cudaMalloc(&src, bytes);
    if (e) return alloc_fail(err, e, bytes, "the bandwidth probe");
    e = cudaMalloc(&dst, bytes);
    if (e) {
        cudaFree(src);
        return alloc_fail(err, e, bytes, "the bandwidth probe");
    }
    e = cudaEventCreateWithFlags(&a, 0);
    if (!e) e = cudaEventCreateWithFlags(&z, 0);
    if (!e) e = cudaMemsetAsync(src, 1, bytes, c->streams[0]);
    float best = 1e30f;
    for (int r = 0; r < 6 && !e; r++) {
        float ms = 0;
        e = cudaEventRecord(a, c->streams[0]);
        if (!e) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->streams[0]);
        if (!e) e = cudaEventRecord(z, c->streams[0]);
        if (!e) e = cudaEventSynchronize(z);
        if (!e) e = cudaEventElapsedTime(&ms, a, z);
        if (!e && r > 0 && ms < best) best = ms;
    }
    if (e) st = cuda_fail(err, e, "bandwidth probe", __func__, __FILE__, __LINE__);
    else *gbs = 2.0 * (double)bytes / (best * 1e-3) / 1e9;
    if (a) cudaEventDestroy(a);
    if (z) cudaEventDestroy(z);
    cudaFree(src);
    cudaFree(dst);
    return st;
}

/* Finds the /proc/self/maps mapping holding p: [*lo, *hi). */
static bool find_mapping(const void *p, uintptr_t *lo, uintptr_t *hi) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, z;
        if (sscanf(line, "%lx-%lx", &a, &z) != 2) continue;
        if ((uintptr_t)p >= a && (uintptr_t)p < z) {
            *lo = a;
            *hi = z;
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

static loom_status map_registered(cuda_backend *c, const void *host, size_t bytes,
                                  const void **out, loom_error *err) {
    for (uint32_t i = 0; i < c->n_regions; i++) {
        region *r = &c->regions[i];
        if ((const char *)host >= r->host && (const char *)host + bytes <= r->host + r->bytes) {
            *out = r->dev + ((const char *)host - r->host);
            return LOOM_OK;
        }
    }
    uintptr_t lo, hi;
    if (!find_mapping(host, &lo, &hi) || (uintptr_t)host + bytes > hi)
        return loom_error_set(err, LOOM_ERR_CUDA,
                              "cuda backend: weight at %p (+%zu bytes) is not inside one mapping "
                              "of /proc/self/maps; cannot register it", host, bytes);
    if (c->n_regions == c->cap_regions) {
        uint32_t cap = c->cap_regions ? 2 * c->cap_regions : 8;
        region *r = realloc(c->regions, cap * sizeof *r);
        if (!r) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        c->regions = r;
        c->cap_regions = cap;
    }
    region r = {(char *)lo, hi - lo, NULL};
    int ro = 0;
    if (cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, c->opt.device))
        (void)cudaGetLastError(), ro = 0;
    CK(cudaHostRegister(r.host, r.bytes, cudaHostRegisterMapped | (ro ? cudaHostRegisterReadOnly : 0)));
    void *dev = NULL;
    cudaError_t e = cudaHostGetDevicePointer(&dev, r.host, 0);
    if (e != cudaSuccess) {
        cudaHostUnregister(r.host);
        return cuda_fail(err, e, "cudaHostGetDevicePointer(&dev, r.host, 0)", __func__, __FILE__,
                         __LINE__);
    }
    r.dev = dev;
    c->regions[c->n_regions++] = r;
    *out = r.dev + ((const char *)host - r.host);
    return LOOM_OK;
}

/* Index in tiled[] where p is or would go. */
static uint32_t tiled_find(const cuda_backend *c, const void *p) {
    uint32_t lo = 0, hi = c->n_tiled;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)c->tiled[mid] < (uintptr_t)p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The launchers' view of tensor t: loom_exec_kweight_of with the layout map_weight chose. */
static loom_kweight kweight_of(const cuda_backend *c, const loom_exec_tensor *t) {
    loom_kweight w = loom_exec_kweight_of(t);
    const uint32_t i = tiled_find(c, t->data);
    if (i < c->n_tiled && c->tiled[i] == t->data)
        w.layout = w.type == LOOM_GGML_Q6_K ? LOOM_WEIGHT_Q6K_TILES : LOOM_WEIGHT_Q4K_TILES;
    return w;
}

/* Copies weight `host` (bytes) to new device memory *out (*dev_bytes of it): as it is, or in
 * Q4_K / Q6_K tiles (through a temporary copy, then loom_cuda_q4k_to_tiles / _q6k_to_tiles)
 * where w allows and those tiles are on. */
static loom_status upload_weight(cuda_backend *c, const void *host, size_t bytes,
                                 const loom_exec_weight *w, void **out, size_t *dev_bytes,
                                 loom_error *err) {
    const bool shape = w && w->matmul_only && w->rows > 0 && w->rows % 16 == 0 && w->cols > 0 &&
                       w->cols % 256 == 0;
    /* (a triple's V only beside Q / K in tiles: the one-launch triple pairs the two layouts) */
    const bool q6 = shape && c->q6_tiles_on && w->dtype == LOOM_IR_Q6_K &&
                    (!w->in_triple || c->tiles_on);
    const bool tile = q6 || (shape && c->tiles_on && w->dtype == LOOM_IR_Q4_K);
    const size_t dbytes = q6 ? (size_t)loom_weight_bytes(LOOM_GGML_Q6_K, w->rows, w->cols,
                                                         LOOM_WEIGHT_Q6K_TILES)
                             : bytes;
    if (tile && c->n_tiled == c->cap_tiled) {
        const uint32_t cap = c->cap_tiled ? 2 * c->cap_tiled : 64;
        const void **t = realloc(c->tiled, cap * sizeof *t);
        if (!t) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        c->tiled = t;
        c->cap_tiled = cap;
    }
    void *d = NULL, *tmp = NULL;
    cudaError_t e = cudaMalloc(&d, dbytes ? dbytes : 1);
    if (e != cudaSuccess) return alloc_fail(err, e, dbytes, "a weight");
    if (tile && (e = cudaMalloc(&tmp, bytes)) != cudaSuccess) {
        cudaFree(d);
        return alloc_fail(err, e, bytes, "a weight's upload before its tiling");
    }
    e = cudaMemcpy(tile ? tmp : d, host, bytes, cudaMemcpyHostToDevice);
    loom_status st = e != cudaSuccess
                         ? cuda_fail(err, e, "cudaMemcpy(weight)", __func__, __FILE__, __LINE__)
                         : LOOM_OK;
    if (!st && tile) {
        const loom_kweight src = {tmp, q6 ? LOOM_GGML_Q6_K : LOOM_GGML_Q4_K, w->rows, w->cols};
        st = q6 ? loom_cuda_q6k_to_tiles(src, d, err, NULL)
                : loom_cuda_q4k_to_tiles(src, d, err, NULL);
        /* (cudaFree below waits for it) */
    }
    if (tmp && (e = cudaFree(tmp)) != cudaSuccess && !st)
        st = cuda_fail(err, e, "cudaFree(tmp)", __func__, __FILE__, __LINE__);
    if (st) {
        cudaFree(d);
        return st;
    }
    if (tile) {
        const uint32_t i = tiled_find(c, d);
        memmove(c->tiled + i + 1, c->tiled + i, (c->n_tiled - i) * sizeof *c->tiled);
        c->tiled[i] = d;
        c->n_tiled++;
    }
    *out = d;
    *dev_bytes = dbytes;
    return LOOM_OK;
}

static loom_status cuda_map_weight(loom_exec_backend *b, const void *host, size_t bytes,
                                   const loom_exec_weight *w, const void **out, loom_error *err) {
    cuda_backend *c = b->impl;
    *out = NULL;
    loom_status st;
    size_t dbytes = bytes;
    if (c->mapped) {
        if ((st = map_registered(c, host, bytes, out, err))) return st;
    } else {
        void *d = NULL;
        if ((st = upload_weight(c, host, bytes, w, &d, &dbytes, err))) return st;
        *out = d;
    }
    c->weight_bytes += dbytes;
    if (c->opt.progress) c->opt.progress(c->opt.progress_ctx, c->weight_bytes);
    return LOOM_OK;
}

static void cuda_unmap_weight(loom_exec_backend *b, const void *mapped) {
    cuda_backend *c = b->impl;
    if (c->mapped || !mapped) return; /* registered regions go at destroy */
    const uint32_t i = tiled_find(c, mapped);
    if (i < c->n_tiled && c->tiled[i] == mapped) {
        memmove(c->tiled + i, c->tiled + i + 1, (c->n_tiled - i - 1) * sizeof *c->tiled);
        c->n_tiled--;
    }
    cudaFree((void *)mapped);
}

enum { STAGE_MIN = 64 << 10, STAGE_MAX = 16 << 20 };

/* Asynchronous on streams[0] through the pinned staging buffer (no synchronization per input;
 * the step's end synchronizes). The caller's src may change as soon as this returns. An upload
 * larger than STAGE_MAX goes directly and waits for itself. */
static loom_status cuda_upload(loom_exec_backend *b, void *dst, const void *src, size_t bytes,
                               loom_error *err) {
    cuda_backend *c = b->impl;
    if (!bytes) return LOOM_OK;
    if (bytes > STAGE_MAX) {
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->streams[0]));
        CK(cudaStreamSynchronize(c->streams[0]));
        return LOOM_OK;
    }
    size_t need = (bytes + 63) & ~(size_t)63;
    if (c->stage_used + need > c->stage_cap) {
        /* Full: wait for the copies still reading it, then start over (grown if too small). */
        CK(cudaStreamSynchronize(c->streams[0]));
        c->stage_used = 0;
        if (need > c->stage_cap) {
            size_t cap = need < STAGE_MIN ? STAGE_MIN : 2 * need;
            void *p = NULL;
            cudaError_t e = cudaMallocHost(&p, cap);
            if (e != cudaSuccess) return alloc_fail(err, e, cap, "pinned input staging (host)");
            if (c->stage) cudaFreeHost(c->stage);
            c->stage = p;
            c->stage_cap = cap;
        }
    }
    char *at = c->stage + c->stage_used;
    memcpy(at, src, bytes);
    CK(cudaMemcpyAsync(dst, at, bytes, cudaMemcpyHostToDevice, c->streams[0]));
    c->stage_used += need;
    return LOOM_OK;
}

/* Directly into dst when it lies inside a block of cuda_host_alloc (page-locked); else through
 * the pinned landing buffer up to STAGE_MAX bytes (grown on demand; directly when it cannot be
 * had or for larger copies); synchronous. */
static loom_status cuda_download(loom_exec_backend *b, void *dst, const void *src, size_t bytes,
                                 loom_error *err) {
    cuda_backend *c = b->impl;
    for (uint32_t i = 0; i < c->n_host; i++) {
        /* As integers: dst and the block may be different allocations. */
        const uintptr_t h = (uintptr_t)c->host[i].p, d = (uintptr_t)dst;
        if (d >= h && bytes <= c->host[i].bytes && d - h <= c->host[i].bytes - bytes) {
            CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->streams[0]));
            CK(cudaStreamSynchronize(c->streams[0]));
            c->stage_used = 0; /* every upload enqueued before has completed */
            return LOOM_OK;
        }
    }
    if (bytes <= STAGE_MAX && bytes > c->down_cap) {
        size_t cap = bytes < STAGE_MIN ? STAGE_MIN : bytes;
        void *p = NULL;
        if (cudaMallocHost(&p, cap) == cudaSuccess) {
            if (c->down) cudaFreeHost(c->down);
            c->down = p;
            c->down_cap = cap;
        } else {
            (void)cudaGetLastError(); /* keep the old buffer; this copy goes directly */
        }
    }
    bool staged = bytes <= c->down_cap;
    CK(cudaMemcpyAsync(staged ? c->down : dst, src, bytes, cudaMemcpyDeviceToHost, c->streams[0]));
    CK(cudaStreamSynchronize(c->streams[0]));
    c->stage_used = 0; /* every upload enqueued before has completed */
    if (staged) memcpy(dst, c->down, bytes);
    return LOOM_OK;
}

/* A plain matmul's f32 graph output (the logits) in page-locked host memory mapped into the
 * device: the GEMV's stores cross the bus while it runs, so the step ends without the
 * download's copy (~0.6 MB a token at a 152K vocabulary) and its latency. Other ops keep the
 * device: only a kernel that stores each element once belongs in host memory. So do outputs
 * larger than MAPPED_OUTPUT_MAX (every row of a long prompt's logits: 311 MB at 512 x 152K),
 * for which page-locked memory is scarce. A mapped output takes no arena bytes (the executor
 * plans the arena without it). */
enum { MAPPED_OUTPUT_MAX = 8 << 20 };

static bool cuda_map_output(loom_exec_backend *b, const loom_ir_graph *g, loom_ir_value_id v,
                            size_t bytes, void **dev, void **host) {
    cuda_backend *c = b->impl;
    const loom_ir_value *val = loom_ir_value_get(g, v);
    if (!c->map_outputs || bytes > MAPPED_OUTPUT_MAX || val->type.dtype != LOOM_IR_F32 ||
        loom_ir_node_get(g, val->def)->op != LOOM_IR_OP_MATMUL)
        return false;
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (cudaHostGetDevicePointer(dev, p, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFreeHost(p);
        return false;
    }
    *host = p;
    return true;
}

static void cuda_unmap_output(loom_exec_backend *b, void *dev, void *host) {
    (void)b;
    (void)dev;
    cudaFreeHost(host);
}

/* Page-locked when the driver gives it (recorded for cuda_download), else malloc'd. */
static void *cuda_host_alloc(loom_exec_backend *b, size_t bytes) {
    cuda_backend *c = b->impl;
    if (c->n_host == c->cap_host) {
        uint32_t cap = c->cap_host ? 2 * c->cap_host : 4;
        struct host_block *h = realloc(c->host, cap * sizeof *h);
        if (!h) return NULL;
        c->host = h;
        c->cap_host = cap;
    }
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return malloc(bytes ? bytes : 1);
    }
    c->host[c->n_host++] = (struct host_block){p, bytes};
    return p;
}

static void cuda_host_free(loom_exec_backend *b, void *p) {
    cuda_backend *c = b->impl;
    if (!p) return;
    for (uint32_t i = 0; i < c->n_host; i++) {
        if (c->host[i].p == p) {
            cudaFreeHost(p);
            c->host[i] = c->host[--c->n_host];
            return;
        }
    }
    free(p);
}

/* ---------------------------------------------------------------- streams and graphs */

static loom_status ensure_streams(cuda_backend *c, uint32_t n, uint32_t n_nodes, loom_error *err) {
    while (c->n_streams_made < n) {
        CK(cudaStreamCreateWithFlags(&c->streams[c->n_streams_made], cudaStreamNonBlocking));
        cudaError_t e = cudaEventCreateWithFlags(&c->join_ev[c->n_streams_made], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaStreamDestroy(c->streams[c->n_streams_made]);
            c->streams[c->n_streams_made] = NULL;
            return cuda_fail(err, e, "cudaEventCreateWithFlags(join)", __func__, __FILE__, __LINE__);
        }
        c->n_streams_made++;
    }
    if (c->n_node_ev < n_nodes) {
        cudaEvent_t *ev = realloc(c->node_ev, n_nodes * sizeof *ev);
        if (!ev) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        c->node_ev = ev;
        while (c->n_node_ev < n_nodes) {
            CK(cudaEventCreateWithFlags(&c->node_ev[c->n_node_ev], cudaEventDisableTiming));
            c->n_node_ev++;
        }
    }
    return LOOM_OK;
}

static loom_status cuda_begin_step(loom_exec_backend *b, uint32_t n_streams, uint32_t n_nodes,
                                   int64_t n_tokens, loom_error *err) {
    cuda_backend *c = b->impl;
    if (n_streams < 1 || n_streams > MAX_STREAMS)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "cuda backend: %u streams",
                              n_streams);
    step_lock(c); /* released by synchronize, or by end_step(false) after an error */
    loom_status st = ensure_streams(c, n_streams, n_nodes, err);
    if (st) return st;
    if (c->scratch_need && (st = loom_cuda_reserve_scratch(c->scratch_need, err))) return st;
    /* Allocated here, before any capture of this step begins. */
    if ((n_tokens > 1 || c->prenorm_off || c->norm_x_decode) && c->norm_x_bytes < c->norm_x_need) {
        if (c->norm_x) {
            CK(cudaFree(c->norm_x));
            c->device_bytes -= c->norm_x_bytes;
        }
        c->norm_x = NULL;
        c->norm_x_bytes = 0;
        cudaError_t e = cudaMalloc((void **)&c->norm_x, c->norm_x_need);
        if (e != cudaSuccess) {
            c->norm_x = NULL;
            return alloc_fail(err, e, c->norm_x_need, "the normalized x of prenorm matmuls");
        }
        c->norm_x_bytes = c->norm_x_need;
        c->device_bytes += c->norm_x_need;
    }
    if (c->q_buf_bytes < c->q_buf_need) { /* every step: the decode launch takes it too */
        if (c->q_buf) {
            CK(cudaFree(c->q_buf));
            c->device_bytes -= c->q_buf_bytes;
        }
        c->q_buf = NULL;
        c->q_buf_bytes = 0;
        cudaError_t e = cudaMalloc((void **)&c->q_buf, c->q_buf_need);
        if (e != cudaSuccess) {
            c->q_buf = NULL;
            return alloc_fail(err, e, c->q_buf_need, "the roped q of rope_kv_attention");
        }
        c->q_buf_bytes = c->q_buf_need;
        c->device_bytes += c->q_buf_need;
    }
    c->step_streams = n_streams;
    c->cur = c->streams[0];
    c->scratch_stream = -1;
    c->capturing = false;
    c->node_i = 0;
    c->n_writes = 0;
    c->prof_step = c->profile;
    c->prof_kind = n_tokens == 1 ? 0 : 1;
    c->prof_tokens[c->prof_kind] += n_tokens;
    if (c->prof_step) {
        if (c->n_prof < n_nodes) {
            cudaEvent_t *ev = realloc(c->prof_ev, 2 * (size_t)n_nodes * sizeof *ev);
            loom_ir_op *op = realloc(c->prof_op, (size_t)n_nodes * sizeof *op);
            if (ev) c->prof_ev = ev;
            if (op) c->prof_op = op;
            if (!ev || !op)
                return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
            while (c->n_prof < n_nodes) {
                CK(cudaEventCreateWithFlags(&c->prof_ev[2 * c->n_prof], 0));
                CK(cudaEventCreateWithFlags(&c->prof_ev[2 * c->n_prof + 1], 0));
                c->n_prof++;
            }
        }
        if (!c->prof_begin) CK(cudaEventCreateWithFlags(&c->prof_begin, 0));
        if (!c->prof_end) CK(cudaEventCreateWithFlags(&c->prof_end, 0));
        CK(cudaEventRecord(c->prof_begin, c->streams[0]));
    } else if (c->graphs_on && !c->host_fallback && n_tokens == 1) {
        CK(cudaStreamBeginCapture(c->streams[0], cudaStreamCaptureModeThreadLocal));
        c->capturing = true;
        c->step_baked = false;
        c->exec_replayable = false; /* until this capture is instantiated */
        c->n_checks = 0;
        c->exec_scratch = loom_cuda_scratch_base();
    }
    if (n_streams > 1) {
        CK(cudaEventRecord(c->fork_ev, c->streams[0]));
        for (uint32_t s = 1; s < n_streams; s++) CK(cudaStreamWaitEvent(c->streams[s], c->fork_ev, 0));
    }
    return LOOM_OK;
}

static loom_status cuda_set_stream(loom_exec_backend *b, uint32_t stream, const uint32_t *waits,
                                   uint32_t n_waits, loom_error *err) {
    cuda_backend *c = b->impl;
    if (stream >= c->step_streams)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "cuda backend: stream %u of %u",
                              stream, c->step_streams);
    c->cur = c->streams[stream];
    for (uint32_t i = 0; i < n_waits; i++) {
        if (waits[i] >= c->n_node_ev)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "cuda backend: event %u", waits[i]);
        CK(cudaStreamWaitEvent(c->cur, c->node_ev[waits[i]], 0));
    }
    return LOOM_OK;
}

static loom_status cuda_record(loom_exec_backend *b, uint32_t i, loom_error *err) {
    cuda_backend *c = b->impl;
    if (i >= c->n_node_ev)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "cuda backend: event %u", i);
    CK(cudaEventRecord(c->node_ev[i], c->cur));
    return LOOM_OK;
}

static loom_status finish_capture(cuda_backend *c, loom_error *err) {
    cudaGraph_t graph = NULL;
    c->capturing = false;
    CK(cudaStreamEndCapture(c->streams[0], &graph));
    loom_status st = LOOM_OK;
    cudaError_t e;
    if (c->exec) {
        cudaGraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        e = cudaGraphExecUpdate(c->exec, graph, &info);
        if (e == cudaSuccess) {
            c->n_update++;
        } else {
            (void)cudaGetLastError();
            cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
        }
    }
    if (!c->exec) {
        e = cudaGraphInstantiate(&c->exec, graph, 0);
        if (e != cudaSuccess) {
            c->exec = NULL;
            st = cuda_fail(err, e, "cudaGraphInstantiate(&c->exec, graph, 0)", __func__, __FILE__,
                           __LINE__);
            goto done;
        }
        c->n_inst++;
    }
    c->exec_replayable = !c->step_baked;
    c->exec_streams = c->step_streams;
    e = cudaGraphLaunch(c->exec, c->streams[0]);
    if (e != cudaSuccess) {
        c->exec_replayable = false; /* never replay an exec that failed to launch */
        st = cuda_fail(err, e, "cudaGraphLaunch(c->exec, c->streams[0])", __func__, __FILE__,
                       __LINE__);
        goto done;
    }
    c->n_launch++;
done:
    cudaGraphDestroy(graph);
    return st;
}

static loom_status end_step(cuda_backend *c, bool ok, loom_error *err) {
    loom_status st = LOOM_OK;
    /* Join: the main stream waits for every other stream's work of this step. */
    for (uint32_t s = 1; s < c->step_streams && ok; s++) {
        cudaError_t e = cudaEventRecord(c->join_ev[s], c->streams[s]);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(c->streams[0], c->join_ev[s], 0);
        if (e != cudaSuccess) {
            st = cuda_fail(err, e, "join streams", __func__, __FILE__, __LINE__);
            ok = false;
        }
    }
    if (c->capturing) {
        if (ok) return finish_capture(c, err);
        /* Abandon the capture; the main stream leaves capture mode. */
        cudaGraph_t graph = NULL;
        c->capturing = false;
        if (cudaStreamEndCapture(c->streams[0], &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        if (c->exec) {
            cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
        }
        c->exec_replayable = false;
    }
    return st;
}

/* end_step, and the step's lock released where no synchronize follows (a failed or abandoned
 * step). */
static loom_status cuda_end_step(loom_exec_backend *b, bool ok, loom_error *err) {
    cuda_backend *c = b->impl;
    loom_status st = end_step(c, ok, err);
    if (st || !ok) step_unlock(c);
    return st;
}

/* Replays exec for a decode step of the shape it was captured for (executor.h's replay_step):
 * the position checks of the capture on this step's host copies, then one cudaGraphLaunch on
 * the main stream, after the inputs' uploads. */
static bool cuda_replay_step(loom_exec_backend *b, uint32_t n_streams, int64_t n_tokens,
                             const loom_exec_tensor *inputs, uint32_t n_inputs, loom_status *st,
                             loom_error *err) {
    cuda_backend *c = b->impl;
    *st = LOOM_OK;
    if (!c->exec || !c->exec_replayable || !c->replay_on || !c->graphs_on || c->host_fallback ||
        c->profile || n_tokens != 1 || n_streams != c->exec_streams)
        return false;
    step_lock(c); /* kept for the begin_step that follows a false; synchronize releases it */
    if (loom_cuda_scratch_base() != c->exec_scratch) return false; /* moved: capture again */
    for (uint32_t i = 0; i < c->n_checks; i++) {
        const pos_check *k = &c->checks[i];
        const loom_exec_tensor *in = NULL;
        for (uint32_t j = 0; j < n_inputs && !in; j++)
            if (inputs[j].data == k->dev && inputs[j].host && inputs[j].numel == k->n)
                in = &inputs[j];
        if (!in) return false; /* cannot check: run (and capture) the step normally */
        bool consecutive;
        if ((*st = loom_exec_check_positions(in->host, k->n, k->n_ctx, &consecutive, err))) {
            loom_error_prefix(err, "cuda backend: %s (graph replay): ", k->op);
            step_unlock(c);
            return true;
        }
    }
    cudaError_t e = cudaGraphLaunch(c->exec, c->streams[0]);
    if (e != cudaSuccess) {
        *st = cuda_fail(err, e, "cudaGraphLaunch(c->exec, c->streams[0]) (replay)", __func__,
                        __FILE__, __LINE__);
        step_unlock(c);
        return true;
    }
    c->n_launch++;
    return true;
}

static loom_status synchronize(cuda_backend *c, loom_error *err) {
    if (c->prof_step) CK(cudaEventRecord(c->prof_end, c->streams[0]));
    for (uint32_t s = 0; s < c->n_streams_made; s++) CK(cudaStreamSynchronize(c->streams[s]));
    CK(cudaGetLastError());
    c->stage_used = 0;
    if (c->prof_step) {
        c->prof_step = false;
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, c->prof_begin, c->prof_end));
        int k = c->prof_kind;
        c->prof_total_ms[k] += ms;
        c->prof_steps[k]++;
        for (uint32_t i = 0; i < c->node_i && i < c->n_prof; i++) {
            CK(cudaEventElapsedTime(&ms, c->prof_ev[2 * i], c->prof_ev[2 * i + 1]));
            c->prof_ms[k][c->prof_op[i]] += ms;
            c->prof_count[k][c->prof_op[i]]++;
        }
    }
    return LOOM_OK;
}

/* The step's end: its lock released whatever the outcome. */
static loom_status cuda_synchronize(loom_exec_backend *b, loom_error *err) {
    cuda_backend *c = b->impl;
    loom_status st = synchronize(c, err);
    step_unlock(c);
    return st;
}

/* ---------------------------------------------------------------- dispatch helpers */

static loom_status copy_d2d(cuda_backend *c, void *dst, const void *src, size_t bytes,
                            loom_error *err) {
    if (dst == src || !bytes) return LOOM_OK;
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->cur));
    return LOOM_OK;
}

/* Positions of a step from the host copy of the graph input (or downloaded when absent). */
static loom_status host_positions(cuda_backend *c, const loom_exec_tensor *pos, int32_t **owned,
                                  const int32_t **out, loom_error *err) {
    *owned = NULL;
    if (pos->host) {
        *out = pos->host;
        return LOOM_OK;
    }
    if (c->capturing)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "cuda backend: positions are not a graph input; cannot capture");
    int32_t *p = malloc((size_t)(pos->numel ? pos->numel : 1) * sizeof *p);
    if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    cudaError_t e = cudaMemcpyAsync(p, pos->data, (size_t)pos->numel * sizeof *p,
                                    cudaMemcpyDeviceToHost, c->cur);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->cur);
    if (e != cudaSuccess) {
        free(p);
        return cuda_fail(err, e, "download positions", __func__, __FILE__, __LINE__);
    }
    *owned = p;
    *out = p;
    return LOOM_OK;
}

/* The layout of a cache tensor in this backend (INT8 overrides the graph's dtype). */
static loom_kv_layout layout_of(const cuda_backend *c, const loom_exec_tensor *cache, int64_t hkv,
                                int64_t d, void **data, float **scales) {
    loom_kv_layout kv = loom_exec_kv_layout(cache, hkv, d);
    if (c->opt.kv_int8) kv.type = LOOM_KV_INT8;
    *data = cache->data;
    *scales = NULL;
    if (c->opt.kv_int8) {
        uint64_t at;
        (void)int8_cache_bytes((uint64_t)(kv.n_ctx * hkv), (uint64_t)d, &at);
        *scales = (float *)((char *)cache->data + at);
    }
    return kv;
}

/* Attention on the host for head dims the CUDA kernel does not cover (tiny models only). */
static loom_status host_attention(cuda_backend *c, const loom_exec_tensor *in,
                                  const loom_exec_tensor *y, const loom_kv_layout *kv,
                                  const float *ks, const float *vs, int64_t H, float scale,
                                  const int32_t *pos, bool consecutive, loom_error *err) {
    size_t cache_elems = (size_t)(kv->n_ctx * kv->n_kv_head * kv->head_dim);
    size_t cache_bytes = kv->type == LOOM_KV_INT8 ? cache_elems
                         : kv->type == LOOM_KV_F16 ? 2 * cache_elems : 4 * cache_elems;
    size_t sc_bytes = kv->type == LOOM_KV_INT8 ? (size_t)(kv->n_ctx * kv->n_kv_head) * 4 : 0;
    size_t qb = (size_t)in[0].numel * 4;
    char *buf = malloc(2 * cache_bytes + 2 * sc_bytes + 2 * qb + 64);
    if (!buf) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    char *hk = buf, *hv = hk + cache_bytes, *hks = hv + cache_bytes, *hvs = hks + sc_bytes;
    float *hq = (float *)(((uintptr_t)(hvs + sc_bytes) + 15) & ~(uintptr_t)15), *ho = hq + in[0].numel;
    loom_status st = LOOM_OK;
    cudaError_t e = cudaMemcpyAsync(hk, in[1].data, cache_bytes, cudaMemcpyDeviceToHost, c->cur);
    if (!e) e = cudaMemcpyAsync(hv, in[2].data, cache_bytes, cudaMemcpyDeviceToHost, c->cur);
    if (!e && sc_bytes) e = cudaMemcpyAsync(hks, ks, sc_bytes, cudaMemcpyDeviceToHost, c->cur);
    if (!e && sc_bytes) e = cudaMemcpyAsync(hvs, vs, sc_bytes, cudaMemcpyDeviceToHost, c->cur);
    if (!e) e = cudaMemcpyAsync(hq, in[0].data, qb, cudaMemcpyDeviceToHost, c->cur);
    if (!e) e = cudaStreamSynchronize(c->cur);
    if (e) {
        st = cuda_fail(err, e, "host attention download", __func__, __FILE__, __LINE__);
        goto done;
    }
    int64_t T = in[3].numel, row = H * kv->head_dim;
    const float *pks = sc_bytes ? (const float *)hks : NULL, *pvs = sc_bytes ? (const float *)hvs : NULL;
    if (consecutive) {
        loom_attn_params p = {T, H, T ? pos[0] : 0, scale, 0};
        st = loom_cpu_attention(hq, hk, pks, hv, pvs, kv, &p, ho, err);
    } else {
        for (int64_t t = 0; t < T && !st; t++) {
            loom_attn_params p = {1, H, pos[t], scale, 0};
            st = loom_cpu_attention(hq + t * row, hk, pks, hv, pvs, kv, &p, ho + t * row, err);
        }
    }
    if (st) goto done;
    e = cudaMemcpyAsync(y->data, ho, qb, cudaMemcpyHostToDevice, c->cur);
    if (!e) e = cudaStreamSynchronize(c->cur);
    if (e) st = cuda_fail(err, e, "host attention upload", __func__, __FILE__, __LINE__);
    c->n_fallback++;
done:
    free(buf);
    return st;
}

/* Orders a scratch-using node after the previous one on another stream. */
static loom_status scratch_enter(cuda_backend *c, loom_error *err) {
    int32_t s = 0;
    for (uint32_t i = 0; i < c->step_streams; i++)
        if (c->streams[i] == c->cur) s = (int32_t)i;
    if (c->scratch_stream >= 0 && c->scratch_stream != s)
        CK(cudaStreamWaitEvent(c->cur, c->scratch_ev, 0));
    c->scratch_stream = s;
    return LOOM_OK;
}

static loom_status scratch_leave(cuda_backend *c, loom_error *err) {
    if (c->step_streams > 1) CK(cudaEventRecord(c->scratch_ev, c->cur));
    return LOOM_OK;
}

/* Records, while capturing, that positions pos_t (n values, checked now) must lie inside a
 * cache of n_ctx rows: cuda_replay_step repeats the check on each replayed step's input. */
static loom_status note_positions(cuda_backend *c, const loom_exec_tensor *pos_t, int64_t n_ctx,
                                  loom_ir_op op, loom_error *err) {
    for (uint32_t i = 0; i < c->n_checks; i++)
        if (c->checks[i].dev == pos_t->data && c->checks[i].n == pos_t->numel) {
            if (n_ctx < c->checks[i].n_ctx) c->checks[i].n_ctx = n_ctx;
            return LOOM_OK;
        }
    if (c->n_checks == c->cap_checks) {
        uint32_t cap = c->cap_checks ? 2 * c->cap_checks : 4;
        pos_check *k = realloc(c->checks, cap * sizeof *k);
        if (!k) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        c->checks = k;
        c->cap_checks = cap;
    }
    const loom_ir_op_info *info = loom_ir_op_info_get(op);
    c->checks[c->n_checks++] = (pos_check){pos_t->data, pos_t->numel, n_ctx,
                                           info ? info->name : "?"};
    return LOOM_OK;
}

/* Records that this step writes cache rows of `cache` at the device positions `pos`. */
static loom_status note_write(cuda_backend *c, const void *cache, const void *pos,
                              loom_error *err) {
    if (c->n_writes == c->cap_writes) {
        uint32_t cap = c->cap_writes ? 2 * c->cap_writes : 8;
        struct step_write *w = realloc(c->writes, cap * sizeof *w);
        if (!w) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        c->writes = w;
        c->cap_writes = cap;
    }
    c->writes[c->n_writes++] = (struct step_write){cache, pos};
    return LOOM_OK;
}

/* Whether attention over the caches kc, vc at positions pos_t must launch in order
 * (loom_attn_params.in_order). Decode attention otherwise reads the position and the cache
 * rows below it before the previous kernel has finished (loom_cuda_attention_at), which is
 * right when no kernel of this step may still write them: the positions are a graph input,
 * copied before the step's first kernel (cuda_upload on streams[0], ahead of the graph launch
 * or the step's launches; a copy completes before the next kernel of its stream starts), or
 * host_positions synchronized the stream on them; and the rows below the position were written
 * in earlier steps, all behind that copy. A step writes the rows at its own positions only
 * (kv_write and rope_kv_* with the same positions value as the attention: the row at the
 * position, which attention reads after its wait). In order then: a position computed in a
 * captured step (no host copy, not synchronized), or a cache this step wrote at other
 * positions. */
static bool attn_in_order(const cuda_backend *c, const void *kc, const void *vc,
                          const loom_exec_tensor *pos_t) {
    if (c->capturing && !pos_t->host) return true;
    for (uint32_t i = 0; i < c->n_writes; i++)
        if ((c->writes[i].cache == kc || c->writes[i].cache == vc) && c->writes[i].pos != pos_t->data)
            return true;
    return false;
}

/* ---------------------------------------------------------------- dispatch */

static loom_status run_kv_or_attention(cuda_backend *c, const loom_ir_node *n,
                                       const loom_exec_tensor *in, const loom_exec_tensor *out,
                                       loom_error *err) {
    bool is_write = n->op == LOOM_IR_OP_KV_WRITE;
    const loom_exec_tensor *cache = is_write ? &in[0] : &in[1];
    const loom_exec_tensor *pos_t = is_write ? &in[2] : &in[3];
    int64_t hkv, d;
    if (is_write) {
        loom_exec_cache_heads(cache, &hkv, &d);
    } else {
        hkv = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_KV_HEAD, 0);
        d = loom_ir_node_attr_int(n, LOOM_IR_ATTR_HEAD_DIM, 0);
    }
    int32_t *owned = NULL;
    const int32_t *pos = NULL;
    bool consecutive = true;
    int64_t T = pos_t->numel;
    loom_status st = LOOM_OK;
    const loom_kv_type kt =
        c->opt.kv_int8 ? LOOM_KV_INT8 : loom_exec_kv_layout(cache, hkv, d).type;
    const bool on_device = is_write || loom_cuda_attention_supports(d, kt);
    /* Capturing: the kernels read the position from the device input (replayable), checked on
     * the host now and before every replay; without a host copy the kernels' clamping keeps
     * them inside the cache. */
    bool at = c->capturing && on_device;
    if (!(at && !pos_t->host)) {
        if ((st = host_positions(c, pos_t, &owned, &pos, err))) return st;
        if ((st = loom_exec_check_positions(pos, T, cache->dims[0], &consecutive, err))) goto done;
        if (c->capturing && (st = note_positions(c, pos_t, cache->dims[0], n->op, err))) goto done;
    }
    at = at && consecutive;
    if (c->capturing && !at) c->step_baked = true;
    if (is_write) {
        void *data;
        float *scales;
        loom_kv_layout kv = layout_of(c, &out[0], hkv, d, &data, &scales);
        const float *src = in[1].data;
        if ((st = note_write(c, data, pos_t->data, err))) goto done;
        if (at) {
            st = loom_cuda_kv_write_at(src, T, pos_t->data, data, scales, &kv, err, c->cur);
        } else if (consecutive) {
            st = loom_cuda_kv_write(src, T, T ? pos[0] : 0, data, scales, &kv, err, c->cur);
        } else {
            for (int64_t t = 0; t < T && !st; t++)
                st = loom_cuda_kv_write(src + t * hkv * d, 1, pos[t], data, scales, &kv, err, c->cur);
        }
        goto done;
    }
    {
        void *kd, *vd;
        float *ks, *vs;
        loom_kv_layout kv = layout_of(c, &in[1], hkv, d, &kd, &ks);
        (void)layout_of(c, &in[2], hkv, d, &vd, &vs);
        int64_t H = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_HEAD, 0);
        float scale = loom_ir_node_attr_float(n, LOOM_IR_ATTR_SCALE, 0);
        if (!on_device) {
            st = host_attention(c, in, &out[0], &kv, ks, vs, H, scale, pos, consecutive, err);
            goto done;
        }
        if ((st = scratch_enter(c, err))) goto done;
        const float *q = in[0].data;
        float *o = out[0].data;
        const int ord = attn_in_order(c, kd, vd, pos_t);
        if (at) {
            loom_attn_params p = {T, H, 0, scale, ord};
            st = loom_cuda_attention_at(q, kd, ks, vd, vs, &kv, &p, pos_t->data, o, err, c->cur);
        } else if (consecutive) {
            loom_attn_params p = {T, H, T ? pos[0] : 0, scale, ord};
            st = loom_cuda_attention(q, kd, ks, vd, vs, &kv, &p, o, err, c->cur);
        } else {
            for (int64_t t = 0; t < T && !st; t++) {
                loom_attn_params p = {1, H, pos[t], scale, ord};
                st = loom_cuda_attention(q + t * H * d, kd, ks, vd, vs, &kv, &p, o + t * H * d, err,
                                         c->cur);
            }
        }
        if (!st) st = scratch_leave(c, err);
    }
done:
    free(owned);
    return st;
}

/* rope_kv_write, or rope_kv_attention (same operands and first results): the positions are
 * checked on the host (the input's host copy), the kernels read them from device memory (one
 * launch, replayable at any position). rope_kv_write writes the roped q into its result 2.
 * rope_kv_attention in a decode step (T = 1) whose attention runs on the device is one call of
 * loom_cuda_rope_kv_attention_at (q_buf its q_tmp; one fused launch, two with LOOM_ATTN_FUSED=0);
 * otherwise (prefill, host attention) it is rope_kv_write into q_buf and attention on it, the
 * unfused pair's launches. */
static loom_status run_rope_kv(cuda_backend *c, const loom_ir_node *n, const loom_exec_tensor *in,
                               const loom_exec_tensor *out, loom_error *err) {
    int64_t hkv = in[3].dims[1], d = in[3].dims[2];
    int32_t *owned = NULL;
    const int32_t *pos = NULL;
    bool consecutive;
    loom_status st = host_positions(c, &in[5], &owned, &pos, err);
    if (!st) st = loom_exec_check_positions(pos, in[5].numel, in[0].dims[0], &consecutive, err);
    if (!st && c->capturing) st = note_positions(c, &in[5], in[0].dims[0], n->op, err);
    free(owned);
    if (st) return st;
    void *kd, *vd;
    float *ks, *vs;
    loom_kv_layout kv = layout_of(c, &out[0], hkv, d, &kd, &ks);
    (void)layout_of(c, &out[1], hkv, d, &vd, &vs);
    loom_rope_params p = loom_exec_rope_params(n, &in[2]);
    p.n_kv_head = hkv;
    bool norms = n->n_in == 8;
    float eps = loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0);
    const float *qn = norms ? in[6].data : NULL, *kn = norms ? in[7].data : NULL;
    if (n->op == LOOM_IR_OP_ROPE_KV_WRITE)
        return loom_cuda_rope_kv_write(in[2].data, in[3].data, in[4].data, in[5].data, qn, kn,
                                       eps, &p, kd, ks, vd, vs, &kv, out[2].data, err, c->cur);
    if (!c->q_buf || (size_t)in[2].numel * sizeof(float) > c->q_buf_bytes)
        return loom_error_set(err, LOOM_ERR_LIMIT,
                              "cuda backend: %s: the roped q [%lld x %lld] needs %zu bytes but "
                              "q_buf holds %zu (internal: cuda_reserve_node sized it for the "
                              "graph's largest T)",
                              loom_ir_op_info_get(n->op)->name, (long long)in[2].dims[0],
                              (long long)(in[2].dims[0] ? in[2].numel / in[2].dims[0] : 0),
                              (size_t)in[2].numel * sizeof(float), c->q_buf_bytes);
    int64_t T = in[5].numel, H = loom_ir_node_attr_int(n, LOOM_IR_ATTR_N_HEAD, 0);
    const int ord = attn_in_order(c, kd, vd, &in[5]);
    if ((st = note_write(c, kd, in[5].data, err)) || (st = note_write(c, vd, in[5].data, err)))
        return st;
    if (T == 1 && loom_cuda_attention_supports(d, kv.type)) {
        loom_attn_params ap = {1, H, 0, loom_ir_node_attr_float(n, LOOM_IR_ATTR_SCALE, 0), ord};
        if ((st = scratch_enter(c, err)) ||
            (st = loom_cuda_rope_kv_attention_at(in[2].data, in[3].data, in[4].data, in[5].data,
                                                 qn, kn, eps, &p, kd, ks, vd, vs, &kv, &ap,
                                                 c->q_buf, out[2].data, err, c->cur)))
            return st;
        return scratch_leave(c, err);
    }
    /* The unfused pair: q_buf is ordered across streams with the kernel scratch. */
    if ((st = scratch_enter(c, err)) ||
        (st = loom_cuda_rope_kv_write(in[2].data, in[3].data, in[4].data, in[5].data, qn, kn, eps,
                                      &p, kd, ks, vd, vs, &kv, c->q_buf, err, c->cur)))
        return st;
    loom_exec_tensor att_in[4] = {in[2], out[0], out[1], in[5]};
    att_in[0].data = c->q_buf;
    return run_kv_or_attention(c, n, att_in, &out[2], err);
}

static loom_status dispatch(loom_exec_backend *b, const loom_ir_node *n,
                           const loom_exec_tensor *in, const loom_exec_tensor *out,
                           loom_error *err);

/* The weights w[0..] of matmul-family node n (operands 1..), as its launcher takes them. */
static void node_weights(const cuda_backend *c, const loom_ir_node *n, const loom_exec_tensor *in,
                         loom_kweight w[3]) {
    const int nw = loom_exec_matmul_weights(n->op);
    for (int i = 0; i < 3; i++) w[i] = i < nw ? kweight_of(c, &in[1 + i]) : (loom_kweight){0};
}

/* Whether matmul-family node n's launch over `rows` tokens with weights w (node_weights) uses the
 * kernel scratch (the wide prefill GEMMs' x-limb pre-passes), as its launcher answers
 * (loom_cuda_matmul_scratch_bytes; 0 for decode steps, a Q4_K_M triple's Q6_K V below 64 tokens,
 * the switches off). Such a launch is ordered across streams like the other scratch users. */
static bool matmul_uses_scratch(const loom_ir_node *n, const loom_kweight *w, int64_t rows) {
    return loom_cuda_matmul_scratch_bytes(matmul_role(n), w, rows) > 0;
}

/* matmul, matmul_pair, matmul_triple: with a prenorm, folded when T = 1 and the norm weight is
 * aligned (loom_exec_cuda_prenorm_folds), else rms_norm into norm_x then the plain launcher
 * (see the top of the file). */
static loom_status run_matmul(cuda_backend *c, const loom_ir_node *n, const loom_exec_tensor *in,
                              const loom_exec_tensor *out, loom_error *err) {
    cudaStream_t s = c->cur;
    const loom_exec_tensor *x = &in[0];
    int64_t K = x->rank ? x->dims[x->rank - 1] : 1, rows = K ? x->numel / K : 0;
    loom_prenorm pn;
    const loom_prenorm *norm = loom_exec_prenorm(n, in, &pn);
    const float *xs = x->data;
    loom_status st;
    bool unfold = norm && !loom_exec_cuda_prenorm_folds(norm->weight, rows, c->prenorm_off);
    loom_kweight w[3];
    node_weights(c, n, in, w);
    bool ordered = unfold || matmul_uses_scratch(n, w, rows);
    if (ordered && (st = scratch_enter(c, err))) return st;
    if (unfold) {
        if (!c->norm_x || (size_t)x->numel * sizeof(float) > c->norm_x_bytes)
            return loom_error_set(err, LOOM_ERR_LIMIT,
                                  "cuda backend: %s: the normalized x [%lld x %lld] needs %zu "
                                  "bytes but norm_x holds %zu (internal: cuda_reserve_node sized "
                                  "it for the graph's largest T)",
                                  loom_ir_op_info_get(n->op)->name, (long long)rows, (long long)K,
                                  (size_t)x->numel * sizeof(float), c->norm_x_bytes);
        if ((st = loom_cuda_rms_norm(x->data, norm->weight, rows, K, norm->eps, c->norm_x, err, s)))
            return st;
        xs = c->norm_x;
        norm = NULL;
    }
    if (n->op == LOOM_IR_OP_MATMUL) {
        st = loom_cuda_matmul_normed(xs, norm, rows, w[0], out[0].data, err, s);
    } else if (n->op == LOOM_IR_OP_MATMUL_PAIR) {
        bool swiglu = loom_ir_node_attr_int(n, LOOM_IR_ATTR_SWIGLU, 0) != 0;
        st = loom_cuda_matmul_pair_normed(xs, norm, rows, w[0], w[1],
                                          swiglu ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE, out[0].data,
                                          swiglu ? NULL : out[1].data, err, s);
    } else {
        const float *bias[3] = {NULL, NULL, NULL};
        bool has_bias = n->n_in >= 7; /* 7, or 8 with the prenorm weight last */
        for (int i = 0; has_bias && i < 3; i++) bias[i] = in[4 + i].data;
        float *ys[3] = {out[0].data, out[1].data, out[2].data};
        st = loom_cuda_matmul_triple_normed(xs, norm, rows, w, has_bias ? bias : NULL, ys, err, s);
    }
    return st || !ordered ? st : scratch_leave(c, err);
}

static loom_status cuda_run_node(loom_exec_backend *b, const loom_ir_graph *g,
                                 const loom_ir_node *n, const loom_exec_tensor *in,
                                 const loom_exec_tensor *out, loom_error *err) {
    (void)g;
    cuda_backend *c = b->impl;
    uint32_t i = c->node_i++;
    if (c->prof_kind == 0 && c->skip_op[n->op]) return LOOM_OK;
    if (!c->prof_step || i >= c->n_prof) return dispatch(b, n, in, out, err);
    c->prof_op[i] = n->op;
    CK(cudaEventRecord(c->prof_ev[2 * i], c->cur));
    loom_status st = dispatch(b, n, in, out, err);
    if (st) return st;
    CK(cudaEventRecord(c->prof_ev[2 * i + 1], c->cur));
    return LOOM_OK;
}

static loom_status dispatch(loom_exec_backend *b, const loom_ir_node *n,
                           const loom_exec_tensor *in, const loom_exec_tensor *out,
                           loom_error *err) {
    cuda_backend *c = b->impl;
    cudaStream_t s = c->cur;
    const loom_exec_tensor *x = &in[0], *y = &out[0];
    int64_t last = x->rank ? x->dims[x->rank - 1] : 1, rows = last ? x->numel / last : 0;
    loom_status st;
    switch (n->op) {
    case LOOM_IR_OP_GET_ROWS:
        return loom_cuda_embed(kweight_of(c, x), in[1].data, in[1].numel, y->data, err, s);
    case LOOM_IR_OP_RMS_NORM:
        return loom_cuda_rms_norm(x->data, NULL, rows, last,
                                  loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0), y->data, err, s);
    case LOOM_IR_OP_FUSED_RMS_NORM:
        return loom_cuda_rms_norm(x->data, in[1].data, rows, last,
                                  loom_ir_node_attr_float(n, LOOM_IR_ATTR_EPS, 0), y->data, err, s);
    case LOOM_IR_OP_ADD:
    case LOOM_IR_OP_MUL: {
        /* b repeats over a's leading dims (nb == n: plain elementwise); one launch. */
        const loom_exec_tensor *bv = &in[1];
        return n->op == LOOM_IR_OP_ADD
                   ? loom_cuda_add_bcast(x->data, x->numel, bv->data, bv->numel, y->data, err, s)
                   : loom_cuda_mul_bcast(x->data, x->numel, bv->data, bv->numel, y->data, err, s);
    }
    case LOOM_IR_OP_MATMUL:
    case LOOM_IR_OP_MATMUL_PAIR:
    case LOOM_IR_OP_MATMUL_TRIPLE:
        return run_matmul(c, n, in, out, err);
    case LOOM_IR_OP_MATMUL_ADD: {
        loom_kweight w[3];
        node_weights(c, n, in, w);
        bool ordered = matmul_uses_scratch(n, w, rows);
        if (ordered && (st = scratch_enter(c, err))) return st;
        st = loom_cuda_matmul_add(x->data, rows, w[0], in[2].data, y->data, err, s);
        return st || !ordered ? st : scratch_leave(c, err);
    }
    case LOOM_IR_OP_RESHAPE:
        return copy_d2d(c, y->data, x->data, (size_t)x->numel * loom_exec_elem_bytes(x->dtype),
                        err);
    case LOOM_IR_OP_ROPE: {
        if ((st = copy_d2d(c, y->data, x->data, (size_t)x->numel * 4, err))) return st;
        loom_rope_params p = loom_exec_rope_params(n, x);
        return loom_cuda_rope(y->data, NULL, in[1].data, &p, err, s);
    }
    case LOOM_IR_OP_KV_WRITE:
    case LOOM_IR_OP_ATTENTION:
        return run_kv_or_attention(c, n, in, out, err);
    case LOOM_IR_OP_ROPE_KV_WRITE:
    case LOOM_IR_OP_ROPE_KV_ATTENTION:
        return run_rope_kv(c, n, in, out, err);
    case LOOM_IR_OP_SILU:
        return loom_cuda_silu(x->data, x->numel, y->data, err, s);
    case LOOM_IR_OP_SOFTMAX:
    case LOOM_IR_OP_ARGMAX:
        if ((st = scratch_enter(c, err))) return st;
        st = n->op == LOOM_IR_OP_SOFTMAX ? loom_cuda_softmax(x->data, rows, last, y->data, err, s)
                                         : loom_cuda_argmax(x->data, rows, last, y->data, err, s);
        return st ? st : scratch_leave(c, err);
    case LOOM_IR_OP_CONVERT:
        if (x->dtype == y->dtype)
            return copy_d2d(c, y->data, x->data,
                            (size_t)x->numel * loom_exec_elem_bytes(x->dtype), err);
        if (x->dtype == LOOM_IR_F16)
            return loom_cuda_f16_to_f32(x->data, x->numel, y->data, err, s);
        return loom_cuda_f32_to_f16(x->data, x->numel, y->data, err, s);
    default:
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s has no CUDA dispatch",
                              loom_ir_op_info_get(n->op) ? loom_ir_op_info_get(n->op)->name : "?");
    }
}

/* ---------------------------------------------------------------- create / destroy */

static void print_profile(const cuda_backend *c) {
    for (int k = 0; k < 2; k++) {
        if (!c->prof_steps[k]) continue;
        double sum = 0, steps = (double)c->prof_steps[k], tot = c->prof_total_ms[k];
        for (int op = 0; op < LOOM_IR_OP_COUNT; op++) sum += c->prof_ms[k][op];
        fprintf(stderr,
                "loom cuda profile: %llu %s steps (%lld tokens), %.4f ms/step (stream 0, events)\n",
                (unsigned long long)c->prof_steps[k], k ? "prefill" : "decode",
                (long long)c->prof_tokens[k], tot / steps);
        fprintf(stderr, "  %-16s %8s %12s %8s\n", "op", "calls", "ms/step", "share");
        for (int op = 0; op < LOOM_IR_OP_COUNT; op++)
            if (c->prof_count[k][op])
                fprintf(stderr, "  %-16s %8.1f %12.4f %7.1f%%\n",
                        loom_ir_op_info_get((loom_ir_op)op)->name,
                        (double)c->prof_count[k][op] / steps, c->prof_ms[k][op] / steps,
                        100.0 * c->prof_ms[k][op] / tot);
        fprintf(stderr, "  %-16s %8s %12.4f %7.1f%%\n", "gaps/other", "", (tot - sum) / steps,
                100.0 * (tot - sum) / tot);
    }
}

static void cuda_destroy(loom_exec_backend *b) {
    cuda_backend *c = b->impl;
    print_profile(c);
    if (c->norm_x) cudaFree(c->norm_x);
    if (c->q_buf) cudaFree(c->q_buf);
    for (uint32_t i = 0; i < 2 * c->n_prof; i++) cudaEventDestroy(c->prof_ev[i]);
    if (c->prof_begin) cudaEventDestroy(c->prof_begin);
    if (c->prof_end) cudaEventDestroy(c->prof_end);
    free(c->prof_ev);
    free(c->prof_op);
    if (c->capturing) {
        cudaGraph_t graph = NULL;
        if (cudaStreamEndCapture(c->streams[0], &graph) == cudaSuccess && graph)
            cudaGraphDestroy(graph);
    }
    for (uint32_t s = 0; s < c->n_streams_made; s++) cudaStreamSynchronize(c->streams[s]);
    if (c->exec) cudaGraphExecDestroy(c->exec);
    for (uint32_t i = 0; i < c->n_node_ev; i++) cudaEventDestroy(c->node_ev[i]);
    for (uint32_t s = 0; s < c->n_streams_made; s++) {
        cudaEventDestroy(c->join_ev[s]);
        cudaStreamDestroy(c->streams[s]);
    }
    if (c->fork_ev) cudaEventDestroy(c->fork_ev);
    if (c->scratch_ev) cudaEventDestroy(c->scratch_ev);
    for (uint32_t i = 0; i < c->n_regions; i++) cudaHostUnregister(c->regions[i].host);
    if (c->stage) cudaFreeHost(c->stage);
    if (c->down) cudaFreeHost(c->down);
    for (uint32_t i = 0; i < c->n_host; i++) cudaFreeHost(c->host[i].p);
    (void)cudaGetLastError();
    free(c->host);
    free(c->regions);
    free(c->tiled);
    free(c->checks);
    free(c->writes);
    free(c->node_ev);
    step_unlock(c);
    if (c->counted) {
        pthread_mutex_lock(&g_step_mu);
        if (--g_backends == 0) loom_cuda_release_scratch(); /* nothing of loom's runs */
        pthread_mutex_unlock(&g_step_mu);
    }
    free(c);
    free(b);
}

static const loom_exec_backend_vtable cuda_vtable = {
    .name = "cuda",
    .supports_op = cuda_supports,
    .reserve_node = cuda_reserve_node,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .map_weight = cuda_map_weight,
    .unmap_weight = cuda_unmap_weight,
    .upload = cuda_upload,
    .download = cuda_download,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .map_output = cuda_map_output,
    .unmap_output = cuda_unmap_output,
    .run_node = cuda_run_node,
    .synchronize = cuda_synchronize,
    .destroy = cuda_destroy,
    .begin_step = cuda_begin_step,
    .set_stream = cuda_set_stream,
    .record = cuda_record,
    .end_step = cuda_end_step,
    .zero = cuda_zero,
    .copy_bandwidth = cuda_copy_bandwidth,
    .state_bytes = cuda_state_bytes,
    .replay_step = cuda_replay_step,
};

void loom_cuda_backend_options_init(loom_cuda_backend_options *o) {
    memset(o, 0, sizeof *o);
    o->graphs = -1;
}

static loom_status setup(cuda_backend *c, loom_error *err) {
    int v = 0;
    CK(cudaSetDevice(c->opt.device));
    CK(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->opt.device));
    CK(cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, c->opt.device));
    CK(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->opt.device));
    CK(cudaDeviceGetAttribute(&v, cudaDevAttrIntegrated, c->opt.device));
    c->integrated = v != 0;
    int can_map = 0;
    CK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, c->opt.device));
    c->mapped = c->opt.weights == LOOM_CUDA_WEIGHTS_MAPPED ||
                (c->opt.weights == LOOM_CUDA_WEIGHTS_AUTO && c->integrated);
    if (c->mapped && !can_map)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "cuda backend: device %d cannot map host memory (weights mode mapped)",
                              c->opt.device);
    loom_error l2 = {0};
    if (loom_cuda_apply_l2_fetch(&l2))  /* a hint: the session runs without it */
        fprintf(stderr, "loom cuda: device %d: L2 fetch granularity of %d bytes not set: %s\n",
                c->opt.device, loom_cuda_l2_fetch(), l2.msg);
    CK(cudaStreamCreateWithFlags(&c->streams[0], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&c->join_ev[0], cudaEventDisableTiming));
    c->n_streams_made = 1;
    CK(cudaEventCreateWithFlags(&c->fork_ev, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&c->scratch_ev, cudaEventDisableTiming));
    c->cur = c->streams[0];
    c->step_streams = 1;
    return LOOM_OK;
}

loom_status loom_exec_cuda_backend_create(const loom_cuda_backend_options *o,
                                          loom_exec_backend **out, loom_error *err) {
    *out = NULL;
    loom_cuda_backend_options def;
    loom_cuda_backend_options_init(&def);
    if (!o) o = &def;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "no devices";
        (void)cudaGetLastError();
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "cuda backend: no usable CUDA device (%s); use --backend cpu", why);
    }
    if (o->device < 0 || o->device >= count)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "cuda backend: device %d outside 0..%d", o->device, count - 1);
    loom_exec_backend *b = calloc(1, sizeof *b);
    cuda_backend *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    }
    c->opt = *o;
    b->vt = &cuda_vtable;
    b->impl = c;
    const char *env = getenv("LOOM_CUDA_GRAPHS");
    c->graphs_on = o->graphs == 1 || (o->graphs < 0 && !(env && !strcmp(env, "0")));
    const char *replay = getenv("LOOM_CUDA_GRAPH_REPLAY");
    c->replay_on = !(replay && !strcmp(replay, "0"));
    const char *prof = getenv("LOOM_CUDA_PROFILE");
    c->profile = prof && !strcmp(prof, "1");
    const char *tiles = getenv("LOOM_CUDA_Q4K_TILES");
    /* (mapped weights stay as they are; the other Q4_K kernels read rows faster or only rows) */
    c->tiles_on = !(tiles && !strcmp(tiles, "0")) && loom_cuda_q4k_tiles_preferred();
    const char *q6_tiles = getenv("LOOM_CUDA_Q6K_TILES");
    c->q6_tiles_on = !(q6_tiles && !strcmp(q6_tiles, "0")) && loom_cuda_q6k_tiles_preferred();
    const char *map_out = getenv("LOOM_CUDA_MAPPED_OUTPUTS");
    c->map_outputs = !(map_out && !strcmp(map_out, "0"));
    const char *prenorm = getenv("LOOM_CUDA_PRENORM");
    c->prenorm_off = prenorm && !strcmp(prenorm, "0");
    const char *skip = getenv("LOOM_CUDA_PROFILE_SKIP");
    loom_status st = loom_exec_parse_op_list(skip, "LOOM_CUDA_PROFILE_SKIP", c->skip_op, err);
    if (!st && skip && *skip)
        fprintf(stderr, "loom cuda: LOOM_CUDA_PROFILE_SKIP=%s: decode steps skip these ops "
                        "(timing only: the results are wrong)\n", skip);
    if (!st) st = setup(c, err);
    if (st) {
        cuda_destroy(b);
        return st;
    }
    pthread_mutex_lock(&g_step_mu);
    g_backends++;
    c->counted = true;
    pthread_mutex_unlock(&g_step_mu);
    *out = b;
    return LOOM_OK;
}

bool loom_exec_cuda_backend_info(loom_exec_backend *b, loom_cuda_backend_info *out) {
    memset(out, 0, sizeof *out);
    if (!b || b->vt != &cuda_vtable) return false;
    cuda_backend *c = b->impl;
    out->device = c->opt.device;
    out->cc_major = c->cc_major;
    out->cc_minor = c->cc_minor;
    out->sm_count = c->sm_count;
    out->integrated = c->integrated;
    out->weights_mapped = c->mapped;
    out->kv_int8 = c->opt.kv_int8;
    out->graphs = c->graphs_on && !c->host_fallback;
    out->weight_bytes = c->weight_bytes;
    out->device_bytes = c->device_bytes;
    out->graph_instantiations = c->n_inst;
    out->graph_updates = c->n_update;
    out->graph_launches = c->n_launch;
    out->host_fallback_nodes = c->n_fallback;
    if (cudaMemGetInfo(&out->free_bytes, &out->total_bytes) != cudaSuccess) (void)cudaGetLastError();
    return true;
}
