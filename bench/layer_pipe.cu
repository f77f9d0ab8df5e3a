// layer_pipe.cu: a standalone benchmark (not part of the kernel library) of one question: can a
// persistent decode kernel -- one launch for all 36 layers, one block an SM -- keep the DRAM
// stream of a Qwen3-4B layer's matmul weights going through the layer's all-to-all dependencies,
// if each SM's weights stream into a shared-memory ring ahead of the phase boundaries (the weights
// depend on nothing, only the activations do)? Today's decode step launches a kernel a matmul and
// its boundaries are the hardware's (grid completion, PDL); stream_floor.cu measured that floor
// (4 read launches a layer with PDL: 14.55 us, + a 10 KB row read after each wait: 16.07) and one
// launch a layer with grid barriers and loads in registers (20.5). What is new here: a ring of up to
// ~180 KB an SM filled by a producer warp that never waits for a dependency, one cp.async.bulk a
// piece of a 16-row weight tile (loom's Q4_K tiles keep a tile's super-blocks contiguous, 2,304
// bytes each), and several ways of meeting the dependency. bench/NOTES.md 7 "Session 26" has the
// readings.
//
// Bytes, as stream_floor.cu (GGUF block sizes, one Q4_K_M layer): QKV 9,523,200 B, O 5,898,240,
// GU (gate + up) 28,016,640, DN (down, Q4_K) 14,008,320: 57,446,400 B a layer; 36 layers, every
// layer its own bytes (2.07 GB: DRAM figures). A phase's bytes are cut into items of whole 2,304-byte
// tile super-blocks (items(): super-blocks a piece for QKV, O, GU, DN), item j of a phase to block
// j % G; a ring page holds the largest item.
//
// pipe_kernel (sm_90a): G = one block an SM, CW consumer warps, a producer warp and a row warp, NP
// pages in dynamic shared memory, a full and an empty mbarrier a page. The producer walks the
// block's items of every layer and phase in order: waits for the page's empty barrier, arms its
// full barrier with the bytes, issues the copy (CH lanes, one cp.async.bulk each). The consumers
// walk the same items: at a phase's start they meet its dependency and take the phase's activation
// row (the x a matmul stages: 10 / 16 / 10 / 38 KB, zeros), then for each item wait for its page,
// read every 16-byte word (summed as uint32, plus K FFMA a word of synthetic math, stream_floor's
// work(); K < 0: the library's INT8 Q4_K super-block body instead, q4_page), release the page
// (OWN: each item read by one warp instead of all). After its last item
// a block signals the phase done. The dependency (BAR): 0 none (the stream); 1 a counter a phase
// that every block adds 1 to and waits on (SP: release arrival + acquire poll, variants with
// relaxed or fenced halves; counters zeroed before each launch); 2 as 1, and the producer also waits
// for the counter before its first copy of a phase (no prefetch across the dependency). The row
// (XM): 0 read from global memory by the consumers; 1 one bulk copy into shared memory by the row
// warp after the counter (BAR 0: once the block's consumers are done with the last row); 2 none;
// 3 written by the phase before as (value, flag) pairs and polled in place (no counter); 4 the
// same pairs copied in after a relaxed counter, a stale pair polled.
// cl_kernel: the hubs' protocol (see there): no release fence on a streaming SM. ix_kernel (session
// 27): every block computes and releases as pipe_kernel's BAR 1, but its weights are copied in by
// another block of its cluster (an issuer that computes nothing, or its partner), so no releasing
// SM has copies of its own in flight; the "arrival" column gives the SM cycles a phase arrival
// (its release fence) took. body_kernel: q4_page's work alone, on one resident page (no ring, no
// DRAM, no dependency).
// Timing: a graph of four small memsets (the sum, the counters, the flagged rows, the arrivals'
// cycles) and the launch, replayed 11 times, median over the 36 layers (the memsets add < 0.2 us
// a layer to every row).
// Check: the blocks' sums of every launch add up to the pool span's sum (computed on the device by
// a plain reduction), so every word was read exactly once or the run is reported; trace_row prints
// per-phase %globaltimer figures of one launch (skew, the dependency's latency).
//
// Build (from the repository root): nvcc -O3 -std=c++17 -arch=sm_90a -I. -Iinclude -Xptxas -v
//        -o layer_pipe bench/layer_pipe.cu
// Run:   ./layer_pipe [--quick] [--ix | --body]   (--quick: 2 layers of 1/64 the bytes, one replay:
//        for compute-sanitizer; --ix: only session 27's rows, ix_kernel's forms beside their
//        baselines; --body: the Q4_K body's pipe row alone, for ncu)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "bench/proto_util.cuh"           // CK, the event timing
#include "kernels/cuda/q4k_i8_body.cuh"  // K < 0 rows: the library's INT8 Q4_K super-block body

using loom_cuda::Q4I8Stage;

typedef unsigned long long u64;

constexpr int kPhases = 4;
constexpr uint32_t kSb = 2304;             // a 16-row Q4_K tile's super-block
static const int kXBytes[kPhases] = {10240, 16384, 10240, 38912};

struct Pipe {
    const uint8_t *base;          // layer l's phase f at base + l * layer + off[f]
    u64 layer, off[kPhases], bytes[kPhases];
    uint32_t item[kPhases];       // bytes an item (a multiple of 16)
    uint32_t page;                // bytes a ring page (the largest item)
    const uint4 *x;               // the activation row (zeros), xwords[f] 16-byte words a phase
    uint32_t xwords[kPhases];
    unsigned *ctr;                // [layers * 4] phase counters, zero at launch
    unsigned *total;              // the blocks' sums added
    u64 *trace;                   // null, or [G][layers][4][3] %globaltimer stamps (trace_row)
    u64 *ll;                      // XM 3, 4: two rows of kXMax / 4 (value, flag) pairs, zero at launch
    unsigned *stale;              // XM 4: pairs found stale in the copy (polled from global)
    u64 *rel;                     // [0] SM cycles thread 0 spent in its phase arrivals, [1] arrivals
    int layers;
};

