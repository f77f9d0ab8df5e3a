/* gguf.c: the GGUF reader (versions 2 and 3), see gguf.h for the API.
 *
 * Layout parsed (little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv times
 * {string key, u32 value type, value}; n_tensors times {string name, u32 n_dims, u64 ne[n_dims],
 * u32 ggml type, u64 offset}; padding to general.alignment (default 32); the data section. A
 * string is u64 length + bytes; an array is u32 element type + u64 count + elements.
 *
 * Invariants the parser keeps, so no input can crash it or make it allocate without bound:
 * - every read goes through the cursor, which checks the bytes left first;
 * - every count is checked against the bytes left times the smallest encoding of one element
 *   before anything is allocated, so memory stays within a constant factor of the file size;
 * - array nesting is capped at LOOM_GGUF_MAX_NESTING, so recursion is bounded;
 * - sizes computed from the file (element counts, byte sizes, offsets) are overflow-checked.
 * Every error is LOOM_ERR_FORMAT (LOOM_ERR_UNSUPPORTED for a version other than 2 or 3) with a
 * message "gguf: <field>: <problem> at offset <byte>".
 *
 * The handle's layout is in gguf_impl.h; the accessors are in gguf_access.c.
 *
 * Memory: all strings, values and tables live in one arena freed by loom_gguf_close. Scalar
 * array elements and tensor data are not copied: they point into the caller's buffer or the
 * read-only mapping.
 */
#include "loaders/gguf.h"
#include "loaders/gguf_impl.h"
#include "loom/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- arena ---------------------------------------------------------------------------- */

/* Zeroed, 16-byte aligned memory that lives until arena_free; NULL when out of memory. */
static void *arena_alloc(arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->head == NULL || a->head->cap - a->head->used < n) {
        size_t cap = n > (size_t)65536 ? n : (size_t)65536;
        if (cap > SIZE_MAX - sizeof(arena_chunk)) return NULL;
        arena_chunk *c = calloc(1, sizeof(arena_chunk) + cap);
        if (c == NULL) return NULL;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_free(arena *a) {
    for (arena_chunk *c = a->head, *next; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ---- names, sizes, lookup ------------------------------------------------------------- */

const char *loom_gguf_type_name(loom_gguf_type t) {
    return (unsigned)t < LOOM_GGUF_TYPE_COUNT ? type_names[t] : "?";
}

size_t loom_gguf_type_size(loom_gguf_type t) {
    return (unsigned)t < LOOM_GGUF_TYPE_COUNT ? type_sizes[t] : 0;
}

static uint64_t hash_name(const char *s) {
    return loom_fnv1a64(LOOM_FNV1A64_BASIS, s, strlen(s));
}

/* Slot table of at least 2n entries (power of two); NULL when out of memory. */
static uint32_t *slots_create(arena *a, size_t n, size_t *mask) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    *mask = cap - 1;
    return arena_alloc(a, cap * sizeof(uint32_t));
}

/* Index of name among names[] through slots, or (size_t)-1. */
static size_t slots_find(const uint32_t *slots, size_t mask, const char *name,
                         const char *(*name_at)(const void *, size_t), const void *ctx) {
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        if (slots[i] == 0) return (size_t)-1;
        if (strcmp(name_at(ctx, slots[i] - 1), name) == 0) return slots[i] - 1;
    }
}

/* Inserts index idx under name; returns the index already there when the name is taken. */
static size_t slots_insert(uint32_t *slots, size_t mask, const char *name, size_t idx,
                           const char *(*name_at)(const void *, size_t), const void *ctx) {
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        if (slots[i] == 0) {
            slots[i] = (uint32_t)(idx + 1);
            return (size_t)-1;
        }
        if (strcmp(name_at(ctx, slots[i] - 1), name) == 0) return slots[i] - 1;
    }
}

static const char *key_name_at(const void *ctx, size_t i) {
    return ((const loom_gguf *)ctx)->keys[i];
}

