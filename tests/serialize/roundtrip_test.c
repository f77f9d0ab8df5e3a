/* roundtrip_test.c: graph -> protobuf -> graph is structurally equal and re-serializes to the
 * same bytes; on hand-written graphs (text form), graphs with holes, an empty graph, a
 * Qwen3-4B-shaped 36-layer graph (size: kilobytes) and, with testdata, every lowered golden
 * model. Also save/load through files (tmp + rename, errors naming the path), and files written
 * before the prenorm operand (norm_eps) and rope_kv_attention existed: they load and keep their
 * bytes, and both folds on them round-trip.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "passes/passes.h"
#include "ser_test_util.h"

/* g -> bytes -> graph prints the same text as g. Returns g's text (the caller frees it); the
 * deserialized graph goes to *back when back is not NULL (the caller destroys it). */
static char *check_prints_identically(const loom_ir_graph *g, loom_ir_graph **back) {
    uint8_t *b;
    size_t n;
    serialize_ok(g, &b, &n);
    loom_ir_graph *g2 = deserialize_ok(b, n);
    loom_error err = {0};
    char *t1 = loom_ir_print_string(g, &err), *t2 = loom_ir_print_string(g2, &err);
    cr_assert(t1 && t2, "%s", err.msg);
    cr_assert_str_eq(t2, t1);
    free(t2);
    free(b);
    if (back)
        *back = g2;
    else
        loom_ir_graph_destroy(g2);
    return t1;
}

Test(roundtrip, layer_text_equal_and_same_bytes) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    check_round_trip(g);
    loom_ir_graph_destroy(g);
}

Test(roundtrip, layer_text_prints_identically) {
    loom_ir_graph *g = parse_text(LAYER_TEXT), *g2;
    free(check_prints_identically(g, &g2));
    /* The metadata with message fields of its own came back with its kinds. */
    const loom_ir_meta *m = loom_ir_meta_get(g2, "source.size");
    cr_assert(m && m->kind == LOOM_IR_META_INT && m->i == 123456);
    m = loom_ir_meta_get(g2, "passes");
    cr_assert(m && m->kind == LOOM_IR_META_STRING);
    cr_assert_str_eq(m->s, "fuse-norm-weight,fuse-qkv,dce");
    m = loom_ir_meta_get(g2, "loom.rms_eps");
    cr_assert(m && m->kind == LOOM_IR_META_FLOAT && m->f == 1e-06);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(g2);
}

/* The fused attention prologue (rope_kv_write: three results, two of them cache versions) with
 * and without its norm operands comes back equal and in the same bytes: the protobuf form needs
 * nothing op-specific (ops and attributes go by name, so files without it load as before). */
Test(roundtrip, rope_kv_write_with_and_without_norms) {
    static const char *text =
        "symbol T max=8\n"
        "input %positions : i32[T]\n"
        "input %q : f32[T,4,64]\n"
        "input %k : f32[T,2,64]\n"
        "weight @qn : f32[64] offset=0\n"
        "weight @kn : f32[64] offset=256\n"
        "state @kv.0.k : f16[16,2,64]\n"
        "state @kv.0.v : f16[16,128]\n"
        "state @kv.1.k : f32[16,128]\n"
        "state @kv.1.v : f32[16,128]\n"
        "%kc, %vc, %qr = rope_kv_write(@kv.0.k, @kv.0.v, %q, %k, %k, %positions, @qn, @kn) "
        "{eps=1e-06, mode=neox, n_rot=64, freq_base=1000000.0}\n"
        "%kc1, %vc1, %qr1 = rope_kv_write(@kv.1.k, @kv.1.v, %qr, %k, %k, %positions) "
        "{eps=0, mode=norm, n_rot=32, freq_base=10000.0, freq_scale=0.5}\n"
        "%a = attention(%qr1, %kc1, %vc1, %positions) {n_head=4, n_kv_head=2, head_dim=64, "
        "scale=0.125}\n"
        "%b = attention(%qr, %kc, %vc, %positions) {n_head=4, n_kv_head=2, head_dim=64, "
        "scale=0.125}\n"
        "output a = %a\noutput b = %b\n";
    loom_ir_graph *g = parse_text(text);
    check_round_trip(g);
    /* fuse-rope-kv-attention folds the second layer's (its roped q has one user) into a
     * rope_kv_attention (nine attributes, no norms); the first stays (its q feeds both). */
    loom_error err = {0};
    uint32_t rewrites = 0;
    cr_assert(!loom_pass_fuse_rope_kv_attention(g, &rewrites, &err), "%s", err.msg);
    cr_assert_eq(rewrites, 1);
    check_round_trip(g);
    loom_ir_graph_destroy(g);
}

