/* ir_fuzz.c: libFuzzer harness for the protobuf graph deserializer (ir/serialize).
 *
 * The first input byte picks the mode, the rest is the message:
 * - even: the rest is handed to loom_ir_deserialize as it is (raw bytes: unpack, version and
 *   checksum checks);
 * - odd: the rest gets a correct checksum trailer appended first, so mutations reach the
 *   structural checks behind the checksum (ids, cycles, op names, attributes, types).
 * On success the graph must hold the serializer's promises: it verifies, it serializes, the
 * bytes load back to an equal graph, and serializing that gives the same bytes again. A refusal
 * must come with a message and no graph. Any violation aborts (a finding).
 * Build and run with tools/fuzz/build_ir.sh (seeds in .fuzz/corpus/ir):
 *   .fuzz/ir_fuzz -max_total_time=600 .fuzz/corpus/ir
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/serialize/serialize.h"

static void check_loaded(loom_ir_graph *g) {
    loom_error err = {0};
    LOOM_ASSERT(loom_ir_verify(g, &err) == LOOM_OK);
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    LOOM_ASSERT(loom_ir_serialize(g, &b1, &n1, &err) == LOOM_OK);
    loom_ir_graph *g2 = NULL;
    LOOM_ASSERT(loom_ir_deserialize(b1, n1, &g2, &err) == LOOM_OK);
    LOOM_ASSERT(loom_ir_graph_equal(g, g2, &err));
    LOOM_ASSERT(loom_ir_serialize(g2, &b2, &n2, &err) == LOOM_OK);
    LOOM_ASSERT(n1 == n2 && memcmp(b1, b2, n1) == 0);
    char *text = loom_ir_print_string(g2, &err);
    LOOM_ASSERT(text != NULL);
    free(text);
    free(b1);
    free(b2);
    loom_ir_graph_destroy(g2);
}

static void run(const uint8_t *msg, size_t len) {
    loom_ir_graph *g = (loom_ir_graph *)1;
    loom_error err = {0};
    if (loom_ir_deserialize(msg, len, &g, &err) != LOOM_OK) {
        LOOM_ASSERT(g == NULL && err.msg[0] != '\0' && err.status != LOOM_OK);
        return;
    }
    check_loaded(g);
    loom_ir_graph_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    /* An exact-size copy, so ASan catches a read one past the end. */
    size_t len = (mode & 1) ? size + LOOM_IR_CHECKSUM_TRAILER : size;
    uint8_t *msg = malloc(len ? len : 1);
    if (!msg) return 0;
    if (size) memcpy(msg, data, size);
    if (mode & 1) {
        uint64_t sum = loom_ir_message_checksum(msg, size);
        msg[size] = 0xC1;
        msg[size + 1] = 0x3E;
        for (int i = 0; i < 8; i++) msg[size + 2 + i] = (uint8_t)(sum >> (8 * i));
    }
    run(msg, len);
    free(msg);
    return 0;
}
