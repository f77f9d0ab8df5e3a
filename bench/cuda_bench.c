/* cuda_bench.c: benchmarks of the CUDA kernels at Qwen3-4B (hidden 2560, ffn 9728) and
 * Qwen3-8B (4096 / 14336) shapes, 32 query heads, 8 KV heads, head_dim 128, vocab 151936.
 *
 *   cuda_bench [--quick] [--attn] [--matmul] [--q6k] [--norm] [--attn-trace] [--attn-prof]
 *              [--attn-step] [--fused] [--mixed] [--attn-s7] [--q6k-down] [--q6k-wide] [--q4k-wide] [--q4w] [--triple-v] [--q4k] [--q8] [--q8w] [--prefill] [--attn-pf]
 *              [--gemv-trace] [--icache] [--l2warm] [--rows]
 *
 * Q4_K weights of rows % 16 == 0 are given in LOOM_WEIGHT_Q4K_TILES and Q6_K ones in
 * LOOM_WEIGHT_Q6K_TILES, as the executor uploads them (--rows: every weight in rows; --gemv-trace
 * always so, its traced kernels read rows).
 * Method: CUDA events around many launches, the median of several repetitions, per launch.
 * Weights (and KV caches) rotate over copies totalling > 256 MB, far above the H200's L2 (50-60
 * MB), so the figures are DRAM figures. GB/s counts the bytes that must move (weights + KV +
 * activations, each once). The copy bandwidth is measured first, in the same run (a 1 GiB
 * device-to-device copy, counting read + write), and every figure is also given as a fraction
 * of it. "decode graph" rows capture whole layers' kernels back to back in a CUDA graph (as a
 * decode step runs) and time graph replays ("folded": the RMSNorms inside the next matmul via
 * loom_cuda_*_normed, beside the same layers with their norm launches; --norm: those and the
 * 4B pair / triple / lm head standalone plain, norm + plain, and normed; --mixed: the Q4_K_M
 * triple in one launch against its two launches, alone and in the decode-layer graph; --attn-pf:
 * prefill attention with LOOM_ATTN_PREFILL=0/1/2 alternating, L2-warm, with TFLOP/s). Inputs are random
 * (never zeros). Prints a table;
 * bench/RESULTS.md holds a copy with date and conditions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "bench/icache_fill.h"
#include "bench/l2_warm.h"
#include "kernels/quant/quant.h"
#include "tests/gpu/cuda_check.h"

#define LK(x)                                                                                 \
    do {                                                                                      \
        loom_error err_ = {0};                                                                \
        loom_status st_ = (x);                                                                \
        (void)err_;                                                                           \
        if (st_ != LOOM_OK) {                                                                 \
            fprintf(stderr, "FATAL %s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)st_);  \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

static cudaStream_t g_s;
static double g_copy_gbs = 0;
static int g_quick = 0;
static int g_attn_only = 0; /* --attn: the copy and the attention rows only */
static int g_mm_only = 0; /* --matmul: the 4B Q4_K matmul rows and the 4B decode graph only */
static int g_attn_trace = 0, g_attn_prof = 0, g_attn_step = 0; /* --attn-trace, --attn-prof, --attn-step */
/* --q6k: the copy and the Q6_K matmul rows only; each of those rows is timed twice on the same
 * weights, on the tensor cores and with LOOM_GEMV_MMA_Q6K=0 (the warp-per-row kernels) */
static int g_norm_only = 0; /* --norm: the folded-RMSNorm rows only */
static int g_sms = 132;      /* the device's SMs (main) */
static int g_q6k_only = 0, g_ab_q6k = 0, g_calls = 0; /* g_calls: launches a repetition (0: default) */
static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static loom_error g_err;

static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float urand(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = loom_fp32_to_fp16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* The layout the executor gives a matmul weight (cuda_backend.c: rows % 16 == 0, Q4_K in
 * LOOM_WEIGHT_Q4K_TILES, Q6_K in LOOM_WEIGHT_Q6K_TILES), unless --rows (every weight in rows, the
 * layout of sessions <= 14; Q6_K's rows until session 17). */
static int g_rows = 0;
static loom_weight_layout bench_layout(loom_ggml_type t, int64_t M) {
    if (g_rows || M % 16 != 0) return LOOM_WEIGHT_ROWS;
    if (t == LOOM_GGML_Q4_K) return LOOM_WEIGHT_Q4K_TILES;
    return t == LOOM_GGML_Q6_K ? LOOM_WEIGHT_Q6K_TILES : LOOM_WEIGHT_ROWS;
}
/* device buffer of `bytes` random bytes (with sane f16 scales for the weight type t) */
static void *dev_weights(loom_ggml_type t, int64_t M, int64_t K) {
    int64_t rb = loom_ggml_row_bytes(t, K);
    size_t bytes = (size_t)(M * rb);
    uint8_t *h = malloc(bytes);
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = rnd();
        memcpy(h + i, &r, 8);
    }
    for (size_t i = bytes & ~(size_t)7; i < bytes; i++) h[i] = (uint8_t)rnd();
    int64_t nb = M * K / (t == LOOM_GGML_Q8_0 ? 32 : 256);
    if (t == LOOM_GGML_F16)
        for (int64_t i = 0; i < M * K; i++) ((uint16_t *)h)[i] = loom_fp32_to_fp16(urand(-1, 1));
    for (int64_t b = 0; b < nb; b++) {
        if (t == LOOM_GGML_Q4_K) { put_f16(h + b * 144, 0.002f); put_f16(h + b * 144 + 2, 0.001f); }
        if (t == LOOM_GGML_Q5_K) { put_f16(h + b * 176, 0.002f); put_f16(h + b * 176 + 2, 0.001f); }
        if (t == LOOM_GGML_Q6_K) put_f16(h + b * 210 + 208, 0.0005f);
        if (t == LOOM_GGML_Q8_0) put_f16(h + b * 34, 0.005f);
    }
    void *d;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* A random M x K weight of type t (dev_weights) in bench_layout's layout. The Q4_K tiles are the
 * random blocks as they lie (a permutation of random blocks is random blocks); the Q6_K tiles are
 * made by loom_cuda_q6k_to_tiles (the padded blocks keep their sane scales). */
static loom_kweight bench_weight(loom_ggml_type t, int64_t M, int64_t K) {
    loom_kweight w = {dev_weights(t, M, K), t, M, K, bench_layout(t, M)};
    if (w.layout == LOOM_WEIGHT_Q6K_TILES) {
        void *d;
        CK(cudaMalloc(&d, (size_t)loom_weight_bytes(t, M, K, w.layout)));
        loom_kweight rows = w;
        rows.layout = LOOM_WEIGHT_ROWS;
        LK(loom_cuda_q6k_to_tiles(rows, d, &g_err, 0));
        CK(cudaDeviceSynchronize());
        CK(cudaFree((void *)rows.data));
        w.data = d;
    }
    return w;
}

static float *dev_floats(int64_t n, float lo, float hi) {
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = urand(lo, hi);
    float *d;
    CK(cudaMalloc((void **)&d, sizeof(float) * (size_t)n));
    CK(cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median (over reps) of the per-call time in microseconds of fn(ctx, i), i = 0..calls-1. */
typedef void (*bench_fn)(void *ctx, int i);
static double time_us(bench_fn fn, void *ctx, int calls) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) fn(ctx, i); /* warm-up */
    CK(cudaStreamSynchronize(g_s));
    enum { REPS = 7 };
    float ms[REPS];
    for (int r = 0; r < REPS; r++) {
        CK(cudaEventRecord(a, g_s));
        for (int i = 0; i < calls; i++) fn(ctx, i);
        CK(cudaEventRecord(b, g_s));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[r], a, b));
    }
    CK(cudaGetLastError());
    qsort(ms, REPS, sizeof(float), cmp_f);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms[REPS / 2] * 1000.0 / calls;
}

static void row(const char *name, const char *shape, double us, double bytes) {
    double gbs = bytes / (us * 1e-6) / 1e9;
    printf("| %-34s | %-30s | %9.2f | %8.1f | %5.1f%% |\n", name, shape, us, gbs,
           g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0.0);
    fflush(stdout);
}

/* ---- copy bandwidth --------------------------------------------------------------------- */
struct copy_ctx { void *a, *b; size_t n; };
static void copy_fn(void *c, int i) {
    struct copy_ctx *x = c;
    (void)i;
    CK(cudaMemcpyAsync(x->b, x->a, x->n, cudaMemcpyDeviceToDevice, g_s));
}

/* ---- matmul family ---------------------------------------------------------------------- */
enum { R_MAX = 64 };
enum mm_op { MM_PLAIN, MM_ADD, MM_PAIR, MM_TRIPLE, MM_GEMM };
/* norm (MM_PLAIN, MM_PAIR, MM_TRIPLE): 0 none, 1 loom_cuda_rms_norm then the plain launcher
 * (two launches, as an unfused graph), 2 the _normed launcher (the norm folded in) */
struct mm_ctx {
    int op, copies, norm;
    int64_t n;
    loom_kweight w[R_MAX][3];
    float *x, *y[3], *res, *nw, *xn;
};
static void mm_fn(void *c, int i) {
    struct mm_ctx *m = c;
    loom_kweight *w = m->w[i % m->copies];
    const loom_prenorm pn = {m->nw, 1e-6f}, *norm = m->norm == 2 ? &pn : NULL;
    const float *x = m->x;
    if (m->norm == 1) {
        LK(loom_cuda_rms_norm(m->x, m->nw, m->n, w[0].cols, 1e-6f, m->xn, &g_err, g_s));
        x = m->xn;
    }
    switch (m->op) {
    case MM_PLAIN: case MM_GEMM: LK(loom_cuda_matmul_normed(x, norm, m->n, w[0], m->y[0], &g_err, g_s)); break;
    case MM_ADD: LK(loom_cuda_matmul_add(x, m->n, w[0], m->res, m->y[0], &g_err, g_s)); break;
    case MM_PAIR:
        LK(loom_cuda_matmul_pair_normed(x, norm, m->n, w[0], w[1], LOOM_PAIR_SWIGLU, m->y[0], NULL,
                                        &g_err, g_s));
        break;
    case MM_TRIPLE: {
        float *const y[3] = {m->y[0], m->y[1], m->y[2]};
        LK(loom_cuda_matmul_triple_normed(x, norm, m->n, w, NULL, y, &g_err, g_s));
        break;
    }
    }
}
static int g_norm_ab = 0; /* bench_mm times norm modes 0, 1, 2 on the same weights */
static int g_ab_mixed = 0; /* bench_mm: LOOM_GEMV_TRIPLE_MIXED=0, 1, 2, 3, twice, same weights */
/* bench_mm: LOOM_GEMM_WIDE=0 then forced on from 16 tokens ("16"), twice, same weights (1: plain /
 * add, 2: the _normed launcher) instead of the default row */
static int g_ab_wide = 0;
/* with g_ab_wide: the wide rows once for each LOOM_GEMM_WIDE_Q6K form in BENCH_Q6W (digits,
 * default "234567": 16 / 32 tokens a block, the grid rule, and those three with the limb
 * pre-pass) */
static int g_ab_q6w = 0;
/* bench_mm: the INT8 Q4_K GEMM's forms in turn, twice, same weights (1: plain / add, 2: the
 * _normed launcher): the 8-token GEMM (LOOM_GEMM_WIDE=0; only at N <= 64), the wide GEMM forced
 * on (LOOM_GEMM_WIDE=2) staging x in the block (LOOM_GEMM_WIDE_Q4K_I8=4) and reading the limb
 * pre-pass (=5, the default), then the defaults (LOOM_GEMM_WIDE=1: the wide GEMM where its rule
 * takes it, gemv_mma.cu q4_plan) */
static int g_ab_q4v = 0;

static int64_t wbytes(loom_kweight w) { return w.rows * loom_ggml_row_bytes(w.type, w.cols); }

