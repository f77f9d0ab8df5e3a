/* quant.c: CPU reference (de)quantization and dot products for F32, F16, BF16, Q8_0, Q4_K, Q5_K
 * and Q6_K, bit-compatible with ggml's block layouts (see quant.h).
 *
 * Invariants and conventions:
 * - Blocks are read and written through byte pointers with explicit little-endian 16-bit loads,
 *   so rows need no alignment (GGUF data is used in place) and the code is endian-independent.
 * - Dequantization follows ggml's formulas operation by operation in float32 (no fused
 *   multiply-add is asked for; -std=c11 keeps gcc from contracting), so it is bit-identical to
 *   ggml's and gguf-py's dequantizers: Q8_0 x = d*q; Q4_K/Q5_K x = (d*sc)*q - (dmin*m);
 *   Q6_K x = (d*sc)*(q-32).
 * - Quantizers are our own implementation of ggml's reference approach, at least as accurate
 *   (tests/quant/golden_test.c checks every tensor of ggml-quantized golden models):
 *     Q8_0  d = absmax/127 stored as f16, each value rounded against the *stored* d (ggml rounds
 *           against the unrounded d), so every value's error is <= ggml's.
 *     Q4_K/Q5_K  per 32-value sub-block a weighted least-squares fit of x ~ scale*l - min
 *           (weights rms(x)+|x|) over a grid of candidate scales (like ggml's make_qkx2_quants);
 *           scales and mins are then quantized to 6 bits against the super-block maxima, and
 *           finally each sub-block tries its 6-bit scale and min +-1 and keeps the pair with the
 *           lowest squared error (the pair ggml would store is candidate 0, so this step only
 *           ever lowers the error).
 *     Q6_K  per 16-value sub-block a symmetric fit over 19 candidate scales weighted by x^2 (like
 *           make_qx_quants), int8 sub-block scales against the largest one, then the same +-1
 *           refinement of each int8 scale.
 * - Speed (loom mkmodel quantizes billions of values): the scale searches evaluate all their
 *   candidates at once, one vector lane per candidate, and are also compiled for AVX2 (same
 *   results bit for bit). About 37 / 32 / 26 M values/s per core for Q4_K / Q5_K / Q6_K.
 * - Non-finite inputs to a quantizer give unspecified block contents but never undefined
 *   behaviour or out-of-range codes (rounding is clamped before any float->int conversion).
 */
#include <math.h>
#include <string.h>

#include "kernels/quant/quant.h"

/* ---- half and bfloat16 ------------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float loom_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf / NaN (payload kept) */
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t loom_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* quiet NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000u) {
        /* normal half: rebias the exponent, round the 13 dropped bits to nearest even; a carry
         * out of the mantissa correctly bumps the exponent */
        uint32_t r = ax - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) return sign; /* <= 2^-25 rounds to zero (2^-25 itself ties to even 0) */
    /* subnormal half: value / 2^-24 = mant * 2^(e - 126), a right shift by 14..24 bits */
    uint32_t e = ax >> 23;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

float loom_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t loom_fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint64_t r = (uint64_t)x + 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(r >> 16);
}

/* ---- byte helpers ------------------------------------------------------------------------ */

static inline uint16_t load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline void store_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static inline float load_f16(const uint8_t *p) { return loom_fp16_to_fp32(load_u16(p)); }

/* f16 of v, saturated to the largest finite half instead of overflowing to infinity. */
static inline uint16_t f16_saturate(float v) {
    if (v > 65504.0f) v = 65504.0f;
    if (v < -65504.0f) v = -65504.0f;
    return loom_fp32_to_fp16(v);
}

/* Round to nearest, ties to even (the default FP rounding mode), defined for every input:
 * the value is clamped to +-2^22 first (NaN becomes -2^22) so the conversion cannot overflow. */
