/* cmd_run.c: `loom run`, generation from token ids (or text) on a backend.
 *
 * The prompt runs as one prefill step (chunked by the graph's largest T), then one decode step
 * per generated token. With --tokens, stdout gets exactly one line: the generated ids,
 * space-separated, so scripts can compare runs; with -p TEXT the prompt is tokenized with the
 * model's tokenizer and the generated text is streamed as it completes (UTF-8-safe), stopping at
 * end of generation. Statistics and speed go to stderr. `--logits FILE` writes the logits
 * of every prompt position as raw little-endian float32, row-major [n_prompt][n_vocab], through
 * FILE.tmp renamed over FILE, so a failed run never leaves a partial file.
 * Exit codes: 0 success, 1 runtime error, 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/loom_impl.h"
#include "loaders/tokenizer.h"
#include "loom.h"
#include "passes/passes.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom run MODEL.gguf|GRAPH.pb (--tokens ID,ID,... | -p TEXT) [options]\n"
            "\n"
            "Evaluates the prompt (one prefill step), then generates tokens one decode step at a\n"
            "time. With --tokens it prints the generated ids on stdout, space-separated on one\n"
            "line; with -p it streams the generated text and stops at end of generation (EOS).\n"
            "Statistics and speed go to stderr.\n"
            "\n"
            "  --tokens LIST       prompt token ids, comma-separated (at least one)\n"
            "  -p, --prompt TEXT   prompt text, tokenized with the model's tokenizer (BOS added\n"
            "                      when the model asks for it)\n"
            "  -n N                tokens to generate (default 16; 0: only evaluate the prompt)\n"
            "  --backend NAME      cpu (default) or cuda (fails at once without a usable GPU)\n"
            "  --streams N         streams for independent branches (default 1: serial)\n"
            "  --weights MODE      cuda: auto (default), copy (device memory), mapped (host)\n"
            "  --cuda-graphs 0|1   cuda: capture decode steps as CUDA graphs (default 1, or\n"
            "                      LOOM_CUDA_GRAPHS=0)\n"
            "  --temp T            sampling temperature (default 0: greedy)\n"
            "  --top-k K           keep the K most likely tokens (default 0: all)\n"
            "  --top-p P           nucleus sampling threshold (default 1: off)\n"
            "  --seed S            sampler seed (default 0); the same seed gives the same tokens\n"
            "  --logits FILE       write the prompt's logits: raw LE float32 [n_prompt][n_vocab]\n"
            "  -m GGUF             the GGUF of a .pb graph (default: the source file the graph\n"
            "                      names, next to it; also the vocabulary for -p)\n"
            "  --ctx N             context length (GGUF: default prompt + n; .pb: the graph's)\n"
            "  --threads N         CPU threads (default: online cores)\n"
            "  --kv f32|f16|int8   KV cache type (a GGUF's graph; int8: cuda only; default f32)\n"
            "  --passes LIST       optimize a GGUF's graph: pass names or -O0/-O2 (default -O2)\n"
            "  -O0, -O2            the same as --passes -O0 / -O2\n"
            "  -h, --help          this help\n");
}

/* A protobuf graph rather than a GGUF (by magic). */
static bool is_pb_path(const char *path) {
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    size_t n = f ? fread(magic, 1, 4, f) : 0;
    if (f) fclose(f);
    return !(n == 4 && !memcmp(magic, "GGUF", 4));
}

static int write_logits(const char *path, const float *x, size_t n) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "loom run: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    /* float32 in host order; every platform loom builds on is little-endian. */
    bool ok = fwrite(x, sizeof *x, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "loom run: writing %s failed: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    return 0;
}

