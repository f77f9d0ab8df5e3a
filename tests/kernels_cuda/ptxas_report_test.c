/* ptxas_report_test.c: fails if any CUDA kernel of //kernels/cuda spills registers or uses
 * local memory, reading the ptxas -v reports the build keeps (kernels/cuda/cuda_ptxas/*.txt,
 * one per .cu file, both sm_87 and sm_90a). Needs no GPU: it runs on the CPU-only CI machine.
 *
 * A report has, per kernel and architecture:
 *   ptxas info    : Function properties for <mangled name>
 *       <F> bytes stack frame, <S> bytes spill stores, <L> bytes spill loads
 * Any of F, S, L non-zero is a failure (a stack frame is local memory: a register array indexed
 * at run time, a non-inlined call, or a math slow path). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/testdata.h"

#define REPORT_DIR "kernels/cuda/cuda_ptxas"

typedef struct scan_result {
    int kernels;       /* "Function properties" entries seen */
    int bad;           /* entries with stack, spill stores or spill loads */
    char first_bad[512];
} scan_result;

/* Scans report text; counts entries and offenders. */
static void scan_text(const char *text, const char *file, scan_result *r) {
    const char *p = text;
    while ((p = strstr(p, "Function properties for ")) != NULL) {
        const char *name = p + strlen("Function properties for ");
        const char *eol = strchr(name, '\n');
        if (!eol) break;
        long stack = -1, st = -1, ld = -1;
        if (sscanf(eol + 1, " %ld bytes stack frame, %ld bytes spill stores, %ld bytes spill loads",
                   &stack, &st, &ld) == 3) {
            r->kernels++;
            if (stack != 0 || st != 0 || ld != 0) {
                if (r->bad == 0)
                    snprintf(r->first_bad, sizeof r->first_bad,
                             "%s: %.*s: %ld bytes stack, %ld spill stores, %ld spill loads", file,
                             (int)(eol - name > 200 ? 200 : eol - name), name, stack, st, ld);
                r->bad++;
            }
        }
        p = eol;
    }
}


Test(ptxas_report, parser_flags_spills_and_stack) {
    const char *clean =
        "ptxas info    : Function properties for _Z1av\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    const char *spill =
        "ptxas info    : Function properties for _Z1bv\n"
        "    8 bytes stack frame, 12 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Function properties for _Z1cv\n"
        "    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    scan_result a = {0}, b = {0};
    scan_text(clean, "clean", &a);
    scan_text(spill, "spill", &b);
    cr_assert_eq(a.kernels, 1);
    cr_assert_eq(a.bad, 0);
    cr_assert_eq(b.kernels, 2);
    cr_assert_eq(b.bad, 2, "spills and a stack frame must both be flagged");
}

Test(ptxas_report, no_kernel_spills_or_uses_local_memory) {
    DIR *d = opendir(REPORT_DIR);
    cr_assert_not_null(d, "no ptxas report directory %s (is the data dependency missing?)",
                       REPORT_DIR);
    scan_result r = {0};
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 10 || strcmp(e->d_name + n - 10, ".ptxas.txt") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", REPORT_DIR, e->d_name);
        char *text = loom_test_read_file(path, NULL);
        scan_text(text, e->d_name, &r);
        free(text);
        files++;
    }
    closedir(d);
    cr_assert_geq(files, 10, "expected the reports of every .cu file, found %d", files);
    /* each report holds sm_87 and sm_90a entries; gemv, gemm and attention have many */
    cr_assert_geq(r.kernels, 2 * files, "only %d kernel entries in %d reports", r.kernels, files);
    cr_assert_eq(r.bad, 0, "%d kernel(s) with spills or local memory; first: %s", r.bad,
                 r.first_bad);
}
