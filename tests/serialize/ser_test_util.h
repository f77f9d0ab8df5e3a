/* ser_test_util.h: graphs and helpers shared by the serialization tests.
 *
 * LAYER_TEXT is one qwen3-style decoder layer in the IR's text form that uses every op of the
 * table, every attribute kind that ops use (int, float, enum, dtype, shape with a symbol), nodes
 * with 1, 2 and 3 results, weights of several ggml types, state, two outputs, metadata of each
 * kind and the source/passes keys that have their own message fields. Its metadata is in the
 * order the reader restores (source.*, others, passes), so print(load(save(g))) == print(g).
 */
#ifndef LOOM_TESTS_SER_TEST_UTIL_H
#define LOOM_TESTS_SER_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/serialize/serialize.h"

static const char LAYER_TEXT[] =
    "symbol T max=64\n"
    "meta source.file = \"tiny.gguf\"\n"
    "meta source.size = 123456\n"
    "meta source.checksum = \"0123456789abcdef\"\n"
    "meta loom.arch = \"qwen3\"\n"
    "meta loom.n_layer = 1\n"
    "meta loom.rms_eps = 1e-06\n"
    "meta passes = \"fuse-norm-weight,fuse-qkv,dce\"\n"
    "input %tokens : i32[T]\n"
    "input %positions : i32[T]\n"
    "weight @token_embd.weight : q4_k[512,256] offset=4096\n"
    "weight @attn_norm.weight : f32[256] offset=77824\n"
    "weight @attn_q.weight : q4_k[256,256] offset=78848\n"
    "weight @attn_k.weight : q4_k[128,256] offset=115712\n"
    "weight @attn_v.weight : q6_k[128,256] offset=134144\n"
    "weight @attn_q_norm.weight : f32[64] offset=161024\n"
    "weight @attn_k_norm.weight : f32[64] offset=161280\n"
    "weight @attn_output.weight : q4_k[256,256] offset=161536\n"
    "weight @ffn_norm.weight : f32[256] offset=198400\n"
    "weight @ffn_gate.weight : q4_k[768,256] offset=199424\n"
    "weight @ffn_up.weight : q4_k[768,256] offset=310016\n"
    "weight @ffn_down.weight : q6_k[256,768] offset=420608\n"
    "weight @output.weight : q8_0[512,256] offset=581888\n"
    "state @kv.0.k : f16[128,128]\n"
    "state @kv.0.v : f16[128,128]\n"
    "%x = get_rows(@token_embd.weight, %tokens) : f32[T,256]\n"
    "%n = fused_rms_norm(%x, @attn_norm.weight) {eps=1e-06}\n"
    "%q, %k, %v = matmul_triple(%n, @attn_q.weight, @attn_k.weight, @attn_v.weight)\n"
    "%q3 = reshape(%q) {shape=[T,4,64]}\n"
    "%qn = rms_norm(%q3) {eps=1e-06}\n"
    "%qw = mul(%qn, @attn_q_norm.weight)\n"
    "%qr = rope(%qw, %positions) {mode=neox, n_rot=64, freq_base=1000000.0}\n"
    "%k3 = reshape(%k) {shape=[T,2,64]}\n"
    "%kn = fused_rms_norm(%k3, @attn_k_norm.weight) {eps=1e-06}\n"
    "%kr = rope(%kn, %positions) {mode=neox, n_rot=64, freq_base=1000000.0, freq_scale=0.5}\n"
    "%kc = kv_write(@kv.0.k, %kr, %positions)\n"
    "%vc = kv_write(@kv.0.v, %v, %positions)\n"
    "%a = attention(%qr, %kc, %vc, %positions) {n_head=4, n_kv_head=2, head_dim=64, "
    "scale=0.125}\n"
    "%h = matmul_add(%a, @attn_output.weight, %x)\n"
    "%f = fused_rms_norm(%h, @ffn_norm.weight) {eps=1e-06}\n"
    "%g = matmul_pair(%f, @ffn_gate.weight, @ffn_up.weight) {swiglu=1}\n"
    "%p0, %p1 = matmul_pair(%f, @ffn_gate.weight, @ffn_up.weight) {swiglu=0}\n"
    "%ps = silu(%p0)\n"
    "%pm = mul(%ps, %p1)\n"
    "%gs = add(%g, %pm)\n"
    "%d = matmul(%gs, @ffn_down.weight)\n"
    "%o = add(%d, %h)\n"
    "%l = matmul(%o, @output.weight)\n"
    "%s = softmax(%l)\n"
    "%c = convert(%s) {dtype=f16}\n"
    "%am = argmax(%l)\n"
    "output logits = %l\n"
    "output next = %am\n";

static inline loom_ir_graph *parse_text(const char *text) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    loom_status st = loom_ir_parse(text, strlen(text), &g, &err);
    cr_assert_eq(st, LOOM_OK, "parse: %s", err.msg);
    return g;
}

static inline void serialize_ok(const loom_ir_graph *g, uint8_t **bytes, size_t *len) {
    loom_error err = {0};
    loom_status st = loom_ir_serialize(g, bytes, len, &err);
    cr_assert_eq(st, LOOM_OK, "serialize: %s", err.msg);
    cr_assert(*bytes != NULL && *len > 0);
}

static inline loom_ir_graph *deserialize_ok(const uint8_t *bytes, size_t len) {
    loom_ir_graph *g = NULL;
    loom_error err = {0};
    loom_status st = loom_ir_deserialize(bytes, len, &g, &err);
    cr_assert_eq(st, LOOM_OK, "deserialize: %s", err.msg);
    cr_assert(g != NULL);
    return g;
}

/* graph -> bytes -> graph is equal, and the copy serializes to the same bytes. Returns the
 * serialized size. */
static inline size_t check_round_trip(const loom_ir_graph *g) {
    uint8_t *b1, *b2;
    size_t n1, n2;
    serialize_ok(g, &b1, &n1);
    loom_ir_graph *g2 = deserialize_ok(b1, n1);
    loom_error diff = {0};
    cr_assert(loom_ir_graph_equal(g, g2, &diff), "round trip not equal: %s", diff.msg);
    serialize_ok(g2, &b2, &n2);
    cr_assert_eq(n1, n2, "re-serialized size %zu != %zu", n2, n1);
    cr_assert(memcmp(b1, b2, n1) == 0, "re-serialized bytes differ");
    free(b1);
    free(b2);
    loom_ir_graph_destroy(g2);
    return n1;
}

#endif /* LOOM_TESTS_SER_TEST_UTIL_H */
