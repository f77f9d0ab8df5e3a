#!/bin/bash
# smoke.sh [RUNS]: builds every libFuzzer harness (the build*.sh beside it) and runs each for RUNS
# inputs (default 100000: ~5-10 s each here; at most 60 s, which the tokenizer (~1,300 inputs/s)
# reach) from its seed corpus with a fixed seed; new inputs go to a scratch folder removed after.
# Fails when a harness does not build or a run finds a crash, a leak or undefined behaviour (its
# reproducer goes to .fuzz/crash-*). CI runs it (.ci/run) so that the harnesses keep building as
# the parsers change; the long runs are the README's commands.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs_n="${1:-100000}"
for b in build build_ir build_ir_text build_tokenizer build_spec; do
    bash "tools/fuzz/$b.sh" >/dev/null
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export LOOM_TESTDATA="${LOOM_TESTDATA:-../shared/testdata}"
# harness, its corpus, extra flags
runs=("gguf_fuzz gguf -max_len=65536"
      "ir_fuzz ir"
      "ir_text_fuzz ir_text -dict=.fuzz/ir_text.dict"
      "tokenizer_fuzz tokenizer"
      "spec_fuzz spec -dict=.fuzz/spec.dict")
failed=0
for r in "${runs[@]}"; do
    read -r h corpus extra <<<"$r"
    mkdir -p "$work/$corpus"
    # shellcheck disable=SC2086
    if .fuzz/$h -seed=1 -runs="$runs_n" -max_total_time=60 -print_final_stats=1 \
        -artifact_prefix=.fuzz/ $extra \
        "$work/$corpus" ".fuzz/corpus/$corpus" >"$work/$h.log" 2>&1; then
        echo "fuzz smoke: $h ok ($(grep -a -m1 -o 'stat::number_of_executed_units: *[0-9]*' \
            "$work/$h.log" | grep -o '[0-9]*$') inputs)"
    else
        echo "fuzz smoke: $h FAILED; its log:" >&2
        tail -n 40 "$work/$h.log" >&2
        failed=1
    fi
done
exit "$failed"
