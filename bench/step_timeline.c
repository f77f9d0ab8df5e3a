/* step_timeline.c: where the time of one CUDA decode step goes, kernel by kernel, in the real
 * replayed step (bench/NOTES.md 7: "the breakdown of one decode step: time per kernel family,
 * launch gaps"). Uses only include/loom.h and CUPTI (bench/cupti_trace.h).
 *
 *   step_timeline MODEL.gguf [-p 512] [-n 32] [--warm 8] [--ctx N] [--kv f16|int8] [--csv FILE]
 *
 * Runs a P-token prompt and `warm` decode steps (graph capture), then times n decode steps by
 * wall clock (as `loom bench` does), then runs the prompt and warm-up again and records n more
 * steps with CUPTI (every kernel's GPU start and end; kernels of one graph launch share its
 * correlation id, which makes a step). For each kernel of a step:
 *   gap  = its start - the latest end of the kernels before it (negative: it was resident and
 *          waiting, programmatic dependent launch, while its predecessor ran)
 *   incr = its end - that latest end: what it adds to the step's critical path; the increments
 *          of a step sum to its span (first start -> last end).
 * Between two steps (the last kernel's end -> the next step's first start: the host's eval, the
 * inputs' upload, the graph launch, a download of the outputs) the copies that start there are
 * listed by kind; the traced time between steps carries CUPTI's cost a call (H200: +0.2-0.4 ms
 * a token), so the untraced wall clock minus the traced span is printed beside it.
 * Kernels are labelled by their place relative to the last decode-attention kernel before them
 * (one a layer; "L+1" = the first kernel after a layer's attention, "L-1" = the one before the
 * first layer's attention), so a layer's matmuls with equal kernels and grids (attention output
 * and down projection) get separate rows. Exit codes: 0, 1 runtime error, 2 usage error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cupti_trace.h"
#include "loom.h"
#include "tools/cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: step_timeline MODEL.gguf [-p 512] [-n 32] [--warm 8] [--ctx N] "
               "[--kv f16|int8] [--csv FILE]\n");
}

/* The prompt of P tokens, then W decode steps (the first captures the step's graph). */
static int prompt_and_warm(loom_session *s, const int32_t *toks, int32_t P, int32_t W,
                           loom_error *err) {
    if (loom_session_eval(s, toks, P, err)) return 1;
    for (int32_t i = 0; i < W; i++)
        if (loom_session_eval(s, toks + P + i, 1, err)) return 1;
    return 0;
}

/* One row of the table: a kernel (name and grid) at one place in the layer. */
typedef struct {
    int rel; /* place after the layer's attention kernel; INT32_MIN: no attention in the step */
    char name[112];
    int32_t grid[3], block[3], smem;
    long count;
    double dur, gap, incr; /* sums over the recorded steps, ns */
} row;

typedef struct {
    row *r;
    size_t n, cap;
} table;

static row *table_get(table *t, int rel, const loom_kernel_rec *k) {
    for (size_t i = 0; i < t->n; i++) {
        row *r = &t->r[i];
        if (r->rel == rel && !strcmp(r->name, k->name) && !memcmp(r->grid, k->grid, sizeof r->grid))
            return r;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        row *p = realloc(t->r, cap * sizeof *p);
        if (!p) return NULL;
        t->r = p;
        t->cap = cap;
    }
    row *r = &t->r[t->n++];
    memset(r, 0, sizeof *r);
    r->rel = rel;
    memcpy(r->name, k->name, sizeof r->name);
    memcpy(r->grid, k->grid, sizeof r->grid);
    memcpy(r->block, k->block, sizeof r->block);
    r->smem = k->smem;
    return r;
}