__device__ __forceinline__ uint32_t smaddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(uint32_t a, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void mb_expect_tx(uint32_t a, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint32_t a) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}
template <bool CLUSTER = false>  // CLUSTER: acquire at cluster scope (arrivals from other blocks)
__device__ __forceinline__ void mb_wait(uint32_t a, uint32_t parity) {
    uint32_t ok;
    do {
        if constexpr (CLUSTER)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(ok) : "r"(a), "r"(parity) : "memory");
        else
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(ok) : "r"(a), "r"(parity) : "memory");
    } while (!ok);
}
// Another block's barrier (a shared::cluster address): mb_arm_remote arms it with the bytes of a
// copy by a relaxed arrival; mb_arrive_remote arrives on it (a page given back), RA 1 with release
// at cluster scope, 2 relaxed, 3 with release at CTA scope (PTX's default, CUTLASS's consumer
// release of a TMA pipeline's page).
__device__ __forceinline__ void mb_arm_remote(uint32_t a, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%0], %1;"
                 ::"r"(a), "r"(bytes) : "memory");
}
template <int RA>
__device__ __forceinline__ void mb_arrive_remote(uint32_t a) {
    if constexpr (RA == 1)
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(a) : "memory");
    else if constexpr (RA == 2)
        asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(a) : "memory");
    else
        asm volatile("mbarrier.arrive.release.cta.shared::cluster.b64 _, [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
template <int SP>
__device__ __forceinline__ void arrive(unsigned *p) {
    if constexpr (SP == 4) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    if constexpr (SP == 6) asm volatile("fence.acq_rel.cluster;" ::: "memory");
    if constexpr (SP >= 3) asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
    else asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}
__device__ __forceinline__ unsigned ld_relaxed(const unsigned *p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
// How a counter is met (SP): 0 a release arrival (red.release.gpu) and an ld.acquire poll; 1 the
// poll relaxed with a 64 ns sleep between polls, then an acquire fence; 3 a relaxed arrival and a
// relaxed poll without a fence (no ordering at all: what the fences cost, not a protocol); 4 the
// arrival's release as a fence of its own before a relaxed red, the poll relaxed (which side
// costs); 5 a relaxed arrival, the poll ld.acquire; 6 as 4 with the fence at cluster scope.
template <int SP>
__device__ __forceinline__ void spin_until(const unsigned *p, unsigned n) {
    if constexpr (SP == 0 || SP == 5) {
        while (ld_acquire(p) < n) {
        }
    } else {
        while (ld_relaxed(p) < n)
            if (SP == 1) __nanosleep(64);
        if (SP == 1) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    }
}
__device__ __forceinline__ u64 gtime() {
    u64 t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void consumers_sync(int cw) {
    asm volatile("bar.sync 1, %0;" ::"r"(cw * 32) : "memory");
}
// A block's arrival on a phase counter (thread 0), its duration added to p.rel: the red itself
// does not wait, so the time is the release's fence (MEMBAR) waiting for the SM's memory accesses.
template <int SP>
__device__ __forceinline__ void arrive_timed(const Pipe &p, unsigned *c) {
    const long long t0 = clock64();
    arrive<SP>(c);
    const long long t1 = clock64();
    atomicAdd(p.rel, (u64)(t1 - t0));
    atomicAdd(p.rel + 1, 1ull);
}

// K FFMA a 16-byte word (stream_floor.cu's work(), four chains a word).
template <int K>
__device__ __forceinline__ void work(uint4 v, float (&m)[4]) {
    float a[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w)};
#pragma unroll
    for (int j = 0; j < 4; j++) {
#pragma unroll
        for (int k = 1; k < K / 4; k++) a[j] = fmaf(a[j], a[j], 0.25f);
        if (K) m[j] = fmaf(a[j], a[j], m[j]);
    }
}

__device__ __forceinline__ uint32_t n_items(const Pipe &p, int f) {
    return (uint32_t)((p.bytes[f] + p.item[f] - 1) / p.item[f]);
}

constexpr uint32_t kXMax = 38912;  // the largest row (DN's 9,728 floats)
constexpr uint32_t kLLMax = kXMax / 4;  // its values

__device__ __forceinline__ ulonglong2 ld_relaxed_v2(const u64 *p) {
    ulonglong2 v;
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed_v2(u64 *p, u64 a, u64 b) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ bool ll_ok(ulonglong2 v, unsigned ep) {
    return (unsigned)(v.x >> 32) == ep && (unsigned)(v.y >> 32) == ep;
}

// The ring's two sides, shared by pipe_kernel, cl_kernel and ix_kernel. A streaming block blk of
// nblk owns pieces blk, blk + nblk, ... of every phase; `it` counts the block's pieces over all
// phases and layers, piece it in page it % NP. Ring: where the pieces go, as shared::cluster
// addresses (a block's own shared memory or, REMOTE, another block's of the cluster: ix_kernel).
struct Ring {
    uint32_t ring, full;  // the consumer block's pages and full barriers
    uint32_t empty;       // the empty barriers (in the producer's block)
};
// The producer warp: for every layer and phase (before(l, f) first: a dependency the producer
// waits for, or nothing), each piece's page once its consumers released it, its full barrier armed
// with the bytes and the piece copied by CH lanes (one cp.async.bulk each, whole 16-byte multiples).
// REMOTE: the consumers release pages from another block (the wait acquires at cluster scope) and
// the full barrier is armed by a relaxed remote arrival (no fence on the producer's SM).
template <int NP, int CH, bool REMOTE = false, typename Before>
__device__ __forceinline__ void produce_pieces(const Pipe &p, Ring r, int lane, uint32_t blk,
                                               uint32_t nblk, Before before) {
    uint32_t it = 0;
    for (int l = 0; l < p.layers; l++)
#pragma unroll
        for (int f = 0; f < kPhases; f++) {
            before(l, f);
            const uint8_t *src = p.base + (u64)l * p.layer + p.off[f];
            const uint32_t n = n_items(p, f);
            for (uint32_t j = blk; j < n; j += nblk, it++) {
                const uint32_t pg = it % NP;
                if (it >= NP) mb_wait<REMOTE>(r.empty + 8 * pg, ((it / NP) - 1) & 1);
                const u64 o = (u64)j * p.item[f];
                const uint32_t bytes = (uint32_t)min((u64)p.item[f], p.bytes[f] - o);
                if (lane == 0) {
                    if (REMOTE) mb_arm_remote(r.full + 8 * pg, bytes);
                    else mb_expect_tx(r.full + 8 * pg, bytes);
                }
                __syncwarp();
                const uint32_t piece = (bytes / CH + 15) & ~15u;
                if (lane < CH) {
                    const uint32_t s = lane * piece;
                    if (s < bytes)
                        bulk_g2s(r.ring + pg * p.page + s, src + o + s, min(piece, bytes - s),
                                 r.full + 8 * pg);
                }
            }
        }
}

// K < 0 (session 27): the real work of a Q4_K GEMV on a page instead of synthetic FFMA. Each warp
// takes whole 2,304-byte super-blocks of 16-row tiles (loom's tile layout: row i's 144-byte block
// at i * 144), loads them as q4_load_i8 does (from shared memory), stages the row's x of that
// super-block as int8 limbs (stage_q4i8) and runs q4_superblock_i8, the GEMV's per-super-block
// body; the split reductions and epilogues are not modelled. Every word of the page is still summed
// once (quants by their lanes, headers by lanes t == 0; a tail shorter than a super-block plainly)
// so the check holds. j: the piece's index in its phase (its super-blocks' place in the row); sbc:
// the block's super-blocks before this page (warp w takes those with (sbc + sb) % CW == w, so the
// warps share the stream evenly whatever a page holds).
template <int CW>
__device__ __forceinline__ void q4_page(const uint8_t *page, uint32_t bytes, uint32_t j,
                                        uint32_t item, const float *xrow, uint32_t xwords,
                                        Q4I8Stage<1> &st, uint32_t &sbc, unsigned &acc,
                                        float (&m)[4]) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint32_t nsb = bytes / kSb, xsb = xwords / 64;  // the row's super-blocks (256 floats)
    const uint32_t sb0 = j * (item / kSb);
    float a[1][2] = {{0.f, 0.f}};
    const uint32_t first = (uint32_t)(w - (int)(sbc % CW) + CW) % CW;
    sbc += nsb;
    for (uint32_t sb = first; sb < nsb; sb += CW) {
        const uint8_t *bg = page + sb * kSb + g * 144, *b8 = bg + 8 * 144;
        loom_cuda::Q4RawI8 r;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            r.q0[c] = *reinterpret_cast<const uint2 *>(bg + 16 + 32 * c + 8 * t);
            r.q8[c] = *reinterpret_cast<const uint2 *>(b8 + 16 + 32 * c + 8 * t);
            acc += (r.q0[c].x + r.q0[c].y) + (r.q8[c].x + r.q8[c].y);
        }
        r.h0 = *reinterpret_cast<const uint4 *>(bg);
        r.h8 = *reinterpret_cast<const uint4 *>(b8);
        if (t == 0)
            acc += (r.h0.x + r.h0.y) + (r.h0.z + r.h0.w) + (r.h8.x + r.h8.y) + (r.h8.z + r.h8.w);
        const float *xs = xrow + (size_t)((sb0 + sb) % xsb) * 256 + loom_cuda::q4_i8_xoff(lane);
        const float4 xa = *reinterpret_cast<const float4 *>(xs);
        const float4 xc = *reinterpret_cast<const float4 *>(xs + loom_cuda::kQ4I8Xc);
        __syncwarp();  // the stage's last super-block read by every lane
        loom_cuda::stage_q4i8<1>(st, 0, xa, xc, lane);
        __syncwarp();
        loom_cuda::q4_superblock_i8<1>(r, st, lane, a);
    }
    m[0] += a[0][0] + a[0][1];
    const uint4 *q = reinterpret_cast<const uint4 *>(page);
    for (uint32_t k = nsb * (kSb / 16) + threadIdx.x; k < bytes / 16; k += CW * 32) {
        const uint4 v = q[k];
        acc += (v.x + v.y) + (v.z + v.w);
    }
}

// The consumers' walk of phase f's pieces (CW warps, T threads): each page waited for, every
// 16-byte word summed into acc with K FFMA of work() into m (OWN: piece it read by warp it % CW
// alone), the page released (RA: 0 a local arrival; 1 a remote one with release at cluster scope;
// 2 a remote relaxed one, ordered only by the reads' values being used: not a protocol; 3 a remote
// one with release at CTA scope); tr (or null): the first page's stamp. K < 0: q4_page's work
// instead of the words' (xrow: the row in shared memory, st: the warps' stages, sbc: q4_page's).
template <int NP, int CW, int K, bool OWN, int RA = 0>
__device__ __forceinline__ void consume_pieces(const Pipe &p, int f, const uint8_t *ring,
                                               uint64_t *full, uint32_t empty, uint32_t blk,
                                               uint32_t nblk, uint32_t &it, unsigned &acc,
                                               float (&m)[4], u64 *tr, const float *xrow = nullptr,
                                               Q4I8Stage<1> *st = nullptr, uint32_t *sbc = nullptr) {
    static_assert(K >= 0 || !OWN, "the Q4_K body walks a page with every warp");
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, T = CW * 32;
    const uint32_t n = n_items(p, f);
    for (uint32_t j = blk; j < n; j += nblk, it++) {
        if (OWN && (int)(it % CW) != w) continue;
        const uint32_t pg = it % NP;
        mb_wait(smaddr(&full[pg]), (it / NP) & 1);
        if (tr && j == blk) tr[1] = gtime();  // its first page in hand
        const u64 o = (u64)j * p.item[f];
        const uint32_t words = (uint32_t)min((u64)p.item[f], p.bytes[f] - o) / 16;
        const uint4 *q = reinterpret_cast<const uint4 *>(ring + (size_t)pg * p.page);
        if constexpr (K < 0) {
            q4_page<CW>(ring + (size_t)pg * p.page, words * 16, j, p.item[f], xrow, p.xwords[f],
                        st[w], *sbc, acc, m);
        } else {
            for (uint32_t k = OWN ? lane : threadIdx.x; k < words; k += OWN ? 32 : T) {
                const uint4 v = q[k];
                work<K>(v, m);
                acc += (v.x + v.y) + (v.z + v.w);
            }
        }
        __syncwarp();
        if (lane == 0) {
            if (RA == 0) mb_arrive(empty + 8 * pg);
            else mb_arrive_remote<RA>(empty + 8 * pg);
        }
    }
}

// The consumers' end: their sums (and the math's result, so that it is not dead) added to total.
template <int CW, int K>
__device__ __forceinline__ void consumers_total(unsigned acc, const float (&m)[4], unsigned *part,
                                                unsigned *total) {
    if (K) acc += ((m[0] + m[1]) + (m[2] + m[3]) == 1234.5f);
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    consumers_sync(CW);
    if (threadIdx.x == 0) {
        unsigned s = 0;
        for (int i = 0; i < CW; i++) s += part[i];
        atomicAdd(total, s);
    }
}

template <int CW, int NP, int CH, int BAR, int K, bool OWN, int XM, int SP>
__global__ void __launch_bounds__((CW + 2) * 32, 1) pipe_kernel(const Pipe p) {
    extern __shared__ __align__(128) uint8_t ring[];
    uint8_t *xbuf = ring + (size_t)NP * p.page;  // XM 1: the phase's row
    __shared__ __align__(8) uint64_t full[NP], empty[NP], xbar, xfree;
    __shared__ unsigned part[CW];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned G = gridDim.x, b = blockIdx.x;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NP; i++) {
            mb_init(smaddr(&full[i]), 1);
            mb_init(smaddr(&empty[i]), OWN ? 1 : CW);
        }
        mb_init(smaddr(&xbar), 1);
        mb_init(smaddr(&xfree), CW);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (w == CW) {  // the producer
        const Ring r = {smaddr(ring), smaddr(full), smaddr(empty)};
        produce_pieces<NP, CH>(p, r, lane, b, G, [&](int l, int f) {
            if (BAR == 2 && (l | f) && lane == 0) spin_until<SP>(p.ctr + l * kPhases + f - 1, G);
        });
        return;
    }
    if (w == CW + 1) {  // the row's producer (XM 1): after the previous phase's counter (BAR 0:
                        // once this block's consumers are done with the last row), one copy
        if (XM == 1 && lane == 0)
            for (int l = 0; l < p.layers; l++)
                for (int f = 0; f < kPhases; f++) {
                    const int g = l * kPhases + f;
                    if (g && BAR) spin_until<SP>(p.ctr + g - 1, G);
                    if (g && !BAR) mb_wait(smaddr(&xfree), (g - 1) & 1);
                    mb_expect_tx(smaddr(&xbar), p.xwords[f] * 16);
                    bulk_g2s(smaddr(xbuf), p.x, p.xwords[f] * 16, smaddr(&xbar));
                }
        if (XM == 4 && lane == 0)  // the flagged row: relaxed counter as the hint, then one copy
            for (int l = 0; l < p.layers; l++)
                for (int f = 0; f < kPhases; f++) {
                    const unsigned g = (unsigned)(l * kPhases + f);
                    if (g == 0) continue;
                    spin_until<3>(p.ctr + g - 1, G);
                    mb_expect_tx(smaddr(&xbar), p.xwords[f] * 32);
                    bulk_g2s(smaddr(xbuf), p.ll + (size_t)(g & 1) * kLLMax, p.xwords[f] * 32, smaddr(&xbar));
                }
        return;
    }
    // the consumers
    unsigned acc = 0;
    float m[4] = {0.f, 0.f, 0.f, 0.f};
    const int T = CW * 32;
    uint32_t it = 0;
    static_assert(K >= 0 || XM == 1, "the Q4_K body stages x from the row in shared memory");
    Q4I8Stage<1> *st = reinterpret_cast<Q4I8Stage<1> *>(xbuf + kXMax);  // K < 0: the warps' stages
    if constexpr (K < 0) loom_cuda::q4_i8_stage_init<1>(st[w], lane);
    uint32_t sbc = 0;
    for (int l = 0; l < p.layers; l++)
#pragma unroll
        for (int f = 0; f < kPhases; f++) {
            if (XM == 3) {  // the row as (value, flag) pairs written by the phase before: polled
                const unsigned g = (unsigned)(l * kPhases + f);
                if (g) {
                    const u64 *row = p.ll + (size_t)(g & 1) * kLLMax;
                    const uint32_t n2 = p.xwords[f] * 2;  // 16-byte pieces of two pairs
                    for (uint32_t k0 = threadIdx.x; k0 < n2; k0 += 8 * T) {
                        ulonglong2 v[8];
#pragma unroll
                        for (int u = 0; u < 8; u++)
                            if (k0 + u * T < n2) v[u] = ld_relaxed_v2(row + 2 * (k0 + u * T));
#pragma unroll
                        for (int u = 0; u < 8; u++)
                            if (k0 + u * T < n2) {
                                while (!ll_ok(v[u], g)) v[u] = ld_relaxed_v2(row + 2 * (k0 + u * T));
                                acc += (unsigned)v[u].x + (unsigned)v[u].y;
                            }
                    }
                }
            } else if (XM == 4) {  // the flagged row copied after the counter; stale pairs polled
                const unsigned g = (unsigned)(l * kPhases + f);
                if (g) {
                    mb_wait(smaddr(&xbar), (g - 1) & 1);
                    const ulonglong2 *xs = reinterpret_cast<const ulonglong2 *>(xbuf);
                    const u64 *row = p.ll + (size_t)(g & 1) * kLLMax;
                    for (uint32_t k = threadIdx.x; k < p.xwords[f] * 2; k += T) {
                        ulonglong2 v = xs[k];
                        if (!ll_ok(v, g)) {
                            atomicAdd(p.stale, 1u);
                            do v = ld_relaxed_v2(row + 2 * k); while (!ll_ok(v, g));
                        }
                        acc += (unsigned)v.x + (unsigned)v.y;
                    }
                }
            } else if (XM == 1) {  // the row in shared memory (its copy follows the counter)
                mb_wait(smaddr(&xbar), (l * kPhases + f) & 1);
                const uint4 *xs = reinterpret_cast<const uint4 *>(xbuf);
                for (uint32_t k = threadIdx.x; k < p.xwords[f]; k += T) {
                    const uint4 v = xs[k];
                    acc += (v.x + v.y) + (v.z + v.w);
                }
            } else {
                if (BAR && (l | f)) {
                    if (threadIdx.x == 0) spin_until<SP>(p.ctr + l * kPhases + f - 1, G);
                    consumers_sync(CW);
                }
                for (uint32_t k = threadIdx.x; XM == 0 && k < p.xwords[f]; k += T) {  // the row (L2)
                    const uint4 v = __ldcg(p.x + k);
                    acc += (v.x + v.y) + (v.z + v.w);
                }
            }
            u64 *tr = p.trace && threadIdx.x == 0 ? p.trace + (((u64)b * p.layers + l) * kPhases + f) * 3 : nullptr;
            if (tr) tr[0] = gtime();  // the phase's start (its dependency met)
            consume_pieces<NP, CW, K, OWN>(p, f, ring, full, smaddr(empty), b, G, it, acc, m, tr,
                                           reinterpret_cast<const float *>(xbuf), st, &sbc);
            if (XM == 1 && !BAR && lane == 0) mb_arrive(smaddr(&xfree));  // the row is free
            if (BAR || XM >= 3) consumers_sync(CW);
            if (XM >= 3 && l * kPhases + f + 1 < p.layers * kPhases) {  // this block's share of the next row
                const unsigned g = (unsigned)(l * kPhases + f + 1);
                const uint32_t nv = p.xwords[(f + 1) % kPhases] * 4;
                const uint32_t per = ((nv + G - 1) / G + 1) & ~1u;
                const uint32_t e = min(nv, (b + 1) * per);
                u64 *row = p.ll + (size_t)(g & 1) * kLLMax;
                for (uint32_t k = b * per + 2 * threadIdx.x; k < e; k += 2 * T)
                    st_relaxed_v2(row + k, (u64)g << 32, (u64)g << 32);
            }
            if (tr) tr[2] = gtime();  // its last item done
            if ((BAR || XM == 4) && threadIdx.x == 0)
                arrive_timed<XM == 4 ? 3 : SP>(p, p.ctr + l * kPhases + f);
        }
    consumers_total<CW, K>(acc, m, part, p.total);
}

