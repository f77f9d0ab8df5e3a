/* infer.c: type inference of every op of ops.def, and attribute normalization.
 *
 * infer_<name>() receives the operands (already checked to be live values, arity within the
 * table's bounds) and the normalized attributes (exactly the op's set, sorted by id), checks the
 * op's signature as documented in ops.def and writes the result types. A refusal names the op,
 * its operands and the rule broken:
 *   "ir: matmul(%3, @blk.0.attn_q.weight): operand 1 is q4_k[4096,4095]: K = 4095 must equal
 *    x's last dim 4096"
 * The same functions serve the builder (before a node exists) and the verifier (re-inference).
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "ir/ir_impl.h"

typedef struct ctx {
    const loom_ir_graph *g;
    loom_ir_op op;
    const loom_ir_value_id *in;
    uint32_t n_in;
    const loom_ir_value *v[LOOM_IR_MAX_INPUTS];
    const loom_ir_attr *attrs;
    uint32_t n_attrs;
    loom_error *err;
} ctx;

__attribute__((format(printf, 3, 4))) static loom_status fail(const ctx *c, loom_status st,
                                                               const char *fmt, ...) {
    char head[256], lab[128], msg[LOOM_ERROR_MSG_MAX];
    size_t o = (size_t)snprintf(head, sizeof head, "ir: %s(", loom_ir_op_info_get(c->op)->name);
    for (uint32_t i = 0; i < c->n_in && o < sizeof head; i++)
        o += (size_t)snprintf(head + o, sizeof head - o, "%s%s", i ? ", " : "",
                              ir_value_label(c->g, c->in[i], lab, sizeof lab));
    if (o >= sizeof head) o = sizeof head - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return loom_error_set(c->err, st, "%s): %s", head, msg);
}

static const char *tstr(const ctx *c, uint32_t i, char *buf, size_t len) {
    return loom_ir_type_format(c->g, &c->v[i]->type, buf, len);
}

static const loom_ir_attr *attr(const ctx *c, loom_ir_attr_id id) {
    for (uint32_t i = 0; i < c->n_attrs; i++)
        if (c->attrs[i].id == id) return &c->attrs[i];
    LOOM_ASSERT(!"normalized attributes lack an attribute of the op");
    return NULL;
}

/* Operand i is an f32 activation (not a weight or state) of rank min..max. */
static loom_status need_act(const ctx *c, uint32_t i, uint32_t min, uint32_t max) {
    char tb[96];
    const loom_ir_value *v = c->v[i];
    if (v->kind == LOOM_IR_VALUE_WEIGHT || v->kind == LOOM_IR_VALUE_STATE)
        return fail(c, LOOM_ERR_TYPE, "operand %u must be an activation, not a %s", i,
                    v->kind == LOOM_IR_VALUE_WEIGHT ? "weight" : "state");
    if (v->type.dtype != LOOM_IR_F32 || v->type.rank < min || v->type.rank > max)
        return fail(c, LOOM_ERR_TYPE, "operand %u is %s: expected f32 of rank %u..%u", i,
                    tstr(c, i, tb, sizeof tb), min, max);
    return LOOM_OK;
}

/* Operand i is i32[rows] where rows equals `rows` (a dim) unless rows == 0. */
static loom_status need_i32_vec(const ctx *c, uint32_t i, int64_t rows, const char *what) {
    char tb[96], db[96];
    const loom_ir_type *t = &c->v[i]->type;
    if (t->dtype != LOOM_IR_I32 || t->rank != 1 || (rows != 0 && t->dims[0] != rows)) {
        loom_ir_type want = loom_ir_type_make(LOOM_IR_I32, 1, &rows);
        return fail(c, LOOM_ERR_TYPE, "operand %u (%s) is %s: expected %s", i, what,
                    tstr(c, i, tb, sizeof tb),
                    rows ? loom_ir_type_format(c->g, &want, db, sizeof db) : "i32[N]");
    }
    return LOOM_OK;
}

static bool is_float_dtype(loom_ir_dtype d) {
    return d == LOOM_IR_F32 || d == LOOM_IR_F16 || d == LOOM_IR_BF16;
}

