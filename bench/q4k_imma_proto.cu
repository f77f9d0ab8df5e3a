// q4k_imma_proto.cu: a standalone prototype (not part of the kernel library) of the next Q4_K
// GEMV candidate of bench/NOTES.md section 2: INT8 tensor cores with x as exact int8 limbs.
//
// y[M] = W[M x K] x[K], W in Q4_K. Per super-block of 256 values, each warp scales its x by a
// power of two s (max |x s| < 2^22), rounds to X and writes X = 2^16 x0 + 2^8 x1 + x2 as balanced
// int8 digits into shared memory: the B operand of mma.sync m16n8k32 s8.s8 -> s32, limbs in
// columns 0..2. A = the raw 4-bit quants (one Q4_K sub-block = one k32 step; lane (g, t) holds
// the 8 quant bytes 8t..8t+7 of rows g and g+8 of a 32-byte chunk: a k permutation that B
// follows). The sub-block scale multiplies the exact s32 result in integer; once a super-block
// the limbs are folded in FP32 and the mins subtracted through the sub-block sums of X.
// Launch: one block of 4 warps per 16-row tile, warps take super-blocks sb % 4 (v11's split),
// next super-block's weights and x prefetched in registers. Plain epilogue only; no GEMM.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o q4k_imma_proto bench/q4k_imma_proto.cu
// Run:   ./q4k_imma_proto   (prints a correctness line per shape and a timing table)
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static constexpr int kBlockBytes = 144;

__device__ __forceinline__ void mma_s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct SB {  // one super-block of rows g and g+8 for this lane, plus its x share
    uint4 h0, h1;     // d, dmin, scales
    uint2 q0[4], q1[4];
    float4 xa, xb;
};

__device__ __forceinline__ void load_sb(SB &s, const uint8_t *w0, const uint8_t *w1,
                                        const float *x, int sb, int lane, int t) {
    const uint8_t *b0 = w0 + (size_t)sb * kBlockBytes, *b1 = w1 + (size_t)sb * kBlockBytes;
    s.h0 = *reinterpret_cast<const uint4 *>(b0);
    s.h1 = *reinterpret_cast<const uint4 *>(b1);
#pragma unroll
    for (int c = 0; c < 4; c++) {
        s.q0[c] = *reinterpret_cast<const uint2 *>(b0 + 16 + 32 * c + 8 * t);
        s.q1[c] = *reinterpret_cast<const uint2 *>(b1 + 16 + 32 * c + 8 * t);
    }
    const float *xs = x + (size_t)sb * 256 + lane * 8;
    s.xa = *reinterpret_cast<const float4 *>(xs);
    s.xb = *reinterpret_cast<const float4 *>(xs + 4);
}