// ---- The cluster protocol (cl_kernel): no release fence on a streaming SM ----------------------
// A gpu-scope (or cluster-scope) release fence waits for the SM's outstanding bulk copies (SP 4, 6:
// +4 us a layer), so here no streaming SM issues one. Clusters of CS blocks, one an SM: ranks
// 0 .. CS - 2 stream and compute as pipe_kernel's blocks (their items j % NC of the NC streaming
// blocks), rank CS - 1 is the cluster's hub and streams nothing. After a phase a streaming block
// arms its row barrier for the next row and pushes its share of that row (the values it "computed":
// zeros) into the hub's shared memory with st.async (complete_tx on the hub's collect barrier: no
// fence, the barrier's completion orders the bytes). The hub, when its cluster's shares are in,
// stores them to the global row, adds 1 to the phase counter with a release (its SM has no bulk
// copies in flight: cheap), waits (acquire) for every hub, and copies the whole row into each of
// its streaming blocks' shared memory (cp.async.bulk global -> peer shared memory, complete_tx on
// the block's row barrier). A correct protocol: every byte a block reads was released by the hub
// that stored it and acquired by the hub that copied it.
__device__ __forceinline__ uint32_t mapa(uint32_t a, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void st_async4(uint32_t addr, uint4 v, uint32_t bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar) : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

struct ClShape {  // one row's split: values a streaming block pushes (a multiple of 4)
    uint32_t nv, per;
};
__device__ __forceinline__ ClShape cl_shape(const Pipe &p, int f, uint32_t NC) {
    const uint32_t nv = p.xwords[f] * 4;
    return {nv, ((nv + NC - 1) / NC + 3) & ~3u};
}
// Values of the row that streaming block cb pushes: [cb * per, e)
__device__ __forceinline__ uint32_t cl_end(ClShape s, uint32_t cb) { return min(s.nv, (cb + 1) * s.per); }

template <int CW, int NP, int CS, int K>
__global__ void __launch_bounds__((CW + 1) * 32, 1) cl_kernel(const Pipe p) {
    extern __shared__ __align__(128) uint8_t ring[];
    uint8_t *xbuf = ring + (size_t)NP * p.page;  // streaming blocks: the row; the hub: the collected shares
    __shared__ __align__(8) uint64_t full[NP], empty[NP], xbar, collect;
    __shared__ unsigned part[CW];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t rank = cluster_rank(), cl = blockIdx.x / CS, ncl = gridDim.x / CS;
    const uint32_t NC = ncl * (CS - 1), cb = cl * (CS - 1) + rank;  // streaming block index
    const bool hub = rank == CS - 1;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NP; i++) {
            mb_init(smaddr(&full[i]), 1);
            mb_init(smaddr(&empty[i]), CW);
        }
        mb_init(smaddr(&xbar), 1);
        mb_init(smaddr(&collect), 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync_all();  // every barrier of the cluster initialised before any remote use
    const int nph = p.layers * kPhases;
    if (hub) {
        const int T = (CW + 1) * 32;
        for (int g = 0; g + 1 < nph; g++) {  // collects row g + 1 (the outputs of phase g)
            const int nf = (g + 1) % kPhases;
            const ClShape s = cl_shape(p, nf, NC);
            const uint32_t v0 = min(s.nv, cl * (CS - 1) * s.per), v1 = min(s.nv, (cl + 1) * (CS - 1) * s.per);
            u64 *rowg = p.ll + (size_t)((g + 1) & 1) * kLLMax;  // the global row (floats)
            float *row = reinterpret_cast<float *>(rowg);
            if (threadIdx.x == 0) {
                if (v1 > v0) {
                    mb_expect_tx(smaddr(&collect), (v1 - v0) * 4);
                    mb_wait(smaddr(&collect), g & 1);
                } else {
                    mb_arrive(smaddr(&collect));  // (keeps the barrier's phase count)
                }
            }
            consumers_sync(CW + 1);
            const float *sh = reinterpret_cast<const float *>(xbuf);
            for (uint32_t k = v0 + threadIdx.x; k < v1; k += T) row[k] = sh[k - v0];
            consumers_sync(CW + 1);
            if (threadIdx.x == 0) {
                asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p.ctr + g) : "memory");
                while (ld_acquire(p.ctr + g) < ncl) {
                }
                asm volatile("fence.proxy.async.global;" ::: "memory");
                for (uint32_t r = 0; r + 1 < CS; r++)
                    bulk_g2s(mapa(smaddr(xbuf), r), row, s.nv * 4, mapa(smaddr(&xbar), r));
            }
        }
        return;
    }
    if (w == CW) {  // the producer, over the NC streaming blocks
        const Ring r = {smaddr(ring), smaddr(full), smaddr(empty)};
        produce_pieces<NP, 1>(p, r, lane, cb, NC, [](int, int) {});
        return;
    }
    unsigned acc = 0;
    float m[4] = {0.f, 0.f, 0.f, 0.f};
    const int T = CW * 32;
    uint32_t it = 0;
    const uint32_t hub_xbuf = mapa(smaddr(xbuf), CS - 1), hub_collect = mapa(smaddr(&collect), CS - 1);
    for (int l = 0; l < p.layers; l++)
