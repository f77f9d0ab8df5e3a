// layout.cu: the weight layouts of cuda_kernels.h, made from a weight in rows (GGUF) by moving
// bytes (none changed; bit-exact with the CPU twins loom_cpu_q4k_to_tiles / _q6k_to_tiles).
// loom_cuda_q4k_to_tiles: LOOM_WEIGHT_Q4K_TILES, a 16-byte copy a thread: dst unit u (of the 9
// in a 144-byte block) is block b = u / 9 of dst = tile T, block j, tile row i, read from row
// 16 T + i, block j of src. loom_cuda_q6k_to_tiles: LOOM_WEIGHT_Q6K_TILES, a 4-byte word a
// thread: dst word u (of the 53 in a 212-byte padded block) from two 2-byte loads of the
// source block (210 bytes: only 2-byte aligned), the last word's upper half the zero padding.
// Memory traffic: each byte read and written once.
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

constexpr int kQ6Words = LOOM_Q6K_TILE_PITCH / 4;  // 53
static_assert(LOOM_Q6K_TILE_PITCH % 4 == 0 && LOOM_Q6K_TILE_PITCH - 4 < 210 &&
                  LOOM_Q6K_TILE_PITCH >= 210,
              "the padded block's last word holds the block's last 2 bytes and the padding");

static __global__ void __launch_bounds__(kThreads)
q6k_to_tiles_kernel(const uint16_t *src, uint32_t *dst, int64_t nb, int64_t units) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = u / kQ6Words, part = u % kQ6Words;
        const int64_t tile = b / (16 * nb), k = b % (16 * nb), j = k / 16, i = k % 16;
        const uint16_t *s = src + (((16 * tile + i) * nb + j) * 210 + 4 * part) / 2;
        const uint32_t lo = __ldg(s), hi = 4 * part + 2 < 210 ? (uint32_t)__ldg(s + 1) : 0u;
        dst[u] = lo | hi << 16;
    }
}

}  // namespace
}  // namespace loom_cuda

using namespace loom_cuda;

// The checks both layout changes share: src of `type` in rows, rows % 16, cols % 256, aligned
// device pointers (`align` bytes), dst (dst_bytes) not overlapping src (src_bytes).
static loom_status check_to_tiles(const char *who, loom_kweight src, loom_ggml_type type,
                                  const void *dst, int64_t src_bytes, int64_t dst_bytes,
                                  uintptr_t align, loom_error *err) {
    if (src.type != type || src.layout != LOOM_WEIGHT_ROWS || src.rows < 0 ||
        src.rows % 16 != 0 || src.cols < 0 || src.cols % 256 != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "%s: src is type %d, layout %d, %lld x %lld; the tiles need %s in rows "
                 "(LOOM_WEIGHT_ROWS), rows a multiple of 16 and cols of 256",
                 who, (int)src.type, (int)src.layout, (long long)src.rows, (long long)src.cols,
                 loom_ggml_type_get((uint32_t)type)->name);
    if (dst_bytes == 0) return LOOM_OK;
    if (!src.data || !dst || (uintptr_t)src.data % align != 0 || (uintptr_t)dst % align != 0)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT,
                 "%s: src and dst must be %d-byte aligned device pointers", who, (int)align);
    const char *s = static_cast<const char *>(src.data), *d = static_cast<const char *>(dst);
    if (s < d + dst_bytes && d < s + src_bytes)
        ARG_FAIL(LOOM_ERR_INVALID_ARGUMENT, "%s: dst overlaps src", who);
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err,
                                              cudaStream_t stream) {
    const int64_t nb = src.cols / 256, units = src.rows * nb * 9, bytes = units * 16;
    loom_status st = check_to_tiles("q4k_to_tiles", src, LOOM_GGML_Q4_K, dst, bytes, bytes, 16, err);
    if (st != LOOM_OK || units == 0) return st;
    CUDA_CHECK(launch(q4k_to_tiles_kernel, grid_for(units, kThreads), kThreads, 0, stream,
                      static_cast<const uint4 *>(src.data), static_cast<uint4 *>(dst), nb, units));
    return LOOM_OK;
}

extern "C" loom_status loom_cuda_q6k_to_tiles(loom_kweight src, void *dst, loom_error *err,
                                              cudaStream_t stream) {
    const int64_t nb = src.cols / 256, units = src.rows * nb * kQ6Words;
    loom_status st = check_to_tiles("q6k_to_tiles", src, LOOM_GGML_Q6_K, dst,
                                    src.rows * nb * 210, units * 4, 4, err);
    if (st != LOOM_OK || units == 0) return st;
    CUDA_CHECK(launch(q6k_to_tiles_kernel, grid_for(units, kThreads), kThreads, 0, stream,
                      static_cast<const uint16_t *>(src.data), static_cast<uint32_t *>(dst), nb,
                      units));
    return LOOM_OK;
}