static const char *tensor_name_at(const void *ctx, size_t i) {
    return ((const loom_gguf *)ctx)->tensors[i].name;
}

/* ---- the cursor ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    arena *arena;
    loom_error *err;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static loom_status fail(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static loom_status fail(cursor *c, const char *fmt, ...) {
    if (c->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
        va_end(ap);
        c->err->status = LOOM_ERR_FORMAT;
    }
    return LOOM_ERR_FORMAT;
}

static loom_status oom(cursor *c, const char *what) {
    return loom_error_set(c->err, LOOM_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
}

/* Reads an n-byte little-endian unsigned integer; `what` names the field for the error. */
static loom_status read_uint(cursor *c, size_t n, const char *what, uint64_t *out) {
    if (left(c) < n)
        return fail(c, "%s at offset %llu: truncated (needs %zu bytes, %llu left)", what,
                    (unsigned long long)c->pos, n, (unsigned long long)left(c));
    *out = load_le(c->p + c->pos, n);
    c->pos += n;
    return LOOM_OK;
}

/* Reads a GGUF string into the arena as a NUL-terminated copy. With no_nul, a string holding a
 * NUL byte is refused (keys and tensor names are looked up as C strings). */
static loom_status read_string(cursor *c, const char *what, bool no_nul, const char **ptr,
                               uint64_t *len) {
    uint64_t at = c->pos, n = 0;
    loom_status s = read_uint(c, 8, what, &n);
    if (s) return s;
    if (n > left(c))
        return fail(c, "%s at offset %llu: string length %llu exceeds the %llu bytes left", what,
                    (unsigned long long)at, (unsigned long long)n, (unsigned long long)left(c));
    if (no_nul && memchr(c->p + c->pos, 0, (size_t)n) != NULL)
        return fail(c, "%s at offset %llu: contains a NUL byte", what, (unsigned long long)at);
    char *copy = arena_alloc(c->arena, (size_t)n + 1);
    if (copy == NULL) return oom(c, what);
    if (n) memcpy(copy, c->p + c->pos, (size_t)n);
    copy[n] = '\0';
    c->pos += n;
    *ptr = copy;
    if (len) *len = n;
    return LOOM_OK;
}

/* Reads a value type id and checks it. */
static loom_status read_type(cursor *c, const char *what, loom_gguf_type *out) {
    uint64_t at = c->pos, t = 0;
    loom_status s = read_uint(c, 4, what, &t);
    if (s) return s;
    if (t >= LOOM_GGUF_TYPE_COUNT)
        return fail(c, "%s at offset %llu: unknown value type %llu", what, (unsigned long long)at,
                    (unsigned long long)t);
    *out = (loom_gguf_type)t;
    return LOOM_OK;
}

/* Smallest encoding of one value of type t, used to bound counts before allocating. */
static uint64_t min_encoded_size(loom_gguf_type t) {
    if (t == LOOM_GGUF_STRING) return 8;
    if (t == LOOM_GGUF_ARRAY) return 12;
    return type_sizes[t];
}

