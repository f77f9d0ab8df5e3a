// q4k_bulk_proto.cu: a standalone prototype (not part of the kernel library) that answers one
// question of bench/NOTES.md section 2.2: can a Hopper weight stream -- cp.async.bulk copies
// into a multi-stage shared-memory ring completing on mbarriers, a producer warp and consumer
// warps, a persistent grid, x converted to v11's f16 hi+lo fragments once per block -- run the
// Qwen3-4B decode layer's Q4_K matmuls much closer to copy bandwidth than v11 (gemv_mma.cu)?
//
// The kernel (tile_ring, v2; sm_90a only: sm_87 has no cp.async.bulk / mbarrier tx-count).
// - Work: the (16-row tile, super-block) items of a matrix (or of the gate/up pair, NMAT = 2) in
//   tile-major order are split into G = min(SMs, tiles) contiguous ranges, one a block; a
//   block's tiles are its units (its first and last possibly partial: a tile is shared by at
//   most two blocks, and the second to finish adds the other's partial from global scratch,
//   __threadfence + an atomic counter that the finisher resets).
// - Block: NC consumer warps (7: 256 threads, 2 blocks an SM; 15: 512 threads, 1) + 1 producer
//   warp. Unit i goes into ring slot i % NS: after one lane's mbarrier.arrive.expect_tx on the
//   slot's `full` barrier, lane r issues one cp.async.bulk for row r (the unit's super-blocks of
//   the row, up to a whole row: 1440-5472 bytes, 16-byte multiples and alignment on both sides)
//   into a row pitch that is an odd multiple of 16 bytes (conflict-free LDS.128). The producer
//   never waits for the previous kernel (weights are constant), so under programmatic dependent
//   launch the next matmul's ring fills while the previous kernel finishes.
// - Consumers: griddepcontrol.wait, stage all of x once as v11's B fragments (mma_common.cuh
//   stage_token: f16 hi + lo, a power-of-two scale per super-block), then per unit: wait `full`,
//   run v11's q4_superblock on the unit's items q with q % NC == warp (read from the ring),
//   fence.proxy.async, store one partial, arrive on the slot's `unit` barrier. Warp i % NC waits
//   on it, sums the NC partials in warp order (deterministic; not v11's bits: another order),
//   releases the slot (`empty`) and writes the tile (plain, + residual, or SwiGLU).
// Invariants: producer and consumers walk the same unit list; a slot's unit barrier and partials
// are reused only after the producer refilled the slot, which needs the finisher's release, so
// no mbarrier phase can be overtaken; every wait is on a lower-numbered unit (no deadlock).
// Options (Cfg): tilecopy = one bulk copy a whole tile (16 contiguous rows; pitch = the row
// size, 2-way conflicted LDS); whole = whole tiles a block (no shared tile, uneven blocks);
// mode = diagnostics: stream only, math only, neither, neither without the x staging.
// History: v1 (commit 12a0dab, bench/NOTES.md 2.2) gave each warp a private ring of tile parts
// of 1-3 super-blocks copied row by row (144-432-byte copies): correct, but the stream alone
// reached only 16-23% of copy, so v2 copies whole rows.
// Measured (H200, NOTES 2.2, RESULTS): best = 15 consumer warps, tile copies, whole tiles:
// 37.16 us/layer (35.0% of copy) against v11's 39.89 in the same call; the stream alone 65%;
// bound by the math (32 us/layer without a weight byte) and the per-kernel fixed cost.
//
// Numeric contract: v11's (|y - y_cpu| <= 1e-5 * sum_k |W x| per dot), checked against a CPU
// double reference; v11 itself (gemv_mma.cu, included below) runs in the same process on the
// same weights for the comparison.
//
// Build (from the repository root; the include of gemv_mma.cu needs -I. or a snapshot of it):
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. -Iinclude -o q4k_bulk_proto bench/q4k_bulk_proto.cu
// The measured binaries used v11 of commit 9115dcf (it relies on gemv_mma.cu's internal
// q4_superblock / Q4Raw / mma_matmul): git archive 9115dcf kernels include | tar -x -C D, copy
// this file into D, then nvcc ... -ID -ID/include.
// Run: ./q4k_bulk_proto [--quick]   (--quick: the small correctness cases only, for sanitizers)
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/gemv_mma.cu"  // v11: q4_superblock, Q4Raw, Stage, and mma_matmul for the A/B

// ---- what gemv_mma.cu needs from runtime.cu / the status library -------------------------
static bool g_pdl = true;
namespace loom_cuda {
loom_status cuda_fail(loom_error *err, cudaError_t e, const char *stmt, const char *func,
                      const char *file, int line) {
    fprintf(stderr, "%s: %s at %s (%s:%d)\n", stmt, cudaGetErrorString(e), func, file, line);
    if (err) err->status = LOOM_ERR_CUDA;
    return LOOM_ERR_CUDA;
}
bool pdl_on() { return g_pdl; }
int gemv_mma_split() { return 0; }
int sm_count() {
    static int n = 0;
    if (!n) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
    return n;
}
int cc_major() {
    static int n = 0;
    if (!n) cudaDeviceGetAttribute(&n, cudaDevAttrComputeCapabilityMajor, 0);
    return n;
}
}  // namespace loom_cuda
extern "C" loom_status loom_error_set(loom_error *err, loom_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    } else {
        vfprintf(stderr, fmt, ap);
    }
    va_end(ap);
    return st;
}

