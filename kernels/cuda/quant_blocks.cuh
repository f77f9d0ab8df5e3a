// quant_blocks.cuh: per-lane decoding of ggml weight blocks for the warp-per-row kernels, and
// per-element decoding for the embedding lookup (private to kernels/cuda).
//
// Warp-per-row scheme. A warp walks a row of K values in passes; in pass p its 32 lanes cover
// kVals consecutive values (four K-quant super-blocks for Q4_K/Q5_K, one for Q6_K, sixteen Q8_0
// blocks, 256 F16/BF16 or 128 F32 values), each lane a fixed set of them:
//   Q4_K/Q5_K lane L: block 4p + L/8, s = L%8: quant word s of each of the 4 chunks (values
//             64j+4s.. low nibbles, 64j+32+4s.. high nibbles, j = 0..3); Q5_K adds qh word s.
//             (The first version gave each lane one word of one block per pass, as issue 6
//             sketches, and decoded scales for every 8 values: instruction-bound at 0.73 TB/s;
//             bench/NOTES.md has the history.)
//   Q6_K      lane L: half h = L/16, l0 = 2(L%16): ql[64h+l0..+1], ql[64h+32+l0..+1],
//             qh[32h+l0..+1]; values 128h + l0 + {0,1} + 32i, i = 0..3.
//   Q8_0      lane L: block 16p + L/2, values 16(L%2) .. +15 of it.
//   F16/BF16  lane L: values 256p + 8L .. +7;  F32: values 128p + 4L .. +3.
// The GEMV (gemv.cu) and the batched GEMM (gemm.cu) call exactly the same Lane<T> steps
// (below) and add the partials in pass order with __fadd_rn, then reduce the warp with the same
// xor butterfly, so a GEMM token's result is bit-identical to the GEMV's. Every float operation here is an
// explicit _rn intrinsic or fmaf, so the compiler cannot contract differently in the two
// kernels.
//
// Byte path vs word path (Q4_K, Q5_K): the word path loads each 32-bit quant word with one
// 32-bit load and the block header with one 16-byte load (weights 16-byte aligned); the byte
// path assembles the same words from byte loads. Everything after the load is shared, so the two agree to the bit.
//
// Small integers become floats with the 0x4B000000 trick (byte_perm into the mantissa of 2^23,
// then subtract 2^23): exact, and cheaper than I2F, which runs at a quarter rate.
#pragma once

#include "kernels/cuda/norm.cuh"

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
// Activations (x, and whatever is read beside it) by coherent loads, not __ldg: x is written by
// the previous kernel, which under dependent launch still runs while this kernel's blocks are
// resident, and the non-coherent path can then serve stale lines after griddepcontrol.wait
// (bench/NOTES.md 7, session 18: a normed Q6_K GEMV read an older residual in the decode step).
// Weights stay on __ldg (constant for the kernel's life).
__device__ __forceinline__ float4 ld_x4(const float *p) {
    return *reinterpret_cast<const float4 *>(p);
}
__device__ __forceinline__ float2 ld_x2(const float *p) {
    return *reinterpret_cast<const float2 *>(p);
}
// A constant float vector (a norm weight) through the read-only path.
__device__ __forceinline__ float4 ld_c4(const float *p) {
    return __ldg(reinterpret_cast<const float4 *>(p));
}
__device__ __forceinline__ float2 ld_c2(const float *p) {
    return __ldg(reinterpret_cast<const float2 *>(p));
}

// Byte e (0..3) of w as an exact float, minus `bias` (bias = 2^23 + offset).
template <int E>
__device__ __forceinline__ float byte_f(uint32_t w, float bias = 8388608.0f) {
    return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | E)), bias);
}