/* Operand i is a float vector [len] (weight or f32 activation). */
static loom_status need_float_vec(const ctx *c, uint32_t i, int64_t len, const char *what) {
    char tb[96];
    const loom_ir_value *v = c->v[i];
    bool ok = v->type.rank == 1 && v->type.dims[0] == len &&
              (v->kind == LOOM_IR_VALUE_WEIGHT ? is_float_dtype(v->type.dtype)
                                               : v->type.dtype == LOOM_IR_F32) &&
              v->kind != LOOM_IR_VALUE_STATE;
    if (!ok) {
        loom_ir_type want = loom_ir_type_make(LOOM_IR_F32, 1, &len);
        char wb[96];
        return fail(c, LOOM_ERR_TYPE, "operand %u (%s) is %s: expected a float vector %s", i,
                    what, tstr(c, i, tb, sizeof tb),
                    loom_ir_type_format(c->g, &want, wb, sizeof wb));
    }
    return LOOM_OK;
}

/* Operand i is a weight matrix [M,K] of a computable type with K == k. */
static loom_status need_weight_mat(const ctx *c, uint32_t i, int64_t k) {
    char tb[96];
    const loom_ir_value *v = c->v[i];
    if (v->kind != LOOM_IR_VALUE_WEIGHT)
        return fail(c, LOOM_ERR_TYPE, "operand %u must be a weight", i);
    if (v->type.rank != 2)
        return fail(c, LOOM_ERR_TYPE, "operand %u is %s: a weight matrix is [M,K]", i,
                    tstr(c, i, tb, sizeof tb));
    if (!loom_ir_dtype_computable(v->type.dtype))
        return fail(c, LOOM_ERR_UNSUPPORTED, "operand %u is %s: dtype %s is not computable "
                    "(supported: f32 f16 bf16 q8_0 q4_k q5_k q6_k)", i, tstr(c, i, tb, sizeof tb),
                    loom_ir_dtype_name(v->type.dtype));
    if (v->type.dims[1] != k) {
        char kb[64];
        return fail(c, LOOM_ERR_TYPE, "operand %u is %s: K must equal x's last dim %s", i,
                    tstr(c, i, tb, sizeof tb), ir_dim_format(c->g, k, kb, sizeof kb));
    }
    return LOOM_OK;
}

/* x . W^T for operand 0 and weight operand wi: checks and returns the result type. */
static loom_status matmul_type(const ctx *c, uint32_t wi, loom_ir_type *out) {
    loom_status st = need_act(c, 0, 1, LOOM_IR_MAX_DIMS);
    if (st) return st;
    const loom_ir_type *x = &c->v[0]->type;
    if ((st = need_weight_mat(c, wi, x->dims[x->rank - 1]))) return st;
    *out = *x;
    out->dims[x->rank - 1] = c->v[wi]->type.dims[0];
    return LOOM_OK;
}

/* a * b without signed overflow; false when it would overflow. */
static bool mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

bool ir_value_is_cache(const loom_ir_graph *g, loom_ir_value_id id) {
    const loom_ir_value *v = loom_ir_value_get(g, id);
    if (!v) return false;
    if (v->kind == LOOM_IR_VALUE_STATE) return true;
    if (v->kind != LOOM_IR_VALUE_NODE) return false;
    const loom_ir_node *n = loom_ir_node_get(g, v->def);
    return n && v->def_slot < loom_ir_op_state_results(n->op);
}

/* Operand i is a cache; *row receives its values per position (E), *ctx its rows (C). */
static loom_status need_cache(const ctx *c, uint32_t i, int64_t *rows, int64_t *row) {
    char tb[96];
    const loom_ir_type *t = &c->v[i]->type;
    if (!ir_value_is_cache(c->g, c->in[i]))
        return fail(c, LOOM_ERR_TYPE, "operand %u must be a KV cache (a state value or a "
                    "cache result of kv_write / rope_kv_write / rope_kv_attention)", i);
    if ((t->rank != 2 && t->rank != 3) || !is_float_dtype(t->dtype))
        return fail(c, LOOM_ERR_TYPE, "operand %u is %s: a cache is f32/f16/bf16 [C,E] or "
                    "[C,H,D]", i, tstr(c, i, tb, sizeof tb));
    *rows = t->dims[0];
    if (!mul_ok(t->dims[1], t->rank == 3 ? t->dims[2] : 1, row))
        return fail(c, LOOM_ERR_TYPE, "operand %u is %s: row size overflows", i,
                    tstr(c, i, tb, sizeof tb));
    return LOOM_OK;
}

/* ---- the ops ---- */

