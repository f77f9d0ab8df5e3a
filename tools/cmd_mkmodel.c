/* cmd_mkmodel.c: `loom mkmodel`, a deterministic random-weight model (tools/mkmodel.h does the
 * work). Exit codes: 0 written, 1 runtime error (I/O, memory, bad shape), 2 usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
            "                      llama.cpp), q4_k, q5_k, q6_k, q8_0, f16 or f32; norms are F32\n"
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

/* Parses a decimal unsigned integer in [lo, hi]; false if it is not one. */
static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

typedef struct {
    const char *flag;
    uint32_t *dst; /* NULL for --seed and --threads, handled apart */
} num_flag;

int loom_cmd_mkmodel(int argc, char **argv) {
    const char *out = NULL, *arch = NULL, *quant = NULL;
    uint32_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, ctx = 0;
    uint64_t seed = 1, threads = 0;
    bool have_seed = false;
    const num_flag nums[] = {
        {"--layers", &layers}, {"--hidden", &hidden}, {"--ffn", &ffn},         {"--heads", &heads},
        {"--kv-heads", &kv_heads}, {"--head-dim", &head_dim}, {"--vocab", &vocab}, {"--ctx", &ctx},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        /* every other option takes a value: "--flag VALUE" or "--flag=VALUE" */
        char flag[64];
        const char *val = NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq != NULL && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", a);
            if (i + 1 < argc) val = argv[++i];
        }
        bool known = !strcmp(flag, "-o") || !strcmp(flag, "--output") || !strcmp(flag, "--arch") ||
                     !strcmp(flag, "--quant") || !strcmp(flag, "--seed") || !strcmp(flag, "--threads");
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) known = known || !strcmp(flag, nums[k].flag);
        if (!known) {
            fprintf(stderr, "loom mkmodel: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (val == NULL) {
            fprintf(stderr, "loom mkmodel: option '%s' needs a value\n", flag);
            usage(stderr);
            return 2;
        }
        if (!strcmp(flag, "-o") || !strcmp(flag, "--output")) {
            out = val;
        } else if (!strcmp(flag, "--arch")) {
            arch = val;
        } else if (!strcmp(flag, "--quant")) {
            quant = val;
        } else if (!strcmp(flag, "--seed")) {
            if (!parse_u64(val, 0, UINT64_MAX, &seed)) {
                fprintf(stderr, "loom mkmodel: --seed '%s': not an unsigned integer\n", val);
                return 2;
            }
            have_seed = true;
        } else if (!strcmp(flag, "--threads")) {
            if (!parse_u64(val, 1, 1024, &threads)) {
                fprintf(stderr, "loom mkmodel: --threads '%s': must be 1..1024\n", val);
                return 2;
            }
        } else {
            for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
                uint64_t v;
                if (strcmp(flag, nums[k].flag) != 0) continue;
                if (!parse_u64(val, 1, UINT32_MAX, &v)) {
                    fprintf(stderr, "loom mkmodel: %s '%s': must be a positive integer\n", flag, val);
                    return 2;
                }
                *nums[k].dst = (uint32_t)v;
            }
        }
    }
    if (out == NULL || arch == NULL || quant == NULL) {
        fprintf(stderr, "loom mkmodel: %s is required\n", out == NULL ? "-o OUT.gguf" : arch == NULL ? "--arch" : "--quant");
        usage(stderr);
        return 2;
    }

    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, arch);
    c.quant = quant;
    if (layers) c.n_layer = layers;
    if (hidden) c.n_embd = hidden;
    if (ffn) c.n_ff = ffn;
    if (heads) c.n_head = heads;
    if (kv_heads) c.n_head_kv = kv_heads;
    if (vocab) c.n_vocab = vocab;
    if (ctx) c.n_ctx = ctx;
    if (have_seed) c.seed = seed;
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
