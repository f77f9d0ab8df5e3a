/* gguf_access.c: the reader's accessors (see gguf.h): header fields, keys and tensors by index,
 * typed getters that check the stored type (and, for integers, that the value fits), and the
 * widening readers of scalar array elements. Nothing here allocates or can fail except by
 * returning a status; float-to-integer conversions saturate instead of invoking undefined
 * behaviour.
 */
#include <string.h>

#include "loaders/gguf.h"
#include "loaders/gguf_impl.h"

uint32_t loom_gguf_version(const loom_gguf *g) { return g->version; }
uint64_t loom_gguf_alignment(const loom_gguf *g) { return g->alignment; }
uint64_t loom_gguf_file_size(const loom_gguf *g) { return g->size; }
uint64_t loom_gguf_data_offset(const loom_gguf *g) { return g->data_offset; }
const void *loom_gguf_file_bytes(const loom_gguf *g) { return g->base; }

size_t loom_gguf_n_keys(const loom_gguf *g) { return g->n_kv; }

const char *loom_gguf_key_name(const loom_gguf *g, size_t i) {
    return i < g->n_kv ? g->keys[i] : NULL;
}

const loom_gguf_value *loom_gguf_key_value(const loom_gguf *g, size_t i) {
    return i < g->n_kv ? &g->values[i] : NULL;
}

size_t loom_gguf_n_tensors(const loom_gguf *g) { return g->n_tensors; }

