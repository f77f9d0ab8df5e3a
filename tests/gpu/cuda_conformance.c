/* cuda_conformance.c: every CUDA kernel of kernels/cuda against its CPU twin (kernels/cpu), on
 * fresh random inputs over many shapes. A plain C program (the GPU machine has no Criterion):
 * it prints one table row per case (kernel, shape, measured error, tolerance, verdict) and
 * exits non-zero when any case fails or any CUDA call fails.
 *
 *   cuda_conformance [--quick] [--attn] [--matmul] [--normed] [--fused] [--mixed] [--q6k]
 *                    [--q4k] [--prefill] [--wide] [--tiles] [--seed N]
 *
 * --quick keeps a reduced shape set (for compute-sanitizer, which is 10-100x slower); --attn
 * runs only the kv_write and attention cases (and the refusals; with LOOM_ATTN_BPSM=... to
 * sweep split counts); --matmul only the matmul family (its variant switches in the environment);
 * --normed only the matmul family's _normed launchers (the RMSNorm folded in); --fused only
 * rope_kv_attention_at (the attention prologue folded into decode attention); --mixed only the
 * Q4_K_M triple in one launch (LOOM_GEMV_TRIPLE_MIXED); --q6k only the Q6_K matmuls (both bodies);
 * --q6k-wide only the wide Q6_K GEMM (LOOM_GEMM_WIDE on the INT8 body; --q6k, --matmul and the
 * full run include it); --q4k only the Q4_K matmuls on the INT8 body (LOOM_GEMV_MMA_Q4K_V=2; --matmul and the full
 * run include them, --mixed its one-launch triple); --prefill only the prefill attention cases
 * (both LOOM_ATTN_PREFILL values; --attn and the full run include them); --wide only the wide
 * prefill GEMM (LOOM_GEMM_WIDE: == the old GEMM's bits, CPU twin, GEMM token == GEMV; --matmul
 * and the full run include it); --tiles only weights in LOOM_WEIGHT_Q4K_TILES and
 * LOOM_WEIGHT_Q6K_TILES (the layout changes == their CPU twins, every Q4_K and Q6_K launcher ==
 * itself on the rows, bit for bit; the refusals; the persistent Q6_K GEMV == the one-tile one in
 * both layouts; --matmul and the full run include it).
 * Outputs are poisoned (all bytes 0xFF, a NaN pattern) before every GPU run, so an unwritten
 * element fails. Tolerances are those of the kernels' contracts (cpu_kernels.h, the .cu files):
 *   matmul family: per element |d| <= 1e-5 * sum_k |W x| (+1e-30); GEMM token == GEMV (bits);
 *                  the _normed launchers (RMSNorm folded in): the same against their CPU twins
 *                  (x' the CPU-normed x), == rms_norm + the plain launcher (bits), GEMM token ==
 *                  normed GEMV (bits), on every path (mma, rows, simple, scalar norm order);
 *                  Q4_K/Q5_K byte path == word path (bits); simple path == fast path (bits);
 *                  Q4_K and Q6_K (and the fused variants) on both the tensor-core paths
 *                  (default) and LOOM_GEMV_MMA=0, each against the CPU twin (the two are not
 *                  bit-identical); the Q6_K cases again on the f16 body
 *                  (LOOM_GEMV_MMA_Q6K_V=1; the default is the INT8 body but for a triple's
 *                  V below 64 tokens: mma shapes, add, triple, normed; same tolerance, GEMM token == GEMV
 *                  bits); the Q4_K_M triple in one launch == its two launches (bits),
 *                  GEMM token == that GEMV (bits), the one launch taken at the 4B/8B shapes
 *   rms_norm 1e-5 relative; rope 1e-4 absolute; attention 1e-4 * max|out| (prefill with
 *   LOOM_ATTN_PREFILL=1 and =0 too; decode bits unchanged by that switch);
 *   softmax 1e-6 relative + 1e-12; silu/swiglu 1e-6 relative;
 *   kv_write, embed, argmax, add, mul, bias_add, add/mul_bcast, f16<->f32: bit-exact;
 *   a chain of dependent launches with and without programmatic dependent launch: exact;
 *   rope_kv_write: q_out 1e-4 * max(1, max|q_out|), K cache that + one F16/INT8 rounding step,
 *                  V cache bit-exact, also replayed from one CUDA-graph capture;
 *   rope_kv_attention_at (fused) == rope_kv_write + attention_at: out, K/V caches, INT8 scales
 *                  bit for bit, and the fused launch taken exactly where it is promised.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/quant/quant.h"
#include "tests/gpu/cuda_check.h"

/* ---- harness ------------------------------------------------------------------------------ */
static int g_only_pf = 0; /* --prefill: the prefill attention section only */
static int g_quick = 0, g_fail = 0, g_cases = 0, g_only_attn = 0, g_only_mm = 0, g_only_normed = 0;
static int g_only_q6w = 0; /* --q6k-wide */
static int g_only_tiles = 0; /* --tiles */
static int g_only_fused = 0, g_only_mixed = 0, g_only_q6k = 0, g_only_q4k = 0, g_only_wide = 0;
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;


static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float urand(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}
static void fill(float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) x[i] = urand(lo, hi);
}
/* n tokens of K values in [-1, 1), token t scaled by 2^((5t mod 13) - 6): magnitudes 2^-6 .. 2^6. */
static void fill_tokens(float *x, int64_t n, int64_t K) {
    fill(x, n * K, -1, 1);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < K; k++) x[t * K + k] = ldexpf(x[t * K + k], (int)(t * 5 % 13) - 6);
}
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "FATAL out of host memory\n"); exit(2); }
    return p;
}
static void *dup_dev(const void *h, size_t n) {
    void *d = NULL;
    CK(cudaMalloc(&d, n ? n : 16));
    if (n) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}
static void *dev_poison(size_t n) {
    void *d = NULL;
    CK(cudaMalloc(&d, n ? n : 16));
    CK(cudaMemset(d, 0xFF, n ? n : 16));
    return d;
}
static void to_host(void *h, const void *d, size_t n) {
    CK(cudaDeviceSynchronize());
    if (n) CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
}

static void report(const char *kernel, const char *shape, double err, double tol) {
    int ok = err <= tol; /* NaN fails */
    g_cases++;
    if (!ok) g_fail++;
    printf("%-22s %-44s %11.3e %10.1e  %s\n", kernel, shape, err, tol, ok ? "ok" : "FAIL");
    fflush(stdout);
}
static void report_status(const char *kernel, const char *shape, loom_status st,
                          const loom_error *err) {
    if (st == LOOM_OK) return;
    g_cases++;
    g_fail++;
    printf("%-22s %-44s launcher failed: %s\n", kernel, shape, err->msg);
}
/* bit-exact comparison: reports the count of differing bytes */
static void report_bits(const char *kernel, const char *shape, const void *a, const void *b,
                        size_t n) {
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    report(kernel, shape, (double)diff, 0.0);
}
static void set_switch(const char *name, const char *v) {
    setenv(name, v, 1);
    loom_cuda_reload_switches();
}

/* Back to the switch's default (the variable unset). */
static void reset_switch(const char *name) {
    unsetenv(name);
    loom_cuda_reload_switches();
}

/* A switch's value as a section found it (set: the variable was set then), for restore_switch. */
typedef struct {
    const char *name;
    int set;
    char value[32];
} saved_switch;

static saved_switch save_switch(const char *name) {
    saved_switch sv = {name, 0, ""};
    const char *v = getenv(name);
    if (v) {
        sv.set = 1;
        snprintf(sv.value, sizeof sv.value, "%s", v);
    }
    return sv;
}

/* Back to the value save_switch found, or to the default if the variable was unset. */
static void restore_switch(const saved_switch *sv) {
    if (sv->set) set_switch(sv->name, sv->value);
    else reset_switch(sv->name);
}

/* ---- random weights --------------------------------------------------------------------- */
static const loom_ggml_type k_types[] = {LOOM_GGML_Q4_K, LOOM_GGML_Q5_K, LOOM_GGML_Q6_K,
                                         LOOM_GGML_Q8_0, LOOM_GGML_F16, LOOM_GGML_BF16,
                                         LOOM_GGML_F32};
enum { N_TYPES = sizeof k_types / sizeof k_types[0] };

static void put_f16(uint8_t *p, float v) {
    uint16_t h = loom_fp32_to_fp16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

/* M rows of K random values of type t: every quant bit pattern is valid, so the blocks are
 * random bytes with finite, modest f16 scales patched in. */
static uint8_t *rand_weights(loom_ggml_type t, int64_t M, int64_t K, size_t *bytes) {
    int64_t rb = loom_ggml_row_bytes(t, K);
    *bytes = (size_t)(M * rb);
    uint8_t *w = xmalloc(*bytes);
    for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)rnd();
    int64_t nv = M * K;
    switch (t) {
    case LOOM_GGML_F32:
        for (int64_t i = 0; i < nv; i++) ((float *)w)[i] = urand(-1, 1);
        break;
    case LOOM_GGML_F16:
        for (int64_t i = 0; i < nv; i++) ((uint16_t *)w)[i] = loom_fp32_to_fp16(urand(-1, 1));
        break;
    case LOOM_GGML_BF16:
        for (int64_t i = 0; i < nv; i++) ((uint16_t *)w)[i] = loom_fp32_to_bf16(urand(-1, 1));
        break;
    case LOOM_GGML_Q8_0:
        for (int64_t b = 0; b < nv / 32; b++) put_f16(w + b * 34, urand(0.001f, 0.01f));
        break;
    case LOOM_GGML_Q4_K:
    case LOOM_GGML_Q5_K: {
        int64_t bs = t == LOOM_GGML_Q4_K ? 144 : 176;
        for (int64_t b = 0; b < nv / 256; b++) {
            put_f16(w + b * bs, urand(0.0005f, 0.004f));
            put_f16(w + b * bs + 2, urand(0.0005f, 0.004f));
        }
        break;
    }
    case LOOM_GGML_Q6_K:
        for (int64_t b = 0; b < nv / 256; b++) put_f16(w + b * 210 + 208, urand(0.0001f, 0.001f));
        break;
    default: break;
    }
    return w;
}

/* Fresh random weights of type t (M x K) on the device (cudaFree its data). */
static loom_kweight dev_rand_weights(loom_ggml_type t, int64_t M, int64_t K) {
    size_t b;
    uint8_t *w = rand_weights(t, M, K, &b);
    const loom_kweight k = {dup_dev(w, b), t, M, K};
    free(w);
    return k;
}

/* bound[t*M + m] = sum_k |W[m,k] x[t,k]| (double, from the CPU dequantization) */
static double *abs_dot_bound(loom_ggml_type t, const uint8_t *w, int64_t M, int64_t K,
                             const float *x, int64_t n) {
    double *b = xmalloc(sizeof(double) * (size_t)(M * n));
    float *row = xmalloc(sizeof(float) * (size_t)K);
    int64_t rb = loom_ggml_row_bytes(t, K);
    for (int64_t m = 0; m < M; m++) {
        loom_dequantize_row(t, w + m * rb, row, K);
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += fabs((double)row[k] * x[i * K + k]);
            b[i * M + m] = s;
        }
    }
    free(row);
    return b;
}

/* max over elements of |a - c| / bound */
static double rel_to_bound(const float *a, const float *c, const double *bound, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - c[i]) / (1e-5 * bound[i] + 1e-30);
        if (!(e <= worst)) worst = e; /* NaN propagates */
    }
    return worst * 1e-5;
}

/* ---- matmul family ---------------------------------------------------------------------- */
/* wild: x spans ~2^-20 .. 2^33 in magnitude over the super-blocks (beyond f16's range: the
 * mma path's per-super-block scaling must keep it exact enough). Q4_K runs twice: the default
 * (tensor-core) path and LOOM_GEMV_MMA=0 (warp-per-row kernels); each is checked against the
 * CPU twin and for GEMM token == GEMV bits; the simple / byte paths must equal the latter. */
static void test_matmul_one_x(loom_ggml_type t, int64_t M, int64_t K, int64_t n, int wild) {
    char shape[96];
    const char *tn = loom_ggml_type_get(t)->name;
    snprintf(shape, sizeof shape, "%s M=%lld K=%lld N=%lld%s", tn, (long long)M, (long long)K,
             (long long)n, wild ? " wild x" : "");
    size_t wb;
    uint8_t *w = rand_weights(t, M, K, &wb);
    float *x = xmalloc(sizeof(float) * (size_t)(n * K));
    fill(x, n * K, -1, 1);
    if (wild)
        for (int64_t i = 0; i < n * K; i++)
            x[i] = ldexpf(x[i], (int)((i / 256) % 41) - 20) * (i % 7 == 0 ? 1e4f : 1.0f);
    float *yc = xmalloc(sizeof(float) * (size_t)(n * M)), *yg = xmalloc(sizeof(float) * (size_t)(n * M));
    loom_error err = {0};
    loom_kweight hw = {w, t, M, K};
    if (loom_cpu_matmul(x, n, hw, yc, &err) != LOOM_OK) {
        report_status("cpu matmul", shape, LOOM_ERR_INVALID_ARGUMENT, &err);
        return;
    }
    void *dw = dup_dev(w, wb);
    float *dx = dup_dev(x, sizeof(float) * (size_t)(n * K));
    float *dy = dev_poison(sizeof(float) * (size_t)(n * M));
    loom_kweight dwk = {dw, t, M, K};
    double *bound = abs_dot_bound(t, w, M, K, x, n);
    /* types without an mma path: one path */
    const int modes = t == LOOM_GGML_Q4_K || t == LOOM_GGML_Q5_K || t == LOOM_GGML_Q6_K ||
                              (t == LOOM_GGML_Q8_0 && K % 256 == 0)
                          ? 2
                          : 1;
    for (int mode = 0; mode < modes; mode++) {
        const int rows_path = mode == modes - 1; /* the warp-per-row kernels */
        if (mode == 1) set_switch("LOOM_GEMV_MMA", "0");
        CK(cudaMemset(dy, 0xFF, sizeof(float) * (size_t)(n * M)));
        loom_status st = loom_cuda_matmul(dx, n, dwk, dy, &err, 0);
        report_status("matmul", shape, st, &err);
        to_host(yg, dy, sizeof(float) * (size_t)(n * M));
        char kn[32];
        snprintf(kn, sizeof kn, "matmul %s%s", n == 1 ? "gemv" : "gemm", modes == 2 && !rows_path ? " mma" : "");
        report(kn, shape, rel_to_bound(yg, yc, bound, n * M), 1e-5);

        if (n > 1) { /* each token bit-identical to the GEMV of that token alone */
            float *y1 = xmalloc(sizeof(float) * (size_t)M);
            float *dy1 = dev_poison(sizeof(float) * (size_t)M);
            size_t diff = 0;
            for (int64_t i = 0; i < n; i++) {
                CK(cudaMemset(dy1, 0xFF, sizeof(float) * (size_t)M));
                st = loom_cuda_matmul(dx + i * K, 1, dwk, dy1, &err, 0);
                report_status("matmul", shape, st, &err);
                to_host(y1, dy1, sizeof(float) * (size_t)M);
                diff += memcmp(y1, yg + i * M, sizeof(float) * (size_t)M) != 0;
            }
            report(modes == 2 && !rows_path ? "gemm==gemv bits mma" : "gemm==gemv bits", shape,
                   (double)diff, 0);
            free(y1);
            cudaFree(dy1);
        } else if (rows_path) {
            /* simple path and (Q4_K/Q5_K) byte loads: the same bits as the fast row kernels */
            float *ys = xmalloc(sizeof(float) * (size_t)M);
            const char *sw[2] = {"LOOM_FAST_GEMV", "LOOM_Q4K_UINT32_LOADS"};
            for (int s = 0; s < 2; s++) {
                if (s == 1 && t != LOOM_GGML_Q4_K && t != LOOM_GGML_Q5_K) continue;
                set_switch(sw[s], "0");
                CK(cudaMemset(dy, 0xFF, sizeof(float) * (size_t)M));
                st = loom_cuda_matmul(dx, 1, dwk, dy, &err, 0);
                report_status("matmul", shape, st, &err);
                to_host(ys, dy, sizeof(float) * (size_t)M);
                set_switch(sw[s], "1");
                report_bits(s == 0 ? "gemv simple==fast" : "gemv bytes==words", shape, ys, yg,
                            sizeof(float) * (size_t)M);
            }
            free(ys);
        }
        if (mode == 1) set_switch("LOOM_GEMV_MMA", "1");
    }
    free(bound);
    free(w); free(x); free(yc); free(yg);
    cudaFree(dw); cudaFree(dx); cudaFree(dy);
}

static void test_matmul_one(loom_ggml_type t, int64_t M, int64_t K, int64_t n) {
    test_matmul_one_x(t, M, K, n, 0);
}

/* The Q6_K mma path's shapes (gemv_mma_q6k.cu, whichever loop body LOOM_GEMV_MMA_Q6K_V picks):
 * ffn_down and lm-head-like shapes, wide-range x, odd super-block counts (rows alternately 2 mod
 * 4 aligned), ragged tiles and groups. */
static void test_matmul_q6k_mma(void) {
    test_matmul_one_x(LOOM_GGML_Q6_K, g_quick ? 160 : 2560, g_quick ? 4096 : 9728, 1, 0);
    test_matmul_one_x(LOOM_GGML_Q6_K, 41, 2560, 1, 1);
    test_matmul_one_x(LOOM_GGML_Q6_K, 41, 2560, 6, 1);
    test_matmul_one_x(LOOM_GGML_Q6_K, 19, 768, 5, 0);
    if (!g_quick) {
        test_matmul_one_x(LOOM_GGML_Q6_K, 9500, 2560, 1, 0);
        test_matmul_one_x(LOOM_GGML_Q6_K, 100, 1024, 1, 0);
        test_matmul_one_x(LOOM_GGML_Q6_K, 77, 1280, 67, 0);
        test_matmul_one_x(LOOM_GGML_Q6_K, 33, 9728, 37, 1);
    }
}

/* The Q4_K / Q5_K / Q8_0 mma paths' shapes (gemv_mma.cu, Q4_K on whichever body
 * LOOM_GEMV_MMA_Q4K_V picks, Q5_K on the INT8 one; gemv_mma_q8.cu): 4B shapes (cluster split-K),
 * wide-range x, ragged tiles and token groups (GEMM token == GEMV bits). */
static void test_matmul_q4k_mma(loom_ggml_type t) {
    test_matmul_one_x(t, g_quick ? 160 : 2560, 4096, 1, 0);
    test_matmul_one_x(t, 41, 2560, 1, 1);
    test_matmul_one_x(t, 41, 2560, 6, 1);
    if (!g_quick) {
        test_matmul_one_x(t, 2560, 9728, 1, 0);
        test_matmul_one_x(t, 100, 1024, 1, 0);
        test_matmul_one_x(t, 19, 768, 5, 0);
        test_matmul_one_x(t, 77, 1280, 67, 0);
        test_matmul_one_x(t, 9728, 2560, 1, 0);
        test_matmul_one_x(t, 33, 9728, 37, 1);
    }
}

/* Q8_0 rows of an odd number of 34-byte blocks (K = 96, 800): every other row starts 2 bytes past
 * a 4-byte boundary, so each lane's 16 quant bytes take both of quant_blocks.cuh's alignments in
 * both halves of a block, and the last pass covers part of the row (K = 800: 25 of 32 blocks);
 * the GEMM's tokens == the GEMV's bits. */
static void test_matmul_q8_0_odd(void) {
    test_matmul_one_x(LOOM_GGML_Q8_0, 29, 96, 1, 0);
    test_matmul_one_x(LOOM_GGML_Q8_0, 45, 800, 1, 1);
    test_matmul_one_x(LOOM_GGML_Q8_0, 19, 800, 7, 0);
}

static void test_matmul(void) {
    const int64_t shapes_full[][2] = {{1, 256}, {37, 256}, {130, 2560}, {67, 4096}, {9, 9728},
                                      {5, 16384}};
    const int64_t shapes_quick[][2] = {{37, 256}, {13, 2560}};
    int ns = g_quick ? 2 : 6;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int s = 0; s < ns; s++) {
            const int64_t *sh = g_quick ? shapes_quick[s] : shapes_full[s];
            test_matmul_one(k_types[ti], sh[0], sh[1], 1);
        }
    test_matmul_q4k_mma(LOOM_GGML_Q4_K);
    test_matmul_q4k_mma(LOOM_GGML_Q5_K);
    test_matmul_q4k_mma(LOOM_GGML_Q8_0);
    test_matmul_q6k_mma();
    test_matmul_q8_0_odd();
    const int64_t ns_full[] = {2, 7, 32, 33, 45};
    const int64_t ns_quick[] = {3, 33};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int i = 0; i < (g_quick ? 2 : 5); i++)
            test_matmul_one(k_types[ti], g_quick ? 13 : 45, g_quick ? 512 : 2560,
                            g_quick ? ns_quick[i] : ns_full[i]);
}

/* Q6_K add (the Q4_K_M ffn_down of half the layers) and an all-Q6_K triple with biases: each
 * against the CPU twin; add == matmul then add (bits). Runs on whichever path the switches
 * select (main: the mma path, then LOOM_GEMV_MMA=0). */
static void test_matmul_q6k_fused(int64_t M, int64_t K, int64_t n) {
    const loom_ggml_type t = LOOM_GGML_Q6_K;
    char shape[96];
    loom_error err = {0};
    snprintf(shape, sizeof shape, "Q6_K M=%lld K=%lld N=%lld", (long long)M, (long long)K,
             (long long)n);
    const size_t xb = sizeof(float) * (size_t)(n * K), yb = sizeof(float) * (size_t)(n * M);
    float *x = xmalloc(xb), *res = xmalloc(yb), *yc = xmalloc(yb), *yg = xmalloc(yb);
    fill(x, n * K, -1, 1);
    fill(res, n * M, -2, 2);
    size_t wb;
    uint8_t *w = rand_weights(t, M, K, &wb);
    void *dw = dup_dev(w, wb);
    float *dx = dup_dev(x, xb), *dres = dup_dev(res, yb), *dy = dev_poison(yb);
    loom_kweight hw = {w, t, M, K}, gw = {dw, t, M, K};
    double *bd = abs_dot_bound(t, w, M, K, x, n);
    loom_cpu_matmul_add(x, n, hw, res, yc, &err);
    report_status("matmul_add", shape, loom_cuda_matmul_add(dx, n, gw, dres, dy, &err, 0), &err);
    to_host(yg, dy, yb);
    double *bres = xmalloc(sizeof(double) * (size_t)(n * M));
    for (int64_t i = 0; i < n * M; i++) bres[i] = bd[i] + fabs(res[i]);
    report("matmul_add", shape, rel_to_bound(yg, yc, bres, n * M), 1e-5);
    {
        float *dm = dev_poison(yb), *da = dev_poison(yb), *ya = xmalloc(yb);
        loom_cuda_matmul(dx, n, gw, dm, &err, 0);
        loom_cuda_add(dm, dres, n * M, da, &err, 0);
        to_host(ya, da, yb);
        report_bits("add fused==unfused", shape, ya, yg, yb);
        cudaFree(dm); cudaFree(da); free(ya);
    }
    /* triple: w (M rows) and two more Q6_K matrices of M/3+1 rows, biases */
    const int64_t Mk = M / 3 + 1;
    const size_t yk = sizeof(float) * (size_t)(n * Mk);
    size_t b1, b2;
    uint8_t *w1 = rand_weights(t, Mk, K, &b1), *w2 = rand_weights(t, Mk, K, &b2);
    void *d1 = dup_dev(w1, b1), *d2 = dup_dev(w2, b2);
    loom_kweight hw3[3] = {hw, {w1, t, Mk, K}, {w2, t, Mk, K}};
    loom_kweight gw3[3] = {gw, {d1, t, Mk, K}, {d2, t, Mk, K}};
    int64_t Ms[3] = {M, Mk, Mk};
    float *bias[3], *dbias[3], *hy[3], *gy[3], *dyv[3];
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        bias[i] = xmalloc(sizeof(float) * (size_t)Ms[i]);
        fill(bias[i], Ms[i], -1, 1);
        dbias[i] = dup_dev(bias[i], sizeof(float) * (size_t)Ms[i]);
        hy[i] = xmalloc(i ? yk : yb);
        gy[i] = xmalloc(i ? yk : yb);
        dyv[i] = dev_poison(i ? yk : yb);
    }
    const float *const hbias[3] = {bias[0], bias[1], bias[2]};
    const float *const gbias[3] = {dbias[0], dbias[1], dbias[2]};
    float *const hyc[3] = {hy[0], hy[1], hy[2]};
    float *const gyc[3] = {dyv[0], dyv[1], dyv[2]};
    loom_cpu_matmul_triple(x, n, hw3, hbias, hyc, &err);
    report_status("matmul_triple", shape, loom_cuda_matmul_triple(dx, n, gw3, gbias, gyc, &err, 0),
                  &err);
    for (int i = 0; i < 3; i++) {
        to_host(gy[i], dyv[i], i ? yk : yb);
        double *b = abs_dot_bound(t, i ? (i == 1 ? w1 : w2) : w, Ms[i], K, x, n);
        for (int64_t j = 0; j < n * Ms[i]; j++) b[j] += fabs(bias[i][j % Ms[i]]);
        double e = rel_to_bound(gy[i], hy[i], b, n * Ms[i]);
        if (!(e <= worst)) worst = e;
        free(b);
    }
    report("matmul_triple+bias", shape, worst, 1e-5);
    for (int i = 0; i < 3; i++) {
        free(bias[i]); free(hy[i]); free(gy[i]);
        cudaFree(dbias[i]); cudaFree(dyv[i]);
    }
    free(x); free(res); free(yc); free(yg); free(w); free(w1); free(w2); free(bd); free(bres);
    cudaFree(dw); cudaFree(d1); cudaFree(d2); cudaFree(dx); cudaFree(dres); cudaFree(dy);
}

