/* inspect_main.c: `loom inspect` alone (tools/loom.c's dispatch for this one command), so the
 * CLI test runs the command as a process without depending on every module `loom` links. */
#include "tools/commands.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    return loom_cmd_inspect(argc - 1, argv + 1); /* argv[1] is "inspect", as in loom.c */
}
