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
// Session 5: layer_ring (the second kernel below) asks whether (a) an INT8 mma body (x staged
// once a block as exact int8 limbs, q4k_imma_proto.cu's digits; A = the quant bytes masked in
// place, one m16n8k32 u8.s8 mma a Q4_K sub-block, its scale by an IMAD) and (b) the layer's four
// Q4_K matmuls in ONE persistent launch (the producer streams the next phase's weights, a grid
// counter where a phase needs the previous one's output; optional RMSNorm folded into the
// staging) bring the layer near copy bandwidth. Warps: 14 consumers, a finisher (sums a unit's
// partials in warp order and writes y), a producer. Cfg.kind picks tile_ring / layer_ring's f16
// or INT8 body (UNR 2: two super-blocks a loop body), Cfg.fused one launch a layer.
// Measured (H200, NOTES 2.2 session 5, RESULTS): correct; INT8 fused 34.7 us/layer (37.5% of
// copy) vs v11 40.1; bound by the consumers' math (~10.6 us) plus ~21 us of fixed cost (launch,
// 3 grid barriers, the x staging after each), not by the bytes.
// Session 10 (NOTES 2.2 "Session 10 (dfl)"): layer_flow replaced the grid barriers by a counter
// per 256 output rows (round-robin tiles across the phases, x staged per super-block as its rows
// are written): correct and bit-identical, but slower in all three forms built (51.6-101
// us/layer vs i8 fused 34.3: the polling of the counters costs more than the ~4.6 us the
// barriers cost here, i8 fused nowait 29.7); not kept, see branch dfl's commits da725ab,
// 6af7ba3, 6024a32.
//
// Numeric contract: v11's (|y - y_cpu| <= 1e-5 * sum_k |W x| per dot), checked against a CPU
// double reference; v11 itself (gemv_mma.cu, included below) runs in the same process on the
// same weights for the comparison.
//
// Build (from the repository root; the include of gemv_mma.cu needs -I.):
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. -Iinclude -o q4k_bulk_proto bench/q4k_bulk_proto.cu
// Session 10's binaries were built against that day's gemv_mma.cu (stubs below for runtime.cu's
// switches); session 5's against its HEAD's (mma_matmul with its PreNorm argument, NULL here);
// session 4's used v11 of commit 9115dcf (git archive 9115dcf kernels
// include | tar -x -C D, copy this file into D, then nvcc ... -ID -ID/include).
// Run: ./q4k_bulk_proto [--quick] [--tma]   (--quick: the small correctness cases only, for
// sanitizers; --tma: the bulk-copy sweep by copy size of session 4's R2)
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
// runtime.cu's switches at the product defaults of session 9 (so the "v11" rows are today's
// mma_matmul: LOOM_GEMV_MMA_Q4K_V=2, the INT8 Q4_K body)
int mma_q4k_variant() { return 2; }
int gemv_triple_mixed() { return 1; }
int gemm_wide_min() { return 1; }
int gemm_wide_q4k_i8_form() { return 4; }
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


// ---- session 5: the INT8 body and the persistent layer kernel (layer_ring) ----------------
// INT8 body. x of a super-block is scaled by a power of two s (max |x s| in [2^21, 2^22)),
// rounded to X and written as balanced int8 limbs X = 2^16 L0 + 2^8 L1 + L2 (L2 = the low byte
// of X, L1 = the low byte of (X + 128) >> 8, L0 = (X + 32896) >> 16: q4k_imma_proto.cu's
// digits). They are the B columns 0..2 of mma.sync m16n8k32 u8.s8 -> s32 (columns 3..7 hold
// copies of L2: their results land in lanes whose weights below are 0). A = the quant bytes
// masked in place: w & 0x0F0F0F0F (sub-block 2c, values 0..15) and w & 0xF0F0F0F0 (sub-block
// 2c+1, values 16 q: unsigned), one LOP3 per 4 values, so one k32 mma is one 32-value sub-block
// and its 6-bit scale multiplies the exact s32 sum by an IMAD. Lane (g, t) holds quant bytes
// 8t..8t+7 of the chunk (a0/a2: row g, a1/a3: row g+8); the B limbs follow the same k
// permutation (8 contiguous bytes). Per row and limb column: I = 16 sum_even sc C + sum_odd sc
// C16 (< 2^29: exact in s32), folded once a super-block in FP32 with the column weights
// (lane t = 0: 2^16, 2^8; t = 1: 1, 0; t >= 2: 0, 0; all / 16). The mins: lane t subtracts
// dmin (m_2t Sx_2t + m_2t+1 Sx_2t+1) for its two sub-blocks (Sx = sub-block sums of X, exact
// integers < 2^27 rounded to float), so the per-row result is the sum over the 4 t lanes.
struct XI8 {
    uint8_t limb[8][3][32];  // sub-block j, limb column l, the 32 values in order
    float sx[8];             // sum of X over sub-block j
    float sinv;              // 1 / s
    float pad[3];
};
static_assert(sizeof(XI8) == 816, "XI8 layout");

__device__ __forceinline__ void mma_u8s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack4b(int a, int b, int c, int d) {
    return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}
__device__ __forceinline__ uint2 lds8(const uint8_t *p) {
    return *reinterpret_cast<const uint2 *>(p);
}

// x * rs * w (the folded RMSNorm) where w is not NULL.
__device__ __forceinline__ float4 norm4(float4 x, float rs, const float *w) {
    if (!w) return x;
    const float4 n = *reinterpret_cast<const float4 *>(w);
    return make_float4(__fmul_rn(__fmul_rn(x.x, rs), n.x), __fmul_rn(__fmul_rn(x.y, rs), n.y),
                       __fmul_rn(__fmul_rn(x.z, rs), n.z), __fmul_rn(__fmul_rn(x.w, rs), n.w));
}

