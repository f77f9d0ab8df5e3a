/* inspect_test.c: `loom inspect` run as a process (tests/gguf:loom_inspect, the command's code
 * behind loom.c's dispatch, comes in through the test's data dependency): its text and JSON output on a file written here and on a golden
 * model, the JSON checked by `python3 -m json.tool`, and its exit codes (0 shown, 1 bad file with
 * the error on stderr, 2 usage error).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "tests/gguf/gguf_test_util.h"

static const char *loom_bin(void) {
    static char path[1024];
    loom_test_runfile(path, sizeof path, "tests/gguf/loom_inspect");
    cr_assert_eq(access(path, X_OK), 0, "the loom_inspect binary is not in the runfiles");
    return path;
}

/* Runs `loom ARGS` (ARGS already shell-quoted); returns the exit code and, when asked, stdout and
 * stderr (caller frees). */
static int run_loom(const char *args, char **out, char **errs) {
    char o[512], e[512], cmd[4096];
    gguf_tmp_path(o, sizeof o, "inspect.out");
    gguf_tmp_path(e, sizeof e, "inspect.err");
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", loom_bin(), args, o, e);
    int rc = system(cmd);
    cr_assert(rc != -1 && WIFEXITED(rc), "%s did not exit normally", cmd);
    if (out) *out = loom_test_read_file(o, NULL);
    if (errs) *errs = loom_test_read_file(e, NULL);
    unlink(o);
    unlink(e);
    return WEXITSTATUS(rc);
}

static loom_status fill_ones(void *ctx, void *dst, uint64_t nbytes, loom_error *err) {
    (void)ctx;
    (void)err;
    memset(dst, 1, (size_t)nbytes);
    return LOOM_OK;
}

/* A small llama-like file with a long array, a string needing escapes and two tensor types. */
static void write_sample(const char *path) {
    loom_gguf_writer *w = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string(w, "general.architecture", "llama", &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_u32(w, "llama.block_count", 3, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_set_string(w, "general.name", "q\"uote\\ \x01 \xff end", &err),
                 LOOM_OK);
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = i * 7;
    cr_assert_eq(loom_gguf_writer_set_array(w, "tokenizer.ids", LOOM_GGUF_I32, ids, 100, &err),
                 LOOM_OK);
    const int64_t ne_w[2] = {256, 4}, ne_n[1] = {256};
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "blk.0.w", LOOM_GGML_Q4_K, 2, ne_w, fill_ones,
                                             NULL, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_add_tensor(w, "blk.0.norm", LOOM_GGML_F32, 1, ne_n, fill_ones,
                                             NULL, &err), LOOM_OK);
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
}

/* Whether some python3 parses the file as JSON; skips when there is no python3 at all. */
static int json_tool(const char *path) {
    const char *py = NULL;
    static const char *const candidates[] = {"python3", "/usr/bin/python3", "/usr/local/bin/python3"};
    for (size_t i = 0; i < 3 && py == NULL; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "'%s' -c '' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) py = candidates[i];
    }
    if (py == NULL) cr_skip_test("no python3 to run json.tool");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' -m json.tool '%s' >/dev/null", py, path);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static void check_json(const char *gguf_path) {
    char args[1024], json_path[512];
    snprintf(args, sizeof args, "inspect --json '%s'", gguf_path);
    char *out = NULL, *errs = NULL;
    cr_assert_eq(run_loom(args, &out, &errs), 0, "stderr: %s", errs);
    gguf_tmp_path(json_path, sizeof json_path, "inspect.json");
    FILE *f = fopen(json_path, "wb");
    fputs(out, f);
    fclose(f);
    cr_expect_eq(json_tool(json_path), 0, "invalid JSON for %s:\n%s", gguf_path, out);
    unlink(json_path);
    free(out);
    free(errs);
}