/* rope_kv_attention with the norm operands, as text: equal and the same bytes, and its nine
 * attributes come back by name. */
Test(roundtrip, rope_kv_attention_with_norms) {
    static const char *text =
        "symbol T max=8\n"
        "input %positions : i32[T]\n"
        "input %q : f32[T,4,64]\n"
        "input %k : f32[T,2,64]\n"
        "weight @qn : f32[64] offset=0\n"
        "weight @kn : f32[64] offset=256\n"
        "state @kv.0.k : f16[16,2,64]\n"
        "state @kv.0.v : f16[16,128]\n"
        "%kc, %vc, %a = rope_kv_attention(@kv.0.k, @kv.0.v, %q, %k, %k, %positions, @qn, @kn) "
        "{eps=1e-06, mode=neox, n_rot=64, freq_base=1000000.0, freq_scale=0.5, n_head=4, "
        "n_kv_head=2, head_dim=64, scale=0.125}\n"
        "output a = %a\noutput kc = %kc\n";
    loom_ir_graph *g = parse_text(text);
    check_round_trip(g);
    char *t1 = check_prints_identically(g, NULL);
    cr_assert(strstr(t1, "= rope_kv_attention(@kv.0.k, @kv.0.v, %q, %k, %k, %positions, @qn, @kn) "
                         "{eps=1e-06, mode=neox, n_rot=64, freq_base=1000000.0, freq_scale=0.5, "
                         "n_head=4, n_kv_head=2, head_dim=64, scale=0.125}"), "%s", t1);
    free(t1);
    loom_ir_graph_destroy(g);
}

/* Matmuls with a folded RMSNorm (prenorm operand + norm_eps) round-trip; norm_eps is written
 * only where it is not 0, so a graph without prenorms has no norm_eps in its bytes. */
Test(roundtrip, prenorm_matmuls) {
    static const char *text =
        "symbol T max=8\n"
        "input %x : f32[T,256]\n"
        "weight @n : f32[256] offset=0\n"
        "weight @wq : q4_k[256,256] offset=1024\n"
        "weight @wk : q6_k[128,256] offset=37888\n"
        "weight @b : f32[128] offset=64768\n"
        "weight @bq : f32[256] offset=65280\n"
        "%q, %k, %v = matmul_triple(%x, @wq, @wk, @wk, @bq, @b, @b, @n) {norm_eps=1e-06}\n"
        "%q1, %k1, %v1 = matmul_triple(%q, @wq, @wk, @wk, @n)\n"
        "%g = matmul_pair(%q1, @wq, @wq, @n) {swiglu=1, norm_eps=1e-05}\n"
        "%y = matmul(%g, @wk, @n) {norm_eps=1e-06}\n"
        "%z = matmul(%g, @wk)\n"
        "output y = %y\noutput z = %z\noutput k = %k1\noutput v = %v\n";
    loom_ir_graph *g = parse_text(text);
    check_round_trip(g);
    char *t1 = check_prints_identically(g, NULL);
    cr_assert(strstr(t1, "%8 = matmul(%6, @wk) : f32[T,128]\n"), "norm_eps=0 printed:\n%s", t1);
    free(t1);
    loom_ir_graph_destroy(g);
    g = parse_text(LAYER_TEXT);
    uint8_t *b;
    size_t n;
    serialize_ok(g, &b, &n);
    cr_assert_null(memmem(b, n, "norm_eps", 8), "an unused norm_eps was written");
    free(b);
    loom_ir_graph_destroy(g);
}