/* add, pair (NONE / SWIGLU), triple (+ bias) of weights of types ty[0] (add, pair, the triple's
 * first matrix), ty[1] and ty[2]: Q4_K, Q4_K, Q6_K (the Q4_K_M case), all Q8_0 or all Q5_K
 * (whose warp-per-row GEMV gives a warp two rows, here across the segments' odd row counts; Q5_K
 * takes it with LOOM_GEMV_MMA=0); M and Mk odd. */
static const loom_ggml_type k_q4km[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
static const loom_ggml_type k_q8[3] = {LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0};
static const loom_ggml_type k_q5[3] = {LOOM_GGML_Q5_K, LOOM_GGML_Q5_K, LOOM_GGML_Q5_K};
/* Q8_0 beside other types: the triple runs three launches, one a type (gemv.cu route_segments) */
static const loom_ggml_type k_mix8[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q8_0, LOOM_GGML_Q6_K};
static void test_matmul_fused_t(int64_t n, const loom_ggml_type ty[3]) {
    const int64_t K = g_quick ? 512 : 2560, M = g_quick ? 21 : 133, Mk = g_quick ? 9 : 35;
    char shape[96];
    loom_error err = {0};
    float *x = xmalloc(sizeof(float) * (size_t)(n * K));
    fill(x, n * K, -1, 1);
    float *dx = dup_dev(x, sizeof(float) * (size_t)(n * K));
    size_t b0, b1, b2;
    uint8_t *w0 = rand_weights(ty[0], M, K, &b0);
    uint8_t *w1 = rand_weights(ty[1], Mk, K, &b1);
    uint8_t *w2 = rand_weights(ty[2], Mk, K, &b2);
    void *d0 = dup_dev(w0, b0), *d1 = dup_dev(w1, b1), *d2 = dup_dev(w2, b2);
    loom_kweight h0 = {w0, ty[0], M, K}, h1 = {w1, ty[1], Mk, K}, h2 = {w2, ty[2], Mk, K};
    loom_kweight g0 = {d0, ty[0], M, K}, g1 = {d1, ty[1], Mk, K}, g2 = {d2, ty[2], Mk, K};
    double *bd0 = abs_dot_bound(ty[0], w0, M, K, x, n);
    double *bd1 = abs_dot_bound(ty[1], w1, Mk, K, x, n);
    double *bd2 = abs_dot_bound(ty[2], w2, Mk, K, x, n);
    const char *tn[3] = {loom_ggml_type_get(ty[0])->name, loom_ggml_type_get(ty[1])->name,
                         loom_ggml_type_get(ty[2])->name};
    size_t yM = sizeof(float) * (size_t)(n * M), yK = sizeof(float) * (size_t)(n * Mk);
    float *yc = xmalloc(yM), *yg = xmalloc(yM), *yc1 = xmalloc(yK), *yg1 = xmalloc(yK),
          *yc2 = xmalloc(yK), *yg2 = xmalloc(yK);

    /* add */
    float *res = xmalloc(yM);
    fill(res, n * M, -2, 2);
    float *dres = dup_dev(res, yM), *dy = dev_poison(yM);
    snprintf(shape, sizeof shape, "%s M=%lld K=%lld N=%lld", tn[0], (long long)M, (long long)K,
             (long long)n);
    loom_cpu_matmul_add(x, n, h0, res, yc, &err);
    report_status("matmul_add", shape, loom_cuda_matmul_add(dx, n, g0, dres, dy, &err, 0), &err);
    to_host(yg, dy, yM);
    double *bres = xmalloc(sizeof(double) * (size_t)(n * M));
    for (int64_t i = 0; i < n * M; i++) bres[i] = bd0[i] + fabs(res[i]);
    report("matmul_add", shape, rel_to_bound(yg, yc, bres, n * M), 1e-5);
    { /* == matmul then add, bit for bit, on the GPU */
        float *dm = dev_poison(yM), *da = dev_poison(yM), *ya = xmalloc(yM);
        loom_cuda_matmul(dx, n, g0, dm, &err, 0);
        loom_cuda_add(dm, dres, n * M, da, &err, 0);
        to_host(ya, da, yM);
        report_bits("add fused==unfused", shape, ya, yg, yM);
        cudaFree(dm); cudaFree(da); free(ya);
    }

    /* pair, both epilogues: a = w0 (M rows), b = another weight of its type and rows */
    size_t bb;
    uint8_t *wb = rand_weights(ty[0], M, K, &bb);
    void *dwb = dup_dev(wb, bb);
    loom_kweight hb = {wb, ty[0], M, K}, gb = {dwb, ty[0], M, K};
    double *bdb = abs_dot_bound(ty[0], wb, M, K, x, n);
    float *ycb = xmalloc(yM), *ygb = xmalloc(yM), *dyb = dev_poison(yM);
    CK(cudaMemset(dy, 0xFF, yM));
    loom_cpu_matmul_pair(x, n, h0, hb, LOOM_PAIR_NONE, yc, ycb, &err);
    report_status("matmul_pair", shape,
                  loom_cuda_matmul_pair(dx, n, g0, gb, LOOM_PAIR_NONE, dy, dyb, &err, 0), &err);
    to_host(yg, dy, yM);
    to_host(ygb, dyb, yM);
    double e = rel_to_bound(yg, yc, bd0, n * M), e2 = rel_to_bound(ygb, ycb, bdb, n * M);
    report("matmul_pair none", shape, e > e2 ? e : e2, 1e-5);
    float *ynone_a = xmalloc(yM), *ynone_b = xmalloc(yM);
    memcpy(ynone_a, yg, yM);
    memcpy(ynone_b, ygb, yM);
    CK(cudaMemset(dy, 0xFF, yM));
    loom_cpu_matmul_pair(x, n, h0, hb, LOOM_PAIR_SWIGLU, yc, NULL, &err);
    report_status("matmul_pair", shape,
                  loom_cuda_matmul_pair(dx, n, g0, gb, LOOM_PAIR_SWIGLU, dy, NULL, &err, 0), &err);
    to_host(yg, dy, yM);
    { /* SwiGLU: error of a product of two dots; bound by |silu'|-weighted bounds, and check
         the GPU result against silu(a)*b computed on the host from the GPU's own a, b */
        double worst = 0, worst_self = 0;
        for (int64_t i = 0; i < n * M; i++) {
            float a = ynone_a[i], b = ynone_b[i];
            double ref = (double)loom_silu(a) * b;
            double tol = 1e-5 * (bd0[i] * fabs(b) * 1.2 + bdb[i] * fabs((double)loom_silu(a))) + 1e-30;
            double d = fabs((double)yc[i] - yg[i]) / tol;
            double ds = fabs(ref - yg[i]) / (fabs(ref) * 1e-6 + 1e-30);
            if (!(d <= worst)) worst = d;
            if (!(ds <= worst_self)) worst_self = ds;
        }
        report("matmul_pair swiglu", shape, worst * 1e-5, 1e-5);
        report("pair swiglu==silu(a)b", shape, worst_self * 1e-6, 1e-6);
    }

    /* triple with biases */
    float *bias[3], *dbias[3];
    int64_t Ms[3] = {M, Mk, Mk};
    for (int i = 0; i < 3; i++) {
        bias[i] = xmalloc(sizeof(float) * (size_t)Ms[i]);
        fill(bias[i], Ms[i], -1, 1);
        dbias[i] = dup_dev(bias[i], sizeof(float) * (size_t)Ms[i]);
    }
    float *dy1 = dev_poison(yK), *dy2 = dev_poison(yK);
    CK(cudaMemset(dy, 0xFF, yM));
    loom_kweight hw3[3] = {h0, h1, h2}, gw3[3] = {g0, g1, g2};
    const float *const hbias[3] = {bias[0], bias[1], bias[2]};
    const float *const gbias[3] = {dbias[0], dbias[1], dbias[2]};
    float *const hy[3] = {yc, yc1, yc2};
    float *const gy[3] = {dy, dy1, dy2};
    snprintf(shape, sizeof shape, "%s/%s/%s M=%lld/%lld K=%lld N=%lld", tn[0], tn[1], tn[2],
             (long long)M, (long long)Mk, (long long)K, (long long)n);
    loom_cpu_matmul_triple(x, n, hw3, hbias, hy, &err);
    report_status("matmul_triple", shape, loom_cuda_matmul_triple(dx, n, gw3, gbias, gy, &err, 0),
                  &err);
    to_host(yg, dy, yM);
    to_host(yg1, dy1, yK);
    to_host(yg2, dy2, yK);
    for (int64_t i = 0; i < n * M; i++) bd0[i] += fabs(bias[0][i % M]);
    for (int64_t i = 0; i < n * Mk; i++) { bd1[i] += fabs(bias[1][i % Mk]); bd2[i] += fabs(bias[2][i % Mk]); }
    double t0 = rel_to_bound(yg, yc, bd0, n * M), t1 = rel_to_bound(yg1, yc1, bd1, n * Mk),
           t2 = rel_to_bound(yg2, yc2, bd2, n * Mk);
    double tw = t0 > t1 ? t0 : t1;
    report("matmul_triple+bias", shape, tw > t2 ? tw : t2, 1e-5);

    for (int i = 0; i < 3; i++) { free(bias[i]); cudaFree(dbias[i]); }
    free(x); free(w0); free(w1); free(w2); free(wb); free(res); free(bres); free(bd0); free(bd1);
    free(bd2); free(bdb); free(yc); free(yg); free(yc1); free(yg1); free(yc2); free(yg2);
    free(ycb); free(ygb); free(ynone_a); free(ynone_b);
    cudaFree(dx); cudaFree(d0); cudaFree(d1); cudaFree(d2); cudaFree(dwb); cudaFree(dres);
    cudaFree(dy); cudaFree(dyb); cudaFree(dy1); cudaFree(dy2);
}

static void test_matmul_fused(int64_t n) {
    test_matmul_fused_t(n, k_q4km);
}

/* The RMSNorm folded into the matmul (loom_cuda_*_normed): kind 0 = matmul, 1 = pair, 2 = pair
 * + SwiGLU, 3 = triple (+ biases); weights of types ty[] and rows Ms[], x[n, K] with a spread of
 * magnitudes (a residual stream), norm weight or none. Checks, on the path the switches select:
 * against the CPU twin loom_cpu_*_normed (the family's 1e-5 of sum |W x'|, x' the CPU-normed x;
 * SwiGLU as test_matmul_fused), against loom_cuda_rms_norm + the plain launcher (bit for bit; the
 * outputs of Q4_K weights where loom_cuda_normed_scale_last: the same tolerance, "~norm+plain"),
 * and (n > 1) each GEMM token against the normed GEMV of that token alone (bits). */
static void test_normed(int kind, const loom_ggml_type *ty, const int64_t *Ms, int64_t K,
                        int64_t n, int with_w, const char *path) {
    const int nw = kind == 0 ? 1 : (kind == 3 ? 3 : 2), nout = kind == 2 ? 1 : nw;
    static const char *kn[4] = {"normed matmul", "normed pair", "normed swiglu", "normed triple"};
    char shape[96], name[40];
    snprintf(shape, sizeof shape, "%s%s%s M=%lld K=%lld N=%lld%s", loom_ggml_type_get(ty[0])->name,
             nw > 1 ? "/" : "", nw > 1 ? loom_ggml_type_get(ty[nw - 1])->name : "",
             (long long)Ms[0], (long long)K, (long long)n, with_w ? "" : " no w");
    snprintf(name, sizeof name, "%s%s", kn[kind], path);
    loom_error err = {0};
    float *x = xmalloc(sizeof(float) * (size_t)(n * K));
    fill_tokens(x, n, K);
    float *g = xmalloc(sizeof(float) * (size_t)K);
    fill(g, K, -2, 2);
    const loom_prenorm hn = {with_w ? g : NULL, 1e-6f};
    float *dx = dup_dev(x, sizeof(float) * (size_t)(n * K));
    float *dg = dup_dev(g, sizeof(float) * (size_t)K);
    const loom_prenorm dn = {with_w ? dg : NULL, 1e-6f};
    float *xn = xmalloc(sizeof(float) * (size_t)(n * K));
    loom_cpu_rms_norm(x, hn.weight, n, K, hn.eps, xn, &err);
    uint8_t *w[3];
    void *dw[3];
    loom_kweight hw[3], gw[3];
    float *hbias[3] = {NULL, NULL, NULL}, *dbias[3] = {NULL, NULL, NULL};
    float *hy[3], *gy[3], *uy[3], *dy[3], *duy[3];
    size_t yb[3];
    for (int i = 0; i < 3; i++) {
        const int j = i < nw ? i : 0;
        size_t b;
        w[i] = i < nw ? rand_weights(ty[j], Ms[j], K, &b) : NULL;
        dw[i] = i < nw ? dup_dev(w[i], b) : NULL;
        hw[i] = (loom_kweight){w[j], ty[j], Ms[j], K};
        gw[i] = (loom_kweight){i < nw ? dw[i] : dw[0], ty[j], Ms[j], K};
        yb[i] = sizeof(float) * (size_t)(n * Ms[j]);
        hy[i] = xmalloc(yb[i]); gy[i] = xmalloc(yb[i]); uy[i] = xmalloc(yb[i]);
        dy[i] = dev_poison(yb[i]); duy[i] = dev_poison(yb[i]);
        if (kind == 3) {
            hbias[i] = xmalloc(sizeof(float) * (size_t)Ms[i]);
            fill(hbias[i], Ms[i], -1, 1);
            dbias[i] = dup_dev(hbias[i], sizeof(float) * (size_t)Ms[i]);
        }
    }
    float *dxn = dev_poison(sizeof(float) * (size_t)(n * K));
    const float *const hb[3] = {hbias[0], hbias[1], hbias[2]}, *const gb[3] = {dbias[0], dbias[1], dbias[2]};
    /* CPU twin, the normed GPU call, and the unfused GPU pair of launches */
    loom_status sc = LOOM_OK, sg = LOOM_OK, su = LOOM_OK;
    su = loom_cuda_rms_norm(dx, dn.weight, n, K, dn.eps, dxn, &err, 0);
    report_status("rms_norm", shape, su, &err);
    if (kind == 0) {
        sc = loom_cpu_matmul_normed(x, &hn, n, hw[0], hy[0], &err);
        sg = loom_cuda_matmul_normed(dx, &dn, n, gw[0], dy[0], &err, 0);
        report_status(name, shape, sg, &err);
        su = loom_cuda_matmul(dxn, n, gw[0], duy[0], &err, 0);
    } else if (kind < 3) {
        const loom_pair_epilogue e = kind == 2 ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE;
        sc = loom_cpu_matmul_pair_normed(x, &hn, n, hw[0], hw[1], LOOM_PAIR_NONE, hy[0], hy[1], &err);
        if (kind == 2) { /* the GPU's SwiGLU checked against the CPU's two dots */
            sg = loom_cuda_matmul_pair_normed(dx, &dn, n, gw[0], gw[1], e, dy[0], NULL, &err, 0);
            report_status(name, shape, sg, &err);
            su = loom_cuda_matmul_pair(dxn, n, gw[0], gw[1], e, duy[0], NULL, &err, 0);
        } else {
            sg = loom_cuda_matmul_pair_normed(dx, &dn, n, gw[0], gw[1], e, dy[0], dy[1], &err, 0);
            report_status(name, shape, sg, &err);
            su = loom_cuda_matmul_pair(dxn, n, gw[0], gw[1], e, duy[0], duy[1], &err, 0);
        }
    } else {
        float *const hyc[3] = {hy[0], hy[1], hy[2]}, *const dyc[3] = {dy[0], dy[1], dy[2]},
                     *const duc[3] = {duy[0], duy[1], duy[2]};
        sc = loom_cpu_matmul_triple_normed(x, &hn, n, hw, hb, hyc, &err);
        sg = loom_cuda_matmul_triple_normed(dx, &dn, n, gw, gb, dyc, &err, 0);
        report_status(name, shape, sg, &err);
        su = loom_cuda_matmul_triple(dxn, n, gw, gb, duc, &err, 0);
    }
    report_status("cpu normed", shape, sc, &err);
    report_status("unfused", shape, su, &err);
    double worst = 0, bits = 0, near = 0;
    const int last = loom_cuda_normed_scale_last();
    int n_last = 0; /* outputs whose dots take the scale last: compared by tolerance */
    double *bd[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nw; i++) {
        bd[i] = abs_dot_bound(ty[i], w[i], Ms[i], K, xn, n);
        if (kind == 3)
            for (int64_t j = 0; j < n * Ms[i]; j++) bd[i][j] += fabs(hbias[i][j % Ms[i]]);
    }
    for (int i = 0; i < nout; i++) {
        to_host(gy[i], dy[i], yb[i]);
        to_host(uy[i], duy[i], yb[i]);
        /* (the pair runs on the tensor cores only when both weights are Q4_K or both Q5_K) */
        const int q4 = kind == 1 || kind == 2
                           ? (ty[0] == LOOM_GGML_Q4_K || ty[0] == LOOM_GGML_Q5_K) && ty[1] == ty[0]
                           : ty[i] == LOOM_GGML_Q4_K || ty[i] == LOOM_GGML_Q5_K;
        if (last && q4) {
            n_last++;
            if (kind != 2) {
                double e = rel_to_bound(gy[i], uy[i], bd[i], n * Ms[i]);
                if (!(e <= near)) near = e;
            }
        } else {
            for (size_t j = 0; j < yb[i]; j++) bits += ((uint8_t *)gy[i])[j] != ((uint8_t *)uy[i])[j];
        }
        if (kind != 2) {
            double e = rel_to_bound(gy[i], hy[i], bd[i], n * Ms[i]);
            if (!(e <= worst)) worst = e;
        }
    }
    if (kind == 2) { /* silu(a) b: tolerance from both dots' bounds, against the CPU's two dots
                      * and (scale last) against the unfused launches' output */
        for (int64_t i = 0; i < n * Ms[0]; i++) {
            const float a = hy[0][i], b = hy[1][i];
            const double ref = (double)loom_silu(a) * b;
            const double tol = 1e-5 * (bd[0][i] * fabs(b) * 1.2 + bd[1][i] * fabs((double)loom_silu(a))) + 1e-30;
            const double d = fabs(ref - gy[0][i]) / tol;
            if (!(d <= worst)) worst = d;
            const double du = fabs((double)uy[0][i] - gy[0][i]) / tol;
            if (n_last && !(du <= near)) near = du;
        }
        worst *= 1e-5;
        near *= 1e-5;
    }
    report(name, shape, worst, 1e-5);
    if (n_last < nout) {
        snprintf(name, sizeof name, "%s==norm+plain", path[0] ? path + 1 : "fused");
        report(name, shape, bits, 0);
    }
    if (n_last) {
        snprintf(name, sizeof name, "%s~norm+plain", path[0] ? path + 1 : "fused");
        report(name, shape, near, 1e-5);
    }
    if (n > 1) { /* GEMM token == normed GEMV of that token (bits) */
        size_t diff = 0;
        float *t1 = xmalloc(yb[0]);
        for (int64_t t = 0; t < n; t++) {
            float *o[3];
            for (int i = 0; i < 3; i++) o[i] = dy[i] + t * (i < nw ? Ms[i] : Ms[0]);
            if (kind == 0) sg = loom_cuda_matmul_normed(dx + t * K, &dn, 1, gw[0], o[0], &err, 0);
            else if (kind < 3)
                sg = loom_cuda_matmul_pair_normed(dx + t * K, &dn, 1, gw[0], gw[1],
                                                  kind == 2 ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE,
                                                  o[0], kind == 2 ? NULL : o[1], &err, 0);
            else {
                float *const oc[3] = {o[0], o[1], o[2]};
                sg = loom_cuda_matmul_triple_normed(dx + t * K, &dn, 1, gw, gb, oc, &err, 0);
            }
            report_status(name, shape, sg, &err);
        }
        for (int i = 0; i < nout; i++) {
            to_host(t1, dy[i], yb[i]);
            diff += memcmp(t1, gy[i], yb[i]) != 0;
        }
        snprintf(name, sizeof name, "normed gemm==gemv%s", path);
        report(name, shape, (double)diff, 0);
        free(t1);
    }
    for (int i = 0; i < 3; i++) {
        free(w[i]); free(hy[i]); free(gy[i]); free(uy[i]); free(hbias[i]); free(bd[i]);
        cudaFree(dw[i]); cudaFree(dy[i]); cudaFree(duy[i]); cudaFree(dbias[i]);
    }
    free(x); free(g); free(xn);
    cudaFree(dx); cudaFree(dg); cudaFree(dxn);
}

/* The Q6_K matmuls on the non-default loop body (LOOM_GEMV_MMA_Q6K_V=1, the f16 body; the
 * default, 2, is the INT8 body of q6k_i8_body.cuh for every Q6_K matmul but a Q4_K_M triple's V:
 * other bits, the same tolerance): the mma shapes (GEMM token == GEMV bits), add and the
 * all-Q6_K triple, the folded RMSNorm (plain, GEMM, the Q4_K_M triple's V, the lm head). */
static void test_matmul_q6k_other(void) {
    printf("-- the Q6_K cases on the f16 body (LOOM_GEMV_MMA_Q6K_V=1)\n");
    set_switch("LOOM_GEMV_MMA_Q6K_V", "1");
    test_matmul_q6k_mma();
    test_matmul_q6k_fused(g_quick ? 40 : 2560, g_quick ? 768 : 9728, 1);
    test_matmul_q6k_fused(g_quick ? 40 : 133, g_quick ? 768 : 2560, g_quick ? 3 : 37);
    const loom_ggml_type q6 = LOOM_GGML_Q6_K, t3[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, q6};
    const int64_t K = g_quick ? 768 : 2560;
    const int64_t m1[1] = {g_quick ? 300 : 9500}, m1g[1] = {45};
    const int64_t m3[3] = {g_quick ? 64 : 160, g_quick ? 32 : 48, g_quick ? 32 : 48};
    test_normed(0, &q6, m1, K, 1, 1, " q6k-f16");
    test_normed(0, &q6, m1g, K, g_quick ? 3 : 33, 1, " q6k-f16");
    test_normed(3, t3, m3, K, 1, 1, " q6k-f16");
    test_normed(3, t3, m3, K, g_quick ? 3 : 37, 0, " q6k-f16");
    unsetenv("LOOM_GEMV_MMA_Q6K_V");
    loom_cuda_reload_switches();
}

/* LOOM_GEMM_WIDE: the wide Q6_K GEMM (q6k_i8_wide.cuh, INT8 body: 64-row blocks of 16 or 32
 * tokens) against the 8-token GEMM. kind 0 plain, 1 add (+ residual), 2 normed (RMSNorm folded,
 * with a weight), 3 a pair of two Q6_K matrices (two segments in one launch, blocks straddling
 * them). The GEMM runs with the switch 0 and forced on from 16 tokens ("16") under every
 * LOOM_GEMM_WIDE_Q6K form, outputs poisoned first; checks: against the CPU twin, wide == the
 * 8-token GEMM bits, and every token == the GEMV of that token alone (bits). Restores the
 * switches' previous values. */
static void test_q6k_wide(int64_t M, int64_t K, int64_t n, int kind) {
    static const char *kn[4] = {"", " add", " normed", " pair"};
    const loom_ggml_type t = LOOM_GGML_Q6_K;
    char shape[96];
    snprintf(shape, sizeof shape, "Q6_K M=%lld K=%lld N=%lld%s", (long long)M, (long long)K,
             (long long)n, kn[kind]);
    const saved_switch wide = save_switch("LOOM_GEMM_WIDE");
    const saved_switch wq6 = save_switch("LOOM_GEMM_WIDE_Q6K");
    loom_error err = {0};
    const int nw = kind == 3 ? 2 : 1;
    const size_t xb = sizeof(float) * (size_t)(n * K), yb = sizeof(float) * (size_t)(n * M);
    float *x = xmalloc(xb), *res = xmalloc(yb), *g = xmalloc(sizeof(float) * (size_t)K);
    fill(x, n * K, -1, 1);
    for (int64_t i = 0; i < n * K; i++) /* token and super-block scales 2^-8 .. 2^8 */
        x[i] = ldexpf(x[i], (int)((i / K * 5 + i / 256 * 3) % 17) - 8);
    fill(res, n * M, -2, 2);
    fill(g, K, -2, 2);
    uint8_t *w[2];
    void *dw[2];
    loom_kweight hw[2], gw[2];
    for (int i = 0; i < nw; i++) {
        size_t b;
        w[i] = rand_weights(t, M, K, &b);
        dw[i] = dup_dev(w[i], b);
        hw[i] = (loom_kweight){w[i], t, M, K};
        gw[i] = (loom_kweight){dw[i], t, M, K};
    }
    float *dx = dup_dev(x, xb), *dres = dup_dev(res, yb), *dg = dup_dev(g, sizeof(float) * (size_t)K);
    const loom_prenorm hn = {g, 1e-6f}, dn = {dg, 1e-6f};
    /* yv[v - 2][i]: the wide GEMM under LOOM_GEMM_WIDE_Q6K = v (2 / 3: 16 / 32 tokens a block,
     * 4: its choice by the grid; 5 / 6 / 7: the same with x converted to limbs by the pre-pass);
     * y0: the 8-token GEMM */
    float *yc[2], *y0[2], *yv[6][2], *dy[2], *dy1[2], *yt = xmalloc(sizeof(float) * (size_t)M);
    for (int i = 0; i < nw; i++) {
        yc[i] = xmalloc(yb); y0[i] = xmalloc(yb);
        for (int v = 0; v < 6; v++) yv[v][i] = xmalloc(yb);
        dy[i] = dev_poison(yb);
        dy1[i] = dev_poison(sizeof(float) * (size_t)M);
    }
    /* the CPU twin and the bound (on the normed x for kind 2, + |residual| for kind 1) */
    float *xn = x;
    if (kind == 2) {
        xn = xmalloc(xb);
        loom_cpu_rms_norm(x, g, n, K, hn.eps, xn, &err);
    }
    loom_status sc;
    if (kind == 0) sc = loom_cpu_matmul(x, n, hw[0], yc[0], &err);
    else if (kind == 1) sc = loom_cpu_matmul_add(x, n, hw[0], res, yc[0], &err);
    else if (kind == 2) sc = loom_cpu_matmul_normed(x, &hn, n, hw[0], yc[0], &err);
    else sc = loom_cpu_matmul_pair(x, n, hw[0], hw[1], LOOM_PAIR_NONE, yc[0], yc[1], &err);
    report_status("cpu matmul", shape, sc, &err);
    double *bd[2]; /* each output's bound, built once for every form */
    for (int i = 0; i < nw; i++) {
        bd[i] = abs_dot_bound(t, w[i], M, K, xn, n);
        if (kind == 1)
            for (int64_t j = 0; j < n * M; j++) bd[i][j] += fabs(res[j]);
    }
    /* one call of the case's launcher over tokens i0 .. i0 + nn - 1 into out */
#define WIDE_RUN(i0, nn, out)                                                                      \
    (kind == 0   ? loom_cuda_matmul(dx + (i0) * K, (nn), gw[0], (out)[0], &err, 0)                 \
     : kind == 1 ? loom_cuda_matmul_add(dx + (i0) * K, (nn), gw[0], dres + (i0) * M, (out)[0], &err, 0) \
     : kind == 2 ? loom_cuda_matmul_normed(dx + (i0) * K, &dn, (nn), gw[0], (out)[0], &err, 0)     \
                 : loom_cuda_matmul_pair(dx + (i0) * K, (nn), gw[0], gw[1], LOOM_PAIR_NONE, (out)[0], \
                                         (out)[1], &err, 0))
    for (int sw = 0; sw < 7; sw++) { /* wide off, then LOOM_GEMM_WIDE_Q6K = 2 .. 7 */
        static const char *q6v[7] = {"7", "2", "3", "4", "5", "6", "7"};
        set_switch("LOOM_GEMM_WIDE", sw ? "16" : "0");
        set_switch("LOOM_GEMM_WIDE_Q6K", q6v[sw]);
        for (int i = 0; i < nw; i++) CK(cudaMemset(dy[i], 0xFF, yb));
        report_status("q6k wide", shape, WIDE_RUN(0, n, dy), &err);
        for (int i = 0; i < nw; i++) to_host(sw ? yv[sw - 1][i] : y0[i], dy[i], yb);
    }
    for (int v = 0; v < 6; v++) { /* each form: CPU bound, == the 8-token GEMM bits */
        char what[48];
        double wv = 0;
        size_t dv = 0;
        for (int i = 0; i < nw; i++) {
            const double e = rel_to_bound(yv[v][i], yc[i], bd[i], n * M);
            if (!(e <= wv)) wv = e;
            dv += memcmp(yv[v][i], y0[i], yb) != 0;
        }
        snprintf(what, sizeof what, "q6k wide q6w=%d gemm", v + 2);
        report(what, shape, wv, 1e-5);
        snprintf(what, sizeof what, "q6k wide q6w=%d==gemm8 bits", v + 2);
        report(what, shape, (double)dv, 0);
    }
    size_t diff = 0;
    for (int64_t tk = 0; tk < n; tk++) { /* the GEMV (n = 1) of each token alone */
        for (int i = 0; i < nw; i++) CK(cudaMemset(dy1[i], 0xFF, sizeof(float) * (size_t)M));
        report_status("q6k wide gemv", shape, WIDE_RUN(tk, 1, dy1), &err);
        for (int i = 0; i < nw; i++) {
            to_host(yt, dy1[i], sizeof(float) * (size_t)M);
            for (int v = 0; v < 6; v++) /* every LOOM_GEMM_WIDE_Q6K form's token */
                diff += memcmp(yt, yv[v][i] + tk * M, sizeof(float) * (size_t)M) != 0;
        }
    }
#undef WIDE_RUN
    report("q6k wide==gemv bits (q6w=2..7)", shape, (double)diff, 0);
    restore_switch(&wq6);
    restore_switch(&wide);
    for (int i = 0; i < nw; i++) {
        free(w[i]); free(yc[i]); free(y0[i]); free(bd[i]);
        for (int v = 0; v < 6; v++) free(yv[v][i]);
        cudaFree(dw[i]); cudaFree(dy[i]); cudaFree(dy1[i]);
    }
    if (xn != x) free(xn);
    free(x); free(res); free(g); free(yt);
    cudaFree(dx); cudaFree(dres); cudaFree(dg);
}

/* The wide Q6_K GEMM's cases (LOOM_GEMM_WIDE forced on from 16 tokens against 0): N in {16, 31,
 * 32, 33, 64, 67, 130, 512} (ragged last groups of 16), plain / add / normed / a two-segment pair;
 * K = 768 (3 super-blocks: an empty GEMV partial), 1024, 2560, 9728; rows not a multiple of 16
 * or of 64; the split S forced to 1, 4, 8. --quick: five small cases (one of each kind, S = 4),
 * so that racecheck finishes. (A bias reaches the Q6_K matmuls only through a triple, which keeps
 * the f16 body: test_matmul_q6k_fused's triple + bias runs with the switch on, full run only.) */
static void test_q6k_wide_section(void) {
    printf("-- the wide Q6_K GEMM (LOOM_GEMM_WIDE, INT8 body)\n");
    if (g_quick) { /* a few small cases (racecheck must finish): ragged groups, an empty partial */
        test_q6k_wide(100, 1024, 31, 0);
        test_q6k_wide(72, 768, 33, 1);
        test_q6k_wide(100, 1024, 17, 2);
        test_q6k_wide(41, 768, 20, 3);
        const saved_switch split = save_switch("LOOM_GEMV_MMA_SPLIT");
        set_switch("LOOM_GEMV_MMA_SPLIT", "4"); /* 16 partials a warp walks */
        test_q6k_wide(40, 4096, 17, 1);
        restore_switch(&split);
        return;
    }
    static const int64_t ns[] = {16, 31, 32, 33, 64, 67, 130, 512};
    for (int i = 0; i < 8; i++) {
        const int64_t n = ns[i];
        test_q6k_wide(1024, 2560, n, 0);
        test_q6k_wide(1000, 2560, n, 1);
        test_q6k_wide(1024, 2560, n, 2);
        if (i == 1 || i == 5) test_q6k_wide(41, 768, n, 3);
    }
    {
        test_q6k_wide(2560, 9728, 33, 1); /* the 4B ffn down + residual */
        test_q6k_wide(2560, 9728, 67, 0);
        test_q6k_wide(9500, 1024, 130, 0);
    }
    { /* the GEMV's split S forced (LOOM_GEMV_MMA_SPLIT): the wide warps walk 4 S partials */
        static const char *sp[3] = {"1", "4", "8"};
        const saved_switch split = save_switch("LOOM_GEMV_MMA_SPLIT");
        for (int i = 0; i < 3; i++) {
            set_switch("LOOM_GEMV_MMA_SPLIT", sp[i]);
            printf("-- (LOOM_GEMV_MMA_SPLIT=%s)\n", sp[i]);
            test_q6k_wide(1000, 9728, 33, 1);
        }
        restore_switch(&split);
    }
    const saved_switch wide = save_switch("LOOM_GEMM_WIDE");
    set_switch("LOOM_GEMM_WIDE", "16");
    test_matmul_q6k_fused(133, 2560, 37);
    restore_switch(&wide);
}

/* --q6k: the Q6_K matmuls alone: the default body's cases (INT8 but for a triple's V: the mma
 * shapes, add, the all-Q6_K triple, normed), each against the CPU twin with GEMM token == GEMV
 * bits, then the f16 body's section (test_matmul_q6k_other). */
static void test_q6k_section(void) {
    const loom_ggml_type q6 = LOOM_GGML_Q6_K;
    const int64_t K = g_quick ? 768 : 2560;
    const int64_t m1[1] = {g_quick ? 300 : 9500}, m1g[1] = {45};
    test_matmul_q6k_mma();
    test_matmul_q6k_fused(g_quick ? 40 : 2560, g_quick ? 768 : 9728, 1);
    test_matmul_q6k_fused(g_quick ? 40 : 133, g_quick ? 768 : 2560, g_quick ? 3 : 37);
    test_normed(0, &q6, m1, K, 1, 1, "");
    test_normed(0, &q6, m1g, K, g_quick ? 3 : 33, 1, "");
    test_matmul_q6k_other();
    test_q6k_wide_section();
}

/* The normed launchers over the matmul shape sets, on every path: default (tensor cores for
 * Q4_K/Q6_K), LOOM_GEMV_MMA=0 (warp-per-row GEMV / GEMM), LOOM_FAST_GEMV=0 (simple path),
 * LOOM_FAST_NORM=0 (the norm's scalar summation order), LOOM_GEMV_MMA_Q6K=0. */
static void test_matmul_normed(void) {
    static const struct { const char *sw, *tag; } paths[] = {
        {NULL, ""}, {"LOOM_GEMV_MMA", " rows"}, {"LOOM_FAST_GEMV", " simple"},
        {"LOOM_FAST_NORM", " scalar-norm"}, {"LOOM_GEMV_MMA_Q6K", " q6k-rows"}};
    const loom_ggml_type q4 = LOOM_GGML_Q4_K, q6 = LOOM_GGML_Q6_K;
    for (int p = 0; p < 5; p++) {
        if (paths[p].sw) set_switch(paths[p].sw, "0");
        const char *tag = paths[p].tag;
        const int full = !g_quick && (p == 0 || p == 1);
        /* single matmul: every type; K 256 .. 16384; N = 1 and GEMM N (ragged) */
        const int64_t sh_full[][3] = {{37, 256, 1}, {130, 2560, 1}, {9, 9728, 1}, {5, 16384, 1},
                                      {45, 2560, 3}, {45, 2560, 33}, {21, 1024, 8}};
        const int64_t sh_quick[][3] = {{37, 256, 1}, {13, 2560, 3}};
        const int nsh = full ? 7 : 2;
        for (int ti = 0; ti < N_TYPES; ti++) {
            if (p == 4 && k_types[ti] != q6) continue;
            if (!full && p > 0 && k_types[ti] != q4 && k_types[ti] != q6 && k_types[ti] != LOOM_GGML_Q8_0)
                continue;
            for (int s = 0; s < nsh; s++) {
                const int64_t *sh = full ? sh_full[s] : sh_quick[s];
                test_normed(0, &k_types[ti], &sh[0], sh[1], sh[2], s != 1, tag);
            }
        }
        /* the 4B decode shapes: QKV triple (Q4_K_M: V is Q6_K, and all-Q4_K), gate/up pair,
         * lm head; GEMM tokens ragged */
        const loom_ggml_type t3[3] = {q4, q4, q6}, t3q4[3] = {q4, q4, q4}, t2[2] = {q4, q4},
                             t2b[2] = {LOOM_GGML_Q8_0, LOOM_GGML_F16};
        /* N = 1 at the 4B shapes; the GEMM (N = 37: 4 groups of 8 and a ragged 5) on fewer
         * rows (the host references cost M x K x N) */
        const int64_t m3[2][3] = {{g_quick ? 64 : 4096, g_quick ? 32 : 1024, g_quick ? 32 : 1024},
                                  {g_quick ? 64 : 160, g_quick ? 32 : 48, g_quick ? 32 : 48}};
        const int64_t m2[2][2] = {{g_quick ? 48 : 9728, g_quick ? 48 : 9728},
                                  {g_quick ? 48 : 272, g_quick ? 48 : 272}};
        const int64_t m5[3] = {37, 11, 11}, m5p[2] = {37, 37}, K = g_quick ? 768 : 2560;
        const int64_t nn[] = {1, g_quick ? 3 : 37};
        for (int i = 0; i < 2; i++) {
            test_normed(3, t3, m3[i], K, nn[i], 1, tag);
            test_normed(3, t3q4, m3[i], K, nn[i], i == 0, tag);
            test_normed(1, t2, m2[i], K, nn[i], 1, tag);
            test_normed(2, t2, m2[i], K, nn[i], 1, tag);
            if (p != 4) test_normed(1, t2b, m2[i], K, nn[i], 1, tag);
            if (p < 2) { /* all Q5_K / all Q8_0: mma, then (rows) two rows a warp, one pair
                          * across the triple's Q/K seam */
                test_normed(3, k_q5, m5, K, nn[i], 1, tag);
                test_normed(2, k_q5, m5p, K, nn[i], 1, tag);
                test_normed(3, k_q8, m5, K, nn[i], 1, tag);
                test_normed(2, k_q8, m5p, K, nn[i], 1, tag);
            }
        }
        const int64_t lm[1] = {g_quick ? 300 : 9500};
        test_normed(0, &q6, lm, K, 1, 1, tag);
        if (paths[p].sw) set_switch(paths[p].sw, "1");
    }
}

/* n tokens of x[K] (fill_tokens) and a norm weight in [-2, 2] of K values, on the device only. */
static void dev_tokens_and_norm(int64_t n, int64_t K, float **dx, float **dg) {
    float *x = xmalloc(sizeof(float) * (size_t)(n * K)), *g = xmalloc(sizeof(float) * (size_t)K);
    fill_tokens(x, n, K);
    fill(g, K, -2, 2);
    *dx = dup_dev(x, sizeof(float) * (size_t)(n * K));
    *dg = dup_dev(g, sizeof(float) * (size_t)K);
    free(x);
    free(g);
}

/* The Q4_K_M triple (Q4_K Q and K, Q6_K V) in one launch (LOOM_GEMV_TRIPLE_MIXED=1, the default,
 * and its slot orders 2, 3; gemv_mma.cu's mixed kernel) against its two launches (=0), bit for
 * bit, all three outputs: plain, normed
 * with and without norm weight, biases or not, N = 1; the GEMM (N = 5, which keeps two
 * launches) token by token against the mixed GEMV of that token; and the mixed path taken
 * (loom_cuda_matmul_mixed_launches) where must_mix (the executor's 4B and 8B shapes; other
 * shapes may be declined by the split rule, which is checked by the bits alone). */
static const char *g_mixed_tag = ""; /* LOOM_GEMV_MMA_Q6K_V in the shape column ("" or " V=2") */
static void test_triple_mixed(const int64_t M[3], int64_t K, int bias, int must_mix) {
    const loom_ggml_type ty[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    const int64_t n = 5;
    loom_error err = {0};
    float *dx, *dg;
    dev_tokens_and_norm(n, K, &dx, &dg);
    void *dw[3];
    float *db[3] = {NULL, NULL, NULL}, *dy[2][3], *hy[2][3];
    loom_kweight gw[3];
    size_t yb[3];
    for (int i = 0; i < 3; i++) {
        gw[i] = dev_rand_weights(ty[i], M[i], K);
        dw[i] = (void *)gw[i].data;
        if (bias) {
            float *hb = xmalloc(sizeof(float) * (size_t)M[i]);
            fill(hb, M[i], -1, 1);
            db[i] = dup_dev(hb, sizeof(float) * (size_t)M[i]);
            free(hb);
        }
        yb[i] = sizeof(float) * (size_t)(n * M[i]);
        for (int m = 0; m < 2; m++) {
            dy[m][i] = dev_poison(yb[i]);
            hy[m][i] = xmalloc(yb[i]);
        }
    }
    const float *const gb[3] = {db[0], db[1], db[2]};
    static const char *vn[3] = {"plain", "normed", "normed no w"};
    for (int v = 0; v < 3; v++) {
        char shape[96];
        snprintf(shape, sizeof shape, "Q4_K/Q6_K%s %lld+%lld+%lld K=%lld%s %s", g_mixed_tag,
                 (long long)M[0], (long long)M[1], (long long)M[2], (long long)K,
                 bias ? " bias" : "", vn[v]);
        const loom_prenorm dn = {v == 1 ? dg : NULL, 1e-6f}, *norm = v ? &dn : NULL;
        for (int m = 0; m < 4; m++) { /* two launches, mixed (slot order by rule, V last, V first) */
            static const char *mv[4] = {"0", "1", "2", "3"};
            static const char *mn[4] = {"", "mixed==two launches", "mixed V last==two", "mixed V first==two"};
            set_switch("LOOM_GEMV_TRIPLE_MIXED", mv[m]);
            const int o = m ? 1 : 0;
            float *const y[3] = {dy[o][0], dy[o][1], dy[o][2]};
            for (int i = 0; i < 3; i++) CK(cudaMemset(dy[o][i], 0xFF, yb[i]));
            const int64_t before = loom_cuda_matmul_mixed_launches();
            report_status("triple mixed", shape,
                          loom_cuda_matmul_triple_normed(dx, norm, 1, gw, gb, y, &err, 0), &err);
            CK(cudaDeviceSynchronize());
            const int64_t launched = loom_cuda_matmul_mixed_launches() - before;
            for (int i = 0; i < 3; i++) to_host(hy[o][i], dy[o][i], sizeof(float) * (size_t)M[i]);
            if (m == 0) {
                report("switch off: 2 launches", shape, launched != 0, 0);
                continue;
            }
            size_t diff = 0;
            for (int i = 0; i < 3; i++)
                for (size_t j = 0; j < sizeof(float) * (size_t)M[i]; j++)
                    diff += ((uint8_t *)hy[0][i])[j] != ((uint8_t *)hy[1][i])[j];
            report(mn[m], shape, (double)diff, 0);
            if (must_mix) report("mixed path taken", shape, launched == 1 ? 0 : 1, 0);
        }
        /* GEMM (switch on; two launches) vs the mixed GEMV token by token */
        float *const y[3] = {dy[0][0], dy[0][1], dy[0][2]};
        report_status("triple mixed gemm", shape,
                      loom_cuda_matmul_triple_normed(dx, norm, n, gw, gb, y, &err, 0), &err);
        for (int i = 0; i < 3; i++) to_host(hy[0][i], dy[0][i], yb[i]);
        size_t diff = 0;
        for (int64_t t = 0; t < n; t++) {
            float *const o[3] = {dy[1][0] + t * M[0], dy[1][1] + t * M[1], dy[1][2] + t * M[2]};
            report_status("triple mixed", shape,
                          loom_cuda_matmul_triple_normed(dx + t * K, norm, 1, gw, gb, o, &err, 0), &err);
        }
        for (int i = 0; i < 3; i++) {
            to_host(hy[1][i], dy[1][i], yb[i]);
            diff += memcmp(hy[0][i], hy[1][i], yb[i]) != 0;
        }
        report("gemm==mixed gemv", shape, (double)diff, 0);
    }
    unsetenv("LOOM_GEMV_TRIPLE_MIXED");
    loom_cuda_reload_switches();
    for (int i = 0; i < 3; i++) {
        cudaFree(dw[i]); cudaFree(db[i]);
        for (int m = 0; m < 2; m++) { cudaFree(dy[m][i]); free(hy[m][i]); }
    }
    cudaFree(dx); cudaFree(dg);
}

static void test_triple_mixed_all(void) {
    /* 4B (Q/K split 1, V 2 on the H200), 8B (1, 4), odd rows (partial tiles; a part with fewer
     * tiles than a cluster slot holds), small K (split 1 everywhere) */
    static const int64_t sh[][5] = {{4096, 1024, 1024, 2560, 1}, {4096, 1024, 1024, 4096, 1},
                                    {77, 45, 29, 2560, 0},       {1000, 333, 129, 2560, 0},
                                    {4096, 1024, 1000, 4096, 0}, {2400, 800, 1024, 4096, 0},
                                    {48, 17, 9, 512, 0}};
    const int ns = g_quick ? 3 : 7;
    for (int i = 0; i < ns; i++) {
        const int64_t *c = sh[g_quick && i > 0 ? i + 1 : i];
        test_triple_mixed(c, c[3], i % 2, (int)c[4]);
    }
    /* LOOM_GEMV_MMA_Q6K_V=2 (INT8 for the other Q6_K matmuls): a triple's V keeps the f16 body in
     * the mixed kernel, its two launches and its GEMM of n = 5 alike (bits as above; from 64
     * tokens the INT8 body, test_triple_v_body) */
    set_switch("LOOM_GEMV_MMA_Q6K_V", "2");
    g_mixed_tag = " V=2";
    for (int i = 0; i < (g_quick ? 2 : 4); i++) {
        const int64_t *c = sh[i == 0 ? 0 : i + 1];
        test_triple_mixed(c, c[3], i % 2, (int)c[4]);
    }
    g_mixed_tag = "";
    unsetenv("LOOM_GEMV_MMA_Q6K_V");
    loom_cuda_reload_switches();
}

/* The pair launcher over n tokens of x, folded with norm dn, or plain when dn is NULL; y1 is
 * left out with the SwiGLU epilogue (one output). */
static loom_status run_pair(const float *x, const loom_prenorm *dn, int64_t n, loom_kweight w0,
                            loom_kweight w1, loom_pair_epilogue e, float *y0, float *y1,
                            loom_error *err) {
    if (e == LOOM_PAIR_SWIGLU) y1 = NULL;
    return dn ? loom_cuda_matmul_pair_normed(x, dn, n, w0, w1, e, y0, y1, err, 0)
              : loom_cuda_matmul_pair(x, n, w0, w1, e, y0, y1, err, 0);
}

/* The Q4_K pair GEMV in blocks of 3 warps (LOOM_GEMV_PAIR_WARPS=3; by default where 5 such blocks
 * an SM hold the whole grid, as the 4B pair on the H200) against blocks of 4 (=4), bit for bit:
 * plain pair and SwiGLU, normed or not (with and without norm weight), on the INT8 and f16
 * bodies, every output written (no poison left) and the 3-warp kernel the one that ran
 * (loom_cuda_matmul_pair3_launches); then the GEMM (N = 5) token by token == the GEMV as the rule
 * picks it. */
static void test_pair_warps(int64_t M, int64_t K) {
    const int64_t n = 5;
    loom_error err = {0};
    float *dx, *dg;
    dev_tokens_and_norm(n, K, &dx, &dg);
    const loom_kweight w0 = dev_rand_weights(LOOM_GGML_Q4_K, M, K), w1 = dev_rand_weights(LOOM_GGML_Q4_K, M, K);
    const size_t yb = sizeof(float) * (size_t)(n * M);
    float *dy[2][2], *hy[2][2];
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++) {
            dy[o][i] = dev_poison(yb);
            hy[o][i] = xmalloc(yb);
        }
    static const char *bodies[2] = {"2", "1"}, *bn[2] = {"int8", "f16"};
    static const char *vn[4] = {"pair", "swiglu", "normed pair", "normed swiglu no w"};
    for (int b = 0; b < 2; b++) {
        set_switch("LOOM_GEMV_MMA_Q4K_V", bodies[b]);
        for (int v = 0; v < 4; v++) {
            char shape[96];
            snprintf(shape, sizeof shape, "Q4_K %s %s M=%lld K=%lld", bn[b], vn[v], (long long)M,
                     (long long)K);
            const loom_pair_epilogue e = v & 1 ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE;
            const loom_prenorm norm = {v == 2 ? dg : NULL, 1e-6f}, *dn = v < 2 ? NULL : &norm;
            const int nout = e == LOOM_PAIR_SWIGLU ? 1 : 2;
            for (int o = 0; o < 2; o++) { /* o = 0: 4 warps, 1: 3 warps */
                set_switch("LOOM_GEMV_PAIR_WARPS", o ? "3" : "4");
                CK(cudaMemset(dy[o][0], 0xFF, yb));
                CK(cudaMemset(dy[o][1], 0xFF, yb));
                const int64_t before = loom_cuda_matmul_pair3_launches();
                report_status("pair warps", shape,
                              run_pair(dx, dn, 1, w0, w1, e, dy[o][0], dy[o][1], &err), &err);
                CK(cudaDeviceSynchronize());
                const int64_t ran3 = loom_cuda_matmul_pair3_launches() - before;
                report(o ? "pair 3 warps ran" : "pair 4 warps ran", shape, ran3 == o ? 0 : 1, 0);
                to_host(hy[o][0], dy[o][0], sizeof(float) * (size_t)M);
                to_host(hy[o][1], dy[o][1], sizeof(float) * (size_t)M);
                size_t unwritten = 0;
                for (int64_t i = 0; i < nout * M; i++)
                    unwritten += !isfinite(i < M ? hy[o][0][i] : hy[o][1][i - M]);
                report("pair outputs written", shape, (double)unwritten, 0);
            }
            size_t diff = 0;
            for (int i = 0; i < nout; i++) diff += memcmp(hy[0][i], hy[1][i], sizeof(float) * (size_t)M) != 0;
            report("pair 3 warps==4", shape, (double)diff, 0);
            /* the GEMM against the GEMV as the shape rule picks it, token by token */
            reset_switch("LOOM_GEMV_PAIR_WARPS");
            report_status("pair gemm", shape,
                          run_pair(dx, dn, n, w0, w1, e, dy[0][0], dy[0][1], &err), &err);
            for (int64_t t = 0; t < n; t++)
                report_status("pair gemv", shape,
                              run_pair(dx + t * K, dn, 1, w0, w1, e, dy[1][0] + t * M,
                                       dy[1][1] + t * M, &err),
                              &err);
            diff = 0;
            for (int i = 0; i < nout; i++) {
                to_host(hy[0][i], dy[0][i], yb);
                to_host(hy[1][i], dy[1][i], yb);
                diff += memcmp(hy[0][i], hy[1][i], yb) != 0;
            }
            report("pair gemm==gemv", shape, (double)diff, 0);
        }
    }
    reset_switch("LOOM_GEMV_MMA_Q4K_V");
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++) {
            cudaFree(dy[o][i]);
            free(hy[o][i]);
        }
    cudaFree((void *)w0.data); cudaFree((void *)w1.data);
    cudaFree(dx); cudaFree(dg);
}

