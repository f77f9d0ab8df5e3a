// attention_v5.cu: decode (and prefill) attention v5 and v6, the tensor-core kernel for F16 and
// INT8 caches of head_dim 64 and 128: attention.cu's opening comment ("v5", "v6") gives its geometry,
// staging, split combines and numeric contract; attention.cuh what it shares with v4. The
// launcher run_v5 is called by attention.cu's launch_attn, which chooses the partition (splits,
// stages, cluster) from the shape and n_ctx only.
#include <math.h>
#include <stdio.h>

#include <atomic>

#include <cooperative_groups.h>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/kv_store.cuh"
#include "kernels/cuda/mma_common.cuh"

namespace loom_cuda {
namespace {

// Tensor-core fragments (mma.sync, ldmatrix; sm_80+; mma16816 is mma_common.cuh's): the
// k = 8 form c += A (16x8, row) * B (8x8, col), f16 inputs, f32 accumulate.
__device__ __forceinline__ void mma_1688(float c[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, "
                 "{%6}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

// A block's dynamic shared memory for `nst` stages; after the tiles it holds the warps' sums
// (and this block's partial for the cluster combine), or the global combine's weights.
constexpr __host__ __device__ int v5_smem(int D, int kvt, int GM, int nst) {
    return cmax(cmax(nst * v5_stage(D, kvt), (kWarps + 1) * GM * D * 4), 2 * GM * kMaxSplits * 4);
}
// Timestamps of the v5 trace (loom_cuda_attention_trace: bench/debug only): a record of
// kTraceWords words a block and launch slot, written by thread 0 of each block (layout:
// cuda_kernels.h). Only the D = 128, GM = 4 kernels have a traced instantiation.
constexpr int kTraceSlots = 32, kTraceBlocks = 256, kTraceWords = 16;
__device__ unsigned long long g_attn_trace[kTraceSlots][kTraceBlocks][kTraceWords];

// The cluster combines' weights of one head (one warp; v5 and v6): lane s < S gives split s's
// (max m in natural-log units, sum ll), the others (-inf, 0); wts[s] = exp(m - M) (M the
// maximum, 0 for an empty split) and *den = sum of wts[s] ll_s, in one fixed order.
__device__ __forceinline__ void cluster_weights(float m, float ll, int lane, float *wts,
                                                float *den) {
    const float M = warp_max(m);
    const float w = m == -INFINITY ? 0.0f : expf(m - M);
    const float d = warp_sum(w * ll);
    if (lane < kV5Cluster) wts[lane] = w;
    if (lane == 0) *den = d;
}

// The partition of a block's split (a function of the position only): S splits of `per`
// tiles of TP rows in use; split blockIdx.z covers rows lo .. hi-1 (empty past S) for token t.
struct V5Range { int S, per, lo, hi; };
__device__ __forceinline__ V5Range v5_range(const AttnArgs &a, int pos0, int t, int TP) {
    const int ntiles = (pos0 + (int)a.n_tokens + TP - 1) / TP;
    const int s1 = min(a.S, ntiles);
    V5Range r;
    r.per = (ntiles + s1 - 1) / s1;
    r.S = (ntiles + r.per - 1) / r.per;
    r.lo = (int)blockIdx.z * r.per * TP;
    r.hi = min(pos0 + t + 1, r.lo + r.per * TP);
    return r;
}

// v6's TMA tile copies (sm_90; BK): an mbarrier a stage with a transaction count, the K tile
// and the V tile one box each of [2 halves][32 rows][64 f16] with the 128-byte swizzle: 16-byte
// chunk c of row r of half h at h x 4 KB + r * 128 + ((c ^ (r % 8)) * 16).
__device__ __forceinline__ uint32_t smaddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
// (sm_90 only: the BK kernels built for sm_87 are never launched there, cc_major() < 9)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define V6_SM90(...) __VA_ARGS__
#else
#define V6_SM90(...)
#endif
__device__ __forceinline__ void mb_init(uint32_t bar, uint32_t n) {
    V6_SM90(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(n) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");)
}
__device__ __forceinline__ void fence_async_smem() {  // generic-proxy smem accesses before TMA's
    V6_SM90(asm volatile("fence.proxy.async.shared::cta;" ::: "memory");)
}
__device__ __forceinline__ void mb_expect_tx(uint32_t bar, uint32_t bytes) {
    V6_SM90(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                         "r"(bytes)
                         : "memory");)
}
// The cluster combine's pushes (v6): a store into a block of the cluster counted by that block's
// mbarrier (st.async, complete_tx; the wait for them: mb_wait<true>).
__device__ __forceinline__ uint32_t cl_addr(const void *p, uint32_t rank) {
    uint32_t r = 0;
    V6_SM90(asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                         : "=r"(r)
                         : "r"(smaddr(p)), "r"(rank));)
    return r;
}
__device__ __forceinline__ void st_async(uint32_t addr, float v, uint32_t bar) {
    V6_SM90(asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 "
                         "[%0], %1, [%2];" ::"r"(addr),
                         "r"(__float_as_uint(v)), "r"(bar)
                         : "memory");)
}
__device__ __forceinline__ void st_async4(uint32_t addr, float4 v, uint32_t bar) {
    V6_SM90(asm volatile(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 "
                "[%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
                "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
                "r"(__float_as_uint(v.w)), "r"(bar)
                : "memory");)
}
// Waits for phase `parity` of the mbarrier at bar (acquire; CLUSTER: at cluster scope, for a
// barrier that counts other blocks' stores).
template <bool CLUSTER = false>
__device__ __forceinline__ void mb_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok = 1;
    do {
        if constexpr (CLUSTER) {
            V6_SM90(asm volatile(
                        "{ .reg .pred p; "
                        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; "
                        "selp.u32 %0, 1, 0, p; }"
                        : "=r"(ok)
                        : "r"(bar), "r"(parity)
                        : "memory");)
        } else {
            V6_SM90(asm volatile(
                        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                        "selp.u32 %0, 1, 0, p; }"
                        : "=r"(ok)
                        : "r"(bar), "r"(parity)
                        : "memory");)
        }
    } while (!ok);
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, int c0, int c1,
                                            int c2, int c3, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
        "[%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
#endif
}

// One block: the G (<= GM) query heads of one KV head, one query token, one split (the v4
// partition with 32-row tiles). Warp w owns rows 8w .. 8w+7 of every tile and keeps its own
// online softmax; the four warps meet once, at the end. Per tile and warp:
//   scores S^T (heads x 8 positions) = Q (16 x D: rows = the heads' q as f16 hi, then as f16
//   lo; scale * log2(e) folded in) x K^T: D/16 mma m16n8k16, K through ldmatrix;
//   P (rows = p hi, then p lo) x V (8 positions x D): D/8 mma m16n8k8, V through ldmatrix.trans;
//   hi and lo rows are added once, at the end. Everything stays in registers (q, scores, p, o).
// Tiles are copied by cp.async a.nst (2 .. 8) stages deep; rows use an XOR swizzle (16-byte
// chunk c of row r at c ^ (r & 7)) so every ldmatrix phase hits 8 distinct bank groups.
// WT (v6): warp w instead walks whole tiles w, w + 4, ... in stages w, w + 4, ... (a.nst / 4 a
// warp) that its own lanes copy: 4 n-blocks of scores a tile, one softmax step, P x V by
// m16n8k16 over 2 k-steps of 16 positions; the warps meet at the end as in v5. The scores are
// v5's bit for bit; the softmax steps (32 positions, whole tiles a warp) are not.
// FP (v6 only, one token): rope_kv_write's work folded in (a.fp, a.pro; a.q is the raw q).
// Every block that walks tiles norms and ropes its own q heads (one warp a head, rope.cuh's
// head_norm_rope: rope_kv_write's q_out bits) into shared memory before its q fragments. The
// new K/V row at `pos` lives in the last tile of the split that holds pos; the warp that walks
// that tile norms/ropes the token's K row of its KV head itself, the block of head group 0
// writes K and V into the caches (kv_store.cuh: rope_kv_write's bytes), and that warp drops the
// converted row (F16 halves, or INT8 bytes and row scales) into its shared copy of the tile
// after the copy's wait, in place of what the copy read. Nothing reads the row from the cache
// after this kernel wrote it, so no block waits on another: the cp.async of that row may see
// the old or the new bytes (they are overwritten either way); no other split's range contains
// pos; and with GQA > 8 (several head groups a KV head) every head group's block of the last
// split converts the row itself and only head group 0 stores it. A device position outside the
// cache writes no row and replaces nothing (attention clamps it, as the two launches do).
// BK (v6, F16, D = 128, sm_90; a.tma): each warp's stage is filled by 2 TMA box copies (K and
// V, each [2 halves][32 rows][64 values], issued by lanes 0-1 after lane 0's expect_tx)
// completing on the stage's mbarrier, rows in the TMA's 128-byte swizzle instead of v5_swz; rows at or past hi in a tile (stale cache
// rows: the TMA zero-fills only past n_ctx) are zeroed in V after the wait, as cp.async's
// zero-fill did (their scores are -inf, so K needs nothing). The same arithmetic, same bits.
// EA (v6, a.early: launched with PDL): each warp's first WS tiles are requested before
// griddepcontrol.wait, so that they stream under the previous kernel's tail; the position is
// read there too. Safe by the launchers' contract (cuda_kernels.h, "Early reads"): the position
// and the cache rows below it were written before the kernel just before started (the
// executor: a graph input copied before the step, rows of earlier steps; attn_in_order in
// executor/cuda_backend.c sets in_order otherwise, and the launch is then in order). The row at
// pos is written in this step: without FP by the kernel just before, so that tile's copy
// follows the wait (defer); with FP by this kernel, whose converted row replaces whatever the
// copy read. q (FP: the raw q, k, v), the outputs, partials and counters are read after it.
template <int D, int KVT, int GM, bool TS = false, bool WT = false, bool FP = false, bool BK = false>
static __global__ void __launch_bounds__(kThreads, WT ? 1 : 0)
    attn_v5_kernel(const __grid_constant__ AttnArgs a) {
    static_assert(!FP || WT, "the folded prologue is v6's");
    static_assert(!BK || (WT && KVT == LOOM_KV_F16 && D == 128), "TMA tiles: v6, F16, D 128");
    unsigned long long *tr = nullptr;  // TS: this block's trace record
    if (TS && threadIdx.x == 0) {
        const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        tr = b < kTraceBlocks ? g_attn_trace[(a.trace - 1) % kTraceSlots][b] : nullptr;
        if (tr) { tr[0] = gtimer(); tr[2] = clock64(); }
    }
#define V5_MARK(i) do { if (TS && tr) tr[i] = clock64(); } while (0)
    // FP: the head norm weights (constant) are requested before the PDL wait.
    constexpr int VPL = D / 32;  // values of a head row a lane holds
    float wq[FP ? VPL : 1], wk[FP ? VPL : 1];
    if constexpr (FP) {
        const int ln = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < VPL; j++) {
            wq[j] = a.pro.q_norm ? a.pro.q_norm[ln + 32 * j] : 0.0f;
            wk[j] = a.pro.k_norm ? a.pro.k_norm[ln + 32 * j] : 0.0f;
        }
    }
    // EA (v6, a.early): the first tiles' copies before the PDL wait (below).
    const bool ea = WT && a.early;
    auto wait_prev = [&]() {
        pdl_wait();
        if (TS && tr) { tr[1] = gtimer(); tr[3] = clock64(); }
        pdl_launch_dependents();
    };
    if (!ea) wait_prev();
    constexpr bool I8 = KVT == LOOM_KV_INT8;
    constexpr int TP = kV5Rows, RB = D * kv_elem_bytes(KVT), CPR = RB / 16, TILE = TP * RB;
    constexpr int STG = v5_stage(D, KVT);
    constexpr int KS = D / 16, NB = D / 8;
    // INT8: p carries the V row scale and 2^8 (kP8) so that p_lo stays out of f16 subnormals
    // (|V| row maxima below 32768 keep p hi finite); the output drops the 2^8 at the end.
    constexpr float kP8 = 256.0f;
    constexpr int LO = GM < 8 ? 4 * GM : 0;  // lane distance from a head's hi row to its lo row
    static_assert((CPR % 8 == 0 || CPR == 4) && KS % 4 == 0 && TP * CPR % kThreads == 0, "v5");
    extern __shared__ __align__(16) unsigned char dbuf[];
    unsigned char *buf = dbuf;
    if constexpr (BK)  // the swizzled boxes need 1024-byte aligned stages (launcher: +1 KB)
        buf = dbuf + ((1024u - (smaddr(dbuf) & 1023u)) & 1023u);
    __shared__ __align__(8) uint64_t mbar[BK ? kV6MaxStages : 1];
    // byte offset of 16-byte chunk c of row r in a K or V tile
    auto soff = [&](int r, int c) -> int {
        if constexpr (BK) return (c >> 3) * (kV5Rows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
        else return r * (D * kv_elem_bytes(KVT)) + v5_swz<D * kv_elem_bytes(KVT) / 16>(r, c) * 16;
    };
    __shared__ float m_sh[GM], l_sh[GM];
    __shared__ float mw[kWarps][GM], lw[kWarps][GM];
    // FP: the block's roped q heads, and the token's converted K and V rows of its KV head
    __shared__ __align__(16) float qs[FP ? GM : 1][FP ? D : 4];
    __shared__ float ksh[FP ? D : 1], vsh[FP ? D : 1];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gr = lane >> 2, t4 = lane & 3;
    const int kvh = blockIdx.x / a.hgroups, hg = blockIdx.x % a.hgroups;
    const int h0 = kvh * a.group + hg * a.G;
    const int G = min(a.G, a.group - hg * a.G);
    const int t = blockIdx.y;
    // FP: the raw q rows of this warp's heads (warp, warp + 4) and the token's raw K and V rows
    // of the block's KV head, requested before the position arrives (none depends on it); EA:
    // after the PDL wait (they come from the kernel before), behind the first tiles' copies.
    float xq[FP ? 2 : 1][FP ? VPL : 1], xk[FP ? VPL : 1], xv[FP ? VPL : 1];
    auto load_raw = [&]() {
        if constexpr (FP) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int g = warp + kWarps * hh;
#pragma unroll
                for (int j = 0; j < VPL; j++)
                    xq[hh][j] = g < G ? a.q[(int64_t)(h0 + g) * D + lane + 32 * j] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < VPL; j++) {
                xk[j] = a.pro.k[(int64_t)kvh * D + lane + 32 * j];
                xv[j] = a.pro.v[(int64_t)kvh * D + lane + 32 * j];
            }
        }
    };
    if (!ea) load_raw();
    const int pos0 = (int)query_pos0(a);
    const V5Range rg = v5_range(a, pos0, t, TP);
    const int S = rg.S;
    const bool clc = a.cl > 1 && S > 1;  // the cluster combines: every block takes part
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // v6 pushes into the other blocks' shared memory, which is allowed only once they have
    // started: every thread arrives here (relaxed, no wait) and waits before its first push.
    // Each block's combine barrier counts the bytes pushed into it (initialised before the
    // arrival, so every pusher finds it initialised).
    __shared__ __align__(8) uint64_t cbar;
    if constexpr (WT)
        if (clc) {
            if (tid == 0) mb_init(smaddr(&cbar), 1);
            asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
        }
