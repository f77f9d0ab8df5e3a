/* matmul.c: y[N, M] = x[N, K] · W[M, K]ᵀ for quantized and float weights, and its fused
 * variants (+ residual, pairs with a SwiGLU epilogue, Q/K/V triples with biases).
 *
 * Work split: the rows of W (over all weights of a fused call) are split into contiguous ranges
 * over the pool; a thread computes every token of its rows. Within a row, tokens go in groups
 * of up to TOKEN_GROUP: each 256-value chunk of the row is decoded once (loom_cpu_decode,
 * bit-identical to loom_dequantize_row) into a stack buffer and dotted with the group's tokens,
 * four at a time (accumulate4: each 8 weights loaded once for four tokens), so a row is decoded
 * ceil(N / TOKEN_GROUP) times and never stored whole. The weight bytes PREFETCH_CHUNKS chunks
 * ahead are prefetched as a chunk is decoded (with the hardware prefetcher alone a decode step
 * took ~1.4x as long, bench/NOTES.md 8), and dot_group has an AVX2 clone (LOOM_CPU_HOT).
 *
 * Numeric contract (cpu_kernels.h): products summed in float32 into 8 lanes (element k into
 * lane k % 8, increasing k), combined ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). The chunk and group
 * sizes do not change that order, so every output element is the same whatever N, the thread
 * count or the variant. Epilogues apply to the finished dot: + residual, + bias, or
 * loom_silu(a) * b, exactly as the unfused kernels do.
 *
 * The _normed forms (an RMSNorm folded into the matmul) normalize x with loom_cpu_rms_norm into
 * n * K floats of scratch (the caller's workspace in the _ws forms, else one of their own for
 * the call) and run the same job on it, so they equal the norm followed by the plain call bit
 * for bit; the plain forms are the same functions with no norm.
 */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

enum {
    CHUNK = 256,      /* values decoded at a time: one K-quant super-block, 8 Q8_0 blocks */
    TOKEN_GROUP = 8,  /* tokens dotted per decoded chunk */
    LANES = 8,
    PREFETCH_CHUNKS = 8, /* how far ahead dot_group prefetches weight bytes (the next row's) */
};

/* The 8 lanes. Plain floats, with the lane loop written out so that GCC's SLP vectoriser maps
 * them onto registers: two SSE registers on baseline x86-64 (two NEON on arm64), one AVX2
 * register in LOOM_CPU_HOT's AVX2 clone. (A GCC vector type of 32 bytes would be one AVX2
 * register there, but the baseline build keeps it on the stack: ~2x slower batched matmuls.)
 * Vectorised or not, each lane's sum is the scalar one. */
typedef struct { float l[LANES]; } lanes8;

/* acc[k % 8] += w[k] * x[k] for k in [0, len): len need not be a multiple of 8, but the chunk
 * must start at a multiple of 8 of the row for the lane assignment to hold (chunks start at
 * multiples of CHUNK). */
static inline void accumulate(lanes8 *acc, const float *w, const float *x, int64_t len) {
    int64_t k = 0;
    lanes8 a = *acc;
    for (; k + LANES <= len; k += LANES)
        for (int l = 0; l < LANES; l++) a.l[l] += w[k + l] * x[k + l];
    for (int l = 0; k < len; k++, l++) a.l[l] += w[k] * x[k];
    *acc = a;
}

/* accumulate() for 4 tokens at once: each 8 weights loaded once for the 4 tokens' products, the
 * four sums in separate locals so that the vectoriser keeps each in a register. Every token's
 * lanes get the same operations in the same order as accumulate() gives them. */
