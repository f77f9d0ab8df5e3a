// gemv_mma_q6k.cu: the matmul family for Q6_K weights on the tensor cores: GEMV and GEMM (any
// N) with the plain (+bias) and add epilogues, for up to three segments of one x (the Q6_K V of
// a Q4_K_M triple, the Q6_K ffn_down + residual, the lm head). Default path; LOOM_GEMV_MMA_Q6K=0
// (or LOOM_GEMV_MMA=0) keeps Q6_K on the warp-per-row kernels of gemv.cu / gemm.cu, which are
// also the fallback when a launch fails. LOOM_GEMV_MMA_Q6K_V picks the loop body: 1 the f16
// product described below (q6k_mma_body.cuh; a Q4_K_M triple's V always), 2 (the default) the
// INT8 one (q6k_i8_body.cuh: q as u8, x as 4 exact int8 limbs; its own opening comment has the
// design, contract and costs).
// LOOM_GEMM_WIDE (runtime.cu gemm_wide_min: 1, the default, from 64 tokens; 0 off; n from n
// tokens) sends the INT8 body's GEMM to q6k_i8_wide.cuh's blocks of 4 tiles x 16 or 32 tokens
// (x staged once a block, A decoded once a super-block for all its tokens; the same bits as the
// 8-token GEMM and the GEMV). LOOM_GEMM_WIDE_Q6K (session 9) picks its form: 5-7 (7 the
// default) read x limbs that a pre-pass kernel staged once for the whole matmul into the kernel
// scratch (q6_limbs_bytes(n, K) bytes: K / 256 x n rounded up to 32 x 1028), 2-4 stage x in the
// block, the fallback where the scratch cannot grow (a capture).
//
// The product. mma.sync m16n8k16 (f16 x f16 -> f32), A = weights, B = x as f16 hi + lo with a
// power-of-two scale per super-block and token (mma_common.cuh: stage_token). A Q6_K weight is
// d * sc * (q - 32) with sc an int8 and q 6 bits: sc * (q - 32) reaches 4096, past f16's exact
// integers (2048). So the scale is split, sc = 16 sh + sl (sh = sc >> 4 in -8..7, sl = sc & 15),
// and two mma chains run over the same B: A_h = sh (q - 32) (|.| <= 256) and A_l = sl (q - 32)
// (<= 480), both exact; per super-block and row, in FP32: acc += (d / s) (16 C_h + C_l).
// A is built from the packed bits without conversions: one LOP3 puts the two high bits from qh
// beside 0x6400 (half 1024), a second merges the ql nibble: half2(1024 + q) (low nibbles) or
// half2(1024 + 16 q) (high nibbles); one HFMA2 per chain with (sh, -1056 sh) or (sh/16, -96 sh)
// gives sh (q - 32) exactly (likewise sl).
// k permutation: lane t = (h, u) = (t >> 1, t & 1) owns the 64 values 128h + 32i + 16u + l
// (i = 0..3, l = 0..15): ql bytes 64h + 16u + l (i = 0, 2) and 64h + 32 + 16u + l
// (i = 1, 3), qh bytes 32h + 16u + l, so sub-blocks 8h + 2i + u: 4 scales a row instead of 16.
// Step (i, k) (16 a super-block) takes l = 4k .. 4k+3: bytes 0, 2 of ql word k in k-slots 2t,
// 2t+1, bytes 1, 3 in slots 2t+8, 2t+9 (x staged in that order: stage_token with xa, xc the 8
// values of steps (i, k), (i, k+1), permuted first so that each step's two B registers are
// adjacent in the LDS.128 that reads them: no moves before the mma. Session 3's unpermuted
// order (LOOM_GEMV_MMA_Q6K_V=0: the same bits, 80 register moves a super-block against 22,
// slower in every row of relay q6i-R4) was removed in session 11).
//
// Weights through shared memory. Q6_K blocks are 210 bytes, so a block is only 2-byte aligned:
// each warp copies its 16 rows' 210-byte blocks with cp.async as the 16-byte-aligned windows
// [b & ~15, (b & ~15) + 224) (14 chunks a row, 7 a lane, coalesced; bytes of the neighbouring
// blocks come along unused; only the chunk holding the tensor's last bytes, in the segment's
// last super-block of its last tile, is copied by 2-byte loads, so nothing outside the tensor
// is read), and a lane reads its bytes back as words realigned by one funnel shift (the
// block's offset in the window is even). GEMV: 2 stages a warp (the next two super-blocks in
// flight), GEMM: 1 (the tile is read into registers before it is refilled). The first stages
// are requested before pdl_wait() (weights are constant); x and y only after.
//
// Tiles (LOOM_WEIGHT_Q6K_TILES, cpu_kernels.h; the kernels' TL): the blocks of 16 rows padded to
// 212 bytes and laid out block by block, so a warp's super-block of its 16 rows is one 3,392-byte
// run, copied as it lies (since session 28: a lane's chunks at fixed distances, no per-chunk row
// arithmetic), every row 4-byte aligned at the same place at every super-block (no funnel
// shifts: the AL loads in every warp and in the GEMM too) and no tail. The INT8 body only
// (q6k_body), a triple's V too (the one-launch Q4_K_M triple runs it so beside Q4_K tiles,
// gemv_mma.cu T6). Same bytes, other addresses: the same bits (conformance --tiles). H200
// (bench/NOTES.md 7, session 18): the lm head 110.8 -> 103.5 us, the 4B down + add 11.8 -> 11.3,
// 4B decode 1.657 -> 1.625 ms/token, and with the triple's V 1.623 -> 1.599.
//
// The persistent GEMV (q6k_i8_body.cuh q6k_i8_persist; LOOM_GEMV_PERSIST=0 turns it off): a
// GEMV of one token at S = 1 without a folded norm whose tiles number more than 16 an SM (the
// lm head: 9,496) runs as many blocks as are resident at once, each walking tiles and asking
// for the next tile's weights before its reduction, so an SM's bytes in flight do not drain at
// every tile's end. The same bits; H200: the 4B lm head 104.6 -> 99.0 us (71.7% -> 75.7% of
// copy), its increment in the decode step 91.7 -> 88.8 us (bench/NOTES.md 7, session 18).
//
// Launch geometry (as gemv_mma.cu): 128-thread blocks, a block owns 16 rows of one segment and
// 1 token (GEMV) or 8 (GEMM: two n-tiles sharing each decoded A); the 4 warps take super-blocks
// i % 4 of the block's K share; on sm_90 a cluster of S blocks splits K (super-blocks with
// (i / 4) % S == rank), partial sums meet in distributed shared memory. Fixed reduction order
// (warps 0..3, ranks 0..S-1), S from the shape only: deterministic, and a GEMM token is
// bit-identical to the GEMV of that token. Shared memory: GEMV 4 x 2 x 3584 + 4 x 1 KB x stage
// (32.8 KB, 122 registers: 4 blocks an SM); GEMM 4 x 3584 + 4 x 8.2 KB (47.2 KB, under sm_87's
// 48 KB; 198-204 registers, 2 blocks an SM); the reduction reuses the weight buffers.
//
// Folded RMSNorm (NORM kernels, loom_cuda_*_normed; a Q4_K_M triple's V segment runs here with
// the same norm as its Q4_K launch): as gemv_mma.cu, the block's token scales from norm.cuh
// after pdl_wait, each staged x value (x * scale) * w[k]: bit for bit loom_cuda_rms_norm then
// the plain kernel.
//
// Memory traffic: each weight byte once from DRAM per token group (GEMM groups of a tile are
// adjacent blocks: L2), up to 14 bytes of the neighbouring block per row from L2; x once per
// block through L2, y written once.
//
// Numeric contract: |y - y_cpu| <= 1e-5 * sum_k |W[m,k] x[k]| per element against the CPU twin
// (products exact, x keeps ~22 bits, FP32 accumulation); not bit-identical to the warp-per-row
// kernels. Requires: Q6_K, K % 256 == 0, weights 16-byte aligned with rows of at most 2^26
// bytes (mma_q6k_seg_ok), x 16-byte aligned (gemv.cu's check_x).
//
// Cost (bench/NOTES.md 2.1; session 5: ncu on the H200 put the lm head at 72% of issue slots
// busy and 7.7 lane-instructions a weight, so instructions are what it waits on; the loop has
// 706 SASS a warp and super-block, session 3's 789 of which 80 register moves). Counted
// before measuring (session 3): ~590 instructions per warp and super-block of 16 rows (4096
// weights: 4.6 lane-instructions a weight): ~304 for A (per row and step 1.5 SHF, 4 LOP3, 4
// HFMA2), 32 HMMA, 48 scale constants, ~95 weight staging, ~57 x staging, ~50 folds, zeroing
// and addresses. The first version's loop was 887 SASS (B read
// as predicated LDS.32, shifts not shared); B is now one LDS.128 per two steps without a
// predicate and the qh shifts are shared by sub-blocks i and i + 2. Like the Q4_K kernel it is
// latency-bound in small grids (ncu, 4B down: 14% achieved occupancy, a warp issues every 4.7
// cycles, DRAM 19% of peak).
#include <stdio.h>
#include <type_traits>

