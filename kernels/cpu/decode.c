/* decode.c: the matmul and embedding hot loop's block decoders: rows of F16, BF16, Q8_0, Q4_K,
 * Q5_K and Q6_K weights to float32, a chunk at a time.
 *
 * Contract: bit-identical to loom_dequantize_row (kernels/quant), which stays the definition of
 * every format; tests/kernels_cpu compares the two on random blocks. These versions only
 * reorganise the loops so the compiler vectorises them (fixed-trip inner loops over 32 values,
 * no per-value index arithmetic, the F16 table instead of a call per half; BUILD turns GCC's
 * vectoriser on with its full cost model, which -O2 alone keeps off for these loops, and
 * LOOM_CPU_HOT adds an AVX2 clone) and compute each value with the same float operations in the
 * same order:
 *   Q8_0  (float)q * d
 *   Q4_K  (d * (float)sc) * (float)q - (dmin * (float)m)
 *   Q5_K  same as Q4_K with the fifth bit from qh
 *   Q6_K  (d * (float)scale) * (float)(q - 32)
 */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

/* The per-type decoders below are always inlined into loom_cpu_decode, so that each of its
 * clones (LOOM_CPU_HOT) holds its own vector code for them; called, they ran the baseline's.
 * (Q6_K's is inlined into decode_q6_k_blocks instead, which has no AVX2 clone.) */

static inline float half(const float *f16, const uint8_t *p) {
    return f16[(uint16_t)(p[0] | (p[1] << 8))];
}

static inline __attribute__((always_inline)) void
decode_q8_0(const float *f16, const uint8_t *b, float *y) {
    const float d = half(f16, b);
    const int8_t *q = (const int8_t *)(b + 2);
    for (int i = 0; i < 32; i++) y[i] = (float)q[i] * d;
}

static inline __attribute__((always_inline)) void
decode_q4_k(const float *f16, const uint8_t *b, float *y) {
    const float d = half(f16, b), dmin = half(f16, b + 2);
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c low nibbles, 2c+1 high nibbles */
        int sc0, m0, sc1, m1;
        loom_k_scale_min(scales, 2 * c, &sc0, &m0);
        loom_k_scale_min(scales, 2 * c + 1, &sc1, &m1);
        const float d0 = d * (float)sc0, min0 = dmin * (float)m0;
        const float d1 = d * (float)sc1, min1 = dmin * (float)m1;
        const uint8_t *q = qs + 32 * c;
        float *y0 = y + 64 * c, *y1 = y0 + 32;
        for (int l = 0; l < 32; l++) {
            y0[l] = d0 * (float)(q[l] & 0x0f) - min0;
            y1[l] = d1 * (float)(q[l] >> 4) - min1;
        }
    }
}

static inline __attribute__((always_inline)) void
decode_q5_k(const float *f16, const uint8_t *b, float *y) {
    const float d = half(f16, b), dmin = half(f16, b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
    for (int c = 0; c < 4; c++) {
        const int j0 = 2 * c, j1 = 2 * c + 1;
        int sc0, m0, sc1, m1;
        loom_k_scale_min(scales, j0, &sc0, &m0);
        loom_k_scale_min(scales, j1, &sc1, &m1);
        const float d0 = d * (float)sc0, min0 = dmin * (float)m0;
        const float d1 = d * (float)sc1, min1 = dmin * (float)m1;
        const uint8_t *q = qs + 32 * c;
        float *y0 = y + 64 * c, *y1 = y0 + 32;
        for (int l = 0; l < 32; l++) {
            const int v0 = (q[l] & 0x0f) | (((qh[l] >> j0) & 1) << 4);
            const int v1 = (q[l] >> 4) | (((qh[l] >> j1) & 1) << 4);
            y0[l] = d0 * (float)v0 - min0;
            y1[l] = d1 * (float)v1 - min1;
        }
    }
}

static inline __attribute__((always_inline)) void
decode_q6_k(const float *f16, const uint8_t *b, float *y) {
    const float d = half(f16, b + 208);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int h = 0; h < 2; h++) { /* halves of 128 values */
        for (int g = 0; g < 2; g++) { /* l in [16g, 16g + 16): one scale per 16 values */
            const float d0 = d * (float)sc[8 * h + g], d1 = d * (float)sc[8 * h + g + 2];
            const float d2 = d * (float)sc[8 * h + g + 4], d3 = d * (float)sc[8 * h + g + 6];
            for (int l = 16 * g; l < 16 * g + 16; l++) {
                const int q0 = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
                const int q1 = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
                const int q2 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                const int q3 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                y[l] = d0 * (float)(q0 - 32);
                y[l + 32] = d1 * (float)(q1 - 32);
                y[l + 64] = d2 * (float)(q2 - 32);
                y[l + 96] = d3 * (float)(q3 - 32);
            }
        }
        y += 128;
        ql += 64;
        qh += 32;
    }
}

/* Q6_K's blocks in the baseline instruction set even when the AVX2 clone of loom_cpu_decode
 * calls them: GCC's AVX2 form of this decoder ran ~10% slower (bench/cpu_bench, bench/NOTES.md 8
 * "Session 24"); no other type's measured slower beyond the machine's ~5% noise. */
static __attribute__((noinline)) void decode_q6_k_blocks(const float *f16, const uint8_t *b,
                                                         float *y, int64_t n_blocks) {
    for (int64_t i = 0; i < n_blocks; i++) decode_q6_k(f16, b + 210 * i, y + 256 * i);
}

LOOM_CPU_HOT void loom_cpu_decode(loom_ggml_type type, const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const float *f16 = loom_cpu_f16_table();
    switch (type) {
    case LOOM_GGML_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    case LOOM_GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = half(f16, b + 2 * i);
        return;
    case LOOM_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
            memcpy(&dst[i], &u, sizeof u);
        }
        return;
    case LOOM_GGML_Q8_0:
        LOOM_ASSERT(n % 32 == 0);
        for (int64_t i = 0; i < n / 32; i++) decode_q8_0(f16, b + 34 * i, dst + 32 * i);
        return;
    case LOOM_GGML_Q4_K:
        LOOM_ASSERT(n % 256 == 0);
        for (int64_t i = 0; i < n / 256; i++) decode_q4_k(f16, b + 144 * i, dst + 256 * i);
        return;
    case LOOM_GGML_Q5_K:
        LOOM_ASSERT(n % 256 == 0);
        for (int64_t i = 0; i < n / 256; i++) decode_q5_k(f16, b + 176 * i, dst + 256 * i);
        return;
    case LOOM_GGML_Q6_K:
        LOOM_ASSERT(n % 256 == 0);
        decode_q6_k_blocks(f16, b, dst, n / 256);
        return;
    default:
        LOOM_ASSERT(!"loom_cpu_decode: type not checked by loom_cpu_check_weight");
    }
}