typedef loom_status (*infer_fn)(const ctx *c, loom_ir_type out[], uint32_t *n_out);

static loom_status infer_get_rows(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96];
    const loom_ir_value *t = c->v[0];
    if (t->type.rank != 2 || !loom_ir_dtype_computable(t->type.dtype) ||
        t->kind == LOOM_IR_VALUE_STATE || (t->kind != LOOM_IR_VALUE_WEIGHT && t->type.dtype !=
                                           LOOM_IR_F32))
        return fail(c, LOOM_ERR_TYPE, "operand 0 (table) is %s: expected [V,D] of a computable "
                    "type", tstr(c, 0, tb, sizeof tb));
    loom_status st = need_i32_vec(c, 1, 0, "ids");
    if (st) return st;
    int64_t d[2] = {c->v[1]->type.dims[0], t->type.dims[1]};
    out[0] = loom_ir_type_make(LOOM_IR_F32, 2, d);
    *n_out = 1;
    return LOOM_OK;
}

static loom_status check_eps(const ctx *c) {
    float eps = attr(c, LOOM_IR_ATTR_EPS)->u.f;
    if (!(eps >= 0.0f) || isinf(eps))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "eps %g must be finite and >= 0", eps);
    return LOOM_OK;
}

static loom_status same_as_act(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    loom_status st = need_act(c, 0, 1, LOOM_IR_MAX_DIMS);
    if (st) return st;
    out[0] = c->v[0]->type;
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_rms_norm(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    loom_status st = check_eps(c);
    return st ? st : same_as_act(c, out, n_out);
}

static loom_status broadcast(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char ta[96], tb[96];
    loom_status st = need_act(c, 0, 1, LOOM_IR_MAX_DIMS);
    if (st) return st;
    const loom_ir_value *b = c->v[1];
    const loom_ir_type *at = &c->v[0]->type, *bt = &b->type;
    bool dtype_ok = b->kind == LOOM_IR_VALUE_WEIGHT ? is_float_dtype(bt->dtype)
                                                    : bt->dtype == LOOM_IR_F32;
    bool shape_ok = bt->rank >= 1 && bt->rank <= at->rank;
    for (uint32_t i = 0; shape_ok && i < bt->rank; i++)
        shape_ok = bt->dims[bt->rank - 1 - i] == at->dims[at->rank - 1 - i];
    if (b->kind == LOOM_IR_VALUE_STATE || !dtype_ok || !shape_ok)
        return fail(c, LOOM_ERR_TYPE, "operand 1 is %s: it must be f32 (f16/bf16 for a weight) "
                    "with dims equal to the trailing dims of operand 0 %s",
                    tstr(c, 1, tb, sizeof tb), tstr(c, 0, ta, sizeof ta));
    out[0] = *at;
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_mul(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    return broadcast(c, out, n_out);
}

static loom_status infer_add(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    return broadcast(c, out, n_out);
}

/* The matmul family's optional prenorm weight (ops.def conventions): when the node has one
 * (loom_ir_prenorm_slot), it is an f32 vector [K] of x's last dim and norm_eps a valid eps;
 * without one norm_eps must be 0. */
static loom_status check_prenorm(const ctx *c) {
    char tb[96];
    float eps = attr(c, LOOM_IR_ATTR_NORM_EPS)->u.f;
    uint32_t slot = loom_ir_prenorm_slot(c->op, c->n_in);
    if (slot == LOOM_IR_NO_SLOT) {
        if (eps != 0.0f)
            return fail(c, LOOM_ERR_INVALID_ARGUMENT, "norm_eps %g without a norm weight "
                        "operand: must be 0", eps);
        return LOOM_OK;
    }
    if (!(eps >= 0.0f) || isinf(eps))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "norm_eps %g must be finite and >= 0", eps);
    const loom_ir_type *x = &c->v[0]->type;
    loom_status st = need_float_vec(c, slot, x->dims[x->rank - 1], "norm weight");
    if (!st && c->v[slot]->type.dtype != LOOM_IR_F32)
        st = fail(c, LOOM_ERR_TYPE, "operand %u (norm weight) is %s: it must be f32", slot,
                  tstr(c, slot, tb, sizeof tb));
    return st;
}

static loom_status infer_matmul(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    *n_out = 1;
    loom_status st = matmul_type(c, 1, &out[0]);
    return st ? st : check_prenorm(c);
}

static loom_status infer_reshape(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96], sb[96];
    const loom_ir_value *x = c->v[0];
    if (x->kind == LOOM_IR_VALUE_WEIGHT || x->kind == LOOM_IR_VALUE_STATE)
        return fail(c, LOOM_ERR_TYPE, "operand 0 must be an activation");
    const loom_ir_attr *a = attr(c, LOOM_IR_ATTR_SHAPE);
    loom_ir_type t = loom_ir_type_make(x->type.dtype, a->count, a->u.ints);
    for (uint32_t i = 0; i < a->count; i++)
        if (t.dims[i] == 0 || (loom_ir_dim_is_sym(t.dims[i]) &&
                               loom_ir_dim_sym_index(t.dims[i]) >= loom_ir_symbol_count(c->g)))
            return fail(c, LOOM_ERR_INVALID_ARGUMENT, "shape dim %u is 0 or an unknown symbol",
                        i);
    /* Same element count for every binding: equal constant products, equal symbol multisets. */
    int64_t pa = 1, pb = 1;
    bool fits = true;
    int sa[LOOM_IR_MAX_SYMBOLS] = {0}, sb_[LOOM_IR_MAX_SYMBOLS] = {0};
    for (uint32_t i = 0; i < x->type.rank; i++) {
        int64_t d = x->type.dims[i];
        if (loom_ir_dim_is_sym(d)) sa[loom_ir_dim_sym_index(d) % LOOM_IR_MAX_SYMBOLS]++;
        else fits = fits && mul_ok(pa, d, &pa);
    }
    for (uint32_t i = 0; i < t.rank; i++) {
        int64_t d = t.dims[i];
        if (loom_ir_dim_is_sym(d)) sb_[loom_ir_dim_sym_index(d) % LOOM_IR_MAX_SYMBOLS]++;
        else fits = fits && mul_ok(pb, d, &pb);
    }
    if (!fits || pa != pb || memcmp(sa, sb_, sizeof sa))
        return fail(c, LOOM_ERR_TYPE, "cannot view %s as %s: element counts differ",
                    tstr(c, 0, tb, sizeof tb), loom_ir_type_format(c->g, &t, sb, sizeof sb));
    out[0] = t;
    *n_out = 1;
    return LOOM_OK;
}

