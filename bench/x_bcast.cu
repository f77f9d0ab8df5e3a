// x_bcast.cu: a standalone microbenchmark (not part of the kernel library): what it costs a
// decode matmul's blocks to read their activation x from L2 right after the PDL wait, when
// every block reads the same few KB (loom's GEMVs today: x is the previous kernel's output,
// a 10-38 KB vector that each of 320-608 blocks reads its K share of; the normed ones also read
// the norm weight, the same for every block), against R replicas of x (block b reads replica
// b % R; R = the block count: no byte shared), with the weights' first request before the wait
// (as the GEMVs), after it, or none; with x's lines written by the producer just before, or
// not (the producer writing beside them, or nothing) (bench/NOTES.md section 7, "Session 30").
//
// One case = a CUDA graph of kLen (producer, consumer) pairs on one stream with programmatic
// dependent launch, as the decode step's kernels run:
//   producer  B blocks x 128 threads: waits for the consumer before it, then writes x's R
//             replicas, as a GEMV writes its output (or as many floats beside them).
//   consumer  B blocks x 128 threads (block b: K share b % S of S), as a GEMV: asks DRAM for
//             2,304 bytes of weights a warp (one super-block of a 16-row tile, from a rotating
//             1 GB buffer) before the wait, after it, or not at all; after the wait reads its x
//             share (and with V = 2 the same share of a constant vector, also in R replicas;
//             float4 loads, all issued before any use), sums them with the weights' words,
//             then reads the same share of a constant vector z (an L2 hit: the latency of a
//             read that is not the launch's first; or z first, then x) and writes one float.
// Reported per case: the graph's time a pair (CUDA events, median of kReps replays), and over
// the consumers' blocks (launches 1.. of the last replay; clock64 at the SM clock): the median
// of release -> the probe done (a probe before the reads: 64 dependent FMAs, one 4-byte load of
// x, a wait of 0-0.7 us by block, which spreads the blocks' first reads, or "warm": the read's
// code run once on z before the wait and on x after it, consumer_warm), the median and 90th
// percentile of the probe -> the first read summed (x, or z with "z, x"), the median of the
// first read summed -> the second summed, and release -> end. x is read through L1 (ca, the
// GEMVs' loads) or L2 only (cg). Without PDL the release is the consumer's start.
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
    const float *z;      // K floats read after x (constant: an L2 hit away from the release)
    long long *rec;      // [kLen][B][4]: release -> probe done, probe -> first read summed,
                         // first -> second summed, release -> end
    int K, S, R, late;   // late: the weights requested after the wait
    int pw;              // the producer writes 0: x, 1: as many floats beside x (x's lines clean
                         // in L2), 2: nothing
    int zfirst;          // the consumer reads z before x (the first read is then z's)
    int probe;           // before the first read, 1: 64 dependent FMAs on a parameter, 2: one
                         // 4-byte load of x and its use, 3: a wait of (b % 8) x 0.1 us (timed
                         // apart: rel->probe)
    int cg;              // x read with ld.global.cg (L2 only) instead of the default
    int slot;            // launch index in the graph
};

__global__ void __launch_bounds__(kThreads) producer(Args a) {
    dep_wait();
    dep_go();
    const int64_t n = a.pw == 2 ? 0 : (int64_t)a.R * a.K;
    float *dst = a.x + (a.pw == 1 ? n : 0);
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads)
        dst[i] = 1e-3f * (float)(i % a.K % 977) + (float)a.slot;
}

