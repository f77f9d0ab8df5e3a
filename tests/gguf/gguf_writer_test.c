/* gguf_writer_test.c: the GGUF writer: alignment, argument checks, the all-or-nothing write
 * (PATH.tmp then rename), key replacement, and copying every LOOM_TESTDATA model through
 * read -> write -> read with identical keys, values and tensor bytes. (Every metadata type and
 * the interop with llama.cpp's package are in gguf_interop_test.c.)
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "tests/gguf/gguf_test_util.h"

static loom_status fill_index(void *ctx, void *dst, uint64_t nbytes, loom_error *err) {
    (void)err;
    uint8_t *p = dst;
    for (uint64_t i = 0; i < nbytes; i++) p[i] = (uint8_t)(i + (uintptr_t)ctx);
    return LOOM_OK;
}

static loom_status fill_fails(void *ctx, void *dst, uint64_t nbytes, loom_error *err) {
    (void)ctx;
    memset(dst, 0xAB, (size_t)(nbytes / 2)); /* half-written, then fails */
    return loom_error_set(err, LOOM_ERR_IO, "source weights unreadable");
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

Test(gguf_writer, tensors_are_aligned_and_filled) {
    char path[512];
    gguf_tmp_path(path, sizeof path, "aligned.gguf");
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_alignment(w, 128, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_set_string(w, "general.architecture", "llama", &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_f32(w, "x.eps", 1e-5f, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_bool(w, "x.flag", true, &err), LOOM_OK);
    const char *toks[] = {"<s>", "a", "\xe2\x96\x81the"};
    cr_assert_eq(loom_gguf_writer_set_string_array(w, "x.tokens", toks, 3, &err), LOOM_OK);
    const int64_t ne_a[2] = {3, 5}, ne_b[1] = {32}, ne_c[1] = {0};
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "a", LOOM_GGML_F32, 2, ne_a, fill_index,
                                             (void *)1, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "empty", LOOM_GGML_F32, 1, ne_c, fill_index,
                                             (void *)9, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "b", LOOM_GGML_Q8_0, 1, ne_b, fill_index,
                                             (void *)2, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);

    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cr_expect(!file_exists(tmp), "PATH.tmp left behind");
    loom_gguf *g = NULL;
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_expect_eq(loom_gguf_version(g), 3);
    cr_expect_eq(loom_gguf_alignment(g), 128);
    cr_expect_eq(loom_gguf_data_offset(g) % 128, 0);
    cr_expect_eq(loom_gguf_file_size(g) % 128, 0);
    uint32_t align = 0;
    cr_expect_eq(loom_gguf_get_u32(g, "general.alignment", &align, &err), LOOM_OK);
    cr_expect_eq(align, 128);
    float eps = 0;
    cr_expect_eq(loom_gguf_get_f32(g, "x.eps", &eps, &err), LOOM_OK);
    cr_expect_eq(eps, 1e-5f);
    const loom_gguf_value *arr = NULL;
    cr_assert_eq(loom_gguf_get_array(g, "x.tokens", LOOM_GGUF_STRING, &arr, &err), LOOM_OK);
    cr_expect_str_eq(arr->arr.items[2].str.ptr, "\xe2\x96\x81the");
    const loom_gguf_tensor *a = loom_gguf_find_tensor(g, "a"), *b = loom_gguf_find_tensor(g, "b");
    cr_assert(a && b);
    cr_expect_eq(a->nbytes, 60);
    cr_expect_eq(b->nbytes, 34);
    cr_expect_eq(a->file_offset % 128, 0);
    cr_expect_eq(b->file_offset % 128, 0);
    cr_expect_eq(loom_gguf_find_tensor(g, "empty")->nbytes, 0);
    const uint8_t *pa = a->data, *pb = b->data;
    for (int i = 0; i < 60; i++) cr_expect_eq(pa[i], (uint8_t)(i + 1));
    for (int i = 0; i < 34; i++) cr_expect_eq(pb[i], (uint8_t)(i + 2));
    for (int i = 60; i < 128; i++) cr_expect_eq(pa[i], 0, "padding is zero");
    loom_gguf_close(g);
    unlink(path);
}

Test(gguf_writer, failed_write_leaves_old_file_and_no_tmp) {
    char path[512], tmp[600];
    gguf_tmp_path(path, sizeof path, "atomic.gguf");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    loom_error err = {0};
    loom_gguf_writer *w = NULL;
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_u32(w, "v", 1, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
    size_t old_size;
    uint8_t *old = (uint8_t *)loom_test_read_file(path, &old_size);

    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_u32(w, "v", 2, &err), LOOM_OK);
    const int64_t ne[1] = {1024};
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "ok", LOOM_GGML_F32, 1, ne, fill_index, NULL,
                                             &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "bad", LOOM_GGML_F32, 1, ne, fill_fails, NULL,
                                             &err), LOOM_OK);
    cr_expect_eq(loom_gguf_writer_write(w, path, &err), LOOM_ERR_IO);
    cr_expect(strstr(err.msg, "tensor 'bad'") && strstr(err.msg, "source weights unreadable"),
              "%s", err.msg);
    cr_expect(!file_exists(tmp), "PATH.tmp left behind");
    size_t now_size;
    uint8_t *now = (uint8_t *)loom_test_read_file(path, &now_size);
    cr_expect(now_size == old_size && memcmp(now, old, old_size) == 0, "old file changed");
    free(now);
    free(old);

    char missing[600];
    gguf_tmp_path(missing, sizeof missing, "no/such/dir/x.gguf");
    cr_expect_eq(loom_gguf_writer_write(w, missing, &err), LOOM_ERR_IO);
    cr_expect(strstr(err.msg, "cannot create"), "%s", err.msg);
    loom_gguf_writer_destroy(w);
    unlink(path);
}