/* Parses a value of type t at the cursor into *v. depth counts enclosing arrays. */
static loom_status read_value(cursor *c, loom_gguf_type t, int depth, loom_gguf_value *v) {
    v->type = t;
    uint64_t at = c->pos, raw = 0;
    loom_status s;
    switch (t) {
    case LOOM_GGUF_U8: case LOOM_GGUF_U16: case LOOM_GGUF_U32: case LOOM_GGUF_U64:
        return read_uint(c, type_sizes[t], "value", &v->u64);
    case LOOM_GGUF_I8: case LOOM_GGUF_I16: case LOOM_GGUF_I32: case LOOM_GGUF_I64:
        if ((s = read_uint(c, type_sizes[t], "value", &raw))) return s;
        v->i64 = sign_extend(raw, type_sizes[t]);
        return LOOM_OK;
    case LOOM_GGUF_F32: {
        if ((s = read_uint(c, 4, "value", &raw))) return s;
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        v->f64 = f;
        return LOOM_OK;
    }
    case LOOM_GGUF_F64:
        if ((s = read_uint(c, 8, "value", &raw))) return s;
        memcpy(&v->f64, &raw, 8);
        return LOOM_OK;
    case LOOM_GGUF_BOOL:
        if ((s = read_uint(c, 1, "value", &raw))) return s;
        if (raw > 1)
            return fail(c, "bool value at offset %llu: byte %llu is neither 0 nor 1",
                        (unsigned long long)at, (unsigned long long)raw);
        v->b = raw != 0;
        return LOOM_OK;
    case LOOM_GGUF_STRING:
        return read_string(c, "string value", false, &v->str.ptr, &v->str.len);
    case LOOM_GGUF_ARRAY: {
        if (depth >= LOOM_GGUF_MAX_NESTING)
            return fail(c, "array at offset %llu: nested deeper than %d levels",
                        (unsigned long long)at, LOOM_GGUF_MAX_NESTING);
        loom_gguf_type et = LOOM_GGUF_U8;
        if ((s = read_type(c, "array element type", &et))) return s;
        uint64_t n_at = c->pos, n = 0;
        if ((s = read_uint(c, 8, "array length", &n))) return s;
        uint64_t unit = min_encoded_size(et);
        if (n > left(c) / unit)
            return fail(c,
                        "array length at offset %llu: %llu elements of %s need at least %llu "
                        "bytes each, only %llu bytes left",
                        (unsigned long long)n_at, (unsigned long long)n, type_names[et],
                        (unsigned long long)unit, (unsigned long long)left(c));
        v->arr.elem_type = et;
        v->arr.n = n;
        if (et != LOOM_GGUF_STRING && et != LOOM_GGUF_ARRAY) {
            v->arr.data = c->p + c->pos;
            if (et == LOOM_GGUF_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    if (c->p[c->pos + i] > 1)
                        return fail(c, "bool array element %llu at offset %llu: byte %u is "
                                    "neither 0 nor 1", (unsigned long long)i,
                                    (unsigned long long)(c->pos + i), c->p[c->pos + i]);
            c->pos += n * unit;
            return LOOM_OK;
        }
        loom_gguf_value *items = arena_alloc(c->arena, (size_t)(n ? n : 1) * sizeof *items);
        if (items == NULL) return oom(c, "array");
        v->arr.items = items;
        for (uint64_t i = 0; i < n; i++) {
            if ((s = read_value(c, et, depth + 1, &items[i])))
                return loom_error_prefix(c->err, "array element %llu: ", (unsigned long long)i);
        }
        return LOOM_OK;
    }
    default:
        break;
    }
    LOOM_ASSERT(!"read_value: type checked by read_type");
    return LOOM_ERR_FORMAT;
}

/* ---- header, metadata, tensor infos ------------------------------------------------------ */

static loom_status parse_kv(loom_gguf *g, cursor *c) {
    loom_status s;
    for (size_t i = 0; i < g->n_kv; i++) {
        uint64_t key_at = c->pos;
        if ((s = read_string(c, "key", true, &g->keys[i], NULL)))
            return loom_error_prefix(c->err, "key %zu: ", i);
        const char *key = g->keys[i];
        size_t prev = slots_insert(g->key_slots, g->key_mask, key, i, key_name_at, g);
        if (prev != (size_t)-1)
            return fail(c, "key %zu ('%s') at offset %llu: duplicate of key %zu", i, key,
                        (unsigned long long)key_at, prev);
        loom_gguf_type t = LOOM_GGUF_U8;
        if ((s = read_type(c, "value type", &t)) || (s = read_value(c, t, 0, &g->values[i])))
            return loom_error_prefix(c->err, "key %zu ('%s'): ", i, key);
        if (strcmp(key, "general.alignment") == 0) {
            const loom_gguf_value *v = &g->values[i];
            if (t != LOOM_GGUF_U32)
                return fail(c, "key %zu ('general.alignment') at offset %llu: type %s, must be "
                            "u32", i, (unsigned long long)key_at, type_names[t]);
            if (!gguf_alignment_ok(v->u64))
                return fail(c, "key %zu ('general.alignment') at offset %llu: value %llu is not "
                            "a nonzero power of two", i, (unsigned long long)key_at,
                            (unsigned long long)v->u64);
            g->alignment = v->u64;
        }
    }
    return LOOM_OK;
}

static loom_status parse_tensor_info(loom_gguf *g, cursor *c, size_t i) {
    loom_gguf_tensor *t = &g->tensors[i];
    loom_status s;
    uint64_t at = c->pos, v = 0;
    if ((s = read_string(c, "tensor name", true, &t->name, NULL))) return s;
    size_t prev = slots_insert(g->tensor_slots, g->tensor_mask, t->name, i, tensor_name_at, g);
    if (prev != (size_t)-1)
        return fail(c, "name at offset %llu: duplicate of tensor %zu", (unsigned long long)at,
                    prev);
    at = c->pos;
    if ((s = read_uint(c, 4, "n_dims", &v))) return s;
    if (v < 1 || v > LOOM_GGUF_MAX_DIMS)
        return fail(c, "n_dims %llu at offset %llu: must be 1..%d", (unsigned long long)v,
                    (unsigned long long)at, LOOM_GGUF_MAX_DIMS);
    t->n_dims = (uint32_t)v;
    uint64_t ne_at = c->pos;
    for (int d = 0; d < LOOM_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = c->pos;
        char what[16];
        snprintf(what, sizeof what, "ne[%u]", d);
        if ((s = read_uint(c, 8, what, &v))) return s;
        if (v > (uint64_t)INT64_MAX)
            return fail(c, "ne[%u] %llu at offset %llu: larger than INT64_MAX", d,
                        (unsigned long long)v, (unsigned long long)at);
        t->ne[d] = (int64_t)v;
    }
    at = c->pos;
    if ((s = read_uint(c, 4, "ggml type", &v))) return s;
    const loom_ggml_type_info *info = loom_ggml_type_get(v > UINT32_MAX ? UINT32_MAX : (uint32_t)v);
    if (info == NULL)
        return fail(c, "ggml type %llu at offset %llu: unknown type id", (unsigned long long)v,
                    (unsigned long long)at);
    t->type = (loom_ggml_type)v;
    int64_t nbytes = loom_ggml_tensor_bytes((uint32_t)v, t->n_dims, t->ne);
    if (nbytes == -1) /* type and dims are valid by now: only the block multiple is left */
        return fail(c, "ne[0] %lld at offset %llu: not a multiple of %s's block size %lld",
                    (long long)t->ne[0], (unsigned long long)ne_at, info->name,
                    (long long)info->block_size);
    if (nbytes < 0) {
        char shape[4 * 24] = "";
        for (uint32_t d = 0, n = 0; d < t->n_dims; d++)
            n += (uint32_t)snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "",
                                    (long long)t->ne[d]);
        return fail(c, "ne [%s] at offset %llu: the element count or the byte size (%s) "
                    "overflows 64 bits", shape, (unsigned long long)ne_at, info->name);
    }
    t->nbytes = (uint64_t)nbytes;
    at = c->pos;
    if ((s = read_uint(c, 8, "offset", &t->offset))) return s;
    if (t->offset % g->alignment != 0)
        return fail(c, "offset %llu at offset %llu: not a multiple of the alignment %llu",
                    (unsigned long long)t->offset, (unsigned long long)at,
                    (unsigned long long)g->alignment);
    return LOOM_OK;
}

