/* source_id.h: the identity of the GGUF file a graph was lowered from, so a serialized graph is
 * never run against the wrong file.
 *
 * The identity is three graph metadata entries (keys fixed by ir.h): `source.file` (the file's
 * base name, for messages only), `source.size` (its size in bytes) and `source.checksum`
 * (16 lower-case hex digits: 64-bit FNV-1a over the file's bytes [0, data_offset),
 * i.e. the GGUF header, every metadata key/value and the tensor table, up to the aligned start
 * of tensor data). Hashing only the header keeps it fast for multi-gigabyte files while still
 * covering every tensor's name, type, shape and offset; the size covers truncation.
 *
 *   loom_ir_set_source(graph, "model.gguf", loom_gguf_file_size(f), loom_gguf_file_bytes(f),
 *                      loom_gguf_data_offset(f), &err);
 *
 * This target does not depend on protobuf or the GGUF reader; the lowering records the
 * identity through loom_ir_gguf_checksum too.
 * Checking a graph against an opened GGUF file is loaders/graph_check.h.
 */
#ifndef LOOM_IR_SOURCE_ID_H
#define LOOM_IR_SOURCE_ID_H

#include <stdint.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 16 hex digits + NUL. */
enum { LOOM_IR_CHECKSUM_LEN = 17 };

/* Writes the checksum of file_bytes[0, data_offset) into out (always NUL-terminated). */
void loom_ir_gguf_checksum(const void *file_bytes, uint64_t data_offset,
                           char out[LOOM_IR_CHECKSUM_LEN]);

/* Sets the three source.* metadata entries of g: file_name's base name (the part after the
 * last '/'), file_size and the checksum of file_bytes[0, data_offset). data_offset must not
 * exceed file_size (LOOM_ERR_INVALID_ARGUMENT). */
loom_status loom_ir_set_source(loom_ir_graph *g, const char *file_name, uint64_t file_size,
                               const void *file_bytes, uint64_t data_offset, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_IR_SOURCE_ID_H */