/* The rope attributes (n_rot, freq_base, freq_scale) against the head dim D. */
static loom_status check_rope_attrs(const ctx *c, int64_t D) {
    char db[64];
    int64_t n_rot = attr(c, LOOM_IR_ATTR_N_ROT)->u.i;
    float base = attr(c, LOOM_IR_ATTR_FREQ_BASE)->u.f, scale = attr(c, LOOM_IR_ATTR_FREQ_SCALE)->u.f;
    if (loom_ir_dim_is_sym(D) || n_rot < 2 || n_rot % 2 || n_rot > D)
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "n_rot %lld must be even, >= 2 and <= the "
                    "head dim %s", (long long)n_rot, ir_dim_format(c->g, D, db, sizeof db));
    if (!(base > 0.0f) || isinf(base) || !(scale > 0.0f) || isinf(scale))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "freq_base %g and freq_scale %g must be finite "
                    "and > 0", base, scale);
    return LOOM_OK;
}

static loom_status infer_rope(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    loom_status st = need_act(c, 0, 3, 3);
    if (st) return st;
    const loom_ir_type *x = &c->v[0]->type;
    if ((st = need_i32_vec(c, 1, x->dims[0], "positions")) || (st = check_rope_attrs(c, x->dims[2])))
        return st;
    out[0] = *x;
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_kv_write(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96], cb[96];
    int64_t rows, row;
    loom_status st = need_cache(c, 0, &rows, &row);
    if (st || (st = need_act(c, 1, 2, 3))) return st;
    const loom_ir_type *x = &c->v[1]->type;
    int64_t xrow = -1;
    if (loom_ir_dim_is_sym(x->dims[1]) || (x->rank == 3 && loom_ir_dim_is_sym(x->dims[2])) ||
        !mul_ok(x->dims[1], x->rank == 3 ? x->dims[2] : 1, &xrow) || xrow != row)
        return fail(c, LOOM_ERR_TYPE, "operand 1 is %s: its rows must hold the cache's %lld "
                    "values per position (cache %s)", tstr(c, 1, tb, sizeof tb), (long long)row,
                    tstr(c, 0, cb, sizeof cb));
    if ((st = need_i32_vec(c, 2, x->dims[0], "positions"))) return st;
    (void)rows;
    out[0] = c->v[0]->type;
    *n_out = 1;
    return LOOM_OK;
}

