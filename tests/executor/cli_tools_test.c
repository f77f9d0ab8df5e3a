/* cli_tools_test.c: the `loom` tool's shared helpers (tools/cli.h) and the CLI behaviour built on
 * them, as a user calls it (the built //tools:loom binary):
 * - loom_cli_utf8_len accepts exactly the shortest-form scalar values; loom_cli_put_string /
 *   loom_cli_put_json escape quotes, backslashes, control bytes and broken UTF-8;
 * - `loom bench --json` escapes the model's file name (a name with a quote and a backslash gives
 *   valid JSON); `--passes` picks the pipeline (recorded as "passes"; default -O2), an unknown
 *   pass is a runtime error naming it;
 * - `loom run GRAPH.pb -p TEXT` needs no -m when the graph's source GGUF lies next to it (the
 *   vocabulary and the weights come from that one file), gives the GGUF's own text, and says
 *   that -m is needed when the source file is not found.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/testdata.h"
#include "tools/cli.h"

static char loom_bin[2048];
static char tmpdir[1024];

static void setup(void) {
    loom_test_runfile(loom_bin, sizeof loom_bin, "tools/loom");
    const char *t = getenv("TEST_TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/cli_tools.%d", t ? t : "/tmp", (int)getpid());
    mkdir(tmpdir, 0755);
}

/* Runs `loom ARGS` (shell-quoted); stdout into out, stderr into err; returns the exit code. */
static int run(const char *args, char *out, size_t cap, char *err, size_t ecap) {
    char cmd[8192], ep[1200];
    snprintf(ep, sizeof ep, "%s/stderr.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", loom_bin, args, ep);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen failed");
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *f = fopen(ep, "rb");
    n = f ? fread(err, 1, ecap - 1, f) : 0;
    err[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TestSuite(cli_tools, .init = setup);

Test(cli_tools, utf8_len_accepts_shortest_form_scalar_values_only) {
    static const struct {
        const char *s;
        size_t len;
    } cases[] = {
        {"a", 1},           {"\xc3\xa9", 2},        {"\xe2\x82\xac", 3},     {"\xf0\x9f\x98\x80", 4},
        {"\xc0\xaf", 0},    /* overlong '/' */      {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xed\xa0\x80", 0}, /* surrogate */        {"\xf4\x90\x80\x80", 0}, /* > U+10FFFF */
        {"\x80", 0},        /* lone continuation */ {"\xc3", 0},             /* truncated */
        {"\xe2\x28\xa1", 0}, /* bad continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_assert_eq(loom_cli_utf8_len((const unsigned char *)cases[i].s, strlen(cases[i].s)),
                     cases[i].len, "case %zu", i);
}

static char *put(const char *s, size_t len, bool json, size_t max) {
    static char buf[256];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    cr_assert(f);
    loom_cli_put_string(f, s, len, json, max);
    fclose(f);
    return buf;
}

Test(cli_tools, parse_ids_takes_a_list_of_at_least_one_id) {
    int32_t *ids = NULL, n = 0;
    cr_assert(loom_cli_parse_ids("338,281,-1,2147483647", &ids, &n));
    cr_assert_eq(n, 4);
    cr_assert(ids[0] == 338 && ids[1] == 281 && ids[2] == -1 && ids[3] == 2147483647);
    free(ids);
    cr_assert(loom_cli_parse_ids("7", &ids, &n));
    cr_assert(n == 1 && ids[0] == 7);
    free(ids);
    static const char *bad[] = {"", ",", "1,", ",1", "1,,2", "1;2", "x", "2147483648",
                                "1,2a", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ids = NULL;
        n = -5;
        cr_expect_not(loom_cli_parse_ids(bad[i], &ids, &n), "'%s' accepted", bad[i]);
        cr_expect(ids == NULL && n == -5, "'%s' wrote its outputs", bad[i]);
    }
}

Test(cli_tools, put_string_escapes_for_json_and_text) {
    const char s[] = "a\"b\\c\nd\x01\xc3\xa9\xff";
    cr_assert_str_eq(put(s, sizeof s - 1, true, SIZE_MAX), "\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\\ufffd\"");
    cr_assert_str_eq(put(s, sizeof s - 1, false, SIZE_MAX), "\"a\\\"b\\\\c\\nd\\x01\xc3\xa9\\xff\"");
    cr_assert_str_eq(put("abcdef", 6, false, 3), "\"abc\"...(6 bytes)");
    static char buf[64];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    loom_cli_put_json(f, "x\ty");
    fclose(f);
    cr_assert_str_eq(buf, "\"x\\ty\"");
}

Test(cli_tools, bench_json_escapes_the_model_name) {
    const char *golden = loom_test_testdata("golden/tiny_llama_q8_0.gguf");
    char link[1400], args[4096], out[4096], err[4096];
    snprintf(link, sizeof link, "%s/we\"ird\\name.gguf", tmpdir);
    char target[1400];
    snprintf(target, sizeof target, "%s/golden/tiny_llama_q8_0.gguf", golden);
    unlink(link);
    cr_assert_eq(symlink(target, link), 0);
    snprintf(args, sizeof args, "bench '%s' -p 4 -n 2 -r 1 --json", link);
    cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(out, "{\"model\": \"we\\\"ird\\\\name.gguf\", \"arch\": \"llama\", "), "%s", out);
}

/* `loom bench` on the tiny golden Llama (-p 4 -n 2 -r 1) with `extra` arguments appended: its
 * exit code, stdout in out and stderr in err (4096 bytes each). */
static int bench_tiny(const char *extra, char *out, char *err) {
    const char *td = loom_test_testdata("golden/tiny_llama_q8_0.gguf");
    char args[4096];
    snprintf(args, sizeof args, "bench '%s/golden/tiny_llama_q8_0.gguf' -p 4 -n 2 -r 1 %s", td,
             extra);
    return run(args, out, 4096, err, 4096);
}

Test(cli_tools, bench_passes_picks_the_pipeline) {
    char out[4096], err[4096];
    cr_assert_eq(bench_tiny("--json", out, err), 0, "%s", err);
    cr_assert(strstr(out, "\"passes\": \"fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,"
                          "fuse-rope-kv-write,fuse-rope-kv-attention,fuse-norm-matmul,cse,dce\""),
              "%s", out);
    cr_assert_eq(bench_tiny("--json --passes=fuse-qkv,dce", out, err), 0, "%s", err);
    cr_assert(strstr(out, "\"passes\": \"fuse-qkv,dce\""), "%s", out);
    cr_assert_eq(bench_tiny("--passes no-such-pass", out, err), 1, "%s", err);
    cr_assert(strstr(err, "unknown pass 'no-such-pass'"), "%s", err);
}

/* The CPU roofline: the host's copy bandwidth measured, roofline = bytes / it, fraction =
 * roofline / measured time. */
Test(cli_tools, bench_cpu_reports_the_roofline) {
    char out[4096], err[4096];
    cr_assert_eq(bench_tiny("--json", out, err), 0, "%s", err);
    const char *ms = strstr(out, "\"ms_per_token\": "), *rf = strstr(out, "\"roofline\": {");
    cr_assert(ms && rf, "%s", out);
    unsigned long long wb = 0, kb = 0;
    double bw = 0, copy = 0, roof = 0, frac = 0, mspt = strtod(ms + 16, NULL);
    cr_assert_eq(sscanf(rf, "\"roofline\": {\"weight_bytes_per_token\": %llu, "
                            "\"kv_bytes_per_token\": %llu, \"bandwidth_gbs\": %lf, "
                            "\"copy_bandwidth_gbs\": %lf, \"roofline_ms\": %lf, \"fraction\": %lf",
                        &wb, &kb, &bw, &copy, &roof, &frac),
                 6, "%s", out);
    cr_assert(copy > 0.1 && copy < 1e5, "copy bandwidth %g GB/s", copy);
    cr_assert(wb > 0 && mspt > 0, "%s", out);
    /* The JSON rounds the bandwidth to 0.1 GB/s and the times to 0.1 us. */
    cr_assert_float_eq(roof, (double)(wb + kb) / (copy * 1e9) * 1e3,
                       roof * (0.05 / copy + 1e-3) + 1e-4, "%s", out);
    cr_assert_float_eq(frac, roof / mspt, 1e-3 + frac * 1e-2, "%s", out);
    /* the memory line without the CUDA backend's graph counts */
    cr_assert(strstr(err, "loom bench: KV cache ") && strstr(err, " MiB, activations "), "%s", err);
    cr_assert(!strstr(err, "cuda graphs"), "%s", err);
}

Test(cli_tools, bench_ctx_sizes_the_graph_and_cache) {
    char out[4096], err[4096];
    cr_assert_eq(bench_tiny("--json", out, err), 0, "%s", err);
    cr_assert(strstr(out, "\"n_ctx\": 7, "), "default p + n + 1: %s", out);
    cr_assert_eq(bench_tiny("--json --ctx 64", out, err), 0, "%s", err);
    cr_assert(strstr(out, "\"n_ctx\": 64, "), "%s", out);
    cr_assert_eq(bench_tiny("--ctx 6", out, err), 2, "%s", err);
    cr_assert(strstr(err, "--ctx 6 is below the 7 positions the run needs"), "%s", err);
}

Test(cli_tools, run_pb_text_prompt_finds_its_gguf_without_m) {
    const char *td = loom_test_testdata("models/stories260K.gguf");
    char dir[1200], other[1200], link[1400], args[4096], out[4096], err[4096], direct[4096];
    snprintf(dir, sizeof dir, "%s/pb", tmpdir);
    snprintf(other, sizeof other, "%s/elsewhere", tmpdir);
    mkdir(dir, 0755);
    mkdir(other, 0755);
    snprintf(link, sizeof link, "%s/stories260K.gguf", dir);
    char target[1400];
    snprintf(target, sizeof target, "%s/models/stories260K.gguf", td);
    unlink(link);
    cr_assert_eq(symlink(target, link), 0);
    snprintf(args, sizeof args, "compile '%s' --ctx 64 -o '%s/s.pb'", link, dir);
    cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    snprintf(args, sizeof args, "run '%s' -p 'Once upon a time' -n 20 --ctx 64", link);
    cr_assert_eq(run(args, direct, sizeof direct, err, sizeof err), 0, "%s", err);
    cr_assert(strlen(direct) > 20, "%s", direct);
    snprintf(args, sizeof args, "run '%s/s.pb' -p 'Once upon a time' -n 20", dir);
    cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, direct, "the .pb (no -m) and its GGUF must tell the same story");
    /* The graph away from its GGUF: refused, saying that -m gives it. */
    snprintf(args, sizeof args, "cp '%s/s.pb' '%s/s.pb'", dir, other);
    cr_assert_eq(system(args), 0);
    snprintf(args, sizeof args, "run '%s/s.pb' -p 'Once upon a time' -n 2", other);
    cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 1);
    cr_assert(strstr(err, "-m") && strstr(err, "stories260K.gguf"), "%s", err);
}
