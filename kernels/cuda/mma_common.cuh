// mma_common.cuh: what the tensor-core matmul kernels share (gemv_mma.cu for Q4_K,
// gemv_mma_q6k.cu for Q6_K; attention_v5.cu takes the mma): f16x2 arithmetic on raw bits, the
// m16n8k16 mma, the per-warp staging of x in B-fragment order as f16 hi + lo with a
// power-of-two scale per super-block and token, the block + cluster reduction of the per-lane
// partial sums (reduce_partials), and the cluster split-K rule (mma_pick_split).
//
// Invariants: every helper is exact where the kernels use it (f16 results are small integers
// or power-of-two multiples of one); stage_token() writes lane t's B registers of two mma
// steps per LDS.128 so a kernel reads them back with one 16-byte load per lane and 2 mma.
// The k permutation it assumes: lane t (= lane % 4) owns the 32 values 64t .. 64t+63 of a
// 256-value super-block as two runs (64t + 0..31 in mma slots 2t, 2t+1; 64t + 32..63 in slots
// 2t+8, 2t+9); mma step 2sp covers values 64t + 4sp + {0, 2} (+32), step 2sp+1 + {1, 3}.
#pragma once

#include <cooperative_groups.h>

#include "kernels/cuda/matmul.cuh"

namespace loom_cuda {

// f16x2 helpers on raw bits (exact where used: every result below is a small integer or a
// power-of-two multiple of one).
__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ uint32_t hadd2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// (a & mask) | c in ONE LOP3 (nvcc otherwise splits it into AND + OR: two immediates).
template <uint32_t MASK>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t c) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}
__device__ __forceinline__ float h_lo(uint32_t h) { return __half2float(__ushort_as_half((uint16_t)h)); }
__device__ __forceinline__ float h_hi(uint32_t h) { return __half2float(__ushort_as_half((uint16_t)(h >> 16))); }

// c += A (16x16, row) * B (16x8, col); f16 inputs, f32 accumulate.
__device__ __forceinline__ void mma16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 ldg16(const uint8_t *p) {
    return __ldg(reinterpret_cast<const uint4 *>(p));
}

constexpr uint32_t kH1024 = 0x64006400u;   // half2(1024, 1024)
constexpr uint32_t kHm1024 = 0xE400E400u;  // half2(-1024, -1024)
constexpr uint32_t kH16th = 0x2C002C00u;   // half2(1/16, 1/16)
constexpr uint32_t kHm64 = 0xD400D400u;    // half2(-64, -64)

// Per-warp shared staging of one super-block of x for up to NT tokens (2 NT columns).
// frag[(sp * 2NT + c) * 4 + t]: lane t's B registers of mma steps 2sp, 2sp+1 in column c
// (c = 2 slot: hi, 2 slot + 1: lo); sinv[slot]: 1 / s of the token in that slot.
template <int NT>
struct Stage {
    uint4 frag[8 * 2 * NT * 4];
    float sinv[NT < 4 ? 4 : NT];
};