static inline void accumulate4(lanes8 *acc, const float *w, const float *x0, const float *x1,
                               const float *x2, const float *x3, int64_t len) {
    lanes8 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int64_t k = 0;
    for (; k + LANES <= len; k += LANES) {
        for (int l = 0; l < LANES; l++) a0.l[l] += w[k + l] * x0[k + l];
        for (int l = 0; l < LANES; l++) a1.l[l] += w[k + l] * x1[k + l];
        for (int l = 0; l < LANES; l++) a2.l[l] += w[k + l] * x2[k + l];
        for (int l = 0; l < LANES; l++) a3.l[l] += w[k + l] * x3[k + l];
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
    if (k < len) {
        accumulate(&acc[0], w + k, x0 + k, len - k);
        accumulate(&acc[1], w + k, x1 + k, len - k);
        accumulate(&acc[2], w + k, x2 + k, len - k);
        accumulate(&acc[3], w + k, x3 + k, len - k);
    }
}

static inline float combine(const lanes8 *a) {
    const float *v = a->l;
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* out[g] = dot(W[m, :], x[t0 + g, :]) for g in [0, count), count <= TOKEN_GROUP. chunk_bytes:
 * the bytes of CHUNK values of w's type (CHUNK is a multiple of every supported block size). */
LOOM_CPU_HOT static void dot_group(const loom_kweight *w, int64_t row_bytes, int64_t chunk_bytes,
                                   int64_t m, const float *x, int64_t t0, int count, float *out) {
    const int64_t K = w->cols;
    const uint8_t *row = (const uint8_t *)w->data + m * row_bytes;
    lanes8 acc[TOKEN_GROUP];
    memset(acc, 0, sizeof acc);
    float buf[CHUNK];
    for (int64_t c = 0; c * CHUNK < K; c++) {
        const int64_t k0 = c * CHUNK, len = K - k0 < CHUNK ? K - k0 : CHUNK;
        const float *wv;
        if (w->type == LOOM_GGML_F32) {
            wv = (const float *)row + k0;
        } else {
            /* May lie past the weight's end: an address, not a pointer (a prefetch never
             * faults). Into every cache level: a non-temporal prefetch (L1 only) loses F16
             * rows to the conversion table's traffic, ~1.8x slower than none at all. */
            const uintptr_t next =
                (uintptr_t)row + (uintptr_t)((c + PREFETCH_CHUNKS) * chunk_bytes);
            for (int64_t o = 0; o < chunk_bytes; o += 64)
                __builtin_prefetch((const void *)(next + (uintptr_t)o), 0, 3);
            loom_cpu_decode(w->type, row + c * chunk_bytes, buf, len);
            wv = buf;
        }
        const float *xg = x + t0 * K + k0;
        int g = 0;
        for (; g + 4 <= count; g += 4)
            accumulate4(&acc[g], wv, xg + g * K, xg + (g + 1) * K, xg + (g + 2) * K,
                        xg + (g + 3) * K, len);
        for (; g < count; g++) accumulate(&acc[g], wv, xg + g * K, len);
    }
    for (int g = 0; g < count; g++) out[g] = combine(&acc[g]);
}

typedef enum { EPI_NONE, EPI_ADD, EPI_BIAS, EPI_SWIGLU } epilogue_kind;

/* One fused call: up to 3 weights over one x. For EPI_SWIGLU, w[0] is the gate and w[1] the up
 * projection and the rows are those of w[0] only (each row computes both dots). */
typedef struct matmul_job {
    const float *x;
    int64_t n;
    int n_w;
    loom_kweight w[3];
    int64_t row_bytes[3], chunk_bytes[3];
    int64_t row_start[4]; /* prefix sums of the rows each weight contributes */
    float *y[3];
    const float *extra[3]; /* residual (EPI_ADD) or bias (EPI_BIAS) per weight, may be NULL */
    epilogue_kind epi;
} matmul_job;

static void matmul_range(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    const matmul_job *j = ctx;
    float d0[TOKEN_GROUP], d1[TOKEN_GROUP];
    for (int64_t r = begin; r < end; r++) {
        int i = 0;
        while (r >= j->row_start[i + 1]) i++;
        const int64_t m = r - j->row_start[i], M = j->w[i].rows;
        float *y = j->y[i];
        for (int64_t t0 = 0; t0 < j->n; t0 += TOKEN_GROUP) {
            int count = j->n - t0 < TOKEN_GROUP ? (int)(j->n - t0) : TOKEN_GROUP;
            dot_group(&j->w[i], j->row_bytes[i], j->chunk_bytes[i], m, j->x, t0, count, d0);
            switch (j->epi) {
            case EPI_NONE:
                for (int g = 0; g < count; g++) y[(t0 + g) * M + m] = d0[g];
                break;
            case EPI_ADD: {
                const float *res = j->extra[i];
                for (int g = 0; g < count; g++)
                    y[(t0 + g) * M + m] = d0[g] + res[(t0 + g) * M + m];
                break;
            }
            case EPI_BIAS: {
                const float *bias = j->extra[i];
                for (int g = 0; g < count; g++)
                    y[(t0 + g) * M + m] = bias ? d0[g] + bias[m] : d0[g];
                break;
            }
            case EPI_SWIGLU:
                dot_group(&j->w[1], j->row_bytes[1], j->chunk_bytes[1], m, j->x, t0, count, d1);
                for (int g = 0; g < count; g++) y[(t0 + g) * M + m] = loom_silu(d0[g]) * d1[g];
                break;
            }
        }
    }
}

/* Checks x/n/weights/outputs (and the norm), fills the row table, normalizes x when norm is
 * not NULL (into ws, or scratch of its own when ws is NULL) and runs the job. */
static loom_status run_job(const char *who, matmul_job *j, const loom_prenorm *norm,
                           loom_cpu_workspace *ws, loom_error *err) {
    static const char *names[3] = {"weight 0", "weight 1", "weight 2"};
    if (j->n < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: negative token count %lld", who,
                              (long long)j->n);
    const int n_check = j->epi == EPI_SWIGLU ? 2 : j->n_w;
    for (int i = 0; i < n_check; i++) {
        loom_status s = loom_cpu_check_weight(who, names[i], &j->w[i], err);
        if (s != LOOM_OK) return s;
        if (j->w[i].cols != j->w[0].cols)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "%s: weight %d has row length %lld, weight 0 has %lld", who, i,
                                  (long long)j->w[i].cols, (long long)j->w[0].cols);
        j->row_bytes[i] = loom_cpu_weight_row_bytes(&j->w[i]);
        j->chunk_bytes[i] = loom_ggml_row_bytes((uint32_t)j->w[i].type, CHUNK);
    }
    if (j->epi == EPI_SWIGLU && j->w[1].rows != j->w[0].rows)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "%s: SwiGLU needs equal row counts, gate has %lld and up %lld", who,
                              (long long)j->w[0].rows, (long long)j->w[1].rows);
    const int64_t K = j->w[0].cols;
    if (j->n > 0 && K > 0 && !j->x)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: x is NULL", who);
    j->row_start[0] = 0;
    for (int i = 0; i < j->n_w; i++) {
        if (j->n > 0 && j->w[i].rows > 0 && !j->y[i])
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: output %d is NULL", who, i);
        if (j->epi == EPI_ADD && j->n > 0 && j->w[i].rows > 0 && !j->extra[i])
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: residual is NULL", who);
        j->row_start[i + 1] = j->row_start[i] + j->w[i].rows;
    }
    if (norm && !(norm->eps >= 0.0f))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: norm eps %g is not >= 0", who,
                              (double)norm->eps);
    if (j->n == 0) return LOOM_OK;
    loom_cpu_workspace own = {0};
    if (norm && K > 0) {
        if (!ws) ws = &own;
        if ((uint64_t)j->n > (uint64_t)SIZE_MAX / (uint64_t)K)
            return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "%s: normalized x of %lld x %lld",
                                  who, (long long)j->n, (long long)K);
        float *xn = loom_cpu_workspace_reserve(ws, (size_t)j->n * (size_t)K, who, err);
        if (!xn) return LOOM_ERR_OUT_OF_MEMORY;
        loom_status s = loom_cpu_rms_norm(j->x, norm->weight, j->n, K, norm->eps, xn, err);
        if (s != LOOM_OK) {
            loom_cpu_workspace_free(&own);
            return s;
        }
        j->x = xn;
    }
    const int64_t rows = j->row_start[j->n_w];
    const int64_t cost = j->n * (K > 0 ? K : 1) * (j->epi == EPI_SWIGLU ? 2 : 1);
    loom_cpu_parallel_for(rows, cost, matmul_range, j);
    loom_cpu_workspace_free(&own);
    return LOOM_OK;
}