#define CK(x)                                                                             \
    do {                                                                                  \
        cudaError_t e_ = (x);                                                             \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

namespace loom_cuda {
namespace bulk {

enum { E_PLAIN = 0, E_ADD = 1, E_SWIGLU = 2 };

struct Args {
    const uint8_t *w[2];  // the matrix (the pair: gate, up): rows of nsb * 144 bytes
    float *y;             // [M]
    const float *resid;   // [M] (E_ADD; may equal y)
    const float *x;       // [nsb * 256]
    float *gpart;         // [tiles][2][NMAT][16]: partials of tiles split between two blocks
    int *gcnt;            // [tiles], zero between launches
    int M, nsb, row_bytes, tiles, items;  // items = tiles * nsb (16 rows x 1 super-block each)
    int NS, pitch, slot_bytes;            // ring slots (a tile each), row pitch, slot size
    int off_xs, off_red, off_ring;        // dynamic shared memory layout (bytes)
    int mode;  // 0; diagnostics (wrong results): 1 = stream only (no math), 2 = math only (no
               // copies), 3 = neither (the fixed cost), 4 = neither and no x staging
    int tilecopy;  // 1: pitch = row_bytes and a whole tile (16 contiguous rows) is one bulk copy
    int whole;     // 1: blocks get whole tiles (no tile shared by two blocks; uneven blocks)
};

__device__ __forceinline__ uint32_t smaddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mb_init(uint32_t a, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void mb_arrive_expect_tx(uint32_t a, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mb_arrive(uint32_t a) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mb_wait(uint32_t a, uint32_t parity) {
    uint32_t ok;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
            "selp.u32 %0, 1, 0, p; }"
            : "=r"(ok)
            : "r"(a), "r"(parity)
            : "memory");
    } while (!ok);
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}
__device__ __forceinline__ uint4 lds16(const uint8_t *p) {
    return *reinterpret_cast<const uint4 *>(p);
}

// Tile ring (v2). Items (tile, super-block) in tile-major order are split into G contiguous
// ranges, one a block; a block's tiles (the first and last possibly partial) are its units.
// Unit i goes into ring slot i % NS: one cp.async.bulk per row copies the unit's super-blocks
// of that row (up to a whole row: 1440-5472 bytes). Item (global index q) belongs to consumer
// warp q % NC, which accumulates its items of the unit in registers, stores one partial per
// unit and arrives on the slot's `unit` barrier (every warp, items or not); warp i % NC then
// sums the NC partials in warp order, releases the slot (`empty`) and finishes the tile. The
// slot's unit barrier and partial buffer are reused only after the producer refilled the slot,
// which needs that release: no phase can be overtaken.
template <int NC, int NMAT, int EPI>
static __global__ void __launch_bounds__((NC + 1) * 32, NC < 8 ? 2 : 1) tile_ring(const Args a) {
    constexpr int kXMax = (42 + NC - 1) / NC;  // x super-blocks a warp stages (nsb <= 42)
    extern __shared__ __align__(128) uint8_t sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int NS = a.NS, nsb = a.nsb;
    const uint32_t bar_full = smaddr(sm), bar_empty = bar_full + 8 * NS, bar_unit = bar_empty + 8 * NS;
    Stage<1> *xs = reinterpret_cast<Stage<1> *>(sm + a.off_xs);
    float *red = reinterpret_cast<float *>(sm + a.off_red);
    uint8_t *ringp = sm + a.off_ring;
    const int G = gridDim.x, b = blockIdx.x;
    const int q0 = a.whole ? (int)((int64_t)a.tiles * b / G) * nsb : (int)((int64_t)a.items * b / G);
    const int q1 = a.whole ? (int)((int64_t)a.tiles * (b + 1) / G) * nsb
                           : (int)((int64_t)a.items * (b + 1) / G);
    const int t0 = q0 / nsb, n = (q1 - 1) / nsb - t0 + 1;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NS; i++) {
            mb_init(bar_full + 8 * i, 1);
            mb_init(bar_empty + 8 * i, 1);
            mb_init(bar_unit + 8 * i, NC * 32);
        }
        // barrier inits visible to the async proxy (the bulk copies complete on them)
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    pdl_launch_dependents();

    if (warp == NC) {  // ---- producer: weights only (constant), so no griddepcontrol.wait
        const uint32_t ring = smaddr(ringp);
        for (int i = 0; i < n; i++) {
            const int slot = i % NS;
            if (i >= NS) mb_wait(bar_empty + 8 * slot, (uint32_t)((i / NS) - 1) & 1u);
            const int tile = t0 + i;
            const int lo = q0 - tile * nsb > 0 ? q0 - tile * nsb : 0;
            const int hi = q1 - tile * nsb < nsb ? q1 - tile * nsb : nsb;
            const uint32_t bytes = (uint32_t)(hi - lo) * kQ4KBytes;
            const int r0 = tile * kTileRows;
            const int valid = a.M - r0 < kTileRows ? a.M - r0 : kTileRows;
            if (a.mode >= 2) {  // math only / neither: the same protocol, no bytes
                if (lane == 0) mb_arrive(bar_full + 8 * slot);
                continue;
            }
            if (lane == 0) mb_arrive_expect_tx(bar_full + 8 * slot, bytes * (uint32_t)(valid * NMAT));
            __syncwarp();
            if (a.tilecopy && valid == kTileRows && hi - lo == nsb) {  // the tile is contiguous
                if (lane < NMAT)
                    bulk_g2s(ring + (uint32_t)(slot * a.slot_bytes + lane * 16 * a.pitch),
                             (lane ? a.w[1] : a.w[0]) + (int64_t)r0 * a.row_bytes,
                             (uint32_t)(kTileRows * a.row_bytes), bar_full + 8 * slot);
            } else if (lane < 16 * NMAT) {
                const int m = lane >> 4, r = lane & 15;
                if (r < valid) {
                    const uint8_t *src = (m ? a.w[1] : a.w[0]) + (int64_t)(r0 + r) * a.row_bytes +
                                         (int64_t)lo * kQ4KBytes;
                    bulk_g2s(ring + (uint32_t)(slot * a.slot_bytes + (m * 16 + r) * a.pitch), src, bytes,
                             bar_full + 8 * slot);
                }
            }
        }
        return;
    }

    // ---- consumers
    const int g = lane >> 2, t = lane & 3;
    pdl_wait();  // x is the previous kernel's output; y / the scratch may still be read by it
    {
        const float *xb = a.x + 64 * t + 4 * g;
        float4 xa[kXMax], xc[kXMax];
#pragma unroll
        for (int q = 0; q < kXMax; q++) {
            const int sb = warp + q * NC;
            if (sb < nsb && a.mode != 4) {
                xa[q] = ld_x4(xb + (int64_t)sb * 256);
                xc[q] = ld_x4(xb + (int64_t)sb * 256 + 32);
            }
        }
#pragma unroll
        for (int q = 0; q < kXMax; q++) {
            const int sb = warp + q * NC;
            if (sb < nsb && a.mode != 4) {
                stage_token<1>(xs[sb], 0, xa[q], xc[q], lane);
                if (lane >= 1 && lane < 4) xs[sb].sinv[lane] = 0.0f;  // slots the GEMV never fills
            }
        }
    }
    asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory");  // consumers only

    const bool hit = t >= 2;
    const uint32_t e = 2 * (t & 1);
    const uint32_t sel_e = e * 0x101u + 0x4040u, sel_o = (e + 1) * 0x101u + 0x4040u;
    for (int i = 0; i < n; i++) {
        const int slot = i % NS;
        const uint32_t par = (uint32_t)(i / NS) & 1u;
        const int tile = t0 + i;
        const int lo = q0 - tile * nsb > 0 ? q0 - tile * nsb : 0;
        const int hi = q1 - tile * nsb < nsb ? q1 - tile * nsb : nsb;
        mb_wait(bar_full + 8 * slot, par);
        const uint8_t *sp = ringp + slot * a.slot_bytes;
        float acc[NMAT][1][2];
#pragma unroll
        for (int m = 0; m < NMAT; m++) acc[m][0][0] = acc[m][0][1] = 0.0f;
        const int base = tile * nsb + lo;  // global item index of the unit's first super-block
        int k = warp - base % NC;
        if (k < 0) k += NC;
#pragma unroll 1
        for (; k < (a.mode == 1 || a.mode >= 3 ? 0 : hi - lo); k += NC) {
#pragma unroll
            for (int m = 0; m < NMAT; m++) {
                const uint8_t *rg = sp + (m * 16 + g) * a.pitch + k * kQ4KBytes;
                const uint8_t *r8 = rg + 8 * a.pitch;
                Q4Raw r;
                r.qa0 = lds16(rg + 16 + 32 * t);
                r.qb0 = lds16(rg + 32 + 32 * t);
                r.qa8 = lds16(r8 + 16 + 32 * t);
                r.qb8 = lds16(r8 + 32 + 32 * t);
                r.h0 = lds16(rg);
                r.h8 = lds16(r8);
                q4_superblock<1, NMAT == 1 ? 2 : 1>(r, xs[lo + k], lane, 2, hit, sel_e, sel_o, acc[m]);
            }
        }
        // this warp's generic reads of the slot are done before the async proxy may refill it
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (t == 0) {
#pragma unroll
            for (int m = 0; m < NMAT; m++) {
                float *rp = red + ((slot * NC + warp) * NMAT + m) * 16;
                rp[g] = acc[m][0][0];
                rp[g + 8] = acc[m][0][1];
            }
        }
        mb_arrive(bar_unit + 8 * slot);
        if (warp != i % NC) continue;
        // ---- this warp finishes unit i
        mb_wait(bar_unit + 8 * slot, par);
        const bool own = lane < 16;
        float v[NMAT];
#pragma unroll
        for (int m = 0; m < NMAT; m++) {
            v[m] = 0.0f;
            if (own) {
                const float *rp = red + (slot * NC * NMAT + m) * 16 + lane;
                v[m] = rp[0];
#pragma unroll
                for (int w = 1; w < NC; w++) v[m] = __fadd_rn(v[m], rp[w * NMAT * 16]);
            }
        }
        __syncwarp();
        if (lane == 0) mb_arrive(bar_empty + 8 * slot);  // slot and partials free for unit i + NS
        bool fin = lo == 0 && hi == nsb;
        if (!fin) {  // shared with the neighbouring block: the second to arrive finishes it
            const int piece = lo == 0 ? 0 : 1;
            float *gp = a.gpart + (int64_t)tile * 2 * NMAT * 16;
            if (own) {
#pragma unroll
                for (int m = 0; m < NMAT; m++) gp[(piece * NMAT + m) * 16 + lane] = v[m];
            }
            // One lane fences for the warp (R3: a fence in each of the 32 lanes cost ~2 us a
            // kernel): the warp barrier orders the other lanes' stores before lane 0's fence,
            // which is cumulative; the finisher's fence orders the reads after its atomic.
            __syncwarp();
            int old = 0;
            if (lane == 0) {
                __threadfence();
                old = atomicAdd(&a.gcnt[tile], 1);
                if (old == 1) __threadfence();
            }
            old = __shfl_sync(0xffffffffu, old, 0);
            if (old == 1) {
                if (own) {
#pragma unroll
                    for (int m = 0; m < NMAT; m++)
                        v[m] = __fadd_rn(v[m], __ldcg(gp + ((1 - piece) * NMAT + m) * 16 + lane));
                }
                if (lane == 0) a.gcnt[tile] = 0;  // for the next launch (stream-ordered)
                fin = true;
            }
        }
        const int row = tile * kTileRows + lane;
        if (fin && own && row < a.M) {
            float y;
            if (EPI == E_SWIGLU) y = __fmul_rn(silu_f(v[0]), v[NMAT - 1]);
            else if (EPI == E_ADD) y = __fadd_rn(v[0], a.resid[row]);
            else y = v[0];
            a.y[row] = y;
        }
    }
}

// The bulk-copy engine alone: each block streams `per_block` bytes of src in copies of `csize`
// bytes (lane 0 issues them one after another) through a ring of `ns` slots that it waits on
// itself. Measures what the TMA delivers as a function of the copy size.
static __global__ void __launch_bounds__(32, 1) tma_sweep(const uint8_t *src, int64_t per_block,
                                                          int csize, int ns) {
    extern __shared__ __align__(128) uint8_t sm[];
    const uint32_t bars = smaddr(sm), ring = bars + 8 * 1024;
    if (threadIdx.x != 0) return;
    for (int i = 0; i < ns; i++) mb_init(bars + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const uint8_t *p = src + per_block * blockIdx.x;
    const int n = (int)(per_block / csize);
    for (int i = 0; i < n; i++) {
        const int slot = i % ns;
        if (i >= ns) mb_wait(bars + 8 * slot, (uint32_t)((i / ns) - 1) & 1u);
        mb_arrive_expect_tx(bars + 8 * slot, (uint32_t)csize);
        bulk_g2s(ring + (uint32_t)(slot * csize), p + (int64_t)i * csize, (uint32_t)csize, bars + 8 * slot);
    }
    for (int i = n > ns ? n - ns : 0; i < n; i++) mb_wait(bars + 8 * (i % ns), (uint32_t)(i / ns) & 1u);
}

}  // namespace bulk
}  // namespace loom_cuda

// ---- host ----------------------------------------------------------------------------------
using namespace loom_cuda;
using bulk::Args;

struct Cfg {
    int nc;       // consumer warps a block: 7 (256 threads, 2 blocks an SM) or 15 (512, 1)
    int smem_kb;  // shared-memory budget a block (<= 110 and nc 7: the next kernel fits beside)
    int pdl;      // launch with programmatic dependent launch
    const char *name;
    int gmax;     // grid cap (0: the SM count); small caps make blocks share tiles in small tests
    int mode;     // Args::mode (diagnostics)
    int tilecopy; // Args::tilecopy
    int whole;    // Args::whole
};

struct Scratch {
    float *gpart;
    int *gcnt;
};

static int g_sms = 0;
static size_t g_smem_max = 0;

template <int NC, int NMAT, int EPI>
static void set_attrs1() {
    CK(cudaFuncSetAttribute(bulk::tile_ring<NC, NMAT, EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)g_smem_max));
    CK(cudaFuncSetAttribute(bulk::tile_ring<NC, NMAT, EPI>, cudaFuncAttributePreferredSharedMemoryCarveout,
                            100));
}
static void set_attrs() {
    set_attrs1<7, 1, bulk::E_PLAIN>();
    set_attrs1<7, 1, bulk::E_ADD>();
    set_attrs1<7, 2, bulk::E_SWIGLU>();
    set_attrs1<15, 1, bulk::E_PLAIN>();
    set_attrs1<15, 1, bulk::E_ADD>();
    set_attrs1<15, 2, bulk::E_SWIGLU>();
}

