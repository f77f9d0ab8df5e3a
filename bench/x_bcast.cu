// x_bcast.cu: a standalone microbenchmark (not part of the kernel library): what it costs a
// decode matmul's blocks to read their activation x from L2 right after the PDL wait, when
// every block reads the same few KB (loom's GEMVs today: x is the previous kernel's output,
// a 10-38 KB vector that each of 320-608 blocks reads its K share of; the normed ones also read
// the norm weight, the same for every block), against R replicas of x (block b reads replica
// b % R; R = the block count: no byte shared), with the weights' first request before the wait
// (as the GEMVs), after it, or none (bench/NOTES.md section 7, "Session 30").
//
// One case = a CUDA graph of kLen (producer, consumer) pairs on one stream with programmatic
// dependent launch, as the decode step's kernels run:
//   producer  B blocks x 128 threads: waits for the consumer before it, then writes x's R
//             replicas, as a GEMV writes its output.
//   consumer  B blocks x 128 threads (block b: K share b % S of S), as a GEMV: asks DRAM for
//             2,304 bytes of weights a warp (one super-block of a 16-row tile, from a rotating
//             1 GB buffer) before the wait, after it, or not at all; after the wait reads its x
//             share (and with V = 2 the same share of a constant vector, also in R replicas;
//             float4 loads, all issued before any use), sums them with the weights' words and
//             writes one float.
// Reported per case: the graph's time a pair (CUDA events, median of kReps replays), and over
// the consumers' blocks (launches 1.. of the last replay; clock64 at the SM clock): the median
// and 90th percentile of release -> x summed (rel->x) and of release -> end.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I. -o x_bcast bench/x_bcast.cu
// Run:   ./x_bcast   (one line per case)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "bench/proto_util.cuh"

namespace {

constexpr int kLen = 32, kReps = 15, kThreads = 128, kMaxF4 = 12;  // x share <= 12 float4 a thread
constexpr size_t kWBytes = (size_t)1 << 30;

__device__ __forceinline__ void dep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void dep_go() { asm volatile("griddepcontrol.launch_dependents;" :::); }

struct Args {
    float *x;            // R replicas of K floats
    const float *nw;     // R replicas of K floats (the second vector), or null
    const uint4 *w;      // weights, or null
    int64_t w_f4;        // uint4 in w
    float *out;          // B floats
    long long *rec;      // [kLen][B][2]: release -> x summed, release -> end (clock64)
    int K, S, R, late;   // late: the weights requested after the wait
    int slot;            // launch index in the graph
};

__global__ void __launch_bounds__(kThreads) producer(Args a) {
    dep_wait();
    dep_go();
    const int64_t n = (int64_t)a.R * a.K;
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads)
        a.x[i] = 1e-3f * (float)(i % a.K % 977) + (float)a.slot;
}

__global__ void __launch_bounds__(kThreads) consumer(Args a) {
    const int tid = threadIdx.x, b = blockIdx.x;
    uint4 wv[5];
    const bool hw = a.w != nullptr;
    auto load_w = [&]() {  // one 2,304-byte super-block tile a warp: 4.5 uint4 a lane
        const int64_t base = ((int64_t)a.slot * gridDim.x + b) * (kThreads / 32 * 144) % (a.w_f4 - 1024);
        const int64_t wi = base + (tid >> 5) * 144 + (tid & 31);
#pragma unroll
        for (int j = 0; j < 5; j++)
            wv[j] = (j < 4 || (tid & 31) < 16) ? __ldg(a.w + wi + 32 * j) : make_uint4(0, 0, 0, 0);
    };
    if (hw && !a.late) load_w();
    dep_wait();
    dep_go();
    const long long t1 = clock64();
    if (hw && a.late) load_w();
    const int share = a.K / a.S, nf4 = share / 4;
    const int64_t off = (int64_t)(b % a.R) * a.K + (int64_t)(b % a.S) * share;
    const float4 *xg = reinterpret_cast<const float4 *>(a.x + off);
    const float4 *ng = a.nw ? reinterpret_cast<const float4 *>(a.nw + off) : nullptr;
    float4 v[kMaxF4], u[kMaxF4];
#pragma unroll
    for (int j = 0; j < kMaxF4; j++)
        if (tid + j * kThreads < nf4) {
            v[j] = xg[tid + j * kThreads];
            u[j] = ng ? __ldg(ng + tid + j * kThreads) : make_float4(1.f, 1.f, 1.f, 1.f);
        }
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxF4; j++)
        if (tid + j * kThreads < nf4)
            acc += v[j].x * u[j].x + v[j].y * u[j].y + v[j].z * u[j].z + v[j].w * u[j].w;
    if (hw)
