/* dce_test.c: `dce` in text form: a dead chain goes in one run, outputs and state writes stay
 * (a kv_write whose result nobody reads is an effect), a graph with nothing dead is unchanged.
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,16]\n" \
             "input %pos : i32[T]\n" \
             "weight @w : f32[16]\n" \
             "state @kv : f32[32,16]\n"

Test(dce, dead_chain_goes_state_write_stays) {
    expect_pass(loom_pass_dce,
                HEAD "%a = silu(%x)\n"
                     "%b = mul(%a, @w)\n"
                     "%c = softmax(%b)\n"
                     "%kc = kv_write(@kv, %x, %pos)\n"
                     "%y = add(%x, @w)\n"
                     "output y = %y\n",
                HEAD "%kc = kv_write(@kv, %x, %pos)\n"
                     "%y = add(%x, @w)\n"
                     "output y = %y\n",
                3);
}

Test(dce, nothing_dead_is_unchanged) {
    expect_unchanged(loom_pass_dce,
                     HEAD "%a = silu(%x)\n"
                          "%b = mul(%a, @w)\n"
                          "output a = %a\noutput b = %b\n");
}
