// attention.cuh: what the decode attention kernels of attention.cu (v3, v4, the launchers),
// attention_v5.cu (v5, tensor cores) and attention_prefill.cu (batched causal prefill) share:
// the argument block, the device position, the tile sizes and tile helpers, and the end of a
// block's work (its partial, the global split combine and its counters). attention.cu's opening comment describes the kernels, their partition and the
// numeric contract. The device helpers and g_attn_counters sit in an unnamed namespace: each
// translation unit has its own counters (each kernel resets the ones it used), and nothing
// here needs relocatable device code.
#pragma once

#include <cuda.h>  // CUtensorMap (v6's TMA tile copies; the driver is reached through cudart)
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope.cuh"

namespace loom_cuda {

constexpr int kMaxG = 8, kMaxD = 128, kMaxSplits = 128;

struct AttnArgs {
    const float *q;
    const void *kc, *vc;
    const float *ks, *vs;
    float *out;
    float *part;  // splits > 1: v4/v5 [N][n_head][(D + 2) SP]
    const int32_t *pos_dev;  // device position of query 0 (the _at launcher), else NULL
    int64_t n_kv_head, n_head, pos0, n_tokens, n_ctx;
    float scale;
    int group;    // n_head / n_kv_head
    int G;        // heads a block
    int hgroups;  // ceil(group / G)
    int splits;   // gridDim.z: the most splits a block may find in use
    int S;        // v4/v5: splits for this shape (a position uses min(S, its tiles) or fewer)
    int SP;       // v4/v5 global combine: split stride of the partials (gridDim.z rounded up to 4)
    int nst;      // v5: cp.async stages (2 .. kV5MaxStages); v6: 4 x a warp's (4 .. 12)
    int cl;       // v5 on sm_90: cluster size over the splits (their combine in shared memory), 0 = off
    int wt;       // v6 (the v5 kernel with warps walking whole tiles): 1; nst is then 4 x
                  // the stages a warp, at most kV6MaxStages
    int trace;    // v5 timestamps (loom_cuda_attention_trace): 1 + the trace slot, 0 = off
    int tmode;    // traced launches only: 1 = no math, 2 = no loads, 4 = no split combine,
                  // 8 = v6 q after the copies
    int fp;       // v6 with the decode prologue folded in (pro; q is the raw q): 1
    int tma;      // v6, F16, D = 128, sm_90: 1 = tiles copied by TMA (tmk, tmv), not cp.async
    int early;    // v6: 1 = launched with PDL, the first tiles' copies before its wait
    AttnPrologue pro;
    CUtensorMap tmk, tmv;  // tma: the K and V caches as f16 tensors, boxes of 2 halves x 32
                           // rows x 64 values, 128-byte swizzle (attention_v5.cu)
};

namespace {  // device helpers and the combine's counters: one copy a translation unit

// Position of query 0: the launcher's value, or the device value clamped to 0 .. n_ctx - N (a
// device position out of range can neither fault nor read unwritten rows past the cache).
__device__ __forceinline__ int64_t query_pos0(const AttnArgs &a) {
    if (!a.pos_dev) return a.pos0;
    const int64_t p = *a.pos_dev;
    return p < 0 ? 0 : (p > a.n_ctx - a.n_tokens ? a.n_ctx - a.n_tokens : p);
}

// (cp_async16 / cp_async_commit / cp_async_wait: common.cuh)
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, bool ok) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(gmem),
                 "r"(ok ? 4 : 0)
                 : "memory");
}

constexpr __host__ __device__ int kv_elem_bytes(int kvt) {
    return kvt == LOOM_KV_F32 ? 4 : (kvt == LOOM_KV_F16 ? 2 : 1);
}
// Cache rows a tile: 64, 32 or 16, so that one K (or V) tile is at most 8 KB.
constexpr __host__ __device__ int tile_rows(int D, int kvt) {
    return D * kv_elem_bytes(kvt) <= 128 ? 64 : (D * kv_elem_bytes(kvt) <= 256 ? 32 : 16);
}
constexpr __host__ __device__ int cmax(int a, int b) { return a > b ? a : b; }

// Heads x positions counters of the folded combine: zero at module load, each reset by the
// block that used it, so every launch (and graph replay) finds them zero.
constexpr int kMaxCounters = 16384;
__device__ int g_attn_counters[kMaxCounters];

