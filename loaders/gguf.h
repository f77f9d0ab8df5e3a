/* gguf.h: reading and writing GGUF files (llama.cpp's model format), versions 2 and 3.
 *
 * Reader: loom_gguf_open maps the file read-only and parses the header, every metadata
 * key/value (all 13 value types, arrays of strings, nested arrays) and every tensor info,
 * checking each count, length, type, alignment and offset against the bytes that remain before
 * anything is allocated. Tensor data is never copied: loom_gguf_tensor.data points into the
 * mapping. A malformed file gets LOOM_ERR_FORMAT with a message naming the field and byte offset
 * ("gguf: tensor info 3 ('blk.0.attn_q.weight'): n_dims 7 at offset 1234: must be 1..4");
 * a version other than 2 or 3 gets LOOM_ERR_UNSUPPORTED, a file that cannot be opened or mapped
 * LOOM_ERR_IO. Checked beyond the format's syntax: unique keys and tensor names, bool bytes 0/1,
 * arrays nested at most LOOM_GGUF_MAX_NESTING deep, general.alignment a u32 power of two, tensor
 * offsets aligned, inside the file and not overlapping. Tensors of any ggml type parse; whether
 * loom can compute one is the type table's `computable` (kernels/quant/quant.h).
 * A file with no tensors may end right after its metadata (vocabulary-only files do).
 *
 *   loom_gguf *g; loom_error err = {0};
 *   if (loom_gguf_open("m.gguf", &g, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *   uint32_t n_layer; loom_gguf_get_u32(g, "llama.block_count", &n_layer, &err);
 *   const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "token_embd.weight");
 *   loom_gguf_close(g);
 *
 * Ownership: the handle owns the mapping and every string and value it hands out; they stay
 * valid until loom_gguf_close. Handles are immutable after open, so reading one from several
 * threads is safe.
 */
#ifndef LOOM_GGUF_H
#define LOOM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/quant/quant.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, with GGUF's ids. */
typedef enum loom_gguf_type {
    LOOM_GGUF_U8 = 0,
    LOOM_GGUF_I8 = 1,
    LOOM_GGUF_U16 = 2,
    LOOM_GGUF_I16 = 3,
    LOOM_GGUF_U32 = 4,
    LOOM_GGUF_I32 = 5,
    LOOM_GGUF_F32 = 6,
    LOOM_GGUF_BOOL = 7,
    LOOM_GGUF_STRING = 8,
    LOOM_GGUF_ARRAY = 9,
    LOOM_GGUF_U64 = 10,
    LOOM_GGUF_I64 = 11,
    LOOM_GGUF_F64 = 12,
    LOOM_GGUF_TYPE_COUNT = 13,
} loom_gguf_type;

/* LOOM_GGUF_MAX_NESTING: arrays nest at most this deep (an array of arrays is 2 levels). */
enum { LOOM_GGUF_MAX_DIMS = 4, LOOM_GGUF_DEFAULT_ALIGNMENT = 32, LOOM_GGUF_MAX_NESTING = 8 };

/* A metadata value. Scalars are widened into the union (u64 for unsigned, i64 for signed, f64
 * for floats). Strings are NUL-terminated copies (len excludes the NUL; a string may itself
 * contain NUL bytes, so use len). An array of scalars keeps its raw little-endian elements
 * (`data`, maybe unaligned: read them with loom_gguf_array_*); an array of strings or of arrays
 * has `items`, one loom_gguf_value per element. */
typedef struct loom_gguf_value {
    loom_gguf_type type;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        struct { const char *ptr; uint64_t len; } str;
        struct {
            loom_gguf_type elem_type;
            uint64_t n;
            const void *data;                    /* scalar elements, else NULL */
            const struct loom_gguf_value *items; /* string/array elements, else NULL */
        } arr;
    };
} loom_gguf_value;

