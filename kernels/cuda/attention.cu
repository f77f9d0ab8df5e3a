// attention.cu: flash attention over the KV cache for decode (one query token, GQA, split-KV)
// and batched causal prefill (N query tokens in one launch), in three kernels (v5's code in
// attention_v5.cu; attention.cuh holds what they share):
//
// v5 (the fast path for F16 and INT8 caches of head_dim 64 and 128, LOOM_FAST_ATTN on): v4's
// blocks and splits (below) with the arithmetic on the tensor cores. A block (128 threads) owns
// the G <= 8 query heads of one KV head, one token and one split, walked in 32-row tiles; warp
// w owns rows 8w .. 8w+7 of every tile with its own online softmax in registers, and the four
// warps meet once, at the end:
//   scores (heads x 8 rows) = Q x K^T by mma m16n8k16, Q's 16 rows being the heads' q (x scale
//   x log2 e) rounded to f16 ("hi") and the f16 of the remainder ("lo"), so the f16 products
//   carry ~22 bits (K is exact in f16: F16 as stored, INT8 through the 1024 + q byte trick);
//   out += P x V by mma m16n8k8, P's rows p hi then p lo (INT8: p x V row scale x 2^8);
//   the hi and lo rows of each head are added once, at the end. K and V reach the fragments
//   through ldmatrix (.trans for V) from shared tiles with an XOR swizzle (no bank conflicts).
// Per tile and warp: 8 + 16 mma and ~40 other instructions (v4: ~2400 a tile). Tiles are
// copied by cp.async as many stages deep as the split has tiles, up to 8, within the shared
// memory of one wave (dynamic: ~200 KB an SM on sm_90 shared by the wave's blocks; 40 KB on
// sm_87, i.e. 2 F16 stages of its 48 KB budget). Registers 80-170, zero spills.
// v6 (LOOM_ATTN_V6, decode on sm_90; v5's kernel with WT): the same blocks, splits, q
// fragments and end, but warp w walks whole tiles w, w + 4, ... of the split in its own
// cp.async stages (as many as its tiles, up to 3; copied by its own lanes, so a __syncwarp, no
// block barrier, makes them visible): per tile and warp 4 x D/16 mma m16n8k16 for the scores
// of 32 positions, one online-softmax step, P (heads x 32) x V as 2 x D/8 mma m16n8k16. A
// block then works 4 tiles at once instead of one (v5's per-tile chain of dependent latencies,
// ~0.7 us a tile with one block an SM, was the floor: bench/NOTES.md section 3). Also: q's loads
// are issued before the tiles' copies (behind them they arrived last, so no tile was computed
// before all had arrived; launched early (EA, below) q follows the copies, which were issued
// before the PDL wait); the cluster combine covers caches up to 4K positions
// (LOOM_ATTN_CL_TILES) and pushes the partials into the owning blocks' shared memory (st.async
// stores counted by the receiving block's mbarrier since session 26, no cluster barrier and no
// remote loads); both combines keep v5's arithmetic and split order.
// (An L2 prefetch of each block's rows before the PDL wait, LOOM_ATTN_PREFETCH=1, opt-in since
// it measured slower, bench/NOTES.md section 3, was removed in session 11.)
// TMA tiles (F16, head_dim 128, sm_90; session 7, the default since session 17, LOOM_ATTN_TMA=0
// keeps cp.async): a warp's stages are filled by TMA box copies completing on mbarriers (K and
// V one box each a tile; tensor maps encoded here per launch) instead of cp.async; rows in the
// TMA's 128-byte swizzle; the same arithmetic and bits (H200: fused 4K 12.06 -> 11.19 us,
// decode-layer graph at 4K -2.0 us a layer, 640 equal, bench/NOTES.md section 3; 4B decode
// 1.668 -> 1.656 ms/token at ~576 positions, 1.836 -> 1.810 at ~3,600, NOTES 7 "Session 17").
// v6 + the attention prologue (loom_cuda_rope_kv_attention_at, LOOM_ATTN_FUSED; one token):
// the same partition with rope_kv_write's work for the token folded into the blocks
// (attention_v5.cu, FP, says how the new K/V row reaches the tiles without a grid-wide order).
// v6 with or without the prologue (session 12) is launched with PDL and requests each warp's
// first tiles before its griddepcontrol.wait (attention_v5.cu, EA; the contract in
// cuda_kernels.h). H200: `loom bench` 4B decode 1.963-1.970 -> 1.910 ms/token; attention_at
// 4K F16 graph-timed 10.25 -> 8.85 us; cuda_bench's synthetic decode-layer graph +3.9 us a
// layer at 4K positions (bench/NOTES.md section 3, session 12), but `loom bench` at ~3,600
// positions 2.223-2.245 ms/token with every split early against 2.258-2.267 in order (session
// 13, bench/NOTES.md 7 "Session 13, pw3").
// Split combine: on sm_90 for one token and a cache of <= 2K positions, the 8 splits of a head
// group (grid z = 8 whatever the position) are one thread-block cluster: after a cluster
// barrier block r combines outputs r * 128 + tid, ... over the splits' partials in distributed
// shared memory, in split order (blocks past the splits in use take part with nothing).
// Otherwise (longer caches, prefill, sm_87) v4's global combine below.
// Prefill (N > 1) with LOOM_ATTN_PREFILL=1, the default (F16/INT8, head_dim 64/128, a GQA
// group dividing 64): attention_prefill.cu's kernel instead (its opening comment: blocks of one
// KV head and 64 query rows that copy every K/V tile once, no split, one write); decode never
// goes there.
//
// v4 (every cache the v5 kernel does not take: F32 of head_dim 64/128, F16/INT8 of head_dim 80,
// 96, 256; for the latter also the simple path, as G = 1 without a split, since v3 has no
// kernels for those). (LOOM_ATTN_V5=0, v4 instead of v5 for F16/INT8 of head_dim 64/128, slower
// in every row of bench/RESULTS.md "Decode attention v5", was removed in session 11.)
// Launch geometry: 128-thread blocks, grid (n_kv_head * head_groups, N, splits). A block owns
// up to G = 8 query heads that share one KV head (kv_head = head / (n_head / n_kv_head)), one
// query token t (sees positions 0 .. pos0 + t) and one split: `per` consecutive tiles of TP
// cache rows (TP = 64, 32 or 16 so that a K tile is <= 8 KB: 32 rows for F16 x 128). The
// splits S come from the shape only (~LOOM_ATTN_BPSM = 1 block per SM, N x S <= 128), never
// from the position; a position uses min(S, its tiles) of them, so the grid may be sized from
// n_ctx (loom_cuda_attention_at) and blocks past the used splits return at once.
// Per tile, double-buffered: the K and V tiles (and INT8 row scales) of tile i + 1 are copied
// global -> shared by cp.async while tile i is computed (16-byte copies, chunk c of row r
// stored at chunk (c + r * 128/TP) mod (row bytes / 16) so the score reads are conflict-free):
//   1. scores: 128/TP threads a K row, 16-byte shared reads, the G query heads from shared
//      memory; the row's lanes meet by shuffles; s = scale * dot (* K row scale) to shared;
//   2. online softmax: warp w owns heads w, w + 4 (m, l in registers, p to shared; INT8 folds
//      the V row scale into p);
//   3. V: thread (head slice, position group, unit u) accumulates values 8u .. 8u+7 of up to 4
//      heads over its rows; the groups' sums meet once, at the end, in shared memory.
// The split combine is folded in: each block writes (sum, max, l) partials ([split][D], so a
// block's stores are coalesced), thread 0 orders them by one release fence a block, and the
// last block of each (token, KV head group) to finish (an atomic counter in g_attn_counters,
// reset by that block, so graph replays find it zero) combines the S partials in split order
// 0 .. S-1: the result does not depend on which block is last. One launch, no combine kernel.
// Shared memory: 2 stages x (K + V tile) <= 32 KB (reused for the group sums and the combine),
// q G x D floats, p TP x G floats: 34-42 KB (sm_87 budget 48 KB). Registers: 61-128, 143-167
// for G > 4 (3 blocks/SM), zero spills (sm_87 and sm_90a).
// Memory traffic: every K and V byte of the visible range read once per KV head (decode), q
// once, partials (D + 2) floats per (head, split), written and read once from L2.
//
// v3 (the simple path LOOM_FAST_ATTN=0 for head_dim 64 and 128, and the fallback of a failed
// fast launch: one head a block, no split): a block walks 64-position tiles with loads straight
// into registers: thread (j = tid/2, half) dots half of K row j; online softmax; V rows as
// 16-byte loads, position groups summed at the end. (Its fast form, LOOM_ATTN_V4=0: up to 8
// heads a block and splits combined by a second kernel, slower than v4-v6 in every row of
// bench/RESULTS.md "Decode attention v5" and "v6", was removed in session 11.)
//
// Numeric contract (all): float32 online softmax (v5: exp2 of log2-scaled scores; its products
// of f16 hi + lo operands carry ~22 bits); K and V decoded as the CPU does (f16 -> f32, int8 ->
// q * d, with d applied after the dot for K and folded into p for V; v5 needs |V| row maxima
// below 32768 for INT8). Within 1e-4 of max |out| of the CPU twin (loom_cpu_attention) for
// F32/F16/INT8 caches, and q x scale within f16 range (|q x scale| < 32768) for v5. Deterministic:
// the same inputs give the same bits (fixed reduction orders), and loom_cuda_attention_at gives
// the bits of loom_cuda_attention at the same position.
#include <math.h>