loom_status loom_cpu_matmul_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                      loom_kweight w, float *y, loom_cpu_workspace *ws,
                                      loom_error *err) {
    matmul_job j = {.x = x, .n = n, .n_w = 1, .w = {w}, .y = {y}, .epi = EPI_NONE};
    return run_job(norm ? "matmul_normed" : "matmul", &j, norm, ws, err);
}

loom_status loom_cpu_matmul_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                   loom_kweight w, float *y, loom_error *err) {
    return loom_cpu_matmul_normed_ws(x, norm, n, w, y, NULL, err);
}

loom_status loom_cpu_matmul(const float *x, int64_t n, loom_kweight w, float *y, loom_error *err) {
    return loom_cpu_matmul_normed_ws(x, NULL, n, w, y, NULL, err);
}

loom_status loom_cpu_matmul_add(const float *x, int64_t n, loom_kweight w, const float *residual,
                                float *y, loom_error *err) {
    matmul_job j = {.x = x, .n = n, .n_w = 1, .w = {w}, .y = {y}, .extra = {residual},
                    .epi = EPI_ADD};
    return run_job("matmul_add", &j, NULL, NULL, err);
}

loom_status loom_cpu_matmul_pair_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                           loom_kweight a, loom_kweight b,
                                           loom_pair_epilogue epilogue, float *ya, float *yb,
                                           loom_cpu_workspace *ws, loom_error *err) {
    if (epilogue == LOOM_PAIR_SWIGLU) {
        matmul_job j = {.x = x, .n = n, .n_w = 1, .w = {a, b}, .y = {ya}, .epi = EPI_SWIGLU};
        return run_job(norm ? "matmul_pair_normed(swiglu)" : "matmul_pair(swiglu)", &j, norm,
                       ws, err);
    }
    if (epilogue != LOOM_PAIR_NONE)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: unknown epilogue %d",
                              norm ? "matmul_pair_normed" : "matmul_pair", (int)epilogue);
    matmul_job j = {.x = x, .n = n, .n_w = 2, .w = {a, b}, .y = {ya, yb}, .epi = EPI_NONE};
    return run_job(norm ? "matmul_pair_normed" : "matmul_pair", &j, norm, ws, err);
}

