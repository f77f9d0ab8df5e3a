// ffn_proto.cu: a standalone prototype (not part of the kernel library) that answers one question
// of bench/NOTES.md 7 (session 22): can the decode FFN -- the normed gate/up pair with SwiGLU and
// the down projection + residual, 42 MB of Q4_K weights at 4B shapes -- run without the
// all-to-all boundary between the pair and the down projection, and is that faster than the
// product's two launches (the 3-warp pair, then down + add at split 2)?
//
// The idea. The down projection y = W_d a needs all 9,728 activations a before any output row is
// complete, which is why the product runs it as a second kernel. Split W_d by its INPUT columns
// instead: a group of 16 CS activation rows (one cluster of CS blocks, one 16-row gate/up tile a
// block) owns the matching K-slice of W_d (a half or a whole Q4_K super-block column: 128 or 256
// columns of all 2,560 rows) and multiplies its own activations into a partial of all 2,560
// outputs. The only dependency left is inside the cluster (the group's activations, exchanged
// through distributed shared memory after one cluster barrier); the partials meet in a small
// second kernel, y = resid + sum over groups in a fixed order (deterministic). Every weight byte
// is read once (the half-column form reads the down's 16-byte block headers twice: +11% of the
// down's bytes); the weights do not depend on any activation, so each warp's next item (a
// gate/up super-block or a down tile's block) is loaded while it works on the current one,
// across the phase boundary.
//
// Kernel ffn_fused<CS, NW> (sm_90a; weights in LOOM_WEIGHT_Q4K_TILES; INT8 body of
// kernels/cuda/q4k_i8_body.cuh): grid F / 16 blocks of NW warps in clusters of CS (CS = 8: a
// half super-block column, 76 groups; CS = 16, non-portable: a whole one, 38 groups).
// - Phase 1: block b = gate/up tile b; warp w takes super-blocks w, w + NW, ... of K (both
//   matrices: two items a super-block); x * norm weight staged as int8 limbs per super-block
//   (scale last: the RMS scale multiplies the finished dots, as the product's pair).
// - Boundary: the warps' sums in warp order, times the block's RMS scale, act = silu(g) u for the
//   tile's 16 rows into shared memory; cluster barrier (release / acquire); warp 0 stages the
//   group's 16 CS activations from the cluster's shared memory as the down super-block's limbs.
// - Phase 2: the block's down tiles T = rank + CS j (2,560 / 16 / CS of them over NW warps),
//   one (half) block of 16 rows an item, its 16 partials stored to part[group][row].
// - ffn_reduce: y[r] = resid[r] + sum_g part[g][r].
// Forms (template switches, each documented at the kernel): registers or a cp.async ring of D
// items a warp; clusters or a global-memory exchange (XG); the down's blocks in tiles, split by
// halves (HL) or column-major (CONTIG); ffn_fused2 with two pieces an item; diagnostics (MODE);
// and stream_items, the same skeleton reading the bytes without any of the FFN's work.
// The baseline, in the same process on the same weights: loom_cuda_matmul_pair_normed (SwiGLU)
// then loom_cuda_matmul_add (the kernel library, linked).
//
// Measured (H200, session 22, bench/NOTES.md 7 "Session 22", RESULTS): correct in every form,
// but slower than the baseline's two launches in every form (best: ring of 2, 23.2-23.7 us a
// layer against 20.0-20.5); its stream alone (no math) takes as long, where the skeleton reads
// the same 42 MB in ~11.4 us. Not integrated.
//
// Build (from the repository root, after `bazel build -c opt //kernels/cuda //kernels/cpu
// //kernels/quant //include:status`):
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. -Iinclude -Xptxas -v -o ffn_proto bench/ffn_proto.cu \
//     bazel-bin/kernels/cuda/libcuda.a bazel-bin/kernels/cpu/libcpu.a \
//     bazel-bin/kernels/quant/libquant.a bazel-bin/kernels/quant/libquant_types.a \
//     bazel-bin/include/libstatus.a
// Run: ./ffn_proto [--quick]   (--quick: correctness only, one layer, for compute-sanitizer)
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/q4k_i8_body.cuh"
#include "kernels/quant/quant.h"

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

