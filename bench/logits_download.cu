// logits_download.cu: a standalone microbenchmark (not part of the library) of the per-token
// logits download of a decode step: 151936 floats (a Qwen-sized vocabulary, 593 KB) device ->
// host, then synchronize, four ways (200 repetitions each, median and 10th percentile in us):
//   pinned + memcpy   into a page-locked landing buffer, then memcpy into malloc'd memory
//                     (the CUDA backend's download before loom_exec_host_alloc)
//   pinned only       straight into page-locked memory (the session's logits buffer now)
//   pageable direct   straight into malloc'd memory (the driver stages it itself)
//   empty sync        cudaStreamSynchronize on an idle stream
// Build: nvcc -O2 -o logits_download bench/logits_download.cu
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <chrono>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main() {
    const size_t bytes = 151936 * sizeof(float);
    float *dev, *pageable = (float *)malloc(bytes);
    void *pinned;
    if (!pageable) return 1;
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMemset(dev, 0, bytes));
    CK(cudaMallocHost(&pinned, bytes));
    memset(pageable, 1, bytes);
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const char *names[] = {"pinned + memcpy", "pinned only", "pageable direct", "empty sync"};
    for (int mode = 0; mode < 4; mode++) {
        std::vector<double> t;
        for (int r = 0; r < 200; r++) {
            double t0 = now_us();
            if (mode == 0 || mode == 1) CK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s));
            if (mode == 2) CK(cudaMemcpyAsync(pageable, dev, bytes, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            if (mode == 0) memcpy(pageable, pinned, bytes);
            t.push_back(now_us() - t0);
        }
        std::sort(t.begin(), t.end());
        printf("%-18s median %7.1f us  p10 %7.1f us\n", names[mode], t[100], t[20]);
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(pinned));
    CK(cudaFree(dev));
    free(pageable);
    return 0;
}
