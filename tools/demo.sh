#!/bin/bash
# demo.sh: the furthest the pipeline goes today, on an embedded default model.
# Generates a small qwen3 model with `loom mkmodel`, inspects it, compiles it to an optimized
# protobuf graph (showing the op statistics), and runs the graph for 32 tokens on the CPU; with
# the shared test data, it also generates text from stories260K (tokenizer to text out).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //tools:loom >/dev/null 2>&1 || bazel build -c opt //tools:loom
loom=bazel-bin/tools/loom
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "== loom mkmodel: a 4-layer qwen3 model, Q4_K_M mix =="
$loom mkmodel -o "$out/demo.gguf" --arch qwen3 --layers 4 --hidden 512 --ffn 1536 --heads 8 \
    --kv-heads 4 --head-dim 64 --vocab 2048 --ctx 512 --quant q4_k_m --seed 1
echo
echo "== loom inspect =="
$loom inspect "$out/demo.gguf" > "$out/inspect.txt"   # (not piped: head would cut it off, SIGPIPE)
head -40 "$out/inspect.txt"
echo "... ($(wc -l < "$out/inspect.txt") lines in all)"
echo
echo "== loom compile: lower to a verified graph, write the .pb, op statistics =="
$loom compile "$out/demo.gguf" -o "$out/demo.pb" --stats
echo
echo "== loom run: the .pb (checked against demo.gguf next to it), 32 tokens on the CPU =="
$loom run "$out/demo.pb" --tokens 1,2,3,4,5,6,7,8 -n 32 --backend cpu

# A real trained model when the shared test data is there: text in, text out through the GGUF's
# own tokenizer (stories260K, TinyStories), greedy, stopping at EOS or after 40 tokens.
td="${LOOM_TESTDATA:-../shared/testdata}"
if [ -f "$td/models/stories260K.gguf" ]; then
    echo
    echo "== loom tokenize + loom run -p: stories260K (a real 260K-parameter model), greedy =="
    $loom tokenize "$td/models/stories260K.gguf" "Once upon a time" --ids --bos
    $loom run "$td/models/stories260K.gguf" -p "Once upon a time" -n 40 --backend cpu
fi