/* Files written by session 3's loom (before norm_eps and the prenorm operand; `loom compile` of
 * the golden tiny_qwen3_q4km and tiny_qwen2_q4km at -O2) load, verify and re-serialize to
 * their own bytes; fuse-norm-matmul on them gives a graph that round-trips too. */
Test(roundtrip, files_from_before_prenorm_load_and_keep_their_bytes) {
    static const char *files[] = {"tests/serialize/testdata/tiny_qwen3_q4km_s3.pb",
                                  "tests/serialize/testdata/tiny_qwen2_q4km_s3.pb"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FILE *f = fopen(files[i], "rb");
        cr_assert(f, "cannot open %s", files[i]);
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cr_assert(len > 0 && len < sizeof buf, "%s", files[i]);
        loom_ir_graph *g = deserialize_ok(buf, len);
        loom_error err = {0};
        cr_assert(!loom_ir_verify(g, &err), "%s: %s", files[i], err.msg);
        uint8_t *b;
        size_t n;
        serialize_ok(g, &b, &n);
        cr_assert(n == len && !memcmp(b, buf, len), "%s: re-serialized bytes differ", files[i]);
        free(b);
        uint32_t rewrites = 0;
        cr_assert(!loom_pass_fuse_norm_matmul(g, &rewrites, &err), "%s", err.msg);
        cr_assert_eq(rewrites, 2 * 2, "%s: %u norms folded", files[i], rewrites);
        check_round_trip(g);
        cr_assert(!loom_pass_fuse_rope_kv_attention(g, &rewrites, &err), "%s", err.msg);
        cr_assert_eq(rewrites, 2, "%s: %u attentions folded", files[i], rewrites);
        cr_assert(!loom_ir_verify(g, &err), "%s: %s", files[i], err.msg);
        check_round_trip(g);
        loom_ir_graph_destroy(g);
    }
}

Test(roundtrip, deterministic_across_calls) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    uint8_t *b1, *b2;
    size_t n1, n2;
    serialize_ok(g, &b1, &n1);
    serialize_ok(g, &b2, &n2);
    cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    loom_ir_graph_destroy(g);
}

Test(roundtrip, empty_and_minimal_graphs) {
    loom_ir_graph *g = loom_ir_graph_create();
    cr_assert(g);
    check_round_trip(g);
    loom_ir_graph_destroy(g);
    /* Metadata edge cases: an empty passes string stays ordinary metadata, odd kinds of the
     * source keys too. */
    g = parse_text("symbol T max=8\n"
                   "meta passes = \"\"\n"
                   "meta source.size = \"big\"\n"
                   "meta source.file = 3\n"
                   "input %x : f32[T,4]\n"
                   "%y = silu(%x)\n"
                   "output y = %y\n"
                   "output x = %x\n");
    check_round_trip(g);
    loom_ir_graph_destroy(g);
}

/* A graph with holes (an erased node, a dead value) serializes exactly like the same graph
 * built without them: ids are renumbered canonically. */