#endif
    if (TS && tr) tr[12] = smid() | (unsigned long long)(unsigned)S << 32;
    if ((int)blockIdx.z >= S && !clc) {
        if (TS && tr) { tr[10] = clock64(); tr[11] = gtimer(); }
        return;
    }
    const int lo = rg.lo, hi = rg.hi;
    const int nch = hi > lo ? (hi - lo + TP - 1) / TP : 0;
    const int nst = a.nst;
    const int64_t rs = a.n_kv_head * RB;
    const unsigned char *kb = (const unsigned char *)a.kc + (int64_t)kvh * RB;
    const unsigned char *vb = (const unsigned char *)a.vc + (int64_t)kvh * RB;

    auto issue = [&](int ci) {  // v5: the block copies tile ci into stage ci % nst
        if (TS && (a.tmode & 2)) return;  // trace experiment: no loads
        copy_tile<TP, RB, I8, kThreads>(buf + (ci % nst) * STG, lo + ci * TP, hi, rs, kb, vb, a.ks,
                                        a.vs, a.n_kv_head, kvh, tid);
    };
    // v6 (WT): warp w walks tiles w, w + 4, ... of the split in its own WS = nst / 4 stages
    // (w, w + 4, ...), copied by its own lanes: no block barrier until the end.
    const int WS = nst / kWarps;
    const int njw = nch > warp ? (nch - warp + kWarps - 1) / kWarps : 0;  // this warp's tiles
    auto issue_w = [&](int ci, int st) {
        if (TS && (a.tmode & 2)) return;  // trace experiment: no loads
        if constexpr (BK) {
            const uint32_t bar = smaddr(&mbar[st]);
            if (lane == 0) mb_expect_tx(bar, 2 * TILE);
            __syncwarp();
            if (lane < 2)  // K, V: one box each of [2 halves][32 rows][64 values]
                tma_load_4d(smaddr(buf + st * STG + lane * TILE), lane ? &a.tmv : &a.tmk, 0,
                            lo + ci * TP, 0, kvh, bar);
        } else {
            copy_tile<TP, RB, I8, 32>(buf + st * STG, lo + ci * TP, hi, rs, kb, vb, a.ks, a.vs,
                                      a.n_kv_head, kvh, lane);
        }
    };
    // q of this lane's A rows (raw floats): v6 loads them before its tiles' copies (behind
    // 100+ KB of cp.async they arrived last: R1), v5 after.
    float2 qx[KS][2];
    const int hq = GM == 8 ? gr : (gr < GM ? gr : gr - GM);
    const bool rowok = (GM == 8 || gr < 2 * GM) && hq < G;
    auto load_q = [&]() {
        const float *qp = FP ? &qs[0][0] + (rowok ? hq : 0) * D + 2 * t4
                             : a.q + ((int64_t)t * a.n_head + h0 + (rowok ? hq : 0)) * D + 2 * t4;
        const bool qok = rowok && (!FP || nch > 0);  // FP: qs holds nothing without tiles
        // k slots 2t4, 2t4+1 and 2t4+8, 2t4+9 of step ks hold q[16ks + 2t4 + (0, 1)] and
        // q[16ks + 8 + 2t4 + (0, 1)] (F16), or q[16ks + 4t4 + (0, 1)] and (2, 3) (INT8: the
        // order in which a lane's 4 bytes of a K row arrive)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            qx[ks][0] = make_float2(0.0f, 0.0f);
            qx[ks][1] = qx[ks][0];
            if (qok && I8) {
                const float4 x = *reinterpret_cast<const float4 *>(qp + 16 * ks + 2 * t4);
                qx[ks][0] = make_float2(x.x, x.y);
                qx[ks][1] = make_float2(x.z, x.w);
            } else if (qok) {
                qx[ks][0] = *reinterpret_cast<const float2 *>(qp + 16 * ks);
                qx[ks][1] = *reinterpret_cast<const float2 *>(qp + 16 * ks + 8);
            }
        }
    };
    // FP: kw = this warp walks the tile that holds pos (and converts the token's K/V row).
    int32_t praw = 0;
    bool kw = false;
    if constexpr (FP) {
        if (nch > 0) {
            praw = *a.pos_dev;
            kw = praw == pos0 && hi == pos0 + 1 && warp == (nch - 1) % kWarps;
        }
    }
    const bool q_early = WT && !FP && !(TS && (a.tmode & 8));
    if (q_early && !ea) load_q();
    // EA without FP: the tile that holds pos (its split's last, walked by warp (nch - 1) % 4 as
    // its last) holds the row the kernel before (rope_kv_write, kv_write) writes: when it is
    // among the warp's first WS tiles, its copy follows the PDL wait, in a group of its own.
    const bool defer = ea && !FP && hi > pos0 && njw > 0 && njw <= WS && warp == (nch - 1) % kWarps;
    if constexpr (WT) {
        if constexpr (BK) {  // this warp's stages' barriers (one arrival: lane 0's expect_tx)
            if (lane == 0)
                for (int j = 0; j < WS; j++) mb_init(smaddr(&mbar[warp + kWarps * j]), 1);
            fence_async_smem();
            __syncwarp();
        }
        for (int j = 0; j < WS; j++) {
            if (j < njw && !(defer && j == njw - 1)) issue_w(warp + kWarps * j, warp + kWarps * j);
            cp_async_commit();
        }
        if (ea) {
            wait_prev();
            load_raw();
            if (q_early) load_q();
            if (defer) {
                issue_w(warp + kWarps * (njw - 1), warp + kWarps * (njw - 1));
                cp_async_commit();
            }
        }
    } else {
        for (int st = 0; st < nst; st++) {
            if (st < nch) issue(st);
            cp_async_commit();
        }
    }
    V5_MARK(4);
    if (TS && tr) tr[13] = (unsigned long long)nch | (unsigned long long)nst << 32;

    // q fragments (A of the score mma): row gr holds head gr's hi (GM = 8: and row gr + 8 its
    // lo); GM < 8: rows GM .. 2GM-1 the lo of heads 0 .. GM-1, rows past 2GM (and heads past
    // G) zero.
    if constexpr (FP) {
        const bool hw = a.pro.q_norm != nullptr;
        constexpr int NP = D / 64;
        float ac[NP], as[NP];
        auto rotate = [&](float *row) {
#pragma unroll
            for (int m = 0; m < NP; m++)
                if (lane + 32 * m < a.pro.half)
                    rope_apply(row, lane + 32 * m, a.pro.half, a.pro.neox != 0, ac[m], as[m]);
            __syncwarp();
        };
        auto krow = [&]() {
            head_norm<VPL>(ksh, xk, wk, hw, D, a.pro.eps, lane);
            rotate(ksh);
#pragma unroll
            for (int j = 0; j < VPL; j++) vsh[lane + 32 * j] = xv[j];
            __syncwarp();
            if (hg == 0) {
                const int64_t cr = (int64_t)praw * a.n_kv_head + kvh;
                kv_store_row(ksh, D, KVT, const_cast<void *>(a.kc), const_cast<float *>(a.ks),
                             cr, lane);
                kv_store_row(vsh, D, KVT, const_cast<void *>(a.vc), const_cast<float *>(a.vs),
                             cr, lane);
            }
        };
        if (nch > 0) {
            // the lane's pair angles once for all rows of the warp (rope.cuh: the same bits as
            // rope_kv_write's rope_rotate_pair a row)
            rope_lane_angles<NP>(praw, a.pro.theta_scale, a.pro.freq_scale, lane, ac, as);
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int g = warp + kWarps * hh;
                if (g < G) {
                    head_norm<VPL>(qs[g], xq[hh], wq, hw, D, a.pro.eps, lane);
                    rotate(qs[g]);
                }
            }
            if (TS && tr) tr[14] = clock64();  // the q heads are normed and rotated
            if (kw) krow();
        }
        __syncthreads();  // qs is read by the fragment loads of every warp
        if (TS && tr) tr[15] = clock64();
    }
    if (!q_early) load_q();
    uint32_t qa[KS][4];
    {
        const float qsc = a.scale * 1.44269504088896341f;
        const bool hirow = GM == 8 || gr < GM;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            const float2 x0 = qx[ks][0], x1 = qx[ks][1];
            uint32_t h0w, l0w, h1w, l1w;
            split_h2(x0.x * qsc, x0.y * qsc, h0w, l0w);
            split_h2(x1.x * qsc, x1.y * qsc, h1w, l1w);
            if (GM == 8) {
                qa[ks][0] = h0w; qa[ks][1] = l0w; qa[ks][2] = h1w; qa[ks][3] = l1w;
            } else {
                qa[ks][0] = hirow ? h0w : l0w; qa[ks][1] = 0u;
                qa[ks][2] = hirow ? h1w : l1w; qa[ks][3] = 0u;
            }
        }
    }

    if (TS && tr) {  // after q's loads arrived
        asm volatile("" ::"r"(qa[0][0]), "r"(qa[KS - 1][2]));
        tr[5] = clock64();
    }
    float o[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int k = 0; k < 4; k++) o[nb][k] = 0.0f;
    float m_run = -INFINITY, l_run = 0.0f;  // this lane's row (head), log2 units
    const int r8 = 8 * warp + (lane & 7);   // the tile row this lane addresses for ldmatrix
    const int chunk = lane >> 3;

    if constexpr (WT) {
        // Per tile and warp (32 rows = 4 n-blocks of 8 positions): scores by 4 x KS mma
        // m16n8k16 (two accumulators an n-block, as v5's two chains), one online-softmax step
        // over the 32 positions, then P (16 x 32) x V (32 x D) as 2 k-steps of m16n8k16.
        const int rl = lane & 7, ql = lane >> 3;
        for (int j = 0; j < njw; j++) {
            const int st = warp + kWarps * (j % WS);
            const int ci = warp + kWarps * j;
            const unsigned char *Ks = buf + st * STG, *Vs = Ks + TILE;
            const int j0 = lo + ci * TP;
            if constexpr (BK) {
                if (!(TS && (a.tmode & 2))) mb_wait(smaddr(&mbar[st]), (uint32_t)(j / WS) & 1u);
                if (j0 + TP > hi) {  // rows hi - j0 .. TP-1 of V: zeros (p = 0 must not meet NaN)
                    const int r0 = hi - j0;
                    for (int i = lane; i < (TP - r0) * CPR; i += 32)
                        *reinterpret_cast<uint4 *>(buf + st * STG + TILE + soff(r0 + i / CPR, i % CPR)) =
                            make_uint4(0u, 0u, 0u, 0u);
                }
            } else if (defer) {  // one group more; no refills (njw <= WS)
                if (j == njw - 1) cp_async_wait<0>();
                else cp_async_wait_n(WS);
            } else {
                cp_async_wait_n(WS - 1);
            }
            __syncwarp();
            if (j == 0 && warp == 0) V5_MARK(6);
            if constexpr (FP) {
                if (kw && j == njw - 1) {  // the converted row at pos replaces the copied one
                    const int r = pos0 - j0;
                    unsigned char *kr = buf + st * STG + r * RB, *vr = kr + TILE;
                    if constexpr (I8) {
                        float *sc = reinterpret_cast<float *>(buf + st * STG + 2 * TILE);
                        float dk, idk, dv, idv;
                        kv_i8_scale(ksh, D, lane, dk, idk);
                        kv_i8_scale(vsh, D, lane, dv, idv);
                        for (int i = lane; i < D; i += 32) {
                            const int off = v5_swz<CPR>(r, i / 16) * 16 + i % 16;
                            kr[off] = (unsigned char)kv_i8(ksh[i], idk);
                            vr[off] = (unsigned char)kv_i8(vsh[i], idv);
                        }
                        if (lane == 0) { sc[r] = dk; sc[TP + r] = dv; }
                    } else {
                        unsigned char *kt = buf + st * STG;
                        for (int i = lane; i < D; i += 32) {
                            const int off = soff(r, i / 8) + (i % 8) * 2;
                            *reinterpret_cast<uint16_t *>(kt + off) = kv_f16_bits(ksh[i]);
                            *reinterpret_cast<uint16_t *>(kt + TILE + off) = kv_f16_bits(vsh[i]);
                        }
                    }
                    __syncwarp();
                }
            }
            if (!(TS && (a.tmode & 1))) {
            float ca[4][4], cb[4][4];
#pragma unroll
            for (int nb = 0; nb < 4; nb++)
#pragma unroll
                for (int k = 0; k < 4; k++) ca[nb][k] = cb[nb][k] = 0.0f;
            if (I8) {
#pragma unroll
                for (int nb = 0; nb < 4; nb++)
#pragma unroll
                    for (int kq = 0; kq < KS / 4; kq++) {
                        uint32_t b[4];
                        const int r = 8 * nb + rl;
                        ldsm_x4<false>(b, Ks + soff(r, 4 * kq + ql));
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const int k = 4 * kq + i;
                            mma16816((i & 1) ? cb[nb] : ca[nb], qa[k][0], qa[k][1], qa[k][2],
                                     qa[k][3], i8x2_to_h2<0x4140>(b[i]), i8x2_to_h2<0x4342>(b[i]));
                        }
                    }
            } else {
#pragma unroll
                for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                    for (int nb = 0; nb < 4; nb++) {
                        uint32_t b[4];
                        const int r = 8 * nb + rl;
                        ldsm_x4<false>(b, Ks + soff(r, 4 * kk + ql));
                        mma16816(ca[nb], qa[2 * kk][0], qa[2 * kk][1], qa[2 * kk][2],
                                 qa[2 * kk][3], b[0], b[1]);
                        mma16816(cb[nb], qa[2 * kk + 1][0], qa[2 * kk + 1][1], qa[2 * kk + 1][2],
                                 qa[2 * kk + 1][3], b[2], b[3]);
                    }
            }
            const float *ksc = reinterpret_cast<const float *>(Vs + TILE);  // INT8 row scales
            float sv[4][2];
            float mt = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < 4; nb++) {
                float s0, s1;
                if (GM == 8) {
                    s0 = (ca[nb][0] + cb[nb][0]) + (ca[nb][2] + cb[nb][2]);
                    s1 = (ca[nb][1] + cb[nb][1]) + (ca[nb][3] + cb[nb][3]);
                } else {
                    const float x0 = ca[nb][0] + cb[nb][0], x1 = ca[nb][1] + cb[nb][1];
                    s0 = x0 + __shfl_xor_sync(0xffffffffu, x0, LO);
                    s1 = x1 + __shfl_xor_sync(0xffffffffu, x1, LO);
                }
                if (I8) {
                    const float2 k2 = *reinterpret_cast<const float2 *>(ksc + 8 * nb + 2 * t4);
                    s0 *= k2.x;
                    s1 *= k2.y;
                }
                const int pb = j0 + 8 * nb + 2 * t4;
                sv[nb][0] = pb < hi ? s0 : -INFINITY;
                sv[nb][1] = pb + 1 < hi ? s1 : -INFINITY;
                mt = fmaxf(mt, fmaxf(sv[nb][0], sv[nb][1]));
            }
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
            const float mn = fmaxf(m_run, mt);
            const float corr = m_run == -INFINITY ? 0.0f : exp2f(m_run - mn);
            float esum = 0.0f;
#pragma unroll
            for (int nb = 0; nb < 4; nb++)
#pragma unroll
                for (int k = 0; k < 2; k++) {
                    sv[nb][k] = sv[nb][k] == -INFINITY ? 0.0f : exp2f(sv[nb][k] - mn);
                    esum += sv[nb][k];
                }
            l_run = l_run * corr + esum;
            m_run = mn;
            if (!__all_sync(0xffffffffu, corr == 1.0f)) {
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
#pragma unroll
                    for (int k = 0; k < 4; k++) o[nb][k] *= corr;
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {  // positions 16 kk .. 16 kk + 15
                uint32_t pa[4];
#pragma unroll
                for (int h = 0; h < 2; h++) {  // n-block 2 kk + h: k slots 8 h + 2 t4, + 1
                    const int nb = 2 * kk + h;
                    uint32_t ph, pl;
                    if (I8) {
                        const float2 v2 = *reinterpret_cast<const float2 *>(ksc + TP + 8 * nb + 2 * t4);
                        split_h2(sv[nb][0] * (v2.x * kP8), sv[nb][1] * (v2.y * kP8), ph, pl);
                    } else {
                        split_h2(sv[nb][0], sv[nb][1], ph, pl);
                    }
                    if (GM == 8) {
                        pa[2 * h] = ph; pa[2 * h + 1] = pl;
                    } else {
                        pa[2 * h] = gr < GM ? ph : (gr < 2 * GM ? pl : 0u);
                        pa[2 * h + 1] = 0u;
                    }
                }
                // V rows 16 kk + 8 (ql & 1) + rl: matrices (rows lo, chunk c), (rows hi, c),
                // (rows lo, c + 1), (rows hi, c + 1)
                const int vr = 16 * kk + 8 * (ql & 1) + rl;
                if (I8) {
#pragma unroll
                    for (int c = 0; c < CPR; c += 2) {
                        uint32_t b[4];
                        ldsm_x4<true>(b, Vs + soff(vr, c + (ql >> 1)));
#pragma unroll
                        for (int u = 0; u < 2; u++) {
                            const int cc = c + u;
                            mma16816(o[2 * cc], pa[0], pa[1], pa[2], pa[3],
                                     i8x2_to_h2<0x4240>(b[2 * u]), i8x2_to_h2<0x4240>(b[2 * u + 1]));
                            mma16816(o[2 * cc + 1], pa[0], pa[1], pa[2], pa[3],
                                     i8x2_to_h2<0x4341>(b[2 * u]), i8x2_to_h2<0x4341>(b[2 * u + 1]));
                        }
                    }
                } else {
#pragma unroll
                    for (int c = 0; c < CPR; c += 2) {
                        uint32_t b[4];
                        ldsm_x4<true>(b, Vs + soff(vr, c + (ql >> 1)));
                        mma16816(o[c], pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
                        mma16816(o[c + 1], pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
                    }
                }
            }
            }
            // the stage is read: it may be refilled (BK: the generic reads and writes of the
            // stage are ordered before the TMA's async-proxy writes into it)
            if constexpr (BK) fence_async_smem();
            __syncwarp();
            if (j + WS < njw) issue_w(ci + kWarps * WS, st);
            cp_async_commit();
        }
    } else
    for (int ci = 0; ci < nch; ci++) {
        cp_async_wait_n(ci == 0 ? nst - 1 : nst - 2);
        __syncthreads();
        if (ci == 0) V5_MARK(6);
        if (ci >= 1) {
            if (ci - 1 + nst < nch) issue(ci - 1 + nst);
            cp_async_commit();
        }
        if (TS && (a.tmode & 1)) continue;  // trace experiment: loads only
        const unsigned char *Ks = buf + (ci % nst) * STG, *Vs = Ks + TILE;
        const int j0 = lo + ci * TP;
        float ca[4] = {0.0f, 0.0f, 0.0f, 0.0f}, cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (I8) {
            // one ldmatrix: 4 chunks (k steps) of the warp's 8 rows, 4 bytes a lane a chunk
#pragma unroll
            for (int kq = 0; kq < KS / 4; kq++) {
                uint32_t b[4];
                ldsm_x4<false>(b, Ks + r8 * RB + v5_swz<CPR>(r8, 4 * kq + chunk) * 16);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int k = 4 * kq + i;
                    mma16816((i & 1) ? cb : ca, qa[k][0], qa[k][1], qa[k][2], qa[k][3],
                             i8x2_to_h2<0x4140>(b[i]), i8x2_to_h2<0x4342>(b[i]));
                }
            }
        } else {
#pragma unroll
        for (int kk = 0; kk < KS / 2; kk++) {
            uint32_t b[4];
            ldsm_x4<false>(b, Ks + r8 * RB + v5_swz<CPR>(r8, 4 * kk + chunk) * 16);
            mma16816(ca, qa[2 * kk][0], qa[2 * kk][1], qa[2 * kk][2], qa[2 * kk][3], b[0], b[1]);
            mma16816(cb, qa[2 * kk + 1][0], qa[2 * kk + 1][1], qa[2 * kk + 1][2], qa[2 * kk + 1][3],
                     b[2], b[3]);
        }
        }
        float s0, s1;
        if (GM == 8) {
            s0 = (ca[0] + cb[0]) + (ca[2] + cb[2]);
            s1 = (ca[1] + cb[1]) + (ca[3] + cb[3]);
        } else {
            const float x0 = ca[0] + cb[0], x1 = ca[1] + cb[1];
            s0 = x0 + __shfl_xor_sync(0xffffffffu, x0, LO);
            s1 = x1 + __shfl_xor_sync(0xffffffffu, x1, LO);
        }
        const float *ksc = reinterpret_cast<const float *>(Vs + TILE);  // INT8 row scales
        if (I8) {
            const float2 k2 = *reinterpret_cast<const float2 *>(ksc + 8 * warp + 2 * t4);
            s0 *= k2.x;
            s1 *= k2.y;
        }
        const int pb = j0 + 8 * warp + 2 * t4;
        if (pb >= hi) s0 = -INFINITY;
        if (pb + 1 >= hi) s1 = -INFINITY;
        float mt = fmaxf(s0, s1);
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float mn = fmaxf(m_run, mt);
        const float corr = m_run == -INFINITY ? 0.0f : exp2f(m_run - mn);
        const float e0 = s0 == -INFINITY ? 0.0f : exp2f(s0 - mn);
        const float e1 = s1 == -INFINITY ? 0.0f : exp2f(s1 - mn);
        l_run = l_run * corr + (e0 + e1);
        m_run = mn;
        if (!__all_sync(0xffffffffu, corr == 1.0f)) {
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int k = 0; k < 4; k++) o[nb][k] *= corr;
        }
        uint32_t ph, pl, pa0, pa1;
        if (I8) {
            const float2 v2 = *reinterpret_cast<const float2 *>(ksc + TP + 8 * warp + 2 * t4);
            split_h2(e0 * (v2.x * kP8), e1 * (v2.y * kP8), ph, pl);
        } else {
            split_h2(e0, e1, ph, pl);
        }
        if (GM == 8) {
            pa0 = ph; pa1 = pl;
        } else {
            pa0 = gr < GM ? ph : (gr < 2 * GM ? pl : 0u);
            pa1 = 0u;
        }
        if (I8) {
            // lane's register of chunk c (transposed): V[p0][16c + 2g, +1], V[p1][16c + 2g, +1]
            // -> n-blocks 2c (value 16c + 2g) and 2c + 1 (16c + 2g + 1)
#pragma unroll
            for (int jq = 0; jq < KS / 4; jq++) {
                uint32_t b[4];
                ldsm_x4<true>(b, Vs + r8 * RB + v5_swz<CPR>(r8, 4 * jq + chunk) * 16);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int c = 4 * jq + i;
                    mma_1688(o[2 * c], pa0, pa1, i8x2_to_h2<0x4240>(b[i]));
                    mma_1688(o[2 * c + 1], pa0, pa1, i8x2_to_h2<0x4341>(b[i]));
                }
            }
        } else {
#pragma unroll
        for (int jj = 0; jj < NB / 4; jj++) {
            uint32_t b[4];
            ldsm_x4<true>(b, Vs + r8 * RB + v5_swz<CPR>(r8, 4 * jj + chunk) * 16);
#pragma unroll
            for (int q = 0; q < 4; q++) mma_1688(o[4 * jj + q], pa0, pa1, b[q]);
        }
        }
    }

    // The warps meet: each head's hi and lo rows are added, the warps' sums scaled to the
    // block's maximum go to red[warp][head][D], and the block's (max, sum) to m_sh, l_sh.
    if (TS && tr) {
        asm volatile("" ::"f"(o[0][0]), "f"(o[NB - 1][3]), "f"(l_run));
        tr[7] = clock64();
    }
    cp_async_wait<0>();
    float l = l_run + __shfl_xor_sync(0xffffffffu, l_run, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        if (GM == 8) {
            o[nb][0] += o[nb][2];
            o[nb][1] += o[nb][3];
        } else {
            o[nb][0] += __shfl_xor_sync(0xffffffffu, o[nb][0], LO);
            o[nb][1] += __shfl_xor_sync(0xffffffffu, o[nb][1], LO);
        }
    }
    const bool own = GM == 8 || gr < GM;
    if (own && t4 == 0) { mw[warp][gr] = m_run; lw[warp][gr] = l; }
    __syncthreads();  // the tiles are done with: buf becomes red
    float *red = reinterpret_cast<float *>(buf);
    if (own) {
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; w++) M = fmaxf(M, mw[w][gr]);
        const float wt = m_run == -INFINITY ? 0.0f : exp2f(m_run - M) * (I8 ? 1.0f / kP8 : 1.0f);
        float *rw = red + (warp * GM + gr) * D;
        if (I8) {
#pragma unroll
            for (int c = 0; c < D / 16; c++)
                *reinterpret_cast<float4 *>(rw + 16 * c + 4 * t4) =
                    make_float4(o[2 * c][0] * wt, o[2 * c + 1][0] * wt, o[2 * c][1] * wt,
                                o[2 * c + 1][1] * wt);
        } else {
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
                *reinterpret_cast<float2 *>(rw + 8 * nb + 2 * t4) =
                    make_float2(o[nb][0] * wt, o[nb][1] * wt);
        }
    }
    if (tid < GM) {
        float M = -INFINITY, sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) M = fmaxf(M, mw[w][tid]);