// Fills a (all but pointers) for an M x K matrix (nmat of them) under cfg; returns the dynamic
// shared memory size (the budget, or the device maximum when two slots do not fit the
// budget), or 0 when the shape does not fit at all.
static size_t plan(Args &a, int M, int K, int nmat, const Cfg &cfg) {
    const int nsb = K / 256;
    if (K % 256 || nsb > 42) return 0;
    a.M = M;
    a.nsb = nsb;
    a.row_bytes = nsb * 144;
    a.tiles = (M + 15) / 16;
    a.items = a.tiles * nsb;
    // pitch / 16 odd: no bank conflicts; a whole-tile copy needs the rows' own pitch (2-way)
    a.pitch = a.row_bytes + (nsb % 2 == 0 && !cfg.tilecopy ? 16 : 0);
    a.slot_bytes = nmat * 16 * a.pitch;
    if (cfg.mode >= 3 && cfg.smem_kb == 0) a.slot_bytes = 0;  // no bytes move: a ring of nothing
    for (int pass = 0; pass < 2; pass++) {
        const size_t budget = pass == 0 ? (size_t)cfg.smem_kb * 1024 : g_smem_max;
        for (int NS = 8; NS >= 2; NS--) {
            size_t off = (size_t)8 * 3 * NS;
            off = (off + 15) & ~(size_t)15;
            const size_t off_xs = off;
            off += (size_t)nsb * sizeof(Stage<1>);
            const size_t off_red = off;
            off += (size_t)NS * cfg.nc * nmat * 16 * 4;
            off = (off + 127) & ~(size_t)127;
            const size_t off_ring = off;
            off += (size_t)NS * a.slot_bytes;
            if (off <= budget) {
                a.NS = NS;
                a.off_xs = (int)off_xs;
                a.off_red = (int)off_red;
                a.off_ring = (int)off_ring;
                return off;
            }
        }
    }
    return 0;
}

