/* gguf_impl.h: the reader's handle layout and small helpers shared by gguf.c (parsing) and
 * gguf_access.c (accessors), plus the alignment rule gguf_writer.c shares. Private to
 * //loaders:gguf.
 *
 * Invariants once loom_gguf_open* succeeded: keys[i] / values[i] for i < n_kv are fully parsed
 * and unique; tensors[i] for i < n_tensors has a known type, 1..4 dims, nbytes computed without
 * overflow and [file_offset, file_offset + nbytes) inside [0, size); every scalar array's data
 * lies inside the file; everything else lives in the arena.
 */
#ifndef LOOM_LOADERS_GGUF_IMPL_H
#define LOOM_LOADERS_GGUF_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "loaders/gguf.h"

/* The arena: chunks of zeroed memory, all freed at close (gguf.c: arena_alloc, arena_free). */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

typedef struct {
    arena_chunk *head;
} arena;

struct loom_gguf {
    const uint8_t *base; /* the whole file */
    uint64_t size;
    bool mapped;         /* base came from mmap and is unmapped at close */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    size_t n_kv;
    const char **keys;
    loom_gguf_value *values;
    size_t n_tensors;
    loom_gguf_tensor *tensors;
    /* open-addressing hash tables of index+1 (0 = empty), sizes are powers of two */
    uint32_t *key_slots, *tensor_slots;
    size_t key_mask, tensor_mask;
    arena arena;
};

/* Metadata type names and scalar sizes (0: string, array), indexed by loom_gguf_type. */
static const char *const type_names[LOOM_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
static const uint8_t type_sizes[LOOM_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* general.alignment's rule, for the reader and the writer alike: a nonzero power of two that a
 * u32 holds (the key's type, u32, is the caller's check). */
static inline bool gguf_alignment_ok(uint64_t a) {
    return a != 0 && a <= UINT32_MAX && (a & (a - 1)) == 0;
}

/* The n-byte little-endian unsigned integer at p. */
static inline uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Sign-extends a width-byte two's complement value. */
static inline int64_t sign_extend(uint64_t raw, size_t width) {
    if (width == 8) return (int64_t)raw;
    uint64_t sign = (uint64_t)1 << (8 * width - 1);
    return (raw & sign) ? (int64_t)(raw | ~((sign << 1) - 1)) : (int64_t)raw;
}

#endif
