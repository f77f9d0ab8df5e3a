// quant_blocks.cuh: per-lane decoding of ggml weight blocks for the warp-per-row kernels, and
// per-element decoding for the embedding lookup (private to kernels/cuda).
//
// Warp-per-row scheme. A warp walks a row of K values in passes; in pass p its 32 lanes cover
// kVals consecutive values (one K-quant super-block, four Q8_0 blocks, 256 F16/BF16 or 128 F32
// values), each lane a fixed set of 8 (4 for Q8_0/F32) of them:
//   Q4_K/Q5_K lane L: quant word L of the block's 128 qs bytes, i.e. chunk j = L/8, bytes
//             l0 = 4(L%8) .. l0+3: values 64j+l0.. (low nibbles, sub-block 2j) and
//             64j+32+l0.. (high nibbles, sub-block 2j+1); Q5_K adds qh bytes l0..l0+3.
//   Q6_K      lane L: half h = L/16, l0 = 2(L%16): ql[64h+l0..+1], ql[64h+32+l0..+1],
//             qh[32h+l0..+1]; values 128h + l0 + {0,1} + 32i, i = 0..3.
//   Q8_0      lane L: block 4p + L/8, values 4(L%8) .. +3.
//   F16/BF16  lane L: values 256p + 8L .. +7;  F32: values 128p + 4L .. +3.
// `Lane<T>::load` fetches the lane's raw bytes of pass p (the only DRAM traffic);
// `Lane<T>::dot` turns them plus the matching x values into the lane's float partial. Both the
// GEMV (gemv.cu) and the batched GEMM (gemm.cu) call exactly these functions and add the
// partials in pass order with __fadd_rn, then reduce the warp with the same xor butterfly, so
// a GEMM token's result is bit-identical to the GEMV's. Every float operation here is an
// explicit _rn intrinsic or fmaf, so the compiler cannot contract differently in the two
// kernels.
//
// Byte path vs word path (Q4_K, Q5_K): the word path loads each 4-byte group with one 32-bit
// load (the weights must be 4-byte aligned); the byte path assembles the same word from four
// byte loads. Everything after the load is shared, so the two agree to the bit.
//
// Small integers become floats with the 0x4B000000 trick (byte_perm into the mantissa of 2^23,
// then subtract 2^23): exact, and cheaper than I2F, which runs at a quarter rate.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

enum : int { kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210, kQ80Bytes = 34 };

__device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) {
    return __ldg(reinterpret_cast<const unsigned int *>(p));
}
__device__ __forceinline__ uint32_t ld_u16(const uint8_t *p) {
    return __ldg(reinterpret_cast<const unsigned short *>(p));
}
__device__ __forceinline__ uint32_t ld_bytes4(const uint8_t *p) {
    return (uint32_t)__ldg(p) | ((uint32_t)__ldg(p + 1) << 8) | ((uint32_t)__ldg(p + 2) << 16) |
           ((uint32_t)__ldg(p + 3) << 24);
}
__device__ __forceinline__ float4 ld_x4(const float *p) {
    return __ldg(reinterpret_cast<const float4 *>(p));
}
__device__ __forceinline__ float2 ld_x2(const float *p) {
    return __ldg(reinterpret_cast<const float2 *>(p));
}

// Byte e (0..3) of w as an exact float, minus `bias` (bias = 2^23 + offset).
template <int E>
__device__ __forceinline__ float byte_f(uint32_t w, float bias = 8388608.0f) {
    return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | E)), bias);
}

// dot of 4 small-integer weights (bytes of w) with 4 x values, in a fixed order.
__device__ __forceinline__ float dot4(uint32_t w, float4 x, float bias = 8388608.0f) {
    float s = __fmul_rn(byte_f<0>(w, bias), x.x);
    s = fmaf(byte_f<1>(w, bias), x.y, s);
    s = fmaf(byte_f<2>(w, bias), x.z, s);
    return fmaf(byte_f<3>(w, bias), x.w, s);
}
__device__ __forceinline__ float sum4(float4 x) {
    return __fadd_rn(__fadd_rn(__fadd_rn(x.x, x.y), x.z), x.w);
}

