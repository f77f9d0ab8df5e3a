/* cli_opts_test.c: loom_cli_parse_opts (tools/cli.h), the option parser of `loom bench`,
 * `compile`, `run`, `inspect`, `dump` and `mkmodel`, called directly with stderr captured:
 * - every kind stores its value (--name VALUE and --name=VALUE, aliases, -O2 as written, the
 *   operand anywhere), and -h prints the usage on stdout with exit code 0;
 * - each usage error returns 2 with one message naming the option and the problem: unknown
 *   option (plus the usage), missing value, invalid value (with what is accepted), a value for
 *   a flag, a second operand.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

static int usage_calls;
static void usage(FILE *f) {
    usage_calls++;
    fprintf(f, "usage: loom t MODEL\n");
}

typedef struct {
    bool flag;
    const char *self, *str, *choice, *model;
    int32_t i;
    long l;
    float f, fp;
    unsigned long long u;
} vals;

/* Runs the parser over args (NULL-terminated, after the command name) with a table of every
 * kind; returns its result, the messages it wrote on stderr in err. */
static int parse(vals *v, const char *const *args, char *err, size_t cap) {
    memset(v, 0, sizeof *v);
    v->choice = "f32";
    const loom_cli_opt opts[] = {
        {"--flag", LOOM_CLI_FLAG, &v->flag, 0, 0, NULL},
        {"-O0|-O2", LOOM_CLI_SELF, &v->self, 0, 0, NULL},
        {"-s|--str", LOOM_CLI_STRING, &v->str, 0, 0, NULL},
        {"--kv", LOOM_CLI_CHOICE, &v->choice, 0, 0, "f32|f16|int8"},
        {"-i", LOOM_CLI_INT, &v->i, 1, 16, NULL},
        {"--long", LOOM_CLI_LONG, &v->l, -5, 5, NULL},
        {"--temp", LOOM_CLI_FLOAT, &v->f, 0, 0, NULL},
        {"--top-p", LOOM_CLI_FLOAT_POS, &v->fp, 0, 0, NULL},
        {"--seed", LOOM_CLI_U64, &v->u, 0, 0, NULL},
    };
    char *argv[32];
    int argc = 0;
    argv[argc++] = "t";
    for (; args[argc - 1] && argc < 31; argc++) argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    char path[512];
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(path, sizeof path, "%s/cli_opts.%d.txt", dir ? dir : "/tmp", (int)getpid());
    fflush(stderr);
    FILE *saved = stderr, *f = fopen(path, "w+");
    cr_assert(f);
    stderr = f;
    usage_calls = 0;
    int rc = loom_cli_parse_opts("loom t", argc, argv, opts, sizeof opts / sizeof opts[0], usage,
                                 "model", &v->model);
    stderr = saved;
    rewind(f);
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = '\0';
    fclose(f);
    unlink(path);
    return rc;
}

Test(cli_opts, every_kind_stores_its_value) {
    vals v;
    char err[1024];
    int rc = parse(&v,
                   (const char *[]){"--flag", "-O2", "m.gguf", "--str", "x", "--kv=int8", "-i",
                                    "16", "--long", "-5", "--temp=-0.5", "--top-p", "0.9",
                                    "--seed", "18446744073709551615", NULL},
                   err, sizeof err);
    cr_assert_eq(rc, LOOM_CLI_GO_ON, "%s", err);
    cr_expect_str_empty(err);
    cr_expect(v.flag);
    cr_expect_str_eq(v.self, "-O2");
    cr_expect_str_eq(v.model, "m.gguf");
    cr_expect_str_eq(v.str, "x");
    cr_expect_str_eq(v.choice, "int8");
    cr_expect_eq(v.i, 16);
    cr_expect_eq(v.l, -5);
    cr_expect_eq(v.f, -0.5f);
    cr_expect_eq(v.fp, 0.9f);
    cr_expect_eq(v.u, 18446744073709551615ull);
    /* the alias, "--name=" with an empty value, defaults kept */
    rc = parse(&v, (const char *[]){"-s", "--flag", "-", "--str=", NULL}, err, sizeof err);
    cr_assert_eq(rc, LOOM_CLI_GO_ON, "%s", err);
    cr_expect_str_eq(v.str, "");
    cr_expect_str_eq(v.model, "-", "a lone '-' is an operand");
    cr_expect_str_eq(v.choice, "f32");
    cr_expect_null(v.self);
}

