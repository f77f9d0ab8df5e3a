// attention_prefill.cu: batched causal prefill attention on the tensor cores (N > 1 query
// tokens against the filled KV cache; F16 and INT8 caches of head_dim 64 and 128, any GQA
// group that divides 64). Chosen by attention.cu's launch_attn with LOOM_ATTN_PREFILL=1 for
// N > 1; decode (N = 1) never comes here.
//
// Geometry (FlashAttention-2 style): a block (128 threads, 4 warps) owns one KV head and 64
// query rows = its `group` query heads x 64 / group consecutive tokens (row r: token
// tb + r / group, head kvh x group + r % group); warp w owns rows 16w .. 16w+15, and lane
// (gr = lane / 4, t4 = lane % 4) the rows gr and gr + 8 of them, as the mma fragments have
// it. Grid (n_kv_head, ceil(N / tokens a block)), the blocks of the last tokens (the longest
// walks) first. The block walks the cache in 32-row tiles from position 0 up to its last
// token's position (pos0 + its last token): every K/V tile is copied global -> shared ONCE
// for all 64 rows (v5's copy_tile: cp.async, nst stages, XOR swizzle, INT8 row scales after
// the V tile) instead of once per token and head group as the v5 prefill does. Per tile and
// warp (tiles past the warp's last position are skipped):
//   scores (16 rows x 32 positions) = Q x K^T by mma m16n8k16, Q as f16 hi and f16 lo (q x
//   scale x log2 e split in two: ~22 bits, v5's numerics), K through ldmatrix (INT8: the
//   1024 + q byte trick, exact), hi and lo in two accumulator chains added once a tile;
//   causal mask by position (row of token t sees positions <= pos0 + t);
//   online softmax per row in registers (exp2, the quad's 4 lanes meet by shuffles);
//   out (16 x D) += P x V by mma m16n8k16 with P as f16 hi + lo (INT8: p x V row scale x 2^8,
//   dropped at the end), V through ldmatrix.trans.
// KH = 2 (LOOM_ATTN_PREFILL=2, sm_90): 8 warps a block (one block an SM), a stage holds 64
// cache rows, warps 0-3 walk rows 0-31 and warps 4-7 rows 32-63 of every stage for the same
// query rows, each pair with its own online softmax; after the last stage warp w + 4 leaves
// its maxima, sums and outputs in shared memory and warp w weighs both halves by exp2(m - max)
// in a fixed order. The serial walk of the block (the critical path at pos0 0: the last token
// block walks every tile) is halved.
// A warp's rows see every position they need, so the output is written once at the end (no
// split, no combine, no atomics): the result does not depend on the launch order, and
// loom_cuda_attention_at (position from device memory) gives the by-value bits (the grid does
// not depend on the position).
// Shared memory: nst stages of KH x v5_stage(D, type) bytes (F16 x 128: 16 KB a 32-row tile):
// KH = 1 4 stages on sm_90, as many as fit 40 KB on sm_87 (F16 x 128: 2); KH = 2 3 stages.
// Registers (q fragments 8 x D/16, output 4 x D/8, scores 32): D = 128 230-238, D = 64
// 148-161, 0 spills on sm_90a and sm_87.
// Measured (H200, 4B shape 32/8 x 128, bench/NOTES.md 3 "Session 8, pfa"): F16 N = 512 at
// pos0 0 124 us (v5) -> 31.0 (KH = 1) / 27.4 (KH = 2); N = 512 after 1536 positions 590 ->
// 115.6 / 127.4; N = 128 19.4 -> 9.4 / 9.2; INT8 alike.
// Numeric contract: attention.cu's (float32 online softmax, products of f16 hi + lo operands,
// within 1e-4 of max |out| of the CPU twin; INT8 needs |V| row maxima below 32768, |q x scale|
// below 32768), deterministic; not the bits of the v5 path (another summation order).
#include <math.h>

#include <atomic>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/mma_common.cuh"

