/* cuda_kernels.h: the CUDA kernels of loom, the device twins of kernels/cpu/cpu_kernels.h.
 *
 * Every launcher here has EXACTLY the parameter list of its CPU twin plus a trailing
 * `cudaStream_t stream`; pointers point to device memory, parameter structs (loom_kweight,
 * loom_rope_params, loom_kv_layout, loom_attn_params) are passed from the host as they are (a
 * loom_kweight's `data` is a device pointer). The numeric contract of each kernel is the CPU
 * twin's, with the tolerance stated in the .cu file that implements it (cpu_kernels.h gives the
 * same figures). Launchers are asynchronous: they validate their parameters on the host, enqueue
 * the work on `stream` and return. A bad parameter gives LOOM_ERR_INVALID_ARGUMENT /
 * LOOM_ERR_UNSUPPORTED and enqueues nothing; a failed CUDA call gives LOOM_ERR_CUDA with the
 * statement, function, file and line in err->msg.
 *
 * Plain C can include this header: cudaStream_t is forward-declared as the runtime declares it.
 * Link the static CUDA runtime (the `//kernels/cuda:cuda` target does).
 *
 * Fast paths (read once per process from the environment; `=0` selects the simple path):
 *   LOOM_FAST_GEMV        matmul family: kernels specialized per weight type, several passes
 *                         prefetched (simple: generic kernel, one pass at a time, byte loads;
 *                         bit-identical results)
 *   LOOM_Q4K_UINT32_LOADS Q4_K / Q5_K quants as 32-bit word loads (simple: byte loads,
 *                         bit-identical results)
 *   LOOM_FAST_EMBD        embedding: one warp per 256-value block (simple: a thread per value)
 *   LOOM_FAST_NORM        RMSNorm: float4 loads (simple: scalar)
 *   LOOM_FAST_ATTN        attention: GQA groups per block + split-KV (simple: a block per head,
 *                         v3's kernel; v4's for head_dim 80/96/256). The fast path: v5 for
 *                         F16/INT8 caches of head_dim 64/128 (the v4 blocks on tensor cores,
 *                         f16 hi + lo operands, on sm_90 the decode splits combined over a
 *                         cluster's shared memory), v4 for the others (cp.async double
 *                         buffering, combine folded into the last block). LOOM_ATTN_BPSM=1..16:
 *                         blocks per SM the split choice of v4 and v5 aims at (1).
 *                         LOOM_ATTN_V4=0 (v3 as a fast path) and LOOM_ATTN_V5=0 (v4 instead of
 *                         v5), both slower in every row, were removed in session 11: they are
 *                         no longer read
 *   LOOM_ATTN_V6          decode attention on sm_90 (F16/INT8, head_dim 64/128): the v5
 *                         kernel with each warp walking whole 32-row tiles in its own cp.async
 *                         stages (no block barrier a tile); =0: v5's loop (all four warps on
 *                         every tile). Not bit-identical to v5 (within the CPU-twin tolerance).
 *                         LOOM_ATTN_CL_TILES=N: caches of <= N 32-row tiles combine their
 *                         splits in one cluster (128). LOOM_ATTN_PREFETCH=1 (an L2 prefetch
 *                         of a block's rows before the PDL wait, opt-in, slower in the
 *                         decode-layer graph, bench/NOTES.md 3) was removed in session 11: it
 *                         is no longer read, so every value gets the default (no prefetch)
 *   LOOM_ATTN_PREFILL     =1: prefill attention (N > 1; F16/INT8, head_dim 64/128, a GQA
 *                         group dividing 64) by attention_prefill.cu's tensor-core kernel:
 *                         blocks of one KV head x 64 query rows copy each K/V tile once, no
 *                         split; =2 (sm_90; sm_87 runs 1): 8 warps a block, warps 4-7 on the
 *                         second half of each 64-row stage, the halves met at the end; =0:
 *                         the v5 path (a block a token). Default 1. Other bits than 0, the same
 *                         CPU-twin tolerance; decode (N = 1) is the same whatever the value
 *   LOOM_GEMV_V8          removed in session 11 (=0 was v7's Q4_K/Q5_K scale decode in the
 *                         warp-per-row kernels: the same bits, slower; bench/NOTES.md 2 v8):
 *                         no longer read, every value gets the default (v8's decode)
 *   LOOM_GEMV_UNROLL      warp-per-row GEMV passes in flight: 1, 2 or 4 (default by type)
 *   LOOM_GEMV_MMA         matmul family on tensor cores for Q4_K weights (gemv_mma.cu; GEMV
 *                         and GEMM, all epilogues); =0: the warp-per-row kernels above. NOT
 *                         bit-identical to them (both within the same CPU-twin tolerance).
 *                         LOOM_GEMV_MMA_SPLIT=1|2|4|8 forces the sm_90 cluster split-K of
 *                         both tensor-core paths (Q4_K and Q6_K)
 *                         (default: by shape; results depend on it, deterministically)
 *                         LOOM_GEMV_PAIR_WARPS=3|4 forces the warps a block of the Q4_K
 *                         pair GEMV (gate and up, with or without SwiGLU; n = 1); default by
 *                         shape: 3 where 5 blocks of 3 warps an SM hold the whole grid and 4
 *                         of 4 do not (the 4B pair on the H200; launched in order, without
 *                         PDL). The same bits either way
 *   LOOM_GEMV_MMA_Q6K     Q6_K matmuls (plain, add, a triple's Q6_K segment; GEMV and GEMM)
 *                         on tensor cores (gemv_mma_q6k.cu); =0: warp-per-row (LOOM_GEMV_MMA=0
 *                         turns both mma paths off). LOOM_GEMV_MMA_Q6K_V=1: the f16 loop
 *                         body (x staged as adjacent B register pairs); =2: the INT8 body
 *                         (q6k_i8_body.cuh: q as u8, x as 4 int8 limbs; other bits, same
 *                         tolerance; the default; a triple's Q6_K segments in rows keep the f16
 *                         body, GEMV and GEMM, below 64 tokens; in tiles they take INT8). 0 (session 3's f16 loop order, measured slower) was
 *                         removed in session 11: it, like any value but 1 and 2, selects the
 *                         default.
 *                         LOOM_GEMV_MMA_Q4K_V: the Q4_K body, 1 the f16 hi + lo body, 2
 *                         (default) INT8 (q4k_i8_body.cuh: other bits, same tolerance; every
 *                         Q4_K mma matmul, GEMM token == GEMV bits)
 *   LOOM_GEMV_MMA_Q8      Q8_0 matmuls (plain, add, SwiGLU pair, triple; GEMV and GEMM) on the
 *                         INT8 tensor cores (gemv_mma_q8.cu): the Q8_0 segments of a call with
 *                         K % 256 == 0, in a launch of their own; =0: warp-per-row (LOOM_GEMV_MMA=0 turns every
 *                         mma path off). Not bit-identical to them (same tolerance)
 *   LOOM_GEMV_TRIPLE_MIXED a GEMV (n = 1) with Q4_K and Q6_K segments (the Q4_K_M QKV
 *                         triple) in one launch (gemv_mma.cu's mixed kernel; the default, 1)
 *                         instead of the Q4_K and the Q6_K launch (=0); bit-identical
 *                         (bench/NOTES.md 2.3). =2 / =3: its Q6_K tiles forced last / first
 *   LOOM_GEMV_PERSIST     =0: a Q6_K GEMV (INT8 body, n = 1, no split, no folded norm) of more
 *                         than 16 tiles an SM (the lm head) in one-tile blocks instead of the
 *                         default persistent blocks walking the tiles; bit-identical
 *   LOOM_GEMM_WIDE        the prefill GEMMs (Q4_K f16 body: gemv_mma.cu; Q6_K INT8: q6k_i8_wide.cuh;
 *                         Q8_0: gemv_mma_q8.cu):
 *                         =1: the wide kernel (each weight tile decoded once for 32 tokens,
 *                         x staged once for 4 tiles) from 16 tokens on (Q6_K: 64; the INT8
 *                         Q4_K one where its blocks number at least 0.4 x the SMs); =n
 *                         (n >= 2): from n tokens on; 0: the GEMM in groups of 8 tokens.
 *                         Default 1. Same bits either way (GEMM token == GEMV); the GEMV
 *                         (n = 1) never changes. With LOOM_GEMV_MMA_Q4K_V=2 the Q4_K wide
 *                         kernel is the INT8 one (gemm_wide_q4k_i8: token == the V = 2 GEMV).
 *   LOOM_GEMM_WIDE_Q4K_I8 that INT8 wide kernel's form (same bits): 5 (default) reading x's
 *                         int8 limbs and limb sums staged once a matmul by a pre-pass into the
 *                         kernel scratch (bench/NOTES.md 2.4, session 11); 4: each block stages
 *                         x itself, as 5 does where the scratch cannot grow. 1, 2 and 3
 *                         (measured slower) were removed in sessions 10-11: they, like any
 *                         value but 4 and 5, select the default.
 *   LOOM_GEMM_WIDE_Q6K    the wide Q6_K kernel's form (same bits): 7 (default) the token-pair
 *                         body reading x's int8 limbs staged once a matmul by a pre-pass into
 *                         the kernel scratch, 32-token blocks where they fill the GPU, else 16;
 *                         5 / 6: the same at 16 / 32 tokens; 2 / 3 / 4: 5 / 6 / 7 staging x in
 *                         each block (bench/NOTES.md 2.1, session 9). 1 (session 8's kernel,
 *                         measured slower) was removed in session 10: it, like any value
 *                         outside 2..7, selects the default.
 *   LOOM_GEMM_WIDE_Q8     the wide Q8_0 kernel's x staging (same bits): 2 (default) reading x's
 *                         int8 limbs staged once a matmul by a pre-pass into the kernel scratch
 *                         (bench/NOTES.md 2.8, session 36); 1: each block stages x itself, as 2
 *                         does where the scratch cannot grow.
 *   LOOM_CUDA_PDL         programmatic dependent launch (compute capability 9.0+): a kernel
 *                         may start during the previous one's tail and waits for it in-kernel
 *                         (common.cuh); on by default, =0: plain stream order. Same results
 *                         either way.
 *   LOOM_CUDA_CARVEOUT    the shared-memory carveout every kernel prefers, in percent of the
 *                         SM's maximum (cudaFuncAttributePreferredSharedMemoryCarveout), set on
 *                         each kernel before its launch; -1: the driver's choice a kernel.
 *                         Default 78 on compute capability 9.x (one carveout for the whole decode
 *                         step, so the next kernel's blocks become resident beside the previous
 *                         one's tail instead of waiting for the SM to drain and be reconfigured:
 *                         4B decode -0.8..-1.1%, bench/NOTES.md 7 session 20), -1 elsewhere (not
 *                         measured). Same results either way.
 *   LOOM_CUDA_L2_FETCH    the L2's fetch granularity from DRAM in bytes (0..128; the device
 *                         limit cudaLimitMaxL2FetchGranularity, a hint the platform may clamp),
 *                         applied to the current device by loom_cuda_apply_l2_fetch (the CUDA
 *                         backend calls it at setup); -1: the driver's choice. Default 128 on
 *                         compute capability 9.x, where the driver's 64 costs the 4B decode step
 *                         0.9-1.6% (bench/NOTES.md 7 session 24); -1 elsewhere (not measured).
 *                         Same results either way.
 *   LOOM_ROPE_KV_REG      removed in session 11 (=0 forced rope_kv_write's strided loops for
 *                         head_dim <= 256 too: the same results, no measured difference): no
 *                         longer read; head_dim <= 256 always takes the register path.
 *   LOOM_ATTN_FUSED       loom_cuda_rope_kv_attention_at as one launch (the prologue folded
 *                         into decode attention v6, sm_90; faster in the 4B decode step,
 *                         bench/NOTES.md 7.10); =0: rope_kv_write + attention_at. Same results
 *                         (bit for bit).
 * When a fast path's launch fails, the launcher logs once on stderr and runs the simple path.
 *
 *   loom_kweight w = {.data = d_w, .type = LOOM_GGML_Q4_K, .rows = 2560, .cols = 2560};
 *   loom_error err = {0};
 *   if (loom_cuda_matmul(d_x, 1, w, d_y, &err, stream) != LOOM_OK) fprintf(stderr, "%s\n", err.msg);
 */