__device__ __forceinline__ uint32_t pack4(int a, int b, int c, int d) {
    return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

__global__ void __launch_bounds__(128, 4)
imma_gemv(const uint8_t *__restrict__ W, const float *__restrict__ x, float *__restrict__ y,
          int M, int K) {
    __shared__ __align__(16) uint8_t xs[4][8][3][32];
    __shared__ float sxs[4][8];
    __shared__ float red[4][16];
    const int nsb = K / 256;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t row_bytes = (size_t)nsb * kBlockBytes;
    const int r0 = blockIdx.x * 16 + g, r1 = r0 + 8;
    const uint8_t *w0 = W + (size_t)(r0 < M ? r0 : 0) * row_bytes;
    const uint8_t *w1 = W + (size_t)(r1 < M ? r1 : 0) * row_bytes;
    const float wA = t == 0 ? 65536.f : (t == 1 ? 1.f : 0.f);
    const float wB = t == 0 ? 256.f : 0.f;
    const float tmask = t == 0 ? 1.f : 0.f;
    float acc0 = 0.f, acc1 = 0.f;
    SB cur, nxt = {};
    if (warp < nsb) load_sb(cur, w0, w1, x, warp, lane, t);
    for (int sb = warp; sb < nsb; sb += 4) {
        if (sb + 4 < nsb) load_sb(nxt, w0, w1, x, sb + 4, lane, t);
        // x -> limbs in shared memory (sub-block lane / 4, offset 8 (lane % 4))
        float v[8] = {cur.xa.x, cur.xa.y, cur.xa.z, cur.xa.w, cur.xb.x, cur.xb.y, cur.xb.z, cur.xb.w};
        unsigned mx = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) mx = max(mx, __float_as_uint(v[i]) & 0x7fffffffu);
        mx = __reduce_max_sync(0xffffffffu, mx);
        // s = 2^(21 - E), E = the unbiased exponent of max |x|; e = s's biased exponent
        int e = 275 - (int)(mx >> 23);
        e = mx ? min(max(e, 1), 253) : 127;
        const float s = __int_as_float(e << 23), inv_s = __int_as_float((254 - e) << 23);
        int X[8], sum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) { X[i] = __float2int_rn(v[i] * s); sum += X[i]; }
        int L1[8], L0[8];
#pragma unroll
        for (int i = 0; i < 8; i++) { L1[i] = (X[i] + 128) >> 8; L0[i] = (X[i] + 32896) >> 16; }
        uint8_t *dst = &xs[warp][lane >> 2][0][8 * (lane & 3)];
        *reinterpret_cast<uint2 *>(dst + 0) = make_uint2(pack4(L0[0], L0[1], L0[2], L0[3]), pack4(L0[4], L0[5], L0[6], L0[7]));
        *reinterpret_cast<uint2 *>(dst + 32) = make_uint2(pack4(L1[0], L1[1], L1[2], L1[3]), pack4(L1[4], L1[5], L1[6], L1[7]));
        *reinterpret_cast<uint2 *>(dst + 64) = make_uint2(pack4(X[0], X[1], X[2], X[3]), pack4(X[4], X[5], X[6], X[7]));
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if ((lane & 3) == 0) sxs[warp][lane >> 2] = (float)sum;
        __syncwarp();
        // scales of rows g (h0) and g+8 (h1): bytes 4..15 of the block
        const uint32_t sc0a = cur.h0.y & 0x3F3F3F3Fu, m0a = cur.h0.z & 0x3F3F3F3Fu;
        const uint32_t sc0b = (cur.h0.w & 0x0F0F0F0Fu) | ((cur.h0.y >> 2) & 0x30303030u);
        const uint32_t m0b = ((cur.h0.w >> 4) & 0x0F0F0F0Fu) | ((cur.h0.z >> 2) & 0x30303030u);
        const uint32_t sc1a = cur.h1.y & 0x3F3F3F3Fu, m1a = cur.h1.z & 0x3F3F3F3Fu;
        const uint32_t sc1b = (cur.h1.w & 0x0F0F0F0Fu) | ((cur.h1.y >> 2) & 0x30303030u);
        const uint32_t m1b = ((cur.h1.w >> 4) & 0x0F0F0F0Fu) | ((cur.h1.z >> 2) & 0x30303030u);
        int ia0 = 0, ia1 = 0, ia2 = 0, ia3 = 0;
        float mn0 = 0.f, mn1 = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c = i >> 1;
            const bool hi = i & 1;
            const uint32_t M4 = 0x0F0F0F0Fu;
            const uint32_t a0 = (hi ? cur.q0[c].x >> 4 : cur.q0[c].x) & M4;
            const uint32_t a1 = (hi ? cur.q1[c].x >> 4 : cur.q1[c].x) & M4;
            const uint32_t a2 = (hi ? cur.q0[c].y >> 4 : cur.q0[c].y) & M4;
            const uint32_t a3 = (hi ? cur.q1[c].y >> 4 : cur.q1[c].y) & M4;
            uint2 b = make_uint2(0, 0);
            if (g < 3) b = *reinterpret_cast<const uint2 *>(&xs[warp][i][g][8 * t]);
            int cc[4] = {0, 0, 0, 0};
            mma_s8(cc, a0, a1, a2, a3, b.x, b.y);
            const int sh = 8 * (i & 3);
            const int s0 = ((i < 4 ? sc0a : sc0b) >> sh) & 0xFF, s1 = ((i < 4 ? sc1a : sc1b) >> sh) & 0xFF;
            ia0 += s0 * cc[0];
            ia1 += s0 * cc[1];
            ia2 += s1 * cc[2];
            ia3 += s1 * cc[3];
            const float sx = sxs[warp][i];
            mn0 = fmaf((float)(((i < 4 ? m0a : m0b) >> sh) & 0xFF), sx, mn0);
            mn1 = fmaf((float)(((i < 4 ? m1a : m1b) >> sh) & 0xFF), sx, mn1);
        }
        const float d0 = __half2float(__ushort_as_half((unsigned short)(cur.h0.x & 0xFFFF)));
        const float dm0 = __half2float(__ushort_as_half((unsigned short)(cur.h0.x >> 16)));
        const float d1 = __half2float(__ushort_as_half((unsigned short)(cur.h1.x & 0xFFFF)));
        const float dm1 = __half2float(__ushort_as_half((unsigned short)(cur.h1.x >> 16)));
        const float f0 = fmaf(wA, (float)ia0, wB * (float)ia1);
        const float f1 = fmaf(wA, (float)ia2, wB * (float)ia3);
        acc0 = fmaf(fmaf(d0, f0, -dm0 * mn0 * tmask), inv_s, acc0);
        acc1 = fmaf(fmaf(d1, f1, -dm1 * mn1 * tmask), inv_s, acc1);
        __syncwarp();
        cur = nxt;
    }
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
    if (t == 0) { red[warp][g] = acc0; red[warp][g + 8] = acc1; }
    __syncthreads();
    if (threadIdx.x < 16) {
        const int r = blockIdx.x * 16 + threadIdx.x;
        const float v = ((red[0][threadIdx.x] + red[1][threadIdx.x]) + red[2][threadIdx.x]) + red[3][threadIdx.x];
        if (r < M) y[r] = v;
    }
}

