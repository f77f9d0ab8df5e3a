// layout.cu: the weight layouts of cuda_kernels.h. loom_cuda_q4k_to_tiles: a Q4_K weight in
// rows (GGUF) into LOOM_WEIGHT_Q4K_TILES (cpu_kernels.h), a 16-byte copy a thread: dst unit u
// (of the 9 in a 144-byte block) is block b = u / 9 of dst = tile T, block j, tile row i, read
// from row 16 T + i, block j of src. Memory traffic: each byte read and written once. Bit-exact
// with loom_cpu_q4k_to_tiles (bytes moved, none changed).
#include "kernels/cuda/common.cuh"

namespace loom_cuda {
namespace {

static __global__ void __launch_bounds__(kThreads)
q4k_to_tiles_kernel(const uint4 *src, uint4 *dst, int64_t nb, int64_t units) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = u / 9, part = u % 9;
        const int64_t tile = b / (16 * nb), k = b % (16 * nb), j = k / 16, i = k % 16;
        dst[u] = __ldg(&src[((16 * tile + i) * nb + j) * 9 + part]);
    }
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

extern "C" loom_status loom_cuda_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err,
                                              cudaStream_t stream) {
    if (src.type != LOOM_GGML_Q4_K || src.layout != LOOM_WEIGHT_ROWS || src.rows < 0 ||
        src.rows % 16 != 0 || src.cols < 0 || src.cols % 256 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "q4k_to_tiles: src is type %d, layout %d, %lld x %lld; the tiles need Q4_K in "
                 "rows (LOOM_WEIGHT_ROWS), rows a multiple of 16 and cols of 256",
                 (int)src.type, (int)src.layout, (long long)src.rows, (long long)src.cols);
    const int64_t nb = src.cols / 256, units = src.rows * nb * 9;
    if (units == 0) return LOOM_OK;
    if (!src.data || !dst || (uintptr_t)src.data % 16 != 0 || (uintptr_t)dst % 16 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "q4k_to_tiles: src and dst must be 16-byte aligned device pointers");
    const char *s = static_cast<const char *>(src.data), *d = static_cast<const char *>(dst);
    const int64_t bytes = units * 16;
    if (s < d + bytes && d < s + bytes)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "q4k_to_tiles: dst overlaps src");
    CUDA_CHECK(launch(q4k_to_tiles_kernel, grid_for(units, kThreads), kThreads, 0, stream,
                      static_cast<const uint4 *>(src.data), static_cast<uint4 *>(dst), nb, units));
    return LOOM_OK;
}
