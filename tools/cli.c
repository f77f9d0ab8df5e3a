/* cli.c: helpers shared by the `loom` subcommands (see cli.h). */
#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
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
