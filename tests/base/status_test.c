/* status_test.c: loom_error formatting and prefixing. */
#include <criterion/criterion.h>
#include <string.h>

#include "loom/status.h"

Test(status, set_formats_message_and_returns_status) {
    loom_error err = {0};
    loom_status s = loom_error_set(&err, LOOM_ERR_FORMAT, "gguf: bad %s at offset %d", "magic", 0);
    cr_assert_eq(s, LOOM_ERR_FORMAT);
    cr_assert_eq(err.status, LOOM_ERR_FORMAT);
    cr_assert_str_eq(err.msg, "gguf: bad magic at offset 0");
}

Test(status, prefix_keeps_old_message) {
    loom_error err = {0};
    loom_error_set(&err, LOOM_ERR_IO, "cannot open");
    loom_error_prefix(&err, "model %s: ", "x.gguf");
    cr_assert_str_eq(err.msg, "model x.gguf: cannot open");
    cr_assert_eq(err.status, LOOM_ERR_IO);
}

Test(status, null_error_is_allowed) {
    cr_assert_eq(loom_error_set(NULL, LOOM_ERR_CUDA, "x"), LOOM_ERR_CUDA);
}

Test(status, names_are_distinct) {
    cr_assert_str_eq(loom_status_name(LOOM_OK), "ok");
    cr_assert_str_neq(loom_status_name(LOOM_ERR_FORMAT), loom_status_name(LOOM_ERR_IO));
}