static inline int round_nearest(float v) {
    if (!(v >= -4194304.0f)) v = -4194304.0f; /* also catches NaN */
    if (v > 4194304.0f) v = 4194304.0f;
    return (int)((v + 12582912.0f) - 12582912.0f);
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Byte offsets inside the blocks (ggml's layouts; see quant.h). */
enum {
    Q8_0_BYTES = 34,
    QK_SUB = 32,           /* Q4_K/Q5_K sub-block */
    Q4K_D = 0, Q4K_DMIN = 2, Q4K_SCALES = 4, Q4K_QS = 16, Q4K_BYTES = 144,
    Q5K_D = 0, Q5K_DMIN = 2, Q5K_SCALES = 4, Q5K_QH = 16, Q5K_QS = 48, Q5K_BYTES = 176,
    Q6K_QL = 0, Q6K_QH = 128, Q6K_SCALES = 192, Q6K_D = 208, Q6K_BYTES = 210,
};

static void pack_scale_min(uint8_t *s, const int *sc, const int *m) {
    memset(s, 0, LOOM_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] |= (uint8_t)(sc[j] & 63);
            s[j + 4] |= (uint8_t)(m[j] & 63);
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

/* ---- dequantization of one block --------------------------------------------------------- */

static void dequant_q8_0(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const int8_t *q = (const int8_t *)(b + 2);
    for (int i = 0; i < LOOM_QK8_0; i++) y[i] = (float)q[i] * d;
}

/* Q4_K: 4 chunks of 32 bytes; chunk c holds sub-block 2c in the low nibbles and 2c+1 in the
 * high nibbles. */
static void dequant_q4_k(const uint8_t *b, float *y) {
    float d = load_f16(b + Q4K_D), dmin = load_f16(b + Q4K_DMIN);
    const uint8_t *qs = b + Q4K_QS;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        loom_k_scale_min(b + Q4K_SCALES, j, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = 4 * (j & 1);
        for (int l = 0; l < QK_SUB; l++) y[32 * j + l] = dl * (float)((q[l] >> shift) & 0x0f) - ml;
    }
}

/* Q5_K: Q4_K's low 4 bits plus bit j of qh[l] as bit 4 of value l of sub-block j. */
static void dequant_q5_k(const uint8_t *b, float *y) {
    float d = load_f16(b + Q5K_D), dmin = load_f16(b + Q5K_DMIN);
    const uint8_t *qs = b + Q5K_QS, *qh = b + Q5K_QH;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        loom_k_scale_min(b + Q5K_SCALES, j, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = 4 * (j & 1);
        for (int l = 0; l < QK_SUB; l++) {
            int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
            y[32 * j + l] = dl * (float)v - ml;
        }
    }
}

/* Q6_K: two halves of 128 values. In half h, value r (0..127) has its low 4 bits in
 * ql[64h + r%64] (low nibble if r<64, else high) and its high 2 bits in qh[32h + r%32] at bit
 * 2*(r/32); sub-block scale scales[v/16], value = d*scale*(q - 32). */
static void dequant_q6_k(const uint8_t *b, float *y) {
    float d = load_f16(b + Q6K_D);
    const int8_t *scales = (const int8_t *)(b + Q6K_SCALES);
    for (int v = 0; v < LOOM_QK_K; v++) {
        int h = v / 128, r = v % 128;
        int lo = (b[Q6K_QL + 64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
        int hi = (b[Q6K_QH + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dl = d * (float)scales[v / 16];
        y[v] = dl * (float)((lo | (hi << 4)) - 32);
    }
}

/* ---- quantization ------------------------------------------------------------------------ */

static void quant_q8_0(const float *x, uint8_t *b) {
    float amax = 0.0f;
    for (int i = 0; i < LOOM_QK8_0; i++) amax = fmaxf(amax, fabsf(x[i]));
    uint16_t dh = f16_saturate(amax / 127.0f);
    float d = loom_fp16_to_fp32(dh);
    store_u16(b, dh);
    int8_t *q = (int8_t *)(b + 2);
    for (int i = 0; i < LOOM_QK8_0; i++)
        q[i] = (int8_t)(d > 0.0f ? clamp_int(round_nearest(x[i] / d), -127, 127) : 0);
}

/* The quantizers' inner loops run over float levels in LANES independent partial sums, a shape
 * the compiler turns into SIMD code (levels are rounded with the 1.5*2^23 trick, clamped with
 * comparisons, so no float->int conversion happens in the hot loops). */
enum { LANES = 8 };

/* The quantizers' inner loops are also compiled for AVX2 and picked at load time (gcc's target_clones,
 * x86-64 only). Results are bit-identical either way: no reassociation, no FMA contraction
 * (-std=c11 turns contraction off), and LANES partial sums in the same order. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIMD_CLONES
#endif

/* round-to-nearest-even of t (|t| < 2^22), clamped to [lo, hi]; NaN stays NaN */
static inline float level(float t, float lo, float hi) {
    float r = (t + 12582912.0f) - 12582912.0f;
    r = r < lo ? lo : r;
    return r > hi ? hi : r;
}

static inline float lane_sum(const float *a) {
    float s = 0.0f;
    for (int k = 0; k < LANES; k++) s += a[k];
    return s;
}

/* Weighted least-squares fit of one 32-value sub-block as x[i] ~ scale*L[i] - min_out (L in
 * 0..nmax, min_out >= 0). Candidate 0 is the plain range mapping (scale (max-lo)/nmax, offset
 * lo); candidates 1..nstep+1 are grid densities (nmax + rmin + rdelta*k)/(max - lo), for each
 * of which the levels are assigned by rounding and the 2x2 normal equations give scale and
 * offset (offset forced to <= 0: the range always covers zero, as the format stores a
 * non-negative min). The fit of lowest weighted squared error wins (evaluated in closed form
 * from the same sums; the earlier candidate on ties). The loops run across candidates, so the
 * sums vectorize without horizontal reductions. Returns the scale. */
enum { MAX_CAND = 24 };

SIMD_CLONES static float fit_affine(const float *x, const float *w, int nmax, float rmin, float rdelta,
                                    int nstep, float *min_out) {
    float lo = x[0], hi = x[0], sw = 0.0f, swx = 0.0f, swxx = 0.0f;
    for (int i = 0; i < QK_SUB; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sw += w[i];
        swx += w[i] * x[i];
        swxx += w[i] * x[i] * x[i];
    }
    if (lo > 0.0f) lo = 0.0f;
    if (!(hi > lo)) { /* constant (non-positive) sub-block, or NaN */
        *min_out = -lo;
        return 0.0f;
    }
    LOOM_ASSERT(nstep + 2 <= MAX_CAND);
    const float fmax_l = (float)nmax;
    float ik[MAX_CAND], sl[MAX_CAND] = {0}, sll[MAX_CAND] = {0}, sxl[MAX_CAND] = {0};
    for (int k = 0; k < MAX_CAND; k++) {
        int step = k - 1 < nstep ? k - 1 : nstep; /* unused lanes repeat the last candidate */
        ik[k] = k == 0 ? fmax_l / (hi - lo) : (fmax_l + rmin + rdelta * (float)step) / (hi - lo);
    }
    for (int i = 0; i < QK_SUB; i++) {
        float qi = x[i] - lo, wi = w[i], wxi = w[i] * x[i];
        for (int k = 0; k < MAX_CAND; k++) {
            float l = level(ik[k] * qi, 0.0f, fmax_l);
            sl[k] += wi * l;
            sll[k] += wi * l * l;
            sxl[k] += wxi * l;
        }
    }
    float best_scale = 0.0f, best_off = lo;
    double best_err = INFINITY;
    for (int k = 0; k < nstep + 2; k++) {
        float scale, off;
        if (k == 0) {
            scale = 1.0f / ik[0];
            off = lo;
        } else {
            float det = sw * sll[k] - sl[k] * sl[k];
            if (!(det > 0.0f)) continue;
            scale = (sw * sxl[k] - swx * sl[k]) / det;
            off = (sll[k] * swx - sl[k] * sxl[k]) / det;
            if (off > 0.0f) {
                off = 0.0f;
                scale = sxl[k] / sll[k];
            }
        }
        /* sum w (scale*l + off - x)^2, expanded */
        double sc = scale, o = off;
        double err = sc * sc * sll[k] + 2.0 * sc * o * sl[k] - 2.0 * sc * sxl[k] + o * o * sw - 2.0 * o * swx + swxx;
        if (err < best_err) {
            best_err = err;
            best_scale = scale;
            best_off = off;
        }
    }
    *min_out = -best_off;
    return best_scale;
}

/* Picks, among the 6-bit (scale, min) pairs (s0 +- 1, m0 +- 1) inside 0..63, the one whose
 * decode (d*s)*l - (dmin*m), with each value's nearest level l in 0..nmax, has the lowest
 * squared error on the 32 values of x ((s0, m0) is candidate 0 and wins ties; NaN errors never
 * win). Writes the pair and its levels. The candidates run across vector lanes. */
enum { REFINE_LANES = 16 };

SIMD_CLONES static void refine_affine(const float *x, int nmax, float d, float dmin, int s0, int m0,
                                      int *ls, int *lm, uint8_t *L) {
    int cs[REFINE_LANES], cm[REFINE_LANES], n = 0;
    cs[n] = s0;
    cm[n++] = m0;
    for (int s = s0 - 1; s <= s0 + 1; s++)
        for (int m = m0 - 1; m <= m0 + 1; m++)
            if (s >= 0 && s <= 63 && m >= 0 && m <= 63 && !(s == s0 && m == m0)) {
                cs[n] = s;
                cm[n++] = m;
            }
    float dl[REFINE_LANES], ml[REFINE_LANES], idl[REFINE_LANES], err[REFINE_LANES] = {0};
    const float top = (float)nmax;
    for (int k = 0; k < REFINE_LANES; k++) {
        int c = k < n ? k : 0; /* unused lanes repeat candidate 0 */
        dl[k] = d * (float)cs[c];
        ml[k] = dmin * (float)cm[c];
        idl[k] = dl[k] != 0.0f ? 1.0f / dl[k] : 0.0f; /* dl = 0: every level decodes to -ml */
    }
    for (int i = 0; i < QK_SUB; i++) {
        float xi = x[i];
        for (int k = 0; k < REFINE_LANES; k++) {
            float l = level((xi + ml[k]) * idl[k], 0.0f, top);
            float e = dl[k] * l - ml[k] - xi;
            err[k] += e * e;
        }
    }
    int best = 0;
    for (int k = 1; k < n; k++)
        if (err[k] < err[best]) best = k;
    *ls = cs[best];
    *lm = cm[best];
    for (int i = 0; i < QK_SUB; i++)
        L[i] = (uint8_t)clamp_int(round_nearest(level((x[i] + ml[best]) * idl[best], 0.0f, top)), 0, nmax);
}

/* Shared Q4_K/Q5_K super-block quantizer: fits the 8 sub-blocks, quantizes their scales and
 * mins to 6 bits, refines each (scale, min) pair by +-1 and produces the final levels L[256].
 * Writes d, dmin and the 12 packed scale bytes. */
static void quant_k_affine(const float *x, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t *b_d, uint8_t *b_dmin, uint8_t *b_scales, uint8_t *L) {
    float scales[8], mins[8], w[QK_SUB];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + QK_SUB * j;
        float s2 = 0.0f;
        for (int i = 0; i < QK_SUB; i++) s2 += xs[i] * xs[i];
        float rms = sqrtf(s2 / QK_SUB);
        for (int i = 0; i < QK_SUB; i++) w[i] = rms + fabsf(xs[i]);
        scales[j] = fit_affine(xs, w, nmax, rmin, rdelta, nstep, &mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint16_t dh = f16_saturate(max_scale / 63.0f), mh = f16_saturate(max_min / 63.0f);
    float d = loom_fp16_to_fp32(dh), dmin = loom_fp16_to_fp32(mh);
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + QK_SUB * j;
        int s0 = clamp_int(round_nearest(inv_scale * scales[j]), 0, 63);
        int m0 = clamp_int(round_nearest(inv_min * mins[j]), 0, 63);
        refine_affine(xs, nmax, d, dmin, s0, m0, &ls[j], &lm[j], L + QK_SUB * j);
    }
    store_u16(b_d, dh);
    store_u16(b_dmin, mh);
    pack_scale_min(b_scales, ls, lm);
}

static void quant_q4_k(const float *x, uint8_t *b) {
    uint8_t L[LOOM_QK_K];
    quant_k_affine(x, 15, -1.0f, 0.1f, 20, b + Q4K_D, b + Q4K_DMIN, b + Q4K_SCALES, L);
    uint8_t *qs = b + Q4K_QS;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

static void quant_q5_k(const float *x, uint8_t *b) {
    uint8_t L[LOOM_QK_K];
    quant_k_affine(x, 31, -0.5f, 0.1f, 15, b + Q5K_D, b + Q5K_DMIN, b + Q5K_SCALES, L);
    uint8_t *qs = b + Q5K_QS, *qh = b + Q5K_QH;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int a = L[64 * c + l], z = L[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((a & 0x0f) | ((z & 0x0f) << 4));
            qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((z >> 4) << (2 * c + 1)));
        }
}

/* Symmetric fit of 16 values as x ~ scale*l with l in -32..31, weights x^2: the value of
 * largest magnitude maps to -32 (using the asymmetric range fully), then 18 neighbouring grid
 * densities are tried and the one maximising (sum w x l)^2 / sum w l^2 (least weighted error
 * at its optimal scale) is kept, the earlier one on ties. Candidates run across vector lanes.
 * Returns that optimal scale (0 for an all-zero sub-block). */
SIMD_CLONES static float fit_symmetric16(const float *x) {
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    if (!(amax >= 1e-15f)) return 0.0f;
    float inv[MAX_CAND], sxl[MAX_CAND] = {0}, sll[MAX_CAND] = {0};
    for (int k = 0; k < MAX_CAND; k++) {
        /* k = 0: 0; then -9..-1, 1..9; unused lanes repeat step 9 */
        int step = k == 0 ? 0 : k <= 9 ? k - 10 : k <= 18 ? k - 9 : 9;
        inv[k] = -(32.0f + 0.1f * (float)step) / vmax;
    }
    for (int i = 0; i < 16; i++) {
        float v = x[i], w = v * v, wv = w * v;
        for (int k = 0; k < MAX_CAND; k++) {
            float l = level(inv[k] * v, -32.0f, 31.0f);
            sxl[k] += wv * l;
            sll[k] += w * l * l;
        }
    }
    float best_scale = 0.0f, best = -1.0f;
    for (int k = 0; k <= 18; k++)
        if (sll[k] > 0.0f && (best < 0.0f || sxl[k] * sxl[k] > best * sll[k])) {
            best_scale = sxl[k] / sll[k];
            best = best_scale * sxl[k];
        }
    return best_scale;
}

/* Squared error of 16 values under decode dl*l (l in -32..31 nearest), levels written to L. */
SIMD_CLONES static float symmetric_levels(const float *x, float dl, float *L) {
    float acc[LANES] = {0}, idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int i = 0; i < 16; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float l = level(x[i + j] * idl, -32.0f, 31.0f);
            L[i + j] = l;
            float e = dl * l - x[i + j];
            acc[j] += e * e;
        }
    return lane_sum(acc);
}

static void quant_q6_k(const float *x, uint8_t *b) {
    float scales[16], max_scale = 0.0f, max_abs = 0.0f;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit_symmetric16(x + 16 * j);
        if (fabsf(scales[j]) > max_abs) {
            max_abs = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    if (!(max_abs >= 1e-15f)) {
        memset(b, 0, Q6K_BYTES);
        return;
    }
    int8_t *sc = (int8_t *)(b + Q6K_SCALES);
    uint8_t L[LOOM_QK_K];
    float iscale = -128.0f / max_scale;
    uint16_t dh = f16_saturate(1.0f / iscale);
    float d = loom_fp16_to_fp32(dh);
    store_u16(b + Q6K_D, dh);
    for (int j = 0; j < 16; j++) {
        const float *xs = x + 16 * j;
        int s0 = clamp_int(round_nearest(iscale * scales[j]), -128, 127);
        float cand[16], best_l[16];
        float best = symmetric_levels(xs, d * (float)s0, best_l);
        int best_s = s0;
        for (int s = s0 - 1; s <= s0 + 1; s += 2) {
            if (s < -128 || s > 127) continue;
            float err = symmetric_levels(xs, d * (float)s, cand);
            if (err < best) {
                best = err;
                best_s = s;
                memcpy(best_l, cand, sizeof cand);
            }
        }
        sc[j] = (int8_t)best_s;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(32 + clamp_int(round_nearest(best_l[i]), -32, 31));
    }
    uint8_t *ql = b + Q6K_QL, *qh = b + Q6K_QH;
    memset(ql, 0, 128);
    memset(qh, 0, 64);
    for (int v = 0; v < LOOM_QK_K; v++) {
        int h = v / 128, r = v % 128, q = L[v];
        ql[64 * h + r % 64] |= (uint8_t)((q & 0x0f) << (4 * (r / 64)));
        qh[32 * h + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
    }
}

/* ---- row API ----------------------------------------------------------------------------- */

/* Checks type and n; on success sets the block size and bytes per block. */
static loom_status check_row(loom_ggml_type type, int64_t n, int64_t *bs, int64_t *ts) {
    const loom_ggml_type_info *t = loom_ggml_type_get((uint32_t)type);
    if (t == NULL || !t->computable) return LOOM_ERR_UNSUPPORTED;
    if (n < 0 || n % t->block_size != 0) return LOOM_ERR_INVALID_ARGUMENT;
    *bs = t->block_size;
    *ts = t->type_size;
    return LOOM_OK;
}

typedef void (*block_fn)(const uint8_t *b, float *y);

static block_fn dequant_block_fn(loom_ggml_type type) {
    switch (type) {
    case LOOM_GGML_Q8_0: return dequant_q8_0;
    case LOOM_GGML_Q4_K: return dequant_q4_k;
    case LOOM_GGML_Q5_K: return dequant_q5_k;
    case LOOM_GGML_Q6_K: return dequant_q6_k;
    default: return NULL;
    }
}

loom_status loom_dequantize_row(loom_ggml_type type, const void *src, float *dst, int64_t n) {
    int64_t bs, ts;
    loom_status st = check_row(type, n, &bs, &ts);
    if (st != LOOM_OK) return st;
    if (n > 0 && (src == NULL || dst == NULL)) return LOOM_ERR_INVALID_ARGUMENT;
    const uint8_t *p = src;
    switch (type) {
    case LOOM_GGML_F32:
        if (n > 0) memcpy(dst, src, (size_t)n * sizeof(float));
        return LOOM_OK;
    case LOOM_GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = loom_fp16_to_fp32(load_u16(p + 2 * i));
        return LOOM_OK;
    case LOOM_GGML_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = loom_bf16_to_fp32(load_u16(p + 2 * i));
        return LOOM_OK;
    default: {
        block_fn fn = dequant_block_fn(type);
        LOOM_ASSERT(fn != NULL); /* every computable type has a block decoder */
        for (int64_t i = 0; i < n / bs; i++) fn(p + i * ts, dst + i * bs);
        return LOOM_OK;
    }
    }
}

loom_status loom_quantize_row(loom_ggml_type type, const float *src, void *dst, int64_t n) {
    int64_t bs, ts;
    loom_status st = check_row(type, n, &bs, &ts);
    if (st != LOOM_OK) return st;
    if (n > 0 && (src == NULL || dst == NULL)) return LOOM_ERR_INVALID_ARGUMENT;
    uint8_t *p = dst;
    void (*fn)(const float *, uint8_t *) = NULL;
    switch (type) {
    case LOOM_GGML_F32:
        if (n > 0) memcpy(dst, src, (size_t)n * sizeof(float));
        return LOOM_OK;
    case LOOM_GGML_F16:
        for (int64_t i = 0; i < n; i++) store_u16(p + 2 * i, loom_fp32_to_fp16(src[i]));
        return LOOM_OK;
    case LOOM_GGML_BF16:
        for (int64_t i = 0; i < n; i++) store_u16(p + 2 * i, loom_fp32_to_bf16(src[i]));
        return LOOM_OK;
    case LOOM_GGML_Q8_0: fn = quant_q8_0; break;
    case LOOM_GGML_Q4_K: fn = quant_q4_k; break;
    case LOOM_GGML_Q5_K: fn = quant_q5_k; break;
    case LOOM_GGML_Q6_K: fn = quant_q6_k; break;
    default: LOOM_ASSERT(!"computable type without a quantizer");
    }
    for (int64_t i = 0; i < n / bs; i++) fn(src + i * bs, p + i * ts);
    return LOOM_OK;
}

float loom_dot_row(loom_ggml_type type, const void *row, const float *x, int64_t n) {
    int64_t bs, ts;
    LOOM_ASSERT(check_row(type, n, &bs, &ts) == LOOM_OK);
    const uint8_t *p = row;
    float sum = 0.0f;
    switch (type) {
    case LOOM_GGML_F32:
        for (int64_t i = 0; i < n; i++) {
            float a;
            memcpy(&a, p + 4 * i, sizeof a); /* rows need not be 4-byte aligned */
            sum += a * x[i];
        }
        return sum;
    case LOOM_GGML_F16:
        for (int64_t i = 0; i < n; i++) sum += loom_fp16_to_fp32(load_u16(p + 2 * i)) * x[i];
        return sum;
    case LOOM_GGML_BF16:
        for (int64_t i = 0; i < n; i++) sum += loom_bf16_to_fp32(load_u16(p + 2 * i)) * x[i];
        return sum;
    default: {
        block_fn fn = dequant_block_fn(type);
        LOOM_ASSERT(fn != NULL);
        float y[LOOM_QK_K];
        for (int64_t i = 0; i < n / bs; i++) {
            fn(p + i * ts, y);
            const float *xb = x + i * bs;
            for (int64_t k = 0; k < bs; k++) sum += y[k] * xb[k];
        }
        return sum;
    }
    }
}