#include "kernels/cuda/q6k_i8_body.cuh"
#include "kernels/cuda/q6k_i8_wide.cuh"
#include "kernels/cuda/q6k_mma_body.cuh"

namespace loom_cuda {

// LOOM_GEMM_WIDE_Q6K (runtime.cu): which wide Q6_K kernel launch_wide below runs.
int gemm_wide_q6k_variant();
// LOOM_GEMV_PERSIST (runtime.cu): whether the persistent GEMV may run (launch_persist).
bool gemv_persist();

namespace {

using namespace q6k;

// The block's shared memory for loop body V (2: the INT8 body's, 1: the f16 body's).
template <int NT, int ST, bool NORM, int V>
using Q6KSmem = typename std::conditional<V == 2, Q6I8Smem<NT, ST, NORM>, Q6Smem<NT, ST, NORM>>::type;

// One block = one tile (blockIdx.z), one K share (blockIdx.x of S = gridDim.x: the cluster),
// one token group (blockIdx.y); V picks the loop body: 1 the f16 body's q6k_tile, 2 the INT8
// body's q6k_i8_tile. TL: the weights in LOOM_WEIGHT_Q6K_TILES (the INT8 body only).
// Occupancy: 4 blocks an SM for the GEMV (<= 128 registers), 2 for the GEMM.
template <int NT, int ST, bool NORM, int V, bool TL = false>
static __global__ void __launch_bounds__(kThreads, NT == 1 ? 4 : 2) gemv_mma_q6k(const Q6Args a) {
    static_assert(!TL || V == 2, "tiles: the INT8 body only");
    __shared__ Q6KSmem<NT, ST, NORM, V> sm;
    if constexpr (V == 2)
        q6k_i8_tile<NT, ST, NORM, false, TL>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x,
                                             (int)blockIdx.y * NT);
    else
        q6k_tile<NT, ST, NORM>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x,
                               (int)blockIdx.y * NT);
}