const loom_gguf_tensor *loom_gguf_tensor_at(const loom_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

bool loom_gguf_type_is_signed(loom_gguf_type t) {
    return t == LOOM_GGUF_I8 || t == LOOM_GGUF_I16 || t == LOOM_GGUF_I32 || t == LOOM_GGUF_I64;
}

bool loom_gguf_type_is_int(loom_gguf_type t) {
    return loom_gguf_type_is_signed(t) || t == LOOM_GGUF_U8 || t == LOOM_GGUF_U16 ||
           t == LOOM_GGUF_U32 || t == LOOM_GGUF_U64;
}

/* The value of key, or NULL with LOOM_ERR_NOT_FOUND in err. */
static const loom_gguf_value *lookup(const loom_gguf *g, const char *key, loom_error *err) {
    const loom_gguf_value *v = loom_gguf_find(g, key);
    if (v == NULL) loom_error_set(err, LOOM_ERR_NOT_FOUND, "gguf: key '%s' not found", key);
    return v;
}

static loom_status wrong_type(const char *key, const loom_gguf_value *v, const char *wanted,
                              loom_error *err) {
    return loom_error_set(err, LOOM_ERR_TYPE, "gguf: key '%s' holds %s, wanted %s", key,
                          type_names[v->type], wanted);
}

/* An integer key's value within [lo, hi] (as a signed or unsigned range). */
static loom_status get_int(const loom_gguf *g, const char *key, int64_t lo, uint64_t hi,
                           const char *wanted, int64_t *si, uint64_t *ui, loom_error *err) {
    const loom_gguf_value *v = lookup(g, key, err);
    if (v == NULL) return LOOM_ERR_NOT_FOUND;
    if (loom_gguf_type_is_int(v->type) && !loom_gguf_type_is_signed(v->type)) {
        if (v->u64 > hi)
            return loom_error_set(err, LOOM_ERR_TYPE, "gguf: key '%s' holds %s %llu, which does "
                                  "not fit %s", key, type_names[v->type],
                                  (unsigned long long)v->u64, wanted);
        *ui = v->u64;
        *si = (int64_t)v->u64;
        return LOOM_OK;
    }
    if (loom_gguf_type_is_signed(v->type)) {
        if (v->i64 < lo || (v->i64 >= 0 && (uint64_t)v->i64 > hi))
            return loom_error_set(err, LOOM_ERR_TYPE, "gguf: key '%s' holds %s %lld, which does "
                                  "not fit %s", key, type_names[v->type], (long long)v->i64,
                                  wanted);
        *si = v->i64;
        *ui = (uint64_t)v->i64;
        return LOOM_OK;
    }
    return wrong_type(key, v, wanted, err);
}

loom_status loom_gguf_get_u32(const loom_gguf *g, const char *key, uint32_t *out, loom_error *err) {
    int64_t si;
    uint64_t ui;
    loom_status s = get_int(g, key, 0, UINT32_MAX, "u32", &si, &ui, err);
    if (s == LOOM_OK) *out = (uint32_t)ui;
    return s;
}

loom_status loom_gguf_get_i32(const loom_gguf *g, const char *key, int32_t *out, loom_error *err) {
    int64_t si;
    uint64_t ui;
    loom_status s = get_int(g, key, INT32_MIN, INT32_MAX, "i32", &si, &ui, err);
    if (s == LOOM_OK) *out = (int32_t)si;
    return s;
}

loom_status loom_gguf_get_u64(const loom_gguf *g, const char *key, uint64_t *out, loom_error *err) {
    int64_t si;
    uint64_t ui;
    loom_status s = get_int(g, key, 0, UINT64_MAX, "u64", &si, &ui, err);
    if (s == LOOM_OK) *out = ui;
    return s;
}

loom_status loom_gguf_get_f32(const loom_gguf *g, const char *key, float *out, loom_error *err) {
    const loom_gguf_value *v = lookup(g, key, err);
    if (v == NULL) return LOOM_ERR_NOT_FOUND;
    if (v->type != LOOM_GGUF_F32 && v->type != LOOM_GGUF_F64) return wrong_type(key, v, "f32", err);
    *out = (float)v->f64;
    return LOOM_OK;
}

loom_status loom_gguf_get_bool(const loom_gguf *g, const char *key, bool *out, loom_error *err) {
    const loom_gguf_value *v = lookup(g, key, err);
    if (v == NULL) return LOOM_ERR_NOT_FOUND;
    if (v->type != LOOM_GGUF_BOOL) return wrong_type(key, v, "bool", err);
    *out = v->b;
    return LOOM_OK;
}

loom_status loom_gguf_get_string(const loom_gguf *g, const char *key, const char **out,
                                 loom_error *err) {
    const loom_gguf_value *v = lookup(g, key, err);
    if (v == NULL) return LOOM_ERR_NOT_FOUND;
    if (v->type != LOOM_GGUF_STRING) return wrong_type(key, v, "string", err);
    *out = v->str.ptr;
    return LOOM_OK;
}

loom_status loom_gguf_get_opt_bool(const loom_gguf *g, const char *key, bool *out, loom_error *err) {
    return loom_gguf_find(g, key) ? loom_gguf_get_bool(g, key, out, err) : LOOM_OK;
}

loom_status loom_gguf_get_opt_string(const loom_gguf *g, const char *key, const char **out,
                                     loom_error *err) {
    return loom_gguf_find(g, key) ? loom_gguf_get_string(g, key, out, err) : LOOM_OK;
}

loom_status loom_gguf_get_array(const loom_gguf *g, const char *key, loom_gguf_type elem_type,
                                const loom_gguf_value **out, loom_error *err) {
    const loom_gguf_value *v = lookup(g, key, err);
    if (v == NULL) return LOOM_ERR_NOT_FOUND;
    if (v->type != LOOM_GGUF_ARRAY || v->arr.elem_type != elem_type) {
        if (v->type != LOOM_GGUF_ARRAY)
            return loom_error_set(err, LOOM_ERR_TYPE, "gguf: key '%s' holds %s, wanted array of %s",
                                  key, type_names[v->type], loom_gguf_type_name(elem_type));
        return loom_error_set(err, LOOM_ERR_TYPE,
                              "gguf: key '%s' holds array of %s, wanted array of %s", key,
                              type_names[v->arr.elem_type], loom_gguf_type_name(elem_type));
    }
    *out = v;
    return LOOM_OK;
}

/* Raw element i of a scalar array, zero-extended, plus its width. */
static uint64_t array_raw(const loom_gguf_value *arr, uint64_t i, size_t *width) {
    *width = type_sizes[arr->arr.elem_type];
    LOOM_ASSERT(*width != 0 && i < arr->arr.n);
    return load_le((const uint8_t *)arr->arr.data + i * *width, *width);
}

static double array_float(loom_gguf_type t, uint64_t raw) {
    if (t == LOOM_GGUF_F32) {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    double d;
    memcpy(&d, &raw, 8);
    return d;
}

/* Float to integer without undefined behaviour: NaN gives 0, out-of-range values saturate. */
static int64_t float_to_i64(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775807.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

static uint64_t float_to_u64(double d) {
    if (d != d || d <= 0) return 0;
    if (d >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)d;
}

uint64_t loom_gguf_array_u64(const loom_gguf_value *arr, uint64_t i) {
    size_t w;
    uint64_t raw = array_raw(arr, i, &w);
    loom_gguf_type t = arr->arr.elem_type;
    if (loom_gguf_type_is_signed(t)) return (uint64_t)sign_extend(raw, w);
    if (t == LOOM_GGUF_F32 || t == LOOM_GGUF_F64) return float_to_u64(array_float(t, raw));
    return raw;
}

int64_t loom_gguf_array_i64(const loom_gguf_value *arr, uint64_t i) {
    size_t w;
    uint64_t raw = array_raw(arr, i, &w);
    loom_gguf_type t = arr->arr.elem_type;
    if (loom_gguf_type_is_signed(t)) return sign_extend(raw, w);
    if (t == LOOM_GGUF_F32 || t == LOOM_GGUF_F64) return float_to_i64(array_float(t, raw));
    return (int64_t)raw;
}

double loom_gguf_array_f64(const loom_gguf_value *arr, uint64_t i) {
    size_t w;
    uint64_t raw = array_raw(arr, i, &w);
    loom_gguf_type t = arr->arr.elem_type;
    if (t == LOOM_GGUF_F32 || t == LOOM_GGUF_F64) return array_float(t, raw);
    if (loom_gguf_type_is_signed(t)) return (double)sign_extend(raw, w);
    return (double)raw;
}
