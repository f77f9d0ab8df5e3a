/* parse.c: the text form parser (syntax in ir.h, printer in print.c).
 *
 * One statement per line; `#` comments; blank lines ignored. Every node goes through
 * loom_ir_build, so a parsed graph is well-typed by construction; a type error is reported at
 * the line and column of the node with the builder's message. The finished graph is verified.
 * Errors: "parse:LINE:COL: reason" (columns count bytes from 1). Result names (`%x`, `%12`) are
 * local to the text: they map to whatever ids the builder hands out.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_impl.h"

typedef struct named { char *name; loom_ir_value_id v; } named;

typedef struct P {
    const char *s;
    size_t n, i, line_start;
    uint32_t line;
    loom_ir_graph *g;
    loom_error *err;
    named *res; /* result names of node lines */
    uint32_t n_res, cap_res;
} P;

__attribute__((format(printf, 4, 5))) static loom_status perr(P *p, size_t at, loom_status st,
                                                              const char *fmt, ...) {
    char msg[LOOM_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return loom_error_set(p->err, st, "parse:%u:%zu: %s", p->line, at - p->line_start + 1, msg);
}

/* ---- lexing within a line ---- */

static bool at_eol(const P *p) {
    return p->i >= p->n || p->s[p->i] == '\n' || p->s[p->i] == '#';
}

static void skip_ws(P *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) p->i++;
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-' || c == '+';
}

/* A run of word characters into buf (NUL-terminated); its length, 0 when none. */
static size_t word(P *p, char *buf, size_t cap) {
    skip_ws(p);
    size_t k = 0;
    while (p->i < p->n && word_char(p->s[p->i])) {
        if (k + 1 < cap) buf[k] = p->s[p->i];
        k++;
        p->i++;
    }
    buf[k < cap ? k : cap - 1] = '\0';
    return k;
}

static bool eat(P *p, char c) {
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

static loom_status expect(P *p, char c) {
    if (eat(p, c)) return LOOM_OK;
    return perr(p, p->i, LOOM_ERR_FORMAT, "expected '%c'", c);
}

/* A word of at most cap-1 characters; error naming `what` when missing or too long. */
static loom_status need_word(P *p, char *buf, size_t cap, const char *what) {
    skip_ws(p);
    size_t at = p->i, k = word(p, buf, cap);
    if (!k) return perr(p, at, LOOM_ERR_FORMAT, "expected %s", what);
    if (k >= cap) return perr(p, at, LOOM_ERR_FORMAT, "%s is too long", what);
    return LOOM_OK;
}

/* A quoted string with \" \\ \n \t \xHH escapes into buf. */
static loom_status quoted(P *p, char *buf, size_t cap) {
    skip_ws(p);
    size_t at = p->i, k = 0;
    if (!eat(p, '"')) return perr(p, at, LOOM_ERR_FORMAT, "expected '\"'");
    for (;;) {
        if (p->i >= p->n || p->s[p->i] == '\n')
            return perr(p, at, LOOM_ERR_FORMAT, "unterminated string");
        char c = p->s[p->i++];
        if (c == '"') break;
        if (c == '\\') {
            char e = p->i < p->n ? p->s[p->i++] : 0;
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == '"' || e == '\\') c = e;
            else if (e == 'x' && p->i + 2 <= p->n) {
                char hex[3] = {p->s[p->i], p->s[p->i + 1], 0}, *end;
                long v = strtol(hex, &end, 16);
                if (*end || v == 0) return perr(p, p->i - 2, LOOM_ERR_FORMAT, "bad \\x escape");
                c = (char)v;
                p->i += 2;
            } else {
                return perr(p, p->i - 2, LOOM_ERR_FORMAT, "unknown escape");
            }
        }
        if (k + 1 >= cap) return perr(p, at, LOOM_ERR_FORMAT, "string too long");
        buf[k++] = c;
    }
    buf[k] = '\0';
    return LOOM_OK;
}

/* A name after a sigil: a word or a quoted string. */
static loom_status name_after_sigil(P *p, char *buf, size_t cap, const char *what) {
    if (p->i < p->n && p->s[p->i] == '"') return quoted(p, buf, cap);
    size_t at = p->i, k = 0;
    while (p->i < p->n && word_char(p->s[p->i])) {
        if (k + 1 < cap) buf[k] = p->s[p->i];
        k++;
        p->i++;
    }
    if (!k) return perr(p, at, LOOM_ERR_FORMAT, "expected %s", what);
    if (k >= cap) return perr(p, at, LOOM_ERR_FORMAT, "%s is too long", what);
    buf[k] = '\0';
    return LOOM_OK;
}