// Stages x[sb * 256 ..] of one token into column pair `slot` (whole warp; lane L: t = L & 3,
// sp = L >> 2 loads x[a ..+3] and x[c ..+3], a = 64t + 4sp (sub-block 2t), c = a + 32
// (sub-block 2t+1): the values of lane t's mma steps 2sp (slots 2t,2t+1: x[a], x[a+2];
// slots 2t+8,2t+9: x[c], x[c+2]) and 2sp+1 (x[a+1], x[a+3]; x[c+1], x[c+3])).
template <int NT>
__device__ __forceinline__ void stage_token(Stage<NT> &st, int slot, float4 xa, float4 xc,
                                            int lane) {
    const int t = lane & 3, sp = lane >> 2;
    const float mx = fmaxf(fmaxf(fmaxf(fabsf(xa.x), fabsf(xa.y)), fmaxf(fabsf(xa.z), fabsf(xa.w))),
                           fmaxf(fmaxf(fabsf(xc.x), fabsf(xc.y)), fmaxf(fabsf(xc.z), fabsf(xc.w))));
    // Non-negative floats order as their bits: one integer warp reduction (REDUX).
    const uint32_t mb = __reduce_max_sync(0xffffffffu, __float_as_uint(mx));
    // s = 2^(15 - E) with max|x| in [2^(E-1), 2^E): max|x| s in [2^14, 2^15), below f16's max.
    int e = 268 - (int)(mb >> 23);
    e = e < 1 ? 1 : (e > 253 ? 253 : e);
    const float s = __uint_as_float((uint32_t)e << 23);
    const float sinv = __uint_as_float((uint32_t)(254 - e) << 23);
    xa.x = __fmul_rn(xa.x, s); xa.y = __fmul_rn(xa.y, s); xa.z = __fmul_rn(xa.z, s); xa.w = __fmul_rn(xa.w, s);
    xc.x = __fmul_rn(xc.x, s); xc.y = __fmul_rn(xc.y, s); xc.z = __fmul_rn(xc.z, s); xc.w = __fmul_rn(xc.w, s);
    uint4 hi, lo;
    hi.x = pack_h2(xa.x, xa.z); hi.y = pack_h2(xc.x, xc.z);
    hi.z = pack_h2(xa.y, xa.w); hi.w = pack_h2(xc.y, xc.w);
    lo.x = pack_h2(__fsub_rn(xa.x, h_lo(hi.x)), __fsub_rn(xa.z, h_hi(hi.x)));
    lo.y = pack_h2(__fsub_rn(xc.x, h_lo(hi.y)), __fsub_rn(xc.z, h_hi(hi.y)));
    lo.z = pack_h2(__fsub_rn(xa.y, h_lo(hi.z)), __fsub_rn(xa.w, h_hi(hi.z)));
    lo.w = pack_h2(__fsub_rn(xc.y, h_lo(hi.w)), __fsub_rn(xc.w, h_hi(hi.w)));
    st.frag[(sp * 2 * NT + 2 * slot) * 4 + t] = hi;
    st.frag[(sp * 2 * NT + 2 * slot + 1) * 4 + t] = lo;
    if (lane == 0) st.sinv[slot] = sinv;
}

// Stages tokens i0 .. i0 + XB - 1 of a block's NT (those below ntok; token 0 always, so the
// GEMV needs no predicate) from this lane's x values xa[i], xc[i] of the super-block (as
// stage_token takes them), RMS-normed first when NORM: (x * nscale[token]) * w with nwa, nwc the
// norm weights at the same positions (norm.cuh's rms_apply4), bit for bit loom_cuda_rms_norm;
// LAST (the scale-last Q4_K matmuls, norm.cuh): x * w only (nscale unused).
// The x-staging step of both tensor-core GEMVs (gemv_mma.cu, gemv_mma_q6k.cu).
template <int NT, int XB, bool NORM, bool LAST = false>
__device__ __forceinline__ void stage_tokens(Stage<NT> &st, int i0, const float4 (&xa)[XB],
                                             const float4 (&xc)[XB], int ntok,
                                             const float *nscale, float4 nwa, float4 nwc,
                                             int lane) {
#pragma unroll
    for (int i = 0; i < XB; i++) {
        if (i0 + i == 0 || i0 + i < ntok) {
            if (NORM && LAST) {
                stage_token<NT>(st, i0 + i, norm_w4(xa[i], nwa), norm_w4(xc[i], nwc), lane);
            } else if (NORM) {
                const float sc = nscale[i0 + i];
                stage_token<NT>(st, i0 + i, rms_apply4(xa[i], sc, nwa), rms_apply4(xc[i], sc, nwc),
                                lane);
            } else {
                stage_token<NT>(st, i0 + i, xa[i], xc[i], lane);
            }
        }
    }
}

