/* cmd_tokenize.c: `loom tokenize MODEL TEXT` / `loom tokenize MODEL -f FILE`: the token ids of a
 * text under a GGUF model's tokenizer.
 *
 * Default output: one token per line, `ID<TAB>"PIECE"`, where PIECE is the bytes the token decodes
 * to, escaped by loom_cli_put_string's text mode so every line is printable UTF-8 (\n, \t, \r,
 * \", \\, lowercase \xnn for control bytes and for bytes that are not a whole UTF-8 character
 * inside the piece, e.g. one <0xE6> byte token; the same escapes as `loom inspect`).
 * --ids prints only the ids, space-separated, on one line. No BOS unless --bos. Special tokens
 * written in the text (<s>, <|im_end|>) are matched unless --no-parse-special. -f reads the file
 * byte for byte (no newline is stripped).
 * Exit codes: 0 ok, 1 runtime error (unreadable file, bad model), 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/gguf.h"
#include "loaders/tokenizer.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: loom tokenize MODEL.gguf TEXT [options]\n"
            "       loom tokenize MODEL.gguf -f FILE [options]\n"
            "Prints the tokens of TEXT (or of FILE's bytes) under the model's tokenizer.\n"
            "  -f FILE              read the text from FILE, byte for byte\n"
            "  --ids                print only the ids, space-separated, on one line\n"
            "  --bos                prepend the BOS token\n"
            "  --no-parse-special   treat special-token text (<s>, <|im_end|>) as plain text\n"
            "  -h, --help           this help\n"
            "Without --ids: one line per token, ID<TAB>\"PIECE\", PIECE being the bytes the token\n"
            "decodes to, escaped (\\n \\t \\\" \\\\, \\xNN for control bytes and partial characters).\n");
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "loom tokenize: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = cap > ((size_t)1 << 40) ? NULL : realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!buf || ferror(f)) {
        fprintf(stderr, "loom tokenize: cannot read '%s'%s\n", path, buf ? "" : ": out of memory");
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int loom_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    bool ids_only = false, bos = false, parse_special = true, options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && a[0] == '-' && a[1] != '\0') {
            if (!strcmp(a, "--")) options_done = true;
            else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                usage(stdout);
                return 0;
            } else if (!strcmp(a, "--ids")) ids_only = true;
            else if (!strcmp(a, "--bos")) bos = true;
            else if (!strcmp(a, "--no-parse-special")) parse_special = false;
            else if (!strcmp(a, "-f")) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "loom tokenize: -f needs a file name\n");
                    return 2;
                }
                file = argv[++i];
            } else {
                fprintf(stderr, "loom tokenize: unknown option '%s'\n", a);
                usage(stderr);
                return 2;
            }
            continue;
        }
        if (!model) model = a;
        else if (!text) text = a;
        else {
            fprintf(stderr, "loom tokenize: unexpected argument '%s' (quote the text)\n", a);
            return 2;
        }
    }
    if (!model || (!text && !file) || (text && file)) {
        fprintf(stderr, "loom tokenize: need a MODEL and either TEXT or -f FILE\n");
        usage(stderr);
        return 2;
    }

    size_t len = 0;
    char *owned = NULL;
    if (file) {
        if (!(owned = read_all(file, &len))) return 1;
        text = owned;
    } else
        len = strlen(text);

    int rc = 1;
    loom_error err = {0};
    loom_gguf *g = NULL;
    loom_tokenizer *t = NULL;
    loom_token *ids = NULL;
    size_t n = 0;
    if (loom_gguf_open(model, &g, &err) || loom_tokenizer_create(g, &t, &err)) {
        fprintf(stderr, "loom tokenize: %s: %s\n", model, err.msg);
        goto done;
    }
    if (loom_tokenizer_encode(t, text, len, bos, parse_special, &ids, &n, &err)) {
        fprintf(stderr, "loom tokenize: %s\n", err.msg);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf(i ? " %d" : "%d", (int)ids[i]);
            continue;
        }
        size_t pl = 0;
        const char *piece = loom_tokenizer_piece(t, ids[i], &pl);
        printf("%d\t", (int)ids[i]);
        loom_cli_put_string(stdout, piece, pl, false, SIZE_MAX);
        putchar('\n');
    }
    if (ids_only) putchar('\n');
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(ids);
    loom_tokenizer_destroy(t);
    loom_gguf_close(g);
    free(owned);
    return rc;
}
