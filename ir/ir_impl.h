/* ir_impl.h: the layout of loom_ir_graph, shared by the files of ir/ only.
 *
 * Invariants (checked by verify.c, kept by every mutating function):
 * - values and nodes live in chunks of IR_CHUNK records that never move, so the public pointers
 *   (loom_ir_value_get / loom_ir_node_get) stay valid for the graph's lifetime; ids are indices
 *   and are never reused;
 * - value_rec.uses lists exactly the (node, slot) operand references of live nodes;
 * - the live nodes form one doubly linked list first..last through node.prev/next (program
 *   order); erased nodes are unlinked and have erased = true;
 * - strings and attribute lists belong to the graph's arena (freed all at once at destroy).
 */
#ifndef LOOM_IR_IMPL_H
#define LOOM_IR_IMPL_H

#include "ir/ir.h"

enum { IR_CHUNK_BITS = 8, IR_CHUNK = 1 << IR_CHUNK_BITS };

typedef struct value_rec {
    loom_ir_value pub;
    loom_ir_use *uses; /* malloc'd, n_uses used of cap_uses */
    uint32_t n_uses, cap_uses;
} value_rec;

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

typedef struct ir_output {
    const char *name; /* arena */
    loom_ir_value_id value;
} ir_output;

typedef struct id_list {
    uint32_t *v;
    uint32_t n, cap;
} id_list;

struct loom_ir_graph {
    value_rec **value_chunks;
    uint32_t n_values, n_value_chunks;
    loom_ir_node **node_chunks;
    uint32_t n_nodes, n_node_chunks;
    uint32_t n_live_nodes;
    loom_ir_node_id first, last, insert_before;

    loom_ir_symbol symbols[LOOM_IR_MAX_SYMBOLS];
    uint32_t n_symbols;

    id_list inputs, weights, states;
    ir_output *outputs;
    uint32_t n_outputs, cap_outputs;
    loom_ir_meta *meta;
    uint32_t n_meta, cap_meta;

    arena_block *arena;
};

/* ---- graph.c internals ---- */
value_rec *ir_value_rec(const loom_ir_graph *g, loom_ir_value_id v); /* NULL when OOR */
loom_ir_node *ir_node_mut(const loom_ir_graph *g, loom_ir_node_id n); /* NULL when OOR */
/* A new value of kind/type; NO_VALUE on OOM. */
loom_ir_value_id ir_new_value(loom_ir_graph *g, loom_ir_value_kind kind, const loom_ir_type *t);
/* A new zeroed node record (not linked); NO_NODE on OOM. */
loom_ir_node_id ir_new_node(loom_ir_graph *g);
void *ir_arena_alloc(loom_ir_graph *g, size_t n);          /* NULL on OOM, 16-aligned */
char *ir_arena_strdup(loom_ir_graph *g, const char *s);     /* NULL on OOM */
bool ir_add_use(loom_ir_graph *g, loom_ir_value_id v, loom_ir_node_id n, uint32_t slot);
void ir_remove_use(loom_ir_graph *g, loom_ir_value_id v, loom_ir_node_id n, uint32_t slot);
/* Links node n into program order before `before` (NO_NODE: at the end). */
void ir_link_node(loom_ir_graph *g, loom_ir_node_id n, loom_ir_node_id before);
void ir_unlink_node(loom_ir_graph *g, loom_ir_node_id n);
bool ir_id_list_push(id_list *l, uint32_t v);
bool ir_name_is_plain(const char *s); /* non-empty, [A-Za-z0-9_.-]+ */

/* A label for error messages and the printer: "%tokens", "@blk.0.attn_q.weight", "%12" (the
 * printed number of a node result, see ir.h), "%?<id>" for a bad id. Writes into buf. */
const char *ir_value_label(const loom_ir_graph *g, loom_ir_value_id v, char *buf, size_t len);
/* The printed number of each value: map[v] = N for node results (program order), UINT32_MAX
 * otherwise. malloc'd (caller frees), NULL on OOM. */
uint32_t *ir_result_numbers(const loom_ir_graph *g);

/* ---- verify.c ---- */
/* The structural rules (order list, arity, operands live, results defined by their node, use
 * lists exact): O(nodes + values + uses). Mutating functions assert it under LOOM_DEBUG. */
loom_status ir_check_structure(const loom_ir_graph *g, loom_error *err);

/* ---- print.c ---- */
/* Writes n's attributes as in the text form: "{eps=1e-06, ...}", elided ones left out
 * (loom_ir_attr_elided). */
void ir_print_attrs(FILE *f, const loom_ir_graph *g, const loom_ir_node *n);
/* How many of n's attributes ir_print_attrs writes. */
uint32_t ir_printed_attr_count(const loom_ir_node *n);

/* ---- infer.c ---- */
/* Fills attrs_out (sorted by id, defaults added) from the given attrs, checking the op's schema.
 * Returns the count through *n_out. Does not copy strings/lists. */
loom_status ir_normalize_attrs(loom_ir_op op, const loom_ir_attr *attrs, uint32_t n_attrs,
                               loom_ir_attr out[LOOM_IR_MAX_ATTRS], uint32_t *n_out,
                               loom_error *err);
/* Inference on a normalized attribute set. */
loom_status ir_infer_normalized(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                                uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                                loom_ir_type out[LOOM_IR_MAX_OUTPUTS], uint32_t *n_out,
                                loom_error *err);
/* True when v is a KV cache: a STATE value or a state result of a WRITES_STATE op (result i <
 * loom_ir_op_state_results). */
bool ir_value_is_cache(const loom_ir_graph *g, loom_ir_value_id v);

/* ---- table.c ---- */
/* A dim as text: "4096", "T". */
const char *ir_dim_format(const loom_ir_graph *g, int64_t d, char *buf, size_t len);
/* Shortest text for a float / double that reads back to the same value; always contains '.',
 * 'e', "inf" or "nan" so it is never taken for an int. */
void ir_format_float(double v, bool single, char *buf, size_t len);
bool ir_attr_equal(const loom_ir_attr *a, const loom_ir_attr *b);

#endif /* LOOM_IR_IMPL_H */
