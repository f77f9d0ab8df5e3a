/* e2e_check.c: CUDA backend vs CPU backend, end to end through the C API (a plain C program:
 * the GPU machine has no Criterion). Usage: e2e_check TESTDATA_DIR [--quick]
 *
 * For each model (golden/ x8 and models/stories260K, models/llama-2-tiny-random) and each
 * configuration (KV f32 | f16 | int8) x (1 | 2 streams) x (CUDA graphs on | off):
 *   the sequence S33 runs as a prefill of its first 17 tokens (all rows of logits kept), then
 *   16 decode steps of one token (captured as CUDA graphs when on); every row of logits is
 *   compared with the CPU backend's (F32 cache, same passes) as max |diff| / the CPU row's
 *   range (max - min). Tolerances: f32 cache 2e-3 (CUDA kernels' reduction order), f16 cache
 *   1e-2 (testdata README), int8 cache 5e-2 (ours: per-row absmax/127 rounding of K and V).
 *   With graphs on and off both run (not --quick), the two CUDA runs must agree bit for bit.
 * Then greedy generation of 64 tokens after S7, CPU vs CUDA (f32 cache, 2 streams, graphs on):
 *   same tokens, or the first divergence is reported with the CPU's top-2 logit margin there
 *   (a near-tie when the margin is below the f32 tolerance times the range).
 * Then CUDA-graph replay (issue 7): greedy 64 tokens after S7 on CUDA with graphs on and with
 *   graphs off, KV f16 | int8 x 1 | 2 streams: the logits of every position (prompt's last row
 *   and each of the 63 decode steps) must be bit-identical between the two, and the graphs-on
 *   session must report exactly 1 instantiation, 0 updates and 63 launches (one capture, then
 *   replays without re-capture); graphs off: none.
 * Then the RMSNorm fold (fuse-norm-matmul): on CUDA, -O2 against -O2 without fuse-norm-matmul on
 *   every model (S33 as above; KV f16, 1 stream, graphs on and KV int8, 2 streams, graphs off):
 *   the logits must be bit-identical (the _normed kernels' contract: rms_norm then the plain
 *   matmul, bit for bit, path by path), except where the Q4_K / Q5_K tensor-core kernels apply
 *   the norm's scale to the finished dots (loom_cuda_normed_scale_last): on the models with such
 *   a weight under a folded norm (has_scale_last_normed) within 2e-3 of the logits' range (compare(),
 *   the f32 tolerance of CUDA against the CPU), bit for bit on the others. Then the attention
 *   fold (fuse-rope-kv-attention) alike: -O2 against -O2 without it, bit for bit (loom_cuda_rope_kv_attention_at's contract: the
 *   cache bytes and output bits of rope_kv_write + attention_at; the launcher's fused kernel is
 *   the default, run it once more with LOOM_ATTN_FUSED=0 for its two launches).
 * Then two CUDA sessions of each model on two threads at once (one on 1 stream, one on 2),
 *   S33 as above with KV f16: every thread's logits bit for bit those of one thread alone; with
 *   --concurrent MODEL.gguf also that model with a 512-token prefill and 16 decode steps (the
 *   4B shape: its prefill GEMMs use the kernel library's shared scratch).
 * A table is printed; the exit code is non-zero when any comparison fails.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "loaders/gguf.h"
#include "loom.h"
#include "tests/common/session.h"

static const int32_t S33[] = {298, 187, 393, 179, 503, 10,  132, 216, 221, 44,  282,
                              35,  60,  187, 275, 57,  441, 23,  40,  123, 50,  457,
                              492, 470, 427, 92,  78,  184, 256, 421, 130, 58,  54};
static const int32_t S7[] = {338, 281, 93, 503, 475, 149, 364};
enum { N_CTX = 128, MAX_TOKENS = 32 }; /* every session: S33 and S7 + 64 fit */

typedef struct run {
    float *logits; /* [rows][V] */
    int32_t rows, V;
} run;

static int failures = 0;

/* The options of a CUDA session: `streams` streams, CUDA graphs `graphs` (1 on, 0 off), the KV
 * cache as the model's state dtype or INT8 (kv_int8). */