/* Builds `copies` copies of up to 3 weights so the set exceeds 256 MB, times op. */
static void bench_mm(const char *name, int op, int64_t n, int nw, const loom_ggml_type *t,
                     const int64_t *M, int64_t K) {
    struct mm_ctx *m = calloc(1, sizeof *m);
    m->op = op;
    m->n = n;
    int64_t per = 0;
    for (int j = 0; j < nw; j++) per += M[j] * loom_ggml_row_bytes(t[j], K);
    int copies = (int)((256ll << 20) / per) + 1;
    if (copies > R_MAX) copies = R_MAX;
    if (copies < 2) copies = 2;
    m->copies = copies;
    for (int c = 0; c < copies; c++)
        for (int j = 0; j < nw; j++) {
            m->w[c][j] = bench_weight(t[j], M[j], K);
        }
    m->x = dev_floats(n * K, -1, 1);
    m->nw = g_norm_ab || g_ab_wide == 2 || g_ab_q4v == 2 ? dev_floats(K, 0.9f, 1.1f) : NULL;
    m->xn = g_norm_ab ? dev_floats(n * K, -1, 1) : NULL;
    int64_t maxM = 0;
    for (int j = 0; j < nw; j++) if (M[j] > maxM) maxM = M[j];
    for (int j = 0; j < 3; j++) m->y[j] = dev_floats(n * maxM, 0, 1);
    m->res = dev_floats(n * maxM, -1, 1);
    double bytes = 0;
    for (int j = 0; j < nw; j++) bytes += (double)wbytes(m->w[0][j]) + 4.0 * n * M[j];
    bytes += 4.0 * n * K;
    if (op == MM_ADD) bytes += 4.0 * n * M[0];
    if (op == MM_PAIR) bytes -= 4.0 * n * M[1];
    char shape[64];
    if (nw == 1) snprintf(shape, sizeof shape, "%s %lldx%lld N=%lld", loom_ggml_type_get(t[0])->name,
                          (long long)M[0], (long long)K, (long long)n);
    else if (nw == 2) snprintf(shape, sizeof shape, "%s 2x%lldx%lld", loom_ggml_type_get(t[0])->name,
                               (long long)M[0], (long long)K);
    else snprintf(shape, sizeof shape, "%s/%s/%s %lld+%lld+%lld x%lld", loom_ggml_type_get(t[0])->name,
                  loom_ggml_type_get(t[1])->name, loom_ggml_type_get(t[2])->name,
                  (long long)M[0], (long long)M[1], (long long)M[2], (long long)K);
    static const char *nmode[3] = {"", " norm+plain", " normed"};
    for (int nm = 0; nm < (g_ab_wide || g_ab_q4v ? 0 : g_norm_ab && !g_ab_mixed ? 3 : g_ab_mixed ? 0 : 1); nm++) {
        char vn[96];
        m->norm = nm;
        snprintf(vn, sizeof vn, "%s%s", name, nmode[nm]);
        row(vn, shape, time_us(mm_fn, m, g_calls ? g_calls : g_quick ? 50 : 200), bytes);
    }
    for (int rep = 0; rep < (g_ab_mixed ? 2 : 0); rep++)
        for (int mx = 0; mx < 4; mx++) { /* two launches, one (order by rule, V last, V first) */
            static const char *mv[4] = {"0", "1", "2", "3"};
            static const char *ml[4] = {"2 launches", "mixed", "mixed V last", "mixed V first"};
            setenv("LOOM_GEMV_TRIPLE_MIXED", mv[mx], 1);
            loom_cuda_reload_switches();
            for (int nm = 0; nm < (g_norm_ab ? 3 : 1); nm += g_norm_ab ? 2 : 1) { /* plain, normed */
                char vn[96];
                m->norm = nm;
                snprintf(vn, sizeof vn, "%s%s %s", name, nmode[nm], ml[mx]);
                row(vn, shape, time_us(mm_fn, m, g_calls ? g_calls : g_quick ? 50 : 200), bytes);
            }
        }
    if (g_ab_mixed) {
        unsetenv("LOOM_GEMV_TRIPLE_MIXED");
        loom_cuda_reload_switches();
    }
    const char *q6list = getenv("BENCH_Q6W") ? getenv("BENCH_Q6W") : "234567";
    for (int rep = 0; rep < (g_ab_wide ? 2 : 0); rep++)
        for (int v = 0; v < (g_ab_q6w && n > 1 ? 1 + (int)strlen(q6list) : 2); v++) {
            char vn[96], q6w[2] = {v ? q6list[v - 1] : '7', 0};
            setenv("LOOM_GEMM_WIDE", v ? "16" : "0", 1);
            if (g_ab_q6w) setenv("LOOM_GEMM_WIDE_Q6K", q6w, 1);
            loom_cuda_reload_switches();
            m->norm = g_ab_wide == 2 ? 2 : 0;
            snprintf(vn, sizeof vn, "%s%s wide=%s%s%s", name, g_ab_wide == 2 ? " normed" : "",
                     v ? "16" : "0", g_ab_q6w && v ? " q6w=" : "", g_ab_q6w && v ? q6w : "");
            row(vn, shape, time_us(mm_fn, m, g_calls ? g_calls : g_quick ? 50 : 200), bytes);
        }
    if (g_ab_wide) {
        unsetenv("LOOM_GEMM_WIDE_Q6K");
        unsetenv("LOOM_GEMM_WIDE");
        loom_cuda_reload_switches();
    }
    for (int rep = 0; rep < (g_ab_q4v ? 2 : 0); rep++)
        for (int v = n <= 64 ? 0 : 1; v < 4; v++) {
            static const char *vw[4] = {"0", "2", "2", "1"}, *vi[4] = {"4", "4", "5", "5"};
            static const char *vl[4] = {"gemm8", "wide f4", "wide pre", "default"};
            char vn[96];
            setenv("LOOM_GEMV_MMA_Q4K_V", "2", 1);
            setenv("LOOM_GEMM_WIDE", vw[v], 1);
            setenv("LOOM_GEMM_WIDE_Q4K_I8", vi[v], 1);
            loom_cuda_reload_switches();
            m->norm = g_ab_q4v == 2 ? 2 : 0;
            snprintf(vn, sizeof vn, "%s%s %s", name, g_ab_q4v == 2 ? " normed" : "", vl[v]);
            row(vn, shape, time_us(mm_fn, m, g_calls ? g_calls : g_quick ? 50 : 200), bytes);
        }
    if (g_ab_q4v) {
        unsetenv("LOOM_GEMM_WIDE_Q4K_I8");
        unsetenv("LOOM_GEMV_MMA_Q4K_V");
        unsetenv("LOOM_GEMM_WIDE");
        loom_cuda_reload_switches();
    }
    if (g_ab_q6k) { /* the same weights with Q6_K on the warp-per-row kernels */
        char vn[96];
        snprintf(vn, sizeof vn, "%s (Q6K=0)", name);
        setenv("LOOM_GEMV_MMA_Q6K", "0", 1);
        loom_cuda_reload_switches();
        row(vn, shape, time_us(mm_fn, m, g_calls ? g_calls : g_quick ? 50 : 200), bytes);
        setenv("LOOM_GEMV_MMA_Q6K", "1", 1);
        loom_cuda_reload_switches();
    }
    for (int c = 0; c < copies; c++)
        for (int j = 0; j < nw; j++) cudaFree((void *)m->w[c][j].data);
    cudaFree(m->x); cudaFree(m->res); cudaFree(m->nw); cudaFree(m->xn);
    for (int j = 0; j < 3; j++) cudaFree(m->y[j]);
    free(m);
}

/* ---- attention -------------------------------------------------------------------------- */
struct at_ctx {
    int copies;
    void *kc[R_MAX], *vc[R_MAX];
    float *ks[R_MAX], *vs[R_MAX];
    float *q, *out;
    int32_t *dpos; /* non-NULL: loom_cuda_attention_at with the position in device memory */
    loom_kv_layout kv;
    loom_attn_params p;
    /* rka: loom_cuda_rope_kv_attention_at (raw q in q, raw k/v rows, head norm weights nw, its
     * q_tmp; LOOM_ATTN_FUSED picks one launch or two); rka == 2: rope_kv_write alone */
    int rka;
    float *rk, *rv, *nw, *qt;
    loom_rope_params rp;
};
static void at_fn(void *c, int i) {
    struct at_ctx *a = c;
    int k = i % a->copies;
    if (a->rka == 1)
        LK(loom_cuda_rope_kv_attention_at(a->q, a->rk, a->rv, a->dpos, a->nw, a->nw, 1e-6f, &a->rp,
                                          a->kc[k], a->ks[k], a->vc[k], a->vs[k], &a->kv, &a->p,
                                          a->qt, a->out, &g_err, g_s));
    else if (a->rka == 2)
        LK(loom_cuda_rope_kv_write(a->q, a->rk, a->rv, a->dpos, a->nw, a->nw, 1e-6f, &a->rp,
                                   a->kc[k], a->ks[k], a->vc[k], a->vs[k], &a->kv, a->qt, &g_err,
                                   g_s));
    else if (a->dpos)
        LK(loom_cuda_attention_at(a->q, a->kc[k], a->ks[k], a->vc[k], a->vs[k], &a->kv, &a->p,
                                  a->dpos, a->out, &g_err, g_s));
    else
        LK(loom_cuda_attention(a->q, a->kc[k], a->ks[k], a->vc[k], a->vs[k], &a->kv, &a->p,
                               a->out, &g_err, g_s));
}
static void at_graph_fn(void *c, int i) { /* c: the cudaGraphExec_t */
    (void)i;
    CK(cudaGraphLaunch(*(cudaGraphExec_t *)c, g_s));
}
/* Attention over a cache of L positions (query N-1 at position L-1); at: through the _at
 * launcher (position read from device memory, grid from n_ctx = L); at == 2: the attention
 * prologue + attention (loom_cuda_rope_kv_attention_at, fused or two launches by
 * LOOM_ATTN_FUSED), at == 3: the prologue alone (rope_kv_write), both with head norms, NEOX. */
static void bench_attn_at(const char *name, loom_kv_type t, int64_t L, int64_t N, int at) {
    struct at_ctx *a = calloc(1, sizeof *a);
    a->rka = at >= 2 ? at - 1 : 0;
    const int64_t nh = 32, nkv = 8, D = 128;
    a->kv = (loom_kv_layout){t, L, nkv, D};
    a->p = (loom_attn_params){N, nh, L - N, 1.0f / sqrtf((float)D), 0};
    size_t el = t == LOOM_KV_F16 ? 2 : (t == LOOM_KV_INT8 ? 1 : 4);
    size_t cb = (size_t)(L * nkv * D) * el;
    int copies = (int)((256ll << 20) / (2 * cb)) + 1;
    if (copies > R_MAX) copies = R_MAX;
    a->copies = copies;
    for (int c = 0; c < copies; c++) { /* copies 1.. repeat copy 0's bytes (host rng is slow) */
        if (c == 0) {
            a->kc[c] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
            a->vc[c] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
            a->ks[c] = dev_floats(L * nkv, 0.001f, 0.01f);
            a->vs[c] = dev_floats(L * nkv, 0.001f, 0.01f);
            continue;
        }
        void **dst[4] = {&a->kc[c], &a->vc[c], (void **)&a->ks[c], (void **)&a->vs[c]};
        const void *src[4] = {a->kc[0], a->vc[0], a->ks[0], a->vs[0]};
        const size_t nb[4] = {cb, cb, sizeof(float) * (size_t)(L * nkv), sizeof(float) * (size_t)(L * nkv)};
        for (int j = 0; j < 4; j++) {
            CK(cudaMalloc(dst[j], nb[j]));
            CK(cudaMemcpy(*dst[j], src[j], nb[j], cudaMemcpyDeviceToDevice));
        }
    }
    a->q = dev_floats(N * nh * D, -1, 1);
    a->out = dev_floats(N * nh * D, 0, 1);
    if (a->rka) {
        a->rk = dev_floats(nkv * D, -1, 1);
        a->rv = dev_floats(nkv * D, -1, 1);
        a->nw = dev_floats(D, 0.9f, 1.1f);
        a->qt = dev_floats(nh * D, 0, 1);
        a->rp = (loom_rope_params){1, nh, nkv, D, D, LOOM_ROPE_NEOX, 1e6f, 1.0f};
    }
    if (at) {
        int32_t p0 = (int32_t)(L - N);
        CK(cudaMalloc((void **)&a->dpos, sizeof p0));
        CK(cudaMemcpy(a->dpos, &p0, sizeof p0, cudaMemcpyHostToDevice));
    }
    size_t need = loom_cuda_scratch_bytes_for(nh, D, 1, 1) * (size_t)N;
    LK(loom_cuda_reserve_scratch(need, &g_err));
    double bytes = 2.0 * cb + (t == LOOM_KV_INT8 ? 8.0 * L * nkv : 0) + 8.0 * N * nh * D;
    char shape[64];
    snprintf(shape, sizeof shape, "%s L=%lld N=%lld 32/8x128", t == LOOM_KV_F16 ? "F16" : "INT8",
             (long long)L, (long long)N);
    for (int i = 0; i < 1000; i++) at_fn(a, i); /* ~10-50 ms busy: clocks up from idle */
    double us = time_us(at_fn, a, g_quick ? 50 : 200);
    row(name, shape, us, bytes);
    { /* the same launches captured in one CUDA graph (one per copy), as a decode step replays
       * them: no host launch cost between them */
        cudaGraph_t g;
        cudaGraphExec_t ge = NULL;
        CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
        for (int c = 0; c < copies; c++) at_fn(a, c);
        CK(cudaStreamEndCapture(g_s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        char gn[80];
        snprintf(gn, sizeof gn, "%s graph", name);
        row(gn, shape, time_us(at_graph_fn, &ge, g_quick ? 10 : 40) / copies, bytes);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
    }
    for (int c = 0; c < copies; c++) { cudaFree(a->kc[c]); cudaFree(a->vc[c]); cudaFree(a->ks[c]); cudaFree(a->vs[c]); }
    cudaFree(a->q); cudaFree(a->out);
    if (a->dpos) cudaFree(a->dpos);
    if (a->rka) { cudaFree(a->rk); cudaFree(a->rv); cudaFree(a->nw); cudaFree(a->qt); }
    free(a);
}
static void bench_attn(const char *name, loom_kv_type t, int64_t L, int64_t N) {
    bench_attn_at(name, t, L, N, 0);
}

/* ---- attention timeline (--attn-trace) and profiler target (--attn-prof) ------------------ */
/* --attn-trace: the graph of one launch per cache copy (<= 16) replayed with v5's per-block
 * timestamps (loom_cuda_attention_trace, its record layout in cuda_kernels.h); prints, per case
 * and trace mode, medians over launches 1.. of the last replay: the boundary (previous launch's
 * last block exit -> this launch's first PDL release), the span (first release -> last exit),
 * and each block phase in us (clock64 at the measured clock rate). */
enum { TR_SLOTS = 32, TR_BLOCKS = 256, TR_W = 16 };
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double med_d(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}
static void attn_trace_case(const char *label, loom_kv_type t, int64_t L, int mode) {
    /* LOOM_TRACE_FUSED=1: the fused prologue + attention (loom_cuda_rope_kv_attention_at) */
    const int64_t nh = 32, nkv = 8, D = 128;
    size_t el = t == LOOM_KV_F16 ? 2 : 1;
    size_t cb = (size_t)(L * nkv * D) * el;
    int copies = (int)((256ll << 20) / (2 * cb)) + 1;
    if (copies > 16) copies = 16;
    struct at_ctx *a = calloc(1, sizeof *a);
    a->kv = (loom_kv_layout){t, L, nkv, D};
    a->p = (loom_attn_params){1, nh, L - 1, 1.0f / sqrtf((float)D), 0};
    a->copies = copies;
    a->kc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
    a->vc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
    a->ks[0] = dev_floats(L * nkv, 0.001f, 0.01f);
    a->vs[0] = dev_floats(L * nkv, 0.001f, 0.01f);
    for (int c = 1; c < copies; c++) { /* copies of copy 0 (host rng is slow) */
        void **dst[4] = {&a->kc[c], &a->vc[c], (void **)&a->ks[c], (void **)&a->vs[c]};
        const void *src[4] = {a->kc[0], a->vc[0], a->ks[0], a->vs[0]};
        const size_t nb[4] = {cb, cb, sizeof(float) * (size_t)(L * nkv), sizeof(float) * (size_t)(L * nkv)};
        for (int j = 0; j < 4; j++) {
            CK(cudaMalloc(dst[j], nb[j]));
            CK(cudaMemcpy(*dst[j], src[j], nb[j], cudaMemcpyDeviceToDevice));
        }
    }
    a->q = dev_floats(nh * D, -1, 1);
    a->out = dev_floats(nh * D, 0, 1);
    const char *tf = getenv("LOOM_TRACE_FUSED"); /* 1: trace the fused prologue + attention */
    if (tf && strcmp(tf, "1") == 0) {
        int32_t p0 = (int32_t)(L - 1);
        a->rka = 1;
        a->rk = dev_floats(nkv * D, -1, 1);
        a->rv = dev_floats(nkv * D, -1, 1);
        a->nw = dev_floats(D, 0.9f, 1.1f);
        a->qt = dev_floats(nh * D, 0, 1);
        a->rp = (loom_rope_params){1, nh, nkv, D, D, LOOM_ROPE_NEOX, 1e6f, 1.0f};
        CK(cudaMalloc((void **)&a->dpos, sizeof p0));
        CK(cudaMemcpy(a->dpos, &p0, sizeof p0, cudaMemcpyHostToDevice));
        label = t == LOOM_KV_F16 ? "F16 fused" : "INT8 fused";
    }
    LK(loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(nh, D, 1, 1), &g_err));
    for (int i = 0; i < 200; i++) at_fn(a, i); /* clocks up */
    LK(loom_cuda_attention_trace(mode, &g_err));
    cudaGraph_t g;
    cudaGraphExec_t ge = NULL;
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < copies; c++) at_fn(a, c);
    CK(cudaStreamEndCapture(g_s, &g));
    LK(loom_cuda_attention_trace(-1, &g_err));
    CK(cudaGraphInstantiate(&ge, g, 0));
    double us = time_us(at_graph_fn, &ge, 30) / copies;
    CK(cudaGraphLaunch(ge, g_s));
    CK(cudaStreamSynchronize(g_s));
    size_t nw = (size_t)TR_SLOTS * TR_BLOCKS * TR_W;
    uint64_t *tr = calloc(nw, sizeof *tr);
    LK(loom_cuda_attention_trace_read(tr, nw, &g_err));
    /* clock rate: cycles / ns over every record of the replay */
    double cyc = 0, ns = 0, gran = 1e30;
    double *ts = calloc((size_t)3 * TR_SLOTS * TR_BLOCKS, sizeof(double));
    int nts = 0;
    for (int k = 0; k < copies; k++)
        for (int b = 0; b < TR_BLOCKS; b++) {
            const uint64_t *r = tr + ((size_t)k * TR_BLOCKS + b) * TR_W;
            if (!r[0] || !r[11] || r[11] < r[0]) continue;
            cyc += (double)(r[10] - r[2]);
            ns += (double)(r[11] - r[0]);
            ts[nts++] = (double)r[0]; ts[nts++] = (double)r[1]; ts[nts++] = (double)r[11];
        }
    qsort(ts, (size_t)nts, sizeof *ts, cmp_d); /* the timer's step: smallest positive difference */
    for (int i = 1; i < nts; i++)
        if (ts[i] > ts[i - 1] && ts[i] - ts[i - 1] < gran) gran = ts[i] - ts[i - 1];
    free(ts);
    const double ghz = ns > 0 ? cyc / ns : 1.98;
    enum { NPH = 10 };
    static const char *ph[NPH] = {"pdlwait", "issue", "q", "tile0", "tiles", "/tile", "meet", "epi", "combine", "total"};
    double *v[NPH], *bnd = calloc(TR_SLOTS, sizeof(double)), *span = calloc(TR_SLOTS, sizeof(double));
    double *crit[NPH];
    int nv = 0, nk = 0;
    for (int i = 0; i < NPH; i++) {
        v[i] = calloc((size_t)TR_SLOTS * TR_BLOCKS, sizeof(double));
        crit[i] = calloc(TR_SLOTS, sizeof(double));
    }
    int nblk = 0, S = 0, nch = 0, nst = 0;
    for (int k = 1; k < copies; k++) {
        uint64_t rel_min = UINT64_MAX, end_max = 0, pend_max = 0;
        int cb_ = -1;
        for (int b = 0; b < TR_BLOCKS; b++) {
            const uint64_t *r = tr + ((size_t)k * TR_BLOCKS + b) * TR_W;
            const uint64_t *rp = tr + ((size_t)(k - 1) * TR_BLOCKS + b) * TR_W;
            if (rp[11] > pend_max) pend_max = rp[11];
            if (!r[0]) continue;
            if (k == 1) nblk++;
            if (r[1] < rel_min) rel_min = r[1];
            if (r[11] > end_max) { end_max = r[11]; cb_ = b; }
            const int bn = (int)(r[13] & 0xffffffffu);
            if (bn == 0) continue; /* a block past the splits in use */
            S = (int)(r[12] >> 32); nch = bn; nst = (int)(r[13] >> 32);
            const uint64_t c9 = r[9] & ~(1ull << 63);
            const double d[NPH] = {(double)(r[3] - r[2]), (double)(r[4] - r[3]), (double)(r[5] - r[4]),
                                   (double)(r[6] - r[5]), (double)(r[7] - r[6]),
                                   bn > 1 ? (double)(r[7] - r[6]) / (bn - 1) : 0, (double)(r[8] - r[7]),
                                   c9 ? (double)(c9 - r[8]) : 0, c9 ? (double)(r[10] - c9) : 0,
                                   (double)(r[10] - r[3])};
            for (int i = 0; i < NPH; i++) v[i][nv] = d[i] / ghz / 1000.0;
            nv++;
        }
        if (cb_ >= 0) {
            const uint64_t *r = tr + ((size_t)k * TR_BLOCKS + cb_) * TR_W;
            const int bn = (int)(r[13] & 0xffffffffu);
            const uint64_t c9 = r[9] & ~(1ull << 63);
            const double d[NPH] = {(double)(r[3] - r[2]), (double)(r[4] - r[3]), (double)(r[5] - r[4]),
                                   (double)(r[6] - r[5]), (double)(r[7] - r[6]),
                                   bn > 1 ? (double)(r[7] - r[6]) / (bn - 1) : 0, (double)(r[8] - r[7]),
                                   c9 ? (double)(c9 - r[8]) : 0, c9 ? (double)(r[10] - c9) : 0,
                                   (double)(r[10] - r[3])};
            for (int i = 0; i < NPH; i++) crit[i][nk] = d[i] / ghz / 1000.0;
        }
        bnd[nk] = ((double)rel_min - (double)pend_max) / 1000.0;
        span[nk] = ((double)end_max - (double)rel_min) / 1000.0;
        nk++;
    }
    int nsm = 0; /* distinct SMs the blocks of launch 1 ran on (smid in word 12) */
    {
        unsigned char seen[1024] = {0};
        for (int b = 0; b < TR_BLOCKS && copies > 1; b++) {
            const uint64_t *r = tr + ((size_t)1 * TR_BLOCKS + b) * TR_W;
            const unsigned sm = (unsigned)(r[12] & 0x3ffu);
            if (r[0] && !seen[sm]) { seen[sm] = 1; nsm++; }
        }
    }
    printf("trace %-4s L=%-5lld mode %d: graph %6.2f us/launch | boundary %5.2f span %5.2f us | %d blocks on %d SMs, S %d, %d tiles, %d stages | clock %.2f GHz, timer step %.0f ns\n",
           label, (long long)L, mode, us, med_d(bnd, nk), med_d(span, nk), nblk, nsm, S, nch, nst, ghz, gran);
    printf("   median block (us):");
    for (int i = 0; i < NPH; i++) printf(" %s %.2f", ph[i], med_d(v[i], nv));
    printf("\n   last block   (us):");
    for (int i = 0; i < NPH; i++) printf(" %s %.2f", ph[i], med_d(crit[i], nk));
    if (a->rka) { /* the fused prologue of the median block: angles + q norms, K row + barrier */
        int np = 0;
        for (int k = 1; k < copies; k++)
            for (int b = 0; b < TR_BLOCKS; b++) {
                const uint64_t *r = tr + ((size_t)k * TR_BLOCKS + b) * TR_W;
                if (!r[0] || !r[14] || !r[15] || (r[13] & 0xffffffffu) == 0) continue;
                v[0][np] = (double)(r[14] - r[4]) / ghz / 1000.0;
                v[1][np] = (double)(r[15] - r[14]) / ghz / 1000.0;
                v[2][np] = (double)(r[5] - r[15]) / ghz / 1000.0;
                np++;
            }
        printf(" | prologue: norms %.2f krow+sync %.2f qfrag %.2f", med_d(v[0], np), med_d(v[1], np),
               med_d(v[2], np));
    }
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < NPH; i++) { free(v[i]); free(crit[i]); }
    free(bnd); free(span); free(tr);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    for (int c = 0; c < copies; c++) { cudaFree(a->kc[c]); cudaFree(a->vc[c]); cudaFree(a->ks[c]); cudaFree(a->vs[c]); }
    cudaFree(a->q); cudaFree(a->out);
    if (a->rka) { cudaFree(a->rk); cudaFree(a->rv); cudaFree(a->nw); cudaFree(a->qt); cudaFree(a->dpos); }
    free(a);
}
static void attn_trace_all(void) {
    static const struct { const char *l; loom_kv_type t; int64_t L; int modes; } c[] = {
        {"F16", LOOM_KV_F16, 512, 4}, {"F16", LOOM_KV_F16, 4096, 4}, {"INT8", LOOM_KV_INT8, 4096, 4},
        {"F16", LOOM_KV_F16, 8192, 2}, {"F16", LOOM_KV_F16, 640, 1}, {"F16", LOOM_KV_F16, 1024, 1},
        {"INT8", LOOM_KV_INT8, 512, 1}};
    /* LOOM_TRACE_LIST: the trace modes a case (comma-separated; default 0,1,2,4, the first
     * c[i].modes of them); LOOM_TRACE_CASES: at most this many cases */
    int modes[8] = {0, 1, 2, 4}, nm = 4;
    const char *ml = getenv("LOOM_TRACE_LIST");
    if (ml) {
        nm = 0;
        for (const char *p = ml; *p && nm < 8; p++)
            if (p == ml || p[-1] == ',') modes[nm++] = atoi(p);
    }
    const char *mc = getenv("LOOM_TRACE_CASES");
    const size_t ncase = mc ? (size_t)atoi(mc) : sizeof c / sizeof c[0];
    const char *only = getenv("LOOM_TRACE_ONLY"); /* only the cases of this many positions */
    for (size_t i = 0; i < sizeof c / sizeof c[0] && i < ncase; i++)
        if (!only || atoll(only) == c[i].L)
        for (int m = 0; m < (ml ? nm : c[i].modes); m++) attn_trace_case(c[i].l, c[i].t, c[i].L, modes[m]);
}
/* --attn-prof: one stream launch of each case on one cache copy (a target for ncu -k
 * regex:attn). */
