/* cpu_kernels.h: the CPU reference kernels ("CPU twins") of loom's kernel library.
 *
 * Kernels know nothing of the graph: each is a function over raw pointers, sizes and a plain
 * parameter struct. Every function here has a CUDA twin in kernels/cuda/ with the SAME parameter
 * list plus a trailing `cudaStream_t stream` (pointers then point to device memory; parameter
 * structs and `loom_kweight` are passed from the host as they are). So this header is the
 * numeric contract for both backends; the shapes are in the comments, row-major, innermost last.
 *
 * Uniform conventions
 * - Every kernel returns a loom_status and takes `loom_error *err` (may be NULL) last. Bad
 *   parameters (a negative size, n_head not a multiple of n_kv_head, an unsupported weight type,
 *   a row length that is not a multiple of the type's block size, a token id outside the table)
 *   return LOOM_ERR_INVALID_ARGUMENT or LOOM_ERR_UNSUPPORTED with a message naming the kernel
 *   and the value, and write nothing. Broken internal invariants hit LOOM_ASSERT.
 * - Activations are float32, contiguous. Sizes are int64_t element counts. A size of 0 is a
 *   valid no-op. Outputs never alias inputs unless the comment says "may alias".
 * - Weights are a `loom_kweight`: M rows of K values of one ggml type, each row
 *   loom_ggml_row_bytes(type, K) bytes, rows back to back (exactly a GGUF tensor of ggml shape
 *   [K, M]). Supported weight types: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K. Quantized weights
 *   are dequantized on the fly, a block at a time; no kernel makes a dequantized copy of a matrix.
 * - Accumulation is float32 unless stated. The CPU results are deterministic and independent of
 *   the thread count: every output element is computed by one thread in a fixed order.
 *   CUDA twins match within the tolerance stated per kernel, not bit for bit (their reductions
 *   run in another order), except where "bit-exact" is promised.
 *
 * Threads: matmuls and attention split their output rows over a small persistent pool of
 * pthreads (the calling thread takes part). loom_cpu_set_threads() sets the count; the default
 * is the number of online cores, capped at LOOM_CPU_MAX_THREADS. Kernels called concurrently
 * from several threads stay correct (a call that finds the pool busy runs on its own thread).
 *
 *   loom_kweight w = {.data = bytes, .type = LOOM_GGML_Q4_K, .rows = 2560, .cols = 2560};
 *   loom_error err = {0};
 *   if (loom_cpu_matmul(x, 1, w, y, &err) != LOOM_OK) fprintf(stderr, "%s\n", err.msg);
 */
#ifndef LOOM_KERNELS_CPU_KERNELS_H
#define LOOM_KERNELS_CPU_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/quant/quant.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Shared parameter types (the CUDA twins use the same ones)
 * ------------------------------------------------------------------------------------------- */

/* How a weight's rows are laid out in its bytes. */
typedef enum loom_weight_layout {
    LOOM_WEIGHT_ROWS = 0,      /* rows back to back, as in GGUF (the zero-initialized default) */
    /* CUDA only (the CPU kernels refuse it): Q4_K with rows % 16 == 0, in tiles of 16 rows; tile
     * T holds the same 16 x row_bytes bytes as rows 16T..16T+15 do in LOOM_WEIGHT_ROWS, ordered
     * by block: block j of row 16T + i at byte (16 j + i) x 144 of the tile. The matmul kernels
     * read a block of 16 rows as one 2,304-byte run (loom_cpu_q4k_to_tiles / loom_cuda_q4k_to_tiles
     * make it; bench/NOTES.md 7, session 15). */
    LOOM_WEIGHT_Q4K_TILES = 1,
    /* CUDA only: Q6_K with rows % 16 == 0, in tiles of 16 rows whose 210-byte blocks are padded
     * to LOOM_Q6K_TILE_PITCH bytes (two zero bytes after each): tile T is 16 x nb x 212 bytes,
     * block j of row 16T + i at byte (16 j + i) x 212 of it, so every block is 4-byte aligned
     * and a block of 16 rows is one 3,392-byte run (loom_cpu_q6k_to_tiles /
     * loom_cuda_q6k_to_tiles make it; loom_weight_bytes gives its size; bench/NOTES.md 7,
     * session 18). */
    LOOM_WEIGHT_Q6K_TILES = 2,
} loom_weight_layout;

