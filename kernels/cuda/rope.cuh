// rope.cuh: the rotation of one RoPE pair, shared by rope (rope.cu) and the fused attention
// prologue (rope_kv.cu) so that both compute the same angle bits (the contract of each says
// so). Private to the module.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

// Rotates pair i of a head row in place: elements (i, i + half) in NEOX mode, (2i, 2i + 1) in
// NORM mode, by theta = freq_scale * (pos * theta_scale^i), the power taken by i float32
// multiplications (as the CPU twin does). Range reduction in double (error < 1e-10 for
// |theta| < 2^20), then the fast sincos on [-pi, pi] (abs error < 1e-6): no slow-path local
// memory of sinf/cosf. The rotation in IEEE float32, no contraction.
__device__ __forceinline__ void rope_rotate_pair(float *row, int64_t i, int64_t half, bool neox,
                                                 int32_t pos, float theta_scale,
                                                 float freq_scale) {
    float tt = (float)pos;
    for (int64_t s = 0; s < i; s++) tt = __fmul_rn(tt, theta_scale);
    const float theta = __fmul_rn(freq_scale, tt);
    const double k2pi = rint((double)theta * 0.15915494309189535);
    const float red = (float)fma(-k2pi, 6.283185307179586, (double)theta);
    float sn, c;
    __sincosf(red, &sn, &c);
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = row[i0], x1 = row[i1];
    row[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    row[i1] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
}

}  // namespace loom_cuda
