/* ir_seed.c: writes the seed corpus of ir_fuzz: serialized graphs with the mode byte ir_fuzz
 * expects (0 = raw message, 1 = message without its checksum trailer).
 *
 *   ir_seed OUT_DIR [MODEL.gguf ...]
 *
 * Seeds: a hand-written layer with every op kind (fused ones too) and each GGUF given, lowered.
 * Not a product tool: built by tools/fuzz/build_ir.sh only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/serialize/serialize.h"
#include "loaders/gguf.h"
#include "loaders/lower.h"

static const char LAYER[] =
    "symbol T max=16\n"
    "meta source.file = \"x.gguf\"\n"
    "meta source.size = 999\n"
    "meta source.checksum = \"0123456789abcdef\"\n"
    "meta loom.arch = \"qwen3\"\n"
    "meta loom.rms_eps = 1e-06\n"
    "meta passes = \"fuse-qkv,dce\"\n"
    "input %tokens : i32[T]\n"
    "input %positions : i32[T]\n"
    "weight @emb : q8_0[64,64] offset=1024\n"
    "weight @norm : f32[64] offset=8192\n"
    "weight @wq : q8_0[64,64] offset=9216\n"
    "weight @wk : f16[32,64] offset=13824\n"
    "weight @wv : f32[32,64] offset=17920\n"
    "weight @hn : f32[16] offset=26112\n"
    "weight @wo : q8_0[64,64] offset=26240\n"
    "weight @wd : f32[64,64] offset=30848\n"
    "state @kv.k : f16[32,32]\n"
    "state @kv.v : f32[32,32]\n"
    "%x = get_rows(@emb, %tokens)\n"
    "%n = fused_rms_norm(%x, @norm) {eps=1e-06}\n"
    "%q, %k, %v = matmul_triple(%n, @wq, @wk, @wv)\n"
    "%q3 = reshape(%q) {shape=[T,4,16]}\n"
    "%qn = rms_norm(%q3) {eps=1e-06}\n"
    "%qw = mul(%qn, @hn)\n"
    "%qr = rope(%qw, %positions) {mode=neox, n_rot=16, freq_base=1000000.0}\n"
    "%k3 = reshape(%k) {shape=[T,2,16]}\n"
    "%kr = rope(%k3, %positions) {mode=norm, n_rot=8, freq_base=10000.0, freq_scale=0.5}\n"
    "%kc = kv_write(@kv.k, %kr, %positions)\n"
    "%vc = kv_write(@kv.v, %v, %positions)\n"
    "%a = attention(%qr, %kc, %vc, %positions) {n_head=4, n_kv_head=2, head_dim=16, "
    "scale=0.25}\n"
    "%h = matmul_add(%a, @wo, %x)\n"
    "%g = matmul_pair(%h, @wq, @wo) {swiglu=1}\n"
    "%p0, %p1 = matmul_pair(%h, @wq, @wo) {swiglu=0}\n"
    "%pm = mul(%p0, %p1)\n"
    "%ps = silu(%pm)\n"
    "%o = add(%g, %ps)\n"
    "%l = matmul(%o, @wd)\n"
    "%s = softmax(%l)\n"
    "%c = convert(%s) {dtype=bf16}\n"
    "%am = argmax(%l)\n"
    "output logits = %l\n"
    "output next = %am\n";

static int write_seed(const char *dir, const char *name, const loom_ir_graph *g) {
    uint8_t *b;
    size_t n;
    loom_error err = {0};
    if (loom_ir_serialize(g, &b, &n, &err)) {
        fprintf(stderr, "ir_seed: %s: %s\n", name, err.msg);
        return 1;
    }
    for (int mode = 0; mode < 2; mode++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s.pb", dir, name, mode ? "body" : "raw");
        FILE *f = fopen(path, "wb");
        size_t body = mode ? n - LOOM_IR_CHECKSUM_TRAILER : n;
        uint8_t m = (uint8_t)mode;
        if (!f || fwrite(&m, 1, 1, f) != 1 || fwrite(b, 1, body, f) != body || fclose(f)) {
            fprintf(stderr, "ir_seed: cannot write %s\n", path);
            free(b);
            return 1;
        }
    }
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ir_seed OUT_DIR [MODEL.gguf ...]\n");
        return 2;
    }
    loom_error err = {0};
    loom_ir_graph *g;
    if (loom_ir_parse(LAYER, strlen(LAYER), &g, &err)) {
        fprintf(stderr, "ir_seed: layer: %s\n", err.msg);
        return 1;
    }
    int rc = write_seed(argv[1], "layer", g);
    loom_ir_graph_destroy(g);
    for (int i = 2; i < argc; i++) {
        loom_gguf *f = NULL;
        loom_lower_options o;
        loom_lower_options_init(&o);
        o.source_path = argv[i];
        if (loom_gguf_open(argv[i], &f, &err) || loom_lower_gguf(f, &o, &g, &err)) {
            fprintf(stderr, "ir_seed: %s: %s\n", argv[i], err.msg);
            loom_gguf_close(f);
            rc = 1;
            continue;
        }
        const char *base = strrchr(argv[i], '/');
        rc |= write_seed(argv[1], base ? base + 1 : argv[i], g);
        loom_ir_graph_destroy(g);
        loom_gguf_close(f);
    }
    return rc;
}
