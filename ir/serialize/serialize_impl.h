/* serialize_impl.h: what the writer (write.c) and the reader (read.c) of ir/serialize share:
 * the metadata keys that have their own message fields, and the ENUM attribute name helpers.
 * Private to ir/serialize. */
#ifndef LOOM_IR_SERIALIZE_IMPL_H
#define LOOM_IR_SERIALIZE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* Graph metadata keys (fixed by ir.h) stored in Graph.source / Graph.passes, not Graph.metadata. */
#define SER_KEY_SOURCE_FILE "source.file"         /* STRING */
#define SER_KEY_SOURCE_SIZE "source.size"         /* INT */
#define SER_KEY_SOURCE_CHECKSUM "source.checksum" /* STRING */
#define SER_KEY_PASSES "passes"                   /* STRING, comma-separated, non-empty */

/* The name of value `index` of ENUM attribute id (from ops.def's "norm,neox" list) into buf;
 * false when out of range or buf too small. */
bool ser_enum_name(loom_ir_attr_id id, int64_t index, char *buf, size_t len);
/* The index of ENUM value `name` of attribute id; false when unknown. */
bool ser_enum_index(loom_ir_attr_id id, const char *name, int64_t *out);

#endif /* LOOM_IR_SERIALIZE_IMPL_H */
