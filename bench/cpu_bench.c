/* cpu_bench.c: the CPU backend's matmul (loom_cpu_matmul) at Qwen3-4B shapes, against the
 * machine's copy bandwidth measured in the same run.
 *
 *   bazel build -c opt //bench:cpu_bench //bench:cpu_bench_baseline
 *   bazel-bin/bench/cpu_bench [--threads N] [--reps R] [--pool MIB] [--only TYPE]
 *
 * cpu_bench runs the kernels as loom ships them (an AVX2 clone where the CPU has AVX2),
 * cpu_bench_baseline the same sources without the clones (what a CPU without AVX2 runs); run
 * both one after the other to compare them. Each row multiplies a weight of one type and shape
 * by fresh copies of it that together fill --pool MiB (default 1024, more than the caches), one
 * GEMV (or N-token GEMM) per copy, so the weight bytes come from DRAM; time per call is the
 * median over R passes (default 5) of a pass's time divided by its copies. GB/s counts weight
 * bytes only; "% copy" divides by the host's copy bandwidth (loom_cpu_copy_bandwidth over
 * half of --pool each way, read + write counted: the denominator of `loom bench --backend cpu`'s
 * roofline). Up to commit 6c312e1 the column was "% read", against a read-only stream of its own
 * (bench/RESULTS.md "Session 23" was taken with that).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/quant/quant.h"

#ifdef CPU_BENCH_BASELINE
#define CPU_BENCH_BUILD "baseline (no AVX2 clones)"
#else
#define CPU_BENCH_BUILD "shipped (AVX2 clones where the CPU has AVX2)"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct row_spec {
    const char *what;
    int64_t m, k, n;
} row_spec;

int main(int argc, char **argv) {
    int threads = 0, reps = 5;
    long pool_mib = 1024;
    const char *only = NULL; /* one type's rows, by its name ("Q4_K") */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pool") && i + 1 < argc) pool_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--pool MIB] [--only TYPE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 1000 || pool_mib < 16 || pool_mib > (1L << 20) || threads < 0 ||
        threads > 256) {
        fprintf(stderr, "cpu_bench: --reps 1..1000, --pool 16..1048576, --threads 0..256\n");
        return 2;
    }
    loom_cpu_set_threads(threads);
    threads = loom_cpu_get_threads();
    const size_t pool = (size_t)pool_mib << 20;
    double bw = 0; /* GB/s */
    loom_error err = {0};
    if (loom_cpu_copy_bandwidth(pool / 2, &bw, &err) != LOOM_OK) {
        fprintf(stderr, "cpu_bench: %s\n", err.msg);
        return 1;
    }

    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
                snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
                model[strcspn(model, "\n")] = 0;
                break;
            }
        fclose(f);
    }
    printf("cpu_bench: %s, %d threads, build: %s\n", model, threads, CPU_BENCH_BUILD);
    printf("copy bandwidth: %.1f GB/s (read + write, %d threads, %ld MiB each way)\n\n", bw,
           threads, pool_mib / 2);
    printf("| type | shape (M x K) | N | us / call | weight GB/s | %% copy | G weights/s |\n");
    printf("| ---- | ------------- | -: | --------: | ----------: | -----: | ----------: |\n");

    static const loom_ggml_type types[] = {LOOM_GGML_Q4_K, LOOM_GGML_Q5_K, LOOM_GGML_Q6_K,
                                           LOOM_GGML_Q8_0, LOOM_GGML_F16};
    static const row_spec rows[] = {
        {"ffn gate/up", 9728, 2560, 1},
        {"ffn down", 2560, 9728, 1},
        {"attn q", 4096, 2560, 1},
        {"ffn gate/up", 9728, 2560, 8},
        {"ffn gate/up", 9728, 2560, 32},
    };
    int status = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            if (only && strcasecmp(only, loom_ggml_type_get((uint32_t)types[ti])->name)) continue;
            const row_spec r = rows[ri];
            const int64_t rb = loom_ggml_row_bytes((uint32_t)types[ti], r.k);
            const size_t wbytes = (size_t)(rb * r.m);
            size_t copies = pool / wbytes;
            if (copies < 2) copies = 2;
            uint8_t *w = malloc(wbytes * copies);
            float *x = malloc((size_t)(r.n * r.k) * sizeof(float));
            float *y = malloc((size_t)(r.n * r.m) * sizeof(float));
            float *row = malloc((size_t)r.k * sizeof(float));
            double *t = malloc((size_t)reps * sizeof(double));
            if (!w || !x || !y || !row || !t) {
                fprintf(stderr, "cpu_bench: out of memory\n");
                return 1;
            }
            uint32_t s = 12345;
            for (int64_t i = 0; i < r.n * r.k; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
            }
            for (int64_t m = 0; m < r.m; m++) {
                for (int64_t k = 0; k < r.k; k++) {
                    s = s * 1664525u + 1013904223u;
                    row[k] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.04f;
                }
                if (loom_quantize_row(types[ti], row, w + (size_t)(rb * m), r.k) != LOOM_OK) {
                    fprintf(stderr, "cpu_bench: quantize failed\n");
                    return 1;
                }
            }
            for (size_t c = 1; c < copies; c++) memcpy(w + c * wbytes, w, wbytes);
            for (int rep = 0; rep <= reps && !status; rep++) { /* rep 0 warms up */
                double t0 = now();
                for (size_t c = 0; c < copies && !status; c++) {
                    loom_kweight kw = {
                        .data = w + c * wbytes, .type = types[ti], .rows = r.m, .cols = r.k};
                    if (loom_cpu_matmul(x, r.n, kw, y, &err) != LOOM_OK) {
                        fprintf(stderr, "cpu_bench: %s\n", err.msg);
                        status = 1;
                    }
                }
                if (rep) t[rep - 1] = (now() - t0) / (double)copies;
            }
            if (!status) {
                qsort(t, (size_t)reps, sizeof *t, cmp_double);
                const double sec = t[reps / 2];
                printf("| %s | %s %lld x %lld | %lld | %.1f | %.2f | %.1f%% | %.2f |\n",
                       loom_ggml_type_get((uint32_t)types[ti])->name, r.what, (long long)r.m,
                       (long long)r.k, (long long)r.n, sec * 1e6, (double)wbytes / sec / 1e9,
                       100.0 * (double)wbytes / sec / (bw * 1e9),
                       (double)(r.m * r.k) / sec / 1e9);
                fflush(stdout);
            }
            free(t);
            free(w);
            free(x);
            free(y);
            free(row);
        }
    return status;
}