// Scale and min bytes of the sub-block pair (2j, 2j+1) of a Q4_K/Q5_K super-block, from the 12
// packed scale bytes s0 (bytes 0-3), s1 (4-7), s2 (8-11). Returns sc in bits 0-7 (lo) and 8-15
// (hi) of *sc, mins likewise in *m.
__device__ __forceinline__ void k4_scale_pair(uint32_t s0, uint32_t s1, uint32_t s2, int j,
                                              uint32_t *sc, uint32_t *m) {
    const int sh = 16 * (j & 1);
    uint32_t t0 = (s0 >> sh) & 0xFFFFu, t1 = (s1 >> sh) & 0xFFFFu, t2 = (s2 >> sh) & 0xFFFFu;
    if (j < 2) {
        *sc = t0 & 0x3F3Fu;
        *m = t1 & 0x3F3Fu;
    } else {
        *sc = (t2 & 0x0F0Fu) | ((t0 >> 2) & 0x3030u);
        *m = ((t2 >> 4) & 0x0F0Fu) | ((t1 >> 2) & 0x3030u);
    }
}

template <int T>
struct Lane;

// ---- Q4_K ---------------------------------------------------------------------------------
template <>
struct Lane<LOOM_GGML_Q4_K> {
    static constexpr int kVals = 256;
    struct Raw { uint32_t q, dm, s0, s1, s2; };
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int64_t p, int lane, int64_t) {
        const uint8_t *b = row + p * kQ4KBytes;
        Raw r;
        if (U32) {
            r.dm = ld_u32(b); r.s0 = ld_u32(b + 4); r.s1 = ld_u32(b + 8); r.s2 = ld_u32(b + 12);
            r.q = ld_u32(b + 16 + 4 * lane);
        } else {
            r.dm = ld_bytes4(b); r.s0 = ld_bytes4(b + 4); r.s1 = ld_bytes4(b + 8);
            r.s2 = ld_bytes4(b + 12); r.q = ld_bytes4(b + 16 + 4 * lane);
        }
        return r;
    }
    static __device__ __forceinline__ float dot(const Raw &r, const float *x, int64_t p, int lane,
                                                int64_t) {
        const int j = lane >> 3, l0 = 4 * (lane & 7);
        const float *xb = x + p * 256 + 64 * j + l0;
        float4 xl = ld_x4(xb), xh = ld_x4(xb + 32);
        uint32_t sc, m;
        k4_scale_pair(r.s0, r.s1, r.s2, j, &sc, &m);
        float d = f16_bits_to_f32((uint16_t)(r.dm & 0xFFFF));
        float dmin = f16_bits_to_f32((uint16_t)(r.dm >> 16));
        float dot_l = dot4(r.q & 0x0F0F0F0Fu, xl), dot_h = dot4((r.q >> 4) & 0x0F0F0F0Fu, xh);
        float dl = __fmul_rn(d, byte_f<0>(sc)), dh = __fmul_rn(d, byte_f<1>(sc));
        float ml = __fmul_rn(dmin, byte_f<0>(m)), mh = __fmul_rn(dmin, byte_f<1>(m));
        float lo = __fsub_rn(__fmul_rn(dl, dot_l), __fmul_rn(ml, sum4(xl)));
        float hi = __fsub_rn(__fmul_rn(dh, dot_h), __fmul_rn(mh, sum4(xh)));
        return __fadd_rn(lo, hi);
    }
};