// Stages one super-block of x into st. Whole warp; lane L brings values 8L..8L+7 (a, b:
// sub-block L / 4, offset 8 (L % 4)), already normalized where a norm is folded.
__device__ __forceinline__ void stage_i8(XI8 &st, float4 a, float4 b, int lane) {
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t mx = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) mx = max(mx, __float_as_uint(v[i]) & 0x7fffffffu);
    mx = __reduce_max_sync(0xffffffffu, mx);
    // s = 2^(21 - E) with max|x| in [2^(E-1), 2^E): max |x s| < 2^22; e = s's biased exponent
    int e = 275 - (int)(mx >> 23);
    e = mx ? min(max(e, 1), 253) : 127;
    const float s = __int_as_float(e << 23), inv_s = __int_as_float((254 - e) << 23);
    int X[8], L1[8], L0[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        X[i] = __float2int_rn(v[i] * s);
        sum += X[i];
        L1[i] = (X[i] + 128) >> 8;
        L0[i] = (X[i] + 32896) >> 16;
    }
    uint8_t *dst = &st.limb[lane >> 2][0][8 * (lane & 3)];
    *reinterpret_cast<uint2 *>(dst) = make_uint2(pack4b(L0[0], L0[1], L0[2], L0[3]), pack4b(L0[4], L0[5], L0[6], L0[7]));
    *reinterpret_cast<uint2 *>(dst + 32) = make_uint2(pack4b(L1[0], L1[1], L1[2], L1[3]), pack4b(L1[4], L1[5], L1[6], L1[7]));
    *reinterpret_cast<uint2 *>(dst + 64) = make_uint2(pack4b(X[0], X[1], X[2], X[3]), pack4b(X[4], X[5], X[6], X[7]));
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0) st.sx[lane >> 2] = (float)sum;
    if (lane == 0) st.sinv = inv_s;
}

// Per-lane constants of the INT8 body.
struct I8Lane {
    int gb;          // B limb column this lane loads (g, clamped to 2)
    int t8;          // 8 t: the lane's byte offset in a 32-byte chunk
    float wa, wb;    // weights of the lane's two accumulator columns (/ 16 included)
    uint32_t sel_e, sel_o;  // byte selectors of the min bytes of sub-blocks 2t, 2t+1
    bool hit;        // t >= 2: the mins of sub-blocks 4..7
};
__device__ __forceinline__ I8Lane i8_lane(int lane) {
    const int g = lane >> 2, t = lane & 3;
    I8Lane L;
    L.gb = g < 3 ? g : 2;
    L.t8 = 8 * t;
    L.wa = t == 0 ? 4096.f : (t == 1 ? 0.0625f : 0.f);
    L.wb = t == 0 ? 16.f : 0.f;
    L.sel_e = 0x4440u | (uint32_t)((2 * t) & 3);
    L.sel_o = 0x4440u | (uint32_t)((2 * t + 1) & 3);
    L.hit = t >= 2;
    return L;
}

// One super-block of rows g (rg) and g+8 (r8) in shared memory against the staged x:
// acc[0] += this lane's share of row g, acc[1] of row g+8 (sum over the 4 t lanes = the dot).
__device__ __forceinline__ void q4_sb_i8(const uint8_t *rg, const uint8_t *r8, const XI8 &xs,
                                         const I8Lane &L, float (&acc)[2]) {
    uint2 q0[4], q8[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        q0[c] = lds8(rg + 16 + 32 * c + L.t8);
        q8[c] = lds8(r8 + 16 + 32 * c + L.t8);
    }
    const uint4 h0 = lds16(rg), h8 = lds16(r8);
    const uint32_t sa0 = h0.y & 0x3F3F3F3Fu, sb0 = (h0.w & 0x0F0F0F0Fu) | ((h0.y >> 2) & 0x30303030u);
    const uint32_t sa8 = h8.y & 0x3F3F3F3Fu, sb8 = (h8.w & 0x0F0F0F0Fu) | ((h8.y >> 2) & 0x30303030u);
    int lo0a = 0, lo0b = 0, lo8a = 0, lo8b = 0, hi0a = 0, hi0b = 0, hi8a = 0, hi8b = 0;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const uint2 be = lds8(&xs.limb[2 * c][L.gb][L.t8]);
        const uint2 bo = lds8(&xs.limb[2 * c + 1][L.gb][L.t8]);
        int ce[4] = {0, 0, 0, 0}, co[4] = {0, 0, 0, 0};
        mma_u8s8(ce, q0[c].x & 0x0F0F0F0Fu, q8[c].x & 0x0F0F0F0Fu, q0[c].y & 0x0F0F0F0Fu,
                 q8[c].y & 0x0F0F0F0Fu, be.x, be.y);
        mma_u8s8(co, q0[c].x & 0xF0F0F0F0u, q8[c].x & 0xF0F0F0F0u, q0[c].y & 0xF0F0F0F0u,
                 q8[c].y & 0xF0F0F0F0u, bo.x, bo.y);
        // scales of sub-blocks 2c (byte (2c) & 3 of word a (c < 2) or b) and 2c + 1
        const uint32_t w0 = c < 2 ? sa0 : sb0, w8 = c < 2 ? sa8 : sb8;
        const int se0 = (int)((w0 >> (8 * ((2 * c) & 3))) & 0xFF), so0 = (int)((w0 >> (8 * ((2 * c + 1) & 3))) & 0xFF);
        const int se8 = (int)((w8 >> (8 * ((2 * c) & 3))) & 0xFF), so8 = (int)((w8 >> (8 * ((2 * c + 1) & 3))) & 0xFF);
        lo0a += se0 * ce[0];
        lo0b += se0 * ce[1];
        lo8a += se8 * ce[2];
        lo8b += se8 * ce[3];
        hi0a += so0 * co[0];
        hi0b += so0 * co[1];
        hi8a += so8 * co[2];
        hi8b += so8 * co[3];
    }
    // mins of this lane's sub-blocks 2t, 2t+1
    const uint32_t mw0 = L.hit ? (((h0.w >> 4) & 0x0F0F0F0Fu) | ((h0.z >> 2) & 0x30303030u)) : (h0.z & 0x3F3F3F3Fu);
    const uint32_t mw8 = L.hit ? (((h8.w >> 4) & 0x0F0F0F0Fu) | ((h8.z >> 2) & 0x30303030u)) : (h8.z & 0x3F3F3F3Fu);
    const float2 sx = *reinterpret_cast<const float2 *>(&xs.sx[L.t8 >> 2]);
    const float mn0 = fmaf((float)__byte_perm(mw0, 0, L.sel_e), sx.x, (float)__byte_perm(mw0, 0, L.sel_o) * sx.y);
    const float mn8 = fmaf((float)__byte_perm(mw8, 0, L.sel_e), sx.x, (float)__byte_perm(mw8, 0, L.sel_o) * sx.y);
    const float f0 = fmaf(L.wa, (float)(16 * lo0a + hi0a), L.wb * (float)(16 * lo0b + hi0b));
    const float f8 = fmaf(L.wa, (float)(16 * lo8a + hi8a), L.wb * (float)(16 * lo8b + hi8b));
    const float inv = xs.sinv;
    const float d0 = f16_bits_to_f32((uint16_t)(h0.x & 0xFFFFu)), dm0 = f16_bits_to_f32((uint16_t)(h0.x >> 16));
    const float d8 = f16_bits_to_f32((uint16_t)(h8.x & 0xFFFFu)), dm8 = f16_bits_to_f32((uint16_t)(h8.x >> 16));
    acc[0] = fmaf(d0 * inv, f0, fmaf(-dm0 * inv, mn0, acc[0]));
    acc[1] = fmaf(d8 * inv, f8, fmaf(-dm8 * inv, mn8, acc[1]));
}