// The traced GEMV (INT8 body; cuda_bench --gemv-trace): slot from gemv_trace_next().
template <bool NORM>
static __global__ void __launch_bounds__(kThreads, 4) gemv_mma_q6k_tr(const Q6Args a,
                                                                     unsigned long long *slot) {
    __shared__ Q6KSmem<1, 2, NORM, 2> sm;
    gt_begin(slot);
    q6k_i8_tile<1, 2, NORM, true>(a, sm, blockIdx.z, (int)blockIdx.x, (int)gridDim.x, 0, slot);
}

// The launch of one instantiation over `groups` token groups and a.tile0[a.nseg] tiles in
// clusters of S blocks along x (TL: the weights in tiles; the traced kernel reads rows).
template <int NT, int ST, int V, bool TL = false>
cudaError_t launch_q6k(const Q6Args &a, bool norm, int S, int64_t groups, cudaStream_t stream) {
    const dim3 grid((unsigned)S, (unsigned)groups, (unsigned)a.tile0[a.nseg]);
    if (NT == 1 && ST == 2 && V == 2 && !TL) {
        if (unsigned long long *slot = gemv_trace_next())
            return launch_cluster(norm ? gemv_mma_q6k_tr<true> : gemv_mma_q6k_tr<false>, grid,
                                  dim3((unsigned)S, 1, 1), kThreads, 0, stream, a, slot);
    }
    return launch_cluster(norm ? gemv_mma_q6k<NT, ST, true, V, TL>
                               : gemv_mma_q6k<NT, ST, false, V, TL>,
                          grid, dim3((unsigned)S, 1, 1), kThreads, 0, stream, a);
}

// The persistent GEMV (q6k_i8_body.cuh q6k_i8_persist): blocks walking the tiles, 4 an SM
// (<= 128 registers) on sm_90, 3 on sm_87, where the tiles' form spilled 24 bytes at 128.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kPersistMinBlocks = 3;
#else
constexpr int kPersistMinBlocks = 4;
#endif
template <bool TL>
static __global__ void __launch_bounds__(kThreads, kPersistMinBlocks) gemv_q6k_persist(const Q6Args a) {
    __shared__ Q6PersistSmem<2> sm;
    q6k_i8_persist<2, TL>(a, sm);
}

