/* gguf_writer.c: writes GGUF v3 files (see gguf.h for the API).
 *
 * Keys are serialized when they are set (type id + payload, exactly the bytes the file will
 * hold), so writing is concatenation and a value read from another file can be copied verbatim.
 * Tensors are recorded with their shape, type and a fill callback; their bytes are produced only
 * at write time, straight into a shared writable mapping of the output file, so a multi-gigabyte
 * model is never held in memory. Layout: header, keys, tensor infos, zero padding to the
 * alignment, then each tensor at the next multiple of the alignment; the file ends padded to the
 * alignment too (llama.cpp's writer does the same).
 *
 * Invariants: every key is unique, every tensor name is unique, every tensor's byte size was
 * computed from its ggml type and checked for overflow when it was added. The file is written to
 * PATH.tmp (space reserved up front with posix_fallocate so a full disk is an error, not a
 * SIGBUS) and renamed over PATH only when everything succeeded; on failure PATH.tmp is removed.
 */
#include "loaders/gguf.h"
#include "loaders/gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool oom; /* a put failed; the buffer is unusable */
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->oom || n == 0) return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(buf *b, uint64_t v, size_t n) {
    uint8_t bytes[8];
    for (size_t i = 0; i < n; i++) bytes[i] = (uint8_t)(v >> (8 * i));
    put(b, bytes, n);
}

static void put_string(buf *b, const char *s, uint64_t len) {
    put_le(b, len, 8);
    put(b, s, (size_t)len);
}

typedef struct {
    char *key;
    uint8_t *bytes; /* u32 type id + payload */
    size_t len;
} writer_kv;

typedef struct {
    char *name;
    loom_ggml_type type;
    uint32_t n_dims;
    int64_t ne[LOOM_GGUF_MAX_DIMS];
    uint64_t nbytes;
    loom_gguf_fill_fn fill; /* NULL: bytes come from owned */
    void *ctx;
    void *owned;
} writer_tensor;

struct loom_gguf_writer {
    uint32_t alignment;
    writer_kv *kv;
    size_t n_kv, cap_kv;
    writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
};

loom_status loom_gguf_writer_create(loom_gguf_writer **out, loom_error *err) {
    if (out == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: out is NULL");
    *out = calloc(1, sizeof **out);
    if (*out == NULL) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    (*out)->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    return LOOM_OK;
}

void loom_gguf_writer_destroy(loom_gguf_writer *w) {
    if (w == NULL) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].bytes);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->kv);
    free(w->tensors);
    free(w);
}

/* Appends v's payload (without its type id). depth counts enclosing arrays. */
static loom_status put_value(buf *b, const loom_gguf_value *v, int depth, const char *key,
                             loom_error *err) {
    static const uint64_t umax[] = {[LOOM_GGUF_U8] = UINT8_MAX, [LOOM_GGUF_U16] = UINT16_MAX,
                                    [LOOM_GGUF_U32] = UINT32_MAX, [LOOM_GGUF_U64] = UINT64_MAX};
    size_t size = loom_gguf_type_size(v->type);
    switch (v->type) {
    case LOOM_GGUF_U8: case LOOM_GGUF_U16: case LOOM_GGUF_U32: case LOOM_GGUF_U64:
        if (v->u64 > umax[v->type])
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': %llu "
                                  "does not fit %s", key, (unsigned long long)v->u64,
                                  loom_gguf_type_name(v->type));
        put_le(b, v->u64, size);
        return LOOM_OK;
    case LOOM_GGUF_I8: case LOOM_GGUF_I16: case LOOM_GGUF_I32: case LOOM_GGUF_I64: {
        int64_t hi = size == 8 ? INT64_MAX : (int64_t)((1ull << (8 * size - 1)) - 1);
        if (v->i64 > hi || v->i64 < -hi - 1)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': %lld "
                                  "does not fit %s", key, (long long)v->i64,
                                  loom_gguf_type_name(v->type));
        put_le(b, (uint64_t)v->i64, size);
        return LOOM_OK;
    }
    case LOOM_GGUF_F32: {
        float f = (float)v->f64;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        put_le(b, bits, 4);
        return LOOM_OK;
    }
    case LOOM_GGUF_F64: {
        uint64_t bits;
        memcpy(&bits, &v->f64, 8);
        put_le(b, bits, 8);
        return LOOM_OK;
    }
    case LOOM_GGUF_BOOL:
        put_le(b, v->b ? 1 : 0, 1);
        return LOOM_OK;
    case LOOM_GGUF_STRING:
        if (v->str.ptr == NULL && v->str.len != 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': NULL "
                                  "string", key);
        put_string(b, v->str.ptr, v->str.len);
        return LOOM_OK;
    case LOOM_GGUF_ARRAY: {
        loom_gguf_type et = v->arr.elem_type;
        if (depth >= LOOM_GGUF_MAX_NESTING)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': arrays "
                                  "nested deeper than %d levels", key, LOOM_GGUF_MAX_NESTING);
        if ((unsigned)et >= LOOM_GGUF_TYPE_COUNT)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': unknown "
                                  "array element type %d", key, (int)et);
        put_le(b, (uint64_t)et, 4);
        put_le(b, v->arr.n, 8);
        if (et != LOOM_GGUF_STRING && et != LOOM_GGUF_ARRAY) {
            size_t es = loom_gguf_type_size(et);
            if (v->arr.n > SIZE_MAX / es || (v->arr.data == NULL && v->arr.n != 0))
                return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': "
                                      "bad array of %llu %s", key, (unsigned long long)v->arr.n,
                                      loom_gguf_type_name(et));
            if (et == LOOM_GGUF_BOOL)
                for (uint64_t i = 0; i < v->arr.n; i++)
                    if (((const uint8_t *)v->arr.data)[i] > 1)
                        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key "
                                              "'%s': bool element %llu is neither 0 nor 1", key,
                                              (unsigned long long)i);
            put(b, v->arr.data, (size_t)(v->arr.n * es));
            return LOOM_OK;
        }
        if (v->arr.items == NULL && v->arr.n != 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': array "
                                  "of %s without items", key, loom_gguf_type_name(et));
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (v->arr.items[i].type != et)
                return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': "
                                      "element %llu is %s in an array of %s", key,
                                      (unsigned long long)i,
                                      loom_gguf_type_name(v->arr.items[i].type),
                                      loom_gguf_type_name(et));
            loom_status s = put_value(b, &v->arr.items[i], depth + 1, key, err);
            if (s) return s;
        }
        return LOOM_OK;
    }
    default:
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': unknown "
                              "value type %d", key, (int)v->type);
    }
}

