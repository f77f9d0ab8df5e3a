/* byte_level.h: bl_encode, an implementation of GPT-2's bytes_to_unicode independent of the
 * tokenizer's own (printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100..
 * in byte order), used by the tokenizer tests and the tokenizer fuzzer to spell byte-level tokens
 * and merges. Header-only, no test framework. */
#ifndef LOOM_TESTS_TOKENIZER_BYTE_LEVEL_H
#define LOOM_TESTS_TOKENIZER_BYTE_LEVEL_H

#include <stddef.h>

/* Byte-level spelling of s[0..n) into out (room for 2n + 1); NUL-terminated, returns length. */
static size_t bl_encode(const char *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned b = (unsigned char)s[i], cp = b;
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (!printable) {
            unsigned k = 0;
            for (unsigned c = 0; c < b; c++)
                k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
            cp = 256 + k;
        }
        if (cp < 0x80)
            out[w++] = (char)cp;
        else {
            out[w++] = (char)(0xC0 | (cp >> 6));
            out[w++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[w] = '\0';
    return w;
}

#endif
