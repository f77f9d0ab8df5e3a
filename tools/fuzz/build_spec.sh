#!/bin/bash
# build_spec.sh: builds the libFuzzer harness of the command line's and environment's small
# parsers (spec_fuzz.c: pass pipelines, op lists, numbers, the option parser) with clang into
# .fuzz/ (git-ignored), and its seed corpus .fuzz/corpus/spec.
#   bash tools/fuzz/build_spec.sh
#   .fuzz/spec_fuzz -max_total_time=600 -dict=.fuzz/spec.dict .fuzz/corpus/spec
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.fuzz
mkdir -p "$out/corpus/spec"
source tools/fuzz/common.sh
"$CC" "${fuzz_flags[@]}" tools/fuzz/spec_fuzz.c "${ir_srcs[@]}" passes/*.c \
    executor/backend_common.c tools/cli.c -lm -o "$out/spec_fuzz"
# Seeds: valid and invalid forms of each field (fields are lines; see spec_fuzz.c).
printf '%s\n' "-O2" "" "matmul,attention" "42" "AB" "-n" "16" "--kv=f16" "model.gguf" \
    > "$out/corpus/spec/valid"
printf '%s\n' "fuse-qkv,fuse-gate-up,dce" "dce" "rms_norm," "1e39" "" "--temp" "nan" "-O0" \
    "--scale=-1" "--seed" "18446744073709551616" "a" "b" > "$out/corpus/spec/mixed"
printf '%s\n' "-O3" "nope" ",," "-9223372036854775809" "zz" "-f=1" "--big" "1099511627777" \
    "-h" > "$out/corpus/spec/errors"
{
    for w in -O0 -O2 dce cse fuse-qkv fuse-gate-up fuse-norm-weight fuse-norm-matmul \
             fuse-residual-add fuse-matmul-pair fuse-rope-kv-write fuse-rope-kv-attention \
             matmul attention rms_norm rope , = -- -h --help -f -n -s -t --kv --big --temp \
             --scale --seed --string --count --flag f32 f16 int8 nan inf 1e39 0x1p3 \
             9223372036854775807 18446744073709551615; do
        printf '"%s"\n' "$w"
    done
    echo '"\x0a"'
} > "$out/spec.dict"
echo "built $out/spec_fuzz; seeds in $out/corpus/spec ($(ls "$out/corpus/spec" | wc -l) files)"