// Blocks of kernel k resident on an SM at once (1 where the query fails).
static int persist_occupancy(void (*k)(const Q6Args)) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, kThreads, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 1;
    }
    return n > 0 ? n : 1;
}

// Whether the INT8 GEMV of a runs persistent blocks: one token, S = 1, no folded norm, and its
// tiles more than 4 waves of 4 blocks an SM (the lm head: 9,496 tiles); LOOM_GEMV_PERSIST=0 never.
bool persist_applies(const Q6Args &a, bool norm, int S) {
    return gemv_persist() && !norm && S == 1 && a.n == 1 &&
           a.tile0[a.nseg] > 16 * (int64_t)sm_count();
}

// The persistent GEMV: as many blocks as are resident at once (the occupancy of the kernel as
// built for this GPU), at most one a tile; the same bits as launch_q6k's GEMV.
cudaError_t launch_persist(const Q6Args &a, bool tl, cudaStream_t stream) {
    // (the occupancy of each form, asked once: a property of the binary and the device)
    static const int occ[2] = {persist_occupancy(gemv_q6k_persist<false>),
                               persist_occupancy(gemv_q6k_persist<true>)};
    const int64_t tiles = a.tile0[a.nseg], blocks = (int64_t)occ[tl] * sm_count();
    return launch(tl ? gemv_q6k_persist<true> : gemv_q6k_persist<false>,
                  dim3((unsigned)(blocks < tiles ? blocks : tiles)), kThreads, 0, stream, a);
}

// The wide prefill GEMM (q6k_i8_wide.cuh): one block = 4 tiles (blockIdx.z) x NT tokens
// (blockIdx.y), NBUF x stages, no cluster; S = the GEMV's split of the shape (the partials it
// walks).
template <int NT, int NBUF, bool NORM, bool TL>
static __global__ void __launch_bounds__(kThreads, 2) gemm_wide_q6k(const Q6Args a, int S) {
    __shared__ Q6WideSmem<NT, NBUF, NORM> sm;
    q6k_i8_wide<NT, NBUF, NORM, false, TL>(a, sm, blockIdx.z, S, (int)blockIdx.y * NT);
}

template <int NT, int NBUF, bool TL>
cudaError_t launch_wide_x(const Q6Args &a, bool norm, int S, int64_t quads, cudaStream_t stream) {
    const int64_t groups = (a.n + NT - 1) / NT;
    const dim3 grid(1u, (unsigned)groups, (unsigned)quads);
    return launch(norm ? gemm_wide_q6k<NT, NBUF, true, TL> : gemm_wide_q6k<NT, NBUF, false, TL>,
                  grid, kThreads, 0, stream, a, S);
}

// The limb pre-pass (one block a token, npad blocks) and the wide GEMM reading its limbs.
template <bool NORM>
static __global__ void __launch_bounds__(kThreads) q6_prepass(const float *x, int64_t K, int n,
                                                              const PreNorm norm, uint4 *X,
                                                              float *SI, int npad) {
    q6_limbs_prepass<NORM>(x, K, n, norm, X, SI, npad);
}

template <int NT, int NBUF, bool TL>
static __global__ void __launch_bounds__(kThreads, 2) gemm_wide_pre_q6k(const Q6Args a, int S,
                                                                        const Q6Limbs L) {
    __shared__ Q6WideSmem<NT, NBUF, false> sm;
    q6k_i8_wide<NT, NBUF, false, true, TL>(a, sm, blockIdx.z, S, (int)blockIdx.y * NT, L);
}

// The pre-pass into the kernel scratch (runtime.cu scratch(): grown only outside stream capture;
// q6_limbs_bytes(n, K) bytes), then the wide GEMM at NT tokens reading it. Returns
// cudaErrorMemoryAllocation, having launched nothing, when the scratch is short (the caller
// then runs the wide GEMM that stages x itself).
template <int NT, int NBUF, bool TL>
cudaError_t launch_wide_pre(const Q6Args &a, bool norm, int S, int64_t quads,
                             cudaStream_t stream) {
    void *buf = scratch(q6_limbs_bytes(a.n, a.K), stream);
    if (!buf) return cudaErrorMemoryAllocation;
    Q6Limbs L;
    L.npad = (int)limbs_npad(a.n);
    uint4 *X = static_cast<uint4 *>(buf);
    float *SI = reinterpret_cast<float *>(X + (a.K / 256) * (int64_t)L.npad * 64);
    L.X = X;
    L.SI = SI;
    cudaError_t e = launch(norm ? q6_prepass<true> : q6_prepass<false>, dim3((unsigned)L.npad),
                           kThreads, 0, stream, a.x, a.K, a.n, a.norm, X, SI, L.npad);
    if (e != cudaSuccess) return e;
    const int64_t groups = (a.n + NT - 1) / NT;
    const dim3 grid(1u, (unsigned)groups, (unsigned)quads);
    return launch(gemm_wide_pre_q6k<NT, NBUF, TL>, grid, kThreads, 0, stream, a, S, L);
}