static void test_pair_warps_all(void) {
    printf("-- the Q4_K pair GEMV in blocks of 3 warps (LOOM_GEMV_PAIR_WARPS)\n");
    /* the 4B and 8B pairs, odd rows, K = 768 (warp 2's second virtual warp has no super-block),
     * K = 16384 (many super-blocks a warp) */
    static const int64_t full[][2] = {{9728, 2560}, {14336, 4096}, {1000, 2560}, {48, 768}, {300, 16384}};
    static const int64_t quick[][2] = {{272, 2560}, {48, 768}};
    const int ns = g_quick ? 2 : 5;
    for (int i = 0; i < ns; i++) test_pair_warps(g_quick ? quick[i][0] : full[i][0], g_quick ? quick[i][1] : full[i][1]);
    reset_switch("LOOM_GEMV_PAIR_WARPS");
}

/* The Q4_K matmuls on the INT8 body (LOOM_GEMV_MMA_Q4K_V=2): the mma shapes (GEMM token == GEMV
 * bits), add / pair / SwiGLU / triples, the folded RMSNorm (single, the Q4_K_M and all-Q4_K
 * triples, pair and SwiGLU; GEMV and ragged GEMM), and the one-launch Q4_K_M triple == its two
 * launches (bits). mixed_only: the triple alone (--mixed). */