/* Bytes a Q6_K block takes in LOOM_WEIGHT_Q6K_TILES (210 + 2 zero bytes). */
#define LOOM_Q6K_TILE_PITCH 212

/* A weight matrix W[M, K] (ggml shape [K, M]). Borrowed: the kernel only reads `data`. */
typedef struct loom_kweight {
    const void *data;    /* rows * loom_ggml_row_bytes(type, cols) bytes */
    loom_ggml_type type; /* F32, F16, BF16, Q8_0, Q4_K, Q5_K or Q6_K */
    int64_t rows;        /* M: output features */
    int64_t cols;        /* K: input features, a multiple of the type's block size */
    loom_weight_layout layout; /* LOOM_WEIGHT_ROWS unless made by a *_q4k_to_tiles or
                                * *_q6k_to_tiles */
} loom_kweight;

/* The bytes of a rows x cols weight of `type` in `layout` (rows x the row bytes, but for
 * LOOM_WEIGHT_Q6K_TILES, whose blocks are padded); -1 where cols is not a multiple of the type's
 * block size or the layout does not apply to the type. */
int64_t loom_weight_bytes(loom_ggml_type type, int64_t rows, int64_t cols,
                          loom_weight_layout layout);

/* Epilogue of loom_cpu_matmul_pair. */
typedef enum loom_pair_epilogue {
    LOOM_PAIR_NONE = 0,   /* ya = x·Aᵀ, yb = x·Bᵀ */
    LOOM_PAIR_SWIGLU = 1, /* ya = silu(x·Aᵀ) * (x·Bᵀ); yb unused (may be NULL) */
} loom_pair_epilogue;

/* RoPE modes; values are ggml's. */
typedef enum loom_rope_mode {
    LOOM_ROPE_NORM = 0, /* llama: rotate adjacent pairs (x[2i], x[2i+1]) */
    LOOM_ROPE_NEOX = 2, /* neox/qwen: rotate (x[i], x[i + n_rot/2]) */
} loom_rope_mode;

typedef struct loom_rope_params {
    int64_t n_tokens;    /* T */
    int64_t n_head;      /* heads of q */
    int64_t n_kv_head;   /* heads of k */
    int64_t head_dim;    /* D */
    int64_t n_rot;       /* rotated leading dims of each head: even, 2 <= n_rot <= D */
    loom_rope_mode mode;
    float freq_base;     /* 10000 for llama, 1e6 for qwen2/3 */
    float freq_scale;    /* linear scaling: 1 / rope scaling factor (1.0 = none) */
} loom_rope_params;

/* KV cache element type. */
typedef enum loom_kv_type {
    LOOM_KV_F32 = 0,
    LOOM_KV_F16 = 1,  /* IEEE half bits */
    LOOM_KV_INT8 = 2, /* int8 q with one float scale d per row: value = q * d */
} loom_kv_type;

/* The layout of ONE cache tensor (the K cache or the V cache of one layer):
 *   data   [n_ctx][n_kv_head][head_dim] elements of `type`
 *   scales [n_ctx][n_kv_head] float (LOOM_KV_INT8 only; NULL otherwise)
 * Row (pos, h) starts at element (pos * n_kv_head + h) * head_dim. K and V use the same layout
 * (V is not transposed). A layer's state is a K cache and a V cache of this layout. */
typedef struct loom_kv_layout {
    loom_kv_type type;
    int64_t n_ctx;     /* positions the cache holds */
    int64_t n_kv_head;
    int64_t head_dim;
} loom_kv_layout;

/* Attention over a cache. Query t is at position pos0 + t and sees cache positions
 * 0 .. pos0 + t (causal, inclusive), which must already be written (kv_write first).
 * The IR's kv_write/attention carry a positions array; for the consecutive positions every
 * lowered step has, pos0 = pos[0] (other position sets run one token per call). */