#pragma unroll
        for (int w = 0; w < kWarps; w++)
            sum += (mw[w][tid] == -INFINITY ? 0.0f : exp2f(mw[w][tid] - M)) * lw[w][tid];
        m_sh[tid] = M * 0.693147180559945309f;  // natural-log units for the split combine
        l_sh[tid] = sum;
    }
    __syncthreads();
    V5_MARK(8);
    if (TS && (a.tmode & 4)) {  // trace experiment: no split combine
        if (tr) { tr[10] = clock64(); tr[11] = gtimer(); }
        return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (WT) if (clc) {
        // v6: the partials are pushed. Once every block has started (the wait below), rank s
        // stores its warps' sum of output idx into rank (idx / opr)'s recv[s][idx % opr] and
        // its (max, sum) of each head into every rank's rm/rl[s][g] (the other blocks' static
        // shared memory, which no tile touches) with st.async, each store counted by the
        // receiving block's cbar; once its cbar has all its bytes (acquire) each rank combines
        // its opr outputs from its own shared memory, in v5's order and arithmetic (the same
        // bits), and may leave at once (nobody reads its shared memory, and every store into it
        // has landed). No block releases: a release at cluster scope waits for everything its
        // SM has in flight (bench/NOTES.md 7 "Session 26").
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        constexpr int OPR = GM * D / kV5Cluster;  // outputs a rank (>= 8, a multiple of 4)
        __shared__ __align__(16) float recv[kV5Cluster * OPR];
        __shared__ float rm[kV5Cluster][GM], rl[kV5Cluster][GM], wts[GM][kV5Cluster], dens[GM];
        const int C = a.cl, me = (int)cl.block_rank();
        const int opr = (G * D + C - 1) / C;  // outputs a rank in use: a multiple of 4 (D is)
        asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every block has started
        const int i0 = me * opr, i1 = min(G * D, i0 + opr);
        // the bytes pushed into this block: its outputs, every head's (max, sum), from each split
        if (tid == 0)
            mb_expect_tx(smaddr(&cbar), (uint32_t)(S * ((i1 > i0 ? i1 - i0 : 0) + 2 * G) * 4));
        if (me < S) {
            for (int i4 = tid; i4 < G * D / 4; i4 += kThreads) {
                float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
                for (int w = 0; w < kWarps; w++) {
                    const float4 y = *reinterpret_cast<const float4 *>(red + w * GM * D + 4 * i4);
                    x.x += y.x; x.y += y.y; x.z += y.z; x.w += y.w;
                }
                const int r = 4 * i4 / opr, off = 4 * i4 - r * opr;
                st_async4(cl_addr(recv + me * OPR + off, r), x, cl_addr(&cbar, r));
            }
            if (tid < G * C) {
                const int g = tid / C, r = tid % C;
                st_async(cl_addr(&rm[me][g], r), m_sh[g], cl_addr(&cbar, r));
                st_async(cl_addr(&rl[me][g], r), l_sh[g], cl_addr(&cbar, r));
            }
        }
        mb_wait<true>(smaddr(&cbar), 0);
        V5_MARK(9);
        if (i0 < i1) {
            for (int g = warp; g < G; g += kWarps) {
                if (g * D >= i1 || (g + 1) * D <= i0) continue;  // no output of head g here
                cluster_weights(lane < S ? rm[lane][g] : -INFINITY, lane < S ? rl[lane][g] : 0.0f,
                                lane, wts[g], &dens[g]);
            }
            __syncthreads();
            for (int idx = i0 + tid; idx < i1; idx += kThreads) {
                const int g = idx / D;
                float num = 0.0f;
#pragma unroll
                for (int q = 0; q < kV5Cluster; q++)
                    if (q < S) num = fmaf(wts[g][q], recv[q * OPR + idx - i0], num);
                a.out[((int64_t)t * a.n_head + h0 + g) * D + idx % D] = num / dens[g];
            }
        }
        if (TS && tr) { tr[10] = clock64(); tr[11] = gtimer(); }
        return;
    }
    if (clc) {
        // The S splits' partials meet in distributed shared memory: block r of the cluster
        // combines outputs r * 128 + tid, (r + C) * 128 + tid, ... over splits 0 .. S-1 in
        // order (the blocks past S hold nothing and are not read).
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        __shared__ float wts[GM][kV5Cluster], dens[GM];
        float *pb = red + kWarps * GM * D;  // [GM][D]: this block's sum over its warps
        for (int idx = tid; idx < GM * D; idx += kThreads) {
            float x = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; w++) x += red[w * GM * D + idx];
            pb[idx] = x;
        }
        cl.sync();
        V5_MARK(9);
        for (int g = warp; g < G; g += kWarps) {
            cluster_weights(lane < S ? *cl.map_shared_rank(&m_sh[g], lane) : -INFINITY,
                            lane < S ? *cl.map_shared_rank(&l_sh[g], lane) : 0.0f, lane, wts[g],
                            &dens[g]);
        }
        __syncthreads();
        const int C = a.cl, rank = (int)cl.block_rank();
        for (int idx = rank * kThreads + tid; idx < G * D; idx += C * kThreads) {
            const int g = idx / D;
            float v[kV5Cluster];
#pragma unroll
            for (int q = 0; q < kV5Cluster; q++)
                if (q < S) v[q] = *cl.map_shared_rank(&pb[idx], q);
            float num = 0.0f;
#pragma unroll
            for (int q = 0; q < kV5Cluster; q++)
                if (q < S) num = fmaf(wts[g][q], v[q], num);
            a.out[((int64_t)t * a.n_head + h0 + g) * D + idx % D] = num / dens[g];
        }
        cl.sync();  // the other blocks' shared memory must outlive this block's reads
        if (TS && tr) { tr[10] = clock64(); tr[11] = gtimer(); }
        return;
    }