#ifndef LOOM_KERNELS_CUDA_KERNELS_H
#define LOOM_KERNELS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_kernels.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's stream handle, declared as cuda_runtime_api.h declares it. */
typedef struct CUstream_st *cudaStream_t;

/* ---- matmul family (gemv_mma.cu: Q4_K, any N; else gemv.cu for N = 1, gemm.cu by 32) ---- */
/* Read-only operands: every loom_kweight's data (and, in gemv.cu / gemm.cu, a prenorm's weight)
 * is read through the non-coherent read-only path (__ldg, ld.global.nc), weights also before the
 * kernel's PDL wait (common.cuh, pdl_on). Both must stay unwritten while any kernel of the
 * program runs (uploaded or laid out before the first step), never a buffer a kernel of the
 * same step writes. x, the residual, the biases and the outputs are read and written by
 * coherent accesses after the wait. tools/gpu/nc_audit.py lists every non-coherent load of the
 * built kernels and the parameter it reads. */
loom_status loom_cuda_matmul(const float *x, int64_t n, loom_kweight w, float *y, loom_error *err,
                             cudaStream_t stream);
loom_status loom_cuda_matmul_add(const float *x, int64_t n, loom_kweight w, const float *residual,
                                 float *y, loom_error *err, cudaStream_t stream);
