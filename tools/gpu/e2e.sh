#!/bin/bash
# e2e.sh: the executor's GPU verification in one call (device machine, repo root, the folder
# this script lies in carried; built by tools/gpu/e2e_build.sh). Logs under $OUT (default
# ./gpu-out-e2e):
#   e2e_check.log   CUDA vs CPU logits on every test model (kv f32/f16/int8 x 1/2 streams x
#                   graphs on/off) and greedy 64 tokens, tolerances in tests/gpu_e2e/e2e_check.c
#   stories_*.txt   stories260K text on cuda and cpu
#   bench*.txt      `loom bench -p 512 -n 128 --backend cuda` on a Qwen3-4B-shaped Q4_K_M model
#                   made here by `loom mkmodel` (graphs on = replay, LOOM_CUDA_GRAPH_REPLAY=0 =
#                   capture per token, graphs off, 2 streams)
#   ab_*.json       the same bench with LOOM_CUDA_PDL=0, LOOM_CUDA_Q4K_TILES=0 (Q4_K weights in
#                   rows), LOOM_CUDA_Q6K_TILES=0 (Q6_K weights in rows), then LOOM_GEMV_MMA /
#                   LOOM_GEMV_MMA_Q6K / LOOM_GEMV_TRIPLE_MIXED / LOOM_GEMV_PERSIST / LOOM_ATTN_V6 /
#                   LOOM_CUDA_PRENORM / LOOM_ATTN_FUSED / LOOM_GEMM_WIDE / LOOM_ATTN_PREFILL =0,
#                   LOOM_GEMV_MMA_Q6K_V=1 (the f16 Q6_K body), LOOM_GEMV_MMA_Q4K_V=1 (the f16
#                   Q4_K body), LOOM_GEMM_WIDE_Q6K=4 (the wide Q6_K GEMM staging x in each
#                   block: the fallback of the default 7 without scratch), LOOM_GEMM_WIDE_Q4K_I8=4
#                   (the wide INT8 Q4_K GEMM so: the fallback of the default 5), LOOM_ATTN_TMA=0
#                   (attention tiles by cp.async instead of TMA) and the opt-in path
#                   LOOM_ATTN_PREFILL=2 (the 8-warp prefill attention), in turn
#   bench_profile.* LOOM_CUDA_PROFILE=1: time per op family of a decode step (graphs off)
#   skip.txt        decode ms/token with one op family's launches left out in turn
#                   (LOOM_CUDA_PROFILE_SKIP; graphs replayed): each family's cost in the real step
#   fold_*.json     the RMSNorm fold: the bench at -O2 and at -O2 without fuse-norm-matmul
#                   (loom bench --passes), alternated twice in one call; fold.txt the summary
#   attnfold_*.json the attention fold (rope_kv_attention): the bench at -O2 with
#                   LOOM_ATTN_FUSED=1 (the fused kernel, the default), at -O2 with =0 (the
#                   launcher's two launches) and at -O2 without
#                   fuse-rope-kv-attention (two nodes), A B C A B C (ATTNFOLD_ROUNDS=N: N
#                   rounds, default 2); attnfold.txt the summary
#   bash DEST/e2e.sh [check] [stories] [bench] [ab] [profile] [skip] [fold] [attnfold]
#                   (default: the first three)
#   e2e_check.log also holds the graph-replay section (graphs on == off bit for bit over a
#   64-token generation, 1 instantiation / 0 updates); bench.txt's stderr the graph stats.
set -u
OUT="${OUT:-gpu-out-e2e}"
mkdir -p "$OUT"
B="$(dirname "$0")"
steps="${*:-check stories bench}"
# The Qwen3-4B-shaped Q4_K_M model of the bench steps, made here once (timed in mkmodel.txt).
M=/tmp/qwen3-4b-q4km.gguf
make_model() {
    [ -f $M ] || /usr/bin/time -f "mkmodel %e s" $B/loom mkmodel -o $M --arch qwen3 \
        --quant q4_k_m --layers 36 --hidden 2560 --ffn 9728 --heads 32 --kv-heads 8 \
        --head-dim 128 --vocab 151936 --ctx 4096 > "$OUT/mkmodel.txt" 2>&1
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total,temperature.gpu,power.draw \
    --format=csv > "$OUT/gpu.txt" 2>&1
date -u >> "$OUT/gpu.txt"
for s in $steps; do
    case "$s" in
    check)
        timeout 200 $B/e2e_check $B/testdata > "$OUT/e2e_check.log" 2>&1
        echo "e2e_check rc=$? $(tail -1 "$OUT/e2e_check.log")"
        grep -E "FAIL|divergence" "$OUT/e2e_check.log" | head -20
        ;;
    stories)
        for be in cuda cpu; do
            timeout 60 $B/loom run $B/testdata/models/stories260K.gguf -p "Once upon a time" -n 40 \
                --backend $be > "$OUT/stories_$be.txt" 2> "$OUT/stories_$be.err"
            echo "stories $be rc=$?: $(head -c 300 "$OUT/stories_$be.txt")"; tail -2 "$OUT/stories_$be.err"
        done
        cmp -s "$OUT/stories_cuda.txt" "$OUT/stories_cpu.txt" && echo "stories: cuda == cpu text" || echo "stories: cuda != cpu text"
        ;;
    ab)
        # decode and prefill with PDL switched off, then each fast path switched off or opt-in
        # path switched on, in turn, against `bench`
        make_model
        for v in LOOM_CUDA_PDL=0 LOOM_CUDA_Q4K_TILES=0 LOOM_CUDA_Q6K_TILES=0 LOOM_GEMV_MMA=0 LOOM_GEMV_MMA_Q6K=0 \
                 LOOM_GEMV_TRIPLE_MIXED=0 LOOM_GEMV_PERSIST=0 \
                 LOOM_GEMV_MMA_Q6K_V=1 LOOM_ATTN_V6=0 LOOM_CUDA_PRENORM=0 \
                 LOOM_ATTN_FUSED=0 LOOM_GEMM_WIDE=0 LOOM_ATTN_PREFILL=0 LOOM_GEMV_MMA_Q4K_V=1 \
                 LOOM_GEMM_WIDE_Q6K=4 LOOM_GEMM_WIDE_Q4K_I8=4 \
                 LOOM_ATTN_TMA=0 LOOM_ATTN_PREFILL=2; do
            env $v timeout 60 $B/loom bench $M -p 512 -n 128 -r 2 --backend cuda --json \
                > "$OUT/ab_$v.json" 2> "$OUT/ab_$v.err"
            echo "bench $v rc=$?"; cat "$OUT/ab_$v.json"; tail -2 "$OUT/ab_$v.err"
        done
        ;;
    profile)
        make_model
        LOOM_CUDA_PROFILE=1 timeout 80 $B/loom bench $M -p 512 -n 32 -r 1 --backend cuda \
            > "$OUT/bench_profile.txt" 2> "$OUT/bench_profile.err"
        echo "bench profile rc=$?"; grep -A16 "loom cuda profile" "$OUT/bench_profile.err"
        ;;
    skip)
        # decode with each family's launches left out (results wrong, timing only), graphs on;
        # at -O2 the layer norms are folded into the triples and pairs (fuse-norm-matmul), so
        # fused_rms_norm is the final norm only and the layer norms' cost is inside the matmul rows;
        # the attention and its prologue are one rope_kv_attention (fuse-rope-kv-attention)
        make_model
        for ops in none fused_rms_norm rope_kv_attention attention rope_kv_write matmul_triple \
                   matmul_add matmul_pair matmul \
                   fused_rms_norm,rope_kv_attention,attention,rope_kv_write,matmul_triple,matmul_add,matmul_pair,matmul; do
            v=$ops; [ $ops = none ] && v=
            ms=$(LOOM_CUDA_PROFILE_SKIP=$v timeout 60 $B/loom bench $M -p 512 -n 128 -r 3 \
                 --backend cuda --json 2>> "$OUT/skip.err" | grep -o '"ms_per_token": [0-9.]*')
            echo "skip $ops: $ms" | tee -a "$OUT/skip.txt"
        done
        ;;
    fold)
        # -O2 (norms folded into the matmuls) against -O2 less fuse-norm-matmul, same binary and
        # model, A B A B so drift shows; decode ms/token, prefill t/s, activation arena
        make_model
        U=fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write
        U=$U,fuse-rope-kv-attention,cse,dce
        for r in 1 2; do
            for p in -O2 $U; do
                n=fold; [ $p = -O2 ] || n=unfolded
                timeout 60 $B/loom bench $M -p 512 -n 128 -r 3 --backend cuda --passes=$p --json \
                    > "$OUT/fold_${n}_$r.json" 2> "$OUT/fold_${n}_$r.err"
                rc=$?
                echo "fold $n run $r rc=$rc: $(grep -o '"pp": {[^}]*}\|"ms_per_token": [0-9.]*\|"fraction": [0-9.]*' \
                    "$OUT/fold_${n}_$r.json" | tr '\n' ' ') $(grep -o 'activations [0-9.]* MiB\|[0-9]* launched' \
                    "$OUT/fold_${n}_$r.err" | tr '\n' ' ')" | tee -a "$OUT/fold.txt"
                [ $rc = 0 ] || tail -2 "$OUT/fold_${n}_$r.err"
            done
        done
        ;;
    attnfold)
        # -O2 with LOOM_ATTN_FUSED=1 (rope_kv_attention: one launch a layer, the default), the same
        # with LOOM_ATTN_FUSED=0 (the launcher's two launches) and -O2 less fuse-rope-kv-attention (rope_kv_write and
        # attention nodes), same binary and model, A B C A B C; decode ms/token, prefill t/s
        make_model
        U=fuse-norm-weight,fuse-qkv,fuse-gate-up,fuse-residual-add,fuse-rope-kv-write
        U=$U,fuse-norm-matmul,cse,dce
        for r in $(seq 1 "${ATTNFOLD_ROUNDS:-2}"); do
            for n in fused twolaunch unfused; do
                p=-O2; e=LOOM_ATTN_FUSED=1
                [ $n = twolaunch ] && e=LOOM_ATTN_FUSED=0
                [ $n = unfused ] && p=$U
                env $e timeout 60 $B/loom bench $M -p 512 -n 128 -r 3 --backend cuda --passes=$p \
                    --json > "$OUT/attnfold_${n}_$r.json" 2> "$OUT/attnfold_${n}_$r.err"
                rc=$?
                echo "attnfold $n run $r rc=$rc: $(grep -o '"pp": {[^}]*}\|"ms_per_token": [0-9.]*' \
                    "$OUT/attnfold_${n}_$r.json" | tr '\n' ' ') $(grep -o '[0-9]* launched' \
                    "$OUT/attnfold_${n}_$r.err" | tr '\n' ' ')" | tee -a "$OUT/attnfold.txt"
                [ $rc = 0 ] || tail -2 "$OUT/attnfold_${n}_$r.err"
            done
        done
        ;;
    bench)
        make_model
        tail -2 "$OUT/mkmodel.txt"
        timeout 150 $B/loom bench $M -p 512 -n 128 -r 3 --backend cuda > "$OUT/bench.txt" 2> "$OUT/bench.err"
        echo "bench rc=$?"; cat "$OUT/bench.txt"; tail -3 "$OUT/bench.err"
        LOOM_CUDA_GRAPH_REPLAY=0 timeout 100 $B/loom bench $M -p 512 -n 128 -r 2 --backend cuda --json \
            > "$OUT/bench_recapture.json" 2> "$OUT/bench_recapture.err"
        echo "bench replay=0 (capture + update per token) rc=$?"; cat "$OUT/bench_recapture.json"; tail -2 "$OUT/bench_recapture.err"
        LOOM_CUDA_GRAPHS=0 timeout 100 $B/loom bench $M -p 512 -n 128 -r 2 --backend cuda --json \
            > "$OUT/bench_nographs.json" 2> "$OUT/bench_nographs.err"
        echo "bench graphs=0 rc=$?"; cat "$OUT/bench_nographs.json"; tail -2 "$OUT/bench_nographs.err"
        timeout 100 $B/loom bench $M -p 512 -n 128 -r 2 --backend cuda --streams 2 --json \
            > "$OUT/bench_streams2.json" 2> "$OUT/bench_streams2.err"
        echo "bench streams=2 rc=$?"; cat "$OUT/bench_streams2.json"; tail -2 "$OUT/bench_streams2.err"
        $B/loom run $M --tokens 1,2,3,4 -n 8 --backend cuda > "$OUT/run_4b.txt" 2> "$OUT/run_4b.err"
        echo "run 4b rc=$?"; tail -4 "$OUT/run_4b.err"
        ;;
    esac
done
