/* fuse_rope_kv_attention_test.c: `fuse-rope-kv-attention` in text form: positive (with and
 * without the per-head norms, F16 [C,H,D] and F32 [C,E] caches, caches with further users),
 * negative (one case per condition: the roped q used elsewhere, other positions, other caches,
 * a q that is not the roped one), a second run that rewrites nothing, and the numeric check on
 * the CPU backend: over two steps (the second with positions that are not consecutive) the fused
 * graph gives the attention output and the F16/F32 cache bytes of the unfused one BIT FOR BIT
 * (the CPU backend runs the unfused pair's kernel calls).
 */
#include "rope_kv_numeric.h"

#define DECLS "symbol T max=4\n" \
              "input %q : f32[T,4,16]\n" \
              "input %k : f32[T,2,16]\n" \
              "input %v : f32[T,2,16]\n" \
              "input %positions : i32[T]\n" \
              "input %p2 : i32[T]\n" \
              "weight @qw : f32[16] offset=0\n" \
              "weight @kw : f32[16] offset=64\n"
#define F16_CACHES "state @kc : f16[8,2,16]\nstate @vc : f16[8,2,16]\n"
#define F32_CACHES "state @kc : f32[8,32]\nstate @vc : f32[8,32]\n"
#define ROPE_N "{eps=1e-6, mode=neox, n_rot=16, freq_base=1e6}"
#define ROPE_L "{eps=0, mode=norm, n_rot=8, freq_base=1e4}"
#define ATTN "{n_head=4, n_kv_head=2, head_dim=16, scale=0.25}"
#define FUSED_N "{eps=1e-6, mode=neox, n_rot=16, freq_base=1e6, n_head=4, n_kv_head=2, " \
                "head_dim=16, scale=0.25}"
#define FUSED_L "{eps=0, mode=norm, n_rot=8, freq_base=1e4, n_head=4, n_kv_head=2, " \
                "head_dim=16, scale=0.25}"
#define RKW_N "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %q, %k, %v, %positions, @qw, @kw) " \
              ROPE_N "\n"
#define RKW_L "%kc, %vc, %qr = rope_kv_write(@kc, @vc, %q, %k, %v, %positions) " ROPE_L "\n"
#define ATTENTION "%a = attention(%qr, %kc, %vc, %positions) " ATTN "\noutput a = %a\n"
/* qwen3-like (norms, NEOX, F16 [C,H,D]) and llama-like (no norms, NORM, F32 [C,E]). */
#define QWEN3 DECLS F16_CACHES RKW_N ATTENTION
#define FUSED_QWEN3                                                                          \
    DECLS F16_CACHES "%kc, %vc, %a = rope_kv_attention(@kc, @vc, %q, %k, %v, %positions, @qw, " \
                     "@kw) " FUSED_N "\noutput a = %a\n"
#define LLAMA DECLS F32_CACHES RKW_L ATTENTION
#define FUSED_LLAMA                                                                          \
    DECLS F32_CACHES "%kc, %vc, %a = rope_kv_attention(@kc, @vc, %q, %k, %v, %positions) "     \
                     FUSED_L "\noutput a = %a\n"

Test(fuse_rope_kv_attention, qwen3_prologue_with_norms) {
    expect_pass(loom_pass_fuse_rope_kv_attention, QWEN3, FUSED_QWEN3, 1);
}

Test(fuse_rope_kv_attention, llama_prologue_without_norms) {
    expect_pass(loom_pass_fuse_rope_kv_attention, LLAMA, FUSED_LLAMA, 1);
}

Test(fuse_rope_kv_attention, a_second_run_rewrites_nothing) {
    expect_unchanged(loom_pass_fuse_rope_kv_attention, FUSED_QWEN3);
    expect_unchanged(loom_pass_fuse_rope_kv_attention, FUSED_LLAMA);
}

