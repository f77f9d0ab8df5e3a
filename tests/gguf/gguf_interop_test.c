/* gguf_interop_test.c: loom's GGUF writer and reader against each other and against llama.cpp's
 * `gguf` Python package (tests/gguf/interop.py).
 *
 * The spec below (every metadata type, arrays of every element type including strings and a
 * nested array, alignment 64, tensors of 7 ggml types with 1..4 dimensions and patterned bytes)
 * is the same content as SPEC in interop.py: keep them in step.
 *   - loom writes it, loom reads it back: identical keys, values and bytes;
 *   - loom writes it, gguf.GGUFReader checks it (interop.py check);
 *   - gguf.GGUFWriter writes it (interop.py write), loom reads it and checks it.
 * The Python half is skipped (with the reason) when no python3 can `import gguf`; candidates are
 * $LOOM_PYTHON, python3 on PATH, $HOME/.pyenv/shims/python3, /usr/bin/python3 and
 * /usr/local/bin/python3 (Bazel's test PATH is not the shell's).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "loaders/gguf.h"
#include "tests/gguf/gguf_test_util.h"

/* ---- the spec (mirrors interop.py) ---------------------------------------------------------- */

enum { N_KEYS = 28, N_TENSORS = 7 };

static const uint8_t a_u8[] = {1, 2, 255};
static const int8_t a_i8[] = {-128, 0, 127};
static const uint16_t a_u16[] = {0, 65535};
static const int16_t a_i16[] = {-32768, 32767};
static const uint32_t a_u32[] = {7, 4294967295u};
static const int32_t a_i32[] = {-1, 0, 2147483647};
static const float a_f32[] = {0.5f, -2.25f, 1e30f};
static const uint8_t a_bool[] = {1, 0, 1};
static const uint64_t a_u64[] = {0, UINT64_MAX};
static const int64_t a_i64[] = {INT64_MIN, INT64_MAX};
static const double a_f64[] = {1e-300, -0.0};
static const int32_t a_inner0[] = {1, 2}, a_inner1[] = {3};
static const char *const a_str[] = {"a", "", "ccc \xe2\x9c\x93"};
static const char spec_string[] = "h\xc3\xa9llo \"q\"\n\t\\ \xe2\x9c\x93";

typedef struct {
    const char *key;
    loom_gguf_value v;
} spec_kv;

static loom_gguf_value str_value(const char *s) {
    return (loom_gguf_value){.type = LOOM_GGUF_STRING, .str = {s, strlen(s)}};
}

static loom_gguf_value arr_value(loom_gguf_type et, const void *data, uint64_t n) {
    loom_gguf_value v = {.type = LOOM_GGUF_ARRAY};
    v.arr.elem_type = et;
    v.arr.n = n;
    v.arr.data = data;
    return v;
}

