/* fuse_norm_matmul_test.c: `fuse-norm-matmul` in text form: the two norms of a layer (the
 * attention norm into matmul_triple, with and without qwen2's biases; the FFN norm into
 * matmul_pair, with and without SwiGLU; a norm weight at a file offset that is not 16-byte
 * aligned folds too: the CUDA backend runs that node unfolded, tests/executor/
 * cuda_decisions_test.c), and what must not fuse (the final norm before the lm head's plain
 * matmul, the norm's result used elsewhere, an f16/bf16 norm weight, an unweighted rms_norm, a
 * node that already has a prenorm, the norm feeding another operand or another op). Plus the
 * other fusions leaving normed matmuls alone (they would drop the norm), and -O2 running the
 * pass.
 * The numeric check (fused == unfused bit for bit on the CPU backend) is in models_test.c.
 */
#include "pass_test.h"

#define HEAD "symbol T max=8\n" \
             "input %x : f32[T,256]\n" \
             "input %r : f32[T,256]\n" \
             "weight @nw : f32[256]\n" \
             "weight @nw2 : f32[256]\n" \
             "weight @nh : f16[256]\n" \
             "weight @nb : bf16[256]\n" \
             "weight @n8 : f32[256] offset=8\n" \
             "weight @wq : q4_k[256,256]\n" \
             "weight @wk : q4_k[128,256]\n" \
             "weight @wv : q6_k[128,256]\n" \
             "weight @bq : f32[256]\n" \
             "weight @bk : f32[128]\n" \
             "weight @bv : f32[128]\n" \
             "weight @wg : q4_k[512,256]\n" \
             "weight @wu : q4_k[512,256]\n" \
             "weight @wo : q6_k[1000,256]\n"
#define NORM "%xn = fused_rms_norm(%x, @nw) {eps=1e-6}\n"

Test(fuse_norm_matmul, attention_norm_into_the_triple) {
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD NORM "%q, %k, %v = matmul_triple(%xn, @wq, @wk, @wv)\n"
                          "output q = %q\noutput k = %k\noutput v = %v\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @nw) {norm_eps=1e-6}\n"
                     "output q = %q\noutput k = %k\noutput v = %v\n",
                1);
    /* qwen2: the weight goes after the biases (8 operands). */
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD NORM "%q, %k, %v = matmul_triple(%xn, @wq, @wk, @wv, @bq, @bk, @bv)\n"
                          "output q = %q\noutput k = %k\noutput v = %v\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @bq, @bk, @bv, @nw) "
                     "{norm_eps=1e-6}\n"
                     "output q = %q\noutput k = %k\noutput v = %v\n",
                1);
}

Test(fuse_norm_matmul, ffn_norm_into_the_pair_but_not_the_final_norm_into_the_lm_head) {
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD NORM "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n",
                HEAD "%y = matmul_pair(%x, @wg, @wu, @nw) {swiglu=1, norm_eps=1e-6}\n"
                     "output y = %y\n",
                1);
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD NORM "%a, %b = matmul_pair(%xn, @wg, @wu) {swiglu=0}\n"
                          "output a = %a\noutput b = %b\n",
                HEAD "%a, %b = matmul_pair(%x, @wg, @wu, @nw) {swiglu=0, norm_eps=1e-6}\n"
                     "output a = %a\noutput b = %b\n",
                1);
    /* eps = 0 is a norm too: the operand says so, the attribute is elided at its default. */
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD "%xn = fused_rms_norm(%x, @nw) {eps=0}\n"
                     "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n",
                HEAD "%y = matmul_pair(%x, @wg, @wu, @nw) {swiglu=1}\noutput y = %y\n", 1);
    /* The lm head: its many blocks would each redo the norm (the pass's header). */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%xn = fused_rms_norm(%x, @nw) {eps=1e-5}\n"
                          "%logits = matmul(%xn, @wo)\noutput logits = %logits\n");
}

/* The pass is backend-neutral: the CUDA kernels' float4 reads of the weight are the CUDA
 * backend's concern (it runs such a node as the norm then the matmul). */
Test(fuse_norm_matmul, norm_weight_at_an_unaligned_offset_fuses_too) {
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD "%xn = fused_rms_norm(%x, @n8) {eps=1e-6}\n"
                     "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n",
                HEAD "%y = matmul_pair(%x, @wg, @wu, @n8) {swiglu=1, norm_eps=1e-6}\n"
                     "output y = %y\n",
                1);
}

Test(fuse_norm_matmul, a_whole_layer_fuses_both_norms) {
    expect_pass(loom_pass_fuse_norm_matmul,
                HEAD NORM "%q, %k, %v = matmul_triple(%xn, @wq, @wk, @wv)\n"
                          "%h = add(%q, %x)\n"
                          "%hn = fused_rms_norm(%h, @nw2) {eps=1e-6}\n"
                          "%y = matmul_pair(%hn, @wg, @wu) {swiglu=1}\n"
                          "output y = %y\noutput k = %k\noutput v = %v\n",
                HEAD "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @nw) {norm_eps=1e-6}\n"
                     "%h = add(%q, %x)\n"
                     "%y = matmul_pair(%h, @wg, @wu, @nw2) {swiglu=1, norm_eps=1e-6}\n"
                     "output y = %y\noutput k = %k\noutput v = %v\n",
                2);
}

