/* quant.h: ggml tensor types, their block layouts, and CPU reference (de)quantization.
 *
 * This is the dtype table the whole of loom shares (loaders, ir and kernels read it). Every ggml
 * type id that llama.cpp has ever written is known by name, so any GGUF file parses; only the
 * types marked `computable` can be dequantized, quantized or dotted here, and asking for another
 * is LOOM_ERR_UNSUPPORTED.
 *
 * Block layouts (little-endian, packed, identical to ggml's so GGUF bytes are used as they are):
 *   Q8_0  32 values / 34 bytes : f16 d; int8 qs[32];                      x = d * q
 *   Q4_K 256 values / 144 bytes: f16 d, dmin; u8 scales[12]; u8 qs[128];  x = d*sc*q - dmin*m
 *   Q5_K 256 values / 176 bytes: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
 *   Q6_K 256 values / 210 bytes: u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d
 * K-quant super-blocks hold 8 (Q4_K/Q5_K, 6-bit packed scale and min) or 16 (Q6_K, int8 scale)
 * sub-blocks of 32 or 16 values.
 */
#ifndef LOOM_QUANT_H
#define LOOM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ggml's type ids, as stored in GGUF tensor infos. Gaps are ids ggml has retired. */
typedef enum loom_ggml_type {
    LOOM_GGML_F32 = 0,
    LOOM_GGML_F16 = 1,
    LOOM_GGML_Q4_0 = 2,
    LOOM_GGML_Q4_1 = 3,
    LOOM_GGML_Q5_0 = 6,
    LOOM_GGML_Q5_1 = 7,
    LOOM_GGML_Q8_0 = 8,
    LOOM_GGML_Q8_1 = 9,
    LOOM_GGML_Q2_K = 10,
    LOOM_GGML_Q3_K = 11,
    LOOM_GGML_Q4_K = 12,
    LOOM_GGML_Q5_K = 13,
    LOOM_GGML_Q6_K = 14,
    LOOM_GGML_Q8_K = 15,
    LOOM_GGML_IQ2_XXS = 16,
    LOOM_GGML_IQ2_XS = 17,
    LOOM_GGML_IQ3_XXS = 18,
    LOOM_GGML_IQ1_S = 19,
    LOOM_GGML_IQ4_NL = 20,
    LOOM_GGML_IQ3_S = 21,
    LOOM_GGML_IQ2_S = 22,
    LOOM_GGML_IQ4_XS = 23,
    LOOM_GGML_I8 = 24,
    LOOM_GGML_I16 = 25,
    LOOM_GGML_I32 = 26,
    LOOM_GGML_I64 = 27,
    LOOM_GGML_F64 = 28,
    LOOM_GGML_IQ1_M = 29,
    LOOM_GGML_BF16 = 30,
    LOOM_GGML_TQ1_0 = 34,
    LOOM_GGML_TQ2_0 = 35,
    LOOM_GGML_MXFP4 = 39,
    LOOM_GGML_NVFP4 = 40,
    LOOM_GGML_Q1_0 = 41,
    LOOM_GGML_TYPE_ID_LIMIT = 42, /* every valid id is below this */
} loom_ggml_type;

typedef struct loom_ggml_type_info {
    const char *name;     /* "Q4_K", as llama.cpp prints it */
    int64_t block_size;   /* values per block (1 for plain types) */
    int64_t type_size;    /* bytes per block */
    bool computable;      /* loom can dequantize / quantize / dot it */
} loom_ggml_type_info;

/* Block structs. Field f16 values are raw IEEE half bits. */
enum { LOOM_QK8_0 = 32, LOOM_QK_K = 256, LOOM_K_SCALE_SIZE = 12 };

typedef struct { uint16_t d; int8_t qs[LOOM_QK8_0]; } loom_block_q8_0;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[LOOM_K_SCALE_SIZE];
    uint8_t qs[LOOM_QK_K / 2];
} loom_block_q4_k;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[LOOM_K_SCALE_SIZE];
    uint8_t qh[LOOM_QK_K / 8];
    uint8_t qs[LOOM_QK_K / 2];
} loom_block_q5_k;
typedef struct {
    uint8_t ql[LOOM_QK_K / 2];
    uint8_t qh[LOOM_QK_K / 4];
    int8_t scales[LOOM_QK_K / 16];
    uint16_t d;
} loom_block_q6_k;

_Static_assert(sizeof(loom_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(loom_block_q4_k) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(loom_block_q5_k) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(loom_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed scale bytes:
 *   bytes 0..3: scale j (j<4) in bits 0-5, bits 6-7 = high bits of scale j+4
 *   bytes 4..7: min j (j<4) in bits 0-5,   bits 6-7 = high bits of min j+4
 *   bytes 8..11: low nibble = scale j+4 bits 0-3, high nibble = min j+4 bits 0-3 */
static inline void loom_k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* The table entry for a type id, or NULL when the id is not a ggml type. */
const loom_ggml_type_info *loom_ggml_type_get(uint32_t type_id);

/* Bytes of a row of n values: -1 when the id is unknown or n is not a multiple of the block
 * size, -2 when the size overflows int64. */
int64_t loom_ggml_row_bytes(uint32_t type_id, int64_t n);

/* Bytes of a tensor whose ggml shape is ne[0..n_dims) (ne[0] the row length in values, the other
 * dims counting rows): -1 when the id is unknown, n_dims is 0, a dim is negative or ne[0] is not a
 * multiple of the block size; -2 when the element count or the byte size overflows int64. The one
 * shape rule of the GGUF reader and writer, so a file one writes the other reads. */
int64_t loom_ggml_tensor_bytes(uint32_t type_id, uint32_t n_dims, const int64_t *ne);

/* IEEE half and bfloat16 <-> float (round to nearest even; NaN stays NaN). */
float loom_fp16_to_fp32(uint16_t h);
uint16_t loom_fp32_to_fp16(float f);
float loom_bf16_to_fp32(uint16_t h);
uint16_t loom_fp32_to_bf16(float f);

/* Decodes n values of a row (n a multiple of the block size) into dst.
 * LOOM_ERR_UNSUPPORTED for a type that is not computable, LOOM_ERR_INVALID_ARGUMENT for bad n. */
loom_status loom_dequantize_row(loom_ggml_type type, const void *src, float *dst, int64_t n);

/* Encodes n floats into blocks of `type` (at least as accurate as ggml's reference quantizers:
 * K-quants search the sub-block scale/min). Same errors as loom_dequantize_row. */
loom_status loom_quantize_row(loom_ggml_type type, const float *src, void *dst, int64_t n);

/* sum_i dequant(row)[i] * x[i] over n values, float32 accumulation, dequantizing on the fly.
 * The caller guarantees a computable type and a valid n (LOOM_ASSERT otherwise). */
float loom_dot_row(loom_ggml_type type, const void *row, const float *x, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_QUANT_H */