Test(roundtrip, holes_do_not_change_the_bytes) {
    static const char with_dead[] = "symbol T max=8\n"
                                    "input %x : f32[T,4]\n"
                                    "weight @w : f32[4]\n"
                                    "%a = silu(%x)\n"
                                    "%dead = softmax(%a)\n"
                                    "%b = mul(%a, @w)\n"
                                    "output y = %b\n";
    static const char without[] = "symbol T max=8\n"
                                  "input %x : f32[T,4]\n"
                                  "weight @w : f32[4]\n"
                                  "%a = silu(%x)\n"
                                  "%b = mul(%a, @w)\n"
                                  "output y = %b\n";
    loom_ir_graph *g = parse_text(with_dead);
    /* Erase the softmax (the second node in program order). */
    loom_ir_node_id id = loom_ir_node_get(g, loom_ir_first_node(g))->next;
    cr_assert_eq(loom_ir_node_get(g, id)->op, LOOM_IR_OP_SOFTMAX);
    loom_error err = {0};
    cr_assert_eq(loom_ir_node_erase(g, id, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph *ref = parse_text(without);
    uint8_t *b1, *b2;
    size_t n1, n2;
    serialize_ok(g, &b1, &n1);
    serialize_ok(ref, &b2, &n2);
    cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "holes changed the bytes");
    check_round_trip(g);
    free(b1);
    free(b2);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(ref);
}

/* A clone (same ids) and the original give the same bytes. */
Test(roundtrip, clone_serializes_the_same) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    loom_error err = {0};
    loom_ir_graph *c = loom_ir_graph_clone(g, &err);
    cr_assert(c, "%s", err.msg);
    uint8_t *b1, *b2;
    size_t n1, n2;
    serialize_ok(g, &b1, &n1);
    serialize_ok(c, &b2, &n2);
    cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(c);
}

/* ---- a Qwen3-4B-shaped 36-layer graph, built with the IR's builders ---- */

static loom_ir_value_id weight(loom_ir_graph *g, const char *name, loom_ir_dtype dt, uint32_t rank,
                               int64_t d0, int64_t d1, uint64_t *offset) {
    int64_t dims[2] = {d0, d1};
    loom_ir_type t = loom_ir_type_make(dt, rank, dims);
    int64_t bytes = loom_ir_type_bytes(g, &t, NULL);
    cr_assert(bytes > 0);
    loom_ir_value_id v;
    loom_error err = {0};
    cr_assert_eq(loom_ir_add_weight(g, name, &t, *offset, (uint64_t)bytes, &v, &err), LOOM_OK,
                 "%s", err.msg);
    *offset += ((uint64_t)bytes + 31) & ~(uint64_t)31;
    return v;
}