/* attention's attributes (n_head, n_kv_head, head_dim, scale), also rope_kv_attention's. */
static loom_status check_attn_attrs(const ctx *c, int64_t *nh, int64_t *nkv, int64_t *hd) {
    *nh = attr(c, LOOM_IR_ATTR_N_HEAD)->u.i;
    *nkv = attr(c, LOOM_IR_ATTR_N_KV_HEAD)->u.i;
    *hd = attr(c, LOOM_IR_ATTR_HEAD_DIM)->u.i;
    float scale = attr(c, LOOM_IR_ATTR_SCALE)->u.f;
    if (*nh < 1 || *nkv < 1 || *hd < 1 || *nh % *nkv || *nh > (1 << 20) || *hd > (1 << 20))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "n_head %lld, n_kv_head %lld, head_dim %lld: "
                    "need >= 1 and n_kv_head dividing n_head", (long long)*nh, (long long)*nkv,
                    (long long)*hd);
    if (!isfinite(scale))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "scale %g is not finite", scale);
    return LOOM_OK;
}

static loom_status infer_attention(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96];
    int64_t nh, nkv, hd;
    loom_status st = check_attn_attrs(c, &nh, &nkv, &hd);
    if (st || (st = need_act(c, 0, 2, 3))) return st;
    const loom_ir_type *q = &c->v[0]->type;
    bool qok = q->rank == 2 ? q->dims[1] == nh * hd : q->dims[1] == nh && q->dims[2] == hd;
    if (!qok)
        return fail(c, LOOM_ERR_TYPE, "operand 0 (q) is %s: expected [T,%lld] or [T,%lld,%lld]",
                    tstr(c, 0, tb, sizeof tb), (long long)(nh * hd), (long long)nh,
                    (long long)hd);
    int64_t krows, krow, vrows, vrow;
    if ((st = need_cache(c, 1, &krows, &krow)) || (st = need_cache(c, 2, &vrows, &vrow)))
        return st;
    for (uint32_t i = 1; i <= 2; i++) {
        const loom_ir_type *t = &c->v[i]->type;
        bool ok = (i == 1 ? krow : vrow) == nkv * hd &&
                  (t->rank == 2 || (t->dims[1] == nkv && t->dims[2] == hd));
        if (!ok)
            return fail(c, LOOM_ERR_TYPE, "operand %u (%s cache) is %s: expected [C,%lld] or "
                        "[C,%lld,%lld]", i, i == 1 ? "k" : "v", tstr(c, i, tb, sizeof tb),
                        (long long)(nkv * hd), (long long)nkv, (long long)hd);
    }
    if (krows != vrows)
        return fail(c, LOOM_ERR_TYPE, "k and v caches hold %lld and %lld positions",
                    (long long)krows, (long long)vrows);
    if ((st = need_i32_vec(c, 3, q->dims[0], "positions"))) return st;
    int64_t d[2] = {q->dims[0], nh * hd};
    out[0] = loom_ir_type_make(LOOM_IR_F32, 2, d);
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_silu(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    return same_as_act(c, out, n_out);
}

static loom_status infer_softmax(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    return same_as_act(c, out, n_out);
}

static loom_status infer_argmax(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    loom_status st = need_act(c, 0, 1, LOOM_IR_MAX_DIMS);
    if (st) return st;
    const loom_ir_type *x = &c->v[0]->type;
    out[0] = loom_ir_type_make(LOOM_IR_I32, x->rank - 1, x->dims);
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_convert(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96];
    const loom_ir_value *x = c->v[0];
    loom_ir_dtype to = (loom_ir_dtype)attr(c, LOOM_IR_ATTR_DTYPE)->u.i;
    if (x->kind == LOOM_IR_VALUE_WEIGHT || x->kind == LOOM_IR_VALUE_STATE ||
        !(is_float_dtype(x->type.dtype) || x->type.dtype == LOOM_IR_I32))
        return fail(c, LOOM_ERR_TYPE, "operand 0 is %s: expected an f32/f16/bf16/i32 "
                    "activation", tstr(c, 0, tb, sizeof tb));
    if (!(is_float_dtype(to) || to == LOOM_IR_I32))
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "dtype %s: convert makes f32, f16, bf16 or "
                    "i32", loom_ir_dtype_name(to) ? loom_ir_dtype_name(to) : "?");
    out[0] = x->type;
    out[0].dtype = to;
    *n_out = 1;
    return LOOM_OK;
}

