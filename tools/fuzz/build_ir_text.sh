#!/bin/bash
# build_ir_text.sh: builds the libFuzzer harness of the IR text parser (ir_text_fuzz.c) with
# clang into .fuzz/ (git-ignored); the seed corpus is the hand-written graphs of tests/ir/graphs.
#   bash tools/fuzz/build_ir_text.sh
#   .fuzz/ir_text_fuzz -max_total_time=600 -dict=.fuzz/ir_text.dict .fuzz/corpus/ir_text
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.fuzz
mkdir -p "$out/corpus/ir_text"
cp tests/ir/graphs/*.loom "$out/corpus/ir_text/"
source tools/fuzz/common.sh
"$CC" "${fuzz_flags[@]}" tools/fuzz/ir_text_fuzz.c "${ir_srcs[@]}" -lm -o "$out/ir_text_fuzz"
# Tokens of the syntax, so mutations stay close to valid text.
{
    for w in symbol meta input weight state output max= offset= size= '%' '@' ' = ' '(' ')' \
             '{' '}' '[' ']' ', ' ' : ' '\n' '#' T f32 f16 bf16 i32 q4_k q6_k q8_0 \
             get_rows rms_norm mul add matmul reshape rope kv_write attention silu softmax \
             argmax convert fused_rms_norm matmul_triple matmul_pair matmul_add eps= mode= \
             n_rot= freq_base= freq_scale= n_head= n_kv_head= head_dim= scale= swiglu= norm_eps= rope_kv_write \
             shape= dtype= neox norm 9223372036854775807 4294967296 3037000500 -1 1e39 \
             nan inf; do
        printf '"%s"\n' "$(printf '%s' "$w" | sed 's/\\/\\\\/g; s/"/\\"/g; s/$/\\n/; s/\\n$//')"
    done
    echo '"\x0a"'
} > "$out/ir_text.dict"
echo "built $out/ir_text_fuzz; corpus $out/corpus/ir_text; dict $out/ir_text.dict"
