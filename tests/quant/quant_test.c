/* quant_test.c: kernels/quant reference (de)quantization.
 *
 * - half/bfloat16 conversions against known bit patterns (rounding ties, subnormals, overflow,
 *   NaN) and the round trip of every half;
 * - hand-built blocks of every type with known decoded values: single-field probes that pin
 *   down where each bit of ggml's layouts lands, plus full blocks with every scale/min distinct;
 * - quantize -> dequantize of Gaussian data within the per-type error bounds below;
 * - loom_dot_row == dot(dequantize(row), x) within float accumulation error;
 * - argument errors.
 *
 * Error bounds (rms(dequant(quant(x)) - x) / rms(x) for x ~ N(0, s^2), s in {1e-3, 0.02, 1,
 * 300}; measured values in parentheses, ggml's reference quantizers measure about the same or
 * slightly worse: 0.0054 / 0.0178 / 0.036 / 0.071 on the golden tiny_llama weights):
 *     F32 0 (exact)   F16 5e-4 (2.1e-4)   BF16 4e-3 (1.7e-3)   Q8_0 0.008 (0.0054)
 *     Q6_K 0.025 (0.0176; 0.019 at s = 1e-3, where d is a subnormal half)
 *     Q5_K 0.045 (0.035)   Q4_K 0.085 (0.070)
 * Each quantized type must also show a non-zero error above a floor (a "quantizer" that copied
 * floats through some other path would fail).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant/quant.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53; }

static float rng_gauss(void) {
    return (float)(sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform()));
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static float f32_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- half / bfloat16 --------------------------------------------------------------------- */

typedef struct { uint16_t h; float f; } half_case;