typedef struct loom_attn_params {
    int64_t n_tokens; /* N queries */
    int64_t n_head;   /* query heads, a multiple of the layout's n_kv_head */
    int64_t pos0;     /* position of query 0; pos0 + n_tokens <= n_ctx */
    float scale;      /* score scale, normally 1/sqrt(head_dim) */
    int in_order;     /* CUDA only (the CPU ignores it): 1 = the position or the cache rows below
                       * it may still be written by kernels before this launch on the stream,
                       * so it must not read them early (loom_cuda_attention_at); 0 (the
                       * zero-initialized default) = they were written before those kernels */
} loom_attn_params;

/* ---------------------------------------------------------------------------------------------
 * Threads
 * ------------------------------------------------------------------------------------------- */

enum { LOOM_CPU_MAX_THREADS = 16 };

/* Sets the worker count for later calls: n >= 1 (clamped to LOOM_CPU_MAX_THREADS), or 0 for the
 * default (online cores, capped). Results never depend on it. Not to be called while a kernel
 * runs on another thread. */
void loom_cpu_set_threads(int n);

/* The worker count kernels use now (>= 1). */
int loom_cpu_get_threads(void);

/* The host's copy bandwidth in GB/s (read + write counted, as the CUDA backend's device copy):
 * `bytes` copied by the pool's threads, each its contiguous part, best of 5 after a warm-up
 * (bandwidth.c). Allocates 2 x bytes for the call. Errors: bytes below 1 MiB, out of memory
 * (naming the size). `loom bench` divides a decode step's bytes by it for the CPU roofline. */
loom_status loom_cpu_copy_bandwidth(size_t bytes, double *gbs, loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * Matmul / GEMV family (matmul.c)
 *
 * Numeric contract of one output element y[t, m] = dot(W[m, :], x[t, :]): the row is decoded
 * 256 values at a time (loom_dequantize_row; F32 rows used as they are) and the products are
 * summed in float32 into 8 lanes, element k into lane k % 8 in increasing k, then combined as
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). So y[t, :] does not depend on N, on the
 * thread count, or on which fused variant computed it. CUDA twins: within 1e-5 * (sum_k
 * |W[m,k] x[t,k]|) per element, and (issue 6) the CUDA GEMM per token bit-identical to the CUDA
 * GEMV.
 * ------------------------------------------------------------------------------------------- */

/* y[N, M] = x[N, K] · W[M, K]ᵀ. N = 1 is the GEMV. */
loom_status loom_cpu_matmul(const float *x, int64_t n, loom_kweight w, float *y, loom_error *err);

/* y[N, M] = x[N, K] · W[M, K]ᵀ + residual[N, M], per element (dot) + residual, so it equals
 * loom_cpu_matmul then loom_cpu_add bit for bit. y may alias residual. */
loom_status loom_cpu_matmul_add(const float *x, int64_t n, loom_kweight w, const float *residual,
                                float *y, loom_error *err);

/* Two weights of the same K (any types) on one x[N, K]:
 *   LOOM_PAIR_NONE:   ya[N, Ma] = x·Aᵀ, yb[N, Mb] = x·Bᵀ
 *   LOOM_PAIR_SWIGLU: ya[N, M]  = silu(x·Aᵀ) * (x·Bᵀ), requires Ma == Mb, yb unused (may be NULL);
 *                     equals two matmuls then loom_cpu_swiglu bit for bit. */
loom_status loom_cpu_matmul_pair(const float *x, int64_t n, loom_kweight a, loom_kweight b,
                                 loom_pair_epilogue epilogue, float *ya, float *yb,
                                 loom_error *err);

/* Three weights of the same K, each of its own type (Q, K, V projections), on one x[N, K]:
 *   y[i][N, M_i] = x·W_iᵀ (+ bias[i][M_i] when bias[i] is not NULL), i = 0, 1, 2.
 * bias may be NULL (no biases). Equals three matmuls then loom_cpu_bias_add bit for bit. */
loom_status loom_cpu_matmul_triple(const float *x, int64_t n, const loom_kweight w[3],
                                   const float *const bias[3], float *const y[3],
                                   loom_error *err);

