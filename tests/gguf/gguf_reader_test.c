/* gguf_reader_test.c: the GGUF reader on crafted files (table-driven: each malformed file must be
 * refused with the right status and a message naming the field and its byte offset), on valid
 * corner cases (v2, deep nesting, vocabulary-only files without padding, custom alignment), the
 * typed accessors, and every GGUF file in LOOM_TESTDATA.
 *
 * Set LOOM_GGUF_DUMP_CASES=DIR to also write every crafted file into DIR (fuzzer seeds).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/gguf.h"
#include "tests/common/testdata.h"
#include "tests/gguf/gguf_test_util.h"

enum { T_U8 = 0, T_U32 = 4, T_BOOL = 7, T_STR = 8, T_ARR = 9, T_U64 = 10, T_F64 = 12 };
enum { G_F32 = 0, G_Q4_K = 12 };

/* ---- crafted malformed files ---------------------------------------------------------------- */

static void kv_head(bb *b, const char *key, uint32_t type) {
    bb_header(b, 3, 0, 1);
    bb_str(b, key);
    bb_u32(b, type);
}

/* One tensor info (1 dim) and 64 zero bytes of data section after it. */
static void one_tensor(bb *b, const char *name, uint64_t ne0, uint32_t type, uint64_t offset) {
    bb_header(b, 3, 1, 0);
    bb_tensor(b, name, 1, &ne0, type, offset);
    bb_pad(b, 32);
    bb_zeros(b, 64);
}

