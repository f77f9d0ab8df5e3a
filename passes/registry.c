/* registry.c: the table of every pass (name, function, one-line description). Adding a pass is
 * one row here plus its prototype in passes.h and its file in BUILD.
 */
#include <string.h>

#include "passes/passes.h"

static const loom_pass_info passes[] = {
    {"fuse-norm-weight", loom_pass_fuse_norm_weight,
     "rms_norm(x) * w -> fused_rms_norm(x, w) (layer, per-head Q/K and final norms)"},
    {"fuse-qkv", loom_pass_fuse_qkv,
     "three matmuls of one input (+ their bias adds) -> matmul_triple"},
    {"fuse-gate-up", loom_pass_fuse_gate_up,
     "silu(x.Wg) * x.Wu -> matmul_pair {swiglu=1}"},
    {"fuse-residual-add", loom_pass_fuse_residual_add,
     "matmul(x, W) + r -> matmul_add(x, W, r)"},
    {"fuse-rope-kv-write", loom_pass_fuse_rope_kv_write,
     "[q/k head norms,] rope(q), rope(k), kv_write(k), kv_write(v) -> rope_kv_write"},
    {"fuse-rope-kv-attention", loom_pass_fuse_rope_kv_attention,
     "attention(rope_kv_write's roped q and caches) -> rope_kv_attention"},
    {"fuse-norm-matmul", loom_pass_fuse_norm_matmul,
     "matmul_pair|_triple(fused_rms_norm(x, w)) -> the same node with w as its prenorm operand"},
    {"fuse-matmul-pair", loom_pass_fuse_matmul_pair,
     "two matmuls of one input -> matmul_pair {swiglu=0} (example of docs/writing-a-pass.md)"},
    {"cse", loom_pass_cse, "merge nodes with the same op, operands and attributes"},
    {"dce", loom_pass_dce, "erase nodes whose results are unused (state writes stay)"},
};

uint32_t loom_pass_count(void) { return (uint32_t)(sizeof passes / sizeof passes[0]); }

const loom_pass_info *loom_pass_at(uint32_t i) {
    return i < loom_pass_count() ? &passes[i] : NULL;
}

const loom_pass_info *loom_pass_find(const char *name) {
    for (uint32_t i = 0; name && i < loom_pass_count(); i++)
        if (!strcmp(passes[i].name, name)) return &passes[i];
    return NULL;
}
