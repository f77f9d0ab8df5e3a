// common.cuh: what every kernels/cuda/*.cu file shares (private to the module).
//
// - CUDA_CHECK(stmt): runs a CUDA runtime call; on failure records "statement: error at
//   function (file:line)" in the caller's loom_error and returns LOOM_ERR_CUDA from the
//   enclosing function. LAUNCH_CHECK() is CUDA_CHECK(cudaGetLastError()) and follows every
//   launch. Launchers therefore need a `loom_error *err` in scope.
// - The fast-path switches (read once from the environment) and a log-once helper.
// - launch(), launch_cluster(): kernel launches with programmatic dependent launch (PDL) where
//   the device has it, the latter in thread-block clusters (sm_90).
// - Warp reductions and fp16/bf16 helpers.
// Everything numeric that several kernels must compute identically (GEMV and GEMM, embedding
// and dequantization) lives in quant_blocks.cuh, not here.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// quant.h (included through cuda_kernels.h) is C11 and uses _Static_assert, which nvcc's C++
// front end does not know; C++17's static_assert has the same form.
#ifndef _Static_assert
#define _Static_assert static_assert
#endif
#include "kernels/cuda/cuda_kernels.h"

namespace loom_cuda {

// Records a failed CUDA call in err (may be NULL) and returns LOOM_ERR_CUDA.
loom_status cuda_fail(loom_error *err, cudaError_t e, const char *stmt, const char *func,
                      const char *file, int line);

// The fast-path switches; each is true unless its variable is "0".
enum Switch { SW_FAST_GEMV, SW_Q4K_U32, SW_FAST_EMBD, SW_FAST_NORM, SW_FAST_ATTN, SW_GEMV_MMA, SW_GEMV_MMA_Q6K, SW_ATTN_V6, SW_ATTN_FUSED, SW_GEMV_MMA_Q8, SW_COUNT };
bool fast(Switch s);

// GEMV passes prefetched per warp: 0 = by type (default), else LOOM_GEMV_UNROLL = 1, 2, 4
// (8 and 16 run as 4).
int gemv_unroll();

// Cluster split-K of the mma GEMV (LOOM_GEMV_MMA_SPLIT = 1, 2, 4, 8; 0 = by shape).
int gemv_mma_split();

// Warps a block of the Q4_K pair GEMV (LOOM_GEMV_PAIR_WARPS = 3, 4; 0 = by shape).
int gemv_pair_warps();

// LOOM_GEMV_MMA_Q4K_V: the Q4_K body, 1 = f16 hi + lo (v11), 2 = INT8.
int mma_q4k_variant();

// LOOM_GEMV_MMA_Q6K_V: the Q6_K body, 1 = f16 (two exact chains), 2 = INT8.
int mma_q6k_variant();

// Prints "loom cuda: <what>: <why>, using the simple path" once per `key` (a static flag).
void log_fallback_once(int *key, const char *what, const loom_error *why);

// Decode attention (v4): target blocks per multiprocessor when choosing splits; 1 unless
// LOOM_ATTN_BPSM = 1..16 (read with the switches).
int attn_blocks_per_sm();

// Device scratch (see loom_cuda_reserve_scratch); returns NULL when less than `bytes` is
// available and it cannot grow it (stream capturing, or the allocation failed).
void *scratch(size_t bytes, cudaStream_t stream);

// Number of multiprocessors and compute-capability major of the current device (cached; 0
// when it cannot be read).
int sm_count();
int cc_major();

// Programmatic dependent launch (PDL, compute capability 9.0+; on by default, LOOM_CUDA_PDL=0
// turns it off; decode attention v6 has it and requests KV tiles before its wait, bench/NOTES.md
// section 3, session 12; the other attention kernels are launched in order, 7.9):
// a kernel launched with launch() below may start while the kernel before it on the stream is
// still running, so that its launch and block scheduling overlap the other's tail. Every kernel
// launched through launch() MUST call pdl_wait() before its first global memory access (read or
// write) to anything earlier work on the stream may write: it returns once the previous kernel
// has completed and its writes are visible, so the stream order holds for RAW and WAR hazards
// alike (and transitively: the previous kernel waited for its own predecessor). Only what no
// kernel of the stream that may still run writes may be read before it: constant inputs
// (weights, uploaded before any kernel of the stream ran), which the matmul kernels request
// there so that the DRAM latency overlaps the previous kernel's tail, and what a launcher's
// contract puts in that class (decode attention v6's position and cache rows below it:
// cuda_kernels.h, "Early reads"). A kernel with pdl_wait() may also be launched with <<<>>>:
// then the wait returns at once. pdl_launch_dependents() lets the next kernel's blocks be scheduled before
// this grid finishes; calling it early is safe because the next kernel still waits (for this
// grid's completion, which comes after this grid's own wait). Most kernels call it FIRST, before
// pdl_wait() (the attention kernels and rope.cu call it after): the next kernel's blocks then become resident and request their weights while this
// one runs (bench/launch_floor.cu, H200: a 1-block kernel between two streaming kernels costs
// 0.7 us with the call before its wait, 2.0 us with it after).
bool pdl_on();

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// A hint that brings the 128-byte line holding p into L2 (no register, no fault on a valid
// address). Safe before pdl_wait() for any address: L2 is coherent, so a line the previous
// kernel writes afterwards is simply updated there.
__device__ __forceinline__ void prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// cp.async (sm_80+): 16 bytes global -> shared without registers, or 16 zero bytes when !ok
// (nothing is read); groups committed in order, wait_group<N> returns when at most N of this
// thread's groups are pending (the data of the others is then visible to this thread; other
// threads' copies need a barrier after their wait).
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool ok) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem),
                 "r"(ok ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Sets kernel's preferred shared-memory carveout to LOOM_CUDA_CARVEOUT's where it differs from
// what was set on it last (runtime.cu): launch_with's first step.
cudaError_t prefer_carveout(const void *kernel);

// kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of cluster.x x
// cluster.y x cluster.z blocks (sm_90; dim3(1, 1, 1): no cluster), with the PDL attribute when
// `early` (the kernel may then start before its predecessor on the stream completes), and the
// carveout of LOOM_CUDA_CARVEOUT.
template <typename... Params, typename... Args>
cudaError_t launch_with(void (*kernel)(Params...), bool early, dim3 grid, dim3 cluster,
                        dim3 block, size_t smem, cudaStream_t stream, Args... args) {
    if (const cudaError_t e = prefer_carveout(reinterpret_cast<const void *>(kernel))) return e;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cluster.x;
        attr[n].val.clusterDim.y = cluster.y;
        attr[n].val.clusterDim.z = cluster.z;
        n++;
    }
    if (early) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

// launch_with(kernel, pdl_on(), ...): the default for every kernel.
template <typename... Params, typename... Args>
cudaError_t launch_cluster(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block,
                           size_t smem, cudaStream_t stream, Args... args) {
    return launch_with(kernel, pdl_on(), grid, cluster, block, smem, stream, args...);
}

// launch_with(kernel, false, ...): for kernels that must not be resident early. Decode attention
// with nothing to do before its wait is one: launched early, its blocks (large shared memory,
// clusters) sit in their wait on the SMs while the QKV matmuls before it still run, and the
// decode step was 0.13-0.15 ms/token slower with its PDL attribute than without (bench/NOTES.md
// 7.9); v6, which requests its first KV tiles before the wait, gains with it (session 12) and
// uses this only where the caller asks (in_order). Such a kernel still calls pdl_wait() (it
// returns at once) and may trigger its own dependents.
template <typename... Params, typename... Args>
cudaError_t launch_cluster_in_order(void (*kernel)(Params...), dim3 grid, dim3 cluster,
                                    dim3 block, size_t smem, cudaStream_t stream, Args... args) {
    return launch_with(kernel, false, grid, cluster, block, smem, stream, args...);
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when pdl_on().
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args... args) {
    return launch_cluster(kernel, grid, dim3(1, 1, 1), block, smem, stream, args...);
}

// launch() without the PDL attribute (see launch_cluster_in_order).
template <typename... Params, typename... Args>
cudaError_t launch_in_order(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, Args... args) {
    return launch_with(kernel, false, grid, dim3(1, 1, 1), block, smem, stream, args...);
}

}  // namespace loom_cuda