// Byte e (0..127) of w as the float 0.5 + q/256, exactly (q into the mantissa under the
// exponent of 0.5). A weight d*q - m is then one fma: fma(256d, M, -(128d + m)).
template <int E>
__device__ __forceinline__ float byte_half(uint32_t w) {
    return __uint_as_float(__byte_perm(w, 0x3F000000u, 0x7044u | (E << 8)));
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

// The x source of a token's row for Lane<T>::loadx: XPlain reads x[k]; XNormed reads the
// RMS-normalized (x[k] * scale) * w[k] (norm.cuh: the bits loom_cuda_rms_norm would have
// written; w NULL: a weight of 1.0, the same bits), so a kernel folds the norm in by its x
// source alone and the rest of its operations stay those of the plain kernel.
struct XPlain {
    const float *x;
    __device__ __forceinline__ float4 ld4(int64_t k) const { return ld_x4(x + k); }
    __device__ __forceinline__ float2 ld2(int64_t k) const { return ld_x2(x + k); }
    __device__ __forceinline__ float ld1(int64_t k) const { return x[k]; }
};
struct XNormed {
    const float *x;
    const float *w;  // [K] or NULL
    float scale;
    __device__ __forceinline__ float4 ld4(int64_t k) const {
        return rms_apply4(ld_x4(x + k), scale, w ? ld_c4(w + k) : make_float4(1.f, 1.f, 1.f, 1.f));
    }
    __device__ __forceinline__ float2 ld2(int64_t k) const {
        const float2 v = ld_x2(x + k), g = w ? ld_c2(w + k) : make_float2(1.f, 1.f);
        return make_float2(rms_apply(v.x, scale, g.x), rms_apply(v.y, scale, g.y));
    }
    __device__ __forceinline__ float ld1(int64_t k) const {
        return rms_apply(x[k], scale, w ? __ldg(w + k) : 1.0f);
    }
};

template <int T>
struct Lane;

// Each Lane<T> has four steps, called in this order by the GEMV and the GEMM alike:
//   Raw load(row, bs, p, lane, K) the lane's weight bytes of pass p (DRAM; the only weight read)
//   X   loadx(xs, p, lane, K)   the x values those bytes multiply (L1/L2; xs: XPlain/XNormed)
//   W   prep(raw, row, bs, p, lane, K) weights decoded to floats + scales (no x involved; Q4_K/Q5_K
//                               read their block header here, an L1 hit), once per pass in
//                               the GEMM however many tokens use it
//   float dotw(w, xv)           the lane's partial of pass p
// The GEMV runs load, loadx, prep, dotw for every (row, pass); the GEMM runs prep once and
// loadx + dotw per token. Same operations, same order: the same bits. row: the row's block 0
// (matmul.cuh seg_row, seg_row_q6); bs: the bytes from one of its blocks to the next, which
// Q4_K and Q6_K read (q4k_block_stride: 144, or 16 x 144 in LOOM_WEIGHT_Q4K_TILES;
// q6k_block_stride: 210, or 16 x 212 in LOOM_WEIGHT_Q6K_TILES).

// ---- Q4_K ---------------------------------------------------------------------------------
// Lane L of pass p: block 4p + L/8, s = L%8; for each chunk j = 0..3 the 32-bit quant word
// qs[32j + 4s .. +3]: values 64j+4s .. +3 (low nibbles, sub-block 2j) and 64j+32+4s .. +3
// (high nibbles, sub-block 2j+1). Each load instruction is one word a lane, 8 lanes covering
// 32 contiguous quant bytes of a block, and the matching x reads are 128 contiguous bytes per
// 8 lanes (an earlier mapping with 16 contiguous bytes a lane scattered the x reads over 8
// cache lines per lane group and was L1-bound; bench/NOTES.md).
template <>
struct Lane<LOOM_GGML_Q4_K> {
    static constexpr int kVals = 1024;  // four super-blocks a pass
    // Only the quant words are prefetched. The 16-byte header (d, dmin, scales) is read in
    // prep: its 32-byte sector also holds chunk 0's first quant bytes, so it is then in L1.
    struct Raw { uint32_t q[4]; };
    struct X { float4 l[4], h[4]; };
    // lo/hi: the masked nibbles (bytes 0..15, or 0..31 for Q5_K); per sub-block k:
    // a = 256 d sc, b = -(128 d sc + dmin m). dotw turns a nibble into M = 0.5 + q/256
    // (byte_half, exact) and the weight into fma(a, M, b): no x sums needed, and only 24
    // registers of decoded state.
    struct W { uint32_t lo[4], hi[4]; float a[8], b[8]; };
    static __device__ __forceinline__ int64_t block_of(int64_t p, int lane) {
        return 4 * p + (lane >> 3);
    }
    template <bool U32>
    static __device__ __forceinline__ uint32_t word(const uint8_t *b) {
        return U32 ? ld_u32(b) : ld_bytes4(b);
    }
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int bs, int64_t p, int lane,
                                               int64_t K) {
        const int64_t blk = block_of(p, lane);
        Raw r{{0u, 0u, 0u, 0u}};
        if (blk * 256 < K) {
            const uint8_t *b = row + blk * bs + 16 + 4 * (lane & 7);
#pragma unroll
            for (int j = 0; j < 4; j++) r.q[j] = word<U32>(b + 32 * j);
        }
        return r;
    }
    template <bool U32, class XS>
    static __device__ __forceinline__ X loadx(const XS &xs, int64_t p, int lane, int64_t K) {
        const int64_t blk = block_of(p, lane);
        X v;
        if (blk * 256 < K) {
            const int64_t kb = blk * 256 + 4 * (lane & 7);
#pragma unroll
            for (int j = 0; j < 4; j++) { v.l[j] = xs.ld4(kb + 64 * j); v.h[j] = xs.ld4(kb + 64 * j + 32); }
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) { v.l[j] = make_float4(0.f, 0.f, 0.f, 0.f); v.h[j] = v.l[j]; }
        }
        return v;
    }
    // Header words of a block: x = d | dmin << 16, y..w = the 12 scale bytes.
    template <bool U32>
    static __device__ __forceinline__ uint4 header(const uint8_t *b) {
        if (U32) return __ldg(reinterpret_cast<const uint4 *>(b));  // 144 = 9 * 16: aligned
        return make_uint4(ld_bytes4(b), ld_bytes4(b + 4), ld_bytes4(b + 8), ld_bytes4(b + 12));
    }
    // Sub-block scale (and min) of sub-block k from the packed 6-bit fields, 4 per word:
    // sub-blocks 0-3: scales s0 & 63, mins s1 & 63; 4-7: s2's nibbles + the top bits of s0/s1.
    // a = 256 (d sc) and b = -(128 (d sc) + dmin m), each product rounded once, in 5
    // instructions (v8, bench/NOTES.md 2; v7's 8, the same bits, went in session 11): with
    // S = 2^23 + sc (byte_perm, exact), d256 = 256 d and nd = -2^23 d256 (both exact: powers
    // of two), fma(d256, S, nd) is d256 * sc rounded once = 256 * (d * sc rounded) (a power-of-
    // two scale commutes with rounding; no overflow or underflow at f16 scales), and
    // 128 dl = 0.5 a exactly, so b = -fma(0.5, a, ml).
    template <int K4>
    static __device__ __forceinline__ void scale_k(const uint4 &hd, float d256, float nd,
                                                    float dmin, float ndmin, float *a, float *b) {
        const uint32_t sc = K4 < 4 ? (hd.y & 0x3F3F3F3Fu)
                                   : ((hd.w & 0x0F0F0F0Fu) | ((hd.y >> 2) & 0x30303030u));
        const uint32_t m = K4 < 4 ? (hd.z & 0x3F3F3F3Fu)
                                  : (((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u));
        const uint32_t sel = 0x7440u | (K4 & 3);
        const float ml = fmaf(dmin, __uint_as_float(__byte_perm(m, 0x4B000000u, sel)), ndmin);
        *a = fmaf(d256, __uint_as_float(__byte_perm(sc, 0x4B000000u, sel)), nd);
        *b = -fmaf(0.5f, *a, ml);
    }
    static __device__ __forceinline__ W decode(const uint4 &hd, const uint32_t *lo,
                                               const uint32_t *hi) {
        const float d = f16_bits_to_f32((uint16_t)(hd.x & 0xFFFF));
        const float dmin = f16_bits_to_f32((uint16_t)(hd.x >> 16));
        W w;
#pragma unroll
        for (int j = 0; j < 4; j++) { w.lo[j] = lo[j]; w.hi[j] = hi[j]; }
        const float d256 = __fmul_rn(256.0f, d), nd = __fmul_rn(-8388608.0f, d256);
        const float ndmin = __fmul_rn(-8388608.0f, dmin);
        scale_k<0>(hd, d256, nd, dmin, ndmin, &w.a[0], &w.b[0]);
        scale_k<1>(hd, d256, nd, dmin, ndmin, &w.a[1], &w.b[1]);
        scale_k<2>(hd, d256, nd, dmin, ndmin, &w.a[2], &w.b[2]);
        scale_k<3>(hd, d256, nd, dmin, ndmin, &w.a[3], &w.b[3]);
        scale_k<4>(hd, d256, nd, dmin, ndmin, &w.a[4], &w.b[4]);
        scale_k<5>(hd, d256, nd, dmin, ndmin, &w.a[5], &w.b[5]);
        scale_k<6>(hd, d256, nd, dmin, ndmin, &w.a[6], &w.b[6]);
        scale_k<7>(hd, d256, nd, dmin, ndmin, &w.a[7], &w.b[7]);
        return w;
    }
    template <bool U32>
    static __device__ __forceinline__ W prep(const Raw &r, const uint8_t *row, int bs, int64_t p,
                                             int lane, int64_t K) {
        const int64_t blk = block_of(p, lane);
        const uint4 hd = blk * 256 < K ? header<U32>(row + blk * bs) : make_uint4(0, 0, 0, 0);
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int j = 0; j < 4; j++) { lo[j] = r.q[j] & 0x0F0F0F0Fu; hi[j] = (r.q[j] >> 4) & 0x0F0F0F0Fu; }
        return decode(hd, lo, hi);
    }
    static __device__ __forceinline__ float dot4w(float a, float b, uint32_t q, float4 x,
                                                  float acc) {
        acc = fmaf(fmaf(a, byte_half<0>(q), b), x.x, acc);
        acc = fmaf(fmaf(a, byte_half<1>(q), b), x.y, acc);
        acc = fmaf(fmaf(a, byte_half<2>(q), b), x.z, acc);
        return fmaf(fmaf(a, byte_half<3>(q), b), x.w, acc);
    }
    static __device__ __forceinline__ float dotw(const W &w, const X &x) {
        float acc[4];  // one chain per chunk, combined in a fixed order
#pragma unroll
        for (int j = 0; j < 4; j++) {
            acc[j] = dot4w(w.a[2 * j], w.b[2 * j], w.lo[j], x.l[j], 0.0f);
            acc[j] = dot4w(w.a[2 * j + 1], w.b[2 * j + 1], w.hi[j], x.h[j], acc[j]);
        }
        return __fadd_rn(__fadd_rn(acc[0], acc[1]), __fadd_rn(acc[2], acc[3]));
    }
};