static loom_status infer_fused_rms_norm(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    loom_status st = check_eps(c);
    if (st || (st = same_as_act(c, out, n_out))) return st;
    const loom_ir_type *x = &c->v[0]->type;
    return need_float_vec(c, 1, x->dims[x->rank - 1], "w");
}

static loom_status infer_matmul_triple(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    if (c->n_in == 6)
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "takes x, W0, W1, W2, optionally b0, b1, b2, "
                    "optionally a norm weight (4, 5, 7 or 8 operands), got %u", c->n_in);
    for (uint32_t i = 0; i < 3; i++) {
        loom_status st = matmul_type(c, 1 + i, &out[i]);
        if (st) return st;
        if (c->n_in >= 7 && (st = need_float_vec(c, 4 + i, c->v[1 + i]->type.dims[0], "bias")))
            return st;
    }
    *n_out = 3;
    return check_prenorm(c);
}

static loom_status infer_matmul_pair(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    int64_t swiglu = attr(c, LOOM_IR_ATTR_SWIGLU)->u.i;
    if (swiglu != 0 && swiglu != 1)
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "swiglu is %lld: must be 0 or 1",
                    (long long)swiglu);
    loom_status st;
    if ((st = matmul_type(c, 1, &out[0])) || (st = matmul_type(c, 2, &out[1]))) return st;
    if (swiglu) {
        char a[96], b[96];
        if (!loom_ir_type_equal(&out[0], &out[1]))
            return fail(c, LOOM_ERR_TYPE, "swiglu needs W0 and W1 of the same rows: %s vs %s",
                        tstr(c, 1, a, sizeof a), tstr(c, 2, b, sizeof b));
        *n_out = 1;
    } else {
        *n_out = 2;
    }
    return check_prenorm(c);
}

static loom_status infer_matmul_add(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96], rb[96];
    loom_status st = matmul_type(c, 1, &out[0]);
    if (st || (st = need_act(c, 2, 1, LOOM_IR_MAX_DIMS))) return st;
    if (!loom_ir_type_equal(&c->v[2]->type, &out[0]))
        return fail(c, LOOM_ERR_TYPE, "operand 2 (residual) is %s: expected the product's %s",
                    tstr(c, 2, rb, sizeof rb), loom_ir_type_format(c->g, &out[0], tb, sizeof tb));
    *n_out = 1;
    return LOOM_OK;
}

