#!/bin/bash
# demo.sh: the furthest the pipeline goes today, on an embedded default model.
# Generates a small qwen3 model with `loom mkmodel`, inspects it, compiles it to an optimized
# protobuf graph (showing the op statistics), and runs the graph for 32 tokens on the CPU.
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
$loom inspect "$out/demo.gguf" | head -40
