// runtime.cu: module services of kernels/cuda: the CUDA error recorder behind CUDA_CHECK, the
// fast-path switches (and LOOM_CUDA_PDL, programmatic dependent launch; LOOM_CUDA_CARVEOUT, the
// shared-memory carveout set on each kernel before its launch), the log-once fallback
// message, the device scratch for split-KV attention and two-pass softmax/argmax, and the
// multiprocessor count. No kernels live here.
//
// Invariants: the switches are read from the environment once (first use) unless
// loom_cuda_reload_switches() is called; the scratch only grows, and never while a stream is
// being captured (a graph must not contain a pointer that a later growth frees).
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

loom_status cuda_fail(loom_error *err, cudaError_t e, const char *stmt, const char *func,
                      const char *file, int line) {
    (void)cudaGetLastError();  // clear a sticky launch error so later calls report their own
    return loom_error_set(err, LOOM_ERR_CUDA, "cuda: %s failed: %s (%s) in %s (%s:%d)", stmt,
                          cudaGetErrorName(e), cudaGetErrorString(e), func, file, line);
}

static std::mutex g_mu;
static bool g_switch_read = false;
static bool g_switch[SW_COUNT];
// Passes a GEMV warp prefetches; 0 = by type (bench/NOTES.md: Q4_K/Q5_K 2, others 4).
static const int kDefaultUnroll = 0;
static int g_unroll = kDefaultUnroll;
static int g_mma_split = 0;  // 0 = by shape (gemv_mma.cu)
static int g_pair_warps = 0;  // 0 = by shape (gemv_mma.cu pair_warps)
// The Q6_K mma matmul's loop body (gemv_mma_q6k.cu, LOOM_GEMV_MMA_Q6K_V): 1 = the f16 body (x
// staged so each mma step's B registers are a pair, the rows' loads sharing one base), 2 = the
// INT8 body (q6k_i8_body.cuh; other bits, same tolerance), the default: relay mix-R3, 4B decode
// 2.144 / 2.160 / 2.146 ms/token with every Q6_K matmul on it against 2.183 / 2.180 / 2.182 with
// 1. A triple's Q6_K segments in rows keep the f16 body below 64 tokens whatever this says (gemv.cu:
// inside the mixed Q4_K_M triple kernel the f16 V measured faster, 7.2 vs 9.2 us the 4B triple;
// bench/NOTES.md 2.3; from 64 tokens this body, gemv_mma_q6k.cu q6k_body). 0 (session 3's f16
// loop order, the same bits as 1, slower in every row of relay q6i-R4, bench/NOTES.md 2.1) was
// removed in session 11: 0, like any value but 1 and 2, selects the default.
static const int kDefaultQ6kVariant = 2;
static int g_q6k_variant = kDefaultQ6kVariant;
// The Q4_K mma matmuls' loop body (gemv_mma.cu, LOOM_GEMV_MMA_Q4K_V): 1 = the f16 hi + lo body
// (v11), 2 = the INT8 body (q4k_i8_body.cuh; other bits, same tolerance). Every Q4_K mma matmul
// follows it, the GEMM and the mixed triple too. 2 is the default since session 9, when its
// prefill GEMM became wide (gemm_wide_q4k_i8): `loom bench -p 512 -n 128` on the 4B Q4_K_M model
// with LOOM_GEMM_WIDE_Q6K=7, V = 1 / 2: 6,731 / 6,327 tokens/s, 2.033 / 1.985 ms/token
// (bench/NOTES.md 2.4 and 7.16).
static const int kDefaultQ4kVariant = 2;
static int g_q4k_variant = kDefaultQ4kVariant;
// The Q4_K_M triple's GEMV (Q4_K Q/K + Q6_K V) in one launch (gemv_mma.cu's mixed kernel,
// LOOM_GEMV_TRIPLE_MIXED=1, the default: 4B decode 2.180 vs 2.300 ms/token, bench/NOTES.md
// 2.3; 2 / 3: its Q6_K tiles forced last / first) or as the two launches (0); the same bits.
static const int kDefaultTripleMixed = 1;
static int g_triple_mixed = kDefaultTripleMixed;
// The persistent Q6_K GEMV for matrices of many waves (gemv_mma_q6k.cu: the lm head):
// LOOM_GEMV_PERSIST=0 keeps the one-tile blocks.
static bool g_gemv_persist = true;
// The wide prefill GEMMs (LOOM_GEMM_WIDE; gemv_mma.cu, q6k_i8_wide.cuh; session 8): 0 = off (the
// GEMM in groups of 8 tokens), 1 = on from each family's measured threshold (Q4_K from 16
// tokens, on the INT8 body where the wide blocks number at least 0.4 x the SMs: gemv_mma.cu
// q4_plan, session 11; Q6_K from 64 tokens; the default: `loom bench -p 512` on the 4B Q4_K_M
// model 3,042 -> 5,960 tokens/s, decode unchanged, bench/NOTES.md 4), n >= 2 = on from n tokens
// (measurements). Same bits either way.
static const int kDefaultGemmWide = 1;
static int g_gemm_wide = kDefaultGemmWide;
// The wide GEMM on the INT8 Q4_K body (LOOM_GEMM_WIDE_Q4K_I8; gemv_mma.cu gemm_wide_q4k_i8):
// 5 = x converted to limbs once a matmul by a pre-pass into the kernel scratch, which the blocks
// copy (launch_wide_pre; session 11), 4 = each block stages x itself (session 9: 16 tokens, 3
// blocks an SM for one matrix; the pair at 16), what 5 runs where the scratch cannot grow (a
// capture). The same bits always. 5 is the default: relay pre-R1 (bench/NOTES.md 2.4), 4B N =
// 512 O + add 272 -> 171 us, ffn down + add 608 -> 375, Q+K normed 385 -> 197, the pair normed
// 1,098 -> 633; 31-52% faster at every N of 16..512. Removed, measured slower: 2 (the min term
// by the GEMV's IMMA) and 3 (the pair at 32 tokens) in session 10, 1 (one matrix at 32 tokens)
// in session 11: those values (and any other) select the default.
static const int kDefaultGemmWideQ4kI8 = 5;
static int g_gemm_wide_q4k_i8 = kDefaultGemmWideQ4kI8;
// The wide Q6_K GEMM's form (LOOM_GEMM_WIDE_Q6K; gemv_mma_q6k.cu launch_wide, q6k_i8_wide.cuh;
// session 9): 2 = 16 tokens a block, 3 = 32 tokens, 4 = 32 tokens where those blocks number >=
// 1.5 x SMs, else 16; 5 / 6 / 7 = 2 / 3 / 4 with x converted to limbs once a matmul by a pre-pass
// into the kernel scratch (q6_limbs_bytes; without it 2 / 3 / 4). The same bits under every value.
// Relay pq6-R3 (H200): 7 is the fastest in every row (4B down + add N = 512 848 -> 499 us, 8B
// 2145 -> 1093, V normed 120 -> 65), bench/NOTES.md 2.1; the default since session 9's final
// call: `loom bench -p 512` 6,189 -> 6,731 tokens/s, decode within noise (bench/NOTES.md 7.16).
// 1 (session 8's k32 kernel, slower in every row) was removed in session 10: 1 selects the
// default, like any value outside 2..7.
static const int kDefaultGemmWideQ6k = 7;
static int g_gemm_wide_q6k = kDefaultGemmWideQ6k;
// The wide Q8_0 GEMM's x staging (LOOM_GEMM_WIDE_Q8; gemv_mma_q8.cu q8_wide, session 36): 2 =
// its tokens' int8 limbs converted once a matmul by a pre-pass into the kernel scratch, which
// the blocks copy; 1 = each block stages x itself (session 35's staging), what 2 runs where the
// scratch cannot grow. The same bits either way. 2 is the default: bench/NOTES.md 2.8.
static const int kDefaultGemmWideQ8 = 2;
static int g_gemm_wide_q8 = kDefaultGemmWideQ8;
static bool g_pdl = false;
// The shared-memory carveout every kernel prefers (LOOM_CUDA_CARVEOUT, percent of the maximum;
// -1 = cudaSharedmemCarveoutDefault, the driver's choice a kernel). The driver sizes an SM's
// shared memory for the kernel it runs, and an SM changes that size only once it is empty: in
// the decode step, whose kernels need 8-72 KB a block, a kernel whose blocks need another
// carveout than its predecessor's cannot become resident beside that one's tail (programmatic
// dependent launch) but waits for its SMs to drain. One carveout for every kernel avoids it; 78
// is the measured best on the H200 (bench/NOTES.md 7, session 20: 4B decode after 512 tokens
// 1.5765 -> 1.5645 ms/token, 72-74 alike, 71 like the driver's choice and lower values slower,
// 82 and above 3-5% slower: less L1 for the register-loading GEMVs, whose loads in flight take
// L1 lines), so it is the default on compute capability 9.x; elsewhere (sm_87 not measured) the
// driver's choice.
static int g_carveout = -1;
static int g_l2_fetch = -1;  // bytes, -1: the driver's choice (loom_cuda_apply_l2_fetch)
// Decode attention: blocks per SM the split choice aims at. 1 measured best on the H200
// (bench/NOTES.md section 3, v4: each split costs ~0.3 us, so fewer and longer splits win).
static const int kDefaultAttnBpsm = 1;
static int g_attn_bpsm = kDefaultAttnBpsm;
// Decode attention on sm_90: the largest cache (in 32-row tiles) whose splits run as one
// cluster (v6: 128 = 4K positions, bench/NOTES.md section 3). (LOOM_ATTN_PREFETCH=1, v6's L2
// prefetch before the PDL wait, opt-in and slower in the decode-layer graph, was removed in
// session 11: the variable is no longer read.)
static const int kDefaultAttnClTiles = 128;
static int g_attn_cl_tiles = kDefaultAttnClTiles;
// Decode attention v6: its F16 head_dim-128 tiles copied by TMA boxes instead of cp.async
// (session 7; opt-in until session 17, whose A/B in the real step, with the early copies of
// session 12, measured 4B decode 1.668 -> 1.656 ms/token at ~576 positions and 1.836 -> 1.810
// at ~3,600, bench/NOTES.md 7 "Session 17"); LOOM_ATTN_TMA=0 keeps cp.async.
static bool g_attn_tma = true;
// Prefill attention (N > 1): LOOM_ATTN_PREFILL=1 the tensor-core prefill kernel of
// attention_prefill.cu (session 8; 2: its 8-warp form, KV halves, sm_90), 0 the v5 path (a
// block a token). 1 is the default: kernel rows (4B shape, F16 N = 512) 124 -> 31.0 us at pos0
// 0 and 590 -> 115.6 after 1536 positions (2: 27.4 / 127.4, so it holds only without a
// context); `loom bench -p 512` with the wide GEMMs 5,960 -> 6,197 tokens/s (bench/NOTES.md
// section 3, "Session 8, pfa", and 7.15).
static const int kDefaultAttnPrefill = 1;
static int g_attn_prefill = kDefaultAttnPrefill;