namespace loom_cuda {
namespace {

constexpr int kPfRows = 64;       // query rows a block: 4 warps x 16
constexpr int kPfMaxStages = 4;   // cp.async stages on sm_90

template <int D, int KVT, int KH>
static __global__ void __launch_bounds__(kThreads * KH, KH == 1 ? 2 : 1)
    attn_prefill_kernel(const __grid_constant__ AttnArgs a) {
    pdl_wait();
    pdl_launch_dependents();
    constexpr bool I8 = KVT == LOOM_KV_INT8;
    // KH = 2: a stage holds 64 cache rows, warps 4..7 (kh = 1) take rows 32..63 of each with
    // their own softmax state; the halves meet once, at the end
    constexpr int NT = kThreads * KH, TP = kV5Rows * KH;
    constexpr int RB = D * kv_elem_bytes(KVT), CPR = RB / 16, TILE = TP * RB;
    constexpr int STG = KH * v5_stage(D, KVT);
    constexpr int KS = D / 16, NB = D / 8;
    constexpr float kP8 = 256.0f;  // INT8: p x V row scale x 2^8 keeps p lo out of subnormals
    static_assert((CPR % 8 == 0 || CPR == 4) && KS % 4 == 0 && TP * CPR % NT == 0, "pf");
    extern __shared__ __align__(16) unsigned char buf[];

    const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) % kWarps, kh = tid / kThreads;
    const int gr = lane >> 2, t4 = lane & 3, rl = lane & 7, ql = lane >> 3;
    const int grp = a.group, TQ = kPfRows / grp;
    const int kvh = blockIdx.x;
    const int tb = ((int)gridDim.y - 1 - (int)blockIdx.y) * TQ;  // last tokens first
    const int N = (int)a.n_tokens;
    const int pos0 = (int)query_pos0(a);
    const int hi = pos0 + min(tb + TQ, N);  // the block reads positions 0 .. hi-1
    const int nch = (hi + TP - 1) / TP;
    const int nst = a.nst;
    const int64_t rs = a.n_kv_head * RB;
    const unsigned char *kb = (const unsigned char *)a.kc + (int64_t)kvh * RB;
    const unsigned char *vb = (const unsigned char *)a.vc + (int64_t)kvh * RB;
    auto issue = [&](int ci) {
        copy_tile<TP, RB, I8, NT>(buf + (ci % nst) * STG, ci * TP, hi, rs, kb, vb, a.ks, a.vs,
                                  a.n_kv_head, kvh, tid);
    };
    for (int st = 0; st < nst; st++) {
        if (st < nch) issue(st);
        cp_async_commit();
    }

    // This lane's rows i = 0, 1 (warp rows gr, gr + 8): token, head, last visible position.
    int rtok[2], lim[2];
    int64_t rrow[2];  // (token, head) row of q and out
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = 16 * warp + gr + 8 * i;
        rtok[i] = tb + r / grp;
        const int tc = min(rtok[i], N - 1);
        lim[i] = pos0 + tc;
        rrow[i] = (int64_t)tc * a.n_head + (int64_t)kvh * grp + r % grp;
    }
    const bool wact = tb + 16 * warp / grp < N;                       // any row in range
    const int wlast = pos0 + min(tb + (16 * warp + 15) / grp, N - 1);  // the warp's last position

