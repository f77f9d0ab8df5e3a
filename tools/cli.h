/* cli.h: small helpers shared by the `loom` subcommands (number parsing, a table-driven option
 * parser, wall clock, UTF-8 and JSON string output, weight-loading progress), one copy each.
 * The number parsers accept the whole string or nothing: an empty string, trailing characters,
 * an overflow or a value outside [lo, hi] returns false and leaves *out unchanged. */
#ifndef LOOM_TOOLS_CLI_H
#define LOOM_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

bool loom_cli_parse_long(const char *s, long lo, long hi, long *out);
/* The same into an int32_t (lo and hi must lie within int32_t). */
bool loom_cli_parse_int(const char *s, long lo, long hi, int32_t *out);
/* A finite float. */
bool loom_cli_parse_float(const char *s, float *out);
/* A comma-separated list of at least one token id ("1,2,3"; each as loom_cli_parse_long within
 * int32_t, so "1, 2" passes and "1,,2", "1," and "" do not) into a malloc'd array *ids of *n;
 * false (nothing allocated, *ids and *n unchanged) on anything else or out of memory. */
bool loom_cli_parse_ids(const char *s, int32_t **ids, int32_t *n);
/* ---- option parsing: a subcommand lists its options in a table, one row an option ---- */
typedef enum loom_cli_opt_kind {
    LOOM_CLI_FLAG,      /* no value: *(bool *)dst = true */
    LOOM_CLI_SELF,      /* no value: *(const char **)dst = the option as written ("-O2") */
    LOOM_CLI_STRING,    /* *(const char **)dst = the value */
    LOOM_CLI_CHOICE,    /* *(const char **)dst = the value, which must be one of `choices` */
    LOOM_CLI_INT,       /* *(int32_t *)dst = an integer in [lo, hi] */
    LOOM_CLI_LONG,      /* *(long *)dst = an integer in [lo, hi] */
    LOOM_CLI_FLOAT,     /* *(float *)dst = a finite float */
    LOOM_CLI_FLOAT_POS, /* *(float *)dst = a finite float > 0 */
    LOOM_CLI_U64,       /* *(unsigned long long *)dst = decimal digits, no sign */
} loom_cli_opt_kind;

typedef struct loom_cli_opt {
    const char *names;   /* every spelling, '|'-separated: "-p|--prompt" */
    loom_cli_opt_kind kind;
    void *dst;           /* written only when the value is valid */
    long lo, hi;         /* INT, LONG: the accepted range */
    const char *choices; /* CHOICE: the accepted values, '|'-separated: "f32|f16|int8" */
} loom_cli_opt;

/* loom_cli_parse_opts's results: go on, or end the command with this exit code. */
enum { LOOM_CLI_GO_ON = -1, LOOM_CLI_HELP = 0, LOOM_CLI_USAGE = 2 };

/* Parses argv[1..argc) for command `cmd` ("loom bench", the prefix of every message) against
 * opts[0..n_opts). An option that takes a value takes the next argument, whatever it is ("-n -3"
 * is -n with "-3"), or, for a "--long" name, "--long=VALUE". Any argument that is not an option
 * ("-" included) is the command's one operand (operand_name in messages), stored in *operand.
 * Returns LOOM_CLI_GO_ON (-1) when all is well, or the exit code the command ends with:
 * LOOM_CLI_HELP (0) after -h / --help printed usage(stdout); LOOM_CLI_USAGE (2) after one line on
 * stderr that names the argument and the problem: an unknown option (then usage(stderr) too), a
 * missing value, an invalid value (with what is accepted), a value given to an option that takes
 * none, a second operand. Options before the error have been stored. Usage:
 *   int rc = loom_cli_parse_opts("loom x", argc, argv, opts, n, usage, "model", &model);
 *   if (rc != LOOM_CLI_GO_ON) return rc; */
int loom_cli_parse_opts(const char *cmd, int argc, char **argv, const loom_cli_opt *opts,
                        size_t n_opts, void (*usage)(FILE *f), const char *operand_name,
                        const char **operand);

/* Seconds on the monotonic clock. */
double loom_cli_now_s(void);

/* The benchmarks' fixed pseudo-random token ids: toks[0..n) in 0..n_vocab-1 (n_vocab >= 1),
 * the same sequence in every run and tool (`loom bench`, bench/step_timeline). */
void loom_cli_bench_tokens(int32_t *toks, int32_t n, int32_t n_vocab);


/* Length of the well-formed UTF-8 character at s[0..n) (n >= 1): 1 for ASCII, 2..4 for a
 * shortest-form scalar value (no surrogates, <= U+10FFFF), 0 when it is not one. */
size_t loom_cli_utf8_len(const unsigned char *s, size_t n);

/* Writes s[0..len) quoted to f. json: JSON escapes (\" \\ \n \t \r, other control
 * characters as \u00XX, bytes that are not UTF-8 as \ufffd); otherwise C-like (\xNN). At most
 * max bytes are shown, then an ellipsis and the length (text mode; pass SIZE_MAX for JSON). */
void loom_cli_put_string(FILE *f, const char *s, size_t len, bool json, size_t max);

/* A NUL-terminated string as a JSON string (quotes included). */
void loom_cli_put_json(FILE *f, const char *s);

/* Weight-loading progress for loom_session_options.progress: "\r<who>: weights N MiB loaded"
 * on stderr every 256 MiB. ctx is a loom_cli_progress initialized with
 * LOOM_CLI_PROGRESS_INIT(who); loom_cli_progress_end ends the line if one was printed. */
typedef struct loom_cli_progress {
    const char *who;
    uint64_t next;
} loom_cli_progress;
#define LOOM_CLI_PROGRESS_INIT(who) {(who), 256u << 20}
void loom_cli_load_progress(void *ctx, uint64_t bytes_done);
void loom_cli_progress_end(const loom_cli_progress *p);

#endif