static void attn_prof_all(void) {
    static const struct { loom_kv_type t; int64_t L; } c[] = {
        {LOOM_KV_F16, 512}, {LOOM_KV_F16, 4096}, {LOOM_KV_INT8, 4096}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const int64_t nh = 32, nkv = 8, D = 128, L = c[i].L;
        const size_t el = c[i].t == LOOM_KV_F16 ? 2 : 1;
        struct at_ctx *a = calloc(1, sizeof *a);
        a->kv = (loom_kv_layout){c[i].t, L, nkv, D};
        a->p = (loom_attn_params){1, nh, L - 1, 1.0f / sqrtf((float)D), 0};
        a->copies = 1;
        a->kc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
        a->vc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * (int64_t)el / 2, 1);
        a->ks[0] = dev_floats(L * nkv, 0.001f, 0.01f);
        a->vs[0] = dev_floats(L * nkv, 0.001f, 0.01f);
        a->q = dev_floats(nh * D, -1, 1);
        a->out = dev_floats(nh * D, 0, 1);
        LK(loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(nh, D, 1, 1), &g_err));
        at_fn(a, 0);
        CK(cudaStreamSynchronize(g_s));
        cudaFree(a->kc[0]); cudaFree(a->vc[0]); cudaFree(a->ks[0]); cudaFree(a->vs[0]);
        cudaFree(a->q); cudaFree(a->out);
        free(a);
    }
    printf("attn-prof: one launch each of F16 512, F16 4096, INT8 4096\n");
}

/* ---- small kernels ---------------------------------------------------------------------- */
struct sm_ctx { int op; int64_t n, d; float *x, *y, *w; void *tab; int32_t *ids; loom_kweight tw; };
static void sm_fn(void *c, int i) {
    struct sm_ctx *s = c;
    (void)i;
    switch (s->op) {
    case 0: LK(loom_cuda_rms_norm(s->x, s->w, s->n, s->d, 1e-6f, s->y, &g_err, g_s)); break;
    case 1: LK(loom_cuda_softmax(s->x, 1, s->n, s->y, &g_err, g_s)); break;
    case 2: LK(loom_cuda_argmax(s->x, 1, s->n, (int32_t *)s->y, &g_err, g_s)); break;
    case 3: LK(loom_cuda_swiglu(s->x, s->w, s->n, s->y, &g_err, g_s)); break;
    case 4: LK(loom_cuda_embed(s->tw, s->ids, 1, s->y, &g_err, g_s)); break;
    case 5: LK(loom_cuda_f16_to_f32((const uint16_t *)s->x, s->n, s->y, &g_err, g_s)); break;
    }
}
static void bench_small(const char *name, int op, int64_t n, int64_t d, double bytes) {
    struct sm_ctx s = {op, n, d, NULL, NULL, NULL, NULL, NULL, {0}};
    s.x = dev_floats(n * d, -5, 5);
    s.y = dev_floats(n * d, 0, 1);
    s.w = dev_floats(n * d, 0, 1);
    if (op == 4) {
        s.tw = (loom_kweight){dev_weights(LOOM_GGML_Q6_K, 151936, d), LOOM_GGML_Q6_K, 151936, d};
        int32_t id = 12345;
        CK(cudaMalloc((void **)&s.ids, 4));
        CK(cudaMemcpy(s.ids, &id, 4, cudaMemcpyHostToDevice));
    }
    LK(loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(32, 128, 1, n), &g_err));
    char shape[64];
    snprintf(shape, sizeof shape, "n=%lld d=%lld", (long long)n, (long long)d);
    row(name, shape, time_us(sm_fn, &s, 200), bytes);
    cudaFree(s.x); cudaFree(s.y); cudaFree(s.w);
    if (op == 4) { cudaFree((void *)s.tw.data); cudaFree(s.ids); }
}