// ---- Q5_K ---------------------------------------------------------------------------------
template <>
struct Lane<LOOM_GGML_Q5_K> {
    static constexpr int kVals = 256;
    struct Raw { uint32_t q, h, dm, s0, s1, s2; };
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int64_t p, int lane, int64_t) {
        const uint8_t *b = row + p * kQ5KBytes;
        const int l0 = 4 * (lane & 7);
        Raw r;
        if (U32) {
            r.dm = ld_u32(b); r.s0 = ld_u32(b + 4); r.s1 = ld_u32(b + 8); r.s2 = ld_u32(b + 12);
            r.h = ld_u32(b + 16 + l0); r.q = ld_u32(b + 48 + 4 * lane);
        } else {
            r.dm = ld_bytes4(b); r.s0 = ld_bytes4(b + 4); r.s1 = ld_bytes4(b + 8);
            r.s2 = ld_bytes4(b + 12); r.h = ld_bytes4(b + 16 + l0);
            r.q = ld_bytes4(b + 48 + 4 * lane);
        }
        return r;
    }
    static __device__ __forceinline__ float dot(const Raw &r, const float *x, int64_t p, int lane,
                                                int64_t) {
        const int j = lane >> 3, l0 = 4 * (lane & 7);
        const float *xb = x + p * 256 + 64 * j + l0;
        float4 xl = ld_x4(xb), xh = ld_x4(xb + 32);
        uint32_t sc, m;
        k4_scale_pair(r.s0, r.s1, r.s2, j, &sc, &m);
        float d = f16_bits_to_f32((uint16_t)(r.dm & 0xFFFF));
        float dmin = f16_bits_to_f32((uint16_t)(r.dm >> 16));
        // bit 2j (low sub-block) and 2j+1 (high) of each qh byte become bit 4 of the value
        uint32_t hl = ((r.h >> (2 * j)) & 0x01010101u) << 4;
        uint32_t hh = ((r.h >> (2 * j + 1)) & 0x01010101u) << 4;
        float dot_l = dot4((r.q & 0x0F0F0F0Fu) | hl, xl);
        float dot_h = dot4(((r.q >> 4) & 0x0F0F0F0Fu) | hh, xh);
        float dl = __fmul_rn(d, byte_f<0>(sc)), dh = __fmul_rn(d, byte_f<1>(sc));
        float ml = __fmul_rn(dmin, byte_f<0>(m)), mh = __fmul_rn(dmin, byte_f<1>(m));
        float lo = __fsub_rn(__fmul_rn(dl, dot_l), __fmul_rn(ml, sum4(xl)));
        float hi = __fsub_rn(__fmul_rn(dh, dot_h), __fmul_rn(mh, sum4(xh)));
        return __fadd_rn(lo, hi);
    }
};

// ---- Q6_K ---------------------------------------------------------------------------------
template <>
struct Lane<LOOM_GGML_Q6_K> {
    static constexpr int kVals = 256;
    struct Raw { uint32_t a, b, h, sc, d; };
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int64_t p, int lane, int64_t) {
        const uint8_t *blk = row + p * kQ6KBytes;  // 210-byte blocks: only 2-byte aligned
        const int h = lane >> 4, l0 = 2 * (lane & 15), is = l0 >> 4;
        Raw r;
        r.a = ld_u16(blk + 64 * h + l0);
        r.b = ld_u16(blk + 64 * h + 32 + l0);
        r.h = ld_u16(blk + 128 + 32 * h + l0);
        // scales 8h+is+{0,2,4,6}: bytes at 192+8h+is, +2, +4, +6
        const uint8_t *s = blk + 192 + 8 * h + is;
        r.sc = (uint32_t)__ldg(s) | ((uint32_t)__ldg(s + 2) << 8) |
               ((uint32_t)__ldg(s + 4) << 16) | ((uint32_t)__ldg(s + 6) << 24);
        r.d = ld_u16(blk + 208);
        return r;
    }
    static __device__ __forceinline__ float dot(const Raw &r, const float *x, int64_t p, int lane,
                                                int64_t) {
        const int h = lane >> 4, l0 = 2 * (lane & 15);
        const float *xb = x + p * 256 + 128 * h + l0;
        float2 x0 = ld_x2(xb), x1 = ld_x2(xb + 32), x2 = ld_x2(xb + 64), x3 = ld_x2(xb + 96);
        // bytes: a = ql[l0], ql[l0+1]; b = ql[l0+32], ql[l0+33]; h = qh[l0], qh[l0+1]
        // q1 = a&F | (h&3)<<4, q2 = b&F | ((h>>2)&3)<<4, q3 = a>>4 | ((h>>4)&3)<<4,
        // q4 = b>>4 | ((h>>6)&3)<<4; packed two values per 16 bits.
        uint32_t q1 = (r.a & 0x0F0Fu) | ((r.h & 0x0303u) << 4);
        uint32_t q2 = (r.b & 0x0F0Fu) | (((r.h >> 2) & 0x0303u) << 4);
        uint32_t q3 = ((r.a >> 4) & 0x0F0Fu) | (((r.h >> 4) & 0x0303u) << 4);
        uint32_t q4 = ((r.b >> 4) & 0x0F0Fu) | (((r.h >> 6) & 0x0303u) << 4);
        const float bias = 8388640.0f;  // 2^23 + 32: the values are q - 32
        float d1 = fmaf(byte_f<1>(q1, bias), x0.y, __fmul_rn(byte_f<0>(q1, bias), x0.x));
        float d2 = fmaf(byte_f<1>(q2, bias), x1.y, __fmul_rn(byte_f<0>(q2, bias), x1.x));
        float d3 = fmaf(byte_f<1>(q3, bias), x2.y, __fmul_rn(byte_f<0>(q3, bias), x2.x));
        float d4 = fmaf(byte_f<1>(q4, bias), x3.y, __fmul_rn(byte_f<0>(q4, bias), x3.x));
        uint32_t scb = r.sc ^ 0x80808080u;  // int8 -> offset binary
        const float sb = 8388736.0f;        // 2^23 + 128
        float s = __fmul_rn(byte_f<0>(scb, sb), d1);
        s = fmaf(byte_f<1>(scb, sb), d2, s);
        s = fmaf(byte_f<2>(scb, sb), d3, s);
        s = fmaf(byte_f<3>(scb, sb), d4, s);
        return __fmul_rn(f16_bits_to_f32((uint16_t)r.d), s);
    }
};