#include "kernels/cuda/attention.cuh"
namespace loom_cuda {

// Decode attention switches read with the others (runtime.cu): LOOM_ATTN_CL_TILES (the largest
// cache in 32-row tiles whose splits form one cluster, v6).
int attn_cluster_tiles();
// v6's F16 head_dim-128 tiles copied by TMA boxes instead of cp.async (the default since
// session 17; LOOM_ATTN_TMA=0 keeps cp.async).
bool attn_tma();
// LOOM_ATTN_PREFILL=1 (the default) or 2 (session 8): N > 1 query tokens through
// attention_prefill.cu's tensor-core kernel (blocks of 64 query rows sharing each K/V tile; 2:
// 8 warps walking each tile's halves apart, sm_90 only); 0: the v5 path.
int attn_prefill();

namespace {

constexpr int kTile = 64;  // v3's tile

template <int KVT>
__device__ __forceinline__ void load16(const void *base, int64_t elem, float *v, int &n) {
    // Loads 16 bytes at element `elem` and decodes them into v (n values).
    if (KVT == LOOM_KV_F32) {
        float4 f = *reinterpret_cast<const float4 *>((const float *)base + elem);
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
        n = 4;
    } else if (KVT == LOOM_KV_F16) {
        uint4 u = *reinterpret_cast<const uint4 *>((const uint16_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = f16_bits_to_f32((uint16_t)(w[i] & 0xFFFF));
            v[2 * i + 1] = f16_bits_to_f32((uint16_t)(w[i] >> 16));
        }
        n = 8;
    } else {
        uint4 u = *reinterpret_cast<const uint4 *>((const int8_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = (float)(int8_t)((w[i >> 2] >> (8 * (i & 3))) & 0xFF);
        n = 16;
    }
}

// Loads 8 consecutive cache elements at `elem` (16-, 8- or 32-byte aligned) as floats.
template <int KVT>
__device__ __forceinline__ void load8(const void *base, int64_t elem, float *v) {
    if (KVT == LOOM_KV_F32) {
        const float4 *p = reinterpret_cast<const float4 *>((const float *)base + elem);
        float4 f0 = p[0], f1 = p[1];
        v[0] = f0.x; v[1] = f0.y; v[2] = f0.z; v[3] = f0.w;
        v[4] = f1.x; v[5] = f1.y; v[6] = f1.z; v[7] = f1.w;
    } else if (KVT == LOOM_KV_F16) {
        uint4 u = *reinterpret_cast<const uint4 *>((const uint16_t *)base + elem);
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = f16_bits_to_f32((uint16_t)(w[i] & 0xFFFF));
            v[2 * i + 1] = f16_bits_to_f32((uint16_t)(w[i] >> 16));
        }
    } else {
        uint2 u = *reinterpret_cast<const uint2 *>((const int8_t *)base + elem);
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = (float)(int8_t)(((i < 4 ? u.x : u.y) >> (8 * (i & 3))) & 0xFF);
    }
}

// v3: one query head a block (grid x = n_kv_head x group, y = the N tokens), no split.
template <int D, int KVT>
static __global__ void __launch_bounds__(kThreads, 1) attn_kernel(const AttnArgs a) {
    pdl_wait();
    pdl_launch_dependents();
    constexpr int kPer = KVT == LOOM_KV_F32 ? 4 : (KVT == LOOM_KV_F16 ? 8 : 16);
    constexpr int TPR = D / 8;         // threads per V row (8 dims each)
    constexpr int NG = kThreads / TPR; // position groups in phase 3
    __shared__ __align__(16) float qs[kMaxD];
    __shared__ float red[NG][D];  // final sum over position groups
    __shared__ float ps[kTile];
    __shared__ float m_sh, l_sh, corr_sh;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kvh = blockIdx.x / a.group;
    const int64_t h = (int64_t)kvh * a.group + blockIdx.x % a.group;  // the block's query head
    const int64_t t = blockIdx.y;
    const int64_t hi = query_pos0(a) + t + 1;  // visible positions 0 .. hi-1
    const int64_t row_stride = a.n_kv_head * D;  // elements between positions

    for (int d = tid; d < D; d += kThreads) qs[d] = a.q[(t * a.n_head + h) * D + d];
    if (tid == 0) { m_sh = -INFINITY; l_sh = 0.0f; }
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; e++) acc[e] = 0.0f;
    __syncthreads();

    for (int64_t j0 = 0; j0 < hi; j0 += kTile) {
        // 1. scores
        {
            const int j = tid >> 1, half = tid & 1;
            const int64_t pos = j0 + j;
            float dot = 0.0f;
            if (pos < hi) {
                const int64_t e0 = pos * row_stride + (int64_t)kvh * D + half * (D / 2);
#pragma unroll
                for (int c = 0; c < (D / 2) / kPer; c++) {
                    float v[16];
                    int n;
                    load16<KVT>(a.kc, e0 + c * kPer, v, n);
#pragma unroll
                    for (int e = 0; e < kPer; e++)
                        dot = fmaf(qs[half * (D / 2) + c * kPer + e], v[e], dot);
                }
            }
            const float ksc = (KVT == LOOM_KV_INT8 && pos < hi)
                                  ? a.ks[pos * a.n_kv_head + kvh] : 1.0f;
            const float s = dot + __shfl_xor_sync(0xffffffffu, dot, 1);
            if (half == 0) ps[j] = pos < hi ? s * ksc * a.scale : -INFINITY;
        }
        __syncthreads();
        // 2. online softmax (warp 0)
        if (warp == 0) {
            float s0 = ps[lane], s1 = ps[lane + 32];
            float mt = warp_max(fmaxf(s0, s1));
            float mo = m_sh, mn = fmaxf(mo, mt);
            float p0 = mn == -INFINITY ? 0.0f : expf(s0 - mn);
            float p1 = mn == -INFINITY ? 0.0f : expf(s1 - mn);
            ps[lane] = p0;
            ps[lane + 32] = p1;
            float sum = warp_sum(p0 + p1);
            __syncwarp();  // every lane has read m_sh before lane 0 rewrites it
            if (lane == 0) {
                float corr = mo == -INFINITY ? 0.0f : expf(mo - mn);
                corr_sh = corr;
                l_sh = l_sh * corr + sum;
                m_sh = mn;
            }
        }
        __syncthreads();
        // 3. V accumulation: thread (grp, c) owns dims 8c .. 8c+7 and the tile positions
        //    j = grp, grp + NG, ... (one 16-, 8- or 32-byte load per position)
        {
            const int c = tid % TPR, grp = tid / TPR;
            const float cr = corr_sh;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[e] *= cr;
            const int jn = (int)min((int64_t)kTile, hi - j0);
#pragma unroll 2
            for (int j = grp; j < jn; j += NG) {
                const int64_t pos = j0 + j;
                float v[8];
                load8<KVT>(a.vc, pos * row_stride + (int64_t)kvh * D + 8 * c, v);
                if (KVT == LOOM_KV_INT8) {
                    const float vsc = a.vs[pos * a.n_kv_head + kvh];
#pragma unroll
                    for (int e = 0; e < 8; e++) v[e] *= vsc;
                }
                const float pg = ps[j];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[e] = fmaf(pg, v[e], acc[e]);
            }
        }
        __syncthreads();
    }

    // sum the NG position groups' accumulators (fixed order), then thread d < D writes dim d
    {
        const int c = tid % TPR, grp = tid / TPR;
#pragma unroll
        for (int e = 0; e < 8; e++) red[grp][8 * c + e] = acc[e];
    }
    __syncthreads();
    if (tid >= D) return;
    float o = 0.0f;
    for (int grp = 0; grp < NG; grp++) o += red[grp][tid];
    a.out[(t * a.n_head + h) * D + tid] = o / l_sh;
}

// Decode/prefill attention launches go in order (no PDL attribute: common.cuh, bench/NOTES.md
// 7.9).
template <int D>
void launch_v3(const AttnArgs &a, int kvt, dim3 grid, cudaStream_t stream) {
    if (kvt == LOOM_KV_F32) (void)launch_in_order(attn_kernel<D, LOOM_KV_F32>, grid, kThreads, 0, stream, a);
    else if (kvt == LOOM_KV_F16) (void)launch_in_order(attn_kernel<D, LOOM_KV_F16>, grid, kThreads, 0, stream, a);
    else (void)launch_in_order(attn_kernel<D, LOOM_KV_INT8>, grid, kThreads, 0, stream, a);
}

// v3 (head_dim 64 or 128): one head a block, no split.
loom_status run(const AttnArgs &a, int kvt, int64_t D, int64_t N, loom_error *err,
                cudaStream_t stream) {
    dim3 grid((unsigned)(a.n_kv_head * a.group), (unsigned)N);
    if (D == 64) launch_v3<64>(a, kvt, grid, stream);
    else launch_v3<128>(a, kvt, grid, stream);
    LAUNCH_CHECK();
    return LOOM_OK;
}

// ---- v4: split-KV decode with cp.async double buffering and the combine folded in ----------

template <int D, int KVT, int GM>
struct V4 {
    static constexpr int ES = kv_elem_bytes(KVT);
    static constexpr int RB = D * ES;              // bytes of one cache row
    static constexpr int CPR = RB / 16;            // 16-byte chunks a row
    static constexpr int TP = tile_rows(D, KVT);   // rows a tile
    static constexpr int TPRK = kThreads / TP;     // threads a K row (scores)
    static constexpr int KIT = (CPR + TPRK - 1) / TPRK;  // chunks a thread (scores)
    static constexpr int PER = 16 / ES;            // values a chunk
    static constexpr int UPR = D / 8;              // 8-value units a row (V)
    static constexpr int HPT = GM < 4 ? GM : 4;    // heads a thread accumulates (V)
    static constexpr int HH = GM / HPT;            // head slices (V): thread tid / TPH
    static constexpr int TPH = kThreads / HH;      // threads a head slice
    static constexpr int NGV = TPH / UPR;          // position groups a head slice (V)
    static constexpr int VIT = (TP + NGV - 1) / NGV;  // rows a group a tile (V)
    static constexpr int TILE = TP * RB;
    static constexpr int NST = 2;                  // stages, each a K tile and a V tile
    static constexpr int BUF = cmax(cmax(NST * 2 * TILE, NGV * GM * D * 4), 2 * GM * kMaxSplits * 4);
    static_assert(RB % 16 == 0 && D % 8 == 0 && TP * TPRK == kThreads && NGV >= 1, "geometry");
    static_assert(BUF + GM * D * 4 + TP * GM * 4 + 2 * NST * TP * 4 <= 48 * 1024, "sm_87 budget");
};

// Chunk c of row r sits at chunk (c + r * TPRK) mod CPR of the row in shared memory, so the 8
// lanes of one 16-byte shared load phase (TPRK lanes a row, 8 / TPRK rows) hit 8 different
// 16-byte bank groups in the score phase; the V phase reads whole rows and is conflict-free.
template <int CPR, int TPRK>
__device__ __forceinline__ int swz(int r, int c) { return (c + r * TPRK) % CPR; }

// 16 cache bytes -> 16 / ES floats. INT8 goes through the 2^23 trick (exact: byte_perm builds
// 2^23 + (q + 128), one subtraction removes it), cheaper than I2F.
template <int KVT>
__device__ __forceinline__ void decode16(const uint4 w, float *v) {
    const uint32_t x[4] = {w.x, w.y, w.z, w.w};
    if (KVT == LOOM_KV_F32) {
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = __uint_as_float(x[i]);
    } else if (KVT == LOOM_KV_F16) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&x[i]));
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t b = x[i] ^ 0x80808080u;
#pragma unroll
            for (int k = 0; k < 4; k++)
                v[4 * i + k] = __uint_as_float(__byte_perm(b, 0x4B000000u, 0x7540 | k)) - 8388736.0f;
        }
    }
}

