/* graph_check.h: does a graph (typically loaded from a .pb file) belong to this GGUF file?
 *
 * A serialized graph refers to its weights by name, ggml type, shape, absolute file offset and
 * byte size, and records the identity of the GGUF it was lowered from (metadata source.size and
 * source.checksum, see ir/serialize/source_id.h). Before running a graph against a file, check
 * that every reference holds, so a graph is never run against the wrong or a modified file:
 *
 *   loom_gguf *f; loom_ir_graph *g;
 *   if (loom_ir_load("m.pb", &g, &err) || loom_gguf_open("m.gguf", &f, &err) ||
 *       loom_ir_check_against_gguf(g, f, &err)) fprintf(stderr, "%s\n", err.msg);
 *
 * Lives in loaders/ because it needs the GGUF reader (ir/ must not depend on loaders/).
 */
#ifndef LOOM_GRAPH_CHECK_H
#define LOOM_GRAPH_CHECK_H

#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks g against f and returns the first problem:
 * - source.size (when present) differs from f's size, or source.checksum (when present) differs
 *   from f's header checksum: LOOM_ERR_VERIFY ("graph was made from another file");
 * - a weight whose tensor f lacks: LOOM_ERR_NOT_FOUND naming it;
 * - a weight whose ggml type, shape (ignoring outer dims of 1), file offset or byte size differs
 *   from the tensor's: LOOM_ERR_VERIFY naming the weight, both values and what differs.
 * A graph without source.* metadata (built by hand) is checked on its weights only. */
loom_status loom_ir_check_against_gguf(const loom_ir_graph *g, const loom_gguf *f, loom_error *err);

/* Records f as g's source (source.file = path's base name, source.size, source.checksum). */
loom_status loom_ir_set_source_from_gguf(loom_ir_graph *g, const loom_gguf *f, const char *path,
                                         loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_GRAPH_CHECK_H */