loom_status loom_gguf_writer_set(loom_gguf_writer *w, const char *key, const loom_gguf_value *v,
                                 loom_error *err) {
    if (w == NULL || key == NULL || v == NULL || key[0] == '\0')
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: set: NULL argument "
                              "or empty key");
    uint32_t alignment = w->alignment;
    if (strcmp(key, "general.alignment") == 0) {
        if (v->type != LOOM_GGUF_U32 || !gguf_alignment_ok(v->u64))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: "
                                  "general.alignment must be a u32 power of two");
        alignment = (uint32_t)v->u64;
    }
    buf b = {0};
    put_le(&b, (uint64_t)v->type, 4);
    loom_status s = put_value(&b, v, 0, key, err);
    if (s == LOOM_OK && b.oom)
        s = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: key '%s': out of memory", key);
    if (s) {
        free(b.p);
        return s;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].bytes);
            w->kv[i].bytes = b.p;
            w->kv[i].len = b.len;
            w->alignment = alignment;
            return LOOM_OK;
        }
    }
    char *copy = strdup(key);
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        writer_kv *kv = realloc(w->kv, cap * sizeof *kv);
        if (kv) {
            w->kv = kv;
            w->cap_kv = cap;
        }
    }
    if (copy == NULL || w->n_kv == w->cap_kv) {
        free(copy);
        free(b.p);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: key '%s': out of memory",
                              key);
    }
    w->kv[w->n_kv++] = (writer_kv){.key = copy, .bytes = b.p, .len = b.len};
    w->alignment = alignment;
    return LOOM_OK;
}

loom_status loom_gguf_writer_set_alignment(loom_gguf_writer *w, uint32_t alignment, loom_error *err) {
    return loom_gguf_writer_set_u32(w, "general.alignment", alignment, err);
}

loom_status loom_gguf_writer_set_u32(loom_gguf_writer *w, const char *key, uint32_t v, loom_error *err) {
    loom_gguf_value val = {.type = LOOM_GGUF_U32, .u64 = v};
    return loom_gguf_writer_set(w, key, &val, err);
}

loom_status loom_gguf_writer_set_f32(loom_gguf_writer *w, const char *key, float v, loom_error *err) {
    loom_gguf_value val = {.type = LOOM_GGUF_F32, .f64 = v};
    return loom_gguf_writer_set(w, key, &val, err);
}

loom_status loom_gguf_writer_set_bool(loom_gguf_writer *w, const char *key, bool v, loom_error *err) {
    loom_gguf_value val = {.type = LOOM_GGUF_BOOL, .b = v};
    return loom_gguf_writer_set(w, key, &val, err);
}

loom_status loom_gguf_writer_set_string(loom_gguf_writer *w, const char *key, const char *s,
                                        loom_error *err) {
    if (s == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': NULL string",
                              key ? key : "(null)");
    loom_gguf_value val = {.type = LOOM_GGUF_STRING, .str = {s, strlen(s)}};
    return loom_gguf_writer_set(w, key, &val, err);
}

