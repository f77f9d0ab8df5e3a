// kv_store.cuh: the one conversion of a K or V row into a cache row, shared by kv_write (kv.cu)
// and the fused attention prologue (rope_kv.cu) so both write the same bytes. Private to the
// module.
// F32 as is; F16 round to nearest even; INT8 with a per-row absmax scale: amax = max |x|,
// d = amax / 127, id = d ? 1/d : 0, q = rint(x * id) (ties to even) clamped to +-127, all IEEE
// single operations; scales[cr] = d. The CPU twin (kernels/cpu) is bit-identical.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

// One warp writes s[0..D) into cache row cr of `type` (loom_kv_type); lane = lane index.
__device__ __forceinline__ void kv_store_row(const float *s, int64_t D, int type, void *cache,
                                             float *scales, int64_t cr, int lane) {
    if (type == LOOM_KV_F32) {
        float *dst = (float *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = s[i];
    } else if (type == LOOM_KV_F16) {
        uint16_t *dst = (uint16_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) dst[i] = __half_as_ushort(__float2half_rn(s[i]));
    } else {
        float amax = 0.0f;
        for (int64_t i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(s[i]));
        amax = warp_max(amax);
        const float d = __fdiv_rn(amax, 127.0f);
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        int8_t *dst = (int8_t *)cache + cr * D;
        for (int64_t i = lane; i < D; i += 32) {
            int q = __float2int_rn(__fmul_rn(s[i], id));
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            dst[i] = (int8_t)q;
        }
        if (lane == 0) scales[cr] = d;
    }
}

}  // namespace loom_cuda
