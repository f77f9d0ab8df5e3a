// icache_fill.cu: two filler kernels for `cuda_bench --icache` (bench/NOTES.md 7, session 15):
// the same 16,384 FFMAs a thread in 8 independent chains, as 256 KB of straight-line code
// (big: every SM runs all of it, which evicts the SMs' instruction caches) or as a 64-FFMA loop
// body (small: ~1 KB of code). Inserted before each matmul of the decode layer graph, the
// difference of the two, less the difference of the fillers alone, is what the matmuls pay for
// starting with cold instruction caches.
#include <cuda_runtime.h>

#include "bench/icache_fill.h"

namespace {

constexpr int kFma = 16384, kChains = 8;

#define IC_FMA(c) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a[c]) : "f"(b), "f"(d))

__global__ void __launch_bounds__(128) ic_big(float *out) {
    float a[kChains], b = 0.999f, d = 1e-3f;
#pragma unroll
    for (int c = 0; c < kChains; c++) a[c] = (float)(threadIdx.x + c);
#pragma unroll
    for (int i = 0; i < kFma / kChains; i++) {
#pragma unroll
        for (int c = 0; c < kChains; c++) IC_FMA(c);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < kChains; c++) s += a[c];
    if (s == -1.0f) out[0] = s;  // never: keeps the chains alive
}

__global__ void __launch_bounds__(128) ic_small(float *out) {
    float a[kChains], b = 0.999f, d = 1e-3f;
#pragma unroll
    for (int c = 0; c < kChains; c++) a[c] = (float)(threadIdx.x + c);
#pragma unroll 1
    for (int i = 0; i < kFma / 64; i++) {
#pragma unroll
        for (int j = 0; j < 64 / kChains; j++) {
#pragma unroll
            for (int c = 0; c < kChains; c++) IC_FMA(c);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < kChains; c++) s += a[c];
    if (s == -1.0f) out[0] = s;
}

}  // namespace

extern "C" int bench_icache_fill(int big, int blocks, float *out, cudaStream_t s) {
    if (big) ic_big<<<blocks, 128, 0, s>>>(out);
    else ic_small<<<blocks, 128, 0, s>>>(out);
    return (int)cudaGetLastError();
}
