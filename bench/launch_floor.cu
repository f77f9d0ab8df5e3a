// launch_floor.cu: a standalone microbenchmark (not part of the kernel library) of what one
// kernel boundary costs inside a replayed CUDA graph on this GPU, the floor under every small
// kernel of loom's decode step (bench/NOTES.md section 7.5).
//
// Each case captures kLen launches of one kernel (or kLen groups: a kernel and 1-2 others after
// it) on one stream into a graph, replays it kReps times and reports the median time per launch
// or group (CUDA events around each replay):
//   empty     1 block, no body                           (plain stream order / PDL)
//   wave      4 blocks an SM x 128 threads, no body      (plain / PDL)
//   norm-ser  1 block x 128 threads: a 2560-float row that the previous launch wrote is summed
//             (double), then scaled and written back: one float4 load a thread per loop
//             iteration, as kernels/cuda/norm.cu's loops are written (plain / PDL)
//   norm-bat  the same work with all of a thread's loads issued before any arithmetic (PDL)
//   mm        a matmul stand-in: 4 blocks an SM stream an 8 MB slice of a 1 GB buffer (each
//             launch its own slice: DRAM, not L2), the first loads before the wait, as loom's
//             matmuls request their first weights; alone, and alternating with norm-bat, whose
//             launch_dependents comes after its wait (as loom's small kernels do) or before it
// What a norm costs between two matmuls = (mm, norm) group - mm alone.
// With PDL (programmatic stream serialization) each kernel calls griddepcontrol.wait before it
// touches memory that earlier launches write, and griddepcontrol.launch_dependents right after
// it (before it for mm and the "go before wait" norm).
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o launch_floor bench/launch_floor.cu
// Run:   ./launch_floor   (one line per case)
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static constexpr int kLen = 256, kReps = 25, kD = 2560;

__device__ __forceinline__ void dep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void dep_go() { asm volatile("griddepcontrol.launch_dependents;" :::); }

__global__ void empty_kernel(float *) {
    dep_wait();
    dep_go();
}

// y = x / rms(x), in place over one row of kD floats; 128 threads.
__device__ __forceinline__ double block_sum(double v, double *part) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    return (part[0] + part[1]) + (part[2] + part[3]);
}

__global__ void norm_serial(float *x) {
    dep_wait();
    dep_go();
    __shared__ double part[4];
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    double ss = 0;
    for (int i = threadIdx.x; i < kD / 4; i += 128) {
        float4 v = x4[i];
        ss += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
    }
    const float s = (float)(1.0 / sqrt(block_sum(ss, part) / kD + 1e-6));
    __syncthreads();
    for (int i = threadIdx.x; i < kD / 4; i += 128) {
        float4 v = x4[i];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        reinterpret_cast<float4 *>(x)[i] = v;
    }
}

template <bool EARLY>
__global__ void norm_batched(float *x) {
    if (EARLY) dep_go();
    dep_wait();
    if (!EARLY) dep_go();
    __shared__ double part[4];
    constexpr int kPer = kD / 4 / 128;  // 5 float4 a thread
    float4 v[kPer];
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
#pragma unroll
    for (int j = 0; j < kPer; j++) v[j] = x4[threadIdx.x + 128 * j];
    double ss = 0;
#pragma unroll
    for (int j = 0; j < kPer; j++)
        ss += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z +
              (double)v[j].w * v[j].w;
    const float s = (float)(1.0 / sqrt(block_sum(ss, part) / kD + 1e-6));
#pragma unroll
    for (int j = 0; j < kPer; j++) {
        float4 o = v[j];
        o.x *= s; o.y *= s; o.z *= s; o.w *= s;
        reinterpret_cast<float4 *>(x)[threadIdx.x + 128 * j] = o;
    }
}

static constexpr size_t kSlice = 8u << 20, kBig = 1024u << 20;  // bytes

// The matmul stand-in: block b reads its share of one kSlice-byte slice, 8 float4 a thread in
// flight, the first batch before the wait.
__global__ void mm_kernel(const float4 *w, size_t n4, float *out) {
    dep_go();
    const size_t per = n4 / gridDim.x, base = per * blockIdx.x;
    float acc = 0;
    float4 v[8];
    size_t i = threadIdx.x;
#pragma unroll
    for (int j = 0; j < 8; j++)
        v[j] = i + 128 * j < per ? w[base + i + 128 * j] : make_float4(0, 0, 0, 0);
    dep_wait();
    for (;;) {
#pragma unroll
        for (int j = 0; j < 8; j++) acc += v[j].x + v[j].y + v[j].z + v[j].w;
        i += 1024;
        if (i >= per) break;
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = i + 128 * j < per ? w[base + i + 128 * j] : make_float4(0, 0, 0, 0);
    }
    if (acc == 1234.5f) out[blockIdx.x] = acc;  // keeps the loads; never true on this data
}

