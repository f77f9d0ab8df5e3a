// kv_store.cuh: the one conversion of a K or V row into a cache row, shared by kv_write (kv.cu),
// the attention prologue (rope_kv.cu) and the prologue folded into decode attention
// (attention_v5.cu, which also drops the converted row into its shared tile) so all write the
// same bytes. Private to the module.
// F32 as is; F16 round to nearest even; INT8 with a per-row absmax scale: amax = max |x|,
// d = amax / 127, id = d ? 1/d : 0, q = rint(x * id) (ties to even) clamped to +-127, all IEEE
// single operations; scales[cr] = d. The CPU twin (kernels/cpu) is bit-identical.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

// The F16 bits of one cache element (round to nearest even).
__device__ __forceinline__ uint16_t kv_f16_bits(float x) {
    return __half_as_ushort(__float2half_rn(x));
}
// One warp: the INT8 row scale of s[0..D) (d = amax / 127) and its inverse (0 when d is 0);
// every lane gets both. lane = lane index.
__device__ __forceinline__ void kv_i8_scale(const float *s, int64_t D, int lane, float &d,
                                            float &id) {
    float amax = 0.0f;
    for (int64_t i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(s[i]));
    amax = warp_max(amax);
    d = __fdiv_rn(amax, 127.0f);
    id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
}
// One INT8 cache element of x with the row's inverse scale id.
__device__ __forceinline__ int8_t kv_i8(float x, float id) {
    int q = __float2int_rn(__fmul_rn(x, id));
    q = q > 127 ? 127 : (q < -127 ? -127 : q);
    return (int8_t)q;
}

// One warp writes s[0..D) into cache row cr of `type` (loom_kv_type); lane = lane index.
__device__ __forceinline__ void kv_store_row(const float *s, int64_t D, int type, void *cache,
                                             float *scales, int64_t cr, int lane) {
    if (type == LOOM_KV_F32) {
        float *dst = (float *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = s[i];
    } else if (type == LOOM_KV_F16) {
        uint16_t *dst = (uint16_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = kv_f16_bits(s[i]);
    } else {
        float d, id;
        kv_i8_scale(s, D, lane, d, id);
        int8_t *dst = (int8_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = kv_i8(s[i], id);
        if (lane == 0) scales[cr] = d;
    }
}

}  // namespace loom_cuda
