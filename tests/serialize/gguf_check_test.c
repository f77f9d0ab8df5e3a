/* gguf_check_test.c: a graph's weight references and source identity against a GGUF file
 * (loaders/graph_check.h), before and after a protobuf round trip; and, with testdata, every
 * golden model lowered, serialized, reloaded, checked against its own file (accepted) and
 * against the others (refused).
 */
#include <stdio.h>
#include <unistd.h>

#include "loaders/graph_check.h"
#include "loaders/lower.h"
#include "ser_test_util.h"
#include "tests/common/testdata.h"

static void tmp_path(char *buf, size_t len, const char *name) {
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
}

/* Writes a GGUF with a.weight f32[8] and b.weight q8_0 ne={32,4}; `flavour` goes into a
 * metadata value, so two flavours differ only in their header. */
static void write_gguf(const char *path, const char *flavour) {
    loom_gguf_writer *w;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_writer_create(&w, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_set_string(w, "general.name", flavour, &err), LOOM_OK);
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne_a[1] = {8}, ne_b[2] = {32, 4};
    uint8_t b[4 * 34] = {0};
    cr_assert_eq(loom_gguf_writer_add_tensor_data(w, "a.weight", LOOM_GGML_F32, 1, ne_a, a,
                                                  sizeof a, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_add_tensor_data(w, "b.weight", LOOM_GGML_Q8_0, 2, ne_b, b,
                                                  sizeof b, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_writer_write(w, path, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_writer_destroy(w);
}

/* A graph using f's two tensors as weights (types/shapes optionally overridden), with f as its
 * source. */
static loom_ir_graph *graph_for(const loom_gguf *f, const char *path, loom_ir_dtype a_dtype,
                                int64_t b_rows, const char *b_name, uint64_t a_offset_delta) {
    loom_ir_graph *g = loom_ir_graph_create();
    loom_error err = {0};
    const loom_gguf_tensor *ta = loom_gguf_find_tensor(f, "a.weight");
    const loom_gguf_tensor *tb = loom_gguf_find_tensor(f, "b.weight");
    cr_assert(ta && tb);
    int64_t da[1] = {8}, db[2] = {b_rows, 128 / b_rows};
    loom_ir_type t_a = loom_ir_type_make(a_dtype, 1, da);
    loom_ir_type t_b = loom_ir_type_make(LOOM_IR_Q8_0, 2, db);
    loom_ir_value_id va, vb;
    cr_assert_eq(loom_ir_add_weight(g, "a.weight", &t_a, ta->file_offset + a_offset_delta, 0, &va,
                                    &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_ir_add_weight(g, b_name, &t_b, tb->file_offset, 0, &vb, &err), LOOM_OK, "%s",
                 err.msg);
    cr_assert_eq(loom_ir_set_source_from_gguf(g, f, path, &err), LOOM_OK, "%s", err.msg);
    return g;
}

Test(gguf_check, matching_graph_accepted_also_after_round_trip) {
    char path[1024];
    tmp_path(path, sizeof path, "check_a.gguf");
    write_gguf(path, "one");
    loom_gguf *f;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &f, &err), LOOM_OK, "%s", err.msg);
    loom_ir_graph *g = graph_for(f, path, LOOM_IR_F32, 4, "b.weight", 0);
    cr_assert_eq(loom_ir_check_against_gguf(g, f, &err), LOOM_OK, "%s", err.msg);
    const loom_ir_meta *m = loom_ir_meta_get(g, "source.file");
    cr_assert(m && !strcmp(m->s, "check_a.gguf"));
    uint8_t *b;
    size_t n;
    serialize_ok(g, &b, &n);
    loom_ir_graph *g2 = deserialize_ok(b, n);
    cr_assert_eq(loom_ir_check_against_gguf(g2, f, &err), LOOM_OK, "%s", err.msg);
    free(b);
    loom_ir_graph_destroy(g);
    loom_ir_graph_destroy(g2);
    loom_gguf_close(f);
    unlink(path);
}

Test(gguf_check, mismatches_refused) {
    char path[1024], other[1024];
    tmp_path(path, sizeof path, "check_b.gguf");
    tmp_path(other, sizeof other, "check_c.gguf");
    write_gguf(path, "one");
    write_gguf(other, "two"); /* same tensors and size, another header */
    loom_gguf *f, *f2;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open(path, &f, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_open(other, &f2, &err), LOOM_OK, "%s", err.msg);
    cr_assert_eq(loom_gguf_file_size(f), loom_gguf_file_size(f2));

    struct {
        const char *what;
        loom_ir_graph *g;
        const loom_gguf *against;
        loom_status status;
        const char *needle;
    } cases[] = {
        {"missing tensor", graph_for(f, path, LOOM_IR_F32, 4, "c.weight", 0), f, LOOM_ERR_NOT_FOUND,
         "'c.weight': no such tensor"},
        {"type", graph_for(f, path, LOOM_IR_F16, 4, "b.weight", 0), f, LOOM_ERR_VERIFY,
         "ggml type F32"},
        {"shape", graph_for(f, path, LOOM_IR_F32, 2, "b.weight", 0), f, LOOM_ERR_VERIFY,
         "ne={32,4}"},
        {"offset", graph_for(f, path, LOOM_IR_F32, 4, "b.weight", 32), f, LOOM_ERR_VERIFY,
         "offset"},
        {"another file", graph_for(f, path, LOOM_IR_F32, 4, "b.weight", 0), f2, LOOM_ERR_VERIFY,
         "checksum"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_error e = {0};
        loom_status st = loom_ir_check_against_gguf(cases[i].g, cases[i].against, &e);
        cr_expect_eq(st, cases[i].status, "%s: %s (%s)", cases[i].what, loom_status_name(st), e.msg);
        cr_expect(strstr(e.msg, cases[i].needle), "%s: message lacks '%s': %s", cases[i].what,
                  cases[i].needle, e.msg);
        cr_log_info("%-14s -> %s", cases[i].what, e.msg);
        loom_ir_graph_destroy(cases[i].g);
    }
    /* A wrong recorded size. */
    loom_ir_graph *g = graph_for(f, path, LOOM_IR_F32, 4, "b.weight", 0);
    cr_assert_eq(loom_ir_meta_set_int(g, "source.size", 12, &err), LOOM_OK);
    cr_assert_eq(loom_ir_check_against_gguf(g, f, &err), LOOM_ERR_VERIFY);
    cr_assert(strstr(err.msg, "12 bytes"), "%s", err.msg);
    loom_ir_graph_destroy(g);
    loom_gguf_close(f);
    loom_gguf_close(f2);
    unlink(path);
    unlink(other);
}

/* ---- lowered golden models ---- */

static const char *const models[] = {
    "tiny_llama_f32", "tiny_llama_f16", "tiny_llama_q8_0", "tiny_llama_q6_k",
    "tiny_llama_q5_k", "tiny_llama_q4_k", "tiny_qwen2_q4km", "tiny_qwen3_q4km",
};
enum { N_MODELS = sizeof models / sizeof models[0] };

Test(lowered, golden_models_round_trip_and_check) {
    const char *dir = loom_test_testdata("golden/tiny_llama_f32.gguf");
    loom_gguf *files[N_MODELS];
    loom_ir_graph *graphs[N_MODELS];
    for (int i = 0; i < N_MODELS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/golden/%s.gguf", dir, models[i]);
        loom_error err = {0};
        cr_assert_eq(loom_gguf_open(path, &files[i], &err), LOOM_OK, "%s", err.msg);
        loom_lower_options o;
        loom_lower_options_init(&o);
        o.source_path = path;
        loom_ir_graph *g;
        cr_assert_eq(loom_lower_gguf(files[i], &o, &g, &err), LOOM_OK, "%s: %s", models[i], err.msg);
        size_t n = check_round_trip(g);
        /* The reloaded graph is what gets checked against the file. */
        uint8_t *b;
        serialize_ok(g, &b, &n);
        graphs[i] = deserialize_ok(b, n);
        free(b);
        loom_ir_graph_destroy(g);
        cr_assert_eq(loom_ir_check_against_gguf(graphs[i], files[i], &err), LOOM_OK, "%s: %s",
                     models[i], err.msg);
        cr_log_info("%s: %u nodes, %zu bytes", models[i], loom_ir_node_count(graphs[i]), n);
    }
    for (int i = 0; i < N_MODELS; i++)
        for (int j = 0; j < N_MODELS; j++) {
            if (i == j) continue;
            loom_error err = {0};
            cr_expect_neq(loom_ir_check_against_gguf(graphs[i], files[j], &err), LOOM_OK,
                          "graph of %s accepted by %s", models[i], models[j]);
        }
    for (int i = 0; i < N_MODELS; i++) {
        loom_ir_graph_destroy(graphs[i]);
        loom_gguf_close(files[i]);
    }
}