Test(cli_opts, help_prints_the_usage_and_exits_0) {
    vals v;
    char err[1024];
    cr_expect_eq(parse(&v, (const char *[]){"--flag", "-h", "--bogus", NULL}, err, sizeof err),
                 LOOM_CLI_HELP);
    cr_expect_eq(LOOM_CLI_HELP, 0);
    cr_expect_eq(usage_calls, 1);
    cr_expect_str_empty(err, "usage went to stdout: %s", err);
    cr_expect_eq(parse(&v, (const char *[]){"--help", NULL}, err, sizeof err), LOOM_CLI_HELP);
}

/* Each usage error: exit code 2 and a message naming the argument and what is wrong. */
Test(cli_opts, usage_errors_name_the_option_and_the_problem) {
    static const struct {
        const char *args[4];
        const char *msg;
        bool usage; /* the usage follows the message */
    } cases[] = {
        {{"--bogus", NULL}, "loom t: unknown option '--bogus'\n", true},
        {{"--bogus=3", NULL}, "loom t: unknown option '--bogus'\n", true},
        {{"-x", "m", NULL}, "loom t: unknown option '-x'\n", true},
        {{"-i", NULL}, "loom t: option -i needs a value\n", false},
        {{"m", "--str", NULL}, "loom t: option --str needs a value\n", false},
        {{"-i", "17", NULL}, "loom t: option -i needs a valid value (got '17'; an integer in [1, 16])\n", false},
        {{"-i", "3x", NULL}, "loom t: option -i needs a valid value (got '3x'; an integer in [1, 16])\n", false},
        {{"--long=", NULL}, "loom t: option --long needs a valid value (got ''; an integer in [-5, 5])\n", false},
        {{"--kv", "q8", NULL}, "loom t: option --kv needs a valid value (got 'q8'; one of f32|f16|int8)\n", false},
        {{"--kv", "f1", NULL}, "loom t: option --kv needs a valid value (got 'f1'; one of f32|f16|int8)\n", false},
        {{"--temp", "nan", NULL}, "loom t: option --temp needs a valid value (got 'nan'; a number)\n", false},
        {{"--top-p", "0", NULL}, "loom t: option --top-p needs a valid value (got '0'; a number > 0)\n", false},
        {{"--seed", "-1", NULL}, "loom t: option --seed needs a valid value (got '-1'; a non-negative integer)\n", false},
        {{"--seed", "18446744073709551616", NULL}, "loom t: option --seed needs a valid value (got '18446744073709551616'; a non-negative integer)\n", false},
        {{"--flag=1", NULL}, "loom t: option --flag takes no value (got '1')\n", false},
        {{"a.gguf", "b.gguf", NULL}, "loom t: more than one model given ('a.gguf', 'b.gguf')\n", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vals v;
        char err[1024], want[512];
        int rc = parse(&v, cases[i].args, err, sizeof err);
        cr_expect_eq(rc, LOOM_CLI_USAGE, "case %zu (%s): rc %d", i, cases[i].args[0], rc);
        snprintf(want, sizeof want, "%s%s", cases[i].msg,
                 cases[i].usage ? "usage: loom t MODEL\n" : "");
        cr_expect_str_eq(err, want, "case %zu", i);
        cr_expect_eq(usage_calls, cases[i].usage ? 1 : 0, "case %zu", i);
    }
    cr_expect_eq(LOOM_CLI_USAGE, 2);
}

/* A value-taking option takes the next argument whatever it looks like (as "-n -3" needs), and
 * an invalid value leaves the destination as it was. */
Test(cli_opts, values_are_taken_verbatim_and_kept_on_error) {
    vals v;
    char err[1024];
    cr_assert_eq(parse(&v, (const char *[]){"--str", "--flag", NULL}, err, sizeof err),
                 LOOM_CLI_GO_ON, "%s", err);
    cr_expect_str_eq(v.str, "--flag");
    cr_expect_not(v.flag);
    cr_assert_eq(parse(&v, (const char *[]){"-i", "4", "-i", "99", NULL}, err, sizeof err),
                 LOOM_CLI_USAGE);
    cr_expect_eq(v.i, 4);
}