static void test_q4k_section(int mixed_only) {
    const loom_ggml_type q4 = LOOM_GGML_Q4_K, q6 = LOOM_GGML_Q6_K;
    const loom_ggml_type t3[3] = {q4, q4, q6}, t3q4[3] = {q4, q4, q4}, t2[2] = {q4, q4};
    const int64_t K = g_quick ? 768 : 2560;
    const int64_t m1[1] = {g_quick ? 300 : 9728}, m1g[1] = {45};
    const int64_t m3[2][3] = {{g_quick ? 64 : 4096, g_quick ? 32 : 1024, g_quick ? 32 : 1024},
                              {g_quick ? 64 : 160, g_quick ? 32 : 48, g_quick ? 32 : 48}};
    const int64_t m2[2][2] = {{g_quick ? 48 : 9728, g_quick ? 48 : 9728},
                              {g_quick ? 48 : 272, g_quick ? 48 : 272}};
    const int64_t nn[] = {1, g_quick ? 3 : 37};
    printf("-- the Q4_K matmuls on the INT8 body (LOOM_GEMV_MMA_Q4K_V=2)\n");
    set_switch("LOOM_GEMV_MMA_Q4K_V", "2");
    if (!mixed_only) {
        test_matmul_q4k_mma(LOOM_GGML_Q4_K);
        test_matmul_fused(1);
        test_matmul_fused(g_quick ? 3 : 37);
        const char *tag = " q4k-i8";
        test_normed(0, &q4, m1, K, 1, 1, tag);
        test_normed(0, &q4, m1g, K, g_quick ? 3 : 33, 0, tag);
        for (int i = 0; i < 2; i++) {
            test_normed(3, t3, m3[i], K, nn[i], 1, tag);
            test_normed(3, t3q4, m3[i], K, nn[i], i == 0, tag);
            test_normed(1, t2, m2[i], K, nn[i], 1, tag);
            test_normed(2, t2, m2[i], K, nn[i], i == 1, tag);
        }
    }
    g_mixed_tag = " Q4V=2";
    test_triple_mixed_all();
    g_mixed_tag = "";
    unsetenv("LOOM_GEMV_MMA_Q4K_V");
    loom_cuda_reload_switches();
}

/* The wide prefill GEMM (LOOM_GEMM_WIDE, gemv_mma.cu): kind 0 plain, 1 add, 2 pair (two
 * outputs), 3 pair + SwiGLU, 4 triple + biases (Q4_K Q/K rows M, Mk; V Q4_K or, mixed, Q6_K),
 * each plain or normed (norm weight), on x with a spread of token magnitudes, into poisoned
 * outputs, with the switch at 0 (the GEMM in groups of 8 tokens, whose tokens equal the GEMV:
 * checked by the other sections) and at 2 (every GEMM of 2+ tokens wide): the bits must be the
 * same, and the wide kernel must have run. split: LOOM_GEMV_MMA_SPLIT for both (NULL: by shape). */
static void wide_case(int kind, int normed, int mixed, int64_t M, int64_t Mk, int64_t K,
                      int64_t n, const char *split) {
    static const char *kn[5] = {"wide plain", "wide add", "wide pair", "wide swiglu", "wide triple"};
    const int nw = kind == 4 ? 3 : (kind >= 2 ? 2 : 1), nout = kind == 3 ? 1 : nw;
    const int64_t Ms[3] = {M, kind == 4 ? Mk : M, Mk};
    const loom_ggml_type ty[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K,
                                  mixed ? LOOM_GGML_Q6_K : LOOM_GGML_Q4_K};
    char shape[96], name[40];
    snprintf(shape, sizeof shape, "M=%lld%s%s K=%lld N=%lld S=%s", (long long)M,
             kind == 4 ? "/" : "", kind == 4 ? (mixed ? "Q6_K" : "Q4_K") : "", (long long)K,
             (long long)n, split ? split : "auto");
    snprintf(name, sizeof name, "%s%s==old", kn[kind], normed ? " normed" : "");
    if (split) set_switch("LOOM_GEMV_MMA_SPLIT", split);
    loom_error err = {0};
    float *x = xmalloc(sizeof(float) * (size_t)(n * K));
    fill(x, n * K, -1, 1);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < K; k++) x[t * K + k] = ldexpf(x[t * K + k], (int)(t * 5 % 13) - 6);
    float *g = xmalloc(sizeof(float) * (size_t)K), *res = xmalloc(sizeof(float) * (size_t)(n * M));
    fill(g, K, -2, 2);
    fill(res, n * M, -2, 2);
    float *dx = dup_dev(x, sizeof(float) * (size_t)(n * K)), *dg = dup_dev(g, sizeof(float) * (size_t)K);
    float *dres = dup_dev(res, sizeof(float) * (size_t)(n * M));
    const loom_prenorm dn = {dg, 1e-6f};
    uint8_t *w[3] = {NULL, NULL, NULL};
    void *dw[3] = {NULL, NULL, NULL};
    float *hb[3], *db[3], *dy[3], *hy[2][3];
    loom_kweight gw[3];
    size_t yb[3];
    for (int i = 0; i < 3; i++) {
        size_t wb;
        w[i] = rand_weights(ty[i], Ms[i], K, &wb);
        dw[i] = dup_dev(w[i], wb);
        gw[i] = (loom_kweight){dw[i], ty[i], Ms[i], K};
        hb[i] = xmalloc(sizeof(float) * (size_t)Ms[i]);
        fill(hb[i], Ms[i], -1, 1);
        db[i] = dup_dev(hb[i], sizeof(float) * (size_t)Ms[i]);
        yb[i] = sizeof(float) * (size_t)(n * Ms[i]);
        dy[i] = dev_poison(yb[i]);
        hy[0][i] = xmalloc(yb[i]);
        hy[1][i] = xmalloc(yb[i]);
    }
    const float *const bias[3] = {db[0], db[1], db[2]};
    float *const y3[3] = {dy[0], dy[1], dy[2]};
    const loom_pair_epilogue pe = kind == 3 ? LOOM_PAIR_SWIGLU : LOOM_PAIR_NONE;
    int64_t launched = 0;
    for (int v = 0; v < 2; v++) {
        set_switch("LOOM_GEMM_WIDE", v ? "2" : "0");
        for (int i = 0; i < 3; i++) CK(cudaMemset(dy[i], 0xFF, yb[i]));
        const int64_t before = loom_cuda_matmul_wide_launches();
        loom_status st;
        if (kind == 0)
            st = normed ? loom_cuda_matmul_normed(dx, &dn, n, gw[0], dy[0], &err, 0)
                        : loom_cuda_matmul(dx, n, gw[0], dy[0], &err, 0);
        else if (kind == 1) /* (no normed add launcher) */
            st = loom_cuda_matmul_add(dx, n, gw[0], dres, dy[0], &err, 0);
        else if (kind < 4)
            st = normed ? loom_cuda_matmul_pair_normed(dx, &dn, n, gw[0], gw[1], pe, dy[0],
                                                       kind == 2 ? dy[1] : NULL, &err, 0)
                        : loom_cuda_matmul_pair(dx, n, gw[0], gw[1], pe, dy[0],
                                                kind == 2 ? dy[1] : NULL, &err, 0);
        else
            st = normed ? loom_cuda_matmul_triple_normed(dx, &dn, n, gw, bias, y3, &err, 0)
                        : loom_cuda_matmul_triple(dx, n, gw, bias, y3, &err, 0);
        report_status(name, shape, st, &err);
        for (int i = 0; i < nout; i++) to_host(hy[v][i], dy[i], yb[i]);
        if (v) launched = loom_cuda_matmul_wide_launches() - before;
    }
    double bits = 0;
    for (int i = 0; i < nout; i++)
        for (size_t j = 0; j < yb[i]; j++) bits += ((uint8_t *)hy[0][i])[j] != ((uint8_t *)hy[1][i])[j];
    report(name, shape, launched > 0 ? bits : 1e30 /* the wide kernel did not run */, 0);
    unsetenv("LOOM_GEMM_WIDE");
    if (split) unsetenv("LOOM_GEMV_MMA_SPLIT");
    loom_cuda_reload_switches();
    for (int i = 0; i < 3; i++) {
        free(w[i]); free(hb[i]); free(hy[0][i]); free(hy[1][i]);
        cudaFree(dw[i]); cudaFree(db[i]); cudaFree(dy[i]);
    }
    free(x); free(g); free(res);
    cudaFree(dx); cudaFree(dg); cudaFree(dres);
}

/* --wide: the wide prefill GEMM (LOOM_GEMM_WIDE). wide == old bits for every kind at token
 * counts around the blocks' 16 / 32 tokens (ragged last blocks), the cluster splits S = 1, 2,
 * 4, 8 the GEMV takes on sm_90 (forced), a last 64-row block with 1-3 live tiles; then with
 * the switch at 2 the Q4_K mma shapes, the fused and the normed cases against the CPU twin and
 * GEMM token == GEMV (bits). */
static void test_wide_section_v(int v) {
    printf("-- the wide prefill GEMM (LOOM_GEMM_WIDE=2 vs 0), LOOM_GEMV_MMA_Q4K_V=%d\n", v);
    /* (--quick: two small ragged counts, so racecheck over the whole --quick run stays short) */
    const int64_t ns_full[] = {2, 16, 31, 32, 33, 64, 67, 130, 512}, ns_quick[] = {5, 33};
    const int nn = g_quick ? 2 : 9;
    const int64_t K = g_quick ? 768 : 2560;
    for (int i = 0; i < nn; i++) {
        const int64_t n = g_quick ? ns_quick[i] : ns_full[i];
        const int64_t M = g_quick ? 80 : (n >= 130 ? 2560 : 272), Mk = g_quick ? 48 : 112;
        for (int kind = 0; kind < 5; kind++) {
            wide_case(kind, 0, 0, M, Mk, K, n, NULL);
            if (kind != 1) wide_case(kind, 1, 0, M, Mk, K, n, NULL);
        }
        wide_case(4, 1, 1, M, Mk, K, n, NULL); /* the Q4_K_M triple: Q/K wide, V Q6_K */
    }
    /* split-K of the GEMV's shape (forced), K = 9728 (38 super-blocks: ragged partials), rows
     * that leave a last block of 1 to 3 live tiles */
    static const char *splits[] = {"1", "2", "4", "8"};
    for (int s = 0; s < (g_quick ? 2 : 4); s++)
        for (int kind = 0; kind < 5; kind++)
            wide_case(kind, kind == 2 || kind == 4, 0, g_quick ? 41 : 77, 35, g_quick ? 2304 : 9728,
                      g_quick ? 19 : 67, splits[s]);
    set_switch("LOOM_GEMM_WIDE", "2");
    const int64_t before = loom_cuda_matmul_wide_launches();
    test_matmul_q4k_mma(LOOM_GGML_Q4_K);
    test_matmul_q4k_mma(LOOM_GGML_Q5_K);
    test_matmul_one_x(LOOM_GGML_Q4_K, g_quick ? 160 : 2560, g_quick ? 768 : 2560, g_quick ? 33 : 130, 0);
    test_matmul_fused(g_quick ? 3 : 37);
    const loom_ggml_type q4 = LOOM_GGML_Q4_K, q6 = LOOM_GGML_Q6_K;
    const loom_ggml_type t3[3] = {q4, q4, q6}, t2[2] = {q4, q4};
    const int64_t m1[1] = {45}, m3[3] = {64, 32, 32}, m2[2] = {48, 48};
    test_normed(0, &q4, m1, K, 33, 1, " wide");
    test_normed(1, t2, m2, K, 37, 1, " wide");
    test_normed(2, t2, m2, K, 37, 0, " wide");
    test_normed(3, t3, m3, K, 37, 1, " wide");
    report("wide launches", "the CPU-twin cases above", loom_cuda_matmul_wide_launches() > before ? 0 : 1, 0);
    unsetenv("LOOM_GEMM_WIDE");
    loom_cuda_reload_switches();
}

/* A Q4_K_M triple's Q6_K V (gemv_mma_q6k.cu q6k_body): below 64 tokens the f16 body, bit for bit
 * the V matrix alone with LOOM_GEMV_MMA_Q6K_V=1 (the one-launch decode triple's body); from 64
 * tokens on the Q6_K default (the INT8 wide GEMM), bit for bit the V matrix alone. */
static void test_triple_v_body(int64_t n) {
    const loom_ggml_type ty[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    const int64_t M[3] = {64, 32, 48}, K = 768;
    loom_error err = {0};
    float *x = xmalloc(sizeof(float) * (size_t)(n * K));
    fill(x, n * K, -1, 1);
    float *dx = dup_dev(x, sizeof(float) * (size_t)(n * K));
    void *dw[3];
    float *dy[3];
    loom_kweight gw[3];
    for (int i = 0; i < 3; i++) {
        gw[i] = dev_rand_weights(ty[i], M[i], K);
        dw[i] = (void *)gw[i].data;
        dy[i] = dev_poison(sizeof(float) * (size_t)(n * M[i]));
    }
    const size_t vb = sizeof(float) * (size_t)(n * M[2]);
    float *dv = dev_poison(vb), *hv = xmalloc(vb), *ha = xmalloc(vb);
    char shape[64];
    snprintf(shape, sizeof shape, "M=64/32/48 K=%lld N=%lld", (long long)K, (long long)n);
    float *const y3[3] = {dy[0], dy[1], dy[2]};
    report_status("triple V body", shape, loom_cuda_matmul_triple(dx, n, gw, NULL, y3, &err, 0), &err);
    if (n < 64) set_switch("LOOM_GEMV_MMA_Q6K_V", "1");
    report_status("triple V body", shape, loom_cuda_matmul(dx, n, gw[2], dv, &err, 0), &err);
    if (n < 64) reset_switch("LOOM_GEMV_MMA_Q6K_V");
    to_host(hv, dy[2], vb);
    to_host(ha, dv, vb);
    report(n < 64 ? "triple V == V f16" : "triple V == V INT8", shape, memcmp(hv, ha, vb) != 0, 0);
    for (int i = 0; i < 3; i++) { cudaFree(dw[i]); cudaFree(dy[i]); }
    cudaFree(dv); cudaFree(dx);
    free(hv); free(ha); free(x);
}

/* Both Q4_K bodies: the f16 one (V = 1, gemm_wide_q4k) and the INT8 one (V = 2,
 * gemm_wide_q4k_i8: wide == the 8-token INT8 GEMM bits, GEMM token == the V = 2 GEMV bits), the
 * latter in both forms: its default (LOOM_GEMM_WIDE_Q4K_I8=5: x limbs from the pre-pass in the
 * kernel scratch, which grows here: no capture) and 4 (each block stages x: the kernels the
 * default runs where the scratch cannot grow). */
static void test_wide_section(void) {
    const saved_switch q4v = save_switch("LOOM_GEMV_MMA_Q4K_V");
    set_switch("LOOM_GEMV_MMA_Q4K_V", "1");
    test_wide_section_v(1);
    set_switch("LOOM_GEMV_MMA_Q4K_V", "2");
    test_wide_section_v(2); /* LOOM_GEMM_WIDE_Q4K_I8 unset: its default (5) */
    printf("   (LOOM_GEMM_WIDE_Q4K_I8=4)\n");
    set_switch("LOOM_GEMM_WIDE_Q4K_I8", "4");
    test_wide_section_v(2);
    reset_switch("LOOM_GEMM_WIDE_Q4K_I8");
    restore_switch(&q4v);
    test_triple_v_body(g_quick ? 5 : 37);
    test_triple_v_body(64);
    test_triple_v_body(g_quick ? 65 : 130);
}

/* The wide Q8_0 GEMM's x staging (LOOM_GEMM_WIDE_Q8, gemv_mma_q8.cu): form NULL = the default
 * (2: x's limbs from one pre-pass a matmul into the kernel scratch, which grows here: no
 * capture), "1" = each block stages x. Under each: GEMM token == GEMV bits on one token block
 * and on ragged ones (K = 768: partials without super-blocks; the pre-pass kernel for one token
 * block and the one for more, mma_q8_matmul's B3), the fused forms against the CPU twin, the
 * normed triple, pair and SwiGLU pair against the norm launcher + the plain matmul bit for bit;
 * and the pre-pass ran under the default only. */
static void test_q8_wide_form(const char *form) {
    printf("-- the wide Q8_0 GEMM, LOOM_GEMM_WIDE_Q8=%s\n", form ? form : "2 (default)");
    if (form) set_switch("LOOM_GEMM_WIDE_Q8", form);
    const int64_t before = loom_cuda_matmul_q8_pre_launches();
    test_matmul_one_x(LOOM_GGML_Q8_0, 41, 768, 16, 0); /* one token block */
    test_matmul_one_x(LOOM_GGML_Q8_0, 41, 768, 19, 1);
    test_matmul_one_x(LOOM_GGML_Q8_0, g_quick ? 80 : 2560, g_quick ? 1024 : 2560,
                      g_quick ? 33 : 130, 0);
    test_matmul_fused_t(g_quick ? 17 : 37, k_q8);
    const int64_t m3[3] = {37, 11, 11}, m2[2] = {37, 37};
    test_normed(3, k_q8, m3, 768, 33, 1, " wide");
    test_normed(1, k_q8, m2, 768, 33, 1, " wide");
    test_normed(2, k_q8, m2, 768, 33, 0, " wide");
    const int64_t ran = loom_cuda_matmul_q8_pre_launches() - before;
    report("Q8_0 wide on the pre-pass", form ? "none with the switch at 1" : "the cases above",
           form ? ran != 0 : ran == 0, 0);
    if (form) reset_switch("LOOM_GEMM_WIDE_Q8");
}

/* ---- norm, rope, kv --------------------------------------------------------------------- */
static void test_norm(int64_t rows, int64_t d, int with_w) {
    char shape[96];
    snprintf(shape, sizeof shape, "rows=%lld d=%lld%s", (long long)rows, (long long)d,
             with_w ? "" : " no weight");
    size_t nb = sizeof(float) * (size_t)(rows * d);
    float *x = xmalloc(nb), *w = xmalloc(sizeof(float) * (size_t)d), *yc = xmalloc(nb), *yg = xmalloc(nb);
    fill(x, rows * d, -3, 3);
    fill(w, d, 0.5f, 1.5f);
    loom_error err = {0};
    loom_cpu_rms_norm(x, with_w ? w : NULL, rows, d, 1e-6f, yc, &err);
    float *dx = dup_dev(x, nb), *dw = dup_dev(w, sizeof(float) * (size_t)d), *dy = dev_poison(nb);
    report_status("rms_norm", shape,
                  loom_cuda_rms_norm(dx, with_w ? dw : NULL, rows, d, 1e-6f, dy, &err, 0), &err);
    to_host(yg, dy, nb);
    double worst = 0;
    for (int64_t i = 0; i < rows * d; i++) {
        double e = fabs((double)yg[i] - yc[i]) / (fabs((double)yc[i]) + 1e-30);
        if (!(e <= worst)) worst = e;
    }
    report("rms_norm", shape, worst, 1e-5);
    free(x); free(w); free(yc); free(yg);
    cudaFree(dx); cudaFree(dw); cudaFree(dy);
}

static void test_rope(loom_rope_mode mode, int64_t T, int64_t nh, int64_t nkv, int64_t D,
                      int64_t n_rot) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s T=%lld heads=%lld/%lld D=%lld rot=%lld",
             mode == LOOM_ROPE_NEOX ? "NEOX" : "NORM", (long long)T, (long long)nh,
             (long long)nkv, (long long)D, (long long)n_rot);
    loom_rope_params p = {T, nh, nkv, D, n_rot, mode, 1000000.0f, 1.0f};
    size_t qb = sizeof(float) * (size_t)(T * nh * D), kb = sizeof(float) * (size_t)(T * nkv * D);
    float *q = xmalloc(qb), *k = xmalloc(kb), *qg = xmalloc(qb), *kg = xmalloc(kb);
    int32_t *pos = xmalloc(sizeof(int32_t) * (size_t)T);
    fill(q, T * nh * D, -1, 1);
    fill(k, T * nkv * D, -1, 1);
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(rnd() % 32768);
    pos[0] = 0;
    float *dq = dup_dev(q, qb), *dk = dup_dev(k, kb);
    int32_t *dp = dup_dev(pos, sizeof(int32_t) * (size_t)T);
    loom_error err = {0};
    loom_cpu_rope(q, k, pos, &p, &err);
    report_status("rope", shape, loom_cuda_rope(dq, dk, dp, &p, &err, 0), &err);
    to_host(qg, dq, qb);
    to_host(kg, dk, kb);
    double worst = 0;
    for (int64_t i = 0; i < T * nh * D; i++) {
        double e = fabs((double)qg[i] - q[i]);
        if (!(e <= worst)) worst = e;
    }
    for (int64_t i = 0; i < T * nkv * D; i++) {
        double e = fabs((double)kg[i] - k[i]);
        if (!(e <= worst)) worst = e;
    }
    report("rope", shape, worst, 1e-4);
    free(q); free(k); free(qg); free(kg); free(pos);
    cudaFree(dq); cudaFree(dk); cudaFree(dp);
}

static size_t kv_elem(loom_kv_type t) { return t == LOOM_KV_F32 ? 4 : (t == LOOM_KV_F16 ? 2 : 1); }

/* Bytes of the device cache (dc, cb bytes) and, for INT8, whether its scales (ds, sb bytes)
 * differ from the CPU's cc / sc; cg and sg are host buffers of those sizes to copy into. */
static size_t cache_diff(const uint8_t *cc, const float *sc, const void *dc, const float *ds,
                         size_t cb, size_t sb, int int8, uint8_t *cg, float *sg) {
    to_host(cg, dc, cb);
    size_t diff = 0;
    for (size_t i = 0; i < cb; i++) diff += cc[i] != cg[i];
    if (int8) {
        to_host(sg, ds, sb);
        diff += memcmp(sc, sg, sb) != 0;
    }
    return diff;
}

static void test_kv(loom_kv_type t, int64_t n_ctx, int64_t nkv, int64_t D, int64_t pos0, int64_t T) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s ctx=%lld kvh=%lld D=%lld pos0=%lld T=%lld",
             t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"), (long long)n_ctx,
             (long long)nkv, (long long)D, (long long)pos0, (long long)T);
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    size_t cb = (size_t)(n_ctx * nkv * D) * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    size_t srcb = sizeof(float) * (size_t)(T * nkv * D);
    float *src = xmalloc(srcb);
    fill(src, T * nkv * D, -4, 4);
    src[0] = 0.5f;
    uint8_t *cc = xmalloc(cb), *cg = xmalloc(cb);
    float *sc = xmalloc(sb), *sg = xmalloc(sb);
    memset(cc, 0xFF, cb);
    memset(sc, 0xFF, sb);
    void *dc = dev_poison(cb);
    float *ds = dev_poison(sb), *dsrc = dup_dev(src, srcb);
    loom_error err = {0};
    loom_cpu_kv_write(src, T, pos0, cc, t == LOOM_KV_INT8 ? sc : NULL, &kv, &err);
    report_status("kv_write", shape,
                  loom_cuda_kv_write(dsrc, T, pos0, dc, t == LOOM_KV_INT8 ? ds : NULL, &kv, &err, 0),
                  &err);
    size_t diff = cache_diff(cc, sc, dc, ds, cb, sb, t == LOOM_KV_INT8, cg, sg);
    report("kv_write", shape, (double)diff, 0);
    /* the _at launcher (position in device memory) writes the same bytes */
    int32_t p32 = (int32_t)pos0, *dpos = dup_dev(&p32, sizeof p32);
    CK(cudaMemset(dc, 0xFF, cb));
    CK(cudaMemset(ds, 0xFF, sb));
    report_status("kv_write_at", shape,
                  loom_cuda_kv_write_at(dsrc, T, dpos, dc, t == LOOM_KV_INT8 ? ds : NULL, &kv, &err, 0),
                  &err);
    diff = cache_diff(cc, sc, dc, ds, cb, sb, t == LOOM_KV_INT8, cg, sg);
    report("kv_write_at == cpu", shape, (double)diff, 0);
    free(src); free(cc); free(cg); free(sc); free(sg);
    cudaFree(dc); cudaFree(ds); cudaFree(dsrc); cudaFree(dpos);
}

/* kv_write_at with a device position partly or wholly outside the cache: the tokens inside
 * 0 .. n_ctx-1 are written (as the CPU writes them), the others skipped, nothing else touched. */