template <int NC, int NMAT, int EPI>
static void launch_ring(const uint8_t *w0, const uint8_t *w1, int M, int K, const float *x,
                        float *y, const float *resid, const Scratch &sc, const Cfg &cfg,
                        cudaStream_t st) {
    Args a = {};
    const size_t smem = plan(a, M, K, NMAT, cfg);
    if (!smem) {
        fprintf(stderr, "bulk: shape %dx%d does not fit config %s\n", M, K, cfg.name);
        exit(1);
    }
    a.w[0] = w0;
    a.w[1] = w1 ? w1 : w0;
    a.y = y;
    a.resid = resid;
    a.x = x;
    a.gpart = sc.gpart;
    a.gcnt = sc.gcnt;
    a.mode = cfg.mode;
    a.tilecopy = cfg.tilecopy;
    a.whole = cfg.whole;
    const int G = std::min(cfg.gmax > 0 ? cfg.gmax : g_sms, a.tiles);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)G);
    lc.blockDim = dim3((NC + 1) * 32);
    lc.dynamicSmemBytes = smem;
    lc.stream = st;
    lc.attrs = attr;
    lc.numAttrs = cfg.pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&lc, bulk::tile_ring<NC, NMAT, EPI>, a));
}

template <int NMAT, int EPI>
static void launch_bulk(const uint8_t *w0, const uint8_t *w1, int M, int K, const float *x,
                        float *y, const float *resid, const Scratch &sc, const Cfg &cfg,
                        cudaStream_t st) {
    if (cfg.nc == 15) launch_ring<15, NMAT, EPI>(w0, w1, M, K, x, y, resid, sc, cfg, st);
    else launch_ring<7, NMAT, EPI>(w0, w1, M, K, x, y, resid, sc, cfg, st);
}