// The 8 values of unit u (values 8u .. 8u+7) of row j of a V tile.
template <int KVT, int RB, int CPR, int TPRK>
__device__ __forceinline__ void load_unit(const unsigned char *Vs, int j, int u, float *v) {
    const unsigned char *row = Vs + j * RB;
    if (KVT == LOOM_KV_F16) {
        decode16<KVT>(*reinterpret_cast<const uint4 *>(row + swz<CPR, TPRK>(j, u) * 16), v);
    } else if (KVT == LOOM_KV_F32) {
        decode16<KVT>(*reinterpret_cast<const uint4 *>(row + swz<CPR, TPRK>(j, 2 * u) * 16), v);
        decode16<KVT>(*reinterpret_cast<const uint4 *>(row + swz<CPR, TPRK>(j, 2 * u + 1) * 16),
                      v + 4);
    } else {
        const uint2 w = *reinterpret_cast<const uint2 *>(row + swz<CPR, TPRK>(j, u >> 1) * 16 +
                                                         (u & 1) * 8);
        const uint32_t x[2] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u};
#pragma unroll
        for (int k = 0; k < 8; k++)
            v[k] = __uint_as_float(__byte_perm(x[k >> 2], 0x4B000000u, 0x7540 | (k & 3))) -
                   8388736.0f;
    }
}
// One block: the G (<= GM) query heads of one KV head, one query token, one split of the
// visible positions, walked in tiles of TP rows; see the file comment (v4).
template <int D, int KVT, int GM>
static __global__ void __launch_bounds__(kThreads, GM == 8 ? 3 : 4) attn_v4_kernel(const AttnArgs a) {
    pdl_wait();
    pdl_launch_dependents();
    using C = V4<D, KVT, GM>;
    constexpr bool I8 = KVT == LOOM_KV_INT8;
    constexpr int NSC = I8 ? C::NST : 1;
    constexpr int HW = (GM + kWarps - 1) / kWarps;  // heads a softmax warp
    __shared__ __align__(16) unsigned char buf[C::BUF];  // tiles | group sums | combine
    __shared__ __align__(16) float qs[GM][D];
    __shared__ __align__(16) float ps[C::TP][GM];  // scores, then p (x V scale for INT8)
    __shared__ float kss[NSC][C::TP], vss[NSC][C::TP];
    __shared__ float corr_sh[GM], m_sh[GM], l_sh[GM];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kvh = blockIdx.x / a.hgroups, hg = blockIdx.x % a.hgroups;
    const int h0 = kvh * a.group + hg * a.G;
    const int G = min(a.G, a.group - hg * a.G);
    const int t = blockIdx.y;
    // The partition is a function of pos0 + N and a.S only (never of the grid): _at == value.
    // Positions are int: the launcher keeps n_ctx below 2^30.
    const int pos0 = (int)query_pos0(a);
    const int ntiles = (pos0 + (int)a.n_tokens + C::TP - 1) / C::TP;
    const int s1 = min(a.S, ntiles);
    const int per = (ntiles + s1 - 1) / s1;  // tiles a split
    const int S = (ntiles + per - 1) / per;  // splits in use
    if ((int)blockIdx.z >= S) return;
    const int L = pos0 + t + 1;  // token t sees positions 0 .. L-1
    const int lo = (int)blockIdx.z * per * C::TP;
    const int hi = min(L, lo + per * C::TP);
    const int nch = hi > lo ? (hi - lo + C::TP - 1) / C::TP : 0;
    const int64_t rs = a.n_kv_head * C::RB;  // bytes between positions
    const unsigned char *kb = (const unsigned char *)a.kc + (int64_t)kvh * C::RB;
    const unsigned char *vb = (const unsigned char *)a.vc + (int64_t)kvh * C::RB;

    // Tile pair `ci` into stage ci % NST (rows past hi are zero-filled and never read).
    auto issue = [&](int ci) {
        const int st = ci % C::NST;
        unsigned char *Ks = buf + st * 2 * C::TILE, *Vs = Ks + C::TILE;
        const int j0 = lo + ci * C::TP;
#pragma unroll
        for (int i = 0; i < (C::TP * C::CPR + kThreads - 1) / kThreads; i++) {
            const int idx = tid + i * kThreads;
            if (C::TP * C::CPR % kThreads != 0 && idx >= C::TP * C::CPR) break;
            const int r = idx / C::CPR, c = idx % C::CPR;
            const bool ok = j0 + r < hi;
            const int64_t off = ok ? (int64_t)(j0 + r) * rs + c * 16 : 0;
            const int sh = r * C::RB + swz<C::CPR, C::TPRK>(r, c) * 16;
            cp_async16(Ks + sh, kb + off, ok);
            cp_async16(Vs + sh, vb + off, ok);
        }
        if (I8) {
            const int r = tid % C::TP;
            const bool ok = tid < 2 * C::TP && j0 + r < hi;
            const int64_t e = ok ? (int64_t)(j0 + r) * a.n_kv_head + kvh : 0;
            if (tid < C::TP) cp_async4(&kss[st % NSC][r], a.ks + e, ok);
            else if (tid < 2 * C::TP) cp_async4(&vss[st % NSC][r], a.vs + e, ok);
        }
    };

    // q of the block's heads (zero rows past G) travels with the first tile pair.
    for (int idx = tid; idx < GM * D / 4; idx += kThreads) {
        const int g = idx / (D / 4), c = idx % (D / 4);
        const bool ok = g < G;
        cp_async16(&qs[g][4 * c], a.q + (ok ? ((int64_t)t * a.n_head + h0 + g) * D + 4 * c : 0),
                   ok);
    }
#pragma unroll
    for (int st = 0; st < C::NST; st++) {
        if (st < nch) issue(st);
        cp_async_commit();
    }

    float acc[C::HPT][8];
#pragma unroll
    for (int g = 0; g < C::HPT; g++)
#pragma unroll
        for (int e = 0; e < 8; e++) acc[g][e] = 0.0f;
    float m_run[HW], l_run[HW];
#pragma unroll
    for (int k = 0; k < HW; k++) { m_run[k] = -INFINITY; l_run[k] = 0.0f; }

    for (int ci = 0; ci < nch; ci++) {
        // Tile pair ci has landed (group ci); then the stage read in ci - 1 is refilled.
        if (ci == 0) cp_async_wait<C::NST - 1>();
        else cp_async_wait<C::NST - 2>();
        __syncthreads();
        if (ci >= 1) {
            if (ci - 1 + C::NST < nch) issue(ci - 1 + C::NST);
            cp_async_commit();
        }
        const int st = ci % C::NST;
        const unsigned char *Ks = buf + st * 2 * C::TILE, *Vs = Ks + C::TILE;
        const int j0 = lo + ci * C::TP;

        // 1. scores: TPRK threads a row, each KIT chunks; the row's lanes meet by shuffles
        {
            const int r = tid / C::TPRK, sub = tid % C::TPRK;
            float dot[GM];
#pragma unroll
            for (int g = 0; g < GM; g++) dot[g] = 0.0f;
#pragma unroll 1
            for (int i = 0; i < C::KIT; i++) {
                const int c = sub + C::TPRK * i;
                if (C::KIT * C::TPRK == C::CPR || c < C::CPR) {
                    float v[C::PER];
                    decode16<KVT>(*reinterpret_cast<const uint4 *>(
                                      Ks + r * C::RB + swz<C::CPR, C::TPRK>(r, c) * 16),
                                  v);
#pragma unroll
                    for (int g = 0; g < GM; g++) {
                        const float4 *qv = reinterpret_cast<const float4 *>(&qs[g][c * C::PER]);
#pragma unroll
                        for (int e = 0; e < C::PER / 4; e++) {
                            const float4 qq = qv[e];
                            dot[g] = fmaf(qq.x, v[4 * e], dot[g]);
                            dot[g] = fmaf(qq.y, v[4 * e + 1], dot[g]);
                            dot[g] = fmaf(qq.z, v[4 * e + 2], dot[g]);
                            dot[g] = fmaf(qq.w, v[4 * e + 3], dot[g]);
                        }
                    }
                }
            }
#pragma unroll
            for (int o = C::TPRK / 2; o > 0; o >>= 1)
#pragma unroll
                for (int g = 0; g < GM; g++) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
            if (sub == 0) {
                const bool ok = j0 + r < hi;
                const float ksc = I8 ? kss[st % NSC][r] : 1.0f;
#pragma unroll
                for (int g = 0; g < GM; g++) ps[r][g] = ok ? dot[g] * ksc * a.scale : -INFINITY;
            }
        }
        __syncthreads();
        // 2. online softmax: warp w owns heads w, w + 4
#pragma unroll
        for (int k = 0; k < HW; k++) {
            const int g = warp + kWarps * k;
            if (g < GM) {
                constexpr int JL = (C::TP + 31) / 32;
                float sv[JL];
                float mt = -INFINITY;
#pragma unroll
                for (int u = 0; u < JL; u++) {
                    const int j = lane + 32 * u;
                    sv[u] = j < C::TP ? ps[j][g] : -INFINITY;
                    mt = fmaxf(mt, sv[u]);
                }
                mt = warp_max(mt);
                const float mo = m_run[k], mn = fmaxf(mo, mt);
                float sum = 0.0f;
#pragma unroll
                for (int u = 0; u < JL; u++) {
                    const int j = lane + 32 * u;
                    const float p = mn == -INFINITY ? 0.0f : expf(sv[u] - mn);
                    sum += p;
                    if (j < C::TP) ps[j][g] = I8 ? p * vss[st % NSC][j] : p;
                }
                sum = warp_sum(sum);
                const float corr = mo == -INFINITY ? 0.0f : expf(mo - mn);
                l_run[k] = l_run[k] * corr + sum;
                m_run[k] = mn;
                if (lane == 0) corr_sh[g] = corr;
            }
        }
        __syncthreads();
        // 3. V: thread (hs, pg, u) owns values 8u .. 8u+7 of heads HPT hs .. HPT hs + HPT-1
        //    for rows pg, pg + NGV, ...
        {
            const int hs = tid / C::TPH, u = tid % C::TPH % C::UPR, pg = tid % C::TPH / C::UPR;
            if (pg < C::NGV) {
#pragma unroll
                for (int g = 0; g < C::HPT; g++) {
                    const float cr = corr_sh[C::HPT * hs + g];
#pragma unroll
                    for (int e = 0; e < 8; e++) acc[g][e] *= cr;
                }
#pragma unroll 2
                for (int i = 0; i < C::VIT; i++) {
                    const int j = pg + C::NGV * i;
                    if (C::VIT * C::NGV == C::TP || j < C::TP) {
                        float v[8];
                        load_unit<KVT, C::RB, C::CPR, C::TPRK>(Vs, j, u, v);
                        float pv[C::HPT];
                        if constexpr (C::HPT == 4) {
                            const float4 p4 = *reinterpret_cast<const float4 *>(&ps[j][4 * hs]);
                            pv[0] = p4.x; pv[1] = p4.y; pv[2] = p4.z; pv[3] = p4.w;
                        } else {
#pragma unroll
                            for (int g = 0; g < C::HPT; g++) pv[g] = ps[j][g];
                        }
#pragma unroll
                        for (int g = 0; g < C::HPT; g++)
#pragma unroll
                            for (int e = 0; e < 8; e++) acc[g][e] = fmaf(pv[g], v[e], acc[g][e]);
                    }
                }
            }
        }
    }

    // 4. the NGV position groups' sums meet in shared memory (fixed order)
    cp_async_wait<0>();  // (only empty groups, or q when nch == 0, can be pending here)
    __syncthreads();     // every thread is done with the tiles: buf becomes the group sums
    float *red = reinterpret_cast<float *>(buf);  // [NGV][GM][D]
    {
        const int hs = tid / C::TPH, u = tid % C::TPH % C::UPR, pg = tid % C::TPH / C::UPR;
        if (pg < C::NGV) {
#pragma unroll
            for (int g = 0; g < C::HPT; g++)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    red[(pg * GM + C::HPT * hs + g) * D + 8 * u + e] = acc[g][e];
        }
    }
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < HW; k++) {
            const int g = warp + kWarps * k;
            if (g < GM) { m_sh[g] = m_run[k]; l_sh[g] = l_run[k]; }
        }
    }
    __syncthreads();
    split_epilogue<D, GM, C::NGV>(a, buf, G, h0, t, S, m_sh, l_sh);
}

