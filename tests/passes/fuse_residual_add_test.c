/* fuse_residual_add_test.c: `fuse-residual-add` in text form: the attention output and FFN down
 * projections with their residual adds (either operand order); and what must not fuse (the
 * product has another use or is an output, a bias vector instead of a full-shape residual, an
 * add of two plain activations, add(p, p)).
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,256]\n" \
             "input %r : f32[T,256]\n" \
             "weight @wo : q4_k[256,256]\n" \
             "weight @wd : q6_k[256,768]\n" \
             "weight @b : f32[256]\n"

Test(fuse_residual_add, attention_output_and_ffn_down) {
    expect_pass(loom_pass_fuse_residual_add,
                HEAD "input %h : f32[T,768]\n"
                     "%p = matmul(%x, @wo)\n"
                     "%x1 = add(%p, %r)\n"
                     "%d = matmul(%h, @wd)\n"
                     "%x2 = add(%x1, %d)\n"
                     "output y = %x2\n",
                HEAD "input %h : f32[T,768]\n"
                     "%x1 = matmul_add(%x, @wo, %r)\n"
                     "%x2 = matmul_add(%h, @wd, %x1)\n"
                     "output y = %x2\n",
                2);
}

Test(fuse_residual_add, product_with_another_use_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%p = matmul(%x, @wo)\n"
                          "%y = add(%p, %r)\n"
                          "%z = silu(%p)\n"
                          "output y = %y\noutput z = %z\n");
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%p = matmul(%x, @wo)\n"
                          "%y = add(%p, %r)\n"
                          "output y = %y\noutput p = %p\n");
}

Test(fuse_residual_add, bias_vector_is_no_residual) {
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%p = matmul(%x, @wo)\n"
                          "%y = add(%p, @b)\n"
                          "output y = %y\n");
}

Test(fuse_residual_add, add_without_matmul_and_self_add_do_not_fuse) {
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%s = silu(%x)\n"
                          "%y = add(%s, %r)\n"
                          "output y = %y\n");
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%p = matmul(%x, @wo)\n"
                          "%y = add(%p, %p)\n"
                          "output y = %y\n");
}