static void f_empty(bb *b) { (void)b; }
static void f_bad_magic(bb *b) {
    bb_bytes(b, "GGUX", 4);
    bb_u32(b, 3);
    bb_u64(b, 0);
    bb_u64(b, 0);
}
static void f_short_magic(bb *b) { bb_bytes(b, "GG", 2); }
static void f_version1(bb *b) { bb_header(b, 1, 0, 0); }
static void f_version4(bb *b) { bb_header(b, 4, 0, 0); }
static void f_big_endian(bb *b) { bb_header(b, 0x03000000u, 0, 0); }
static void f_trunc_version(bb *b) { bb_bytes(b, "GGUF\3", 5); }
static void f_trunc_n_tensors(bb *b) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u32(b, 0);
}
static void f_trunc_n_kv(bb *b) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, 0);
    bb_u32(b, 1);
}
static void f_huge_n_kv(bb *b) { bb_header(b, 3, 0, (uint64_t)1 << 60); }
static void f_huge_n_tensors(bb *b) {
    bb_header(b, 3, (uint64_t)1 << 40, 0);
    bb_zeros(b, 64);
}
static void f_n_kv_too_many(bb *b) { /* 3 keys claimed, room for 2 at most */
    bb_header(b, 3, 0, 3);
    bb_zeros(b, 30);
}
static void f_key_len_huge(bb *b) {
    bb_header(b, 3, 0, 1);
    bb_u64(b, 1000);
    bb_bytes(b, "abcdefgh", 8);
}
static void f_key_nul(bb *b) {
    bb_header(b, 3, 0, 1);
    bb_u64(b, 3);
    bb_bytes(b, "a\0b", 3);
    bb_u32(b, T_U8);
    bb_u8(b, 1);
}
static void f_trunc_value_type(bb *b) {
    bb_header(b, 3, 0, 1);
    bb_str(b, "kkkkk"); /* long enough to pass the n_kv check */
    bb_zeros(b, 4);     /* cut inside the type */
    b->len -= 2;
}
static void f_unknown_value_type(bb *b) {
    kv_head(b, "k", 13);
    bb_u32(b, 0);
}
static void f_trunc_u32(bb *b) {
    kv_head(b, "k", T_U32);
    bb_u8(b, 1);
}
static void f_trunc_f64(bb *b) {
    kv_head(b, "k", T_F64);
    bb_u32(b, 0);
}
static void f_bool_2(bb *b) {
    kv_head(b, "k", T_BOOL);
    bb_u8(b, 2);
}
static void f_string_huge(bb *b) {
    kv_head(b, "k", T_STR);
    bb_u64(b, 100);
    bb_bytes(b, "ab", 2);
}
static void f_string_len_2_63(bb *b) {
    kv_head(b, "k", T_STR);
    bb_u64(b, (uint64_t)1 << 63);
    bb_bytes(b, "ab", 2);
}
static void f_array_len_huge(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_U32);
    bb_u64(b, (uint64_t)1 << 61);
    bb_zeros(b, 8);
}
static void f_array_trunc_data(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_U32);
    bb_u64(b, 3);
    bb_zeros(b, 8);
}
static void f_array_strings_count(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_STR);
    bb_u64(b, 5);
    bb_zeros(b, 16);
}
static void f_array_string_elem_huge(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_STR);
    bb_u64(b, 2);
    bb_str(b, "ab");
    bb_u64(b, 1000);
    bb_bytes(b, "xyz", 3);
}
static void f_array_elem_type(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, 77);
    bb_u64(b, 0);
}
static void f_array_nested_count(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_ARR);
    bb_u64(b, 1000);
    bb_zeros(b, 24);
}
static void f_bool_array(bb *b) {
    kv_head(b, "k", T_ARR);
    bb_u32(b, T_BOOL);
    bb_u64(b, 3);
    bb_bytes(b, "\1\5\0", 3);
}
/* levels arrays nested inside each other, the innermost holding one u8 */
static void nested(bb *b, int levels) {
    kv_head(b, "k", T_ARR);
    for (int i = 1; i < levels; i++) {
        bb_u32(b, T_ARR);
        bb_u64(b, 1);
    }
    bb_u32(b, T_U8);
    bb_u64(b, 1);
    bb_u8(b, 42);
}
static void f_nested_9(bb *b) { nested(b, 9); }
static void f_dup_key(bb *b) {
    bb_header(b, 3, 0, 2);
    bb_kv_u32(b, "a", 1);
    bb_kv_u32(b, "a", 2);
}
static void f_align_zero(bb *b) {
    bb_header(b, 3, 0, 1);
    bb_kv_u32(b, "general.alignment", 0);
}
static void f_align_48(bb *b) {
    bb_header(b, 3, 0, 1);
    bb_kv_u32(b, "general.alignment", 48);
}
static void f_align_u64(bb *b) {
    kv_head(b, "general.alignment", T_U64);
    bb_u64(b, 32);
}
static void f_align_string(bb *b) {
    kv_head(b, "general.alignment", T_STR);
    bb_str(b, "32");
}
static void f_tensor_name_huge(bb *b) {
    bb_header(b, 3, 1, 0);
    bb_u64(b, 50);
    bb_zeros(b, 30);
}
static void f_n_dims_0(bb *b) {
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 0, NULL, G_F32, 0);
    bb_zeros(b, 64);
}
static void f_n_dims_5(bb *b) {
    uint64_t ne[5] = {1, 1, 1, 1, 1};
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 5, ne, G_F32, 0);
    bb_zeros(b, 64);
}
static void f_ne_negative(bb *b) { one_tensor(b, "t", (uint64_t)1 << 63, G_F32, 0); }
static void f_elements_overflow(bb *b) {
    uint64_t ne[2] = {(uint64_t)1 << 32, (uint64_t)1 << 32};
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 2, ne, G_F32, 0);
    bb_zeros(b, 64);
}
static void f_row_bytes_overflow(bb *b) { one_tensor(b, "t", (uint64_t)1 << 62, G_F32, 0); }
static void f_bytes_overflow(bb *b) {
    uint64_t ne[2] = {(uint64_t)1 << 31, (uint64_t)1 << 31};
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 2, ne, G_F32, 0);
    bb_zeros(b, 64);
}
static void f_ggml_type_4(bb *b) { one_tensor(b, "t", 32, 4, 0); }
static void f_ggml_type_1000(bb *b) { one_tensor(b, "t", 32, 1000, 0); }
static void f_block_multiple(bb *b) { one_tensor(b, "t", 100, G_Q4_K, 0); }
static void f_misaligned(bb *b) { one_tensor(b, "t", 4, G_F32, 16); }
static void f_misaligned_custom(bb *b) {
    uint64_t ne = 4;
    bb_header(b, 3, 1, 1);
    bb_kv_u32(b, "general.alignment", 64);
    bb_tensor(b, "t", 1, &ne, G_F32, 32);
    bb_pad(b, 64);
    bb_zeros(b, 128);
}
static void f_past_end(bb *b) {
    uint64_t ne = 16; /* 64 bytes, 32 present */
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 1, &ne, G_F32, 0);
    bb_pad(b, 32);
    bb_zeros(b, 32);
}
static void f_offset_huge(bb *b) { one_tensor(b, "t", 4, G_F32, (uint64_t)-32); }
static void f_data_section_past_end(bb *b) {
    uint64_t ne = 0; /* infos end at 57, data would start at 64 */
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 1, &ne, G_F32, 0);
}
static void f_overlap(bb *b) {
    uint64_t ne = 16; /* 64 bytes each, at 0 and 32 */
    bb_header(b, 3, 2, 0);
    bb_tensor(b, "a", 1, &ne, G_F32, 0);
    bb_tensor(b, "b", 1, &ne, G_F32, 32);
    bb_pad(b, 32);
    bb_zeros(b, 128);
}
static void f_overlap_hidden(bb *b) {
    uint64_t big = 32, zero = 0, small = 8; /* a: [0,128), z: empty at 64, b: [96,128) */
    bb_header(b, 3, 3, 0);
    bb_tensor(b, "a", 1, &big, G_F32, 0);
    bb_tensor(b, "z", 1, &zero, G_F32, 64);
    bb_tensor(b, "b", 1, &small, G_F32, 96);
    bb_pad(b, 32);
    bb_zeros(b, 128);
}
static void f_dup_tensor(bb *b) {
    uint64_t ne = 4;
    bb_header(b, 3, 2, 0);
    bb_tensor(b, "t", 1, &ne, G_F32, 0);
    bb_tensor(b, "t", 1, &ne, G_F32, 32);
    bb_pad(b, 32);
    bb_zeros(b, 64);
}
static void f_trunc_tensor_type(bb *b) {
    uint64_t ne = 4;
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "tensor_name_long", 1, &ne, G_F32, 0);
    b->len -= 10; /* cut 2 bytes into the type */
}
static void f_trunc_tensor_offset(bb *b) {
    uint64_t ne = 4;
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "tensor_name_long", 1, &ne, G_F32, 0);
    b->len -= 4; /* cut inside the offset */
}
static void f_trunc_ne(bb *b) {
    uint64_t ne[4] = {4, 1, 1, 1};
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "tensor_name_long", 4, ne, G_F32, 0);
    b->len -= 14; /* ends inside ne[3] */
}

typedef struct {
    const char *name;
    void (*build)(bb *b);
    loom_status status;
    const char *field; /* both must appear in the message */
    const char *where;
} bad_case;

