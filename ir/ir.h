/* ir.h: loom's graph IR: typed SSA values, nodes of the op table (ir/ops.def), builder, rewrite
 * API, verifier, text form and Graphviz view.
 *
 * A graph (opaque loom_ir_graph) is one decoder step. It holds
 * - symbols: named dims bound at run time (`T`, the tokens of this step) with a declared maximum
 *   so memory can be planned;
 * - values, each a loom_ir_value_id (dense uint32 index) with a type (dtype + up to 4 dims) and a
 *   kind: graph input (token ids, positions), weight (a reference to a GGUF tensor: name, ggml
 *   type, shape, byte offset and size; never data), state (persistent across steps: the KV
 *   cache), or the result of a node;
 * - nodes (small fixed structs in the graph's arena) in program order, a valid schedule: every
 *   operand is defined above its use;
 * - named outputs (`logits`) and a metadata list of (key, int/float/string) for hyperparameters
 *   and the source GGUF's identity.
 *
 * Types. Shapes are row-major with the OUTERMOST dim first: `f32[T,4096]` is T rows of 4096
 * contiguous values; a weight matrix W[M,K] has M rows of K values, i.e. GGUF's ne = {K, M}
 * reversed. A dim is an int64: >= 1 a constant, < 0 a symbol (LOOM_IR_DIM_SYM(i) = -1 - i, i the
 * symbol's index). Two dims are equal when their encodings are equal. Activations are f32 (i32
 * for token ids, positions, argmax); weights may be any dtype below, computing ops need a
 * `computable` one (kernels/quant/quant.h); state (KV cache) is f32, f16 or bf16.
 *
 * Building: every builder infers the result type at once and refuses a mismatch with
 * LOOM_ERR_TYPE and a message naming the op and the operands, so a malformed graph cannot be
 * built. Def-use lists are kept current by every mutating call. Ids are stable: an erased node
 * or value leaves a hole (its id is never reused) and pointers returned by loom_ir_node_get /
 * loom_ir_value_get stay valid until the graph is destroyed (the arena never moves them).
 *
 * Text form (print/parse, the syntax pass tests are written in):
 *
 *   symbol T max=512
 *   meta loom.arch = "llama"
 *   input %tokens : i32[T]
 *   input %positions : i32[T]
 *   weight @token_embd.weight : q4_k[32000,4096] offset=1024 size=73728000
 *   weight @output_norm.weight : f32[4096]          # offset=0 and the computed size if omitted
 *   state @kv.0.k : f16[2048,1024]
 *   %0 = get_rows(@token_embd.weight, %tokens) : f32[T,4096]
 *   %1 = rms_norm(%0) {eps=1e-05} : f32[T,4096]
 *   %2 = mul(%1, @output_norm.weight) : f32[T,4096]
 *   %3, %4 = matmul_pair(%2, @a.weight, @b.weight) {swiglu=0} : f32[T,64], f32[T,64]
 *   output logits = %2
 *
 * `#` starts a comment. Lines may come in any order as long as names are declared before use.
 * Result names in parsed text may be any `%name` (digits or identifiers); they only serve to
 * refer to the value. The printer numbers node results %0, %1, ... in program order, so the
 * printed text of a graph does not depend on its internal ids (pass tests can compare text).
 * The `: type` after a node is optional when parsing; when present it must equal the inferred
 * type. Attributes are `{name=value, ...}`: ints, floats (an int literal is fine), enum names
 * (mode=neox), dtypes (dtype=f16), dim lists (shape=[T,32,128]), int lists ([1,2]) and "strings".
 * Optional attributes (ops.def) may be omitted and are filled with their default.
 *
 * Conventions of lowering (documented here so every module agrees):
 * - inputs `tokens` i32[T] and `positions` i32[T] (absolute positions pos..pos+T-1);
 * - output `logits` f32[T,n_vocab];
 * - metadata keys for the source file: `source.file` (string), `source.size` (int),
 *   `source.checksum` (string); passes applied: `passes` (string, comma-separated).
 *
 * Ownership: the graph owns every string, list and node; pointers into it live as long as it.
 * Thread safety: none; a graph is used by one thread at a time (const functions may run
 * concurrently with each other).
 */
#ifndef LOOM_IR_H
#define LOOM_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/quant/quant.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- ids, dtypes, dims, types */

