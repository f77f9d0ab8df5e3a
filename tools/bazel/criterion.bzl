"""criterion_test: a cc_test over Criterion that cannot pass by running zero tests.

Criterion registers tests in an unreferenced ELF section (`cr_tst`); Bazel's -c opt links with
-Wl,--gc-sections, which drops it, and Criterion's own main then runs nothing and exits 0. Every
test target under tests/ goes through this macro, which adds //tests/common:criterion_main: a
main() that fails on zero registered tests, and the -Wl,--no-gc-sections link option that keeps
the section. tools/run-tests.sh refuses cc_test targets under //tests that skip the macro.

Usage (in a BUILD file):
    load("//tools/bazel:criterion.bzl", "criterion_test")
    criterion_test(name = "status_test", srcs = ["status_test.c"], deps = ["//include:status"])
"""

CRITERION_MAIN = "//tests/common:criterion_main"

def criterion_test(name, deps = [], **kwargs):
    """A cc_test linked with Criterion through //tests/common:criterion_main.

    Args:
      name: the test target's name.
      deps: the test's own dependencies; criterion_main is added.
      **kwargs: passed to cc_test unchanged (srcs, data, linkopts, size, ...).
    """
    native.cc_test(
        name = name,
        deps = deps + [CRITERION_MAIN],
        **kwargs
    )