template <int D, int KVT>
void launch_v4_g(const AttnArgs &a, dim3 grid, cudaStream_t stream) {
    if (a.G <= 1) (void)launch_in_order(attn_v4_kernel<D, KVT, 1>, grid, kThreads, 0, stream, a);
    else if (a.G <= 2 && (D == 64 || D == 128)) (void)launch_in_order(attn_v4_kernel<D, KVT, 2>, grid, kThreads, 0, stream, a);
    else if (a.G <= 4) (void)launch_in_order(attn_v4_kernel<D, KVT, 4>, grid, kThreads, 0, stream, a);
    else (void)launch_in_order(attn_v4_kernel<D, KVT, 8>, grid, kThreads, 0, stream, a);
}

// The caches v4 serves: F32 of head_dim 64/128 (F16/INT8 of those go to v5, or on the simple
// path to v3), F16/INT8 of head_dim 80/96/256 (F32 of those is unsupported).
template <int D>
void launch_v4_t(const AttnArgs &a, int kvt, dim3 grid, cudaStream_t stream) {
    if constexpr (D == 64 || D == 128) launch_v4_g<D, LOOM_KV_F32>(a, grid, stream);
    else if (kvt == LOOM_KV_F16) launch_v4_g<D, LOOM_KV_F16>(a, grid, stream);
    else launch_v4_g<D, LOOM_KV_INT8>(a, grid, stream);
}

