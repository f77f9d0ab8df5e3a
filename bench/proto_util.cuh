// proto_util.cuh: what the standalone bench prototypes (stream_floor.cu, layer_pipe.cu; each built
// by one nvcc line with -I. from the repository root) share: the CUDA error check and the
// CUDA-event timing of a stream's work, median over repetitions.
#pragma once

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// The median over `reps` repetitions of the milliseconds between two events recorded on s around
// body() (body enqueues work on s).
template <typename F>
static float events_median_ms(cudaStream_t s, int reps, F body) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms(reps);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, s));
        body();
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[reps / 2];
}

// An instantiated graph uploaded, launched once to warm up, then replayed `reps` times on s: the
// median ms a replay.
static float graph_median_ms(cudaGraphExec_t ge, cudaStream_t s, int reps) {
    CK(cudaGraphUpload(ge, s));
    CK(cudaGraphLaunch(ge, s));  // warm-up
    return events_median_ms(s, reps, [&] { CK(cudaGraphLaunch(ge, s)); });
}