#pragma unroll
        for (int f = 0; f < kPhases; f++) {
            const int g = l * kPhases + f;
            if (g) {  // row g, copied in by the hub
                mb_wait(smaddr(&xbar), (g - 1) & 1);
                const uint4 *xs = reinterpret_cast<const uint4 *>(xbuf);
                for (uint32_t k = threadIdx.x; k < p.xwords[f]; k += T) {
                    const uint4 v = xs[k];
                    acc += (v.x + v.y) + (v.z + v.w);
                }
            }
            consume_pieces<NP, CW, K, false>(p, f, ring, full, smaddr(empty), cb, NC, it, acc, m,
                                             nullptr);
            consumers_sync(CW);  // every read of the row and of this phase's pages done
            if (g + 1 < nph) {
                const int nf = (f + 1) % kPhases;
                if (threadIdx.x == 0) mb_expect_tx(smaddr(&xbar), p.xwords[nf] * 16);
                const ClShape s = cl_shape(p, nf, NC);
                const uint32_t v0 = min(s.nv, cl * (CS - 1) * s.per);  // the hub's first value
                const uint32_t b0 = min(s.nv, cb * s.per), e = cl_end(s, cb);
                for (uint32_t k = b0 + 4 * threadIdx.x; k < e; k += 4 * T)  // this block's outputs (zeros)
                    st_async4(hub_xbuf + (k - v0) * 4, make_uint4(0u, 0u, 0u, 0u), hub_collect);
            }
        }
    consumers_total<CW, K>(acc, m, part, p.total);
}

