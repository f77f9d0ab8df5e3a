#!/bin/bash
# build.sh: builds the libFuzzer harnesses with clang directly (Bazel's toolchain is gcc) into
# .fuzz/ (git-ignored) and makes a seed corpus from ../shared/testdata.
#   bash tools/fuzz/build.sh
#   .fuzz/gguf_fuzz -max_total_time=600 -max_len=65536 -print_final_stats=1 \
#       -artifact_prefix=.fuzz/ .fuzz/work/gguf .fuzz/corpus/gguf
# (new inputs go to .fuzz/work/gguf, crashes to .fuzz/crash-*; the seeds stay as they are).
# For more seeds, the reader test writes its crafted files when asked:
#   LOOM_GGUF_DUMP_CASES=$PWD/.fuzz/corpus/gguf bazel-bin/tests/gguf/gguf_reader_test
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.fuzz
mkdir -p "$out/corpus/gguf" "$out/work/gguf"
source tools/fuzz/common.sh
"$CC" "${fuzz_flags[@]}" tools/fuzz/gguf_fuzz.c loaders/gguf.c loaders/gguf_access.c \
    kernels/quant/types.c include/status.c \
    -o "$out/gguf_fuzz"
testdata="${LOOM_TESTDATA:-../shared/testdata}"
if [ -d "$testdata" ]; then
    for f in "$testdata"/*/*.gguf; do cp -f "$f" "$out/corpus/gguf/"; done
fi
echo "built $out/gguf_fuzz; seed corpus in $out/corpus/gguf ($(ls "$out/corpus/gguf" | wc -l) files)"
