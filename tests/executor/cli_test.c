/* cli_test.c: `loom run` and `loom compile` as a user calls them (the built //tools:loom binary).
 *
 * - run prints the greedy ids on one stdout line (the golden greedy16 tokens); --logits writes
 *   [n_prompt][n_vocab] float32 that match the golden .deq logits;
 * - compile --stats --json prints the op counts, --stats's text tables keep their columns aligned
 *   with the longest names; -o writes a .pb that runs (with -m) to the same tokens, and is
 *   refused against another GGUF;
 * - run -p stops at EOS (the count on stderr is the tokens before it) and prints both speeds;
 * - exit codes: 0 success and --help, 1 runtime errors, 2 usage errors.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/testdata.h"

static char loom_bin[2048];
static char golden[1024];
static char tmpdir[1024];

static void setup(void) {
    loom_test_runfile(loom_bin, sizeof loom_bin, "tools/loom");
    const char *t = getenv("TEST_TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s", t ? t : "/tmp");
}

/* Points golden at LOOM_TESTDATA/golden, or skips the test (fails it when testdata is required). */
static void need_testdata(void) {
    snprintf(golden, sizeof golden, "%s/golden", loom_test_testdata("golden/sequences.txt"));
}

/* Runs `loom ARGS` (a shell-quoted argument string); captures stdout into out; returns the exit
 * code. stderr goes to TEST_TMPDIR/stderr.PID.txt (Criterion runs tests in parallel processes). */
