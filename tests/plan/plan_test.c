/* plan_test.c: the execution plan (executor/plan.h).
 *
 * - Every test model (golden/ llama x6, qwen2, qwen3; models/ stories260K and
 *   llama-2-tiny-random; a qwen3 from mkmodel, always available), lowered at T max 512, -O0 and
 *   -O2, with 1, 2 and 4 streams: arena <= 1.10 x lower bound, lower bound <= arena <= sum, and
 *   a brute-force check that two blocks sharing bytes are ordered (every access of one happens
 *   before the first access of the other), graph outputs never overwritten; planned again with
 *   the outputs no node reads external (loom_exec_plan_create_external): each asked about once,
 *   no block, out of the sum, the same order, streams and roots.
 * - External outputs on a small graph: only roots no node reads are asked about; answered true,
 *   they leave the arena (it shrinks by their bytes) and an in-place output runs out of place.
 * - A two-branch graph: the branches land on two streams, the join waits, and a block dead on
 *   branch A is not reused by branch B before the join (it is with one stream).
 * - Unfused Q/K/V (-O0): the three projections land on three different streams.
 * Missing testdata: skipped (failed when LOOM_REQUIRE_TESTDATA=1), except the mkmodel case.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/plan.h"
#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"
#include "passes/passes.h"
#include "tools/mkmodel.h"

static const char *testdata(void) {
    const char *d = getenv("LOOM_TESTDATA"), *req = getenv("LOOM_REQUIRE_TESTDATA");
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/golden/sequences.txt", d ? d : "");
    FILE *f = d && *d ? fopen(probe, "rb") : NULL;
    if (f) {
        fclose(f);
        return d;
    }
    if (req && !strcmp(req, "1")) cr_assert_fail("LOOM_TESTDATA (%s) has no golden/", d ? d : "unset");
    cr_skip_test("testdata not found (set LOOM_TESTDATA)");
    return NULL;
}

static loom_ir_graph *lower(const char *path, const char *passes) {
    loom_error err = {0};
    loom_gguf *f = NULL;
    loom_ir_graph *g = NULL;
    loom_lower_options lo;
    loom_lower_options_init(&lo);
    lo.n_ctx = 1024;
    cr_assert(!loom_gguf_open(path, &f, &err), "%s: %s", path, err.msg);
    cr_assert(!loom_lower_gguf(f, &lo, &g, &err), "%s: %s", path, err.msg);
    loom_pass_manager *pm = NULL;
    cr_assert(!loom_pass_manager_create(passes, NULL, &pm, &err), "%s", err.msg);
    cr_assert(!loom_pass_manager_run(pm, g, &err), "%s", err.msg);
    loom_pass_manager_destroy(pm);
    loom_gguf_close(f);
    return g;
}

/* Brute force: blocks that share bytes are ordered by happens-before; outputs' blocks are never
 * shared with a block that starts after them; offsets aligned and inside the arena. */