static loom_status parse_int(P *p, size_t at, const char *w, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(w, &end, 10);
    if (!*w || *end || errno) return perr(p, at, LOOM_ERR_FORMAT, "'%s' is not an integer", w);
    *out = v;
    return LOOM_OK;
}

static loom_status parse_double(P *p, size_t at, const char *w, double *out) {
    char *end;
    errno = 0;
    double v = strtod(w, &end);
    if (!*w || *end || (errno && v != 0)) return perr(p, at, LOOM_ERR_FORMAT, "'%s' is not a "
                                                          "number", w);
    *out = v;
    return LOOM_OK;
}

static bool looks_float(const char *w) {
    return strpbrk(w, ".eE") || strstr(w, "inf") || strstr(w, "nan");
}

static loom_status end_of_line(P *p) {
    skip_ws(p);
    if (!at_eol(p)) return perr(p, p->i, LOOM_ERR_FORMAT, "unexpected '%c'", p->s[p->i]);
    return LOOM_OK;
}

/* ---- pieces ---- */

static loom_status dim(P *p, int64_t *out) {
    char w[64];
    skip_ws(p);
    size_t at = p->i;
    loom_status st = need_word(p, w, sizeof w, "a dim (a number or a symbol)");
    if (st) return st;
    if (w[0] >= '0' && w[0] <= '9') {
        if ((st = parse_int(p, at, w, out))) return st;
        if (*out < 1) return perr(p, at, LOOM_ERR_FORMAT, "dim %s must be >= 1", w);
        return LOOM_OK;
    }
    *out = loom_ir_symbol_find(p->g, w);
    if (!*out) return perr(p, at, LOOM_ERR_NOT_FOUND, "unknown symbol '%s'", w);
    return LOOM_OK;
}

/* [d, d, ...] into dims (up to max); *n receives the count. */
static loom_status dim_list(P *p, int64_t *dims, uint32_t max, uint32_t *n) {
    loom_status st = expect(p, '[');
    if (st) return st;
    *n = 0;
    if (eat(p, ']')) return LOOM_OK;
    do {
        if (*n == max) return perr(p, p->i, LOOM_ERR_FORMAT, "more than %u dims", max);
        if ((st = dim(p, &dims[(*n)++]))) return st;
    } while (eat(p, ','));
    return expect(p, ']');
}

static loom_status type(P *p, loom_ir_type *t) {
    char w[32];
    skip_ws(p);
    size_t at = p->i;
    loom_status st = need_word(p, w, sizeof w, "a type such as f32[T,4096]");
    if (st) return st;
    loom_ir_dtype dt;
    if (!loom_ir_dtype_from_name(w, &dt)) return perr(p, at, LOOM_ERR_FORMAT, "unknown dtype "
                                                      "'%s'", w);
    int64_t dims[LOOM_IR_MAX_DIMS];
    uint32_t n;
    if ((st = dim_list(p, dims, LOOM_IR_MAX_DIMS, &n))) return st;
    *t = loom_ir_type_make(dt, n, dims);
    return LOOM_OK;
}

/* %name (a result or an input) or @name (a weight or state). */
static loom_status value_ref(P *p, loom_ir_value_id *out) {
    char name[512];
    skip_ws(p);
    size_t at = p->i;
    char sigil = p->i < p->n ? p->s[p->i] : 0;
    if (sigil != '%' && sigil != '@')
        return perr(p, at, LOOM_ERR_FORMAT, "expected a value (%%name or @name)");
    p->i++;
    loom_status st = name_after_sigil(p, name, sizeof name, "a value name");
    if (st) return st;
    if (sigil == '%') {
        for (uint32_t k = p->n_res; k-- > 0;) /* newest first: operands are mostly recent */
            if (!strcmp(p->res[k].name, name)) {
                *out = p->res[k].v;
                return LOOM_OK;
            }
    }
    loom_ir_value_id v = loom_ir_find_value(p->g, name);
    const loom_ir_value *val = loom_ir_value_get(p->g, v);
    bool ok = val && (sigil == '%' ? val->kind == LOOM_IR_VALUE_INPUT
                                   : val->kind != LOOM_IR_VALUE_INPUT);
    if (!ok)
        return perr(p, at, LOOM_ERR_NOT_FOUND, "undefined value %c%s%s", sigil, name,
                    sigil == '@' ? " (declare it with `weight` or `state`)" : "");
    *out = v;
    return LOOM_OK;
}