// ---- Q8_0 ---------------------------------------------------------------------------------
template <>
struct Lane<LOOM_GGML_Q8_0> {
    static constexpr int kVals = 128;
    struct Raw { uint32_t q, d; };
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int64_t p, int lane,
                                               int64_t K) {
        const int64_t blk = 4 * p + (lane >> 3);
        Raw r{0u, 0u};
        if (blk * 32 < K) {  // 34-byte blocks: 2-byte loads
            const uint8_t *b = row + blk * kQ80Bytes;
            const int o = 2 + 4 * (lane & 7);
            r.d = ld_u16(b);
            r.q = ld_u16(b + o) | (ld_u16(b + o + 2) << 16);
        }
        return r;
    }
    static __device__ __forceinline__ float dot(const Raw &r, const float *x, int64_t p, int lane,
                                                int64_t K) {
        const int64_t blk = 4 * p + (lane >> 3);
        if (blk * 32 >= K) return 0.0f;
        float4 xv = ld_x4(x + blk * 32 + 4 * (lane & 7));
        float s = dot4(r.q ^ 0x80808080u, xv, 8388736.0f);
        return __fmul_rn(f16_bits_to_f32((uint16_t)r.d), s);
    }
};

// ---- F16 / BF16 / F32 ---------------------------------------------------------------------
// The vector path (U32 = true here means "aligned": K % 8 == 0 and 16-byte aligned rows)
// loads 16 bytes a lane; otherwise element loads with a bound check.
template <int T>
struct LanePlain {
    static constexpr bool kF32 = (T == LOOM_GGML_F32);
    static constexpr int kPer = kF32 ? 4 : 8;  // values a lane
    static constexpr int kVals = 32 * kPer;
    struct Raw { uint32_t w[4]; };
    template <bool VEC>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int64_t p, int lane,
                                               int64_t K) {
        const int64_t k0 = p * kVals + (int64_t)lane * kPer;
        Raw r{{0u, 0u, 0u, 0u}};
        if (VEC) {
            if (k0 < K) {
                uint4 v = __ldg(reinterpret_cast<const uint4 *>(row + k0 * (kF32 ? 4 : 2)));
                r.w[0] = v.x; r.w[1] = v.y; r.w[2] = v.z; r.w[3] = v.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < kPer; e++) {
                if (k0 + e < K) {
                    if (kF32) {
                        r.w[e] = __ldg(reinterpret_cast<const unsigned int *>(row) + k0 + e);
                    } else {
                        uint32_t h = __ldg(reinterpret_cast<const unsigned short *>(row) + k0 + e);
                        r.w[e >> 1] |= h << (16 * (e & 1));
                    }
                }
            }
        }
        return r;
    }
    static __device__ __forceinline__ float wval(const Raw &r, int e) {
        if (kF32) return __uint_as_float(r.w[e]);
        uint16_t h = (uint16_t)(r.w[e >> 1] >> (16 * (e & 1)));
        return T == LOOM_GGML_BF16 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
    }
    static __device__ __forceinline__ float dot(const Raw &r, const float *x, int64_t p, int lane,
                                                int64_t K) {
        const int64_t k0 = p * kVals + (int64_t)lane * kPer;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < kPer; e++)
            if (k0 + e < K) s = fmaf(wval(r, e), __ldg(x + k0 + e), s);
        return s;
    }
};
template <> struct Lane<LOOM_GGML_F16> : LanePlain<LOOM_GGML_F16> {};
template <> struct Lane<LOOM_GGML_BF16> : LanePlain<LOOM_GGML_BF16> {};
template <> struct Lane<LOOM_GGML_F32> : LanePlain<LOOM_GGML_F32> {};