Test(fuse_rope_kv_attention, caches_with_further_users_move_to_the_fused_node) {
    /* A cache version named as an output and read by a second attention (of another q): both
     * read the fused node's cache results after the rewrite. */
    expect_pass(loom_pass_fuse_rope_kv_attention,
                DECLS F16_CACHES RKW_N ATTENTION
                "%b = attention(%q, %kc, %vc, %positions) " ATTN "\n"
                "output kc = %kc\noutput b = %b\n",
                DECLS F16_CACHES
                "%kc, %vc, %a = rope_kv_attention(@kc, @vc, %q, %k, %v, %positions, @qw, @kw) "
                FUSED_N "\noutput a = %a\n"
                "%b = attention(%q, %kc, %vc, %positions) " ATTN "\n"
                "output kc = %kc\noutput b = %b\n",
                1);
}

Test(fuse_rope_kv_attention, roped_q_used_elsewhere_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_rope_kv_attention, QWEN3 "output qr = %qr\n");
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES RKW_N "%s = silu(%qr)\n" ATTENTION "output s = %s\n");
}

Test(fuse_rope_kv_attention, other_positions_caches_or_q_do_not_fuse) {
    /* The attention at other positions than the write. */
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES RKW_N
                     "%a = attention(%qr, %kc, %vc, %p2) " ATTN "\noutput a = %a\n");
    /* The attention reads the caches before the write (the state values). */
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES RKW_N
                     "%a = attention(%qr, @kc, @vc, %positions) " ATTN "\noutput a = %a\n");
    /* K and V swapped. */
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES RKW_N
                     "%a = attention(%qr, %vc, %kc, %positions) " ATTN "\noutput a = %a\n");
    /* The attention's q is not the roped q (the write alone stays). */
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES RKW_N
                     "%a = attention(%q, %kc, %vc, %positions) " ATTN "\noutput a = %a\n");
    /* The unfused chain (no rope_kv_write) is not this pass's business. */
    expect_unchanged(loom_pass_fuse_rope_kv_attention,
                     DECLS F16_CACHES
                     "%qr = rope(%q, %positions) {mode=neox, n_rot=16, freq_base=1e6}\n"
                     "%kr = rope(%k, %positions) {mode=neox, n_rot=16, freq_base=1e6}\n"
                     "%kc = kv_write(@kc, %kr, %positions)\n%vc = kv_write(@vc, %v, %positions)\n"
                     ATTENTION);
}

Test(fuse_rope_kv_attention, follows_fuse_rope_kv_write_in_o2) {
    /* -O2 makes the rope_kv_write from the primitive chain, then folds it into the attention. */
    loom_ir_graph *g = parse_or_die(
        DECLS F16_CACHES
        "%qn = fused_rms_norm(%q, @qw) {eps=1e-6}\n%kn = fused_rms_norm(%k, @kw) {eps=1e-6}\n"
        "%qr = rope(%qn, %positions) {mode=neox, n_rot=16, freq_base=1e6}\n"
        "%kr = rope(%kn, %positions) {mode=neox, n_rot=16, freq_base=1e6}\n"
        "%kc = kv_write(@kc, %kr, %positions)\n%vc = kv_write(@vc, %v, %positions)\n" ATTENTION);
    loom_ir_graph *w = parse_or_die(FUSED_QWEN3);
    loom_error err = {0}, diff = {0};
    cr_assert(!loom_pass_run_pipeline(g, "-O2", true, &err), "%s", err.msg);
    loom_ir_meta_set_string(w, "passes", LOOM_PASS_PIPELINE_O2, &err);
    cr_assert(loom_ir_graph_equal(g, w, &diff), "%s", diff.msg);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(w);
}

/* ---- numeric check on the CPU backend (rope_kv_numeric.h) ---- */

Test(fuse_rope_kv_attention, fused_equals_unfused_bit_for_bit_on_cpu) {
    /* F16 caches, norms, NEOX; then F32 caches, no norms, NORM, n_rot < D. */
    rope_kv_check_bit_exact(loom_pass_fuse_rope_kv_attention, QWEN3, 8 * 32 * 2);
    rope_kv_check_bit_exact(loom_pass_fuse_rope_kv_attention, LLAMA, 8 * 32 * 4);
}