// Whether environment variable `name` is set to `value`.
static bool env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

// Environment variable `name` as an integer in lo .. hi (a power of two too when pow2), else dflt.
static int env_int(const char *name, int lo, int hi, bool pow2, int dflt) {
    const char *s = getenv(name);
    if (!s) return dflt;
    const int v = atoi(s);
    return v >= lo && v <= hi && (!pow2 || (v & (v - 1)) == 0) ? v : dflt;
}

static void read_switches_locked() {
    static const char *names[SW_COUNT] = {"LOOM_FAST_GEMV", "LOOM_Q4K_UINT32_LOADS",
                                          "LOOM_FAST_EMBD", "LOOM_FAST_NORM", "LOOM_FAST_ATTN",
                                          "LOOM_GEMV_MMA", "LOOM_GEMV_MMA_Q6K", "LOOM_ATTN_V6",
                                          "LOOM_ATTN_FUSED", "LOOM_GEMV_MMA_Q8"};
    // (Removed in session 11, each slower in every row, so these variables are no longer read
    // and 0 gets the default: LOOM_GEMV_V8=0, v7's Q4_K/Q5_K scale decode in the warp-per-row
    // kernels, bench/NOTES.md 2 v8; LOOM_ATTN_V4=0, decode attention v3's fast form, and
    // LOOM_ATTN_V5=0, v4 on F16/INT8 caches of head_dim 64/128, bench/RESULTS.md "Decode
    // attention v5" and "v6".)
    for (int i = 0; i < SW_COUNT; i++) g_switch[i] = !env_is(names[i], "0");
    // LOOM_ATTN_FUSED (the attention prologue folded into decode attention v6) is on like the
    // others: with its RoPE angles once a lane, the 4B decode step measured 2.119 / 2.116
    // ms/token against 2.197 / 2.188 for the two launches (relay att-R3, bench/NOTES.md 7.10).
    g_unroll = env_int("LOOM_GEMV_UNROLL", 1, 4, true, kDefaultUnroll);  // gemv.cu's: 1, 2, 4
    // Programmatic dependent launch needs compute capability 9.0 (common.cuh: launch()). On
    // unless LOOM_CUDA_PDL=0: with decode attention launched in order it saved ~0.08 ms of a
    // 4B decode step (bench/NOTES.md 7.9); since session 12 decode attention v6 has it too, its
    // first KV tiles requested before its wait (NOTES section 3).
    g_pdl = !env_is("LOOM_CUDA_PDL", "0") && cc_major() >= 9;
    g_carveout = env_int("LOOM_CUDA_CARVEOUT", -1, 100, false, cc_major() == 9 ? 78 : -1);
    // The L2's DRAM fetch granularity: 128 bytes on sm_90, where the driver's is 64 (4B decode
    // -0.9..-1.6%, the decode-layer GEMVs -3%; bench/NOTES.md 7 session 24).
    g_l2_fetch = env_int("LOOM_CUDA_L2_FETCH", -1, 128, false, cc_major() == 9 ? 128 : -1);
    g_mma_split = env_int("LOOM_GEMV_MMA_SPLIT", 1, 8, true, 0);
    g_pair_warps = env_int("LOOM_GEMV_PAIR_WARPS", 3, 4, false, 0);
    g_q6k_variant = env_int("LOOM_GEMV_MMA_Q6K_V", 1, 2, false, kDefaultQ6kVariant);
    g_q4k_variant = env_int("LOOM_GEMV_MMA_Q4K_V", 1, 2, false, kDefaultQ4kVariant);
    g_triple_mixed = env_int("LOOM_GEMV_TRIPLE_MIXED", 0, 3, false, kDefaultTripleMixed);
    g_gemv_persist = !env_is("LOOM_GEMV_PERSIST", "0");
    g_gemm_wide = env_int("LOOM_GEMM_WIDE", 0, 1 << 30, false, kDefaultGemmWide);
    const int q4i8 = env_int("LOOM_GEMM_WIDE_Q4K_I8", 4, 5, false, kDefaultGemmWideQ4kI8);
    g_gemm_wide_q4k_i8 = q4i8;  // 4 or 5 (1, 2, 3: removed)
    g_gemm_wide_q6k = env_int("LOOM_GEMM_WIDE_Q6K", 2, 7, false, kDefaultGemmWideQ6k);
    g_gemm_wide_q8 = env_int("LOOM_GEMM_WIDE_Q8", 1, 2, false, kDefaultGemmWideQ8);
    g_attn_bpsm = env_int("LOOM_ATTN_BPSM", 1, 16, false, kDefaultAttnBpsm);
    g_attn_cl_tiles = env_int("LOOM_ATTN_CL_TILES", 0, 1 << 25, false, kDefaultAttnClTiles);
    g_attn_tma = !env_is("LOOM_ATTN_TMA", "0");
    g_attn_prefill = env_int("LOOM_ATTN_PREFILL", 0, 2, false, kDefaultAttnPrefill);
    g_switch_read = true;
}