static void test_kv_at_oob(loom_kv_type t, int32_t dev_pos, int64_t T) {
    const int64_t n_ctx = 40, nkv = 2, D = 64;
    char shape[96];
    snprintf(shape, sizeof shape, "%s ctx=40 kvh=2 D=64 dpos=%d T=%lld",
             t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"), (int)dev_pos,
             (long long)T);
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    size_t cb = (size_t)(n_ctx * nkv * D) * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    size_t srcb = sizeof(float) * (size_t)(T * nkv * D);
    float *src = xmalloc(srcb);
    fill(src, T * nkv * D, -4, 4);
    uint8_t *cc = xmalloc(cb), *cg = xmalloc(cb);
    float *sc = xmalloc(sb), *sg = xmalloc(sb);
    memset(cc, 0xFF, cb);
    memset(sc, 0xFF, sb);
    int64_t first = dev_pos < 0 ? -(int64_t)dev_pos : 0; /* first token inside */
    int64_t last = n_ctx - (int64_t)dev_pos;             /* one past the last token inside */
    if (last > T) last = T;
    loom_error err = {0};
    if (last > first)
        loom_cpu_kv_write(src + first * nkv * D, last - first, dev_pos + first, cc,
                          t == LOOM_KV_INT8 ? sc : NULL, &kv, &err);
    void *dc = dev_poison(cb);
    float *ds = dev_poison(sb), *dsrc = dup_dev(src, srcb);
    int32_t *dpos = dup_dev(&dev_pos, sizeof dev_pos);
    report_status("kv_write_at", shape,
                  loom_cuda_kv_write_at(dsrc, T, dpos, dc, t == LOOM_KV_INT8 ? ds : NULL, &kv, &err, 0),
                  &err);
    size_t diff = cache_diff(cc, sc, dc, ds, cb, sb, t == LOOM_KV_INT8, cg, sg);
    report("kv_write_at out of range", shape, (double)diff, 0);
    free(src); free(cc); free(cg); free(sc); free(sg);
    cudaFree(dc); cudaFree(ds); cudaFree(dsrc); cudaFree(dpos);
}

/* ---- attention -------------------------------------------------------------------------- */
static void test_attention(loom_kv_type t, int64_t D, int64_t nh, int64_t nkv, int64_t N,
                           int64_t pos0, int simple) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s%s D=%lld h=%lld/%lld N=%lld pos0=%lld",
             t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"),
             simple ? " simple" : "", (long long)D, (long long)nh, (long long)nkv, (long long)N,
             (long long)pos0);
    const int64_t n_ctx = pos0 + N;
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    size_t cb = (size_t)(n_ctx * nkv * D) * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    uint8_t *kc = xmalloc(cb), *vc = xmalloc(cb);
    float *ks = xmalloc(sb), *vs = xmalloc(sb);
    for (int64_t i = 0; i < n_ctx * nkv * D; i++) {
        float a = urand(-1, 1), b = urand(-1, 1);
        if (t == LOOM_KV_F32) { ((float *)kc)[i] = a; ((float *)vc)[i] = b; }
        else if (t == LOOM_KV_F16) {
            ((uint16_t *)kc)[i] = loom_fp32_to_fp16(a);
            ((uint16_t *)vc)[i] = loom_fp32_to_fp16(b);
        } else {
            ((int8_t *)kc)[i] = (int8_t)((int)(rnd() % 255) - 127);
            ((int8_t *)vc)[i] = (int8_t)((int)(rnd() % 255) - 127);
        }
    }
    for (int64_t i = 0; i < n_ctx * nkv; i++) { ks[i] = urand(0.001f, 0.01f); vs[i] = urand(0.001f, 0.01f); }
    size_t qb = sizeof(float) * (size_t)(N * nh * D);
    float *q = xmalloc(qb), *oc = xmalloc(qb), *og = xmalloc(qb);
    fill(q, N * nh * D, -1, 1);
    loom_attn_params p = {N, nh, pos0, 1.0f / sqrtf((float)D), 0};
    const int i8 = t == LOOM_KV_INT8;
    loom_error err = {0};
    loom_cpu_attention(q, kc, i8 ? ks : NULL, vc, i8 ? vs : NULL, &kv, &p, oc, &err);
    void *dkc = dup_dev(kc, cb), *dvc = dup_dev(vc, cb);
    float *dks = dup_dev(ks, sb), *dvs = dup_dev(vs, sb), *dq = dup_dev(q, qb), *dout = dev_poison(qb);
    if (simple) set_switch("LOOM_FAST_ATTN", "0");
    report_status("attention", shape,
                  loom_cuda_attention(dq, dkc, i8 ? dks : NULL, dvc, i8 ? dvs : NULL, &kv, &p,
                                      dout, &err, 0),
                  &err);
    to_host(og, dout, qb);
    if (simple) set_switch("LOOM_FAST_ATTN", "1");
    double mx = 0, worst = 0;
    for (int64_t i = 0; i < N * nh * D; i++) if (fabs(oc[i]) > mx) mx = fabs(oc[i]);
    for (int64_t i = 0; i < N * nh * D; i++) {
        double e = fabs((double)og[i] - oc[i]) / (mx + 1e-30);
        if (!(e <= worst)) worst = e;
    }
    report(N == 1 ? "attention decode" : "attention prefill", shape, worst, 1e-4);
    free(kc); free(vc); free(ks); free(vs); free(q); free(oc); free(og);
    cudaFree(dkc); cudaFree(dvc); cudaFree(dks); cudaFree(dvs); cudaFree(dq); cudaFree(dout);
}

/* Random cache contents of `n` elements of type t (host), and per-row scales. */
static void rand_cache(loom_kv_type t, uint8_t *c, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (t == LOOM_KV_F32) ((float *)c)[i] = urand(-1, 1);
        else if (t == LOOM_KV_F16) ((uint16_t *)c)[i] = loom_fp32_to_fp16(urand(-1, 1));
        else ((int8_t *)c)[i] = (int8_t)((int)(rnd() % 255) - 127);
    }
}

/* loom_cuda_attention_at (position in device memory, grid sized from n_ctx) against
 * loom_cuda_attention at the same positions: bit-identical; the by-value result is also checked
 * against the CPU. Device positions outside 0 .. n_ctx - N are clamped: -7 runs as 0 and
 * n_ctx + 50 as n_ctx - N. Every other by-value launch sets in_order (v6: no early reads, no
 * PDL), so the early form is also checked against it bit for bit. */
static void test_attention_at(loom_kv_type t, int64_t D, int64_t nh, int64_t nkv, int64_t N,
                              int64_t n_ctx, const int64_t *pos, int npos) {
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    const int64_t ne = n_ctx * nkv * D;
    size_t cb = (size_t)ne * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    uint8_t *kc = xmalloc(cb), *vc = xmalloc(cb);
    float *ks = xmalloc(sb), *vs = xmalloc(sb);
    rand_cache(t, kc, ne);
    rand_cache(t, vc, ne);
    for (int64_t i = 0; i < n_ctx * nkv; i++) { ks[i] = urand(0.001f, 0.01f); vs[i] = urand(0.001f, 0.01f); }
    size_t qb = sizeof(float) * (size_t)(N * nh * D);
    float *q = xmalloc(qb), *oc = xmalloc(qb), *ob = xmalloc(qb), *oa = xmalloc(qb);
    fill(q, N * nh * D, -1, 1);
    const int i8 = t == LOOM_KV_INT8;
    void *dkc = dup_dev(kc, cb), *dvc = dup_dev(vc, cb);
    float *dks = dup_dev(ks, sb), *dvs = dup_dev(vs, sb), *dq = dup_dev(q, qb), *dout = dev_poison(qb);
    int32_t *dpos = dev_poison(sizeof(int32_t));
    loom_error err = {0};
    for (int i = 0; i < npos + 2; i++) {
        /* the last two cases: device positions below and above the range */
        const int64_t p = i < npos ? pos[i] : (i == npos ? 0 : n_ctx - N);
        const int32_t dp = i < npos ? (int32_t)p : (i == npos ? -7 : (int32_t)(n_ctx + 50));
        char shape[96];
        snprintf(shape, sizeof shape, "%s D=%lld h=%lld/%lld N=%lld ctx=%lld pos=%d",
                 t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"), (long long)D,
                 (long long)nh, (long long)nkv, (long long)N, (long long)n_ctx, (int)dp);
        loom_attn_params par = {N, nh, p, 1.0f / sqrtf((float)D), i & 1};
        CK(cudaMemset(dout, 0xFF, qb));
        report_status("attention", shape,
                      loom_cuda_attention(dq, dkc, i8 ? dks : NULL, dvc, i8 ? dvs : NULL, &kv,
                                          &par, dout, &err, 0),
                      &err);
        to_host(ob, dout, qb);
        if (i < npos) { /* the by-value result against the CPU (the cache beyond p is unread) */
            loom_cpu_attention(q, kc, i8 ? ks : NULL, vc, i8 ? vs : NULL, &kv, &par, oc, &err);
            double mx = 0, worst = 0;
            for (int64_t e = 0; e < N * nh * D; e++) if (fabs(oc[e]) > mx) mx = fabs(oc[e]);
            for (int64_t e = 0; e < N * nh * D; e++) {
                double d = fabs((double)ob[e] - oc[e]) / (mx + 1e-30);
                if (!(d <= worst)) worst = d;
            }
            report("attention (big cache)", shape, worst, 1e-4);
        }
        CK(cudaMemcpy(dpos, &dp, sizeof dp, cudaMemcpyHostToDevice));
        CK(cudaMemset(dout, 0xFF, qb));
        par.pos0 = 12345678; /* ignored by _at */
        par.in_order = 0;
        report_status("attention_at", shape,
                      loom_cuda_attention_at(dq, dkc, i8 ? dks : NULL, dvc, i8 ? dvs : NULL, &kv,
                                             &par, dpos, dout, &err, 0),
                      &err);
        to_host(oa, dout, qb);
        report_bits("attention_at == value", shape, oa, ob, qb);
    }
    free(kc); free(vc); free(ks); free(vs); free(q); free(oc); free(ob); free(oa);
    cudaFree(dkc); cudaFree(dvc); cudaFree(dks); cudaFree(dvs); cudaFree(dq); cudaFree(dout);
    cudaFree(dpos);
}

/* LOOM_ATTN_PREFILL=0 and =2 on the same inputs, bit for bit: for N = 1 (decode never takes the
 * prefill kernel, so the switch must not change a bit of it). */
static void test_attn_prefill_switch_bits(loom_kv_type t, int64_t D, int64_t nh, int64_t nkv,
                                          int64_t N, int64_t pos0) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s D=%lld h=%lld/%lld N=%lld pos0=%lld",
             t == LOOM_KV_F16 ? "F16" : "INT8", (long long)D, (long long)nh, (long long)nkv,
             (long long)N, (long long)pos0);
    const int64_t n_ctx = pos0 + N, ne = n_ctx * nkv * D;
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    size_t cb = (size_t)ne * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    size_t qb = sizeof(float) * (size_t)(N * nh * D);
    uint8_t *kc = xmalloc(cb), *vc = xmalloc(cb);
    float *ks = xmalloc(sb), *vs = xmalloc(sb), *q = xmalloc(qb), *o0 = xmalloc(qb), *o1 = xmalloc(qb);
    rand_cache(t, kc, ne);
    rand_cache(t, vc, ne);
    for (int64_t i = 0; i < n_ctx * nkv; i++) { ks[i] = urand(0.001f, 0.01f); vs[i] = urand(0.001f, 0.01f); }
    fill(q, N * nh * D, -1, 1);
    const int i8 = t == LOOM_KV_INT8;
    void *dkc = dup_dev(kc, cb), *dvc = dup_dev(vc, cb);
    float *dks = dup_dev(ks, sb), *dvs = dup_dev(vs, sb), *dq = dup_dev(q, qb), *dout = dev_poison(qb);
    loom_attn_params p = {N, nh, pos0, 1.0f / sqrtf((float)D), 0};
    loom_error err = {0};
    for (int sw = 0; sw < 2; sw++) {
        set_switch("LOOM_ATTN_PREFILL", sw ? "2" : "0");
        CK(cudaMemset(dout, 0xFF, qb));
        report_status("attention", shape,
                      loom_cuda_attention(dq, dkc, i8 ? dks : NULL, dvc, i8 ? dvs : NULL, &kv, &p,
                                          dout, &err, 0),
                      &err);
        to_host(sw ? o1 : o0, dout, qb);
    }
    reset_switch("LOOM_ATTN_PREFILL");
    report_bits("decode PREFILL=0 == 2", shape, o0, o1, qb);
    free(kc); free(vc); free(ks); free(vs); free(q); free(o0); free(o1);
    cudaFree(dkc); cudaFree(dvc); cudaFree(dks); cudaFree(dvs); cudaFree(dq); cudaFree(dout);
}

/* Prefill attention, LOOM_ATTN_PREFILL=2 and 1 (attention_prefill.cu: 8 warps walking the
 * tiles' halves apart / 4 warps) and =0 (the v5 path): N in
 * {2, 16, 17, 64, 130, 512}, pos0 0 and > 0 (a prompt after a context), head_dim 64/128,
 * GQA 1/2/4/8, F16/INT8, poisoned outputs, against the CPU twin at attention's 1e-4 of
 * max |out|; the new path also with the position in device memory (_at == by value, clamped
 * positions) and a GQA group of 16; shapes it does not take run the old path; decode bits
 * unchanged by the switch. (--prefill: this section alone.) */
static void test_prefill_section(void) {
    static const int64_t pn[] = {2, 16, 17, 64, 130, 512};
    static const int64_t gq[][2] = {{8, 8}, {8, 4}, {32, 8}, {16, 2}}; /* GQA 1, 2, 4, 8 */
    for (int sw = 2; sw >= 0; sw--) {
        printf("-- prefill attention (LOOM_ATTN_PREFILL=%d)\n", sw);
        set_switch("LOOM_ATTN_PREFILL", sw == 2 ? "2" : (sw ? "1" : "0"));
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++)
            for (int g = 0; g < 4; g++)
                for (int di = 0; di < 2; di++)
                    for (int i = 0; i < 6; i++) {
                        if (g_quick && (i == 1 || i == 3 || i == 5)) continue;
                        if (i == 5 && (g != 2 || (sw == 0 && di == 0))) continue; /* CPU time */
                        if (sw == 0 && (g & 1)) continue; /* the old path: a subset */
                        /* pos0: 0, or a context before the prompt (odd cases) */
                        const int64_t p0 = ((i + g + di) & 1) ? (g_quick ? 45 : 300 + 37 * g) : 0;
                        test_attention((loom_kv_type)t, di ? 128 : 64, gq[g][0], gq[g][1],
                                       pn[i], p0, 0);
                    }
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) /* the 4B shape after a context */
            test_attention((loom_kv_type)t, 128, 32, 8, g_quick ? 64 : 512, g_quick ? 100 : 1536, 0);
        if (sw) {
            for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) {
                test_attention((loom_kv_type)t, 64, 32, 2, 33, 70, 0); /* 16 heads a KV head */
                const int64_t ctx = g_quick ? 300 : 1200;
                const int64_t pp[] = {0, 57, ctx - 130};
                test_attention_at((loom_kv_type)t, 128, 32, 8, 130, ctx, pp, g_quick ? 2 : 3);
                test_attention_at((loom_kv_type)t, 64, 8, 8, 17, ctx, pp, g_quick ? 2 : 3);
            }
        }
    }
    for (int sw = 1; sw <= 2; sw++) { /* a head_dim or type it does not take: the old path */
        set_switch("LOOM_ATTN_PREFILL", sw == 2 ? "2" : "1");
        test_attention(LOOM_KV_F16, 96, 32, 8, 17, 40, 0);
        test_attention(LOOM_KV_F32, 128, 32, 8, 17, 40, 0);
    }
    reset_switch("LOOM_ATTN_PREFILL");
    for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) {
        test_attn_prefill_switch_bits((loom_kv_type)t, 128, 32, 8, 1, g_quick ? 299 : 1999);
        test_attn_prefill_switch_bits((loom_kv_type)t, 64, 16, 2, 1, 700);
    }
}

/* A decode step captured ONCE into a CUDA graph (kv_write_at of K and V, then attention_at,
 * the position in device memory) and replayed at several positions with fresh K/V/q inputs,
 * against the by-value launchers on a second copy of the cache: outputs and caches
 * bit-identical. */
static void test_graph_replay(loom_kv_type t, int64_t D, int64_t nh, int64_t nkv, int64_t N,
                              int64_t n_ctx, const int64_t *pos, int npos) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s D=%lld h=%lld/%lld N=%lld ctx=%lld x%d",
             t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"), (long long)D,
             (long long)nh, (long long)nkv, (long long)N, (long long)n_ctx, npos);
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    const int64_t ne = n_ctx * nkv * D;
    size_t cb = (size_t)ne * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    uint8_t *kc = xmalloc(cb), *vc = xmalloc(cb), *c1 = xmalloc(cb), *c2 = xmalloc(cb);
    float *ks = xmalloc(sb);
    rand_cache(t, kc, ne);
    rand_cache(t, vc, ne);
    for (int64_t i = 0; i < n_ctx * nkv; i++) ks[i] = urand(0.001f, 0.01f);
    const int i8 = t == LOOM_KV_INT8;
    /* cache A (graph) and B (by value), identical at the start */
    void *ak = dup_dev(kc, cb), *av = dup_dev(vc, cb), *bk = dup_dev(kc, cb), *bv = dup_dev(vc, cb);
    float *aks = dup_dev(ks, sb), *avs = dup_dev(ks, sb), *bks = dup_dev(ks, sb), *bvs = dup_dev(ks, sb);
    size_t qb = sizeof(float) * (size_t)(N * nh * D), kvb = sizeof(float) * (size_t)(N * nkv * D);
    float *q = xmalloc(qb), *src = xmalloc(kvb), *oa = xmalloc(qb), *ob = xmalloc(qb);
    float *dq = dev_poison(qb), *dk = dev_poison(kvb), *dv = dev_poison(kvb);
    float *outa = dev_poison(qb), *outb = dev_poison(qb);
    int32_t *dpos = dev_poison(sizeof(int32_t));
    loom_attn_params par = {N, nh, 0, 1.0f / sqrtf((float)D), 0};
    loom_error err = {0};
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int ok = 1;
    if (loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(nh, D, 0, 0), &err) != LOOM_OK) ok = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (loom_cuda_kv_write_at(dk, N, dpos, ak, i8 ? aks : NULL, &kv, &err, s) != LOOM_OK ||
        loom_cuda_kv_write_at(dv, N, dpos, av, i8 ? avs : NULL, &kv, &err, s) != LOOM_OK ||
        loom_cuda_attention_at(dq, ak, i8 ? aks : NULL, av, i8 ? avs : NULL, &kv, &par, dpos, outa,
                               &err, s) != LOOM_OK)
        ok = 0;
    CK(cudaStreamEndCapture(s, &graph));
    if (!ok) {
        report_status("graph replay", shape, LOOM_ERR_CUDA, &err);
    } else {
        CK(cudaGraphInstantiate(&exec, graph, 0));
        size_t diff = 0;
        for (int i = 0; i < npos; i++) {
            fill(q, N * nh * D, -1, 1);
            CK(cudaMemcpy(dq, q, qb, cudaMemcpyHostToDevice));
            fill(src, N * nkv * D, -1, 1);
            CK(cudaMemcpy(dk, src, kvb, cudaMemcpyHostToDevice));
            fill(src, N * nkv * D, -1, 1);
            CK(cudaMemcpy(dv, src, kvb, cudaMemcpyHostToDevice));
            const int32_t dp = (int32_t)pos[i];
            CK(cudaMemcpy(dpos, &dp, sizeof dp, cudaMemcpyHostToDevice));
            CK(cudaMemset(outa, 0xFF, qb));
            CK(cudaMemset(outb, 0xFF, qb));
            CK(cudaGraphLaunch(exec, s));
            par.pos0 = pos[i];
            if (loom_cuda_kv_write(dk, N, pos[i], bk, i8 ? bks : NULL, &kv, &err, s) != LOOM_OK ||
                loom_cuda_kv_write(dv, N, pos[i], bv, i8 ? bvs : NULL, &kv, &err, s) != LOOM_OK ||
                loom_cuda_attention(dq, bk, i8 ? bks : NULL, bv, i8 ? bvs : NULL, &kv, &par,
                                    outb, &err, s) != LOOM_OK)
                report_status("graph replay (by value)", shape, LOOM_ERR_CUDA, &err);
            CK(cudaStreamSynchronize(s));
            to_host(oa, outa, qb);
            to_host(ob, outb, qb);
            for (size_t e = 0; e < qb; e++) diff += ((uint8_t *)oa)[e] != ((uint8_t *)ob)[e];
        }
        to_host(c1, ak, cb);
        to_host(c2, bk, cb);
        for (size_t e = 0; e < cb; e++) diff += c1[e] != c2[e];
        to_host(c1, av, cb);
        to_host(c2, bv, cb);
        for (size_t e = 0; e < cb; e++) diff += c1[e] != c2[e];
        if (i8) {
            float *s1 = xmalloc(sb), *s2 = xmalloc(sb);
            to_host(s1, aks, sb); to_host(s2, bks, sb); diff += memcmp(s1, s2, sb) != 0;
            to_host(s1, avs, sb); to_host(s2, bvs, sb); diff += memcmp(s1, s2, sb) != 0;
            free(s1); free(s2);
        }
        report("graph replay == value", shape, (double)diff, 0);
        CK(cudaGraphExecDestroy(exec));
    }
    if (graph) CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(s));
    free(kc); free(vc); free(c1); free(c2); free(ks); free(q); free(src); free(oa); free(ob);
    cudaFree(ak); cudaFree(av); cudaFree(bk); cudaFree(bv);
    cudaFree(aks); cudaFree(avs); cudaFree(bks); cudaFree(bvs);
    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(outa); cudaFree(outb); cudaFree(dpos);
}

/* rope_kv_write (the attention prologue) against its CPU twin over `steps` steps on one pair of
 * caches (both sides start from the same 0xFF bytes, so an unwritten row differs). Step i has
 * T tokens at positions p0_i + T-1-t (distinct, descending when T > 1), read from device memory.
 * graph: the launch is captured ONCE into a CUDA graph and replayed for every step with new
 * positions and inputs (no re-capture). q_out: 1e-4 * max(1, max|q_out|) absolute; K cache: that
 * plus one F16 rounding (|x| 2^-10) or one INT8 step (the row's scale), reported as the worst
 * ratio to the allowance (tol 1); V cache and V scales: bit-exact. */
static void test_rope_kv(loom_kv_type t, loom_rope_mode mode, int norms, int64_t D, int64_t nh,
                         int64_t nkv, int64_t T, int64_t n_rot, int steps, int graph) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s %s%s D=%lld h=%lld/%lld T=%lld rot=%lld x%d%s",
             t == LOOM_KV_F32 ? "F32" : (t == LOOM_KV_F16 ? "F16" : "INT8"),
             mode == LOOM_ROPE_NEOX ? "NEOX" : "NORM", norms ? " norm" : "", (long long)D,
             (long long)nh, (long long)nkv, (long long)T, (long long)n_rot, steps,
             graph ? " graph" : "");
    const int64_t n_ctx = 2048, ne = n_ctx * nkv * D, nq = T * nh * D, nk = T * nkv * D;
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    loom_rope_params p = {T, nh, nkv, D, n_rot, mode, 1000000.0f, 1.0f};
    const int i8 = t == LOOM_KV_INT8;
    size_t cb = (size_t)ne * kv_elem(t), sb = sizeof(float) * (size_t)(n_ctx * nkv);
    size_t qb = sizeof(float) * (size_t)nq, kb = sizeof(float) * (size_t)nk;
    uint8_t *ck = xmalloc(cb), *cv = xmalloc(cb), *gk = xmalloc(cb), *gv = xmalloc(cb);
    float *cks = xmalloc(sb), *cvs = xmalloc(sb), *gks = xmalloc(sb), *gvs = xmalloc(sb);
    memset(ck, 0xFF, cb); memset(cv, 0xFF, cb); memset(cks, 0xFF, sb); memset(cvs, 0xFF, sb);
    void *dck = dup_dev(ck, cb), *dcv = dup_dev(cv, cb);
    float *dks = dup_dev(cks, sb), *dvs = dup_dev(cvs, sb);
    float *q = xmalloc(qb), *k = xmalloc(kb), *v = xmalloc(kb), *qo = xmalloc(qb), *go = xmalloc(qb);
    float qw[2048], kw[2048];
    fill(qw, D, 0.5f, 1.5f);
    fill(kw, D, 0.5f, 1.5f);
    int32_t *pos = xmalloc(sizeof(int32_t) * (size_t)T);
    float *dq = dev_poison(qb), *dk = dev_poison(kb), *dv = dev_poison(kb), *dqo = dev_poison(qb);
    float *dqw = dup_dev(qw, sizeof(float) * (size_t)D), *dkw = dup_dev(kw, sizeof(float) * (size_t)D);
    int32_t *dpos = dev_poison(sizeof(int32_t) * (size_t)T);
    loom_error err = {0};
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaGraph_t gr = NULL;
    cudaGraphExec_t exec = NULL;
    double q_worst = 0, q_max = 1;
    for (int step = 0; step < steps; step++) {
        fill(q, nq, -1, 1);
        fill(k, nk, -1, 1);
        fill(v, nk, -1, 1);
        int64_t p0 = step == steps - 1 ? n_ctx - T : (int64_t)(rnd() % (uint64_t)(n_ctx - T + 1));
        for (int64_t i = 0; i < T; i++) pos[i] = (int32_t)(p0 + T - 1 - i);
        CK(cudaMemcpy(dq, q, qb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dk, k, kb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dv, v, kb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dpos, pos, sizeof(int32_t) * (size_t)T, cudaMemcpyHostToDevice));
        CK(cudaMemset(dqo, 0xFF, qb));
        loom_status st = LOOM_OK;
        if (!graph || step == 0) {
            if (graph) CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            st = loom_cuda_rope_kv_write(dq, dk, dv, dpos, norms ? dqw : NULL, norms ? dkw : NULL,
                                         1e-6f, &p, dck, i8 ? dks : NULL, dcv, i8 ? dvs : NULL,
                                         &kv, dqo, &err, s);
            if (graph) {
                CK(cudaStreamEndCapture(s, &gr));
                if (st == LOOM_OK) CK(cudaGraphInstantiate(&exec, gr, 0));
            }
        }
        report_status("rope_kv_write", shape, st, &err);
        if (st != LOOM_OK) break;
        if (graph) CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        if (loom_cpu_rope_kv_write(q, k, v, pos, norms ? qw : NULL, norms ? kw : NULL, 1e-6f, &p,
                                   ck, i8 ? cks : NULL, cv, i8 ? cvs : NULL, &kv, qo, &err))
            report_status("rope_kv_write (cpu)", shape, LOOM_ERR_INVALID_ARGUMENT, &err);
        to_host(go, dqo, qb);
        for (int64_t i = 0; i < nq; i++) {
            double e = fabs((double)go[i] - qo[i]);
            if (!(e <= q_worst)) q_worst = e;
            if (fabs(qo[i]) > q_max) q_max = fabs(qo[i]);
        }
    }
    report("rope_kv_write q_out", shape, q_worst, 1e-4 * q_max);
    to_host(gk, dck, cb); to_host(gv, dcv, cb); to_host(gks, dks, sb); to_host(gvs, dvs, sb);
    double k_ratio = 0;
    for (int64_t i = 0; i < ne; i++) {
        float a, b, allow = (float)(1e-4 * q_max);
        if (t == LOOM_KV_F32) {
            if (!memcmp(gk + 4 * i, ck + 4 * i, 4)) continue;
            memcpy(&a, gk + 4 * i, 4), memcpy(&b, ck + 4 * i, 4);
        } else if (t == LOOM_KV_F16) {
            uint16_t ha, hb;
            memcpy(&ha, gk + 2 * i, 2), memcpy(&hb, ck + 2 * i, 2);
            if (ha == hb) continue;
            a = loom_fp16_to_fp32(ha), b = loom_fp16_to_fp32(hb);
            allow += fabsf(b) * (1.0f / 1024.0f);
        } else {
            const int64_t row = i / D;
            if (gk[i] == ck[i] && !memcmp(&gks[row], &cks[row], 4)) continue;
            a = (float)(int8_t)gk[i] * gks[row], b = (float)(int8_t)ck[i] * cks[row];
            allow += cks[row] * 1.01f;
        }
        double r = fabs((double)a - b) / allow;
        if (!(r <= k_ratio)) k_ratio = r;
    }
    report("rope_kv_write k_cache", shape, k_ratio, 1.0);
    size_t diff = 0;
    for (size_t e = 0; e < cb; e++) diff += gv[e] != cv[e];
    if (i8) diff += memcmp(gvs, cvs, sb) != 0;
    report("rope_kv_write v_cache", shape, (double)diff, 0);
    if (exec) CK(cudaGraphExecDestroy(exec));
    if (gr) CK(cudaGraphDestroy(gr));
    CK(cudaStreamDestroy(s));
    free(ck); free(cv); free(gk); free(gv); free(cks); free(cvs); free(gks); free(gvs);
    free(q); free(k); free(v); free(qo); free(go); free(pos);
    cudaFree(dck); cudaFree(dcv); cudaFree(dks); cudaFree(dvs); cudaFree(dq); cudaFree(dk);
    cudaFree(dv); cudaFree(dqo); cudaFree(dqw); cudaFree(dkw); cudaFree(dpos);
}

