/* plan.h: the execution plan of a step graph: program order, stream assignment with the events
 * that join streams, and the memory plan of the intermediates (one activation arena).
 *
 * The plan is an analysis: it reads a verified graph and changes nothing. It needs no backend,
 * so `loom compile --plan` prints it on a machine without a GPU.
 *
 * Streams. Nodes run in program order per stream. With n_streams > 1 a node continues the stream
 * of its most recent producer unless that producer already handed its stream to an earlier
 * child; then it takes the least recently used stream (independent branches such as unfused
 * Q/K/V matmuls land on different streams). A node waits for the event of every producer on
 * another stream that is not already ordered before it (vector clocks drop redundant waits).
 * Nodes touching the same state (KV cache) are ordered too. All streams fork from the step's
 * start and join at its end (the backend does that), so steps never overlap.
 *
 * Memory. Every node result that owns memory (not a view, not a state result of kv_write or
 * rope_kv_write) is a root; its uses are those of every value rooted in it (views of it), and a
 * graph output lives to the step's end. An op flagged INPLACE in ops.def writes out[0] over in[0] when every other
 * access of in[0]'s root happens before the node: the two roots form one block. A block is live
 * over [begin, end) in program-order indices, where end is the first index from which every
 * later node happens after every access of the block (with one stream: last use + 1; with
 * several: the join that orders the last use before later writers). Blocks whose intervals do not
 * overlap may share bytes; so a buffer is reused only after every stream touching it is done.
 * Offsets come from greedy-by-size placement (largest first, into the smallest fitting gap
 * among blocks alive at the same time), tried under a few orderings, the smallest arena kept.
 * Block sizes are rounded up to LOOM_PLAN_ALIGN. Sizes use each symbol's declared maximum.
 * Graph inputs, weights, state and external results (loom_exec_plan_create_external) are not in
 * the arena.
 *
 * Invariant (checked by tests by brute force): two blocks overlapping in bytes are ordered: every
 * access of one happens before the first node of the other.
 *
 *   loom_exec_plan *p;
 *   loom_exec_plan_create(g, 2, &p, &err);
 *   printf("arena %llu of lower bound %llu\n", loom_exec_plan_arena_bytes(p), ...);
 *   loom_exec_plan_destroy(p);
 */
#ifndef LOOM_EXECUTOR_PLAN_H
#define LOOM_EXECUTOR_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LOOM_PLAN_ALIGN = 256, LOOM_PLAN_MAX_STREAMS = 16 };
#define LOOM_PLAN_NO_BLOCK UINT32_MAX

typedef struct loom_exec_plan loom_exec_plan;

/* A block of the arena: one root, or the chain of roots handed over by in-place ops. */
typedef struct loom_exec_plan_block {
    uint64_t offset; /* in the arena, a multiple of LOOM_PLAN_ALIGN */
    uint64_t bytes;  /* rounded up to LOOM_PLAN_ALIGN */
    uint32_t begin;  /* program index of the first node writing it */
    uint32_t end;    /* exclusive: nodes from here on happen after every access */
} loom_exec_plan_block;

/* Plans verified graph g (borrowed during the call only) for n_streams streams (1..16).
 * Errors: invalid n_streams, a value too large to size, out of memory. *out is NULL on failure. */
loom_status loom_exec_plan_create(const loom_ir_graph *g, uint32_t n_streams,
                                  loom_exec_plan **out, loom_error *err);

/* Asks whether node result v, a root of its own that no node reads (so nothing aliases it and no
 * in-place op writes over it), lives outside the arena, in memory the caller gives it (the
 * executor's mapped outputs); bytes is its size at the symbols' maxima. */
typedef bool (*loom_exec_plan_external_fn)(void *ctx, loom_ir_value_id v, uint64_t bytes);

/* loom_exec_plan_create, asking external(ctx, ...) (NULL: never) about every root that no node
 * reads: once per value, in program order, after the order, roots and streams are fixed and
 * before any block is placed in the arena, so one pass plans the arena without the values it
 * answers true for. Such a value gets no block, is not counted in the sums, and is not planned
 * in place over another result (it runs out of place). No other value is asked about: a result
 * read later would need its memory ordered like the arena's. */
loom_status loom_exec_plan_create_external(const loom_ir_graph *g, uint32_t n_streams,
                                           loom_exec_plan_external_fn external, void *ctx,
                                           loom_exec_plan **out, loom_error *err);
void loom_exec_plan_destroy(loom_exec_plan *p); /* NULL is a no-op */

/* Program order: node_count nodes, node_at(i) the i-th node's id. */
uint32_t loom_exec_plan_node_count(const loom_exec_plan *p);
loom_ir_node_id loom_exec_plan_node_at(const loom_exec_plan *p, uint32_t i);
/* Streams used (<= requested) and the stream of the i-th node. */
uint32_t loom_exec_plan_streams(const loom_exec_plan *p);
uint32_t loom_exec_plan_stream_of(const loom_exec_plan *p, uint32_t i);
/* The nodes (program indices) whose events node i waits for before it runs; *n the count. The
 * array is owned by the plan. */
const uint32_t *loom_exec_plan_waits(const loom_exec_plan *p, uint32_t i, uint32_t *n);
/* True when some node waits for node i's event (the backend records it after node i). */
bool loom_exec_plan_records(const loom_exec_plan *p, uint32_t i);
/* True when node i (program index) happens before node k (same stream earlier, or through
 * events); i == k is true. */
bool loom_exec_plan_happens_before(const loom_exec_plan *p, uint32_t i, uint32_t k);

/* Value v's root (itself for inputs, weights, state and owning results; the viewed/written
 * root otherwise; LOOM_IR_NO_VALUE for dead or unknown ids). */
loom_ir_value_id loom_exec_plan_root(const loom_exec_plan *p, loom_ir_value_id v);
/* The arena block of v's root, or LOOM_PLAN_NO_BLOCK (inputs, weights, state, external). */
uint32_t loom_exec_plan_block_of(const loom_exec_plan *p, loom_ir_value_id v);
uint32_t loom_exec_plan_block_count(const loom_exec_plan *p);
const loom_exec_plan_block *loom_exec_plan_block_at(const loom_exec_plan *p, uint32_t b);

/* Totals in bytes: the arena; the sum of every root result (unrounded, no reuse); the lower
 * bound, the largest total of block bytes alive at one program index. */
uint64_t loom_exec_plan_arena_bytes(const loom_exec_plan *p);
uint64_t loom_exec_plan_sum_bytes(const loom_exec_plan *p);
uint64_t loom_exec_plan_lower_bound_bytes(const loom_exec_plan *p);
/* Number of in-place hand-overs and of cross-stream waits. */
uint32_t loom_exec_plan_inplace_count(const loom_exec_plan *p);
uint32_t loom_exec_plan_wait_count(const loom_exec_plan *p);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_EXECUTOR_PLAN_H */