static void check_plan(const char *what, const loom_ir_graph *g, const loom_exec_plan *p) {
    uint32_t n = loom_exec_plan_node_count(p), nb = loom_exec_plan_block_count(p);
    uint64_t arena = loom_exec_plan_arena_bytes(p);
    /* Accesses per block as a bitmap [nb][n]. */
    uint8_t *acc = calloc((size_t)nb * n + 1, 1);
    cr_assert(acc);
    for (uint32_t k = 0; k < n; k++) {
        const loom_ir_node *nd = loom_ir_node_get(g, loom_exec_plan_node_at(p, k));
        for (uint32_t i = 0; i < nd->n_in + nd->n_out; i++) {
            uint32_t b = loom_exec_plan_block_of(p, i < nd->n_in ? nd->in[i] : nd->out[i - nd->n_in]);
            if (b != LOOM_PLAN_NO_BLOCK) acc[(size_t)b * n + k] = 1;
        }
    }
    uint32_t *first = malloc((nb + 1) * sizeof *first);
    bool *is_out = calloc(nb + 1, sizeof *is_out);
    for (uint32_t b = 0; b < nb; b++) {
        const loom_exec_plan_block *B = loom_exec_plan_block_at(p, b);
        cr_assert(B->offset % LOOM_PLAN_ALIGN == 0 && B->offset + B->bytes <= arena,
                  "%s: block %u [%llu, +%llu) outside the arena %llu", what, b,
                  (unsigned long long)B->offset, (unsigned long long)B->bytes,
                  (unsigned long long)arena);
        first[b] = UINT32_MAX;
        for (uint32_t k = 0; k < n && first[b] == UINT32_MAX; k++)
            if (acc[(size_t)b * n + k]) first[b] = k;
        cr_assert(first[b] == B->begin, "%s: block %u begins at %u, first access %u", what, b,
                  B->begin, first[b]);
    }
    for (uint32_t i = 0; i < loom_ir_output_count(g); i++) {
        uint32_t b = loom_exec_plan_block_of(p, loom_ir_output_at(g, i, NULL));
        if (b != LOOM_PLAN_NO_BLOCK) is_out[b] = true;
    }
    for (uint32_t a = 0; a < nb; a++) {
        const loom_exec_plan_block *A = loom_exec_plan_block_at(p, a);
        for (uint32_t b = a + 1; b < nb; b++) {
            const loom_exec_plan_block *B = loom_exec_plan_block_at(p, b);
            if (A->offset >= B->offset + B->bytes || B->offset >= A->offset + A->bytes) continue;
            bool a_before_b = true, b_before_a = true;
            for (uint32_t k = 0; k < n; k++) {
                if (acc[(size_t)a * n + k] && !loom_exec_plan_happens_before(p, k, first[b]))
                    a_before_b = false;
                if (acc[(size_t)b * n + k] && !loom_exec_plan_happens_before(p, k, first[a]))
                    b_before_a = false;
            }
            cr_assert(a_before_b || b_before_a,
                      "%s: blocks %u [%u,%u) and %u [%u,%u) share bytes but are not ordered", what,
                      a, A->begin, A->end, b, B->begin, B->end);
            cr_assert(!(a_before_b && is_out[a]) && !(b_before_a && is_out[b]),
                      "%s: an output's block %u is overwritten by block %u", what,
                      a_before_b ? a : b, a_before_b ? b : a);
        }
    }
    free(acc);
    free(first);
    free(is_out);
}

/* What a plan asks its external callback (loom_exec_plan_external_fn): each value at most once,
 * only roots of their own that no node reads, with their size; true for those flagged. */
typedef struct external_asks {
    const loom_ir_graph *g;
    const loom_exec_plan *p; /* a plan of g: its roots */
    const bool *ext;         /* [values] the answers */
    uint32_t *asked;         /* [values] times asked */
} external_asks;

static bool ask_external(void *ctx, loom_ir_value_id v, uint64_t bytes) {
    external_asks *a = ctx;
    const loom_ir_value *val = loom_ir_value_get(a->g, v);
    cr_assert(val->kind == LOOM_IR_VALUE_NODE && loom_exec_plan_root(a->p, v) == v &&
                  !loom_ir_value_use_count(a->g, v),
              "asked about value %u, which is not a root no node reads", v);
    cr_assert_eq(bytes, (uint64_t)loom_ir_type_bytes(a->g, &val->type, NULL), "value %u", v);
    cr_assert_eq(a->asked[v]++, 0, "value %u asked twice", v);
    return a->ext[v];
}

/* The plan made again with every output that owns its memory and that no node reads (the
 * logits: what the executor maps) external: each was asked about, those outputs get no block,
 * the sum drops by their bytes exactly, the order and streams are the same, and the invariants
 * hold. */