typedef uint32_t loom_ir_value_id;
typedef uint32_t loom_ir_node_id;
#define LOOM_IR_NO_VALUE ((loom_ir_value_id)UINT32_MAX)
#define LOOM_IR_NO_NODE ((loom_ir_node_id)UINT32_MAX)

enum {
    LOOM_IR_MAX_DIMS = 4,
    LOOM_IR_MAX_INPUTS = 8,  /* operands of one node */
    LOOM_IR_MAX_OUTPUTS = 3, /* results of one node */
    LOOM_IR_MAX_ATTRS = 10,  /* attributes of one node (rope_kv_attention has 9) */
    LOOM_IR_MAX_SYMBOLS = 8,
};

/* A dtype is a ggml type id (loom_ggml_type), so weights carry their GGUF type unchanged and the
 * executor hands it straight to the kernels. Only the ids named here are IR dtypes; their text
 * names are the lower-case ggml names ("f32", "q4_k"). */
typedef enum loom_ir_dtype {
    LOOM_IR_F32 = LOOM_GGML_F32,
    LOOM_IR_F16 = LOOM_GGML_F16,
    LOOM_IR_BF16 = LOOM_GGML_BF16,
    LOOM_IR_I32 = LOOM_GGML_I32,
    LOOM_IR_Q4_0 = LOOM_GGML_Q4_0,
    LOOM_IR_Q4_1 = LOOM_GGML_Q4_1,
    LOOM_IR_Q5_0 = LOOM_GGML_Q5_0,
    LOOM_IR_Q5_1 = LOOM_GGML_Q5_1,
    LOOM_IR_Q8_0 = LOOM_GGML_Q8_0,
    LOOM_IR_Q2_K = LOOM_GGML_Q2_K,
    LOOM_IR_Q3_K = LOOM_GGML_Q3_K,
    LOOM_IR_Q4_K = LOOM_GGML_Q4_K,
    LOOM_IR_Q5_K = LOOM_GGML_Q5_K,
    LOOM_IR_Q6_K = LOOM_GGML_Q6_K,
} loom_ir_dtype;

/* "f32", "q4_k", ...; NULL when dt is not an IR dtype. */
const char *loom_ir_dtype_name(loom_ir_dtype dt);
/* Parses a dtype name (case-insensitive). False when unknown. */
bool loom_ir_dtype_from_name(const char *name, loom_ir_dtype *out);
/* True when kernels can compute with it (matmul weight, get_rows table): f32 f16 bf16 q8_0 q4_k
 * q5_k q6_k, per the quant table. */
bool loom_ir_dtype_computable(loom_ir_dtype dt);

#define LOOM_IR_DIM_SYM(i) ((int64_t)-1 - (int64_t)(i))
static inline bool loom_ir_dim_is_sym(int64_t d) { return d < 0; }
static inline uint32_t loom_ir_dim_sym_index(int64_t d) { return (uint32_t)(-1 - d); }

typedef struct loom_ir_type {
    loom_ir_dtype dtype;
    uint32_t rank;                   /* 0..LOOM_IR_MAX_DIMS */
    int64_t dims[LOOM_IR_MAX_DIMS];  /* outermost first; unused entries are 0 */
} loom_ir_type;

/* Convenience constructor: rank dims from the argument list (unused entries zeroed). */
loom_ir_type loom_ir_type_make(loom_ir_dtype dt, uint32_t rank, const int64_t *dims);
bool loom_ir_type_equal(const loom_ir_type *a, const loom_ir_type *b);

/* ---------------------------------------------------------------- op table */

/* Op flags (ops.def). */
enum {
    LOOM_IR_OPF_ELEMENTWISE = 1u << 0,  /* out[i] depends on in[i] only (after broadcast) */
    LOOM_IR_OPF_INPLACE = 1u << 1,      /* out 0 may share operand 0's buffer if it dies here */
    LOOM_IR_OPF_FUSED = 1u << 2,        /* made by a fusion pass; drawn distinctly */
    LOOM_IR_OPF_VIEW = 1u << 3,         /* out 0 IS operand 0's buffer with other dims */
    LOOM_IR_OPF_WRITES_STATE = 1u << 4, /* out 0 IS operand 0's (state) buffer after a write;
                                           has an effect: never dead */
    LOOM_IR_OPF_WRITES_STATE2 = 1u << 5, /* with WRITES_STATE: out 1 IS operand 1's (state)
                                            buffer after a write too (rope_kv_write,
                                            rope_kv_attention) */
};