static int compare_by_offset(const void *a, const void *b) {
    const loom_gguf_tensor *x = *(const loom_gguf_tensor *const *)a;
    const loom_gguf_tensor *y = *(const loom_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places every tensor in the data section and checks that none runs past the end of the file
 * or overlaps another. */
static loom_status place_tensors(loom_gguf *g, cursor *c) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        loom_gguf_tensor *t = &g->tensors[i];
        uint64_t room = g->size - g->data_offset; /* data_offset <= size checked by caller */
        if (t->offset > room || t->nbytes > room - t->offset)
            return fail(c, "tensor %zu ('%s'): data [offset %llu + %llu bytes] past end of file "
                        "(data section starts at %llu, file has %llu bytes)", i, t->name,
                        (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)g->data_offset, (unsigned long long)g->size);
        t->file_offset = g->data_offset + t->offset;
        t->data = g->base + t->file_offset;
    }
    if (g->n_tensors < 2) return LOOM_OK;
    const loom_gguf_tensor **order = malloc(g->n_tensors * sizeof *order);
    if (order == NULL) return oom(c, "tensor table");
    for (size_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, g->n_tensors, sizeof *order, compare_by_offset);
    loom_status s = LOOM_OK;
    const loom_gguf_tensor *last = order[0]; /* the tensor reaching furthest so far */
    for (size_t i = 1; i < g->n_tensors && s == LOOM_OK; i++) {
        const loom_gguf_tensor *b = order[i];
        if (b->nbytes != 0 && b->offset < last->offset + last->nbytes)
            s = fail(c, "tensor '%s' (data offset %llu, %llu bytes) overlaps tensor '%s' (data "
                     "offset %llu)", last->name, (unsigned long long)last->offset,
                     (unsigned long long)last->nbytes, b->name, (unsigned long long)b->offset);
        if (b->offset + b->nbytes > last->offset + last->nbytes) last = b;
    }
    free(order);
    return s;
}

