/* mkmodel_test.c: `loom mkmodel` (tools/mkmodel.h and the CLI in tools/cmd_mkmodel.c).
 *
 * - Output is deterministic: the same config writes the same bytes with 1 and 3 threads; another
 *   seed writes different weights.
 * - Output reads back through //loaders:gguf with llama.cpp's keys and values, tensor names,
 *   shapes (ggml order) and the types each --quant scheme promises (Q4_K_M's Q6_K layers follow
 *   llama.cpp's use_more_bits), a synthetic GPT-2-style vocabulary, and weights with the promised
 *   statistics (matrices std 0.02, norms mean 1) that dequantize to finite values.
 * - Bad configs and CLI misuse: usage errors exit 2, I/O errors exit 1 and leave no file.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant/quant.h"
#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "tools/commands.h"
#include "tools/mkmodel.h"

static char tmpdir[4096];

static void make_tmpdir(void) {
    const char *t = getenv("TEST_TMPDIR");
    tmpdir[0] = '\0';
    snprintf(tmpdir, sizeof tmpdir, "%s/mkmodel_XXXXXX", t && *t ? t : "/tmp");
    cr_assert(mkdtemp(tmpdir) != NULL);
}

static const char *tmp_path(const char *name) {
    static char paths[8][4200];
    cr_assert(tmpdir[0] != '\0', "no temporary folder");
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 4200, "%s/%s", tmpdir, name);
    return p;
}

static void write_model(const loom_mkmodel_config *c, const char *path) {
    loom_error err = {0};
    cr_assert_eq(loom_mkmodel_write(c, path, &err), LOOM_OK, "%s", err.msg);
}

static loom_gguf *open_model(const char *path) {
    loom_gguf *g = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    return g;
}

static uint32_t get_u32(loom_gguf *g, const char *key) {
    uint32_t v = 0;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_get_u32(g, key, &v, &err), LOOM_OK, "%s", err.msg);
    return v;
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char p[8192];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

TestSuite(mkmodel, .init = make_tmpdir, .fini = remove_tmpdir);

Test(mkmodel, deterministic_for_any_thread_count) {
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "qwen3");
    c.seed = 7;
    c.n_threads = 1;
    write_model(&c, tmp_path("a.gguf"));
    c.n_threads = 3;
    write_model(&c, tmp_path("b.gguf"));
    c.seed = 8;
    write_model(&c, tmp_path("c.gguf"));
    size_t na, nb, nc;
    void *a = loom_test_read_file(tmp_path("a.gguf"), &na), *b = loom_test_read_file(tmp_path("b.gguf"), &nb),
         *d = loom_test_read_file(tmp_path("c.gguf"), &nc);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(a, b, na), 0, "1 and 3 threads wrote different bytes");
    cr_assert_eq(na, nc, "the seed must not change the layout");
    cr_assert_neq(memcmp(a, d, na), 0, "seeds 7 and 8 wrote the same bytes");
    free(a);
    free(b);
    free(d);
}

typedef struct {
    const char *name;
    loom_ggml_type type;
    int64_t ne0, ne1; /* ne1 0: a vector */
} want_tensor;

