/* layout.c: the weight layouts of cpu_kernels.h (loom_weight_layout). */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_kernels.h"

int64_t loom_weight_bytes(loom_ggml_type type, int64_t rows, int64_t cols,
                          loom_weight_layout layout) {
    const int64_t rb = loom_ggml_row_bytes((uint32_t)type, cols);
    if (rb < 0 || rows < 0) return -1;
    switch (layout) {
    case LOOM_WEIGHT_ROWS: break;
    case LOOM_WEIGHT_Q4K_TILES:
        if (type != LOOM_GGML_Q4_K || rows % 16 != 0) return -1;
        break;
    case LOOM_WEIGHT_Q6K_TILES:
        if (type != LOOM_GGML_Q6_K || rows % 16 != 0) return -1;
        return rows > 0 && cols / 256 > INT64_MAX / LOOM_Q6K_TILE_PITCH / rows
                   ? -1
                   : rows * (cols / 256) * LOOM_Q6K_TILE_PITCH;
    default: return -1;
    }
    return rows > 0 && rb > INT64_MAX / rows ? -1 : rows * rb;
}

/* The checks both layout changes share: src a CPU weight of `type` in rows, rows % 16 == 0, dst
 * given where there are bytes to move. */
static loom_status check_to_tiles(const char *who, loom_kweight *src, loom_ggml_type type,
                                  const void *dst, loom_error *err) {
    loom_status s = loom_cpu_check_weight(who, "src", src, err);
    if (s != LOOM_OK) return s;
    if (src->type != type || src->rows % 16 != 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "%s: src is %s with %lld rows; the tiles need %s and rows a "
                              "multiple of 16",
                              who, loom_ggml_type_get((uint32_t)src->type)->name,
                              (long long)src->rows, loom_ggml_type_get((uint32_t)type)->name);
    if (src->rows > 0 && src->cols > 0 && !dst)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: dst is NULL", who);
    return LOOM_OK;
}

loom_status loom_cpu_q4k_to_tiles(loom_kweight src, void *dst, loom_error *err) {
    loom_status s = check_to_tiles("q4k_to_tiles", &src, LOOM_GGML_Q4_K, dst, err);
    if (s != LOOM_OK) return s;
    const int64_t bb = (int64_t)sizeof(loom_block_q4_k);
    const int64_t rb = loom_cpu_weight_row_bytes(&src), nb = rb / bb;
    const uint8_t *in = src.data;
    uint8_t *out = dst;
    for (int64_t r = 0; r < src.rows; r++) {
        const int64_t tile = r / 16 * 16 * rb, i = r % 16;
        for (int64_t j = 0; j < nb; j++)
            memcpy(out + tile + (16 * j + i) * bb, in + r * rb + j * bb, (size_t)bb);
    }
    return LOOM_OK;
}

loom_status loom_cpu_q6k_to_tiles(loom_kweight src, void *dst, loom_error *err) {
    loom_status s = check_to_tiles("q6k_to_tiles", &src, LOOM_GGML_Q6_K, dst, err);
    if (s != LOOM_OK) return s;
    const int64_t bb = (int64_t)sizeof(loom_block_q6_k), pb = LOOM_Q6K_TILE_PITCH;
    const int64_t rb = loom_cpu_weight_row_bytes(&src), nb = rb / bb;
    const uint8_t *in = src.data;
    uint8_t *out = dst;
    for (int64_t r = 0; r < src.rows; r++) {
        const int64_t tile = r / 16 * 16 * nb * pb, i = r % 16;
        for (int64_t j = 0; j < nb; j++) {
            uint8_t *o = out + tile + (16 * j + i) * pb;
            memcpy(o, in + r * rb + j * bb, (size_t)bb);
            memset(o + bb, 0, (size_t)(pb - bb));
        }
    }
    return LOOM_OK;
}
