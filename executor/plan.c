/* plan.c: the execution plan (plan.h): program order, streams with vector clocks, lifetimes
 * of the arena blocks and their offsets.
 *
 * Happens-before is tracked with one vector clock per node: vc[k][t] is the largest program
 * index of stream t known to have finished when node k starts (k itself for its own stream).
 * A wait is added only for a producer the clock does not cover yet, so i -> k holds exactly
 * when vc[k][stream(i)] >= i. Each block keeps, per stream, the last program index that
 * accessed it; a later node m is ordered after every access when vc[m] dominates that vector.
 * Placement is greedy by size: blocks sorted (several orderings tried), each put into the
 * smallest gap between already placed blocks whose lifetimes overlap its own, else on top.
 */
#include "executor/plan.h"

#include <stdlib.h>
#include <string.h>

struct loom_exec_plan {
    uint32_t n;                /* nodes */
    loom_ir_node_id *order;    /* [n] */
    uint32_t n_streams;
    uint32_t *stream;          /* [n] */
    int32_t *vc;               /* [n * n_streams] */
    uint32_t *wait_start;      /* [n + 1] CSR into waits */
    uint32_t *waits;
    bool *records;             /* [n] */
    uint32_t n_values;
    loom_ir_value_id *root;    /* [n_values] */
    uint32_t *block_of_root;   /* [n_values] block of roots, LOOM_PLAN_NO_BLOCK otherwise */
    loom_exec_plan_block *blocks;
    uint32_t n_blocks;
    uint64_t arena, sum, lower;
    uint32_t n_inplace, n_waits;
};

static uint64_t round_up(uint64_t x) { return (x + LOOM_PLAN_ALIGN - 1) / LOOM_PLAN_ALIGN * LOOM_PLAN_ALIGN; }

/* ---------------------------------------------------------------- streams */

static int cmp_desc_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Assigns streams, waits and vector clocks (def_idx[v]: program index defining v). */
static loom_status assign_streams(loom_exec_plan *p, const loom_ir_graph *g,
                                  const uint32_t *def_idx, loom_error *err) {
    uint32_t S = p->n_streams, n = p->n;
    int64_t last_on[LOOM_PLAN_MAX_STREAMS];
    for (uint32_t s = 0; s < S; s++) last_on[s] = -1;
    bool *taken = calloc(n + 1, sizeof *taken);
    int64_t *state_last = malloc((p->n_values + 1) * sizeof *state_last);
    uint32_t cap = 64, used = 0;
    p->waits = malloc(cap * sizeof *p->waits);
    if (!taken || !state_last || !p->waits) {
        free(taken);
        free(state_last);
        return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory (streams)");
    }
    for (uint32_t v = 0; v < p->n_values; v++) state_last[v] = -1;
    loom_status st = LOOM_OK;
    for (uint32_t k = 0; k < n; k++) {
        const loom_ir_node *nd = loom_ir_node_get(g, p->order[k]);
        uint32_t prod[2 * (LOOM_IR_MAX_INPUTS + LOOM_IR_MAX_OUTPUTS)], np = 0;
        for (uint32_t i = 0; i < nd->n_in; i++) {
            loom_ir_value_id v = nd->in[i];
            if (def_idx[v] != UINT32_MAX) prod[np++] = def_idx[v];
        }
        /* Accesses of one state root are ordered (a later kv_write after earlier readers). */
        for (uint32_t i = 0; i < nd->n_in + nd->n_out; i++) {
            loom_ir_value_id r = p->root[i < nd->n_in ? nd->in[i] : nd->out[i - nd->n_in]];
            if (r == LOOM_IR_NO_VALUE || loom_ir_value_get(g, r)->kind != LOOM_IR_VALUE_STATE)
                continue;
            if (state_last[r] >= 0 && state_last[r] != (int64_t)k) prod[np++] = (uint32_t)state_last[r];
            state_last[r] = k;
        }
        qsort(prod, np, sizeof *prod, cmp_desc_u32);
        uint32_t s = 0;
        if (S > 1) {
            if (np && !taken[prod[0]]) {
                s = p->stream[prod[0]];
                taken[prod[0]] = true;
            } else {
                for (uint32_t t = 1; t < S; t++)
                    if (last_on[t] < last_on[s]) s = t;
            }
        }
        p->stream[k] = s;
        int32_t *cur = p->vc + (size_t)k * S;
        if (last_on[s] >= 0)
            memcpy(cur, p->vc + (size_t)last_on[s] * S, S * sizeof *cur);
        else
            for (uint32_t t = 0; t < S; t++) cur[t] = -1;
        p->wait_start[k] = used;
        for (uint32_t i = 0; i < np; i++) {
            uint32_t j = prod[i];
            if (i && prod[i - 1] == j) continue;
            if (cur[p->stream[j]] >= (int32_t)j) continue; /* already ordered */
            if (used == cap) {
                uint32_t *w = realloc(p->waits, 2 * cap * sizeof *w);
                if (!w) {
                    st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory (waits)");
                    goto done;
                }
                p->waits = w;
                cap *= 2;
            }
            p->waits[used++] = j;
            p->records[j] = true;
            const int32_t *vj = p->vc + (size_t)j * S;
            for (uint32_t t = 0; t < S; t++)
                if (vj[t] > cur[t]) cur[t] = vj[t];
        }
        cur[s] = (int32_t)k;
        last_on[s] = k;
    }
    p->wait_start[n] = used;
    p->n_waits = used;
    {
        uint32_t hi = 0;
        for (uint32_t s = 0; s < S; s++)
            if (last_on[s] >= 0) hi = s + 1;
        p->n_streams = hi ? hi : 1;
        if (p->n_streams != S) {
            /* Compact the clocks to the used streams (stream ids < hi). */
            for (uint32_t k = 0; k < n; k++)
                memmove(p->vc + (size_t)k * p->n_streams, p->vc + (size_t)k * S,
                        p->n_streams * sizeof *p->vc);
        }
    }
done:
    free(taken);
    free(state_last);
    return st;
}

