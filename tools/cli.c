/* cli.c: helpers shared by the `loom` subcommands (see cli.h). */
#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool loom_cli_parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool loom_cli_parse_int(const char *s, long lo, long hi, int32_t *out) {
    long v;
    if (!loom_cli_parse_long(s, lo, hi, &v)) return false;
    *out = (int32_t)v;
    return true;
}

bool loom_cli_parse_float(const char *s, float *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

double loom_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t loom_cli_utf8_len(const unsigned char *s, size_t n) {
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xe0) == 0xc0) len = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0) len = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void loom_cli_put_string(FILE *f, const char *p, size_t len, bool json, size_t max) {
    const unsigned char *s = (const unsigned char *)p;
    size_t shown = len > max ? max : len;
    fputc('"', f);
    for (size_t i = 0; i < shown;) {
        unsigned char c = s[i];
        size_t n = loom_cli_utf8_len(s + i, len - i);
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, json ? "\\u%04x" : "\\x%02x", c);
        } else if (n == 0) {
            if (json) fputs("\\ufffd", f);
            else fprintf(f, "\\x%02x", c);
        } else {
            fwrite(s + i, 1, n, f);
            i += n;
            continue;
        }
        i++;
    }
    fputc('"', f);
    if (shown < len) fprintf(f, "...(%zu bytes)", len);
}

void loom_cli_put_json(FILE *f, const char *s) {
    loom_cli_put_string(f, s, strlen(s), true, SIZE_MAX);
}

void loom_cli_load_progress(void *ctx, uint64_t done) {
    loom_cli_progress *p = ctx;
    if (done >= p->next) {
        fprintf(stderr, "\r%s: weights %.0f MiB loaded", p->who, done / 1048576.0);
        p->next = done + (256u << 20);
    }
}

void loom_cli_progress_end(const loom_cli_progress *p) {
    if (p->next > (256u << 20)) fputc('\n', stderr);
}
