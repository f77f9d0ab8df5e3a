/* bandwidth.c: the host's measured copy bandwidth, the CPU roofline's denominator. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_internal.h"

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes;
    int64_t parts;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    const copy_job *j = ctx;
    const size_t a = j->bytes / (size_t)j->parts * (size_t)begin;
    const size_t b = end == j->parts ? j->bytes : j->bytes / (size_t)j->parts * (size_t)end;
    memcpy(j->dst + a, j->src + a, b - a);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

loom_status loom_cpu_copy_bandwidth(size_t bytes, double *gbs, loom_error *err) {
    *gbs = 0;
    if (bytes < ((size_t)1 << 20))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "copy bandwidth: %zu bytes is below the 1 MiB minimum", bytes);
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY,
                              "copy bandwidth: cannot allocate 2 x %zu bytes", bytes);
    }
    memset(src, 1, bytes);
    memset(dst, 0, bytes); /* the pages exist before the first timed copy */
    /* One range a thread: parallel_for splits [0, parts) into that many contiguous ranges. */
    copy_job j = {dst, src, bytes, loom_cpu_get_threads()};
    double best = 0;
    for (int r = 0; r < 6; r++) {
        double t0 = now_s();
        loom_cpu_parallel_for(j.parts, (int64_t)(bytes / (size_t)j.parts), copy_range, &j);
        double t = now_s() - t0;
        if (r > 0 && t > 0 && 2.0 * (double)bytes / t > best) best = 2.0 * (double)bytes / t;
    }
    free(src);
    free(dst);
    *gbs = best / 1e9;
    return LOOM_OK;
}