/* rope_kv_write(k_cache, v_cache, q, k, v, pos [, q_norm, k_norm]): see ops.def. */
static loom_status infer_rope_kv_write(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char tb[96], kb[96];
    if (c->n_in != 6 && c->n_in != 8)
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "takes k_cache, v_cache, q, k, v, pos and "
                    "optionally q_norm, k_norm (6 or 8 operands), got %u", c->n_in);
    int64_t rows, vrows, krow, vrow;
    loom_status st;
    if ((st = need_cache(c, 0, &rows, &krow)) || (st = need_cache(c, 1, &vrows, &vrow)) ||
        (st = need_act(c, 2, 3, 3)) || (st = need_act(c, 3, 3, 3)) || (st = need_act(c, 4, 3, 3)))
        return st;
    if (c->in[0] == c->in[1])
        return fail(c, LOOM_ERR_TYPE, "operands 0 and 1 are one cache: K and V need their own");
    if (vrows != rows || vrow != krow || c->v[1]->type.dtype != c->v[0]->type.dtype)
        return fail(c, LOOM_ERR_TYPE, "operands 0 and 1 (K and V caches) are %s and %s: they "
                    "must have the same positions, row size and dtype",
                    tstr(c, 0, tb, sizeof tb), tstr(c, 1, kb, sizeof kb));
    const loom_ir_type *q = &c->v[2]->type, *k = &c->v[3]->type;
    int64_t D = q->dims[2], row = -1;
    if (loom_ir_dim_is_sym(k->dims[1]) || loom_ir_dim_is_sym(D) || k->dims[0] != q->dims[0] ||
        k->dims[2] != D || !mul_ok(k->dims[1], D, &row))
        return fail(c, LOOM_ERR_TYPE, "operand 3 (k) is %s: expected [T,Hkv,D] with q's T and "
                    "constant D (q %s)", tstr(c, 3, kb, sizeof kb), tstr(c, 2, tb, sizeof tb));
    if (!loom_ir_type_equal(&c->v[4]->type, k))
        return fail(c, LOOM_ERR_TYPE, "operand 4 (v) is %s: expected k's %s",
                    tstr(c, 4, tb, sizeof tb), tstr(c, 3, kb, sizeof kb));
    for (uint32_t i = 0; i < 2; i++)
        if ((i ? vrow : krow) != row)
            return fail(c, LOOM_ERR_TYPE, "operand %u (%s cache) is %s: its rows must hold the "
                        "%lld values of k's heads", i, i ? "v" : "k", tstr(c, i, tb, sizeof tb),
                        (long long)row);
    if ((st = need_i32_vec(c, 5, q->dims[0], "positions")) || (st = check_rope_attrs(c, D)) ||
        (st = check_eps(c)))
        return st;
    for (uint32_t i = 6; i < c->n_in; i++) {
        if ((st = need_float_vec(c, i, D, i == 6 ? "q_norm" : "k_norm"))) return st;
        if (c->v[i]->type.dtype != LOOM_IR_F32)
            return fail(c, LOOM_ERR_TYPE, "operand %u (%s) is %s: the norm weights must be f32", i,
                        i == 6 ? "q_norm" : "k_norm", tstr(c, i, tb, sizeof tb));
    }
    if (c->n_in == 6 && attr(c, LOOM_IR_ATTR_EPS)->u.f != 0.0f)
        return fail(c, LOOM_ERR_INVALID_ARGUMENT, "eps %g without norm weights: must be 0",
                    attr(c, LOOM_IR_ATTR_EPS)->u.f);
    out[0] = c->v[0]->type;
    out[1] = c->v[1]->type;
    out[2] = *q;
    *n_out = 3;
    return LOOM_OK;
}

/* rope_kv_attention: rope_kv_write's operands and attributes, attention's attributes matching
 * them (Hq, Hkv, D of q and k), attention's output [T,Hq*D] as result 2. */
static loom_status infer_rope_kv_attention(const ctx *c, loom_ir_type out[], uint32_t *n_out) {
    char qb[96], kb[96];
    int64_t nh, nkv, hd;
    loom_status st = infer_rope_kv_write(c, out, n_out);
    if (st || (st = check_attn_attrs(c, &nh, &nkv, &hd))) return st;
    const loom_ir_type *q = &c->v[2]->type, *k = &c->v[3]->type;
    if (q->dims[1] != nh || k->dims[1] != nkv || q->dims[2] != hd)
        return fail(c, LOOM_ERR_TYPE, "n_head %lld, n_kv_head %lld, head_dim %lld do not match "
                    "q %s and k %s ([T,n_head,head_dim], [T,n_kv_head,head_dim])", (long long)nh,
                    (long long)nkv, (long long)hd, tstr(c, 2, qb, sizeof qb),
                    tstr(c, 3, kb, sizeof kb));
    int64_t d[2] = {q->dims[0], nh * hd};
    out[2] = loom_ir_type_make(LOOM_IR_F32, 2, d);
    return LOOM_OK;
}