// The persistent layer kernel. One launch runs nph matmul phases (the layer: QK, O + residual,
// gate/up + SwiGLU, down + residual; or one of them: nph = 1) over a persistent grid of G
// blocks, one an SM (NC = 14 consumer warps, a finisher warp, a producer warp; ~220 KB of
// shared memory).
// - Units: in each phase a block owns the (16-row tile, super-block) items [q0, q1) (whole
//   tiles if `whole`, else an even split: a tile may be shared by two blocks and finished
//   through global scratch as tile_ring does); its tiles' item runs are cut into units of at
//   most umax super-blocks (one unit fills one ring slot: NMAT x 16 rows x pitch).
// - Producer: walks every phase's units without waiting for any activation (the weights are
//   constant), so the ring is full of the next phase's weights while the consumers finish the
//   current one and wait at the grid barrier. One cp.async.bulk a row (16-32 lanes).
// - Consumers: phase 0 waits for the previous kernel (griddepcontrol.wait), phase p > 0 for the
//   grid counter of phase p - 1 (thread 0 polls with ld.acquire, then a consumer barrier); then
//   all of x is staged (the warp's loads first; BODY 1: int8 limbs, XI8; BODY 0: v11's f16 hi +
//   lo, Stage<1>; the RMSNorm folded in where nw is set) and each unit's items q % NC == warp
//   are accumulated, one partial a warp and unit, then an arrive on the unit barrier.
// - Finisher: per unit in order, sums the NC partials in warp order, frees the slot, adds the
//   tile's earlier units of this block and at the tile's last unit writes y (plain, + residual,
//   SwiGLU); after a phase one red.release on the phase's counter.
// - All activations are read with __ldcg (rows written by other SMs during this kernel).
// - Counters: cnt[0..nph-2] phase barriers, cnt[nph-1] exits; the last block out resets them
//   all (its exit waits until its consumers are past every wait), so every launch finds them
//   zero. Requires all G blocks co-resident (G <= SMs, one block an SM; a successor launched
//   under PDL only takes SMs this grid has left).
struct Phase {
    const uint8_t *w[2];
    float *y;
    const float *resid;  // E_ADD (may equal y)
    const float *x;
    const float *nw;     // RMSNorm weights [K] folded into the x staging (NULL: none; eps 1e-6)
    float *gpart;        // [tiles][2][NMAT][16]
    int *gcnt;           // [tiles], zero between launches
    int M, nsb, nmat, epi, tiles, items, pitch, umax;
    int whole;  // whole tiles a block (else an even split of the items; needs items >= G nsb)
};
struct LArgs {
    Phase ph[4];
    int nph;
    int *cnt;  // [nph]
    int NS, slot_bytes, off_xs, off_red, off_tacc, off_ring;
    int mode;   // 0; diagnostics (wrong results): 1 stream only, 2 math only, 3 neither, 4
                // neither and no x staging, 5 no grid waits between phases
};

// The block's item range of phase P.
__device__ __forceinline__ void lr_range(const Phase &P, int &q0, int &q1) {
    const int whole = P.whole;
    const int G = gridDim.x, b = blockIdx.x;
    q0 = whole ? (int)((int64_t)P.tiles * b / G) * P.nsb : (int)((int64_t)P.items * b / G);
    q1 = whole ? (int)((int64_t)P.tiles * (b + 1) / G) * P.nsb : (int)((int64_t)P.items * (b + 1) / G);
}

// Calls f(tile, lo, hi, first, last, full) for each unit of the block in phase P, in order;
// first / last: the unit is the first / last of its tile in this block; full: the block owns
// the whole tile (else it shares it with a neighbour).
template <typename F>
__device__ __forceinline__ void lr_units(const Phase &P, int q0, int q1, F f) {
    if (q1 <= q0) return;
    const int nsb = P.nsb;
    for (int tile = q0 / nsb; tile <= (q1 - 1) / nsb; tile++) {
        const int lo = max(q0 - tile * nsb, 0), hi = min(q1 - tile * nsb, nsb);
        const int np = (hi - lo + P.umax - 1) / P.umax;
        for (int k = 0; k < np; k++)
            f(tile, lo + (hi - lo) * k / np, lo + (hi - lo) * (k + 1) / np, k == 0, k == np - 1,
              lo == 0 && hi == nsb);
    }
}