typedef enum loom_ir_attr_kind {
    LOOM_IR_ATTR_KIND_NONE = 0,
    LOOM_IR_ATTR_KIND_INT,    /* u.i */
    LOOM_IR_ATTR_KIND_FLOAT,  /* u.f */
    LOOM_IR_ATTR_KIND_INTS,   /* u.ints[count] */
    LOOM_IR_ATTR_KIND_SHAPE,  /* u.ints[count]: dims (constants or symbols), count 1..4 */
    LOOM_IR_ATTR_KIND_STRING, /* u.s, NUL-terminated */
    LOOM_IR_ATTR_KIND_ENUM,   /* u.i: index into the attribute's names (mode: 0 norm, 1 neox) */
    LOOM_IR_ATTR_KIND_DTYPE,  /* u.i: a loom_ir_dtype */
} loom_ir_attr_kind;

/* Attribute ids: LOOM_IR_ATTR_EPS, LOOM_IR_ATTR_MODE, ... (ops.def). */
typedef enum loom_ir_attr_id {
#define LOOM_IR_ATTR_DEF(ID, name, KIND, optional, di, df, names, doc) LOOM_IR_ATTR_##ID,
#include "ir/ops.def"
    LOOM_IR_ATTR_ID_COUNT
} loom_ir_attr_id;
#define LOOM_IR_A(ID) (1u << LOOM_IR_ATTR_##ID)
_Static_assert(LOOM_IR_ATTR_ID_COUNT == 13, "attribute count changed: update ops.def users");
_Static_assert(LOOM_IR_ATTR_ID_COUNT <= 32, "attrs masks are 32-bit");

enum { LOOM_IR_ROPE_NORM = 0, LOOM_IR_ROPE_NEOX = 1 }; /* values of the `mode` attribute */

/* Op ids: LOOM_IR_OP_GET_ROWS, ..., LOOM_IR_OP_ROPE_KV_ATTENTION (ops.def order). */
typedef enum loom_ir_op {
#define LOOM_IR_OP_DEF(ID, name, min_in, max_in, max_out, flags, attrs, doc) LOOM_IR_OP_##ID,
#include "ir/ops.def"
    LOOM_IR_OP_COUNT
} loom_ir_op;
_Static_assert(LOOM_IR_OP_COUNT == 19, "op count changed: update ops.def users (printer, "
                                       "protobuf mapping, executor dispatch, CPU/CUDA kernels)");

typedef struct loom_ir_op_info {
    const char *name;   /* text name, "matmul" */
    uint8_t min_in, max_in, max_out;
    uint32_t flags;     /* LOOM_IR_OPF_* */
    uint32_t attrs;     /* mask of LOOM_IR_A(ID) */
    const char *doc;    /* one line */
} loom_ir_op_info;

typedef struct loom_ir_attr_info {
    const char *name;        /* "eps" */
    loom_ir_attr_kind kind;
    bool optional;           /* may be omitted; then default_i / default_f is stored */
    bool elide_default;      /* optional, and left out of the text form and the protobuf
                                while it holds its default (ops.def `optional` 2) */
    int64_t default_i;
    float default_f;
    const char *enum_names;  /* ENUM kind: "norm,neox"; NULL otherwise */
    const char *doc;
} loom_ir_attr_info;

/* Table rows; NULL for an id out of range. */
const loom_ir_op_info *loom_ir_op_info_get(loom_ir_op op);
const loom_ir_attr_info *loom_ir_attr_info_get(loom_ir_attr_id id);
/* Name lookups; false when unknown. */
bool loom_ir_op_from_name(const char *name, loom_ir_op *out);
bool loom_ir_attr_from_name(const char *name, loom_ir_attr_id *out);
/* ENUM attribute values (ops.def lists their names comma-separated; a value is its index), the
 * one lookup the printer, parser, verifier and protobuf mapping share.
 * loom_ir_attr_enum_name: the name of value i of attribute id into buf (NUL-terminated); false
 * when id is not an ENUM, i is out of range or buf cannot hold the name.
 * loom_ir_attr_enum_value: the value whose name is name[0..name_len); false when unknown. */