static void check_external_outputs(const char *what, const loom_ir_graph *g,
                                   const loom_exec_plan *p, uint32_t streams) {
    uint32_t nv = loom_ir_value_bound(g);
    bool *ext = calloc(nv + 1, sizeof *ext);
    uint32_t *asked = calloc(nv + 1, sizeof *asked);
    cr_assert(ext && asked);
    uint64_t ext_bytes = 0;
    uint32_t n_ext = 0;
    for (uint32_t i = 0; i < loom_ir_output_count(g); i++) {
        loom_ir_value_id v = loom_ir_output_at(g, i, NULL);
        const loom_ir_value *val = loom_ir_value_get(g, v);
        if (val->kind != LOOM_IR_VALUE_NODE || loom_exec_plan_root(p, v) != v ||
            loom_ir_value_use_count(g, v) || ext[v])
            continue;
        ext[v] = true;
        ext_bytes += (uint64_t)loom_ir_type_bytes(g, &val->type, NULL);
        n_ext++;
    }
    cr_assert(n_ext > 0, "%s: no output to make external", what);
    loom_exec_plan *q = NULL;
    loom_error err = {0};
    external_asks a = {g, p, ext, asked};
    cr_assert(!loom_exec_plan_create_external(g, streams, ask_external, &a, &q, &err), "%s",
              err.msg);
    cr_assert_eq(loom_exec_plan_node_count(q), loom_exec_plan_node_count(p));
    cr_assert_eq(loom_exec_plan_streams(q), loom_exec_plan_streams(p));
    for (uint32_t k = 0; k < loom_exec_plan_node_count(p); k++) {
        cr_assert_eq(loom_exec_plan_node_at(q, k), loom_exec_plan_node_at(p, k));
        cr_assert_eq(loom_exec_plan_stream_of(q, k), loom_exec_plan_stream_of(p, k));
    }
    cr_assert_eq(loom_exec_plan_sum_bytes(q) + ext_bytes, loom_exec_plan_sum_bytes(p),
                 "%s: external outputs still counted", what);
    cr_assert_leq(loom_exec_plan_arena_bytes(q), loom_exec_plan_arena_bytes(p), "%s", what);
    for (uint32_t v = 0; v < nv; v++) {
        cr_assert_eq(loom_exec_plan_root(q, v), loom_exec_plan_root(p, v));
        if (ext[v]) {
            cr_assert_eq(asked[v], 1, "%s: external value %u not asked about", what, v);
            cr_assert_eq(loom_exec_plan_block_of(q, v), LOOM_PLAN_NO_BLOCK,
                         "%s: external value %u has a block", what, v);
        }
    }
    check_plan(what, g, q);
    loom_exec_plan_destroy(q);
    free(ext);
    free(asked);
}

static void check_model(const char *path) {
    static const char *levels[] = {"-O0", "-O2"};
    static const uint32_t streams[] = {1, 2, 4};
    for (int l = 0; l < 2; l++) {
        loom_ir_graph *g = lower(path, levels[l]);
        for (int s = 0; s < 3; s++) {
            loom_exec_plan *p = NULL;
            loom_error err = {0};
            cr_assert(!loom_exec_plan_create(g, streams[s], &p, &err), "%s", err.msg);
            char what[1200];
            snprintf(what, sizeof what, "%s %s streams=%u", path, levels[l], streams[s]);
            uint64_t A = loom_exec_plan_arena_bytes(p), L = loom_exec_plan_lower_bound_bytes(p);
            uint64_t S = loom_exec_plan_sum_bytes(p);
            cr_assert(L > 0 && A >= L, "%s: arena %llu below the lower bound %llu", what,
                      (unsigned long long)A, (unsigned long long)L);
            cr_assert(A * 100 <= L * 110, "%s: arena %llu > 1.10 x lower bound %llu", what,
                      (unsigned long long)A, (unsigned long long)L);
            cr_assert(A <= S + (uint64_t)loom_exec_plan_block_count(p) * LOOM_PLAN_ALIGN,
                      "%s: arena %llu above the sum %llu", what, (unsigned long long)A,
                      (unsigned long long)S);
            cr_assert(loom_exec_plan_streams(p) <= streams[s]);
            if (streams[s] == 1) cr_assert_eq(loom_exec_plan_wait_count(p), 0);
            check_plan(what, g, p);
            check_external_outputs(what, g, p, streams[s]);
            loom_exec_plan_destroy(p);
        }
        loom_ir_graph_destroy(g);
    }
}