__device__ __forceinline__ void red_release(int *p) {
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(p) : "memory");
}
__device__ __forceinline__ int atom_acq_rel(int *p) {
    int v;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Warps: 0..NC-1 consumers, NC the finisher, NC+1 the producer (R2: the finisher was consumer
// warp u % NC, whose next unit then waited for its finishing: a serial chain through all units).
// UNR = 2 (INT8 body only): a warp's items k and k + NC of a unit in one loop body, so that two
// independent super-block chains interleave (the same accumulation order: the same bits).
template <int NC, int BODY, int UNR = 1>
static __global__ void __launch_bounds__((NC + 2) * 32, 1) layer_ring(const LArgs a) {
    constexpr int kXMax = (42 + NC - 1) / NC;  // super-blocks of x a warp stages (nsb <= 42)
    extern __shared__ __align__(128) uint8_t sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int NS = a.NS;
    const uint32_t bar_full = smaddr(sm), bar_empty = bar_full + 8 * NS, bar_unit = bar_empty + 8 * NS;
    float *red = reinterpret_cast<float *>(sm + a.off_red);  // [NS][NC][2][16]
    float *nred = reinterpret_cast<float *>(sm + a.off_tacc);  // [NC]: the norm's warp sums
    uint8_t *ringp = sm + a.off_ring;
    const int G = gridDim.x;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NS; i++) {
            mb_init(bar_full + 8 * i, 1);
            mb_init(bar_empty + 8 * i, 1);
            mb_init(bar_unit + 8 * i, NC * 32);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    pdl_launch_dependents();

    if (warp == NC + 1) {  // ---- producer
        const uint32_t ring = smaddr(ringp);
        int u = 0;
        for (int p = 0; p < a.nph; p++) {
            const Phase &P = a.ph[p];
            int q0, q1;
            lr_range(P, q0, q1);
            lr_units(P, q0, q1, [&](int tile, int lo, int hi, bool, bool, bool) {
                const int slot = u % NS;
                if (u >= NS) mb_wait(bar_empty + 8 * slot, (uint32_t)((u / NS) - 1) & 1u);
                u++;
                if (a.mode >= 2 && a.mode <= 4) {
                    if (lane == 0) mb_arrive(bar_full + 8 * slot);
                    return;
                }
                const uint32_t bytes = (uint32_t)(hi - lo) * kQ4KBytes;
                const int r0 = tile * kTileRows;
                const int valid = min(P.M - r0, kTileRows);
                if (lane == 0) mb_arrive_expect_tx(bar_full + 8 * slot, bytes * (uint32_t)(valid * P.nmat));
                __syncwarp();
                const int m = lane >> 4, r = lane & 15;
                if (m < P.nmat && r < valid)
                    bulk_g2s(ring + (uint32_t)(slot * a.slot_bytes + (m * 16 + r) * P.pitch),
                             P.w[m] + (int64_t)(r0 + r) * P.nsb * kQ4KBytes + (int64_t)lo * kQ4KBytes, bytes,
                             bar_full + 8 * slot);
            });
        }
        return;
    }

    if (warp == NC) {  // ---- finisher: sums each unit's NC partials in warp order, writes y
        // R2 hung: a block without units in a phase let its finisher arrive (and exit) before
        // the previous kernel had reset the counters, or before its own consumers had seen a
        // barrier that the last exit then reset. So: wait for the previous kernel, and arrive
        // on the exit counter only after this block's consumers are past every wait (bar 2).
        pdl_wait();
        int u = 0;
        const int m = lane >> 4, r = lane & 15;  // lane: row r of matrix m
        for (int p = 0; p < a.nph; p++) {
            const Phase &P = a.ph[p];
            int q0, q1;
            lr_range(P, q0, q1);
            float tacc = 0.0f;
            lr_units(P, q0, q1, [&](int tile, int lo, int hi, bool first, bool last, bool full) {
                const int slot = u % NS;
                const uint32_t par = (uint32_t)(u / NS) & 1u;
                u++;
                mb_wait(bar_unit + 8 * slot, par);
                float part[NC];
                const float *rp = red + (slot * NC * 2 + m) * 16 + r;
#pragma unroll
                for (int w = 0; w < NC; w++) part[w] = rp[w * 2 * 16];
                __syncwarp();
                if (lane == 0) mb_arrive(bar_empty + 8 * slot);  // slot + partials free
                float v = part[0];
#pragma unroll
                for (int w = 1; w < NC; w++) v = __fadd_rn(v, part[w]);
                if (!first) v = __fadd_rn(tacc, v);
                tacc = v;
                if (!last) return;
                bool fin = full;
                if (!fin) {  // shared with the neighbouring block: the second to arrive finishes it
                    const int piece = tile * P.nsb >= q0 ? 0 : 1;  // 0: the tile's first items
                    float *gp = P.gpart + (int64_t)tile * 2 * 2 * 16;
                    gp[piece * 32 + lane] = v;
                    __syncwarp();
                    int old = 0;
                    if (lane == 0) {
                        __threadfence();
                        old = atomicAdd(&P.gcnt[tile], 1);
                        if (old == 1) __threadfence();
                    }
                    old = __shfl_sync(0xffffffffu, old, 0);
                    if (old == 1) {  // a + b == b + a: the same bits whichever block finishes
                        v = __fadd_rn(v, __ldcg(gp + (1 - piece) * 32 + lane));
                        if (lane == 0) P.gcnt[tile] = 0;
                        fin = true;
                    }
                }
                if (!fin) return;
                const float o = __shfl_down_sync(0xffffffffu, v, 16);  // lanes 0..15: up's row
                const int row = tile * kTileRows + r;
                if (lane < 16 && row < P.M) {
                    float y;
                    if (P.epi == E_SWIGLU) y = __fmul_rn(silu_f(v), o);
                    else if (P.epi == E_ADD) y = __fadd_rn(v, __ldcg(P.resid + row));
                    else y = v;
                    P.y[row] = y;
                }
            });
            // this block's rows of phase p are written: one release arrival (the exits: the last
            // block out resets every counter; every wait of every block has passed by then)
            __syncwarp();
            if (p < a.nph - 1) {
                if (lane == 0 && a.mode != 5) red_release(a.cnt + p);
            } else {
                asm volatile("bar.sync 2, %0;" ::"n"((NC + 1) * 32) : "memory");
                if (lane == 0 && atom_acq_rel(a.cnt + p) == G - 1)
                    for (int i = 0; i < a.nph; i++) a.cnt[i] = 0;
            }
        }
        return;
    }

    // ---- consumers
    const int g = lane >> 2, t = lane & 3;
    const I8Lane L = i8_lane(lane);
    const bool hit = t >= 2;
    const uint32_t e2 = 2 * (t & 1);
    const uint32_t sel_e = e2 * 0x101u + 0x4040u, sel_o = (e2 + 1) * 0x101u + 0x4040u;
    // the 8 x values this lane stages of a super-block: BODY 1 8 lane .. +7; BODY 0 v11's
    // fragment order (64 t + 4 g .. +3 and +32 .. +35)
    const int xo0 = BODY == 1 ? 8 * lane : 64 * t + 4 * g, xo1 = BODY == 1 ? 8 * lane + 4 : 64 * t + 4 * g + 32;
    int u = 0;
    for (int p = 0; p < a.nph; p++) {
        const Phase &P = a.ph[p];
        if (p == 0) {
            pdl_wait();
        } else if (a.mode != 5) {  // every block's rows of phase p - 1 are written
            if (threadIdx.x == 0)
                while (ld_acquire(a.cnt + p - 1) < G) {
                }
        }
        // all consumer warps are past phase p - 1 (their reads of x done) and, with thread 0's
        // acquire, see every block's rows
        asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory");
        if (a.mode != 4) {  // stage all of x: the loads of the warp's super-blocks first
            float4 xa[kXMax], xc[kXMax];
            float ss = 0.0f;
#pragma unroll
            for (int q = 0; q < kXMax; q++) {
                const int sb = warp + q * NC;
                if (sb < P.nsb) {
                    xa[q] = __ldcg(reinterpret_cast<const float4 *>(P.x + (int64_t)sb * 256 + xo0));
                    xc[q] = __ldcg(reinterpret_cast<const float4 *>(P.x + (int64_t)sb * 256 + xo1));
                }
            }
            float rs = 1.0f;
            if (P.nw) {  // the RMSNorm's scale: sum of squares over the block's warps
#pragma unroll
                for (int q = 0; q < kXMax; q++) {
                    if (warp + q * NC < P.nsb) {
                        ss = fmaf(xa[q].x, xa[q].x, fmaf(xa[q].y, xa[q].y, fmaf(xa[q].z, xa[q].z, fmaf(xa[q].w, xa[q].w, ss))));
                        ss = fmaf(xc[q].x, xc[q].x, fmaf(xc[q].y, xc[q].y, fmaf(xc[q].z, xc[q].z, fmaf(xc[q].w, xc[q].w, ss))));
                    }
                }
#pragma unroll
                for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
                if (lane == 0) nred[warp] = ss;
                asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory");
                float tot = 0.0f;
                for (int w = 0; w < NC; w++) tot += nred[w];  // the same order in every thread
                rs = rsqrtf(tot / (float)(P.nsb * 256) + 1e-6f);
            }
#pragma unroll
            for (int q = 0; q < kXMax; q++) {
                const int sb = warp + q * NC;
                if (sb < P.nsb) {
                    const float *nwsb = P.nw ? P.nw + (int64_t)sb * 256 : NULL;
                    const float4 va = norm4(xa[q], rs, nwsb ? nwsb + xo0 : NULL);
                    const float4 vc = norm4(xc[q], rs, nwsb ? nwsb + xo1 : NULL);
                    if (BODY == 1) {
                        stage_i8(reinterpret_cast<XI8 *>(sm + a.off_xs)[sb], va, vc, lane);
                    } else {
                        Stage<1> &st = reinterpret_cast<Stage<1> *>(sm + a.off_xs)[sb];
                        stage_token<1>(st, 0, va, vc, lane);
                        if (lane >= 1 && lane < 4) st.sinv[lane] = 0.0f;
                    }
                }
            }
        }
        asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory");
        int q0, q1;
        lr_range(P, q0, q1);
        lr_units(P, q0, q1, [&](int tile, int lo, int hi, bool, bool, bool) {
            const int slot = u % NS;
            const uint32_t par = (uint32_t)(u / NS) & 1u;
            u++;
            mb_wait(bar_full + 8 * slot, par);
            const uint8_t *sp = ringp + slot * a.slot_bytes;
            float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
            const int base = tile * P.nsb + lo;
            int k = warp - base % NC;
            if (k < 0) k += NC;
            const int kend = (a.mode == 1 || a.mode == 3 || a.mode == 4) ? 0 : hi - lo;
            if (BODY == 1 && UNR == 2) {
                const XI8 *xs = reinterpret_cast<const XI8 *>(sm + a.off_xs);
#pragma unroll 1
                for (; k + NC < kend; k += 2 * NC) {
#pragma unroll
                    for (int m = 0; m < 2; m++) {
                        if (m < P.nmat) {
                            const uint8_t *rg = sp + (m * 16 + g) * P.pitch + k * kQ4KBytes;
                            const uint8_t *rh = rg + NC * kQ4KBytes;
                            q4_sb_i8(rg, rg + 8 * P.pitch, xs[lo + k], L, acc[m]);
                            q4_sb_i8(rh, rh + 8 * P.pitch, xs[lo + k + NC], L, acc[m]);
                        }
                    }
                }
            }
#pragma unroll 1
            for (; k < kend; k += NC) {
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    if (m < P.nmat) {
                        const uint8_t *rg = sp + (m * 16 + g) * P.pitch + k * kQ4KBytes;
                        const uint8_t *r8 = rg + 8 * P.pitch;
                        if (BODY == 1) {
                            q4_sb_i8(rg, r8, reinterpret_cast<const XI8 *>(sm + a.off_xs)[lo + k], L, acc[m]);
                        } else {
                            Q4Raw r;
                            r.qa0 = lds16(rg + 16 + 32 * t);
                            r.qb0 = lds16(rg + 32 + 32 * t);
                            r.qa8 = lds16(r8 + 16 + 32 * t);
                            r.qb8 = lds16(r8 + 32 + 32 * t);
                            r.h0 = lds16(rg);
                            r.h8 = lds16(r8);
                            float a1[1][2] = {{acc[m][0], acc[m][1]}};
                            const Stage<1> &st = reinterpret_cast<const Stage<1> *>(sm + a.off_xs)[lo + k];
                            if (P.nmat == 1) q4_superblock<1, 2>(r, st, lane, 2, hit, sel_e, sel_o, a1);
                            else q4_superblock<1, 1>(r, st, lane, 2, hit, sel_e, sel_o, a1);
                            acc[m][0] = a1[0][0];
                            acc[m][1] = a1[0][1];
                        }
                    }
                }
            }
            // this warp's generic reads of the slot are done before the async proxy refills it
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            if (BODY == 1) {
#pragma unroll
                for (int m = 0; m < 2; m++)
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], 1);
                        acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], 2);
                    }
            }
            if (t == 0) {
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    float *rp = red + ((slot * NC + warp) * 2 + m) * 16;
                    rp[g] = acc[m][0];
                    rp[g + 8] = acc[m][1];
                }
            }
            mb_arrive(bar_unit + 8 * slot);
        });
    }
    asm volatile("bar.arrive 2, %0;" ::"n"((NC + 1) * 32) : "memory");  // past every wait
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
    int kind;     // 0: tile_ring (f16 body, session 4); layer_ring: 1 f16 body, 2 INT8 body,
                  // 3 INT8 body with two items a loop body (UNR 2)
    int fused;    // layer_ring only: the layer's four matmuls in one launch (else one a matmul)
    int norm;     // fused only: the two RMSNorms (before QK and gate/up) folded into the staging
};

