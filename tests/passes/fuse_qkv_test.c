/* fuse_qkv_test.c: `fuse-qkv` in text form: the llama projections with a q4_k/q4_k/q6_k mix,
 * qwen2's biases riding along, the three products kept in program order; and what must not fuse
 * (inputs differ, two or four matmuls of one input, biases on only some products, an
 * intermediate product with another use).
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,256]\n" \
             "input %y : f32[T,256]\n" \
             "weight @wq : q4_k[256,256]\n" \
             "weight @wk : q4_k[128,256]\n" \
             "weight @wv : q6_k[128,256]\n" \
             "weight @bq : f32[256]\n" \
             "weight @bk : f32[128]\n" \
             "weight @bv : f32[128]\n"

Test(fuse_qkv, mixed_weight_types) {
    expect_pass(loom_pass_fuse_qkv,
                HEAD "%q = matmul(%x, @wq)\n"
                     "%k = matmul(%x, @wk)\n"
                     "%v = matmul(%x, @wv)\n"
                     "%s = silu(%k)\n"
                     "output q = %q\noutput s = %s\noutput v = %v\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv)\n"
                     "%s = silu(%k)\n"
                     "output q = %q\noutput s = %s\noutput v = %v\n",
                1);
}

Test(fuse_qkv, program_order_decides_the_results_order) {
    expect_pass(loom_pass_fuse_qkv,
                HEAD "%v = matmul(%x, @wv)\n"
                     "%q = matmul(%x, @wq)\n"
                     "%k = matmul(%x, @wk)\n"
                     "output q = %q\noutput k = %k\noutput v = %v\n",
                HEAD "%v, %q, %k = matmul_triple(%x, @wv, @wq, @wk)\n"
                     "output q = %q\noutput k = %k\noutput v = %v\n",
                1);
}

Test(fuse_qkv, qwen2_biases_ride_along) {
    expect_pass(loom_pass_fuse_qkv,
                HEAD "%q = matmul(%x, @wq)\n"
                     "%k = matmul(%x, @wk)\n"
                     "%v = matmul(%x, @wv)\n"
                     "%qb = add(%q, @bq)\n"
                     "%kb = add(%k, @bk)\n"
                     "%vb = add(%v, @bv)\n"
                     "output q = %qb\noutput k = %kb\noutput v = %vb\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @bq, @bk, @bv)\n"
                     "output q = %q\noutput k = %k\noutput v = %v\n",
                1);
}

Test(fuse_qkv, bias_on_only_some_products_stays_an_add) {
    expect_pass(loom_pass_fuse_qkv,
                HEAD "%q = matmul(%x, @wq)\n"
                     "%k = matmul(%x, @wk)\n"
                     "%v = matmul(%x, @wv)\n"
                     "%qb = add(%q, @bq)\n"
                     "output q = %qb\noutput k = %k\noutput v = %v\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv)\n"
                     "%qb = add(%q, @bq)\n"
                     "output q = %qb\noutput k = %k\noutput v = %v\n",
                1);
}

Test(fuse_qkv, biased_product_with_another_use_keeps_its_add) {
    /* %q is also an output: the biases cannot be absorbed, the products still fuse. */
    expect_pass(loom_pass_fuse_qkv,
                HEAD "%q = matmul(%x, @wq)\n"
                     "%k = matmul(%x, @wk)\n"
                     "%v = matmul(%x, @wv)\n"
                     "%qb = add(%q, @bq)\n"
                     "%kb = add(%k, @bk)\n"
                     "%vb = add(%v, @bv)\n"
                     "output q = %qb\noutput k = %kb\noutput v = %vb\noutput raw = %q\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv)\n"
                     "%qb = add(%q, @bq)\n"
                     "%kb = add(%k, @bk)\n"
                     "%vb = add(%v, @bv)\n"
                     "output q = %qb\noutput k = %kb\noutput v = %vb\noutput raw = %q\n",
                1);
}

Test(fuse_qkv, different_inputs_do_not_fuse) {
    expect_unchanged(loom_pass_fuse_qkv,
                     HEAD "%q = matmul(%x, @wq)\n"
                          "%k = matmul(%x, @wk)\n"
                          "%v = matmul(%y, @wv)\n"
                          "output q = %q\noutput k = %k\noutput v = %v\n");
}

Test(fuse_qkv, two_or_four_matmuls_do_not_fuse) {
    expect_unchanged(loom_pass_fuse_qkv,
                     HEAD "%q = matmul(%x, @wq)\n"
                          "%k = matmul(%x, @wk)\n"
                          "output q = %q\noutput k = %k\n");
    expect_unchanged(loom_pass_fuse_qkv,
                     HEAD "%q = matmul(%x, @wq)\n"
                          "%k = matmul(%x, @wk)\n"
                          "%v = matmul(%x, @wv)\n"
                          "%w = matmul(%x, @wv)\n"
                          "output q = %q\noutput k = %k\noutput v = %v\noutput w = %w\n");
}