// After the first read the switches only change through loom_cuda_reload_switches(), so a
// launcher reads them without the lock once g_switch_ready is set (acquire pairs with release).
static std::atomic<bool> g_switch_ready{false};

static void ensure_switches() {
    if (g_switch_ready.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_switch_read) read_switches_locked();
    g_switch_ready.store(true, std::memory_order_release);
}

bool fast(Switch s) {
    ensure_switches();
    return g_switch[s];
}

int gemv_unroll() {
    ensure_switches();
    return g_unroll;
}

bool pdl_on() {
    ensure_switches();
    return g_pdl;
}

cudaError_t prefer_carveout(const void *kernel) {
    ensure_switches();
    // No lock and no lookup a launch while the driver's choice holds everywhere (sm_87's
    // default, LOOM_CUDA_CARVEOUT=-1): nothing to set, nothing set earlier to undo.
    static std::atomic<bool> any_set{false};
    if (g_carveout < 0 && !any_set.load(std::memory_order_acquire)) return cudaSuccess;
    static std::mutex mu;
    static std::unordered_map<const void *, int> set;  // the carveout set on each kernel
    std::lock_guard<std::mutex> lock(mu);
    auto it = set.find(kernel);
    if (it == set.end() ? g_carveout < 0 : it->second == g_carveout) return cudaSuccess;
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, g_carveout);
    if (e == cudaSuccess) {
        set[kernel] = g_carveout;
        any_set.store(true, std::memory_order_release);
    }
    return e;
}