// x of one super-block as exact int8 limbs, the INT8 bodies' digits (q6k_i8_body.cuh stage_i8,
// q4k_i8_body.cuh stage_q4i8; whole warp: the scale is the warp's): v = this lane's 8 values, s =
// 2^(29 - E) with max |x| over the warp in [2^E, 2^(E+1)) (max |x s| in [2^29, 2^30)), X =
// rint(x s) = 2^24 L0 + 2^16 L1 + 2^8 L2 + L3 as the balanced digits of (X + 0x808080) ^
// 0x808080 (|L0| <= 64). l[u][j] = limb j of values 4u .. 4u+3 (one byte each, in value order).
// Returns s's biased exponent e (s = 2^(e - 127), 1 / s = 2^(127 - e)).
__device__ __forceinline__ int i8_limbs(const float (&v)[8], uint32_t (&l)[2][4]) {
    uint32_t mx = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) mx = max(mx, __float_as_uint(v[i]) & 0x7fffffffu);
    mx = __reduce_max_sync(0xffffffffu, mx);
    int e = 283 - (int)(mx >> 23);
    e = e < 1 ? 1 : (e > 253 ? 253 : e);
    const float s = __uint_as_float((uint32_t)e << 23);
    uint32_t z[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        z[i] = ((uint32_t)__float2int_rn(__fmul_rn(v[i], s)) + 0x808080u) ^ 0x808080u;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        // 4 x 4 byte transpose: z (values, bytes = limbs 3..0) -> words (limbs, bytes = values)
        const uint32_t *zz = z + 4 * u;
        const uint32_t t0 = __byte_perm(zz[0], zz[1], 0x5140), t1 = __byte_perm(zz[2], zz[3], 0x5140);
        const uint32_t t2 = __byte_perm(zz[0], zz[1], 0x7362), t3 = __byte_perm(zz[2], zz[3], 0x7362);
        l[u][0] = __byte_perm(t2, t3, 0x7632);
        l[u][1] = __byte_perm(t2, t3, 0x5410);
        l[u][2] = __byte_perm(t0, t1, 0x7632);
        l[u][3] = __byte_perm(t0, t1, 0x5410);
    }
    return e;
}

// The arguments of tokens t0 .. t0 + nn - 1 of a tensor-core matmul's arguments a (MmaArgs,
// Q6Args: x, n and each segment's y and resid moved to token t0; segments a leaves unset have
// neither): the launchers' loops over launches of at most 65535 token groups.
template <typename Args>
inline Args token_slice(const Args &a, int64_t t0, int64_t nn) {
    Args b = a;
    b.x = a.x + t0 * a.K;
    b.n = (int)nn;
    for (int i = 0; i < 3; i++) {
        const int64_t rows = b.seg[i].rows;
        if (b.seg[i].y) b.seg[i].y += t0 * rows;
        if (b.seg[i].resid) b.seg[i].resid += t0 * rows;
    }
    return b;
}

// The sm_90 cluster split-K S of a tensor-core matmul over `tiles` 16-row tiles (the SwiGLU
// pair counts both matrices) and nsb super-blocks a row, from the shape only (gemv_mma.cu;
// the Q6_K kernel uses the same rule).
int mma_pick_split(int64_t tiles, int64_t nsb);

// LOOM_GEMM_WIDE (runtime.cu) as set: 0 never (today's GEMM in groups of 8 tokens), 1 the wide
// GEMM from each family's measured threshold (gemv_mma.cu kWideMinQ4 for Q4_K, q6k_i8_wide.cuh
// kWideMinN for the Q6_K INT8 body, gemv_mma_q8.cu kQ8WideMin for Q8_0), n >= 2 from n tokens.
// The GEMV (n = 1) never changes.
int gemm_wide_min();

// The token count from which a family whose measured threshold is family_min runs its wide GEMM
// under LOOM_GEMM_WIDE (0: never).
inline int gemm_wide_from(int family_min) {
    const int w = gemm_wide_min();
    return w == 1 ? family_min : w;
}

// Tokens the wide GEMMs' x-limb pre-passes lay out for n (q4_limbs_bytes, q6_limbs_bytes): n
// rounded up to 32, the largest token block, so a block's copy never reads past the layout; the
// tokens past n hold zeros.
inline int64_t limbs_npad(int64_t n) { return (n + 31) / 32 * 32; }