int loom_cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *tokens = NULL, *logits_path = NULL, *gguf = NULL, *text = NULL;
    const char *backend = "cpu", *passes = "-O2";
    long streams = 1, graphs = -1;
    const char *weights = "auto";
    long n_gen = 16, ctx = 0, threads = 0, top_k = 0;
    unsigned long long seed = 0;
    float temp = 0.0f, top_p = 1.0f;
    const char *kv = "f32"; /* --kv, turned into kv_f16 / kv_int8 below */
    const loom_cli_opt opts[] = {
        {"--tokens", LOOM_CLI_STRING, &tokens, 0, 0, NULL},
        {"-p|--prompt", LOOM_CLI_STRING, &text, 0, 0, NULL},
        {"-n", LOOM_CLI_LONG, &n_gen, 0, 1 << 24, NULL},
        {"--backend", LOOM_CLI_STRING, &backend, 0, 0, NULL},
        {"--temp", LOOM_CLI_FLOAT, &temp, 0, 0, NULL},
        {"--top-k", LOOM_CLI_LONG, &top_k, 0, INT32_MAX, NULL},
        {"--top-p", LOOM_CLI_FLOAT_POS, &top_p, 0, 0, NULL},
        {"--seed", LOOM_CLI_U64, &seed, 0, 0, NULL},
        {"--logits", LOOM_CLI_STRING, &logits_path, 0, 0, NULL},
        {"-m", LOOM_CLI_STRING, &gguf, 0, 0, NULL},
        {"--ctx", LOOM_CLI_LONG, &ctx, 1, INT32_MAX, NULL},
        {"--passes", LOOM_CLI_STRING, &passes, 0, 0, NULL},
        {"-O0|-O2", LOOM_CLI_SELF, &passes, 0, 0, NULL},
        {"--kv", LOOM_CLI_CHOICE, &kv, 0, 0, "f32|f16|int8"},
        {"--streams", LOOM_CLI_LONG, &streams, 1, 16, NULL},
        {"--cuda-graphs", LOOM_CLI_LONG, &graphs, 0, 1, NULL},
        {"--weights", LOOM_CLI_CHOICE, &weights, 0, 0, "auto|copy|mapped"},
        {"--threads", LOOM_CLI_LONG, &threads, 1, 1024, NULL},
    };
    int pr = loom_cli_parse_opts("loom run", argc, argv, opts, sizeof opts / sizeof opts[0], usage,
                                 "model", &model_path);
    if (pr != LOOM_CLI_GO_ON) return pr;
    bool kv_f16 = !strcmp(kv, "f16"), kv_int8 = !strcmp(kv, "int8");
    if (!model_path || !tokens == !text) {
        fprintf(stderr, "loom run: %s\n",
                !model_path ? "no model given" : "give exactly one of --tokens and -p");
        usage(stderr);
        return 2;
    }
    {
        loom_error perr = {0};
        loom_pass_manager *pm = NULL;
        if (loom_pass_manager_create(passes, NULL, &pm, &perr)) {
            fprintf(stderr, "loom run: %s\n", perr.msg);
            return 2;
        }
        loom_pass_manager_destroy(pm);
    }
    int32_t *prompt = NULL, n_prompt = 0;
    if (tokens && !loom_cli_parse_ids(tokens, &prompt, &n_prompt)) {
        fprintf(stderr, "loom run: --tokens '%s' is not a comma-separated list of ids\n", tokens);
        return 2;
    }
    loom_backend_kind kind;
    if (!strcmp(backend, "cpu")) {
        kind = LOOM_BACKEND_CPU;
    } else if (!strcmp(backend, "cuda")) {
        kind = LOOM_BACKEND_CUDA;
    } else {
        fprintf(stderr, "loom run: unknown backend '%s' (known: cpu, cuda)\n", backend);
        free(prompt);
        return 2;
    }
    if (kv_int8 && kind != LOOM_BACKEND_CUDA) {
        fprintf(stderr, "loom run: --kv int8 needs --backend cuda\n");
        free(prompt);
        return 2;
    }
    {
        /* Fail at once (before loading anything) when the backend cannot run here. */
        loom_error berr = {0};
        if (loom_backend_available(kind, &berr)) {
            fprintf(stderr, "loom run: %s\n", berr.msg);
            free(prompt);
            return 1;
        }
    }

    int rc = 1;
    loom_error err = {0};
    loom_model *m = NULL;
    loom_session *s = NULL;
    loom_sampler *sampler = NULL;
    int32_t *out = NULL, n_out = 0;
    loom_tokenizer *tok = NULL;
    loom_detok *detok = NULL;
    loom_model_options mo;
    loom_model_options_init(&mo);
    mo.gguf_path = gguf;
    mo.passes = passes;
    mo.cache_type = kv_f16 ? LOOM_CACHE_F16 : LOOM_CACHE_F32;
    /* Only --logits needs every prompt row; otherwise skip their output projections. */
    mo.last_logits_only = logits_path == NULL;
    double t0 = loom_cli_now_s();
    loom_gguf *g = NULL; /* a GGUF opened for its tokenizer, handed to the model after */
    if (text) {
        /* Tokenize first (the GGUF has the vocabulary), to size a GGUF's context. A .pb graph
         * keeps its own context: load it first and take the vocabulary from its GGUF (-m, or
         * the source file the graph names), so no file is opened twice. */
        loom_token *ids = NULL;
        size_t n_ids = 0;
        const loom_gguf *vocab = NULL;
        if (is_pb_path(model_path)) {
            if (loom_model_load(model_path, &mo, &m, &err)) goto fail;
            vocab = loom_model_gguf(m);
        } else {
            if (loom_gguf_open(model_path, &g, &err)) goto fail;
            vocab = g;
        }
        if (loom_tokenizer_create(vocab, &tok, &err) ||
            loom_tokenizer_encode(tok, text, strlen(text), loom_tokenizer_add_bos(tok), true,
                                  &ids, &n_ids, &err))
            goto fail;
        prompt = malloc((n_ids ? n_ids : 1) * sizeof *prompt);
        if (!prompt) {
            free(ids);
            loom_error_set(&err, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < n_ids; i++) prompt[i] = ids[i];
        n_prompt = (int32_t)n_ids;
        free(ids);
        if (loom_detok_create(tok, 0, &detok, &err)) goto fail;
    }
    /* A GGUF is lowered for just the context this run needs (small KV cache). */
    mo.n_ctx = ctx ? (int32_t)ctx : (int32_t)(n_prompt + n_gen > 0 ? n_prompt + n_gen : 1);
    if (!m) {
        loom_gguf *own = g;
        g = NULL; /* the model owns it now, also when loading fails */
        if (own ? loom_model_load_gguf(own, model_path, &mo, &m, &err)
                : loom_model_load(model_path, &mo, &m, &err))
            goto fail;
    }
    loom_session_options so;
    loom_session_options_init(&so);
    so.backend = kind;
    so.n_threads = (int32_t)threads;
    so.n_streams = (int32_t)streams;
    so.cuda_graphs = (int32_t)graphs;
    so.kv = kv_int8 ? LOOM_SESSION_KV_INT8 : LOOM_SESSION_KV_AS_MODEL;
    so.weights = !strcmp(weights, "copy")     ? LOOM_SESSION_WEIGHTS_COPY
                 : !strcmp(weights, "mapped") ? LOOM_SESSION_WEIGHTS_MAPPED
                                              : LOOM_SESSION_WEIGHTS_AUTO;
    loom_cli_progress prog = LOOM_CLI_PROGRESS_INIT("loom run");
    so.progress = loom_cli_load_progress;
    so.progress_ctx = &prog;
    if (loom_session_create(m, &so, &s, &err)) goto fail;
    loom_cli_progress_end(&prog);
    loom_sampler_options sp;
    loom_sampler_options_init(&sp);
    sp.temperature = temp;
    sp.top_k = (int32_t)top_k;
    sp.top_p = top_p;
    sp.seed = seed;
    if (loom_sampler_create(&sp, &sampler, &err)) goto fail;
    double t_load = loom_cli_now_s() - t0;

    /* Prefill, then decode, timed apart. */
    t0 = loom_cli_now_s();
    if (loom_session_eval(s, prompt, n_prompt, &err)) goto fail;
    double t_prefill = loom_cli_now_s() - t0;
    int32_t V = loom_model_n_vocab(m);
    if (logits_path) {
        int32_t rows = 0;
        const float *l = loom_session_logits(s, &rows);
        if (rows != n_prompt) {
            loom_error_set(&err, LOOM_ERR_UNSUPPORTED,
                           "--logits needs every prompt row, but %s computes the last token's "
                           "logits only (compiled with --last-logits)",
                           model_path);
            goto fail;
        }
        if (write_logits(logits_path, l, (size_t)n_prompt * (size_t)V)) goto done;
    }
    out = malloc(((size_t)n_gen + 1) * sizeof *out);
    if (!out) {
        loom_error_set(&err, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    t0 = loom_cli_now_s();
    for (long i = 0; i < n_gen; i++) {
        int32_t rows;
        const float *l = loom_session_logits(s, &rows);
        int32_t t = loom_sampler_sample(sampler, l + (size_t)(rows - 1) * V, V);
        if (detok) {
            /* Text mode: stop at end of generation; stream each completed piece. */
            if (loom_tokenizer_is_eog(tok, t)) break;
            const char *piece;
            size_t len;
            if (loom_detok_feed(detok, t, &piece, &len, &err)) goto fail;
            fwrite(piece, 1, len, stdout);
            fflush(stdout);
        }
        out[n_out++] = t;
        if (i + 1 < n_gen && loom_session_eval(s, &out[n_out - 1], 1, &err)) goto fail;
    }
    double t_decode = loom_cli_now_s() - t0;
    if (detok) {
        const char *piece;
        size_t len;
        loom_detok_flush(detok, &piece, &len);
        fwrite(piece, 1, len, stdout);
    } else {
        for (int32_t i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
    }
    printf("\n");
    fflush(stdout);
    loom_exec_stats es;
    loom_session_exec_stats(s, &es);
    fprintf(stderr,
            "loom run: memory: weights %.1f MiB (mapped), KV cache %.1f MiB (%d positions), "
            "activations %.1f MiB in %u buffers (%.1f MiB without reuse)\n",
            es.weight_bytes / 1048576.0, es.state_bytes / 1048576.0, loom_model_n_ctx(m),
            es.activation_bytes / 1048576.0, es.n_buffers, es.activation_sum / 1048576.0);
    fprintf(stderr,
            "loom run: %s (%s, vocab %d), backend %s, load %.1f ms\n"
            "loom run: prompt %d tokens in %.1f ms (%.1f tokens/s)\n"
            "loom run: generated %d tokens in %.1f ms (%.1f tokens/s)\n",
            model_path, loom_model_arch(m), V, backend, 1e3 * t_load, n_prompt,
            1e3 * t_prefill, n_prompt / (t_prefill > 0 ? t_prefill : 1e-9), n_out,
            1e3 * t_decode, n_out > 1 ? (n_out - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
    loom_cuda_backend_info ci;
    if (loom_session_cuda_info(s, &ci))
        fprintf(stderr,
                "loom run: cuda device %d (cc %d.%d, %d SMs%s): weights %.1f MiB %s, KV %s, "
                "%u stream(s), graphs %s (%llu instantiated, %llu updated, %llu launched), "
                "%llu host-fallback nodes, %.0f MiB free of %.0f MiB\n",
                ci.device, ci.cc_major, ci.cc_minor, ci.sm_count,
                ci.integrated ? ", integrated" : "", ci.weight_bytes / 1048576.0,
                ci.weights_mapped ? "mapped" : "copied", ci.kv_int8 ? "int8" : "as the model",
                es.n_streams, ci.graphs ? "on" : "off",
                (unsigned long long)ci.graph_instantiations, (unsigned long long)ci.graph_updates,
                (unsigned long long)ci.graph_launches, (unsigned long long)ci.host_fallback_nodes,
                ci.free_bytes / 1048576.0, ci.total_bytes / 1048576.0);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "loom run: %s\n", err.msg);
done:
    loom_gguf_close(g);
    loom_detok_destroy(detok);
    loom_tokenizer_destroy(tok);
    free(out);
    free(prompt);
    loom_sampler_destroy(sampler);
    loom_session_destroy(s);
    loom_model_destroy(m);
    return rc;
}