int gemv_mma_split() {
    ensure_switches();
    return g_mma_split;
}

int gemv_pair_warps() {
    ensure_switches();
    return g_pair_warps;
}

// (declared in common.cuh: gemv_mma_q6k.cu, gemv.cu's tiles rule)
int mma_q6k_variant() {
    ensure_switches();
    return g_q6k_variant;
}

// (declared in common.cuh)
int mma_q4k_variant() {
    ensure_switches();
    return g_q4k_variant;
}

// (declared in mma_common.cuh: the tensor-core GEMMs)
int gemm_wide_min() {
    ensure_switches();
    return g_gemm_wide;
}

// (declared in gemv_mma.cu, its only user)
int gemm_wide_q4k_i8_form() {
    ensure_switches();
    return g_gemm_wide_q4k_i8;
}

// (declared in gemv_mma_q6k.cu, its only user)
int gemm_wide_q6k_variant() {
    ensure_switches();
    return g_gemm_wide_q6k;
}

// (declared in gemv_mma_q8.cu, its only user)
int gemm_wide_q8_form() {
    ensure_switches();
    return g_gemm_wide_q8;
}

// (declared in gemv.cu and gemv_mma.cu, its users)
int gemv_triple_mixed() {
    ensure_switches();
    return g_triple_mixed;
}