loom_status loom_cuda_matmul_pair(const float *x, int64_t n, loom_kweight a, loom_kweight b,
                                  loom_pair_epilogue epilogue, float *ya, float *yb,
                                  loom_error *err, cudaStream_t stream);
loom_status loom_cuda_matmul_triple(const float *x, int64_t n, const loom_kweight w[3],
                                    const float *const bias[3], float *const y[3],
                                    loom_error *err, cudaStream_t stream);
/* The same with the RMSNorm of x folded in (loom_prenorm and the contract: cpu_kernels.h; norm is
 * a host pointer, norm->weight device memory; NULL norm = the plain launcher), no norm launch.
 * Each token's scale has the bits of loom_cuda_rms_norm's. Outputs of Q4_K and Q5_K weights on
 * the tensor cores (loom_cuda_normed_scale_last) are scale * (W (x * norm->weight)): the scale
 * multiplies the finished dot, so a GEMV block needs it only at its store (kernels/cuda/norm.cuh),
 * within the family's tolerance of the unfused pair of launches, and a GEMM token gives the GEMV's
 * bits. Every other output is bit for bit loom_cuda_rms_norm(x, norm->weight, n, K, norm->eps,
 * tmp) followed by the plain launcher on tmp, path by path (x normalized as it is staged).
 * Cost: every block recomputes its tokens' scales (K floats a token from L2), so the fold pays
 * for decode (n = 1) matmuls of moderate grids (the 4B pair and triple: -1..2 us a norm in a
 * graph) and loses for very large grids (the 4B lm head: +20 us) and n > 1 (prefill: the GEMM
 * blocks reduce 8 tokens each); there a separate norm is faster (bench/NOTES.md 7.6). */
