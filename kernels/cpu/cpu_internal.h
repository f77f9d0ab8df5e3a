/* cpu_internal.h: what the CPU kernel files share and nobody else sees: the thread pool's
 * parallel-for and the argument checks every kernel family runs before touching memory.
 *
 * The pool splits [0, n) into contiguous ranges, one per worker, so every output element is
 * computed by exactly one thread; results cannot depend on the thread count as long as a kernel
 * computes each element the same way whatever range it falls in.
 */
#ifndef LOOM_KERNELS_CPU_INTERNAL_H
#define LOOM_KERNELS_CPU_INTERNAL_H

#include <stdint.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_workspace.h"

/* LOOM_CPU_HOT: on x86-64 with GCC or clang, the hot loops (block decoding, the matmul's dot
 * products) are compiled twice, for AVX2 and for the baseline, and the loader picks the clone
 * the CPU runs (target_clones, an ifunc). The clones compute the same float operations in the
 * same order lane by lane (no FMA contraction: -ffp-contract=off in BUILD), so they give the
 * same bits; only the vector width differs. Elsewhere it is empty. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(LOOM_CPU_NO_CLONES)
#define LOOM_CPU_HOT __attribute__((target_clones("avx2", "default")))
#else
#define LOOM_CPU_HOT
#endif

/* Work on items [begin, end) as worker `worker` (0 .. loom_cpu_get_threads() - 1). */
typedef void (*loom_cpu_range_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* Runs fn over [0, n) split into up to loom_cpu_get_threads() contiguous ranges and returns
 * when all are done. `cost_per_item` (roughly multiply-adds) decides whether threads pay off:
 * small jobs, and calls that find the pool busy (another caller, or a nested call from a
 * worker), run on the calling thread as the single range [0, n) with worker 0. */
void loom_cpu_parallel_for(int64_t n, int64_t cost_per_item, loom_cpu_range_fn fn, void *ctx);

/* Checks a weight for kernel `who`, argument `what`: a supported type, rows >= 0, cols >= 0 and a
 * multiple of the block size, data non-NULL when non-empty. */
loom_status loom_cpu_check_weight(const char *who, const char *what, const loom_kweight *w,
                                  loom_error *err);

/* Bytes of one row of w (valid after loom_cpu_check_weight). */
int64_t loom_cpu_weight_row_bytes(const loom_kweight *w);

/* A 65536-entry table: table[h] == loom_fp16_to_fp32(h) for every half h, bit for bit (built
 * once, thread-safely, on first use). Decoding F16 through it is several times faster than the
 * per-value call. (threads.c) */
const float *loom_cpu_f16_table(void);

/* Decodes n values of a row of a weight type (n a multiple of its block size, src at a block
 * boundary) into dst, bit-identical to loom_dequantize_row but faster. The type must have
 * passed loom_cpu_check_weight. (decode.c) */
void loom_cpu_decode(loom_ggml_type type, const void *src, float *dst, int64_t n);

/* At least n floats of scratch from ws (grown when smaller; the old contents are not kept), or
 * NULL with LOOM_ERR_OUT_OF_MEMORY in err naming kernel `who`. (threads.c) */
float *loom_cpu_workspace_reserve(loom_cpu_workspace *ws, size_t n, const char *who,
                                  loom_error *err);

/* Checks a KV cache layout for kernel `who`: a known type, no negative size. (kv.c) */
loom_status loom_cpu_check_kv_layout(const char *who, const loom_kv_layout *kv, loom_error *err);

#endif /* LOOM_KERNELS_CPU_INTERNAL_H */