// ---- Q5_K ---------------------------------------------------------------------------------
// Q4_K's lane mapping; the lane also loads the qh word qh[4s .. +3], whose bit 2j / 2j+1 of
// each byte is bit 4 of its low / high value in chunk j.
template <>
struct Lane<LOOM_GGML_Q5_K> {
    static constexpr int kVals = 1024;
    struct Raw { uint32_t q[4], h; };
    using X = Lane<LOOM_GGML_Q4_K>::X;
    using W = Lane<LOOM_GGML_Q4_K>::W;
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int bs, int64_t p, int lane,
                                               int64_t K) {
        const int64_t blk = Lane<LOOM_GGML_Q4_K>::block_of(p, lane);
        Raw r{{0u, 0u, 0u, 0u}, 0u};
        if (blk * 256 < K) {
            const uint8_t *b = row + blk * kQ5KBytes + 4 * (lane & 7);  // 176 = 11 * 16
#pragma unroll
            for (int j = 0; j < 4; j++) r.q[j] = Lane<LOOM_GGML_Q4_K>::word<U32>(b + 48 + 32 * j);
            r.h = Lane<LOOM_GGML_Q4_K>::word<U32>(b + 16);
        }
        return r;
    }
    template <bool U32, class XS>
    static __device__ __forceinline__ X loadx(const XS &xs, int64_t p, int lane, int64_t K) {
        return Lane<LOOM_GGML_Q4_K>::loadx<U32>(xs, p, lane, K);
    }
    template <bool U32>
    static __device__ __forceinline__ W prep(const Raw &r, const uint8_t *row, int bs, int64_t p,
                                             int lane, int64_t K) {
        const int64_t blk = Lane<LOOM_GGML_Q4_K>::block_of(p, lane);
        const uint4 hd = blk * 256 < K ? Lane<LOOM_GGML_Q4_K>::header<U32>(row + blk * kQ5KBytes)
                                       : make_uint4(0, 0, 0, 0);
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            lo[j] = (r.q[j] & 0x0F0F0F0Fu) | (((r.h >> (2 * j)) & 0x01010101u) << 4);
            hi[j] = ((r.q[j] >> 4) & 0x0F0F0F0Fu) | (((r.h >> (2 * j + 1)) & 0x01010101u) << 4);
        }
        return Lane<LOOM_GGML_Q4_K>::decode(hd, lo, hi);
    }
    static __device__ __forceinline__ float dotw(const W &w, const X &x) {
        return Lane<LOOM_GGML_Q4_K>::dotw(w, x);
    }
};