/* Fills kv[N_KEYS]; items[] holds the element values of the string and nested arrays. */
static void spec_keys(spec_kv *kv, loom_gguf_value *items) {
    int i = 0;
#define KV(k, value) kv[i++] = (spec_kv){k, value}
    KV("general.architecture", str_value("loomtest"));
    KV("general.alignment", ((loom_gguf_value){.type = LOOM_GGUF_U32, .u64 = 64}));
    KV("test.u8", ((loom_gguf_value){.type = LOOM_GGUF_U8, .u64 = 200}));
    KV("test.i8", ((loom_gguf_value){.type = LOOM_GGUF_I8, .i64 = -100}));
    KV("test.u16", ((loom_gguf_value){.type = LOOM_GGUF_U16, .u64 = 60000}));
    KV("test.i16", ((loom_gguf_value){.type = LOOM_GGUF_I16, .i64 = -30000}));
    KV("test.u32", ((loom_gguf_value){.type = LOOM_GGUF_U32, .u64 = 4000000000u}));
    KV("test.i32", ((loom_gguf_value){.type = LOOM_GGUF_I32, .i64 = -2000000000}));
    KV("test.f32", ((loom_gguf_value){.type = LOOM_GGUF_F32, .f64 = 1.5}));
    KV("test.bool", ((loom_gguf_value){.type = LOOM_GGUF_BOOL, .b = true}));
    KV("test.string", str_value(spec_string));
    KV("test.empty_string", str_value(""));
    KV("test.u64", ((loom_gguf_value){.type = LOOM_GGUF_U64, .u64 = ((uint64_t)1 << 63) + 5}));
    KV("test.i64", ((loom_gguf_value){.type = LOOM_GGUF_I64, .i64 = -((int64_t)1 << 62) - 3}));
    KV("test.f64", ((loom_gguf_value){.type = LOOM_GGUF_F64, .f64 = 3.141592653589793}));
    KV("test.arr.u8", arr_value(LOOM_GGUF_U8, a_u8, 3));
    KV("test.arr.i8", arr_value(LOOM_GGUF_I8, a_i8, 3));
    KV("test.arr.u16", arr_value(LOOM_GGUF_U16, a_u16, 2));
    KV("test.arr.i16", arr_value(LOOM_GGUF_I16, a_i16, 2));
    KV("test.arr.u32", arr_value(LOOM_GGUF_U32, a_u32, 2));
    KV("test.arr.i32", arr_value(LOOM_GGUF_I32, a_i32, 3));
    KV("test.arr.f32", arr_value(LOOM_GGUF_F32, a_f32, 3));
    KV("test.arr.bool", arr_value(LOOM_GGUF_BOOL, a_bool, 3));
    for (int s = 0; s < 3; s++) items[s] = str_value(a_str[s]);
    loom_gguf_value strs = {.type = LOOM_GGUF_ARRAY};
    strs.arr.elem_type = LOOM_GGUF_STRING;
    strs.arr.n = 3;
    strs.arr.items = items;
    KV("test.arr.string", strs);
    KV("test.arr.u64", arr_value(LOOM_GGUF_U64, a_u64, 2));
    KV("test.arr.i64", arr_value(LOOM_GGUF_I64, a_i64, 2));
    KV("test.arr.f64", arr_value(LOOM_GGUF_F64, a_f64, 2));
    items[3] = arr_value(LOOM_GGUF_I32, a_inner0, 2);
    items[4] = arr_value(LOOM_GGUF_I32, a_inner1, 1);
    loom_gguf_value nest = {.type = LOOM_GGUF_ARRAY};
    nest.arr.elem_type = LOOM_GGUF_ARRAY;
    nest.arr.n = 2;
    nest.arr.items = items + 3;
    KV("test.arr.nested", nest);
#undef KV
    cr_assert_eq(i, N_KEYS);
}

typedef struct {
    const char *name;
    loom_ggml_type type;
    uint32_t n_dims;
    int64_t ne[4];
} spec_tensor;

static const spec_tensor spec_tensors[N_TENSORS] = {
    {"t.f32", LOOM_GGML_F32, 2, {4, 3}},
    {"t.f16", LOOM_GGML_F16, 1, {8}},
    {"t.bf16", LOOM_GGML_BF16, 4, {2, 2, 2, 2}},
    {"t.q8_0", LOOM_GGML_Q8_0, 2, {64, 2}},
    {"t.q4_k", LOOM_GGML_Q4_K, 3, {256, 1, 2}},
    {"t.q6_k", LOOM_GGML_Q6_K, 1, {256}},
    {"t.q5_k", LOOM_GGML_Q5_K, 2, {512, 1}},
};

static uint64_t spec_nbytes(const spec_tensor *t) {
    int64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    return (uint64_t)(loom_ggml_row_bytes(t->type, t->ne[0]) * rows);
}

/* Tensor index's bytes: byte i is (i * 131 + index * 17 + 7) mod 256 (as in interop.py). */
static void pattern(size_t index, uint8_t *dst, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) dst[i] = (uint8_t)(i * 131 + index * 17 + 7);
}

static loom_status fill_pattern(void *ctx, void *dst, uint64_t nbytes, loom_error *err) {
    (void)err;
    pattern((size_t)(uintptr_t)ctx, dst, nbytes);
    return LOOM_OK;
}

static void write_spec(const char *path) {
    spec_kv kv[N_KEYS];
    loom_gguf_value items[5];
    spec_keys(kv, items);
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    for (int i = 0; i < N_KEYS; i++)
        cr_assert_eq(loom_gguf_writer_set(w, kv[i].key, &kv[i].v, &err), LOOM_OK, "%s", err.msg);
    for (size_t i = 0; i < N_TENSORS; i++) {
        const spec_tensor *t = &spec_tensors[i];
        loom_status s;
        if (i % 2 == 0) { /* both ways of giving tensor bytes */
            s = loom_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, fill_pattern,
                                            (void *)(uintptr_t)i, &err);
        } else {
            uint64_t n = spec_nbytes(t);
            uint8_t *data = malloc(n);
            pattern(i, data, n);
            s = loom_gguf_writer_add_tensor_data(w, t->name, t->type, t->n_dims, t->ne, data, n,
                                                 &err);
            free(data);
        }
        cr_assert_eq(s, LOOM_OK, "%s", err.msg);
    }
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
}