// LOOM_GEMM_WIDE_Q6K (runtime.cu) picks the wide GEMM's form: 2 at 16 tokens a block, 3 at 32,
// 4 at 32 tokens where those blocks number >= 1.5 x SMs (ceil(n / 32) x quads), else at 16;
// 5, 6, 7 (the default) as 2, 3, 4 with x converted to limbs once for the matmul by a pre-pass
// (q6_limbs_prepass, in the kernel scratch; without scratch 2, 3, 4). The same bits in every
// case. (1, session 8's k32 kernel, was removed in session 10: slower in every row.) TL: the
// weights in tiles.
template <bool TL>
cudaError_t launch_wide(const Q6Args &a, bool norm, int S, cudaStream_t stream) {
    const int64_t quads = (a.tile0[a.nseg] + kWarps - 1) / kWarps;
    int v = gemm_wide_q6k_variant();
    // 32-token blocks where they number >= 1.5 x SMs (relay pq6-R2, pre-pass: 32 won the 4B down
    // at N = 512 (640 blocks), the 8B down at N = 128 (256) and the V at N = 512 (256); 16 won the
    // 4B down at N = 128 (160) and every shape at N <= 64)
    const bool fill32 = (a.n + 31) / 32 * quads * 2 >= 3 * (int64_t)sm_count();
    if (v >= 5) {  // the limb pre-pass: 5 at 16 tokens, 6 at 32, 7 by the grid rule
        const cudaError_t e = v == 6 || (v == 7 && fill32)
                                  ? launch_wide_pre<32, 1, TL>(a, norm, S, quads, stream)
                                  : launch_wide_pre<16, 2, TL>(a, norm, S, quads, stream);
        if (e != cudaErrorMemoryAllocation) return e;
        (void)cudaGetLastError();
        v -= 3;  // no scratch (a capture before it was reserved): the same body staging x
    }
    if (v == 3 || (v == 4 && fill32)) return launch_wide_x<32, 1, TL>(a, norm, S, quads, stream);
    return launch_wide_x<16, 2, TL>(a, norm, S, quads, stream);
}

// LOOM_GEMM_WIDE (runtime.cu, mma_common.cuh gemm_wide_from): the INT8 body's GEMM from that
// many tokens on runs q6k_i8_wide.cuh's 64-row blocks (the same bits); "on" (1) means from
// kWideMinN tokens, where it measured faster (bench/NOTES.md 2.1, session 8). 0: never.
int wide_from() { return gemm_wide_from(kWideMinN); }

}  // namespace

// The loop body mma_q6k_matmul runs for n tokens: the switch's (1 f16, 2 INT8), but a triple's
// Q6_K segments (f16) in rows keep the f16 body below kWideMinN tokens, where their GEMM gives the
// one-launch decode triple's bits token by token (matmul.cuh); from kWideMinN tokens on they take
// the switch's body like any Q6_K matmul (the INT8 wide GEMM: the 4B V, 1024 x 2560, at N = 512
// 64 us against the f16 8-token GEMM's 226, H200, bench/NOTES.md 7.18). Whatever LOOM_GEMM_WIDE
// says, so that wide == 8-token GEMM bits hold for a triple too. (Also the scratch rule's, below.)
// Tiles (LOOM_WEIGHT_Q6K_TILES) always take the INT8 body, the only one that reads them.
static int q6k_body(bool f16, int64_t n, bool tiles) {
    return tiles ? 2 : f16 && n < kWideMinN ? 1 : mma_q6k_variant();
}
// Tokens a launch of mma_q6k_matmul at most (token groups of kGemmTok: 65535 a launch).
static constexpr int64_t kPerLaunch = 65535 * (int64_t)kGemmTok;
bool mma_q6k_seg_ok(const Seg &s) {
    return s.type == LOOM_GGML_Q6_K && ((uintptr_t)s.w % 16) == 0 && s.row_bytes % 2 == 0 &&
           s.row_bytes <= (int64_t)1 << 26;
}

