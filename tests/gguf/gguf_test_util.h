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

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

#endif