// ---- The GEMV phase trace (bench/debug only: cuda_bench --gemv-trace; cuda_kernels.h
// loom_cuda_gemv_trace has the record layout) ----------------------------------------------------
// A traced launch (a kernel instantiation with TR = true; the default kernels have none of this
// code) gets its slot of kGtBlocks records of kGtWords uint64 words; thread 0 of each block
// writes its block's record (warps 1..3's lane 0 their loop ends).
constexpr int kGtSlots = 32, kGtBlocks = 1024, kGtWords = 16;
// This block's record in slot (nullptr without a slot or past kGtBlocks). (The kernels pass the
// slot, a kernel parameter, and compute the record where they stamp: a record pointer held
// across the K loop cost the traced pair a spill.)
__device__ __forceinline__ unsigned long long *gt_rec(unsigned long long *slot) {
    const unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    return slot && b < (unsigned)kGtBlocks ? slot + (size_t)b * kGtWords : nullptr;
}
// Thread 0 stamps the block's start (words 0, 2).
__device__ __forceinline__ void gt_begin(unsigned long long *slot) {
    unsigned long long *r = gt_rec(slot);
    if (r && threadIdx.x == 0) {
        r[0] = gtimer();
        r[2] = clock64();
    }
}
// clock64 into word i of the block's record (thread 0; TR only).
template <bool TR>
__device__ __forceinline__ void gt_mark(unsigned long long *slot, int i) {
    if constexpr (TR) {
        unsigned long long *tr = gt_rec(slot);
        if (tr && threadIdx.x == 0) tr[i] = clock64();
    }
}
// The end of warp w's K loop: lane 0 writes word 7 (warp 0) or 12 + w.
template <bool TR>
__device__ __forceinline__ void gt_loop_end(unsigned long long *slot) {
    if constexpr (TR) {
        unsigned long long *tr = gt_rec(slot);
        const int w = threadIdx.x >> 5;
        if (tr && (threadIdx.x & 31) == 0) tr[w ? 12 + w : 7] = clock64();
    }
}
// The PDL release (words 1, 3) and the block's end (10, 11) with its SM, split, kind and
// super-block counts (12: smid | S << 16 | kind << 24 | warp 0's super-blocks << 32 | nsb << 48).
template <bool TR>
__device__ __forceinline__ void gt_release(unsigned long long *slot) {
    if constexpr (TR) {
        unsigned long long *tr = gt_rec(slot);
        if (tr && threadIdx.x == 0) {
            tr[1] = gtimer();
            tr[3] = clock64();
        }
    }
}
template <bool TR>
__device__ __forceinline__ void gt_end(unsigned long long *slot, int S, int kind, int nsb_w0,
                                       int nsb) {
    if constexpr (TR) {
        unsigned long long *tr = gt_rec(slot);
        if (tr && threadIdx.x == 0) {
            tr[10] = clock64();
            tr[11] = gtimer();
            tr[12] = smid() | (unsigned long long)(S & 0xff) << 16 |
                     (unsigned long long)(kind & 0xff) << 24 |
                     (unsigned long long)(nsb_w0 & 0xffff) << 32 |
                     (unsigned long long)(nsb & 0xffff) << 48;
        }
    }
}
// The slot of the next traced GEMV launch (gemv_mma.cu; nullptr while tracing is off).
unsigned long long *gemv_trace_next();

// Split-K clusters of the GEMVs (XCH in reduce_partials_as) exchange the ranks' sums through
// rank 0's shared memory: every thread arrives once on the cluster barrier when its tile starts
// (cluster_start); at the reduction it waits for that phase (every rank has started, so rank
// 0's shared memory may be written: the rule for distributed shared memory), a rank q > 0
// stores its sums into rank 0's xch and arrives with release semantics, then exits; rank 0
// waits for them (acquire) and adds them in rank order, the same order and bits as the other
// form: two full cluster barriers and rank 0 reading the others' shared memory remotely, which
// the GEMMs keep (the 8-token Q6_K GEMM's 47.5 KB leave no room for xch under sm_87's static 48
// KB) and the pair GEMV too (left as it was: its kernels react to any change, bench/NOTES.md 7,
// "Session 14"). The 4B decode step: 1.80 -> 1.75 ms/token (O + add and down + add at S = 2,
// the triple's V; NOTES 7, "Session 14"). kMaxSplit: the largest S (mma_pick_split,
// LOOM_GEMV_MMA_SPLIT), which sizes xch (unused on sm_87, which has no clusters).
constexpr int kMaxSplit = 8;
// The floats of a block's xch: one token's two rows from each rank q > 0 (the GEMVs; 1 where
// the kernel has no xch).
constexpr int xch_floats(bool gemv) { return gemv ? (kMaxSplit - 1) * 2 * 32 : 1; }
__device__ __forceinline__ void cluster_start(int S) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (S > 1) asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#else
    (void)S;
