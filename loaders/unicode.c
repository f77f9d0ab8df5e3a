/* unicode.c: codepoint property lookup over the generated range table, and the UTF-8 helpers
 * declared in unicode.h. The table (unicode_tables.inc) is sorted by start codepoint and covers
 * 0..0x10FFFF without gaps, so a lookup is a binary search for the last range starting at or
 * before cp; the first 256 codepoints have a direct table. */
#include "loaders/unicode.h"

#include <string.h>

#include "loaders/unicode_tables.inc"

uint8_t loom_ucp_flags(uint32_t cp) {
    if (cp < 256) return ucp_latin1[cp];
    if (cp > 0x10FFFF) return LOOM_UCP_UNDEFINED;
    size_t lo = 0, hi = sizeof ucp_ranges / sizeof ucp_ranges[0]; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ucp_ranges[mid].start <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return ucp_ranges[lo].flags;
}

const char *loom_unicode_version(void) { return LOOM_UNICODE_VERSION; }

size_t loom_utf8_lead_len(unsigned char c) {
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

static int is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

uint32_t loom_utf8_next(const unsigned char *s, size_t n, size_t *i) {
    size_t k = *i;
    unsigned char c = s[k];
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && k + 1 < n && is_cont(s[k + 1])) {
        *i = k + 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[k + 1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && k + 2 < n && is_cont(s[k + 1]) && is_cont(s[k + 2])) {
        *i = k + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[k + 1] & 0x3F) << 6) | (s[k + 2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && k + 3 < n && is_cont(s[k + 1]) && is_cont(s[k + 2]) &&
        is_cont(s[k + 3])) {
        *i = k + 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[k + 1] & 0x3F) << 12) |
               ((uint32_t)(s[k + 2] & 0x3F) << 6) | (s[k + 3] & 0x3F);
    }
    *i = k + 1;
    return 0xFFFD;
}

size_t loom_utf8_encode(uint32_t cp, char out[4]) {
    if (cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void loom_utf8_sanitizer_init(loom_utf8_sanitizer *st) { memset(st, 0, sizeof *st); }

static size_t put_fffd(char *out) {
    out[0] = (char)0xEF;
    out[1] = (char)0xBF;
    out[2] = (char)0xBD;
    return 3;
}

/* Starts a sequence at lead byte c (need == 0): emits it when complete, records what the next
 * byte must be otherwise, or emits U+FFFD for a byte that cannot start a sequence. */
static size_t start_seq(loom_utf8_sanitizer *st, unsigned char c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    st->lo = 0x80;
    st->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        st->need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        st->need = 2;
        if (c == 0xE0) st->lo = 0xA0; /* no overlongs */
        if (c == 0xED) st->hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        st->need = 3;
        if (c == 0xF0) st->lo = 0x90;
        if (c == 0xF4) st->hi = 0x8F; /* <= U+10FFFF */
    } else
        return put_fffd(out); /* 80..C1, F5..FF */
    st->pend[0] = c;
    st->npend = 1;
    return 0;
}

size_t loom_utf8_sanitize(loom_utf8_sanitizer *st, const char *in, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (st->need == 0) {
            w += start_seq(st, c, out + w);
            continue;
        }
        if (c >= st->lo && c <= st->hi) {
            st->pend[st->npend++] = c;
            st->lo = 0x80;
            st->hi = 0xBF;
            if (--st->need == 0) {
                memcpy(out + w, st->pend, st->npend);
                w += st->npend;
                st->npend = 0;
            }
            continue;
        }
        /* The held-back prefix is a maximal ill-formed subpart: one U+FFFD, then c starts over. */
        w += put_fffd(out + w);
        st->need = 0;
        st->npend = 0;
        w += start_seq(st, c, out + w);
    }
    return w;
}

size_t loom_utf8_sanitize_flush(loom_utf8_sanitizer *st, char *out) {
    size_t w = 0;
    if (st->npend) w = put_fffd(out);
    st->need = 0;
    st->npend = 0;
    return w;
}