static const bad_case bad_cases[] = {
    {"empty", f_empty, LOOM_ERR_FORMAT, "magic", "at offset 0: truncated"},
    {"short_magic", f_short_magic, LOOM_ERR_FORMAT, "magic", "at offset 0: truncated"},
    {"bad_magic", f_bad_magic, LOOM_ERR_FORMAT, "magic at offset 0", "not \"GGUF\""},
    {"version1", f_version1, LOOM_ERR_UNSUPPORTED, "version 1", "at offset 4"},
    {"version4", f_version4, LOOM_ERR_UNSUPPORTED, "version 4", "at offset 4"},
    {"big_endian", f_big_endian, LOOM_ERR_UNSUPPORTED, "version 50331648 at offset 4", "big-endian"},
    {"trunc_version", f_trunc_version, LOOM_ERR_FORMAT, "version", "at offset 4: truncated"},
    {"trunc_n_tensors", f_trunc_n_tensors, LOOM_ERR_FORMAT, "n_tensors", "at offset 8: truncated"},
    {"trunc_n_kv", f_trunc_n_kv, LOOM_ERR_FORMAT, "n_kv", "at offset 16: truncated"},
    {"huge_n_kv", f_huge_n_kv, LOOM_ERR_FORMAT, "n_kv 1152921504606846976", "at offset 16"},
    {"huge_n_tensors", f_huge_n_tensors, LOOM_ERR_FORMAT, "n_tensors 1099511627776", "at offset 8"},
    {"n_kv_too_many", f_n_kv_too_many, LOOM_ERR_FORMAT, "n_kv 3", "at offset 16: too many"},
    {"key_len_huge", f_key_len_huge, LOOM_ERR_FORMAT, "key 0: key", "at offset 24: string length 1000"},
    {"key_nul", f_key_nul, LOOM_ERR_FORMAT, "key 0: key", "at offset 24: contains a NUL byte"},
    {"trunc_value_type", f_trunc_value_type, LOOM_ERR_FORMAT, "key 0 ('kkkkk'): value type",
     "at offset 37: truncated"},
    {"unknown_value_type", f_unknown_value_type, LOOM_ERR_FORMAT, "key 0 ('k'): value type",
     "at offset 33: unknown value type 13"},
    {"trunc_u32", f_trunc_u32, LOOM_ERR_FORMAT, "key 0 ('k'): value", "at offset 37: truncated"},
    {"trunc_f64", f_trunc_f64, LOOM_ERR_FORMAT, "key 0 ('k'): value", "at offset 37: truncated"},
    {"bool_2", f_bool_2, LOOM_ERR_FORMAT, "key 0 ('k'): bool value", "at offset 37"},
    {"string_huge", f_string_huge, LOOM_ERR_FORMAT, "key 0 ('k'): string value",
     "at offset 37: string length 100 exceeds the 2 bytes left"},
    {"string_len_2_63", f_string_len_2_63, LOOM_ERR_FORMAT, "string value",
     "at offset 37: string length 9223372036854775808"},
    {"array_len_huge", f_array_len_huge, LOOM_ERR_FORMAT, "key 0 ('k'): array length",
     "at offset 41"},
    {"array_trunc_data", f_array_trunc_data, LOOM_ERR_FORMAT, "array length at offset 41",
     "3 elements of u32"},
    {"array_strings_count", f_array_strings_count, LOOM_ERR_FORMAT, "array length",
     "at offset 41: 5 elements of string"},
    {"array_string_elem_huge", f_array_string_elem_huge, LOOM_ERR_FORMAT,
     "key 0 ('k'): array element 1: string value", "at offset 59: string length 1000"},
    {"array_elem_type", f_array_elem_type, LOOM_ERR_FORMAT, "array element type",
     "at offset 37: unknown value type 77"},
    {"array_nested_count", f_array_nested_count, LOOM_ERR_FORMAT, "array length",
     "at offset 41: 1000 elements of array"},
    {"bool_array", f_bool_array, LOOM_ERR_FORMAT, "bool array element 1", "at offset 50"},
    {"nested_9", f_nested_9, LOOM_ERR_FORMAT, "array element 0: array",
     "at offset 133: nested deeper than 8 levels"},
    {"dup_key", f_dup_key, LOOM_ERR_FORMAT, "key 1 ('a')", "at offset 41: duplicate of key 0"},
    {"align_zero", f_align_zero, LOOM_ERR_FORMAT, "'general.alignment') at offset 24",
     "value 0 is not a nonzero power of two"},
    {"align_48", f_align_48, LOOM_ERR_FORMAT, "'general.alignment') at offset 24",
     "value 48 is not a nonzero power of two"},
    {"align_u64", f_align_u64, LOOM_ERR_FORMAT, "'general.alignment') at offset 24",
     "type u64, must be u32"},
    {"align_string", f_align_string, LOOM_ERR_FORMAT, "'general.alignment') at offset 24",
     "type string, must be u32"},
    {"tensor_name_huge", f_tensor_name_huge, LOOM_ERR_FORMAT, "tensor info 0: tensor name",
     "at offset 24: string length 50"},
    {"n_dims_0", f_n_dims_0, LOOM_ERR_FORMAT, "tensor info 0 ('t'): n_dims 0",
     "at offset 33: must be 1..4"},
    {"n_dims_5", f_n_dims_5, LOOM_ERR_FORMAT, "tensor info 0 ('t'): n_dims 5",
     "at offset 33: must be 1..4"},
    {"ne_negative", f_ne_negative, LOOM_ERR_FORMAT, "ne[0] 9223372036854775808",
     "at offset 37: larger than INT64_MAX"},
    /* element count, row bytes and tensor bytes: loom_ggml_tensor_bytes's one -2 */
    {"elements_overflow", f_elements_overflow, LOOM_ERR_FORMAT,
     "tensor info 0 ('t'): ne [4294967296, 4294967296]",
     "at offset 37: the element count or the byte size (F32) overflows 64 bits"},
    {"row_bytes_overflow", f_row_bytes_overflow, LOOM_ERR_FORMAT, "ne [4611686018427387904]",
     "at offset 37: the element count or the byte size (F32) overflows 64 bits"},
    {"bytes_overflow", f_bytes_overflow, LOOM_ERR_FORMAT, "ne [2147483648, 2147483648]",
     "at offset 37: the element count or the byte size (F32) overflows 64 bits"},
    {"ggml_type_4", f_ggml_type_4, LOOM_ERR_FORMAT, "ggml type 4", "at offset 45: unknown type id"},
    {"ggml_type_1000", f_ggml_type_1000, LOOM_ERR_FORMAT, "ggml type 1000",
     "at offset 45: unknown type id"},
    {"block_multiple", f_block_multiple, LOOM_ERR_FORMAT, "ne[0] 100",
     "at offset 37: not a multiple of Q4_K's block size 256"},
    {"misaligned", f_misaligned, LOOM_ERR_FORMAT, "tensor info 0 ('t'): offset 16",
     "at offset 49: not a multiple of the alignment 32"},
    {"misaligned_custom", f_misaligned_custom, LOOM_ERR_FORMAT, "offset 32",
     "at offset 82: not a multiple of the alignment 64"},
    {"past_end", f_past_end, LOOM_ERR_FORMAT, "tensor 0 ('t'): data [offset 0 + 64 bytes]",
     "past end of file (data section starts at 64, file has 96 bytes)"},
    {"offset_huge", f_offset_huge, LOOM_ERR_FORMAT, "tensor 0 ('t'): data [offset "
     "18446744073709551584 + 16 bytes]", "past end of file"},
    {"data_section_past_end", f_data_section_past_end, LOOM_ERR_FORMAT, "data section",
     "at offset 64 (after padding to 32): past end of file (57 bytes)"},
    {"overlap", f_overlap, LOOM_ERR_FORMAT, "tensor 'a' (data offset 0, 64 bytes)",
     "overlaps tensor 'b' (data offset 32)"},
    {"overlap_hidden", f_overlap_hidden, LOOM_ERR_FORMAT, "tensor 'a' (data offset 0, 128 bytes)",
     "overlaps tensor 'b' (data offset 96)"},
    {"dup_tensor", f_dup_tensor, LOOM_ERR_FORMAT, "tensor info 1 ('t'): name",
     "at offset 57: duplicate of tensor 0"},
    {"trunc_tensor_type", f_trunc_tensor_type, LOOM_ERR_FORMAT,
     "tensor info 0 ('tensor_name_long'): ggml type", "at offset 60: truncated"},
    {"trunc_tensor_offset", f_trunc_tensor_offset, LOOM_ERR_FORMAT,
     "tensor info 0 ('tensor_name_long'): offset", "at offset 64: truncated"},
    {"trunc_ne", f_trunc_ne, LOOM_ERR_FORMAT, "tensor info 0 ('tensor_name_long'): ne[3]",
     "at offset 76: truncated"},
};