bool loom_ir_attr_enum_name(loom_ir_attr_id id, int64_t i, char *buf, size_t len);
bool loom_ir_attr_enum_value(loom_ir_attr_id id, const char *name, size_t name_len, int64_t *out);

/* The operand index of the prenorm weight nw (ops.def conventions) of a node of op with n_in
 * operands: matmul 3 -> 2, matmul_pair 4 -> 3, matmul_triple 5 -> 4 and 8 -> 7 (after the
 * biases); LOOM_IR_NO_SLOT for every other op or count (no prenorm). */
#define LOOM_IR_NO_SLOT UINT32_MAX
uint32_t loom_ir_prenorm_slot(loom_ir_op op, uint32_t n_in);

/* How many leading results of op are its leading operands' state buffers after a write: result
 * i (i < the count) IS operand i's buffer. 0 for ops without WRITES_STATE, 1 for kv_write, 2
 * for rope_kv_write and rope_kv_attention. */
uint32_t loom_ir_op_state_results(loom_ir_op op);

/* ---------------------------------------------------------------- values, nodes, attributes */

typedef enum loom_ir_value_kind {
    LOOM_IR_VALUE_DEAD = 0, /* a hole left by an erased node's result */
    LOOM_IR_VALUE_INPUT,    /* fed by the caller each step (tokens, positions) */
    LOOM_IR_VALUE_WEIGHT,   /* a GGUF tensor, read-only */
    LOOM_IR_VALUE_STATE,    /* persistent across steps (KV cache), zero at session start */
    LOOM_IR_VALUE_NODE,     /* the result of a node */
} loom_ir_value_kind;

/* A value, read-only to users (change it only through this API). */
typedef struct loom_ir_value {
    loom_ir_value_kind kind;
    loom_ir_type type;
    const char *name;      /* INPUT / WEIGHT / STATE: its unique name (GGUF tensor name for a
                              weight); NODE: NULL */
    loom_ir_node_id def;   /* NODE: the defining node; LOOM_IR_NO_NODE otherwise */
    uint32_t def_slot;     /* NODE: which result of def (0..n_out-1) */
    uint64_t offset;       /* WEIGHT: absolute byte offset of the data in the GGUF file */
    uint64_t size;         /* WEIGHT: bytes of the data (= type's row bytes * rows) */
} loom_ir_value;

typedef struct loom_ir_attr {
    uint16_t id;           /* loom_ir_attr_id */
    uint16_t kind;         /* loom_ir_attr_kind (the id's kind) */
    uint32_t count;        /* INTS / SHAPE: number of entries */
    union {
        int64_t i;             /* INT, ENUM, DTYPE */
        float f;               /* FLOAT */
        const int64_t *ints;   /* INTS, SHAPE: owned by the graph */
        const char *s;         /* STRING: owned by the graph */
    } u;
} loom_ir_attr;

/* True when attribute a is left out of the text form and the protobuf: its table row says so
 * (elide_default) and it holds its default value (FLOAT compared bit for bit). */
bool loom_ir_attr_elided(const loom_ir_attr *a);

/* Attribute constructors for builders (strings and lists are copied by the builder). A NaN
 * float is stored as the canonical quiet NaN (as loom_ir_meta_set_float does): the text form
 * has no sign or payload for it, so every graph round-trips through print and parse. */
loom_ir_attr loom_ir_attr_int(loom_ir_attr_id id, int64_t v);   /* also ENUM and DTYPE ids */
loom_ir_attr loom_ir_attr_float(loom_ir_attr_id id, float v);
loom_ir_attr loom_ir_attr_ints(loom_ir_attr_id id, const int64_t *v, uint32_t n); /* INTS/SHAPE */
loom_ir_attr loom_ir_attr_string(loom_ir_attr_id id, const char *s);

/* A node, read-only to users. attrs hold exactly the op's attributes, sorted by id. */
typedef struct loom_ir_node {
    loom_ir_op op;
    uint8_t n_in, n_out, n_attrs;
    bool erased;                            /* a hole: skipped by iteration */
    loom_ir_value_id in[LOOM_IR_MAX_INPUTS];   /* operands, n_in used */
    loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS]; /* results (kind NODE), n_out used */
    loom_ir_attr attrs[LOOM_IR_MAX_ATTRS];
    loom_ir_node_id prev, next;             /* program order links (LOOM_IR_NO_NODE at ends) */
} loom_ir_node;