struct Scratch {
    float *gpart;  // [4 phases][1024 tiles][2][2][16]
    int *gcnt;     // [4 phases][1024 tiles]
    int *cnt;      // layer_ring's grid counters [4]
};

static int g_sms = 0;
// layer_ring's consumer warps (+ the finisher and the producer: 512 threads).
static constexpr int kLrNC = 14;
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
    CK(cudaFuncSetAttribute(bulk::layer_ring<kLrNC, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g_smem_max));
    CK(cudaFuncSetAttribute(bulk::layer_ring<kLrNC, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g_smem_max));
    CK(cudaFuncSetAttribute(bulk::layer_ring<kLrNC, 1, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g_smem_max));
}

// One matmul of a layer_ring launch: weights, shape, epilogue and activations.
struct PSpec {
    const uint8_t *w0, *w1;
    int M, K, nmat, epi;
    const float *x;
    float *y;
    const float *resid;
    const float *nw;  // RMSNorm weights folded into the staging (NULL: none)
};

// Row pitch in the ring for units of u super-blocks: INT8 body (LDS.64 of 8 rows g at lane
// offsets 8t): pitch / 4 = 8 or 24 mod 32 words; f16 body (v11's LDS.128): pitch / 16 odd.
static int lr_pitch(int u, int body) {
    int p = u * 144;
    if (body == 1)
        while ((p / 4) % 32 != 8 && (p / 4) % 32 != 24) p += 16;
    else if ((p / 16) % 2 == 0)
        p += 16;
    return p;
}

