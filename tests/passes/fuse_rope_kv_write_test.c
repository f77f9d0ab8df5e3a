/* fuse_rope_kv_write_test.c: `fuse-rope-kv-write` in text form, positive (with and without the
 * per-head norms, NEOX and NORM rope, [C,E] and [C,H,D] caches) and negative (one case per
 * condition of the match), and its numeric check on the CPU backend: over two steps (the second
 * with positions that are not consecutive) the fused graph gives the attention output and the
 * F16/F32 cache bytes of the unfused one BIT FOR BIT (the CPU kernel runs the same norm, rope and
 * kv_write code in the same order).
 */
#include <math.h>
#include <stdio.h>

#include "executor/executor.h"
#include "pass_test.h"

#define DECLS "symbol T max=4\n" \
              "input %q : f32[T,4,16]\n" \
              "input %k : f32[T,2,16]\n" \
              "input %v : f32[T,2,16]\n" \
              "input %positions : i32[T]\n" \
              "input %p2 : i32[T]\n" \
              "weight @qw : f32[16] offset=0\n" \
              "weight @kw : f32[16] offset=64\n"
/* qwen3-like: F16 caches [C,H,D], NEOX, per-head norms. */
#define HEAD DECLS "state @kc : f16[8,2,16]\nstate @vc : f16[8,2,16]\n"
#define ROPE "{mode=neox, n_rot=16, freq_base=1e6}"
#define ATTN "{n_head=4, n_kv_head=2, head_dim=16, scale=0.25}"
#define NORMS "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n%kn = fused_rms_norm(%k, @kw) {eps=1e-6}\n"
#define ROPES "%qr = rope(%qn, %positions) " ROPE "\n%kr = rope(%kn, %positions) " ROPE "\n"
#define WRITES "%kc = kv_write(@kc, %kr, %positions)\n%vc = kv_write(@vc, %v, %positions)\n"
#define ATTENTION "%a = attention(%qr, %kc, %vc, %positions) " ATTN "\noutput a = %a\n"
#define QWEN3 HEAD NORMS ROPES WRITES ATTENTION
#define FUSED_QWEN3                                                                      \
    HEAD "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %q, %k, %v, %positions, @qw, @kw) "     \
         "{eps=1e-6, mode=neox, n_rot=16, freq_base=1e6}\n" ATTENTION
/* llama-like: F32 caches [C,E], NORM mode rotating half of each head, no norms. */
#define LLAMA                                                                             \
    DECLS "state @kc : f32[8,32]\nstate @vc : f32[8,32]\n"                                \
          "%qr = rope(%q, %positions) {mode=norm, n_rot=8, freq_base=1e4}\n"              \
          "%kr = rope(%k, %positions) {mode=norm, n_rot=8, freq_base=1e4}\n" WRITES ATTENTION
#define FUSED_LLAMA                                                                       \
    DECLS "state @kc : f32[8,32]\nstate @vc : f32[8,32]\n"                                \
          "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %q, %k, %v, %positions) "              \
          "{eps=0, mode=norm, n_rot=8, freq_base=1e4}\n" ATTENTION

Test(fuse_rope_kv_write, qwen3_prologue_with_norms) {
    expect_pass(loom_pass_fuse_rope_kv_write, QWEN3, FUSED_QWEN3, 1);
}

Test(fuse_rope_kv_write, llama_prologue_without_norms) {
    expect_pass(loom_pass_fuse_rope_kv_write, LLAMA, FUSED_LLAMA, 1);
}

Test(fuse_rope_kv_write, norms_that_do_not_pair_stay_outside) {
    /* Only Q has a norm: it stays, the rest fuses with eps = 0. */
    expect_pass(loom_pass_fuse_rope_kv_write,
                HEAD "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n%kn = silu(%k)\n" ROPES WRITES
                     ATTENTION,
                HEAD "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n%kn = silu(%k)\n"
                     "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %qn, %kn, %v, %positions) "
                     "{eps=0, mode=neox, n_rot=16, freq_base=1e6}\n" ATTENTION,
                1);
    /* Norms of different eps, or a normed K that is used elsewhere too. */
    expect_pass(loom_pass_fuse_rope_kv_write,
                HEAD "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n"
                     "%kn = fused_rms_norm(%k, @kw) {eps=1e-5}\n" ROPES WRITES ATTENTION,
                HEAD "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n"
                     "%kn = fused_rms_norm(%k, @kw) {eps=1e-5}\n"
                     "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %qn, %kn, %v, %positions) "
                     "{eps=0, mode=neox, n_rot=16, freq_base=1e6}\n" ATTENTION,
                1);
    expect_pass(loom_pass_fuse_rope_kv_write,
                HEAD NORMS ROPES WRITES ATTENTION "output kn = %kn\n",
                HEAD NORMS "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %qn, %kn, %v, %positions) "
                           "{eps=0, mode=neox, n_rot=16, freq_base=1e6}\n" ATTENTION
                           "output kn = %kn\n",
                1);
}

