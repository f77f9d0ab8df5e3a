#!/bin/bash
# run-tests.sh [BAZEL FLAGS...]: runs every Criterion test under //tests/... and ends with one
# line `N passed, N failed[, N skipped]` that counts Criterion tests (not Bazel targets).
# A test target that fails to build or dies without Criterion's summary counts as one failure,
# and so does one that ran zero tests ("Tested: 0") or that is not a criterion_test
# (tools/bazel/criterion.bzl, whose main fails on zero registered tests): -c opt's
# --gc-sections once dropped every test while the targets still passed.
# Tests find ../shared/testdata through LOOM_TESTDATA (made absolute here); with
# LOOM_REQUIRE_TESTDATA=1 (set by .ci/run) its absence is a failure rather than a skip.
set -uo pipefail
cd "$(dirname "$0")/.."

export LOOM_TESTDATA="${LOOM_TESTDATA:-$(pwd)/../shared/testdata}"
[ -d "$LOOM_TESTDATA" ] && LOOM_TESTDATA="$(cd "$LOOM_TESTDATA" && pwd)"
export LOOM_REQUIRE_TESTDATA="${LOOM_REQUIRE_TESTDATA:-0}"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bazel test --keep_going --test_arg=--verbose "$@" //tests/... 2>&1 | tee "$log" | grep -E "PASSED|FAILED|NO STATUS|TIMEOUT|ERROR:|Executed" || true

passed=0; failed=0; skipped=0
for target in $(bazel query "kind(cc_test, //tests/...) except rdeps(//tests/..., //tests/common:criterion_main, 1)" 2>/dev/null); do
    echo "run-tests: $target is a plain cc_test: declare it with criterion_test (tools/bazel/criterion.bzl)" >&2
    failed=$((failed + 1))
done
testlogs="$(bazel info bazel-testlogs "$@" 2>/dev/null)"
for target in $(bazel query 'kind(cc_test, //tests/...)' 2>/dev/null); do
    rel="${target#//}"; rel="${rel/://}"
    tlog="$testlogs/$rel/test.log"
    line=""
    [ -f "$tlog" ] && line="$(grep -a "Synthesis: Tested:" "$tlog" | tail -1)"
    if [ -z "$line" ] || grep -q "^$target .*FAILED TO BUILD\|^$target .*NO STATUS" "$log"; then
        echo "run-tests: $target produced no Criterion summary (build failure or crash)" >&2
        failed=$((failed + 1)); continue
    fi
    p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
    c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.*Tested: ([0-9]+).*/\1/' <<<"$line")
    if [ "$t" -eq 0 ]; then
        echo "run-tests: $target ran zero Criterion tests" >&2
        failed=$((failed + 1)); continue
    fi
    s=$(grep -a -c "^\[SKIP\]" "$tlog" || true)
    passed=$((passed + p)); failed=$((failed + f + c)); skipped=$((skipped + s))
done
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
