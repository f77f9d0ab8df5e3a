/* hash.h: FNV-1a 64, the one non-cryptographic hash loom uses (GGUF name tables, the tokenizer's
 * string tables, the source-GGUF identity of a graph and the checksum of a serialized graph).
 * The values of the latter two are stored in files, so this function must never change. */
#ifndef LOOM_HASH_H
#define LOOM_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of n bytes, continuing from h (start with LOOM_FNV1A64_BASIS). */
#define LOOM_FNV1A64_BASIS 0xcbf29ce484222325ull
static inline uint64_t loom_fnv1a64(uint64_t h, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif /* LOOM_HASH_H */
