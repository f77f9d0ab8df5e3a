/* gguf_test_util.h: a tiny little-endian byte-buffer builder for crafting GGUF files in memory,
 * shared by the GGUF tests. Header-only (static functions); aborts on out of memory, since it
 * only runs in tests.
 *
 *   bb b = {0};
 *   bb_header(&b, 3, 0, 1);          // version 3, no tensors, one key
 *   bb_str(&b, "general.name"); bb_u32(&b, LOOM_GGUF_STRING); bb_str(&b, "x");
 *   loom_gguf_open_memory(b.p, b.len, &g, &err); ... bb_free(&b);
 */
#ifndef LOOM_TESTS_GGUF_TEST_UTIL_H
#define LOOM_TESTS_GGUF_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/gguf.h"

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bb;

static inline void bb_bytes(bb *b, const void *src, size_t n) {
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void bb_le(bb *b, uint64_t v, size_t n) {
    uint8_t x[8];
    for (size_t i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    bb_bytes(b, x, n);
}

static inline void bb_u8(bb *b, uint8_t v) { bb_le(b, v, 1); }
static inline void bb_u32(bb *b, uint32_t v) { bb_le(b, v, 4); }
static inline void bb_u64(bb *b, uint64_t v) { bb_le(b, v, 8); }
static inline void bb_str(bb *b, const char *s) {
    bb_u64(b, strlen(s));
    bb_bytes(b, s, strlen(s));
}
static inline void bb_zeros(bb *b, size_t n) {
    for (size_t i = 0; i < n; i++) bb_u8(b, 0);
}
static inline void bb_pad(bb *b, size_t align) {
    while (b->len % align) bb_u8(b, 0);
}
static inline void bb_header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
/* A key with a u32 value. */
static inline void bb_kv_u32(bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    bb_u32(b, 4 /* LOOM_GGUF_U32 */);
    bb_u32(b, v);
}
/* A tensor info with n_dims dimensions. */
static inline void bb_tensor(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                             uint32_t type, uint64_t offset) {
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) bb_u64(b, ne[i]);
    bb_u32(b, type);
    bb_u64(b, offset);
}
static inline void bb_free(bb *b) {
    free(b->p);
    *b = (bb){0};
}

/* Deep equality of two metadata values: same type, same value (floats compared bit for bit
 * after rounding to their stored width), arrays element by element. */
static inline bool gguf_value_eq(const loom_gguf_value *a, const loom_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case LOOM_GGUF_U8: case LOOM_GGUF_U16: case LOOM_GGUF_U32: case LOOM_GGUF_U64:
        return a->u64 == b->u64;
    case LOOM_GGUF_I8: case LOOM_GGUF_I16: case LOOM_GGUF_I32: case LOOM_GGUF_I64:
        return a->i64 == b->i64;
    case LOOM_GGUF_F32: {
        float x = (float)a->f64, y = (float)b->f64;
        return memcmp(&x, &y, 4) == 0;
    }
    case LOOM_GGUF_F64:
        return memcmp(&a->f64, &b->f64, 8) == 0;
    case LOOM_GGUF_BOOL:
        return a->b == b->b;
    case LOOM_GGUF_STRING:
        return a->str.len == b->str.len && memcmp(a->str.ptr, b->str.ptr, a->str.len) == 0;
    case LOOM_GGUF_ARRAY:
        if (a->arr.elem_type != b->arr.elem_type || a->arr.n != b->arr.n) return false;
        if (loom_gguf_type_size(a->arr.elem_type) != 0)
            return a->arr.n == 0 ||
                   memcmp(a->arr.data, b->arr.data,
                          a->arr.n * loom_gguf_type_size(a->arr.elem_type)) == 0;
        for (uint64_t i = 0; i < a->arr.n; i++)
            if (!gguf_value_eq(&a->arr.items[i], &b->arr.items[i])) return false;
        return true;
    default:
        return false;
    }
}

/* A scratch path under Bazel's TEST_TMPDIR (or /tmp) unique to this process. */
static inline void gguf_tmp_path(char *out, size_t size, const char *name) {
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(out, size, "%s/loom_%d_%s", dir && dir[0] ? dir : "/tmp", (int)getpid(), name);
}

#endif