// v11 through its own launcher (gemv_mma.cu mma_matmul).
static void launch_v11(int epi, const uint8_t *w0, const uint8_t *w1, int M, int K,
                       const float *x, float *y, const float *resid, cudaStream_t st) {
    Seg s[2] = {};
    const int64_t rb = (int64_t)(K / 256) * 144;
    s[0] = Seg{w0, y, NULL, epi == EPI_ADD ? resid : NULL, M, rb, LOOM_GGML_Q4_K, 1};
    int nseg = 1;
    if (epi == EPI_SWIGLU) {
        s[1] = Seg{w1, NULL, NULL, NULL, M, rb, LOOM_GGML_Q4_K, 1};
        nseg = 2;
    }
    loom_error err = {};
    if (mma_matmul(s, nseg, epi, x, K, 1, &err, st) != LOOM_OK) {
        fprintf(stderr, "v11 mma_matmul failed: %s\n", err.msg);
        exit(1);
    }
}

// ---- random Q4_K and the CPU reference ----
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd64() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float frnd() { return (float)((rnd64() >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f; }

static void fill_q4k(uint8_t *p, size_t nblocks) {
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * 144;
        for (int i = 0; i < 144; i += 8) {
            const uint64_t r = rnd64();
            memcpy(blk + i, &r, 8);
        }
        const __half d = __float2half(0.001f + 0.01f * fabsf(frnd()));
        const __half dm = __float2half(0.001f + 0.01f * fabsf(frnd()));
        memcpy(blk, &d, 2);
        memcpy(blk + 2, &dm, 2);
    }
}

static void scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// dot[r] = sum_k W[r,k] x[k] and bound[r] = sum_k |W[r,k] x[k]|, in double.
static void cpu_dot(const uint8_t *W, const float *x, int M, int K, double *dot, double *bound) {
    const int nsb = K / 256;
    for (int r = 0; r < M; r++) {
        double s = 0, bsum = 0;
        for (int sb = 0; sb < nsb; sb++) {
            const uint8_t *blk = W + ((size_t)r * nsb + sb) * 144;
            __half dh, dmh;
            memcpy(&dh, blk, 2);
            memcpy(&dmh, blk + 2, 2);
            const double d = __half2float(dh), dm = __half2float(dmh);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                scale_min(j, blk + 4, &sc, &m);
                const int c = j / 2;
                for (int l = 0; l < 32; l++) {
                    const uint8_t qb = blk[16 + 32 * c + l];
                    const int q = (j & 1) ? (qb >> 4) : (qb & 0xF);
                    const double w = d * sc * q - dm * m;
                    const double p = w * x[sb * 256 + 32 * j + l];
                    s += p;
                    bsum += fabs(p);
                }
            }
        }
        dot[r] = s;
        bound[r] = bsum;
    }
}

