/* fuse_norm_weight_test.c: `fuse-norm-weight` in text form: the layer norm, qwen3's per-head
 * norm on a [T,H,D] view, mul with the operands swapped; and what must not fuse (the norm has a
 * second use or is an output, the multiplier is not a [D] vector, an rms_norm-free mul).
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,16]\n" \
             "weight @w : f32[16]\n" \
             "weight @hw : f32[4]\n"

Test(fuse_norm_weight, layer_norm) {
    expect_pass(loom_pass_fuse_norm_weight,
                HEAD "%n = rms_norm(%x) {eps=1e-5}\n"
                     "%y = mul(%n, @w)\n"
                     "output y = %y\n",
                HEAD "%y = fused_rms_norm(%x, @w) {eps=1e-5}\n"
                     "output y = %y\n",
                1);
}

Test(fuse_norm_weight, per_head_norm_and_chained_norms) {
    /* qwen3's per-head norm: [T,4,4] view times a [4] weight; then a second norm of the
     * result (both fuse in one run). */
    expect_pass(loom_pass_fuse_norm_weight,
                HEAD "%h = reshape(%x) {shape=[T,4,4]}\n"
                     "%n = rms_norm(%h) {eps=1e-6}\n"
                     "%y = mul(%n, @hw)\n"
                     "%n2 = rms_norm(%y) {eps=1e-6}\n"
                     "%y2 = mul(%n2, @hw)\n"
                     "output y = %y2\n",
                HEAD "%h = reshape(%x) {shape=[T,4,4]}\n"
                     "%y = fused_rms_norm(%h, @hw) {eps=1e-6}\n"
                     "%y2 = fused_rms_norm(%y, @hw) {eps=1e-6}\n"
                     "output y = %y2\n",
                2);
}

Test(fuse_norm_weight, vector_norm_operands_swapped) {
    /* On rank-1 activations both mul operands are [16]: the norm may be operand 1, and the
     * weight may be an activation vector. */
    expect_pass(loom_pass_fuse_norm_weight,
                "input %x : f32[16]\ninput %w : f32[16]\n"
                "%n = rms_norm(%x) {eps=1e-5}\n"
                "%y = mul(%w, %n)\n"
                "output y = %y\n",
                "input %x : f32[16]\ninput %w : f32[16]\n"
                "%y = fused_rms_norm(%x, %w) {eps=1e-5}\n"
                "output y = %y\n",
                1);
}

Test(fuse_norm_weight, norm_with_another_use_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_norm_weight,
                     HEAD "%n = rms_norm(%x) {eps=1e-5}\n"
                          "%y = mul(%n, @w)\n"
                          "%z = add(%y, %n)\n"
                          "output z = %z\n");
}

Test(fuse_norm_weight, norm_that_is_an_output_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_norm_weight,
                     HEAD "%n = rms_norm(%x) {eps=1e-5}\n"
                          "%y = mul(%n, @w)\n"
                          "output y = %y\n"
                          "output n = %n\n");
}

Test(fuse_norm_weight, full_shape_multiplier_does_not_fuse) {
    /* mul by an activation of the full shape is not a norm weight. */
    expect_unchanged(loom_pass_fuse_norm_weight,
                     HEAD "input %s : f32[T,16]\n"
                          "%n = rms_norm(%x) {eps=1e-5}\n"
                          "%y = mul(%n, %s)\n"
                          "output y = %y\n");
}

Test(fuse_norm_weight, weight_of_other_length_does_not_fuse) {
    /* [T,4,4] times a [4,4] weight matrix broadcasts for mul, but is no per-row vector. */
    expect_unchanged(loom_pass_fuse_norm_weight,
                     HEAD "weight @m : f32[4,4]\n"
                          "%h = reshape(%x) {shape=[T,4,4]}\n"
                          "%n = rms_norm(%h) {eps=1e-5}\n"
                          "%y = mul(%n, @m)\n"
                          "output y = %y\n");
}

Test(fuse_norm_weight, mul_without_norm_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_norm_weight,
                     HEAD "%s = silu(%x)\n"
                          "%y = mul(%s, @w)\n"
                          "output y = %y\n");
}