static loom_ir_graph *build_qwen3_4b_shape(uint64_t *weight_bytes) {
    enum { L = 36, E = 2560, H = 32, HKV = 8, D = 128, F = 9728, V = 151936, C = 4096 };
    loom_ir_graph *g = loom_ir_graph_create();
    loom_error err = {0};
    int64_t T;
    cr_assert_eq(loom_ir_add_symbol(g, "T", 512, &T, &err), LOOM_OK, "%s", err.msg);
    loom_ir_value_id tok, pos;
    int64_t td[1] = {T};
    loom_ir_type ti = loom_ir_type_make(LOOM_IR_I32, 1, td);
    cr_assert_eq(loom_ir_add_input(g, "tokens", &ti, &tok, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_add_input(g, "positions", &ti, &pos, &err), LOOM_OK, "%s", err.msg);
    uint64_t off = 6 << 20;
    loom_ir_value_id emb = weight(g, "token_embd.weight", LOOM_IR_Q4_K, 2, V, E, &off);
    loom_ir_value_id x = loom_ir_get_rows(g, emb, tok, &err);
    char name[64];
    for (int l = 0; l < L; l++) {
#define W(suffix, dt, rank, a, b) \
    (snprintf(name, sizeof name, "blk.%d." suffix, l), weight(g, name, dt, rank, a, b, &off))
        loom_ir_value_id an = W("attn_norm.weight", LOOM_IR_F32, 1, E, 0);
        loom_ir_value_id wq = W("attn_q.weight", LOOM_IR_Q4_K, 2, H * D, E);
        loom_ir_value_id wk = W("attn_k.weight", LOOM_IR_Q4_K, 2, HKV * D, E);
        loom_ir_value_id wv = W("attn_v.weight", LOOM_IR_Q6_K, 2, HKV * D, E);
        loom_ir_value_id qn = W("attn_q_norm.weight", LOOM_IR_F32, 1, D, 0);
        loom_ir_value_id kn = W("attn_k_norm.weight", LOOM_IR_F32, 1, D, 0);
        loom_ir_value_id wo = W("attn_output.weight", LOOM_IR_Q4_K, 2, E, H * D);
        loom_ir_value_id fn = W("ffn_norm.weight", LOOM_IR_F32, 1, E, 0);
        loom_ir_value_id wg = W("ffn_gate.weight", LOOM_IR_Q4_K, 2, F, E);
        loom_ir_value_id wu = W("ffn_up.weight", LOOM_IR_Q4_K, 2, F, E);
        loom_ir_value_id wd = W("ffn_down.weight", LOOM_IR_Q6_K, 2, E, F);
#undef W
        int64_t cd[2] = {C, HKV * D};
        loom_ir_type ct = loom_ir_type_make(LOOM_IR_F16, 2, cd);
        loom_ir_value_id kc, vc;
        snprintf(name, sizeof name, "kv.%d.k", l);
        cr_assert_eq(loom_ir_add_state(g, name, &ct, &kc, &err), LOOM_OK, "%s", err.msg);
        snprintf(name, sizeof name, "kv.%d.v", l);
        cr_assert_eq(loom_ir_add_state(g, name, &ct, &vc, &err), LOOM_OK, "%s", err.msg);
        int64_t qd[3] = {T, H, D}, kd[3] = {T, HKV, D};
        loom_ir_value_id h = loom_ir_mul(g, loom_ir_rms_norm(g, x, 1e-6f, &err), an, &err);
        loom_ir_value_id q = loom_ir_reshape(g, loom_ir_matmul(g, h, wq, &err), 3, qd, &err);
        loom_ir_value_id k = loom_ir_reshape(g, loom_ir_matmul(g, h, wk, &err), 3, kd, &err);
        loom_ir_value_id v = loom_ir_matmul(g, h, wv, &err);
        q = loom_ir_mul(g, loom_ir_rms_norm(g, q, 1e-6f, &err), qn, &err);
        k = loom_ir_mul(g, loom_ir_rms_norm(g, k, 1e-6f, &err), kn, &err);
        q = loom_ir_rope(g, q, pos, LOOM_IR_ROPE_NEOX, D, 1e6f, 1.0f, &err);
        k = loom_ir_rope(g, k, pos, LOOM_IR_ROPE_NEOX, D, 1e6f, 1.0f, &err);
        loom_ir_value_id kw = loom_ir_kv_write(g, kc, k, pos, &err);
        loom_ir_value_id vw = loom_ir_kv_write(g, vc, v, pos, &err);
        loom_ir_value_id a = loom_ir_attention(g, q, kw, vw, pos, H, HKV, D, 0.08838834764f, &err);
        x = loom_ir_add(g, loom_ir_matmul(g, a, wo, &err), x, &err);
        h = loom_ir_mul(g, loom_ir_rms_norm(g, x, 1e-6f, &err), fn, &err);
        loom_ir_value_id ff = loom_ir_mul(g, loom_ir_silu(g, loom_ir_matmul(g, h, wg, &err), &err),
                                          loom_ir_matmul(g, h, wu, &err), &err);
        x = loom_ir_add(g, loom_ir_matmul(g, ff, wd, &err), x, &err);
        cr_assert(x != LOOM_IR_NO_VALUE, "layer %d: %s", l, err.msg);
    }
    loom_ir_value_id on = weight(g, "output_norm.weight", LOOM_IR_F32, 1, E, 0, &off);
    loom_ir_value_id ow = weight(g, "output.weight", LOOM_IR_Q6_K, 2, V, E, &off);
    loom_ir_value_id logits =
        loom_ir_matmul(g, loom_ir_mul(g, loom_ir_rms_norm(g, x, 1e-6f, &err), on, &err), ow, &err);
    cr_assert(logits != LOOM_IR_NO_VALUE, "%s", err.msg);
    cr_assert_eq(loom_ir_add_output(g, "logits", logits, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_meta_set_int(g, "loom.n_layer", L, &err), LOOM_OK);
    cr_assert_eq(loom_ir_meta_set_string(g, "loom.arch", "qwen3", &err), LOOM_OK);
    cr_assert_eq(loom_ir_verify(g, &err), LOOM_OK, "%s", err.msg);
    *weight_bytes = off;
    return g;
}

Test(roundtrip, qwen3_4b_shape_36_layers_is_kilobytes) {
    uint64_t weight_bytes;
    loom_ir_graph *g = build_qwen3_4b_shape(&weight_bytes);
    cr_assert_gt(weight_bytes, (uint64_t)2 << 30, "the weights it refers to are > 2 GiB");
    size_t n = check_round_trip(g);
    cr_log_info("36-layer graph: %u nodes, %zu bytes serialized (weights: %.2f GiB)",
                loom_ir_node_count(g), n, (double)weight_bytes / (1 << 30));
    cr_assert_gt(loom_ir_node_count(g), 36 * 20);
    cr_assert_lt(n, (size_t)256 * 1024, "serialized 36-layer graph is %zu bytes", n);
    loom_ir_graph_destroy(g);
}

/* ---- files ---- */

static void tmp_path(char *buf, size_t len, const char *name) {
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
}

Test(files, save_load_round_trip_leaves_no_tmp) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    char path[1024], tmp[1100];
    tmp_path(path, sizeof path, "layer.pb");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    loom_error err = {0};
    cr_assert_eq(loom_ir_save(g, path, &err), LOOM_OK, "%s", err.msg);
    cr_assert(access(tmp, F_OK) != 0, "PATH.tmp left behind");
    loom_ir_graph *g2 = NULL;
    cr_assert_eq(loom_ir_load(path, &g2, &err), LOOM_OK, "%s", err.msg);
    cr_assert(loom_ir_graph_equal(g, g2, &err), "%s", err.msg);
    /* Saving over an existing file replaces it. */
    cr_assert_eq(loom_ir_save(g2, path, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph_destroy(g2);
    cr_assert_eq(loom_ir_load(path, &g2, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph_destroy(g2);
    unlink(path);
    loom_ir_graph_destroy(g);
}

Test(files, save_into_missing_dir_fails_with_path) {
    loom_ir_graph *g = parse_text(LAYER_TEXT);
    char path[1024];
    tmp_path(path, sizeof path, "no/such/dir/x.pb");
    loom_error err = {0};
    cr_assert_eq(loom_ir_save(g, path, &err), LOOM_ERR_IO);
    cr_assert(strstr(err.msg, path), "message names the path: %s", err.msg);
    cr_assert(access(path, F_OK) != 0);
    loom_ir_graph_destroy(g);
}

Test(files, load_errors_name_the_path) {
    char path[1024];
    tmp_path(path, sizeof path, "does-not-exist.pb");
    loom_ir_graph *g = (loom_ir_graph *)1;
    loom_error err = {0};
    cr_assert_eq(loom_ir_load(path, &g, &err), LOOM_ERR_IO);
    cr_assert(g == NULL);
    cr_assert(strstr(err.msg, path), "%s", err.msg);

    /* A truncated file: the path and the reason. */
    loom_ir_graph *src = parse_text(LAYER_TEXT);
    uint8_t *b;
    size_t n;
    serialize_ok(src, &b, &n);
    tmp_path(path, sizeof path, "truncated.pb");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n / 2, f), n / 2);
    fclose(f);
    cr_assert_neq(loom_ir_load(path, &g, &err), LOOM_OK);
    cr_assert(g == NULL);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "deserialize"), "%s", err.msg);
    unlink(path);
    free(b);
    loom_ir_graph_destroy(src);
}