Test(gguf_writer, bad_arguments_are_refused) {
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    const int64_t ne1[1] = {32}, ne_bad[1] = {100}, ne_neg[2] = {32, -1};
    const int64_t ne_big[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    uint8_t data[64] = {0};
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 0, ne1, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "n_dims 0"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 5, ne1, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", (loom_ggml_type)4, 1, ne1, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "unknown ggml type 4"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_Q4_K, 1, ne_bad, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "block size 256"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 2, ne_neg, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 2, ne_big, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "overflows"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 1, ne1, NULL, NULL, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_add_tensor_data(w, "t", LOOM_GGML_F32, 1, ne1, data, 64, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "64 bytes given, its shape and type need 128"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 1, ne1, fill_index, NULL,
                                             &err), LOOM_OK);
    cr_expect_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGML_F32, 1, ne1, fill_index, NULL,
                                             &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "added twice"), "%s", err.msg);

    loom_gguf_value v = {.type = LOOM_GGUF_U8, .u64 = 300};
    cr_expect_eq(loom_gguf_writer_set(w, "k", &v, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "300 does not fit u8"), "%s", err.msg);
    v = (loom_gguf_value){.type = LOOM_GGUF_I16, .i64 = -40000};
    cr_expect_eq(loom_gguf_writer_set(w, "k", &v, &err), LOOM_ERR_INVALID_ARGUMENT);
    v = (loom_gguf_value){.type = (loom_gguf_type)13};
    cr_expect_eq(loom_gguf_writer_set(w, "k", &v, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_alignment(w, 48, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_alignment(w, 0, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_string(w, "general.alignment", "32", &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_string(w, "", "x", &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_string(w, "k", NULL, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect_eq(loom_gguf_writer_set_array(w, "k", LOOM_GGUF_STRING, data, 1, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    uint8_t bad_bool = 2;
    cr_expect_eq(loom_gguf_writer_set_array(w, "k", LOOM_GGUF_BOOL, &bad_bool, 1, &err),
                 LOOM_ERR_INVALID_ARGUMENT);
    /* nine levels of nesting, and an element whose type is not the array's */
    loom_gguf_value levels[9];
    for (int i = 0; i < 9; i++) {
        levels[i] = (loom_gguf_value){.type = LOOM_GGUF_ARRAY};
        levels[i].arr.elem_type = i < 8 ? LOOM_GGUF_ARRAY : LOOM_GGUF_U8;
        levels[i].arr.n = i < 8 ? 1 : 1;
        if (i < 8) levels[i].arr.items = &levels[i + 1];
        else levels[i].arr.data = data;
    }
    cr_expect_eq(loom_gguf_writer_set(w, "k", &levels[0], &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "nested deeper than 8"), "%s", err.msg);
    cr_expect_eq(loom_gguf_writer_set(w, "k", &levels[1], &err), LOOM_OK, "8 levels are fine");
    loom_gguf_value mixed[2] = {{.type = LOOM_GGUF_STRING, .str = {"a", 1}},
                                {.type = LOOM_GGUF_U8, .u64 = 1}};
    v = (loom_gguf_value){.type = LOOM_GGUF_ARRAY};
    v.arr.elem_type = LOOM_GGUF_STRING;
    v.arr.n = 2;
    v.arr.items = mixed;
    cr_expect_eq(loom_gguf_writer_set(w, "k", &v, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err.msg, "element 1 is u8 in an array of string"), "%s", err.msg);
    loom_gguf_writer_destroy(w);
    loom_gguf_writer_destroy(NULL);
}

Test(gguf_writer, setting_a_key_again_replaces_it_in_place) {
    char path[512];
    gguf_tmp_path(path, sizeof path, "replace.gguf");
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_u32(w, "a", 1, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_u32(w, "b", 2, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string(w, "a", "x", &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
    loom_gguf *g = NULL;
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_n_keys(g), 2);
    cr_expect_str_eq(loom_gguf_key_name(g, 0), "a");
    cr_expect_eq(loom_gguf_key_value(g, 0)->type, LOOM_GGUF_STRING);
    cr_expect_str_eq(loom_gguf_key_name(g, 1), "b");
    loom_gguf_close(g);
    unlink(path);
}

/* Reads src, writes every key and tensor again with loom's writer, reads the copy back and
 * compares; returns whether the copy is byte-identical to src. */
static bool copy_and_compare(const char *src) {
    char dst[512];
    gguf_tmp_path(dst, sizeof dst, "copy.gguf");
    loom_gguf *g = NULL, *c = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(src, &g, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer *w = NULL;
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    for (size_t i = 0; i < loom_gguf_n_keys(g); i++)
        cr_assert_eq(loom_gguf_writer_set(w, loom_gguf_key_name(g, i), loom_gguf_key_value(g, i),
                                          &err), LOOM_OK, "%s: %s", src, err.msg);
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        cr_assert_eq(loom_gguf_writer_add_tensor_data(w, t->name, t->type, t->n_dims, t->ne,
                                                      t->data, t->nbytes, &err), LOOM_OK, "%s",
                     err.msg);
    }
    cr_assert_eq(loom_gguf_writer_write(w, dst, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
    cr_assert_eq(loom_gguf_open(dst, &c, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_n_keys(c), loom_gguf_n_keys(g));
    for (size_t i = 0; i < loom_gguf_n_keys(g); i++) {
        cr_expect_str_eq(loom_gguf_key_name(c, i), loom_gguf_key_name(g, i));
        cr_expect(gguf_value_eq(loom_gguf_key_value(c, i), loom_gguf_key_value(g, i)), "%s: %s",
                  src, loom_gguf_key_name(g, i));
    }
    cr_assert_eq(loom_gguf_n_tensors(c), loom_gguf_n_tensors(g));
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *a = loom_gguf_tensor_at(g, i), *b = loom_gguf_tensor_at(c, i);
        cr_expect_str_eq(a->name, b->name);
        cr_expect_eq(a->type, b->type);
        cr_expect_eq(a->n_dims, b->n_dims);
        cr_expect(memcmp(a->ne, b->ne, sizeof a->ne) == 0, "%s: shape", a->name);
        cr_expect_eq(a->offset, b->offset, "%s: offset", a->name);
        cr_assert_eq(a->nbytes, b->nbytes);
        cr_expect(memcmp(a->data, b->data, a->nbytes) == 0, "%s: bytes", a->name);
    }
    bool same = loom_gguf_file_size(c) == loom_gguf_file_size(g) &&
                memcmp(loom_gguf_file_bytes(c), loom_gguf_file_bytes(g),
                       loom_gguf_file_size(g)) == 0;
    loom_gguf_close(c);
    loom_gguf_close(g);
    unlink(dst);
    return same;
}

Test(gguf_writer, testdata_files_survive_a_round_trip) {
    const char *dir = loom_test_testdata(NULL);
    const char *subs[] = {"golden", "models", "vocab"};
    int n = 0;
    for (int s = 0; s < 3; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, subs[s]);
        DIR *d = opendir(path);
        cr_assert_not_null(d, "%s", path);
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
            snprintf(path, sizeof path, "%s/%s/%s", dir, subs[s], e->d_name);
            bool identical = copy_and_compare(path);
            /* files with tensors were written by llama.cpp's own writer with the same layout,
             * so loom's copy is byte for byte the same; vocab-only files end unpadded, loom
             * pads them */
            if (s < 2) cr_expect(identical, "%s: copy is not byte-identical", path);
            n++;
        }
        closedir(d);
    }
    cr_expect_geq(n, 12);
}
