/* cmd_inspect.c: `loom inspect FILE.gguf [--json] [--elements N]`, a GGUF file's header,
 * architecture, hyperparameters (the `<arch>.*` keys), the rest of the metadata, a table of
 * tensors (name, type, shape in ggml order, bytes, absolute file offset) and totals by type.
 *
 * Long arrays show their first N elements (default 8) and their length; long strings are cut in
 * the text output (never in JSON). --json prints the same content as one JSON document: strings
 * are escaped (control characters as \u00XX, bytes that are not UTF-8 as U+FFFD), integers are
 * exact, non-finite floats become the strings "nan", "inf", "-inf".
 * Exit codes: 0 shown, 1 the file cannot be read (message on stderr), 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/gguf.h"
#include "tools/cli.h"
#include "tools/commands.h"

enum { TEXT_STRING_MAX = 96 }; /* bytes of a string shown in text mode */

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom inspect FILE.gguf [--json] [--elements N]\n"
            "\n"
            "Shows a GGUF file: header, architecture, hyperparameters (<arch>.* keys), the other\n"
            "metadata, a table of tensors (name, type, shape in ggml order, bytes, file offset)\n"
            "and totals by type.\n"
            "\n"
            "  --json          print the same as one JSON document\n"
            "  --elements N    show the first N elements of arrays (default 8)\n"
            "  -h, --help      this help\n");
}

/* A quoted string (tools/cli.h's escaper): JSON escapes in json mode, C-like escapes otherwise
 * (at most max bytes of it, then an ellipsis and the length). */
static void put_string(const char *p, uint64_t len, bool json, uint64_t max) {
    loom_cli_put_string(stdout, p, (size_t)len, json, (size_t)max);
}

/* %.9g round-trips any f32, %.17g any f64. */
static void put_float(double d, bool f64, bool json) {
    if (isnan(d)) fputs(json ? "\"nan\"" : "nan", stdout);
    else if (isinf(d)) fputs(d > 0 ? (json ? "\"inf\"" : "inf") : (json ? "\"-inf\"" : "-inf"), stdout);
    else printf(f64 ? "%.17g" : "%.9g", d);
}

static void put_value(const loom_gguf_value *v, bool json, uint64_t elements);

/* Element i of an array. */
static void put_element(const loom_gguf_value *arr, uint64_t i, bool json, uint64_t elements) {
    switch (arr->arr.elem_type) {
    case LOOM_GGUF_U8: case LOOM_GGUF_U16: case LOOM_GGUF_U32: case LOOM_GGUF_U64:
        printf("%" PRIu64, loom_gguf_array_u64(arr, i));
        break;
    case LOOM_GGUF_I8: case LOOM_GGUF_I16: case LOOM_GGUF_I32: case LOOM_GGUF_I64:
        printf("%" PRId64, loom_gguf_array_i64(arr, i));
        break;
    case LOOM_GGUF_F32: case LOOM_GGUF_F64:
        put_float(loom_gguf_array_f64(arr, i), arr->arr.elem_type == LOOM_GGUF_F64, json);
        break;
    case LOOM_GGUF_BOOL:
        fputs(loom_gguf_array_u64(arr, i) ? "true" : "false", stdout);
        break;
    default: /* strings and arrays */
        put_value(&arr->arr.items[i], json, elements);
    }
}

/* A value; arrays show their first `elements` elements. In JSON an array is a list, cut arrays
 * are described by the caller's "n"; in text a cut array ends with "... (N total)". */
static void put_value(const loom_gguf_value *v, bool json, uint64_t elements) {
    switch (v->type) {
    case LOOM_GGUF_U8: case LOOM_GGUF_U16: case LOOM_GGUF_U32: case LOOM_GGUF_U64:
        printf("%" PRIu64, v->u64);
        break;
    case LOOM_GGUF_I8: case LOOM_GGUF_I16: case LOOM_GGUF_I32: case LOOM_GGUF_I64:
        printf("%" PRId64, v->i64);
        break;
    case LOOM_GGUF_F32: case LOOM_GGUF_F64:
        put_float(v->f64, v->type == LOOM_GGUF_F64, json);
        break;
    case LOOM_GGUF_BOOL:
        fputs(v->b ? "true" : "false", stdout);
        break;
    case LOOM_GGUF_STRING:
        put_string(v->str.ptr, v->str.len, json, json ? UINT64_MAX : TEXT_STRING_MAX);
        break;
    case LOOM_GGUF_ARRAY: {
        uint64_t n = v->arr.n < elements ? v->arr.n : elements;
        putchar('[');
        for (uint64_t i = 0; i < n; i++) {
            if (i) fputs(", ", stdout);
            put_element(v, i, json, elements);
        }
        if (!json && n < v->arr.n) printf("%s... (%" PRIu64 " total)", n ? ", " : "", v->arr.n);
        putchar(']');
        break;
    }
    default:
        fputs(json ? "null" : "?", stdout);
    }
}

