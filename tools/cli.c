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

bool loom_cli_parse_ids(const char *s, int32_t **ids, int32_t *n) {
    if (!s || !*s) return false;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    if (cap > INT32_MAX) return false;
    int32_t *v = malloc(cap * sizeof *v), k = 0;
    if (!v) return false;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char word[24];
        long x;
        if (len == 0 || len >= sizeof word) break;
        memcpy(word, p, len);
        word[len] = '\0';
        if (!loom_cli_parse_long(word, INT32_MIN, INT32_MAX, &x)) break;
        v[k++] = (int32_t)x;
        if (!comma) {
            *ids = v;
            *n = k;
            return true;
        }
        p = comma + 1;
    }
    free(v);
    return false;
}

/* True when `name` (n bytes) is one of the '|'-separated words of list. */
static bool in_list(const char *list, const char *name, size_t n) {
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, "|");
        if (k == n && !strncmp(p, name, n)) return true;
        p += k + (p[k] == '|');
    }
    return false;
}

static bool takes_value(loom_cli_opt_kind k) { return k != LOOM_CLI_FLAG && k != LOOM_CLI_SELF; }

/* Stores value v for o; false when v is not valid for it. */
static bool store(const loom_cli_opt *o, const char *v) {
    switch (o->kind) {
    case LOOM_CLI_STRING: *(const char **)o->dst = v; return true;
    case LOOM_CLI_CHOICE:
        if (!in_list(o->choices, v, strlen(v))) return false;
        *(const char **)o->dst = v;
        return true;
    case LOOM_CLI_INT: return loom_cli_parse_int(v, o->lo, o->hi, o->dst);
    case LOOM_CLI_LONG: return loom_cli_parse_long(v, o->lo, o->hi, o->dst);
    case LOOM_CLI_FLOAT: return loom_cli_parse_float(v, o->dst);
    case LOOM_CLI_FLOAT_POS: {
        float f;
        if (!loom_cli_parse_float(v, &f) || !(f > 0.0f)) return false;
        *(float *)o->dst = f;
        return true;
    }
    case LOOM_CLI_U64: {
        if (*v < '0' || *v > '9') return false;
        errno = 0;
        char *end;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end) return false;
        *(unsigned long long *)o->dst = x;
        return true;
    }
    case LOOM_CLI_FLAG:
    case LOOM_CLI_SELF: break;
    }
    return false;
}

/* What o accepts, for the message about an invalid value. */
static void accepted(const loom_cli_opt *o, char *buf, size_t len) {
    switch (o->kind) {
    case LOOM_CLI_CHOICE: snprintf(buf, len, "one of %s", o->choices); break;
    case LOOM_CLI_INT:
    case LOOM_CLI_LONG: snprintf(buf, len, "an integer in [%ld, %ld]", o->lo, o->hi); break;
    case LOOM_CLI_FLOAT: snprintf(buf, len, "a number"); break;
    case LOOM_CLI_FLOAT_POS: snprintf(buf, len, "a number > 0"); break;
    case LOOM_CLI_U64: snprintf(buf, len, "a non-negative integer"); break;
    default: snprintf(buf, len, "a value"); break;
    }
}

int loom_cli_parse_opts(const char *cmd, int argc, char **argv, const loom_cli_opt *opts,
                        size_t n_opts, void (*usage)(FILE *f), const char *operand_name,
                        const char **operand) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (*operand) {
                fprintf(stderr, "%s: more than one %s given ('%s', '%s')\n", cmd, operand_name,
                        *operand, a);
                return LOOM_CLI_USAGE;
            }
            *operand = a;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return LOOM_CLI_HELP;
        }
        /* "--name=value": the name is what stands before the '=' */
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const loom_cli_opt *o = NULL;
        for (size_t k = 0; k < n_opts && !o; k++)
            if (in_list(opts[k].names, a, name_len)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option '%.*s'\n", cmd, (int)name_len, a);
            usage(stderr);
            return LOOM_CLI_USAGE;
        }
        if (!takes_value(o->kind)) {
            if (eq) {
                fprintf(stderr, "%s: option %.*s takes no value (got '%s')\n", cmd,
                        (int)name_len, a, eq + 1);
                return LOOM_CLI_USAGE;
            }
            if (o->kind == LOOM_CLI_FLAG) *(bool *)o->dst = true;
            else *(const char **)o->dst = a;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "%s: option %s needs a value\n", cmd, a);
            return LOOM_CLI_USAGE;
        }
        if (!store(o, v)) {
            char what[96];
            accepted(o, what, sizeof what);
            fprintf(stderr, "%s: option %.*s needs a valid value (got '%s'; %s)\n", cmd,
                    (int)name_len, a, v, what);
            return LOOM_CLI_USAGE;
        }
    }
    return LOOM_CLI_GO_ON;
}

double loom_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void loom_cli_bench_tokens(int32_t *toks, int32_t n, int32_t n_vocab) {
    uint32_t seed = 12345;
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        toks[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
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