    // q fragments: A rows gr (regs 0, 2) and gr + 8 (regs 1, 3); k slots 2t4, 2t4+1 (regs 0, 1)
    // and 2t4+8, 2t4+9 (regs 2, 3) hold q[16ks + 2t4 + (0, 1)] and q[16ks + 8 + 2t4 + (0, 1)]
    // (F16), or q[16ks + 4t4 + (0, 1)] and (2, 3) (INT8: the order of a lane's K bytes).
    uint32_t qh[KS][4], qlo[KS][4];
    {
        const float qsc = a.scale * 1.44269504088896341f;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float *qp = a.q + rrow[i] * D;
            const bool ok = rtok[i] < N;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                float2 x0 = make_float2(0.0f, 0.0f), x1 = x0;
                if (ok && I8) {
                    const float4 x = *reinterpret_cast<const float4 *>(qp + 16 * ks + 4 * t4);
                    x0 = make_float2(x.x, x.y);
                    x1 = make_float2(x.z, x.w);
                } else if (ok) {
                    x0 = *reinterpret_cast<const float2 *>(qp + 16 * ks + 2 * t4);
                    x1 = *reinterpret_cast<const float2 *>(qp + 16 * ks + 8 + 2 * t4);
                }
                split_h2(x0.x * qsc, x0.y * qsc, qh[ks][i], qlo[ks][i]);
                split_h2(x1.x * qsc, x1.y * qsc, qh[ks][2 + i], qlo[ks][2 + i]);
            }
        }
    }
    // byte offset of 16-byte chunk c of this warp's row r (0 .. 31) of a K or V tile
    auto soff = [&](int r, int c) -> int {
        r += kV5Rows * kh;
        return r * RB + v5_swz<CPR>(r, c) * 16;
    };

    float o[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int k = 0; k < 4; k++) o[nb][k] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // log2 units

    for (int ci = 0; ci < nch; ci++) {
        cp_async_wait_n(ci == 0 ? nst - 1 : nst - 2);
        __syncthreads();
        if (ci >= 1) {  // the stage of tile ci - 1 is read by every warp: refill it
            if (ci - 1 + nst < nch) issue(ci - 1 + nst);
            cp_async_commit();
        }
        const int j0 = ci * TP + kV5Rows * kh;  // this warp's 32 rows
        if (!wact || j0 > wlast) continue;  // nothing of them is visible to the warp
        const unsigned char *Ks = buf + (ci % nst) * STG, *Vs = Ks + TILE;
        // INT8 row scales of the warp's rows: K at ksc[0 ..], V at ksc[TP ..]
        const float *ksc = reinterpret_cast<const float *>(Vs + TILE) + kV5Rows * kh;

        float ca[4][4], cb[4][4];  // n-block nb (8 positions): hi and lo chains
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
#pragma unroll
            for (int k = 0; k < 4; k++) ca[nb][k] = cb[nb][k] = 0.0f;
        if (I8) {
#pragma unroll
            for (int kq = 0; kq < KS / 4; kq++)
#pragma unroll
                for (int nb = 0; nb < 4; nb++) {
                    uint32_t b[4];
                    ldsm_x4<false>(b, Ks + soff(8 * nb + rl, 4 * kq + ql));
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int k = 4 * kq + i;
                        const uint32_t b0 = i8x2_to_h2<0x4140>(b[i]), b1 = i8x2_to_h2<0x4342>(b[i]);
                        mma16816(ca[nb], qh[k][0], qh[k][1], qh[k][2], qh[k][3], b0, b1);
                        mma16816(cb[nb], qlo[k][0], qlo[k][1], qlo[k][2], qlo[k][3], b0, b1);
                    }
                }
        } else {
#pragma unroll
            for (int kk = 0; kk < KS / 2; kk++)
#pragma unroll
                for (int nb = 0; nb < 4; nb++) {
                    uint32_t b[4];
                    ldsm_x4<false>(b, Ks + soff(8 * nb + rl, 4 * kk + ql));
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int k = 2 * kk + h;
                        mma16816(ca[nb], qh[k][0], qh[k][1], qh[k][2], qh[k][3], b[2 * h], b[2 * h + 1]);
                        mma16816(cb[nb], qlo[k][0], qlo[k][1], qlo[k][2], qlo[k][3], b[2 * h], b[2 * h + 1]);
                    }
                }
        }
        // scores (log2 units), masked: element k of n-block nb is row k / 2, position
        // j0 + 8nb + 2t4 + k % 2
        float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
            const int pb = j0 + 8 * nb + 2 * t4;
            float2 k2 = make_float2(1.0f, 1.0f);
            if (I8) k2 = *reinterpret_cast<const float2 *>(ksc + 8 * nb + 2 * t4);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float s = ca[nb][k] + cb[nb][k];
                if (I8) s *= (k & 1) ? k2.y : k2.x;
                s = pb + (k & 1) <= lim[k >> 1] ? s : -INFINITY;
                ca[nb][k] = s;
                mt[k >> 1] = fmaxf(mt[k >> 1], s);
            }
        }
        float corr[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mt[i] = fmaxf(mt[i], __shfl_xor_sync(0xffffffffu, mt[i], 1));
            mt[i] = fmaxf(mt[i], __shfl_xor_sync(0xffffffffu, mt[i], 2));
            const float mn = fmaxf(m_run[i], mt[i]);
            corr[i] = m_run[i] == -INFINITY ? 0.0f : exp2f(m_run[i] - mn);
            m_run[i] = mn;
        }
        float es[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float s = ca[nb][k];
                const float e = s == -INFINITY ? 0.0f : exp2f(s - m_run[k >> 1]);
                ca[nb][k] = e;
                es[k >> 1] += e;
            }