loom_status loom_cuda_matmul_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                    loom_kweight w, float *y, loom_error *err,
                                    cudaStream_t stream);
loom_status loom_cuda_matmul_pair_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                         loom_kweight a, loom_kweight b,
                                         loom_pair_epilogue epilogue, float *ya, float *yb,
                                         loom_error *err, cudaStream_t stream);
loom_status loom_cuda_matmul_triple_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                           const loom_kweight w[3], const float *const bias[3],
                                           float *const y[3], loom_error *err,
                                           cudaStream_t stream);

/* ---- normalization, RoPE, KV cache ---------------------------------------------------------- */
loom_status loom_cuda_rms_norm(const float *x, const float *weight, int64_t rows, int64_t d,
                               float eps, float *y, loom_error *err, cudaStream_t stream);
loom_status loom_cuda_rope(float *q, float *k, const int32_t *pos, const loom_rope_params *p,
                           loom_error *err, cudaStream_t stream);
loom_status loom_cuda_kv_write(const float *src, int64_t n_tokens, int64_t pos0, void *cache,
                               float *scales, const loom_kv_layout *kv, loom_error *err,
                               cudaStream_t stream);
/* CUDA only (no CPU twin): loom_cuda_kv_write with the position of token 0 read by the kernel
 * from DEVICE memory (*d_pos0, int32), so one captured CUDA graph serves every decode step
 * (update *d_pos0 between replays). The launch does not depend on the position. Token t goes to
 * position *d_pos0 + t when that lies in 0 .. n_ctx - 1; other tokens are skipped (nothing is
 * written; the host cannot see the position to refuse it). Bit-identical to loom_cuda_kv_write
 * at the same position. */