// A consumer's end: the block's sum into out[block] (so no read is dead) and thread 0's record
// of the launch: r0..r2 as Args::rec says, then release (t1) -> now.
__device__ __forceinline__ void finish(const Args &a, float acc, long long r0, long long r1,
                                       long long r2, long long t1) {
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float ws[kThreads / 32];
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        a.out[blockIdx.x] = ws[0] + ws[1] + ws[2] + ws[3];
        long long *r = a.rec + ((int64_t)a.slot * gridDim.x + blockIdx.x) * 4;
        r[0] = r0;
        r[1] = r1;
        r[2] = r2;
        r[3] = clock64() - t1;
    }
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
    int64_t off = (int64_t)(b % a.R) * a.K + (int64_t)(b % a.S) * share;
    if (a.probe == 1) {
        float f = (float)a.K;
#pragma unroll 1
        for (int i = 0; i < 64; i++) f = fmaf(f, 0.999f, 1.0f);
        off += __float_as_int(f) == 0x7fffffff;  // (0: keeps the chain before the reads)
    } else if (a.probe == 2) {
        off += __float_as_int(a.x[off]) == 0x7fffffff;
    } else if (a.probe == 3) {  // the blocks' first reads spread over 8 starts 0.1 us apart
        const long long until = t1 + (b % 8) * 198;
        while (clock64() < until) {}
    }
    const long long t1b = clock64();
    // the first read (x, or z with zfirst) and the second (z, or x)
    const float4 *xs = reinterpret_cast<const float4 *>(a.x + off);
    const float4 *zs4 = reinterpret_cast<const float4 *>(a.z + (int64_t)(b % a.S) * share);
    const float4 *xg = a.zfirst ? zs4 : xs;
    const float4 *ng = a.nw ? reinterpret_cast<const float4 *>(a.nw + off) : nullptr;
    float4 v[kMaxF4], u[kMaxF4];
#pragma unroll
    for (int j = 0; j < kMaxF4; j++)
        if (tid + j * kThreads < nf4) {
            v[j] = a.cg ? __ldcg(xg + tid + j * kThreads) : xg[tid + j * kThreads];
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
    // the next read of the launch: z's share (or x's), all loads in flight, after the first
    // read's sum is known (the address depends on it, so no load is issued before; dep is 0)
    const int dep = __float_as_int(acc) == 0x7fffffff;
    const float4 *zg = (a.zfirst ? xs : zs4) + dep;
    float zs = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxF4; j++)
        if (tid + j * kThreads < nf4) v[j] = __ldg(zg + tid + j * kThreads);
#pragma unroll
    for (int j = 0; j < kMaxF4; j++)
        if (tid + j * kThreads < nf4) zs += v[j].x + v[j].y + v[j].z + v[j].w;
    const long long t3 = clock64();
    acc += zs;
    finish(a, acc, t1b - t1, t2 - t1b, t3 - t2, t1);
}

// probe 4: the read's code run once before the wait (on z, a constant), then after the wait
// the same instructions on x: is the first read slow because its code runs for the first time?
__global__ void __launch_bounds__(kThreads) consumer_warm(Args a) {
    const int tid = threadIdx.x, b = blockIdx.x;
    const int share = a.K / a.S, nf4 = share / 4;
    const float4 *xs = reinterpret_cast<const float4 *>(a.x + (int64_t)(b % a.R) * a.K +
                                                        (int64_t)(b % a.S) * share);
    const float4 *zs4 = reinterpret_cast<const float4 *>(a.z + (int64_t)(b % a.S) * share);
    float acc = 0.0f;
    long long t1 = 0;
#pragma unroll 1
    for (int it = 0; it < 2; it++) {
        if (it == 1) {
            dep_wait();
            dep_go();
            t1 = clock64();
        }
        const float4 *p = it ? xs : zs4;
        float4 v[kMaxF4];
#pragma unroll
        for (int j = 0; j < kMaxF4; j++)
            if (tid + j * kThreads < nf4) v[j] = p[tid + j * kThreads];
#pragma unroll
        for (int j = 0; j < kMaxF4; j++)
            if (tid + j * kThreads < nf4) acc += v[j].x + v[j].y + v[j].z + v[j].w;
    }
    const long long t2 = clock64();
    finish(a, acc, 0, t2 - t1, 0, t1);
}

struct Case {
    const char *name;
    int K, S, B, V;  // V: 1 (x) or 2 (x and a constant vector)
};