static loom_status parse(loom_gguf *g, loom_error *err) {
    cursor c = {.p = g->base, .size = g->size, .pos = 0, .arena = &g->arena, .err = err};
    loom_status s;
    uint64_t magic = 0, version = 0, n_tensors = 0, n_kv = 0;
    if ((s = read_uint(&c, 4, "magic", &magic))) return s;
    if (magic != 0x46554747u) /* "GGUF" */
        return fail(&c, "magic at offset 0: bytes %02x %02x %02x %02x are not \"GGUF\"",
                    g->base[0], g->base[1], g->base[2], g->base[3]);
    if ((s = read_uint(&c, 4, "version", &version))) return s;
    if (version != 2 && version != 3)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "version %llu at offset 4: unsupported (loom reads GGUF v2 and v3%s)",
                              (unsigned long long)version,
                              (version & 0xffff) == 0 ? "; a big-endian file?" : "");
    g->version = (uint32_t)version;
    if ((s = read_uint(&c, 8, "n_tensors", &n_tensors))) return s;
    if ((s = read_uint(&c, 8, "n_kv", &n_kv))) return s;
    /* smallest key/value: 8-byte key length + 4-byte type + 1-byte value; smallest tensor info:
     * 8-byte name length + 4 n_dims + 8 ne + 4 type + 8 offset */
    if (n_kv > left(&c) / 13)
        return fail(&c, "n_kv %llu at offset 16: too many for the %llu bytes left",
                    (unsigned long long)n_kv, (unsigned long long)left(&c));
    if (n_tensors > left(&c) / 32)
        return fail(&c, "n_tensors %llu at offset 8: too many for the %llu bytes left",
                    (unsigned long long)n_tensors, (unsigned long long)left(&c));
    if (n_kv >= UINT32_MAX || n_tensors >= UINT32_MAX) /* the hash tables hold u32 indices */
        return fail(&c, "n_kv %llu / n_tensors %llu at offset 8: more than loom supports",
                    (unsigned long long)n_kv, (unsigned long long)n_tensors);
    g->n_kv = (size_t)n_kv;
    g->n_tensors = (size_t)n_tensors;
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    g->keys = arena_alloc(&g->arena, (g->n_kv + 1) * sizeof *g->keys);
    g->values = arena_alloc(&g->arena, (g->n_kv + 1) * sizeof *g->values);
    g->key_slots = slots_create(&g->arena, g->n_kv, &g->key_mask);
    g->tensors = arena_alloc(&g->arena, (g->n_tensors + 1) * sizeof *g->tensors);
    g->tensor_slots = slots_create(&g->arena, g->n_tensors, &g->tensor_mask);
    if (!g->keys || !g->values || !g->key_slots || !g->tensors || !g->tensor_slots)
        return oom(&c, "header");
    if ((s = parse_kv(g, &c))) return s;
    for (size_t i = 0; i < g->n_tensors; i++) {
        if ((s = parse_tensor_info(g, &c, i))) {
            if (g->tensors[i].name)
                return loom_error_prefix(err, "tensor info %zu ('%s'): ", i, g->tensors[i].name);
            return loom_error_prefix(err, "tensor info %zu: ", i);
        }
    }
    /* pos <= size and alignment <= 2^31, so this cannot overflow */
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->data_offset > g->size) {
        if (g->n_tensors > 0)
            return fail(&c, "data section at offset %llu (after padding to %llu): past end of "
                        "file (%llu bytes)", (unsigned long long)g->data_offset,
                        (unsigned long long)g->alignment, (unsigned long long)g->size);
        g->data_offset = g->size; /* vocabulary-only file ending right after its metadata */
    }
    return place_tensors(g, &c);
}