// Passes a warp makes over a row of K values of type T.
template <int T>
__host__ __device__ __forceinline__ int64_t n_passes(int64_t K) {
    return (K + Lane<T>::kVals - 1) / Lane<T>::kVals;
}

// ---- per-element decoding (embedding lookup), bit-identical to loom_dequantize_row -------
__device__ __forceinline__ void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Value k of a row of `type` (the row starts at `row`). Matches kernels/quant/quant.c:
// Q8_0 (float)q*d; Q4_K/Q5_K (d*sc)*q - (dmin*m); Q6_K (d*sc)*(q-32); F16/BF16/F32 exact.
__device__ __forceinline__ float decode_value(int type, const uint8_t *row, int64_t k) {
    switch (type) {
    case LOOM_GGML_F32: return reinterpret_cast<const float *>(row)[k];
    case LOOM_GGML_F16:
        return f16_bits_to_f32(reinterpret_cast<const uint16_t *>(row)[k]);
    case LOOM_GGML_BF16:
        return bf16_bits_to_f32(reinterpret_cast<const uint16_t *>(row)[k]);
    case LOOM_GGML_Q8_0: {
        const uint8_t *b = row + (k / 32) * kQ80Bytes;
        float d = f16_bits_to_f32((uint16_t)(b[0] | (b[1] << 8)));
        return __fmul_rn((float)(int8_t)b[2 + k % 32], d);
    }
    case LOOM_GGML_Q4_K:
    case LOOM_GGML_Q5_K: {
        const bool q5 = type == LOOM_GGML_Q5_K;
        const uint8_t *b = row + (k / 256) * (q5 ? kQ5KBytes : kQ4KBytes);
        const int v = (int)(k % 256), j = v / 32, l = v % 32;
        float d = f16_bits_to_f32((uint16_t)(b[0] | (b[1] << 8)));
        float dmin = f16_bits_to_f32((uint16_t)(b[2] | (b[3] << 8)));
        int sc, m;
        k4_scale_min(b + 4, j, &sc, &m);
        const uint8_t *qs = b + (q5 ? 48 : 16) + 32 * (j / 2);
        int q = (qs[l] >> (4 * (j & 1))) & 0x0f;
        if (q5) q |= ((b[16 + l] >> j) & 1) << 4;
        float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case LOOM_GGML_Q6_K: {
        const uint8_t *b = row + (k / 256) * kQ6KBytes;
        const int v = (int)(k % 256), h = v / 128, r = v % 128;
        int lo = (b[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
        int hi = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float d = f16_bits_to_f32((uint16_t)(b[208] | (b[209] << 8)));
        float dl = __fmul_rn(d, (float)(int8_t)b[192 + v / 16]);
        return __fmul_rn(dl, (float)((lo | (hi << 4)) - 32));
    }
    default: return 0.0f;
    }
}

// True for the weight types the kernels decode.
inline bool weight_type_ok(int t) {
    return t == LOOM_GGML_F32 || t == LOOM_GGML_F16 || t == LOOM_GGML_BF16 ||
           t == LOOM_GGML_Q8_0 || t == LOOM_GGML_Q4_K || t == LOOM_GGML_Q5_K ||
           t == LOOM_GGML_Q6_K;
}

inline int64_t type_block(int t) {
    switch (t) {
    case LOOM_GGML_Q8_0: return 32;
    case LOOM_GGML_Q4_K: case LOOM_GGML_Q5_K: case LOOM_GGML_Q6_K: return 256;
    default: return 1;
    }
}

inline int64_t row_bytes(int t, int64_t K) {
    switch (t) {
    case LOOM_GGML_F32: return 4 * K;
    case LOOM_GGML_F16: case LOOM_GGML_BF16: return 2 * K;
    case LOOM_GGML_Q8_0: return K / 32 * kQ80Bytes;
    case LOOM_GGML_Q4_K: return K / 256 * kQ4KBytes;
    case LOOM_GGML_Q5_K: return K / 256 * kQ5KBytes;
    case LOOM_GGML_Q6_K: return K / 256 * kQ6KBytes;
    default: return -1;
    }
}

}  // namespace loom_cuda
