// rope.cuh: the rotation of one RoPE pair, shared by rope (rope.cu) and the attention prologue
// (rope_kv.cu, and its copy folded into decode attention v6, attention_v5.cu) so that all
// compute the same angle bits (the contract of each says so); and the prologue's per-head
// norm + rotation of a row held in registers. Private to the module.
#pragma once

#include "kernels/cuda/common.cuh"

namespace loom_cuda {

// rope_kv_write's work for one decode token, folded into decode attention v6
// (loom_cuda_rope_kv_attention_at): the attention's q is then the raw q of the token; k and v
// its raw K and V rows ([n_kv_head][D] floats); the new rows go to the caches the attention
// reads (kernels cast its const cache pointers to write them).
struct AttnPrologue {
    const float *k, *v;
    const float *q_norm, *k_norm;  // both or neither (no head norms)
    float eps, theta_scale, freq_scale;  // theta_scale = powf(freq_base, -2 / n_rot), as rope_kv.cu
    int half, neox;                      // n_rot / 2; NEOX mode
};

// attention.cu: loom_cuda_attention_at's checks and launch with `pro` folded into the v6 kernel
// (q the raw q). Launches only where attention_at would run v6 (sm_90, one token, F16/INT8
// caches of head_dim 64/128, LOOM_ATTN_V6 on); otherwise returns LOOM_ERR_UNSUPPORTED with
// nothing enqueued (the caller then runs rope_kv_write + attention_at). A failed launch gives
// LOOM_ERR_CUDA (no fallback inside).
loom_status attention_at_fused(const float *q, const void *k_cache, const float *k_scales,
                               const void *v_cache, const float *v_scales,
                               const loom_kv_layout *kv, const loom_attn_params *p,
                               const int32_t *d_pos0, const AttnPrologue &pro, float *out,
                               loom_error *err, cudaStream_t stream);

// The angle of a pair from tt = pos * theta_scale^i (taken as i float32 products, as the CPU
// twin does): theta = freq_scale * tt, range reduction in double (error < 1e-10 for |theta| <
// 2^20), then the fast sincos on [-pi, pi] (abs error < 1e-6): no slow-path local memory of
// sinf/cosf.
__device__ __forceinline__ void rope_angle(float tt, float freq_scale, float &c, float &sn) {
    const float theta = __fmul_rn(freq_scale, tt);
    const double k2pi = rint((double)theta * 0.15915494309189535);
    const float red = (float)fma(-k2pi, 6.283185307179586, (double)theta);
    __sincosf(red, &sn, &c);
}
// Rotates pair i of a head row in place by (c, sn): elements (i, i + half) in NEOX mode,
// (2i, 2i + 1) in NORM mode, in IEEE float32, no contraction.
__device__ __forceinline__ void rope_apply(float *row, int64_t i, int64_t half, bool neox, float c,
                                           float sn) {
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = row[i0], x1 = row[i1];
    row[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    row[i1] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
}
// Rotates pair i of a head row in place by theta = freq_scale * (pos * theta_scale^i).
__device__ __forceinline__ void rope_rotate_pair(float *row, int64_t i, int64_t half, bool neox,
                                                 int32_t pos, float theta_scale,
                                                 float freq_scale) {
    float tt = (float)pos;
    for (int64_t s = 0; s < i; s++) tt = __fmul_rn(tt, theta_scale);
    float c, sn;
    rope_angle(tt, freq_scale, c, sn);
    rope_apply(row, i, half, neox, c, sn);
}

// One warp turns a head row held in registers (x[j] = row[lane + 32 j], j < VPL, 32 VPL >= D;
// lanes past D hold anything) into s[0..D) of shared memory: the RMSNorm x weight when has_w
// (head_norm stops there)
// (wv[j] = weight[lane + 32 j]; sum of squares in double in the order j, then warp_sum_d;
// scale = (float)(1 / sqrt(mean + eps)), (x * scale) * w in float32), then the rotation of
// pairs 0 .. half-1 at position p. Ends with __syncwarp(): s is then readable by every lane.
// rope_kv.cu's register path and the prologue folded into decode attention (attention_v5.cu)
// both run this, so q_out and the cache rows have the same bits whichever launch made them.
template <int VPL>
__device__ __forceinline__ void head_norm(float *s, const float (&x)[VPL], const float (&wv)[VPL],
                                          bool has_w, int64_t D, float eps, int lane) {
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < VPL; j++) {
        if (lane + 32 * j < D) {
            s[lane + 32 * j] = x[j];
            if (has_w) ss += (double)x[j] * x[j];
        }
    }
    if (has_w) {
        ss = warp_sum_d(ss);
        const float scale = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
#pragma unroll
        for (int j = 0; j < VPL; j++)
            if (lane + 32 * j < D) s[lane + 32 * j] = __fmul_rn(__fmul_rn(x[j], scale), wv[j]);
    }
    __syncwarp();
}
template <int VPL>
__device__ __forceinline__ void head_norm_rope(float *s, const float (&x)[VPL],
                                               const float (&wv)[VPL], bool has_w, int64_t D,
                                               float eps, int64_t half, bool neox, int32_t p,
                                               float theta_scale, float freq_scale, int lane) {
    head_norm<VPL>(s, x, wv, has_w, D, eps, lane);
    for (int64_t i = lane; i < half; i += 32)
        rope_rotate_pair(s, i, half, neox, p, theta_scale, freq_scale);
    __syncwarp();
}
// A lane's angles for pairs lane + 32 m (m < NP) at position p, for rotating several rows with
// rope_apply: the product chain of pair lane + 32 (m + 1) continues that of pair lane + 32 m,
// which gives the same tt (the same i products in the same order) as rope_rotate_pair, so the
// same bits. Pairs past half get angles that are not used.
template <int NP>
__device__ __forceinline__ void rope_lane_angles(int32_t p, float theta_scale, float freq_scale,
                                                 int lane, float (&c)[NP], float (&sn)[NP]) {
    float tt = (float)p;
    for (int s = 0; s < lane; s++) tt = __fmul_rn(tt, theta_scale);
#pragma unroll
    for (int m = 0; m < NP; m++) {
        rope_angle(tt, freq_scale, c[m], sn[m]);
        if (m + 1 < NP)
#pragma unroll
            for (int s = 0; s < 32; s++) tt = __fmul_rn(tt, theta_scale);
    }
}

}  // namespace loom_cuda