/* The RMSNorm folded into a matmul (the IR's norm feeding a matmul, pair or triple): x is first
 * normalized per token, x' = loom_cpu_rms_norm(x, weight, n, K, eps), then multiplied. */
typedef struct loom_prenorm {
    const float *weight; /* [K] float32, NULL = RMSNorm without weight (device memory on CUDA) */
    float eps;           /* >= 0 */
} loom_prenorm;

/* loom_cpu_matmul / _pair / _triple on the normalized x' above: bit for bit
 * loom_cpu_rms_norm(x, norm->weight, n, K, norm->eps, tmp) followed by the plain call on tmp
 * (K = the weights' row length). norm == NULL: exactly the plain call. x is only read. The CPU
 * forms take n * K floats of scratch for the call (cpu_workspace.h has the allocation-free _ws
 * forms); LOOM_ERR_OUT_OF_MEMORY when it cannot be had. Bad arguments as the plain call's, plus
 * a negative or NaN eps. CUDA twins (one launch a weight type, no separate norm launch): bit for
 * bit loom_cuda_rms_norm followed by the plain CUDA launcher of the same path, but the Q4_K
 * tensor-core kernels, which multiply the finished dots by the norm's scale (cuda_kernels.h). */
loom_status loom_cpu_matmul_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                   loom_kweight w, float *y, loom_error *err);
loom_status loom_cpu_matmul_pair_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                        loom_kweight a, loom_kweight b,
                                        loom_pair_epilogue epilogue, float *ya, float *yb,
                                        loom_error *err);
loom_status loom_cpu_matmul_triple_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                          const loom_kweight w[3], const float *const bias[3],
                                          float *const y[3], loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * Normalization (norm.c)
 * ------------------------------------------------------------------------------------------- */

/* For each of `rows` rows of length d: y = x / sqrt(mean(x²) + eps) [* weight[d]].
 * mean(x²) is accumulated in double (sequential), the scale 1/sqrt(...) rounded to float, then
 * y[i] = (x[i] * scale) * weight[i] in float32. weight may be NULL (plain RMSNorm).
 * The per-head form (Q/K norm of qwen3) is the same call on x[N, H, head_dim] with
 * rows = N * H, d = head_dim and a weight of head_dim values. y may alias x.
 * CUDA twin: within 1e-5 relative per element. */