#define CUDA_CHECK(stmt)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (stmt);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return loom_cuda::cuda_fail(err, e_, #stmt, __func__, __FILE__, __LINE__);     \
    } while (0)

#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

// Bad-argument exit for launchers: message names the kernel and the value.
#define ARG_FAIL(status, ...) return loom_error_set(err, status, __VA_ARGS__)

namespace loom_cuda {

constexpr int kThreads = 128;  // every kernel's block size (sm_87 budget)
constexpr int kWarps = kThreads / 32;

// A block of NW < kWarps warps that stands in for a kWarps one (the Q4_K pair GEMV of 3 warps,
// gemv_mma.cu): its warp w does the work of the kWarps block's warps w .. vwarp_end(w) - 1, one
// after the other (the last warp takes the rest), so every sum keeps that block's order and bits.
template <int NW>
__device__ __forceinline__ int vwarp_end(int w) {
    static_assert(NW >= 1 && NW <= kWarps, "1 .. kWarps warps");
    if constexpr (NW == kWarps) return w + 1;
    else return w == NW - 1 ? kWarps : w + 1;
}

// A register-prefetching loop over i = i0, i0 + stride, ... < n two steps at a time: step(0)
// computes on register set 0 while it loads the next step's into set 1, step(1) the other way,
// so no copy moves the prefetched set into place (gemv_mma.cu q4k_tile's kPingPong loop,
// q6k_i8_body.cuh q6k_i8_persist's). i is the caller's counter, advanced here.
template <typename I, typename Step>
__device__ __forceinline__ void ping_pong(I &i, I n, I stride, Step &&step) {
    while (i < n) {
        step(0);
        i += stride;
        if (i >= n) break;
        step(1);
        i += stride;
    }
}

// The traces' stamps (attention_v5.cu, mma_common.cuh gt_*): the global nanosecond timer and
// the SM a block runs on.
__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned smid() {
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum in double (RMSNorm's sum of squares), the same butterfly order everywhere.
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

// Grid size for a grid-stride loop over n items of `per_block` each, capped.
inline unsigned grid_for(int64_t n, int64_t per_block, int64_t cap = 65535) {
    int64_t g = (n + per_block - 1) / per_block;
    if (g < 1) g = 1;
    return (unsigned)(g < cap ? g : cap);
}

}  // namespace loom_cuda