static const infer_fn infer_table[LOOM_IR_OP_COUNT] = {
#define LOOM_IR_OP_DEF(ID, name, min_in, max_in, max_out, flags, attrs, doc) \
    [LOOM_IR_OP_##ID] = infer_##name,
#include "ir/ops.def"
};

/* ---- attributes ---- */

loom_status ir_normalize_attrs(loom_ir_op op, const loom_ir_attr *attrs, uint32_t n_attrs,
                               loom_ir_attr out[LOOM_IR_MAX_ATTRS], uint32_t *n_out,
                               loom_error *err) {
    const loom_ir_op_info *oi = loom_ir_op_info_get(op);
    uint32_t seen = 0;
    for (uint32_t i = 0; i < n_attrs; i++) {
        const loom_ir_attr_info *ai = loom_ir_attr_info_get((loom_ir_attr_id)attrs[i].id);
        if (!ai || !(oi->attrs & (1u << attrs[i].id)))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s has no attribute %s",
                                  oi->name, ai ? ai->name : "(unknown id)");
        if (seen & (1u << attrs[i].id))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: attribute %s given "
                                  "twice", oi->name, ai->name);
        if (attrs[i].kind != ai->kind)
            return loom_error_set(err, LOOM_ERR_TYPE, "ir: %s: attribute %s has the wrong kind",
                                  oi->name, ai->name);
        seen |= 1u << attrs[i].id;
    }
    uint32_t n = 0;
    for (int id = 0; id < LOOM_IR_ATTR_ID_COUNT; id++) {
        if (!(oi->attrs & (1u << id))) continue;
        const loom_ir_attr_info *ai = loom_ir_attr_info_get((loom_ir_attr_id)id);
        LOOM_ASSERT(n < LOOM_IR_MAX_ATTRS);
        loom_ir_attr *a = &out[n++];
        if (seen & (1u << id)) {
            for (uint32_t i = 0; i < n_attrs; i++)
                if (attrs[i].id == id) *a = attrs[i];
        } else if (ai->optional) {
            *a = ai->kind == LOOM_IR_ATTR_KIND_FLOAT
                     ? loom_ir_attr_float((loom_ir_attr_id)id, ai->default_f)
                     : loom_ir_attr_int((loom_ir_attr_id)id, ai->default_i);
        } else {
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s needs attribute %s "
                                  "(%s)", oi->name, ai->name, ai->doc);
        }
        char nb[32];
        if (ai->kind == LOOM_IR_ATTR_KIND_ENUM && !loom_ir_attr_enum_name((loom_ir_attr_id)id, a->u.i, nb,
                                                                 sizeof nb))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: %s = %lld is not one "
                                  "of %s", oi->name, ai->name, (long long)a->u.i, ai->enum_names);
        if (ai->kind == LOOM_IR_ATTR_KIND_DTYPE && !loom_ir_dtype_name((loom_ir_dtype)a->u.i))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: %s = %lld is not a "
                                  "dtype", oi->name, ai->name, (long long)a->u.i);
        if (ai->kind == LOOM_IR_ATTR_KIND_SHAPE && (a->count < 1 || a->count > LOOM_IR_MAX_DIMS))
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: %s has %u dims "
                                  "(1..%d)", oi->name, ai->name, a->count, LOOM_IR_MAX_DIMS);
        if ((ai->kind == LOOM_IR_ATTR_KIND_INTS || ai->kind == LOOM_IR_ATTR_KIND_SHAPE) &&
            a->count && !a->u.ints)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: %s list is NULL",
                                  oi->name, ai->name);
        if (ai->kind == LOOM_IR_ATTR_KIND_STRING && !a->u.s)
            return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: %s: %s is NULL", oi->name,
                                  ai->name);
    }
    *n_out = n;
    return LOOM_OK;
}

loom_status ir_infer_normalized(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                                uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                                loom_ir_type out[LOOM_IR_MAX_OUTPUTS], uint32_t *n_out,
                                loom_error *err) {
    const loom_ir_op_info *oi = loom_ir_op_info_get(op);
    if (!oi) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: unknown op id %d", op);
    ctx c = {g, op, in, n_in, {0}, attrs, n_attrs, err};
    if (n_in < oi->min_in || n_in > oi->max_in) {
        c.n_in = 0;
        return fail(&c, LOOM_ERR_INVALID_ARGUMENT, "takes %u..%u operands, got %u", oi->min_in,
                    oi->max_in, n_in);
    }
    for (uint32_t i = 0; i < n_in; i++) {
        c.v[i] = loom_ir_value_get(g, in[i]);
        if (!c.v[i] || c.v[i]->kind == LOOM_IR_VALUE_DEAD)
            return fail(&c, LOOM_ERR_INVALID_ARGUMENT, "operand %u does not exist", i);
    }
    memset(out, 0, LOOM_IR_MAX_OUTPUTS * sizeof *out);
    *n_out = 0;
    return infer_table[op](&c, out, n_out);
}

loom_status loom_ir_infer(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                          uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                          loom_ir_type out[LOOM_IR_MAX_OUTPUTS], uint32_t *n_out,
                          loom_error *err) {
    if (!loom_ir_op_info_get(op))
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "ir: unknown op id %d", op);
    loom_ir_attr norm[LOOM_IR_MAX_ATTRS];
    uint32_t n_norm;
    loom_status st = ir_normalize_attrs(op, attrs, n_attrs, norm, &n_norm, err);
    if (st) return st;
    return ir_infer_normalized(g, op, in, n_in, norm, n_norm, out, n_out, err);
}