/* "u32", or "array[string]" / "array[array]". */
static const char *type_label(const loom_gguf_value *v, char *buf, size_t size) {
    if (v->type != LOOM_GGUF_ARRAY) return loom_gguf_type_name(v->type);
    snprintf(buf, size, "array[%s]", loom_gguf_type_name(v->arr.elem_type));
    return buf;
}

typedef struct {
    uint64_t count, bytes, elements;
} type_total;

static uint64_t tensor_elements(const loom_gguf_tensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d]; /* checked by the reader */
    return n;
}

static bool is_hyperparameter(const char *key, const char *arch) {
    size_t n = arch ? strlen(arch) : 0;
    return n && strncmp(key, arch, n) == 0 && key[n] == '.';
}

static void print_text(const char *path, const loom_gguf *g, const char *arch, uint64_t elements,
                       const type_total *totals) {
    char label[64];
    printf("file:          %s\n", path);
    printf("size:          %" PRIu64 " bytes, GGUF v%u, alignment %" PRIu64 ", data at offset %"
           PRIu64 "\n", loom_gguf_file_size(g), loom_gguf_version(g), loom_gguf_alignment(g),
           loom_gguf_data_offset(g));
    printf("architecture:  %s\n", arch ? arch : "(none: no general.architecture)");
    for (int pass = 0; pass < 2; pass++) {
        size_t count = 0;
        for (size_t i = 0; i < loom_gguf_n_keys(g); i++)
            count += is_hyperparameter(loom_gguf_key_name(g, i), arch) == (pass == 0);
        printf("\n%s (%zu keys):\n", pass == 0 ? "hyperparameters" : "metadata", count);
        for (size_t i = 0; i < loom_gguf_n_keys(g); i++) {
            const char *key = loom_gguf_key_name(g, i);
            if (is_hyperparameter(key, arch) != (pass == 0)) continue;
            const loom_gguf_value *v = loom_gguf_key_value(g, i);
            printf("  %-40s %-14s ", key, type_label(v, label, sizeof label));
            put_value(v, false, elements);
            putchar('\n');
        }
    }
    printf("\ntensors (%zu):\n", loom_gguf_n_tensors(g));
    printf("  %-36s %-8s %-26s %12s %12s\n", "name", "type", "shape (ne[0] first)", "bytes",
           "offset");
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        char shape[128];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "",
                          t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-36s %-8s %-26s %12" PRIu64 " %12" PRIu64 "\n", t->name,
               loom_ggml_type_get(t->type)->name, shape, t->nbytes, t->file_offset);
    }
    printf("\ntotals by type:\n");
    type_total all = {0};
    for (uint32_t id = 0; id < LOOM_GGML_TYPE_ID_LIMIT; id++) {
        const type_total *tt = &totals[id];
        if (tt->count == 0) continue;
        printf("  %-8s %6" PRIu64 " tensors %14" PRIu64 " bytes %14" PRIu64 " elements\n",
               loom_ggml_type_get(id)->name, tt->count, tt->bytes, tt->elements);
        all.count += tt->count;
        all.bytes += tt->bytes;
        all.elements += tt->elements;
    }
    printf("  %-8s %6" PRIu64 " tensors %14" PRIu64 " bytes %14" PRIu64 " elements\n", "total",
           all.count, all.bytes, all.elements);
}