/* ---- a decode step as a CUDA graph -------------------------------------------------------- */
struct layer {
    loom_kweight qkv[3], o, gate, up, down;
    void *kc, *vc;
};
struct step_ctx {
    int n_layers, gemv_only, folded; /* folded: the two RMSNorms a layer inside the matmuls */
    int64_t H, F, ctx;
    struct layer L[32];
    float *x, *h, *q, *k, *v, *att, *ff, *normw, *qnw, *qt;
    int32_t *pos;
    int rka; /* the layer's prologue + attention as loom_cuda_rope_kv_attention_at (LOOM_ATTN_FUSED) */
    /* --icache: a filler kernel (icache_fill.cu; 2 big, 1 small, 0 none) before the layer's
     * matmuls of fill_mask (bit 0 triple, 1 attention output, 2 pair, 3 down); fill_only: the
     * fillers without the matmuls */
    int fill, fill_mask, fill_only;
    float *fill_out;
    /* --gemv-trace with GT_TWICE=1: each matmul launched twice in a row, the second on layer
     * l + n_layers's weights (step_new made 2 n_layers): the second starts with its code warm */
    int twice;
    /* --l2warm: on a side stream s2, forked after the triple and joined before the pair, an L2
     * prefetch of this layer's weights of warm_mask (bit 0 attention output, 1 gate + up, 2 down;
     * 8 alone: no bytes, the fork and join only) while attention runs */
    int warm_mask;
    cudaStream_t s2;
    cudaEvent_t ev[2];
    cudaGraphExec_t exec;
};
static void step_fill(const struct step_ctx *s, int at) {
    if (!s->fill) return;
    if (s->fill_only) { /* every filler of the layer, without the matmuls between them */
        for (int m = 0; m < 4; m++)
            if (s->fill_mask >> m & 1) CK(bench_icache_fill(s->fill == 2, 2 * g_sms, s->fill_out, g_s));
    } else if (s->fill_mask >> at & 1) {
        CK(bench_icache_fill(s->fill == 2, 2 * g_sms, s->fill_out, g_s));
    }
}
static void step_enqueue(struct step_ctx *s) {
    const int64_t H = s->H, nh = 32, nkv = 8, D = 128;
    loom_kv_layout kv = {LOOM_KV_F16, s->ctx, nkv, D};
    loom_attn_params ap = {1, nh, s->ctx - 1, 1.0f / sqrtf(128.0f), 0};
    loom_rope_params rp = {1, nh, nkv, D, D, LOOM_ROPE_NEOX, 1e6f, 1.0f};
    for (int l = 0; l < s->n_layers; l++) {
        struct layer *y = &s->L[l];
        float *const qkv_out[3] = {s->q, s->k, s->v};
        const loom_prenorm pn = {s->normw, 1e-6f};
        step_fill(s, 0);
        if (s->fill_only) continue;
        const struct layer *y2 = s->twice ? &s->L[l + s->n_layers] : NULL;
        if (s->folded)
            LK(loom_cuda_matmul_triple_normed(s->x, &pn, 1, y->qkv, NULL, qkv_out, &g_err, g_s));
        if (y2 && s->folded)
            LK(loom_cuda_matmul_triple_normed(s->x, &pn, 1, y2->qkv, NULL, qkv_out, &g_err, g_s));
        if (s->warm_mask) {
            const void *wp[3];
            size_t wn[3];
            int nw = 0;
            if (s->warm_mask & 1) { wp[nw] = y->o.data; wn[nw++] = wbytes(y->o); }
            if (s->warm_mask & 2) {
                wp[nw] = y->gate.data; wn[nw++] = wbytes(y->gate);
                wp[nw] = y->up.data; wn[nw++] = wbytes(y->up);
            }
            if (s->warm_mask & 4 && nw < 3) { wp[nw] = y->down.data; wn[nw++] = wbytes(y->down); }
            CK(cudaEventRecord(s->ev[0], g_s));
            CK(cudaStreamWaitEvent(s->s2, s->ev[0], 0));
            CK(bench_l2_warm(wp, wn, nw, g_sms, s->s2));
            CK(cudaEventRecord(s->ev[1], s->s2));
        }
        if (!s->gemv_only && !s->folded)
            LK(loom_cuda_rms_norm(s->x, s->normw, 1, H, 1e-6f, s->h, &g_err, g_s));
        if (!s->folded) LK(loom_cuda_matmul_triple(s->h, 1, y->qkv, NULL, qkv_out, &g_err, g_s));
        if (!s->gemv_only && s->rka) {
            LK(loom_cuda_rope_kv_attention_at(s->q, s->k, s->v, s->pos, s->qnw, s->qnw, 1e-6f, &rp,
                                              y->kc, NULL, y->vc, NULL, &kv, &ap, s->qt, s->att,
                                              &g_err, g_s));
        } else if (!s->gemv_only) {
            LK(loom_cuda_rms_norm(s->q, s->qnw, nh, D, 1e-6f, s->q, &g_err, g_s));
            LK(loom_cuda_rms_norm(s->k, s->qnw, nkv, D, 1e-6f, s->k, &g_err, g_s));
            LK(loom_cuda_rope(s->q, s->k, s->pos, &rp, &g_err, g_s));
            LK(loom_cuda_kv_write(s->k, 1, s->ctx - 1, y->kc, NULL, &kv, &g_err, g_s));
            LK(loom_cuda_kv_write(s->v, 1, s->ctx - 1, y->vc, NULL, &kv, &g_err, g_s));
            LK(loom_cuda_attention(s->q, y->kc, NULL, y->vc, NULL, &kv, &ap, s->att, &g_err, g_s));
        }
        step_fill(s, 1);
        LK(loom_cuda_matmul_add(s->gemv_only ? s->q : s->att, 1, y->o, s->x, s->x, &g_err, g_s));
        if (y2) LK(loom_cuda_matmul_add(s->gemv_only ? s->q : s->att, 1, y2->o, s->x, s->x, &g_err, g_s));
        step_fill(s, 2);
        if (s->warm_mask) CK(cudaStreamWaitEvent(g_s, s->ev[1], 0));
        if (s->folded)
            LK(loom_cuda_matmul_pair_normed(s->x, &pn, 1, y->gate, y->up, LOOM_PAIR_SWIGLU, s->ff,
                                            NULL, &g_err, g_s));
        if (y2 && s->folded)
            LK(loom_cuda_matmul_pair_normed(s->x, &pn, 1, y2->gate, y2->up, LOOM_PAIR_SWIGLU, s->ff,
                                            NULL, &g_err, g_s));
        if (!s->gemv_only && !s->folded)
            LK(loom_cuda_rms_norm(s->x, s->normw, 1, H, 1e-6f, s->h, &g_err, g_s));
        if (!s->folded)
            LK(loom_cuda_matmul_pair(s->h, 1, y->gate, y->up, LOOM_PAIR_SWIGLU, s->ff, NULL, &g_err, g_s));
        step_fill(s, 3);
        LK(loom_cuda_matmul_add(s->ff, 1, y->down, s->x, s->x, &g_err, g_s));
        if (y2) LK(loom_cuda_matmul_add(s->ff, 1, y2->down, s->x, s->x, &g_err, g_s));
    }
}
static void step_fn(void *c, int i) {
    (void)i;
    CK(cudaGraphLaunch(((struct step_ctx *)c)->exec, g_s));
}
static int g_step_rka = 0; /* bench_step: full layers through rope_kv_attention_at, no GEMV row */
/* The layers' weights (random, DRAM-sized in all), caches and activations of a decode step;
 * *gemv_bytes_out / *kv_bytes_out: the weight and KV bytes of all layers. */
static struct step_ctx *step_new(int64_t H, int64_t F, int n_layers, int64_t ctx,
                                 loom_ggml_type down_t, double *gemv_bytes_out,
                                 double *kv_bytes_out) {
    struct step_ctx *s = calloc(1, sizeof *s);
    s->n_layers = n_layers;
    s->H = H; s->F = F; s->ctx = ctx;
    double gemv_bytes = 0, kv_bytes = 0;
    for (int l = 0; l < n_layers; l++) {
        struct layer *y = &s->L[l];
        y->qkv[0] = bench_weight(LOOM_GGML_Q4_K, 4096, H);
        y->qkv[1] = bench_weight(LOOM_GGML_Q4_K, 1024, H);
        y->qkv[2] = bench_weight(LOOM_GGML_Q6_K, 1024, H);
        y->o = bench_weight(LOOM_GGML_Q4_K, H, 4096);
        y->gate = bench_weight(LOOM_GGML_Q4_K, F, H);
        y->up = bench_weight(LOOM_GGML_Q4_K, F, H);
        y->down = bench_weight(down_t, H, F);
        y->kc = dev_weights(LOOM_GGML_F16, ctx * 8 * 128, 1);
        y->vc = dev_weights(LOOM_GGML_F16, ctx * 8 * 128, 1);
        gemv_bytes += wbytes(y->qkv[0]) + wbytes(y->qkv[1]) + wbytes(y->qkv[2]) + wbytes(y->o) +
                      wbytes(y->gate) + wbytes(y->up) + wbytes(y->down);
        kv_bytes += 2.0 * ctx * 8 * 128 * 2;
    }
    s->x = dev_floats(H, -1, 1); s->h = dev_floats(H, -1, 1);
    s->q = dev_floats(4096, -1, 1); s->k = dev_floats(1024, -1, 1); s->v = dev_floats(1024, -1, 1);
    s->att = dev_floats(4096, -1, 1); s->ff = dev_floats(F, -1, 1);
    s->normw = dev_floats(H, 0.9f, 1.1f); s->qnw = dev_floats(128, 0.9f, 1.1f);
    s->qt = dev_floats(4096, -1, 1);
    int32_t pos = (int32_t)(ctx - 1);
    CK(cudaMalloc((void **)&s->pos, 4));
    CK(cudaMemcpy(s->pos, &pos, 4, cudaMemcpyHostToDevice));
    LK(loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(32, 128, 1, 1), &g_err));
    *gemv_bytes_out = gemv_bytes;
    *kv_bytes_out = kv_bytes;
    return s;
}
static void step_free(struct step_ctx *s) {
    for (int l = 0; l < s->n_layers; l++) {
        struct layer *y = &s->L[l];
        for (int j = 0; j < 3; j++) cudaFree((void *)y->qkv[j].data);
        cudaFree((void *)y->o.data); cudaFree((void *)y->gate.data); cudaFree((void *)y->up.data);
        cudaFree((void *)y->down.data); cudaFree(y->kc); cudaFree(y->vc);
    }
    cudaFree(s->x); cudaFree(s->h); cudaFree(s->q); cudaFree(s->k); cudaFree(s->v);
    cudaFree(s->att); cudaFree(s->ff); cudaFree(s->normw); cudaFree(s->qnw); cudaFree(s->pos);
    cudaFree(s->qt);
    free(s);
}
/* The step's graph (as step_enqueue of its current mode) captured and instantiated into s->exec;
 * g (out): the graph, to destroy with the exec. */
static void step_capture(struct step_ctx *s, cudaGraph_t *g) {
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
    step_enqueue(s);
    CK(cudaStreamEndCapture(g_s, g));
    CK(cudaGraphInstantiate(&s->exec, *g, 0));
}
static void bench_step(const char *cfg, int64_t H, int64_t F, int n_layers, int64_t ctx,
                       loom_ggml_type down_t) {
    double gemv_bytes, kv_bytes;
    struct step_ctx *s = step_new(H, F, n_layers, ctx, down_t, &gemv_bytes, &kv_bytes);
    s->rka = g_step_rka;
    for (int mode = s->rka ? 1 : 0; mode < (g_norm_only ? 3 : 2); mode++) {
        s->gemv_only = mode == 0;
        s->folded = mode == 2;
        step_enqueue(s); /* eager once: warms up, allocates nothing later */
        CK(cudaStreamSynchronize(g_s));
        cudaGraph_t g;
        step_capture(s, &g);
        double us = time_us(step_fn, s, g_quick ? 5 : 20);
        char name[64], shape[64];
        snprintf(name, sizeof name, "decode graph %s %s", cfg,
                 mode == 0 ? "GEMVs" : mode == 1 ? "full layer" : "full, norms folded");
        snprintf(shape, sizeof shape, "%d layers, down %s, ctx %lld", n_layers,
                 loom_ggml_type_get(down_t)->name, (long long)ctx);
        row(name, shape, us / n_layers, (mode == 0 ? gemv_bytes : gemv_bytes + kv_bytes) / n_layers);
        cudaGraphExecDestroy(s->exec);
        cudaGraphDestroy(g);
    }
    step_free(s);
}

static void set_env(const char *k, const char *v) {
    setenv(k, v, 1);
    loom_cuda_reload_switches();
}

/* ---- the decode GEMVs' timeline (--gemv-trace) -------------------------------------------- */
/* The 4B decode layer's matmuls as the executor runs them (bench_step's GEMV layers with the
 * norms folded: triple normed (Q4_K Q/K + Q6_K V, one launch), attention output + add, gate/up
 * pair normed + SwiGLU, down + add), 8 layers a graph (32 launches: one trace slot each), with
 * the Q4_K and then the Q6_K down. Cases GT_CASES (comma-separated, default "0": see
 * gt_case_env; same weights): every case's graph timed round robin (3 rounds, us a layer); then
 * per case the graph untraced and traced alternately (3 x), and one traced replay's records
 * (loom_cuda_gemv_trace, layout in cuda_kernels.h), layers 1..7: per matmul its blocks, SMs,
 * waves (blocks / (4 x SMs)), the boundary (its first PDL release - the previous launch's last
 * block end) and span (first release -> last end), and for each stamp the median and max over
 * blocks of its time from the kernel's first block start and from the block's own PDL release
 * (clock64 at the records' clock rate, anchored at the release's %globaltimer), each the median
 * over the 7 layers. GT_TWICE=1: 4 layers a graph with each matmul launched twice in a row (the
 * second on another layer's weights, its code warm in the instruction caches), reported as 8
 * launches a layer over layers 1..3. */
enum { GT_SLOTS = 32, GT_BLOCKS = 1024, GT_W = 16, GT_LAYERS = 8, GT_NST = 11 };
/* nm: launches a layer (4; 8 with GT_TWICE), names[nm]; the slots hold GT_SLOTS / nm layers */
static void gt_report(const uint64_t *tr, int nm, const char *const *names, double ghz) {
    static const char *st[GT_NST] = {"start", "release", "norm", "staged0", "math0", "loop w0",
                                     "loop last", "warp sum", "cluster", "end", "/sb w0"};
    for (int m = 0; m < nm; m++) {
        double agg[GT_NST][4][GT_LAYERS], bnd[GT_LAYERS], span[GT_LAYERS], q6d[2][GT_LAYERS];
        int nl = 0, nblk = 0, nsm = 0, S = 0, nq6 = 0, sbw0 = 0, nsb = 0;
        for (int l = 1; l < GT_SLOTS / nm; l++) {
            const int k = nm * l + m;
            const uint64_t *R = tr + (size_t)k * GT_BLOCKS * GT_W;
            const uint64_t *P = tr + (size_t)(k - 1) * GT_BLOCKS * GT_W;
            uint64_t t0 = UINT64_MAX, rel0 = UINT64_MAX, end1 = 0, pend = 0;
            for (int b = 0; b < GT_BLOCKS; b++) {
                const uint64_t *r = R + (size_t)b * GT_W, *p = P + (size_t)b * GT_W;
                if (p[11] > pend) pend = p[11];
                if (!r[0] || !r[11]) continue;
                if (r[0] < t0) t0 = r[0];
                if (r[1] && r[1] < rel0) rel0 = r[1];
                if (r[11] > end1) end1 = r[11];
            }
            static double v[GT_NST][2][GT_BLOCKS], w6[2][GT_BLOCKS];
            int n = 0, n6 = 0;
            unsigned char seen[1024] = {0};
            int sms = 0;
            for (int b = 0; b < GT_BLOCKS; b++) {
                const uint64_t *r = R + (size_t)b * GT_W;
                if (!r[0] || !r[11]) continue;
                const unsigned sm = (unsigned)(r[12] & 0x3ffu);
                if (!seen[sm]) { seen[sm] = 1; sms++; }
                const int kind = (int)((r[12] >> 24) & 0xff);
                if (kind == 4) { /* the mixed triple's Q6_K tiles: start and end only */
                    w6[0][n6] = (double)(r[11] - r[0]) / 1000.0;
                    w6[1][n6] = (double)(r[11] - t0) / 1000.0;
                    n6++;
                    continue;
                }
                S = (int)((r[12] >> 16) & 0xff);
                sbw0 = (int)((r[12] >> 32) & 0xffff);
                nsb = (int)((r[12] >> 48) & 0xffff);
                uint64_t last = r[7];
                for (int i = 13; i < 16; i++) if (r[i] > last) last = r[i];
                const uint64_t c[10] = {r[2], r[3], r[4], r[5], r[6], r[7], last, r[8], r[9], r[10]};
                for (int i = 0; i < 10; i++) {
                    /* ns after the release (start: before it, negative) */
                    const double d = ((double)c[i] - (double)r[3]) / ghz;
                    const double abs_ns = i == 0 ? (double)r[0] : (double)r[1] + d;
                    v[i][0][n] = (abs_ns - (double)t0) / 1000.0;
                    v[i][1][n] = i == 0 ? -((double)r[1] - (double)r[0]) / 1000.0 : d / 1000.0;
                }
                const double per = sbw0 > 0 ? ((double)r[7] - (double)r[4]) / ghz / 1000.0 / sbw0 : 0;
                v[10][0][n] = per;
                v[10][1][n] = per;
                n++;
            }
            for (int i = 0; i < GT_NST; i++)
                for (int f = 0; f < 2; f++) {
                    double mx = -1e30;
                    for (int j = 0; j < n; j++) if (v[i][f][j] > mx) mx = v[i][f][j];
                    agg[i][2 * f][nl] = med_d(v[i][f], n);
                    agg[i][2 * f + 1][nl] = mx;
                }
            q6d[0][nl] = med_d(w6[0], n6);
            double mx6 = 0;
            for (int j = 0; j < n6; j++) if (w6[1][j] > mx6) mx6 = w6[1][j];
            q6d[1][nl] = mx6;
            bnd[nl] = ((double)rel0 - (double)pend) / 1000.0;
            span[nl] = ((double)end1 - (double)rel0) / 1000.0;
            if (l == 1) { nblk = n + n6; nsm = sms; nq6 = n6; }
            nl++;
        }
        printf("  %-22s %4d blocks%s (%d Q6_K) on %3d SMs, %.2f waves, S %d, %d super-blocks a row, "
               "warp 0 %d | boundary %5.2f us, span %5.2f us\n",
               names[m], nblk, nblk >= GT_BLOCKS ? " (the first traced)" : "", nq6, nsm,
               nsm ? nblk / (4.0 * nsm) : 0.0, S, nsb, sbw0, med_d(bnd, nl), med_d(span, nl));
        printf("    %-10s | from kernel start: median   max | from own release: median   max (us)\n", "stamp");
        for (int i = 0; i < GT_NST; i++) {
            double a[4];
            for (int f = 0; f < 4; f++) {
                double t[GT_LAYERS];
                for (int j = 0; j < nl; j++) t[j] = agg[i][f][j];
                a[f] = med_d(t, nl);
            }
            printf("    %-10s | %24.2f %6.2f | %23.2f %6.2f\n", st[i], a[0], a[1], a[2], a[3]);
        }
        if (nq6) printf("    Q6_K tiles: duration median %.2f us, last end %.2f us from kernel start\n",
                        med_d(q6d[0], nl), med_d(q6d[1], nl));
    }
}
/* One case of GT_CASES, "S" or "SwN" (up to the next comma): LOOM_GEMV_MMA_SPLIT S (0: the
 * shape's rule) and LOOM_GEMV_PAIR_WARPS N (without w: the shape's rule; the traced pair always
 * runs 4 warps). */