Test(plan, golden_and_real_models) {
    const char *d = testdata();
    static const char *names[] = {
        "golden/tiny_llama_f32.gguf",  "golden/tiny_llama_f16.gguf",  "golden/tiny_llama_q8_0.gguf",
        "golden/tiny_llama_q6_k.gguf", "golden/tiny_llama_q5_k.gguf", "golden/tiny_llama_q4_k.gguf",
        "golden/tiny_qwen3_q4km.gguf", "golden/tiny_qwen2_q4km.gguf", "models/stories260K.gguf",
        "models/llama-2-tiny-random.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", d, names[i]);
        check_model(path);
    }
}

Test(plan, mkmodel_qwen3) {
    const char *tmp = getenv("TEST_TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/plan_qwen3.gguf", tmp && *tmp ? tmp : "/tmp");
    loom_mkmodel_config c;
    loom_mkmodel_config_init(&c, "qwen3");
    c.n_layer = 4;
    c.n_ctx = 1024;
    c.seed = 7;
    loom_error err = {0};
    cr_assert(!loom_mkmodel_write(&c, path, &err), "%s", err.msg);
    check_model(path);
    remove(path);
}

/* Two independent branches joined by an add. */
static const char two_branch[] =
    "symbol T max=4\n"
    "input %x : f32[T,64]\n"
    "weight @a : f32[64,64]\n"
    "weight @b : f32[64,64]\n"
    "weight @c : f32[64,64]\n"
    "%a1 = matmul(%x, @a)\n"
    "%a2 = silu(%a1)\n"
    "%a3 = matmul(%a2, @a)\n"
    "%b1 = matmul(%x, @b)\n"
    "%b2 = silu(%b1)\n"
    "%b3 = matmul(%b2, @b)\n"
    "%j = add(%a3, %b3)\n"
    "%k = matmul(%j, @c)\n"
    "%m = matmul(%k, @c)\n"
    "output y = %m\n";

static bool share_bytes(const loom_exec_plan *p, uint32_t a, uint32_t b) {
    const loom_exec_plan_block *A = loom_exec_plan_block_at(p, a), *B = loom_exec_plan_block_at(p, b);
    return A->offset < B->offset + B->bytes && B->offset < A->offset + A->bytes;
}

static loom_ir_value_id result(const loom_ir_graph *g, const loom_exec_plan *p, uint32_t k) {
    return loom_ir_node_get(g, loom_exec_plan_node_at(p, k))->out[0];
}

