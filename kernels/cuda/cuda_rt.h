/* cuda_rt.h: the CUDA runtime declarations loom's plain C code uses (the CUDA backend in
 * executor/, the GPU conformance program in tests/gpu/, the benchmarks in bench/), one copy.
 *
 * Bazel 4.2 (no CUDA toolchain) refuses C compiles that include headers from
 * /usr/local/cuda/include, so the few functions, types and constants needed are declared here
 * with the signatures and values of CUDA 13.0's cuda_runtime_api.h / driver_types.h (a stable C
 * ABI; enums are int-sized). Add a declaration here, checked against those headers, when a C
 * file needs one more; never declare CUDA runtime names anywhere else. The code that uses them
 * links cudart_static through //kernels/cuda. Only the .cu files see the real headers.
 */
#ifndef LOOM_KERNELS_CUDA_CUDA_RT_H
#define LOOM_KERNELS_CUDA_CUDA_RT_H

#include <stddef.h>

#include "kernels/cuda/cuda_kernels.h" /* cudaStream_t */

typedef int cudaError_t; /* enum cudaError; 0 = cudaSuccess */
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef struct cudaGraphExecUpdateResultInfo_st {
    int result; /* enum cudaGraphExecUpdateResult, 0 = success */
    cudaGraphNode_t errorNode;
    cudaGraphNode_t errorFromNode;
} cudaGraphExecUpdateResultInfo;

enum { cudaSuccess = 0 };
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
       cudaStreamCaptureModeRelaxed = 2 };
enum { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrIntegrated = 18,
       cudaDevAttrCanMapHostMemory = 19, cudaDevAttrL2CacheSize = 38,
       cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76,
       cudaDevAttrHostRegisterReadOnlySupported = 113 };
enum { cudaHostRegisterMapped = 0x02, cudaHostRegisterReadOnly = 0x08 };
enum { cudaHostAllocMapped = 0x02 };
enum { cudaStreamNonBlocking = 0x01 };
enum { cudaEventDisableTiming = 0x02 };
enum { cudaLimitMaxL2FetchGranularity = 0x05 }; /* enum cudaLimit */

/* devices and errors */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device);
cudaError_t cudaDeviceGetLimit(size_t *value, int limit);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);

/* memory */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void *ptr);
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags);

/* streams and events */
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);

/* graphs */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t ge, cudaGraph_t g,
                                cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge);
cudaError_t cudaGraphDestroy(cudaGraph_t g);

#endif /* LOOM_KERNELS_CUDA_CUDA_RT_H */