loom_status loom_cuda_kv_write_at(const float *src, int64_t n_tokens, const int32_t *d_pos0,
                                  void *cache, float *scales, const loom_kv_layout *kv,
                                  loom_error *err, cudaStream_t stream);

/* The largest head_dim loom_cuda_rope_kv_write takes (a block stages 4 rows in shared memory). */
#define LOOM_CUDA_ROPE_KV_MAX_HEAD_DIM 2048

/* The attention prologue of one layer in one launch (rope_kv.cu; CPU twin and contract in
 * cpu_kernels.h). The positions pos[T] are read by the kernel from device memory and the grid
 * depends on T and the head counts only, so a captured graph replays at any position. */
loom_status loom_cuda_rope_kv_write(const float *q, const float *k, const float *v,
                                    const int32_t *pos, const float *q_norm, const float *k_norm,
                                    float eps, const loom_rope_params *p, void *k_cache,
                                    float *k_scales, void *v_cache, float *v_scales,
                                    const loom_kv_layout *kv, float *q_out, loom_error *err,
                                    cudaStream_t stream);

/* Decode (one token, ap->n_tokens == 1) attention prologue + attention of one layer. Same cache
 * bytes and the same out bits as loom_cuda_rope_kv_write(q, k, v, d_pos, q_norm, k_norm, eps, rp,
 * caches, kv, q_tmp) followed by loom_cuda_attention_at(q_tmp, caches, kv, ap, d_pos, out): in
 * one launch where the fused kernel exists (sm_90, attention v6 shapes; LOOM_ATTN_FUSED=0: never),
 * otherwise as exactly those two launches (q_tmp: n_head * head_dim floats of device
 * memory the caller provides; the fused kernel does not touch it). q_norm / k_norm may be NULL
 * (no head norms), as for loom_cuda_rope_kv_write. Graph-capturable like loom_cuda_attention_at
 * (position read from device memory *d_pos). CUDA only (rope_kv.cu; no CPU twin: the CPU runs
 * loom_cpu_rope_kv_write + loom_cpu_attention). */
loom_status loom_cuda_rope_kv_attention_at(const float *q, const float *k, const float *v,
                                           const int32_t *d_pos, const float *q_norm,
                                           const float *k_norm, float eps,
                                           const loom_rope_params *rp, void *k_cache,
                                           float *k_scales, void *v_cache, float *v_scales,
                                           const loom_kv_layout *kv, const loom_attn_params *ap,
                                           float *q_tmp, float *out, loom_error *err,
                                           cudaStream_t stream);

/* ---- attention (attention.cu): decode (N = 1) with split-KV, and batched causal prefill ---- */
/* head_dim 64, 80, 96, 128, 256 with F16/INT8 caches (64 and 128 with F32). The split-KV
 * partials live in the scratch and the split counters in the module, both shared: like the
 * scratch, attention serves one stream at a time (two attention launches must not overlap).
 * Early reads (decode on sm_90, v6; also loom_cuda_rope_kv_attention_at): unless
 * p->in_order, the kernel is launched with programmatic dependent launch and reads the
 * position (*d_pos0) and the cache rows below it BEFORE the kernel just before it on the
 * stream has finished (its KV tiles stream under that kernel's tail); the row at the position
 * and everything else is read after. So every write to the position or to the rows below it
 * must be complete before the previous kernel of the stream started: made by a copy, or
 * separated from this launch by a copy, a host synchronization, a graph launch or an event
 * wait. Otherwise set p->in_order (launched in order: no early read). */
loom_status loom_cuda_attention(const float *q, const void *k_cache, const float *k_scales,
                                const void *v_cache, const float *v_scales,
                                const loom_kv_layout *kv, const loom_attn_params *p, float *out,
                                loom_error *err, cudaStream_t stream);
/* CUDA only: loom_cuda_attention with the position of query 0 read by the kernels from DEVICE
 * memory (*d_pos0, int32; p->pos0 is ignored). The grid and the scratch are sized from
 * kv->n_ctx, never from the position, and nothing is read back to the host, so the launch can
 * be captured once in a CUDA graph and replayed at any position. A device position outside
 * 0 .. n_ctx - n_tokens is clamped into that range (reads stay inside the cache). Results are
 * bit-identical to loom_cuda_attention at the same position (same split partition; reserve
 * loom_cuda_scratch_bytes_for before capturing, or a capture without scratch runs unsplit). */
