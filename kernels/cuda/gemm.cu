// gemm.cu: batched quantized GEMM for prefill, y[N x M] = x[N x K] W[M x K]^T, N <= 32 per
// launch (the launchers in gemv.cu loop over chunks of 32 tokens, the last one ragged).
//
// Launch geometry: 128-thread blocks, one warp per weight row (4 rows a block), grid
// ceil(M / 4). A warp loads and decodes each pass of its row ONCE (Lane<T>::load + prep, the
// same lane mapping as the GEMV) and applies it to every token: 32 float accumulators per lane, held in registers
// through a statically unrolled loop over t < 32 with the predicate t < n (no dynamic register
// indexing, no spills: the ptxas report is checked by tests/kernels_cuda).
//
// Memory traffic: each weight byte is read once from DRAM for all n tokens; x (n * K floats)
// comes through L1/L2, once per warp; y written once.
//
// Numeric contract: per token exactly the GEMV's operations (the same Lane<T> load/prep/loadx/dotw, the same
// __fadd_rn pass order, the same warp_sum butterfly, the same epilogue), so y[t, :] is
// bit-identical to loom_cuda_matmul on x[t, :] alone. Against the CPU twin: as the GEMV.
// Folded RMSNorm (NORM kernels, norm.cuh): the block first computes the scales of its n tokens
// (norm.cu's reduction, one token after the other: n x K floats from L2 a block, a quarter of
// what its four warps read of x anyway), then every x read is XNormed's (x * scale) * w[k]:
// bit for bit loom_cuda_rms_norm followed by the plain kernel, and still the GEMV's bits.
#include <type_traits>

#include "kernels/cuda/matmul.cuh"

namespace loom_cuda {
namespace {

constexpr int kMaxN = 32;

template <int T, bool WIDE, bool NORM>
static __global__ void __launch_bounds__(kThreads, 1) gemm_kernel(const Seg s, const float *x,
                                                               int n, int64_t K, int epi,
                                                               const PreNorm norm) {
    pdl_launch_dependents();  // first: the next launch overlaps this one (it still waits)
    pdl_wait();
    __shared__ double npart[NORM ? kMaxN * kWarps : 1];
    __shared__ float nscale[NORM ? kMaxN : 1];
    if (NORM) block_rms_scales<kMaxN>(x, K, n, K, norm, npart, nscale);
    using L = Lane<T>;
    using XS = typename std::conditional<NORM, XNormed, XPlain>::type;
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (r >= s.rows) return;
    const uint8_t *row = seg_row_t<T>(s, r);
    const int bs = block_stride_t<T>(s.tiles);
    const int64_t np = n_passes<T>(K);
    float acc[kMaxN];
#pragma unroll
    for (int t = 0; t < kMaxN; t++) acc[t] = 0.0f;
    for (int64_t p = 0; p < np; p++) {
        const typename L::Raw raw = L::template load<WIDE>(row, bs, p, lane, K);
        const typename L::W w = L::template prep<WIDE>(raw, row, bs, p, lane, K);
#pragma unroll
        for (int t = 0; t < kMaxN; t++) {
            if (t < n) {
                XS xs;
                if constexpr (NORM) xs = XNormed{x + (int64_t)t * K, norm.w, nscale[t]};
                else xs = XPlain{x + (int64_t)t * K};
                const typename L::X xv = L::template loadx<WIDE>(xs, p, lane, K);
                acc[t] = __fadd_rn(acc[t], L::dotw(w, xv));
            }
        }
    }
#pragma unroll
    for (int t = 0; t < kMaxN; t++) {
        if (t < n) {
            float v = warp_sum(acc[t]);
            const int64_t i = (int64_t)t * s.rows + r;
            if (lane == 0) {
                if (epi == EPI_ADD)
                    v = __fadd_rn(v, s.resid[i]);
                else if (epi == EPI_SWIGLU_FINISH)
                    v = __fmul_rn(silu_f(s.y[i]), v);
                else if (s.bias)
                    v = __fadd_rn(v, s.bias[r]);
                s.y[i] = v;
            }
        }
    }
}

template <int T, bool WIDE>
void launch_gemm(const Seg &s, const float *x, int n, int64_t K, int epi, const PreNorm *norm,
                 cudaStream_t stream) {
    dim3 grid((unsigned)((s.rows + kWarps - 1) / kWarps));
    if (norm)
        (void)launch(gemm_kernel<T, WIDE, true>, grid, kThreads, 0, stream, s, x, n, K, epi, *norm);
    else
        (void)launch(gemm_kernel<T, WIDE, false>, grid, kThreads, 0, stream, s, x, n, K, epi,
                     PreNorm{});
}

}  // namespace

loom_status gemm_launch(const Seg &s, const float *x, int64_t n, int64_t K, int epi,
                        const PreNorm *norm, loom_error *err, cudaStream_t stream) {
    if (s.rows == 0 || n == 0) return LOOM_OK;
    if (n > kMaxN)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gemm: %lld tokens > %d per pass",
                              (long long)n, kMaxN);
    const bool w = s.wide != 0;
    const int nn = (int)n;
    switch (s.type) {
    case LOOM_GGML_Q4_K:
        w ? launch_gemm<LOOM_GGML_Q4_K, true>(s, x, nn, K, epi, norm, stream)
          : launch_gemm<LOOM_GGML_Q4_K, false>(s, x, nn, K, epi, norm, stream);
        break;
    case LOOM_GGML_Q5_K:
        w ? launch_gemm<LOOM_GGML_Q5_K, true>(s, x, nn, K, epi, norm, stream)
          : launch_gemm<LOOM_GGML_Q5_K, false>(s, x, nn, K, epi, norm, stream);
        break;
    case LOOM_GGML_Q6_K: launch_gemm<LOOM_GGML_Q6_K, true>(s, x, nn, K, epi, norm, stream); break;
    case LOOM_GGML_Q8_0: launch_gemm<LOOM_GGML_Q8_0, true>(s, x, nn, K, epi, norm, stream); break;
    case LOOM_GGML_F16:
        w ? launch_gemm<LOOM_GGML_F16, true>(s, x, nn, K, epi, norm, stream)
          : launch_gemm<LOOM_GGML_F16, false>(s, x, nn, K, epi, norm, stream);
        break;
    case LOOM_GGML_BF16:
        w ? launch_gemm<LOOM_GGML_BF16, true>(s, x, nn, K, epi, norm, stream)
          : launch_gemm<LOOM_GGML_BF16, false>(s, x, nn, K, epi, norm, stream);
        break;
    case LOOM_GGML_F32:
        w ? launch_gemm<LOOM_GGML_F32, true>(s, x, nn, K, epi, norm, stream)
          : launch_gemm<LOOM_GGML_F32, false>(s, x, nn, K, epi, norm, stream);
        break;
    default:
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "gemm: weight type %d", s.type);
    }
    LAUNCH_CHECK();
    return LOOM_OK;
}

}  // namespace loom_cuda