/* ---- open / close --------------------------------------------------------------------------- */

static loom_status open_common(loom_gguf *g, loom_gguf **out, loom_error *err, const char *path) {
    loom_status s = parse(g, err);
    if (s != LOOM_OK) {
        if (path)
            loom_error_prefix(err, "gguf: %s: ", path);
        else
            loom_error_prefix(err, "gguf: ");
        loom_gguf_close(g);
        return s;
    }
    *out = g;
    return LOOM_OK;
}

loom_status loom_gguf_open_memory(const void *data, size_t size, loom_gguf **out, loom_error *err) {
    if (out == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf: open_memory: out is NULL");
    *out = NULL;
    if (data == NULL && size != 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf: open_memory: data is NULL");
    loom_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf: out of memory");
    static const uint8_t empty[1];
    g->base = size ? data : empty;
    g->size = size;
    return open_common(g, out, err, NULL);
}

loom_status loom_gguf_open(const char *path, loom_gguf **out, loom_error *err) {
    if (out == NULL || path == NULL)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "gguf: open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return loom_error_set(err, LOOM_ERR_IO, "gguf: %s: cannot open: %s", path,
                              strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return loom_error_set(err, LOOM_ERR_IO, "gguf: %s: %s", path,
                              S_ISREG(st.st_mode) ? strerror(e) : "not a regular file");
    }
    loom_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) {
        close(fd);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "gguf: out of memory");
    }
    static const uint8_t empty[1];
    g->base = empty;
    g->size = (uint64_t)st.st_size;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(g);
            return loom_error_set(err, LOOM_ERR_IO, "gguf: %s: mmap of %lld bytes failed: %s",
                                  path, (long long)st.st_size, strerror(e));
        }
        g->base = p;
        g->mapped = true;
    }
    close(fd);
    return open_common(g, out, err, path);
}

void loom_gguf_close(loom_gguf *g) {
    if (g == NULL) return;
    if (g->mapped) munmap((void *)g->base, (size_t)g->size);
    arena_free(&g->arena);
    free(g);
}

/* ---- lookup by name ------------------------------------------------------------------- */

const loom_gguf_value *loom_gguf_find(const loom_gguf *g, const char *key) {
    if (key == NULL) return NULL;
    size_t i = slots_find(g->key_slots, g->key_mask, key, key_name_at, g);
    return i == (size_t)-1 ? NULL : &g->values[i];
}

const loom_gguf_tensor *loom_gguf_find_tensor(const loom_gguf *g, const char *name) {
    if (name == NULL) return NULL;
    size_t i = slots_find(g->tensor_slots, g->tensor_mask, name, tensor_name_at, g);
    return i == (size_t)-1 ? NULL : &g->tensors[i];
}