// (declared in gemv_mma_q6k.cu, its only user)
bool gemv_persist() {
    ensure_switches();
    return g_gemv_persist;
}

// (declared in attention.cu, their only user)
int attn_cluster_tiles() {
    ensure_switches();
    return g_attn_cl_tiles;
}

bool attn_tma() {
    ensure_switches();
    return g_attn_tma;
}

int attn_prefill() {
    ensure_switches();
    return g_attn_prefill;
}

int attn_blocks_per_sm() {
    ensure_switches();
    return g_attn_bpsm;
}

void log_fallback_once(int *key, const char *what, const loom_error *why) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (*key) return;
    *key = 1;
    fprintf(stderr, "loom cuda: %s fast path failed (%s), using the simple path\n", what,
            why ? why->msg : "unknown");
}

static void *g_scratch = nullptr;
static size_t g_scratch_bytes = 0;

void *scratch(size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (bytes <= g_scratch_bytes) return g_scratch;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return nullptr;
    }
    // The old scratch may still be in use by queued work: wait for the device before freeing.
    if (g_scratch) {
        if (cudaDeviceSynchronize() != cudaSuccess) return nullptr;
        cudaFree(g_scratch);
        g_scratch = nullptr;
        g_scratch_bytes = 0;
    }
    if (cudaMalloc(&g_scratch, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        g_scratch = nullptr;
        return nullptr;
    }
    g_scratch_bytes = bytes;
    return g_scratch;
}