/* {name=value, ...}; strings and lists live in ints_buf / str_buf (valid until the build). */
static loom_status attr_block(P *p, loom_ir_attr *attrs, uint32_t *n_attrs,
                              int64_t ints_buf[LOOM_IR_MAX_ATTRS][16],
                              char str_buf[LOOM_IR_MAX_ATTRS][256]) {
    *n_attrs = 0;
    if (!eat(p, '{')) return LOOM_OK;
    if (eat(p, '}')) return LOOM_OK;
    loom_status st;
    do {
        char name[64], w[64];
        skip_ws(p);
        size_t at = p->i;
        if ((st = need_word(p, name, sizeof name, "an attribute name"))) return st;
        loom_ir_attr_id id;
        if (!loom_ir_attr_from_name(name, &id))
            return perr(p, at, LOOM_ERR_FORMAT, "unknown attribute '%s'", name);
        if (*n_attrs == LOOM_IR_MAX_ATTRS)
            return perr(p, at, LOOM_ERR_FORMAT, "more than %d attributes", LOOM_IR_MAX_ATTRS);
        if ((st = expect(p, '='))) return st;
        const loom_ir_attr_info *ai = loom_ir_attr_info_get(id);
        uint32_t k = *n_attrs;
        skip_ws(p);
        size_t vat = p->i;
        int64_t iv = 0;
        double dv = 0;
        switch (ai->kind) {
        case LOOM_IR_ATTR_KIND_INT:
            if ((st = need_word(p, w, sizeof w, "an integer")) || (st = parse_int(p, vat, w, &iv)))
                return st;
            attrs[k] = loom_ir_attr_int(id, iv);
            break;
        case LOOM_IR_ATTR_KIND_FLOAT:
            if ((st = need_word(p, w, sizeof w, "a number")) ||
                (st = parse_double(p, vat, w, &dv)))
                return st;
            attrs[k] = loom_ir_attr_float(id, (float)dv);
            break;
        case LOOM_IR_ATTR_KIND_ENUM:
            if ((st = need_word(p, w, sizeof w, "a name"))) return st;
            if (!loom_ir_attr_enum_value(id, w, strlen(w), &iv))
                return perr(p, vat, LOOM_ERR_FORMAT, "%s must be one of %s", name,
                            ai->enum_names);
            attrs[k] = loom_ir_attr_int(id, iv);
            break;
        case LOOM_IR_ATTR_KIND_DTYPE: {
            loom_ir_dtype dt;
            if ((st = need_word(p, w, sizeof w, "a dtype"))) return st;
            if (!loom_ir_dtype_from_name(w, &dt))
                return perr(p, vat, LOOM_ERR_FORMAT, "unknown dtype '%s'", w);
            attrs[k] = loom_ir_attr_int(id, dt);
            break;
        }
        case LOOM_IR_ATTR_KIND_SHAPE: {
            uint32_t n;
            if ((st = dim_list(p, ints_buf[k], LOOM_IR_MAX_DIMS, &n))) return st;
            attrs[k] = loom_ir_attr_ints(id, ints_buf[k], n);
            break;
        }
        case LOOM_IR_ATTR_KIND_INTS: {
            uint32_t n = 0;
            if ((st = expect(p, '['))) return st;
            if (!eat(p, ']')) {
                do {
                    skip_ws(p);
                    size_t iat = p->i;
                    if (n == 16) return perr(p, iat, LOOM_ERR_FORMAT, "more than 16 ints");
                    if ((st = need_word(p, w, sizeof w, "an integer")) ||
                        (st = parse_int(p, iat, w, &ints_buf[k][n++])))
                        return st;
                } while (eat(p, ','));
                if ((st = expect(p, ']'))) return st;
            }
            attrs[k] = loom_ir_attr_ints(id, ints_buf[k], n);
            break;
        }
        case LOOM_IR_ATTR_KIND_STRING:
            if ((st = quoted(p, str_buf[k], 256))) return st;
            attrs[k] = loom_ir_attr_string(id, str_buf[k]);
            break;
        default:
            return perr(p, at, LOOM_ERR_FORMAT, "attribute '%s' has no text form", name);
        }
        (*n_attrs)++;
    } while (eat(p, ','));
    return expect(p, '}');
}