/* The attribute `id` of n, or NULL when n's op has none. */
const loom_ir_attr *loom_ir_node_attr(const loom_ir_node *n, loom_ir_attr_id id);
/* Value of an INT/ENUM/DTYPE (resp. FLOAT) attribute, or dflt when absent. */
int64_t loom_ir_node_attr_int(const loom_ir_node *n, loom_ir_attr_id id, int64_t dflt);
float loom_ir_node_attr_float(const loom_ir_node *n, loom_ir_attr_id id, float dflt);

/* ---------------------------------------------------------------- graph lifetime, declarations */

typedef struct loom_ir_graph loom_ir_graph;

/* A new empty graph, or NULL when out of memory. Free with loom_ir_graph_destroy. */
loom_ir_graph *loom_ir_graph_create(void);
void loom_ir_graph_destroy(loom_ir_graph *g); /* NULL is a no-op */

/* A deep copy with the same ids (holes included), so ids of g are valid in the clone.
 * NULL (and err set) when out of memory. */
loom_ir_graph *loom_ir_graph_clone(const loom_ir_graph *g, loom_error *err);

typedef struct loom_ir_symbol {
    const char *name; /* "T" */
    int64_t max;      /* largest value it may be bound to, >= 1 */
} loom_ir_symbol;

/* Declares symbol `name` (identifier of at most 63 characters, unique) with maximum max >= 1; *dim receives its dim
 * encoding (LOOM_IR_DIM_SYM(index)). Errors: invalid name/max, duplicate, too many symbols. */
loom_status loom_ir_add_symbol(loom_ir_graph *g, const char *name, int64_t max, int64_t *dim,
                               loom_error *err);
uint32_t loom_ir_symbol_count(const loom_ir_graph *g);
const loom_ir_symbol *loom_ir_symbol_at(const loom_ir_graph *g, uint32_t index); /* NULL if OOR */
/* The dim encoding of symbol `name`, or 0 when there is none. */
int64_t loom_ir_symbol_find(const loom_ir_graph *g, const char *name);

/* Declarations. Names are unique across inputs, weights and state (one namespace), 1..255
 * bytes; names outside [A-Za-z0-9_.-] are printed quoted (@"a b"); an input name is plain and
 * does not start with a digit.
 * Errors (status + message naming the declaration): duplicate or empty name, bad type (unknown
 * symbol, dim 0, rank > 4), and:
 * - input: dtype f32 or i32;
 * - weight: constant dims, size == the computed byte size (pass size 0 to have it computed),
 *   the last dim a multiple of the dtype's block size;
 * - state: constant dims, dtype f32/f16/bf16.
 * *out receives the new value's id. */
loom_status loom_ir_add_input(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                              loom_ir_value_id *out, loom_error *err);
loom_status loom_ir_add_weight(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                               uint64_t offset, uint64_t size, loom_ir_value_id *out,
                               loom_error *err);
loom_status loom_ir_add_state(loom_ir_graph *g, const char *name, const loom_ir_type *type,
                              loom_ir_value_id *out, loom_error *err);

/* Names a graph output (unique name, [A-Za-z0-9_.-]{1,255}) as value v (any live value). */
loom_status loom_ir_add_output(loom_ir_graph *g, const char *name, loom_ir_value_id v,
                               loom_error *err);

/* Declarations in declaration order. */
uint32_t loom_ir_input_count(const loom_ir_graph *g);
loom_ir_value_id loom_ir_input_at(const loom_ir_graph *g, uint32_t i);
uint32_t loom_ir_weight_count(const loom_ir_graph *g);
loom_ir_value_id loom_ir_weight_at(const loom_ir_graph *g, uint32_t i);
uint32_t loom_ir_state_count(const loom_ir_graph *g);
loom_ir_value_id loom_ir_state_at(const loom_ir_graph *g, uint32_t i);
uint32_t loom_ir_output_count(const loom_ir_graph *g);
/* Output i's value; *name (if not NULL) receives its name. LOOM_IR_NO_VALUE if i is OOR. */
loom_ir_value_id loom_ir_output_at(const loom_ir_graph *g, uint32_t i, const char **name);
/* The input, weight or state called name, or LOOM_IR_NO_VALUE. */
loom_ir_value_id loom_ir_find_value(const loom_ir_graph *g, const char *name);
/* The output called name's value, or LOOM_IR_NO_VALUE. */
loom_ir_value_id loom_ir_find_output(const loom_ir_graph *g, const char *name);