loom_status loom_gguf_writer_set_array(loom_gguf_writer *w, const char *key, loom_gguf_type elem_type,
                                       const void *data, uint64_t n, loom_error *err) {
    if (loom_gguf_type_size(elem_type) == 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': set_array "
                              "takes scalar elements, not %s", key ? key : "(null)",
                              loom_gguf_type_name(elem_type));
    loom_gguf_value val = {.type = LOOM_GGUF_ARRAY};
    val.arr.elem_type = elem_type;
    val.arr.n = n;
    val.arr.data = data;
    return loom_gguf_writer_set(w, key, &val, err);
}

loom_status loom_gguf_writer_set_string_array(loom_gguf_writer *w, const char *key,
                                              const char *const *strs, uint64_t n, loom_error *err) {
    if (n > SIZE_MAX / sizeof(loom_gguf_value) || (strs == NULL && n != 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': bad string "
                              "array", key ? key : "(null)");
    loom_gguf_value *items = malloc((size_t)(n ? n : 1) * sizeof *items);
    if (items == NULL)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        if (strs[i] == NULL) {
            free(items);
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': string "
                                  "%llu is NULL", key ? key : "(null)", (unsigned long long)i);
        }
        items[i] = (loom_gguf_value){.type = LOOM_GGUF_STRING, .str = {strs[i], strlen(strs[i])}};
    }
    loom_gguf_value val = {.type = LOOM_GGUF_ARRAY};
    val.arr.elem_type = LOOM_GGUF_STRING;
    val.arr.n = n;
    val.arr.items = items;
    loom_status s = loom_gguf_writer_set(w, key, &val, err);
    free(items);
    return s;
}

/* Checks a tensor's description and computes its byte size. */
static loom_status check_tensor(const loom_gguf_writer *w, const char *name, loom_ggml_type type,
                                uint32_t n_dims, const int64_t *ne, uint64_t *nbytes,
                                loom_error *err) {
    if (w == NULL || name == NULL || name[0] == '\0' || ne == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: add_tensor: NULL "
                              "argument or empty name");
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' "
                                  "added twice", name);
    if (n_dims < 1 || n_dims > LOOM_GGUF_MAX_DIMS)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': n_dims "
                              "%u must be 1..%d", name, n_dims, LOOM_GGUF_MAX_DIMS);
    const loom_ggml_type_info *info = loom_ggml_type_get((uint32_t)type);
    if (info == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': unknown "
                              "ggml type %d", name, (int)type);
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] < 0)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': "
                                  "ne[%u] = %lld is negative", name, d, (long long)ne[d]);
    /* the reader's rule, so whatever is written reads back */
    int64_t bytes = loom_ggml_tensor_bytes((uint32_t)type, n_dims, ne);
    if (bytes == -1)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': ne[0] = "
                              "%lld is not a multiple of %s's block size %lld", name,
                              (long long)ne[0], info->name, (long long)info->block_size);
    if (bytes < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': element "
                              "count or byte size (%s) overflows 64 bits", name, info->name);
    *nbytes = (uint64_t)bytes;
    return LOOM_OK;
}

static loom_status add_tensor(loom_gguf_writer *w, const char *name, loom_ggml_type type,
                              uint32_t n_dims, const int64_t *ne, uint64_t nbytes,
                              loom_gguf_fill_fn fill, void *ctx, void *owned, loom_error *err) {
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        writer_tensor *t = realloc(w->tensors, cap * sizeof *t);
        if (t == NULL) goto oom;
        w->tensors = t;
        w->cap_tensors = cap;
    }
    writer_tensor t = {.name = strdup(name), .type = type, .n_dims = n_dims, .nbytes = nbytes,
                       .fill = fill, .ctx = ctx, .owned = owned};
    if (t.name == NULL) goto oom;
    for (int d = 0; d < LOOM_GGUF_MAX_DIMS; d++) t.ne[d] = d < (int)n_dims ? ne[d] : 1;
    w->tensors[w->n_tensors++] = t;
    return LOOM_OK;
oom:
    free(owned);
    return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: tensor '%s': out of memory",
                          name);
}

loom_status loom_gguf_writer_add_tensor(loom_gguf_writer *w, const char *name, loom_ggml_type type,
                                        uint32_t n_dims, const int64_t *ne, loom_gguf_fill_fn fill,
                                        void *ctx, loom_error *err) {
    uint64_t nbytes;
    loom_status s = check_tensor(w, name, type, n_dims, ne, &nbytes, err);
    if (s) return s;
    if (fill == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': no fill "
                              "callback", name);
    return add_tensor(w, name, type, n_dims, ne, nbytes, fill, ctx, NULL, err);
}