loom_status loom_cuda_attention_at(const float *q, const void *k_cache, const float *k_scales,
                                   const void *v_cache, const float *v_scales,
                                   const loom_kv_layout *kv, const loom_attn_params *p,
                                   const int32_t *d_pos0, float *out, loom_error *err,
                                   cudaStream_t stream);

/* Whether the attention launchers run head_dim with a cache of `type` on the device (64 and 128
 * always; 80, 96 and 256 with F16/INT8 caches); otherwise they refuse with LOOM_ERR_UNSUPPORTED. */
bool loom_cuda_attention_supports(int64_t head_dim, loom_kv_type type);

/* Bench/debug only, not thread-safe: with mode >= 0, every later decode attention v5 launch of
 * head_dim 128 with 4 query heads a block (the 32/8 x 128 shape) runs a traced kernel that
 * writes a record of 16 uint64 words a block into launch slot k (k = 0, 1, ... counting
 * launches since the call, modulo 32; records [32 slots][256 blocks][16]; block index x +
 * gridDim.x (y + gridDim.y z)): 0 %globaltimer at entry, 1 after the PDL wait, 2 clock64 at entry,
 * 3 after the PDL wait, 4 after the first stages were issued, 5 after q's fragments, 6 after the
 * first tile's wait, 7 after the last tile, 8 after the warps' sums met, 9 after the combine's
 * counter or the first cluster barrier (bit 63: the last block), 10 clock64 and 11 %globaltimer
 * at exit, 12 smid | splits used << 32, 13 tiles | stages << 32. Mode bits (timing experiments,
 * results wrong): 1 no math, 2 no loads, 4 no split combine. mode >= 0 also zeroes the records
 * (synchronously); mode < 0 turns tracing off. */
loom_status loom_cuda_attention_trace(int mode, loom_error *err);
/* Copies the first n_words words of the trace records to host memory `out`. */
loom_status loom_cuda_attention_trace_read(uint64_t *out, size_t n_words, loom_error *err);

/* Bench/debug only, not thread-safe: with on != 0 (which also zeroes the records, synchronously),
 * every later tensor-core GEMV launch on the INT8 Q4_K body (one matrix, the pair, the normed
 * mixed Q4_K_M triple; gemv_mma.cu) and on the Q6_K INT8 body (gemv_mma_q6k.cu) runs a traced
 * kernel that writes a record of 16 uint64 words a block into launch slot k (k = 0, 1, ...
 * counting traced launches since the call, modulo 32; records [32 slots][1024 blocks][16]; block
 * index x + gridDim.x (y + gridDim.y z)): 0 %globaltimer at entry, 1 after the PDL wait, 2 clock64
 * at entry, 3 after the PDL wait, 4 after the norm scales (or at 3's point), 5 after the first
 * super-block's x staging, 6 after its math, 7 at the end of warp 0's K loop, 8 after the warps'
 * sum, 9 after the cluster's, 10 clock64 and 11 %globaltimer at the block's end (after the store
 * for rank 0), 12 smid | split S << 16 | kind << 24 (1 Q4_K, 2 the Q4_K pair, 3 Q6_K, 4 the mixed
 * triple's Q6_K tiles: words 0, 2, 10-12 only) | warp 0's super-blocks << 32 | super-blocks a row
 * << 48, 13..15 the ends of warps 1..3's loops (clock64). on == 0 turns tracing off. */
loom_status loom_cuda_gemv_trace(int on, loom_error *err);
/* Copies the first n_words words of the GEMV trace records to host memory `out`. */
loom_status loom_cuda_gemv_trace_read(uint64_t *out, size_t n_words, loom_error *err);

/* ---- elementwise, embedding, softmax, argmax, conversions ---------------------------------- */
loom_status loom_cuda_add(const float *a, const float *b, int64_t n, float *y, loom_error *err,
                          cudaStream_t stream);
loom_status loom_cuda_mul(const float *a, const float *b, int64_t n, float *y, loom_error *err,
                          cudaStream_t stream);
loom_status loom_cuda_silu(const float *x, int64_t n, float *y, loom_error *err,
                           cudaStream_t stream);