/* loom_cuda_rope_kv_attention_at (the attention prologue folded into decode attention v6)
 * against its own two-launch path (LOOM_ATTN_FUSED=0: rope_kv_write into q_tmp, then
 * attention_at), bit for bit: out, the K/V cache bytes and the INT8 row scales. Two copies of one
 * random cache; at each position (in the order given, on the same caches, like decode steps) both
 * sides get the same fresh raw q/k/v, outputs and q_tmp poisoned first. Rows at the position
 * are compared at every step, the whole caches at the end. The fused launch leaves q_tmp as it
 * was (poison), the two launches write it: that tells which path ran, and it must be the fused
 * one exactly where the contract says (sm_90, F16/INT8, head_dim 64/128, LOOM_ATTN_V6 on).
 * graph: both calls captured once each and replayed at every position. */
static void test_rope_kv_attn(loom_kv_type t, int64_t D, int64_t nh, int64_t nkv, int64_t n_ctx,
                              const int64_t *pos, int npos, int norms, loom_rope_mode mode,
                              int graph, int expect_fused) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s %s%s D=%lld h=%lld/%lld ctx=%lld x%d%s",
             t == LOOM_KV_F16 ? "F16" : "INT8", mode == LOOM_ROPE_NEOX ? "NEOX" : "NORM",
             norms ? " norm" : "", (long long)D, (long long)nh, (long long)nkv,
             (long long)n_ctx, npos, graph ? " graph" : "");
    const int i8 = t == LOOM_KV_INT8;
    const int64_t ne = n_ctx * nkv * D, nq = nh * D, nk = nkv * D;
    const size_t es = kv_elem(t), cb = (size_t)ne * es, sb = sizeof(float) * (size_t)(n_ctx * nkv);
    const size_t qb = sizeof(float) * (size_t)nq, kb = sizeof(float) * (size_t)nk;
    const size_t rowb = (size_t)nk * es, rows_sb = sizeof(float) * (size_t)nkv;
    loom_kv_layout kv = {t, n_ctx, nkv, D};
    loom_rope_params rp = {1, nh, nkv, D, D, mode, 1000000.0f, 1.0f};
    loom_attn_params ap = {1, nh, 0, 1.0f / sqrtf((float)D), 0};
    uint8_t *kc = xmalloc(cb), *vc = xmalloc(cb), *ga = xmalloc(cb), *gb = xmalloc(cb);
    float *ks = xmalloc(sb), *vs = xmalloc(sb), *sa = xmalloc(sb), *sbb = xmalloc(sb);
    rand_cache(t, kc, ne);
    rand_cache(t, vc, ne);
    for (int64_t i = 0; i < n_ctx * nkv; i++) { ks[i] = urand(0.001f, 0.01f); vs[i] = urand(0.001f, 0.01f); }
    void *dk[2] = {dup_dev(kc, cb), dup_dev(kc, cb)}, *dv[2] = {dup_dev(vc, cb), dup_dev(vc, cb)};
    float *dks[2] = {dup_dev(ks, sb), dup_dev(ks, sb)}, *dvs[2] = {dup_dev(vs, sb), dup_dev(vs, sb)};
    float *q = xmalloc(qb), *k = xmalloc(kb), *v = xmalloc(kb), qw[256], kw[256];
    fill(qw, D, 0.5f, 1.5f);
    fill(kw, D, 0.5f, 1.5f);
    float *dq = dev_poison(qb), *dkr = dev_poison(kb), *dvr = dev_poison(kb);
    float *dqw = dup_dev(qw, sizeof(float) * (size_t)D), *dkw = dup_dev(kw, sizeof(float) * (size_t)D);
    float *dout[2] = {dev_poison(qb), dev_poison(qb)}, *dqt[2] = {dev_poison(qb), dev_poison(qb)};
    int32_t *dpos = dev_poison(sizeof(int32_t));
    float *oa = xmalloc(qb), *ob = xmalloc(qb), *qt = xmalloc(qb);
    uint8_t *ra = xmalloc(2 * rowb), *rb = xmalloc(2 * rowb);
    loom_error err = {0};
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaGraph_t gr[2] = {NULL, NULL};
    cudaGraphExec_t ex[2] = {NULL, NULL};
    size_t out_diff = 0, row_diff = 0, path_bad = 0;
    int first_bad = -1, ok = 1;
    if (loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(nh, D, 0, 0), &err) != LOOM_OK) {
        report_status("rope_kv_attention", shape, LOOM_ERR_OUT_OF_MEMORY, &err);
        ok = 0;
    }
    for (int i = 0; ok && i < npos; i++) {
        const int32_t p = (int32_t)pos[i];
        fill(q, nq, -1, 1);
        fill(k, nk, -1, 1);
        fill(v, nk, -1, 1);
        CK(cudaMemcpy(dq, q, qb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dkr, k, kb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dvr, v, kb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dpos, &p, sizeof p, cudaMemcpyHostToDevice));
        for (int side = 0; side < 2; side++) { /* 0: two launches, 1: fused */
            CK(cudaMemset(dout[side], 0xFF, qb));
            CK(cudaMemset(dqt[side], 0xFF, qb));
            set_switch("LOOM_ATTN_FUSED", side ? "1" : "0");
            loom_status st = LOOM_OK;
            if (!graph || i == 0) {
                if (graph) CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                st = loom_cuda_rope_kv_attention_at(
                    dq, dkr, dvr, dpos, norms ? dqw : NULL, norms ? dkw : NULL, 1e-6f, &rp,
                    dk[side], i8 ? dks[side] : NULL, dv[side], i8 ? dvs[side] : NULL, &kv, &ap,
                    dqt[side], dout[side], &err, s);
                if (graph) {
                    CK(cudaStreamEndCapture(s, &gr[side]));
                    if (st == LOOM_OK) CK(cudaGraphInstantiate(&ex[side], gr[side], 0));
                }
            }
            report_status(side ? "rope_kv_attention" : "rope_kv_attention (2)", shape, st, &err);
            if (st != LOOM_OK) { ok = 0; break; }
            if (graph) CK(cudaGraphLaunch(ex[side], s));
            CK(cudaStreamSynchronize(s));
        }
        if (!ok) break;
        to_host(oa, dout[0], qb);
        to_host(ob, dout[1], qb);
        size_t d = 0;
        for (size_t e = 0; e < qb; e++) d += ((uint8_t *)oa)[e] != ((uint8_t *)ob)[e];
        out_diff += d;
        /* the rows at p: K then V (and the INT8 row scales) */
        size_t rd = 0;
        for (int side = 0; side < 2; side++) {
            uint8_t *r = side ? rb : ra;
            to_host(r, (uint8_t *)dk[side] + (size_t)p * rowb, rowb);
            to_host(r + rowb, (uint8_t *)dv[side] + (size_t)p * rowb, rowb);
        }
        for (size_t e = 0; e < 2 * rowb; e++) rd += ra[e] != rb[e];
        if (i8) {
            float x[2][2 * 64];
            for (int side = 0; side < 2; side++) {
                to_host(x[side], dks[side] + (size_t)p * nkv, rows_sb);
                to_host(x[side] + nkv, dvs[side] + (size_t)p * nkv, rows_sb);
            }
            rd += memcmp(x[0], x[1], 2 * rows_sb) != 0;
        }
        row_diff += rd;
        /* which path ran: the fused launch leaves q_tmp poisoned */
        to_host(qt, dqt[1], qb);
        int untouched = 1;
        for (size_t e = 0; e < qb; e++) untouched &= ((uint8_t *)qt)[e] == 0xFF;
        path_bad += untouched != expect_fused;
        if ((d || rd || untouched != expect_fused) && first_bad < 0) first_bad = p;
    }
    set_switch("LOOM_ATTN_FUSED", "1");
    if (ok) {
        to_host(ga, dk[0], cb); to_host(gb, dk[1], cb);
        size_t cd = 0;
        for (size_t e = 0; e < cb; e++) cd += ga[e] != gb[e];
        to_host(ga, dv[0], cb); to_host(gb, dv[1], cb);
        for (size_t e = 0; e < cb; e++) cd += ga[e] != gb[e];
        if (i8) {
            to_host(sa, dks[0], sb); to_host(sbb, dks[1], sb);
            cd += memcmp(sa, sbb, sb) != 0;
            to_host(sa, dvs[0], sb); to_host(sbb, dvs[1], sb);
            cd += memcmp(sa, sbb, sb) != 0;
        }
        if (first_bad >= 0) printf("  (first differing position: %d)\n", first_bad);
        report(expect_fused ? "fused == 2 launches out" : "fallback == 2 l. out", shape,
               (double)out_diff, 0);
        report(expect_fused ? "fused == 2 l. K/V rows" : "fallback == 2 l. K/V", shape,
               (double)(row_diff + cd), 0);
        report(expect_fused ? "fused path taken" : "fallback path taken", shape, (double)path_bad, 0);
    }
    for (int side = 0; side < 2; side++) {
        if (ex[side]) CK(cudaGraphExecDestroy(ex[side]));
        if (gr[side]) CK(cudaGraphDestroy(gr[side]));
        cudaFree(dk[side]); cudaFree(dv[side]); cudaFree(dks[side]); cudaFree(dvs[side]);
        cudaFree(dout[side]); cudaFree(dqt[side]);
    }
    CK(cudaStreamDestroy(s));
    free(kc); free(vc); free(ga); free(gb); free(ks); free(vs); free(sa); free(sbb);
    free(q); free(k); free(v); free(oa); free(ob); free(qt); free(ra); free(rb);
    cudaFree(dq); cudaFree(dkr); cudaFree(dvr); cudaFree(dqw); cudaFree(dkw); cudaFree(dpos);
}

/* The fused section (--fused runs only it): head_dim 64/128 (+ the fallback shapes 80/96/256),
 * GQA 1/2/4/8 (+ 16: two head groups a KV head), F16/INT8, norms or not, NORM and NEOX, at
 * positions 0, 1, 63, 64 and across tile (32 rows), warp (4 tiles) and split boundaries, in a
 * 4K cache (the cluster combine) and an 8K one (the global combine, up to 8191). */
static void test_fused_section(int sm90) {
    static const int64_t p4k[] = {0, 1, 2, 31, 32, 33, 63, 64, 65, 95, 127, 128, 129, 255, 256,
                                  257, 511, 1000, 2047, 2048, 3000, 4064, 4095};
    static const int64_t p8k[] = {0, 1, 63, 64, 543, 4095, 4096, 4097, 5000, 6143, 8160, 8191};
    static const int64_t pq[] = {0, 1, 63, 64, 300, 1023};
    static const int64_t gq[][2] = {{8, 8}, {16, 8}, {32, 8}, {32, 4}, {32, 2}};
    const int n4 = (int)(sizeof p4k / sizeof p4k[0]), n8 = (int)(sizeof p8k / sizeof p8k[0]);
    printf("-- the attention prologue folded into decode attention (rope_kv_attention_at)\n");
    for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++)
        for (int di = 0; di < 2; di++)
            for (int g = 0; g < 5; g++)
                for (int c = 0; c < (g_quick ? 1 : 4); c++) {
                    const int norms = c & 1;
                    const loom_rope_mode m = (c >> 1) ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM;
                    if (g_quick && g != 2 && g != 4 && !(di == 0 && g == 0)) continue;
                    test_rope_kv_attn((loom_kv_type)t, di ? 128 : 64, gq[g][0], gq[g][1],
                                      g_quick ? 1024 : 4096, g_quick ? pq : p4k,
                                      g_quick ? 6 : n4, g_quick ? 1 : norms,
                                      g_quick ? LOOM_ROPE_NEOX : m, 0, sm90);
                }
    if (!g_quick)
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) {
            test_rope_kv_attn((loom_kv_type)t, 128, 32, 8, 8192, p8k, n8, 1, LOOM_ROPE_NEOX, 0, sm90);
            test_rope_kv_attn((loom_kv_type)t, 64, 16, 2, 8192, p8k, n8, 0, LOOM_ROPE_NORM, 0, sm90);
            test_rope_kv_attn((loom_kv_type)t, 128, 32, 8, 4096, p4k, n4, 1, LOOM_ROPE_NEOX, 1, sm90);
            test_rope_kv_attn((loom_kv_type)t, 128, 32, 8, 8192, p8k, n8, 1, LOOM_ROPE_NEOX, 1, sm90);
        }
    /* the shapes without a fused kernel: the same entry point runs the two launches */
    static const int64_t dx[3] = {80, 96, 256};
    for (int i = 0; i < 3; i++)
        test_rope_kv_attn(i == 1 ? LOOM_KV_INT8 : LOOM_KV_F16, dx[i], 32, 8, g_quick ? 1024 : 4096,
                          g_quick ? pq : p4k, g_quick ? 3 : 8, 1, LOOM_ROPE_NEOX, 0, 0);
    set_switch("LOOM_ATTN_V6", "0"); /* v5: no fused kernel either */
    test_rope_kv_attn(LOOM_KV_F16, 128, 32, 8, 4096, p4k, g_quick ? 3 : 8, 1, LOOM_ROPE_NEOX, 0, 0);
    set_switch("LOOM_ATTN_V6", "1");
    { /* the fused kernel's F16 tiles by cp.async (LOOM_ATTN_TMA=0; TMA is the default) */
        const saved_switch tma = save_switch("LOOM_ATTN_TMA");
        set_switch("LOOM_ATTN_TMA", "0");
        test_rope_kv_attn(LOOM_KV_F16, 128, 32, 8, g_quick ? 1024 : 4096, g_quick ? pq : p4k,
                          g_quick ? 3 : 8, 1, LOOM_ROPE_NEOX, 0, sm90);
        restore_switch(&tma);
    }
}

/* ---- elementwise, embed, softmax, argmax, conversions ----------------------------------- */
static void test_elementwise(int64_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    size_t nb = sizeof(float) * (size_t)n;
    float *a = xmalloc(nb), *b = xmalloc(nb), *yc = xmalloc(nb), *yg = xmalloc(nb);
    fill(a, n, -8, 8);
    fill(b, n, -8, 8);
    float *da = dup_dev(a, nb), *db = dup_dev(b, nb), *dy = dev_poison(nb);
    loom_error err = {0};
    for (int op = 0; op < 4; op++) {
        static const char *names[4] = {"add", "mul", "silu", "swiglu"};
        CK(cudaMemset(dy, 0xFF, nb));
        loom_status st;
        if (op == 0) { loom_cpu_add(a, b, n, yc, &err); st = loom_cuda_add(da, db, n, dy, &err, 0); }
        else if (op == 1) { loom_cpu_mul(a, b, n, yc, &err); st = loom_cuda_mul(da, db, n, dy, &err, 0); }
        else if (op == 2) { loom_cpu_silu(a, n, yc, &err); st = loom_cuda_silu(da, n, dy, &err, 0); }
        else { loom_cpu_swiglu(a, b, n, yc, &err); st = loom_cuda_swiglu(da, db, n, dy, &err, 0); }
        report_status(names[op], shape, st, &err);
        to_host(yg, dy, nb);
        if (op < 2) { report_bits(names[op], shape, yg, yc, nb); continue; }
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs((double)yg[i] - yc[i]) / (fabs((double)yc[i]) + 1e-30);
            if (!(e <= worst)) worst = e;
        }
        report(names[op], shape, worst, 1e-6);
    }
    /* bias_add over rows x m */
    int64_t m = 97, rows = n / 97;
    memcpy(yc, a, nb);
    loom_cpu_bias_add(yc, b, rows, m, &err);
    CK(cudaMemcpy(dy, da, nb, cudaMemcpyDeviceToDevice));
    report_status("bias_add", shape, loom_cuda_bias_add(dy, db, rows, m, &err, 0), &err);
    to_host(yg, dy, nb);
    report_bits("bias_add", shape, yg, yc, sizeof(float) * (size_t)(rows * m));
    /* add_bcast / mul_bcast: b[0..m) repeated over rows x m */
    for (int op = 0; op < 2; op++) {
        const char *name = op ? "mul_bcast" : "add_bcast";
        CK(cudaMemset(dy, 0xFF, nb));
        loom_status st;
        if (op) { loom_cpu_mul_bcast(a, rows * m, b, m, yc, &err); st = loom_cuda_mul_bcast(da, rows * m, db, m, dy, &err, 0); }
        else { loom_cpu_add_bcast(a, rows * m, b, m, yc, &err); st = loom_cuda_add_bcast(da, rows * m, db, m, dy, &err, 0); }
        report_status(name, shape, st, &err);
        to_host(yg, dy, nb);
        report_bits(name, shape, yg, yc, sizeof(float) * (size_t)(rows * m));
    }
    /* f32 -> f16 -> f32 */
    uint16_t *hc = xmalloc(sizeof(uint16_t) * (size_t)n), *hg = xmalloc(sizeof(uint16_t) * (size_t)n);
    a[0] = 1e6f; a[1] = -INFINITY; a[2] = 6.1e-6f; a[3] = -0.0f;
    CK(cudaMemcpy(da, a, nb, cudaMemcpyHostToDevice));
    uint16_t *dh = dev_poison(sizeof(uint16_t) * (size_t)n);
    loom_cpu_f32_to_f16(a, n, hc, &err);
    report_status("f32_to_f16", shape, loom_cuda_f32_to_f16(da, n, dh, &err, 0), &err);
    to_host(hg, dh, sizeof(uint16_t) * (size_t)n);
    report_bits("f32_to_f16", shape, hg, hc, sizeof(uint16_t) * (size_t)n);
    CK(cudaMemset(dy, 0xFF, nb));
    loom_cpu_f16_to_f32(hc, n, yc, &err);
    report_status("f16_to_f32", shape, loom_cuda_f16_to_f32(dh, n, dy, &err, 0), &err);
    to_host(yg, dy, nb);
    report_bits("f16_to_f32", shape, yg, yc, nb);
    free(a); free(b); free(yc); free(yg); free(hc); free(hg);
    cudaFree(da); cudaFree(db); cudaFree(dy); cudaFree(dh);
}

static void test_embed(loom_ggml_type t, int64_t vocab, int64_t D, int64_t n, int simple) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s%s vocab=%lld D=%lld N=%lld", loom_ggml_type_get(t)->name,
             simple ? " simple" : "", (long long)vocab, (long long)D, (long long)n);
    size_t wb;
    uint8_t *w = rand_weights(t, vocab, D, &wb);
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(rnd() % (uint64_t)vocab);
    ids[n - 1] = (int32_t)(vocab - 1);
    size_t ob = sizeof(float) * (size_t)(n * D);
    float *oc = xmalloc(ob), *og = xmalloc(ob);
    loom_error err = {0};
    loom_kweight hw = {w, t, vocab, D};
    loom_cpu_embed(hw, ids, n, oc, &err);
    void *dw = dup_dev(w, wb);
    int32_t *dids = dup_dev(ids, sizeof(int32_t) * (size_t)n);
    float *dout = dev_poison(ob);
    loom_kweight gw = {dw, t, vocab, D};
    if (simple) set_switch("LOOM_FAST_EMBD", "0");
    report_status("embed", shape, loom_cuda_embed(gw, dids, n, dout, &err, 0), &err);
    to_host(og, dout, ob);
    if (simple) set_switch("LOOM_FAST_EMBD", "1");
    report_bits("embed", shape, og, oc, ob);
    free(w); free(ids); free(oc); free(og);
    cudaFree(dw); cudaFree(dids); cudaFree(dout);
}

static void test_softmax_argmax(int64_t rows, int64_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "rows=%lld n=%lld", (long long)rows, (long long)n);
    size_t nb = sizeof(float) * (size_t)(rows * n);
    float *x = xmalloc(nb), *yc = xmalloc(nb), *yg = xmalloc(nb);
    fill(x, rows * n, -20, 20);
    for (int64_t r = 0; r < rows; r++) { /* a tie of the max and a NaN */
        int64_t i = (int64_t)(rnd() % (uint64_t)n), j = (int64_t)(rnd() % (uint64_t)n);
        x[r * n + i] = 25.0f;
        x[r * n + j] = 25.0f;
    }
    float *dx = dup_dev(x, nb), *dy = dev_poison(nb);
    loom_error err = {0};
    loom_cpu_softmax(x, rows, n, yc, &err);
    report_status("softmax", shape, loom_cuda_softmax(dx, rows, n, dy, &err, 0), &err);
    to_host(yg, dy, nb);
    double worst = 0;
    for (int64_t i = 0; i < rows * n; i++) {
        double e = fabs((double)yg[i] - yc[i]) / (1e-6 * fabs((double)yc[i]) + 1e-12);
        if (!(e <= worst)) worst = e;
    }
    report("softmax", shape, worst * 1e-6, 1e-6);
    x[n / 2] = NAN; /* row 0 gets a NaN; argmax ignores it */
    CK(cudaMemcpy(dx, x, nb, cudaMemcpyHostToDevice));
    int32_t *ic = xmalloc(sizeof(int32_t) * (size_t)rows), *ig = xmalloc(sizeof(int32_t) * (size_t)rows);
    int32_t *dout = dev_poison(sizeof(int32_t) * (size_t)rows);
    loom_cpu_argmax(x, rows, n, ic, &err);
    report_status("argmax", shape, loom_cuda_argmax(dx, rows, n, dout, &err, 0), &err);
    to_host(ig, dout, sizeof(int32_t) * (size_t)rows);
    report_bits("argmax", shape, ig, ic, sizeof(int32_t) * (size_t)rows);
    free(x); free(yc); free(yg); free(ic); free(ig);
    cudaFree(dx); cudaFree(dy); cudaFree(dout);
}

/* ---- dependent launches ------------------------------------------------------------------ */
/* Programmatic dependent launch (kernels/cuda/common.cuh): `steps` dependent launches ping-pong
 * between two buffers (each reads what the previous launch wrote and overwrites what the one
 * before it read: read-after-write and write-after-read), grids of many waves; then the same
 * chain captured into a CUDA graph and replayed 3 times. Integer-valued floats, so the expected
 * result is exact. Run with LOOM_CUDA_PDL=1 and =0 by the caller. */
static void test_pdl_chain(int64_t n, int steps) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%lld steps=%d", (long long)n, steps);
    size_t nb = sizeof(float) * (size_t)n;
    float *h = xmalloc(nb), *one = xmalloc(nb), *got = xmalloc(nb);
    for (int64_t i = 0; i < n; i++) {
        h[i] = (float)(i % 1000);
        one[i] = (float)(1 + i % 3);
    }
    float *a = dup_dev(h, nb), *b = dev_poison(nb), *d = dup_dev(one, nb);
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    loom_error err = {0};
    int ok = 1;
    for (int i = 0; i < steps && ok; i++)
        ok = loom_cuda_add(i % 2 ? b : a, d, n, i % 2 ? a : b, &err, s) == LOOM_OK;
    CK(cudaStreamSynchronize(s));
    if (!ok) report_status("pdl chain", shape, LOOM_ERR_CUDA, &err);
    to_host(got, steps % 2 ? b : a, nb);
    size_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != h[i] + (float)steps * one[i];
    report("pdl chain (stream)", shape, (double)bad, 0);
    /* graph: the chain starts from `a` again each replay, so reset it before launching */
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < steps && ok; i++)
        ok = loom_cuda_add(i % 2 ? b : a, d, n, i % 2 ? a : b, &err, s) == LOOM_OK;
    CK(cudaStreamEndCapture(s, &graph));
    if (!ok) report_status("pdl chain (graph)", shape, LOOM_ERR_CUDA, &err);
    CK(cudaGraphInstantiate(&exec, graph, 0));
    bad = 0;
    for (int r = 0; r < 3; r++) {
        CK(cudaMemcpy(a, h, nb, cudaMemcpyHostToDevice));
        CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        to_host(got, steps % 2 ? b : a, nb);
        for (int64_t i = 0; i < n; i++) bad += got[i] != h[i] + (float)steps * one[i];
    }
    report("pdl chain (graph x3)", shape, (double)bad, 0);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(s));
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    free(h);
    free(one);
    free(got);
}

