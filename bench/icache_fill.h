/* icache_fill.h: the filler kernels of `cuda_bench --icache` (bench/icache_fill.cu). */
#ifndef LOOM_BENCH_ICACHE_FILL_H
#define LOOM_BENCH_ICACHE_FILL_H
#ifdef __cplusplus
extern "C" {
#endif
typedef struct CUstream_st *cudaStream_t; /* as cuda_runtime_api.h declares it */
/* big != 0: 256 KB of straight-line code a thread; 0: the same FFMAs in a ~1 KB loop. Returns
 * the launch's cudaError_t (0 = success). */
int bench_icache_fill(int big, int blocks, float *out, cudaStream_t s);
#ifdef __cplusplus
}
#endif
#endif