Test(plan, two_branches_stream_aware_reuse) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    cr_assert(!loom_ir_parse(two_branch, strlen(two_branch), &g, &err), "%s", err.msg);
    loom_exec_plan *p1 = NULL, *p2 = NULL;
    cr_assert(!loom_exec_plan_create(g, 1, &p1, &err), "%s", err.msg);
    cr_assert(!loom_exec_plan_create(g, 2, &p2, &err), "%s", err.msg);
    /* Order: a1 a2 a3 b1 b2 b3 j k m. Silu runs in place: a1 and a2 share one block. */
    cr_assert_eq(loom_exec_plan_block_of(p1, result(g, p1, 0)),
                 loom_exec_plan_block_of(p1, result(g, p1, 1)));
    cr_assert_geq(loom_exec_plan_inplace_count(p2), 2);
    /* Streams: branch A on one stream, branch B on the other, the join waits for the other. */
    cr_assert_eq(loom_exec_plan_streams(p2), 2);
    uint32_t sa = loom_exec_plan_stream_of(p2, 0), sb = loom_exec_plan_stream_of(p2, 3);
    cr_assert_neq(sa, sb);
    for (uint32_t k = 1; k < 3; k++) cr_assert_eq(loom_exec_plan_stream_of(p2, k), sa);
    for (uint32_t k = 4; k < 6; k++) cr_assert_eq(loom_exec_plan_stream_of(p2, k), sb);
    uint32_t nw;
    const uint32_t *w = loom_exec_plan_waits(p2, 6, &nw);
    cr_assert_eq(nw, 1);
    cr_assert(w[0] == 2 || w[0] == 5);
    cr_assert(loom_exec_plan_records(p2, w[0]));
    cr_assert(!loom_exec_plan_happens_before(p2, 2, 3));
    cr_assert(loom_exec_plan_happens_before(p2, 2, 6) && loom_exec_plan_happens_before(p2, 5, 6));
    /* Serial: b1 reuses the bytes of the dead a1/a2 block; two streams: not before the join. */
    uint32_t a12 = loom_exec_plan_block_of(p1, result(g, p1, 0));
    cr_assert(share_bytes(p1, a12, loom_exec_plan_block_of(p1, result(g, p1, 3))),
              "serial plan should reuse a1's bytes for b1");
    uint32_t a12s = loom_exec_plan_block_of(p2, result(g, p2, 0));
    for (uint32_t k = 3; k < 6; k++)
        cr_assert(!share_bytes(p2, a12s, loom_exec_plan_block_of(p2, result(g, p2, k))),
                  "node %u on the other stream reuses branch A's bytes before the join", k);
    /* After the join the bytes are free again: m (after k) may take them. */
    const loom_exec_plan_block *blk = loom_exec_plan_block_at(p2, a12s);
    cr_assert_leq(blk->end, 7);
    check_plan("two_branch streams=1", g, p1);
    check_plan("two_branch streams=2", g, p2);
    cr_assert_gt(loom_exec_plan_arena_bytes(p2), loom_exec_plan_arena_bytes(p1));
    loom_exec_plan_destroy(p1);
    loom_exec_plan_destroy(p2);
    loom_ir_graph_destroy(g);
}

/* h is read by y; y and t (silu, in place over u) are outputs no node reads; 1 KiB each at T=4. */
static const char outputs_graph[] =
    "symbol T max=4\n"
    "input %x : f32[T,64]\n"
    "weight @a : f32[64,64]\n"
    "%h = matmul(%x, @a)\n"
    "%y = matmul(%h, @a)\n"
    "%u = matmul(%x, @a)\n"
    "%t = silu(%u)\n"
    "output h = %h\n"
    "output y = %y\n"
    "output t = %t\n";