#endif
    split_epilogue<D, GM, kWarps>(a, buf, G, h0, t, S, m_sh, l_sh, TS ? tr : nullptr);
    if (TS && tr) { tr[10] = clock64(); tr[11] = gtimer(); }
#undef V5_MARK
}

// One instantiation's launch; `max_set` remembers the dynamic shared memory it was allowed.
// The opt-in limit covers dynamic + static shared memory past 48 KB: set it whenever the
// dynamic size grows (from 0, so that 48 KB dynamic + the static arrays is covered too).
template <typename Kern>
cudaError_t launch_v5_fn(Kern kern, std::atomic<int> &max_set, const AttnArgs &a, dim3 grid,
                         int smem, cudaStream_t stream) {
    if (smem > max_set.load(std::memory_order_relaxed)) {
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return e;
        max_set.store(smem, std::memory_order_relaxed);
    }
    const unsigned cl = a.cl > 1 ? (unsigned)a.cl : 1;
    // EA: with the PDL attribute; otherwise in order (common.cuh, bench/NOTES.md 7.9).
    if (a.early)
        return launch_cluster(kern, grid, dim3(1, 1, cl), kThreads, (size_t)smem, stream, a);
    return launch_cluster_in_order(kern, grid, dim3(1, 1, cl), kThreads, (size_t)smem, stream, a);
}