// Worst |y - ref| / allowed over the rows (> 1 fails); ref and allowed from the dots.
static double check_rows(const std::vector<float> &y, int epi, const double *d0, const double *b0,
                         const double *d1, const double *b1, const float *resid, int M) {
    double worst = 0;
    for (int r = 0; r < M; r++) {
        double ref, tol;
        if (epi == EPI_SWIGLU) {
            const double g = d0[r], u = d1[r];
            const double sg = g / (1.0 + exp(-g));
            ref = sg * u;
            tol = 1e-5 * (1.1 * b0[r] * fabs(u) + fabs(sg) * b1[r]) + 4e-7 * fabs(ref) + 1e-30;
        } else {
            ref = d0[r] + (epi == EPI_ADD ? resid[r] : 0.0);
            tol = 1e-5 * b0[r] + (epi == EPI_ADD ? 1.2e-7 * fabs(ref) : 0.0) + 1e-30;
        }
        const double e = fabs((double)y[r] - ref) / tol;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

template <typename T>
static T *dev_upload(const std::vector<T> &h) {
    T *d;
    CK(cudaMalloc(&d, h.size() * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// One matmul role of a layer.
struct Role {
    const char *name;
    int M, K, nmat, epi;
};
static const Role kRoles[4] = {
    {"QK 5120x2560", 5120, 2560, 1, EPI_PLAIN},
    {"attn out 2560x4096 + add", 2560, 4096, 1, EPI_ADD},
    {"gate/up 2x9728x2560 SwiGLU", 9728, 2560, 2, EPI_SWIGLU},
    {"down 2560x9728 + add", 2560, 9728, 1, EPI_ADD},
};

static void run_role(bool v11, const Role &r, const uint8_t *w0, const uint8_t *w1,
                     const float *x, float *y, const float *resid, const Scratch &sc,
                     const Cfg &cfg, cudaStream_t st) {
    if (v11) {
        launch_v11(r.epi, w0, w1, r.M, r.K, x, y, resid, st);
        return;
    }
    if (r.epi == EPI_SWIGLU)
        launch_bulk<2, bulk::E_SWIGLU>(w0, w1, r.M, r.K, x, y, resid, sc, cfg, st);
    else if (r.epi == EPI_ADD)
        launch_bulk<1, bulk::E_ADD>(w0, w1, r.M, r.K, x, y, resid, sc, cfg, st);
    else
        launch_bulk<1, bulk::E_PLAIN>(w0, w1, r.M, r.K, x, y, resid, sc, cfg, st);
}

// Correctness of one shape: bulk (every cfg) and v11 against the CPU; returns failures.
static int check_shape(const char *name, int M, int K, int epi, bool wide, const Scratch &sc,
                       const std::vector<Cfg> &cfgs, cudaStream_t st) {
    const int nsb = K / 256, nmat = epi == EPI_SWIGLU ? 2 : 1;
    std::vector<uint8_t> hw[2];
    for (int m = 0; m < nmat; m++) {
        hw[m].resize((size_t)M * nsb * 144);
        fill_q4k(hw[m].data(), (size_t)M * nsb);
    }
    std::vector<float> hx(K), hres(M);
    for (int k = 0; k < K; k++) hx[k] = wide ? ldexpf(frnd(), (int)(rnd64() % 54) - 20) : frnd();
    for (int r = 0; r < M; r++) hres[r] = frnd();
    std::vector<double> d0(M), b0(M), d1(M), b1(M);
    cpu_dot(hw[0].data(), hx.data(), M, K, d0.data(), b0.data());
    if (nmat == 2) cpu_dot(hw[1].data(), hx.data(), M, K, d1.data(), b1.data());
    uint8_t *dw0 = dev_upload(hw[0]), *dw1 = nmat == 2 ? dev_upload(hw[1]) : NULL;
    float *dx = dev_upload(hx), *dres = dev_upload(hres), *dy;
    CK(cudaMalloc(&dy, (size_t)M * 4));
    const Role r = {name, M, K, nmat, epi};
    int fails = 0;
    std::vector<float> y11(M);
    for (int c = -1; c < (int)cfgs.size(); c++) {
        const bool v11 = c < 0;
        const Cfg &cfg = v11 ? cfgs[0] : cfgs[c];
        CK(cudaMemset(dy, 0xFF, (size_t)M * 4));  // NaN poison: an unwritten row fails
        // ADD: resid is a separate buffer here; in the graph below y aliases it.
        for (int rep = 0; rep < 2; rep++)  // twice: the split-tile counters must reset
            run_role(v11, r, dw0, dw1, dx, dy, dres, sc, cfg, st);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        std::vector<float> hy(M);
        CK(cudaMemcpy(hy.data(), dy, (size_t)M * 4, cudaMemcpyDeviceToHost));
        const double worst = check_rows(hy, epi, d0.data(), b0.data(), d1.data(), b1.data(), hres.data(), M);
        int diff = 0;
        if (v11) y11 = hy;
        else
            for (int i = 0; i < M; i++) diff += memcmp(&hy[i], &y11[i], 4) != 0;
        const bool ok = worst <= 1.0;
        fails += !ok;
        printf("check %-30s %-10s max err/allowed %.2e (%.1e of the 1e-5 contract) %s%s\n", name,
               v11 ? "v11" : cfg.name, worst, worst * 1e-5, ok ? "ok" : "FAIL",
               v11 ? "" : (diff ? " (bits differ from v11: another order)" : " (== v11 bits)"));
    }
    cudaFree(dw0);
    if (dw1) cudaFree(dw1);
    cudaFree(dx);
    cudaFree(dres);
    cudaFree(dy);
    return fails;
}

// ---- timing ----
static double g_copy_gbs = 0;
static void row(const char *name, const char *cfg, double us, double bytes) {
    const double gbs = bytes / (us * 1e-6) / 1e9;
    printf("| %-30s | %-16s | %9.2f | %8.1f | %5.1f%% |\n", name, cfg, us, gbs, 100.0 * gbs / g_copy_gbs);
    fflush(stdout);
}

template <typename F>
static double time_us(F fn, int calls, cudaStream_t st) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) fn(i);
    CK(cudaStreamSynchronize(st));
    float ms[7];
    for (int rep = 0; rep < 7; rep++) {
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < calls; i++) fn(i);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[rep], e0, e1));
    }
    CK(cudaGetLastError());
    std::sort(ms, ms + 7);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms[3] * 1000.0 / calls;
}

