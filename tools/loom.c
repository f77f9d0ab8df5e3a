/* loom.c: the `loom` command line. Dispatches `loom SUBCOMMAND ARGS...` to the table below;
 * argv handed to a subcommand starts at the subcommand's name. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"inspect", loom_cmd_inspect, "show a GGUF file's metadata and tensors"},
    {"mkmodel", loom_cmd_mkmodel, "write a deterministic random-weight model"},
    {"compile", loom_cmd_compile, "lower a GGUF model to a verified graph (.pb), op statistics"},
    {"run", loom_cmd_run, "generate tokens from a GGUF model or .pb graph"},
    {"dump", loom_cmd_dump, "print a graph as IR text or Graphviz DOT (--dot)"},
    {"tokenize", loom_cmd_tokenize, "print the token ids (and pieces) of a text"},
    {"bench", loom_cmd_bench, "prefill/decode throughput (llama-bench style) and the roofline"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: loom COMMAND [ARGS...]   (loom COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "loom: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
