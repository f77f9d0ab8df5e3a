/* passes.h: loom's graph passes (fusions, dce, cse), their registry, and the pass manager that
 * runs a pipeline over a graph.
 *
 * A pass is one function over a graph, in its own file passes/<name>.c:
 *   loom_status loom_pass_<name>(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
 * *n_rewrites receives the rewrites it made: the pass changed the graph iff it is > 0. Every
 * pass is listed once in the registry table (registry.c: name, function, one-line doc).
 *
 * A pipeline is a comma-separated list of pass names ("fuse-norm-weight,fuse-qkv,dce") or a
 * level: "-O0" (no pass) or "-O2" (LOOM_PASS_PIPELINE_O2). NULL or "" means -O2, the default.
 * The manager runs the passes in order and after each one records statistics (nodes before and
 * after, rewrites, time), optionally verifies the graph (verify_each: tests always set it) and
 * dumps its text form ("after fuse-qkv:"). It appends the names of the passes it ran to the
 * graph's metadata `passes` (comma-separated, as ir.h documents), so a serialized graph says
 * how it was made.
 *
 *   loom_pass_options o; loom_pass_options_init(&o); o.verify_each = true;
 *   loom_pass_manager *pm;
 *   if (loom_pass_manager_create("-O2", &o, &pm, &err) || loom_pass_manager_run(pm, g, &err)) ...
 *   for (uint32_t i = 0; i < loom_pass_manager_stat_count(pm); i++) ... stat_at(pm, i) ...
 *   loom_pass_manager_destroy(pm);
 *
 * Ownership: the manager copies the pipeline text; the graph stays the caller's.
 */
#ifndef LOOM_PASSES_H
#define LOOM_PASSES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default pipeline (-O2). */
#define LOOM_PASS_PIPELINE_O2 \
    "fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write,"  \
    "fuse-rope-kv-attention,fuse-norm-matmul,cse,dce"

typedef loom_status (*loom_pass_fn)(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);

/* ---- the passes (one file each) ---- */
loom_status loom_pass_fuse_norm_weight(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_qkv(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_gate_up(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_residual_add(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_matmul_pair(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_rope_kv_write(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_fuse_rope_kv_attention(loom_ir_graph *g, uint32_t *n_rewrites,
                                             loom_error *err);
loom_status loom_pass_fuse_norm_matmul(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_dce(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);
loom_status loom_pass_cse(loom_ir_graph *g, uint32_t *n_rewrites, loom_error *err);

/* ---- registry ---- */
typedef struct loom_pass_info {
    const char *name;   /* "fuse-qkv" */
    loom_pass_fn run;
    const char *doc;    /* one line */
} loom_pass_info;

uint32_t loom_pass_count(void);
const loom_pass_info *loom_pass_at(uint32_t i);          /* NULL when out of range */
const loom_pass_info *loom_pass_find(const char *name);  /* NULL when unknown */

/* ---- manager ---- */
typedef struct loom_pass_options {
    bool verify_each;         /* run loom_ir_verify after every pass (error names the pass);
                                 always on in LOOM_DEBUG builds (debug, asan) */
    const char *print_after;  /* dump the graph after the pass of this name (NULL: none) */
    bool print_after_all;     /* dump after every pass */
    FILE *dump;               /* where dumps go; NULL: stderr */
} loom_pass_options;

void loom_pass_options_init(loom_pass_options *o); /* all off, dumps to stderr */

typedef struct loom_pass_stat {
    const char *name;         /* the pass's registry name (static) */
    uint32_t nodes_before, nodes_after;
    uint32_t rewrites;
    double ms;                /* wall time of the pass (without verify and dump) */
} loom_pass_stat;

typedef struct loom_pass_manager loom_pass_manager;

/* Parses pipeline (see the top; NULL or "" = -O2). An unknown name or level is
 * LOOM_ERR_INVALID_ARGUMENT listing the known passes; so is print_after naming no pass of the
 * registry. opts may be NULL (defaults). */
loom_status loom_pass_manager_create(const char *pipeline, const loom_pass_options *opts,
                                     loom_pass_manager **out, loom_error *err);
void loom_pass_manager_destroy(loom_pass_manager *pm); /* NULL is a no-op */

/* Runs the pipeline on g. Statistics of earlier runs are replaced. On error the message starts
 * with "pass NAME: " and g holds the state the failing pass left (it may not verify). */
loom_status loom_pass_manager_run(loom_pass_manager *pm, loom_ir_graph *g, loom_error *err);

/* Statistics of the last run, one per pass run (valid until the next run or destroy). */
uint32_t loom_pass_manager_stat_count(const loom_pass_manager *pm);
const loom_pass_stat *loom_pass_manager_stat_at(const loom_pass_manager *pm, uint32_t i);

/* One-call form: create, run, destroy (no dumps, no statistics). */
loom_status loom_pass_run_pipeline(loom_ir_graph *g, const char *pipeline, bool verify_each,
                                   loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_PASSES_H */