Test(fp16, decodes_known_patterns) {
    static const half_case cases[] = {
        {0x0000, 0.0f},          {0x3c00, 1.0f},          {0xc000, -2.0f},
        {0x3555, 0.333251953125f}, {0x7bff, 65504.0f},    {0x0400, 0x1p-14f},
        {0x0001, 0x1p-24f},      {0x03ff, 1023 * 0x1p-24f}, {0x7c00, INFINITY},
        {0xfc00, -INFINITY},     {0x3800, 0.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(loom_fp16_to_fp32(cases[i].h), cases[i].f, "half 0x%04x", cases[i].h);
    cr_expect_eq(bits_of_f32(loom_fp16_to_fp32(0x8000)), 0x80000000u, "negative zero");
    cr_expect(isnan(loom_fp16_to_fp32(0x7e00)));
    cr_expect(isnan(loom_fp16_to_fp32(0xfc01)));
}

Test(fp16, encodes_with_round_to_nearest_even) {
    static const half_case cases[] = {
        {0x3c00, 1.0f},
        {0x3c00, 1.0f + 0x1p-11f},          /* tie between 0x3c00 and 0x3c01: even */
        {0x3c02, 1.0f + 3 * 0x1p-11f},      /* tie between 0x3c01 and 0x3c02: even */
        {0x3c01, 1.0f + 0x1p-11f + 0x1p-20f}, /* just above the tie */
        {0x7bff, 65504.0f},
        {0x7bff, 65519.99f},
        {0x7c00, 65520.0f},                 /* tie with 65536: rounds to infinity */
        {0x7c00, 1e10f},
        {0xfc00, -1e10f},
        {0x0001, 0x1p-24f},
        {0x0000, 0x1p-25f},                 /* tie with zero: even */
        {0x0001, 0x1p-25f * 1.0001f},
        {0x0002, 3 * 0x1p-25f},             /* tie between 1 and 2: even */
        {0x0400, 0x1p-14f},
        {0x0400, 0x1p-14f - 0x1p-25f},      /* rounds up into the smallest normal */
        {0x3555, 1.0f / 3.0f},
        {0x8000, -0.0f},
        {0x0000, 1e-30f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(loom_fp32_to_fp16(cases[i].f), cases[i].h, "%a -> 0x%04x, want 0x%04x",
                     (double)cases[i].f, loom_fp32_to_fp16(cases[i].f), cases[i].h);
    uint16_t n = loom_fp32_to_fp16(NAN);
    cr_expect((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0, "NaN stays NaN: 0x%04x", n);
}

Test(fp16, every_half_round_trips) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = loom_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) {
            cr_assert(isnan(loom_fp16_to_fp32(loom_fp32_to_fp16(f))));
            continue;
        }
        cr_assert_eq(loom_fp32_to_fp16(f), h, "half 0x%04x", h);
    }
}

Test(bf16, converts_with_round_to_nearest_even) {
    cr_expect_eq(loom_bf16_to_fp32(0x3f80), 1.0f);
    cr_expect_eq(loom_bf16_to_fp32(0xc040), -3.0f);
    cr_expect_eq(loom_fp32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(loom_fp32_to_bf16(f32_of_bits(0x3f808000)), 0x3f80); /* tie: even */
    cr_expect_eq(loom_fp32_to_bf16(f32_of_bits(0x3f818000)), 0x3f82); /* tie: even */
    cr_expect_eq(loom_fp32_to_bf16(f32_of_bits(0x3f808001)), 0x3f81);
    cr_expect_eq(loom_fp32_to_bf16(INFINITY), 0x7f80);
    cr_expect_eq(loom_fp32_to_bf16(f32_of_bits(0x7f7fffff)), 0x7f80); /* FLT_MAX rounds up */
    uint16_t n = loom_fp32_to_bf16(NAN);
    cr_expect((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0, "NaN stays NaN: 0x%04x", n);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = loom_bf16_to_fp32((uint16_t)h);
        if (!isnan(f)) cr_assert_eq(loom_fp32_to_bf16(f), h, "bf16 0x%04x", h);
    }
}

/* ---- hand-built blocks: single-field probes ---------------------------------------------- */

/* A block whose base decodes to `base` everywhere; setting byte `off` to `val` must change
 * exactly values index..index+count-1 to `want`. */
typedef struct {
    loom_ggml_type type;
    int off;
    uint8_t val;
    int index;
    float want;
    int count;
} probe_case;

enum { MAXB = 256 };

/* Base blocks: d = 1, every sub-block scale 1, min 0, all quants 0. */
static void base_block(loom_ggml_type type, uint8_t *b, float *base) {
    memset(b, 0, 256);
    switch (type) {
    case LOOM_GGML_Q8_0:
        put_u16(b, 0x3c00);
        *base = 0.0f;
        break;
    case LOOM_GGML_Q4_K:
    case LOOM_GGML_Q5_K:
        put_u16(b, 0x3c00);                       /* d = 1 */
        put_u16(b + 2, 0x3800);                   /* dmin = 0.5, but every min is 0 */
        for (int j = 0; j < 4; j++) b[4 + j] = 1; /* scales 0..3 = 1 */
        for (int j = 0; j < 4; j++) b[12 + j] = 1; /* scales 4..7 low nibble = 1, mins 0 */
        *base = 0.0f;
        break;
    case LOOM_GGML_Q6_K:
        for (int j = 0; j < 16; j++) b[192 + j] = 1; /* int8 scales = 1 */
        put_u16(b + 208, 0x3c00);                    /* d = 1 */
        *base = -32.0f;                              /* q = 0 decodes to -32 */
        break;
    default: cr_assert_fail("no base block for type %d", type);
    }
}

Test(blocks, single_field_probes_land_where_ggml_puts_them) {
    static const probe_case cases[] = {
        /* Q8_0: f16 d then int8 qs[32] */
        {LOOM_GGML_Q8_0, 2, 5, 0, 5.0f, 1},
        {LOOM_GGML_Q8_0, 33, 0x80, 31, -128.0f, 1},
        /* Q4_K: qs at byte 16; chunk c of 32 bytes: low nibble -> sub-block 2c, high -> 2c+1 */
        {LOOM_GGML_Q4_K, 16 + 0, 0x05, 0, 5.0f, 1},
        {LOOM_GGML_Q4_K, 16 + 0, 0x50, 32, 5.0f, 1},
        {LOOM_GGML_Q4_K, 16 + 31, 0x0f, 31, 15.0f, 1},
        {LOOM_GGML_Q4_K, 16 + 32, 0x03, 64, 3.0f, 1},
        {LOOM_GGML_Q4_K, 16 + 33, 0x30, 97, 3.0f, 1},
        {LOOM_GGML_Q4_K, 16 + 127, 0x70, 255, 7.0f, 1},
        /* Q4_K scales: byte 4+j = scale j (j<4); with all quants 0 a min shows as -dmin*m */
        {LOOM_GGML_Q4_K, 4 + 4, 0x03, 0, -1.5f, 32},    /* min of sub-block 0 = 3 -> -0.5*3 */
        {LOOM_GGML_Q4_K, 4 + 7, 0x02, 96, -1.0f, 32},   /* min of sub-block 3 */
        {LOOM_GGML_Q4_K, 4 + 11, 0x21, 224, -1.0f, 32}, /* high nibble of byte 11: min 7 */
        {LOOM_GGML_Q4_K, 4 + 4, 0x40, 128, -8.0f, 32},  /* bits 6-7 of byte 4: min 4 = 16 */
        {LOOM_GGML_Q4_K, 4 + 0, 0x02, 0, 0.0f, 32},     /* scale of sub-block 0 (no quants: 0) */
        {LOOM_GGML_Q5_K, 4 + 5, 0x01, 32, -0.5f, 32},   /* min of sub-block 1 */
        {LOOM_GGML_Q5_K, 4 + 9, 0x30, 160, -1.5f, 32},  /* min of sub-block 5, low bits */
        /* Q5_K: qh at byte 16 (bit j of qh[l] = bit 4 of value l of sub-block j), qs at 48 */
        {LOOM_GGML_Q5_K, 16 + 0, 0x01, 0, 16.0f, 1},
        {LOOM_GGML_Q5_K, 16 + 0, 0x02, 32, 16.0f, 1},
        {LOOM_GGML_Q5_K, 16 + 5, 0x80, 229, 16.0f, 1},
        {LOOM_GGML_Q5_K, 16 + 31, 0x10, 159, 16.0f, 1},
        {LOOM_GGML_Q5_K, 48 + 1, 0x0a, 1, 10.0f, 1},
        {LOOM_GGML_Q5_K, 48 + 127, 0xf0, 255, 15.0f, 1},
        /* Q6_K: ql[128], qh[64], int8 scales[16], f16 d; values are d*scale*(q-32) */
        {LOOM_GGML_Q6_K, 0, 0x01, 0, -31.0f, 1},
        {LOOM_GGML_Q6_K, 0, 0x10, 64, -31.0f, 1},
        {LOOM_GGML_Q6_K, 32, 0x01, 32, -31.0f, 1},
        {LOOM_GGML_Q6_K, 32, 0x10, 96, -31.0f, 1},
        {LOOM_GGML_Q6_K, 64, 0x01, 128, -31.0f, 1},
        {LOOM_GGML_Q6_K, 127, 0xf0, 255, -17.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 0, 0x01, 0, -16.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 0, 0x04, 32, -16.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 0, 0x10, 64, -16.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 0, 0x40, 96, -16.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 32, 0x01, 128, -16.0f, 1},
        {LOOM_GGML_Q6_K, 128 + 63, 0xc0, 255, 16.0f, 1},
        {LOOM_GGML_Q6_K, 192 + 3, 0xfe, 48, 64.0f, 16}, /* scale -2 on sub-block 3: -2 * -32 */
        {LOOM_GGML_Q6_K, 192 + 15, 0x00, 240, 0.0f, 16}, /* scale 0 on sub-block 15 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const probe_case *p = &cases[c];
        const loom_ggml_type_info *ti = loom_ggml_type_get(p->type);
        uint8_t b[256];
        float base, y[MAXB];
        base_block(p->type, b, &base);
        if (p->off >= 4 && p->off < 16 && p->type != LOOM_GGML_Q6_K)
            b[p->off] |= p->val; /* scale bytes: keep the base scales */
        else
            b[p->off] = p->val;
        cr_assert_eq(loom_dequantize_row(p->type, b, y, ti->block_size), LOOM_OK);
        int count = p->count;
        for (int i = 0; i < ti->block_size; i++) {
            float want = i >= p->index && i < p->index + count ? p->want : base;
            cr_assert_eq(y[i], want, "case %zu (%s byte %d = 0x%02x): value %d is %g, want %g", c,
                         ti->name, p->off, p->val, i, (double)y[i], (double)want);
        }
    }
}

/* ---- hand-built blocks: full blocks with distinct scales --------------------------------- */

/* Packs 6-bit scales/mins the way ggml's comment draws it (bytes 0-3 scale lo6 | scale[4+j]
 * hi2, bytes 4-7 min lo6 | min[4+j] hi2, bytes 8-11 scale[4+j] lo4 | min[4+j] lo4 << 4). */
static void pack_6bit(uint8_t *s, const int *sc, const int *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[4 + j] >> 4) << 6));
        s[4 + j] = (uint8_t)(m[j] | ((m[4 + j] >> 4) << 6));
        s[8 + j] = (uint8_t)((sc[4 + j] & 15) | ((m[4 + j] & 15) << 4));
    }
}