static loom_session_options cuda_options(int streams, int graphs, bool kv_int8) {
    loom_session_options so;
    loom_session_options_init(&so);
    so.backend = LOOM_BACKEND_CUDA;
    so.n_streams = streams;
    so.cuda_graphs = graphs;
    so.kv = kv_int8 ? LOOM_SESSION_KV_INT8 : LOOM_SESSION_KV_AS_MODEL;
    return so;
}

/* -O2 less one fold each (passes/passes.h's LOOM_PASS_PIPELINE_O2 without it): CUDA -O2 must
 * give the same bits (the kernels' contracts; the norm fold of scale-last kernels: kFoldTol). */
static const struct {
    const char *title, *pipeline;
} folds[] = {
    {"norm fold (-O2 vs unfolded)",
     "fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"
     "fuse-rope-kv-attention,cse,dce"},
    {"attention fold (-O2 vs unfolded)",
     "fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"
     "fuse-norm-matmul,cse,dce"},
};

/* Runs prefill of n_pre tokens then decode of the rest with pass pipeline passes (NULL: -O2)
 * in a session of n_ctx positions and steps of max_tokens; keeps every row. */
static int run_model_at(const char *path, const char *passes, int32_t n_ctx, int32_t max_tokens,
                        loom_cache_type cache, const loom_session_options *so,
                        const int32_t *toks, int32_t n, int32_t n_pre, run *out, char *why,
                        size_t why_len) {
    loom_test_session t;
    loom_error err = {0};
    memset(out, 0, sizeof *out);
    if (loom_test_session_open_passes(path, passes, n_ctx, max_tokens, cache, so, &t, &err)) {
        snprintf(why, why_len, "%s", err.msg);
        return 1;
    }
    loom_session *s = t.session;
    int32_t V = loom_model_n_vocab(t.model);
    out->V = V;
    out->logits = malloc((size_t)n * V * sizeof(float));
    int rc = 0;
    if (!out->logits) {
        snprintf(why, why_len, "out of memory for %d x %d logits", (int)n, (int)V);
        rc = 1;
    }
    for (int32_t done = 0; done < n && !rc;) {
        int32_t step = done == 0 ? n_pre : 1;
        int32_t rows = 0;
        if (loom_session_eval(s, toks + done, step, &err)) {
            snprintf(why, why_len, "%s", err.msg);
            rc = 1;
            break;
        }
        const float *l = loom_session_logits(s, &rows);
        memcpy(out->logits + (size_t)done * V, l, (size_t)rows * V * sizeof(float));
        done += step;
        out->rows = done;
    }
    loom_test_session_close(&t);
    return rc;
}

/* How many of the n floats of a and b differ in their bits. */
static size_t floats_differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

/* run_model_at in the sessions of every other section (N_CTX, MAX_TOKENS). */
static int run_model(const char *path, const char *passes, loom_cache_type cache,
                     const loom_session_options *so, const int32_t *toks, int32_t n,
                     int32_t n_pre, run *out, char *why, size_t why_len) {
    return run_model_at(path, passes, N_CTX, MAX_TOKENS, cache, so, toks, n, n_pre, out, why,
                        why_len);
}

/* One thread's run of the concurrency section. */
typedef struct job {
    const char *path;
    int32_t n_ctx, max_tokens;
    loom_session_options so;
    const int32_t *toks;
    int32_t n, n_pre;
    run out;
    int rc;
    char why[600];
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->rc = run_model_at(j->path, NULL, j->n_ctx, j->max_tokens, LOOM_CACHE_F16, &j->so, j->toks,
                         j->n, j->n_pre, &j->out, j->why, sizeof j->why);
    return NULL;
}

/* Two CUDA sessions of one model on two threads at once (loom.h: one session per thread is
 * safe; the kernel library's scratch and split counters are shared, so CUDA steps take turns):
 * each thread's logits must equal one thread's run alone, bit for bit. Prints a row; returns 1
 * on failure. */
