/* spec_fuzz.c: libFuzzer harness of the small text parsers a user reaches from the command line
 * and the environment: the pass pipeline spec (`--passes`, loom_pass_manager_create, with a
 * --print-after name), an op list (LOOM_CUDA_SKIP_OPS and alike, loom_exec_parse_op_list), the
 * CLI's number and id-list parsers and its table-driven option parser (tools/cli.c), and the
 * CLI's string quoting. The input is split at newlines into fields: 0 the pipeline, 1 the
 * print-after name, 2 an op list, 3 a number (parsed as long, int and float against ranges from
 * field 4's bytes, and as an id list), 5.. the arguments of one option-parser call.
 * What must hold for any input: no crash, leak or undefined behaviour; a refusal leaves no
 * manager and says what ("passes: ..." / the list's name); an accepted number lies in its range
 * (a float is finite) and a refused one leaves the output as it was; an accepted id list has one
 * id more than the string has commas; the option parser returns one of its three codes and
 * writes only values its table accepts. Build and run: bash tools/fuzz/build_spec.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/backend_common.h"
#include "passes/passes.h"
#include "tools/cli.h"

enum { MAX_FIELDS = 24 };

static void no_usage(FILE *f) { (void)f; }

static void check_pipeline(const char *spec, const char *print_after) {
    loom_pass_options o = {0};
    o.print_after = *print_after ? print_after : NULL;
    loom_pass_manager *pm = (loom_pass_manager *)1;
    loom_error err = {0};
    if (loom_pass_manager_create(spec, &o, &pm, &err) == LOOM_OK) {
        if (!pm) abort();
        loom_pass_manager_destroy(pm);
    } else if (pm || strncmp(err.msg, "passes: ", 8)) {
        abort();
    }
}

static void check_op_list(const char *list) {
    bool set[LOOM_IR_OP_COUNT] = {false};
    loom_error err = {0};
    if (loom_exec_parse_op_list(list, "LOOM_FUZZ_OPS", set, &err) != LOOM_OK) {
        if (strncmp(err.msg, "LOOM_FUZZ_OPS: ", 15)) abort();
    } else if (*list) {
        bool any = false;
        for (int i = 0; i < LOOM_IR_OP_COUNT; i++) any |= set[i];
        if (!any) abort(); /* a non-empty accepted list names at least one op */
    }
}

static void check_numbers(const char *s, const char *range) {
    long lo = -1000, hi = 1000;
    if (strlen(range) >= 2) {
        lo = (signed char)range[0] * 1000L;
        hi = lo + (unsigned char)range[1] * 1000L;
    }
    long l = 12345678;
    if (loom_cli_parse_long(s, lo, hi, &l) ? l < lo || l > hi : l != 12345678) abort();
    int32_t i = 7654321;
    if (loom_cli_parse_int(s, lo, hi, &i) ? i < lo || i > hi : i != 7654321) abort();
    float f = 0.5f;
    if (loom_cli_parse_float(s, &f) ? !isfinite(f) : f != 0.5f) abort();
    int32_t *ids = NULL, n = -1;
    if (loom_cli_parse_ids(s, &ids, &n)) {
        int32_t commas = 0;
        for (const char *p = s; *p; p++) commas += *p == ',';
        if (!ids || n != commas + 1) abort();
        free(ids);
    } else if (ids || n != -1) {
        abort();
    }
}

/* One option of every kind, their values checked after the call. */
static void check_opts(int argc, char **argv) {
    bool flag = false;
    const char *self = NULL, *str = NULL, *choice = NULL, *operand = NULL;
    int32_t n = -1;
    long big = -1;
    float x = -1.0f, pos = -1.0f;
    unsigned long long seed = 0;
    const loom_cli_opt opts[] = {
        {"-f|--flag", LOOM_CLI_FLAG, &flag, 0, 0, NULL},
        {"-O0|-O2", LOOM_CLI_SELF, &self, 0, 0, NULL},
        {"-s|--string", LOOM_CLI_STRING, &str, 0, 0, NULL},
        {"--kv", LOOM_CLI_CHOICE, &choice, 0, 0, "f32|f16|int8"},
        {"-n|--count", LOOM_CLI_INT, &n, 1, 4096, NULL},
        {"--big", LOOM_CLI_LONG, &big, 0, 1L << 40, NULL},
        {"-t|--temp", LOOM_CLI_FLOAT, &x, 0, 0, NULL},
        {"--scale", LOOM_CLI_FLOAT_POS, &pos, 0, 0, NULL},
        {"--seed", LOOM_CLI_U64, &seed, 0, 0, NULL},
    };
    int rc = loom_cli_parse_opts("loom fuzz", argc, argv, opts, sizeof opts / sizeof *opts,
                                 no_usage, "model", &operand);
    if (rc != LOOM_CLI_GO_ON && rc != LOOM_CLI_HELP && rc != LOOM_CLI_USAGE) abort();
    if (self && strcmp(self, "-O0") && strcmp(self, "-O2")) abort();
    if (choice && strcmp(choice, "f32") && strcmp(choice, "f16") && strcmp(choice, "int8"))
        abort();
    if (n != -1 && (n < 1 || n > 4096)) abort();
    if (big != -1 && (big < 0 || big > (1L << 40))) abort();
    if (x != -1.0f && !isfinite(x)) abort();
    if (pos != -1.0f && !(isfinite(pos) && pos > 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *field[MAX_FIELDS];
    int nf = 0;
    for (char *p = buf; nf < MAX_FIELDS;) {
        field[nf++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    static char empty[] = "";
    for (int i = nf; i < 5; i++) field[i] = empty;
    check_pipeline(field[0], field[1]);
    check_op_list(field[2]);
    check_numbers(field[3], field[4]);
    char *argv[MAX_FIELDS + 1];
    int argc = 0;
    argv[argc++] = "loom-fuzz";
    for (int i = 5; i < nf; i++) argv[argc++] = field[i];
    argv[argc] = NULL;
    check_opts(argc, argv);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        loom_cli_put_string(null, data ? (const char *)data : "", size, true, SIZE_MAX);
        loom_cli_put_string(null, data ? (const char *)data : "", size, false, 64);
        fclose(null);
    }
    free(buf);
    return 0;
}
