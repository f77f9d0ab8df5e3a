/* testdata.h: how a Criterion test finds ../shared/testdata (and its runfiles, and reads a whole
 * file).
 *
 * The test data lives outside the repository; tools/run-tests.sh passes its absolute path in
 * the environment variable LOOM_TESTDATA. A test that needs it asks for the root with a probe,
 * a path relative to the root (file or folder) that the test cannot run without:
 *
 *     const char *dir = loom_test_testdata("golden/sequences.txt");
 *     // here dir is the root and DIR/golden/sequences.txt exists
 *
 * When LOOM_TESTDATA is unset or empty, or the probe is absent, the current test is skipped
 * (cr_skip_test, with a reason naming what is missing), unless LOOM_REQUIRE_TESTDATA=1: then the
 * test fails (cr_assert_fail) instead, so CI cannot pass by skipping. Either way the call does
 * not return, so the returned pointer is never NULL. Call these only from inside a test (or a
 * fixture) of a binary that links Criterion.
 */
#ifndef LOOM_TESTS_COMMON_TESTDATA_H
#define LOOM_TESTS_COMMON_TESTDATA_H

#include <stddef.h>

/* The testdata root (the value of LOOM_TESTDATA, owned by the environment) when ROOT/probe_relpath
 * exists; probe_relpath NULL or "" probes the root folder itself. Otherwise skips the current test,
 * or fails it when LOOM_REQUIRE_TESTDATA=1; never returns NULL. */
const char *loom_test_testdata(const char *probe_relpath);

/* ROOT/relpath as a new string the caller frees, after loom_test_testdata(relpath) (so the path
 * exists, or the test was skipped or failed). Aborts the test on out of memory. */
char *loom_test_path(const char *relpath);

/* The path of a runfile of this test (a `data` dependency, e.g. "tools/loom") into buf[n]:
 * $TEST_SRCDIR/$TEST_WORKSPACE/relpath when that exists, else bazel-bin/relpath (a test binary
 * started by hand from the workspace root). */
void loom_test_runfile(char *buf, size_t n, const char *relpath);

/* The whole file at path as a new NUL-terminated buffer the caller frees; its length (without
 * the NUL) into *len when len is not NULL. Fails the test when the file cannot be read. */
char *loom_test_read_file(const char *path, size_t *len);

#endif /* LOOM_TESTS_COMMON_TESTDATA_H */