/* ---------------------------------------------------------------- metadata */

typedef enum loom_ir_meta_kind { LOOM_IR_META_INT, LOOM_IR_META_FLOAT, LOOM_IR_META_STRING }
    loom_ir_meta_kind;

typedef struct loom_ir_meta {
    const char *key;          /* [A-Za-z0-9_.-]{1,255} */
    loom_ir_meta_kind kind;
    int64_t i;                /* INT */
    double f;                 /* FLOAT */
    const char *s;            /* STRING, owned by the graph */
} loom_ir_meta;

/* Sets key (replacing an earlier value of any kind; a new key goes last; a NaN float becomes the
 * canonical quiet NaN, see loom_ir_attr_float). Errors: bad key, OOM. */
loom_status loom_ir_meta_set_int(loom_ir_graph *g, const char *key, int64_t v, loom_error *err);
loom_status loom_ir_meta_set_float(loom_ir_graph *g, const char *key, double v, loom_error *err);
loom_status loom_ir_meta_set_string(loom_ir_graph *g, const char *key, const char *v,
                                    loom_error *err);
uint32_t loom_ir_meta_count(const loom_ir_graph *g);
const loom_ir_meta *loom_ir_meta_at(const loom_ir_graph *g, uint32_t i);   /* NULL if OOR */
const loom_ir_meta *loom_ir_meta_get(const loom_ir_graph *g, const char *key); /* NULL if none */

/* ---------------------------------------------------------------- access */

/* Upper bounds of ids (ids < bound; some may be holes). */
uint32_t loom_ir_value_bound(const loom_ir_graph *g);
uint32_t loom_ir_node_bound(const loom_ir_graph *g);
/* Live nodes. */
uint32_t loom_ir_node_count(const loom_ir_graph *g);

/* The value / node with that id, NULL when out of range. A dead value has kind DEAD; an erased
 * node has erased = true. Pointers stay valid until the graph is destroyed. */
const loom_ir_value *loom_ir_value_get(const loom_ir_graph *g, loom_ir_value_id v);
const loom_ir_node *loom_ir_node_get(const loom_ir_graph *g, loom_ir_node_id n);

/* Program order: first/last live node (LOOM_IR_NO_NODE when empty); then node->next/prev.
 *   for (loom_ir_node_id id = loom_ir_first_node(g); id != LOOM_IR_NO_NODE;
 *        id = loom_ir_node_get(g, id)->next) ...                                         */
loom_ir_node_id loom_ir_first_node(const loom_ir_graph *g);
loom_ir_node_id loom_ir_last_node(const loom_ir_graph *g);

/* Uses of v by node operands (a node using v twice counts twice; graph outputs are not uses).
 * Order is unspecified but stable until the next mutation. */
typedef struct loom_ir_use {
    loom_ir_node_id node;
    uint32_t slot; /* operand index */
} loom_ir_use;
uint32_t loom_ir_value_use_count(const loom_ir_graph *g, loom_ir_value_id v);
loom_ir_use loom_ir_value_use_at(const loom_ir_graph *g, loom_ir_value_id v, uint32_t i);
/* True when v is named by a graph output. */
bool loom_ir_value_is_output(const loom_ir_graph *g, loom_ir_value_id v);

/* Elements of t with every symbol bound to sym_values[index] (NULL: to its maximum); -1 on
 * int64 overflow or an unbound symbol. */
int64_t loom_ir_type_numel(const loom_ir_graph *g, const loom_ir_type *t,
                           const int64_t *sym_values);
/* Bytes of a value of type t as stored (block-quantized types via the quant table); same
 * symbol binding; -1 on overflow or when the last dim is not a multiple of the block size. */
int64_t loom_ir_type_bytes(const loom_ir_graph *g, const loom_ir_type *t,
                           const int64_t *sym_values);