static const int SC[8] = {1, 2, 3, 15, 17, 33, 50, 63};
static const int MN[8] = {0, 1, 63, 3, 20, 40, 62, 5};

Test(blocks, q4_k_full_block) {
    uint8_t b[144];
    put_u16(b, 0x3800);     /* d = 0.5 */
    put_u16(b + 2, 0x3400); /* dmin = 0.25 */
    pack_6bit(b + 4, SC, MN);
    for (int i = 0; i < 128; i++) b[16 + i] = (uint8_t)((i * 7 + 3) & 0xff);
    float y[256];
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_Q4_K, b, y, 256), LOOM_OK);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            uint8_t byte = b[16 + 32 * (j / 2) + l];
            int q = (j & 1) ? byte >> 4 : byte & 15;
            float want = 0.5f * SC[j] * q - 0.25f * MN[j];
            cr_assert_eq(y[32 * j + l], want, "sub-block %d value %d", j, l);
        }
}

Test(blocks, q5_k_full_block) {
    uint8_t b[176];
    put_u16(b, 0x3c00);     /* d = 1 */
    put_u16(b + 2, 0x3800); /* dmin = 0.5 */
    pack_6bit(b + 4, SC, MN);
    for (int i = 0; i < 32; i++) b[16 + i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 128; i++) b[48 + i] = (uint8_t)((i * 13 + 5) & 0xff);
    float y[256];
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_Q5_K, b, y, 256), LOOM_OK);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            uint8_t byte = b[48 + 32 * (j / 2) + l];
            int q = ((j & 1) ? byte >> 4 : byte & 15) | (((b[16 + l] >> j) & 1) << 4);
            float want = (float)SC[j] * q - 0.5f * MN[j];
            cr_assert_eq(y[32 * j + l], want, "sub-block %d value %d", j, l);
        }
}