// ---- Q6_K ---------------------------------------------------------------------------------
template <>
struct Lane<LOOM_GGML_Q6_K> {
    static constexpr int kVals = 256;
    struct Raw { uint32_t a, b, h, sc, d; };
    struct X { float2 x0, x1, x2, x3; };
    struct W { float q[8], s[4], d; };
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int bs, int64_t p, int lane, int64_t) {
        const uint8_t *blk = row + p * bs;  // 210-byte blocks (in rows only 2-byte aligned)
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
    template <bool U32, class XS>
    static __device__ __forceinline__ X loadx(const XS &xs, int64_t p, int lane, int64_t) {
        const int64_t kb = p * 256 + 128 * (lane >> 4) + 2 * (lane & 15);
        return X{xs.ld2(kb), xs.ld2(kb + 32), xs.ld2(kb + 64), xs.ld2(kb + 96)};
    }
    template <bool U32>
    static __device__ __forceinline__ W prep(const Raw &r, const uint8_t *, int, int64_t, int,
                                             int64_t) {
        // bytes: a = ql[l0], ql[l0+1]; b = ql[l0+32], ql[l0+33]; h = qh[l0], qh[l0+1]
        // q1 = a&F | (h&3)<<4, q2 = b&F | ((h>>2)&3)<<4, q3 = a>>4 | ((h>>4)&3)<<4,
        // q4 = b>>4 | ((h>>6)&3)<<4; two values per 16 bits.
        const uint32_t q1 = (r.a & 0x0F0Fu) | ((r.h & 0x0303u) << 4);
        const uint32_t q2 = (r.b & 0x0F0Fu) | (((r.h >> 2) & 0x0303u) << 4);
        const uint32_t q3 = ((r.a >> 4) & 0x0F0Fu) | (((r.h >> 4) & 0x0303u) << 4);
        const uint32_t q4 = ((r.b >> 4) & 0x0F0Fu) | (((r.h >> 6) & 0x0303u) << 4);
        const float bias = 8388640.0f;  // 2^23 + 32: the values are q - 32
        W w;
        w.q[0] = byte_f<0>(q1, bias); w.q[1] = byte_f<1>(q1, bias);
        w.q[2] = byte_f<0>(q2, bias); w.q[3] = byte_f<1>(q2, bias);
        w.q[4] = byte_f<0>(q3, bias); w.q[5] = byte_f<1>(q3, bias);
        w.q[6] = byte_f<0>(q4, bias); w.q[7] = byte_f<1>(q4, bias);
        const uint32_t scb = r.sc ^ 0x80808080u;  // int8 -> offset binary
        const float sb = 8388736.0f;              // 2^23 + 128
        w.s[0] = byte_f<0>(scb, sb); w.s[1] = byte_f<1>(scb, sb);
        w.s[2] = byte_f<2>(scb, sb); w.s[3] = byte_f<3>(scb, sb);
        w.d = f16_bits_to_f32((uint16_t)r.d);
        return w;
    }
    static __device__ __forceinline__ float dotw(const W &w, const X &x) {
        float d1 = fmaf(w.q[1], x.x0.y, __fmul_rn(w.q[0], x.x0.x));
        float d2 = fmaf(w.q[3], x.x1.y, __fmul_rn(w.q[2], x.x1.x));
        float d3 = fmaf(w.q[5], x.x2.y, __fmul_rn(w.q[4], x.x2.x));
        float d4 = fmaf(w.q[7], x.x3.y, __fmul_rn(w.q[6], x.x3.x));
        float s = __fmul_rn(w.s[0], d1);
        s = fmaf(w.s[1], d2, s);
        s = fmaf(w.s[2], d3, s);
        s = fmaf(w.s[3], d4, s);
        return __fmul_rn(w.d, s);
    }
};