/* Opens path with loom and checks it holds exactly the spec. */
static void check_spec(const char *path) {
    spec_kv kv[N_KEYS];
    loom_gguf_value items[5];
    spec_keys(kv, items);
    loom_gguf *g = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_expect_eq(loom_gguf_alignment(g), 64);
    cr_assert_eq(loom_gguf_n_keys(g), N_KEYS);
    for (size_t i = 0; i < N_KEYS; i++) {
        cr_expect_str_eq(loom_gguf_key_name(g, i), kv[i].key);
        cr_expect(gguf_value_eq(loom_gguf_key_value(g, i), &kv[i].v), "key %s differs", kv[i].key);
    }
    cr_assert_eq(loom_gguf_n_tensors(g), N_TENSORS);
    for (size_t i = 0; i < N_TENSORS; i++) {
        const spec_tensor *want = &spec_tensors[i];
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        cr_expect_str_eq(t->name, want->name);
        cr_expect_eq(t->type, want->type, "%s", want->name);
        cr_expect_eq(t->n_dims, want->n_dims, "%s", want->name);
        for (uint32_t d = 0; d < 4; d++)
            cr_expect_eq(t->ne[d], d < want->n_dims ? want->ne[d] : 1, "%s ne[%u]", want->name, d);
        cr_expect_eq(t->file_offset % 64, 0, "%s", want->name);
        uint64_t n = spec_nbytes(want);
        cr_assert_eq(t->nbytes, n, "%s", want->name);
        uint8_t *expect = malloc(n);
        pattern(i, expect, n);
        cr_expect(memcmp(t->data, expect, n) == 0, "%s: bytes differ", want->name);
        free(expect);
    }
    loom_gguf_close(g);
}

Test(gguf_interop, loom_writes_loom_reads) {
    char path[512];
    gguf_tmp_path(path, sizeof path, "spec.gguf");
    write_spec(path);
    check_spec(path);
    unlink(path);
}

/* ---- the Python side ----------------------------------------------------------------------- */

static int run(const char *cmd) {
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* A python3 that can import gguf, or skips the test. */
static const char *find_python(void) {
    static char found[1024];
    char home_pyenv[600] = "";
    const char *home = getenv("HOME");
    if (home) snprintf(home_pyenv, sizeof home_pyenv, "%s/.pyenv/shims/python3", home);
    const char *env = getenv("LOOM_PYTHON");
    const char *candidates[] = {env, "python3", home_pyenv, "/usr/bin/python3",
                                "/usr/local/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (candidates[i] == NULL || candidates[i][0] == '\0') continue;
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' -c 'import gguf, numpy' >/dev/null 2>&1", candidates[i]);
        if (run(cmd) == 0) {
            snprintf(found, sizeof found, "%s", candidates[i]);
            fprintf(stderr, "interop: using %s\n", found);
            return found;
        }
    }
#define NO_GGUF_MSG                                                                          \
    "no python3 can `import gguf` (tried $LOOM_PYTHON, python3 on PATH, "                    \
    "~/.pyenv/shims/python3, /usr/bin/python3, /usr/local/bin/python3): install it with "    \
    "`python3 -m pip install gguf` (tools/install-deps.sh tries); skipping"
    fprintf(stderr, "interop: %s\n", NO_GGUF_MSG);
    cr_skip_test(NO_GGUF_MSG);
    return NULL;
}

/* interop.py: beside the test in Bazel's runfiles, or in the source tree. */
static const char *script(void) {
    static char path[1024];
    const char *srcdir = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
    struct stat st;
    if (srcdir && ws) {
        snprintf(path, sizeof path, "%s/%s/tests/gguf/interop.py", srcdir, ws);
        if (stat(path, &st) == 0) return path;
    }
    snprintf(path, sizeof path, "tests/gguf/interop.py");
    cr_assert_eq(stat(path, &st), 0, "tests/gguf/interop.py not found");
    return path;
}

Test(gguf_interop, python_gguf_reads_what_loom_writes) {
    const char *py = find_python();
    char path[512], cmd[2048];
    gguf_tmp_path(path, sizeof path, "to_python.gguf");
    write_spec(path);
    snprintf(cmd, sizeof cmd, "'%s' '%s' check '%s'", py, script(), path);
    cr_expect_eq(run(cmd), 0, "gguf.GGUFReader disagrees with loom's file (%s)", cmd);
    unlink(path);
}

Test(gguf_interop, loom_reads_what_python_gguf_writes) {
    const char *py = find_python();
    char path[512], cmd[2048];
    gguf_tmp_path(path, sizeof path, "from_python.gguf");
    snprintf(cmd, sizeof cmd, "'%s' '%s' write '%s'", py, script(), path);
    cr_assert_eq(run(cmd), 0, "gguf.GGUFWriter failed (%s)", cmd);
    check_spec(path);
    unlink(path);
}