Test(blocks, q6_k_full_block) {
    uint8_t b[210];
    for (int i = 0; i < 128; i++) b[i] = (uint8_t)(i * 29 + 7);
    for (int i = 0; i < 64; i++) b[128 + i] = (uint8_t)(i * 53 + 1);
    for (int j = 0; j < 16; j++) b[192 + j] = (uint8_t)(int8_t)(j * 17 - 128);
    put_u16(b + 208, 0x3400); /* d = 0.25 */
    float y[256];
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_Q6_K, b, y, 256), LOOM_OK);
    /* ggml's loop: for each half, l in 0..31, four values l, l+32, l+64, l+96 */
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
            int q[4] = {
                (ql[l] & 15) | ((qh[l] & 3) << 4),
                (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
            };
            for (int k = 0; k < 4; k++) {
                int v = 128 * h + 32 * k + l;
                float want = 0.25f * (float)(int8_t)b[192 + v / 16] * (float)(q[k] - 32);
                cr_assert_eq(y[v], want, "value %d", v);
            }
        }
}

Test(blocks, q8_0_and_plain_rows) {
    uint8_t b[68];
    put_u16(b, 0x3800); /* d = 0.5 */
    put_u16(b + 34, 0xc000); /* d = -2 */
    for (int i = 0; i < 32; i++) {
        b[2 + i] = (uint8_t)(int8_t)(i * 8 - 128);
        b[36 + i] = (uint8_t)(int8_t)(i - 16);
    }
    float y[64];
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_Q8_0, b, y, 64), LOOM_OK);
    for (int i = 0; i < 32; i++) {
        cr_assert_eq(y[i], 0.5f * (float)(i * 8 - 128));
        cr_assert_eq(y[32 + i], -2.0f * (float)(i - 16));
    }
    /* F16 / BF16 / F32 rows, read from an odd address (rows need no alignment) */
    uint8_t raw[1 + 8];
    put_u16(raw + 1, 0x3c00);
    put_u16(raw + 3, 0xc000);
    put_u16(raw + 5, 0x3555);
    put_u16(raw + 7, 0x7c00);
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_F16, raw + 1, y, 4), LOOM_OK);
    cr_expect(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0.333251953125f && isinf(y[3]));
    put_u16(raw + 1, 0x3f80);
    put_u16(raw + 3, 0xc040);
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_BF16, raw + 1, y, 2), LOOM_OK);
    cr_expect(y[0] == 1.0f && y[1] == -3.0f);
    float f[2] = {1.5f, -7.25f};
    memcpy(raw + 1, f, 8);
    cr_assert_eq(loom_dequantize_row(LOOM_GGML_F32, raw + 1, y, 2), LOOM_OK);
    cr_expect(y[0] == 1.5f && y[1] == -7.25f);
}