// ---- Q8_0 ---------------------------------------------------------------------------------
// Half a block a lane (16 quant bytes, 16 values): a pass of 16 blocks is 544 contiguous bytes
// (the GEMV's warps walk two rows at once, gemv.cu row_dot2). A block's quants start 2 bytes
// in, so they lie at an even address that is 4-aligned for every other block: the lane loads
// the four aligned words from that address rounded down (and, 2 bytes off, a fifth half-word,
// all inside its 16 bytes and the block's own scale before them) and prep funnel-shifts them
// into place.
template <>
struct Lane<LOOM_GGML_Q8_0> {
    static constexpr int kVals = 512;
    struct Raw { uint32_t w[5], d; };
    struct X { float4 v[4]; };
    struct W { float q[16], d; };
    // The lane's 16 quant bytes (a block past the row end: nullptr).
    static __device__ __forceinline__ const uint8_t *quants(const uint8_t *row, int64_t p,
                                                           int lane, int64_t K) {
        const int64_t blk = 16 * p + (lane >> 1);
        return blk * 32 < K ? row + blk * kQ80Bytes + 2 + 16 * (lane & 1) : nullptr;
    }
    static __device__ __forceinline__ int shift(const uint8_t *q) {
        return (int)(reinterpret_cast<uintptr_t>(q) & 2u) * 8;  // 0 or 16 bits
    }
    template <bool U32>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int bs, int64_t p, int lane,
                                               int64_t K) {
        Raw r{{0u, 0u, 0u, 0u, 0u}, 0u};  // a block past the row end decodes to zeros (d = 0)
        const uint8_t *q = quants(row, p, lane, K);
        if (q) {
            const uint8_t *a = q - shift(q) / 8;
#pragma unroll
            for (int j = 0; j < 4; j++) r.w[j] = ld_u32(a + 4 * j);
            if (shift(q)) r.w[4] = ld_u16(a + 16);
            r.d = ld_u16(row + (16 * p + (lane >> 1)) * kQ80Bytes);
        }
        return r;
    }
    template <bool U32, class XS>
    static __device__ __forceinline__ X loadx(const XS &xs, int64_t p, int lane, int64_t K) {
        const int64_t k0 = 512 * p + 16 * lane;
        X x;
#pragma unroll
        for (int j = 0; j < 4; j++)
            x.v[j] = k0 < K ? xs.ld4(k0 + 4 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
        return x;
    }
    template <bool U32>
    static __device__ __forceinline__ W prep(const Raw &r, const uint8_t *row, int, int64_t p,
                                             int lane, int64_t K) {
        const uint8_t *q = quants(row, p, lane, K);
        const int sh = q ? shift(q) : 0;
        const float bias = 8388736.0f;  // 2^23 + 128: the quants' sign bits flipped below
        W w;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t v = __funnelshift_r(r.w[j], r.w[j + 1], sh) ^ 0x80808080u;
            w.q[4 * j] = byte_f<0>(v, bias);
            w.q[4 * j + 1] = byte_f<1>(v, bias);
            w.q[4 * j + 2] = byte_f<2>(v, bias);
            w.q[4 * j + 3] = byte_f<3>(v, bias);
        }
        w.d = f16_bits_to_f32((uint16_t)r.d);
        return w;
    }
    // Four dots of 4 values, summed in a fixed order, then the block's scale.
    static __device__ __forceinline__ float dotw(const W &w, const X &x) {
        float s[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            s[j] = fmaf(w.q[4 * j + 3], x.v[j].w,
                        fmaf(w.q[4 * j + 2], x.v[j].z,
                             fmaf(w.q[4 * j + 1], x.v[j].y, __fmul_rn(w.q[4 * j], x.v[j].x))));
        return __fmul_rn(w.d, __fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3])));
    }
};

