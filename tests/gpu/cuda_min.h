/* cuda_min.h: the few CUDA runtime declarations the GPU test and benchmark programs use,
 * written out here because Bazel (4.2, no CUDA toolchain) refuses C compiles that include
 * headers from /usr/local/cuda/include. Signatures and enum values are copied from CUDA 13.0's
 * cuda_runtime_api.h / driver_types.h (the ABI is stable; the programs link cudart_static
 * through //kernels/cuda). Only for tests/ and bench/: library code never declares these. */
#ifndef LOOM_TESTS_GPU_CUDA_MIN_H
#define LOOM_TESTS_GPU_CUDA_MIN_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_kernels.h" /* cudaStream_t */

typedef int cudaError_t; /* enum cudaError; 0 = cudaSuccess */
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
enum { cudaSuccess = 0 };
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1 };
enum { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrL2CacheSize = 38,
       cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };

cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge);
cudaError_t cudaGraphDestroy(cudaGraph_t g);

/* CK(call): a failed CUDA runtime call ends the test program (exit 2) naming the call. */
#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #x,                    \
                    cudaGetErrorString(e_));                                                  \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

#endif /* LOOM_TESTS_GPU_CUDA_MIN_H */