struct Layer {
    uint8_t *w[4][2];
};

int main(int argc, char **argv) {
    bool quick = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) quick = true;
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    int optin = 0;
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    g_smem_max = (size_t)optin;
    set_attrs();
    CK(cudaFuncSetAttribute(bulk::tma_sweep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g_smem_max));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("q4k_bulk_proto: %d SMs, %d KB shared a block max\n", g_sms, optin >> 10);

    Scratch sc;
    CK(cudaMalloc(&sc.gpart, (size_t)1024 * 2 * 2 * 16 * 4));
    CK(cudaMalloc(&sc.gcnt, 1024 * 4));
    CK(cudaMemset(sc.gcnt, 0, 1024 * 4));

    // Configurations (R5): 15 consumer warps in 220 KB (one block an SM), one bulk copy a whole
    // tile, whole tiles a block; diagnostics of the fixed cost (no copies, no math, no x
    // staging) with the real ring (one block an SM: the next kernel cannot be resident) and with
    // an empty ring ("0K": 7 warps fit twice an SM, so the successor's blocks launch early).
    std::vector<Cfg> cfgs = {
        {15, 220, 1, "nc15 whole", 0, 0, 1, 1},
    };
    std::vector<Cfg> tcfgs = cfgs;  // timing only: where the time goes
    tcfgs.push_back({15, 220, 1, "nc15 neither-x", 0, 4, 1, 1});
    tcfgs.push_back({15, 0, 1, "nc15 neither-x 0K", 0, 4, 1, 1});
    tcfgs.push_back({7, 220, 1, "nc7 neither-x", 0, 4, 1, 1});
    tcfgs.push_back({7, 0, 1, "nc7 neither-x 0K", 0, 4, 1, 1});
    tcfgs.push_back({7, 0, 0, "nc7 neither-x 0K noPDL", 0, 4, 1, 1});
    tcfgs.push_back({7, 0, 1, "nc7 neither 0K", 0, 3, 1, 1});
    std::vector<Cfg> ccfgs = cfgs;  // + grid caps, so that blocks share tiles in the small cases
    ccfgs.push_back({7, 110, 1, "nc7 tile grid2", 2, 0, 1});
    ccfgs.push_back({15, 220, 1, "nc15 tile grid3", 3, 0, 1});
    ccfgs.push_back({15, 220, 1, "nc15 whole grid3", 3, 0, 1, 1});
    if (quick) ccfgs = {ccfgs[1], ccfgs[2], ccfgs[3]};
    for (const Cfg &c : cfgs)
        for (const Role &r : kRoles) {
            Args a = {};
            const size_t s = plan(a, r.M, r.K, r.nmat, c);
            printf("plan %-10s %-28s NS=%d tiles=%d items=%d smem=%zu B grid=%d\n", c.name, r.name, a.NS,
                   a.tiles, a.items, s, std::min(g_sms, a.tiles));
        }

    int fails = 0;
    fails += check_shape("small M=45 K=2560 plain", 45, 2560, EPI_PLAIN, false, sc, ccfgs, st);
    fails += check_shape("small M=37 K=1024 wide x", 37, 1024, EPI_PLAIN, true, sc, ccfgs, st);
    fails += check_shape("small M=50 K=4096 add", 50, 4096, EPI_ADD, false, sc, ccfgs, st);
    fails += check_shape("small M=70 K=2560 swiglu", 70, 2560, EPI_SWIGLU, false, sc, ccfgs, st);
    if (!quick) fails += check_shape("small M=100 K=9728 add", 100, 9728, EPI_ADD, false, sc, ccfgs, st);
    if (!quick) fails += check_shape("M=2200 K=9728 add (ragged)", 2200, 9728, EPI_ADD, false, sc, ccfgs, st);
    if (!quick)
        for (const Role &r : kRoles) fails += check_shape(r.name, r.M, r.K, r.epi, false, sc, cfgs, st);
    printf("correctness: %d failed\n", fails);
    if (quick) return fails ? 1 : 0;

    // copy bandwidth (read + write), as cuda_bench
    {
        const size_t nb = (size_t)1 << 30;
        void *a, *b;
        CK(cudaMalloc(&a, nb));
        CK(cudaMalloc(&b, nb));
        CK(cudaMemset(a, 0x5A, nb));
        const double us = time_us([&](int) { CK(cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice, st)); }, 10, st);
        g_copy_gbs = 2.0 * nb / (us * 1e-6) / 1e9;
        printf("device copy (read+write) 1 GiB: %.1f us, %.1f GB/s\n", us, g_copy_gbs);
        // the bulk-copy engine alone, by copy size (GB/s read into shared memory)
        printf("| %-30s | %-16s | %9s | %8s | %6s |\n", "tma stream (no consumers)", "grid/ring", "us", "GB/s", "%copy");
        static const int sizes[] = {144, 288, 576, 1152, 1440, 2304, 4608, 9216, 18432};
        static const struct { int bps, ring_kb; } geo[] = {{1, 200}, {2, 96}};
        for (const auto &gm : geo)
            for (int cs : sizes) {
                const int G = g_sms * gm.bps;
                const int ns = std::min(1024, gm.ring_kb * 1024 / cs);
                const int64_t per = ((int64_t)(nb / 2) / G / cs) * cs;
                const size_t smem = 8 * 1024 + (size_t)ns * cs;
                const double tus = time_us([&](int) {
                    bulk::tma_sweep<<<G, 32, smem, st>>>((const uint8_t *)a, per, cs, ns);
                }, 3, st);
                char nm[64], gn[32];
                snprintf(nm, sizeof nm, "bulk copies of %d B", cs);
                snprintf(gn, sizeof gn, "%dx%d %dK", g_sms, gm.bps, gm.ring_kb);
                row(nm, gn, tus, (double)per * G);
            }
        cudaFree(a);
        cudaFree(b);
    }

    // 20 layers of weights (20 x 55.3 MB; the smallest role, O, rotates over 118 MB: well over L2), activations as a decode step chains them
    enum { L = 20 };
    std::vector<Layer> lay(L);
    double layer_bytes = 0;
    for (int ri = 0; ri < 4; ri++) {
        const Role &r = kRoles[ri];
        const size_t mb = (size_t)r.M * (r.K / 256) * 144;
        layer_bytes += (double)mb * r.nmat + 4.0 * r.K + 4.0 * r.M * (r.epi == EPI_ADD ? 2 : 1);
        for (int m = 0; m < r.nmat; m++) {
            std::vector<uint8_t> h(mb);
            fill_q4k(h.data(), mb / 144);
            for (int l = 0; l < L; l++) {
                CK(cudaMalloc(&lay[l].w[ri][m], mb));
                CK(cudaMemcpy(lay[l].w[ri][m], h.data(), mb, cudaMemcpyHostToDevice));
            }
        }
        if (r.nmat == 1)
            for (int l = 0; l < L; l++) lay[l].w[ri][1] = NULL;
    }
    auto dev_rand = [](int n, float lo, float hi) {
        std::vector<float> h(n);
        for (auto &v : h) v = lo + (hi - lo) * 0.5f * (frnd() + 1.f);
        return dev_upload(h);
    };
    float *hx = dev_rand(2560, -1, 1), *qk = dev_rand(5120, -1, 1), *ff = dev_rand(9728, -1, 1);
    // QK reads x -> qk; O reads qk[0..4096) and adds into x; the pair reads x -> ff; down reads
    // ff and adds into x (each kernel depends on the one before, as in a decode step).
    auto layer_role = [&](bool v11, int l, int ri, const Cfg &cfg) {
        const Role &r = kRoles[ri];
        uint8_t *const *w = lay[l].w[ri];
        switch (ri) {
        case 0: run_role(v11, r, w[0], w[1], hx, qk, NULL, sc, cfg, st); break;
        case 1: run_role(v11, r, w[0], w[1], qk, hx, hx, sc, cfg, st); break;
        case 2: run_role(v11, r, w[0], w[1], hx, ff, NULL, sc, cfg, st); break;
        default: run_role(v11, r, w[0], w[1], ff, hx, hx, sc, cfg, st); break;
        }
    };
    auto reset_x = [&]() {  // keep x bounded: the residual adds would grow it over many replays
        std::vector<float> h(2560);
        for (auto &v : h) v = frnd();
        CK(cudaMemcpy(hx, h.data(), 2560 * 4, cudaMemcpyHostToDevice));
    };

    printf("\n(a) each kernel alone, weights rotating over %d layers, median of 7 x 200 launches\n", L);
    printf("| %-30s | %-16s | %9s | %8s | %6s |\n", "matmul", "variant", "us", "GB/s", "%copy");
    for (int ri = 0; ri < 4; ri++) {
        const Role &r = kRoles[ri];
        const double bytes = (double)r.M * (r.K / 256) * 144 * r.nmat + 4.0 * r.K +
                             4.0 * r.M * (r.epi == EPI_ADD ? 2 : 1);
        for (int c = -1; c < (int)tcfgs.size(); c++) {
            const bool v11 = c < 0;
            const Cfg &cfg = v11 ? tcfgs[0] : tcfgs[c];
            reset_x();
            const double us = time_us([&](int i) { layer_role(v11, i % L, ri, cfg); }, 200, st);
            row(r.name, v11 ? "v11" : cfg.name, us, bytes);
        }
    }

    printf("\n(b) the four in one CUDA graph, %d layers, replayed back to back (median of 7 x 20)\n", L);
    printf("| %-30s | %-16s | %9s | %8s | %6s |\n", "graph", "variant", "us/layer", "GB/s", "%copy");
    std::vector<Cfg> gcfgs = tcfgs;

    for (int c = -2; c < (int)gcfgs.size(); c++) {
        const bool v11 = c < 0;
        g_pdl = c != -1;  // v11 with (c = -2) and without (c = -1) PDL
        const Cfg &cfg = v11 ? gcfgs[0] : gcfgs[c];
        reset_x();
        for (int l = 0; l < L; l++)  // eager once (warms up)
            for (int ri = 0; ri < 4; ri++) layer_role(v11, l, ri, cfg);
        CK(cudaStreamSynchronize(st));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < L; l++)
            for (int ri = 0; ri < 4; ri++) layer_role(v11, l, ri, cfg);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        reset_x();
        const double us = time_us([&](int) { CK(cudaGraphLaunch(ge, st)); }, 20, st) / L;
        row("4B GEMV graph (Q4_K only)", v11 ? (g_pdl ? "v11" : "v11 noPDL") : cfg.name, us, layer_bytes);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    g_pdl = true;
    printf("layer bytes %.1f MB (Q4_K: QK, O, gate, up, down; cuda_bench's row adds V Q6_K 2.15 MB)\n",
           layer_bytes / 1e6);
    printf("correctness: %d failed\n", fails);
    return fails ? 1 : 0;
}
