// l2_warm.cu: an L2 prefetch kernel for `cuda_bench --l2warm` (bench/NOTES.md 7, session 15):
// asks L2 for up to 4 regions of weights (cp.async.bulk.prefetch.L2 in 16 KB chunks on sm_90,
// prefetch.global.L2 lines on sm_87), a chunk a thread, and returns; the bytes arrive after.
// Launched on a side stream while decode attention runs (its DRAM mostly idle at short context),
// it brings the next matmuls' weights into L2 before they run.
#include <cuda_runtime.h>

#include "bench/l2_warm.h"

namespace {

constexpr size_t kChunk = 16384;

struct Regions {
    const char *p[4];
    size_t n[4];
    int count;
};

__global__ void l2_warm_kernel(const Regions r) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < r.count; k++) {
        const size_t nc = (r.n[k] + kChunk - 1) / kChunk;
        for (; i < nc; i += stride) {
            const char *p = r.p[k] + i * kChunk;
            const size_t len = r.n[k] - i * kChunk < kChunk ? r.n[k] - i * kChunk : kChunk;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"((unsigned)(len & ~(size_t)15))
                         : "memory");
#else
            for (size_t o = 0; o < len; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#endif
        }
        i -= nc;  // the next region continues this thread's chunk sequence
    }
}

}  // namespace

extern "C" int bench_l2_warm(const void *const *ptrs, const size_t *bytes, int count, int blocks,
                             cudaStream_t s) {
    Regions r = {};
    r.count = count < 4 ? count : 4;
    for (int k = 0; k < r.count; k++) {
        r.p[k] = static_cast<const char *>(ptrs[k]);
        r.n[k] = bytes[k];
    }
    l2_warm_kernel<<<blocks, 32, 0, s>>>(r);
    return (int)cudaGetLastError();
}
