/* serialize.h: the protobuf form of an IR graph (ir/serialize/loom_graph.proto), saved and
 * loaded with every check a file from elsewhere needs.
 *
 * Writing is deterministic: values are numbered canonically (inputs, weights, state, then node
 * results in program order), so serializing a graph twice, or a graph and its reloaded copy,
 * gives identical bytes. Weights are references (name, ggml type, shape, offset, size), so a
 * 36-layer model's graph is kilobytes. The graph metadata keys `source.file`, `source.size`,
 * `source.checksum` (the GGUF identity, see source_id.h) and `passes` (comma-separated) go into
 * dedicated message fields; all other metadata is kept as it is.
 *
 * The message ends with a checksum field (FNV-1a 64 of every byte before it, see
 * loom_graph.proto), so truncation, even at a field boundary, and corruption are detected.
 *
 * Reading trusts nothing. The message is unpacked with an allocation budget proportional to its
 * size (a hostile count cannot make it allocate more), then the graph is rebuilt through the IR
 * builder API, so type inference re-checks every node, and the IR verifier runs at the end.
 * Each of these is refused with a message naming what and where (LOOM_ERR_FORMAT unless noted):
 * bytes that do not unpack (truncated, corrupted, garbage), a missing format version or one newer
 * than this build's (LOOM_ERR_UNSUPPORTED), a missing or wrong trailing checksum, an unknown op
 * (LOOM_ERR_UNSUPPORTED), attribute or dtype, a dangling value id, a value defined twice or
 * never, a cycle (LOOM_ERR_VERIFY), operand types the op refuses or a stored result type that
 * differs from the inferred one (LOOM_ERR_TYPE), duplicate names, and anything else the
 * verifier rejects. Whether the weights match a GGUF file is checked separately, against the
 * opened file: loom_ir_check_against_gguf (loaders/graph_check.h).
 *
 *   loom_error err = {0};
 *   if (loom_ir_save(graph, "model.pb", &err)) fprintf(stderr, "%s\n", err.msg);
 *   loom_ir_graph *g2;
 *   if (loom_ir_load("model.pb", &g2, &err)) fprintf(stderr, "%s\n", err.msg);
 *
 * Ownership: bytes from loom_ir_serialize are malloc'd and freed by the caller with free();
 * graphs from deserialize/load belong to the caller (loom_ir_graph_destroy). On failure no
 * output is produced (*bytes / *out are NULL) and nothing leaks.
 */
#ifndef LOOM_IR_SERIALIZE_H
#define LOOM_IR_SERIALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format version this build writes and the newest it reads. */
enum { LOOM_IR_FORMAT_VERSION = 1 };

/* Largest file loom_ir_load reads (a real graph is kilobytes). */
#define LOOM_IR_MAX_FILE_BYTES ((uint64_t)256 << 20)

/* The bytes that end a serialized graph: tag of field 1000 (fixed64), then the checksum. */
enum { LOOM_IR_CHECKSUM_TRAILER = 10 };

/* FNV-1a 64 of len bytes: the checksum a serialized graph carries over all its bytes before the
 * trailer. Exposed for tools and tests that edit messages (append 0xC1 0x3E and the value,
 * little-endian, to a packed Graph message without a checksum). */
uint64_t loom_ir_message_checksum(const void *bytes, size_t len);

/* Serializes g (which must verify: an invalid graph is refused with the verifier's message) into
 * a malloc'd buffer *bytes of *len bytes. */
loom_status loom_ir_serialize(const loom_ir_graph *g, uint8_t **bytes, size_t *len,
                              loom_error *err);

/* Rebuilds a graph from len bytes (see the checks above). *out is a new verified graph, or NULL
 * on failure. Messages start with "deserialize: ". */
loom_status loom_ir_deserialize(const void *bytes, size_t len, loom_ir_graph **out,
                                loom_error *err);

/* Serializes g into path: writes PATH.tmp, then renames it over path, so a failure never leaves
 * a half-written file at path (the .tmp is removed). LOOM_ERR_IO names the path and errno. */
loom_status loom_ir_save(const loom_ir_graph *g, const char *path, loom_error *err);

/* Reads path (at most LOOM_IR_MAX_FILE_BYTES, else LOOM_ERR_LIMIT) and deserializes it; the
 * message starts with the path. */
loom_status loom_ir_load(const char *path, loom_ir_graph **out, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_IR_SERIALIZE_H */