struct Ctx {
    float *buf, *big, *out;
    int slice;
    cudaStream_t st;
};

enum Kind { EMPTY, NORM_SER, NORM_BAT, NORM_EARLY, MM };

static void launch_one(Ctx &c, Kind k, int grid, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(128);
    cfg.stream = c.st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    switch (k) {
    case EMPTY: CK(cudaLaunchKernelEx(&cfg, empty_kernel, c.buf)); break;
    case NORM_SER: CK(cudaLaunchKernelEx(&cfg, norm_serial, c.buf)); break;
    case NORM_BAT: CK(cudaLaunchKernelEx(&cfg, norm_batched<false>, c.buf)); break;
    case NORM_EARLY: CK(cudaLaunchKernelEx(&cfg, norm_batched<true>, c.buf)); break;
    case MM: {
        const size_t slices = kBig / kSlice;
        const float4 *w = reinterpret_cast<const float4 *>(
            reinterpret_cast<const char *>(c.big) + (size_t)(c.slice++ % slices) * kSlice);
        CK(cudaLaunchKernelEx(&cfg, mm_kernel, w, kSlice / 16, c.out));
        break;
    }
    }
}

// A graph of kLen launches of a (each followed by b when nb > 0), replayed; median us per a.
static float run_chain(Ctx &c, Kind a, int ga, Kind b, int gb, int nb, bool pdl) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kLen; i++) {
        launch_one(c, a, ga, pdl);
        for (int j = 0; j < nb; j++) launch_one(c, b, gb, pdl);
    }
    CK(cudaStreamEndCapture(c.st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < kReps + 2; r++) {
        CK(cudaEventRecord(e0, c.st));
        CK(cudaGraphLaunch(ge, c.st));
        CK(cudaEventRecord(e1, c.st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) t.push_back(ms * 1000.0f / kLen);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return t[t.size() / 2];
}

int main() {
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    Ctx c = {};
    CK(cudaMalloc(&c.buf, kD * sizeof(float)));
    CK(cudaMalloc(&c.big, kBig));
    CK(cudaMalloc(&c.out, 4096 * sizeof(float)));
    CK(cudaMemset(c.big, 0, kBig));
    std::vector<float> h(kD);
    for (int i = 0; i < kD; i++) h[i] = 1.0f + (float)(i % 7);
    CK(cudaMemcpy(c.buf, h.data(), kD * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    printf("launch_floor: %s, %d SMs; a graph of %d launches (or pairs) replayed %d times, "
           "median us a launch (pair)\n", p.name, sms, kLen, kReps);
    const int wave = 4 * sms;
    struct { const char *name; Kind a; int ga; Kind b; int gb; int nb; bool pdl; } cases[] = {
        {"empty 1 block, plain", EMPTY, 1, EMPTY, 0, 0, false},
        {"empty 1 block, PDL", EMPTY, 1, EMPTY, 0, 0, true},
        {"empty 4/SM wave, plain", EMPTY, wave, EMPTY, 0, 0, false},
        {"empty 4/SM wave, PDL", EMPTY, wave, EMPTY, 0, 0, true},
        {"norm-ser 1 block, plain", NORM_SER, 1, EMPTY, 0, 0, false},
        {"norm-ser 1 block, PDL", NORM_SER, 1, EMPTY, 0, 0, true},
        {"norm-bat 1 block, PDL", NORM_BAT, 1, EMPTY, 0, 0, true},
        {"mm 8 MB alone, plain", MM, wave, EMPTY, 0, 0, false},
        {"mm 8 MB alone, PDL", MM, wave, EMPTY, 0, 0, true},
        {"mm + norm-bat (go after wait)", MM, wave, NORM_BAT, 1, 1, true},
        {"mm + norm-bat (go before wait)", MM, wave, NORM_EARLY, 1, 1, true},
        {"mm + norm-ser (go after wait)", MM, wave, NORM_SER, 1, 1, true},
        {"mm + 2 norm-bat (go before)", MM, wave, NORM_EARLY, 1, 2, true},
    };
    for (auto &k : cases)
        printf("  %-32s %7.2f us\n", k.name, run_chain(c, k.a, k.ga, k.b, k.gb, k.nb, k.pdl));
    printf("  (copy of the 8 MB slice at 4.2 TB/s read+write would be %.2f us)\n",
           2.0 * kSlice / 4.2e12 * 1e6 / 2);
    CK(cudaStreamDestroy(c.st));
    CK(cudaFree(c.buf));
    CK(cudaFree(c.big));
    CK(cudaFree(c.out));
    return 0;
}