template <int D, int KVT, int GM>
cudaError_t launch_v5_k(const AttnArgs &a, dim3 grid, cudaStream_t stream) {
    const int smem = v5_smem(D, KVT, GM, a.nst) + (a.tma ? 1024 : 0);
    if constexpr (D == 128 && KVT == LOOM_KV_F16) {
        if (a.tma && a.wt) {
            static std::atomic<int> mt[4];  // v6, v6 + prologue, and both traced (GM = 4)
            if constexpr (GM == 4)
                if (a.trace > 0)
                    return a.fp ? launch_v5_fn(attn_v5_kernel<D, KVT, GM, true, true, true, true>, mt[3], a, grid, smem, stream)
                                : launch_v5_fn(attn_v5_kernel<D, KVT, GM, true, true, false, true>, mt[2], a, grid, smem, stream);
            return a.fp ? launch_v5_fn(attn_v5_kernel<D, KVT, GM, false, true, true, true>, mt[1], a, grid, smem, stream)
                        : launch_v5_fn(attn_v5_kernel<D, KVT, GM, false, true, false, true>, mt[0], a, grid, smem, stream);
        }
    }
    static std::atomic<int> ms[6];  // v5, v6, traced v5, traced v6, v6 + prologue, traced
    if (a.fp) {
        if constexpr (D == 128 && GM == 4)
            if (a.trace > 0)
                return launch_v5_fn(attn_v5_kernel<D, KVT, GM, true, true, true>, ms[5], a, grid, smem, stream);
        return launch_v5_fn(attn_v5_kernel<D, KVT, GM, false, true, true>, ms[4], a, grid, smem, stream);
    }
    if constexpr (D == 128 && GM == 4) {
        if (a.trace > 0)
            return a.wt ? launch_v5_fn(attn_v5_kernel<D, KVT, GM, true, true>, ms[3], a, grid, smem, stream)
                        : launch_v5_fn(attn_v5_kernel<D, KVT, GM, true, false>, ms[2], a, grid, smem, stream);
    }
    return a.wt ? launch_v5_fn(attn_v5_kernel<D, KVT, GM, false, true>, ms[1], a, grid, smem, stream)
                : launch_v5_fn(attn_v5_kernel<D, KVT, GM, false, false>, ms[0], a, grid, smem, stream);
}