// The end of a block's work, shared by v4 and v5: buf holds the position groups' sums
// red[NGV][GM][D] (unnormalized, at the block's maxima m_sh, natural-log units) and l_sh the
// softmax denominators. With one split the block writes out; otherwise it stores its partial
// and the last block of this (token, head group) to finish combines all S partials in split
// order (deterministic whichever block is last) and resets the counter.
// Partials, per (token, head): [SP][D] values (a block stores D consecutive floats), then [SP]
// maxima and [SP] sums.
// tr (thread 0 of a traced v5 block, else NULL): word 9 of its trace record gets the clock
// after the counter's atomic.
template <int D, int GM, int NGV>
__device__ __forceinline__ void split_epilogue(const AttnArgs &a, unsigned char *buf, int G,
                                               int h0, int t, int S, float *m_sh, float *l_sh,
                                               unsigned long long *tr = nullptr) {
    constexpr int HW = (GM + kWarps - 1) / kWarps;  // heads a combine warp
    __shared__ int last_sh;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float *red = reinterpret_cast<const float *>(buf);
    const int64_t pstride = (int64_t)(D + 2) * a.SP;
    for (int idx = tid; idx < GM * D; idx += kThreads) {
        const int g = idx / D, d = idx % D;
        if (g >= G) break;
        float o = 0.0f;
#pragma unroll
        for (int p = 0; p < NGV; p++) o += red[(p * GM + g) * D + d];
        const int64_t th = (int64_t)t * a.n_head + h0 + g;
        if (S == 1) {
            a.out[th * D + d] = o / l_sh[g];
        } else {
            float *pp = a.part + th * pstride;
            pp[(int64_t)blockIdx.z * D + d] = o;
            if (d == 0) {
                pp[(int64_t)D * a.SP + blockIdx.z] = m_sh[g];
                pp[(int64_t)(D + 1) * a.SP + blockIdx.z] = l_sh[g];
            }
        }
    }
    if (S == 1) return;

    // One fence a block, by thread 0 after the barrier (the grid-sync pattern), not one a
    // thread: the barrier orders the block's stores before thread 0's fence and atomic; the
    // last block's fence after its atomic orders the reads below after every block's stores.
    __syncthreads();
    int *cnt = g_attn_counters + (t * (int)gridDim.x + (int)blockIdx.x);
    if (tid == 0) {
        __threadfence();
        const int last = atomicAdd(cnt, 1) == S - 1;
        if (last) __threadfence();
        last_sh = last;
    }
    __syncthreads();
    if (tr) tr[9] = clock64() | (unsigned long long)last_sh << 63;
    if (!last_sh) return;
    float *w = reinterpret_cast<float *>(buf);  // [GM][kMaxSplits] weights
    float *ls = w + GM * kMaxSplits;           // [GM][kMaxSplits] sums
    for (int idx = tid; idx < GM * S; idx += kThreads) {
        const int g = idx / S, s = idx % S;
        if (g >= G) break;
        const float *pp = a.part + ((int64_t)t * a.n_head + h0 + g) * pstride;
        w[g * kMaxSplits + s] = __ldcg(pp + (int64_t)D * a.SP + s);
        ls[g * kMaxSplits + s] = __ldcg(pp + (int64_t)(D + 1) * a.SP + s);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < HW; k++) {
        const int g = warp + kWarps * k;
        if (g < G) {
            float M = -INFINITY;
            for (int s = lane; s < S; s += 32) M = fmaxf(M, w[g * kMaxSplits + s]);
            M = warp_max(M);
            float den = 0.0f;
            for (int s = lane; s < S; s += 32) {
                const float m = w[g * kMaxSplits + s];
                const float wt = m == -INFINITY ? 0.0f : expf(m - M);
                w[g * kMaxSplits + s] = wt;
                den = fmaf(wt, ls[g * kMaxSplits + s], den);
            }
            den = warp_sum(den);
            if (lane == 0) l_sh[g] = den;
        }
    }
    __syncthreads();
    // Every thread owns EPT output values, EG at a time; each step issues its partial loads (8
    // splits a value, coalesced over d) before any FMA: one L2 round trip a step, not 8 EG.
    // The sum runs over s = 0 .. S-1 in order for every value.
    {
        constexpr int EPT = (GM * D + kThreads - 1) / kThreads;
        constexpr int EG = EPT < 4 ? EPT : 4;  // values a pass (32 loads in flight)
#pragma unroll 1
        for (int k0 = 0; k0 < EPT; k0 += EG) {
            const float *pe[EG];
            const float *we[EG];
            float num[EG];
#pragma unroll
            for (int k = 0; k < EG; k++) {
                const int idx = tid + (k0 + k) * kThreads, g = idx / D, d = idx % D;
                const int gg = g < G ? g : 0;  // past G: a valid row, result not stored
                pe[k] = a.part + ((int64_t)t * a.n_head + h0 + gg) * pstride + d;
                we[k] = w + gg * kMaxSplits;
                num[k] = 0.0f;
            }
            for (int s0 = 0; s0 < S; s0 += 8) {
                float o[EG][8];
#pragma unroll
                for (int k = 0; k < EG; k++)
#pragma unroll
                    for (int c = 0; c < 8; c++)
                        if (s0 + c < S) o[k][c] = __ldcg(pe[k] + (int64_t)(s0 + c) * D);
#pragma unroll
                for (int k = 0; k < EG; k++)
#pragma unroll
                    for (int c = 0; c < 8; c++)
                        if (s0 + c < S) num[k] = fmaf(we[k][s0 + c], o[k][c], num[k]);
            }
#pragma unroll
            for (int k = 0; k < EG; k++) {
                const int idx = tid + (k0 + k) * kThreads, g = idx / D, d = idx % D;
                if (g < G) a.out[((int64_t)t * a.n_head + h0 + g) * D + d] = num[k] / l_sh[g];
            }
        }
    }
    if (tid == 0) *cnt = 0;
}