static int run(const char *args, char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s/stderr.%d.txt'", loom_bin, args, tmpdir, (int)getpid());
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen failed");
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void read_stderr(char *buf, size_t cap) {
    char p[1100];
    snprintf(p, sizeof p, "%s/stderr.%d.txt", tmpdir, (int)getpid());
    FILE *f = fopen(p, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

TestSuite(cli, .init = setup);

Test(cli, run_prints_the_greedy_ids_and_writes_logits) {
    need_testdata();
    char args[4096], out[4096];
    snprintf(args, sizeof args, "run '%s/tiny_qwen3_q4km.gguf' --tokens 338,281,93,503,475,149,364 "
             "-n 16 --logits '%s/l.bin'", golden, tmpdir);
    cr_assert_eq(run(args, out, sizeof out), 0, "stdout: %s", out);
    cr_assert_str_eq(out, "463 384 7 326 319 58 7 326 33 58 486 414 103 396 333 141\n");
    char p[1100];
    snprintf(p, sizeof p, "%s/l.bin", tmpdir);
    FILE *f = fopen(p, "rb");
    cr_assert(f);
    static float got[7 * 512 + 1], ref[7 * 512];
    cr_assert_eq(fread(got, 4, 7 * 512 + 1, f), 7 * 512, "the file must hold exactly 7 x 512 floats");
    fclose(f);
    snprintf(p, sizeof p, "%s/tiny_qwen3_q4km.S7.deq.logits.bin", golden);
    f = fopen(p, "rb");
    cr_assert(f);
    fseek(f, 8, SEEK_SET);
    cr_assert_eq(fread(ref, 4, 7 * 512, f), 7 * 512);
    fclose(f);
    for (int i = 0; i < 7 * 512; i++) cr_assert(fabsf(got[i] - ref[i]) < 1e-4f, "[%d] %g vs %g", i, got[i], ref[i]);
}

/* The --stats text tables stay aligned with the -O2 names longer than the columns' minimum
 * widths (fuse-rope-kv-attention, rope_kv_attention): in the pass table every row's "before"
 * number ends where the header's "before" does, in the op table every count starts where the
 * header's "count" does. */
Test(cli, compile_stats_text_columns_align) {
    need_testdata();
    char args[4096], out[8192];
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' --stats", golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    cr_assert(strstr(out, "\nfuse-rope-kv-attention ") && strstr(out, "\nrope_kv_attention "), "%s",
              out);
    const char *p = out;
    cr_assert(!strncmp(p, "pass ", 5), "%s", out);
    size_t before_end = (size_t)(strstr(p, "before") - p) + 6, rows = 0;
    for (p = strchr(p, '\n') + 1; *p != '\n'; p = strchr(p, '\n') + 1, rows++) {
        const char *e = p + before_end;
        cr_assert(e[-1] >= '0' && e[-1] <= '9' && e[0] == ' ' && e[-9] == ' ',
                  "pass row not aligned: %.60s\n%s", p, out);
    }
    cr_assert_geq(rows, 9, "%s", out);
    p++;
    cr_assert(!strncmp(p, "op ", 3), "%s", out);
    size_t count_at = (size_t)(strstr(p, "count") - p);
    rows = 0;
    for (p = strchr(p, '\n') + 1; strncmp(p, "nodes ", 6); p = strchr(p, '\n') + 1, rows++)
        cr_assert(p[count_at - 1] == ' ' && p[count_at] >= '0' && p[count_at] <= '9',
                  "op row not aligned: %.60s\n%s", p, out);
    cr_assert_geq(rows, 8, "%s", out);
}

Test(cli, compile_stats_json_and_pb_round_trip) {
    need_testdata();
    char args[4096], out[8192], err[4096];
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' --stats --json -O0", golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    cr_assert_str_eq(out, "{\"ops\": {\"get_rows\": 1, \"rms_norm\": 5, \"mul\": 7, \"add\": 4, "
                          "\"matmul\": 15, \"reshape\": 6, \"rope\": 4, \"kv_write\": 4, "
                          "\"attention\": 2, \"silu\": 2}, \"nodes\": 50, \"values\": 77, "
                          "\"passes\": [], \"layers\": ["
                          "{\"rms_norm\": 2, \"mul\": 3, \"add\": 2, \"matmul\": 7, \"reshape\": 3, "
                          "\"rope\": 2, \"kv_write\": 2, \"attention\": 1, \"silu\": 1}, "
                          "{\"rms_norm\": 2, \"mul\": 3, \"add\": 2, \"matmul\": 7, \"reshape\": 3, "
                          "\"rope\": 2, \"kv_write\": 2, \"attention\": 1, \"silu\": 1}]}\n");
    /* Outside the layers: get_rows, the final rms_norm and mul, the output matmul. */
    /* 77 values = 2 inputs + 21 weights + 4 KV states + 50 node results. */
    /* The default -O2 pipeline: per layer one matmul_triple, one matmul_pair, two matmul_add;
     * the layers' four RMSNorms folded into the triples and pairs, the final one left. */
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' --stats --json", golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    cr_assert(strstr(out, "{\"ops\": {\"get_rows\": 1, \"matmul\": 1, \"reshape\": 6, "
                          "\"fused_rms_norm\": 1, \"matmul_triple\": 2, "
                          "\"matmul_pair\": 2, \"matmul_add\": 4, \"rope_kv_attention\": 2}, "
                          "\"nodes\": 19,") == out, "%s", out);
    cr_assert(strstr(out, "\"name\": \"fuse-qkv\""), "%s", out);
    cr_assert(strstr(out, "\"name\": \"fuse-norm-matmul\""), "%s", out);
    /* Each layer, exactly: one matmul_triple (with the attention norm), one rope_kv_attention
     * (RoPE, the KV writes of K and V and the attention), one matmul_pair (with the FFN norm),
     * two matmul_add (reshapes are views). */
    const char *layer = "{\"reshape\": 3, "
                        "\"matmul_triple\": 1, \"matmul_pair\": 1, \"matmul_add\": 2, "
                        "\"rope_kv_attention\": 1}";
    char layers[1024];
    snprintf(layers, sizeof layers, "\"layers\": [%s, %s]}", layer, layer);
    cr_assert(strstr(out, layers), "%s", out);
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' --passes no-such-pass", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
    read_stderr(err, sizeof err);
    cr_assert(strstr(err, "no-such-pass") && strstr(err, "fuse-qkv"), "%s", err);
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' -o '%s/m.pb'", golden, tmpdir);
    cr_assert_eq(run(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "run '%s/m.pb' -m '%s/tiny_llama_q8_0.gguf' --tokens 338,281,93 -n 5",
             tmpdir, golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    char direct[256];
    snprintf(args, sizeof args, "run '%s/tiny_llama_q8_0.gguf' --tokens 338,281,93 -n 5", golden);
    cr_assert_eq(run(args, direct, sizeof direct), 0);
    cr_assert_str_eq(out, direct, "the .pb and the GGUF must generate the same tokens");
    /* Against another GGUF: refused. Without -m: the GGUF is looked up next to the .pb. */
    snprintf(args, sizeof args, "run '%s/m.pb' -m '%s/tiny_llama_f32.gguf' --tokens 1", tmpdir, golden);
    cr_assert_eq(run(args, out, sizeof out), 1);
    read_stderr(err, sizeof err);
    cr_assert(strstr(err, "tiny_llama_q8_0.gguf"), "%s", err);
    snprintf(args, sizeof args, "run '%s/m.pb' --tokens 1", tmpdir);
    cr_assert_eq(run(args, out, sizeof out), 1);
    /* A last-logits graph cannot give every prompt row to --logits. */
    snprintf(args, sizeof args, "compile '%s/tiny_llama_q8_0.gguf' --last-logits -o '%s/last.pb'",
             golden, tmpdir);
    cr_assert_eq(run(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "run '%s/last.pb' -m '%s/tiny_llama_q8_0.gguf' --tokens 338,281,93 "
             "-n 5", tmpdir, golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    cr_assert_str_eq(out, direct);
    snprintf(args, sizeof args, "run '%s/last.pb' -m '%s/tiny_llama_q8_0.gguf' --tokens 338,281,93 "
             "--logits '%s/never.bin'", tmpdir, golden, tmpdir);
    cr_assert_eq(run(args, out, sizeof out), 1);
    read_stderr(err, sizeof err);
    cr_assert(strstr(err, "last-logits"), "%s", err);
    snprintf(args, sizeof args, "%s/never.bin", tmpdir);
    cr_assert_neq(access(args, F_OK), 0, "no logits file may be left behind");
}

/* -p: the model's tokenizer makes the prompt; the generated text streams to stdout. */
Test(cli, run_text_prompt_streams_the_story) {
    need_testdata();
    char args[4096], out[4096];
    snprintf(args, sizeof args, "run '%s/../models/stories260K.gguf' -p 'Once upon a time' -n 40",
             golden);
    cr_assert_eq(run(args, out, sizeof out), 0);
    cr_assert_str_eq(out, ", there was a little girl named Lily. She loved to play outside in the "
                          "park. One day, she saw a big, red ball.\n");
    snprintf(args, sizeof args, "run '%s/../models/stories260K.gguf' -p hi --tokens 1", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
}

/* -p stops at end of generation. Near-uniform sampling (--temp 30) reaches stories260K's EOS
 * (id 2) within 300 tokens for some seeds; --tokens with the same prompt ids and seed draws the
 * same ids (and does not stop), so the -p run must report exactly the tokens before the first
 * EOS, plus prompt and generation speed on stderr. */
Test(cli, run_text_prompt_stops_at_eos_and_prints_speed) {
    need_testdata();
    char args[4096], ids[8192], text[16384], err[4096];
    int stopped = 0;
    for (int seed = 1; seed <= 4; seed++) {
        snprintf(args, sizeof args, "run '%s/../models/stories260K.gguf' --tokens 1,403,407,261,378 "
                 "-n 300 --temp 30 --seed %d", golden, seed);
        cr_assert_eq(run(args, ids, sizeof ids), 0);
        int k = 0, eos = -1;
        for (char *p = ids; *p && *p != '\n'; k++) {
            long v = strtol(p, &p, 10);
            if (v == 2 && eos < 0) eos = k;
            while (*p == ' ') p++;
        }
        cr_assert_eq(k, 300, "seed %d: %d ids", seed, k);
        snprintf(args, sizeof args, "run '%s/../models/stories260K.gguf' -p 'Once upon a time' "
                 "-n 300 --temp 30 --seed %d", golden, seed);
        cr_assert_eq(run(args, text, sizeof text), 0);
        read_stderr(err, sizeof err);
        char want[64];
        snprintf(want, sizeof want, "generated %d tokens in ", eos < 0 ? 300 : eos);
        cr_expect(strstr(err, want), "seed %d: first EOS at %d, stderr: %s", seed, eos, err);
        cr_expect(strstr(err, "prompt 5 tokens in ") && strstr(err, "tokens/s)"), "%s", err);
        stopped += eos >= 0;
    }
    cr_assert_geq(stopped, 1, "no seed reached EOS in 300 tokens: pick other seeds");
}

/* api/example_generate.c, the program that uses only loom.h, gives the golden greedy tokens. */
Test(cli, example_program_uses_only_the_public_header) {
    need_testdata();
    char bin[2100], cmd[8192], out[1024] = "";
    loom_test_runfile(bin, sizeof bin, "api/example_generate");
    snprintf(cmd, sizeof cmd, "'%s' '%s/tiny_qwen3_q4km.gguf' 338,281,93,503,475,149,364", bin, golden);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    cr_assert_eq(pclose(p), 0);
    cr_assert_str_eq(out, "463 384 7 326 319 58 7 326 33 58 486 414 103 396 333 141\n");
}

Test(cli, exit_codes) {
    need_testdata();
    char args[4096], out[4096], err[4096];
    cr_assert_eq(run("run --help", out, sizeof out), 0);
    cr_assert(strstr(out, "--tokens"));
    cr_assert_eq(run("compile --help", out, sizeof out), 0);
    cr_assert_eq(run("run", out, sizeof out), 2);
    snprintf(args, sizeof args, "run '%s/tiny_qwen3_q4km.gguf' --tokens 1,x", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "run '%s/tiny_qwen3_q4km.gguf' --tokens 1 --frobnicate", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "run '%s/tiny_qwen3_q4km.gguf' --tokens 1 -n -3", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "run '%s/tiny_qwen3_q4km.gguf' --tokens 1,600", golden);
    cr_assert_eq(run(args, out, sizeof out), 1);
    read_stderr(err, sizeof err);
    cr_assert(strstr(err, "600") && strstr(err, "vocabulary"), "%s", err);
    cr_assert_eq(run("run /nonexistent.gguf --tokens 1", out, sizeof out), 1);
    cr_assert_eq(run("compile /nonexistent.gguf --stats", out, sizeof out), 1);
    snprintf(args, sizeof args, "compile '%s/tiny_qwen3_q4km.gguf' --json", golden);
    cr_assert_eq(run(args, out, sizeof out), 2);
}