static void dump_case(const char *name, const bb *b) {
    const char *dir = getenv("LOOM_GGUF_DUMP_CASES");
    if (dir == NULL || dir[0] == '\0') return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return;
    if (b->len) fwrite(b->p, 1, b->len, f);
    fclose(f);
}

Test(gguf_reader, malformed_files_are_refused_with_field_and_offset) {
    size_t n = sizeof bad_cases / sizeof bad_cases[0];
    cr_assert_geq(n, 30);
    for (size_t i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        bb b = {0};
        c->build(&b);
        dump_case(c->name, &b);
        loom_gguf *g = (loom_gguf *)&b; /* must be reset to NULL */
        loom_error err = {0};
        loom_status s = loom_gguf_open_memory(b.p, b.len, &g, &err);
        cr_expect_eq(s, c->status, "%s: status %s, want %s (%s)", c->name, loom_status_name(s),
                     loom_status_name(c->status), err.msg);
        cr_expect_null(g, "%s: handle not NULL on failure", c->name);
        cr_expect(strncmp(err.msg, "gguf: ", 6) == 0, "%s: message '%s'", c->name, err.msg);
        cr_expect(strstr(err.msg, c->field) != NULL, "%s: '%s' lacks '%s'", c->name, err.msg,
                  c->field);
        cr_expect(strstr(err.msg, c->where) != NULL, "%s: '%s' lacks '%s'", c->name, err.msg,
                  c->where);
        loom_gguf_close(g);
        bb_free(&b);
    }
}

/* Every proper prefix of a valid file with keys of every kind and two tensors is refused (not
 * crashed on), with a message that mentions "truncated", "exceeds", "past end" or "too many". */