loom_status run_v4(AttnArgs a, int kvt, int64_t D, int64_t N, loom_error *err,
                   cudaStream_t stream) {
    dim3 grid((unsigned)(a.n_kv_head * a.hgroups), (unsigned)N, (unsigned)a.splits);
    switch (D) {
    case 64: launch_v4_t<64>(a, kvt, grid, stream); break;
    case 80: launch_v4_t<80>(a, kvt, grid, stream); break;
    case 96: launch_v4_t<96>(a, kvt, grid, stream); break;
    case 128: launch_v4_t<128>(a, kvt, grid, stream); break;
    default: launch_v4_t<256>(a, kvt, grid, stream); break;
    }
    LAUNCH_CHECK();
    return LOOM_OK;
}

int g_attn_fallback_logged = 0;

// Checks everything but the position; the by-value launcher checks that itself.
static loom_status check_attn(const float *q, const void *k_cache, const float *k_scales,
                              const void *v_cache, const float *v_scales,
                              const loom_kv_layout *kv, const loom_attn_params *p,
                              const float *out, loom_error *err) {
    if (!kv || !p) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: NULL layout or params");
    const int64_t D = kv->head_dim, N = p->n_tokens;
    if (N < 0 || p->n_head <= 0 || kv->n_kv_head <= 0 || p->n_head % kv->n_kv_head != 0 ||
        N > kv->n_ctx)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention: bad shape (N %lld, heads %lld/%lld, n_ctx %lld)", (long long)N,
                 (long long)p->n_head, (long long)kv->n_kv_head, (long long)kv->n_ctx);
    if (kv->type != LOOM_KV_F32 && kv->type != LOOM_KV_F16 && kv->type != LOOM_KV_INT8)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "attention: cache type %d", (int)kv->type);
    if (!loom_cuda_attention_supports(D, kv->type))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED,
                 "attention: head_dim %lld with a %s cache (CUDA supports 64, 80, 96, 128, 256 "
                 "for F16/INT8 and 64, 128 for F32)",
                 (long long)D, kv->type == LOOM_KV_F32 ? "F32" : "F16/INT8");
    if (N > 65535) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: N = %lld > 65535", (long long)N);
    if (kv->n_ctx > ((int64_t)1 << 30))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "attention: n_ctx %lld > 2^30", (long long)kv->n_ctx);
    if (N > 0 && (!q || !k_cache || !v_cache || !out ||
                  (kv->type == LOOM_KV_INT8 && (!k_scales || !v_scales))))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: NULL pointer");
    if ((uintptr_t)k_cache % 16 != 0 || (uintptr_t)v_cache % 16 != 0 || (uintptr_t)q % 16 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention: q and the K/V caches must be 16-byte aligned");
    return LOOM_OK;
}

