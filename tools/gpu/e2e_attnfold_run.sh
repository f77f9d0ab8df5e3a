#!/bin/bash
# e2e_attnfold_run.sh: the device-side run of the attention fold (fuse-rope-kv-attention,
# rope_kv_attention -> loom_cuda_rope_kv_attention_at), copied into the carried folder as run.sh
# next to tools/gpu/e2e_build.sh's binaries (stripped, xz'd):
#   1. e2e_check (CUDA vs CPU on every test model, KV f32/f16/int8 x 1/2 streams x graphs on/off,
#      greedy, graph replay: one capture, 63 replays, with the fused node; CUDA -O2 == CUDA
#      without each fold, bit for bit), then e2e_check again with LOOM_ATTN_FUSED=0 (the
#      launcher's two launches; the default is the fused kernel);
#   2. stories260K text, CUDA == CPU;
#   3. `loom bench` of the Qwen3-4B-shaped Q4_K_M model: -O2, -O2 with LOOM_ATTN_FUSED=0 and -O2
#      less fuse-rope-kv-attention, A B C A B C (e2e.sh attnfold; ATTNFOLD_ROUNDS=N rounds),
#      then e2e.sh skip (RKX_SKIP= leaves it out);
#   4. compute-sanitizer memcheck of a short CUDA generation on the fused qwen3 graph.
# Only the three real models that mkmodel cannot make travel (qwen2 with biases, stories260K,
# llama-2-tiny-random); the golden llama (f32 f16 q8_0 q6_k q5_k q4_k) and qwen3 q4_k_m models
# are remade here by mkmodel with their shapes (hidden 256, ffn 768, heads 4/2, vocab 512, 2
# layers) under their file names: CUDA is compared with the CPU, not with the golden logits.
# Usage (device, repo root): bash gpu-bin-rkx/run.sh   (logs: $OUT/rkx/, one tarball + summary)
set -u
D="$(dirname "$0")"
E="$D/e2e"
O="${OUT:-gpu-out}/rkx"
L=/tmp/rkx-logs
mkdir -p "$O" "$L"
for f in "$E"/*.xz; do
    xz -d -f "$f" 2> /dev/null ||
        python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$f"
done
chmod +x "$E/loom" "$E/e2e_check"
TD="$E/testdata"
mkdir -p "$TD/golden" "$TD/models"
mk() { "$E/loom" mkmodel -o "$TD/golden/$1.gguf" --arch "$2" --quant "$3" --layers 2 --hidden 256 \
          --ffn 768 --heads 4 --kv-heads 2 --vocab 512 --seed 7 > /dev/null 2>&1 || echo "mkmodel $1 failed"; }
for q in f32 f16 q8_0 q6_k q5_k q4_k; do mk tiny_llama_$q llama $q; done
mk tiny_qwen3_q4km qwen3 q4_k_m
echo "testdata: $(ls "$TD"/golden/*.gguf "$TD"/models/*.gguf | wc -l) models [t=${SECONDS}s]"
OUT="$L" timeout 90 bash "$E/e2e.sh" check stories > "$L/summary.txt" 2>&1
grep -v "^$" "$L/summary.txt" | cut -c1-160 | head -16
for f in "norm fold" "attention fold"; do
    grep -A21 "^$f" "$L/e2e_check.log" | grep FAIL | cut -c1-140 | head -4
    echo "$f (cuda -O2 == unfolded, bits): $(grep -A21 "^$f" "$L/e2e_check.log" | grep -c ' ok: ') of 20 rows ok"
done
echo "graph replay rows ok: $(grep -A33 '^graph replay' "$L/e2e_check.log" | grep -c ' ok: ')"
LOOM_ATTN_FUSED=0 timeout 60 "$E/e2e_check" "$TD" > "$L/e2e_check_fused0.log" 2>&1
echo "e2e_check LOOM_ATTN_FUSED=0 rc=$? $(tail -1 "$L/e2e_check_fused0.log")"
grep FAIL "$L/e2e_check_fused0.log" | cut -c1-140 | head -4
echo "attention fold with LOOM_ATTN_FUSED=0 (bits): $(grep -A21 "^attention fold" "$L/e2e_check_fused0.log" | grep -c ' ok: ') of 20 rows ok"
echo "[t=${SECONDS}s]"
OUT="$L" ATTNFOLD_ROUNDS="${ATTNFOLD_ROUNDS:-2}" timeout 100 bash "$E/e2e.sh" attnfold ${RKX_SKIP-skip} \
    > "$L/summary2.txt" 2>&1
grep -v "^$" "$L/summary2.txt" | cut -c1-200 | head -24
echo "[t=${SECONDS}s]"
SAN=compute-sanitizer
command -v $SAN > /dev/null || SAN=/usr/local/cuda/bin/compute-sanitizer
timeout 40 $SAN --tool memcheck --error-exitcode 9 "$E/loom" run "$TD/golden/tiny_qwen3_q4km.gguf" \
    --tokens 1,2,3,4,5 -n 8 --backend cuda --kv f16 > "$L/memcheck.log" 2>&1
echo "memcheck (loom run, fused qwen3, cuda) rc=$? $(grep 'ERROR SUMMARY' "$L/memcheck.log")"
tar -czf "$O/logs.tgz" -C "$L" . && rm -rf "$L"
echo "done [t=${SECONDS}s]"