// The tensor-core kernels' tile helpers (v5/v6 in attention_v5.cu, the prefill kernel in
// attention_prefill.cu): ldmatrix, the f16 hi + lo split, swizzled cp.async tile copies and
// the INT8 -> f16 byte trick.
// Four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8 of matrix
// l / 8. trans: each thread receives a column pair instead of a row pair.
template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(p);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(sa)
                     : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(sa)
                     : "memory");
}
// x = hi + lo with hi, lo f16 (to ~2^-22 of |x|, lo's subnormals aside): the f16 products of
// the tensor cores then carry f32-like precision.
__device__ __forceinline__ void split_h2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 f = __half22float2(h);
    const __half2 l = __floats2half2_rn(x0 - f.x, x1 - f.y);
    hi = *reinterpret_cast<const uint32_t *>(&h);
    lo = *reinterpret_cast<const uint32_t *>(&l);
}
// cp.async.wait_group with a run-time count (0 .. 7).
__device__ __forceinline__ void cp_async_wait_n(int n) {
    switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
    }
}

// Chunk c of row r of a tile sits at chunk v5_swz(r, c): the 8 rows an ldmatrix phase reads
// (same c) land in 8 distinct 16-byte bank groups (rows of 8+ chunks: XOR with r mod 8; rows
// of 4 chunks, INT8 D = 64: two rows share 128 bytes, XOR with (r / 2) mod 4).
template <int CPR>
__device__ __forceinline__ int v5_swz(int r, int c) {
    return CPR >= 8 ? c ^ (r & 7) : c ^ ((r >> 1) & 3);
}
// Copies the cache rows j0 .. j0 + TP - 1 of one KV head into a stage by cp.async: the K tile
// at st, the V tile after it (rows at or past hi are zero-filled), 16-byte chunk c of row r at
// chunk v5_swz(r, c); INT8: then the TP K row scales and the TP V row scales. Thread ti of the
// NT that share the copy (a block in v5, a warp in v6) issues chunks ti, ti + NT, ...
template <int TP, int RB, bool I8, int NT>
__device__ __forceinline__ void copy_tile(unsigned char *st, int j0, int hi, int64_t rs,
                                          const unsigned char *kb, const unsigned char *vb,
                                          const float *ks, const float *vs, int64_t n_kv_head,
                                          int kvh, int ti) {
    constexpr int CPR = RB / 16, TILE = TP * RB;
    static_assert(TP * CPR % NT == 0, "copy_tile");
    unsigned char *Ks = st, *Vs = st + TILE;
#pragma unroll
    for (int i = 0; i < TP * CPR / NT; i++) {
        const int idx = ti + i * NT;
        const int r = idx / CPR, c = idx % CPR;
        const bool ok = j0 + r < hi;
        const int64_t off = ok ? (int64_t)(j0 + r) * rs + c * 16 : 0;
        const int sh = r * RB + v5_swz<CPR>(r, c) * 16;
        cp_async16(Ks + sh, kb + off, ok);
        cp_async16(Vs + sh, vb + off, ok);
    }
    if (I8) {
        float *sc = reinterpret_cast<float *>(Vs + TILE);
        for (int i = ti; i < 2 * TP; i += NT) {  // K row scales, then V row scales
            const int r = i % TP;
            const bool ok = j0 + r < hi;
            const int64_t e = ok ? (int64_t)(j0 + r) * n_kv_head + kvh : 0;
            cp_async4(sc + i, (i < TP ? ks : vs) + e, ok);
        }
    }
}

