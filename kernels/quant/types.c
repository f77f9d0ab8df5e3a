/* types.c: the ggml type table (name, block size, bytes per block), row and tensor sizes.
 *
 * Every type id llama.cpp has written into a GGUF file is here, so any file parses; the ids in
 * the enum's gaps that ggml later retired (Q4_0_4_4 & co., which share Q4_0's / IQ4_NL's block
 * layout) are known by name too, but nothing here can compute them. Sizes match ggml's
 * type_traits (and the gguf Python package's GGML_QUANT_SIZES). Only F32, F16, BF16, Q8_0, Q4_K,
 * Q5_K and Q6_K are `computable`. Ids 4 and 5 (Q4_2, Q4_3) vanished before GGUF existed and stay
 * unknown. Row and tensor byte sizes are computed here (overflow-checked) for every module.
 */
#include "kernels/quant/quant.h"

static const loom_ggml_type_info type_table[LOOM_GGML_TYPE_ID_LIMIT] = {
    [LOOM_GGML_F32] = {"F32", 1, 4, true},
    [LOOM_GGML_F16] = {"F16", 1, 2, true},
    [LOOM_GGML_Q4_0] = {"Q4_0", 32, 18, false},
    [LOOM_GGML_Q4_1] = {"Q4_1", 32, 20, false},
    [LOOM_GGML_Q5_0] = {"Q5_0", 32, 22, false},
    [LOOM_GGML_Q5_1] = {"Q5_1", 32, 24, false},
    [LOOM_GGML_Q8_0] = {"Q8_0", 32, 34, true},
    [LOOM_GGML_Q8_1] = {"Q8_1", 32, 36, false}, /* gguf-py says 40 (f32 d, s): ggml has f16 */
    [LOOM_GGML_Q2_K] = {"Q2_K", 256, 84, false},
    [LOOM_GGML_Q3_K] = {"Q3_K", 256, 110, false},
    [LOOM_GGML_Q4_K] = {"Q4_K", 256, 144, true},
    [LOOM_GGML_Q5_K] = {"Q5_K", 256, 176, true},
    [LOOM_GGML_Q6_K] = {"Q6_K", 256, 210, true},
    [LOOM_GGML_Q8_K] = {"Q8_K", 256, 292, false},
    [LOOM_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66, false},
    [LOOM_GGML_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [LOOM_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98, false},
    [LOOM_GGML_IQ1_S] = {"IQ1_S", 256, 50, false},
    [LOOM_GGML_IQ4_NL] = {"IQ4_NL", 32, 18, false},
    [LOOM_GGML_IQ3_S] = {"IQ3_S", 256, 110, false},
    [LOOM_GGML_IQ2_S] = {"IQ2_S", 256, 82, false},
    [LOOM_GGML_IQ4_XS] = {"IQ4_XS", 256, 136, false},
    [LOOM_GGML_I8] = {"I8", 1, 1, false},
    [LOOM_GGML_I16] = {"I16", 1, 2, false},
    [LOOM_GGML_I32] = {"I32", 1, 4, false},
    [LOOM_GGML_I64] = {"I64", 1, 8, false},
    [LOOM_GGML_F64] = {"F64", 1, 8, false},
    [LOOM_GGML_IQ1_M] = {"IQ1_M", 256, 56, false},
    [LOOM_GGML_BF16] = {"BF16", 1, 2, true},
    [31] = {"Q4_0_4_4", 32, 18, false}, /* retired: Q4_0 blocks, interleaved */
    [32] = {"Q4_0_4_8", 32, 18, false},
    [33] = {"Q4_0_8_8", 32, 18, false},
    [LOOM_GGML_TQ1_0] = {"TQ1_0", 256, 54, false},
    [LOOM_GGML_TQ2_0] = {"TQ2_0", 256, 66, false},
    [36] = {"IQ4_NL_4_4", 32, 18, false}, /* retired: IQ4_NL blocks, interleaved */
    [37] = {"IQ4_NL_4_8", 32, 18, false},
    [38] = {"IQ4_NL_8_8", 32, 18, false},
    [LOOM_GGML_MXFP4] = {"MXFP4", 32, 17, false},
    [LOOM_GGML_NVFP4] = {"NVFP4", 64, 36, false},
    [LOOM_GGML_Q1_0] = {"Q1_0", 128, 18, false},
};

const loom_ggml_type_info *loom_ggml_type_get(uint32_t type_id) {
    if (type_id >= LOOM_GGML_TYPE_ID_LIMIT || type_table[type_id].name == NULL) return NULL;
    return &type_table[type_id];
}

int64_t loom_ggml_row_bytes(uint32_t type_id, int64_t n) {
    const loom_ggml_type_info *t = loom_ggml_type_get(type_id);
    if (t == NULL || n < 0 || n % t->block_size != 0) return -1;
    int64_t blocks = n / t->block_size;
    if (blocks > INT64_MAX / t->type_size) return -2;
    return blocks * t->type_size;
}

int64_t loom_ggml_tensor_bytes(uint32_t type_id, uint32_t n_dims, const int64_t *ne) {
    if (n_dims == 0 || ne == NULL) return -1;
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return -1;
        if (ne[d] != 0 && n > INT64_MAX / ne[d]) return -2;
        n *= ne[d];
    }
    int64_t row = loom_ggml_row_bytes(type_id, ne[0]);
    if (row < 0) return row;
    int64_t rows = ne[0] ? n / ne[0] : 0; /* exact: n is ne[0] times the product of the rest */
    if (rows != 0 && row > INT64_MAX / rows) return -2;
    return row * rows;
}
