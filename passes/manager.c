/* manager.c: the pass manager: parses a pipeline ("a,b,c" | -O0 | -O2), runs it with
 * statistics, verify-each and dumps, and records the passes run in the graph's `passes`
 * metadata (appended to what an earlier pipeline recorded).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/passes.h"

enum { MAX_PIPELINE = 64 };

/* Debug builds (LOOM_DEBUG: the debug and asan configs) verify after every pass regardless. */
#if defined(LOOM_DEBUG) && LOOM_DEBUG
static const bool always_verify = true;
#else
static const bool always_verify = false;
#endif

struct loom_pass_manager {
    loom_pass_options opts;
    const loom_pass_info *pipeline[MAX_PIPELINE];
    uint32_t n;
    loom_pass_stat stats[MAX_PIPELINE];
    uint32_t n_stats;
};

void loom_pass_options_init(loom_pass_options *o) { memset(o, 0, sizeof *o); }

/* "known passes: a, b, c" into buf. */
static const char *known_list(char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "known passes:");
    for (uint32_t i = 0; i < loom_pass_count() && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s %s", i ? "," : "", loom_pass_at(i)->name);
    return buf;
}

static loom_status parse_pipeline(loom_pass_manager *pm, const char *spec, loom_error *err) {
    char known[384];
    if (!spec || !*spec || !strcmp(spec, "-O2")) spec = LOOM_PASS_PIPELINE_O2;
    else if (!strcmp(spec, "-O0")) return LOOM_OK;
    else if (spec[0] == '-')
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "passes: unknown level '%s' (levels: -O0 none, -O2 default: %s)",
                              spec, LOOM_PASS_PIPELINE_O2);
    for (const char *p = spec;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "passes: bad pipeline '%s': empty or overlong pass name; %s",
                                  spec, known_list(known, sizeof known));
        memcpy(name, p, len);
        name[len] = 0;
        const loom_pass_info *info = loom_pass_find(name);
        if (!info)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "passes: unknown pass '%s'; %s",
                                  name, known_list(known, sizeof known));
        if (pm->n == MAX_PIPELINE)
            return loom_error_set(err, LOOM_ERR_LIMIT, "passes: pipeline longer than %d passes",
                                  MAX_PIPELINE);
        pm->pipeline[pm->n++] = info;
        if (!end) return LOOM_OK;
        p = end + 1;
    }
}

loom_status loom_pass_manager_create(const char *pipeline, const loom_pass_options *opts,
                                     loom_pass_manager **out, loom_error *err) {
    char known[384];
    *out = NULL;
    loom_pass_manager *pm = calloc(1, sizeof *pm);
    if (!pm) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "passes: out of memory");
    if (opts) pm->opts = *opts;
    loom_status st = parse_pipeline(pm, pipeline, err);
    if (!st && pm->opts.print_after && !loom_pass_find(pm->opts.print_after))
        st = loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                            "passes: print-after names unknown pass '%s'; %s",
                            pm->opts.print_after, known_list(known, sizeof known));
    if (st) {
        free(pm);
        return st;
    }
    pm->opts.print_after = NULL; /* the caller's string is not ours: keep the registry's */
    if (opts && opts->print_after) pm->opts.print_after = loom_pass_find(opts->print_after)->name;
    *out = pm;
    return LOOM_OK;
}

void loom_pass_manager_destroy(loom_pass_manager *pm) { free(pm); }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Appends name to metadata `passes`. */
static loom_status record(loom_ir_graph *g, const char *name, loom_error *err) {
    const loom_ir_meta *m = loom_ir_meta_get(g, "passes");
    const char *old = m && m->kind == LOOM_IR_META_STRING ? m->s : "";
    size_t len = strlen(old) + strlen(name) + 2;
    char *s = malloc(len);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "passes: out of memory");
    snprintf(s, len, "%s%s%s", old, *old ? "," : "", name);
    loom_status st = loom_ir_meta_set_string(g, "passes", s, err);
    free(s);
    return st;
}

loom_status loom_pass_manager_run(loom_pass_manager *pm, loom_ir_graph *g, loom_error *err) {
    pm->n_stats = 0;
    FILE *dump = pm->opts.dump ? pm->opts.dump : stderr;
    for (uint32_t i = 0; i < pm->n; i++) {
        const loom_pass_info *p = pm->pipeline[i];
        loom_pass_stat *s = &pm->stats[pm->n_stats++];
        memset(s, 0, sizeof *s);
        s->name = p->name;
        s->nodes_before = loom_ir_node_count(g);
        double t0 = now_ms();
        loom_status st = p->run(g, &s->rewrites, err);
        s->ms = now_ms() - t0;
        s->nodes_after = loom_ir_node_count(g);
        if (!st && (pm->opts.verify_each || always_verify) && (st = loom_ir_verify(g, err)))
            loom_error_prefix(err, "the graph fails to verify: ");
        if (!st) st = record(g, p->name, err);
        if (st) {
            loom_error_prefix(err, "pass %s: ", p->name);
            return st;
        }
        if (pm->opts.print_after_all ||
            (pm->opts.print_after && !strcmp(pm->opts.print_after, p->name))) {
            fprintf(dump, "after %s:\n", p->name);
            if ((st = loom_ir_print(g, dump, err))) return st;
        }
    }
    return LOOM_OK;
}

uint32_t loom_pass_manager_stat_count(const loom_pass_manager *pm) { return pm->n_stats; }

const loom_pass_stat *loom_pass_manager_stat_at(const loom_pass_manager *pm, uint32_t i) {
    return i < pm->n_stats ? &pm->stats[i] : NULL;
}

loom_status loom_pass_run_pipeline(loom_ir_graph *g, const char *pipeline, bool verify_each,
                                   loom_error *err) {
    loom_pass_options o;
    loom_pass_options_init(&o);
    o.verify_each = verify_each;
    loom_pass_manager *pm;
    loom_status st = loom_pass_manager_create(pipeline, &o, &pm, err);
    if (!st) st = loom_pass_manager_run(pm, g, err);
    loom_pass_manager_destroy(pm);
    return st;
}