// Runs attention with query 0 at `pos0` (pos_dev NULL) or at *pos_dev. `L_grid` is the largest
// pos0 + N the grid must cover: the position itself (by value) or n_ctx (_at).
static loom_status launch_attn(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p, int64_t pos0,
                               const int32_t *pos_dev, int64_t L_grid, float *out,
                               loom_error *err, cudaStream_t stream,
                               const AttnPrologue *pro = nullptr) {
    const int64_t D = kv->head_dim, N = p->n_tokens;
    AttnArgs a = {};
    a.q = q; a.kc = k_cache; a.vc = v_cache; a.ks = k_scales; a.vs = v_scales; a.out = out;
    a.pos_dev = pos_dev;
    a.n_kv_head = kv->n_kv_head; a.n_head = p->n_head; a.pos0 = pos0; a.scale = p->scale;
    a.n_tokens = N; a.n_ctx = kv->n_ctx;
    a.group = (int)(p->n_head / kv->n_kv_head);
    const bool fast_path = fast(SW_FAST_ATTN);
    if (pro && !fast_path)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "rope_kv_attention: no fused kernel on the simple paths");
    const int pfv = attn_prefill();
    if (N > 1 && !pro && fast_path && pfv > 0 && prefill_supported(D, kv->type, a.group)) {
        // prefill (LOOM_ATTN_PREFILL=1/2): one launch, no split; other shapes take the paths below
        loom_status st = run_prefill(a, kv->type, D, N, pfv == 2 && cc_major() >= 9 ? 2 : 1, err, stream);
        if (st == LOOM_OK) return st;
        log_fallback_once(&g_attn_fallback_logged, "attention", err);
    }
    if (fast_path) {
        // v4: G heads a block, S splits for this shape (~attn_blocks_per_sm() blocks per SM),
        // never depending on the position; N * SP <= kMaxSplits keeps the partials inside
        // loom_cuda_scratch_bytes_for, and N x blocks must fit the combine's counters.
        AttnArgs f = a;
        f.G = a.group < kMaxG ? a.group : kMaxG;
        f.hgroups = (f.group + f.G - 1) / f.G;
        const int64_t bx = kv->n_kv_head * f.hgroups;
        int64_t S = (attn_blocks_per_sm() * sm_count() + bx * N - 1) / (bx * N);
        const int64_t cap = (kMaxSplits / N) / 4 * 4;
        if (S > cap) S = cap;
        if (N * bx > kMaxCounters || S < 1) S = 1;
        const bool v5 = (D == 64 || D == 128) && (kv->type == LOOM_KV_F16 || kv->type == LOOM_KV_INT8);
        const int64_t TP = v5 ? kV5Rows : tile_rows((int)D, (int)kv->type);
        const int64_t ntiles = (L_grid + TP - 1) / TP;
        int64_t z = S < ntiles ? S : ntiles;
        if (v5) {
            // sm_90, one token, a cache of <= 64 tiles (2K positions): the splits of a head
            // group are one cluster of kV5Cluster blocks combined in distributed shared memory
            // (H200, graph-timed: 512 / 640 / 1K positions 6.0 / 6.6 / 7.5 us against 8.1 /
            // 8.4 / 9.1 with the global combine); longer caches keep S splits and the global
            // combine (4K / 8K: 15.1 / 20.4 us against 16.7 / 26.9 in clusters of 8). A
            // function of the shape and n_ctx only: the grid is (blocks, 1, 8) at every position.
            // v6 (R2, graph-timed): clusters of 8 up to 4K positions (4K F16 11.3 us against
            // 12.0 with the global combine, INT8 9.7 against 10.9; 8K 18.1 against 16.7);
            // LOOM_ATTN_CL_TILES overrides the 128 tiles (v5 keeps 64). The cache's tiles
            // (n_ctx) decide in both launchers, not the range the grid covers, so that _at and
            // by-value launches split a position alike (the same bits; by range, an n_ctx past
            // 4K gave _at the global combine and by-value clusters of 8).
            const int64_t cl_tiles = fast(SW_ATTN_V6) ? attn_cluster_tiles() : 64;
            const int64_t ctx_tiles = (kv->n_ctx + TP - 1) / TP;
            f.cl = N == 1 && cc_major() >= 9 && ctx_tiles <= cl_tiles && S >= kV5Cluster ? kV5Cluster : 0;
            if (f.cl) S = z = f.cl;
            // Stages: the tiles a split may walk (all in flight), within the shared memory a
            // block may take: sm_90 ~200 KB an SM shared by the blocks of one wave, sm_87 40 KB
            // (prefill, 32 tokens: 2 stages and 33 us against 54 with 8 at 1 block an SM).
            const int64_t per = z > 0 ? (ntiles + z - 1) / z : 1;
            int64_t waves = (kv->n_kv_head * f.hgroups * N * z + sm_count() - 1) / sm_count();
            if (waves < attn_blocks_per_sm()) waves = attn_blocks_per_sm();
            const int64_t budget = cc_major() >= 9 ? 200 * 1024 / waves : 40 * 1024;
            int64_t cap = budget / v5_stage((int)D, (int)kv->type);
            // v6 (decode on sm_90): warp w walks tiles w, w + 4, ... in its own stages, as many
            // as its tiles (all in flight) up to 3, within the budget of the blocks that walk
            // tiles (at 4K 16 of the 17 splits: one wave); v5 where not even one stage a warp fits.
            const int64_t used = kv->n_kv_head * f.hgroups * N * ((ntiles + per - 1) / per);
            const int64_t wv = (used + sm_count() - 1) / sm_count();
            const int64_t wcap = 200 * 1024 / (wv < 1 ? 1 : wv) / v5_stage((int)D, (int)kv->type) / kWarps;
            f.wt = fast(SW_ATTN_V6) && N == 1 && cc_major() >= 9 && wcap >= 1;
            f.tma = f.wt && kv->type == LOOM_KV_F16 && D == 128 && attn_tma() && v6_tensor_maps(&f);
            // v6 is launched with PDL and reads its first tiles before the wait, unless the
            // caller says the rows may still be written (in_order; attention_v5.cu, EA).
            f.early = f.wt && !p->in_order;
            if (f.wt) {
                const int64_t ws = (per + kWarps - 1) / kWarps;
                const int64_t w = ws > wcap ? wcap : ws;
                f.nst = (int)(kWarps * (w > kV6MaxStages / kWarps ? kV6MaxStages / kWarps : w));
            } else {
                cap = cap < 2 ? 2 : (cap > kV5MaxStages ? kV5MaxStages : cap);
                f.nst = (int)(per < 2 ? 2 : (per > cap ? cap : per));
            }
        }
        if (z > 1 && !f.cl) {
            f.SP = (int)((z + 3) & ~(int64_t)3);
            size_t bytes = (size_t)(N * p->n_head * (D + 2) * f.SP) * sizeof(float);
            f.part = (float *)scratch(bytes, stream);
            if (!f.part) S = z = 1;
        }
        f.S = (int)S;
        f.splits = (int)z;
        if (pro) {  // the prologue folded in: v6 only, and no fallback after a launch
            if (!v5 || !f.wt)
                ARG_FAIL(LOOM_ERR_UNSUPPORTED, "rope_kv_attention: no fused kernel for this shape");
            f.fp = 1;
            f.pro = *pro;
            return run_v5(f, kv->type, D, N, err, stream);
        }
        loom_status st = v5 ? run_v5(f, kv->type, D, N, err, stream) : run_v4(f, kv->type, D, N, err, stream);
        if (st == LOOM_OK) return st;
        log_fallback_once(&g_attn_fallback_logged, "attention", err);
    }
    // simple path: one head a block, no split (v3; v4's kernel for head sizes v3 lacks)
    a.G = 1;
    a.hgroups = a.group;
    a.splits = 1;
    a.S = 1;
    a.SP = 4;
    if (D != 64 && D != 128) return run_v4(a, kv->type, D, N, err, stream);
    return run(a, kv->type, D, N, err, stream);
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" bool loom_cuda_attention_supports(int64_t head_dim, loom_kv_type type) {
    const int64_t D = head_dim;
    return D == 64 || D == 128 || (type != LOOM_KV_F32 && (D == 80 || D == 96 || D == 256));
}