// Four int8 of one 32-bit word (bytes i, j) -> the f16x2 (q_i, q_j), exact: 0x64XX is the f16
// 1024 + XX, XX = q + 128.
template <uint32_t SEL>
__device__ __forceinline__ uint32_t i8x2_to_h2(uint32_t w) {
    const uint32_t h = __byte_perm(w ^ 0x80808080u, 0x64646464u, SEL);
    const __half2 r = __hsub2(*reinterpret_cast<const __half2 *>(&h), __floats2half2_rn(1152.0f, 1152.0f));
    return *reinterpret_cast<const uint32_t *>(&r);
}

constexpr int kV5Rows = 32;    // cache rows a v5 tile: 8 a warp
constexpr int kV5MaxStages = 8;
constexpr int kV6MaxStages = 12;  // 3 a warp
// Cluster size of the sm_90 combine (portable; at 4K+ positions 16 blocks lost to the global
// combine of 17 splits, bench/NOTES.md section 3).
constexpr int kV5Cluster = 8;

// v5 bytes of one stage: K tile, V tile (INT8: then the tile's K and V row scales).
constexpr __host__ __device__ int v5_stage(int D, int kvt) {
    return 2 * kV5Rows * D * kv_elem_bytes(kvt) + (kvt == LOOM_KV_INT8 ? 2 * kV5Rows * 4 : 0);
}

}  // namespace

// v5 (attention_v5.cu): launches the tensor-core kernel for an F16 or INT8 cache of head_dim 64
// or 128 with a's partition (a.cl > 1: one cluster over the splits, sm_90 only). Returns
// LOOM_ERR_UNSUPPORTED for any other head_dim or cache type, LOOM_ERR_INVALID_ARGUMENT for
// stages outside 2 .. kV5MaxStages (v6, a.wt: 4 .. kV6MaxStages, a multiple of 4), G outside
// 1 .. kMaxG or a cluster past kV5Cluster, and
// LOOM_ERR_CUDA with the launch error in err.
loom_status run_v5(const AttnArgs &a, int kvt, int64_t D, int64_t N, loom_error *err,
                   cudaStream_t stream);
// Prefill (attention_prefill.cu, LOOM_ATTN_PREFILL=1 or 2, N > 1): whether the tensor-core
// prefill kernel takes head_dim D, cache type kvt and `group` query heads a KV head (64, 128;
// F16, INT8; group divides 64), and its launch for a's shape and position (a.group, q,
// caches, out, pos0 / pos_dev; no split, no scratch) with kh = 1 (4 warps on every tile) or 2
// (8 warps, each tile's two halves walked apart, met at the end). Returns LOOM_ERR_UNSUPPORTED
// for a shape it does not take, LOOM_ERR_CUDA with the launch error in err.
bool prefill_supported(int64_t D, int kvt, int group);
loom_status run_prefill(AttnArgs a, int kvt, int64_t D, int64_t N, int kh, loom_error *err,
                        cudaStream_t stream);
// v6's TMA copies: fills a->tmk and a->tmv for an F16 cache of head_dim 128 (a's kc, vc,
// n_kv_head, n_ctx). false when the driver's encoder is missing or refuses the layout (the
// caller then keeps cp.async); never fails the launch.
bool v6_tensor_maps(AttnArgs *a);

}  // namespace loom_cuda