/* ---- quantize -> dequantize -------------------------------------------------------------- */

typedef struct {
    loom_ggml_type type;
    double max_rel_rms; /* upper bound, see the table at the top */
    double min_rel_rms; /* a real quantizer of this type loses at least this much */
} bound_case;

static const bound_case bounds[] = {
    {LOOM_GGML_F32, 0.0, 0.0},      {LOOM_GGML_F16, 5e-4, 1e-4},    {LOOM_GGML_BF16, 4e-3, 1e-3},
    {LOOM_GGML_Q8_0, 0.008, 0.002}, {LOOM_GGML_Q6_K, 0.025, 0.008}, {LOOM_GGML_Q5_K, 0.045, 0.015},
    {LOOM_GGML_Q4_K, 0.085, 0.03},
};

Test(roundtrip, gaussian_error_within_bounds) {
    enum { N = 256 * 64 };
    static const float sigmas[] = {1e-3f, 0.02f, 1.0f, 300.0f};
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * sizeof(float));
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++)
        for (size_t s = 0; s < sizeof sigmas / sizeof sigmas[0]; s++) {
            rng_state = 1000 * c + s;
            for (int i = 0; i < N; i++) x[i] = sigmas[s] * rng_gauss();
            const char *name = loom_ggml_type_get(bounds[c].type)->name;
            cr_assert_eq(loom_quantize_row(bounds[c].type, x, q, N), LOOM_OK, "%s", name);
            cr_assert_eq(loom_dequantize_row(bounds[c].type, q, y, N), LOOM_OK, "%s", name);
            double se = 0, sx = 0;
            for (int i = 0; i < N; i++) {
                se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
                sx += (double)x[i] * x[i];
            }
            double rel = sqrt(se / sx);
            cr_expect(rel <= bounds[c].max_rel_rms && rel >= bounds[c].min_rel_rms,
                      "%s sigma %g: relative rms error %.5f outside [%g, %g]", name,
                      (double)sigmas[s], rel, bounds[c].min_rel_rms, bounds[c].max_rel_rms);
        }
    free(x);
    free(y);
    free(q);
}

Test(roundtrip, special_inputs) {
    /* zeros stay exactly zero; a constant block and a lone spike are reproduced closely */
    float x[256], y[256];
    uint8_t q[1024];
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        loom_ggml_type t = bounds[c].type;
        const char *name = loom_ggml_type_get(t)->name;
        memset(x, 0, sizeof x);
        cr_assert_eq(loom_quantize_row(t, x, q, 256), LOOM_OK);
        cr_assert_eq(loom_dequantize_row(t, q, y, 256), LOOM_OK);
        for (int i = 0; i < 256; i++) cr_assert_eq(y[i], 0.0f, "%s zeros: value %d", name, i);

        for (int i = 0; i < 256; i++) x[i] = 0.75f;
        loom_quantize_row(t, x, q, 256);
        loom_dequantize_row(t, q, y, 256);
        for (int i = 0; i < 256; i++)
            cr_assert(fabsf(y[i] - 0.75f) <= 0.75f * 2e-3f, "%s constant: value %d = %g", name, i,
                      (double)y[i]);

        memset(x, 0, sizeof x);
        x[77] = -5.0f;
        loom_quantize_row(t, x, q, 256);
        loom_dequantize_row(t, q, y, 256);
        for (int i = 0; i < 256; i++)
            cr_assert(fabsf(y[i] - x[i]) <= 5.0f * 2e-3f, "%s spike: value %d = %g", name, i,
                      (double)y[i]);
    }
}

Test(roundtrip, deterministic_and_requantizing_decoded_values_is_near_lossless) {
    /* the decoded row is exactly representable, so quantizing it again should (nearly) find it */
    float x[256], y[256], z[256];
    uint8_t q1[1024], q2[1024];
    rng_state = 42;
    for (int i = 0; i < 256; i++) x[i] = rng_gauss();
    static const loom_ggml_type types[] = {LOOM_GGML_Q8_0, LOOM_GGML_Q6_K};
    for (size_t c = 0; c < 2; c++) {
        cr_assert_eq(loom_quantize_row(types[c], x, q1, 256), LOOM_OK);
        cr_assert_eq(loom_quantize_row(types[c], x, q2, 256), LOOM_OK);
        cr_assert_eq(memcmp(q1, q2, (size_t)loom_ggml_row_bytes(types[c], 256)), 0);
        loom_dequantize_row(types[c], q1, y, 256);
        loom_quantize_row(types[c], y, q2, 256);
        loom_dequantize_row(types[c], q2, z, 256);
        double se = 0, sy = 0;
        for (int i = 0; i < 256; i++) {
            se += ((double)z[i] - y[i]) * ((double)z[i] - y[i]);
            sy += (double)y[i] * y[i];
        }
        cr_expect(sqrt(se / sy) < 1e-3, "%s requantization error %g",
                  loom_ggml_type_get(types[c])->name, sqrt(se / sy));
    }
}