typedef struct loom_gguf_tensor {
    const char *name;
    uint32_t n_dims;             /* 1..4 */
    int64_t ne[LOOM_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the row length (contiguous) */
    loom_ggml_type type;
    uint64_t offset;             /* relative to the start of the data section */
    uint64_t file_offset;        /* absolute byte offset in the file */
    uint64_t nbytes;             /* from the type's block size; checked inside the file */
    const void *data;            /* into the read-only mapping */
} loom_gguf_tensor;

typedef struct loom_gguf loom_gguf;

/* Maps and parses path. On failure *out is NULL and err says why. */
loom_status loom_gguf_open(const char *path, loom_gguf **out, loom_error *err);
/* Parses a buffer the caller keeps alive until close (used by the fuzzer and tests). */
loom_status loom_gguf_open_memory(const void *data, size_t size, loom_gguf **out, loom_error *err);
void loom_gguf_close(loom_gguf *g); /* NULL is a no-op */

uint32_t loom_gguf_version(const loom_gguf *g);
uint64_t loom_gguf_alignment(const loom_gguf *g);
uint64_t loom_gguf_file_size(const loom_gguf *g);
uint64_t loom_gguf_data_offset(const loom_gguf *g); /* start of the tensor data section */
const void *loom_gguf_file_bytes(const loom_gguf *g); /* the whole mapping */

/* Keys, in file order. */
size_t loom_gguf_n_keys(const loom_gguf *g);
const char *loom_gguf_key_name(const loom_gguf *g, size_t i);
const loom_gguf_value *loom_gguf_key_value(const loom_gguf *g, size_t i);
/* The value of key, or NULL when absent. */
const loom_gguf_value *loom_gguf_find(const loom_gguf *g, const char *key);

/* Typed accessors: LOOM_ERR_NOT_FOUND when the key is absent, LOOM_ERR_TYPE when it holds
 * another type (the message names the key, the stored type and the wanted one). get_u32 and
 * get_i32 also accept any integer type whose value fits; get_f32 accepts f32 and f64. */
loom_status loom_gguf_get_u32(const loom_gguf *g, const char *key, uint32_t *out, loom_error *err);
loom_status loom_gguf_get_i32(const loom_gguf *g, const char *key, int32_t *out, loom_error *err);
loom_status loom_gguf_get_u64(const loom_gguf *g, const char *key, uint64_t *out, loom_error *err);
loom_status loom_gguf_get_f32(const loom_gguf *g, const char *key, float *out, loom_error *err);
loom_status loom_gguf_get_bool(const loom_gguf *g, const char *key, bool *out, loom_error *err);
loom_status loom_gguf_get_string(const loom_gguf *g, const char *key, const char **out,
                                 loom_error *err);
/* Optional keys: like loom_gguf_get_bool / _string, but an absent key is LOOM_OK with *out
 * left as it was (the caller's default); a key of another type is still LOOM_ERR_TYPE. */
loom_status loom_gguf_get_opt_bool(const loom_gguf *g, const char *key, bool *out, loom_error *err);
loom_status loom_gguf_get_opt_string(const loom_gguf *g, const char *key, const char **out,
                                     loom_error *err);
/* An array of elem_type (LOOM_ERR_TYPE otherwise). */
loom_status loom_gguf_get_array(const loom_gguf *g, const char *key, loom_gguf_type elem_type,
                                const loom_gguf_value **out, loom_error *err);

/* Element i of a scalar array, widened. The caller checks i < n and the element type. */
uint64_t loom_gguf_array_u64(const loom_gguf_value *arr, uint64_t i);
int64_t loom_gguf_array_i64(const loom_gguf_value *arr, uint64_t i);
double loom_gguf_array_f64(const loom_gguf_value *arr, uint64_t i);

const char *loom_gguf_type_name(loom_gguf_type t); /* "u32", "string", ...; "?" if unknown */
/* The integer types: u8 .. i64; the signed ones: i8, i16, i32, i64 (their values are in i64,
 * the unsigned ones' in u64). */
bool loom_gguf_type_is_int(loom_gguf_type t);
bool loom_gguf_type_is_signed(loom_gguf_type t);
/* Bytes of one scalar of type t; 0 for string, array and unknown types. */
size_t loom_gguf_type_size(loom_gguf_type t);

/* Tensors, in file order. */
size_t loom_gguf_n_tensors(const loom_gguf *g);
const loom_gguf_tensor *loom_gguf_tensor_at(const loom_gguf *g, size_t i);
const loom_gguf_tensor *loom_gguf_find_tensor(const loom_gguf *g, const char *name);

/* Writer: builds a GGUF v3 file. Keys and tensors are written in the order they are added.
 * Tensor data is produced by a callback at write time, so a multi-gigabyte model never needs
 * to sit in memory twice; loom_gguf_writer_add_tensor_data copies a small buffer instead.
 * loom_gguf_writer_write writes to PATH.tmp and renames it over PATH only on success, so a
 * failed write never leaves a half-written file. */
typedef struct loom_gguf_writer loom_gguf_writer;
typedef loom_status (*loom_gguf_fill_fn)(void *ctx, void *dst, uint64_t nbytes, loom_error *err);

loom_status loom_gguf_writer_create(loom_gguf_writer **out, loom_error *err);
void loom_gguf_writer_destroy(loom_gguf_writer *w); /* NULL is a no-op */
loom_status loom_gguf_writer_set_alignment(loom_gguf_writer *w, uint32_t alignment, loom_error *err);
/* A value: `type` picks the field of v that is written (a scalar must fit its type: a u8 of
 * 300 is refused). Arrays are accepted too, with arr.data (scalar elements) or arr.items (string
 * or array elements, nested at most LOOM_GGUF_MAX_NESTING deep), so a value read by
 * loom_gguf_open can be copied as it is. Everything is copied. Replaces an existing key; setting
 * "general.alignment" (u32, power of two) also sets the alignment. */
loom_status loom_gguf_writer_set(loom_gguf_writer *w, const char *key, const loom_gguf_value *v,
                                 loom_error *err);
loom_status loom_gguf_writer_set_u32(loom_gguf_writer *w, const char *key, uint32_t v, loom_error *err);
loom_status loom_gguf_writer_set_f32(loom_gguf_writer *w, const char *key, float v, loom_error *err);
loom_status loom_gguf_writer_set_bool(loom_gguf_writer *w, const char *key, bool v, loom_error *err);
loom_status loom_gguf_writer_set_string(loom_gguf_writer *w, const char *key, const char *s,
                                        loom_error *err);
/* An array of n scalars of elem_type, raw little-endian elements copied from data. */
loom_status loom_gguf_writer_set_array(loom_gguf_writer *w, const char *key, loom_gguf_type elem_type,
                                       const void *data, uint64_t n, loom_error *err);
loom_status loom_gguf_writer_set_string_array(loom_gguf_writer *w, const char *key,
                                              const char *const *strs, uint64_t n, loom_error *err);
/* A tensor whose bytes fill(ctx, dst, nbytes) writes at write time (ctx must outlive it). */
loom_status loom_gguf_writer_add_tensor(loom_gguf_writer *w, const char *name, loom_ggml_type type,
                                        uint32_t n_dims, const int64_t *ne, loom_gguf_fill_fn fill,
                                        void *ctx, loom_error *err);
/* A tensor whose bytes are copied now from data (nbytes must equal the computed size). */
loom_status loom_gguf_writer_add_tensor_data(loom_gguf_writer *w, const char *name,
                                             loom_ggml_type type, uint32_t n_dims, const int64_t *ne,
                                             const void *data, uint64_t nbytes, loom_error *err);
loom_status loom_gguf_writer_write(loom_gguf_writer *w, const char *path, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_GGUF_H */