// Fills a for nph phases under cfg on a grid of G blocks; returns the dynamic shared memory
// size (the largest ring of 2..8 slots that fits the device's limit), 0 if none fits.
static size_t plan_layer(bulk::LArgs &a, const PSpec *ps, int nph, const Cfg &cfg, int G,
                         const Scratch &sc) {
    const int body = cfg.kind >= 2 ? 1 : 0;
    const size_t xsize = body ? sizeof(bulk::XI8) : sizeof(Stage<1>);
    a = bulk::LArgs{};
    a.nph = nph;
    a.cnt = sc.cnt;
    a.mode = cfg.mode;
    int slot = 0, maxnsb = 0;
    for (int p = 0; p < nph; p++) {  // a unit is at most 20 super-blocks (4B down: 2 units a tile)
        const int nsb = ps[p].K / 256;
        if (ps[p].K % 256 || nsb > 42) return 0;
        slot = std::max(slot, ps[p].nmat * 16 * lr_pitch(std::min(nsb, 20), body));
        maxnsb = std::max(maxnsb, nsb);
    }
    a.slot_bytes = slot;
    for (int p = 0; p < nph; p++) {
        bulk::Phase &P = a.ph[p];
        const PSpec &q = ps[p];
        P.w[0] = q.w0;
        P.w[1] = q.w1 ? q.w1 : q.w0;
        P.y = q.y;
        P.resid = q.resid;
        P.x = q.x;
        P.nw = q.nw;
        P.M = q.M;
        P.nsb = q.K / 256;
        P.nmat = q.nmat;
        P.epi = q.epi == EPI_SWIGLU ? bulk::E_SWIGLU : q.epi == EPI_ADD ? bulk::E_ADD : bulk::E_PLAIN;
        P.tiles = (q.M + 15) / 16;
        if (P.tiles > 1024) return 0;
        P.items = P.tiles * P.nsb;
        P.umax = 1;
        for (int u = P.nsb; u >= 1; u--)
            if (q.nmat * 16 * lr_pitch(u, body) <= slot) {
                P.umax = u;
                break;
            }
        P.pitch = lr_pitch(P.umax, body);
        P.whole = cfg.whole || P.items < G * P.nsb;  // an even split shares a tile by two blocks at most
        P.gpart = sc.gpart + (size_t)p * 1024 * 64;
        P.gcnt = sc.gcnt + p * 1024;
    }
    for (int NS = 8; NS >= 2; NS--) {
        size_t off = (size_t)8 * 3 * NS;
        off = (off + 15) & ~(size_t)15;
        a.off_xs = (int)off;
        off += (size_t)maxnsb * xsize;
        a.off_red = (int)off;
        off += (size_t)NS * kLrNC * 2 * 16 * 4;
        a.off_tacc = (int)off;
        off += (2 * 16 + 32) * 4;  // tacc [2][16] + the norm's per-warp sums [NC]
        off = (off + 127) & ~(size_t)127;
        a.off_ring = (int)off;
        off += (size_t)NS * slot;
        if (off <= g_smem_max) {
            a.NS = NS;
            return off;
        }
    }
    return 0;
}

static int lr_grid(const PSpec *ps, int nph, const Cfg &cfg) {
    int tiles = 0;
    for (int p = 0; p < nph; p++) tiles = std::max(tiles, (ps[p].M + 15) / 16);
    return std::min(cfg.gmax > 0 ? cfg.gmax : g_sms, tiles);
}

