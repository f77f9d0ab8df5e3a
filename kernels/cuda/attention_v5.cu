// attention_v5.cu: decode (and prefill) attention v5, the tensor-core kernel for F16 and INT8
// caches of head_dim 64 and 128: attention.cu's opening comment ("v5") gives its geometry,
// staging, split combines and numeric contract; attention.cuh what it shares with v4. The
// launcher run_v5 is called by attention.cu's launch_attn, which chooses the partition (splits,
// stages, cluster) from the shape and n_ctx only.
#include <math.h>

#include <atomic>

#include <cooperative_groups.h>

#include "kernels/cuda/attention.cuh"
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

// A block's dynamic shared memory for `nst` stages; after the tiles it holds the warps' sums
// (and this block's partial for the cluster combine), or the global combine's weights.
constexpr __host__ __device__ int v5_smem(int D, int kvt, int GM, int nst) {
    return cmax(cmax(nst * v5_stage(D, kvt), (kWarps + 1) * GM * D * 4), 2 * GM * kMaxSplits * 4);
}
// Chunk c of row r of a tile sits at chunk v5_swz(r, c): the 8 rows an ldmatrix phase reads
// (same c) land in 8 distinct 16-byte bank groups (rows of 8+ chunks: XOR with r mod 8; rows
// of 4 chunks, INT8 D = 64: two rows share 128 bytes, XOR with (r / 2) mod 4).
template <int CPR>
__device__ __forceinline__ int v5_swz(int r, int c) {
    return CPR >= 8 ? c ^ (r & 7) : c ^ ((r >> 1) & 3);
}
// Four int8 of one 32-bit word (bytes i, j) -> the f16x2 (q_i, q_j), exact: 0x64XX is the f16
// 1024 + XX, XX = q + 128.
template <uint32_t SEL>
__device__ __forceinline__ uint32_t i8x2_to_h2(uint32_t w) {
    const uint32_t h = __byte_perm(w ^ 0x80808080u, 0x64646464u, SEL);
    const __half2 r = __hsub2(*reinterpret_cast<const __half2 *>(&h), __floats2half2_rn(1152.0f, 1152.0f));
    return *reinterpret_cast<const uint32_t *>(&r);
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
template <int D, int KVT, int GM>
static __global__ void __launch_bounds__(kThreads) attn_v5_kernel(const AttnArgs a) {
    pdl_wait();
    pdl_launch_dependents();
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
    __shared__ float m_sh[GM], l_sh[GM];
    __shared__ float mw[kWarps][GM], lw[kWarps][GM];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gr = lane >> 2, t4 = lane & 3;
    const int kvh = blockIdx.x / a.hgroups, hg = blockIdx.x % a.hgroups;
    const int h0 = kvh * a.group + hg * a.G;
    const int G = min(a.G, a.group - hg * a.G);
    const int t = blockIdx.y;
    const int pos0 = (int)query_pos0(a);
    const int ntiles = (pos0 + (int)a.n_tokens + TP - 1) / TP;
    const int s1 = min(a.S, ntiles);
    const int per = (ntiles + s1 - 1) / s1;
    const int S = (ntiles + per - 1) / per;
    const bool clc = a.cl > 1 && S > 1;  // the cluster combines: every block takes part
    if ((int)blockIdx.z >= S && !clc) return;
    const int L = pos0 + t + 1;
    const int lo = (int)blockIdx.z * per * TP;
    const int hi = min(L, lo + per * TP);
    const int nch = hi > lo ? (hi - lo + TP - 1) / TP : 0;
    const int nst = a.nst;
    const int64_t rs = a.n_kv_head * RB;
    const unsigned char *kb = (const unsigned char *)a.kc + (int64_t)kvh * RB;
    const unsigned char *vb = (const unsigned char *)a.vc + (int64_t)kvh * RB;

    auto issue = [&](int ci) {
        unsigned char *Ks = buf + (ci % nst) * STG, *Vs = Ks + TILE;
        const int j0 = lo + ci * TP;
#pragma unroll
        for (int i = 0; i < TP * CPR / kThreads; i++) {
            const int idx = tid + i * kThreads;
            const int r = idx / CPR, c = idx % CPR;
            const bool ok = j0 + r < hi;
            const int64_t off = ok ? (int64_t)(j0 + r) * rs + c * 16 : 0;
            const int sh = r * RB + v5_swz<CPR>(r, c) * 16;
            cp_async16(Ks + sh, kb + off, ok);
            cp_async16(Vs + sh, vb + off, ok);
        }
        if (I8 && tid < 2 * TP) {  // the tile's K row scales, then its V row scales
            const int r = tid % TP;
            const bool ok = j0 + r < hi;
            const int64_t e = ok ? (int64_t)(j0 + r) * a.n_kv_head + kvh : 0;
            float *sc = reinterpret_cast<float *>(Vs + TILE);
            cp_async4(sc + tid, (tid < TP ? a.ks : a.vs) + e, ok);
        }
    };
    for (int st = 0; st < nst; st++) {
        if (st < nch) issue(st);
        cp_async_commit();
    }

    // q fragments (A of the score mma): row gr holds head gr's hi (GM = 8: and row gr + 8 its
    // lo); GM < 8: rows GM .. 2GM-1 the lo of heads 0 .. GM-1, rows past 2GM (and heads past
    // G) zero.
    uint32_t qa[KS][4];
    {
        const float qsc = a.scale * 1.44269504088896341f;
        const int hq = GM == 8 ? gr : (gr < GM ? gr : gr - GM);
        const bool rowok = (GM == 8 || gr < 2 * GM) && hq < G;
        const bool hirow = GM == 8 || gr < GM;
        const float *qp = a.q + ((int64_t)t * a.n_head + h0 + (rowok ? hq : 0)) * D + 2 * t4;
        // k slots 2t4, 2t4+1 and 2t4+8, 2t4+9 of step ks hold q[16ks + 2t4 + (0, 1)] and
        // q[16ks + 8 + 2t4 + (0, 1)] (F16), or q[16ks + 4t4 + (0, 1)] and (2, 3) (INT8: the
        // order in which a lane's 4 bytes of a K row arrive)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            float2 x0 = make_float2(0.0f, 0.0f), x1 = x0;
            if (rowok && I8) {
                const float4 x = *reinterpret_cast<const float4 *>(qp + 16 * ks + 2 * t4);
                x0 = make_float2(x.x, x.y);
                x1 = make_float2(x.z, x.w);
            } else if (rowok) {
                x0 = *reinterpret_cast<const float2 *>(qp + 16 * ks);
                x1 = *reinterpret_cast<const float2 *>(qp + 16 * ks + 8);
            }
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

    float o[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int k = 0; k < 4; k++) o[nb][k] = 0.0f;
    float m_run = -INFINITY, l_run = 0.0f;  // this lane's row (head), log2 units
    const int r8 = 8 * warp + (lane & 7);   // the tile row this lane addresses for ldmatrix
    const int chunk = lane >> 3;

    for (int ci = 0; ci < nch; ci++) {
        cp_async_wait_n(ci == 0 ? nst - 1 : nst - 2);
        __syncthreads();
        if (ci >= 1) {
            if (ci - 1 + nst < nch) issue(ci - 1 + nst);
            cp_async_commit();
        }
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
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
        for (int g = warp; g < G; g += kWarps) {
            const float m = lane < S ? *cl.map_shared_rank(&m_sh[g], lane) : -INFINITY;
            const float ll = lane < S ? *cl.map_shared_rank(&l_sh[g], lane) : 0.0f;
            const float M = warp_max(m);
            const float w = m == -INFINITY ? 0.0f : expf(m - M);
            const float den = warp_sum(w * ll);
            if (lane < kV5Cluster) wts[g][lane] = w;
            if (lane == 0) dens[g] = den;
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
        return;
    }
#endif
    split_epilogue<D, GM, kWarps>(a, buf, G, h0, t, S, m_sh, l_sh);
}

template <int D, int KVT, int GM>
cudaError_t launch_v5_k(const AttnArgs &a, dim3 grid, cudaStream_t stream) {
    const int smem = v5_smem(D, KVT, GM, a.nst);
    // The opt-in limit covers dynamic + static shared memory past 48 KB: set it whenever the
    // dynamic size grows (from 0, so that 48 KB dynamic + the static arrays is covered too).
    static std::atomic<int> max_set{0};
    if (smem > max_set.load(std::memory_order_relaxed)) {
        cudaError_t e = cudaFuncSetAttribute(attn_v5_kernel<D, KVT, GM>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return e;
        max_set.store(smem, std::memory_order_relaxed);
    }
    const unsigned cl = a.cl > 1 ? (unsigned)a.cl : 1;
    return launch_cluster(attn_v5_kernel<D, KVT, GM>, grid, dim3(1, 1, cl), kThreads,
                          (size_t)smem, stream, a);
}

template <int D, int KVT>
cudaError_t launch_v5_d(const AttnArgs &a, dim3 grid, cudaStream_t stream) {
    if (a.G <= 1) return launch_v5_k<D, KVT, 1>(a, grid, stream);
    if (a.G <= 2) return launch_v5_k<D, KVT, 2>(a, grid, stream);
    if (a.G <= 4) return launch_v5_k<D, KVT, 4>(a, grid, stream);
    return launch_v5_k<D, KVT, 8>(a, grid, stream);
}

}  // namespace

loom_status run_v5(const AttnArgs &a, int kvt, int64_t D, int64_t N, loom_error *err,
                   cudaStream_t stream) {
    if ((D != 64 && D != 128) || (kvt != LOOM_KV_F16 && kvt != LOOM_KV_INT8))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED,
                 "attention v5: head_dim %lld, cache type %d (F16/INT8 of 64 or 128 only)",
                 (long long)D, kvt);
    if (a.nst < 2 || a.nst > kV5MaxStages || a.G < 1 || a.G > kMaxG || a.cl > kV5Cluster)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention v5: %d stages, %d heads a block, cluster %d",
                 a.nst, a.G, a.cl);
    dim3 grid((unsigned)(a.n_kv_head * a.hgroups), (unsigned)N, (unsigned)a.splits);
    const bool i8 = kvt == LOOM_KV_INT8;
    cudaError_t e;
    if (D == 64) e = i8 ? launch_v5_d<64, LOOM_KV_INT8>(a, grid, stream) : launch_v5_d<64, LOOM_KV_F16>(a, grid, stream);
    else e = i8 ? launch_v5_d<128, LOOM_KV_INT8>(a, grid, stream) : launch_v5_d<128, LOOM_KV_F16>(a, grid, stream);
    CUDA_CHECK(e);
    return LOOM_OK;
}

}  // namespace loom_cuda