loom_status loom_gguf_writer_add_tensor_data(loom_gguf_writer *w, const char *name,
                                             loom_ggml_type type, uint32_t n_dims, const int64_t *ne,
                                             const void *data, uint64_t nbytes, loom_error *err) {
    uint64_t want;
    loom_status s = check_tensor(w, name, type, n_dims, ne, &want, err);
    if (s) return s;
    if (nbytes != want || (data == NULL && nbytes != 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': %llu "
                              "bytes given, its shape and type need %llu", name,
                              (unsigned long long)nbytes, (unsigned long long)want);
    void *copy = malloc(nbytes ? (size_t)nbytes : 1);
    if (copy == NULL)
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: tensor '%s': out of "
                              "memory", name);
    if (nbytes) memcpy(copy, data, (size_t)nbytes);
    return add_tensor(w, name, type, n_dims, ne, nbytes, NULL, NULL, copy, err);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* The header, keys and tensor infos; offsets[i] receives tensor i's data offset and *data_size
 * the padded size of the data section. */
static loom_status build_header(const loom_gguf_writer *w, buf *b, uint64_t *offsets,
                                uint64_t *data_size, loom_error *err) {
    put(b, "GGUF", 4);
    put_le(b, 3, 4);
    put_le(b, w->n_tensors, 8);
    put_le(b, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_string(b, w->kv[i].key, strlen(w->kv[i].key));
        put(b, w->kv[i].bytes, w->kv[i].len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        put_string(b, t->name, strlen(t->name));
        put_le(b, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) put_le(b, (uint64_t)t->ne[d], 8);
        put_le(b, (uint64_t)t->type, 4);
        put_le(b, off, 8);
        offsets[i] = off;
        if (t->nbytes > (uint64_t)INT64_MAX - off - w->alignment)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: data section "
                                  "larger than 2^63 bytes");
        off = align_up(off + t->nbytes, w->alignment);
    }
    *data_size = off;
    if (b->oom) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    return LOOM_OK;
}

loom_status loom_gguf_writer_write(loom_gguf_writer *w, const char *path, loom_error *err) {
    if (w == NULL || path == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf writer: write: NULL argument");
    buf header = {0};
    uint64_t *offsets = malloc((w->n_tensors + 1) * sizeof *offsets);
    char *tmp = malloc(strlen(path) + 5);
    int fd = -1;
    bool created = false; /* tmp is ours to remove on failure */
    uint8_t *map = MAP_FAILED;
    uint64_t data_size = 0, total = 0;
    loom_status s;
    if (offsets == NULL || tmp == NULL) {
        s = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
        goto done;
    }
    sprintf(tmp, "%s.tmp", path);
    if ((s = build_header(w, &header, offsets, &data_size, err))) goto done;
    uint64_t data_start = align_up(header.len, w->alignment);
    total = data_start + data_size;
    fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: %s: cannot create: %s", tmp,
                           strerror(errno));
        goto done;
    }
    created = true;
    int e = posix_fallocate(fd, 0, (off_t)total);
    if (e == EINVAL || e == EOPNOTSUPP) e = ftruncate(fd, (off_t)total) ? errno : 0;
    if (e != 0) {
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: %s: cannot reserve %llu bytes: %s", tmp,
                           (unsigned long long)total, strerror(e));
        goto done;
    }
    map = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: %s: mmap of %llu bytes failed: %s", tmp,
                           (unsigned long long)total, strerror(errno));
        goto done;
    }
    memcpy(map, header.p, header.len);
    memset(map + header.len, 0, (size_t)(data_start - header.len));
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        uint8_t *dst = map + data_start + offsets[i];
        uint64_t end = i + 1 < w->n_tensors ? offsets[i + 1] : data_size;
        if (t->nbytes == 0) continue;
        if (t->fill) {
            if ((s = t->fill(t->ctx, dst, t->nbytes, err))) {
                loom_error_prefix(err, "gguf writer: %s: tensor '%s': ", path, t->name);
                goto done;
            }
        } else {
            memcpy(dst, t->owned, (size_t)t->nbytes);
        }
        memset(dst + t->nbytes, 0, (size_t)(end - offsets[i] - t->nbytes)); /* padding */
    }
    if (munmap(map, (size_t)total) != 0) {
        map = MAP_FAILED;
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: %s: munmap: %s", tmp, strerror(errno));
        goto done;
    }
    map = MAP_FAILED;
    e = close(fd);
    fd = -1;
    if (e != 0) {
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: %s: close: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        s = loom_error_set(err, LOOM_ERR_IO, "gguf writer: cannot rename %s to %s: %s", tmp, path,
                           strerror(errno));
        goto done;
    }
    s = LOOM_OK;
done:
    if (map != MAP_FAILED) munmap(map, (size_t)total);
    if (fd >= 0) close(fd);
    if (s != LOOM_OK && created) unlink(tmp);
    free(header.p);
    free(offsets);
    free(tmp);
    return s;
}
