/* fuse_matmul_pair_test.c: `fuse-matmul-pair` (the example of docs/writing-a-pass.md) in text
 * form, positive and negative, and its numeric check: the fused graph gives the same result as
 * the unfused one on the CPU backend, with f32 and q8_0 weights held in memory.
 */
#include <math.h>

#include "executor/executor.h"
#include "pass_test.h"

#define HEAD "symbol T max=4\n" \
             "input %x : f32[T,64]\n" \
             "input %y : f32[T,64]\n" \
             "weight @w0 : f32[32,64] offset=0\n" \
             "weight @w1 : q8_0[48,64] offset=8192\n"

Test(fuse_matmul_pair, two_matmuls_of_one_input) {
    expect_pass(loom_pass_fuse_matmul_pair,
                HEAD "%a = matmul(%x, @w0)\n"
                     "%s = silu(%a)\n"
                     "%b = matmul(%x, @w1)\n"
                     "output s = %s\noutput b = %b\n",
                HEAD "%a, %b = matmul_pair(%x, @w0, @w1) {swiglu=0}\n"
                     "%s = silu(%a)\n"
                     "output s = %s\noutput b = %b\n",
                1);
}

Test(fuse_matmul_pair, different_inputs_or_three_matmuls_do_not_fuse) {
    expect_unchanged(loom_pass_fuse_matmul_pair,
                     HEAD "%a = matmul(%x, @w0)\n%b = matmul(%y, @w1)\n"
                          "output a = %a\noutput b = %b\n");
    expect_unchanged(loom_pass_fuse_matmul_pair,
                     HEAD "%a = matmul(%x, @w0)\n%b = matmul(%x, @w1)\n%c = matmul(%x, @w0)\n"
                          "output a = %a\noutput b = %b\noutput c = %c\n");
}

/* Weights live in one buffer at their recorded offsets. */
static loom_status resolve(void *ctx, const loom_ir_value *w, const void **data, loom_error *err) {
    (void)err;
    *data = (const uint8_t *)ctx + w->offset;
    return LOOM_OK;
}

/* Runs g on the CPU with T = 3 and writes outputs a and b. */
static void run(const loom_ir_graph *g, const uint8_t *weights, const float *x, float *a,
                float *b) {
    loom_error err = {0};
    loom_exec_backend *cpu;
    loom_exec *e;
    cr_assert(!loom_exec_cpu_backend_create(1, &cpu, &err), "%s", err.msg);
    cr_assert(!loom_exec_create(g, cpu, resolve, (void *)weights, &e, &err), "%s", err.msg);
    int64_t T = 3;
    loom_exec_binding in[2] = {{"x", x}, {"y", x}};
    cr_assert(!loom_exec_run(e, &T, in, 2, &err), "%s", err.msg);
    cr_assert(!loom_exec_read_output(e, "a", a, 3 * 32 * sizeof *a, NULL, &err), "%s", err.msg);
    cr_assert(!loom_exec_read_output(e, "b", b, 3 * 48 * sizeof *b, NULL, &err), "%s", err.msg);
    loom_exec_destroy(e);
}

Test(fuse_matmul_pair, fused_equals_unfused_on_cpu) {
    const char *text = HEAD "%a = matmul(%x, @w0)\n%b = matmul(%x, @w1)\n"
                            "output a = %a\noutput b = %b\n";
    /* w0: 32x64 f32 at 0; w1: 48x64 q8_0 at 8192 (blocks of 32: f16 scale + 32 int8). */
    static uint8_t weights[8192 + 48 * 2 * 34];
    float *w0 = (float *)weights, x[3 * 64];
    for (int i = 0; i < 32 * 64; i++) w0[i] = sinf((float)i * 0.37f) * 0.1f;
    for (int blk = 0; blk < 48 * 2; blk++) {
        uint8_t *p = weights + 8192 + blk * 34;
        p[0] = 0x00, p[1] = 0x20; /* f16 0.0078125 */
        for (int j = 0; j < 32; j++) p[2 + j] = (uint8_t)(int8_t)((blk * 7 + j * 13) % 255 - 127);
    }
    for (int i = 0; i < 3 * 64; i++) x[i] = cosf((float)i * 0.11f);
    loom_ir_graph *g = parse_or_die(text);
    float a0[3 * 32], b0[3 * 48], a1[3 * 32], b1[3 * 48];
    run(g, weights, x, a0, b0);
    loom_error err = {0};
    uint32_t n = 0;
    cr_assert(!loom_pass_fuse_matmul_pair(g, &n, &err) && n == 1, "%s", err.msg);
    cr_assert(!loom_ir_verify(g, &err), "%s", err.msg);
    run(g, weights, x, a1, b1);
    for (int i = 0; i < 3 * 32; i++) cr_assert_float_eq(a1[i], a0[i], 1e-5f * (1 + fabsf(a0[i])));
    for (int i = 0; i < 3 * 48; i++) cr_assert_float_eq(b1[i], b0[i], 1e-5f * (1 + fabsf(b0[i])));
    loom_ir_graph_destroy(g);
}