loom_status loom_cpu_rms_norm(const float *x, const float *weight, int64_t rows, int64_t d,
                              float eps, float *y, loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * RoPE (rope.c)
 * ------------------------------------------------------------------------------------------- */

/* Rotates, in place, q[T, n_head, D] and k[T, n_kv_head, D] (k may be NULL: only q) by the
 * positions pos[T] (int32; device memory on CUDA). As llama.cpp: for pair i in [0, n_rot/2),
 *   theta_i = pos * freq_scale * base^(-2i / n_rot)
 * computed as llama.cpp's CPU backend does, in float32: theta_scale = powf(base, -2.0f / n_rot),
 * t = (float)pos, t *= theta_scale once per pair, theta = freq_scale * t; c = cosf(theta),
 * s = sinf(theta);
 *   NORM: (x[2i], x[2i+1])         -> (x0 c - x1 s, x0 s + x1 c)
 *   NEOX: (x[i], x[i + n_rot/2])   -> (x0 c - x1 s, x0 s + x1 c)
 * Dims n_rot .. D-1 pass through. CUDA twin: within 1e-4 absolute for |pos| < 32768 and |x| <= 1
 * (float sincos of large angles). */
loom_status loom_cpu_rope(float *q, float *k, const int32_t *pos, const loom_rope_params *p,
                          loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * KV cache (kv.c)
 * ------------------------------------------------------------------------------------------- */

/* Writes src[T, n_kv_head, head_dim] into the cache rows of positions pos0 .. pos0 + T - 1
 * (pos0 + T <= n_ctx). Call once for K and once for V. `scales` is the INT8 scale array
 * [n_ctx][n_kv_head] (NULL for F32/F16). Conversions:
 *   F32: copied.  F16: loom_fp32_to_fp16 (round to nearest even).
 *   INT8, per row of head_dim: amax = max |x|; d = amax / 127; id = d ? 1/d : 0;
 *         q = (int8) rintf(x * id) (ties to even, |q| <= 127); scales[row] = d.
 *         Round trip |x - q*d| <= d/2 (+ float rounding). Bit-exact on CUDA. */
loom_status loom_cpu_kv_write(const float *src, int64_t n_tokens, int64_t pos0, void *cache,
                              float *scales, const loom_kv_layout *kv, loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * Attention prologue (rope_kv.c): the IR's rope_kv_write, one call per layer
 * ------------------------------------------------------------------------------------------- */
/* For T = p->n_tokens tokens: q[T, n_head, D], k and v [T, n_kv_head, D] (D = p->head_dim),
 * positions pos[T] (int32; device memory on CUDA, read by the kernel):
 *   with q_norm, k_norm (float [D] each, both or neither): q' = rms_norm(q) * q_norm and
 *   k' = rms_norm(k) * k_norm per head (loom_cpu_rms_norm's contract, eps); else q' = q, k' = k;
 *   q_out = rope(q'), k'' = rope(k') (loom_cpu_rope's contract, p's mode, n_rot, freq_base,
 *   freq_scale); k'' into k_cache and v into v_cache at cache position pos[t] for token t
 *   (loom_cpu_kv_write's conversions; k_scales/v_scales the INT8 scale arrays, else NULL).
 * p->n_kv_head and p->head_dim must equal the layout's; pos need not be consecutive. k and v are
 * only read; q_out may alias q. The CPU twin is bit for bit the chain of loom_cpu_rms_norm,
 * loom_cpu_rope and loom_cpu_kv_write (which it calls), and refuses a position outside
 * 0 .. n_ctx - 1 (LOOM_ERR_LIMIT) before writing anything. CUDA twin: one launch whose grid does
 * not depend on the positions (CUDA-graph replay); a token whose position is out of range writes
 * no cache row. Tolerances (rope_kv.cu): q_out and the K cache as rope's (1e-4 absolute of the
 * largest |value|, plus one F16 rounding / one INT8 step); the V cache bit-exact. */
loom_status loom_cpu_rope_kv_write(const float *q, const float *k, const float *v,
                                   const int32_t *pos, const float *q_norm, const float *k_norm,
                                   float eps, const loom_rope_params *p, void *k_cache,
                                   float *k_scales, void *v_cache, float *v_scales,
                                   const loom_kv_layout *kv, float *q_out, loom_error *err);
/* ---------------------------------------------------------------------------------------------
 * Attention (attention.c)
 * ------------------------------------------------------------------------------------------- */

/* Causal GQA attention of q[N, n_head, D] over one layer's cache (k_cache/v_cache of layout kv,
 * k_scales/v_scales for INT8, NULL otherwise), writing out[N, n_head, D]. Head h reads KV head
 * h / (n_head / n_kv_head). For query t (position p = pos0 + t), j = 0 .. p:
 *   s_j = scale * sum_i q[i] * K[j, i]  (float32 sum in i order; K decoded to float first:
 *                                        f16 -> f32, int8 -> (float)q * d)
 *   m = max s_j; e_j = expf(s_j - m); Z = sum_j e_j (float32, j order)
 *   out[i] = (sum_j e_j * V[j, i]) / Z  (float32, j order)
 * Covers decode (N = 1) and batched prefill. CUDA twin (online softmax): within 1e-4 of the
 * output's max |value| for F32/F16 caches. */
loom_status loom_cpu_attention(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p, float *out,
                               loom_error *err);

/* ---------------------------------------------------------------------------------------------
 * Elementwise, embedding, softmax, argmax, conversions (elementwise.c, embed.c, softmax.c)
 * y may alias an input in every elementwise kernel here (not in the F16 conversions).
 * ------------------------------------------------------------------------------------------- */

/* silu(x) = x / (1 + expf(-x)), in float32; the one definition every fused epilogue uses. */
static inline float loom_silu(float x) { return x / (1.0f + expf(-x)); }

/* y[n] = a[n] + b[n]. */
loom_status loom_cpu_add(const float *a, const float *b, int64_t n, float *y, loom_error *err);

/* y[n] = a[n] * b[n]. */
loom_status loom_cpu_mul(const float *a, const float *b, int64_t n, float *y, loom_error *err);

/* y[n] = silu(x[n]). */
loom_status loom_cpu_silu(const float *x, int64_t n, float *y, loom_error *err);

/* y[n] = silu(gate[n]) * up[n]. */
loom_status loom_cpu_swiglu(const float *gate, const float *up, int64_t n, float *y,
                            loom_error *err);

/* Broadcast forms (the IR's add/mul, whose b repeats over a's leading dims):
 * y[i] = a[i] + b[i % nb] (resp. *), i in [0, n), n a multiple of nb (nb >= 1 when n > 0).
 * With nb == n they are loom_cpu_add / loom_cpu_mul; with nb = M over [rows, M] the bias add;
 * mul by a [D] weight over [rows, D] is the unfused RMSNorm weight. Bit-identical to those. */
loom_status loom_cpu_add_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                               loom_error *err);
loom_status loom_cpu_mul_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                               loom_error *err);

/* y[rows, m] += bias[m] (in place). */
loom_status loom_cpu_bias_add(float *y, const float *bias, int64_t rows, int64_t m,
                              loom_error *err);

/* out[N, D] = table row ids[t] decoded to float32 (table: rows = vocab, cols = D, any weight
 * type above). An id outside [0, rows) is LOOM_ERR_INVALID_ARGUMENT on the CPU (the CUDA twin
 * cannot report it synchronously: it writes zeros for such a row). Bit-exact on CUDA. */
loom_status loom_cpu_embed(loom_kweight table, const int32_t *ids, int64_t n_tokens, float *out,
                           loom_error *err);

/* dst = src (a Q4_K weight in LOOM_WEIGHT_ROWS, rows a multiple of 16) in LOOM_WEIGHT_Q4K_TILES:
 * the same rows * row_bytes bytes, each 144-byte block moved, none changed. dst must not
 * overlap src. Bit-exact on CUDA. */
loom_status loom_cpu_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err);