static void gt_case_env(const char *c) {
    const int S = atoi(c);
    char v[16];
    snprintf(v, sizeof v, "%d", S);
    if (S > 0) setenv("LOOM_GEMV_MMA_SPLIT", v, 1);
    else unsetenv("LOOM_GEMV_MMA_SPLIT");
    const char *w = c;
    while (*w && *w != ',' && *w != 'w') w++;
    if (*w == 'w') {
        snprintf(v, sizeof v, "%d", atoi(w + 1));
        setenv("LOOM_GEMV_PAIR_WARPS", v, 1);
    } else {
        unsetenv("LOOM_GEMV_PAIR_WARPS");
    }
    loom_cuda_reload_switches();
}
static void gemv_trace_case(loom_ggml_type down_t) {
    enum { GT_CASES = 12 };
    double gb, kb;
    struct step_ctx *s = step_new(2560, 9728, GT_LAYERS, 16, down_t, &gb, &kb);
    s->gemv_only = 1;
    s->folded = 1;
    static const char *names[2][8] = {
        {"triple normed", "attn out + add", "pair normed SwiGLU", "down Q4_K + add"},
        {"triple normed", "attn out + add", "pair normed SwiGLU", "down Q6_K + add"}};
    static const char *names2[2][8] = {
        {"triple normed", "triple again", "attn out + add", "attn out again", "pair normed SwiGLU",
         "pair again", "down Q4_K + add", "down again"},
        {"triple normed", "triple again", "attn out + add", "attn out again", "pair normed SwiGLU",
         "pair again", "down Q6_K + add", "down again"}};
    const int twice = getenv("GT_TWICE") && atoi(getenv("GT_TWICE")) == 1;
    if (twice) { /* GT_LAYERS / 2 layers a graph, each matmul twice: 8 launches a layer */
        s->twice = 1;
        s->n_layers = GT_LAYERS / 2;
    }
    const int nlay = s->n_layers, nm = twice ? 8 : 4;
    const char *dn = loom_ggml_type_get(down_t)->name;
    const char *cl = getenv("GT_CASES") ? getenv("GT_CASES") : "0";
    const char *cs[GT_CASES];
    int nc = 0;
    for (const char *p = cl; *p && nc < GT_CASES; p++)
        if (p == cl || p[-1] == ',') cs[nc++] = p;
    /* every case's untraced graph, timed round robin (3 rounds): the levers on the same weights */
    cudaGraph_t gu[GT_CASES];
    cudaGraphExec_t eu[GT_CASES];
    for (int c = 0; c < nc; c++) {
        gt_case_env(cs[c]);
        step_enqueue(s); /* eager once: warms up */
        CK(cudaStreamSynchronize(g_s));
        step_capture(s, &gu[c]);
        eu[c] = s->exec;
    }
    double rr[GT_CASES][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < nc; c++) {
            s->exec = eu[c];
            rr[c][r] = time_us(step_fn, s, 20) / nlay;
        }
    for (int c = 0; c < nc; c++) {
        int len = 0;
        while (cs[c][len] && cs[c][len] != ',') len++;
        printf("gemv-trace 4B, down %s, case %.*s: graph us a layer %.2f %.2f %.2f", dn,
               len, cs[c], rr[c][0], rr[c][1], rr[c][2]);
        printf(" median %.2f\n", med_d(rr[c], 3));
    }
    for (int c = 0; c < nc; c++) {
        gt_case_env(cs[c]);
        cudaGraph_t gt;
        LK(loom_cuda_gemv_trace(1, &g_err));
        step_capture(s, &gt);
        LK(loom_cuda_gemv_trace(0, &g_err));
        cudaGraphExec_t et = s->exec;
        double us[2][3];
        for (int r = 0; r < 3; r++)
            for (int t = 0; t < 2; t++) {
                s->exec = t ? et : eu[c];
                us[t][r] = time_us(step_fn, s, 20) / nlay;
            }
        CK(cudaGraphLaunch(et, g_s));
        CK(cudaStreamSynchronize(g_s));
        const size_t nw = (size_t)GT_SLOTS * GT_BLOCKS * GT_W;
        uint64_t *tr = calloc(nw, sizeof *tr);
        LK(loom_cuda_gemv_trace_read(tr, nw, &g_err));
        double cyc = 0, ns = 0;
        for (size_t b = 0; b < (size_t)GT_SLOTS * GT_BLOCKS; b++) {
            const uint64_t *r = tr + b * GT_W;
            if (!r[0] || !r[11] || r[11] <= r[0]) continue;
            cyc += (double)(r[10] - r[2]);
            ns += (double)(r[11] - r[0]);
        }
        const double ghz = ns > 0 ? cyc / ns : 1.98;
        int len = 0;
        while (cs[c][len] && cs[c][len] != ',') len++;
        printf("gemv-trace 4B, down %s, case %.*s: graph us a layer untraced %.2f %.2f %.2f, traced "
               "%.2f %.2f %.2f", dn, len, cs[c], us[0][0], us[0][1], us[0][2], us[1][0], us[1][1],
               us[1][2]);
        const double mu = med_d(us[0], 3), mt = med_d(us[1], 3);
        printf(" (median %.2f vs %.2f, %+.1f%%) | clock %.2f GHz\n", mu, mt, 100.0 * (mt / mu - 1.0), ghz);
        gt_report(tr, nm, (twice ? names2 : names)[down_t == LOOM_GGML_Q6_K], ghz);
        fflush(stdout);
        free(tr);
        cudaGraphExecDestroy(et);
        cudaGraphDestroy(gt);
    }
    for (int c = 0; c < nc; c++) {
        cudaGraphExecDestroy(eu[c]);
        cudaGraphDestroy(gu[c]);
    }
    unsetenv("LOOM_GEMV_MMA_SPLIT");
    unsetenv("LOOM_GEMV_PAIR_WARPS");
    loom_cuda_reload_switches();
    s->n_layers = GT_LAYERS;
    step_free(s);
}
/* ---- cold instruction caches (--icache) ---------------------------------------------------- */
/* What the decode layer's matmuls pay for starting with cold instruction caches. The layer graph
 * of --gemv-trace (folded norms, GEMVs only, 8 layers, DRAM-sized weights; Q4_K then Q6_K down)
 * with a filler kernel (icache_fill.cu) before the matmuls of a mask: the big filler (256 KB of
 * straight-line code run on every SM) leaves each matmul's code out of the instruction caches,
 * the small one (the same FFMAs in a 1 KB loop) leaves them as the previous kernel left them.
 * Neither filler lets the next kernel start before it ends (no PDL trigger). Per mask, four graphs
 * timed round robin (5 rounds, medians, us a layer): layer + big, layer + small, big alone, small
 * alone; cold cost = (layer+big - layer+small) - (big - small): the matmuls' extra time when their
 * code is cold, against their time when it is wherever the previous matmul left it. */
static int g_icache = 0;
static void icache_case(loom_ggml_type down_t) {
    enum { NM = 5, NG = 4, ROUNDS = 5 };
    static const int masks[NM] = {0xF, 1, 2, 4, 8};
    static const char *mname[NM] = {"all four", "triple normed", "attn out + add",
                                    "pair normed SwiGLU", "down + add"};
    double gb, kb;
    struct step_ctx *s = step_new(2560, 9728, GT_LAYERS, 16, down_t, &gb, &kb);
    s->gemv_only = 1;
    s->folded = 1;
    CK(cudaMalloc((void **)&s->fill_out, 4));
    cudaGraph_t g[NM][NG], g0;
    cudaGraphExec_t e[NM][NG], e0;
    step_enqueue(s);
    CK(cudaStreamSynchronize(g_s));
    step_capture(s, &g0);
    e0 = s->exec;
    for (int m = 0; m < NM; m++)
        for (int k = 0; k < NG; k++) { /* k: 0 layer+big, 1 layer+small, 2 big, 3 small */
            s->fill = k % 2 ? 1 : 2;
            s->fill_mask = masks[m];
            s->fill_only = k >= 2;
            step_enqueue(s);
            CK(cudaStreamSynchronize(g_s));
            step_capture(s, &g[m][k]);
            e[m][k] = s->exec;
        }
    s->fill = 0;
    double t[NM][NG][ROUNDS], t0[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        s->exec = e0;
        t0[r] = time_us(step_fn, s, 5) / GT_LAYERS;
        for (int m = 0; m < NM; m++)
            for (int k = 0; k < NG; k++) {
                s->exec = e[m][k];
                t[m][k][r] = time_us(step_fn, s, 5) / GT_LAYERS;
            }
    }
    const char *dn = loom_ggml_type_get(down_t)->name;
    printf("icache 4B, down %s: layer graph alone %.2f us a layer (median of %d rounds)\n", dn,
           med_d(t0, ROUNDS), ROUNDS);
    for (int m = 0; m < NM; m++) {
        double md[NG];
        for (int k = 0; k < NG; k++) md[k] = med_d(t[m][k], ROUNDS);
        printf("icache 4B, down %s, filler before %-18s: layer+big %7.2f  layer+small %7.2f  big %7.2f"
               "  small %7.2f | cold cost %+.2f us a layer\n",
               dn, mname[m], md[0], md[1], md[2], md[3], (md[0] - md[1]) - (md[2] - md[3]));
    }
    fflush(stdout);
    for (int m = 0; m < NM; m++)
        for (int k = 0; k < NG; k++) {
            cudaGraphExecDestroy(e[m][k]);
            cudaGraphDestroy(g[m][k]);
        }
    cudaGraphExecDestroy(e0);
    cudaGraphDestroy(g0);
    cudaFree(s->fill_out);
    step_free(s);
}
static void icache_all(void) {
    icache_case(LOOM_GGML_Q4_K);
    icache_case(LOOM_GGML_Q6_K);
}
/* ---- the next matmuls' weights into L2 during attention (--l2warm) ------------------------- */
/* The 4B decode step's layers as the executor runs them (norms folded, the attention prologue
 * in rope_kv_attention_at, n_ctx 4096; 8 layers a graph, DRAM-sized weights, Q4_K down) at
 * attention positions 575 and 3583, each graph without and with bench_l2_warm on a side stream
 * (forked after the triple, joined before the pair) asking L2 for the layer's weights of a mask:
 * 2 gate + up, 6 gate + up + down, 3 attention output + gate + up; 8 the fork, the kernel and the
 * join without bytes (the control). Graphs timed round robin (5 rounds), medians, us a layer. */
