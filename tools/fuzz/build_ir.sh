#!/bin/bash
# build_ir.sh: builds the libFuzzer harness of the protobuf graph deserializer (ir_fuzz.c) with
# clang directly into .fuzz/ (git-ignored), and its seed corpus .fuzz/corpus/ir: a hand-written
# layer and every golden model of ../shared/testdata lowered and serialized (ir_seed.c).
# protoc-c's generated C is compiled with clang and the same sanitizers; protobuf-c itself is
# the static archive (-l:libprotobuf-c.a, uninstrumented).
#   bash tools/fuzz/build_ir.sh
#   .fuzz/ir_fuzz -max_total_time=600 .fuzz/corpus/ir
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.fuzz
gen="$out/gen/ir/serialize"
mkdir -p "$gen" "$out/corpus/ir"
protoc-c --proto_path=ir/serialize --c_out="$gen" ir/serialize/loom_graph.proto
source tools/fuzz/common.sh
ser_srcs=(ir/serialize/read.c ir/serialize/write.c ir/serialize/source_id.c
          "$gen/loom_graph.pb-c.c")
"$CC" "${fuzz_flags[@]}" -I"$out/gen" tools/fuzz/ir_fuzz.c "${ir_srcs[@]}" "${ser_srcs[@]}" \
    -l:libprotobuf-c.a -lm -o "$out/ir_fuzz"
"$CC" -std=c11 -D_GNU_SOURCE -g -O1 -I. -Iinclude -I"$out/gen" tools/fuzz/ir_seed.c \
    "${ir_srcs[@]}" "${ser_srcs[@]}" \
    loaders/gguf.c loaders/gguf_access.c loaders/lower.c -l:libprotobuf-c.a -lm -o "$out/ir_seed"
testdata="${LOOM_TESTDATA:-../shared/testdata}"
models=()
[ -d "$testdata/golden" ] && models=("$testdata"/golden/*.gguf)
"$out/ir_seed" "$out/corpus/ir" "${models[@]}"
echo "built $out/ir_fuzz; seed corpus in $out/corpus/ir ($(ls "$out/corpus/ir" | wc -l) files)"