/* ---- statements ---- */

static loom_status stmt_symbol(P *p) {
    char name[64], w[32];
    skip_ws(p);
    size_t at = p->i;
    loom_status st = need_word(p, name, sizeof name, "a symbol name");
    if (st || (st = need_word(p, w, sizeof w, "max=N"))) return st;
    if (strcmp(w, "max")) return perr(p, p->i - strlen(w), LOOM_ERR_FORMAT, "expected max=N");
    if ((st = expect(p, '='))) return st;
    skip_ws(p);
    size_t vat = p->i;
    int64_t max;
    if ((st = need_word(p, w, sizeof w, "an integer")) || (st = parse_int(p, vat, w, &max)))
        return st;
    loom_error e = {0};
    if (loom_ir_add_symbol(p->g, name, max, NULL, &e))
        return perr(p, at, e.status, "%s", e.msg);
    return LOOM_OK;
}

static loom_status stmt_meta(P *p) {
    char key[256], w[64];
    skip_ws(p);
    size_t at = p->i;
    loom_status st = need_word(p, key, sizeof key, "a metadata key");
    if (st || (st = expect(p, '='))) return st;
    skip_ws(p);
    size_t vat = p->i;
    loom_error e = {0};
    if (p->i < p->n && p->s[p->i] == '"') {
        /* Any length: the decoded string is never longer than the rest of the line. */
        const char *nl = memchr(p->s + p->i, '\n', p->n - p->i);
        size_t cap = (nl ? (size_t)(nl - (p->s + p->i)) : p->n - p->i) + 1;
        char *sv = malloc(cap);
        if (!sv) return perr(p, vat, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
        if (!(st = quoted(p, sv, cap))) st = loom_ir_meta_set_string(p->g, key, sv, &e);
        free(sv);
        if (st && !e.status) return st; /* quoted() already wrote err */
    } else {
        if ((st = need_word(p, w, sizeof w, "a number or a \"string\""))) return st;
        if (looks_float(w)) {
            double d;
            if ((st = parse_double(p, vat, w, &d))) return st;
            st = loom_ir_meta_set_float(p->g, key, d, &e);
        } else {
            int64_t i;
            if ((st = parse_int(p, vat, w, &i))) return st;
            st = loom_ir_meta_set_int(p->g, key, i, &e);
        }
    }
    if (st) return perr(p, at, st, "%s", e.msg);
    return LOOM_OK;
}

/* input %name : type | weight @name : type [offset=N] [size=N] | state @name : type */
static loom_status stmt_decl(P *p, loom_ir_value_kind kind) {
    char name[512], w[32];
    char sigil = kind == LOOM_IR_VALUE_INPUT ? '%' : '@';
    skip_ws(p);
    size_t at = p->i;
    if (!eat(p, sigil)) return perr(p, at, LOOM_ERR_FORMAT, "expected '%c' and a name", sigil);
    loom_status st = name_after_sigil(p, name, sizeof name, "a name");
    if (st || (st = expect(p, ':'))) return st;
    loom_ir_type t;
    if ((st = type(p, &t))) return st;
    int64_t offset = 0, size = 0;
    while (kind == LOOM_IR_VALUE_WEIGHT && !(skip_ws(p), at_eol(p))) {
        size_t kat = p->i;
        if ((st = need_word(p, w, sizeof w, "offset=N or size=N"))) return st;
        bool is_off = !strcmp(w, "offset");
        if (!is_off && strcmp(w, "size"))
            return perr(p, kat, LOOM_ERR_FORMAT, "expected offset=N or size=N, got '%s'", w);
        if ((st = expect(p, '='))) return st;
        skip_ws(p);
        size_t vat = p->i;
        int64_t v;
        if ((st = need_word(p, w, sizeof w, "an integer")) || (st = parse_int(p, vat, w, &v)))
            return st;
        if (v < 0) return perr(p, vat, LOOM_ERR_FORMAT, "must be >= 0");
        *(is_off ? &offset : &size) = v;
    }
    loom_error e = {0};
    st = kind == LOOM_IR_VALUE_INPUT    ? loom_ir_add_input(p->g, name, &t, NULL, &e)
         : kind == LOOM_IR_VALUE_WEIGHT ? loom_ir_add_weight(p->g, name, &t, (uint64_t)offset,
                                                             (uint64_t)size, NULL, &e)
                                        : loom_ir_add_state(p->g, name, &t, NULL, &e);
    if (st) return perr(p, at, st, "%s", e.msg);
    return LOOM_OK;
}

static loom_status stmt_output(P *p) {
    char name[256];
    skip_ws(p);
    size_t at = p->i;
    loom_status st = need_word(p, name, sizeof name, "an output name");
    loom_ir_value_id v;
    if (st || (st = expect(p, '=')) || (st = value_ref(p, &v))) return st;
    loom_error e = {0};
    if (loom_ir_add_output(p->g, name, v, &e)) return perr(p, at, e.status, "%s", e.msg);
    return LOOM_OK;
}

/* %a[, %b...] = op(operands) [{attrs}] [: types] */
static loom_status stmt_node(P *p) {
    char names[LOOM_IR_MAX_OUTPUTS][128], opname[64];
    size_t name_at[LOOM_IR_MAX_OUTPUTS];
    uint32_t n_names = 0;
    loom_status st;
    do {
        skip_ws(p);
        if (n_names == LOOM_IR_MAX_OUTPUTS)
            return perr(p, p->i, LOOM_ERR_FORMAT, "more than %d results", LOOM_IR_MAX_OUTPUTS);
        name_at[n_names] = p->i;
        if (!eat(p, '%')) return perr(p, p->i, LOOM_ERR_FORMAT, "expected a statement");
        if ((st = name_after_sigil(p, names[n_names], sizeof names[0], "a result name")))
            return st;
        for (uint32_t k = 0; k < p->n_res; k++)
            if (!strcmp(p->res[k].name, names[n_names]))
                return perr(p, name_at[n_names], LOOM_ERR_FORMAT, "%%%s is defined twice",
                            names[n_names]);
        const loom_ir_value *clash =
            loom_ir_value_get(p->g, loom_ir_find_value(p->g, names[n_names]));
        if (clash && clash->kind == LOOM_IR_VALUE_INPUT)
            return perr(p, name_at[n_names], LOOM_ERR_FORMAT, "%%%s is already an input",
                        names[n_names]);
        n_names++;
    } while (eat(p, ','));
    if ((st = expect(p, '='))) return st;
    skip_ws(p);
    size_t op_at = p->i;
    if ((st = need_word(p, opname, sizeof opname, "an op name"))) return st;
    loom_ir_op op;
    if (!loom_ir_op_from_name(opname, &op))
        return perr(p, op_at, LOOM_ERR_FORMAT, "unknown op '%s'", opname);
    if ((st = expect(p, '('))) return st;
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS];
    uint32_t n_in = 0;
    if (!eat(p, ')')) {
        do {
            if (n_in == LOOM_IR_MAX_INPUTS)
                return perr(p, p->i, LOOM_ERR_FORMAT, "more than %d operands",
                            LOOM_IR_MAX_INPUTS);
            if ((st = value_ref(p, &in[n_in++]))) return st;
        } while (eat(p, ','));
        if ((st = expect(p, ')'))) return st;
    }
    loom_ir_attr attrs[LOOM_IR_MAX_ATTRS];
    uint32_t n_attrs;
    int64_t ints_buf[LOOM_IR_MAX_ATTRS][16];
    char str_buf[LOOM_IR_MAX_ATTRS][256];
    if ((st = attr_block(p, attrs, &n_attrs, ints_buf, str_buf))) return st;
    loom_ir_type want[LOOM_IR_MAX_OUTPUTS];
    size_t type_at[LOOM_IR_MAX_OUTPUTS];
    uint32_t n_types = 0;
    if (eat(p, ':')) {
        do {
            skip_ws(p);
            if (n_types == LOOM_IR_MAX_OUTPUTS)
                return perr(p, p->i, LOOM_ERR_FORMAT, "more than %d types", LOOM_IR_MAX_OUTPUTS);
            type_at[n_types] = p->i;
            if ((st = type(p, &want[n_types++]))) return st;
        } while (eat(p, ','));
    }
    if ((st = end_of_line(p))) return st;

    loom_error e = {0};
    loom_ir_type got[LOOM_IR_MAX_OUTPUTS];
    uint32_t n_out;
    if (loom_ir_infer(p->g, op, in, n_in, attrs, n_attrs, got, &n_out, &e))
        return perr(p, op_at, e.status, "%s", e.msg);
    if (n_out != n_names)
        return perr(p, name_at[0], LOOM_ERR_FORMAT, "%s gives %u result%s, %u named", opname,
                    n_out, n_out == 1 ? "" : "s", n_names);
    if (n_types && n_types != n_out)
        return perr(p, type_at[0], LOOM_ERR_FORMAT, "%u types for %u results", n_types, n_out);
    for (uint32_t o = 0; o < n_types; o++)
        if (!loom_ir_type_equal(&want[o], &got[o])) {
            char a[96], b[96];
            return perr(p, type_at[o], LOOM_ERR_TYPE, "result %u is declared %s, %s gives %s", o,
                        loom_ir_type_format(p->g, &want[o], a, sizeof a), opname,
                        loom_ir_type_format(p->g, &got[o], b, sizeof b));
        }
    loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS];
    if (loom_ir_build(p->g, op, in, n_in, attrs, n_attrs, out, NULL, &e))
        return perr(p, op_at, e.status, "%s", e.msg);
    if (p->n_res + n_names > p->cap_res) {
        uint32_t cap = p->cap_res ? p->cap_res * 2 : 64;
        named *r = realloc(p->res, cap * sizeof *r);
        if (!r) return perr(p, op_at, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
        p->res = r;
        p->cap_res = cap;
    }
    for (uint32_t o = 0; o < n_names; o++) {
        char *nm = strdup(names[o]);
        if (!nm) return perr(p, op_at, LOOM_ERR_OUT_OF_MEMORY, "out of memory");
        p->res[p->n_res++] = (named){nm, out[o]};
    }
    return LOOM_OK;
}

