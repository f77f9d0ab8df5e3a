/* cuda_decisions_test.c: the CUDA backend's host-side decisions (cuda_backend.h), which need no
 * device: when a matmul-family node with a folded RMSNorm runs as one _normed launch and when
 * as the norm then the plain matmul (loom_exec_cuda_prenorm_folds), and which nodes' norm
 * weights may reach the kernels unaligned, so that decode steps need the norm buffer too
 * (loom_exec_cuda_prenorm_unaligned), and that a folded norm's weight must be a graph weight
 * (loom_exec_cuda_matmul_reads_constant). fuse-norm-matmul folds whatever the weight's offset
 * (tests/passes/fuse_norm_matmul_test.c); these two functions are where the CUDA kernels'
 * 16-byte rule lives. The pointers below are addresses only, never dereferenced.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "executor/cuda_backend.h"
#include "ir/ir.h"

static const void *at(uintptr_t address) { return (const void *)address; }

Test(cuda_decisions, a_decode_step_folds_the_norm_only_with_an_aligned_weight) {
    const uintptr_t base = 0x7f0000001000u;
    cr_assert(loom_exec_cuda_prenorm_folds(at(base), 1, false));
    cr_assert(loom_exec_cuda_prenorm_folds(at(base + LOOM_EXEC_CUDA_PRENORM_ALIGN), 1, false));
    for (uintptr_t off = 1; off < LOOM_EXEC_CUDA_PRENORM_ALIGN; off++)
        cr_assert(!loom_exec_cuda_prenorm_folds(at(base + off), 1, false),
                  "a weight at +%u (not 16-byte aligned) must run as norm + matmul", (unsigned)off);
}

Test(cuda_decisions, more_rows_or_the_switch_run_the_norm_apart) {
    const uintptr_t base = 0x7f0000001000u;
    cr_assert(!loom_exec_cuda_prenorm_folds(at(base), 2, false), "prefill: norm + matmul");
    cr_assert(!loom_exec_cuda_prenorm_folds(at(base), 512, false));
    cr_assert(!loom_exec_cuda_prenorm_folds(at(base), 1, true), "LOOM_CUDA_PRENORM=0");
    cr_assert(!loom_exec_cuda_prenorm_folds(at(base + 8), 2, true));
}

/* A layer's triple and pair after fuse-norm-matmul: @nw at an aligned offset, @n8 at +8. */
#define GRAPH "symbol T max=8\n"                                                             \
              "input %x : f32[T,256]\n"                                                      \
              "weight @nw : f32[256] offset=4096\n"                                          \
              "weight @n8 : f32[256] offset=8200\n"                                          \
              "weight @wq : q4_k[256,256]\n"                                                 \
              "weight @wk : q4_k[128,256]\n"                                                 \
              "weight @wv : q6_k[128,256]\n"                                                 \
              "weight @wg : q4_k[512,256]\n"                                                 \
              "weight @wu : q4_k[512,256]\n"

static loom_ir_graph *parse(const char *text) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_ir_parse(text, strlen(text), &g, &err), LOOM_OK, "%s", err.msg);
    return g;
}

/* The only node of op `op` in g. */
static const loom_ir_node *node_of(const loom_ir_graph *g, loom_ir_op op) {
    for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
         id = loom_ir_node_get(g, id)->next)
        if (loom_ir_node_get(g, id)->op == op) return loom_ir_node_get(g, id);
    cr_assert_fail("no %s node", loom_ir_op_info_get(op)->name);
    return NULL;
}

Test(cuda_decisions, only_a_prenorm_weight_at_an_unaligned_offset_is_flagged) {
    loom_ir_graph *g = parse(GRAPH "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @nw) "
                                   "{norm_eps=1e-6}\n"
                                   "%y = matmul_pair(%q, @wg, @wu, @n8) {swiglu=1, "
                                   "norm_eps=1e-6}\n"
                                   "%z = matmul(%x, @wq)\n"
                                   "output y = %y\noutput k = %k\noutput v = %v\n"
                                   "output z = %z\n");
    cr_assert(!loom_exec_cuda_prenorm_unaligned(g, node_of(g, LOOM_IR_OP_MATMUL_TRIPLE)));
    cr_assert(loom_exec_cuda_prenorm_unaligned(g, node_of(g, LOOM_IR_OP_MATMUL_PAIR)));
    cr_assert(!loom_exec_cuda_prenorm_unaligned(g, node_of(g, LOOM_IR_OP_MATMUL)),
              "no prenorm, nothing to flag");
    loom_ir_graph_destroy(g);
}

Test(cuda_decisions, a_matmul_whose_folded_norm_weight_the_graph_computes_is_refused) {
    /* The _normed kernels read the norm weight non-coherently: only a graph weight, constant for
     * the program's life, may be that operand (the IR makes the matmul weights weights). */
    loom_ir_graph *g = parse(GRAPH "input %h : f32[T,256]\n"
                                   "input %g : f32[256]\n"
                                   "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wv, @nw) "
                                   "{norm_eps=1e-6}\n"
                                   "%y = matmul_pair(%q, @wg, @wu, %g) {swiglu=1, "
                                   "norm_eps=1e-6}\n"
                                   "%a = matmul_add(%x, @wq, %h)\n"
                                   "output y = %y\noutput k = %k\noutput v = %v\n"
                                   "output a = %a\n");
    cr_assert(loom_exec_cuda_matmul_reads_constant(g, node_of(g, LOOM_IR_OP_MATMUL_TRIPLE)));
    cr_assert(loom_exec_cuda_matmul_reads_constant(g, node_of(g, LOOM_IR_OP_MATMUL_ADD)),
              "the residual may be computed");
    cr_assert(!loom_exec_cuda_matmul_reads_constant(g, node_of(g, LOOM_IR_OP_MATMUL_PAIR)),
              "a computed norm weight");
    loom_ir_graph_destroy(g);
}
