/* l2_warm.h: the L2 prefetch kernel of `cuda_bench --l2warm` (bench/l2_warm.cu). */
#ifndef LOOM_BENCH_L2_WARM_H
#define LOOM_BENCH_L2_WARM_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct CUstream_st *cudaStream_t; /* as cuda_runtime_api.h declares it */
/* Asks L2 for count (<= 4) regions ptrs[k] of bytes[k] bytes (16-byte aligned), blocks x 32
 * threads, a 16 KB chunk a thread; returns the launch's cudaError_t (0 = success). */
int bench_l2_warm(const void *const *ptrs, const size_t *bytes, int count, int blocks, cudaStream_t s);
#ifdef __cplusplus
}
#endif
#endif
