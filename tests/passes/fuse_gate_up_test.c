/* fuse_gate_up_test.c: `fuse-gate-up` in text form: the SwiGLU FFN with either operand order of
 * the mul and mixed weight types; and what must not fuse (gate and up of different inputs, an
 * intermediate with another use or that is an output, a gate that is no plain matmul, a mul
 * without silu).
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,256]\n" \
             "input %y : f32[T,256]\n" \
             "weight @wg : q4_k[768,256]\n" \
             "weight @wu : q6_k[768,256]\n" \
             "weight @wn : q4_k[512,256]\n"

Test(fuse_gate_up, swiglu) {
    expect_pass(loom_pass_fuse_gate_up,
                HEAD "%g = matmul(%x, @wg)\n"
                     "%u = matmul(%x, @wu)\n"
                     "%s = silu(%g)\n"
                     "%f = mul(%s, %u)\n"
                     "output f = %f\n",
                HEAD "%f = matmul_pair(%x, @wg, @wu) {swiglu=1}\n"
                     "output f = %f\n",
                1);
}

Test(fuse_gate_up, up_times_silu_gate) {
    expect_pass(loom_pass_fuse_gate_up,
                HEAD "%u = matmul(%x, @wu)\n"
                     "%g = matmul(%x, @wg)\n"
                     "%s = silu(%g)\n"
                     "%f = mul(%u, %s)\n"
                     "output f = %f\n",
                HEAD "%f = matmul_pair(%x, @wg, @wu) {swiglu=1}\n"
                     "output f = %f\n",
                1);
}

Test(fuse_gate_up, different_inputs_do_not_fuse) {
    expect_unchanged(loom_pass_fuse_gate_up,
                     HEAD "%g = matmul(%x, @wg)\n"
                          "%u = matmul(%y, @wu)\n"
                          "%s = silu(%g)\n"
                          "%f = mul(%s, %u)\n"
                          "output f = %f\n");
}

Test(fuse_gate_up, intermediate_with_another_use_does_not_fuse) {
    const char *other_use[] = {
        HEAD "%g = matmul(%x, @wg)\n%u = matmul(%x, @wu)\n%s = silu(%g)\n%f = mul(%s, %u)\n"
             "%z = add(%f, %g)\noutput z = %z\n",
        HEAD "%g = matmul(%x, @wg)\n%u = matmul(%x, @wu)\n%s = silu(%g)\n%f = mul(%s, %u)\n"
             "%z = add(%f, %s)\noutput z = %z\n",
        HEAD "%g = matmul(%x, @wg)\n%u = matmul(%x, @wu)\n%s = silu(%g)\n%f = mul(%s, %u)\n"
             "%z = add(%f, %u)\noutput z = %z\n",
        HEAD "%g = matmul(%x, @wg)\n%u = matmul(%x, @wu)\n%s = silu(%g)\n%f = mul(%s, %u)\n"
             "output f = %f\noutput u = %u\n",
    };
    for (size_t i = 0; i < sizeof other_use / sizeof *other_use; i++)
        expect_unchanged(loom_pass_fuse_gate_up, other_use[i]);
}

Test(fuse_gate_up, gate_that_is_no_matmul_does_not_fuse) {
    /* silu of a biased gate: the pattern wants silu(matmul) exactly. (Widths cannot disagree
     * here: with one input, mul only type-checks when gate and up have the same type.) */
    expect_unchanged(loom_pass_fuse_gate_up,
                     HEAD "weight @bg : f32[768]\n"
                          "%g = matmul(%x, @wg)\n"
                          "%u = matmul(%x, @wu)\n"
                          "%gb = add(%g, @bg)\n"
                          "%s = silu(%gb)\n"
                          "%f = mul(%s, %u)\n"
                          "output f = %f\n");
}

Test(fuse_gate_up, mul_without_silu_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_gate_up,
                     HEAD "%g = matmul(%x, @wg)\n"
                          "%u = matmul(%x, @wu)\n"
                          "%f = mul(%g, %u)\n"
                          "output f = %f\n");
}
