/* cse_test.c: `cse` in text form: equal nodes merge into the first (also chains that become
 * equal once their operands merged); nodes that differ in an operand, its order or an attribute
 * stay, and two kv_writes are never merged.
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,16]\n" \
             "input %pos : i32[T]\n" \
             "weight @w : f32[16]\n" \
             "weight @m : f32[16,16]\n" \
             "state @kv : f32[32,16]\n"

Test(cse, equal_nodes_and_chains_merge) {
    expect_pass(loom_pass_cse,
                HEAD "%a = rms_norm(%x) {eps=1e-5}\n"
                     "%b = rms_norm(%x) {eps=1e-5}\n"
                     "%c = mul(%a, @w)\n"
                     "%d = mul(%b, @w)\n"
                     "%e = add(%c, %d)\n"
                     "output e = %e\n",
                HEAD "%a = rms_norm(%x) {eps=1e-5}\n"
                     "%c = mul(%a, @w)\n"
                     "%e = add(%c, %c)\n"
                     "output e = %e\n",
                2);
}

Test(cse, output_of_the_merged_node_follows) {
    expect_pass(loom_pass_cse,
                HEAD "%a = matmul(%x, @m)\n%b = matmul(%x, @m)\n"
                     "output a = %a\noutput b = %b\n",
                HEAD "%a = matmul(%x, @m)\n"
                     "output a = %a\noutput b = %a\n",
                1);
}

Test(cse, different_attributes_operands_and_state_writes_stay) {
    expect_unchanged(loom_pass_cse,
                     HEAD "%a = rms_norm(%x) {eps=1e-5}\n"
                          "%b = rms_norm(%x) {eps=1e-6}\n"
                          "%s = silu(%x)\n"
                          "%c = add(%x, %s)\n"
                          "%d = add(%s, %x)\n"
                          "%k1 = kv_write(@kv, %x, %pos)\n"
                          "output a = %a\noutput b = %b\noutput c = %c\noutput d = %d\n");
}