// ---- Copies issued by another SM (ix_kernel): no bulk copy in flight from a releasing SM ---------
// Session 26's cost is a release fence waiting for the copies its SM issued. Here the blocks that
// compute and release issue no copy of their own weights: MODE 0, clusters of CS whose rank CS - 1
// (the issuer) streams nothing into itself and runs one producer warp for each of the other CS - 1
// ranks, copying their pieces into their rings (cp.async.bulk into peer shared memory, complete_tx
// on the peer's full barrier; the peer releases a page by a remote arrival on the issuer's empty
// barrier); MODE 1, pairs (CS 2) where each block's producer warp streams its partner's pieces (so
// every SM computes, and each has the partner's copies in flight: does the fence wait for copies
// its SM issued into another SM?). The computing blocks meet the phases as pipe_kernel's BAR 1
// (release arrival, acquire poll; BAR 0: no dependency) with the row (XM) 0 from L2, 1 one bulk
// copy by the row warp after the counter, 2 none; RA as consume_pieces'. Every thread ends at a
// cluster barrier, so no block leaves while a peer may still arrive on its barriers.
constexpr int ix_warps(int CW) { return CW + 2 > 8 ? CW + 2 : 8; }
template <int CW, int NP, int CS, int K, int BAR, int XM, int RA, int MODE, int CH>
__global__ void __launch_bounds__(ix_warps(CW) * 32, 1) ix_kernel(const Pipe p) {
    static_assert(CS - 1 <= 8 && (MODE == 0 || CS == 2), "ix_kernel's shape");
    extern __shared__ __align__(128) uint8_t ring[];
    uint8_t *xbuf = ring + (size_t)NP * p.page;
    __shared__ __align__(8) uint64_t full[NP], empty[CS][NP], xbar;
    __shared__ unsigned part[CW];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t rank = cluster_rank(), cl = blockIdx.x / CS, ncl = gridDim.x / CS;
    const bool issuer = MODE == 0 && rank == CS - 1;
    const uint32_t NC = MODE == 0 ? ncl * (CS - 1) : gridDim.x;  // computing blocks
    const uint32_t cb = MODE == 0 ? cl * (CS - 1) + rank : blockIdx.x;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NP; i++) {
            mb_init(smaddr(&full[i]), 1);
            for (int r = 0; r < CS; r++) mb_init(smaddr(&empty[r][i]), CW);
        }
        mb_init(smaddr(&xbar), 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync_all();  // every barrier of the cluster initialised before any remote use
    const auto nothing = [](int, int) {};
    if (issuer) {
        if (w < CS - 1) {  // rank w's producer
            const Ring r = {mapa(smaddr(ring), w), mapa(smaddr(full), w), smaddr(&empty[w][0])};
            produce_pieces<NP, CH, true>(p, r, lane, cl * (CS - 1) + w, NC, nothing);
        }
    } else if (w == CW && MODE == 1) {  // the partner's producer
        const uint32_t pr = rank ^ 1;
        const Ring r = {mapa(smaddr(ring), pr), mapa(smaddr(full), pr), smaddr(&empty[0][0])};
        produce_pieces<NP, CH, true>(p, r, lane, blockIdx.x ^ 1, NC, nothing);
    } else if (w == CW + 1 && XM == 1) {  // the row, after each counter
        if (lane == 0)
            for (int g = 0; g < p.layers * kPhases; g++) {
                if (g) spin_until<0>(p.ctr + g - 1, NC);
                const int f = g % kPhases;
                mb_expect_tx(smaddr(&xbar), p.xwords[f] * 16);
                bulk_g2s(smaddr(xbuf), p.x, p.xwords[f] * 16, smaddr(&xbar));
            }
    } else if (w < CW) {  // the consumers
        // MODE 0: this block's pages are released on the issuer's barriers; MODE 1: the partner's
        const uint32_t src = MODE == 0 ? CS - 1 : rank ^ 1;
        const uint32_t emp = mapa(smaddr(&empty[MODE == 0 ? rank : 0][0]), src);
        unsigned acc = 0;
        float m[4] = {0.f, 0.f, 0.f, 0.f};
        const int T = CW * 32;
        uint32_t it = 0;
        static_assert(K >= 0 || XM == 1, "the Q4_K body stages x from the row in shared memory");
        Q4I8Stage<1> *st = reinterpret_cast<Q4I8Stage<1> *>(xbuf + kXMax);  // K < 0: warps' stages
        if constexpr (K < 0) loom_cuda::q4_i8_stage_init<1>(st[w], lane);
        uint32_t sbc = 0;
        for (int l = 0; l < p.layers; l++)
#pragma unroll
            for (int f = 0; f < kPhases; f++) {
                const int g = l * kPhases + f;
                if (XM == 1) {
                    mb_wait(smaddr(&xbar), g & 1);
                    const uint4 *xs = reinterpret_cast<const uint4 *>(xbuf);
                    for (uint32_t k = threadIdx.x; k < p.xwords[f]; k += T) {
                        const uint4 v = xs[k];
                        acc += (v.x + v.y) + (v.z + v.w);
                    }
                } else {
                    if (BAR && g) {
                        if (threadIdx.x == 0) spin_until<0>(p.ctr + g - 1, NC);
                        consumers_sync(CW);
                    }
                    for (uint32_t k = threadIdx.x; XM == 0 && k < p.xwords[f]; k += T) {
                        const uint4 v = __ldcg(p.x + k);
                        acc += (v.x + v.y) + (v.z + v.w);
                    }
                }
                consume_pieces<NP, CW, K, false, RA>(p, f, ring, full, emp, cb, NC, it, acc, m,
                                                     nullptr, reinterpret_cast<const float *>(xbuf),
                                                     st, &sbc);
                if (BAR) {
                    consumers_sync(CW);
                    if (threadIdx.x == 0) arrive_timed<0>(p, p.ctr + g);
                }
            }
        consumers_total<CW, K>(acc, m, part, p.total);
    }
    cluster_sync_all();
}

// The body alone (body_kernel): q4_page's work on one page that never changes, no ring, no DRAM, no
// dependency -- each block walks the super-blocks pipe_kernel's block would (its items of every
// phase and layer), so the time is the body's throughput on 132 SMs and CW warps. Its sum is not
// the pool's (the page is zeros), so the row reports no check.
template <int CW>
__global__ void __launch_bounds__(CW * 32, 1) body_kernel(const Pipe p) {
    extern __shared__ __align__(128) uint8_t page[];
    const float *xrow = reinterpret_cast<const float *>(page + p.page);
    Q4I8Stage<1> *st = reinterpret_cast<Q4I8Stage<1> *>(page + p.page + kXMax);
    __shared__ unsigned part[CW];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (uint32_t k = threadIdx.x; k < (p.page + kXMax) / 16; k += CW * 32)
        reinterpret_cast<uint4 *>(page)[k] = make_uint4(0u, 0u, 0u, 0u);
    loom_cuda::q4_i8_stage_init<1>(st[w], lane);
    __syncthreads();
    unsigned acc = 0;
    float m[4] = {0.f, 0.f, 0.f, 0.f};
    uint32_t sbc = 0;
    for (int l = 0; l < p.layers; l++)
        for (int f = 0; f < kPhases; f++) {
            const uint32_t n = n_items(p, f);
            for (uint32_t j = blockIdx.x; j < n; j += gridDim.x) {
                const u64 o = (u64)j * p.item[f];
                const uint32_t bytes = (uint32_t)min((u64)p.item[f], p.bytes[f] - o) & ~15u;
                q4_page<CW>(page, bytes, j, p.item[f], xrow, p.xwords[f], st[w], sbc, acc, m);
            }
        }
    consumers_total<CW, -1>(acc, m, part, p.total);
}

__global__ void fill_kernel(unsigned *p, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        p[i] = ((unsigned)i * 2654435761u + 0x9E3779B9u) ^ (unsigned)(i >> 7);
}
__global__ void sum_kernel(const unsigned *p, u64 n, unsigned *total) {
    unsigned s = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) s += p[i];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, s);
}

// ---- host ----
static cudaStream_t g_s;
static int g_sms, g_reps = 11, g_fail = 0;
static bool g_nocheck;  // a row whose sum is not the pool's (body_kernel)
static double g_copy;  // GB/s, read + write
static unsigned *g_total, *g_ctr, g_expect;
static Pipe g_p;