Test(inspect, text_output_of_a_written_file) {
    char path[512], args[1024];
    gguf_tmp_path(path, sizeof path, "sample.gguf");
    write_sample(path);
    snprintf(args, sizeof args, "inspect '%s'", path);
    char *out = NULL;
    cr_assert_eq(run_loom(args, &out, NULL), 0);
    cr_expect(strstr(out, "architecture:  llama"), "%s", out);
    cr_expect(strstr(out, "hyperparameters (1 keys)"), "%s", out);
    cr_expect(strstr(out, "llama.block_count"), "%s", out);
    cr_expect(strstr(out, "[0, 7, 14, 21, 28, 35, 42, 49, ... (100 total)]"), "%s", out);
    cr_expect(strstr(out, "\"q\\\"uote\\\\ \\x01 \\xff end\""), "%s", out);
    cr_expect(strstr(out, "blk.0.w") && strstr(out, "Q4_K") && strstr(out, "[256, 4]") &&
                  strstr(out, "576"), "%s", out);
    cr_expect(strstr(out, "totals by type:"), "%s", out);
    cr_expect(strstr(out, "2 tensors           1600 bytes           1280 elements"), "%s", out);
    free(out);
    check_json(path);

    snprintf(args, sizeof args, "inspect --json --elements 3 '%s'", path);
    cr_assert_eq(run_loom(args, &out, NULL), 0);
    cr_expect(strstr(out, "\"n\": 100, \"truncated\": true, \"value\": [0, 7, 14]"), "%s", out);
    cr_expect(strstr(out, "\"hyperparameters\": {\n    \"llama.block_count\": 3\n  }"), "%s", out);
    cr_expect(strstr(out, "\\u0001 \\ufffd end"), "%s", out);
    cr_expect(strstr(out, "\"Q4_K\": {\"tensors\": 1, \"bytes\": 576, \"elements\": 1024}"), "%s",
              out);
    free(out);
    unlink(path);
}

Test(inspect, json_of_golden_models_is_valid) {
    const char *dir = loom_test_testdata(NULL);
    const char *files[] = {"golden/tiny_qwen3_q4km.gguf", "models/stories260K.gguf",
                           "vocab/ggml-vocab-gpt-2.gguf"};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        check_json(path);
    }
    char args[4200];
    snprintf(args, sizeof args, "inspect '%s/golden/tiny_qwen3_q4km.gguf'", dir);
    char *out = NULL;
    cr_assert_eq(run_loom(args, &out, NULL), 0);
    cr_expect(strstr(out, "qwen3.attention.head_count_kv"), "%s", out);
    cr_expect(strstr(out, "Q6_K          3 tensors"), "%s", out);
    free(out);
}

Test(inspect, exit_codes) {
    char *out = NULL, *errs = NULL;
    cr_expect_eq(run_loom("inspect --help", &out, NULL), 0);
    cr_expect(strstr(out, "usage: loom inspect"), "%s", out);
    free(out);
    cr_expect_eq(run_loom("inspect", NULL, &errs), 2);
    cr_expect(strstr(errs, "missing FILE.gguf"), "%s", errs);
    free(errs);
    cr_expect_eq(run_loom("inspect --bogus x.gguf", NULL, &errs), 2);
    cr_expect(strstr(errs, "unknown option '--bogus'"), "%s", errs);
    free(errs);
    cr_expect_eq(run_loom("inspect x.gguf --elements", NULL, &errs), 2);
    cr_expect(strstr(errs, "--elements needs a value"), "%s", errs);
    free(errs);
    cr_expect_eq(run_loom("inspect a.gguf b.gguf", NULL, NULL), 2);
    cr_expect_eq(run_loom("inspect /nonexistent/x.gguf", &out, &errs), 1);
    cr_expect(strstr(errs, "cannot open"), "%s", errs);
    cr_expect_str_eq(out, "");
    free(out);
    free(errs);

    char path[512], args[1024];
    gguf_tmp_path(path, sizeof path, "bad.gguf");
    FILE *f = fopen(path, "wb");
    fwrite("GGUF\3\0\0\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff\0\0\0\0", 1, 24, f);
    fclose(f);
    snprintf(args, sizeof args, "inspect '%s'", path);
    cr_expect_eq(run_loom(args, NULL, &errs), 1);
    cr_expect(strstr(errs, "n_kv 4294967295 at offset 16"), "%s", errs);
    free(errs);
    unlink(path);
}
