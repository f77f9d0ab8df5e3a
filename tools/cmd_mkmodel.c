/* cmd_mkmodel.c: `loom mkmodel`, a deterministic random-weight model (tools/mkmodel.h does the
 * work). Exit codes: 0 written, 1 runtime error (I/O, memory, bad shape), 2 usage error. */
#include <stdio.h>
#include <time.h>

#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/mkmodel.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom mkmodel -o OUT.gguf --arch qwen3|llama --quant TYPE [options]\n"
            "\n"
            "Writes a deterministic random-weight model (matrices ~N(0, 0.02^2), norms ~N(1, 0.1^2))\n"
            "with llama.cpp's metadata keys, tensor names and a synthetic vocabulary.\n"
            "\n"
            "  -o, --output FILE   output path (written via FILE.tmp, renamed on success)\n"
            "  --arch A            qwen3 or llama (qwen3 adds attn_q_norm / attn_k_norm)\n"
            "  --quant TYPE        q4_k_m (Q4_K, Q6_K for output and some attn_v/ffn_down, like\n"
            "                      llama.cpp), q4_k, q5_k_m (q4_k_m with Q5_K), q5_k, q6_k, q8_0,\n"
            "                      f16 or f32; norms are F32\n"
            "  --layers N          block count                     (default 2)\n"
            "  --hidden N          embedding length                (default 256)\n"
            "  --ffn N             feed-forward length             (default 768)\n"
            "  --heads N           attention heads                 (default 4)\n"
            "  --kv-heads N        KV heads, dividing heads        (default 2)\n"
            "  --head-dim N        head dimension                  (default hidden / heads)\n"
            "  --vocab N           vocabulary size, >= 258         (default 512)\n"
            "  --ctx N             context length                  (default 4096)\n"
            "  --seed S            random seed                     (default 1)\n"
            "  --threads N         worker threads                  (default: online cores)\n"
            "  -h, --help          this help\n"
            "\n"
            "The same options write the same bytes, whatever the thread count. Rows whose length is\n"
            "not a multiple of 256 fall back from K-quants to Q8_0 (or F16).\n");
}

int loom_cmd_mkmodel(int argc, char **argv) {
    const char *out = NULL, *arch = NULL, *quant = NULL, *stray = NULL;
    int32_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
    int32_t ctx = 0, threads = 0;
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, NULL); /* the defaults; the arch is set once known */
    unsigned long long seed = c.seed;
    const loom_cli_opt opts[] = {
        {"-o|--output", LOOM_CLI_STRING, &out, 0, 0, NULL},
        {"--arch", LOOM_CLI_STRING, &arch, 0, 0, NULL},
        {"--quant", LOOM_CLI_STRING, &quant, 0, 0, NULL},
        {"--layers", LOOM_CLI_INT, &layers, 1, INT32_MAX, NULL},
        {"--hidden", LOOM_CLI_INT, &hidden, 1, INT32_MAX, NULL},
        {"--ffn", LOOM_CLI_INT, &ffn, 1, INT32_MAX, NULL},
        {"--heads", LOOM_CLI_INT, &heads, 1, INT32_MAX, NULL},
        {"--kv-heads", LOOM_CLI_INT, &kv_heads, 1, INT32_MAX, NULL},
        {"--head-dim", LOOM_CLI_INT, &head_dim, 1, INT32_MAX, NULL},
        {"--vocab", LOOM_CLI_INT, &vocab, 1, INT32_MAX, NULL},
        {"--ctx", LOOM_CLI_INT, &ctx, 1, INT32_MAX, NULL},
        {"--seed", LOOM_CLI_U64, &seed, 0, 0, NULL},
        {"--threads", LOOM_CLI_INT, &threads, 1, 1024, NULL},
    };
    int pr = loom_cli_parse_opts("loom mkmodel", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "argument", &stray);
    if (pr != LOOM_CLI_GO_ON) return pr;
    if (stray) {
        fprintf(stderr, "loom mkmodel: unexpected argument '%s' (every option takes a value)\n",
                stray);
        usage(stderr);
        return 2;
    }
    if (out == NULL || arch == NULL || quant == NULL) {
        fprintf(stderr, "loom mkmodel: %s is required\n", out == NULL ? "-o OUT.gguf" : arch == NULL ? "--arch" : "--quant");
        usage(stderr);
        return 2;
    }

    loom_mkmodel_config_init(&c, arch);
    c.quant = quant;
    if (layers) c.n_layer = layers;
    if (hidden) c.n_embd = hidden;
    if (ffn) c.n_ff = ffn;
    if (heads) c.n_head = heads;
    if (kv_heads) c.n_head_kv = kv_heads;
    if (vocab) c.n_vocab = vocab;
    if (ctx) c.n_ctx = ctx;
    c.seed = seed;
    c.n_threads = (int)threads;
    if (head_dim) {
        c.head_dim = head_dim;
    } else if (c.n_embd % c.n_head == 0) {
        c.head_dim = c.n_embd / c.n_head;
    } else {
        fprintf(stderr, "loom mkmodel: hidden %u is not a multiple of heads %u: give --head-dim\n", c.n_embd,
                c.n_head);
        return 2;
    }
    loom_error err = {0};
    if (loom_mkmodel_check(&c, &err) != LOOM_OK) {
        fprintf(stderr, "loom %s\n", err.msg);
        return 2;
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (loom_mkmodel_write(&c, out, &err) != LOOM_OK) {
        fprintf(stderr, "loom mkmodel: %s\n", err.msg);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("wrote %s: %s, %u layers, hidden %u, ffn %u, heads %u/%u, head_dim %u, vocab %u, %s, seed %llu "
           "(%.2f s)\n",
           out, c.arch, c.n_layer, c.n_embd, c.n_ff, c.n_head, c.n_head_kv, c.head_dim, c.n_vocab, c.quant,
           (unsigned long long)c.seed, secs);
    return 0;
}
