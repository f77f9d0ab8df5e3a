/* rope_kv_numeric.h: the CPU numeric check shared by the attention prologue fusions'
 * tests (fuse-rope-kv-write, fuse-rope-kv-attention).
 *
 *   rope_kv_check_bit_exact(loom_pass_fuse_rope_kv_write, TEXT, 8 * 32 * 2);
 * parses TEXT (inputs q [T,4,16], k and v [T,2,16], positions and p2 i32[T], weights of 32
 * floats, caches @kc/@vc of cache_bytes each, output "a" of at most 4 * 64 floats a step), runs
 * two steps on the CPU backend (T = 3 at positions 0, 1, 2, then T = 2 at positions 5, 3), runs
 * the pass (exactly one rewrite, the result verifies), runs the two steps again on fresh caches
 * and asserts the attention outputs and the cache bytes are BIT FOR BIT those of the unfused
 * graph, and that the steps wrote something (position 5 of K and the second step's output are
 * not zero).
 */
#ifndef LOOM_TESTS_ROPE_KV_NUMERIC_H
#define LOOM_TESTS_ROPE_KV_NUMERIC_H

#include <math.h>
#include <stdio.h>

#include "executor/executor.h"
#include "pass_test.h"

static loom_status rope_kv_resolve(void *ctx, const loom_ir_value *w, const void **data,
                                   loom_error *err) {
    (void)err;
    *data = (const uint8_t *)ctx + w->offset;
    return LOOM_OK;
}

typedef struct rope_kv_result {
    float a[2][4 * 64];                     /* attention output of each step */
    uint8_t kc[8 * 32 * 4], vc[8 * 32 * 4]; /* cache bytes after the second step */
} rope_kv_result;

/* Two steps on the CPU: T = 3 at positions 0, 1, 2, then T = 2 at positions 5, 3. */
static void rope_kv_run(const loom_ir_graph *g, size_t cache_bytes, rope_kv_result *r) {
    static float weights[32], q[3 * 64], k[3 * 32], v[3 * 32];
    for (int i = 0; i < 32; i++) weights[i] = 0.5f + 0.03f * (float)i;
    for (int i = 0; i < 3 * 64; i++) q[i] = sinf(0.7f * (float)i + 0.2f);
    for (int i = 0; i < 3 * 32; i++) k[i] = cosf(0.3f * (float)i) * 1.5f, v[i] = sinf(0.9f * (float)i);
    loom_error err = {0};
    loom_exec_backend *cpu;
    loom_exec *e;
    cr_assert(!loom_exec_cpu_backend_create(1, &cpu, &err), "%s", err.msg);
    cr_assert(!loom_exec_create(g, cpu, rope_kv_resolve, weights, &e, &err), "%s", err.msg);
    static const int32_t pos[2][3] = {{0, 1, 2}, {5, 3, 0}};
    int64_t T[2] = {3, 2};
    for (int s = 0; s < 2; s++) {
        loom_exec_binding in[5] = {{"q", q}, {"k", k}, {"v", v}, {"positions", pos[s]},
                                   {"p2", pos[s]}};
        cr_assert(!loom_exec_run(e, &T[s], in, 5, &err), "step %d: %s", s, err.msg);
        cr_assert(!loom_exec_read_output(e, "a", r->a[s], sizeof r->a[s], NULL, &err), "%s", err.msg);
    }
    size_t kb = 0, vb = 0;
    cr_assert(!loom_exec_read_output(e, "kcache", r->kc, cache_bytes, &kb, &err), "%s", err.msg);
    cr_assert(!loom_exec_read_output(e, "vcache", r->vc, cache_bytes, &vb, &err), "%s", err.msg);
    cr_assert(kb == cache_bytes && vb == cache_bytes);
    loom_exec_destroy(e);
}

/* text + the two cache states as outputs (the buffers, read after the steps). */
static void rope_kv_check_bit_exact(loom_pass_fn pass, const char *text, size_t cache_bytes) {
    char full[4096];
    snprintf(full, sizeof full, "%soutput kcache = @kc\noutput vcache = @vc\n", text);
    loom_ir_graph *g = parse_or_die(full);
    static rope_kv_result before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after); /* read_output fills T rows of a[], the rest stays 0 */
    rope_kv_run(g, cache_bytes, &before);
    loom_error err = {0};
    uint32_t n = 0;
    cr_assert(!pass(g, &n, &err) && n == 1, "%s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "%s", err.msg);
    rope_kv_run(g, cache_bytes, &after);
    cr_assert(!memcmp(before.a, after.a, sizeof before.a), "attention outputs differ");
    cr_assert(!memcmp(before.kc, after.kc, cache_bytes), "K cache bytes differ");
    cr_assert(!memcmp(before.vc, after.vc, cache_bytes), "V cache bytes differ");
    /* The steps wrote something: position 5 of K is not zero, and the output is not zero. */
    bool any = false, any_a = false;
    for (size_t i = cache_bytes / 8 * 5; i < cache_bytes / 8 * 6; i++) any |= after.kc[i] != 0;
    for (size_t i = 0; i < 2 * 64; i++) any_a |= after.a[1][i] != 0.0f;
    cr_assert(any, "position 5 of the K cache was not written");
    cr_assert(any_a, "the second step's attention output is zero");
    loom_ir_graph_destroy(g);
}

#endif
