/* pattern.h: the shared pattern driver and matching helpers every fusion pass is written with.
 *
 * A fusion is data: a loom_pattern names the op of its root node, the chain of producer nodes
 * it expects above the root, an optional guard (the checks a chain cannot express: same input,
 * types, biases) and a rewrite. loom_pattern_apply walks the program, matches every pattern at
 * every node and rewrites, sweep after sweep, until a sweep changes nothing (a fixed point). A
 * pattern set that keeps matching its own output hits the sweep cap and gets LOOM_ERR_LIMIT
 * instead of a hang.
 *
 *   // mul(rms_norm(x), w) -> fused_rms_norm(x, w)
 *   static const loom_pattern pat = {
 *       .name = "rms_norm*w", .root = LOOM_IR_OP_MUL,
 *       .chain = {{0, LOOM_PATTERN_ANY_SLOT, LOOM_IR_OP_RMS_NORM}}, .n_chain = 1,
 *       .guard = guard, .rewrite = rewrite};
 *   loom_pattern_apply(g, &pat, 1, 0, &n_rewrites, &err);
 *
 * Matching rules the driver enforces (so guards need not): every chain node is live and distinct
 * from the nodes matched before it, and is an intermediate: each of its results is not a graph
 * output and is used only by nodes of the match. Nodes a guard adds to the match (m->node[...])
 * are not checked: the guard decides. Rewrites change the graph only through the IR's rewrite API;
 * loom_pass_fuse below does the usual "build the fused node, move the uses, erase the matched
 * nodes". After a sweep that rewrote, the driver restores a valid schedule with loom_ir_graph_sort
 * (stable: it moves nothing in the usual case where the fused node sits before the first use).
 */
#ifndef LOOM_PASSES_PATTERN_H
#define LOOM_PASSES_PATTERN_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    LOOM_PATTERN_MAX_NODES = 8,     /* matched nodes: root + chain + guard additions */
    LOOM_PATTERN_MAX_VALUES = 4,    /* values a guard hands to its rewrite */
    LOOM_PATTERN_ANY_SLOT = 255,    /* chain step: any operand (tried in order, first match) */
    LOOM_PATTERN_DEFAULT_SWEEPS = 16,
};

/* One chain step: operand `slot` of the already matched node m->node[from] must be a result of a
 * node of op `op`; that node becomes the next matched node. */
typedef struct loom_pattern_step {
    uint8_t from;
    uint8_t slot;   /* operand index, or LOOM_PATTERN_ANY_SLOT */
    loom_ir_op op;
} loom_pattern_step;

/* A match in progress: node[0] is the root, node[1 + i] the node of chain step i, then any the
 * guard appends (n_nodes counts them all). val[] is free for the guard to pass values on. */
typedef struct loom_match {
    loom_ir_node_id node[LOOM_PATTERN_MAX_NODES];
    uint32_t n_nodes;
    loom_ir_value_id val[LOOM_PATTERN_MAX_VALUES];
} loom_match;

typedef struct loom_pattern {
    const char *name;   /* for messages */
    loom_ir_op root;
    loom_pattern_step chain[LOOM_PATTERN_MAX_NODES - 1];
    uint32_t n_chain;
    /* Optional further checks on a chain match; may append nodes and fill val[]. True: rewrite. */
    bool (*guard)(const loom_ir_graph *g, loom_match *m);
    /* Replaces the matched nodes. An error stops the driver and is returned as is. */
    loom_status (*rewrite)(loom_ir_graph *g, const loom_match *m, loom_error *err);
    int benefit;        /* optional: at one node, higher benefit is tried first (ties: table order) */
} loom_pattern;

/* Applies pats[0..n) to g until a sweep over the program makes no rewrite. max_sweeps: 0 means
 * LOOM_PATTERN_DEFAULT_SWEEPS; still rewriting after that many sweeps is LOOM_ERR_LIMIT naming
 * the last pattern that fired. *n_rewrites (may be NULL) receives the rewrites made (also on
 * error). Errors from rewrites, out of memory, or a schedule that cannot be restored. */
loom_status loom_pattern_apply(loom_ir_graph *g, const loom_pattern *pats, uint32_t n_pats,
                               uint32_t max_sweeps, uint32_t *n_rewrites, loom_error *err);

/* ---- matching helpers ---- */

/* The node of match slot i. */
static inline const loom_ir_node *loom_match_node(const loom_ir_graph *g, const loom_match *m,
                                                  uint32_t i) {
    return loom_ir_node_get(g, m->node[i]);
}

/* The node defining v when it is a node result of op `op` (any op: LOOM_IR_OP_COUNT); else NULL. */
const loom_ir_node *loom_pass_def(const loom_ir_graph *g, loom_ir_value_id v, loom_ir_op op);

/* True when v has exactly one use and is not a graph output: an intermediate a fusion may absorb. */
bool loom_pass_single_use(const loom_ir_graph *g, loom_ir_value_id v);

/* True when a and b are values of equal type (dtype and every dim). */
bool loom_pass_same_type(const loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b);

/* The live nodes of op `op` that use v as operand `slot`, at most cap of them in program order,
 * into out[]; returns how many there are in all (may exceed cap). */
uint32_t loom_pass_users(const loom_ir_graph *g, loom_ir_value_id v, loom_ir_op op, uint32_t slot,
                         loom_ir_node_id *out, uint32_t cap);

/* True when op on these operands and attributes type-checks and its results have exactly the
 * types of want[0..n_want) (the values a rewrite replaces): shapes and types agree. */
bool loom_pass_infers_as(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                         uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                         const loom_ir_value_id *want, uint32_t n_want);

/* True when n carries a prenorm weight (ops.def: a matmul family node whose x is RMS-normalized
 * first, made by fuse-norm-matmul). A fusion that rebuilds products from a matmul's x and W must
 * refuse such a node: its result is not x . W^T. */
static inline bool loom_pass_has_prenorm(const loom_ir_node *n) {
    return loom_ir_prenorm_slot(n->op, n->n_in) != LOOM_IR_NO_SLOT;
}

/* True when node a comes before node b in program order (both live). */
bool loom_pass_before(const loom_ir_graph *g, loom_ir_node_id a, loom_ir_node_id b);

/* ---- rewriting helper ---- */

/* The usual fusion rewrite: builds op(in){attrs} just before the last matched node in program
 * order, makes the uses and outputs of old[i] refer to result i (n_old == the op's results),
 * then erases every matched node left without uses. Errors: the build's type error (a guard
 * should have refused), out of memory. */
loom_status loom_pass_fuse(loom_ir_graph *g, const loom_match *m, loom_ir_op op,
                           const loom_ir_value_id *in, uint32_t n_in, const loom_ir_attr *attrs,
                           uint32_t n_attrs, const loom_ir_value_id *old, uint32_t n_old,
                           loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_PASSES_PATTERN_H */
