/* commands.h: the `loom` subcommands. Each lives in its own tools/cmd_<name>.c and is listed
 * once in the table in loom.c. A command returns the process exit code: 0 success, 1 a runtime
 * error (message on stderr), 2 a usage error (unknown flag, missing value). */
#ifndef LOOM_TOOLS_COMMANDS_H
#define LOOM_TOOLS_COMMANDS_H

int loom_cmd_inspect(int argc, char **argv);
int loom_cmd_mkmodel(int argc, char **argv);
int loom_cmd_compile(int argc, char **argv);
int loom_cmd_run(int argc, char **argv);
int loom_cmd_dump(int argc, char **argv);
int loom_cmd_tokenize(int argc, char **argv);
int loom_cmd_bench(int argc, char **argv);

#endif