namespace loom_cuda {
namespace ffn {

constexpr int kQ4 = 144;          // bytes of a Q4_K block
constexpr int kTileBlk = 16 * kQ4;  // a tile's block run (LOOM_WEIGHT_Q4K_TILES)

struct Args {
    const uint8_t *wg, *wu;  // [F x K] Q4_K tiles
    const uint8_t *wd;       // [K x F] Q4_K tiles
    const uint8_t *wdc;      // the same, column-major tiles (CONTIG: tile T's block j at
                             // (j x K / 16 + T) x 2,304)
    const uint8_t *wdh;      // the same, each tile block split by halves (HL, split_halves)
    float *acts;             // [F] the activations (XG)
    unsigned *cnt;           // [groups] blocks of a group done (XG; ffn_reduce zeroes them)
    const float *x;          // [K] the residual stream (un-normalized)
    const float *nw;         // [K] the RMSNorm weight
    float eps;
    float *part;             // [groups][K] the down's partials
    int K, F;
};

// The bytes lane (g, t) needs of half h of a super-block: the rows' headers and chunks 2h, 2h + 1
// (in q0 / q8 [0..1]; [2..3] unused).
__device__ __forceinline__ Q4RawI8 load_half(const uint8_t *rg, const uint8_t *r8, int64_t sb,
                                             int t, int h) {
    const uint8_t *bg = rg + sb * kTileBlk, *b8 = r8 + sb * kTileBlk;
    Q4RawI8 r;
#pragma unroll
    for (int c = 0; c < 2; c++) {
        r.q0[c] = __ldg(reinterpret_cast<const uint2 *>(bg + 16 + 32 * (2 * h + c) + 8 * t));
        r.q8[c] = __ldg(reinterpret_cast<const uint2 *>(b8 + 16 + 32 * (2 * h + c) + 8 * t));
    }
    r.q0[2] = r.q0[3] = r.q8[2] = r.q8[3] = make_uint2(0u, 0u);
    r.h0 = ldg16(bg);
    r.h8 = ldg16(b8);
    return r;
}

// Half h of a super-block against the staged limbs (sub-blocks 4h .. 4h + 3), the INT8 body's
// one-token steps and fold.
__device__ __forceinline__ void half_i8(const Q4RawI8 &r, const Q4I8Stage<1> &st, int lane, int h,
                                        float (&acc)[2]) {
    const int t = lane & 3;
    uint32_t scw[2][2], mnw[2][2];
    float dg, mg, d8, m8;
    q4_i8_scales(r, scw, mnw, dg, mg, d8, m8);
    const uint32_t sw[2][2] = {{h ? scw[0][1] : scw[0][0], 0u}, {h ? scw[1][1] : scw[1][0], 0u}};
    const uint32_t mw[2][2] = {{h ? mnw[0][1] : mnw[0][0], 0u}, {h ? mnw[1][1] : mnw[1][0], 0u}};
    int I[4] = {0, 0, 0, 0}, M[2][4] = {};
    Q4I8A q[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = q4_i8_a(r, sw, mw, 0, i);
    uint32_t b0[4], b1[4];
    q4_i8_b<1>(st, 0, h, lane, b0, b1);
#pragma unroll
    for (int i = 0; i < 4; i++) q4_i8_mma(q[i], b0[i], b1[i], I, M[i & 1]);
    int Ms[4];
#pragma unroll
    for (int k = 0; k < 4; k++) Ms[k] = M[0][k] + M[1][k];
    q4_i8_fold(I, Ms, st.sinv[t >> 1], dg, mg, d8, m8, t, acc);
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ float4 ld_dsmem4(uint32_t addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
__device__ __forceinline__ uint32_t map_rank(uint32_t addr, int rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

// The block's RMS partials of x: double sums of squares, one a warp into npart[w].
template <int NW>
__device__ __forceinline__ void rms_npart(const float *x, int K, double *npart, int w, int lane) {
    double ss = 0.0;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    for (int i = threadIdx.x; i < K / 4; i += NW * 32) {
        const float4 v = x4[i];
        ss = __dadd_rn(ss, (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
    if (lane == 0) npart[w] = ss;
}

// The end of phase 1: warp w's gate / up sums of rows g, g + 8 into red[w] (lanes t == 0), the
// block barrier, then in warp 0's lanes r < 16 the tile's activation of row r (the warps' sums in
// warp order times the RMS scale, silu(gate) up) into act[r]; nonzero lanes return 0.
template <int NW>
__device__ __forceinline__ void tile_acts(float (&acc)[2][1][2], float (&red)[NW][2][16],
                                          const double *npart, int K, float eps, int w, int lane,
                                          float *act) {
    const int g = lane >> 2;
    float v[2][2];
#pragma unroll
    for (int m = 0; m < 2; m++) q4_i8_lane_sum<1, 1>(acc[m], v[m], lane);
    if ((lane & 3) == 0) {
#pragma unroll
        for (int m = 0; m < 2; m++) {
            red[w][m][g] = v[m][0];
            red[w][m][g + 8] = v[m][1];
        }
    }
    __syncthreads();
    if (w == 0 && lane < 16) {
        double tot = 0.0;
        for (int q = 0; q < NW; q++) tot = __dadd_rn(tot, npart[q]);
        const float sc = (float)(1.0 / sqrt(tot / (double)K + (double)eps));
        float gs = red[0][0][lane], us = red[0][1][lane];
        for (int q = 1; q < NW; q++) {
            gs = __fadd_rn(gs, red[q][0][lane]);
            us = __fadd_rn(us, red[q][1][lane]);
        }
        act[lane] = __fmul_rn(silu_f(__fmul_rn(gs, sc)), __fmul_rn(us, sc));
    }
}

// XG's exchange: the block's 16 activations into acts, then thread 0 adds 1 to its group's
// counter and polls until the group's CS blocks are in (the others wait at the barriers).
__device__ __forceinline__ void global_exchange(const float *act, float *acts, unsigned *cnt,
                                                int tile, int grp, int cs) {
    if (threadIdx.x < 16) acts[16 * tile + threadIdx.x] = act[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(&cnt[grp], 1u);
        while (*(volatile unsigned *)&cnt[grp] < (unsigned)cs) __nanosleep(64);
        __threadfence();
    }
    __syncthreads();
}

// Lane L's 8 activations of the down's staged super-block (positions q4_i8_xoff(L) + 0..7; the
// group's 16 CS rows at 128 hsel (CS 8) or 0): from acts (XG) or rank p / 16's act in the cluster
// (LOCAL: the block's own, a diagnostic); zeros outside the group's columns.
__device__ __forceinline__ void group_x(int lane, int cs, int grp, int hsel, bool xg, bool local,
                                        const float *acts, const float *act, float4 &xa,
                                        float4 &xc) {
    xa = xc = make_float4(0.f, 0.f, 0.f, 0.f);
    const int p = q4_i8_xoff(lane) - 128 * hsel;
    if (p < 0 || p >= 16 * cs) return;
    if (xg) {
        const float *src = acts + 16 * cs * grp + p;
        xa = __ldcg(reinterpret_cast<const float4 *>(src));
        xc = __ldcg(reinterpret_cast<const float4 *>(src + 4));
        return;
    }
    const uint32_t la = smem_addr(&act[p & 15]);
    const uint32_t ra = local ? la : map_rank(la, p >> 4);
    xa = ld_dsmem4(ra);
    xc = ld_dsmem4(ra + 16);
}

// One item's bytes into a ring slot (whole warp, cp.async): a whole tile block (144 copies of 16
// bytes), or a half item (each row's header and its half's 64 quant bytes, in the slot at the
// offsets of the whole block; from the split layout when HL).
__device__ __forceinline__ void copy_item(uint8_t *d, const uint8_t *src, int lane, bool half,
                                          int hsel, bool hl) {
    if (half) {
        for (int c = lane; c < 80; c += 32) {
            const int r = c / 5, k = c % 5;
            const int off = r * kQ4 + (k ? 16 + 64 * hsel + 16 * (k - 1) : 0);
            const int so = !hl ? off : k ? 256 + 1024 * hsel + 64 * r + 16 * (k - 1) : 16 * r;
            cp_async16(d + off, src + so, true);
        }
    } else {
        for (int c = lane; c < kTileBlk / 16; c += 32) cp_async16(d + 16 * c, src + 16 * c, true);
    }
}

// A ring slot's item as q4_load_i8 (whole) or load_half (half) would have loaded it.
__device__ __forceinline__ Q4RawI8 slot_raw(const uint8_t *slot, int lane, bool half, int hsel) {
    const int g = lane >> 2, t = lane & 3;
    const uint8_t *rg = slot + g * kQ4, *r8 = rg + 8 * kQ4;
    Q4RawI8 r;
    r.h0 = *reinterpret_cast<const uint4 *>(rg);
    r.h8 = *reinterpret_cast<const uint4 *>(r8);
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const int cc = half ? 2 * hsel + c : c;
        const bool ld = c < 2 || !half;
        r.q0[c] = ld ? *reinterpret_cast<const uint2 *>(rg + 16 + 32 * cc + 8 * t) : make_uint2(0u, 0u);
        r.q8[c] = ld ? *reinterpret_cast<const uint2 *>(r8 + 16 + 32 * cc + 8 * t) : make_uint2(0u, 0u);
    }
    return r;
}

// The stream-only diagnostics' fold of an item's words.
__device__ __forceinline__ uint32_t fold_raw(const Q4RawI8 &r) {
    uint32_t c = r.h0.x ^ r.h8.y;
#pragma unroll
    for (int i = 0; i < 4; i++) c ^= r.q0[i].x ^ r.q0[i].y ^ r.q8[i].x ^ r.q8[i].y;
    return c;
}

// A down item's 16 partials (rows g, g + 8 in lanes t == 0) into part[grp][16 T ..].
__device__ __forceinline__ void store_partial(float (&d)[1][2], float *part, int K, int grp, int T,
                                              int lane) {
    float v[2];
    q4_i8_lane_sum<1, 1>(d, v, lane);
    if ((lane & 3) == 0) {
        float *o = part + (int64_t)grp * K + T * 16;
        o[lane >> 2] = v[0];
        o[(lane >> 2) + 8] = v[1];
    }
}

// MODE (diagnostics, wrong results): 0 full; 2 no cluster exchange (acts from the block's own
// tile); 3 stream only (each item's bytes folded by XOR: no staging, no math, no exchange); 4 as
// 3 without the norm's reads and the block barrier at the phase boundary.
// LA: each item also asks L2 for the item after next.
// D: 0 = each warp loads its next item into registers while it works on the current one; D > 0
// = each warp streams its items through a ring of D slots of shared memory (cp.async by every
// lane, 16 bytes a copy, one group an item; dynamic shared memory NW * D * 2,304 bytes), so D
// items are in flight while it works.
// CONTIG: each warp's items contiguous in memory: its phase-1 super-blocks one range (warp w:
// [w nsb / NW, (w + 1) nsb / NW)), its down tiles one range of the block's range of tiles,
// read from wdc (block column sbd of consecutive tiles adjacent).
// XG: the group's activations meet in global memory (a.acts, a counter a group: each block adds
// 1 after its 16, thread 0 polls until CS) instead of a cluster's shared memory; the kernel then
// launches without clusters (its blocks are all resident: 608 on 660 slots, and the grid after it
// starts only once every block has started). HL: the down's (half) items read from a.wdh, where
// a tile block is [16 headers][16 rows' first half][16 rows' second half]: a half item is two
// contiguous runs (256 + 1,024 bytes) instead of 16 pieces of 80 bytes.
template <int CS, int NW, int MODE = 0, bool LA = false, int D = 0, bool CONTIG = false,
          bool XG = false, bool HL = false>
__global__ void __launch_bounds__(NW * 32, NW == 3 ? 5 : 4) ffn_fused(const Args a) {
    extern __shared__ __align__(16) uint8_t ring[];
    constexpr bool kHalf = CS == 8;
    __shared__ Q4I8Stage<1> st[NW];
    __shared__ Q4I8Stage<1> dst;
    __shared__ double npart[NW];
    __shared__ float red[NW][2][16];
    __shared__ __align__(16) float act[16];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x, grp = tile / CS, rank = tile % CS;
    const int nsb = a.K / 256, nsbd = a.F / 256;
    const int hsel = kHalf ? (grp & 1) : 0, sbd = kHalf ? grp >> 1 : grp;
    // phase 1: this warp's super-blocks w, w + NW, ... (two items each)
    const int s0 = CONTIG ? w * nsb / NW : w, s1 = (w + 1) * nsb / NW;
    const int n1 = CONTIG ? 2 * (s1 - s0) : 2 * ((nsb - w + NW - 1) / NW);
    // phase 2: down tiles T = rank + CS j, j = jw, jw + NW, ...; the warps with fewer phase-1
    // items take the first ones
    const int ntd = a.K / 16 / CS, jw = NW - 1 - w;
    const int n2c = (NW - w) * ntd / NW - (NW - 1 - w) * ntd / NW;  // CONTIG: the last warp first
    const int t0 = rank * ntd + (NW - 1 - w) * ntd / NW;
    const int n2 = CONTIG ? n2c : jw < ntd ? (ntd - jw + NW - 1) / NW : 0;
    const int n = n1 + n2;
    const int64_t rb = (int64_t)nsb * kQ4, rbd = (int64_t)nsbd * kQ4;
    const uint8_t *tg = a.wg + (int64_t)tile * 16 * rb, *tu = a.wu + (int64_t)tile * 16 * rb;
    auto sb_of = [&](int i) { return CONTIG ? s0 + (i >> 1) : w + NW * (i >> 1); };
    auto tile_of = [&](int i) { return CONTIG ? t0 + (i - n1) : rank + CS * (jw + NW * (i - n1)); };
    // item i's block run (16 rows x 144 bytes; the weights in tiles)
    auto item = [&](int i) -> const uint8_t * {
        if (i < n1) return ((i & 1) ? tu : tg) + (int64_t)sb_of(i) * kTileBlk;
        if (CONTIG) return a.wdc + ((int64_t)sbd * (a.K / 16) + tile_of(i)) * kTileBlk;
        if (HL) return a.wdh + (int64_t)tile_of(i) * 16 * rbd + (int64_t)sbd * kTileBlk;
        return a.wd + (int64_t)tile_of(i) * 16 * rbd + (int64_t)sbd * kTileBlk;
    };
    auto load = [&](int i) -> Q4RawI8 {
        const uint8_t *p = item(i) + g * kQ4;
        if (i >= n1 && kHalf) return load_half(p, p + 8 * kQ4, 0, t, hsel);
        return q4_load_i8(p, p + 8 * kQ4, 0, t, kTileBlk);
    };
    uint8_t *slots = ring + w * D * kTileBlk;
    // the ring: item i's bytes into slot i % D (a half item: each row's header and its half's
    // 64 quant bytes), one commit group an item (an empty one past the end)
    constexpr int kD = D > 0 ? D : 1;
    auto issue = [&](int i) {
        if (D > 0 && i < n) copy_item(slots + (i % kD) * kTileBlk, item(i), lane, i >= n1 && kHalf, hsel, HL);
        cp_async_commit();
    };
    auto get = [&](int i) { return slot_raw(slots + (i % kD) * kTileBlk, lane, i >= n1 && kHalf, hsel); };
    Q4RawI8 cur;
    if (D == 0) cur = load(0);  // constant: before the wait
    for (int i = 0; i < D; i++) issue(i);
    q4_i8_stage_init<1>(st[w], lane);
    if (w == 0) q4_i8_stage_init<1>(dst, lane);
    pdl_wait();
    if (MODE != 4) rms_npart<NW>(a.x, a.K, npart, w, lane);  // (MODE 4: not even the norm's reads)
    const int xoff = q4_i8_xoff(lane);
    float acc[2][1][2] = {{{0.f, 0.f}}, {{0.f, 0.f}}};
    uint32_t chk = 0;  // MODE 3
    for (int i = 0; i <= n; i++) {
        if (i == n1 && MODE != 4) {  // the boundary (every warp once; MODE 4: none)
            tile_acts<NW>(acc, red, npart, a.K, a.eps, w, lane, act);
            if (XG && MODE < 2) {
                global_exchange(act, a.acts, a.cnt, tile, grp, CS);
            } else if (MODE < 2) {
                asm volatile("barrier.cluster.arrive.release;" ::: "memory");
                asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
            } else {
                __syncthreads();
            }
            if (w == 0) {
                float4 xa, xc;
                group_x(lane, CS, grp, hsel, XG && MODE < 2, MODE >= 2, a.acts, act, xa, xc);
                stage_q4i8<1>(dst, 0, xa, xc, lane);
            }
            if (!XG && MODE < 2) asm volatile("barrier.cluster.arrive.release;" ::: "memory");
            __syncthreads();
        }
        if (i == n) break;
        Q4RawI8 nxt;
        if (D > 0) {
            cp_async_wait<(D > 0 ? D - 1 : 0)>();
            __syncwarp();
            cur = get(i);
            __syncwarp();  // every lane has read the slot
            issue(i + D);
        } else if (i + 1 < n) {
            nxt = load(i + 1);
        }
        if (LA && i + 2 < n) {  // the item after next into L2
            const uint8_t *p = item(i + 2) + g * kQ4;
            prefetch_l2(p + 64 * t);
            prefetch_l2(p + 8 * kQ4 + 64 * t);
        }
        if (MODE >= 3) {
            chk ^= fold_raw(cur);
        } else if (i < n1) {
            const int sb = sb_of(i);
            if ((i & 1) == 0) {
                const float4 xa = ld_x4(a.x + sb * 256 + xoff), xc = ld_x4(a.x + sb * 256 + xoff + 4);
                const float4 na = ld_c4(a.nw + sb * 256 + xoff), nc = ld_c4(a.nw + sb * 256 + xoff + 4);
                __syncwarp();
                stage_q4i8<1>(st[w], 0, norm_w4(xa, na), norm_w4(xc, nc), lane);
                __syncwarp();
                q4_superblock_i8<1>(cur, st[w], lane, acc[0]);
            } else {
                q4_superblock_i8<1>(cur, st[w], lane, acc[1]);
            }
        } else {
            float d[1][2] = {{0.f, 0.f}};
            if (kHalf) half_i8(cur, dst, lane, hsel, d[0]);
            else q4_superblock_i8<1>(cur, dst, lane, d);
            store_partial(d, a.part, a.K, grp, tile_of(i), lane);
        }
        if (D == 0 && i + 1 < n) cur = nxt;
    }
    if (!XG && MODE < 2) asm volatile("barrier.cluster.wait;" ::: "memory");  // peers read our act
    if (MODE >= 3 && t == 0) a.part[(int64_t)grp * a.K + rank * 16 + g] = __uint_as_float(chk) * 0.f;
}

__global__ void ffn_reduce(const float *part, int G, const float *resid, float *y, int K,
                           unsigned *cnt);

// ffn_fused2: ffn_fused with two pieces an item (session 22, after the stream rows: a warp's
// time was its items x the loaded latency / D, and the half items cost as much as whole ones):
// a phase-1 item is one super-block of BOTH gate and up (2 x 2,304 bytes), a phase-2 item two
// down tiles' half blocks (2 x 1,280); 6-7 items a warp instead of 12-14. Ring of D slots of
// 4,608 bytes a warp (cp.async, as ffn_fused); half columns (CS 8); the exchange through the
// cluster (XG false) or global memory (XG true); MODE 0 or 3 (stream only).
template <int D, bool XG, int MODE = 0>
__global__ void __launch_bounds__(96, 5) ffn_fused2(const Args a) {
    constexpr int CS = 8, NW = 3, kSlot = 2 * kTileBlk;
    extern __shared__ __align__(16) uint8_t ring[];
    // ffn_fused's shared arrays, declared one by one on purpose: the compiler drops those a
    // diagnostic MODE never touches (MODE 3: 416 bytes), which one struct of them would keep
    // (8,736 bytes a block, checked with ptxas -v), changing what the stream-only rows measure.
    __shared__ Q4I8Stage<1> st[NW];
    __shared__ Q4I8Stage<1> dst;
    __shared__ double npart[NW];
    __shared__ float red[NW][2][16];
    __shared__ __align__(16) float act[16];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x, grp = tile / CS, rank = tile % CS;
    const int nsb = a.K / 256, nsbd = a.F / 256;
    const int hsel = grp & 1, sbd = grp >> 1;
    const int n1 = (nsb - w + NW - 1) / NW;              // super-blocks w, w + NW, ...
    const int npair = a.K / 16 / CS / 2, jw = NW - 1 - w;  // tile pairs q = jw, jw + NW, ...
    const int n2 = jw < npair ? (npair - jw + NW - 1) / NW : 0;
    const int n = n1 + n2;
    const int64_t rb = (int64_t)nsb * kQ4, rbd = (int64_t)nsbd * kQ4;
    const uint8_t *tg = a.wg + (int64_t)tile * 16 * rb, *tu = a.wu + (int64_t)tile * 16 * rb;
    auto tile_of = [&](int i, int p) { return rank + CS * (2 * (jw + NW * (i - n1)) + p); };
    auto piece = [&](int i, int p) -> const uint8_t * {
        if (i < n1) return (p ? tu : tg) + (int64_t)(w + NW * i) * kTileBlk;
        return a.wd + (int64_t)tile_of(i, p) * 16 * rbd + (int64_t)sbd * kTileBlk;
    };
    uint8_t *slots = ring + w * D * kSlot;
    auto issue = [&](int i) {
        if (i < n) {
#pragma unroll
            for (int p = 0; p < 2; p++)
                copy_item(slots + (i % D) * kSlot + p * kTileBlk, piece(i, p), lane, i >= n1, hsel, false);
        }
        cp_async_commit();
    };
    auto get = [&](int i, int p) {
        return slot_raw(slots + (i % D) * kSlot + p * kTileBlk, lane, i >= n1, hsel);
    };
    for (int i = 0; i < D; i++) issue(i);
    q4_i8_stage_init<1>(st[w], lane);
    if (w == 0) q4_i8_stage_init<1>(dst, lane);
    pdl_wait();
    if (MODE != 4) rms_npart<NW>(a.x, a.K, npart, w, lane);
    const int xoff = q4_i8_xoff(lane);
    float acc[2][1][2] = {{{0.f, 0.f}}, {{0.f, 0.f}}};
    uint32_t chk = 0;
    for (int i = 0; i <= n; i++) {
        if (i == n1 && MODE != 4) {
            tile_acts<NW>(acc, red, npart, a.K, a.eps, w, lane, act);
            if (MODE >= 3) {
                __syncthreads();
            } else if (XG) {
                global_exchange(act, a.acts, a.cnt, tile, grp, CS);
            } else {
                asm volatile("barrier.cluster.arrive.release;" ::: "memory");
                asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
            }
            if (w == 0 && MODE != 3) {
                float4 xa, xc;
                group_x(lane, CS, grp, hsel, XG, false, a.acts, act, xa, xc);
                stage_q4i8<1>(dst, 0, xa, xc, lane);
            }
            if (!XG && MODE != 3) asm volatile("barrier.cluster.arrive.release;" ::: "memory");
            __syncthreads();
        }
        if (i == n) break;
        cp_async_wait<D - 1>();
        __syncwarp();
        if (MODE >= 3) {
            chk ^= fold_raw(get(i, 0)) ^ fold_raw(get(i, 1));
        } else if (i < n1) {
            const int sb = w + NW * i;
            const float4 xa = ld_x4(a.x + sb * 256 + xoff), xc = ld_x4(a.x + sb * 256 + xoff + 4);
            const float4 na = ld_c4(a.nw + sb * 256 + xoff), nc = ld_c4(a.nw + sb * 256 + xoff + 4);
            stage_q4i8<1>(st[w], 0, norm_w4(xa, na), norm_w4(xc, nc), lane);
            __syncwarp();
            q4_superblock_i8<1>(get(i, 0), st[w], lane, acc[0]);
            q4_superblock_i8<1>(get(i, 1), st[w], lane, acc[1]);
        } else {
#pragma unroll 1
            for (int p = 0; p < 2; p++) {
                float d[1][2] = {{0.f, 0.f}};
                half_i8(get(i, p), dst, lane, hsel, d[0]);
                store_partial(d, a.part, a.K, grp, tile_of(i, p), lane);
            }
        }
        __syncwarp();  // the slot (and the stage) read by every lane
        issue(i + D);
    }
    if (!XG && MODE != 3) asm volatile("barrier.cluster.wait;" ::: "memory");
    if (MODE >= 3 && t == 0) a.part[(int64_t)grp * a.K + rank * 16 + g] = __uint_as_float(chk) * 0.f;
}

template <int D, bool XG, int MODE = 0>
static void launch_fused2(const Args &a, int groups, float *y, cudaStream_t st) {
    auto k = ffn_fused2<D, XG, MODE>;
    const size_t smem = (size_t)3 * D * 2 * kTileBlk;
    static bool once = false;
    if (!once) {
        CK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
        if (smem > 48 * 1024) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        once = true;
    }
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    at[1].id = cudaLaunchAttributeClusterDimension;
    at[1].val.clusterDim.x = XG || MODE >= 3 ? 1 : 8;
    at[1].val.clusterDim.y = 1;
    at[1].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(a.F / 16);
    cfg.blockDim = dim3(96);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = XG || MODE >= 3 ? 1 : 2;
    CK(cudaLaunchKernelEx(&cfg, k, a));
    CK(launch_with(ffn_reduce, true, dim3(a.K / 32), dim3(1), dim3(128), 0, st,
                   (const float *)a.part, groups, a.x, y, a.K, a.cnt));
}

// y[r] = resid[r] + sum_g part[g][r], g in order; 4 threads a row (quarters of g, combined in
// order).
__global__ void __launch_bounds__(128) ffn_reduce(const float *part, int G, const float *resid,
                                                  float *y, int K, unsigned *cnt) {
    pdl_launch_dependents();
    pdl_wait();
    if (blockIdx.x == 0 && (int)threadIdx.x < G) cnt[threadIdx.x] = 0u;  // XG's, for the next
    const int q = threadIdx.x & 3, r = blockIdx.x * 32 + (threadIdx.x >> 2);
    const int g0 = q * G / 4, g1 = (q + 1) * G / 4;
    float s = 0.f;
    if (r < K) {
#pragma unroll 4
        for (int gi = g0; gi < g1; gi++) s = __fadd_rn(s, part[(int64_t)gi * K + r]);
    }
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 1));
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 2));
    if (q == 0 && r < K) y[r] = __fadd_rn(resid[r], s);
}

template <int CS, int NW, int MODE, bool LA = false, int D = 0, bool CONTIG = false,
          bool XG = false, bool HL = false>
static void launch_fused(const Args &a, int groups, float *y, cudaStream_t st) {
    static bool once = false;
    auto k = ffn_fused<CS, NW, MODE, LA, D, CONTIG, XG, HL>;
    const size_t smem = (size_t)NW * D * kTileBlk;
    if (!once) {
        if (CS > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        CK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, D > 2 ? 100 : 78));
        once = true;
    }
    // (not launch_with: its carveout step would set the library's value on this kernel)
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(a.F / 16);
    cfg.blockDim = dim3(NW * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.attrs = XG ? at + 1 : at;  // XG: no clusters (so also the stream-only rows without them)
    cfg.numAttrs = XG ? 1 : 2;
    CK(cudaLaunchKernelEx(&cfg, k, a));
    CK(launch_with(ffn_reduce, true, dim3(a.K / 32), dim3(1), dim3(128), 0, st,
                   (const float *)a.part, groups, a.x, y, a.K, a.cnt));
}

// Diagnostic: the same skeleton (3-warp blocks, 5 an SM, a cp.async ring of D 2,304-byte items a
// warp, each item's bytes folded by XOR) over n items of one contiguous region, in two orders:
// SEQ: warp gw's i-th item is gw + i x warps (all warps read one moving window, as the
// streaming floor's kernels), else gw x per + i (each warp its own run: concurrent reads spread
// over the whole region, as the fused kernel's and the product's warps).
// PAT (with SEQ false): 0 a warp's items consecutive; 1 alternating between the two halves of
// the region (item k of half A, item k of half B, ...: gate and up); 2 every third item of a run
// three times as long (the block's three warps interleaved, as phase 1's super-blocks w + 3 k).
template <int D, bool SEQ, int PAT = 0>
__global__ void __launch_bounds__(96, 5) stream_items(const uint8_t *base, int n, uint32_t *out) {
    extern __shared__ __align__(16) uint8_t ring[];
    pdl_launch_dependents();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int gw = blockIdx.x * 3 + w, nwarps = gridDim.x * 3, per = (n + nwarps - 1) / nwarps;
    uint8_t *slots = ring + w * D * kTileBlk;
    auto idx = [&](int i) {
        if (SEQ) return gw + i * nwarps;
        if (PAT == 1) return (i & 1) * (n / 2) + gw * (per / 2) + (i >> 1);
        if (PAT == 2) return (gw / 3) * 3 * per + (gw % 3) + 3 * i;
        return gw * per + i;
    };
    auto ok = [&](int i) { return i < per && idx(i) < n; };
    auto issue = [&](int i) {
        if (ok(i)) {
            const uint8_t *src = base + (int64_t)idx(i) * kTileBlk;
            copy_item(slots + (i % D) * kTileBlk, src, lane, false, 0, false);
        }
        cp_async_commit();
    };
    for (int i = 0; i < D; i++) issue(i);
    pdl_wait();
    uint32_t chk = 0;
    for (int i = 0; ok(i); i++) {
        cp_async_wait<D - 1>();
        __syncwarp();
        const uint4 *sl = reinterpret_cast<const uint4 *>(slots + (i % D) * kTileBlk);
        for (int c = lane; c < kTileBlk / 16; c += 32) {
            const uint4 v = sl[c];
            chk ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        __syncwarp();
        issue(i + D);
    }
    if (chk == 0x12345678u) out[gw] = chk;  // keeps the loads
}

template <int D, bool SEQ, int CL = 1, int PAT = 0>
static void launch_stream(const uint8_t *base, int n, uint32_t *out, cudaStream_t st) {
    auto k = stream_items<D, SEQ, PAT>;  // (at the library's carveout: launch_with sets it)
    CK(launch_with(k, true, dim3(608), dim3(CL), dim3(96), (size_t)3 * D * kTileBlk, st, base, n, out));
}

// HL's layout of Q4_K tiles: per tile block, the 16 rows' headers (16 bytes each), then each
// row's first 64 quant bytes, then each row's last 64. One thread a (block, row).
__global__ void split_halves(const uint8_t *src, uint8_t *dst, int64_t nblk) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= nblk * 16) return;
    const int64_t b = i / 16;
    const int r = (int)(i % 16);
    const uint4 *s = reinterpret_cast<const uint4 *>(src + b * kTileBlk + r * kQ4);
    uint4 *d = reinterpret_cast<uint4 *>(dst + b * kTileBlk);
    d[r] = s[0];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++) d[16 + 64 * h + 4 * r + k] = s[1 + 4 * h + k];
}

template <int CS, int NW>
static int max_clusters() {
    auto k = ffn_fused<CS, NW, 0>;
    if (CS > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(608);
    cfg.blockDim = dim3(NW * 32);
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeClusterDimension;
    at.val.clusterDim.x = CS;
    at.val.clusterDim.y = 1;
    at.val.clusterDim.z = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    int nc = 0;
    CK(cudaOccupancyMaxActiveClusters(&nc, k, &cfg));
    return nc;
}

}  // namespace ffn
}  // namespace loom_cuda

using namespace loom_cuda;
using namespace loom_cuda::ffn;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float urand(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}

// Random Q4_K blocks with sane d / dmin (as cuda_bench's dev_weights): in tiles or rows alike.
static uint8_t *dev_q4k(int64_t M, int64_t K) {
    const size_t bytes = (size_t)(M * (K / 256) * kQ4);
    std::vector<uint8_t> h(bytes);
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t r = rnd();
        memcpy(&h[i], &r, 8);
    }
    const uint16_t d = loom_fp32_to_fp16(0.002f), dm = loom_fp32_to_fp16(0.001f);
    for (size_t b = 0; b < bytes / kQ4; b++) {
        memcpy(&h[b * kQ4], &d, 2);
        memcpy(&h[b * kQ4 + 2], &dm, 2);
    }
    uint8_t *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice));
    return p;
}
static float *dev_floats(int64_t n, float lo, float hi) {
    std::vector<float> h((size_t)n);
    for (auto &v : h) v = urand(lo, hi);
    float *p;
    CK(cudaMalloc(&p, sizeof(float) * (size_t)n));
    CK(cudaMemcpy(p, h.data(), sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    return p;
}

struct Layer {
    uint8_t *wg, *wu, *wd, *wdc, *wdh;
    float *x, *y, *act;
};

static void baseline(const Layer &l, const float *nw, int K, int F, cudaStream_t st) {
    const loom_kweight g = {l.wg, LOOM_GGML_Q4_K, F, K, LOOM_WEIGHT_Q4K_TILES};
    const loom_kweight u = {l.wu, LOOM_GGML_Q4_K, F, K, LOOM_WEIGHT_Q4K_TILES};
    const loom_kweight d = {l.wd, LOOM_GGML_Q4_K, K, F, LOOM_WEIGHT_Q4K_TILES};
    const loom_prenorm pn = {nw, 1e-6f};
    loom_error er = {};
    if (loom_cuda_matmul_pair_normed(l.x, &pn, 1, g, u, LOOM_PAIR_SWIGLU, l.act, nullptr, &er, st) ||
        loom_cuda_matmul_add(l.act, 1, d, l.x, l.y, &er, st)) {
        fprintf(stderr, "baseline: %s\n", er.msg);
        exit(1);
    }
}

typedef void (*Fused)(const Args &, int, float *, cudaStream_t);
struct Variant {
    const char *name;
    Fused fn;
    int cs;
};

template <typename F>
static double time_graph(F body, int L, cudaStream_t st) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < L; l++) body(l);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> v;
    for (int r = 0; r < 9; r++) {
        CK(cudaGraphLaunch(ge, st));  // warm
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < 20; i++) CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        v.push_back(ms * 1000.0 / 20 / L);
    }
    std::sort(v.begin(), v.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int K = 2560, F = 9728, L = quick ? 1 : 12;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<Layer> ls((size_t)L);
    for (auto &l : ls) {
        l.wg = dev_q4k(F, K);
        l.wu = dev_q4k(F, K);
        l.wd = dev_q4k(K, F);
        CK(cudaMalloc(&l.wdh, (size_t)K * (F / 256) * kQ4));
        {
            const int64_t nblk = (int64_t)(K / 16) * (F / 256);
            split_halves<<<(unsigned)((nblk * 16 + 127) / 128), 128>>>(l.wd, l.wdh, nblk);
            CK(cudaGetLastError());
        }
        CK(cudaMalloc(&l.wdc, (size_t)K * (F / 256) * kQ4));
        for (int j = 0; j < F / 256; j++)  // tile T's block j -> (j K / 16 + T) x 2,304
            CK(cudaMemcpy2D(l.wdc + (size_t)j * (K / 16) * kTileBlk, kTileBlk,
                            l.wd + (size_t)j * kTileBlk, (size_t)(F / 256) * kTileBlk, kTileBlk,
                            K / 16, cudaMemcpyDeviceToDevice));
        l.x = dev_floats(K, -1.f, 1.f);
        CK(cudaMalloc(&l.y, sizeof(float) * K));
        CK(cudaMalloc(&l.act, sizeof(float) * F));
    }
    float *nw = dev_floats(K, 0.5f, 1.5f);
    std::vector<uint8_t *> pool((size_t)L);  // the stream rows' one-region layers
    for (auto &p : pool) p = dev_q4k(3 * F, K);
    float *part, *yref, *acts;
    unsigned *cnt;
    CK(cudaMalloc(&acts, sizeof(float) * F));
    CK(cudaMalloc(&cnt, sizeof(unsigned) * 76));
    CK(cudaMemset(cnt, 0, sizeof(unsigned) * 76));
    CK(cudaMalloc(&part, sizeof(float) * (size_t)K * 76));
    CK(cudaMalloc(&yref, sizeof(float) * K));
    const Variant vs[] = {  // the rows of bench/NOTES.md 7 "Session 22"; the first nchk compute y
        {"fused CS 8, 3 warps, registers", launch_fused<8, 3, 0>, 8},
        {"fused CS 8, 3 warps, registers + L2 la", launch_fused<8, 3, 0, true>, 8},
        {"fused CS 16 (whole columns), registers", launch_fused<16, 3, 0>, 16},
        {"fused CS 8, 3 warps, ring 2", launch_fused<8, 3, 0, false, 2>, 8},
        {"fused CS 8, 3 warps, ring 3", launch_fused<8, 3, 0, false, 3>, 8},
        {"fused CS 8, 3 warps, ring 4", launch_fused<8, 3, 0, false, 4>, 8},
        {"fused CS 16, 3 warps, ring 3", launch_fused<16, 3, 0, false, 3>, 16},
        {"fused ring 2, contiguous", launch_fused<8, 3, 0, false, 2, true>, 8},
        {"fused ring 2, global exchange", launch_fused<8, 3, 0, false, 2, false, true>, 8},
        {"fused ring 2, split halves", launch_fused<8, 3, 0, false, 2, false, false, true>, 8},
        {"fused ring 2, global xch + halves", launch_fused<8, 3, 0, false, 2, false, true, true>, 8},
        {"fused2 ring 2, cluster exchange", launch_fused2<2, false>, 8},
        {"fused2 ring 2, global exchange", launch_fused2<2, true>, 8},
        {"diag ring 2: no cluster exchange", launch_fused<8, 3, 2, false, 2>, 8},
        {"diag ring 2: stream only", launch_fused<8, 3, 3, false, 2>, 8},
        {"diag ring 2 no clusters: stream only", launch_fused<8, 3, 3, false, 2, false, true>, 8},
        {"diag ring 2 no cl: stream, no norm/barrier", launch_fused<8, 3, 4, false, 2, false, true>, 8},
        {"diag fused2 ring 2: stream only", launch_fused2<2, true, 3>, 8},
    };
    const int nv = (int)(sizeof vs / sizeof *vs), nchk = 13;
    auto args = [&](const Layer &l, int) { return Args{l.wg, l.wu, l.wd, l.wdc, l.wdh, acts, cnt, l.x, nw, 1e-6f, part, K, F}; };
    printf("clusters resident (registers): CS 8 x 3 warps %d, CS 16 x 3 warps %d (of %d, %d)\n",
           max_clusters<8, 3>(), max_clusters<16, 3>(), F / 16 / 8, F / 16 / 16);
    // correctness: every full variant against the baseline on layer 0
    std::vector<float> hr(K), hy(K);
    baseline(ls[0], nw, K, F, st);
    CK(cudaMemcpyAsync(hr.data(), ls[0].y, sizeof(float) * K, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    double mref = 0;
    for (float v : hr) mref = std::max(mref, (double)fabsf(v));
    int fails = 0;
    for (int v = 0; v < nchk; v++) {
        CK(cudaMemset(ls[0].y, 0xFF, sizeof(float) * K));
        vs[v].fn(args(ls[0], vs[v].cs), F / 16 / vs[v].cs, ls[0].y, st);
        CK(cudaMemcpyAsync(hy.data(), ls[0].y, sizeof(float) * K, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        double md = 0;
        int bad = 0;  // NaN (a poisoned or unwritten output) or beyond the tolerance
        for (int i = 0; i < K; i++) {
            const double d = fabs((double)hy[i] - hr[i]);
            if (!(d <= 1e-4 * mref)) bad++;
            if (d > md) md = d;
        }
        const bool ok = bad == 0;
        fails += !ok;
        printf("check %-40s max |y - base| %.3g (max |base| %.3g) %s\n", vs[v].name, md, mref,
               ok ? "ok" : "FAIL");
    }
    if (quick) return fails ? 1 : 0;
    // timing: L layers a graph (each layer its own weights and x: 42 MB x L > L2), alternated
    for (int round = 0; round < 2; round++) {
        const double tb = time_graph([&](int l) { baseline(ls[l], nw, K, F, st); }, L, st);
        printf("round %d: baseline pair + down        %.2f us a layer\n", round, tb);
        for (int v = 0; v < nv; v++) {
            const double tf = time_graph(
                [&](int l) { vs[v].fn(args(ls[l], vs[v].cs), F / 16 / vs[v].cs, ls[l].y, st); }, L,
                st);
            printf("round %d: %-40s %.2f us a layer (%+.1f%%)\n", round, vs[v].name, tf,
                   100.0 * (tf / tb - 1.0));
        }
        // the stream skeleton alone over each layer's 42 MB (gate, up, down allocated apart: the
        // items of one region, gate's, then up's, then down's, in three launches) and over one
        // region (wg + wu + wd of the layer are separate allocations: use gate's 14 MB x 3 =
        // the item count of the three over the contiguous pool of the streaming rows)
        const int nit = (int)((size_t)F * (K / 256) * kQ4 / kTileBlk);  // items of one matrix
        typedef void (*SF)(const uint8_t *, int, uint32_t *, cudaStream_t);
        const struct { const char *name; SF fn; } ss[] = {
            {"stream skeleton ring 2, warps apart", launch_stream<2, false>},
            {"stream skeleton ring 3, warps apart", launch_stream<3, false>},
            {"stream skeleton ring 3, one window", launch_stream<3, true>},
            {"stream skeleton ring 3, apart, clusters 8", launch_stream<3, false, 8>},
            {"stream skeleton ring 2, two regions alternating", launch_stream<2, false, 1, 1>},
            {"stream skeleton ring 2, every third item", launch_stream<2, false, 1, 2>},
        };
        for (const auto &sv : ss) {
            const double tf = time_graph([&](int l) {
                sv.fn(ls[l].wg, nit, (uint32_t *)part, st);
                sv.fn(ls[l].wu, nit, (uint32_t *)part, st);
                sv.fn(ls[l].wd, nit, (uint32_t *)part, st);
            }, L, st);
            printf("round %d: %-40s %.2f us a layer (3 launches, 42 MB: %.0f GB/s)\n", round, sv.name,
                   tf, 3.0 * nit * kTileBlk / tf / 1e3);
        }
        // one launch a layer over one 42 MB region (~10 items a warp, as the fused kernel's 14)
        for (const auto &sv : ss) {
            const double tf = time_graph([&](int l) { sv.fn(pool[l], 3 * nit, (uint32_t *)part, st); }, L, st);
            printf("round %d: %-40s %.2f us a layer (1 launch, 42 MB: %.0f GB/s)\n", round, sv.name,
                   tf, 3.0 * nit * kTileBlk / tf / 1e3);
        }
    }
    return fails ? 1 : 0;
}
