/* cmd_bench.c: `loom bench`, prefill and decode throughput in the style of llama-bench, plus
 * the bandwidth roofline of decode.
 *
 * Tests: pp<P> evaluates a P-token prompt as one prefill (chunks of the model's max step) from
 * an empty cache; tg<N> evaluates N single-token decode steps after a P-token prompt (the
 * prompt untimed). Each is repeated -r times after one warm-up; t/s is the mean over
 * repetitions, ± the sample standard deviation. Token ids are fixed pseudo-random ids (a seeded
 * LCG), so runs are comparable. Timing is wall clock around loom_session_eval, which waits for
 * the device and downloads the last logits row (as a generating program would).
 *
 * Roofline (decode): bytes per token = every weight byte a decode step reads (all weights,
 * except the embedding table, of which one row) + the KV cache bytes read at the mean context
 * of the timed steps. Bandwidth = bytes per token / time per token. The copy bandwidth of the
 * memory the weights are read from is measured after the timed runs (read + write counted: with
 * --backend cuda a 1 GiB device-to-device copy, on the CPU a 512 MiB copy by the kernel threads)
 * and the roofline time is bytes / that bandwidth; the achieved fraction is roofline / measured
 * time. Where the probe fails (memory), the roofline figures are left out (0 in --json).
 * Exit codes: 0 success, 1 runtime error, 2 usage error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/loom_impl.h"
#include "executor/cuda_backend.h"
#include "ir/ir.h"
#include "loom.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom bench MODEL.gguf [-p 512] [-n 128] [-r 3] [--backend cpu|cuda]\n"
            "                  [--streams N] [--kv f32|f16|int8] [--threads N] [--passes LIST]\n"
            "                  [--ctx N] [--json]\n"
            "\n"
            "Prefill (pp) and decode (tg) throughput, llama-bench style, and the decode roofline.\n"
            "  -p N            prompt tokens (default 512; 0 skips pp)\n"
            "  -n N            decode tokens after the prompt (default 128; 0 skips tg)\n"
            "  -r N            repetitions (default 3)\n"
            "  --backend B     cpu (default) or cuda\n"
            "  --streams N     CUDA streams (default 1)\n"
            "  --kv T          KV cache: f32, f16 (default) or int8 (cuda)\n"
            "  --threads N     CPU threads (default 0: one per online core)\n"
            "  --passes LIST   GGUF models: the pass pipeline (names or -O0/-O2; default -O2),\n"
            "                  e.g. -O2 less one pass to measure that fusion in the same run\n"
            "  --ctx N         context length of the graph and the KV cache (default 0: p + n + 1,\n"
            "                  the least the run needs; `loom run` takes the model's, capped at 4096)\n"
            "  --json          one JSON object on stdout\n");
}

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(v / (n - 1)) : 0;
}

/* Weight bytes one decode step reads, and the model's parameter count. */
static void weight_figures(const loom_ir_graph *g, uint64_t *bytes_tok, uint64_t *total,
                           uint64_t *params) {
    *bytes_tok = *total = *params = 0;
    for (uint32_t i = 0; i < loom_ir_weight_count(g); i++) {
        loom_ir_value_id v = loom_ir_weight_at(g, i);
        const loom_ir_value *w = loom_ir_value_get(g, v);
        int64_t numel = loom_ir_type_numel(g, &w->type, NULL);
        *params += (uint64_t)numel;
        *total += w->size;
        bool only_rows = loom_ir_value_use_count(g, v) > 0;
        for (uint32_t u = 0; u < loom_ir_value_use_count(g, v); u++) {
            loom_ir_use use = loom_ir_value_use_at(g, v, u);
            if (loom_ir_node_get(g, use.node)->op != LOOM_IR_OP_GET_ROWS || use.slot != 0)
                only_rows = false;
        }
        int64_t rows = w->type.rank ? numel / w->type.dims[w->type.rank - 1] : 1;
        *bytes_tok += only_rows && rows ? w->size / (uint64_t)rows : w->size;
    }
}

/* KV bytes read per token per position of context (K and V of every layer). */
static uint64_t kv_bytes_per_pos(const loom_ir_graph *g, bool int8) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < loom_ir_state_count(g); i++) {
        const loom_ir_value *s = loom_ir_value_get(g, loom_ir_state_at(g, i));
        int64_t numel = loom_ir_type_numel(g, &s->type, NULL);
        int64_t row = s->type.dims[0] ? numel / s->type.dims[0] : 0;
        int64_t d = s->type.dims[s->type.rank - 1];
        b += int8 ? (uint64_t)row + (uint64_t)(row / d) * 4
                  : (uint64_t)row * (s->type.dtype == LOOM_IR_F16 ? 2 : 4);
    }
    return b;
}