static int by_start(const void *a, const void *b) {
    const loom_kernel_rec *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts by correlation id, then start: a step's kernels together and in order. */
static int by_corr_start(const void *a, const void *b) {
    const loom_kernel_rec *x = a, *y = b;
    if (x->correlation != y->correlation) return x->correlation < y->correlation ? -1 : 1;
    return by_start(a, b);
}

/* The copies of one kind that start between steps. */
typedef struct {
    char name[16];
    long count;
    double dur, bytes;
} copy_row;

static int is_copy(const loom_kernel_rec *r) { return !strncmp(r->name, "memcpy ", 7); }

static int by_incr(const void *a, const void *b) {
    const row *x = a, *y = b;
    return x->incr < y->incr ? 1 : x->incr > y->incr ? -1 : 0;
}

/* Decode attention: attention.cu's attn_kernel (v6), attention_v5.cu's kernels. */
static int is_attention(const char *name) {
    return strstr(name, "attn") != NULL || strstr(name, "attention") != NULL;
}

int main(int argc, char **argv) {
    const char *model = NULL, *csv = NULL, *kv = "f16";
    int32_t P = 512, N = 32, W = 8, ctx = 0;
    const loom_cli_opt opts[] = {
        {"-p", LOOM_CLI_INT, &P, 1, 1 << 20, NULL},
        {"-n", LOOM_CLI_INT, &N, 1, 1 << 16, NULL},
        {"--warm", LOOM_CLI_INT, &W, 1, 1 << 16, NULL},
        {"--ctx", LOOM_CLI_INT, &ctx, 0, 1 << 21, NULL},
        {"--kv", LOOM_CLI_CHOICE, &kv, 0, 0, "f16|int8"},
        {"--csv", LOOM_CLI_STRING, &csv, 0, 0, NULL},
    };
    int pr = loom_cli_parse_opts("step_timeline", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "MODEL.gguf", &model);
    if (pr != LOOM_CLI_GO_ON) return pr;
    if (!model) {
        usage(stderr);
        return 2;
    }
    const int32_t need = P + W + N + 1;  /* positions of either run (the second resets) */
    if (ctx && ctx < need) {
        fprintf(stderr, "step_timeline: --ctx %d is below the %d positions the run needs\n", ctx,
                need);
        return 2;
    }

    int rc = 1;
    loom_error err = {0};
    loom_model *m = NULL;
    loom_session *s = NULL;
    loom_kernel_rec *recs = NULL;
    uint64_t (*sp)[2] = NULL; /* each step's first start and last end */
    table t = {0};
    FILE *cf = NULL;
    int32_t *toks = malloc((size_t)need * sizeof *toks);
    if (!toks) {
        fprintf(stderr, "step_timeline: out of memory\n");
        return 1;
    }
    loom_model_options mo;
    loom_model_options_init(&mo);
    mo.n_ctx = ctx ? ctx : need;
    mo.max_tokens = P < 512 ? P : 512;
    mo.last_logits_only = true;
    mo.cache_type = LOOM_CACHE_F16; /* as `loom bench`: F16, or INT8 through the session */
    loom_session_options so;
    loom_session_options_init(&so);
    so.backend = LOOM_BACKEND_CUDA;
    so.kv = !strcmp(kv, "int8") ? LOOM_SESSION_KV_INT8 : LOOM_SESSION_KV_AS_MODEL;
    if (loom_model_load(model, &mo, &m, &err) || loom_session_create(m, &so, &s, &err)) {
        fprintf(stderr, "step_timeline: %s\n", err.msg);
        goto done;
    }
    loom_cli_bench_tokens(toks, need, loom_model_n_vocab(m));
    /* Untraced: prompt, warm-up, n timed steps. */
    double wall = 0, wall_tr = 0;
    int32_t pos = P + W;
    if (prompt_and_warm(s, toks, P, W, &err)) goto eval_fail;
    double t0 = loom_cli_now_s();
    for (int32_t i = 0; i < N; i++, pos++)
        if (loom_session_eval(s, toks + pos, 1, &err)) goto eval_fail;
    wall = (loom_cli_now_s() - t0) / N;
    /* Traced: the same positions again. */
    loom_session_reset(s);
    pos = P + W;
    if (prompt_and_warm(s, toks, P, W, &err)) goto eval_fail;
    char cerr[256];
    if (loom_cupti_start(cerr, sizeof cerr)) {
        fprintf(stderr, "step_timeline: %s\n", cerr);
        goto done;
    }
    t0 = loom_cli_now_s();
    for (int32_t i = 0; i < N; i++, pos++)
        if (loom_session_eval(s, toks + pos, 1, &err)) goto eval_fail;
    wall_tr = (loom_cli_now_s() - t0) / N;
    size_t nrec = 0;
    uint64_t dropped = 0;
    if (loom_cupti_stop(&recs, &nrec, &dropped, cerr, sizeof cerr)) {
        fprintf(stderr, "step_timeline: %s\n", cerr);
        goto done;
    }
    if (dropped) fprintf(stderr, "step_timeline: CUPTI dropped %llu records\n",
                         (unsigned long long)dropped);

    /* Kernels first, the copies after them (in start order). */
    size_t nk = 0;
    for (size_t i = 0; i < nrec; i++)
        if (!is_copy(&recs[i])) {
            loom_kernel_rec k = recs[i];
            recs[i] = recs[nk];
            recs[nk++] = k;
        }
    const size_t ncopy = nrec - nk;
    nrec = nk;
    loom_kernel_rec *copies = recs + nrec;
    qsort(copies, ncopy, sizeof *copies, by_start);
    if (!(sp = malloc((nrec + 1) * sizeof *sp))) {
        fprintf(stderr, "step_timeline: out of memory\n");
        goto done;
    }
    /* Steps: runs of one correlation id (a graph launch); with graphs off every kernel has its
     * own id and there is no step to find. */
    qsort(recs, nrec, sizeof *recs, by_corr_start);
    if (csv && !(cf = fopen(csv, "w"))) {
        fprintf(stderr, "step_timeline: cannot write %s: %s\n", csv, strerror(errno));
        goto done;
    }
    if (cf) fprintf(cf, "step,index,rel,name,grid_x,grid_y,grid_z,start_ns,end_ns,gap_ns,incr_ns\n");
    int32_t steps = 0;
    size_t per_step = 0, others = 0;
    double span = 0, nattn = 0;
    for (size_t i = 0; i < nrec;) {
        size_t j = i;
        while (j < nrec && recs[j].correlation == recs[i].correlation) j++;
        const size_t k = j - i;
        if (k < 8 || recs[i].graph == 0) {
            others += k;
            i = j;
            continue;
        }
        loom_kernel_rec *st = recs + i;
        if (per_step && k != per_step)
            fprintf(stderr, "step_timeline: step %d has %zu kernels, step 0 had %zu\n", steps, k,
                    per_step);
        if (!per_step) per_step = k;
        size_t first_attn = k;
        for (size_t q = 0; q < k; q++)
            if (is_attention(st[q].name)) {
                first_attn = q;
                break;
            }
        uint64_t latest = st[0].start;
        long last_attn = -1;
        for (size_t q = 0; q < k; q++) {
            if (is_attention(st[q].name)) {
                last_attn = (long)q;
                nattn++;
            }
            int rel = first_attn == k ? INT32_MIN
                      : last_attn >= 0 ? (int)((long)q - last_attn)
                                       : (int)((long)q - (long)first_attn);
            const double gap = (double)st[q].start - (double)latest;
            const double incr = st[q].end > latest ? (double)(st[q].end - latest) : 0.0;
            if (st[q].end > latest) latest = st[q].end;
            row *r = table_get(&t, rel, &st[q]);
            if (!r) {
                fprintf(stderr, "step_timeline: out of memory\n");
                goto done;
            }
            r->count++;
            r->dur += (double)(st[q].end - st[q].start);
            r->gap += gap;
            r->incr += incr;
            if (cf)
                fprintf(cf, "%d,%zu,%d,\"%s\",%d,%d,%d,%llu,%llu,%.0f,%.0f\n", steps, q, rel,
                        st[q].name, st[q].grid[0], st[q].grid[1], st[q].grid[2],
                        (unsigned long long)(st[q].start - st[0].start),
                        (unsigned long long)(st[q].end - st[0].start), gap, incr);
        }
        span += (double)(latest - st[0].start);
        sp[steps][0] = st[0].start;
        sp[steps][1] = latest;
        steps++;
        i = j;
    }
    if (steps == 0) {
        fprintf(stderr, "step_timeline: no decode step found among %zu kernels (graphs off? "
                        "LOOM_CUDA_GRAPHS=0 launches every kernel on its own)\n", nrec);
        goto done;
    }

    /* Between steps (graph launches are in correlation order, which is time order). */
    copy_row cr[8];
    int ncr = 0;
    double between = 0;
    for (int32_t q = 1; q < steps; q++) between += (double)(sp[q][0] - sp[q - 1][1]);
    for (size_t c = 0; c < ncopy; c++)
        for (int32_t q = 1; q < steps; q++) {
            if (copies[c].start < sp[q - 1][1] || copies[c].start >= sp[q][0]) continue;
            int i = 0;
            while (i < ncr && strcmp(cr[i].name, copies[c].name + 7)) i++;
            if (i == ncr && ncr < 8) {
                memset(&cr[ncr], 0, sizeof cr[ncr]);
                snprintf(cr[ncr++].name, sizeof cr[0].name, "%s", copies[c].name + 7);
            }
            if (i < ncr) {
                cr[i].count++;
                cr[i].dur += (double)(copies[c].end - copies[c].start);
                cr[i].bytes += (double)copies[c].bytes;
            }
            break;
        }

    qsort(t.r, t.n, sizeof *t.r, by_incr);
    printf("model %s, -p %d, %d recorded decode steps after %d warm-up (positions %d..%d), "
           "n_ctx %d, kv %s\n", model, P, steps, W, P + W, P + W + N - 1, loom_model_n_ctx(m), kv);
    printf("wall clock: %.4f ms/token untraced, %.4f traced; the recorded steps' span %.4f ms "
           "(first kernel start -> last end), %zu kernels a step, %.0f attention kernels a step; "
           "%zu kernels outside the steps\n\n",
           wall * 1e3, wall_tr * 1e3, span / steps / 1e6, per_step, nattn / steps, others);
    if (steps > 1) {
        printf("between steps: %.2f us a step traced (a step's last kernel end -> the next one's "
               "first start; tracing's own cost a call included: untraced wall - span %.2f us); "
               "copies starting there a step:", between / (steps - 1) / 1e3,
               (wall - span / steps / 1e9) * 1e6);
        for (int i = 0; i < ncr; i++)
            printf("%s %s %.2f x %.0f B, %.2f us each", i ? ";" : "", cr[i].name,
                   (double)cr[i].count / (steps - 1), cr[i].bytes / cr[i].count,
                   cr[i].dur / cr[i].count / 1e3);
        printf("%s\n\n", ncr ? "" : " none");
    }
    printf("| place | kernel | grid | block | smem | a step | dur us | gap us | incr us | incr a "
           "step us | share |\n| --- | --- | --- | --- | --: | --: | --: | --: | --: | --: | --: |\n");
    double tot = 0;
    for (size_t i = 0; i < t.n; i++) tot += t.r[i].incr;
    for (size_t i = 0; i < t.n; i++) {
        const row *r = &t.r[i];
        char place[16];
        if (r->rel == INT32_MIN) snprintf(place, sizeof place, "-");
        else snprintf(place, sizeof place, "L%+d", r->rel);
        printf("| %s | %s | %dx%dx%d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f%% |\n",
               place, r->name, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->smem,
               (double)r->count / steps, r->dur / r->count / 1e3, r->gap / r->count / 1e3,
               r->incr / r->count / 1e3, r->incr / steps / 1e3, tot > 0 ? 100 * r->incr / tot : 0);
    }
    rc = 0;
    goto done;
eval_fail:
    fprintf(stderr, "step_timeline: eval at position %d: %s\n", pos, err.msg);
done:
    if (cf && fclose(cf) != 0 && rc == 0) {
        fprintf(stderr, "step_timeline: writing %s failed\n", csv);
        rc = 1;
    }
    if (cf && rc != 0) remove(csv); /* no half-written file */
    free(t.r);
    free(sp);
    free(recs);
    free(toks);
    loom_session_destroy(s);
    loom_model_destroy(m);
    return rc;
}