/* dst = src (a Q6_K weight in LOOM_WEIGHT_ROWS, rows a multiple of 16) in LOOM_WEIGHT_Q6K_TILES:
 * loom_weight_bytes(..., LOOM_WEIGHT_Q6K_TILES) bytes, each 210-byte block moved and followed by
 * two zero bytes, none changed. dst must not overlap src. Bit-exact on CUDA. */
loom_status loom_cpu_q6k_to_tiles(loom_kweight src, void *dst, loom_error *err);

/* Softmax of each of `rows` rows of n (vocab-sized) values: m = max, e = expf(x - m),
 * y = e / Z with Z summed in double. y may alias x. */
loom_status loom_cpu_softmax(const float *x, int64_t rows, int64_t n, float *y,
                             loom_error *err);

/* out[r] = index of the largest value of row r of x[rows, n] (the first one on ties; NaNs are
 * ignored; a row of only NaNs gives 0). Bit-exact on CUDA. */
loom_status loom_cpu_argmax(const float *x, int64_t rows, int64_t n, int32_t *out,
                            loom_error *err);

/* IEEE half <-> float over n values (round to nearest even). Bit-exact on CUDA. src and dst
 * must not overlap. */
loom_status loom_cpu_f16_to_f32(const uint16_t *src, int64_t n, float *dst, loom_error *err);
loom_status loom_cpu_f32_to_f16(const float *src, int64_t n, uint16_t *dst, loom_error *err);

/* The IR's convert: n values of src_type into dst_type, types F32, F16, BF16 and I32.
 * Floats convert with round to nearest even (loom_fp32_to_fp16 / loom_fp32_to_bf16); F16/BF16
 * to F32 exactly; I32 -> float as (float)v (nearest); float -> I32 truncates toward zero,
 * saturating at INT32_MIN/MAX, NaN -> 0. Same type: a copy. src and dst must not overlap
 * unless they are the same pointer with types of the same size. Bit-exact on CUDA. */
loom_status loom_cpu_convert(const void *src, loom_ggml_type src_type, void *dst,
                             loom_ggml_type dst_type, int64_t n, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_KERNELS_CPU_KERNELS_H */