Test(gguf_reader, every_truncation_is_refused) {
    bb b = {0};
    uint64_t ne[2] = {8, 2};
    bb_header(&b, 3, 2, 4);
    bb_kv_u32(&b, "a.u32", 7);
    bb_str(&b, "a.str");
    bb_u32(&b, T_STR);
    bb_str(&b, "hello");
    bb_str(&b, "a.strs");
    bb_u32(&b, T_ARR);
    bb_u32(&b, T_STR);
    bb_u64(&b, 2);
    bb_str(&b, "x");
    bb_str(&b, "yz");
    bb_str(&b, "a.nested");
    bb_u32(&b, T_ARR);
    bb_u32(&b, T_ARR);
    bb_u64(&b, 1);
    bb_u32(&b, T_U8);
    bb_u64(&b, 2);
    bb_bytes(&b, "\1\2", 2);
    bb_tensor(&b, "w", 2, ne, G_F32, 0);
    bb_tensor(&b, "v", 1, ne, G_F32, 64);
    bb_pad(&b, 32);
    bb_zeros(&b, 96);
    loom_gguf *g = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_open_memory(b.p, b.len, &g, &err), LOOM_OK, "%s", err.msg);
    loom_gguf_close(g);
    for (size_t len = 0; len < b.len; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact size, so ASan sees any overread */
        memcpy(copy, b.p, len);
        g = NULL;
        loom_status s = loom_gguf_open_memory(copy, len, &g, &err);
        cr_expect_eq(s, LOOM_ERR_FORMAT, "prefix %zu: status %d", len, s);
        cr_expect(strstr(err.msg, "truncated") || strstr(err.msg, "exceeds") ||
                      strstr(err.msg, "past end") || strstr(err.msg, "too many") ||
                      strstr(err.msg, "left"),
                  "prefix %zu: '%s'", len, err.msg);
        loom_gguf_close(g);
        free(copy);
    }
    bb_free(&b);
}

/* ---- valid corner cases --------------------------------------------------------------------- */

static loom_gguf *open_ok(const bb *b) {
    loom_gguf *g = NULL;
    loom_error err = {0};
    loom_status s = loom_gguf_open_memory(b->p, b->len, &g, &err);
    cr_assert_eq(s, LOOM_OK, "open: %s", err.msg);
    cr_assert_not_null(g);
    return g;
}

Test(gguf_reader, header_only_file) {
    bb b = {0};
    bb_header(&b, 3, 0, 0);
    loom_gguf *g = open_ok(&b);
    cr_expect_eq(loom_gguf_version(g), 3);
    cr_expect_eq(loom_gguf_n_keys(g), 0);
    cr_expect_eq(loom_gguf_n_tensors(g), 0);
    cr_expect_eq(loom_gguf_alignment(g), 32);
    cr_expect_eq(loom_gguf_data_offset(g), 24);
    cr_expect_null(loom_gguf_find(g, "x"));
    cr_expect_null(loom_gguf_find_tensor(g, "x"));
    cr_expect_null(loom_gguf_key_name(g, 0));
    cr_expect_null(loom_gguf_tensor_at(g, 0));
    loom_gguf_close(g);
    bb_free(&b);
}

Test(gguf_reader, version2_file_with_tensor) {
    bb b = {0};
    uint64_t ne[2] = {2, 3};
    bb_header(&b, 2, 1, 1);
    bb_kv_u32(&b, "n", 9);
    bb_tensor(&b, "w", 2, ne, G_F32, 0);
    bb_pad(&b, 32);
    size_t data_at = b.len;
    for (int i = 0; i < 6; i++) {
        float f = (float)i * 0.5f;
        bb_bytes(&b, &f, 4);
    }
    loom_gguf *g = open_ok(&b);
    cr_expect_eq(loom_gguf_version(g), 2);
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "w");
    cr_assert_not_null(t);
    cr_expect_eq(t->n_dims, 2);
    cr_expect_eq(t->ne[0], 2);
    cr_expect_eq(t->ne[1], 3);
    cr_expect_eq(t->ne[2], 1);
    cr_expect_eq(t->ne[3], 1);
    cr_expect_eq(t->type, LOOM_GGML_F32);
    cr_expect_eq(t->nbytes, 24);
    cr_expect_eq(t->file_offset, data_at);
    cr_expect_eq(t->data, b.p + data_at);
    cr_expect_eq(((const float *)t->data)[5], 2.5f);
    cr_expect_eq(loom_gguf_tensor_at(g, 0), t);
    loom_gguf_close(g);
    bb_free(&b);
}

Test(gguf_reader, eight_levels_of_nesting_are_accepted) {
    bb b = {0};
    nested(&b, 8);
    loom_gguf *g = open_ok(&b);
    const loom_gguf_value *v = loom_gguf_find(g, "k");
    cr_assert_not_null(v);
    for (int level = 1; level < 8; level++) {
        cr_assert_eq(v->type, LOOM_GGUF_ARRAY);
        cr_assert_eq(v->arr.elem_type, LOOM_GGUF_ARRAY);
        cr_assert_eq(v->arr.n, 1);
        v = &v->arr.items[0];
    }
    cr_assert_eq(v->arr.elem_type, LOOM_GGUF_U8);
    cr_expect_eq(loom_gguf_array_u64(v, 0), 42);
    loom_gguf_close(g);
    bb_free(&b);
}

Test(gguf_reader, vocab_only_file_may_end_without_padding) {
    bb b = {0};
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens");
    bb_u32(&b, T_ARR);
    bb_u32(&b, T_STR);
    bb_u64(&b, 3);
    bb_str(&b, "a");
    bb_str(&b, "bc");
    bb_str(&b, "def");
    cr_assert_neq(b.len % 32, 0);
    loom_gguf *g = open_ok(&b);
    cr_expect_eq(loom_gguf_data_offset(g), b.len);
    const loom_gguf_value *arr = NULL;
    loom_error err = {0};
    cr_assert_eq(loom_gguf_get_array(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, &arr, &err),
                 LOOM_OK);
    cr_assert_eq(arr->arr.n, 3);
    cr_expect_str_eq(arr->arr.items[2].str.ptr, "def");
    cr_expect_eq(arr->arr.items[1].str.len, 2);
    loom_gguf_close(g);
    bb_free(&b);
}