Test(mkmodel, qwen3_q4_k_m_keys_tensors_and_types) {
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "qwen3");
    c.n_layer = 8;
    c.n_vocab = 300;
    c.n_ctx = 1234;
    write_model(&c, tmp_path("q.gguf"));
    loom_gguf *g = open_model(tmp_path("q.gguf"));
    loom_error err = {0};
    const char *s;
    float f;
    cr_assert_eq(loom_gguf_get_string(g, "general.architecture", &s, &err), LOOM_OK);
    cr_expect_str_eq(s, "qwen3");
    cr_expect_eq(get_u32(g, "general.file_type"), 15);
    cr_expect_eq(get_u32(g, "general.quantization_version"), 2);
    cr_expect_eq(get_u32(g, "qwen3.block_count"), 8);
    cr_expect_eq(get_u32(g, "qwen3.context_length"), 1234);
    cr_expect_eq(get_u32(g, "qwen3.embedding_length"), 256);
    cr_expect_eq(get_u32(g, "qwen3.feed_forward_length"), 768);
    cr_expect_eq(get_u32(g, "qwen3.attention.head_count"), 4);
    cr_expect_eq(get_u32(g, "qwen3.attention.head_count_kv"), 2);
    cr_expect_eq(get_u32(g, "qwen3.attention.key_length"), 64);
    cr_expect_eq(get_u32(g, "qwen3.attention.value_length"), 64);
    cr_expect_eq(get_u32(g, "qwen3.rope.dimension_count"), 64);
    cr_assert_eq(loom_gguf_get_f32(g, "qwen3.rope.freq_base", &f, &err), LOOM_OK);
    cr_expect_eq(f, 1e6f);
    cr_assert_eq(loom_gguf_get_f32(g, "qwen3.attention.layer_norm_rms_epsilon", &f, &err), LOOM_OK);
    cr_expect_eq(f, 1e-6f);

    /* tokenizer: GPT-2 byte tokens, fillers, two specials */
    cr_assert_eq(loom_gguf_get_string(g, "tokenizer.ggml.model", &s, &err), LOOM_OK);
    cr_expect_str_eq(s, "gpt2");
    const loom_gguf_value *toks, *types, *merges;
    cr_assert_eq(loom_gguf_get_array(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, &toks, &err), LOOM_OK);
    cr_assert_eq(toks->arr.n, 300);
    cr_expect_str_eq(toks->arr.items[0].str.ptr, "\xc4\x80");    /* byte 0 -> U+0100 */
    cr_expect_str_eq(toks->arr.items[32].str.ptr, "\xc4\xa0");   /* space -> U+0120 'Ġ' */
    cr_expect_str_eq(toks->arr.items[33].str.ptr, "!");
    cr_expect_str_eq(toks->arr.items[173].str.ptr, "\xc5\x83");  /* soft hyphen -> U+0143 */
    cr_expect_str_eq(toks->arr.items[255].str.ptr, "\xc3\xbf");  /* byte 255 stands for itself */
    cr_expect_str_eq(toks->arr.items[256].str.ptr, "tok256");
    cr_expect_str_eq(toks->arr.items[298].str.ptr, "<|endoftext|>");
    cr_expect_str_eq(toks->arr.items[299].str.ptr, "<|im_end|>");
    cr_assert_eq(loom_gguf_get_array(g, "tokenizer.ggml.token_type", LOOM_GGUF_I32, &types, &err), LOOM_OK);
    cr_expect_eq(loom_gguf_array_i64(types, 0), 1);
    cr_expect_eq(loom_gguf_array_i64(types, 297), 1);
    cr_expect_eq(loom_gguf_array_i64(types, 298), 3);
    cr_expect_eq(loom_gguf_array_i64(types, 299), 3);
    cr_assert_eq(loom_gguf_get_array(g, "tokenizer.ggml.merges", LOOM_GGUF_STRING, &merges, &err), LOOM_OK);
    cr_expect_eq(merges->arr.n, 0);
    cr_expect_eq(get_u32(g, "tokenizer.ggml.bos_token_id"), 298);
    cr_expect_eq(get_u32(g, "tokenizer.ggml.eos_token_id"), 299);

    /* tensors: 1 + 8 * 11 + 2, in llama.cpp's order; Q6_K where use_more_bits(i, 8): 0, 3, 6, 7 */
    cr_assert_eq(loom_gguf_n_tensors(g), 91);
    const want_tensor head[] = {
        {"token_embd.weight", LOOM_GGML_Q4_K, 256, 300},
        {"blk.0.attn_norm.weight", LOOM_GGML_F32, 256, 0},
        {"blk.0.attn_q.weight", LOOM_GGML_Q4_K, 256, 256},
        {"blk.0.attn_k.weight", LOOM_GGML_Q4_K, 256, 128},
        {"blk.0.attn_v.weight", LOOM_GGML_Q6_K, 256, 128},
        {"blk.0.attn_output.weight", LOOM_GGML_Q4_K, 256, 256},
        {"blk.0.attn_q_norm.weight", LOOM_GGML_F32, 64, 0},
        {"blk.0.attn_k_norm.weight", LOOM_GGML_F32, 64, 0},
        {"blk.0.ffn_norm.weight", LOOM_GGML_F32, 256, 0},
        {"blk.0.ffn_gate.weight", LOOM_GGML_Q4_K, 256, 768},
        {"blk.0.ffn_up.weight", LOOM_GGML_Q4_K, 256, 768},
        {"blk.0.ffn_down.weight", LOOM_GGML_Q6_K, 768, 256},
    };
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        cr_expect_str_eq(t->name, head[i].name);
        cr_expect_eq(t->type, head[i].type, "%s", t->name);
        cr_expect_eq(t->n_dims, head[i].ne1 ? 2u : 1u, "%s", t->name);
        cr_expect_eq(t->ne[0], head[i].ne0, "%s", t->name);
        if (head[i].ne1) cr_expect_eq(t->ne[1], head[i].ne1, "%s", t->name);
    }
    cr_expect_str_eq(loom_gguf_tensor_at(g, 89)->name, "output_norm.weight");
    cr_expect_str_eq(loom_gguf_tensor_at(g, 90)->name, "output.weight");
    cr_expect_eq(loom_gguf_tensor_at(g, 90)->type, LOOM_GGML_Q6_K);
    for (int l = 0; l < 8; l++) {
        char name[64];
        bool more = l == 0 || l == 3 || l == 6 || l == 7;
        loom_ggml_type want = more ? LOOM_GGML_Q6_K : LOOM_GGML_Q4_K;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        cr_expect_eq(loom_gguf_find_tensor(g, name)->type, want, "%s", name);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        cr_expect_eq(loom_gguf_find_tensor(g, name)->type, want, "%s", name);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        cr_expect_eq(loom_gguf_find_tensor(g, name)->type, LOOM_GGML_Q4_K, "%s", name);
    }
    loom_gguf_close(g);
}