Test(fuse_norm_matmul, norm_result_with_another_use_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD NORM "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\n"
                               "output y = %y\noutput xn = %xn\n");
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD NORM "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\n"
                               "%s = silu(%xn)\noutput y = %y\noutput s = %s\n");
    /* Two nodes of one normed x: folding into one would leave the norm for the other. */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD NORM "%a = matmul_pair(%xn, @wg, @wu) {swiglu=1}\n"
                               "%q, %k, %v = matmul_triple(%xn, @wq, @wk, @wv)\n"
                               "output a = %a\noutput k = %k\n");
}

Test(fuse_norm_matmul, norm_weight_not_an_f32_vector_does_not_fuse) {
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%xn = fused_rms_norm(%x, @nh) {eps=1e-6}\n"
                          "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n");
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%xn = fused_rms_norm(%x, @nb) {eps=1e-6}\n"
                          "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n");
}

Test(fuse_norm_matmul, other_norms_operands_and_ops_do_not_fuse) {
    /* An unweighted rms_norm, and rms_norm * w not yet fused by fuse-norm-weight. */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%xn = rms_norm(%x) {eps=1e-6}\n" "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n");
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%n = rms_norm(%x) {eps=1e-6}\n%xn = mul(%n, @nw)\n" "%y = matmul_pair(%xn, @wg, @wu) {swiglu=1}\noutput y = %y\n");
    /* The normed value as matmul_add's residual, not as any matmul's x. */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD "%rn = fused_rms_norm(%r, @nw) {eps=1e-6}\n"
                          "%y = matmul_add(%x, @wq, %rn)\noutput y = %y\n");
    /* matmul_add is not a prenorm op. */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD NORM "%y = matmul_add(%xn, @wq, %r)\noutput y = %y\n");
    /* A node that already has a prenorm keeps both norms apart. */
    expect_unchanged(loom_pass_fuse_norm_matmul,
                     HEAD NORM "%y = matmul_pair(%xn, @wg, @wu, @nw2) {swiglu=1, norm_eps=1e-6}\n"
                               "output y = %y\n");
}

Test(fuse_norm_matmul, other_fusions_leave_normed_matmuls_alone) {
    /* Each would rebuild the products from x and W and lose the norm. */
    expect_unchanged(loom_pass_fuse_qkv,
                     HEAD "%q = matmul(%x, @wq, @nw) {norm_eps=1e-6}\n"
                          "%k = matmul(%x, @wk)\n%v = matmul(%x, @wv)\n"
                          "output q = %q\noutput k = %k\noutput v = %v\n");
    expect_unchanged(loom_pass_fuse_matmul_pair,
                     HEAD "%a = matmul(%x, @wg, @nw) {norm_eps=1e-6}\n%b = matmul(%x, @wu)\n"
                          "output a = %a\noutput b = %b\n");
    expect_unchanged(loom_pass_fuse_gate_up,
                     HEAD "%g = matmul(%x, @wg)\n%u = matmul(%x, @wu, @nw) {norm_eps=1e-6}\n"
                          "%s = silu(%g)\n%y = mul(%s, %u)\noutput y = %y\n");
    expect_unchanged(loom_pass_fuse_residual_add,
                     HEAD "%p = matmul(%x, @wq, @nw) {norm_eps=1e-6}\n%y = add(%p, %r)\n"
                          "output y = %y\n");
}

Test(fuse_norm_matmul, o2_folds_the_norms_after_forming_the_triple_and_pair) {
    const char *in = HEAD NORM "%q = matmul(%xn, @wq)\n%k = matmul(%xn, @wk)\n"
                               "%v = matmul(%xn, @wv)\n"
                               "%hn = fused_rms_norm(%q, @nw2) {eps=1e-6}\n"
                               "%g = matmul(%hn, @wg)\n%u = matmul(%hn, @wu)\n"
                               "%s = silu(%g)\n%y = mul(%s, %u)\n"
                               "output y = %y\noutput k = %k\noutput v = %v\n";
    loom_ir_graph *g = parse_or_die(in);
    loom_error err = {0};
    cr_assert(!loom_pass_run_pipeline(g, "-O2", true, &err), "%s", err.msg);
    char *got = loom_ir_print_string(g, &err);
    cr_assert(got);
    cr_assert(strstr(got, "matmul_triple(%x, @wq, @wk, @wv, @nw) {norm_eps=1e-06}") &&
                  strstr(got, "matmul_pair(%0, @wg, @wu, @nw2) {swiglu=1, norm_eps=1e-06}") &&
                  !strstr(got, "fused_rms_norm"),
              "%s", got);
    free(got);
    loom_ir_graph_destroy(g);
}
