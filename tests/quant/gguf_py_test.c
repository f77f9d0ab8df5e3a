/* gguf_py_test.c: our dequantizers agree bit for bit with a reader nobody here wrote, the gguf
 * Python package (llama.cpp's gguf-py, `pip install gguf numpy`), on random blocks of every
 * computable type (random quant bytes and scales; f16 scale fields random but finite, so NaN
 * arithmetic does not need to agree on payloads).
 *
 * The test writes the blocks to TEST_TMPDIR, runs `$LOOM_PYTHON` (default python3) on a small
 * script that decodes them with gguf.quants.dequantize, and compares. Skipped with a message when
 * that python or its gguf/numpy packages are missing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/quant/quant.h"

static uint64_t state = 12345;

static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void finite_half(uint8_t *p) {
    uint16_t h;
    do h = (uint16_t)next();
    while ((h & 0x7c00) == 0x7c00);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

typedef struct {
    loom_ggml_type type;
    const char *py_name; /* GGMLQuantizationType member */
    int half_offsets[2]; /* f16 fields inside a block (-1: none) */
    int n_blocks;
} py_case;

static const py_case cases[] = {
    {LOOM_GGML_F16, "F16", {-1, -1}, 20000},  {LOOM_GGML_BF16, "BF16", {-1, -1}, 20000},
    {LOOM_GGML_Q8_0, "Q8_0", {0, -1}, 2000},  {LOOM_GGML_Q4_K, "Q4_K", {0, 2}, 1000},
    {LOOM_GGML_Q5_K, "Q5_K", {0, 2}, 1000},   {LOOM_GGML_Q6_K, "Q6_K", {208, -1}, 1000},
};

static const char *script =
    "import sys, numpy as np\n"
    "from gguf.quants import dequantize\n"
    "from gguf import GGMLQuantizationType as T\n"
    "d = sys.argv[1]\n"
    "for name in sys.argv[2:]:\n"
    "    raw = np.fromfile(f'{d}/{name}.bin', dtype=np.uint8)\n"
    "    out = dequantize(raw, T[name]).astype(np.float32).reshape(-1)\n"
    "    out.tofile(f'{d}/{name}.f32')\n";

Test(gguf_py, dequantization_matches_bit_for_bit) {
    const char *py = getenv("LOOM_PYTHON");
    if (py == NULL || *py == '\0') py = "python3";
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s -c 'import gguf.quants, numpy' >/dev/null 2>&1", py);
    if (system(cmd) != 0)
        cr_skip_test("%s with the gguf and numpy packages is not available (pip install gguf numpy)", py);

    const char *tmp = getenv("TEST_TMPDIR");
    if (tmp == NULL || *tmp == '\0') tmp = "/tmp";
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/loom_gguf_py_XXXXXX", tmp);
    cr_assert(mkdtemp(dir) != NULL, "mkdtemp %s", dir);

    size_t nc = sizeof cases / sizeof cases[0];
    uint8_t *blocks[sizeof cases / sizeof cases[0]];
    int n = snprintf(cmd, sizeof cmd, "%s - %s", py, dir);
    for (size_t c = 0; c < nc; c++) {
        const loom_ggml_type_info *ti = loom_ggml_type_get(cases[c].type);
        size_t bytes = (size_t)cases[c].n_blocks * (size_t)ti->type_size;
        blocks[c] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++) blocks[c][i] = (uint8_t)next();
        for (int b = 0; b < cases[c].n_blocks; b++)
            for (int k = 0; k < 2; k++)
                if (cases[c].half_offsets[k] >= 0)
                    finite_half(blocks[c] + (size_t)b * ti->type_size + cases[c].half_offsets[k]);
        snprintf(path, sizeof path, "%s/%s.bin", dir, cases[c].py_name);
        FILE *f = fopen(path, "wb");
        cr_assert(f != NULL && fwrite(blocks[c], 1, bytes, f) == bytes && fclose(f) == 0, "%s", path);
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s", cases[c].py_name);
    }
    FILE *p = popen(cmd, "w");
    cr_assert(p != NULL, "cannot run %s", cmd);
    fputs(script, p);
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);

    for (size_t c = 0; c < nc; c++) {
        const loom_ggml_type_info *ti = loom_ggml_type_get(cases[c].type);
        size_t values = (size_t)cases[c].n_blocks * (size_t)ti->block_size;
        float *ours = malloc(values * 4), *theirs = malloc(values * 4);
        snprintf(path, sizeof path, "%s/%s.f32", dir, cases[c].py_name);
        FILE *f = fopen(path, "rb");
        cr_assert(f != NULL && fread(theirs, 4, values, f) == values, "%s", path);
        fclose(f);
        cr_assert_eq(loom_dequantize_row(cases[c].type, blocks[c], ours, (int64_t)values), LOOM_OK);
        size_t mismatches = 0;
        for (size_t i = 0; i < values; i++) {
            bool same = memcmp(&ours[i], &theirs[i], 4) == 0 || (isnan(ours[i]) && isnan(theirs[i]));
            if (!same && mismatches++ < 5)
                cr_log_error("%s value %zu: ours %a, gguf-py %a", ti->name, i, (double)ours[i],
                             (double)theirs[i]);
        }
        cr_expect_eq(mismatches, 0, "%s: %zu of %zu values differ from gguf-py", ti->name, mismatches,
                     values);
        free(ours);
        free(theirs);
        free(blocks[c]);
        remove(path);
        snprintf(path, sizeof path, "%s/%s.bin", dir, cases[c].py_name);
        remove(path);
    }
    rmdir(dir);
}