/* ---- bad arguments are refused without a launch ----------------------------------------- */
/* The inputs and outputs of a tiles test (rows against tiles): n tokens of x (dx) and a norm
 * weight (dg) over K, a residual of M rows (dr, from hr), and the two runs' outputs dy[0] (rows),
 * dy[1] (tiles), [n][rows[i]] each, poisoned. */
typedef struct tiles_io {
    float *dx, *dg, *dr, *hr;
    float *dy[2][3];
} tiles_io;
static void tiles_io_make(tiles_io *io, int64_t n, int64_t K, int64_t M, const int64_t *rows) {
    dev_tokens_and_norm(n, K, &io->dx, &io->dg);
    io->hr = xmalloc(sizeof(float) * (size_t)(n * M));
    fill(io->hr, n * M, -1, 1);
    io->dr = dup_dev(io->hr, sizeof(float) * (size_t)(n * M));
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 3; i++) io->dy[v][i] = dev_poison(sizeof(float) * (size_t)(n * rows[i]));
}
/* The end of a tiles test: report_bits of each of the first nout outputs of the two runs under
 * `name`, then frees io, the nw weights and their tiled copies (where they are not the same). */
static void tiles_finish(const char *name, const char *shape, tiles_io *io, const int64_t *rows,
                         int nout, int64_t n, const loom_kweight *w, const loom_kweight *wt,
                         int nw) {
    for (int i = 0; i < nout; i++) {
        const size_t nb = sizeof(float) * (size_t)(n * rows[i]);
        float *a = xmalloc(nb), *c = xmalloc(nb);
        to_host(a, io->dy[0][i], nb);
        to_host(c, io->dy[1][i], nb);
        report_bits(name, shape, a, c, nb);
        free(a);
        free(c);
    }
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 3; i++) cudaFree(io->dy[v][i]);
    for (int i = 0; i < nw; i++) {
        cudaFree((void *)w[i].data);
        if (wt[i].data != w[i].data) cudaFree((void *)wt[i].data);
    }
    cudaFree(io->dx);
    cudaFree(io->dg);
    cudaFree(io->dr);
    free(io->hr);
}
/* ---- LOOM_WEIGHT_Q4K_TILES ---------------------------------------------------------------- */
/* The layout change: loom_cuda_q4k_to_tiles == loom_cpu_q4k_to_tiles byte for byte; then every
 * Q4_K matmul launcher on the tiled weights == the same call on the weights in rows, bit for bit
 * (the kernels only address the bytes differently): op 0 matmul, 1 matmul_add, 2 the SwiGLU pair
 * normed, 3 the plain pair, 4 the triple normed with a Q6_K V (the mixed launch at N = 1), 5 the
 * all-Q4_K triple; N = 1 (GEMV), 5 (8-token GEMM), 37 (the wide GEMM from 16 tokens). */
static const char *const k_tiles_op[6] = {"matmul", "matmul_add", "pair normed swiglu",
                                          "pair", "triple normed q4q4q6", "triple q4"};
static loom_status tiles_run(int op, int64_t n, const loom_kweight *w, const float *dx,
                             const float *dr, const loom_prenorm *pn, float *const *dy,
                             loom_error *err) {
    switch (op) {
    case 0: return loom_cuda_matmul(dx, n, w[0], dy[0], err, 0);
    case 1: return loom_cuda_matmul_add(dx, n, w[0], dr, dy[0], err, 0);
    case 2: return loom_cuda_matmul_pair_normed(dx, pn, n, w[0], w[1], LOOM_PAIR_SWIGLU, dy[0], NULL, err, 0);
    case 3: return loom_cuda_matmul_pair(dx, n, w[0], w[1], LOOM_PAIR_NONE, dy[0], dy[1], err, 0);
    case 4: return loom_cuda_matmul_triple_normed(dx, pn, n, w, NULL, dy, err, 0);
    default: return loom_cuda_matmul_triple(dx, n, w, NULL, dy, err, 0);
    }
}
static void test_tiles(int op, int64_t M, int64_t K, int64_t n) {
    const int nw = op >= 4 ? 3 : op >= 2 ? 2 : 1;
    int64_t rows[3] = {M, M, M};
    loom_ggml_type ty[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q4_K};
    if (op >= 4) rows[1] = rows[2] = M / 4;
    if (op == 4) ty[2] = LOOM_GGML_Q6_K;
    loom_error err = {0};
    loom_kweight w[3] = {{0}}, wt[3] = {{0}};
    char shape[96];
    snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)n);
    for (int i = 0; i < nw; i++) {
        size_t b;
        uint8_t *h = rand_weights(ty[i], rows[i], K, &b);
        w[i] = (loom_kweight){dup_dev(h, b), ty[i], rows[i], K};
        wt[i] = w[i];
        if (ty[i] == LOOM_GGML_Q4_K) {
            void *d = dev_poison(b);
            loom_status st = loom_cuda_q4k_to_tiles(w[i], d, &err, 0);
            report_status("q4k_to_tiles", shape, st, &err);
            wt[i] = (loom_kweight){d, ty[i], rows[i], K, LOOM_WEIGHT_Q4K_TILES};
            if (i == 0) { /* the CUDA layout change against the CPU twin */
                uint8_t *ref = xmalloc(b), *got = xmalloc(b);
                loom_kweight hw = {h, ty[0], rows[0], K};
                st = loom_cpu_q4k_to_tiles(hw, ref, &err);
                report_status("q4k_to_tiles (cpu)", shape, st, &err);
                to_host(got, d, b);
                report_bits("q4k_to_tiles == cpu", shape, ref, got, b);
                free(ref);
                free(got);
            }
        }
        free(h);
    }
    tiles_io io;
    tiles_io_make(&io, n, K, M, rows);
    const loom_prenorm pn = {io.dg, 1e-6f};
    loom_status st = tiles_run(op, n, w, io.dx, io.dr, &pn, io.dy[0], &err);
    report_status(k_tiles_op[op], shape, st, &err);
    st = tiles_run(op, n, wt, io.dx, io.dr, &pn, io.dy[1], &err);
    report_status(k_tiles_op[op], shape, st, &err);
    char name[64];
    snprintf(name, sizeof name, "tiles == rows %s", k_tiles_op[op]);
    tiles_finish(name, shape, &io, rows, op >= 4 ? 3 : op == 3 ? 2 : 1, n, w, wt, nw);
}
/* What refuses the Q4_K tiles (tiles_refusals), the CPU kernels; and a pair whose two weights
 * differ in layout (the warp-per-row kernels run it: within the contract of the rows). */
/* The refusals both tiled layouts share, for layout l of type t (other: the other tiled type),
 * its layout change to_tiles: the other type or 8 rows marked l, embed from a table in l, the
 * layout change of 12 rows, of a weight already in l, or into memory overlapping its source. */