#endif
}

// A block of fewer warps (common.cuh vwarp_end) stores the partials of each virtual warp but
// its last with stash_partials(v, vw, red) and calls reduce_partials_as with the last's, vw.
template <int NV>
__device__ __forceinline__ void stash_partials(const float (&v)[NV], int vw, float *red) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < NV; i++) red[(vw * NV + i) * 32 + lane] = v[i];
}

// Sums each lane's NV partials over the block's warps (0..kWarps-1 in order) and then, on
// sm_90 with S > 1, over the cluster's ranks (0..S-1 in order): a fixed order, so results are
// deterministic and the same for every token of a GEMM. red: kWarps * NV * 32 floats of shared
// memory, free when called (the caller synchronizes if it reuses another buffer). Every thread
// of every rank must call it. On return v holds the totals in warp 0 of rank 0 (unspecified
// elsewhere). reduce_partials_as: v holds virtual warp vw's partials (a block of fewer warps).
// TR (the traced GEMVs, gt_* above): thread 0 stamps its record in trace slot `slot` after the
// warps' sum (word 8) and after the cluster's (word 9).
// XCH (the GEMVs, which called cluster_start(S) when their tile started): the ranks' sums meet
// in xch, xch_floats(true) floats of shared memory used for nothing else.
template <int NV, bool TR = false, bool XCH = false>
__device__ __forceinline__ void reduce_partials_as(float (&v)[NV], int vw, float *red, int S,
                                                   unsigned long long *slot = nullptr,
                                                   float *xch = nullptr) {
    static_assert(!XCH || NV == 2, "xch holds one token's two rows a rank (the GEMVs)");
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    stash_partials<NV>(v, vw, red);
    __syncthreads();
    if (w == 0) {
#pragma unroll
        for (int i = 0; i < NV; i++) {
            float x = red[i * 32 + lane];
            for (int q = 1; q < kWarps; q++) x = __fadd_rn(x, red[(q * NV + i) * 32 + lane]);
            v[i] = x;
        }
    }
    gt_mark<TR>(slot, 8);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (XCH && S > 1) {
        asm volatile("barrier.cluster.wait;" ::: "memory");  // every rank has started
        if (blockIdx.x != 0) {
            if (w == 0) {
                float *dst = cooperative_groups::this_cluster().map_shared_rank(xch, 0) +
                             ((int)blockIdx.x - 1) * NV * 32;
#pragma unroll
                for (int i = 0; i < NV; i++) dst[i * 32 + lane] = v[i];
            }
            asm volatile("barrier.cluster.arrive.release;" ::: "memory");
        } else {
            asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
            if (w == 0) {
                asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#pragma unroll 1
                for (int q = 1; q < S; q++)
#pragma unroll
                    for (int i = 0; i < NV; i++)
                        v[i] = __fadd_rn(v[i], xch[((q - 1) * NV + i) * 32 + lane]);
            }
        }
    } else if (S > 1) {
        cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
        __syncthreads();  // everyone has read red[]: red[0..NV) becomes this block's partial
        if (w == 0) {
#pragma unroll
            for (int i = 0; i < NV; i++) red[i * 32 + lane] = v[i];
        }
        cl.sync();
        if (blockIdx.x == 0 && w == 0) {
#pragma unroll 1
            for (int q = 1; q < S; q++) {
                const float *rq = cl.map_shared_rank(red, q);
#pragma unroll
                for (int i = 0; i < NV; i++) v[i] = __fadd_rn(v[i], rq[i * 32 + lane]);
            }
        }
        cl.sync();  // the other ranks' shared memory must outlive rank 0's reads
    }
#else
    (void)S;
    (void)xch;
#endif
    gt_mark<TR>(slot, 9);
}

template <int NV, bool TR = false, bool XCH = false>
__device__ __forceinline__ void reduce_partials(float (&v)[NV], float *red, int S,
                                                unsigned long long *slot = nullptr,
                                                float *xch = nullptr) {
    reduce_partials_as<NV, TR, XCH>(v, (int)(threadIdx.x >> 5), red, S, slot, xch);
}

}  // namespace loom_cuda