static int g_l2warm = 0;
static void l2warm_all(void) {
    enum { NV = 5, ROUNDS = 5, NP = 2 };
    static const int masks[NV] = {0, 8, 2, 6, 3};
    static const char *vname[NV] = {"none", "fork/join", "gate+up", "gate+up+down", "O+gate+up"};
    static const int32_t at[NP] = {575, 3583};
    double gb, kb;
    struct step_ctx *s = step_new(2560, 9728, GT_LAYERS, 4096, LOOM_GGML_Q4_K, &gb, &kb);
    s->rka = 1;
    s->folded = 1;
    CK(cudaStreamCreate(&s->s2));
    CK(cudaEventCreate(&s->ev[0]));
    CK(cudaEventCreate(&s->ev[1]));
    for (int p = 0; p < NP; p++) {
        CK(cudaMemcpy(s->pos, &at[p], 4, cudaMemcpyHostToDevice));
        cudaGraph_t g[NV];
        cudaGraphExec_t e[NV];
        for (int v = 0; v < NV; v++) {
            s->warm_mask = masks[v];
            step_enqueue(s);
            CK(cudaStreamSynchronize(g_s));
            CK(cudaStreamSynchronize(s->s2));
            step_capture(s, &g[v]);
            e[v] = s->exec;
        }
        double t[NV][ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            for (int v = 0; v < NV; v++) {
                s->exec = e[v];
                t[v][r] = time_us(step_fn, s, 10) / GT_LAYERS;
            }
        for (int v = 0; v < NV; v++) {
            printf("l2warm 4B, attention at %d, warm %-13s: us a layer", at[p], vname[v]);
            for (int r = 0; r < ROUNDS; r++) printf(" %.2f", t[v][r]);
            printf(" | median %.2f (%+.2f)\n", med_d(t[v], ROUNDS), med_d(t[v], ROUNDS) - med_d(t[0], ROUNDS));
            cudaGraphExecDestroy(e[v]);
            cudaGraphDestroy(g[v]);
        }
        fflush(stdout);
    }
    s->warm_mask = 0;
    cudaEventDestroy(s->ev[0]);
    cudaEventDestroy(s->ev[1]);
    cudaStreamDestroy(s->s2);
    step_free(s);
}
static int g_gemv_trace = 0;
static void gemv_trace_all(void) {
    g_rows = 1; /* (the traced kernels read rows back to back) */
    gemv_trace_case(LOOM_GGML_Q4_K);
    gemv_trace_case(LOOM_GGML_Q6_K);
}

/* The Q6_K matmuls of a Q4_K_M model (gemv_mma_q6k.cu), each beside LOOM_GEMV_MMA_Q6K=0. */
static void bench_q6k(void) {
    static const struct { const char *name; int64_t H, F; } c[2] = {{"4B", 2560, 9728}, {"8B", 4096, 14336}};
    const loom_ggml_type q6 = LOOM_GGML_Q6_K;
    const loom_ggml_type qkv[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    char nm[64];
    g_ab_q6k = 1;
    for (int ci = 0; ci < 2; ci++) {
        const int64_t H = c[ci].H, F = c[ci].F;
        snprintf(nm, sizeof nm, "%s gemv Q6_K", c[ci].name);
        bench_mm(nm, MM_PLAIN, 1, 1, &q6, (const int64_t[]){F}, H);
        snprintf(nm, sizeof nm, "%s ffn down Q6_K + add", c[ci].name);
        bench_mm(nm, MM_ADD, 1, 1, &q6, (const int64_t[]){H}, F);
        snprintf(nm, sizeof nm, "%s triple QKV (V Q6_K)", c[ci].name);
        bench_mm(nm, MM_TRIPLE, 1, 3, qkv, (const int64_t[]){4096, 1024, 1024}, H);
    }
    bench_mm("4B lm head Q6_K", MM_PLAIN, 1, 1, &q6, (const int64_t[]){151936}, 2560);
    bench_mm("4B down Q6_K gemm N=32", MM_GEMM, 32, 1, &q6, (const int64_t[]){2560}, 9728);
    g_calls = 4;
    bench_mm("4B down Q6_K gemm N=512", MM_GEMM, 512, 1, &q6, (const int64_t[]){2560}, 9728);
    g_calls = 0;
    g_ab_q6k = 0;
    static const char *sp[4] = {"1", "2", "4", "8"}; /* cluster split-K forced (default: by shape) */
    for (int i = 0; i < 4; i++) {
        set_env("LOOM_GEMV_MMA_SPLIT", sp[i]);
        snprintf(nm, sizeof nm, "4B ffn down Q6_K + add split %s", sp[i]);
        bench_mm(nm, MM_ADD, 1, 1, &q6, (const int64_t[]){2560}, 9728);
    }
    unsetenv("LOOM_GEMV_MMA_SPLIT");
    loom_cuda_reload_switches();
    /* a decode step's layers with Q6_K down projections (and the triple's Q6_K V) */
    bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q6_K);
    set_env("LOOM_GEMV_MMA_Q6K", "0");
    bench_step("4B (Q6K=0)", 2560, 9728, 8, 4096, LOOM_GGML_Q6_K);
    set_env("LOOM_GEMV_MMA_Q6K", "1");
}

/* --q6k-down: the 4B ffn down + add row and the 4B down GEMM N = 32 alone, 20 launches a
 * repetition (ncu targets: --kernel-name-base mangled -k regex:q6kILi1E, the GEMV, or q6kILi8E). */
static int g_q6k_down = 0;
static void bench_q6k_down(void) {
    const loom_ggml_type q6 = LOOM_GGML_Q6_K;
    g_calls = 20;
    bench_mm("4B ffn down Q6_K + add", MM_ADD, 1, 1, &q6, (const int64_t[]){2560}, 9728);
    bench_mm("4B down Q6_K gemm N=32", MM_GEMM, 32, 1, &q6, (const int64_t[]){2560}, 9728);
    g_calls = 0;
}

/* --q6k-wide: the Q6_K GEMM on the INT8 body, LOOM_GEMM_WIDE=0 against the wide GEMM forced on
 * from 16 tokens, twice in turn, same weights: the 4B ffn down + add (2560 x 9728) at N = 1 (the
 * GEMV: unchanged), 32, 64, 128, 512; the 8B down + add (4096 x 14336) and a 4B V shape normed
 * (1024 x 2560) at 32, 64, 128, 512. */
static int g_q6k_wide = 0;
static void bench_q6k_wide(void) {
    const loom_ggml_type q6 = LOOM_GGML_Q6_K;
    static const int64_t n4[5] = {1, 32, 64, 128, 512}, n8[4] = {32, 64, 128, 512};
    g_ab_wide = 1;
    g_ab_q6w = 1;
    for (int i = 0; i < 5; i++) {
        g_calls = n4[i] >= 128 ? 4 : 20;
        bench_mm("4B down Q6_K + add", MM_ADD, n4[i], 1, &q6, (const int64_t[]){2560}, 9728);
    }
    for (int i = 0; i < 4; i++) {
        g_calls = n8[i] >= 128 ? 4 : 20;
        bench_mm("8B down Q6_K + add", MM_ADD, n8[i], 1, &q6, (const int64_t[]){4096}, 14336);
    }
    g_ab_wide = 2;
    for (int i = 0; i < 4; i++) {
        g_calls = n8[i] >= 128 ? 4 : 20;
        bench_mm("4B V Q6_K", MM_GEMM, n8[i], 1, &q6, (const int64_t[]){1024}, 2560);
    }
    g_ab_q6w = 0;
    g_ab_wide = 0;
    g_calls = 0;
}

/* --triple-v: the prefill GEMM a Q4_K_M triple's Q6_K V runs (the f16 body at every N:
 * LOOM_GEMV_MMA_Q6K_V=1, the 8-token GEMM, gemv_mma_q6k.cu q6k_body) against the default INT8
 * body (the wide form-7 GEMM from 64 tokens; each row its own weights of that shape), plain as
 * the executor's prefill steps launch it after their norm, 4B V shape (1024 x 2560), N = 64,
 * 128, 512, twice. */
static int g_triple_v = 0;
static void bench_triple_v(void) {
    const loom_ggml_type q6 = LOOM_GGML_Q6_K;
    static const int64_t ns[3] = {64, 128, 512};
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < 3; i++) {
            g_calls = ns[i] >= 128 ? 4 : 20;
            for (int v = 1; v <= 2; v++) {
                setenv("LOOM_GEMV_MMA_Q6K_V", v == 1 ? "1" : "2", 1);
                loom_cuda_reload_switches();
                bench_mm(v == 1 ? "4B V Q6_K f16 (triple's)" : "4B V Q6_K INT8 (default)", MM_GEMM,
                         ns[i], 1, &q6, (const int64_t[]){1024}, 2560);
            }
        }
    unsetenv("LOOM_GEMV_MMA_Q6K_V");
    loom_cuda_reload_switches();
    g_calls = 0;
}

/* --q4k-wide: the Q4_K prefill GEMMs (f16 body) with LOOM_GEMM_WIDE=0 and =16 in turn, twice,
 * same weights (bench_mm's g_ab_wide): the 4B GEMV (N = 1: must not change); 4B at N = 512 the
 * ffn gate-like GEMM (F x H), attention output + add (H x 4096), ffn down + add (H x F, Q4_K),
 * the gate/up pair + SwiGLU normed and Q+K (5120 x H) normed; at N = 128 the first three, at
 * N = 64, 32 and 16 the GEMM and the pair; 8B at N = 512 all five. */
static int g_q4k_wide = 0;
static void bench_q4k_wide(void) {
    const loom_ggml_type q4[2] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K};
    static const struct { const char *name; int64_t H, F, n; int kinds; } rs[6] = {
        {"4B", 2560, 9728, 512, 31}, {"4B", 2560, 9728, 128, 7}, {"4B", 2560, 9728, 64, 9},
        {"4B", 2560, 9728, 32, 9}, {"4B", 2560, 9728, 16, 9}, {"8B", 4096, 14336, 512, 31}};
    char nm[80];
    g_ab_wide = 1;
    g_calls = 50;
    bench_mm("4B gemv Q4_K", MM_PLAIN, 1, 1, q4, (const int64_t[]){9728}, 2560);
    for (int ri = 0; ri < 6; ri++) {
        const int64_t H = rs[ri].H, F = rs[ri].F, n = rs[ri].n;
        const char *c = rs[ri].name;
        g_calls = n >= 128 ? 4 : 20;
        g_ab_wide = 1;
        snprintf(nm, sizeof nm, "%s prefill gemm", c);
        if (rs[ri].kinds & 1) bench_mm(nm, MM_GEMM, n, 1, q4, (const int64_t[]){F}, H);
        snprintf(nm, sizeof nm, "%s attn out + add", c);
        if (rs[ri].kinds & 2) bench_mm(nm, MM_ADD, n, 1, q4, (const int64_t[]){H}, 4096);
        snprintf(nm, sizeof nm, "%s down Q4_K + add", c);
        if (rs[ri].kinds & 4) bench_mm(nm, MM_ADD, n, 1, q4, (const int64_t[]){H}, F);
        g_ab_wide = 2;
        snprintf(nm, sizeof nm, "%s pair SwiGLU N=%lld", c, (long long)n);
        if (rs[ri].kinds & 8) bench_mm(nm, MM_PAIR, n, 2, q4, (const int64_t[]){F, F}, H);
        snprintf(nm, sizeof nm, "%s Q+K", c);
        if (rs[ri].kinds & 16) bench_mm(nm, MM_GEMM, n, 1, q4, (const int64_t[]){5120}, H);
    }
    g_ab_wide = 0;
    g_calls = 0;
}

/* --q4w: the INT8 Q4_K body's GEMMs (bench_mm's g_ab_q4v: the 8-token GEMM at N <= 64, the
 * wide GEMM staging x in the block and reading the limb pre-pass, the default rule), same
 * weights, for a layer's Q4_K shapes: Q+K (the triple's Q4_K part) normed, attention output +
 * add, the gate/up pair + SwiGLU normed, ffn down Q4_K + add. 4B (hidden 2560, ffn 9728, Q+K
 * 5120 rows, attention 4096 wide) at N = 16, 32, 48, 64, 128, 512, then 8B (4096, 14336, 5120,
 * 4096) at N = 16, 32, 48, 64 (the wide threshold's range). */
static int g_q4w = 0;
static void bench_q4w_model(const char *c, int64_t H, int64_t F, int64_t QK, int64_t A,
                            const int64_t *ns, int nn) {
    const loom_ggml_type q4[2] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K};
    char nm[80];
    for (int i = 0; i < nn; i++) {
        const int64_t n = ns[i];
        g_calls = n >= 128 ? 4 : 20;
        g_ab_q4v = 2;
        snprintf(nm, sizeof nm, "%s Q+K", c);
        bench_mm(nm, MM_GEMM, n, 1, q4, (const int64_t[]){QK}, H);
        g_ab_q4v = 1;
        snprintf(nm, sizeof nm, "%s attn out + add", c);
        bench_mm(nm, MM_ADD, n, 1, q4, (const int64_t[]){H}, A);
        g_ab_q4v = 2;
        snprintf(nm, sizeof nm, "%s pair SwiGLU N=%lld", c, (long long)n);
        bench_mm(nm, MM_PAIR, n, 2, q4, (const int64_t[]){F, F}, H);
        g_ab_q4v = 1;
        snprintf(nm, sizeof nm, "%s down Q4_K + add", c);
        bench_mm(nm, MM_ADD, n, 1, q4, (const int64_t[]){H}, F);
    }
    g_ab_q4v = 0;
    g_calls = 0;
}
static void bench_q4w(void) {
    static const int64_t ns4[6] = {16, 32, 48, 64, 128, 512}, ns8[4] = {16, 32, 48, 64};
    bench_q4w_model("4B", 2560, 9728, 5120, 4096, ns4, 6);
    bench_q4w_model("8B", 4096, 14336, 5120, 4096, ns8, 4);
}

/* --norm: the RMSNorm folded into the next matmul (loom_cuda_*_normed). Standalone: each of
 * the 4B triple, SwiGLU pair and lm head plain, after a separate rms_norm launch, and with the
 * norm folded in; then the 4B decode-step graph with its norm launches and folded (the same
 * layers), with the tensor-core kernels and with LOOM_GEMV_MMA=0. */
static void bench_norm_fold(void) {
    const loom_ggml_type q4[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    g_norm_ab = 1;
    bench_mm("4B triple QKV", MM_TRIPLE, 1, 3, q4, (const int64_t[]){4096, 1024, 1024}, 2560);
    bench_mm("4B gate/up pair SwiGLU", MM_PAIR, 1, 2, q4, (const int64_t[]){9728, 9728}, 2560);
    bench_mm("4B lm head Q6_K", MM_PLAIN, 1, 1, &q4[2], (const int64_t[]){151936}, 2560);
    bench_mm("4B prefill pair N=32", MM_PAIR, 32, 2, q4, (const int64_t[]){9728, 9728}, 2560);
    g_norm_ab = 0;
    bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q4_K);
    bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q4_K); /* repeat: the run-to-run spread */
    set_env("LOOM_GEMV_MMA", "0");
    bench_step("4B (MMA=0)", 2560, 9728, 8, 4096, LOOM_GGML_Q4_K);
    set_env("LOOM_GEMV_MMA", "1");
}

/* --attn-step: the decode-layer graph (bench_step: attention among its real neighbours) with
 * decode attention v6 and v5 (LOOM_ATTN_V6=0), at 4K and at 640 positions, same run. */
static void attn_step_ab(void) {
    static const int64_t ctx[2] = {4096, 640};
    for (int c = 0; c < 2; c++) {
        set_env("LOOM_ATTN_V6", "1");
        printf("(attention v6)\n");
        bench_step("4B", 2560, 9728, 4, ctx[c], LOOM_GGML_Q4_K);
        set_env("LOOM_ATTN_V6", "0");
        printf("(attention v5)\n");
        bench_step("4B", 2560, 9728, 4, ctx[c], LOOM_GGML_Q4_K);
        set_env("LOOM_ATTN_V6", "1");
    }
}

/* --fused: the attention prologue folded into decode attention v6 (rope_kv_attention_at) against
 * its two launches (LOOM_ATTN_FUSED=0: rope_kv_write + attention_at), same run: alone (graph
 * rows of bench_attn_at, with rope_kv_write alone and attention_at alone beside them) at 640 and
 * 4K positions, F16 and INT8, and in the decode-layer graph (4 layers, rope_kv_attention_at in
 * place of the prologue launches) at 640 and 4K positions, A B A B. */
static void fused_ab(void) {
    static const int64_t Ls[2] = {640, 4096};
    for (int li = 0; li < 2; li++)
        for (int ti = 0; ti < 2; ti++) {
            const loom_kv_type kt = ti ? LOOM_KV_INT8 : LOOM_KV_F16;
            if (ti && Ls[li] != 4096) continue;
            bench_attn_at("attention_at alone", kt, Ls[li], 1, 1);
            bench_attn_at("rope_kv_write alone", kt, Ls[li], 1, 3);
            set_env("LOOM_ATTN_FUSED", "0");
            bench_attn_at("prologue+attn 2 launches", kt, Ls[li], 1, 2);
            set_env("LOOM_ATTN_FUSED", "1");
            bench_attn_at("prologue+attn fused", kt, Ls[li], 1, 2);
        }
    g_step_rka = 1;
    for (int li = 0; li < 2; li++)
        for (int rep = 0; rep < 2; rep++) {
            set_env("LOOM_ATTN_FUSED", "0");
            printf("(rope_kv_write + attention_at, LOOM_ATTN_FUSED=0)\n");
            bench_step("4B", 2560, 9728, 4, Ls[li], LOOM_GGML_Q4_K);
            set_env("LOOM_ATTN_FUSED", "1");
            printf("(rope_kv_attention_at fused)\n");
            bench_step("4B", 2560, 9728, 4, Ls[li], LOOM_GGML_Q4_K);
        }
    g_step_rka = 0;
}

/* --attn-s7: decode attention v6 with its F16 tiles copied by TMA (the default) against
 * cp.async (LOOM_ATTN_TMA=0) in the same run: graph rows of the fused prologue + attention
 * (640, 4K F16, 4K INT8) and of attention_at (4K F16), then the decode-layer graph (4 layers,
 * rope_kv_attention_at) at 640 and 4K positions, both in turn, twice. */
