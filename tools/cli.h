/* cli.h: small helpers shared by the `loom` subcommands (number parsing, wall clock).
 * The parsers accept the whole string or nothing: an empty string, trailing characters, an
 * overflow or a value outside [lo, hi] returns false and leaves *out unchanged. */
#ifndef LOOM_TOOLS_CLI_H
#define LOOM_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

bool loom_cli_parse_long(const char *s, long lo, long hi, long *out);
/* The same into an int32_t (lo and hi must lie within int32_t). */
bool loom_cli_parse_int(const char *s, long lo, long hi, int32_t *out);
/* A finite float. */
bool loom_cli_parse_float(const char *s, float *out);
/* Seconds on the monotonic clock. */
double loom_cli_now_s(void);

#endif