int loom_cmd_bench(int argc, char **argv) {
    const char *model = NULL, *kv = "f16", *backend = "cpu", *passes = "-O2";
    int32_t P = 512, N = 128, R = 3, streams = 1, threads = 0, ctx = 0;
    bool json = false;
    const loom_cli_opt opts[] = {
        {"-p", LOOM_CLI_INT, &P, 0, 1 << 20, NULL},
        {"-n", LOOM_CLI_INT, &N, 0, 1 << 20, NULL},
        {"-r", LOOM_CLI_INT, &R, 1, 1000, NULL},
        {"--streams", LOOM_CLI_INT, &streams, 1, 16, NULL},
        {"--threads", LOOM_CLI_INT, &threads, 0, 1024, NULL},
        {"--backend", LOOM_CLI_CHOICE, &backend, 0, 0, "cpu|cuda"},
        {"--kv", LOOM_CLI_CHOICE, &kv, 0, 0, "f32|f16|int8"},
        {"--json", LOOM_CLI_FLAG, &json, 0, 0, NULL},
        {"--passes", LOOM_CLI_STRING, &passes, 0, 0, NULL},
        {"--ctx", LOOM_CLI_INT, &ctx, 0, 1 << 21, NULL},
    };
    int pr = loom_cli_parse_opts("loom bench", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "model", &model);
    if (pr != LOOM_CLI_GO_ON) return pr;
    bool cuda = !strcmp(backend, "cuda");
    if (!model) {
        fprintf(stderr, "loom bench: no model given\n");
        usage(stderr);
        return 2;
    }
    if (!strcmp(kv, "int8") && !cuda) {
        fprintf(stderr, "loom bench: --kv int8 needs --backend cuda\n");
        return 2;
    }
    if (P + N < 1) {
        fprintf(stderr, "loom bench: nothing to run (-p 0 -n 0)\n");
        return 2;
    }
    if (ctx != 0 && ctx < P + N + 1) {
        fprintf(stderr, "loom bench: --ctx %d is below the %d positions the run needs (-p %d + -n %d + 1)\n",
                ctx, P + N + 1, P, N);
        return 2;
    }
    loom_error err = {0};
    loom_model_options mo;
    loom_model_options_init(&mo);
    mo.n_ctx = ctx ? ctx : P + N + 1;
    mo.max_tokens = P > 0 && P < 512 ? P : 512;
    mo.cache_type = !strcmp(kv, "f32") ? LOOM_CACHE_F32 : LOOM_CACHE_F16;
    mo.last_logits_only = true;
    mo.passes = passes;
    loom_model *m = NULL;
    loom_session *s = NULL;
    int rc = 1;
    double *pp = calloc((size_t)R, sizeof *pp), *tg = calloc((size_t)R, sizeof *tg);
    int32_t *toks = malloc((size_t)(P + N + 1) * sizeof *toks);
    if (!pp || !tg || !toks) {
        fprintf(stderr, "loom bench: out of memory\n");
        goto done;
    }
    if (loom_model_load(model, &mo, &m, &err)) goto fail;
    loom_session_options so;
    loom_session_options_init(&so);
    so.backend = cuda ? LOOM_BACKEND_CUDA : LOOM_BACKEND_CPU;
    so.n_streams = streams;
    so.n_threads = threads;
    so.kv = !strcmp(kv, "int8") ? LOOM_SESSION_KV_INT8 : LOOM_SESSION_KV_AS_MODEL;
    loom_cli_progress prog = LOOM_CLI_PROGRESS_INIT("loom bench");
    so.progress = loom_cli_load_progress;
    so.progress_ctx = &prog;
    if (loom_session_create(m, &so, &s, &err)) goto fail;
    loom_cli_progress_end(&prog);
    loom_cli_bench_tokens(toks, P + N + 1, loom_model_n_vocab(m));
    /* Warm-up (allocations, first graph capture), then the timed repetitions. */
    if (loom_session_eval(s, toks, P > 0 ? (P < 16 ? P : 16) : 1, &err)) goto fail;
    if (loom_session_eval(s, toks + P, 1, &err)) goto fail;
    for (int r = 0; r < R && P > 0; r++) {
        loom_session_reset(s);
        double t0 = loom_cli_now_s();
        if (loom_session_eval(s, toks, P, &err)) goto fail;
        pp[r] = P / (loom_cli_now_s() - t0);
    }
    for (int r = 0; r < R && N > 0; r++) {
        loom_session_reset(s);
        if (P > 0 && loom_session_eval(s, toks, P, &err)) goto fail;
        double t0 = loom_cli_now_s();
        for (int32_t i = 0; i < N; i++)
            if (loom_session_eval(s, toks + P + i, 1, &err)) goto fail;
        tg[r] = N / (loom_cli_now_s() - t0);
    }
    const loom_ir_graph *g = loom_model_graph(m);
    uint64_t wtok, wtotal, params;
    weight_figures(g, &wtok, &wtotal, &params);
    uint64_t kvtok = kv_bytes_per_pos(g, !strcmp(kv, "int8")) * (uint64_t)(P + (N + 1) / 2);
    double copy_gbs = 0;
    if (N > 0) loom_session_copy_bandwidth(s, &copy_gbs, NULL);
    double ppm = 0, pps = 0, tgm = 0, tgs = 0;
    if (P > 0) mean_sd(pp, R, &ppm, &pps);
    if (N > 0) mean_sd(tg, R, &tgm, &tgs);
    double ms_tok = tgm > 0 ? 1000.0 / tgm : 0;
    double bytes_tok = (double)(wtok + kvtok);
    double bw = ms_tok > 0 ? bytes_tok / (ms_tok * 1e-3) / 1e9 : 0;
    double roof_ms = copy_gbs > 0 ? bytes_tok / (copy_gbs * 1e9) * 1e3 : 0;
    double frac = roof_ms > 0 && ms_tok > 0 ? roof_ms / ms_tok : 0;
    const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    const char *be = cuda ? "cuda" : "cpu";
    if (json) {
        /* The file name and the GGUF's arch string are the user's: escaped. */
        printf("{\"model\": ");
        loom_cli_put_json(stdout, base);
        printf(", \"arch\": ");
        loom_cli_put_json(stdout, loom_model_arch(m));
        const loom_ir_meta *pm = loom_ir_meta_get(loom_model_graph(m), "passes");
        printf(", \"passes\": ");
        loom_cli_put_json(stdout, pm && pm->kind == LOOM_IR_META_STRING ? pm->s : "");
        printf(", \"size_bytes\": %llu, \"params\": %llu, "
               "\"backend\": \"%s\", \"streams\": %d, \"kv\": \"%s\", \"n_ctx\": %d, \"reps\": %d, ",
               (unsigned long long)wtotal, (unsigned long long)params, be, streams, kv,
               loom_model_n_ctx(m), R);
        printf("\"pp\": {\"tokens\": %d, \"tps\": %.3f, \"tps_sd\": %.3f}, ", P, ppm, pps);
        printf("\"tg\": {\"tokens\": %d, \"tps\": %.3f, \"tps_sd\": %.3f, \"ms_per_token\": %.4f}, ",
               N, tgm, tgs, ms_tok);
        printf("\"roofline\": {\"weight_bytes_per_token\": %llu, \"kv_bytes_per_token\": %llu, "
               "\"bandwidth_gbs\": %.1f, \"copy_bandwidth_gbs\": %.1f, \"roofline_ms\": %.4f, "
               "\"fraction\": %.4f}}\n",
               (unsigned long long)wtok, (unsigned long long)kvtok, bw, copy_gbs, roof_ms, frac);
    } else {
        printf("| %-28s | %9s | %8s | %-7s | %7s | %20s |\n", "model", "size", "params",
               "backend", "test", "t/s");
        printf("| %-28s | %9s | %8s | %-7s | %7s | %20s |\n", "----------------------------",
               "--------:", "-------:", "-------", "------:", "-------------------:");
        char size[32], par[32], test[32], tps[64];
        if (wtotal >= (1ull << 30))
            snprintf(size, sizeof size, "%.2f GiB", wtotal / 1073741824.0);
        else
            snprintf(size, sizeof size, "%.2f MiB", wtotal / 1048576.0);
        if (params >= 1000000000ull)
            snprintf(par, sizeof par, "%.2f B", params / 1e9);
        else
            snprintf(par, sizeof par, "%.2f M", params / 1e6);
        if (P > 0) {
            snprintf(test, sizeof test, "pp%d", P);
            snprintf(tps, sizeof tps, "%.2f ± %.2f", ppm, pps);
            printf("| %-28s | %9s | %8s | %-7s | %7s | %20s |\n", base, size, par, be, test, tps);
        }
        if (N > 0) {
            snprintf(test, sizeof test, "tg%d", N);
            snprintf(tps, sizeof tps, "%.2f ± %.2f", tgm, tgs);
            printf("| %-28s | %9s | %8s | %-7s | %7s | %20s |\n", base, size, par, be, test, tps);
            printf("\ndecode: %.3f ms/token; reads %.3f GB/token (weights %.3f GB, KV %.4f GB at "
                   "mean context %d) = %.1f GB/s",
                   ms_tok, bytes_tok / 1e9, wtok / 1e9, kvtok / 1e9, P + (N + 1) / 2, bw);
            if (copy_gbs > 0)
                printf("; copy bandwidth %.1f GB/s, roofline %.3f ms/token, achieved %.1f%%",
                       copy_gbs, roof_ms, 100 * frac);
            printf("\n");
        }
    }
    loom_session_stats ss;
    loom_session_get_stats(s, &ss);
    fprintf(stderr, "loom bench: KV cache %.1f MiB, activations %.1f MiB", ss.kv_bytes / 1048576.0,
            ss.activation_bytes / 1048576.0);
    if (cuda)
        fprintf(stderr, "; cuda graphs: %llu instantiated, %llu updated, %llu launched%s",
                (unsigned long long)ss.graph_instantiations, (unsigned long long)ss.graph_updates,
                (unsigned long long)ss.graph_launches,
                ss.graph_launches ? " (decode steps run as graphs)" : "");
    fprintf(stderr, "\n");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "loom bench: %s\n", err.msg);
done:
    loom_session_destroy(s);
    loom_model_destroy(m);
    free(pp);
    free(tg);
    free(toks);
    return rc;
}