Test(gguf_reader, custom_alignment_and_zero_size_tensors) {
    bb b = {0};
    uint64_t ne = 4, zero = 0;
    bb_header(&b, 3, 3, 1);
    bb_kv_u32(&b, "general.alignment", 64);
    bb_tensor(&b, "a", 1, &ne, G_F32, 0);
    bb_tensor(&b, "z", 1, &zero, G_F32, 0); /* empty tensors overlap nothing */
    bb_tensor(&b, "b", 1, &ne, G_F32, 64);
    bb_pad(&b, 64);
    size_t data_at = b.len;
    bb_zeros(&b, 80);
    loom_gguf *g = open_ok(&b);
    cr_expect_eq(loom_gguf_alignment(g), 64);
    cr_expect_eq(loom_gguf_data_offset(g), data_at);
    cr_expect_eq(loom_gguf_find_tensor(g, "b")->file_offset, data_at + 64);
    cr_expect_eq(loom_gguf_find_tensor(g, "z")->nbytes, 0);
    loom_gguf_close(g);
    bb_free(&b);
}

/* ---- typed accessors ----------------------------------------------------------------------- */

static loom_gguf *accessor_file(bb *b) {
    bb_header(b, 3, 0, 9);
    bb_kv_u32(b, "u32", 4000000000u);
    bb_str(b, "u8");
    bb_u32(b, T_U8);
    bb_u8(b, 200);
    bb_str(b, "i64neg");
    bb_u32(b, 11);
    bb_u64(b, (uint64_t)-5);
    bb_str(b, "f64");
    bb_u32(b, T_F64);
    double d = 0.25;
    bb_bytes(b, &d, 8);
    bb_str(b, "s");
    bb_u32(b, T_STR);
    bb_str(b, "text");
    bb_str(b, "b");
    bb_u32(b, T_BOOL);
    bb_u8(b, 1);
    bb_str(b, "i16s");
    bb_u32(b, T_ARR);
    bb_u32(b, 3);
    bb_u64(b, 2);
    bb_le(b, (uint16_t)-300, 2);
    bb_le(b, 300, 2);
    bb_str(b, "f32s");
    bb_u32(b, T_ARR);
    bb_u32(b, 6);
    bb_u64(b, 1);
    float f = -1.5f;
    bb_bytes(b, &f, 4);
    bb_str(b, "u64big");
    bb_u32(b, T_U64);
    bb_u64(b, (uint64_t)1 << 40);
    return open_ok(b);
}