template <int D, int KVT>
cudaError_t launch_v5_d(const AttnArgs &a, dim3 grid, cudaStream_t stream) {
    if (a.G <= 1) return launch_v5_k<D, KVT, 1>(a, grid, stream);
    if (a.G <= 2) return launch_v5_k<D, KVT, 2>(a, grid, stream);
    if (a.G <= 4) return launch_v5_k<D, KVT, 4>(a, grid, stream);
    return launch_v5_k<D, KVT, 8>(a, grid, stream);
}

}  // namespace

namespace {
int g_trace_mode = -1, g_trace_next = 0;  // loom_cuda_attention_trace (bench/debug only)
}

// The driver's cuTensorMapEncodeTiled through cudart (no libcuda link), looked up once.
typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
bool v6_tensor_maps(AttnArgs *a) {
    static const EncodeTiledFn enc = []() -> EncodeTiledFn {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            return nullptr;
        return reinterpret_cast<EncodeTiledFn>(p);
    }();
    if (!enc) return false;
    constexpr int D = 128;
    const cuuint64_t row = (cuuint64_t)a->n_kv_head * D * 2;  // bytes between positions
    // The cache as [n_kv_head][2 halves][n_ctx][64 values] (strides not in order), boxes of
    // 1 x 2 x 32 x 64: a tile's K (or V) in one copy, landing in shared memory as [half][row][64]
    // (section 3 of bench/NOTES.md: 2 copies a tile beat 4 boxes of 32 x 64 at 4K)
    const cuuint64_t dims[4] = {64, (cuuint64_t)a->n_ctx, 2, (cuuint64_t)a->n_kv_head};
    const cuuint64_t strides[3] = {row, 128, (cuuint64_t)D * 2};
    const cuuint32_t box[4] = {64, (cuuint32_t)kV5Rows, 2, 1}, es[4] = {1, 1, 1, 1};
    for (int i = 0; i < 2; i++)
        if (enc(i ? &a->tmv : &a->tmk, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                const_cast<void *>(i ? a->vc : a->kc), dims, strides, box, es,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            static std::atomic<bool> said{false};
            if (!said.exchange(true))
                fprintf(stderr, "loom: attention v6: TMA tensor map refused; cp.async\n");
            return false;
        }
    return true;
}

loom_status run_v5(const AttnArgs &a0, int kvt, int64_t D, int64_t N, loom_error *err,
                   cudaStream_t stream) {
    AttnArgs a = a0;
    if (g_trace_mode >= 0) {
        a.trace = 1 + g_trace_next++ % kTraceSlots;
        a.tmode |= g_trace_mode;
    }
    if ((D != 64 && D != 128) || (kvt != LOOM_KV_F16 && kvt != LOOM_KV_INT8))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED,
                 "attention v5: head_dim %lld, cache type %d (F16/INT8 of 64 or 128 only)",
                 (long long)D, kvt);
    if (a.nst < 2 || a.nst > (a.wt ? kV6MaxStages : kV5MaxStages) || (a.wt && a.nst % kWarps) ||
        a.G < 1 || a.G > kMaxG || a.cl > kV5Cluster)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention v5: %d stages (v6: %d), %d heads a block, cluster %d", a.nst, a.wt,
                 a.G, a.cl);
    if (a.fp && (!a.wt || N != 1 || !a.pos_dev))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention v6: the folded prologue needs v6, one token and a device position");
    dim3 grid((unsigned)(a.n_kv_head * a.hgroups), (unsigned)N, (unsigned)a.splits);
    const bool i8 = kvt == LOOM_KV_INT8;
    cudaError_t e;
    if (D == 64) e = i8 ? launch_v5_d<64, LOOM_KV_INT8>(a, grid, stream) : launch_v5_d<64, LOOM_KV_F16>(a, grid, stream);
    else e = i8 ? launch_v5_d<128, LOOM_KV_INT8>(a, grid, stream) : launch_v5_d<128, LOOM_KV_F16>(a, grid, stream);
    CUDA_CHECK(e);
    return LOOM_OK;
}

}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_attention_trace(int mode, loom_error *err) {
    if (mode >= 0) {
        void *p = nullptr;
        CUDA_CHECK(cudaGetSymbolAddress(&p, g_attn_trace));
        CUDA_CHECK(cudaMemset(p, 0, sizeof(g_attn_trace)));
    }
    g_trace_mode = mode;
    g_trace_next = 0;
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_attention_trace_read(uint64_t *out, size_t n_words,
                                                      loom_error *err) {
    const size_t all = sizeof(g_attn_trace) / sizeof(uint64_t);
    if (!out || n_words > all)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention trace: %zu words (at most %zu)", n_words, all);
    CUDA_CHECK(cudaMemcpyFromSymbol(out, g_attn_trace, n_words * sizeof(uint64_t)));
    return LOOM_OK;
}