extern "C" loom_status loom_cuda_attention(const float *q, const void *k_cache,
                                           const float *k_scales, const void *v_cache,
                                           const float *v_scales, const loom_kv_layout *kv,
                                           const loom_attn_params *p, float *out,
                                           loom_error *err, cudaStream_t stream) {
    loom_status st = check_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, out, err);
    if (st != LOOM_OK) return st;
    if (p->pos0 < 0 || p->pos0 + p->n_tokens > kv->n_ctx)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "attention: positions %lld .. %lld + %lld outside the cache of %lld",
                 (long long)p->pos0, (long long)p->pos0, (long long)p->n_tokens,
                 (long long)kv->n_ctx);
    if (p->n_tokens == 0) return LOOM_OK;
    return launch_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, p->pos0, nullptr,
                       p->pos0 + p->n_tokens, out, err, stream);
}

extern "C" loom_status loom_cuda_attention_at(const float *q, const void *k_cache,
                                              const float *k_scales, const void *v_cache,
                                              const float *v_scales, const loom_kv_layout *kv,
                                              const loom_attn_params *p, const int32_t *d_pos0,
                                              float *out, loom_error *err, cudaStream_t stream) {
    loom_status st = check_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, out, err);
    if (st != LOOM_OK) return st;
    if (!d_pos0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "attention_at: NULL device position");
    if (p->n_tokens == 0) return LOOM_OK;
    return launch_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, 0, d_pos0, kv->n_ctx, out,
                       err, stream);
}

namespace loom_cuda {

loom_status attention_at_fused(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p,
                               const int32_t *d_pos0, const AttnPrologue &pro, float *out,
                               loom_error *err, cudaStream_t stream) {
    loom_status st = check_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, out, err);
    if (st != LOOM_OK) return st;
    if (!d_pos0) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "rope_kv_attention: NULL device position");
    if (p->n_tokens != 1)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "rope_kv_attention: %lld tokens (decode only)",
                 (long long)p->n_tokens);
    return launch_attn(q, k_cache, k_scales, v_cache, v_scales, kv, p, 0, d_pos0, kv->n_ctx, out,
                       err, stream, &pro);
}

}  // namespace loom_cuda
