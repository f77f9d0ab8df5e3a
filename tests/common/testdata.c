/* testdata.c: the one copy of the "find ../shared/testdata or skip" logic and of the tests'
 * whole-file reader (see testdata.h).
 * Skip and failure messages name the variable, its value and the missing path, so a skipped
 * test in a CI log says what to set. */
#include "tests/common/testdata.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int required(void) {
    const char *req = getenv("LOOM_REQUIRE_TESTDATA");
    return req != NULL && strcmp(req, "1") == 0;
}

const char *loom_test_testdata(const char *probe_relpath) {
    const char *root = getenv("LOOM_TESTDATA");
    int whole = probe_relpath == NULL || probe_relpath[0] == '\0';
    const char *probe = whole ? "." : probe_relpath;
    if (root == NULL || root[0] == '\0') {
        if (required())
            cr_assert_fail("LOOM_REQUIRE_TESTDATA=1 but LOOM_TESTDATA is not set");
        cr_skip_test("LOOM_TESTDATA is not set: skipping (needs ../shared/testdata)");
    }
    size_t len = strlen(root) + 1 + strlen(probe) + 1;
    char *path = malloc(len);
    cr_assert_not_null(path, "out of memory");
    snprintf(path, len, "%s/%s", root, probe);
    int found = access(path, R_OK) == 0;
    free(path);
    if (!found && whole) {
        if (required())
            cr_assert_fail("LOOM_REQUIRE_TESTDATA=1 but LOOM_TESTDATA (%s) is not a readable folder", root);
        cr_skip_test("LOOM_TESTDATA (%s) is not a readable folder: skipping", root);
    }
    if (!found) {
        if (required())
            cr_assert_fail("LOOM_REQUIRE_TESTDATA=1 but LOOM_TESTDATA (%s) has no %s", root, probe);
        cr_skip_test("LOOM_TESTDATA (%s) has no %s: skipping", root, probe);
    }
    return root;
}

char *loom_test_path(const char *relpath) {
    const char *root = loom_test_testdata(relpath);
    const char *rel = relpath != NULL ? relpath : "";
    size_t len = strlen(root) + 1 + strlen(rel) + 1;
    char *path = malloc(len);
    cr_assert_not_null(path, "out of memory");
    snprintf(path, len, "%s/%s", root, rel);
    return path;
}

void loom_test_runfile(char *buf, size_t n, const char *relpath) {
    const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
    snprintf(buf, n, "%s/%s/%s", src ? src : ".", ws ? ws : "loom", relpath);
    if (access(buf, F_OK) != 0) snprintf(buf, n, "bazel-bin/%s", relpath);
}

char *loom_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    cr_assert(n >= 0 && fseek(f, 0, SEEK_SET) == 0, "cannot size %s", path);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf, "out of memory for %s (%ld bytes)", path, n);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "cannot read %s", path);
    fclose(f);
    buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}
