// embed.cu: embedding lookup, out[t, :] = table row ids[t] decoded to float32, from a table of
// any supported weight type (F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K).
//
// Launch geometry: fast path (LOOM_FAST_EMBD): grid (ceil(D / 128), n_tokens), a thread per
// value of one row, consecutive threads on consecutive values (coalesced writes, the block's
// quant bytes shared through L1). Simple path: a flat grid-stride loop over n_tokens * D.
// Memory traffic: only the selected rows are read (each byte about once), out written once.
// Numeric contract: bit-exact with loom_dequantize_row (decode_value in quant_blocks.cuh uses
// the CPU's operation order with _rn intrinsics). An id outside [0, rows) yields a row of zeros
// (the launcher cannot see device ids; the CPU twin reports it).
#include "kernels/cuda/quant_blocks.cuh"

namespace loom_cuda {
namespace {

static __global__ void __launch_bounds__(kThreads)
embed_fast_kernel(const uint8_t *table, int type, int64_t rows, int64_t rb, int64_t D,
                  const int32_t *ids, float *out) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t t = blockIdx.y, k = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (k >= D) return;
    const int32_t id = ids[t];
    out[t * D + k] = (id >= 0 && id < rows) ? decode_value(type, table + (int64_t)id * rb, k) : 0.0f;
}

static __global__ void __launch_bounds__(kThreads)
embed_simple_kernel(const uint8_t *table, int type, int64_t rows, int64_t rb, int64_t D,
                    const int32_t *ids, int64_t n, float *out) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * D;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / D, k = i % D;
        const int32_t id = ids[t];
        out[i] = (id >= 0 && id < rows) ? decode_value(type, table + (int64_t)id * rb, k) : 0.0f;
    }
}

int g_embed_fallback_logged = 0;

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_embed(loom_kweight table, const int32_t *ids, int64_t n_tokens,
                                       float *out, loom_error *err, cudaStream_t stream) {
    if (!weight_type_ok(table.type))
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "embed: table type %d is not supported on CUDA",
                 (int)table.type);
    if (table.layout != LOOM_WEIGHT_ROWS)
        ARG_FAIL(LOOM_ERR_UNSUPPORTED, "embed: table layout %d; embed reads rows back to back "
                 "(LOOM_WEIGHT_ROWS) only", (int)table.layout);
    if (n_tokens < 0 || table.rows < 0 || table.cols < 0 ||
        loom_ggml_row_bytes((uint32_t)table.type, table.cols) < 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "embed: bad shape (tokens %lld, table %lld x %lld)",
                 (long long)n_tokens, (long long)table.rows, (long long)table.cols);
    if (n_tokens == 0 || table.cols == 0) return LOOM_OK;
    if (!table.data || !ids || !out) ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "embed: NULL pointer");
    const int64_t D = table.cols, rb = loom_ggml_row_bytes((uint32_t)table.type, D);
    const uint8_t *tb = (const uint8_t *)table.data;
    if (fast(SW_FAST_EMBD) && n_tokens <= 65535) {
        dim3 grid((unsigned)((D + kThreads - 1) / kThreads), (unsigned)n_tokens);
        cudaError_t e = launch(embed_fast_kernel, grid, kThreads, 0, stream, tb, (int)table.type,
                               table.rows, rb, D, ids, out);
        if (e == cudaSuccess) return LOOM_OK;
        loom_error why = {};
        cuda_fail(&why, e, "embed_fast_kernel", __func__, __FILE__, __LINE__);
        log_fallback_once(&g_embed_fallback_logged, "embed", &why);
    }
    CUDA_CHECK(launch(embed_simple_kernel, grid_for(n_tokens * D, kThreads), kThreads, 0, stream,
                      tb, (int)table.type, table.rows, rb, D, ids, n_tokens, out));
    return LOOM_OK;
}