Test(mkmodel, weights_have_the_promised_statistics) {
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "llama");
    c.quant = "f32";
    write_model(&c, tmp_path("f.gguf"));
    loom_gguf *g = open_model(tmp_path("f.gguf"));
    cr_expect_eq(get_u32(g, "llama.vocab_size"), 512);
    cr_expect(loom_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") == NULL, "llama has no q norm");
    cr_expect_eq(loom_gguf_n_tensors(g), 3 + 2 * 9);
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        cr_assert_eq(t->type, LOOM_GGML_F32, "%s", t->name);
        size_t n = (size_t)(t->nbytes / 4);
        const float *v = t->data;
        double sum = 0, sq = 0, amax = 0;
        for (size_t k = 0; k < n; k++) {
            sum += v[k];
            sq += (double)v[k] * v[k];
        }
        double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        bool norm = strstr(t->name, "_norm") != NULL;
        double want_mean = norm ? 1.0 : 0.0, want_sd = norm ? 0.1 : 0.02;
        for (size_t k = 0; k < n; k++) amax = fmax(amax, fabs(v[k] - want_mean));
        cr_expect(fabs(mean - want_mean) < 4 * want_sd / sqrt((double)n) + 1e-6, "%s: mean %g", t->name, mean);
        cr_expect(fabs(sd - want_sd) < 4 * want_sd / sqrt(2.0 * (double)n), "%s: std %g", t->name, sd);
        cr_expect(amax <= 3.47 * want_sd, "%s: |x - mean| reaches %g", t->name, amax);
    }
    loom_gguf_close(g);
}

typedef struct {
    const char *quant;
    loom_ggml_type matrix, output;
    uint32_t file_type;
} scheme_case;