// Captures enqueue() into a graph (after zeroing the sum and the counters), replays it, checks the
// sum of the last replay; returns the median ms.
template <typename F>
static double graph_ms(const char *name, F enqueue) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
    CK(cudaMemsetAsync(g_total, 0, 4, g_s));
    CK(cudaMemsetAsync(g_ctr, 0, (size_t)g_p.layers * kPhases * 4, g_s));
    CK(cudaMemsetAsync(g_p.ll, 0, 2 * kLLMax * 8, g_s));
    CK(cudaMemsetAsync(g_p.rel, 0, 16, g_s));
    enqueue();
    CK(cudaStreamEndCapture(g_s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    const float ms = graph_median_ms(ge, g_s, g_reps);
    unsigned got;
    CK(cudaMemcpy(&got, g_total, 4, cudaMemcpyDeviceToHost));
    if (!g_nocheck && got != g_expect) {
        g_fail++;
        fprintf(stderr, "CHECK FAILED: %s: sum %08x != %08x\n", name, got, g_expect);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return ms;
}

// A row of the table: us a layer, GB/s, % of copy, and the mean SM cycles of a phase arrival
// (its release fence) in the last replay, where the form has arrivals.
static void row(const char *name, double ms) {
    const double us = ms * 1e3 / g_p.layers;
    const double bytes = (double)(g_p.bytes[0] + g_p.bytes[1] + g_p.bytes[2] + g_p.bytes[3]);
    const double gbs = bytes / (us * 1e3);
    u64 rel[2];
    CK(cudaMemcpy(rel, g_p.rel, 16, cudaMemcpyDeviceToHost));
    char rs[32] = "";
    if (rel[1]) snprintf(rs, sizeof rs, "%.0f", (double)rel[0] / rel[1]);
    printf("| %-64s | %8.2f | %7.0f | %6.1f%% | %8s |\n", name, us, gbs, 100.0 * gbs / g_copy, rs);
}

// XM: the activation row read at each phase's start: 0 by the consumers from global memory, 1
// one bulk copy into shared memory after the counter (a warp of its own), 2 none, 3 written by the
// phase before as (value, flag) pairs and polled (no counter, no fence), 4 the same pairs copied
// into shared memory after a relaxed counter (a hint only: a stale pair is polled from global).
template <int CW, int NP, int CH, int BAR, int K, bool OWN = false, int XM = 0, int SP = 0>
static void pipe_row(const char *what) {
    static_assert(XM < 3 || BAR == 0, "the row's flags are the dependency");
    auto kern = pipe_kernel<CW, NP, CH, BAR, K, OWN, XM, SP>;
    const int smem = NP * g_p.page + (XM == 1 ? kXMax : XM == 4 ? 2 * kXMax : 0) +
                     (K < 0 ? CW * (int)sizeof(Q4I8Stage<1>) : 0);
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, (CW + 2) * 32, smem));
    if (per_sm < 1) {
        printf("| %-64s | does not fit |\n", what);
        return;
    }
    char name[160];
    snprintf(name, sizeof name, "pipe CW %d NP %d BAR %d K %d%s x%d sp%d i%d: %s", CW, NP, BAR, K,
             OWN ? " own" : "", XM, SP, g_p.item[3] / kSb, what);
    const double ms = graph_ms(name, [&] {
        kern<<<g_sms, (CW + 2) * 32, smem, g_s>>>(g_p);
        CK(cudaGetLastError());
    });
    row(name, ms);
}