loom_status loom_cuda_swiglu(const float *gate, const float *up, int64_t n, float *y,
                             loom_error *err, cudaStream_t stream);
loom_status loom_cuda_bias_add(float *y, const float *bias, int64_t rows, int64_t m,
                               loom_error *err, cudaStream_t stream);
loom_status loom_cuda_add_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                                loom_error *err, cudaStream_t stream);
loom_status loom_cuda_mul_bcast(const float *a, int64_t n, const float *b, int64_t nb, float *y,
                                loom_error *err, cudaStream_t stream);
/* The CPU twin's layout change (cpu_kernels.h loom_cpu_q4k_to_tiles): src and dst device
 * memory, 16-byte aligned, not overlapping (layout.cu). */
loom_status loom_cuda_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err,
                                   cudaStream_t stream);
/* Whether Q4_K matmul weights are best given in LOOM_WEIGHT_Q4K_TILES under the switches as read:
 * true where the INT8 tensor-core kernels run the Q4_K matmuls (LOOM_FAST_GEMV and LOOM_GEMV_MMA
 * not 0, LOOM_GEMV_MMA_Q4K_V the default 2; tiles always take that body). The warp-per-row
 * kernels read tiles too, but slower than rows (H200: the 4B Q4_K GEMV 13.4 -> 14.7 us,
 * bench/RESULTS.md session 15). */
bool loom_cuda_q4k_tiles_preferred(void);
/* The CPU twin's layout change (cpu_kernels.h loom_cpu_q6k_to_tiles): src and dst device
 * memory, 4-byte aligned, not overlapping; dst holds loom_weight_bytes(Q6_K, rows, cols,
 * LOOM_WEIGHT_Q6K_TILES) bytes (layout.cu). */
loom_status loom_cuda_q6k_to_tiles(loom_kweight src, void *dst, loom_error *err,
                                   cudaStream_t stream);
/* Whether Q6_K matmul weights are best given in LOOM_WEIGHT_Q6K_TILES under the switches as read:
 * true where the INT8 tensor-core kernels run the Q6_K matmuls (LOOM_FAST_GEMV, LOOM_GEMV_MMA and
 * LOOM_GEMV_MMA_Q6K not 0, LOOM_GEMV_MMA_Q6K_V the default 2; tiles always take that body, also
 * a triple's V, whose rows run the f16 body below 64 tokens; the one-launch Q4_K_M triple runs a
 * tiled V only beside Q4_K tiles). */
bool loom_cuda_q6k_tiles_preferred(void);
/* Whether the _normed launchers apply the RMS scale to the finished dots of Q4_K and Q5_K
 * weights (the tensor-core kernels: LOOM_FAST_GEMV and LOOM_GEMV_MMA not 0) under the switches
 * as read; false: every output is bit for bit the norm launcher + the plain launcher. */
bool loom_cuda_normed_scale_last(void);
loom_status loom_cuda_embed(loom_kweight table, const int32_t *ids, int64_t n_tokens, float *out,
                            loom_error *err, cudaStream_t stream);
loom_status loom_cuda_softmax(const float *x, int64_t rows, int64_t n, float *y, loom_error *err,
                              cudaStream_t stream);
loom_status loom_cuda_argmax(const float *x, int64_t rows, int64_t n, int32_t *out,
                             loom_error *err, cudaStream_t stream);
loom_status loom_cuda_f16_to_f32(const uint16_t *src, int64_t n, float *dst, loom_error *err,
                                 cudaStream_t stream);
loom_status loom_cuda_f32_to_f16(const float *src, int64_t n, uint16_t *dst, loom_error *err,
                                 cudaStream_t stream);

/* ---- module services (runtime.cu) ----------------------------------------------------------- */

/* Reserves `bytes` of device scratch for split-KV attention and the two-pass softmax/argmax on
 * the current device (grows, never shrinks). Launchers grow it themselves when needed, except
 * while `stream` is being captured into a CUDA graph: then a launcher that finds too little
 * scratch takes its path that needs none. Call it before capturing (the executor does, with
 * loom_cuda_scratch_bytes_for). The scratch serves one stream at a time. */
loom_status loom_cuda_reserve_scratch(size_t bytes, loom_error *err);