Test(fuse_rope_kv_write, roped_k_or_q_or_a_cache_version_used_elsewhere_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_rope_kv_write, QWEN3 "output kr = %kr\n");
    expect_unchanged(loom_pass_fuse_rope_kv_write, HEAD NORMS ROPES WRITES
                     "%s = silu(%qr)\n" ATTENTION "output s = %s\n");
    expect_unchanged(loom_pass_fuse_rope_kv_write, QWEN3 "output kc = %kc\n");
}

Test(fuse_rope_kv_write, different_positions_do_not_fuse) {
    const char *kr_p2 = HEAD NORMS "%qr = rope(%qn, %positions) " ROPE "\n"
                        "%kr = rope(%kn, %p2) " ROPE "\n" WRITES ATTENTION;
    expect_unchanged(loom_pass_fuse_rope_kv_write, kr_p2);
    expect_unchanged(loom_pass_fuse_rope_kv_write,
                     HEAD NORMS ROPES "%kc = kv_write(@kc, %kr, %positions)\n"
                     "%vc = kv_write(@vc, %v, %p2)\n" ATTENTION);
}

Test(fuse_rope_kv_write, mismatched_heads_or_rope_attributes_do_not_fuse) {
    /* V with other heads than K ([T,1,32] also fills the cache's 32 values per position). */
    expect_unchanged(loom_pass_fuse_rope_kv_write,
                     HEAD "input %v1 : f32[T,1,32]\n" NORMS ROPES
                     "%kc = kv_write(@kc, %kr, %positions)\n%vc = kv_write(@vc, %v1, %positions)\n"
                     ATTENTION);
    /* Ropes of Q and K that differ (base; mode). */
    expect_unchanged(loom_pass_fuse_rope_kv_write,
                     HEAD NORMS "%qr = rope(%qn, %positions) " ROPE "\n"
                     "%kr = rope(%kn, %positions) {mode=neox, n_rot=16, freq_base=1e4}\n"
                     WRITES ATTENTION);
    expect_unchanged(loom_pass_fuse_rope_kv_write,
                     HEAD NORMS "%qr = rope(%qn, %positions) " ROPE "\n"
                     "%kr = rope(%kn, %positions) {mode=norm, n_rot=16, freq_base=1e6}\n"
                     WRITES ATTENTION);
}

/* ---- numeric check on the CPU backend ---- */

static loom_status resolve(void *ctx, const loom_ir_value *w, const void **data, loom_error *err) {
    (void)err;
    *data = (const uint8_t *)ctx + w->offset;
    return LOOM_OK;
}

typedef struct result {
    float a[2][4 * 64];             /* attention output of each step */
    uint8_t kc[8 * 32 * 4], vc[8 * 32 * 4]; /* cache bytes after the second step */
} result;

/* Two steps on the CPU: T = 3 at positions 0, 1, 2, then T = 2 at positions 5, 3. */
static void run(const loom_ir_graph *g, size_t cache_bytes, result *r) {
    static float weights[32], q[3 * 64], k[3 * 32], v[3 * 32];
    for (int i = 0; i < 32; i++) weights[i] = 0.5f + 0.03f * (float)i;
    for (int i = 0; i < 3 * 64; i++) q[i] = sinf(0.7f * (float)i + 0.2f);
    for (int i = 0; i < 3 * 32; i++) k[i] = cosf(0.3f * (float)i) * 1.5f, v[i] = sinf(0.9f * (float)i);
    loom_error err = {0};
    loom_exec_backend *cpu;
    loom_exec *e;
    cr_assert(!loom_exec_cpu_backend_create(1, &cpu, &err), "%s", err.msg);
    cr_assert(!loom_exec_create(g, cpu, resolve, weights, &e, &err), "%s", err.msg);
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
static void check_bit_exact(const char *text, size_t cache_bytes) {
    char full[4096];
    snprintf(full, sizeof full, "%soutput kcache = @kc\noutput vcache = @vc\n", text);
    loom_ir_graph *g = parse_or_die(full);
    static result before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after); /* read_output fills T rows of a[], the rest stays 0 */
    run(g, cache_bytes, &before);
    loom_error err = {0};
    uint32_t n = 0;
    cr_assert(!loom_pass_fuse_rope_kv_write(g, &n, &err) && n == 1, "%s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "%s", err.msg);
    run(g, cache_bytes, &after);
    cr_assert(!memcmp(before.a, after.a, sizeof before.a), "attention outputs differ");
    cr_assert(!memcmp(before.kc, after.kc, cache_bytes), "K cache bytes differ");
    cr_assert(!memcmp(before.vc, after.vc, cache_bytes), "V cache bytes differ");
    /* The steps wrote something: position 5 of K is not zero. */
    bool any = false;
    for (size_t i = cache_bytes / 8 * 5; i < cache_bytes / 8 * 6; i++) any |= after.kc[i] != 0;
    cr_assert(any, "position 5 of the K cache was not written");
    loom_ir_graph_destroy(g);
}

Test(fuse_rope_kv_write, fused_equals_unfused_bit_for_bit_on_cpu) {
    check_bit_exact(QWEN3, 8 * 32 * 2);      /* F16 caches, norms, NEOX */
    check_bit_exact(LLAMA, 8 * 32 * 4);      /* F32 caches, no norms, NORM, n_rot < D */
}