/* Formats t as in the text form ("f32[T,4096]") into buf (always NUL-terminated); returns buf. */
char *loom_ir_type_format(const loom_ir_graph *g, const loom_ir_type *t, char *buf, size_t len);

/* ---------------------------------------------------------------- building */

/* Type inference of the op table: the result types of op on operands `in` with attributes
 * `attrs` (any order; optional ones may be missing), without adding anything to g.
 * *n_out receives the number of results. LOOM_ERR_TYPE / LOOM_ERR_INVALID_ARGUMENT with a
 * message naming the op and operands on a mismatch, wrong arity, missing/unknown attribute. */
loom_status loom_ir_infer(const loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                          uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                          loom_ir_type out[LOOM_IR_MAX_OUTPUTS], uint32_t *n_out,
                          loom_error *err);

/* Adds a node: infers its types (as loom_ir_infer), creates its result values, links its uses
 * and inserts it at the insertion point (the end of the program unless set below). out (may be
 * NULL) receives the result ids, *n_node (may be NULL) the node id. Nothing is added on error. */
loom_status loom_ir_build(loom_ir_graph *g, loom_ir_op op, const loom_ir_value_id *in,
                          uint32_t n_in, const loom_ir_attr *attrs, uint32_t n_attrs,
                          loom_ir_value_id out[LOOM_IR_MAX_OUTPUTS], loom_ir_node_id *n_node,
                          loom_error *err);

/* New nodes go before node `before` (LOOM_IR_NO_NODE: at the end, the default). The point stays
 * until changed; erasing that node resets it to the end. */
void loom_ir_set_insert_point(loom_ir_graph *g, loom_ir_node_id before);

/* One-line builders for the primitive ops, for lowering code. Each returns the (first) result,
 * or LOOM_IR_NO_VALUE after writing err. Chaining: an operand equal to LOOM_IR_NO_VALUE makes
 * them return LOOM_IR_NO_VALUE at once, leaving an earlier error in err as it is (err->status !=
 * LOOM_OK) or setting LOOM_ERR_INVALID_ARGUMENT; so a block of calls can be checked once. */
loom_ir_value_id loom_ir_get_rows(loom_ir_graph *g, loom_ir_value_id table, loom_ir_value_id ids,
                                  loom_error *err);
loom_ir_value_id loom_ir_rms_norm(loom_ir_graph *g, loom_ir_value_id x, float eps,
                                  loom_error *err);
loom_ir_value_id loom_ir_mul(loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b,
                             loom_error *err);
loom_ir_value_id loom_ir_add(loom_ir_graph *g, loom_ir_value_id a, loom_ir_value_id b,
                             loom_error *err);
loom_ir_value_id loom_ir_matmul(loom_ir_graph *g, loom_ir_value_id x, loom_ir_value_id w,
                                loom_error *err);
loom_ir_value_id loom_ir_reshape(loom_ir_graph *g, loom_ir_value_id x, uint32_t rank,
                                 const int64_t *dims, loom_error *err);
loom_ir_value_id loom_ir_rope(loom_ir_graph *g, loom_ir_value_id x, loom_ir_value_id pos,
                              int mode, int64_t n_rot, float freq_base, float freq_scale,
                              loom_error *err);
loom_ir_value_id loom_ir_kv_write(loom_ir_graph *g, loom_ir_value_id cache, loom_ir_value_id x,
                                  loom_ir_value_id pos, loom_error *err);
loom_ir_value_id loom_ir_attention(loom_ir_graph *g, loom_ir_value_id q, loom_ir_value_id k_cache,
                                   loom_ir_value_id v_cache, loom_ir_value_id pos, int64_t n_head,
                                   int64_t n_kv_head, int64_t head_dim, float scale,
                                   loom_error *err);
loom_ir_value_id loom_ir_silu(loom_ir_graph *g, loom_ir_value_id x, loom_error *err);
loom_ir_value_id loom_ir_softmax(loom_ir_graph *g, loom_ir_value_id x, loom_error *err);
loom_ir_value_id loom_ir_argmax(loom_ir_graph *g, loom_ir_value_id x, loom_error *err);
loom_ir_value_id loom_ir_convert(loom_ir_graph *g, loom_ir_value_id x, loom_ir_dtype dt,
                                 loom_error *err);

