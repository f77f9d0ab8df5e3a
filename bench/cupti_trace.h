/* cupti_trace.h: the start and end of every kernel and memory copy the process runs on the GPU,
 * as CUPTI's activity API records them (bench/cupti_trace.cu; bench/step_timeline.c reads a
 * decode step's timeline from them). Kernels of a CUDA graph are recorded one by one, with the
 * correlation id of the graph launch they belong to. Recording does not serialize kernels
 * (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL). Links libcupti (the CUDA toolkit's; not static). */
#ifndef LOOM_BENCH_CUPTI_TRACE_H
#define LOOM_BENCH_CUPTI_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_kernel_rec {
    uint64_t start, end;   /* GPU timestamps, ns */
    uint32_t correlation;  /* the launch API call's id: one graph launch for all its kernels */
    uint32_t graph;        /* the graph's id, 0 for a kernel launched on a stream */
    int32_t grid[3], block[3];
    int32_t smem;          /* static + dynamic shared memory a block */
    uint64_t bytes;        /* a memory copy's bytes; 0 for a kernel */
    char name[112];        /* a kernel's name demangled, namespaces and argument list dropped,
                              cut to fit; a copy's "memcpy HtoD" (DtoH, DtoD, ...) */
} loom_kernel_rec;

/* Starts recording. 0, or -1 with a message in err. */
int loom_cupti_start(char *err, size_t err_len);

/* Stops recording and hands over what was recorded since start, in completion order (*recs from
 * malloc, the caller frees; *n records). Records CUPTI dropped for want of buffer space are
 * counted in *dropped. 0, or -1 with a message in err. */
int loom_cupti_stop(loom_kernel_rec **recs, size_t *n, uint64_t *dropped, char *err,
                    size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
