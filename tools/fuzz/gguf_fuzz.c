/* gguf_fuzz.c: libFuzzer harness for the GGUF reader.
 *
 * Each input is parsed with loom_gguf_open_memory; when it parses, every key is read through
 * every typed accessor and every array element through the widening readers, and every tensor's
 * bytes are touched, so a wrong bound anywhere shows up under ASan/UBSan. Build and run with
 * tools/fuzz/build.sh (see the README for the command).
 */
#include <stddef.h>
#include <stdint.h>

#include "loaders/gguf.h"

static volatile uint64_t sink;

static void walk_value(const loom_gguf_value *v, int depth) {
    LOOM_ASSERT(depth <= LOOM_GGUF_MAX_NESTING);
    switch (v->type) {
    case LOOM_GGUF_STRING:
        for (uint64_t i = 0; i < v->str.len; i++) sink += (uint8_t)v->str.ptr[i];
        LOOM_ASSERT(v->str.ptr[v->str.len] == '\0');
        break;
    case LOOM_GGUF_ARRAY:
        if (v->arr.elem_type == LOOM_GGUF_STRING || v->arr.elem_type == LOOM_GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->arr.n; i++) walk_value(&v->arr.items[i], depth + 1);
        } else {
            for (uint64_t i = 0; i < v->arr.n; i++)
                sink += loom_gguf_array_u64(v, i) + (uint64_t)loom_gguf_array_i64(v, i) +
                        (uint64_t)(loom_gguf_array_f64(v, i) == 0.0);
        }
        break;
    default:
        sink += v->u64;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    loom_gguf *g = NULL;
    loom_error err = {0};
    if (loom_gguf_open_memory(data, size, &g, &err) != LOOM_OK) {
        LOOM_ASSERT(g == NULL && err.msg[0] != '\0');
        return 0;
    }
    for (size_t i = 0; i < loom_gguf_n_keys(g); i++) {
        const char *key = loom_gguf_key_name(g, i);
        const loom_gguf_value *v = loom_gguf_key_value(g, i);
        LOOM_ASSERT(loom_gguf_find(g, key) == v);
        walk_value(v, 0);
        uint32_t u32; int32_t i32; uint64_t u64; float f; bool b; const char *s;
        const loom_gguf_value *arr;
        if (loom_gguf_get_u32(g, key, &u32, &err) == LOOM_OK) sink += u32;
        if (loom_gguf_get_i32(g, key, &i32, &err) == LOOM_OK) sink += (uint64_t)i32;
        if (loom_gguf_get_u64(g, key, &u64, &err) == LOOM_OK) sink += u64;
        if (loom_gguf_get_f32(g, key, &f, &err) == LOOM_OK) sink += (f == 0.0f);
        if (loom_gguf_get_bool(g, key, &b, &err) == LOOM_OK) sink += b;
        if (loom_gguf_get_string(g, key, &s, &err) == LOOM_OK) sink += (uint8_t)s[0];
        for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++)
            if (loom_gguf_get_array(g, key, (loom_gguf_type)t, &arr, &err) == LOOM_OK)
                sink += arr->arr.n;
    }
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        LOOM_ASSERT(loom_gguf_find_tensor(g, t->name) == t);
        LOOM_ASSERT(t->file_offset + t->nbytes <= loom_gguf_file_size(g));
        const uint8_t *p = t->data;
        if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
    }
    loom_gguf_close(g);
    return 0;
}