static void launch_layer(const PSpec *ps, int nph, const Scratch &sc, const Cfg &cfg, cudaStream_t st) {
    bulk::LArgs a;
    const int G = lr_grid(ps, nph, cfg);
    const size_t smem = plan_layer(a, ps, nph, cfg, G, sc);
    if (!smem) {
        fprintf(stderr, "layer_ring: the phases do not fit config %s\n", cfg.name);
        exit(1);
    }
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)G);
    lc.blockDim = dim3((kLrNC + 2) * 32);
    lc.dynamicSmemBytes = smem;
    lc.stream = st;
    lc.attrs = attr;
    lc.numAttrs = cfg.pdl ? 1 : 0;
    if (cfg.kind == 3) CK(cudaLaunchKernelEx(&lc, bulk::layer_ring<kLrNC, 1, 2>, a));
    else if (cfg.kind == 2) CK(cudaLaunchKernelEx(&lc, bulk::layer_ring<kLrNC, 1>, a));
    else CK(cudaLaunchKernelEx(&lc, bulk::layer_ring<kLrNC, 0>, a));
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
    if (mma_matmul(s, nseg, epi, x, K, 1, NULL, &err, st) != LOOM_OK) {
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
    if (cfg.kind >= 1) {
        const PSpec ps = {w0, w1, r.M, r.K, r.nmat, r.epi, x, y, resid};
        launch_layer(&ps, 1, sc, cfg, st);
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

// Correctness of a whole layer in one layer_ring launch (each cfg with kind >= 1): QK (QM x H)
// x0 -> qk; O (H x OK, x = qk[0..OK)) + x0 -> x1; gate/up (F x H) of x1, SwiGLU -> ff; down (H x F)
// of ff + x1 -> x2, every output in its own buffer, each phase checked against the CPU on the
// GPU's own input of that phase. Launched twice (the grid counters must reset); returns failures.
static int check_layer(const char *name, int H, int QM, int OK, int F, const Scratch &sc,
                       const std::vector<Cfg> &cfgs, cudaStream_t st) {
    struct Mat { int M, K; std::vector<uint8_t> h; uint8_t *d; };
    Mat mats[5] = {{QM, H, {}, NULL}, {H, OK, {}, NULL}, {F, H, {}, NULL}, {F, H, {}, NULL}, {H, F, {}, NULL}};
    for (Mat &m : mats) {
        m.h.resize((size_t)m.M * (m.K / 256) * 144);
        fill_q4k(m.h.data(), m.h.size() / 144);
        m.d = dev_upload(m.h);
    }
    std::vector<float> hx0(H), hn0(H), hn2(H);
    for (auto &v : hx0) v = frnd();
    for (auto &v : hn0) v = 0.5f + 0.5f * (frnd() + 1.f);
    for (auto &v : hn2) v = 0.5f + 0.5f * (frnd() + 1.f);
    float *x0 = dev_upload(hx0), *n0 = dev_upload(hn0), *n2 = dev_upload(hn2), *qk, *x1, *ff, *x2;
    // x * rsqrt(mean(x^2) + 1e-6) * w in double, rounded to float (the CPU's normalized input)
    auto normed = [](const std::vector<float> &x, const std::vector<float> &w) {
        double ss = 0;
        for (float v : x) ss += (double)v * v;
        const double r = 1.0 / sqrt(ss / x.size() + 1e-6);
        std::vector<float> o(x.size());
        for (size_t i = 0; i < x.size(); i++) o[i] = (float)(x[i] * r * w[i]);
        return o;
    };
    CK(cudaMalloc(&qk, (size_t)QM * 4));
    CK(cudaMalloc(&x1, (size_t)H * 4));
    CK(cudaMalloc(&ff, (size_t)F * 4));
    CK(cudaMalloc(&x2, (size_t)H * 4));
    int fails = 0;
    for (const Cfg &cfg : cfgs) {
        if (cfg.kind < 1) continue;
        const PSpec ps[4] = {{mats[0].d, NULL, QM, H, 1, EPI_PLAIN, x0, qk, NULL, cfg.norm ? n0 : NULL},
                             {mats[1].d, NULL, H, OK, 1, EPI_ADD, qk, x1, x0, NULL},
                             {mats[2].d, mats[3].d, F, H, 2, EPI_SWIGLU, x1, ff, NULL, cfg.norm ? n2 : NULL},
                             {mats[4].d, NULL, H, F, 1, EPI_ADD, ff, x2, x1, NULL}};
        CK(cudaMemset(qk, 0xFF, (size_t)QM * 4));
        CK(cudaMemset(x1, 0xFF, (size_t)H * 4));
        CK(cudaMemset(ff, 0xFF, (size_t)F * 4));
        CK(cudaMemset(x2, 0xFF, (size_t)H * 4));
        for (int rep = 0; rep < 2; rep++) launch_layer(ps, 4, sc, cfg, st);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        std::vector<float> hqk(QM), hx1(H), hff(F), hx2(H);
        CK(cudaMemcpy(hqk.data(), qk, (size_t)QM * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hx1.data(), x1, (size_t)H * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hff.data(), ff, (size_t)F * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hx2.data(), x2, (size_t)H * 4, cudaMemcpyDeviceToHost));
        std::vector<double> d0(std::max(QM, F)), b0(d0.size()), d1(d0.size()), b1(d0.size());
        double w[4];
        const std::vector<float> in0 = cfg.norm ? normed(hx0, hn0) : hx0;
        const std::vector<float> in2 = cfg.norm ? normed(hx1, hn2) : hx1;
        cpu_dot(mats[0].h.data(), in0.data(), QM, H, d0.data(), b0.data());
        w[0] = check_rows(hqk, EPI_PLAIN, d0.data(), b0.data(), NULL, NULL, NULL, QM);
        cpu_dot(mats[1].h.data(), hqk.data(), H, OK, d0.data(), b0.data());
        w[1] = check_rows(hx1, EPI_ADD, d0.data(), b0.data(), NULL, NULL, hx0.data(), H);
        cpu_dot(mats[2].h.data(), in2.data(), F, H, d0.data(), b0.data());
        cpu_dot(mats[3].h.data(), in2.data(), F, H, d1.data(), b1.data());
        w[2] = check_rows(hff, EPI_SWIGLU, d0.data(), b0.data(), d1.data(), b1.data(), NULL, F);
        cpu_dot(mats[4].h.data(), hff.data(), H, F, d0.data(), b0.data());
        w[3] = check_rows(hx2, EPI_ADD, d0.data(), b0.data(), NULL, NULL, hx1.data(), H);
        const double worst = std::max(std::max(w[0], w[1]), std::max(w[2], w[3]));
        const bool ok = worst <= 1.0;
        fails += !ok;
        printf("check %-30s %-16s fused: err/allowed QK %.2e O %.2e pair %.2e down %.2e %s\n", name, cfg.name,
               w[0], w[1], w[2], w[3], ok ? "ok" : "FAIL");
    }
    for (Mat &m : mats) cudaFree(m.d);
    cudaFree(x0);
    cudaFree(n0);
    cudaFree(n2);
    cudaFree(qk);
    cudaFree(x1);
    cudaFree(ff);
    cudaFree(x2);
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
    bool quick = false, tma = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        if (!strcmp(argv[i], "--tma")) tma = true;  // the bulk-copy sweep by copy size (R2)
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // a killed run still shows how far it came
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
    CK(cudaMalloc(&sc.gpart, (size_t)4 * 1024 * 2 * 2 * 16 * 4));
    CK(cudaMalloc(&sc.gcnt, 4 * 1024 * 4));
    CK(cudaMemset(sc.gcnt, 0, 4 * 1024 * 4));
    CK(cudaMalloc(&sc.cnt, 4 * 4));
    CK(cudaMemset(sc.cnt, 0, 4 * 4));

    // Configurations (R5): 15 consumer warps in 220 KB (one block an SM), one bulk copy a whole
    // tile, whole tiles a block; diagnostics of the fixed cost (no copies, no math, no x
    // staging) with the real ring (one block an SM: the next kernel cannot be resident) and with
    // an empty ring ("0K": 7 warps fit twice an SM, so the successor's blocks launch early).
    // Session 5 (R1): layer_ring (15 consumer warps, one block an SM, whole tiles or an even
    // split) with v11's f16 body (kind 1) or the INT8 body (kind 2), one launch a matmul or the
    // layer's four in one launch (fused); tile_ring's best of R4/R5 ("nc15 whole") as the link.
    std::vector<Cfg> cfgs = {
        {15, 220, 1, "nc15 whole", 0, 0, 1, 1},
        {15, 0, 1, "i8 lr", 0, 0, 0, 1, 2, 0},
        {15, 0, 1, "i8 lr u2", 0, 0, 0, 1, 3, 0},
        {15, 0, 1, "f16 fused", 0, 0, 0, 1, 1, 1},
        {15, 0, 1, "i8 fused", 0, 0, 0, 1, 2, 1},
        {15, 0, 1, "i8 fused u2", 0, 0, 0, 1, 3, 1},
        {15, 0, 1, "i8 fused u2 norm", 0, 0, 0, 1, 3, 1, 1},
    };
    std::vector<Cfg> tcfgs = cfgs;  // timing only: where the time goes (the fused INT8 kernel)
    tcfgs.push_back({15, 0, 1, "i8 fused math", 0, 2, 0, 1, 2, 1});
    tcfgs.push_back({15, 0, 1, "i8 fused u2 math", 0, 2, 0, 1, 3, 1});
    tcfgs.push_back({15, 0, 1, "i8 fused u2 strm", 0, 1, 0, 1, 3, 1});
    tcfgs.push_back({15, 0, 1, "i8 fused neither", 0, 3, 0, 1, 2, 1});
    tcfgs.push_back({15, 0, 1, "i8 lr u2 math", 0, 2, 0, 1, 3, 0});
    // session 10: the barriers' and the staging's share (NOTES 2.2 session 10, item 1)
    tcfgs.push_back({15, 0, 1, "i8 fused strm", 0, 1, 0, 1, 2, 1});
    tcfgs.push_back({15, 0, 1, "i8 fused neither-x", 0, 4, 0, 1, 2, 1});
    tcfgs.push_back({15, 0, 1, "i8 fused nowait", 0, 5, 0, 1, 2, 1});
    std::vector<Cfg> ccfgs = {cfgs[0], cfgs[1], cfgs[2]};  // + grid caps: shared tiles, many tiles a block
    ccfgs.push_back({15, 220, 1, "nc15 whole grid3", 3, 0, 1, 1});
    ccfgs.push_back({15, 0, 1, "i8 lr u2 split g2", 2, 0, 0, 0, 3, 0});
    ccfgs.push_back({15, 0, 1, "i8 lr split grid2", 2, 0, 0, 0, 2, 0});
    ccfgs.push_back({15, 0, 1, "i8 lr u2 whole g3", 3, 0, 0, 1, 3, 0});
    std::vector<Cfg> lcfgs = {cfgs[4], cfgs[5], cfgs[6]};  // the fused layer, small: + caps
    lcfgs.push_back({15, 0, 1, "f16 fused grid3", 3, 0, 0, 1, 1, 1});
    lcfgs.push_back({15, 0, 1, "i8 fused u2 split g3", 3, 0, 0, 0, 3, 1});
    lcfgs.push_back({15, 0, 1, "i8 fused u2 whole g4", 4, 0, 0, 1, 3, 1});
    lcfgs.push_back({15, 0, 1, "i8 fused norm g3", 3, 0, 0, 0, 2, 1, 1});
    if (quick) ccfgs = {ccfgs[3], ccfgs[4], ccfgs[5], ccfgs[6]};
    for (const Cfg &c : cfgs)
        for (const Role &r : kRoles) {
            if (c.kind) {
                const PSpec ps = {NULL, NULL, r.M, r.K, r.nmat, r.epi, NULL, NULL, NULL};
                bulk::LArgs la;
                const int G = lr_grid(&ps, 1, c);
                const size_t s = plan_layer(la, &ps, 1, c, G, sc);
                printf("plan %-14s %-28s NS=%d slot=%d pitch=%d umax=%d whole=%d smem=%zu B grid=%d\n", c.name,
                       r.name, la.NS, la.slot_bytes, la.ph[0].pitch, la.ph[0].umax, la.ph[0].whole, s, G);
                continue;
            }
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
        for (const Role &r : kRoles) fails += check_shape(r.name, r.M, r.K, r.epi, false, sc, std::vector<Cfg>(cfgs.begin(), cfgs.begin() + 3), st);
    fails += check_layer("layer H512 QK640 O512 F5376", 512, 640, 512, 5376, sc, lcfgs, st);
    if (!quick) fails += check_layer("layer 4B (2560/5120/4096/9728)", 2560, 5120, 4096, 9728, sc, cfgs, st);
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
            if (tma)
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
    float *nwa = dev_rand(2560, 0.5f, 1.5f), *nwf = dev_rand(2560, 0.5f, 1.5f);  // norm weights
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
    // the layer as one layer_ring launch (cfg.fused), with the same buffers as layer_role
    auto layer_all = [&](bool v11, int l, const Cfg &cfg) {
        if (v11 || !cfg.fused) {
            for (int ri = 0; ri < 4; ri++) layer_role(v11, l, ri, cfg);
            return;
        }
        uint8_t *const(*w)[2] = lay[l].w;
        const PSpec ps[4] = {{w[0][0], NULL, 5120, 2560, 1, EPI_PLAIN, hx, qk, NULL, cfg.norm ? nwa : NULL},
                             {w[1][0], NULL, 2560, 4096, 1, EPI_ADD, qk, hx, hx, NULL},
                             {w[2][0], w[2][1], 9728, 2560, 2, EPI_SWIGLU, hx, ff, NULL, cfg.norm ? nwf : NULL},
                             {w[3][0], NULL, 2560, 9728, 1, EPI_ADD, ff, hx, hx, NULL}};
        launch_layer(ps, 4, sc, cfg, st);
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
            if (cfg.fused && !v11) continue;  // the same kernel as its "lr" row here
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
        for (int l = 0; l < L; l++) layer_all(v11, l, cfg);  // eager once (warms up)
        CK(cudaStreamSynchronize(st));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < L; l++) layer_all(v11, l, cfg);
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