#pragma unroll
        for (int i = 0; i < 2; i++) l_run[i] = l_run[i] * corr[i] + es[i];
        if (!__all_sync(0xffffffffu, corr[0] == 1.0f && corr[1] == 1.0f)) {
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                o[nb][0] *= corr[0]; o[nb][1] *= corr[0];
                o[nb][2] *= corr[1]; o[nb][3] *= corr[1];
            }
        }
        // P x V: k-step kk covers positions 16kk .. 16kk+15 = n-blocks 2kk (A regs 0, 1) and
        // 2kk + 1 (regs 2, 3); A rows gr (regs 0, 2) and gr + 8 (regs 1, 3)
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t ph[4], pl[4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int nb = 2 * kk + h;
                float2 v2 = make_float2(1.0f, 1.0f);
                if (I8) {
                    v2 = *reinterpret_cast<const float2 *>(ksc + TP + 8 * nb + 2 * t4);
                    v2.x *= kP8;
                    v2.y *= kP8;
                }
                split_h2(ca[nb][0] * v2.x, ca[nb][1] * v2.y, ph[2 * h], pl[2 * h]);
                split_h2(ca[nb][2] * v2.x, ca[nb][3] * v2.y, ph[2 * h + 1], pl[2 * h + 1]);
            }
            // V rows 16kk + 8 (ql & 1) + rl: matrices (rows lo, chunk c), (rows hi, c),
            // (rows lo, c + 1), (rows hi, c + 1)
            const int vr = 16 * kk + 8 * (ql & 1) + rl;
#pragma unroll
            for (int c = 0; c < CPR; c += 2) {
                uint32_t b[4];
                ldsm_x4<true>(b, Vs + soff(vr, c + (ql >> 1)));
                if (I8) {
                    // chunk cc's bytes (16cc + 4t4 .. +3 as 2 x 2): n-blocks 2cc (even values)
                    // and 2cc + 1 (odd values), v5's output order
#pragma unroll
                    for (int u = 0; u < 2; u++) {
                        const int cc = c + u;
                        const uint32_t e0 = i8x2_to_h2<0x4240>(b[2 * u]), e1 = i8x2_to_h2<0x4240>(b[2 * u + 1]);
                        const uint32_t d0 = i8x2_to_h2<0x4341>(b[2 * u]), d1 = i8x2_to_h2<0x4341>(b[2 * u + 1]);
                        mma16816(o[2 * cc], ph[0], ph[1], ph[2], ph[3], e0, e1);
                        mma16816(o[2 * cc], pl[0], pl[1], pl[2], pl[3], e0, e1);
                        mma16816(o[2 * cc + 1], ph[0], ph[1], ph[2], ph[3], d0, d1);
                        mma16816(o[2 * cc + 1], pl[0], pl[1], pl[2], pl[3], d0, d1);
                    }
                } else {
                    mma16816(o[c], ph[0], ph[1], ph[2], ph[3], b[0], b[1]);
                    mma16816(o[c], pl[0], pl[1], pl[2], pl[3], b[0], b[1]);
                    mma16816(o[c + 1], ph[0], ph[1], ph[2], ph[3], b[2], b[3]);
                    mma16816(o[c + 1], pl[0], pl[1], pl[2], pl[3], b[2], b[3]);
                }
            }
        }
    }
    cp_async_wait<0>();
    if constexpr (KH == 2) {
        // The halves meet: warp (w, 1) leaves its maxima, sums and outputs in shared memory
        // (the stages are free after the barrier; [warp][value][lane], conflict-free), warp
        // (w, 0) weighs both by exp2(m - max) and writes.
        __shared__ float mx[kWarps][2][32], lx[kWarps][2][32];
        float *ox = reinterpret_cast<float *>(buf);  // [kWarps][NB x 4][32]
        __syncthreads();
        if (kh == 1) {
#pragma unroll
            for (int i = 0; i < 2; i++) { mx[warp][i][lane] = m_run[i]; lx[warp][i][lane] = l_run[i]; }
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int k = 0; k < 4; k++) ox[((warp * NB + nb) * 4 + k) * 32 + lane] = o[nb][k];
        }
        __syncthreads();
        if (kh == 1) return;
        float w0[2], w1[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float m1 = mx[warp][i][lane], M = fmaxf(m_run[i], m1);
            w0[i] = m_run[i] == -INFINITY ? 0.0f : exp2f(m_run[i] - M);
            w1[i] = m1 == -INFINITY ? 0.0f : exp2f(m1 - M);
            l_run[i] = l_run[i] * w0[i] + lx[warp][i][lane] * w1[i];
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int k = 0; k < 4; k++)
                o[nb][k] = o[nb][k] * w0[k >> 1] + ox[((warp * NB + nb) * 4 + k) * 32 + lane] * w1[k >> 1];
    }

    // The rows' sums meet across the quad; each row is written once.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float l = l_run[i] + __shfl_xor_sync(0xffffffffu, l_run[i], 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (rtok[i] >= N) continue;
        const float inv = (I8 ? 1.0f / kP8 : 1.0f) / l;
        float *op = a.out + rrow[i] * D;
        if (I8) {
#pragma unroll
            for (int c = 0; c < D / 16; c++)
                *reinterpret_cast<float4 *>(op + 16 * c + 4 * t4) =
                    make_float4(o[2 * c][2 * i] * inv, o[2 * c + 1][2 * i] * inv,
                                o[2 * c][2 * i + 1] * inv, o[2 * c + 1][2 * i + 1] * inv);
        } else {
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
                *reinterpret_cast<float2 *>(op + 8 * nb + 2 * t4) =
                    make_float2(o[nb][2 * i] * inv, o[nb][2 * i + 1] * inv);
        }
    }
}