// ---- F16 / BF16 / F32 ---------------------------------------------------------------------
// VEC (K % 8 == 0, 16-byte aligned rows and x): 16-byte weight loads and float4 x loads;
// otherwise element loads with a bound check (values past K are zero on both sides).
template <int T>
struct LanePlain {
    static constexpr bool kF32 = (T == LOOM_GGML_F32);
    static constexpr int kPer = kF32 ? 4 : 8;  // values a lane
    static constexpr int kVals = 32 * kPer;
    struct Raw { uint32_t w[4]; };
    struct X { float v[kPer]; };
    struct W { float v[kPer]; };
    template <bool VEC>
    static __device__ __forceinline__ Raw load(const uint8_t *row, int bs, int64_t p, int lane,
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
    template <bool VEC, class XS>
    static __device__ __forceinline__ X loadx(const XS &xs, int64_t p, int lane, int64_t K) {
        const int64_t k0 = p * kVals + (int64_t)lane * kPer;
        X xv;
        if (VEC && k0 < K) {  // K % 8 == 0: all kPer values are in range
#pragma unroll
            for (int i = 0; i < kPer / 4; i++) {
                const float4 a = xs.ld4(k0 + 4 * i);
                xv.v[4 * i] = a.x; xv.v[4 * i + 1] = a.y; xv.v[4 * i + 2] = a.z; xv.v[4 * i + 3] = a.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < kPer; e++) xv.v[e] = k0 + e < K ? xs.ld1(k0 + e) : 0.0f;
        }
        return xv;
    }
    template <bool VEC>
    static __device__ __forceinline__ W prep(const Raw &r, const uint8_t *, int, int64_t, int,
                                             int64_t) {
        W w;
#pragma unroll
        for (int e = 0; e < kPer; e++) {
            if (kF32) {
                w.v[e] = __uint_as_float(r.w[e]);
            } else {
                uint16_t h = (uint16_t)(r.w[e >> 1] >> (16 * (e & 1)));
                w.v[e] = T == LOOM_GGML_BF16 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
            }
        }
        return w;
    }
    static __device__ __forceinline__ float dotw(const W &w, const X &x) {
        float s = __fmul_rn(w.v[0], x.v[0]);
#pragma unroll
        for (int e = 1; e < kPer; e++) s = fmaf(w.v[e], x.v[e], s);
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
// Row sizes and block sizes on the host: kernels/quant's loom_ggml_row_bytes / loom_ggml_type_get
// (the one type table), not a copy here.

}  // namespace loom_cuda