void run_case(const Case &c, int R, int wmode, int pw, bool cg, bool zfirst, bool pdl, int probe,
              float *x,
              const float *nw,
              const float *z, const uint4 *w,
              float *out, long long *rec, cudaStream_t st, double ghz) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kLen; i++) {
        Args a{x, c.V == 2 ? nw : nullptr, wmode ? w : nullptr, (int64_t)(kWBytes / 16), out,
               z, rec, c.K, c.S, R, wmode == 2, pw, zfirst, probe, cg, i};
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
        cfg.numAttrs = pdl ? 1 : 0;  // without: the consumer starts after the producer ends
        if (probe == 4) CK(cudaLaunchKernelEx(&cfg, consumer_warm, a));
        else CK(cudaLaunchKernelEx(&cfg, consumer, a));
    }
    CK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    const float ms = graph_median_ms(ge, st, kReps);
    CK(cudaStreamSynchronize(st));
    std::vector<long long> h((size_t)kLen * c.B * 4);
    CK(cudaMemcpy(h.data(), rec, h.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    std::vector<double> rp, rx, rz, re;
    for (int i = 1; i < kLen; i++)
        for (int b = 0; b < c.B; b++) {
            const long long *r = &h[((size_t)i * c.B + b) * 4];
            rp.push_back(r[0] / (ghz * 1e3));
            rx.push_back(r[1] / (ghz * 1e3));
            rz.push_back(r[2] / (ghz * 1e3));
            re.push_back(r[3] / (ghz * 1e3));
        }
    std::sort(rp.begin(), rp.end());
    std::sort(rx.begin(), rx.end());
    std::sort(rz.begin(), rz.end());
    std::sort(re.begin(), re.end());
    const size_t n = rx.size();
    static const char *wn[] = {"none", "before", "after"};
    static const char *pn[] = {"x", "beside", "none"};
    static const char *prn[] = {"-", "FMAs", "load", "wait", "warm"};
    printf("| %-6s | %5d | %d | %3d | %d | %5.1f | %3d | %-6s | %-6s | %-3s | %-4s | %-3s | %-4s | %6.2f | %5.2f | %5.2f / %5.2f | %5.2f | %5.2f / %5.2f |\n",
           c.name, c.K, c.S, c.B, c.V, (double)c.K / c.S * 4 / 1024, R, wn[wmode], pn[pw],
           cg ? "cg" : "ca", zfirst ? "z, x" : "x, z", pdl ? "yes" : "no", prn[probe],
           ms * 1e3 / kLen, rp[n / 2], rx[n / 2], rx[n * 9 / 10], rz[n / 2], re[n / 2],
           re[n * 9 / 10]);
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
    CK(cudaMalloc(&rec, (size_t)kLen * maxB * 4 * sizeof(long long)));
    float *z;
    CK(cudaMalloc(&z, (size_t)maxK * sizeof(float)));
    CK(cudaMemset(z, 0, (size_t)maxK * sizeof(float)));
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
    printf("| case | K | S | blocks | vectors | KB a block | replicas | weights | producer writes | "
           "x load | reads | PDL | probe | us a pair | rel->probe p50 | probe->first p50 / p90 | "
           "first->second p50 | rel->end p50 / p90 |\n");
    printf("| --- | --: | --: | --: | --: | --: | --: | --- | --- | --- | --- | --- | --- | --: | --: | --: | --: | --: |\n");
    for (const Case &c : cases) {
        auto rc = [&](int R, int wm, int pw, bool cg, bool zf, bool pdl, int probe = 0) {
            run_case(c, R, wm, pw, cg, zf, pdl, probe, x, nw, z, w, out, rec, st, ghz);
        };
        for (int R : {1, 2, 4, 8, 16, c.B}) rc(R, 1, 0, false, false, true);
        for (int R : {1, c.B}) rc(R, 2, 0, false, false, true);
        for (int R : {1, c.B}) rc(R, 0, 0, false, false, true);
        for (int wm : {1, 0}) rc(1, wm, 1, false, false, true);  // x's lines not written
        for (int wm : {1, 0}) rc(1, wm, 0, true, false, true);   // x through L2 only
        for (int wm : {1, 0}) rc(1, wm, 2, false, false, true);  // a producer that writes nothing
        for (int wm : {1, 0}) rc(1, wm, 0, false, true, true);   // z first, then x
        for (int wm : {1, 0}) rc(1, wm, 0, false, false, false); // no PDL: from the kernel's start
        for (int pr : {1, 2, 3})
            for (int wm : {1, 0}) rc(1, wm, 0, false, false, true, pr);
        rc(1, 0, 0, false, false, true, 4);  // (no weights, one vector)
    }
    CK(cudaFree(x));
    CK(cudaFree(nw));
    CK(cudaFree(out));
    CK(cudaFree(w));
    CK(cudaFree(rec));
    CK(cudaFree(z));
    return 0;
}