Test(mkmodel, every_quant_scheme_reads_back_finite) {
    static const scheme_case cases[] = {
        {"q4_k", LOOM_GGML_Q4_K, LOOM_GGML_Q4_K, 14}, {"q5_k", LOOM_GGML_Q5_K, LOOM_GGML_Q5_K, 16},
        {"q6_k", LOOM_GGML_Q6_K, LOOM_GGML_Q6_K, 18}, {"q8_0", LOOM_GGML_Q8_0, LOOM_GGML_Q8_0, 7},
        {"f16", LOOM_GGML_F16, LOOM_GGML_F16, 1},     {"f32", LOOM_GGML_F32, LOOM_GGML_F32, 0},
        {"q4_k_m", LOOM_GGML_Q4_K, LOOM_GGML_Q6_K, 15}, {"q5_k_m", LOOM_GGML_Q5_K, LOOM_GGML_Q6_K, 17},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_mkmodel_config c;
        loom_mkmodel_config_init(&c, i % 2 ? "llama" : "qwen3");
        c.quant = cases[i].quant;
        c.n_layer = 1;
        write_model(&c, tmp_path("s.gguf"));
        loom_gguf *g = open_model(tmp_path("s.gguf"));
        cr_expect_eq(get_u32(g, "general.file_type"), cases[i].file_type, "%s", cases[i].quant);
        cr_expect_eq(loom_gguf_find_tensor(g, "blk.0.ffn_up.weight")->type, cases[i].matrix, "%s", cases[i].quant);
        cr_expect_eq(loom_gguf_find_tensor(g, "output.weight")->type, cases[i].output, "%s", cases[i].quant);
        cr_expect_eq(loom_gguf_find_tensor(g, "output_norm.weight")->type, LOOM_GGML_F32);
        for (size_t k = 0; k < loom_gguf_n_tensors(g); k++) {
            const loom_gguf_tensor *t = loom_gguf_tensor_at(g, k);
            int64_t n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);
            float *y = malloc((size_t)n * sizeof(float));
            cr_assert_eq(loom_dequantize_row(t->type, t->data, y, n), LOOM_OK, "%s", t->name);
            double sq = 0;
            for (int64_t j = 0; j < n; j++) {
                cr_assert(isfinite(y[j]), "%s %s: value %lld", cases[i].quant, t->name, (long long)j);
                sq += (double)y[j] * y[j];
            }
            if (strstr(t->name, "_norm") == NULL)
                cr_expect(fabs(sqrt(sq / (double)n) - 0.02) < 0.003, "%s %s: rms %g", cases[i].quant, t->name,
                          sqrt(sq / (double)n));
            free(y);
        }
        loom_gguf_close(g);
    }
}

Test(mkmodel, rows_not_a_multiple_of_256_fall_back) {
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "qwen3");
    c.quant = "q4_k";
    c.n_layer = 1;
    c.n_embd = 96;    /* multiple of 32, not 256 */
    c.n_ff = 256;
    c.n_head = 3;
    c.n_head_kv = 1;
    c.head_dim = 30;  /* q_dim 90: neither */
    write_model(&c, tmp_path("odd.gguf"));
    loom_gguf *g = open_model(tmp_path("odd.gguf"));
    cr_expect_eq(loom_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, LOOM_GGML_Q8_0);   /* rows of 96 */
    cr_expect_eq(loom_gguf_find_tensor(g, "blk.0.attn_output.weight")->type, LOOM_GGML_F16); /* rows of 90 */
    cr_expect_eq(loom_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, LOOM_GGML_Q4_K); /* rows of 256 */
    loom_gguf_close(g);
}

typedef struct {
    const char *what;
    void (*edit)(loom_mkmodel_config *c);
} bad_case;

static void bad_arch(loom_mkmodel_config *c) { c->arch = "gpt2"; }
static void bad_quant(loom_mkmodel_config *c) { c->quant = "q3_k"; }
static void bad_kv(loom_mkmodel_config *c) { c->n_head_kv = 3; }
static void bad_vocab(loom_mkmodel_config *c) { c->n_vocab = 257; }
static void bad_head_dim(loom_mkmodel_config *c) { c->head_dim = 63; }
static void bad_layers(loom_mkmodel_config *c) { c->n_layer = 0; }