Test(gguf_reader, typed_accessors_check_types) {
    bb b = {0};
    loom_gguf *g = accessor_file(&b);
    loom_error err = {0};
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    float f = 0;
    bool bv = false;
    const char *s = NULL;
    const loom_gguf_value *arr = NULL;

    cr_expect_eq(loom_gguf_get_u32(g, "u32", &u32, &err), LOOM_OK);
    cr_expect_eq(u32, 4000000000u);
    cr_expect_eq(loom_gguf_get_u32(g, "u8", &u32, &err), LOOM_OK);
    cr_expect_eq(u32, 200);
    cr_expect_eq(loom_gguf_get_i32(g, "i64neg", &i32, &err), LOOM_OK);
    cr_expect_eq(i32, -5);
    cr_expect_eq(loom_gguf_get_u64(g, "u64big", &u64, &err), LOOM_OK);
    cr_expect_eq(u64, (uint64_t)1 << 40);
    cr_expect_eq(loom_gguf_get_f32(g, "f64", &f, &err), LOOM_OK);
    cr_expect_eq(f, 0.25f);
    cr_expect_eq(loom_gguf_get_bool(g, "b", &bv, &err), LOOM_OK);
    cr_expect(bv);
    cr_expect_eq(loom_gguf_get_string(g, "s", &s, &err), LOOM_OK);
    cr_expect_str_eq(s, "text");

    cr_expect_eq(loom_gguf_get_u32(g, "s", &u32, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 's' holds string, wanted u32");
    cr_expect_eq(loom_gguf_get_u32(g, "i64neg", &u32, &err), LOOM_ERR_TYPE);
    cr_expect(strstr(err.msg, "i64 -5, which does not fit u32"), "%s", err.msg);
    cr_expect_eq(loom_gguf_get_i32(g, "u32", &i32, &err), LOOM_ERR_TYPE);
    cr_expect_eq(loom_gguf_get_u32(g, "u64big", &u32, &err), LOOM_ERR_TYPE);
    cr_expect_eq(loom_gguf_get_string(g, "u32", &s, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 'u32' holds u32, wanted string");
    cr_expect_eq(loom_gguf_get_f32(g, "u32", &f, &err), LOOM_ERR_TYPE);
    cr_expect_eq(loom_gguf_get_bool(g, "u8", &bv, &err), LOOM_ERR_TYPE);
    cr_expect_eq(loom_gguf_get_u64(g, "f64", &u64, &err), LOOM_ERR_TYPE);
    cr_expect_eq(loom_gguf_get_array(g, "s", LOOM_GGUF_STRING, &arr, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 's' holds string, wanted array of string");
    cr_expect_eq(loom_gguf_get_array(g, "i16s", LOOM_GGUF_U16, &arr, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 'i16s' holds array of i16, wanted array of u16");
    cr_expect_eq(loom_gguf_get_u32(g, "missing", &u32, &err), LOOM_ERR_NOT_FOUND);
    cr_expect_str_eq(err.msg, "gguf: key 'missing' not found");
    cr_expect_eq(u32, 200, "output untouched on failure");

    /* optional keys: absent is OK with the default kept, present reads as the plain getter,
     * another type is still an error */
    bv = true;
    s = "dflt";
    cr_expect_eq(loom_gguf_get_opt_bool(g, "missing", &bv, &err), LOOM_OK);
    cr_expect_eq(loom_gguf_get_opt_string(g, "missing", &s, &err), LOOM_OK);
    cr_expect(bv);
    cr_expect_str_eq(s, "dflt");
    cr_expect_eq(loom_gguf_get_opt_string(g, "s", &s, &err), LOOM_OK);
    cr_expect_str_eq(s, "text");
    bv = false;
    cr_expect_eq(loom_gguf_get_opt_bool(g, "b", &bv, &err), LOOM_OK);
    cr_expect(bv);
    cr_expect_eq(loom_gguf_get_opt_bool(g, "u8", &bv, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 'u8' holds u8, wanted bool");
    cr_expect_eq(loom_gguf_get_opt_string(g, "u32", &s, &err), LOOM_ERR_TYPE);
    cr_expect_str_eq(err.msg, "gguf: key 'u32' holds u32, wanted string");
    cr_expect_str_eq(s, "text", "output untouched on failure");

    cr_assert_eq(loom_gguf_get_array(g, "i16s", LOOM_GGUF_I16, &arr, &err), LOOM_OK);
    cr_expect_eq(arr->arr.n, 2);
    cr_expect_eq(loom_gguf_array_i64(arr, 0), -300);
    cr_expect_eq(loom_gguf_array_i64(arr, 1), 300);
    cr_expect_eq(loom_gguf_array_f64(arr, 0), -300.0);
    cr_assert_eq(loom_gguf_get_array(g, "f32s", LOOM_GGUF_F32, &arr, &err), LOOM_OK);
    cr_expect_eq(loom_gguf_array_f64(arr, 0), -1.5);
    cr_expect_eq(loom_gguf_array_i64(arr, 0), -1);
    cr_expect_eq(loom_gguf_array_u64(arr, 0), 0, "negative float saturates to 0");

    cr_expect_eq(loom_gguf_n_keys(g), 9);
    cr_expect_str_eq(loom_gguf_key_name(g, 4), "s");
    cr_expect_eq(loom_gguf_key_value(g, 4), loom_gguf_find(g, "s"));
    cr_expect_str_eq(loom_gguf_type_name(LOOM_GGUF_F64), "f64");
    cr_expect_str_eq(loom_gguf_type_name((loom_gguf_type)99), "?");
    cr_expect_eq(loom_gguf_type_size(LOOM_GGUF_U16), 2);
    cr_expect_eq(loom_gguf_type_size(LOOM_GGUF_STRING), 0);
    loom_gguf_close(g);
    bb_free(&b);
}

Test(gguf_reader, every_ggml_type_is_known_by_name) {
    static const char *const names[] = {
        "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
        "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
        "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "TQ1_0", "TQ2_0",
        "MXFP4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bool found = false;
        for (uint32_t id = 0; id < LOOM_GGML_TYPE_ID_LIMIT; id++) {
            const loom_ggml_type_info *t = loom_ggml_type_get(id);
            if (t && strcmp(t->name, names[i]) == 0) found = true;
        }
        cr_expect(found, "%s missing", names[i]);
    }
    cr_expect_null(loom_ggml_type_get(4));
    cr_expect_null(loom_ggml_type_get(LOOM_GGML_TYPE_ID_LIMIT));
    cr_expect_eq(loom_ggml_row_bytes(LOOM_GGML_Q4_K, 512), 288);
    cr_expect_eq(loom_ggml_row_bytes(LOOM_GGML_Q4_K, 100), -1);
    cr_expect_eq(loom_ggml_row_bytes(LOOM_GGML_F32, INT64_MAX), -2);

    /* metadata integer types (the typed getters and the tokenizer classify with these) */
    for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++) {
        bool is_int = t == LOOM_GGUF_U8 || t == LOOM_GGUF_I8 || t == LOOM_GGUF_U16 ||
                      t == LOOM_GGUF_I16 || t == LOOM_GGUF_U32 || t == LOOM_GGUF_I32 ||
                      t == LOOM_GGUF_U64 || t == LOOM_GGUF_I64;
        bool is_signed = t == LOOM_GGUF_I8 || t == LOOM_GGUF_I16 || t == LOOM_GGUF_I32 ||
                         t == LOOM_GGUF_I64;
        cr_expect_eq(loom_gguf_type_is_int((loom_gguf_type)t), is_int, "type %d", t);
        cr_expect_eq(loom_gguf_type_is_signed((loom_gguf_type)t), is_signed, "type %d", t);
    }

    /* tensor sizes: the reader's and the writer's one shape rule */
    const int64_t q4k[3] = {512, 3, 2}, f32_zero_row[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
    const int64_t elems_big[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
    const int64_t q4k_elems_big[2] = {(int64_t)1 << 32, (int64_t)1 << 31};
    const int64_t bytes_big[2] = {(int64_t)1 << 31, (int64_t)1 << 31}, neg[2] = {32, -1};
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_Q4_K, 3, q4k), 288 * 6);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 1, q4k), 2048);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 3, f32_zero_row), 0);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 2, elems_big), -2);
    /* 2^63 values overflow even where their Q4_K bytes (9 * 2^58) would fit */
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_Q4_K, 2, q4k_elems_big), -2);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 2, bytes_big), -2);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 2, neg), -1);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_Q4_K, 1, (const int64_t[]){100}), -1);
    cr_expect_eq(loom_ggml_tensor_bytes(4, 1, q4k), -1);
    cr_expect_eq(loom_ggml_tensor_bytes(LOOM_GGML_F32, 0, q4k), -1);
}

