/* fuse_rope_kv_write_test.c: `fuse-rope-kv-write` in text form, positive (with and without the
 * per-head norms, NEOX and NORM rope, [C,E] and [C,H,D] caches) and negative (one case per
 * condition of the match), and its numeric check on the CPU backend: over two steps (the second
 * with positions that are not consecutive) the fused graph gives the attention output and the
 * F16/F32 cache bytes of the unfused one BIT FOR BIT (the CPU kernel runs the same norm, rope and
 * kv_write code in the same order).
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

/* ---- numeric check on the CPU backend (rope_kv_numeric.h) ---- */

Test(fuse_rope_kv_write, fused_equals_unfused_bit_for_bit_on_cpu) {
    /* F16 caches, norms, NEOX; then F32 caches, no norms, NORM, n_rot < D. */
    rope_kv_check_bit_exact(loom_pass_fuse_rope_kv_write, QWEN3, 8 * 32 * 2);
    rope_kv_check_bit_exact(loom_pass_fuse_rope_kv_write, LLAMA, 8 * 32 * 4);
}