Test(roundtrip, non_finite_input_is_memory_safe) {
    float x[256], y[256];
    uint8_t q[1024];
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        for (int i = 0; i < 256; i++) x[i] = (float)i;
        x[3] = NAN;
        x[100] = INFINITY;
        x[200] = -INFINITY;
        cr_assert_eq(loom_quantize_row(bounds[c].type, x, q, 256), LOOM_OK);
        cr_assert_eq(loom_dequantize_row(bounds[c].type, q, y, 256), LOOM_OK);
    }
}

/* ---- dot --------------------------------------------------------------------------------- */

Test(dot, equals_dot_of_dequantized_row) {
    enum { N = 256 * 12 };
    float *a = malloc(N * sizeof(float)), *x = malloc(N * sizeof(float)), *d = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * sizeof(float));
    rng_state = 7;
    for (int i = 0; i < N; i++) {
        a[i] = 0.02f * rng_gauss();
        x[i] = rng_gauss();
    }
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        loom_ggml_type t = bounds[c].type;
        for (int64_t n = 256; n <= N; n += N - 256) { /* one super-block, then the whole row */
            cr_assert_eq(loom_quantize_row(t, a, q, n), LOOM_OK);
            cr_assert_eq(loom_dequantize_row(t, q, d, n), LOOM_OK);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)d[i] * x[i];
                mag += fabs((double)d[i] * x[i]);
            }
            float got = loom_dot_row(t, q, x, n);
            double tol = mag * (double)n * 0x1p-24 + 1e-30;
            cr_expect(fabs(got - ref) <= tol, "%s n=%lld: dot %.9g, reference %.9g (tol %g)",
                      loom_ggml_type_get(t)->name, (long long)n, (double)got, ref, tol);
        }
    }
    free(a);
    free(x);
    free(d);
    free(q);
}

Test(dot, picks_up_every_value) {
    /* a one-hot x reads back each dequantized value exactly */
    float a[256], x[256] = {0}, d[256];
    uint8_t q[1024];
    rng_state = 9;
    for (int i = 0; i < 256; i++) a[i] = rng_gauss();
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        loom_ggml_type t = bounds[c].type;
        loom_quantize_row(t, a, q, 256);
        loom_dequantize_row(t, q, d, 256);
        for (int i = 0; i < 256; i += 17) {
            x[i] = 1.0f;
            cr_assert_eq(loom_dot_row(t, q, x, 256), d[i], "%s index %d", loom_ggml_type_get(t)->name, i);
            x[i] = 0.0f;
        }
    }
}

/* ---- argument errors --------------------------------------------------------------------- */

Test(errors, unsupported_types_and_bad_lengths) {
    float x[512] = {0};
    uint8_t q[2048] = {0};
    cr_expect_eq(loom_dequantize_row(LOOM_GGML_Q4_0, q, x, 32), LOOM_ERR_UNSUPPORTED);
    cr_expect_eq(loom_quantize_row(LOOM_GGML_Q4_0, x, q, 32), LOOM_ERR_UNSUPPORTED);
    cr_expect_eq(loom_dequantize_row(LOOM_GGML_IQ2_XXS, q, x, 256), LOOM_ERR_UNSUPPORTED);
    cr_expect_eq(loom_dequantize_row((loom_ggml_type)4, q, x, 32), LOOM_ERR_UNSUPPORTED);
    cr_expect_eq(loom_dequantize_row((loom_ggml_type)999, q, x, 32), LOOM_ERR_UNSUPPORTED);
    cr_expect_eq(loom_dequantize_row(LOOM_GGML_Q4_K, q, x, 255), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_quantize_row(LOOM_GGML_Q8_0, x, q, 33), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_quantize_row(LOOM_GGML_Q6_K, x, q, -256), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_dequantize_row(LOOM_GGML_F16, NULL, x, 2), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_dequantize_row(LOOM_GGML_F16, NULL, NULL, 0), LOOM_OK);
    cr_expect_eq(loom_quantize_row(LOOM_GGML_Q8_0, x, q, 0), LOOM_OK);
}