static int concurrent_check(const char *label, const char *path, int32_t n_ctx,
                            int32_t max_tokens, const int32_t *toks, int32_t n, int32_t n_pre) {
    job ref = {path, n_ctx, max_tokens, cuda_options(1, 1, false), toks, n, n_pre, {0}, 0, ""};
    job jobs[2] = {ref, ref};
    jobs[1].so = cuda_options(2, 1, false); /* the other thread on two streams */
    run_job(&ref);
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2 && !ref.rc; i++)
        if (pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0) started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    size_t nf = (size_t)ref.out.rows * ref.out.V, diff = 0;
    bool ok = !ref.rc && started == 2;
    for (int i = 0; i < 2 && ok; i++) {
        ok = !jobs[i].rc && jobs[i].out.rows == ref.out.rows;
        if (ok) diff += floats_differ(jobs[i].out.logits, ref.out.logits, nf);
    }
    ok = ok && diff == 0;
    const char *why = ref.rc ? ref.why : jobs[0].rc ? jobs[0].why : jobs[1].rc ? jobs[1].why
                      : started < 2 ? "pthread_create failed" : "";
    printf("%-34s %s: %zu of %zu floats differ%s%s\n", label, ok ? "ok" : "FAIL", diff, 2 * nf,
           *why ? ": " : "", why);
    free(ref.out.logits);
    free(jobs[0].out.logits);
    free(jobs[1].out.logits);
    return ok ? 0 : 1;
}

/* Whether the model has a Q4_K or Q5_K weight (the types of gemv_mma.cu's tensor-core kernels)
 * among those whose matmul fuse-norm-matmul gives the layer's RMSNorm (the triple's Q, K, V and
 * the pair's gate, up): only those outputs take the norm's scale last
 * (loom_cuda_normed_scale_last), so only their models may differ from the unfolded graph. -1
 * when the file cannot be read. */
static int has_scale_last_normed(const char *path) {
    static const char *const names[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight",
                                        ".ffn_gate.weight", ".ffn_up.weight"};
    loom_gguf *g = NULL;
    loom_error err = {0};
    if (loom_gguf_open(path, &g, &err)) return -1;
    int found = 0;
    for (size_t i = 0; i < loom_gguf_n_tensors(g) && !found; i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        for (size_t k = 0; k < sizeof names / sizeof *names && !found; k++)
            found = (t->type == LOOM_GGML_Q4_K || t->type == LOOM_GGML_Q5_K) &&
                    strncmp(t->name, "blk.", 4) == 0 &&
                    strstr(t->name, names[k]) != NULL;
    }
    loom_gguf_close(g);
    return found;
}

static double compare(const run *ref, const run *got) {
    double worst = 0;
    for (int32_t r = 0; r < ref->rows && r < got->rows; r++) {
        const float *a = ref->logits + (size_t)r * ref->V, *b = got->logits + (size_t)r * ref->V;
        float lo = a[0], hi = a[0];
        double md = 0;
        for (int32_t i = 0; i < ref->V; i++) {
            if (a[i] < lo) lo = a[i];
            if (a[i] > hi) hi = a[i];
            double d = fabs((double)a[i] - b[i]);
            if (!(d <= md)) md = d; /* NaN counts as worst */
        }
        double rel = hi > lo ? md / (hi - lo) : md;
        if (!(rel <= worst)) worst = rel;
    }
    return worst;
}

/* Greedy generation of n tokens after S7 (the prompt, then a decode step of each picked token
 * but the last), the one loop of the greedy and the graph-replay checks. Outputs, each optional
 * (NULL: not kept): tokens[n] the picks; margins[n] the top-2 logit gap at each pick; *logits
 * the logits row of every position that picks, [n][V] (malloc'd, the caller frees; *V_out gets
 * V); *stats the session's statistics at the end. Returns 0, or 1 with the reason in why. */