/* ---------------------------------------------------------------- placement */

typedef struct place_item {
    uint32_t block;
    uint64_t bytes;
    uint32_t begin, end;
} place_item;

static int cmp_size(const void *a, const void *b) {
    const place_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    uint32_t lx = x->end - x->begin, ly = y->end - y->begin;
    if (lx != ly) return lx < ly ? 1 : -1;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_length(const void *a, const void *b) {
    const place_item *x = a, *y = b;
    uint32_t lx = x->end - x->begin, ly = y->end - y->begin;
    if (lx != ly) return lx < ly ? 1 : -1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_area(const void *a, const void *b) {
    const place_item *x = a, *y = b;
    double ax = (double)x->bytes * (x->end - x->begin), ay = (double)y->bytes * (y->end - y->begin);
    if (ax != ay) return ax < ay ? 1 : -1;
    return cmp_size(a, b);
}

typedef struct span {
    uint64_t lo, hi;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Places items in their order; writes offsets[block]; returns the arena size. */
static uint64_t place(const place_item *items, uint32_t m, uint64_t *offsets, span *spans) {
    uint64_t arena = 0;
    for (uint32_t i = 0; i < m; i++) {
        const place_item *it = &items[i];
        uint32_t ns = 0;
        for (uint32_t j = 0; j < i; j++) {
            const place_item *o = &items[j];
            if (o->begin < it->end && it->begin < o->end)
                spans[ns++] = (span){offsets[o->block], offsets[o->block] + o->bytes};
        }
        qsort(spans, ns, sizeof *spans, cmp_span);
        uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
        for (uint32_t j = 0; j < ns; j++) {
            if (spans[j].lo > cursor) {
                uint64_t gap = spans[j].lo - cursor;
                if (gap >= it->bytes && gap < best_gap) {
                    best_gap = gap;
                    best = cursor;
                }
            }
            if (spans[j].hi > cursor) cursor = spans[j].hi;
        }
        if (best == UINT64_MAX) best = cursor;
        offsets[it->block] = best;
        if (best + it->bytes > arena) arena = best + it->bytes;
    }
    return arena;
}

/* ---------------------------------------------------------------- create */

loom_status loom_exec_plan_create(const loom_ir_graph *g, uint32_t n_streams,
                                  loom_exec_plan **out, loom_error *err) {
    return loom_exec_plan_create_external(g, n_streams, NULL, NULL, out, err);
}

loom_status loom_exec_plan_create_external(const loom_ir_graph *g, uint32_t n_streams,
                                           loom_exec_plan_external_fn external, void *ctx,
                                           loom_exec_plan **out, loom_error *err) {
    *out = NULL;
    if (!g || n_streams < 1 || n_streams > LOOM_PLAN_MAX_STREAMS)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "plan: streams %u outside 1..%d (or no graph)", n_streams,
                              LOOM_PLAN_MAX_STREAMS);
    loom_exec_plan *p = calloc(1, sizeof *p);
    if (!p) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
    loom_status st = LOOM_OK;
    uint32_t nv = loom_ir_value_bound(g), n = loom_ir_node_count(g);
    uint32_t S = n_streams;
    p->n = n;
    p->n_streams = S;
    p->n_values = nv;
    uint32_t *def_idx = malloc((nv + 1) * sizeof *def_idx);
    int32_t *lastuse = NULL; /* [nv * S] per root */
    place_item *items = NULL;
    uint64_t *offsets = NULL, *best_off = NULL;
    span *spans = NULL;
    int64_t *maxuse = NULL;
    p->order = malloc((n + 1) * sizeof *p->order);
    p->stream = calloc(n + 1, sizeof *p->stream);
    p->vc = malloc(((size_t)n * S + 1) * sizeof *p->vc);
    p->wait_start = calloc(n + 1, sizeof *p->wait_start);
    p->records = calloc(n + 1, sizeof *p->records);
    p->root = malloc((nv + 1) * sizeof *p->root);
    p->block_of_root = malloc((nv + 1) * sizeof *p->block_of_root);
    lastuse = malloc(((size_t)nv * S + 1) * sizeof *lastuse);
    if (!def_idx || !p->order || !p->stream || !p->vc || !p->wait_start || !p->records ||
        !p->root || !p->block_of_root || !lastuse) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
        goto done;
    }
    /* Order, roots, definitions. */
    for (uint32_t v = 0; v < nv; v++) {
        p->root[v] = loom_ir_value_get(g, v)->kind == LOOM_IR_VALUE_DEAD ? LOOM_IR_NO_VALUE : v;
        def_idx[v] = UINT32_MAX;
        p->block_of_root[v] = LOOM_PLAN_NO_BLOCK;
    }
    {
        uint32_t k = 0;
        for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
             id = loom_ir_node_get(g, id)->next) {
            const loom_ir_node *nd = loom_ir_node_get(g, id);
            p->order[k] = id;
            uint32_t flags = loom_ir_op_info_get(nd->op)->flags;
            for (uint32_t o = 0; o < nd->n_out; o++) def_idx[nd->out[o]] = k;
            if (flags & LOOM_IR_OPF_VIEW) p->root[nd->out[0]] = p->root[nd->in[0]];
            for (uint32_t o = 0; o < loom_ir_op_state_results(nd->op); o++)
                p->root[nd->out[o]] = p->root[nd->in[o]]; /* state results: the cache itself */
            k++;
        }
    }
    if ((st = assign_streams(p, g, def_idx, err))) goto done;
    S = p->n_streams; /* compacted */

    /* Per-root access vectors (defs and uses), and the in-place hand-overs. */
    for (size_t i = 0; i < (size_t)nv * S; i++) lastuse[i] = -1;
    maxuse = malloc((nv + 1) * sizeof *maxuse);
    if (!maxuse) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
        goto done;
    }
    for (uint32_t v = 0; v < nv; v++) maxuse[v] = -1;
    for (uint32_t k = 0; k < n; k++) {
        const loom_ir_node *nd = loom_ir_node_get(g, p->order[k]);
        for (uint32_t i = 0; i < nd->n_in + nd->n_out; i++) {
            loom_ir_value_id r = p->root[i < nd->n_in ? nd->in[i] : nd->out[i - nd->n_in]];
            if (r == LOOM_IR_NO_VALUE) continue;
            lastuse[(size_t)r * S + p->stream[k]] = (int32_t)k;
            if ((int64_t)k > maxuse[r]) maxuse[r] = k;
        }
    }
    /* Roots that own arena memory: node results that are their own root, except the external
     * ones. */
    uint32_t nb = 0;
    bool *blk_out = calloc(nv + 1, sizeof *blk_out);
    int32_t *blk_use = malloc(((size_t)nv * S + 1) * sizeof *blk_use);
    if (!blk_out || !blk_use) {
        free(blk_out);
        free(blk_use);
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
        goto done;
    }
    p->blocks = calloc(nv + 1, sizeof *p->blocks);
    if (!p->blocks) {
        free(blk_out);
        free(blk_use);
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
        goto done;
    }
    for (uint32_t k = 0; k < n && !st; k++) {
        const loom_ir_node *nd = loom_ir_node_get(g, p->order[k]);
        uint32_t flags = loom_ir_op_info_get(nd->op)->flags;
        for (uint32_t o = 0; o < nd->n_out; o++) {
            loom_ir_value_id v = nd->out[o];
            if (p->root[v] != v) continue;
            const loom_ir_value *val = loom_ir_value_get(g, v);
            int64_t b = loom_ir_type_bytes(g, &val->type, NULL);
            if (b < 0) {
                st = loom_error_set(err, LOOM_ERR_LIMIT,
                                    "plan: result of node %u (%s) is too large to size",
                                    p->order[k], loom_ir_op_info_get(nd->op)->name);
                break;
            }
            if (external && !loom_ir_value_use_count(g, v) && external(ctx, v, (uint64_t)b))
                continue;
            p->sum += (uint64_t)b;
            bool is_out = loom_ir_value_is_output(g, v);
            /* In place: out[0] over in[0]'s root when every access of that root is ordered
             * before this node and this node is its last use. */
            loom_ir_value_id r = p->root[nd->in[0]];
            uint32_t rb = r != LOOM_IR_NO_VALUE ? p->block_of_root[r] : LOOM_PLAN_NO_BLOCK;
            bool inplace = o == 0 && (flags & LOOM_IR_OPF_INPLACE) && rb != LOOM_PLAN_NO_BLOCK &&
                           !blk_out[rb] && maxuse[r] == (int64_t)k &&
                           round_up((uint64_t)b) <= p->blocks[rb].bytes;
            if (inplace) {
                const int32_t *vk = p->vc + (size_t)k * S;
                for (uint32_t t = 0; t < S; t++)
                    if (lastuse[(size_t)r * S + t] > vk[t]) inplace = false;
            }
            uint32_t bi;
            if (inplace) {
                bi = rb;
                p->n_inplace++;
            } else {
                bi = nb++;
                p->blocks[bi] = (loom_exec_plan_block){0, round_up((uint64_t)(b ? b : 1)), k, k + 1};
                for (uint32_t t = 0; t < S; t++) blk_use[(size_t)bi * S + t] = -1;
            }
            p->block_of_root[v] = bi;
            if (is_out) blk_out[bi] = true;
            for (uint32_t t = 0; t < S; t++) {
                int32_t u = lastuse[(size_t)v * S + t];
                if (u > blk_use[(size_t)bi * S + t]) blk_use[(size_t)bi * S + t] = u;
            }
        }
    }
    /* Lifetimes: end = first index from which every node is ordered after every access. */
    for (uint32_t bi = 0; bi < nb && !st; bi++) {
        loom_exec_plan_block *B = &p->blocks[bi];
        if (blk_out[bi]) {
            B->end = n;
            continue;
        }
        int64_t L = B->begin;
        for (uint32_t t = 0; t < S; t++)
            if (blk_use[(size_t)bi * S + t] > L) L = blk_use[(size_t)bi * S + t];
        uint32_t end = (uint32_t)L + 1;
        for (uint32_t m = (uint32_t)L + 1; m < n; m++) {
            const int32_t *vm = p->vc + (size_t)m * S;
            for (uint32_t t = 0; t < S; t++)
                if (blk_use[(size_t)bi * S + t] > vm[t]) {
                    end = m + 1;
                    break;
                }
        }
        B->end = end;
    }
    free(blk_out);
    free(blk_use);
    if (st) goto done;
    p->n_blocks = nb;

    /* Lower bound: the largest sum of live block bytes at one index. */
    {
        int64_t *d = calloc(n + 2, sizeof *d);
        if (!d) {
            st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
            goto done;
        }
        for (uint32_t bi = 0; bi < nb; bi++) {
            d[p->blocks[bi].begin] += (int64_t)p->blocks[bi].bytes;
            d[p->blocks[bi].end] -= (int64_t)p->blocks[bi].bytes;
        }
        int64_t cur = 0;
        for (uint32_t k = 0; k <= n; k++) {
            cur += d[k];
            if ((uint64_t)cur > p->lower) p->lower = (uint64_t)cur;
        }
        free(d);
    }
    /* Placement: the best of a few orderings. */
    items = malloc((nb + 1) * sizeof *items);
    offsets = malloc((nb + 1) * sizeof *offsets);
    best_off = malloc((nb + 1) * sizeof *best_off);
    spans = malloc((nb + 1) * sizeof *spans);
    if (!items || !offsets || !best_off || !spans) {
        st = loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "plan: out of memory");
        goto done;
    }
    {
        int (*cmps[3])(const void *, const void *) = {cmp_size, cmp_area, cmp_length};
        uint64_t best = UINT64_MAX;
        for (int c = 0; c < 3; c++) {
            for (uint32_t bi = 0; bi < nb; bi++)
                items[bi] = (place_item){bi, p->blocks[bi].bytes, p->blocks[bi].begin,
                                         p->blocks[bi].end};
            qsort(items, nb, sizeof *items, cmps[c]);
            uint64_t a = place(items, nb, offsets, spans);
            if (a < best) {
                best = a;
                memcpy(best_off, offsets, nb * sizeof *offsets);
            }
            if (best == p->lower) break;
        }
        p->arena = nb ? best : 0;
        for (uint32_t bi = 0; bi < nb; bi++) p->blocks[bi].offset = best_off[bi];
    }
