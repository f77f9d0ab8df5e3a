/* serialize_impl.h: what the writer (write.c) and the reader (read.c) of ir/serialize share:
 * the metadata keys that have their own message fields (ENUM attribute names come from ir.h's
 * loom_ir_attr_enum_name / loom_ir_attr_enum_value).
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

#endif /* LOOM_IR_SERIALIZE_IMPL_H */
