/* tokenize_cli_test.c: `loom tokenize` (loom_cmd_tokenize called directly, stdout captured in a
 * temporary file): output formats, -f byte for byte, exit codes 0/1/2. Uses a synthetic gpt2
 * vocabulary written with the GGUF writer, and stories260K when LOOM_TESTDATA is there.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "tests/tokenizer/synth.h"
#include "tools/commands.h"

static char tmpdir_path[512];

static const char *tmp_path(const char *name) {
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(tmpdir_path, sizeof tmpdir_path, "%s/%s_%d", dir ? dir : "/tmp", name, (int)getpid());
    return tmpdir_path;
}

/* Runs loom tokenize with args (NULL-terminated); returns the exit code, *out the stdout text. */
static int run_cmd(const char *const *args, char **out) {
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("stdout"));
    fflush(stdout);
    int saved = dup(1);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    char *argv[32];
    int argc = 0;
    argv[argc++] = "tokenize";
    for (; args[argc - 1] && argc < 31; argc++) argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    int rc = loom_cmd_tokenize(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    *out = buf;
    return rc;
}

/* A synthetic gpt-2 vocabulary file with the words "Hello", " world" and "café"; returns its path. */
static const char *synth_model(void) {
    static char path[512];
    const char *words[] = {"Hello", " world", "caf\xC3\xA9"};
    synth_bpe s = {"gpt-2", words, 3, NULL, 0};
    loom_gguf_writer *w = synth_bpe_writer(&s);
    loom_error err = {0};
    snprintf(path, sizeof path, "%s", tmp_path("model.gguf"));
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
    return path;
}

Test(cli, ids_and_pieces) {
    const char *m = synth_model();
    char *out;
    cr_expect_eq(run_cmd((const char *[]){m, "Hello world", "--ids", NULL}, &out), 0);
    cr_expect_str_eq(out, "256 257\n");
    cr_expect_eq(run_cmd((const char *[]){m, "Hello world\n\"\xE6", NULL}, &out), 0);
    /* a lone 0xE6 is ill-formed: like llama.cpp, it is tokenized as U+FFFD (EF BF BD) */
    cr_expect_str_eq(out, "256\t\"Hello\"\n257\t\" world\"\n10\t\"\\n\"\n34\t\"\\\"\"\n"
                          "239\t\"\\xef\"\n191\t\"\\xbf\"\n189\t\"\\xbd\"\n");
    /* a whole character inside a piece prints as itself, a partial one as \xnn (lowercase,
     * loom_cli_put_string's escapes, as `loom inspect` writes them) */
    cr_expect_eq(run_cmd((const char *[]){m, "caf\xC3\xA9 \xC3\xA9", NULL}, &out), 0);
    cr_expect_str_eq(out, "258\t\"caf\xC3\xA9\"\n32\t\" \"\n195\t\"\\xc3\"\n169\t\"\\xa9\"\n");
    /* --bos: the gpt2 default BOS (id 11) is prepended only when asked */
    cr_expect_eq(run_cmd((const char *[]){"--bos", m, "Hello", "--ids", NULL}, &out), 0);
    cr_expect_str_eq(out, "11 256\n");
    unlink(m);
}

Test(cli, file_input_is_byte_for_byte) {
    const char *m = synth_model();
    char model[512], file[512];
    snprintf(model, sizeof model, "%s", m);
    snprintf(file, sizeof file, "%s", tmp_path("input.txt"));
    FILE *f = fopen(file, "wb");
    fwrite("Hello\0 world\n", 1, 13, f); /* a NUL byte and a final newline, both kept */
    fclose(f);
    char *out;
    cr_expect_eq(run_cmd((const char *[]){model, "-f", file, "--ids", NULL}, &out), 0);
    cr_expect_str_eq(out, "256 0 257 10\n");
    unlink(file);
    unlink(model);
}

Test(cli, exit_codes) {
    const char *m = synth_model();
    char *out;
    cr_expect_eq(run_cmd((const char *[]){m, "x", "--frobnicate", NULL}, &out), 2);
    cr_expect_eq(run_cmd((const char *[]){m, NULL}, &out), 2, "no text");
    cr_expect_eq(run_cmd((const char *[]){m, "-f", NULL}, &out), 2, "-f without a file");
    cr_expect_eq(run_cmd((const char *[]){m, "a", "b", NULL}, &out), 2, "two texts");
    cr_expect_eq(run_cmd((const char *[]){m, "a", "-f", "x", NULL}, &out), 2, "text and -f");
    cr_expect_eq(run_cmd((const char *[]){"--help", NULL}, &out), 0);
    cr_expect_not_null(strstr(out, "usage: loom tokenize"));
    cr_expect_eq(run_cmd((const char *[]){"/nonexistent/model.gguf", "x", NULL}, &out), 1);
    cr_expect_eq(run_cmd((const char *[]){m, "-f", "/nonexistent/file", NULL}, &out), 1);
    cr_expect_eq(run_cmd((const char *[]){m, "--", "-x", "--ids", NULL}, &out), 2,
                 "after --, '--ids' is a second text");
    cr_expect_eq(run_cmd((const char *[]){"--ids", m, "--", "-x", NULL}, &out), 0);
    cr_expect_str_eq(out, "45 120\n");
    unlink(m);
}

Test(cli, stories_prompt) {
    const char *td = loom_test_testdata("models/stories260K.gguf");
    char m[1024];
    snprintf(m, sizeof m, "%s/models/stories260K.gguf", td);
    char *out;
    cr_expect_eq(run_cmd((const char *[]){m, "Once upon a time", "--ids", "--bos", NULL}, &out), 0);
    cr_expect_str_eq(out, "1 403 407 261 378\n");
    cr_expect_eq(run_cmd((const char *[]){m, "Once upon a time", "--ids", NULL}, &out), 0);
    cr_expect_str_eq(out, "403 407 261 378\n");
    cr_expect_eq(run_cmd((const char *[]){m, "<s>Once", "--bos", NULL}, &out), 0);
    cr_expect_str_eq(out, "1\t\"<s>\"\n1\t\"<s>\"\n403\t\" Once\"\n");
}