int sm_count() {
    static int n = 0;
    if (n == 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
            n = v;
        else
            n = 16;
    }
    return n;
}

int cc_major() {
    static int major = -1;
    if (major < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
            major = v;
        else
            major = 0;
        (void)cudaGetLastError();
    }
    return major;
}

}  // namespace loom_cuda

extern "C" loom_status loom_cuda_reserve_scratch(size_t bytes, loom_error *err) {
    if (loom_cuda::scratch(bytes, nullptr) == nullptr && bytes > 0)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY,
                              "cuda: cannot reserve %zu bytes of kernel scratch", bytes);
    return LOOM_OK;
}

// Split-KV: D + 2 floats per (head, token, split), and attention.cu keeps tokens x splits <=
// 128 whatever N is; softmax: a float2 per (row, 4096-value chunk); argmax: a float and an
// int64 per (row, chunk) (softmax.cu), so 12 bytes per (row, chunk) covers both.
extern "C" size_t loom_cuda_scratch_bytes_for(int64_t n_head, int64_t head_dim, int64_t rows,
                                              int64_t n) {
    const int64_t max_token_splits = 128, chunk = 4096;
    size_t attn =
        (size_t)n_head * (size_t)max_token_splits * (size_t)(head_dim + 2) * sizeof(float);
    size_t sm = (size_t)rows * (size_t)((n + chunk - 1) / chunk) *
                (sizeof(float) + sizeof(int64_t));
    return attn > sm ? attn : sm;
}

// The captured graphs of the executor keep the scratch pointer; it compares this before replay.
extern "C" const void *loom_cuda_scratch_base(void) {
    std::lock_guard<std::mutex> lock(loom_cuda::g_mu);
    return loom_cuda::g_scratch;
}

extern "C" void loom_cuda_release_scratch(void) {
    std::lock_guard<std::mutex> lock(loom_cuda::g_mu);
    if (loom_cuda::g_scratch) cudaFree(loom_cuda::g_scratch);
    loom_cuda::g_scratch = nullptr;
    loom_cuda::g_scratch_bytes = 0;
}

extern "C" int loom_cuda_carveout(void) {
    loom_cuda::ensure_switches();
    return loom_cuda::g_carveout;
}

extern "C" int loom_cuda_l2_fetch(void) {
    loom_cuda::ensure_switches();
    return loom_cuda::g_l2_fetch;
}

extern "C" loom_status loom_cuda_apply_l2_fetch(loom_error *err) {
    const int bytes = loom_cuda_l2_fetch();
    if (bytes < 0) return LOOM_OK;
    CUDA_CHECK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, (size_t)bytes));
    return LOOM_OK;
}

// Not while launches run on other threads (they read the switches without the lock).
extern "C" void loom_cuda_reload_switches(void) {
    std::lock_guard<std::mutex> lock(loom_cuda::g_mu);
    loom_cuda::read_switches_locked();
}