loom_status mma_q6k_matmul(const Seg *seg, int nseg, int epi, const float *x, int64_t K,
                           int64_t n, const PreNorm *norm, bool f16, loom_error *err,
                           cudaStream_t stream) {
    if (n <= 0) return LOOM_OK;
    if (nseg < 1 || nseg > 3 || (epi != EPI_PLAIN && epi != EPI_ADD) || (epi == EPI_ADD && nseg != 1))
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "matmul (mma Q6_K): %d segments with epilogue %d",
                 nseg, epi);
    Q6Args a = {};
    int64_t tiles = 0;
    a.nseg = nseg;
    const bool tl = seg[0].tiles != 0;
    for (int i = 0; i < nseg; i++) {
        if ((seg[i].tiles != 0) != tl)  // (route_segments keeps them apart)
            ARG_FAIL(LOOM_ERR_UNSUPPORTED, "matmul (mma Q6_K): segments in two layouts");
        a.seg[i] = seg[i];
        a.tile0[i] = tiles;
        tiles += (seg[i].rows + kTileRows - 1) / kTileRows;
    }
    a.tile0[nseg] = tiles;
    if (tiles == 0) return LOOM_OK;
    if (tiles > 65535)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "matmul (mma Q6_K): %lld row tiles > 65535", (long long)tiles);
    a.epi = epi;
    a.x = x;
    a.K = K;
    if (norm) a.norm = *norm;
    const bool nm = norm != nullptr;
    const int S = mma_pick_split(tiles, K / 256);  // gemv_mma.cu's rule
    // LOOM_GEMV_MMA_Q6K_V (runtime.cu): 1 = the f16 body (q6k_tile), 2 = the INT8 body
    // (q6k_i8_body.cuh: other bits, GEMM token == GEMV still).
    // f16: a triple's Q6_K segments in rows keep the f16 body below kWideMinN tokens (q6k_body).
    const int var = q6k_body(f16, n, tl);
    const int wide = var == 2 ? wide_from() : 0;  // the INT8 body's wide GEMM from this n on
    for (int64_t t0 = 0; t0 < n; t0 += kPerLaunch) {
        const int64_t nn = n - t0 < kPerLaunch ? n - t0 : kPerLaunch;
        const Q6Args b = token_slice(a, t0, nn);
        const int64_t groups = nn == 1 ? 1 : (nn + kGemmTok - 1) / kGemmTok;
        cudaError_t e;
        if (var == 2 && wide > 0 && nn >= wide)
            e = tl ? launch_wide<true>(b, nm, S, stream) : launch_wide<false>(b, nm, S, stream);
        else if (var == 2 && persist_applies(b, nm, S)) e = launch_persist(b, tl, stream);
        else if (var == 2 && tl) e = nn > 1 ? launch_q6k<kGemmTok, 1, 2, true>(b, nm, S, groups, stream)
                                       : launch_q6k<1, 2, 2, true>(b, nm, S, groups, stream);
        else if (var == 2) e = nn > 1 ? launch_q6k<kGemmTok, 1, 2>(b, nm, S, groups, stream)
                                 : launch_q6k<1, 2, 2>(b, nm, S, groups, stream);
        else e = nn > 1 ? launch_q6k<kGemmTok, 1, 1>(b, nm, S, groups, stream)
                        : launch_q6k<1, 2, 1>(b, nm, S, groups, stream);
        CUDA_CHECK(e);
    }
    return LOOM_OK;
}

// The scratch a Q6_K mma matmul of n tokens over K columns takes (the limb pre-pass of the wide
// GEMM), by mma_q6k_matmul's own rule: the INT8 body (q6k_body: not a triple's V in rows below
// kWideMinN tokens), n at or above the wide threshold, a pre-pass form of LOOM_GEMM_WIDE_Q6K.
size_t mma_q6k_scratch_bytes(int64_t n, int64_t K, bool f16, bool tiles) {
    const int var = q6k_body(f16, n, tiles);
    const int wide = wide_from();  // 0 or >= 2
    if (var != 2 || wide == 0 || n < wide || K < 256 || gemm_wide_q6k_variant() < 5) return 0;
    return q6k::q6_limbs_bytes(n < kPerLaunch ? n : kPerLaunch, K);  // the largest launch
}

}  // namespace loom_cuda