static loom_status statement(P *p) {
    skip_ws(p);
    if (at_eol(p)) return LOOM_OK;
    if (p->s[p->i] == '%') return stmt_node(p);
    char kw[32];
    size_t at = p->i;
    word(p, kw, sizeof kw);
    loom_status st;
    if (!strcmp(kw, "symbol")) st = stmt_symbol(p);
    else if (!strcmp(kw, "meta")) st = stmt_meta(p);
    else if (!strcmp(kw, "input")) st = stmt_decl(p, LOOM_IR_VALUE_INPUT);
    else if (!strcmp(kw, "weight")) st = stmt_decl(p, LOOM_IR_VALUE_WEIGHT);
    else if (!strcmp(kw, "state")) st = stmt_decl(p, LOOM_IR_VALUE_STATE);
    else if (!strcmp(kw, "output")) st = stmt_output(p);
    else return perr(p, at, LOOM_ERR_FORMAT, "expected symbol, meta, input, weight, state, "
                     "output or a node line (%%x = op(...))");
    return st ? st : end_of_line(p);
}

loom_status loom_ir_parse(const char *text, size_t len, loom_ir_graph **out, loom_error *err) {
    *out = NULL;
    P p = {text, len, 0, 0, 1, loom_ir_graph_create(), err, NULL, 0, 0};
    if (!p.g) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "parse: out of memory");
    loom_status st = LOOM_OK;
    while (p.i < p.n && !st) {
        st = statement(&p);
        /* Skip the rest of the line (a comment) and the newline. */
        while (!st && p.i < p.n && p.s[p.i] != '\n') p.i++;
        if (p.i < p.n) p.i++;
        p.line++;
        p.line_start = p.i;
    }
    if (!st && (st = loom_ir_verify(p.g, err))) loom_error_prefix(err, "parse: ");
    for (uint32_t k = 0; k < p.n_res; k++) free(p.res[k].name);
    free(p.res);
    if (st) {
        loom_ir_graph_destroy(p.g);
        return st;
    }
    *out = p.g;
    return LOOM_OK;
}

loom_status loom_ir_parse_file(const char *path, loom_ir_graph **out, loom_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return loom_error_set(err, LOOM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return loom_error_set(err, LOOM_ERR_IO, "%s: read error", path);
    }
    loom_status st = loom_ir_parse(buf, len, out, err);
    free(buf);
    if (st) loom_error_prefix(err, "%s: ", path);
    return st;
}
