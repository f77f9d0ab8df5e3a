/* layout.c: the weight layouts of cpu_kernels.h (loom_weight_layout). */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

loom_status loom_cpu_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err) {
    loom_status s = loom_cpu_check_weight("q4k_to_tiles", "src", &src, err);
    if (s != LOOM_OK) return s;
    if (src.type != LOOM_GGML_Q4_K || src.rows % 16 != 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "q4k_to_tiles: src is %s with %lld rows; the tiles need Q4_K and "
                              "rows a multiple of 16",
                              loom_ggml_type_get((uint32_t)src.type)->name, (long long)src.rows);
    const int64_t bb = (int64_t)sizeof(loom_block_q4_k);
    const int64_t rb = loom_cpu_weight_row_bytes(&src), nb = rb / bb;
    if (src.rows > 0 && nb > 0 && !dst)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "q4k_to_tiles: dst is NULL");
    const uint8_t *in = src.data;
    uint8_t *out = dst;
    for (int64_t r = 0; r < src.rows; r++) {
        const int64_t tile = r / 16 * 16 * rb, i = r % 16;
        for (int64_t j = 0; j < nb; j++)
            memcpy(out + tile + (16 * j + i) * bb, in + r * rb + j * bb, (size_t)bb);
    }
    return LOOM_OK;
}