/* Scratch bytes that attention (any N, any context: the launchers keep N x splits <= 128) over
 * n_head heads of head_dim D and softmax/argmax over `rows` rows of n values need; pass zeros
 * for the part that does not apply. Reserving it before a capture guarantees that no launcher
 * inside the capture takes its no-scratch path. */
size_t loom_cuda_scratch_bytes_for(int64_t n_head, int64_t head_dim, int64_t rows, int64_t n);

/* Which matmul-family launcher a scratch query is about (the routing of its weights differs):
 * loom_cuda_matmul(_normed) (w[0]), loom_cuda_matmul_add (w[0]), loom_cuda_matmul_pair(_normed)
 * with LOOM_PAIR_NONE / LOOM_PAIR_SWIGLU (w[0], w[1]), loom_cuda_matmul_triple(_normed) (w[0..2]). */
typedef enum {
    LOOM_MATMUL_ROLE_PLAIN,
    LOOM_MATMUL_ROLE_ADD,
    LOOM_MATMUL_ROLE_PAIR,
    LOOM_MATMUL_ROLE_SWIGLU,
    LOOM_MATMUL_ROLE_TRIPLE,
} loom_matmul_role;

/* Scratch bytes that launcher `role` over weights w (K = w[0].cols) needs for n tokens under the
 * current switches: the wide prefill GEMMs' x-limb pre-passes (Q4_K, LOOM_GEMM_WIDE_Q4K_I8=5:
 * K / 256 x n rounded up to 32 x 1156 bytes; Q6_K, LOOM_GEMM_WIDE_Q6K = 5..7, and Q8_0,
 * LOOM_GEMM_WIDE_Q8=2: x 1028), each by
 * its launcher's own rule (the wide threshold, the form, a triple's Q6_K V on the f16 body below 64 tokens, the
 * weights' alignment; a weight whose data is NULL counts as aligned, for a reservation before the
 * weights are placed); 0: the call uses no scratch (decode steps, the switches off), so a caller
 * need not order it with the other scratch users. With the folded RMSNorm or without, the same.
 * Without the scratch the launcher grows it itself (outside a capture) or runs the same kernels
 * staging x in place (the same bits). */
size_t loom_cuda_matmul_scratch_bytes(loom_matmul_role role, const loom_kweight *w, int64_t n);

/* The current device scratch base (NULL: none yet). It changes whenever the scratch is
 * reallocated (growth frees the old one), so a captured CUDA graph whose kernels use the scratch
 * is valid only while this returns the pointer seen at capture. */
const void *loom_cuda_scratch_base(void);

/* Frees the scratch (at exit; nothing may be running). */
void loom_cuda_release_scratch(void);

/* The shared-memory carveout the kernels prefer under the switches as read (LOOM_CUDA_CARVEOUT:
 * percent, or -1 for the driver's choice). */
int loom_cuda_carveout(void);

/* The L2 fetch granularity the switches ask for (LOOM_CUDA_L2_FETCH: bytes, or -1 for the
 * driver's choice), and that value set as the current device's limit (a context-wide setting:
 * every kernel of the process on that device sees it; nothing is set for -1). The limit is a
 * hint, so a caller may go on after a failure (the runtime's error is cleared). */
int loom_cuda_l2_fetch(void);
loom_status loom_cuda_apply_l2_fetch(loom_error *err);

/* Re-reads every switch listed above (tests use it after setenv; normally read once). */
void loom_cuda_reload_switches(void);

/* Launches of the mixed Q4_K + Q6_K matmul kernel so far (LOOM_GEMV_TRIPLE_MIXED; tests check
 * that the path they compare was taken). */
int64_t loom_cuda_matmul_mixed_launches(void);

/* Launches of the wide prefill GEMM (LOOM_GEMM_WIDE, gemv_mma.cu) so far (tests: the path ran). */
int64_t loom_cuda_matmul_wide_launches(void);

/* Wide Q8_0 GEMMs run on the limb pre-pass (LOOM_GEMM_WIDE_Q8=2, gemv_mma_q8.cu) so far (tests:
 * the path ran). */
int64_t loom_cuda_matmul_q8_pre_launches(void);

/* Launches of the 3-warp Q4_K pair GEMV (LOOM_GEMV_PAIR_WARPS, gemv_mma.cu) so far (tests: the
 * path ran). */
int64_t loom_cuda_matmul_pair3_launches(void);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_KERNELS_CUDA_KERNELS_H */