static void attn_s7_ab(void) {
    static const struct { const char *name, *tma; } var[2] = {{"cp.async", "0"}, {"TMA", "1"}};
    enum { NV = sizeof var / sizeof var[0] };
    static const int64_t Ls[2] = {640, 4096};
    char nm[80];
    for (int v = 0; v < NV; v++) {
        set_env("LOOM_ATTN_TMA", var[v].tma);
        snprintf(nm, sizeof nm, "fused %s", var[v].name);
        bench_attn_at(nm, LOOM_KV_F16, 640, 1, 2);
        bench_attn_at(nm, LOOM_KV_F16, 4096, 1, 2);
        bench_attn_at(nm, LOOM_KV_INT8, 4096, 1, 2);
        snprintf(nm, sizeof nm, "attn_at %s", var[v].name);
        bench_attn_at(nm, LOOM_KV_F16, 4096, 1, 1);
    }
    g_step_rka = 1;
    for (int li = 0; li < 2; li++)
        for (int rep = 0; rep < 2; rep++)
            for (int v = 0; v < NV; v++) {
                set_env("LOOM_ATTN_TMA", var[v].tma);
                printf("(fused, %s)\n", var[v].name);
                bench_step("4B", 2560, 9728, 4, Ls[li], LOOM_GGML_Q4_K);
            }
    g_step_rka = 0;
    unsetenv("LOOM_ATTN_TMA");
    loom_cuda_reload_switches();
}

/* --attn-pf: prefill attention (N > 1 query tokens, 32/8 heads x 128, the 4B shape) by the
 * tensor-core prefill kernel (LOOM_ATTN_PREFILL=1: 4 warps, =2: 8 warps walking each tile's
 * halves apart; attention_prefill.cu) and by today's v5 path (=0), alternating in one process: N = 128 and 512 at pos0 0, N = 512 after 1536
 * positions, F16 and INT8; then decode (N = 1) at 1024 positions with both values (unchanged).
 * One cache (L2-warm, as in a prefill step right after its kv write), stream-timed launches;
 * TFLOP/s counts 4 x heads x D x (visible positions summed over the tokens). */
static void attn_pf_ab(void) {
    static const struct { int64_t N, pos0; } cs[] = {{128, 0}, {512, 0}, {512, 1536}, {1, 1023}};
    enum { NC = sizeof cs / sizeof cs[0] };
    const int64_t nh = 32, nkv = 8, D = 128;
    printf("\n| %-34s | %-30s | %9s | %8s |\n", "attention (LOOM_ATTN_PREFILL)", "shape", "us/call", "TFLOP/s");
    for (int c = 0; c < NC; c++)
        for (int t = LOOM_KV_F16; t <= LOOM_KV_INT8; t++) {
            const int64_t N = cs[c].N, L = cs[c].pos0 + N;
            struct at_ctx *a = calloc(1, sizeof *a);
            a->copies = 1;
            a->kv = (loom_kv_layout){(loom_kv_type)t, L, nkv, D};
            a->p = (loom_attn_params){N, nh, cs[c].pos0, 1.0f / sqrtf((float)D), 0};
            const int64_t el = t == LOOM_KV_F16 ? 2 : 1;
            a->kc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * el / 2, 1);
            a->vc[0] = dev_weights(LOOM_GGML_F16, L * nkv * D * el / 2, 1);
            a->ks[0] = dev_floats(L * nkv, 0.001f, 0.01f);
            a->vs[0] = dev_floats(L * nkv, 0.001f, 0.01f);
            a->q = dev_floats(N * nh * D, -1, 1);
            a->out = dev_floats(N * nh * D, 0, 1);
            LK(loom_cuda_reserve_scratch(loom_cuda_scratch_bytes_for(nh, D, 1, 1) * (size_t)N, &g_err));
            const double flop = 4.0 * nh * D * ((double)N * cs[c].pos0 + 0.5 * (double)N * (N + 1));
            char shape[64];
            snprintf(shape, sizeof shape, "%s N=%lld pos0=%lld", t == LOOM_KV_F16 ? "F16" : "INT8",
                     (long long)N, (long long)cs[c].pos0);
            for (int rep = 0; rep < 2; rep++)
                for (int sw = 0; sw < 3; sw++) {
                    set_env("LOOM_ATTN_PREFILL", sw == 2 ? "2" : (sw ? "1" : "0"));
                    for (int i = 0; i < 200; i++) at_fn(a, i); /* clocks up */
                    const double us = time_us(at_fn, a, g_quick ? 20 : 100);
                    char nm[64];
                    snprintf(nm, sizeof nm, "%s PREFILL=%d", N > 1 ? "prefill attn" : "decode attn", sw);
                    printf("| %-34s | %-30s | %9.2f | %8.2f |\n", nm, shape, us, flop / (us * 1e-6) / 1e12);
                    fflush(stdout);
                }
            cudaFree(a->kc[0]); cudaFree(a->vc[0]); cudaFree(a->ks[0]); cudaFree(a->vs[0]);
            cudaFree(a->q); cudaFree(a->out);
            free(a);
        }
    unsetenv("LOOM_ATTN_PREFILL");
    loom_cuda_reload_switches();
}

/* --mixed: the Q4_K_M triple's GEMV in one launch (LOOM_GEMV_TRIPLE_MIXED=1, the default; 2 / 3:
 * its V tiles last / first) against its two launches (=0): the triple alone at the 4B and 8B
 * shapes (plain and normed; all four, twice, on the same weights), and the decode-layer graph
 * (GEMVs, full layer, norms folded: the executor's -O2 step) at 4B (8 layers) and 8B (4 layers):
 * two launches, the default, the other order, twice each. */