/* ---------------------------------------------------------------- rewriting */

/* Makes every operand use and graph output of `from` refer to `to` instead, except the uses by
 * the node that defines `to` (so `y = f(x); replace_all_uses(x, y)` puts f between x and its
 * users instead of making a cycle). The types must be equal (LOOM_ERR_TYPE otherwise, nothing
 * changed). The caller keeps the schedule valid (build `to` above the first use, or call
 * loom_ir_graph_sort afterwards). */
loom_status loom_ir_replace_all_uses(loom_ir_graph *g, loom_ir_value_id from, loom_ir_value_id to,
                                     loom_error *err);

/* Changes operand `slot` of node n to v, which must have the old operand's type. */
loom_status loom_ir_node_set_input(loom_ir_graph *g, loom_ir_node_id n, uint32_t slot,
                                   loom_ir_value_id v, loom_error *err);

/* Erases node n: refused (LOOM_ERR_INVALID_ARGUMENT, naming the user) while one of its results
 * still has a use or is a graph output. Its results become DEAD values; its operands lose the
 * uses. */
loom_status loom_ir_node_erase(loom_ir_graph *g, loom_ir_node_id n, loom_error *err);

/* Reorders the program into a topological order that keeps the current order where it is
 * already valid (stable). LOOM_ERR_VERIFY naming a node on the cycle when there is one. */
loom_status loom_ir_graph_sort(loom_ir_graph *g, loom_error *err);

/* Writes the live nodes in a topological order (stable as above) into order[] (room for
 * loom_ir_node_count(g) ids); *n receives the count. LOOM_ERR_VERIFY on a cycle. */
loom_status loom_ir_topo_order(const loom_ir_graph *g, loom_ir_node_id *order, uint32_t *n,
                               loom_error *err);

/* ---------------------------------------------------------------- checking and comparing */

/* Checks every IR rule and returns the first problem (LOOM_ERR_VERIFY, message
 * "verify: node %N = op (#id): reason"): each value defined once, by its recorded node; no use
 * above its definition in program order; no cycles; every operand live and its type matching
 * the op's signature (inference re-run and compared with the stored result types); attributes
 * complete and of the right kind; referenced weights/state declared with a consistent size;
 * every output defined; a state version written by at most one state-writing op (kv_write,
 * rope_kv_write, rope_kv_attention); use lists consistent. */
loom_status loom_ir_verify(const loom_ir_graph *g, loom_error *err);

/* Structural equality: same symbols, metadata (as a key set), declarations (in order, with
 * names, types, offsets, sizes), outputs, and the same nodes in the same program order with the
 * same ops, attributes and operands up to value numbering. Ids and holes do not matter. When not
 * equal and diff is not NULL, diff->msg says where they first differ (status LOOM_ERR_VERIFY). */
bool loom_ir_graph_equal(const loom_ir_graph *a, const loom_ir_graph *b, loom_error *diff);

/* ---------------------------------------------------------------- text form and DOT */

/* Writes the text form (see the top of this file). IO errors: LOOM_ERR_IO. */
loom_status loom_ir_print(const loom_ir_graph *g, FILE *f, loom_error *err);
/* The text form in a malloc'd NUL-terminated string the caller frees; NULL + err on failure. */
char *loom_ir_print_string(const loom_ir_graph *g, loom_error *err);

/* Parses the text form (len bytes, no NUL needed). On success *out is a new graph the caller
 * owns; it was built through the builders, so it is well-typed, and it is verified. On failure
 * *out is NULL and err says "parse:LINE:COL: reason" (LOOM_ERR_FORMAT; LOOM_ERR_TYPE for a
 * type error, also with line:col). */
loom_status loom_ir_parse(const char *text, size_t len, loom_ir_graph **out, loom_error *err);
/* Reads and parses a file; the message starts with the path. */
loom_status loom_ir_parse_file(const char *path, loom_ir_graph **out, loom_error *err);

/* Writes a Graphviz digraph: one box per node labelled with op, attributes and result types;
 * fused ops filled and double-bordered; inputs, weights, state and outputs in their own shapes;
 * edges from definitions to uses. */
loom_status loom_ir_print_dot(const loom_ir_graph *g, FILE *f, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_IR_H */