static int greedy_after_s7(const char *path, loom_cache_type cache, const loom_session_options *so,
                           int32_t n, int32_t *tokens, float *margins, float **logits,
                           int32_t *V_out, loom_session_stats *stats, char *why, size_t why_len) {
    loom_test_session t;
    loom_error err = {0};
    int rc = 0;
    if (logits) *logits = NULL;
    if (loom_test_session_open(path, N_CTX, MAX_TOKENS, cache, so, &t, &err) ||
        loom_session_eval(t.session, S7, 7, &err)) {
        snprintf(why, why_len, "%s", err.msg);
        rc = 1;
        goto done;
    }
    loom_session *s = t.session;
    int32_t V = loom_model_n_vocab(t.model);
    if (V_out) *V_out = V;
    if (logits && !(*logits = malloc((size_t)n * V * sizeof(float)))) {
        snprintf(why, why_len, "out of memory for %d x %d logits", (int)n, (int)V);
        rc = 1;
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t rows;
        const float *l = loom_session_logits(s, &rows) + (size_t)(rows - 1) * V;
        if (logits) memcpy(*logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        int32_t best = 0, second = -1; /* best: the first maximum */
        for (int32_t v = 1; v < V; v++) {
            if (l[v] > l[best]) {
                second = best;
                best = v;
            } else if (second < 0 || l[v] > l[second]) {
                second = v;
            }
        }
        if (tokens) tokens[i] = best;
        if (margins) margins[i] = second >= 0 ? l[best] - l[second] : 0;
        if (i + 1 < n && loom_session_eval(s, &best, 1, &err)) {
            snprintf(why, why_len, "%s", err.msg);
            rc = 1;
            break;
        }
    }
    if (stats) loom_session_get_stats(s, stats);
done:
    loom_test_session_close(&t);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: e2e_check TESTDATA_DIR [--quick] [--concurrent MODEL.gguf]\n");
        return 2;
    }
    const char *dir = argv[1], *big = NULL;
    bool quick = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--concurrent") && i + 1 < argc) big = argv[++i];
        else {
            fprintf(stderr, "e2e_check: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    static const char *models[] = {
        "golden/tiny_llama_f32.gguf",  "golden/tiny_llama_f16.gguf",  "golden/tiny_llama_q8_0.gguf",
        "golden/tiny_llama_q6_k.gguf", "golden/tiny_llama_q5_k.gguf", "golden/tiny_llama_q4_k.gguf",
        "golden/tiny_qwen3_q4km.gguf", "golden/tiny_qwen2_q4km.gguf", "models/stories260K.gguf",
        "models/llama-2-tiny-random.gguf"};
    int n_models = sizeof models / sizeof *models;
    static const struct {
        const char *name;
        loom_cache_type cache;
        bool int8;
        double tol;
    } kvs[] = {{"f32", LOOM_CACHE_F32, false, 2e-3},
               {"f16", LOOM_CACHE_F16, false, 1e-2},
               {"int8", LOOM_CACHE_F32, true, 5e-2}};
    char why[600];
    printf("%-34s %-5s %-7s %-6s %12s %10s %s\n", "model", "kv", "streams", "graphs", "max rel err",
           "tolerance", "result");
    for (int mi = 0; mi < n_models; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, models[mi]);
        loom_session_options cpu;
        loom_session_options_init(&cpu);
        run ref;
        if (run_model(path, NULL, LOOM_CACHE_F32, &cpu, S33, 33, 17, &ref, why, sizeof why)) {
            printf("%-34s CPU reference failed: %s\n", models[mi], why);
            failures++;
            free(ref.logits);
            continue;
        }
        for (int k = 0; k < 3; k++)
            for (int streams = 1; streams <= 2; streams++) {
                run on = {0}; /* the graphs-on run, compared bit for bit with graphs off */
                for (int graphs = 1; graphs >= 0; graphs--) {
                    if (quick && (streams == 2) != (graphs == 1)) continue;
                    loom_session_options so = cuda_options(streams, graphs, kvs[k].int8);
                    run got;
                    int rc = run_model(path, NULL, kvs[k].cache, &so, S33, 33, 17, &got, why,
                                       sizeof why);
                    double e = rc ? INFINITY : compare(&ref, &got);
                    bool ok = !rc && got.rows == ref.rows && e <= kvs[k].tol;
                    if (!ok) failures++;
                    printf("%-34s %-5s %-7d %-6s %12.3e %10.1e %s%s%s\n", models[mi], kvs[k].name,
                           streams, graphs ? "on" : "off", e, kvs[k].tol, ok ? "ok" : "FAIL",
                           rc ? ": " : "", rc ? why : "");
                    if (graphs && !rc) {
                        on = got;
                        continue;
                    }
                    if (!graphs && !rc && on.logits) {
                        const size_t nf = (size_t)got.rows * got.V;
                        const size_t diff = floats_differ(on.logits, got.logits, nf);
                        bool same = on.rows == got.rows && diff == 0;
                        if (!same) failures++;
                        printf("%-34s %-5s %-7d on==off %s (%zu of %zu floats differ)\n", models[mi],
                               kvs[k].name, streams, same ? "bit-identical ok" : "FAIL", diff, nf);
                    }
                    free(got.logits);
                }
                free(on.logits);
            }
        free(ref.logits);
    }
    /* Greedy 64 tokens on the golden models. */
    printf("\n%-34s %s\n", "greedy 64 after S7 (cpu vs cuda)", "result");
    for (int mi = 0; mi < 8; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, models[mi]);
        int32_t a[64], b[64];
        float ma[64], mb[64];
        loom_session_options cpu, gpu = cuda_options(2, 1, false);
        loom_session_options_init(&cpu);
        if (greedy_after_s7(path, LOOM_CACHE_F32, &cpu, 64, a, ma, NULL, NULL, NULL, why,
                            sizeof why) ||
            greedy_after_s7(path, LOOM_CACHE_F32, &gpu, 64, b, mb, NULL, NULL, NULL, why,
                            sizeof why)) {
            printf("%-34s FAIL: %s\n", models[mi], why);
            failures++;
            continue;
        }
        int first = -1;
        for (int i = 0; i < 64 && first < 0; i++)
            if (a[i] != b[i]) first = i;
        if (first < 0) {
            printf("%-34s ok: 64/64 tokens identical\n", models[mi]);
        } else {
            /* A near-tie: the CPU's top-2 margin there is tiny against the logits' scale. */
            bool tie = ma[first] < 2e-2f;
            printf("%-34s %s: first divergence at token %d (cpu %d, cuda %d), cpu top-2 margin "
                   "%.3g%s\n",
                   models[mi], tie ? "ok (near-tie)" : "FAIL", first, a[first], b[first],
                   ma[first], tie ? "" : " (not a near-tie)");
            if (!tie) failures++;
        }
    }
    /* CUDA-graph replay over a 64-token generation: graphs on == off bit for bit at every
     * position, one instantiation, no update. */
    printf("\n%-34s %-5s %-7s %s\n", "graph replay, greedy 64 after S7", "kv", "streams",
           "on == off (bits) / graph stats with graphs on");
    int n_replay_models = quick ? 3 : 8; /* the golden models: head_dim 64, no host fallback */
    for (int mi = 0; mi < n_replay_models; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, models[mi]);
        for (int k = 1; k < 3; k++)
            for (int streams = 1; streams <= 2; streams++) {
                float *a = NULL, *b = NULL;
                int32_t Va = 0, Vb = 0;
                loom_session_stats sa, sb;
                loom_session_options so = cuda_options(streams, 1, kvs[k].int8);
                int rc = greedy_after_s7(path, kvs[k].cache, &so, 64, NULL, NULL, &a, &Va, &sa,
                                         why, sizeof why);
                so.cuda_graphs = 0;
                if (!rc)
                    rc = greedy_after_s7(path, kvs[k].cache, &so, 64, NULL, NULL, &b, &Vb, &sb,
                                         why, sizeof why);
                if (rc) {
                    printf("%-34s %-5s %-7d FAIL: %s\n", models[mi], kvs[k].name, streams, why);
                    failures++;
                } else {
                    size_t nf = (size_t)64 * Va, diff = 0;
                    int first = -1;
                    for (size_t i = 0; i < nf; i++)
                        if (memcmp(&a[i], &b[i], sizeof(float))) {
                            diff++;
                            if (first < 0) first = (int)(i / (size_t)Va);
                        }
                    bool ok = Va == Vb && diff == 0 && sa.graph_instantiations == 1 &&
                              sa.graph_updates == 0 && sa.graph_launches == 63 &&
                              sb.graph_instantiations + sb.graph_updates + sb.graph_launches == 0;
                    if (!ok) failures++;
                    printf("%-34s %-5s %-7d %s: %zu floats differ (first at position %d); graphs "
                           "on: %llu instantiated, %llu updated, %llu launched; off: %llu/%llu/%llu\n",
                           models[mi], kvs[k].name, streams, ok ? "ok" : "FAIL", diff, first,
                           (unsigned long long)sa.graph_instantiations,
                           (unsigned long long)sa.graph_updates,
                           (unsigned long long)sa.graph_launches,
                           (unsigned long long)sb.graph_instantiations,
                           (unsigned long long)sb.graph_updates,
                           (unsigned long long)sb.graph_launches);
                }
                free(a);
                free(b);
            }
    }
    /* The folds on CUDA: -O2 == -O2 without fuse-norm-matmul (resp. fuse-rope-kv-attention),
     * bit for bit; the norm fold within kFoldTol on the models whose folded norms meet Q4_K
     * (or Q5_K) weights while the kernels take the scale last (bits on every other model). */
    const double kFoldTol = 2e-3;
    for (size_t fi = 0; fi < sizeof folds / sizeof *folds; fi++) {
        const bool scale_last = fi == 0 && loom_cuda_normed_scale_last();
        printf("\n%-34s %-5s %-7s %-6s %s\n", folds[fi].title, "kv", "streams", "graphs",
               scale_last ? "bits, or max rel err <= 2e-3 (Q4_K/Q5_K under a folded norm)" : "bits");
        for (int mi = 0; mi < n_models; mi++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, models[mi]);
            const int q4n = scale_last ? has_scale_last_normed(path) : 0;
            if (q4n < 0) {
                printf("%-34s FAIL: cannot read the file\n", models[mi]);
                failures++;
                continue;
            }
            const bool near = q4n == 1;
            for (int c = 0; c < 2; c++) {
                int k = c ? 2 : 1, streams = c ? 2 : 1, graphs = !c;
                loom_session_options so = cuda_options(streams, graphs, kvs[k].int8);
                run a = {0}, b = {0};
                int rc = run_model(path, NULL, kvs[k].cache, &so, S33, 33, 17, &a, why, sizeof why);
                if (!rc)
                    rc = run_model(path, folds[fi].pipeline, kvs[k].cache, &so, S33, 33, 17, &b,
                                   why, sizeof why);
                const size_t nf = (size_t)a.rows * a.V;
                const size_t diff = rc ? 0 : floats_differ(a.logits, b.logits, nf);
                const double e = rc ? 0 : compare(&a, &b);
                bool ok = !rc && a.rows == b.rows && a.rows == 33 && (near ? e <= kFoldTol : diff == 0);
                if (!ok) failures++;
                printf("%-34s %-5s %-7d %-6s %s: %zu of %zu floats differ, max rel err %.2e (%s)%s%s\n",
                       models[mi], kvs[k].name, streams, graphs ? "on" : "off", ok ? "ok" : "FAIL",
                       diff, nf, e, near ? "tolerance" : "bits", rc ? ": " : "", rc ? why : "");
                free(a.logits);
                free(b.logits);
            }
        }
    }
    printf("\n%-34s %s\n", "two sessions on two threads", "bits against one thread alone");
    for (int mi = 0; mi < n_models; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, models[mi]);
        failures += concurrent_check(models[mi], path, N_CTX, MAX_TOKENS, S33, 33, 17);
    }
    if (big) { /* a 512-token prefill (the wide GEMMs' x limbs in the scratch) + 16 decode steps */
        int32_t *toks = malloc(528 * sizeof *toks);
        uint32_t h = 12345u;
        for (int i = 0; toks && i < 528; i++) toks[i] = (int32_t)((h = h * 1103515245u + 12345u) >> 16) % 500;
        failures += toks ? concurrent_check(big, big, 640, 512, toks, 528, 512) : 1;
        free(toks);
    }
    printf("\n%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