static void mixed_ab(void) {
    const loom_ggml_type qkv[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    g_norm_ab = 1;
    g_ab_mixed = 1;
    bench_mm("4B triple", MM_TRIPLE, 1, 3, qkv, (const int64_t[]){4096, 1024, 1024}, 2560);
    bench_mm("8B triple", MM_TRIPLE, 1, 3, qkv, (const int64_t[]){4096, 1024, 1024}, 4096);
    g_ab_mixed = 0;
    g_norm_ab = 0;
    const int norm_only = g_norm_only;
    g_norm_only = 1; /* bench_step's third mode: the norms folded into the matmuls */
    /* 4B: two launches, mixed (the rule: V first), V last; 8B: two launches, mixed (the rule:
     * V last), V first; each twice */
    static const char *mv4[3] = {"0", "1", "2"}, *mv8[3] = {"0", "1", "3"};
    static const char *l4[3] = {"4B 2-launch", "4B mixed", "4B mixed V last"};
    static const char *l8[3] = {"8B 2-launch", "8B mixed", "8B mixed V first"};
    for (int rep = 0; rep < (g_quick ? 1 : 4); rep++)
        for (int mx = 0; mx < 3; mx++) {
            set_env("LOOM_GEMV_TRIPLE_MIXED", rep < 2 ? mv4[mx] : mv8[mx]);
            if (rep < 2) bench_step(l4[mx], 2560, 9728, 8, 4096, LOOM_GGML_Q4_K);
            else bench_step(l8[mx], 4096, 14336, 4, 4096, LOOM_GGML_Q4_K);
        }
    g_norm_only = norm_only;
    unsetenv("LOOM_GEMV_TRIPLE_MIXED");
    loom_cuda_reload_switches();
}

/* --q4k: the Q4_K matmuls' bodies in the same process (LOOM_GEMV_MMA_Q4K_V: 1 the f16 body v11,
 * 2 the INT8 body), in turn, twice (1 2 1 2): the 4B and 8B rows of the decode matmuls (the
 * Q4_K_M triple and the gate/up pair + SwiGLU plain, norm + plain and normed, attention output +
 * add, ffn down + add, the 4B gemv), the 4B prefill GEMM (9728x2560) at N = 32 and 512, and the
 * decode-layer graph (GEMVs, full layer, norms folded) at 4B (8 layers) and 8B (4 layers). */
static int g_q4k_ab = 0;
static int g_q8 = 0;
/* --q8: the Q8_0 matmuls at the 4B and 8B shapes on the warp-per-row kernels (LOOM_GEMV_MMA_Q8=0)
 * and on the tensor cores (gemv_mma_q8.cu), alternated twice in one run: triple, attention
 * output + add, gate/up pair SwiGLU, down + add, the GEMV; the prefill GEMM at N = 32 and 512. */
static void bench_q8(void) {
    static const char *vv[2] = {"0", "1"};
    const loom_ggml_type q8[3] = {LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0};
    static const struct { const char *name; int64_t H, F; } cf[2] = {{"4B", 2560, 9728}, {"8B", 4096, 14336}};
    char nm[80];
    for (int rep = 0; rep < (g_quick ? 1 : 2); rep++)
        for (int v = 0; v < 2; v++) {
            set_env("LOOM_GEMV_MMA_Q8", vv[v]);
            for (int ci = 0; ci < 2; ci++) {
                const int64_t H = cf[ci].H, F = cf[ci].F;
                snprintf(nm, sizeof nm, "%s Q8_0 triple QKV Q8=%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_TRIPLE, 1, 3, q8, (const int64_t[]){4096, 1024, 1024}, H);
                snprintf(nm, sizeof nm, "%s Q8_0 attn out + add Q8=%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_ADD, 1, 1, q8, (const int64_t[]){H}, 4096);
                snprintf(nm, sizeof nm, "%s Q8_0 pair SwiGLU Q8=%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_PAIR, 1, 2, q8, (const int64_t[]){F, F}, H);
                snprintf(nm, sizeof nm, "%s Q8_0 ffn down + add Q8=%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_ADD, 1, 1, q8, (const int64_t[]){H}, F);
                snprintf(nm, sizeof nm, "%s gemv Q8_0 Q8=%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_PLAIN, 1, 1, q8, (const int64_t[]){F}, H);
                if (ci == 0) {
                    snprintf(nm, sizeof nm, "4B Q8_0 gemm N=32 Q8=%s", vv[v]);
                    bench_mm(nm, MM_GEMM, 32, 1, q8, (const int64_t[]){F}, H);
                    g_calls = 4;
                    snprintf(nm, sizeof nm, "4B Q8_0 gemm N=512 Q8=%s", vv[v]);
                    bench_mm(nm, MM_GEMM, 512, 1, q8, (const int64_t[]){F}, H);
                    g_calls = 0;
                }
            }
        }
    unsetenv("LOOM_GEMV_MMA_Q8");
    loom_cuda_reload_switches();
}

/* A 512-token prefill step's matmuls at the 4B and 8B shapes, each as the executor's prefill
 * runs it (the norm a launch of its own): the triple QKV (types t3), attention output + add, the
 * gate/up pair + SwiGLU and ffn down + add (t3[0]); then the 4B 9728 x 2560 GEMM at N = 16, 32,
 * 128. Row names end in tag. */
static void bench_prefill_rows(const loom_ggml_type t3[3], const char *tag) {
    static const struct { const char *name; int64_t H, F; } cf[2] = {{"4B", 2560, 9728}, {"8B", 4096, 14336}};
    const char *tn = loom_ggml_type_get(t3[0])->name;
    char nm[80];
    g_calls = 4;
    for (int ci = 0; ci < 2; ci++) {
        const int64_t H = cf[ci].H, F = cf[ci].F;
        snprintf(nm, sizeof nm, "%s %s triple QKV N=512%s", cf[ci].name, tn, tag);
        bench_mm(nm, MM_TRIPLE, 512, 3, t3, (const int64_t[]){4096, 1024, 1024}, H);
        snprintf(nm, sizeof nm, "%s %s attn out + add N=512%s", cf[ci].name, tn, tag);
        bench_mm(nm, MM_ADD, 512, 1, t3, (const int64_t[]){H}, 4096);
        snprintf(nm, sizeof nm, "%s %s pair SwiGLU N=512%s", cf[ci].name, tn, tag);
        bench_mm(nm, MM_PAIR, 512, 2, t3, (const int64_t[]){F, F}, H);
        snprintf(nm, sizeof nm, "%s %s ffn down + add N=512%s", cf[ci].name, tn, tag);
        bench_mm(nm, MM_ADD, 512, 1, t3, (const int64_t[]){H}, F);
    }
    g_calls = 0;
    static const int64_t ns[3] = {16, 32, 128};
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "4B %s gemm N=%lld%s", tn, (long long)ns[i], tag);
        bench_mm(nm, MM_GEMM, ns[i], 1, t3, (const int64_t[]){9728}, 2560);
    }
}

/* --q8w: the wide Q8_0 GEMM's x staging (LOOM_GEMM_WIDE_Q8: 1 in each block, 2 the limb
 * pre-pass), alternated twice in one run on the same weights (bench_prefill_rows). */
static int g_q8w = 0;
static void bench_q8w(void) {
    static const char *vv[2] = {"1", "2"}, *tag[2] = {" W1", " W2"};
    const loom_ggml_type q8[3] = {LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0};
    for (int rep = 0; rep < (g_quick ? 1 : 2); rep++)
        for (int v = 0; v < 2; v++) {
            set_env("LOOM_GEMM_WIDE_Q8", vv[v]);
            bench_prefill_rows(q8, tag[v]);
        }
    unsetenv("LOOM_GEMM_WIDE_Q8");
    loom_cuda_reload_switches();
}

/* --prefill: bench_prefill_rows for Q4_K_M (the triple's V Q6_K) and Q8_0 under the current
 * switches, twice. */
static int g_prefill = 0;
static void bench_prefill(void) {
    const loom_ggml_type q4km[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K},
                         q8[3] = {LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, LOOM_GGML_Q8_0};
    for (int rep = 0; rep < (g_quick ? 1 : 2); rep++) {
        bench_prefill_rows(q4km, "");
        bench_prefill_rows(q8, "");
    }
}

static void bench_q4k_ab(void) {
    static const char *vv[2] = {"1", "2"};
    const loom_ggml_type q4[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
    static const struct { const char *name; int64_t H, F; } cf[2] = {{"4B", 2560, 9728}, {"8B", 4096, 14336}};
    const int norm_only = g_norm_only;
    char nm[80];
    for (int rep = 0; rep < (g_quick ? 1 : 2); rep++)
        for (int v = 0; v < 2; v++) {
            set_env("LOOM_GEMV_MMA_Q4K_V", vv[v]);
            printf("(LOOM_GEMV_MMA_Q4K_V=%s)\n", vv[v]);
            for (int ci = 0; ci < 2; ci++) {
                const int64_t H = cf[ci].H, F = cf[ci].F;
                g_norm_ab = 1; /* bench_mm: plain, norm + plain, normed rows */
                snprintf(nm, sizeof nm, "%s triple QKV V%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_TRIPLE, 1, 3, q4, (const int64_t[]){4096, 1024, 1024}, H);
                snprintf(nm, sizeof nm, "%s pair SwiGLU V%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_PAIR, 1, 2, q4, (const int64_t[]){F, F}, H);
                g_norm_ab = 0;
                snprintf(nm, sizeof nm, "%s attn out + add V%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_ADD, 1, 1, q4, (const int64_t[]){H}, 4096);
                snprintf(nm, sizeof nm, "%s ffn down + add V%s", cf[ci].name, vv[v]);
                bench_mm(nm, MM_ADD, 1, 1, q4, (const int64_t[]){H}, F);
                if (ci == 0) {
                    snprintf(nm, sizeof nm, "4B gemv Q4_K V%s", vv[v]);
                    bench_mm(nm, MM_PLAIN, 1, 1, q4, (const int64_t[]){F}, H);
                    snprintf(nm, sizeof nm, "4B prefill gemm N=32 V%s", vv[v]);
                    bench_mm(nm, MM_GEMM, 32, 1, q4, (const int64_t[]){F}, H);
                    g_calls = 4;
                    snprintf(nm, sizeof nm, "4B prefill gemm N=512 V%s", vv[v]);
                    bench_mm(nm, MM_GEMM, 512, 1, q4, (const int64_t[]){F}, H);
                    g_calls = 0;
                }
            }
            g_norm_only = 1; /* bench_step's third mode: the norms folded into the matmuls */
            bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q4_K);
            bench_step("8B", 4096, 14336, 4, 4096, LOOM_GGML_Q4_K);
            g_norm_only = norm_only;
        }
    unsetenv("LOOM_GEMV_MMA_Q4K_V");
    loom_cuda_reload_switches();
}

int main(int argc, char **argv) {
    int fused_only = 0, mixed_only = 0, s7_only = 0, pf_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fused") == 0) fused_only = 1;
        if (strcmp(argv[i], "--mixed") == 0) mixed_only = 1;
        if (strcmp(argv[i], "--attn-s7") == 0) s7_only = 1;
        if (strcmp(argv[i], "--attn-pf") == 0) pf_only = 1;
        if (strcmp(argv[i], "--quick") == 0) g_quick = 1;
        if (strcmp(argv[i], "--attn") == 0) g_attn_only = 1;
        if (strcmp(argv[i], "--matmul") == 0) g_mm_only = 1;
        if (strcmp(argv[i], "--q4k") == 0) g_q4k_ab = 1;
        if (strcmp(argv[i], "--q8") == 0) g_q8 = 1;
        if (strcmp(argv[i], "--q8w") == 0) g_q8w = 1;
        if (strcmp(argv[i], "--prefill") == 0) g_prefill = 1;
        if (strcmp(argv[i], "--q6k") == 0) g_q6k_only = 1;
        if (strcmp(argv[i], "--q6k-down") == 0) g_q6k_down = 1;
        if (strcmp(argv[i], "--q6k-wide") == 0) g_q6k_wide = 1;
        if (strcmp(argv[i], "--q4k-wide") == 0) g_q4k_wide = 1;
        if (strcmp(argv[i], "--q4w") == 0) g_q4w = 1;
        if (strcmp(argv[i], "--triple-v") == 0) g_triple_v = 1;
        if (strcmp(argv[i], "--norm") == 0) g_norm_only = 1;
        if (strcmp(argv[i], "--attn-trace") == 0) g_attn_trace = 1;
        if (strcmp(argv[i], "--gemv-trace") == 0) g_gemv_trace = 1;
        if (strcmp(argv[i], "--icache") == 0) g_icache = 1;
        if (strcmp(argv[i], "--l2warm") == 0) g_l2warm = 1;
        if (strcmp(argv[i], "--rows") == 0) g_rows = 1;
        if (strcmp(argv[i], "--attn-prof") == 0) g_attn_prof = 1;
        if (strcmp(argv[i], "--attn-step") == 0) g_attn_step = 1;
    }
    CK(cudaStreamCreate(&g_s));
    int sms = 0, l2 = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    g_sms = sms;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    LK(loom_cuda_apply_l2_fetch(&g_err)); /* as the CUDA backend sets it (LOOM_CUDA_L2_FETCH) */
    size_t fetch = 0;
    CK(cudaDeviceGetLimit(&fetch, cudaLimitMaxL2FetchGranularity));
    printf("cuda_bench: %d SMs, L2 %d MB, L2 fetch granularity %zu B; weights rotate over > 256 MB; "
           "median of 7 x many launches\n\n", sms, l2 >> 20, fetch);
    printf("| %-34s | %-30s | %9s | %8s | %6s |\n", "kernel", "shape", "us/call", "GB/s", "%copy");
    printf("|%s|%s|%s|%s|%s|\n", "------------------------------------", "--------------------------------",
           "-----------", "----------", "--------");
    {
        struct copy_ctx c = {NULL, NULL, (size_t)1 << 30};
        CK(cudaMalloc(&c.a, c.n));
        CK(cudaMalloc(&c.b, c.n));
        CK(cudaMemset(c.a, 0x5A, c.n));
        double us = time_us(copy_fn, &c, 10);
        g_copy_gbs = 2.0 * c.n / (us * 1e-6) / 1e9;
        row("device copy (read+write)", "1 GiB", us, 2.0 * c.n);
        cudaFree(c.a);
        cudaFree(c.b);
    }
    /* The single-purpose modes: the first one whose flag was given (in this order) runs alone
     * after the copy row. A new mode is one flag in the argv loop and one row here. */
    const struct {
        const int *flag;
        void (*run)(void);
    } modes[] = {
        {&g_q6k_only, bench_q6k},       {&g_norm_only, bench_norm_fold},
        {&g_q6k_down, bench_q6k_down}, {&g_q6k_wide, bench_q6k_wide},
        {&g_q4k_wide, bench_q4k_wide},
        {&g_q4w, bench_q4w},             {&g_triple_v, bench_triple_v},
        {&g_attn_prof, attn_prof_all},  {&g_attn_trace, attn_trace_all},
        {&g_gemv_trace, gemv_trace_all}, {&g_icache, icache_all},
        {&g_l2warm, l2warm_all},
        {&g_attn_step, attn_step_ab},   {&fused_only, fused_ab},
        {&s7_only, attn_s7_ab},         {&pf_only, attn_pf_ab},
        {&mixed_only, mixed_ab},        {&g_q4k_ab, bench_q4k_ab},
        {&g_q8, bench_q8},              {&g_q8w, bench_q8w},
        {&g_prefill, bench_prefill},
    };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        if (*modes[m].flag) {
            modes[m].run();
            goto done;
        }
    static const struct { const char *name; int64_t H, F; } cfgs[2] = {{"4B", 2560, 9728}, {"8B", 4096, 14336}};
    for (int ci = 0; ci < (g_attn_only ? 0 : g_quick || g_mm_only ? 1 : 2); ci++) {
        const int64_t H = cfgs[ci].H, F = cfgs[ci].F;
        char nm[64];
        const loom_ggml_type q4[3] = {LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, LOOM_GGML_Q6_K};
        const int64_t qkvM[3] = {4096, 1024, 1024};
        snprintf(nm, sizeof nm, "%s triple QKV", cfgs[ci].name);
        bench_mm(nm, MM_TRIPLE, 1, 3, q4, qkvM, H);
        int64_t Mo[1] = {H};
        snprintf(nm, sizeof nm, "%s attn out + add", cfgs[ci].name);
        bench_mm(nm, MM_ADD, 1, 1, q4, Mo, 4096);
        int64_t Mf[2] = {F, F};
        snprintf(nm, sizeof nm, "%s gate/up pair SwiGLU", cfgs[ci].name);
        bench_mm(nm, MM_PAIR, 1, 2, q4, Mf, H);
        snprintf(nm, sizeof nm, "%s ffn down + add", cfgs[ci].name);
        bench_mm(nm, MM_ADD, 1, 1, q4, Mo, F);
        static const loom_ggml_type ts[5] = {LOOM_GGML_Q4_K, LOOM_GGML_Q5_K, LOOM_GGML_Q6_K,
                                             LOOM_GGML_Q8_0, LOOM_GGML_F16};
        for (int t = 0; t < (g_quick || g_mm_only ? 1 : 5); t++) {
            snprintf(nm, sizeof nm, "%s gemv %s", cfgs[ci].name, loom_ggml_type_get(ts[t])->name);
            bench_mm(nm, MM_PLAIN, 1, 1, &ts[t], Mf, H);
        }
        if (!g_mm_only) { /* the warp-per-row kernels (LOOM_GEMV_MMA=0) on the same shapes, side by side */
            set_env("LOOM_GEMV_MMA", "0");
            snprintf(nm, sizeof nm, "%s triple QKV (MMA=0)", cfgs[ci].name);
            bench_mm(nm, MM_TRIPLE, 1, 3, q4, qkvM, H);
            snprintf(nm, sizeof nm, "%s attn out + add (MMA=0)", cfgs[ci].name);
            bench_mm(nm, MM_ADD, 1, 1, q4, Mo, 4096);
            snprintf(nm, sizeof nm, "%s gate/up pair SwiGLU (MMA=0)", cfgs[ci].name);
            bench_mm(nm, MM_PAIR, 1, 2, q4, Mf, H);
            snprintf(nm, sizeof nm, "%s ffn down + add (MMA=0)", cfgs[ci].name);
            bench_mm(nm, MM_ADD, 1, 1, q4, Mo, F);
            snprintf(nm, sizeof nm, "%s gemv Q4_K (MMA=0)", cfgs[ci].name);
            bench_mm(nm, MM_PLAIN, 1, 1, q4, Mf, H);
            set_env("LOOM_GEMV_MMA", "1");
        }
        if (ci == 0) { /* mma cluster split-K forced (default: by shape) */
            static const char *sp[4] = {"1", "2", "4", "8"};
            for (int i = 0; i < 4; i++) {
                set_env("LOOM_GEMV_MMA_SPLIT", sp[i]);
                snprintf(nm, sizeof nm, "4B attn out + add split %s", sp[i]);
                bench_mm(nm, MM_ADD, 1, 1, q4, Mo, 4096);
                snprintf(nm, sizeof nm, "4B ffn down + add split %s", sp[i]);
                bench_mm(nm, MM_ADD, 1, 1, q4, Mo, F);
                snprintf(nm, sizeof nm, "4B triple QKV split %s", sp[i]);
                bench_mm(nm, MM_TRIPLE, 1, 3, q4, qkvM, H);
            }
            unsetenv("LOOM_GEMV_MMA_SPLIT");
            loom_cuda_reload_switches();
        }
        if (ci == 0 && !g_mm_only) { /* Q4_K variants of the warp-per-row kernels: unroll, byte loads, simple */
            set_env("LOOM_GEMV_MMA", "0");
            static const char *un[3] = {"1", "2", "4"};
            for (int u = 0; u < 3; u++) {
                set_env("LOOM_GEMV_UNROLL", un[u]);
                snprintf(nm, sizeof nm, "4B gemv Q4_K unroll %s", un[u]);
                bench_mm(nm, MM_PLAIN, 1, 1, q4, Mf, H);
            }
            unsetenv("LOOM_GEMV_UNROLL"); /* the default: by type */
            loom_cuda_reload_switches();
            set_env("LOOM_Q4K_UINT32_LOADS", "0");
            bench_mm("4B gemv Q4_K byte loads", MM_PLAIN, 1, 1, q4, Mf, H);
            set_env("LOOM_Q4K_UINT32_LOADS", "1");
            set_env("LOOM_FAST_GEMV", "0");
            bench_mm("4B gemv Q4_K simple path", MM_PLAIN, 1, 1, q4, Mf, H);
            set_env("LOOM_FAST_GEMV", "1");
            set_env("LOOM_GEMV_MMA", "1");
            bench_mm("4B lm head Q6_K", MM_PLAIN, 1, 1, &q4[2], (const int64_t[]){151936}, H);
        }
        snprintf(nm, sizeof nm, "%s prefill gemm N=32", cfgs[ci].name);
        bench_mm(nm, MM_GEMM, 32, 1, q4, Mf, H);
        set_env("LOOM_GEMV_MMA", "0");
        snprintf(nm, sizeof nm, "%s prefill gemm N=32 (MMA=0)", cfgs[ci].name);
        bench_mm(nm, MM_GEMM, 32, 1, q4, Mf, H);
        set_env("LOOM_GEMV_MMA", "1");
        snprintf(nm, sizeof nm, "%s prefill gemm N=512", cfgs[ci].name);
        bench_mm(nm, MM_GEMM, 512, 1, q4, Mf, H);
        snprintf(nm, sizeof nm, "%s prefill gemm N=8", cfgs[ci].name);
        bench_mm(nm, MM_GEMM, 8, 1, q4, Mf, H);
    }
    if (g_mm_only) {
        bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q4_K);
        goto done;
    }
    if (!g_quick && !g_attn_only) bench_q6k();
    /* decode attention: v5 (LOOM_ATTN_V6=0) and the default fast path (v6) side by side, same
     * run */
    {
        static const int64_t Ls[5] = {512, 640, 1024, 4096, 8192}; /* 512/640: a decode step after a 512 prompt */
        for (int ti = 0; ti < 2; ti++)
            for (int li = 0; li < 5; li++) {
                const loom_kv_type kt = ti ? LOOM_KV_INT8 : LOOM_KV_F16;
                set_env("LOOM_ATTN_V6", "0");
                bench_attn("decode attention v5", kt, Ls[li], 1);
                set_env("LOOM_ATTN_V6", "1");
                bench_attn("decode attention", kt, Ls[li], 1);
            }
        bench_attn_at("decode attention _at", LOOM_KV_F16, 4096, 1, 1);
        set_env("LOOM_ATTN_CL_TILES", "64"); /* v6 at 4K with the global combine (v5's rule) */
        bench_attn("decode attention cl<=2K", LOOM_KV_F16, 4096, 1);
        bench_attn("decode attention cl<=2K", LOOM_KV_INT8, 4096, 1);
        unsetenv("LOOM_ATTN_CL_TILES");
        static const char *bp[6] = {"1", "2", "3", "4", "6", "8"};
        for (int i = 0; i < (g_quick ? 0 : 6); i++) { /* blocks per SM the splits aim at */
            char nm[64];
            snprintf(nm, sizeof nm, "decode attention bpsm %s", bp[i]);
            set_env("LOOM_ATTN_BPSM", bp[i]);
            bench_attn(nm, LOOM_KV_F16, 4096, 1);
            bench_attn(nm, LOOM_KV_F16, 1024, 1);
            bench_attn(nm, LOOM_KV_F16, 8192, 1);
            bench_attn(nm, LOOM_KV_INT8, 4096, 1);
            bench_attn(nm, LOOM_KV_F16, 640, 1);
        }
        unsetenv("LOOM_ATTN_BPSM");
        loom_cuda_reload_switches();
    }
    set_env("LOOM_FAST_ATTN", "0");
    bench_attn("decode attention simple path", LOOM_KV_F16, 4096, 1);
    set_env("LOOM_FAST_ATTN", "1");
    bench_attn("prefill attention", LOOM_KV_F16, 1056, 32);
    if (g_attn_only) goto done;
    bench_small("rms_norm 4B", 0, 1, 2560, 2560 * 12.0);
    bench_small("softmax vocab", 1, 151936, 1, 151936 * 12.0);
    bench_small("argmax vocab", 2, 151936, 1, 151936 * 4.0);
    bench_small("swiglu ffn 4B", 3, 9728, 1, 9728 * 12.0);
    bench_small("embed Q6_K row 4B", 4, 1, 2560, 2560 * (210.0 / 256 + 4));
    bench_small("f16->f32 logits", 5, 151936, 1, 151936 * 6.0);
    bench_step("4B", 2560, 9728, g_quick ? 4 : 8, 4096, LOOM_GGML_Q4_K);
    set_env("LOOM_GEMV_MMA", "0");
    bench_step("4B (MMA=0)", 2560, 9728, g_quick ? 4 : 8, 4096, LOOM_GGML_Q4_K);
    set_env("LOOM_GEMV_MMA", "1");
    if (!g_quick) bench_step("8B", 4096, 14336, 4, 4096, LOOM_GGML_Q4_K);
    if (!g_quick) bench_step("4B", 2560, 9728, 8, 4096, LOOM_GGML_Q6_K);
done:
    loom_cuda_release_scratch();
    CK(cudaDeviceSynchronize());
    printf("\ncopy bandwidth %.0f GB/s\n", g_copy_gbs);
    return 0;
}