typedef loom_status (*to_tiles_fn)(loom_kweight, void *, loom_error *, cudaStream_t);
static void tiles_refusals(const char *tag, loom_ggml_type t, loom_ggml_type other,
                           loom_weight_layout l, to_tiles_fn to_tiles) {
    loom_error err = {0};
    float *dx = dev_poison(8192 * 4);
    char what[48];
    loom_kweight ot = {(void *)dx, other, 16, 256, l};
    loom_status st = loom_cuda_matmul(dx, 1, ot, dx, &err, 0);
    snprintf(what, sizeof what, "%s", loom_ggml_type_get(other)->name);
    report(tag, what, st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    loom_kweight r8 = {(void *)dx, t, 8, 256, l};
    st = loom_cuda_matmul(dx, 1, r8, dx, &err, 0);
    snprintf(what, sizeof what, "%s rows=8", loom_ggml_type_get(t)->name);
    report(tag, what, st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    loom_kweight tl = {(void *)dx, t, 16, 256, l};
    int32_t *ids = dev_poison(4);
    st = loom_cuda_embed(tl, ids, 1, dx, &err, 0);
    report(tag, "embed", st == LOOM_ERR_UNSUPPORTED ? 0 : 1, 0);
    loom_kweight rows = {(void *)dx, t, 16, 256};
    st = to_tiles(rows, (char *)dx + 16, &err, 0);
    report(tag, "to_tiles overlap", st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    st = to_tiles(tl, (char *)dx + 16384, &err, 0);
    report(tag, "to_tiles of tiles", st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    loom_kweight r12 = {(void *)dx, t, 12, 256};
    st = to_tiles(r12, (char *)dx + 16384, &err, 0);
    report(tag, "to_tiles rows=12", st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    cudaFree(ids);
    cudaFree(dx);
}
static void test_tiles_refused(void) {
    tiles_refusals("tiles refused", LOOM_GGML_Q4_K, LOOM_GGML_Q6_K, LOOM_WEIGHT_Q4K_TILES,
                   loom_cuda_q4k_to_tiles);
    loom_error err = {0};
    loom_status st;
    float hx[256] = {0}, hy[16];
    uint8_t hw[16 * 144] = {0};
    loom_kweight hq = {hw, LOOM_GGML_Q4_K, 16, 256, LOOM_WEIGHT_Q4K_TILES};
    st = loom_cpu_matmul(hx, 1, hq, hy, &err);
    report("tiles refused", "cpu matmul", st == LOOM_ERR_UNSUPPORTED ? 0 : 1, 0);
    /* mixed layouts in one pair */
    const int64_t M = 64, K = 512, n = 1;
    size_t b;
    uint8_t *h0 = rand_weights(LOOM_GGML_Q4_K, M, K, &b), *h1 = rand_weights(LOOM_GGML_Q4_K, M, K, &b);
    loom_kweight a = {dup_dev(h0, b), LOOM_GGML_Q4_K, M, K}, c = {dup_dev(h1, b), LOOM_GGML_Q4_K, M, K};
    void *ct = dev_poison(b);
    st = loom_cuda_q4k_to_tiles(c, ct, &err, 0);
    report_status("q4k_to_tiles", "mixed pair", st, &err);
    loom_kweight c_t = {ct, LOOM_GGML_Q4_K, M, K, LOOM_WEIGHT_Q4K_TILES};
    float *dxx, *dg;
    dev_tokens_and_norm(n, K, &dxx, &dg);
    float *y0 = dev_poison(sizeof(float) * M), *y1 = dev_poison(sizeof(float) * M);
    st = loom_cuda_matmul_pair(dxx, n, a, c, LOOM_PAIR_SWIGLU, y0, NULL, &err, 0);
    report_status("pair", "mixed layouts", st, &err);
    st = loom_cuda_matmul_pair(dxx, n, a, c_t, LOOM_PAIR_SWIGLU, y1, NULL, &err, 0);
    report_status("pair", "mixed layouts", st, &err);
    float r0[64], r1[64];
    to_host(r0, y0, sizeof r0);
    to_host(r1, y1, sizeof r1);
    /* (rows vs mixed: the mma path against the warp-per-row kernels: within the contract) */
    double e = 0;
    for (int i = 0; i < M; i++) {
        const double d = fabs((double)r0[i] - r1[i]) / (fabs((double)r0[i]) + 1e-3);
        if (d > e || d != d) e = d;
    }
    report("pair mixed layouts", "M=64 K=512 (vs rows)", e, 1e-3);
    cudaFree((void *)a.data);
    cudaFree((void *)c.data);
    cudaFree(ct);
    cudaFree(dxx);
    cudaFree(dg);
    cudaFree(y0);
    cudaFree(y1);
    free(h0);
    free(h1);
}
/* ---- LOOM_WEIGHT_Q6K_TILES ---------------------------------------------------------------- */
/* A Q6_K weight in rows (GGUF) and its tiles made by loom_cuda_q6k_to_tiles, checked there against
 * loom_cpu_q6k_to_tiles byte for byte (the padding included: dst starts poisoned). */
static void q6_tiles_pair(int64_t M, int64_t K, const char *shape, loom_kweight *w,
                          loom_kweight *wt) {
    size_t b;
    uint8_t *h = rand_weights(LOOM_GGML_Q6_K, M, K, &b);
    *w = (loom_kweight){dup_dev(h, b), LOOM_GGML_Q6_K, M, K};
    const size_t tb = (size_t)loom_weight_bytes(LOOM_GGML_Q6_K, M, K, LOOM_WEIGHT_Q6K_TILES);
    void *d = dev_poison(tb);
    loom_error err = {0};
    loom_status st = loom_cuda_q6k_to_tiles(*w, d, &err, 0);
    report_status("q6k_to_tiles", shape, st, &err);
    *wt = (loom_kweight){d, LOOM_GGML_Q6_K, M, K, LOOM_WEIGHT_Q6K_TILES};
    uint8_t *ref = xmalloc(tb), *got = xmalloc(tb);
    loom_kweight hw = {h, LOOM_GGML_Q6_K, M, K};
    st = loom_cpu_q6k_to_tiles(hw, ref, &err);
    report_status("q6k_to_tiles (cpu)", shape, st, &err);
    to_host(got, d, tb);
    report_bits("q6k_to_tiles == cpu", shape, ref, got, tb);
    free(ref);
    free(got);
    free(h);
}
/* Every Q6_K matmul launcher on the tiled weight == the same call in rows, bit for bit, where both
 * run one body (op 0 matmul, 1 matmul_add, 2 matmul normed: the INT8 GEMV, 8-token GEMM and wide
 * GEMM under the default switches; the warp-per-row kernels under LOOM_GEMV_MMA=0); op 3, the
 * normed Q4_K_M triple with its V tiled: Q and K == the triple in rows, V == the normed matmul
 * of V in rows (tiles take the INT8 body; a V in rows keeps the triple's f16 body below 64 tokens
 * on the tensor cores, so with them the triple in rows is not the reference for V). */
static const char *const k_q6_tiles_op[4] = {"q6k matmul", "q6k matmul_add", "q6k matmul normed",
                                             "triple normed q4q4q6 (V tiled)"};
static void test_tiles_q6(int op, int64_t M, int64_t K, int64_t n) {
    char shape[96];
    snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)n);
    loom_error err = {0};
    loom_kweight w[3] = {{0}}, wt[3] = {{0}};
    const int64_t rows[3] = {op == 3 ? M * 4 : M, M, M};
    for (int i = 0; i < (op == 3 ? 2 : 0); i++) {
        size_t b;
        uint8_t *h = rand_weights(LOOM_GGML_Q4_K, rows[i], K, &b);
        w[i] = wt[i] = (loom_kweight){dup_dev(h, b), LOOM_GGML_Q4_K, rows[i], K};
        free(h);
    }
    const int v = op == 3 ? 2 : 0;  /* the Q6_K weight's slot */
    q6_tiles_pair(M, K, shape, &w[v], &wt[v]);
    tiles_io io;
    tiles_io_make(&io, n, K, M, rows);
    const loom_prenorm pn = {io.dg, 1e-6f};
    for (int r = 0; r < 2; r++) { /* r 0: rows, 1: tiles */
        const loom_kweight *ww = r ? wt : w;
        float *const *y = io.dy[r];
        loom_status st;
        switch (op) {
        case 0: st = loom_cuda_matmul(io.dx, n, ww[0], y[0], &err, 0); break;
        case 1: st = loom_cuda_matmul_add(io.dx, n, ww[0], io.dr, y[0], &err, 0); break;
        case 2: st = loom_cuda_matmul_normed(io.dx, &pn, n, ww[0], y[0], &err, 0); break;
        default:
            st = loom_cuda_matmul_triple_normed(io.dx, &pn, n, ww, NULL, y, &err, 0);
            /* the reference of the tiled V: its normed matmul in rows, where the triple's V in
             * rows runs another body than the tiles (the tensor cores, below 64 tokens) */
            if (r == 0 && st == LOOM_OK && loom_cuda_q6k_tiles_preferred() && n < 64)
                st = loom_cuda_matmul_normed(io.dx, &pn, n, w[2], y[2], &err, 0);
        }
        report_status(k_q6_tiles_op[op], shape, st, &err);
    }
    char name[64];
    snprintf(name, sizeof name, "tiles == rows %s", k_q6_tiles_op[op]);
    tiles_finish(name, shape, &io, rows, op == 3 ? 3 : 1, n, w, wt, 3);
}
/* What refuses the Q6_K tiles (tiles_refusals); and a triple of three Q6_K weights whose
 * layouts differ (the warp-per-row kernels run it: within the contract of the rows). */
static void test_tiles_q6_refused(void) {
    tiles_refusals("q6k tiles refused", LOOM_GGML_Q6_K, LOOM_GGML_Q4_K, LOOM_WEIGHT_Q6K_TILES,
                   loom_cuda_q6k_to_tiles);
    loom_error err = {0};
    loom_status st;
    const int64_t M = 64, K = 512, n = 1;
    char shape[32] = "M=64 K=512 (vs rows)";
    loom_kweight w[3], wt[3];
    for (int i = 0; i < 3; i++) q6_tiles_pair(M, K, "mixed triple", &w[i], &wt[i]);
    const loom_kweight mix[3] = {w[0], w[1], wt[2]};
    float *dxx, *dg;
    dev_tokens_and_norm(n, K, &dxx, &dg);
    float *y[2][3];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) y[r][i] = dev_poison(sizeof(float) * M);
    st = loom_cuda_matmul_triple(dxx, n, w, NULL, y[0], &err, 0);
    report_status("triple q6k", "mixed layouts", st, &err);
    st = loom_cuda_matmul_triple(dxx, n, mix, NULL, y[1], &err, 0);
    report_status("triple q6k", "mixed layouts", st, &err);
    double e = 0;
    for (int i = 0; i < 3; i++) {
        float r0[64], r1[64];
        to_host(r0, y[0][i], sizeof r0);
        to_host(r1, y[1][i], sizeof r1);
        for (int k = 0; k < M; k++) {
            const double d = fabs((double)r0[k] - r1[k]) / (fabs((double)r0[k]) + 1e-3);
            if (d > e || d != d) e = d;
        }
    }
    report("triple q6k mixed layouts", shape, e, 1e-3);
    for (int i = 0; i < 3; i++) {
        cudaFree((void *)w[i].data);
        cudaFree((void *)wt[i].data);
        cudaFree(y[0][i]);
        cudaFree(y[1][i]);
    }
    cudaFree(dxx);
    cudaFree(dg);
}
/* The persistent Q6_K GEMV (more than 4 waves of tiles: the lm head) == the one-tile GEMV
 * (LOOM_GEMV_PERSIST=0) bit for bit, in rows and in tiles, plain and with the add; the launch
 * count of the path is not observable, so the shape is chosen past the rule's threshold (4 x 4
 * x SMs tiles) on any GPU of up to 160 SMs. */
static void test_q6_persist(int op, int64_t K) {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int64_t M = 16 * (16 * (int64_t)(sms > 160 ? sms : 160) + 37);
    char shape[96];
    snprintf(shape, sizeof shape, "M=%lld K=%lld N=1", (long long)M, (long long)K);
    loom_error err = {0};
    loom_kweight w, wt;
    q6_tiles_pair(M, K, shape, &w, &wt);
    float *dx, *dg;
    dev_tokens_and_norm(1, K, &dx, &dg);
    float *hr = xmalloc(sizeof(float) * (size_t)M);
    fill(hr, M, -1, 1);
    float *dr = dup_dev(hr, sizeof(float) * (size_t)M);
    const size_t nb = sizeof(float) * (size_t)M;
    for (int l = 0; l < 2; l++) {
        const loom_kweight ww = l ? wt : w;
        float *y[2];
        for (int r = 0; r < 2; r++) {
            if (r == 0) set_switch("LOOM_GEMV_PERSIST", "0");
            else reset_switch("LOOM_GEMV_PERSIST");
            y[r] = dev_poison(nb);
            loom_status st = op ? loom_cuda_matmul_add(dx, 1, ww, dr, y[r], &err, 0)
                                : loom_cuda_matmul(dx, 1, ww, y[r], &err, 0);
            report_status(op ? "q6k persist add" : "q6k persist", shape, st, &err);
        }
        float *a = xmalloc(nb), *c = xmalloc(nb);
        to_host(a, y[0], nb);
        to_host(c, y[1], nb);
        report_bits(l ? "q6k persist == one-tile (tiles)" : "q6k persist == one-tile (rows)", shape, a,
                    c, nb);
        free(a);
        free(c);
        cudaFree(y[0]);
        cudaFree(y[1]);
    }
    cudaFree((void *)w.data);
    cudaFree((void *)wt.data);
    cudaFree(dx);
    cudaFree(dg);
    cudaFree(dr);
    free(hr);
}

/* Several Q6_K segments in tiles in one launch (a triple or a plain pair of Q6_K weights, plain
 * and normed): against the same call in rows within 1e-3 of each output's largest magnitude (a
 * triple in rows runs the f16 body below 64 tokens, the tiles the INT8 one, so not the same
 * bits; both are within 1e-5 of sum |W x| an element, so an element near zero may differ by
 * far more than 1e-3 of its own magnitude, which a per-element test would flag at random). */
static void test_tiles_q6_multi(int nw, bool normed, int64_t K, int64_t n) {
    char shape[96];
    snprintf(shape, sizeof shape, "%d segs K=%lld N=%lld%s", nw, (long long)K, (long long)n,
             normed ? " normed" : "");
    const int64_t rows[3] = {256, 128, 128};
    loom_kweight w[3] = {{0}}, wt[3] = {{0}};
    for (int i = 0; i < nw; i++) q6_tiles_pair(rows[i], K, shape, &w[i], &wt[i]);
    tiles_io io;
    tiles_io_make(&io, n, K, 256, rows);
    const loom_prenorm pn = {io.dg, 1e-6f};
    loom_error err = {0};
    for (int r = 0; r < 2; r++) {
        const loom_kweight *ww = r ? wt : w;
        loom_status st = nw == 3
            ? loom_cuda_matmul_triple_normed(io.dx, normed ? &pn : NULL, n, ww, NULL, io.dy[r], &err, 0)
            : loom_cuda_matmul_pair_normed(io.dx, normed ? &pn : NULL, n, ww[0], ww[1], LOOM_PAIR_NONE,
                                           io.dy[r][0], io.dy[r][1], &err, 0);
        report_status("q6k tiles multi", shape, st, &err);
    }
    double e = 0;
    for (int i = 0; i < nw; i++) {
        const size_t nb = sizeof(float) * (size_t)(n * rows[i]);
        float *a = xmalloc(nb), *c = xmalloc(nb);
        to_host(a, io.dy[0][i], nb);
        to_host(c, io.dy[1][i], nb);
        double amax = 0;
        for (int64_t k = 0; k < n * rows[i]; k++)
            if (fabs((double)a[k]) > amax) amax = fabs((double)a[k]);
        for (int64_t k = 0; k < n * rows[i]; k++) {
            const double d = fabs((double)a[k] - c[k]) / (amax + 1e-30);
            if (d > e || d != d) e = d;
        }
        free(a);
        free(c);
    }
    report("q6k tiles multi (vs rows)", shape, e, 1e-3);
    tiles_finish("q6k tiles multi (bits, where one body)", shape, &io, rows, 0, n, w, wt, nw);
}

/* The normed Q4_K_M triple with every weight in tiles (Q, K in LOOM_WEIGHT_Q4K_TILES, V in
 * LOOM_WEIGHT_Q6K_TILES): its one launch (the mixed kernel, V on the INT8 body; the launch
 * counted) == its two launches (LOOM_GEMV_TRIPLE_MIXED=0) bit for bit, plain and normed. */
static void test_mixed_tiled_v(int64_t M, int64_t K, bool normed) {
    char shape[96];
    snprintf(shape, sizeof shape, "M=%lld K=%lld N=1%s", (long long)M, (long long)K,
             normed ? " normed" : "");
    const int64_t rows[3] = {M, M / 4, M / 4};
    loom_kweight w[3], wt[3];
    loom_error err = {0};
    for (int i = 0; i < 2; i++) {
        size_t b;
        uint8_t *h = rand_weights(LOOM_GGML_Q4_K, rows[i], K, &b);
        w[i] = (loom_kweight){dup_dev(h, b), LOOM_GGML_Q4_K, rows[i], K};
        void *d = dev_poison(b);
        report_status("q4k_to_tiles", shape, loom_cuda_q4k_to_tiles(w[i], d, &err, 0), &err);
        wt[i] = (loom_kweight){d, LOOM_GGML_Q4_K, rows[i], K, LOOM_WEIGHT_Q4K_TILES};
        free(h);
    }
    q6_tiles_pair(rows[2], K, shape, &w[2], &wt[2]);
    tiles_io io;
    tiles_io_make(&io, 1, K, M, rows);
    const loom_prenorm pn = {io.dg, 1e-6f};
    for (int r = 0; r < 2; r++) {
        if (r == 1) set_switch("LOOM_GEMV_TRIPLE_MIXED", "0");
        const int64_t before = loom_cuda_matmul_mixed_launches();
        loom_status st = loom_cuda_matmul_triple_normed(io.dx, normed ? &pn : NULL, 1, wt, NULL,
                                                        io.dy[r], &err, 0);
        report_status("triple tiled V", shape, st, &err);
        if (r == 0)
            report("triple tiled V: one launch ran", shape,
                   loom_cuda_matmul_mixed_launches() == before + 1 ? 0 : 1, 0);
    }
    reset_switch("LOOM_GEMV_TRIPLE_MIXED");
    tiles_finish("triple tiled V: one == two launches", shape, &io, rows, 3, 1, w, wt, 3);
}

static void test_tiles_q6_section(void) {
    for (int nm = 0; nm < 2; nm++) {
        test_mixed_tiled_v(4096, 2560, nm != 0);
        if (!g_quick) test_mixed_tiled_v(4096, 4096, nm != 0);
    }
    for (int nw = 2; nw <= 3; nw++)
        for (int nm = 0; nm < 2; nm++)
            for (int k = 0; k < 2; k++)
                for (int64_t n = 1; n <= 20; n += (n == 1 ? 4 : 15))
                    test_tiles_q6_multi(nw, nm != 0, k ? 512 : 256, n);
    for (int op = 0; op < 2; op++) test_q6_persist(op, g_quick ? 512 : 2560);
    const int64_t ns[4] = {1, 5, 20, 70}; /* GEMV, 8-token GEMM (ragged), 3 groups, wide */
    for (int op = 0; op < 4; op++)
        for (int i = 0; i < 4; i++) {
            test_tiles_q6(op, g_quick ? 64 : 2560, g_quick ? 512 : 9728, ns[i]);
            if (!g_quick) test_tiles_q6(op, op == 3 ? 1024 : 9728, 2560, ns[i]);
        }
    printf("-- the wide Q6_K GEMM staging x itself (LOOM_GEMM_WIDE_Q6K=4)\n");
    set_switch("LOOM_GEMM_WIDE_Q6K", "4");
    for (int op = 0; op < 3; op++) test_tiles_q6(op, g_quick ? 64 : 2560, g_quick ? 512 : 2560, 70);
    reset_switch("LOOM_GEMM_WIDE_Q6K");
    static const char *const off[2] = {"LOOM_GEMV_MMA", "LOOM_GEMV_MMA_Q6K"};
    for (int k = 0; k < 2; k++) {
        printf("-- the same with %s=0 (warp-per-row kernels)\n", off[k]);
        set_switch(off[k], "0");
        for (int op = 0; op < 4; op++)
            for (int i = 0; i < 2; i++) test_tiles_q6(op, g_quick ? 64 : 1024, g_quick ? 512 : 2560, ns[i]);
        reset_switch(off[k]);
    }
    test_tiles_q6_refused();
}

static void test_tiles_section(void) {
    const int64_t ns[3] = {1, 5, g_quick ? 20 : 37};
    for (int op = 0; op < 6; op++)
        for (int i = 0; i < 3; i++) {
            test_tiles(op, g_quick ? 64 : 2560, g_quick ? 512 : 2560, ns[i]);
            if (!g_quick) test_tiles(op, 9728 / (op >= 4 ? 1 : 2), 2560, ns[i]);
        }
    printf("-- the same with LOOM_GEMV_MMA=0 (warp-per-row kernels)\n");
    set_switch("LOOM_GEMV_MMA", "0");
    for (int op = 0; op < 6; op++) test_tiles(op, g_quick ? 64 : 1024, g_quick ? 512 : 2560, 5);
    reset_switch("LOOM_GEMV_MMA");
    test_tiles_refused();
    test_tiles_q6_section();
}

/* The probe the device-wide settings' tests run under each setting: the Q4_K pair GEMV with
 * SwiGLU (8 KB of shared memory a block) and a Q6_K matmul (~38 KB), both 9728 x 2560, on the
 * same inputs every time. ref / got: the host copies of both outputs (2 M floats) under the
 * default setting and under the one being checked. */
typedef struct {
    int64_t M, K;
    float *dx, *dg, *dy, *ref, *got;
    loom_kweight w0, w1, w6;
} switch_probe;

static void switch_probe_init(switch_probe *p) {
    p->M = 9728;
    p->K = 2560;
    dev_tokens_and_norm(1, p->K, &p->dx, &p->dg);
    p->w0 = dev_rand_weights(LOOM_GGML_Q4_K, p->M, p->K);
    p->w1 = dev_rand_weights(LOOM_GGML_Q4_K, p->M, p->K);
    p->w6 = dev_rand_weights(LOOM_GGML_Q6_K, p->M, p->K);
    p->dy = dev_poison(sizeof(float) * (size_t)p->M);
    p->ref = xmalloc(2 * sizeof(float) * (size_t)p->M);
    p->got = xmalloc(2 * sizeof(float) * (size_t)p->M);
}

/* Sets switch env to val (NULL: unset, the default) and names the setting "what val" (or "what
 * default") in shape[64]. */
static void switch_probe_set(const char *env, const char *val, const char *what, char *shape) {
    if (val) set_switch(env, val);
    else reset_switch(env);
    snprintf(shape, 64, "%s %s", what, val ? val : "default");
}

/* Runs both matmuls under the setting in force: into ref when it is the default (dflt), else
 * into got, which must equal ref bit for bit. */
static void switch_probe_run(const switch_probe *p, const char *what, const char *shape, bool dflt) {
    const size_t yb = sizeof(float) * (size_t)p->M;
    float *h = dflt ? p->ref : p->got;
    loom_error err = {0};
    char name[64];
    CK(cudaMemset(p->dy, 0xFF, yb));
    snprintf(name, sizeof name, "%s pair", what);
    report_status(name, shape,
                  loom_cuda_matmul_pair(p->dx, 1, p->w0, p->w1, LOOM_PAIR_SWIGLU, p->dy, NULL, &err, 0),
                  &err);
    to_host(h, p->dy, yb);
    CK(cudaMemset(p->dy, 0xFF, yb));
    snprintf(name, sizeof name, "%s q6k", what);
    report_status(name, shape, loom_cuda_matmul(p->dx, 1, p->w6, p->dy, &err, 0), &err);
    to_host(h + p->M, p->dy, yb);
    if (!dflt) {
        snprintf(name, sizeof name, "%s == default", what);
        report_bits(name, shape, p->ref, p->got, 2 * yb);
    }
}

static void switch_probe_free(switch_probe *p) {
    cudaFree(p->dy);
    cudaFree((void *)p->w0.data); cudaFree((void *)p->w1.data); cudaFree((void *)p->w6.data);
    cudaFree(p->dx); cudaFree(p->dg);
    free(p->ref);
    free(p->got);
}

/* LOOM_CUDA_CARVEOUT: the preference as read (78 on compute capability 9.x by default, else
 * -1; a value outside -1..100 is the default), and the probe's results the same under every
 * carveout: 0, 100 and -1 (a kernel set before, back to the driver's choice) == the default's
 * bits. */
static void test_carveout(int major) {
    printf("-- the shared-memory carveout (LOOM_CUDA_CARVEOUT)\n");
    const int dflt = major == 9 ? 78 : -1;
    reset_switch("LOOM_CUDA_CARVEOUT");
    report("carveout default", major == 9 ? "cc 9: 78" : "-1", loom_cuda_carveout() == dflt ? 0 : 1, 0);
    set_switch("LOOM_CUDA_CARVEOUT", "101");
    report("carveout out of range", "101 -> default", loom_cuda_carveout() == dflt ? 0 : 1, 0);
    switch_probe p;
    switch_probe_init(&p);
    static const char *vals[4] = {NULL, "0", "100", "-1"};
    for (int v = 0; v < 4; v++) {
        char shape[64];
        switch_probe_set("LOOM_CUDA_CARVEOUT", vals[v], "carveout", shape);
        report("carveout as read", shape, loom_cuda_carveout() == (vals[v] ? atoi(vals[v]) : dflt) ? 0 : 1, 0);
        switch_probe_run(&p, "carveout", shape, v == 0);
    }
    reset_switch("LOOM_CUDA_CARVEOUT");
    switch_probe_free(&p);
}

/* LOOM_CUDA_L2_FETCH: the granularity as read (128 bytes on compute capability 9.x by default,
 * else -1; a value outside -1..128 is the default), loom_cuda_apply_l2_fetch setting it as the
 * device's limit (read back with cudaDeviceGetLimit; -1 leaves the limit as it was), and the
 * probe's bits the same at 32 bytes as at the default. */
static void test_l2_fetch(int major) {
    printf("-- the L2 fetch granularity (LOOM_CUDA_L2_FETCH)\n");
    const int dflt = major == 9 ? 128 : -1;
    reset_switch("LOOM_CUDA_L2_FETCH");
    report("l2 fetch default", major == 9 ? "cc 9: 128" : "-1", loom_cuda_l2_fetch() == dflt ? 0 : 1, 0);
    set_switch("LOOM_CUDA_L2_FETCH", "129");
    report("l2 fetch out of range", "129 -> default", loom_cuda_l2_fetch() == dflt ? 0 : 1, 0);
    loom_error err = {0};
    switch_probe p;
    switch_probe_init(&p);
    size_t before = 0, lim = 0;
    CK(cudaDeviceGetLimit(&before, cudaLimitMaxL2FetchGranularity));
    static const char *vals[4] = {NULL, "64", "-1", "32"};
    for (int v = 0; v < 4; v++) {
        char shape[64];
        switch_probe_set("LOOM_CUDA_L2_FETCH", vals[v], "l2 fetch", shape);
        const int want = vals[v] ? atoi(vals[v]) : dflt;
        report("l2 fetch as read", shape, loom_cuda_l2_fetch() == want ? 0 : 1, 0);
        report_status("l2 fetch applied", shape, loom_cuda_apply_l2_fetch(&err), &err);
        CK(cudaDeviceGetLimit(&lim, cudaLimitMaxL2FetchGranularity));
        /* -1 sets nothing: the limit stays what the value before it (64) left */
        const size_t expect = want >= 0 ? (size_t)want : v == 2 ? 64 : before;
        report("l2 fetch limit", shape, lim == expect ? 0 : 1, 0);
        if (v == 0 || v == 3) switch_probe_run(&p, "l2 fetch", shape, v == 0);
    }
    reset_switch("LOOM_CUDA_L2_FETCH");
    report_status("l2 fetch applied", "default again", loom_cuda_apply_l2_fetch(&err), &err);
    switch_probe_free(&p);
}

static void test_bad_args(void) {
    loom_error err = {0};
    loom_kweight w = {(void *)16, LOOM_GGML_Q4_K, 4, 300};
    float *dx = dev_poison(4096);
    loom_status st = loom_cuda_matmul(dx, 1, w, dx, &err, 0);
    report("bad K refused", "Q4_K K=300", st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    loom_kweight w2 = {(void *)16, LOOM_GGML_Q2_K, 4, 256};
    st = loom_cuda_matmul(dx, 1, w2, dx, &err, 0);
    report("bad type refused", "Q2_K", st == LOOM_ERR_UNSUPPORTED ? 0 : 1, 0);
    loom_kv_layout kv = {LOOM_KV_F16, 8, 2, 128};
    loom_attn_params p = {1, 3, 0, 1.0f, 0};
    st = loom_cuda_attention(dx, dx, NULL, dx, NULL, &kv, &p, dx, &err, 0);
    report("bad GQA refused", "3 heads / 2 kv", st == LOOM_ERR_INVALID_ARGUMENT ? 0 : 1, 0);
    cudaFree(dx);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) g_quick = 1;
        else if (strcmp(argv[i], "--attn") == 0) g_only_attn = 1; /* kv_write + attention only */
        else if (strcmp(argv[i], "--prefill") == 0) g_only_pf = 1; /* prefill attention only */
        else if (strcmp(argv[i], "--matmul") == 0) g_only_mm = 1; /* the matmul family only */
        else if (strcmp(argv[i], "--normed") == 0) g_only_normed = 1; /* the _normed launchers only */
        else if (strcmp(argv[i], "--fused") == 0) g_only_fused = 1; /* rope_kv_attention_at only */
        else if (strcmp(argv[i], "--mixed") == 0) g_only_mixed = 1; /* the triple in one launch only */
        else if (strcmp(argv[i], "--q6k") == 0) g_only_q6k = 1; /* the Q6_K matmuls only */
        else if (strcmp(argv[i], "--q6k-wide") == 0) g_only_q6w = 1; /* the wide Q6_K GEMM only */
        else if (strcmp(argv[i], "--q4k") == 0) g_only_q4k = 1; /* the INT8 Q4_K body only */
        else if (strcmp(argv[i], "--wide") == 0) g_only_wide = 1; /* the wide prefill GEMM only */
        else if (strcmp(argv[i], "--tiles") == 0) g_only_tiles = 1; /* the weight layouts only */
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) g_rng = strtoull(argv[++i], NULL, 0) | 1;
    }
    int major = 0, minor = 0;
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    printf("cuda_conformance on sm_%d%d%s, seed %llu\n", major, minor,
           g_quick ? ", quick" : "", (unsigned long long)g_rng);
    printf("%-22s %-44s %11s %10s  %s\n", "kernel", "shape", "error", "tol", "verdict");
    loom_cpu_set_threads(0);

    if (g_only_pf) {
        test_prefill_section();
        goto done;
    }
    if (g_only_normed) {
        test_matmul_normed();
        goto done;
    }
    if (g_only_fused) {
        test_fused_section(major >= 9);
        goto done;
    }
    if (g_only_mixed) {
        test_triple_mixed_all();
        test_q4k_section(1);
        goto done;
    }
    if (g_only_wide) {
        test_wide_section();
        goto done;
    }
    if (g_only_tiles) {
        test_tiles_section();
        goto done;
    }
    if (g_only_q4k) {
        test_q4k_section(0);
        test_pair_warps_all();
        goto done;
    }
    if (g_only_q6k) {
        test_q6k_section();
        goto done;
    }
    if (g_only_q6w) {
        test_q6k_wide_section();
        goto done;
    }
    if (!g_only_attn) {
    test_matmul();
    test_matmul_fused(1);
    test_matmul_fused(g_quick ? 3 : 37);
    test_matmul_fused_t(1, k_q8);
    test_matmul_fused_t(g_quick ? 3 : 37, k_q8);
    test_matmul_fused_t(1, k_mix8);
    test_matmul_fused_t(g_quick ? 3 : 37, k_mix8);
    test_q8_wide_form(NULL);
    test_q8_wide_form("1");
    test_matmul_fused_t(1, k_q5);
    test_matmul_fused_t(g_quick ? 3 : 37, k_q5);
    test_matmul_q6k_fused(g_quick ? 40 : 2560, g_quick ? 768 : 9728, 1);
    test_matmul_q6k_fused(g_quick ? 40 : 133, g_quick ? 768 : 2560, g_quick ? 3 : 37);
    printf("-- the same fused cases with LOOM_GEMV_MMA=0 (warp-per-row kernels)\n");
    set_switch("LOOM_GEMV_MMA", "0");
    test_matmul_fused(1);
    test_matmul_fused(g_quick ? 3 : 37);
    test_matmul_fused_t(1, k_q8);
    test_matmul_fused_t(g_quick ? 3 : 37, k_q8);
    test_matmul_fused_t(1, k_q5);
    test_matmul_fused_t(g_quick ? 3 : 37, k_q5);
    test_matmul_q6k_fused(g_quick ? 40 : 2560, g_quick ? 768 : 9728, 1);
    test_matmul_q6k_fused(g_quick ? 40 : 133, g_quick ? 768 : 2560, g_quick ? 3 : 37);
    set_switch("LOOM_GEMV_MMA", "1");
    test_matmul_q6k_other();
    test_q6k_wide_section();
    printf("-- the RMSNorm folded into the matmul (loom_cuda_*_normed), every path\n");
    test_matmul_normed();
    printf("-- the Q4_K_M triple in one launch (LOOM_GEMV_TRIPLE_MIXED)\n");
    test_triple_mixed_all();
    test_q4k_section(0);
    test_pair_warps_all();
    test_wide_section();
    printf("-- Q4_K weights in 16-row tiles (LOOM_WEIGHT_Q4K_TILES)\n");
    test_tiles_section();
    if (g_only_mm) goto done;

    test_norm(1, 2560, 1);
    test_norm(g_quick ? 3 : 7, 4096, 1);
    test_norm(g_quick ? 8 : 96, 128, 1); /* per-head Q/K norm */
    test_norm(5, 130, 0);                /* d not a multiple of 4: simple path */

    for (int mode = 0; mode < 2; mode++) {
        loom_rope_mode m = mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM;
        test_rope(m, g_quick ? 2 : 7, 32, 8, 128, 128);
        test_rope(m, 3, 8, 2, 64, 64);
        test_rope(m, 2, 4, 4, 128, 96);
        test_rope(m, 5, 6, 0, 64, 32); /* q only */
    }
    }
    for (int t = 0; t < 3; t++) {
        test_kv((loom_kv_type)t, 64, 8, 128, 0, 1);
        test_kv((loom_kv_type)t, 64, 8, 128, 17, 30);
        test_kv((loom_kv_type)t, 40, 2, 64, 39, 1);
        test_kv_at_oob((loom_kv_type)t, 38, 4);   /* 2 tokens inside, 2 past the end */
        test_kv_at_oob((loom_kv_type)t, -3, 5);   /* 3 tokens before 0, 2 inside */
        test_kv_at_oob((loom_kv_type)t, 1000, 3); /* nothing inside */
    }

    static const int64_t lens_full[] = {1, 2, 63, 64, 65, 1000, 4096, 8192};
    static const int64_t lens_quick[] = {1, 65, 300};
    const int nl = g_quick ? 3 : 8;
    static const int64_t gqa[][2] = {{8, 8}, {8, 4}, {32, 8}, {16, 2}};
    for (int t = 0; t < 3; t++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < nl; l++) {
                int64_t L = g_quick ? lens_quick[l] : lens_full[l];
                if (t != LOOM_KV_F16 && L > 1000 && g != 2) continue; /* keep the CPU time sane */
                test_attention((loom_kv_type)t, (g & 1) ? 64 : 128, gqa[g][0], gqa[g][1], 1,
                               L - 1, 0);
            }
    test_attention(LOOM_KV_F16, 128, 32, 8, 1, g_quick ? 299 : 4095, 1); /* simple path */
    test_attention(LOOM_KV_INT8, 64, 8, 2, 1, 700, 1);
    static const int64_t pre[][2] = {{5, 0}, {32, 0}, {17, 100}, {32, 1000}, {1, 9}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < (g_quick ? 2 : 5); i++) {
            test_attention((loom_kv_type)t, 128, 32, 8, pre[i][0], pre[i][1], 0);
            test_attention((loom_kv_type)t, 64, 8, 8, pre[i][0], pre[i][1], 0);
        }
    test_attention(LOOM_KV_F16, 128, 16, 4, 9, 50, 1);
    /* head sizes beyond 64/128 (the v4 kernel; simple path = v4 with one head, no split), GQA
     * groups that are not powers of two, more than 8 heads a KV head; the simple path on the
     * v3 kernels the cases above leave out (F32 64 and 128, F16 64, INT8 128) */
    {
        static const int64_t dx[3] = {80, 96, 256};
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++)
            for (int i = 0; i < 3; i++) {
                test_attention((loom_kv_type)t, dx[i], 32, 8, 1, g_quick ? 299 : 1999, 0);
                test_attention((loom_kv_type)t, dx[i], 8, 8, 1, 63, 0);
                test_attention((loom_kv_type)t, dx[i], 16, 2, 1, g_quick ? 100 : 700, 0);
                test_attention((loom_kv_type)t, dx[i], 32, 8, 5, 100, 0);
                test_attention((loom_kv_type)t, dx[i], 8, 2, 1, 300, 1);
            }
        test_attention(LOOM_KV_F16, 128, 24, 8, 1, 700, 0); /* G = 3 */
        test_attention(LOOM_KV_INT8, 128, 48, 8, 1, 700, 0); /* G = 6 */
        test_attention(LOOM_KV_F16, 64, 32, 2, 1, 500, 0);  /* 16 heads a KV head */
        test_attention(LOOM_KV_F32, 128, 32, 8, 1, 3000, 0);
        test_attention(LOOM_KV_F32, 64, 16, 2, 1, 700, 1);
        test_attention(LOOM_KV_F32, 128, 8, 8, 3, 200, 1);
        test_attention(LOOM_KV_F16, 64, 16, 2, 1, 300, 1);
        test_attention(LOOM_KV_INT8, 128, 32, 8, 1, 500, 1);
        printf("-- v5 for decode on sm_90 (LOOM_ATTN_V6=0)\n");
        set_switch("LOOM_ATTN_V6", "0");
        test_attention(LOOM_KV_F16, 128, 32, 8, 1, g_quick ? 299 : 4095, 0);
        test_attention(LOOM_KV_INT8, 64, 16, 2, 1, 1000, 0);
        test_attention(LOOM_KV_F16, 64, 8, 8, 1, 700, 0);
        test_attention(LOOM_KV_INT8, 128, 32, 8, 1, g_quick ? 299 : 8191, 0);
        set_switch("LOOM_ATTN_V6", "1");
        printf("-- v6's F16 tiles by cp.async instead of TMA (LOOM_ATTN_TMA=0)\n");
        const saved_switch tma = save_switch("LOOM_ATTN_TMA");
        set_switch("LOOM_ATTN_TMA", "0");
        test_attention(LOOM_KV_F16, 128, 32, 8, 1, g_quick ? 299 : 4095, 0);
        test_attention(LOOM_KV_F16, 128, 16, 4, 1, g_quick ? 299 : 8191, 0);
        restore_switch(&tma);
    }

    test_prefill_section();

    /* position from device memory: _at == by value (F16, INT8; GQA 1, 2, 4, 8; D 64, 128) */
    {
        const int64_t ctx = g_quick ? 300 : 2000;
        const int64_t p1[] = {0, 63, 64, 130, ctx - 1};
        const int64_t pn7[] = {0, 57, ctx - 7}, pn32[] = {0, 57, ctx - 32};
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) {
            for (int g = 0; g < 4; g++)
                test_attention_at((loom_kv_type)t, (g & 1) ? 64 : 128, gqa[g][0], gqa[g][1], 1,
                                  ctx, p1, g_quick ? 3 : 5);
            test_attention_at((loom_kv_type)t, 128, 32, 8, 7, ctx, pn7, 3);
            test_attention_at((loom_kv_type)t, 64, 16, 2, 32, ctx, pn32, g_quick ? 1 : 3);
        }
        const int64_t steps[] = {5, 64, 129, ctx - 40, ctx - 1};
        test_graph_replay(LOOM_KV_F16, 128, 32, 8, 1, ctx, steps, 5);
        test_graph_replay(LOOM_KV_INT8, 64, 8, 1, 1, ctx, steps, 5);
        test_graph_replay(LOOM_KV_F16, 64, 16, 2, 4, ctx, steps, 4);
        test_graph_replay(LOOM_KV_INT8, 96, 32, 8, 1, ctx, steps, 5);
        test_attention_at(LOOM_KV_F16, 256, 16, 4, 1, ctx, p1, 3);
        /* a cache past v6's cluster rule (128 tiles): _at and by-value choose the combine from
         * n_ctx alike, whatever the position (by range, positions below 4K took clusters) */
        const int64_t pbig[] = {0, 1000, 4199};
        test_attention_at(LOOM_KV_F16, 128, 32, 8, 1, 4200, pbig, g_quick ? 1 : 3);
        test_attention_at(LOOM_KV_INT8, 64, 16, 2, 1, 4200, pbig, g_quick ? 1 : 3);
    }

    /* rope_kv_write: D 64/128, GQA 1..8, T 1..32, F16/INT8 (+ F32), norms or not, both modes */
    if (!g_only_attn) {
        static const int64_t rk[][5] = {{128, 32, 8, 1, 128}, {64, 8, 8, 5, 64},
                                        {128, 16, 2, 32, 128}, {64, 4, 2, 17, 32},
                                        {128, 8, 1, 3, 64}};
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++)
            for (int mode = 0; mode < 2; mode++)
                for (int nm = 0; nm < 2; nm++)
                    for (int c = 0; c < (g_quick ? 2 : 5); c++)
                        test_rope_kv((loom_kv_type)t, mode ? LOOM_ROPE_NEOX : LOOM_ROPE_NORM, nm,
                                     rk[c][0], rk[c][1], rk[c][2], rk[c][3], rk[c][4], 2, 0);
        test_rope_kv(LOOM_KV_F32, LOOM_ROPE_NEOX, 1, 128, 32, 8, 1, 128, 2, 0);
        for (int t = 0; t < 3; t++) /* one capture, replayed at new positions and inputs */
            test_rope_kv((loom_kv_type)t, LOOM_ROPE_NEOX, 1, 128, 32, 8, 1, 128, 5, 1);
        test_rope_kv(LOOM_KV_INT8, LOOM_ROPE_NORM, 0, 64, 8, 2, 4, 64, 3, 1);
        /* head_dim 96 and 256 (register path: lanes partly / fully used), 320 (loop path) */
        test_rope_kv(LOOM_KV_F16, LOOM_ROPE_NEOX, 1, 96, 8, 2, 3, 96, 2, 0);
        test_rope_kv(LOOM_KV_INT8, LOOM_ROPE_NORM, 1, 256, 8, 4, 2, 128, 2, 0);
        test_rope_kv(LOOM_KV_F16, LOOM_ROPE_NEOX, 1, 320, 4, 2, 3, 320, 2, 1);
    }
    if (!g_only_attn) test_fused_section(major >= 9);

    if (!g_only_attn) {
    test_elementwise(g_quick ? 1000 : 100003);
    for (int ti = 0; ti < N_TYPES; ti++) {
        test_embed(k_types[ti], g_quick ? 50 : 1000, 2560, 7, 0);
        test_embed(k_types[ti], 50, 512, 3, 1);
    }
    test_softmax_argmax(1, 1000);
    test_softmax_argmax(g_quick ? 1 : 3, 151936);
    if (!g_quick) test_softmax_argmax(2, 262144 + 17);
    set_switch("LOOM_CUDA_PDL", "1");
    test_pdl_chain(g_quick ? 100000 : 4000000, g_quick ? 8 : 64);
    set_switch("LOOM_CUDA_PDL", "0");
    test_pdl_chain(g_quick ? 100000 : 1000003, 9);
    }
    test_carveout(major);
    test_l2_fetch(major);
    test_bad_args();
done:
    CK(cudaDeviceSynchronize());
    loom_cuda_release_scratch();
    printf("\n%d cases, %d failed\n", g_cases, g_fail);
    return g_fail ? 1 : 0;
}
