/* cuda_check.h: CK, the CUDA call check of the GPU test and benchmark programs (tests/gpu,
 * bench), over the one set of runtime declarations in kernels/cuda/cuda_rt.h. Only for test
 * programs: it exits, which library code never does (the executor turns a failed call into a
 * status instead). */
#ifndef LOOM_TESTS_GPU_CUDA_CHECK_H
#define LOOM_TESTS_GPU_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_rt.h"

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

#endif /* LOOM_TESTS_GPU_CUDA_CHECK_H */
