/* source_id.c: the GGUF identity recorded in a graph's metadata (see source_id.h). */
#include "ir/serialize/source_id.h"
#include "loom/hash.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void loom_ir_gguf_checksum(const void *file_bytes, uint64_t data_offset,
                           char out[LOOM_IR_CHECKSUM_LEN]) {
    uint64_t h = loom_fnv1a64(LOOM_FNV1A64_BASIS, file_bytes, (size_t)data_offset);
    snprintf(out, LOOM_IR_CHECKSUM_LEN, "%016" PRIx64, h);
}

loom_status loom_ir_set_source(loom_ir_graph *g, const char *file_name, uint64_t file_size,
                               const void *file_bytes, uint64_t data_offset, loom_error *err) {
    if (!g || !file_name || (!file_bytes && data_offset > 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "source: NULL argument");
    if (data_offset > file_size)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "source: data offset %" PRIu64 " past the file size %" PRIu64,
                              data_offset, file_size);
    if (file_size > (uint64_t)INT64_MAX)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "source: file size too large");
    const char *slash = strrchr(file_name, '/');
    const char *base = slash ? slash + 1 : file_name;
    char sum[LOOM_IR_CHECKSUM_LEN];
    loom_ir_gguf_checksum(file_bytes, data_offset, sum);
    loom_status st = loom_ir_meta_set_string(g, "source.file", base, err);
    if (!st) st = loom_ir_meta_set_int(g, "source.size", (int64_t)file_size, err);
    if (!st) st = loom_ir_meta_set_string(g, "source.checksum", sum, err);
    return st;
}