Test(gguf_reader, open_errors) {
    loom_gguf *g = NULL;
    loom_error err = {0};
    cr_expect_eq(loom_gguf_open("/nonexistent/x.gguf", &g, &err), LOOM_ERR_IO);
    cr_expect(strstr(err.msg, "/nonexistent/x.gguf"), "%s", err.msg);
    cr_expect_null(g);
    cr_expect_eq(loom_gguf_open("/", &g, &err), LOOM_ERR_IO);
    cr_expect(strstr(err.msg, "not a regular file"), "%s", err.msg);
    cr_expect_eq(loom_gguf_open_memory(NULL, 5, &g, &err), LOOM_ERR_INVALID_ARGUMENT);
    loom_gguf_close(NULL);
}

/* ---- the shared test data -------------------------------------------------------------------- */

/* Opens every .gguf in DIR/sub, checks its structure, returns how many were read. */
static int check_dir(const char *dir, const char *sub) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "cannot list %s", path);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        snprintf(path, sizeof path, "%s/%s/%s", dir, sub, e->d_name);
        loom_gguf *g = NULL;
        loom_error err = {0};
        cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
        const char *arch = NULL;
        cr_expect_eq(loom_gguf_get_string(g, "general.architecture", &arch, &err), LOOM_OK,
                     "%s: %s", path, err.msg);
        cr_expect_eq(loom_gguf_version(g), 3);
        uint64_t end = loom_gguf_data_offset(g);
        for (size_t i = 0; i < loom_gguf_n_tensors(g); i++) {
            const loom_gguf_tensor *t = loom_gguf_tensor_at(g, i);
            cr_expect_not_null(loom_ggml_type_get(t->type));
            cr_expect_leq(t->file_offset + t->nbytes, loom_gguf_file_size(g));
            cr_expect_eq(t->file_offset % loom_gguf_alignment(g), 0);
            if (t->file_offset + t->nbytes > end) end = t->file_offset + t->nbytes;
        }
        if (loom_gguf_n_tensors(g) > 0)
            cr_expect_leq(loom_gguf_file_size(g) - end, loom_gguf_alignment(g), "%s", path);
        loom_gguf_close(g);
        n++;
    }
    closedir(d);
    return n;
}

Test(gguf_reader, every_testdata_file_opens) {
    const char *dir = loom_test_testdata(NULL);
    cr_expect_geq(check_dir(dir, "golden"), 8);
    cr_expect_geq(check_dir(dir, "models"), 2);
    cr_expect_geq(check_dir(dir, "vocab"), 2);
}

Test(gguf_reader, testdata_contents) {
    const char *dir = loom_test_testdata(NULL);
    char path[4096];
    loom_gguf *g = NULL;
    loom_error err = {0};
    uint32_t u = 0;
    const char *s = NULL;
    const loom_gguf_value *arr = NULL;

    snprintf(path, sizeof path, "%s/golden/tiny_llama_q4_k.gguf", dir);
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_expect_eq(loom_gguf_get_string(g, "general.architecture", &s, &err), LOOM_OK);
    cr_expect_str_eq(s, "llama");
    cr_expect_eq(loom_gguf_get_u32(g, "llama.block_count", &u, &err), LOOM_OK);
    cr_expect_eq(u, 2);
    cr_expect_eq(loom_gguf_get_u32(g, "llama.embedding_length", &u, &err), LOOM_OK);
    cr_expect_eq(u, 256);
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    cr_assert_not_null(t);
    cr_expect_eq(t->type, LOOM_GGML_Q4_K);
    cr_expect_eq(t->ne[0], 768);
    cr_expect_eq(t->ne[1], 256);
    cr_expect_eq(t->nbytes, 768 / 256 * 144 * 256);
    cr_expect_eq(loom_gguf_get_array(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, &arr, &err),
                 LOOM_OK);
    cr_expect_eq(arr->arr.n, 512);
    loom_gguf_close(g);

    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_expect_eq(loom_gguf_n_tensors(g), 0);
    cr_expect_eq(loom_gguf_get_array(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, &arr, &err),
                 LOOM_OK);
    cr_expect_eq(arr->arr.n, 32000);
    cr_expect_eq(loom_gguf_get_array(g, "tokenizer.ggml.scores", LOOM_GGUF_F32, &arr, &err),
                 LOOM_OK);
    cr_expect_eq(arr->arr.n, 32000);
    loom_gguf_close(g);

    snprintf(path, sizeof path, "%s/models/stories260K.gguf", dir);
    cr_assert_eq(loom_gguf_open(path, &g, &err), LOOM_OK, "%s", err.msg);
    cr_expect_eq(loom_gguf_n_tensors(g), 48);
    cr_expect_eq(loom_gguf_get_u32(g, "llama.feed_forward_length", &u, &err), LOOM_OK);
    cr_expect_eq(u, 172);
    cr_expect_null(loom_gguf_find(g, "llama.rope.freq_base"));
    loom_gguf_close(g);
}