static void print_json(const char *path, const loom_gguf *g, const char *arch, uint64_t elements,
                       const type_total *totals) {
    fputs("{\n  \"file\": ", stdout);
    put_string(path, strlen(path), true, UINT64_MAX);
    printf(",\n  \"size\": %" PRIu64 ",\n  \"version\": %u,\n  \"alignment\": %" PRIu64
           ",\n  \"data_offset\": %" PRIu64 ",\n  \"architecture\": ",
           loom_gguf_file_size(g), loom_gguf_version(g), loom_gguf_alignment(g),
           loom_gguf_data_offset(g));
    if (arch) put_string(arch, strlen(arch), true, UINT64_MAX);
    else fputs("null", stdout);
    fputs(",\n  \"hyperparameters\": {", stdout);
    bool first = true;
    for (size_t i = 0; i < loom_gguf_n_keys(g); i++) {
        const char *key = loom_gguf_key_name(g, i);
        if (!is_hyperparameter(key, arch)) continue;
        fputs(first ? "\n    " : ",\n    ", stdout);
        first = false;
        put_string(key, strlen(key), true, UINT64_MAX);
        fputs(": ", stdout);
        put_value(loom_gguf_key_value(g, i), true, elements);
    }
    fputs(first ? "},\n  \"metadata\": [" : "\n  },\n  \"metadata\": [", stdout);
    for (size_t i = 0; i < loom_gguf_n_keys(g); i++) {
        const char *key = loom_gguf_key_name(g, i);
        const loom_gguf_value *v = loom_gguf_key_value(g, i);
        fputs(i ? ",\n    {\"key\": " : "\n    {\"key\": ", stdout);
        put_string(key, strlen(key), true, UINT64_MAX);
        printf(", \"type\": \"%s\"", loom_gguf_type_name(v->type));
        if (v->type == LOOM_GGUF_ARRAY)
            printf(", \"elem_type\": \"%s\", \"n\": %" PRIu64 ", \"truncated\": %s",
                   loom_gguf_type_name(v->arr.elem_type), v->arr.n,
                   v->arr.n > elements ? "true" : "false");
        fputs(", \"value\": ", stdout);
        put_value(v, true, elements);
        putchar('}');
    }
    fputs(loom_gguf_n_keys(g) ? "\n  ],\n  \"tensors\": [" : "],\n  \"tensors\": [", stdout);
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", stdout);
        put_string(t->name, strlen(t->name), true, UINT64_MAX);
        printf(", \"type\": \"%s\", \"shape\": [", loom_ggml_type_get(t->type)->name);
        for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
        printf("], \"bytes\": %" PRIu64 ", \"offset\": %" PRIu64 ", \"data_offset\": %" PRIu64 "}",
               t->nbytes, t->file_offset, t->offset);
    }
    fputs(loom_gguf_n_tensors(g) ? "\n  ],\n  \"totals\": {" : "],\n  \"totals\": {", stdout);
    type_total all = {0};
    first = true;
    for (uint32_t id = 0; id < LOOM_GGML_TYPE_ID_LIMIT; id++) {
        const type_total *tt = &totals[id];
        if (tt->count == 0) continue;
        printf("%s\"%s\": {\"tensors\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"elements\": %" PRIu64
               "}", first ? "\n    " : ",\n    ", loom_ggml_type_get(id)->name, tt->count,
               tt->bytes, tt->elements);
        first = false;
        all.count += tt->count;
        all.bytes += tt->bytes;
        all.elements += tt->elements;
    }
    printf("%s\"total\": {\"tensors\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"elements\": %" PRIu64
           "}\n  }\n}\n", first ? "\n    " : ",\n    ", all.count, all.bytes, all.elements);
}

int loom_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    unsigned long long elements = 8;
    const loom_cli_opt opts[] = {
        {"--json", LOOM_CLI_FLAG, &json, 0, 0, NULL},
        {"--elements", LOOM_CLI_U64, &elements, 0, 0, NULL},
    };
    int pr = loom_cli_parse_opts("loom inspect", argc, argv, opts, sizeof opts / sizeof opts[0],
                                 usage, "file", &path);
    if (pr != LOOM_CLI_GO_ON) return pr;
    if (path == NULL) {
        fprintf(stderr, "loom inspect: missing FILE.gguf\n");
        usage(stderr);
        return 2;
    }
    loom_gguf *g = NULL;
    loom_error err = {0};
    if (loom_gguf_open(path, &g, &err) != LOOM_OK) {
        fprintf(stderr, "loom inspect: %s\n", err.msg);
        return 1;
    }
    const char *arch = NULL;
    if (loom_gguf_get_string(g, "general.architecture", &arch, &err) != LOOM_OK) arch = NULL;
    type_total *totals = calloc(LOOM_GGML_TYPE_ID_LIMIT, sizeof *totals);
    if (totals == NULL) {
        fprintf(stderr, "loom inspect: out of memory\n");
        loom_gguf_close(g);
        return 1;
    }
    for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
        totals[t->type].count++;
        totals[t->type].bytes += t->nbytes;
        totals[t->type].elements += tensor_elements(t);
    }
    if (json) print_json(path, g, arch, elements, totals);
    else print_text(path, g, arch, elements, totals);
    free(totals);
    loom_gguf_close(g);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "loom inspect: writing output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