Test(plan, external_outputs_are_asked_about_once_and_leave_the_arena) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    cr_assert(!loom_ir_parse(outputs_graph, strlen(outputs_graph), &g, &err), "%s", err.msg);
    const loom_ir_value_id h = loom_ir_find_output(g, "h"), y = loom_ir_find_output(g, "y");
    const loom_ir_value_id t = loom_ir_find_output(g, "t");
    const loom_ir_value_id u = loom_ir_node_get(g, loom_ir_value_get(g, t)->def)->in[0];
    loom_exec_plan *p = NULL, *q = NULL;
    cr_assert(!loom_exec_plan_create(g, 1, &p, &err), "%s", err.msg);
    /* Without externals: h, y and u/t (t in place over u) all live to the end. */
    cr_assert_eq(loom_exec_plan_block_of(p, t), loom_exec_plan_block_of(p, u));
    cr_assert_eq(loom_exec_plan_arena_bytes(p), 3 * 1024);
    cr_assert_eq(loom_exec_plan_sum_bytes(p), 4 * 1024);
    uint32_t nv = loom_ir_value_bound(g), asked[16] = {0};
    bool ext[16] = {0};
    cr_assert_leq(nv, 16);
    for (int answer = 0; answer < 2; answer++) {
        ext[y] = ext[t] = answer;
        memset(asked, 0, sizeof asked);
        external_asks a = {g, p, ext, asked};
        cr_assert(!loom_exec_plan_create_external(g, 1, ask_external, &a, &q, &err), "%s",
                  err.msg);
        /* Only y and t, which no node reads, are asked about; not h (y reads it) nor u. */
        for (uint32_t v = 0; v < nv; v++)
            cr_assert_eq(asked[v], v == y || v == t, "value %u asked %u times", v, asked[v]);
        if (!answer) {
            cr_assert_eq(loom_exec_plan_arena_bytes(q), loom_exec_plan_arena_bytes(p));
            cr_assert_eq(loom_exec_plan_block_of(q, t), loom_exec_plan_block_of(q, u));
        } else {
            /* y and t take no bytes; t runs out of place and u keeps its own block, so the
             * arena is h and u. */
            cr_assert_eq(loom_exec_plan_block_of(q, y), LOOM_PLAN_NO_BLOCK);
            cr_assert_eq(loom_exec_plan_block_of(q, t), LOOM_PLAN_NO_BLOCK);
            cr_assert_neq(loom_exec_plan_block_of(q, u), LOOM_PLAN_NO_BLOCK);
            cr_assert_neq(loom_exec_plan_block_of(q, h), LOOM_PLAN_NO_BLOCK);
            cr_assert_eq(loom_exec_plan_inplace_count(q), 0);
            cr_assert_eq(loom_exec_plan_block_count(q), 2);
            cr_assert_eq(loom_exec_plan_arena_bytes(q), 2 * 1024);
            cr_assert_eq(loom_exec_plan_sum_bytes(q), 2 * 1024);
        }
        check_plan(answer ? "outputs external" : "outputs asked, none external", g, q);
        loom_exec_plan_destroy(q);
    }
    loom_exec_plan_destroy(p);
    loom_ir_graph_destroy(g);
}

Test(plan, unfused_qkv_on_three_streams) {
    const char *d = testdata();
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/tiny_llama_q4_k.gguf", d);
    loom_ir_graph *g = lower(path, "-O0");
    loom_exec_plan *p = NULL;
    loom_error err = {0};
    cr_assert(!loom_exec_plan_create(g, 3, &p, &err), "%s", err.msg);
    /* The first three matmuls reading blk.0.attn_{q,k,v}.weight. */
    uint32_t sq = 99, sk = 99, sv = 99;
    for (uint32_t k = 0; k < loom_exec_plan_node_count(p); k++) {
        const loom_ir_node *nd = loom_ir_node_get(g, loom_exec_plan_node_at(p, k));
        if (nd->op != LOOM_IR_OP_MATMUL) continue;
        const char *w = loom_ir_value_get(g, nd->in[1])->name;
        if (!w) continue;
        if (!strcmp(w, "blk.0.attn_q.weight")) sq = loom_exec_plan_stream_of(p, k);
        if (!strcmp(w, "blk.0.attn_k.weight")) sk = loom_exec_plan_stream_of(p, k);
        if (!strcmp(w, "blk.0.attn_v.weight")) sv = loom_exec_plan_stream_of(p, k);
    }
    cr_assert(sq < 3 && sk < 3 && sv < 3, "q/k/v matmuls not found");
    cr_assert(sq != sk && sk != sv && sq != sv, "q/k/v on streams %u %u %u", sq, sk, sv);
    cr_assert_gt(loom_exec_plan_wait_count(p), 0);
    check_plan("tiny_llama_q4_k -O0 streams=3", g, p);
    loom_exec_plan_destroy(p);
    loom_ir_graph_destroy(g);
}

Test(plan, refuses_bad_stream_counts) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    cr_assert(!loom_ir_parse(two_branch, strlen(two_branch), &g, &err), "%s", err.msg);
    loom_exec_plan *p = (loom_exec_plan *)1;
    cr_assert_eq(loom_exec_plan_create(g, 0, &p, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);
    cr_assert_eq(loom_exec_plan_create(g, 17, &p, &err), LOOM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err.msg, "streams"));
    loom_ir_graph_destroy(g);
}