#pragma unroll
        for (int j = 0; j < 5; j++)
            acc += __uint_as_float((wv[j].x ^ wv[j].y ^ wv[j].z ^ wv[j].w) & 0x3f7fffffu);
    const long long t2 = clock64();
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float ws[kThreads / 32];
    if ((tid & 31) == 0) ws[tid >> 5] = acc;
    __syncthreads();
    if (tid == 0) {
        a.out[b] = ws[0] + ws[1] + ws[2] + ws[3];
        long long *r = a.rec + ((int64_t)a.slot * gridDim.x + b) * 2;
        r[0] = t2 - t1;
        r[1] = clock64() - t1;
    }
}

struct Case {
    const char *name;
    int K, S, B, V;  // V: 1 (x) or 2 (x and a constant vector)
};

void run_case(const Case &c, int R, int wmode, float *x, const float *nw, const uint4 *w,
              float *out, long long *rec, cudaStream_t st, double ghz) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kLen; i++) {
        Args a{x, c.V == 2 ? nw : nullptr, wmode ? w : nullptr, (int64_t)(kWBytes / 16), out,
               rec, c.K, c.S, R, wmode == 2, i};
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        cfg.blockDim = dim3(kThreads);
        cfg.gridDim = dim3(c.B);
        cfg.stream = st;
        CK(cudaLaunchKernelEx(&cfg, producer, a));
        CK(cudaLaunchKernelEx(&cfg, consumer, a));
    }
    CK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    const float ms = graph_median_ms(ge, st, kReps);
    CK(cudaStreamSynchronize(st));
    std::vector<long long> h((size_t)kLen * c.B * 2);
    CK(cudaMemcpy(h.data(), rec, h.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    std::vector<double> rx, re;
    for (int i = 1; i < kLen; i++)
        for (int b = 0; b < c.B; b++) {
            rx.push_back(h[((size_t)i * c.B + b) * 2] / (ghz * 1e3));
            re.push_back(h[((size_t)i * c.B + b) * 2 + 1] / (ghz * 1e3));
        }
    std::sort(rx.begin(), rx.end());
    std::sort(re.begin(), re.end());
    const size_t n = rx.size();
    static const char *wn[] = {"none", "before", "after"};
    printf("| %-6s | %5d | %d | %3d | %d | %5.1f | %3d | %-6s | %6.2f | %5.2f / %5.2f | %5.2f / %5.2f |\n",
           c.name, c.K, c.S, c.B, c.V, (double)c.K / c.S * 4 / 1024, R, wn[wmode], ms * 1e3 / kLen,
           rx[n / 2], rx[n * 9 / 10], re[n / 2], re[n * 9 / 10]);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
}

}  // namespace

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const double ghz = khz / 1e6;
    printf("x_bcast: %s, %d SMs, SM clock %.2f GHz (clock64 -> us)\n", p.name, p.multiProcessorCount, ghz);
    const int maxB = 640, maxK = 9728;
    float *x, *nw, *out;
    uint4 *w;
    long long *rec;
    CK(cudaMalloc(&x, (size_t)maxB * maxK * sizeof(float)));
    CK(cudaMalloc(&nw, (size_t)maxB * maxK * sizeof(float)));
    CK(cudaMemset(nw, 0, (size_t)maxB * maxK * sizeof(float)));
    CK(cudaMalloc(&out, maxB * sizeof(float)));
    CK(cudaMalloc(&w, kWBytes));
    CK(cudaMemset(w, 0x11, kWBytes));
    CK(cudaMalloc(&rec, (size_t)kLen * maxB * 2 * sizeof(long long)));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    // The decode GEMVs' x reads at 4B shapes: down (K 9728, S 2, 320 blocks), O (4096, S 2,
    // 320), the normed pair's norm partials (2560, the whole row and the norm weight a block,
    // 608 blocks), the normed triple's (448 blocks).
    const Case cases[] = {
        {"down", 9728, 2, 320, 1},
        {"O", 4096, 2, 320, 1},
        {"pair", 2560, 1, 608, 2},
        {"triple", 2560, 1, 448, 2},
    };
    printf("| case | K | S | blocks | vectors | KB a block | replicas | weights | us a pair | "
           "rel->x p50 / p90 | rel->end p50 / p90 |\n");
    printf("| --- | --: | --: | --: | --: | --: | --: | --- | --: | --: | --: |\n");
    for (const Case &c : cases) {
        for (int R : {1, 2, 4, 8, 16, c.B}) run_case(c, R, 1, x, nw, w, out, rec, st, ghz);
        for (int R : {1, c.B}) run_case(c, R, 2, x, nw, w, out, rec, st, ghz);
        for (int R : {1, c.B}) run_case(c, R, 0, x, nw, w, out, rec, st, ghz);
    }
    CK(cudaFree(x));
    CK(cudaFree(nw));
    CK(cudaFree(out));
    CK(cudaFree(w));
    CK(cudaFree(rec));
    return 0;
}
