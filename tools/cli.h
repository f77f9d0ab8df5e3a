/* cli.h: small helpers shared by the `loom` subcommands (number parsing, wall clock, UTF-8 and
 * JSON string output, weight-loading progress), one copy each.
 * The parsers accept the whole string or nothing: an empty string, trailing characters, an
 * overflow or a value outside [lo, hi] returns false and leaves *out unchanged. */
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
/* Seconds on the monotonic clock. */
double loom_cli_now_s(void);


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