done:
    free(def_idx);
    free(lastuse);
    free(items);
    free(offsets);
    free(best_off);
    free(spans);
    free(maxuse);
    if (st) {
        loom_exec_plan_destroy(p);
        return st;
    }
    *out = p;
    return LOOM_OK;
}

void loom_exec_plan_destroy(loom_exec_plan *p) {
    if (!p) return;
    free(p->order);
    free(p->stream);
    free(p->vc);
    free(p->wait_start);
    free(p->waits);
    free(p->records);
    free(p->root);
    free(p->block_of_root);
    free(p->blocks);
    free(p);
}

/* ---------------------------------------------------------------- access */

uint32_t loom_exec_plan_node_count(const loom_exec_plan *p) { return p->n; }
loom_ir_node_id loom_exec_plan_node_at(const loom_exec_plan *p, uint32_t i) {
    return i < p->n ? p->order[i] : LOOM_IR_NO_NODE;
}
uint32_t loom_exec_plan_streams(const loom_exec_plan *p) { return p->n_streams; }
uint32_t loom_exec_plan_stream_of(const loom_exec_plan *p, uint32_t i) {
    return i < p->n ? p->stream[i] : 0;
}
const uint32_t *loom_exec_plan_waits(const loom_exec_plan *p, uint32_t i, uint32_t *n) {
    if (i >= p->n) {
        *n = 0;
        return NULL;
    }
    *n = p->wait_start[i + 1] - p->wait_start[i];
    return p->waits + p->wait_start[i];
}
bool loom_exec_plan_records(const loom_exec_plan *p, uint32_t i) { return i < p->n && p->records[i]; }
bool loom_exec_plan_happens_before(const loom_exec_plan *p, uint32_t i, uint32_t k) {
    if (i >= p->n || k >= p->n || i > k) return false;
    return p->vc[(size_t)k * p->n_streams + p->stream[i]] >= (int32_t)i;
}
loom_ir_value_id loom_exec_plan_root(const loom_exec_plan *p, loom_ir_value_id v) {
    return v < p->n_values ? p->root[v] : LOOM_IR_NO_VALUE;
}
uint32_t loom_exec_plan_block_of(const loom_exec_plan *p, loom_ir_value_id v) {
    loom_ir_value_id r = loom_exec_plan_root(p, v);
    return r == LOOM_IR_NO_VALUE ? LOOM_PLAN_NO_BLOCK : p->block_of_root[r];
}
uint32_t loom_exec_plan_block_count(const loom_exec_plan *p) { return p->n_blocks; }
const loom_exec_plan_block *loom_exec_plan_block_at(const loom_exec_plan *p, uint32_t b) {
    return b < p->n_blocks ? &p->blocks[b] : NULL;
}
uint64_t loom_exec_plan_arena_bytes(const loom_exec_plan *p) { return p->arena; }
uint64_t loom_exec_plan_sum_bytes(const loom_exec_plan *p) { return p->sum; }
uint64_t loom_exec_plan_lower_bound_bytes(const loom_exec_plan *p) { return p->lower; }
uint32_t loom_exec_plan_inplace_count(const loom_exec_plan *p) { return p->n_inplace; }
uint32_t loom_exec_plan_wait_count(const loom_exec_plan *p) { return p->n_waits; }