// One traced launch (outside a graph): per phase, averaged over layers 4 .. L - 5, us: the spread
// of the blocks' ends (skew), last end -> first start of the next phase (the counter's latency),
// the spread of the starts, start -> first page, and the phase's span (first start -> last end).
template <int CW, int NP, int BAR, int XM, int SP = 0>
static void trace_row(const char *what) {
    auto kern = pipe_kernel<CW, NP, 1, BAR, 0, false, XM, SP>;
    const int smem = NP * g_p.page + (XM == 1 ? kXMax : XM == 4 ? 2 * kXMax : 0);
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const size_t n = (size_t)g_sms * g_p.layers * kPhases * 3;
    u64 *d;
    CK(cudaMalloc(&d, n * 8));
    CK(cudaMemset(d, 0, n * 8));
    Pipe q = g_p;
    q.trace = d;
    CK(cudaMemsetAsync(g_ctr, 0, (size_t)g_p.layers * kPhases * 4, g_s));
    CK(cudaMemsetAsync(g_p.ll, 0, 2 * kLLMax * 8, g_s));
    kern<<<g_sms, (CW + 2) * 32, smem, g_s>>>(q);
    CK(cudaStreamSynchronize(g_s));
    std::vector<u64> h(n);
    CK(cudaMemcpy(h.data(), d, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    auto at = [&](int b, int l, int f, int k) { return (double)h[(((size_t)b * g_p.layers + l) * kPhases + f) * 3 + k]; };
    printf("trace %s (CW %d NP %d BAR %d x%d sp%d), us averaged over layers:\n", what, CW, NP, BAR, XM, SP);
    printf("| phase | span | ends' skew | last end -> first start of the next | starts' spread | start -> first page (mean / max) |\n|---|---:|---:|---:|---:|---:|\n");
    const int l0 = g_p.layers > 10 ? 4 : 0, l1 = g_p.layers > 10 ? g_p.layers - 5 : g_p.layers - 1;
    static const char *nm[kPhases] = {"QKV", "O", "GU", "DN"};
    for (int f = 0; f < kPhases; f++) {
        double span = 0, skew = 0, lat = 0, spread = 0, fp = 0, fpmax = 0;
        int cnt = 0;
        for (int l = l0; l < l1; l++, cnt++) {
            const int nl = f == kPhases - 1 ? l + 1 : l, nf = (f + 1) % kPhases;
            double e0 = 1e30, e1 = 0, s0 = 1e30, s1 = 0, n0 = 1e30, m = 0, mx = 0;
            for (int b = 0; b < g_sms; b++) {
                e0 = std::min(e0, at(b, l, f, 2));
                e1 = std::max(e1, at(b, l, f, 2));
                s0 = std::min(s0, at(b, l, f, 0));
                s1 = std::max(s1, at(b, l, f, 0));
                n0 = std::min(n0, at(b, nl, nf, 0));
                const double d1 = at(b, l, f, 1) ? at(b, l, f, 1) - at(b, l, f, 0) : 0.0;
                m += d1;
                mx = std::max(mx, d1);
            }
            span += e1 - s0;
            skew += e1 - e0;
            lat += n0 - e1;
            spread += s1 - s0;
            fp += m / g_sms;
            fpmax += mx;
        }
        printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f |\n", nm[f], span / cnt / 1e3, skew / cnt / 1e3,
               lat / cnt / 1e3, spread / cnt / 1e3, fp / cnt / 1e3, fpmax / cnt / 1e3);
    }
}

// A launch of kern in clusters of CS blocks of `threads`, as many clusters as are resident at once
// (a persistent grid must be resident as a whole): c (which points at `at`) gets that grid; returns
// the number of clusters (0: none fits).
template <typename Kern>
static int cluster_config(Kern kern, int CS, int threads, int smem, cudaLaunchConfig_t &c,
                          cudaLaunchAttribute &at) {
    c = {};
    at.id = cudaLaunchAttributeClusterDimension;
    at.val.clusterDim.x = CS;
    at.val.clusterDim.y = 1;
    at.val.clusterDim.z = 1;
    c.blockDim = dim3(threads);
    c.dynamicSmemBytes = smem;
    c.stream = g_s;
    c.attrs = &at;
    c.numAttrs = 1;
    c.gridDim = dim3(CS * (g_sms / CS));
    int ncl = 0;
    CK(cudaOccupancyMaxActiveClusters(&ncl, kern, &c));
    ncl = std::min(ncl, g_sms / CS);
    c.gridDim = dim3(CS * std::max(ncl, 1));
    return ncl;
}

// The cluster protocol: clusters of CS (CS - 1 streaming blocks and a hub), as many clusters as
// fit at once (a persistent grid must be resident as a whole).
template <int CW, int NP, int CS, int K>
static void cl_row(const char *what) {
    auto kern = cl_kernel<CW, NP, CS, K>;
    const int smem = NP * g_p.page + kXMax;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t c;
    cudaLaunchAttribute at;
    const int ncl = cluster_config(kern, CS, (CW + 1) * 32, smem, c, at);
    if (ncl < 1) {
        printf("| %-64s | does not fit |\n", what);
        return;
    }
    char name[160];
    snprintf(name, sizeof name, "cluster CW %d NP %d CS %d (%d clusters, %d streaming SMs) K %d: %s", CW, NP, CS, ncl,
             ncl * (CS - 1), K, what);
    const double ms = graph_ms(name, [&] { CK(cudaLaunchKernelEx(&c, kern, g_p)); });
    row(name, ms);
}

// body_kernel's row: the Q4_K body alone on 132 SMs.
template <int CW>
static void body_row() {
    auto kern = body_kernel<CW>;
    const int smem = g_p.page + kXMax + CW * (int)sizeof(Q4I8Stage<1>);
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    char name[160];
    snprintf(name, sizeof name,
             "body alone CW %d: the Q4_K body on one resident page, no ring (no check)", CW);
    g_nocheck = true;
    const double ms = graph_ms(name, [&] {
        kern<<<g_sms, CW * 32, smem, g_s>>>(g_p);
        CK(cudaGetLastError());
    });
    g_nocheck = false;
    row(name, ms);
}

// ix_kernel's forms: clusters of CS, as many as fit at once.
template <int CW, int NP, int CS, int K, int BAR, int XM, int RA, int MODE, int CH = 1>
static void ix_row(const char *what) {
    static_assert(XM != 1 || BAR == 1, "the row's copy follows the counters");
    auto kern = ix_kernel<CW, NP, CS, K, BAR, XM, RA, MODE, CH>;
    const int smem = NP * g_p.page + kXMax + (K < 0 ? CW * (int)sizeof(Q4I8Stage<1>) : 0);
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t c;
    cudaLaunchAttribute at;
    const int ncl = cluster_config(kern, CS, ix_warps(CW) * 32, smem, c, at);
    if (ncl < 1) {
        printf("| %-64s | does not fit |\n", what);
        return;
    }
    const int nc = MODE == 0 ? ncl * (CS - 1) : ncl * CS;
    char name[160];
    snprintf(name, sizeof name, "%s CS %d (%d computing SMs) CW %d BAR %d x%d ra%d K %d CH %d: %s",
             MODE == 0 ? "issuer" : "partner", CS, nc, CW, BAR, XM, RA, K, CH, what);
    const double ms = graph_ms(name, [&] { CK(cudaLaunchKernelEx(&c, kern, g_p)); });
    row(name, ms);
}

// ix_row over the cluster sizes CS..., in that order (rows that differ in CS alone).
template <int CW, int NP, int K, int BAR, int XM, int RA, int MODE, int CH, int... CS>
static void ix_rows_cs(const char *what) {
    (ix_row<CW, NP, CS, K, BAR, XM, RA, MODE, CH>(what), ...);
}

// The run's last line and exit status: every checked launch's sum, or FAILED.
static int verdict() {
    printf("\n%s\n", g_fail ? "FAILED" : "every launch's sum checked: ok");
    return g_fail ? 1 : 0;
}

int main(int argc, char **argv) {
    int quick = 0, ix = 0, body = 0;
    for (int i = 1; i < argc; i++) {
        quick |= !strcmp(argv[i], "--quick");
        ix |= !strcmp(argv[i], "--ix");
        body |= !strcmp(argv[i], "--body");
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    const u64 div = quick ? 64 : 1;
    const u64 full[kPhases] = {9523200, 5898240, 28016640, 14008320};
    Pipe &p = g_p;
    p.layers = quick ? 2 : 36;
    u64 off = 0;
    for (int f = 0; f < kPhases; f++) {
        p.bytes[f] = full[f] / div & ~15ull;
        p.off[f] = off;
        off += (p.bytes[f] + 255) & ~255ull;
        p.xwords[f] = kXBytes[f] / 16;
    }
    p.layer = off;
    const u64 pool = p.layer * p.layers;
    uint8_t *base;
    CK(cudaMalloc(&base, pool));
    CK(cudaMemset(base, 0, pool));  // the gaps between phases: zeros, not read
    p.base = base;
    uint4 *x;
    CK(cudaMalloc(&x, 65536));
    CK(cudaMemset(x, 0, 65536));
    p.x = x;
    CK(cudaMalloc(&g_ctr, (size_t)p.layers * kPhases * 4));
    CK(cudaMalloc(&g_total, 4));
    p.ctr = g_ctr;
    CK(cudaMalloc(&p.ll, 2 * kLLMax * 8));
    CK(cudaMalloc(&p.stale, 4));
    CK(cudaMalloc(&p.rel, 16));
    CK(cudaMemset(p.stale, 0, 4));
    p.total = g_total;
    for (int l = 0; l < p.layers; l++)
        for (int f = 0; f < kPhases; f++)
            fill_kernel<<<g_sms * 8, 256, 0, g_s>>>((unsigned *)(base + (u64)l * p.layer + p.off[f]), p.bytes[f] / 4);
    CK(cudaMemsetAsync(g_total, 0, 4, g_s));
    sum_kernel<<<g_sms * 8, 256, 0, g_s>>>((const unsigned *)base, pool / 4, g_total);
    CK(cudaStreamSynchronize(g_s));
    CK(cudaMemcpy(&g_expect, g_total, 4, cudaMemcpyDeviceToHost));
    if (quick) g_reps = 1;

    {  // copy bandwidth (cuda_bench's definition: 1 GiB device to device, read + write counted)
        const size_t n = quick ? (64u << 20) : (1u << 30);
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
        const float ms = events_median_ms(g_s, 7, [&] {
            for (int i = 0; i < 10; i++) CK(cudaMemcpyAsync(a, b, n, cudaMemcpyDeviceToDevice, g_s));
        }) / 10;
        g_copy = 2.0 * n / (ms * 1e6);
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    printf("layer_pipe: %s, %d SMs, L2 %d MB; copy %.0f GB/s; %d layers of %.2f MB (QKV %.2f, O %.2f, GU %.2f, "
           "DN %.2f); graphs replayed %d x, median\n\n",
           prop.name, g_sms, prop.l2CacheSize >> 20, g_copy, p.layers,
           (p.bytes[0] + p.bytes[1] + p.bytes[2] + p.bytes[3]) / 1e6, p.bytes[0] / 1e6, p.bytes[1] / 1e6,
           p.bytes[2] / 1e6, p.bytes[3] / 1e6, g_reps);
    printf("| %-64s | %8s | %7s | %7s | %8s |\n", "row (us a layer)", "us", "GB/s", "% copy", "arrival");
    printf("|---|---:|---:|---:|---:|\n");
    auto items = [&](int a, int b, int c, int d) {
        const int sb[kPhases] = {a, b, c, d};
        p.page = 0;
        for (int f = 0; f < kPhases; f++) {
            p.item[f] = sb[f] * kSb;
            p.page = std::max(p.page, p.item[f]);
        }
    };
    items(10, 8, 10, 10);
    if (body) {  // one form alone (for ncu): the Q4_K body on the pages, counters, the row copied
        pipe_row<8, 7, 1, 1, -1, false, 1, 0>("Q4_K body, the row copied");
        return verdict();
    }
    for (int round = 0; round < (quick ? 1 : 2); round++) {  // copies issued by another SM
        pipe_row<4, 8, 1, 0, 0, false, 2>("no dependency, no row (the stream)");
        pipe_row<4, 8, 1, 1, 0, false, 2, 0>("counters, no row");
        pipe_row<4, 8, 1, 1, 0, false, 1, 0>("counters, the row copied");
        pipe_row<6, 8, 1, 1, 32, false, 1, 0>("K 32, the row copied");
        pipe_row<8, 8, 1, 1, 32, false, 1, 0>("K 32, the row copied");
        pipe_row<14, 8, 1, 1, 32, false, 1, 0>("K 32, the row copied");
        pipe_row<14, 8, 1, 1, 48, false, 1, 0>("K 48, the row copied");
        // ix_row<CW, NP, CS, K, BAR, XM, RA, MODE, CH>
        // ix_rows_cs<CW, NP, K, BAR, XM, RA, MODE, CH, CS...>
        ix_rows_cs<4, 8, 0, 0, 2, 1, 0, 1, 2, 4, 5, 6, 7, 8>("the stream");
        ix_rows_cs<4, 8, 0, 0, 2, 1, 0, 4, 4, 8>("the stream");
        ix_rows_cs<4, 8, 0, 1, 2, 1, 0, 1, 2, 4, 8>("counters, no row");
        ix_rows_cs<4, 8, 0, 1, 2, 2, 0, 1, 4, 8>("counters, no row, relaxed page release");
        ix_row<4, 8, 8, 0, 1, 2, 3, 0>("counters, no row, cta-scope page release");
        ix_rows_cs<4, 8, 0, 1, 1, 1, 0, 1, 4, 8>("counters, the row copied");
        ix_rows_cs<4, 8, 0, 1, 1, 2, 0, 1, 4, 8>("counters, the row copied, relaxed page release");
        ix_row<4, 8, 8, 0, 1, 1, 2, 0, 4>("counters, the row copied, relaxed page release");
        ix_row<4, 8, 4, 0, 1, 0, 2, 0>("counters, the row from L2, relaxed page release");
        ix_rows_cs<4, 8, 0, 1, 1, 3, 0, 1, 4, 5, 6, 7, 8>(
            "counters, the row copied, cta-scope page release");
        ix_row<14, 8, 8, 0, 1, 1, 3, 0>("counters, the row copied, cta-scope page release");
        ix_row<6, 8, 4, 32, 1, 1, 1, 0>("K 32, the row copied");
        ix_row<6, 8, 4, 32, 1, 1, 2, 0>("K 32, the row copied, relaxed page release");
        ix_row<6, 8, 8, 32, 1, 1, 2, 0>("K 32, the row copied, relaxed page release");
        ix_row<6, 8, 8, 32, 1, 1, 3, 0>("K 32, the row copied, cta-scope page release");
        ix_row<10, 8, 8, 32, 1, 1, 3, 0>("K 32, the row copied, cta-scope page release");
        ix_rows_cs<14, 8, 32, 1, 1, 3, 0, 1, 8, 7, 6, 5>("K 32, the row copied, cta-scope page release");
        ix_rows_cs<14, 8, 48, 1, 1, 3, 0, 1, 8, 7>("K 48, the row copied, cta-scope page release");
        ix_row<4, 8, 2, 0, 0, 2, 1, 1>("the stream");
        ix_row<4, 8, 2, 0, 1, 2, 1, 1>("counters, no row");
        ix_row<4, 8, 2, 0, 1, 1, 1, 1>("counters, the row copied");
        ix_row<4, 8, 2, 0, 1, 1, 2, 1>("counters, the row copied, relaxed page release");
        ix_row<6, 8, 2, 32, 1, 1, 1, 1>("K 32, the row copied");
        // K -1: the library's INT8 Q4_K super-block body on the pages (q4_page)
        pipe_row<8, 7, 1, 1, -1, false, 1, 0>("Q4_K body, the row copied");
        pipe_row<14, 7, 1, 1, -1, false, 1, 0>("Q4_K body, the row copied");
        ix_row<8, 7, 8, -1, 1, 1, 3, 0>("Q4_K body, the row copied, cta-scope page release");
        ix_row<14, 7, 8, -1, 1, 1, 3, 0>("Q4_K body, the row copied, cta-scope page release");
        ix_row<14, 7, 4, -1, 1, 1, 3, 0>("Q4_K body, the row copied, cta-scope page release");
        ix_row<14, 7, 8, 0, 1, 1, 3, 0>("K 0, 7 pages, the row copied, cta-scope page release");
        pipe_row<6, 7, 1, 1, -1, false, 1, 0>("Q4_K body, the row copied");
        pipe_row<8, 7, 1, 0, -1, false, 1, 0>("Q4_K body, no dependency, the row copied");
        pipe_row<14, 7, 1, 0, -1, false, 1, 0>("Q4_K body, no dependency, the row copied");
        pipe_row<8, 7, 1, 0, 0, false, 1, 0>("no dependency, the row copied");
        body_row<4>();
        body_row<8>();
        body_row<14>();
        body_row<20>();
        items(5, 4, 5, 5);  // 11.5 KB pages: more of them in flight beside the pages being worked
        pipe_row<14, 12, 1, 0, -1, false, 1, 0>("11.5 KB pages: Q4_K body, no dependency");
        pipe_row<20, 12, 1, 0, -1, false, 1, 0>("11.5 KB pages: Q4_K body, no dependency");
        pipe_row<14, 12, 1, 1, -1, false, 1, 0>("11.5 KB pages: Q4_K body, counters");
        pipe_row<20, 12, 1, 1, -1, false, 1, 0>("11.5 KB pages: Q4_K body, counters");
        ix_row<14, 12, 8, -1, 1, 1, 3, 0>("11.5 KB pages: Q4_K body, counters, cta-scope page release");
        ix_row<20, 12, 8, -1, 1, 1, 3, 0>("11.5 KB pages: Q4_K body, counters, cta-scope page release");
        body_row<20>();
        items(10, 8, 10, 10);
        pipe_row<10, 7, 1, 1, -1, false, 1, 0>("Q4_K body, the row copied");
        ix_row<10, 7, 8, -1, 1, 1, 3, 0>("Q4_K body, the row copied, cta-scope page release");
    }
    if (ix) {
        return verdict();
    }
    trace_row<4, 8, 1, 2>("counters, no row");
    trace_row<4, 8, 1, 2, 3>("relaxed counters, no row");
    trace_row<4, 6, 0, 4>("the flagged row copied after a relaxed counter");
    {  // the counters alone: no bytes
        const Pipe keep = p;
        const unsigned expect = g_expect;
        g_expect = 0;  // the row is zeros
        for (int f = 0; f < kPhases; f++) p.bytes[f] = 0;
        pipe_row<4, 8, 1, 1, 0, false, 2, 0>("no bytes: the counters alone");
        pipe_row<4, 8, 1, 1, 0, false, 2, 3>("no bytes: relaxed counters alone");
        trace_row<4, 8, 1, 2>("no bytes: the counters alone");
        p = keep;
        g_expect = expect;
    }
    for (int round = 0; round < (quick ? 1 : 2); round++) {
        items(10, 8, 10, 10);
        pipe_row<4, 8, 1, 0, 0, false, 2>("no dependency, no row (the stream)");
        pipe_row<4, 8, 1, 0, 0, false, 0>("no dependency, the row from L2");
        pipe_row<4, 8, 1, 1, 0, false, 2, 0>("counters, no row");
        pipe_row<4, 8, 1, 1, 0, false, 2, 1>("counters polled with sleeps, no row");
        pipe_row<4, 8, 1, 2, 0, false, 2, 0>("counters, the producer waits too, no row");
        pipe_row<4, 8, 1, 1, 0, false, 2, 3>("relaxed counters (not a protocol), no row");
        pipe_row<4, 8, 1, 1, 0, false, 2, 4>("release fence + relaxed arrival, relaxed poll");
        pipe_row<4, 8, 1, 1, 0, false, 2, 5>("relaxed arrival, acquire poll");
        pipe_row<4, 8, 1, 1, 0, false, 2, 6>("cluster-scope fence + relaxed arrival");
        pipe_row<8, 8, 1, 1, 32, false, 2, 3>("K 32, relaxed counters, no row");
        pipe_row<4, 8, 1, 1, 0, false, 0, 0>("counters, the row from L2");
        pipe_row<4, 8, 1, 1, 0, false, 1, 0>("counters, the row copied");
        pipe_row<8, 8, 1, 1, 0, false, 1, 0>("counters, the row copied");
        pipe_row<8, 8, 4, 1, 0, false, 1, 0>("4 copies an item, the row copied");
        pipe_row<8, 8, 1, 1, 32, false, 1, 0>("K 32, the row copied");
        pipe_row<8, 8, 1, 1, 48, false, 1, 0>("K 48, the row copied");
        pipe_row<8, 8, 1, 1, 32, true, 1, 0>("K 32, a warp an item, the row copied");
        pipe_row<4, 8, 1, 0, 0, false, 3>("the row's flags polled in place");
        pipe_row<8, 6, 1, 0, 0, false, 4>("the flagged row copied after a relaxed counter");
        pipe_row<8, 6, 1, 0, 32, false, 4>("K 32, the flagged row copied");
        cl_row<4, 8, 8, 0>("the hubs' protocol");
        cl_row<4, 8, 4, 0>("the hubs' protocol");
        cl_row<8, 8, 8, 32>("K 32, the hubs' protocol");
        cl_row<8, 8, 4, 32>("K 32, the hubs' protocol");
        items(5, 4, 5, 5);
        pipe_row<4, 16, 1, 0, 0, false, 2>("11.5 KB pages: the stream");
        pipe_row<4, 16, 1, 1, 0, false, 1, 0>("11.5 KB pages: counters, the row copied");
        pipe_row<4, 8, 1, 1, 0, false, 1, 0>("11.5 KB pages, 8 of them: counters, the row copied");
        items(2, 2, 2, 2);
        pipe_row<4, 8, 1, 0, 0, false, 2>("4.6 KB pages: the stream");
        pipe_row<4, 8, 1, 1, 0, false, 1, 0>("4.6 KB pages: counters, the row copied");
    }
    unsigned stale = 0;
    CK(cudaMemcpy(&stale, p.stale, 4, cudaMemcpyDeviceToHost));
    printf("\nflagged rows: %u pairs found stale in the copy after the counter (polled from global)\n", stale);
    return verdict();
}