Test(mkmodel, bad_configs_are_refused) {
    static const bad_case cases[] = {
        {"arch", bad_arch},   {"quant", bad_quant},       {"kv-heads", bad_kv},
        {"vocab", bad_vocab}, {"head-dim", bad_head_dim}, {"layers", bad_layers},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_mkmodel_config c;
        loom_mkmodel_config_init(&c, "llama");
        cases[i].edit(&c);
        loom_error err = {0};
        cr_expect_eq(loom_mkmodel_write(&c, tmp_path("bad.gguf"), &err), LOOM_ERR_INVALID_ARGUMENT, "%s",
                     cases[i].what);
        cr_expect(strstr(err.msg, cases[i].what) != NULL, "message '%s' should name %s", err.msg, cases[i].what);
        cr_expect(access(tmp_path("bad.gguf"), F_OK) != 0, "no file for a bad config");
    }
}

/* ---- the CLI ----------------------------------------------------------------------------- */

static int run_cli(const char *args) {
    char buf[2048], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "mkmodel %s", args);
    for (char *tok = strtok(buf, " "); tok != NULL && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    return loom_cmd_mkmodel(argc, argv);
}

Test(mkmodel, cli_exit_codes) {
    char args[4608];
    cr_expect_eq(run_cli("--help"), 0);
    snprintf(args, sizeof args, "-o %s --arch llama --quant q8_0 --layers 1 --seed 5 --threads 2", tmp_path("cli.gguf"));
    cr_expect_eq(run_cli(args), 0);
    cr_expect(access(tmp_path("cli.gguf"), F_OK) == 0);
    snprintf(args, sizeof args, "-o %s --arch=llama --quant=q8_0 --layers=1 --seed=5", tmp_path("cli2.gguf"));
    cr_expect_eq(run_cli(args), 0);
    size_t n1, n2;
    void *a = loom_test_read_file(tmp_path("cli.gguf"), &n1), *b = loom_test_read_file(tmp_path("cli2.gguf"), &n2);
    cr_expect(n1 == n2 && memcmp(a, b, n1) == 0, "--flag=value and --flag value agree");
    free(a);
    free(b);

    static const char *usage_errors[] = {
        "",                                               /* nothing */
        "--arch llama --quant q8_0",                      /* no -o */
        "-o x.gguf --quant q8_0",                         /* no --arch */
        "-o x.gguf --arch llama",                         /* no --quant */
        "-o x.gguf --arch llama --quant q8_0 --bogus 1",  /* unknown flag */
        "-o x.gguf --arch llama --quant q8_0 --layers",   /* missing value */
        "-o x.gguf --arch llama --quant q8_0 --layers x", /* not a number */
        "-o x.gguf --arch llama --quant q8_0 --layers 0", /* out of range */
        "-o x.gguf --arch llama --quant q8_0 --seed -1",
        "-o x.gguf --arch mamba --quant q8_0",            /* bad arch */
        "-o x.gguf --arch llama --quant q2_k",            /* bad quant */
        "-o x.gguf --arch llama --quant q8_0 --hidden 100 --heads 3", /* no head_dim */
        "-o x.gguf --arch llama --quant q8_0 extra",      /* stray argument */
    };
    for (size_t i = 0; i < sizeof usage_errors / sizeof usage_errors[0]; i++)
        cr_expect_eq(run_cli(usage_errors[i]), 2, "'%s'", usage_errors[i]);
    cr_expect(access("x.gguf", F_OK) != 0);

    snprintf(args, sizeof args, "-o %s/no/such/dir/m.gguf --arch llama --quant q8_0 --layers 1", tmpdir);
    cr_expect_eq(run_cli(args), 1, "I/O error");
}
