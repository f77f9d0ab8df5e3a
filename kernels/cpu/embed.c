/* embed.c: embedding lookup, rows of a table (any supported weight type) by token id, decoded to
 * float32 (loom_cpu_decode, bit-identical to loom_dequantize_row) straight into the output row,
 * no other copy. Every id is checked before anything is written, so a bad id leaves out
 * untouched.
 */
#include "kernels/cpu/cpu_internal.h"

loom_status loom_cpu_embed(loom_kweight table, const int32_t *ids, int64_t n_tokens, float *out,
                           loom_error *err) {
    loom_status s = loom_cpu_check_weight("embed", "table", &table, err);
    if (s != LOOM_OK) return s;
    if (n_tokens < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "embed: negative token count %lld",
                              (long long)n_tokens);
    if (n_tokens == 0) return LOOM_OK;
    if (!ids || (!out && table.cols > 0))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "embed: %s is NULL",
                              !ids ? "ids" : "out");
    for (int64_t t = 0; t < n_tokens; t++)
        if (ids[t] < 0 || ids[t] >= table.rows)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                                  "embed: token %lld has id %d outside the table of %lld rows",
                                  (long long)t, ids[t], (long long)table.rows);
    const int64_t D = table.cols, row_bytes = loom_cpu_weight_row_bytes(&table);
    for (int64_t t = 0; t < n_tokens && D > 0; t++) {
        const uint8_t *row = (const uint8_t *)table.data + (int64_t)ids[t] * row_bytes;
        loom_cpu_decode(table.type, row, out + t * D, D);
    }
    return LOOM_OK;
}