// ---- host: random Q4_K, CPU reference, timing ----
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd() { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }
static float frnd() { return (rnd() >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f; }

static void fill_q4k(uint8_t *p, size_t nblocks) {
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * kBlockBytes;
        __half d = __float2half(0.001f + 0.01f * fabsf(frnd()));
        __half dm = __float2half(0.001f + 0.01f * fabsf(frnd()));
        memcpy(blk, &d, 2);
        memcpy(blk + 2, &dm, 2);
        for (int i = 4; i < kBlockBytes; i++) blk[i] = (uint8_t)rnd();
    }
}

static void scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
    else { *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

static void cpu_ref(const uint8_t *W, const float *x, int M, int K, double *y, double *bound) {
    const int nsb = K / 256;
    for (int r = 0; r < M; r++) {
        double s = 0, b = 0;
        for (int sb = 0; sb < nsb; sb++) {
            const uint8_t *blk = W + ((size_t)r * nsb + sb) * kBlockBytes;
            __half dh, dmh;
            memcpy(&dh, blk, 2);
            memcpy(&dmh, blk + 2, 2);
            const double d = __half2float(dh), dm = __half2float(dmh);
            for (int k = 0; k < 256; k++) {
                const int c = k / 64, p = k % 64;
                const int q = p < 32 ? (blk[16 + 32 * c + p] & 0xF) : (blk[16 + 32 * c + p - 32] >> 4);
                int sc, m;
                scale_min(2 * c + (p >= 32), blk + 4, &sc, &m);
                const double w = d * sc * q - dm * m;
                s += w * x[sb * 256 + k];
                b += fabs(w * x[sb * 256 + k]);
            }
        }
        y[r] = s;
        bound[r] = b;
    }
}

int main() {
    int dev_sms = 0;
    CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, 0));
    // copy bandwidth
    size_t cb = 1ull << 30;
    void *ca, *cb2;
    CK(cudaMalloc(&ca, cb));
    CK(cudaMalloc(&cb2, cb));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(cb2, ca, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; i++) CK(cudaMemcpy(cb2, ca, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float cms;
    CK(cudaEventElapsedTime(&cms, e0, e1));
    const double copy_gbs = 2.0 * cb * 10 / (cms * 1e-3) / 1e9;
    printf("device copy (read+write): %.1f GB/s\n", copy_gbs);
    CK(cudaFree(ca));
    CK(cudaFree(cb2));

    struct Shape { const char *name; int M, K; } shapes[] = {
        {"check M=45", 45, 2560}, {"check wide x", 37, 1024},
        {"4B gate 9728x2560", 9728, 2560}, {"4B down 2560x9728", 2560, 9728},
        {"4B attn out 2560x4096", 2560, 4096}, {"4B QKV rows 6144x2560", 6144, 2560},
        {"8B gate 14336x4096", 14336, 4096}, {"8B down 4096x14336", 4096, 14336}};
    int fails = 0;
    for (const Shape &sh : shapes) {
        const int M = sh.M, K = sh.K, nsb = K / 256;
        const size_t mat = (size_t)M * nsb * kBlockBytes;
        const bool check = strncmp(sh.name, "check", 5) == 0;
        const int copies = check ? 1 : (int)std::max<size_t>(1, (size_t)(512ull << 20) / mat);
        std::vector<uint8_t> hw(mat);
        fill_q4k(hw.data(), (size_t)M * nsb);
        std::vector<float> hx(K);
        const bool wide = strstr(sh.name, "wide") != NULL;
        for (int k = 0; k < K; k++) hx[k] = wide ? ldexpf(frnd(), (int)(rnd() % 54) - 20) : frnd();
        uint8_t *dw;
        float *dx, *dy;
        CK(cudaMalloc(&dw, mat * copies));
        CK(cudaMalloc(&dx, K * sizeof(float)));
        CK(cudaMalloc(&dy, M * sizeof(float)));
        for (int c = 0; c < copies; c++) CK(cudaMemcpy(dw + mat * c, hw.data(), mat, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dx, hx.data(), K * sizeof(float), cudaMemcpyHostToDevice));
        CK(cudaMemset(dy, 0xFF, M * sizeof(float)));
        const unsigned grid = (M + 15) / 16;
        imma_gemv<<<grid, 128>>>(dw, dx, dy, M, K);
        CK(cudaGetLastError());
        std::vector<float> hy(M);
        CK(cudaMemcpy(hy.data(), dy, M * sizeof(float), cudaMemcpyDeviceToHost));
        if (check || M <= 9728) {
            std::vector<double> ry(M), rb(M);
            cpu_ref(hw.data(), hx.data(), M, K, ry.data(), rb.data());
            double worst = 0;
            for (int r = 0; r < M; r++) {
                const double err = fabs(hy[r] - ry[r]) / (rb[r] > 0 ? rb[r] : 1);
                if (!(err <= worst)) worst = isnan(err) ? INFINITY : std::max(worst, err);
            }
            const bool ok = worst <= 1e-5;
            fails += !ok;
            printf("%-26s max |y - y_ref| / sum|W x| = %.3e (contract 1e-5) %s\n", sh.name, worst, ok ? "ok" : "FAIL");
        }
        if (!check) {
            const int iters = 200;
            std::vector<float> med;
            for (int rep = 0; rep < 7; rep++) {
                CK(cudaEventRecord(e0));
                for (int i = 0; i < iters; i++)
                    imma_gemv<<<grid, 128>>>(dw + mat * (i % copies), dx, dy, M, K);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                med.push_back(ms * 1e3f / iters);
            }
            std::sort(med.begin(), med.end());
            const double us = med[3];
            const double gbs = mat / (us * 1e-6) / 1e9;
            printf("%-26s %8.2f us  %7.1f GB/s  %5.1f%% of copy  (%d copies rotated)\n", sh.name, us, gbs, 100 * gbs / copy_gbs, copies);
        }
        CK(cudaFree(dw));
        CK(cudaFree(dx));
        CK(cudaFree(dy));
    }
    printf("%d failed\n", fails);
    return fails ? 1 : 0;
}
