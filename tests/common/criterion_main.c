/* criterion_main.c: the main() of every Criterion test binary under tests/ (linked in by
 * tools/bazel/criterion.bzl's criterion_test), in place of libcriterion's own.
 *
 * Why: Criterion finds its tests through the `cr_tst` ELF section that TestSuite/Test put them
 * in; nothing references that section, so a link with -Wl,--gc-sections (Bazel's -c opt adds
 * it, with -ffunction-sections) throws every test away, and Criterion's stock main then runs
 * zero tests and exits 0: `bazel test -c opt` "passed" with "Tested: 0" in every log. The
 * library target that carries this file also links with -Wl,--no-gc-sections (last on the line,
 * so it wins); this main is the guard behind it: a binary with no registered test fails with a
 * message instead of passing.
 *
 * Contract: same arguments, output and exit status as Criterion's main (0 when every test
 * passed or after --help/--version/--list, non-zero otherwise), plus exit status 1 when the
 * binary registers no test at all. A --filter that selects nothing is not an error here (the
 * count is of registered tests, before filtering). */
#include <criterion/criterion.h>
#include <stdio.h>

int main(int argc, char *argv[]) {
    struct criterion_test_set *tests = criterion_initialize();
    int status = 0;
    if (criterion_handle_args(argc, argv, true)) {
        if (tests->tests == 0) {
            fprintf(stderr,
                    "%s: no Criterion test registered: the linker dropped the 'cr_tst' section "
                    "(-Wl,--gc-sections without //tests/common:criterion_main's "
                    "--no-gc-sections?) or the file defines no Test()\n",
                    argc > 0 ? argv[0] : "test");
            status = 1;
        } else {
            status = criterion_run_all_tests(tests) ? 0 : 1;
        }
    }
    criterion_finalize(tests);
    return status;
}