loom_status loom_cpu_matmul_pair_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                        loom_kweight a, loom_kweight b,
                                        loom_pair_epilogue epilogue, float *ya, float *yb,
                                        loom_error *err) {
    return loom_cpu_matmul_pair_normed_ws(x, norm, n, a, b, epilogue, ya, yb, NULL, err);
}

loom_status loom_cpu_matmul_pair(const float *x, int64_t n, loom_kweight a, loom_kweight b,
                                 loom_pair_epilogue epilogue, float *ya, float *yb,
                                 loom_error *err) {
    return loom_cpu_matmul_pair_normed_ws(x, NULL, n, a, b, epilogue, ya, yb, NULL, err);
}

loom_status loom_cpu_matmul_triple_normed_ws(const float *x, const loom_prenorm *norm, int64_t n,
                                             const loom_kweight w[3], const float *const bias[3],
                                             float *const y[3], loom_cpu_workspace *ws,
                                             loom_error *err) {
    const char *who = norm ? "matmul_triple_normed" : "matmul_triple";
    if (!w || !y)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who,
                              !w ? "weight array" : "output array");
    matmul_job j = {.x = x, .n = n, .n_w = 3, .w = {w[0], w[1], w[2]}, .y = {y[0], y[1], y[2]},
                    .extra = {bias ? bias[0] : NULL, bias ? bias[1] : NULL, bias ? bias[2] : NULL},
                    .epi = EPI_BIAS};
    return run_job(who, &j, norm, ws, err);
}

loom_status loom_cpu_matmul_triple_normed(const float *x, const loom_prenorm *norm, int64_t n,
                                          const loom_kweight w[3], const float *const bias[3],
                                          float *const y[3], loom_error *err) {
    return loom_cpu_matmul_triple_normed_ws(x, norm, n, w, bias, y, NULL, err);
}

loom_status loom_cpu_matmul_triple(const float *x, int64_t n, const loom_kweight w[3],
                                   const float *const bias[3], float *const y[3],
                                   loom_error *err) {
    return loom_cpu_matmul_triple_normed_ws(x, NULL, n, w, bias, y, NULL, err);
}