template <int D, int KVT, int KH>
cudaError_t launch_pf(const AttnArgs &a, dim3 grid, int smem, cudaStream_t stream) {
    static std::atomic<int> max_set{0};  // the dynamic shared memory this kernel was allowed
    auto kern = attn_prefill_kernel<D, KVT, KH>;
    if (smem > max_set.load(std::memory_order_relaxed)) {
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return e;
        max_set.store(smem, std::memory_order_relaxed);
    }
    // In order (no PDL attribute), as the other attention launches (common.cuh).
    return launch_in_order(kern, grid, dim3(kThreads * KH), (size_t)smem, stream, a);
}

}  // namespace

bool prefill_supported(int64_t D, int kvt, int group) {
    return (D == 64 || D == 128) && (kvt == LOOM_KV_F16 || kvt == LOOM_KV_INT8) && group >= 1 &&
           group <= kPfRows && kPfRows % group == 0;
}

template <int KH>
cudaError_t launch_pf_kh(const AttnArgs &a, int kvt, int64_t D, dim3 grid, int smem,
                         cudaStream_t stream) {
    if (D == 64)
        return kvt == LOOM_KV_F16 ? launch_pf<64, LOOM_KV_F16, KH>(a, grid, smem, stream)
                                  : launch_pf<64, LOOM_KV_INT8, KH>(a, grid, smem, stream);
    return kvt == LOOM_KV_F16 ? launch_pf<128, LOOM_KV_F16, KH>(a, grid, smem, stream)
                              : launch_pf<128, LOOM_KV_INT8, KH>(a, grid, smem, stream);
}

loom_status run_prefill(AttnArgs a, int kvt, int64_t D, int64_t N, int kh, loom_error *err,
                        cudaStream_t stream) {
    if (!prefill_supported(D, kvt, a.group) || N < 1 || kh < 1 || kh > 2)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "attention prefill: head_dim %lld, cache type %d, %d heads a KV head, kh %d",
                 (long long)D, kvt, a.group, kh);
    // Stages: KH = 1 (2 blocks an SM) 4 of 32 rows on sm_90, as many as fit 40 KB on sm_87;
    // KH = 2 (one block of 8 warps an SM) 3 of 64 rows, 2 on sm_87. The KH = 2 end reuses the
    // stages for 4 warps' outputs (4 x 32 x D floats).
    const int stage = kh * v5_stage((int)D, kvt);
    const int budget = cc_major() >= 9 ? (kh == 1 ? kPfMaxStages : 3) * stage : 40 * 1024;
    int nst = budget / stage;
    a.nst = nst < 2 ? 2 : (nst > kPfMaxStages ? kPfMaxStages : nst);
    const int TQ = kPfRows / a.group;
    const dim3 grid((unsigned)a.n_kv_head, (unsigned)((N + TQ - 1) / TQ));
    int smem = a.nst * stage;
    if (kh == 2 && smem < kWarps * 32 * (int)D * 4) smem = kWarps * 32 * (int)D * 4;
    const cudaError_t e = kh == 1 ? launch_pf_kh<1>(a, kvt, D, grid, smem, stream)
                                  : launch_pf_kh<2>(a, kvt, D, grid, smem, stream);
    CUDA_CHECK(e);
    LAUNCH_CHECK();
    return LOOM_OK;
}

}  // namespace loom_cuda
