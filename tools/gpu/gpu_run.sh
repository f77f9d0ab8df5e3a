#!/bin/bash
# gpu_run.sh: the whole GPU session in one call (run on the device machine from the repo root,
# with gpu-bin/ carried): conformance (full), compute-sanitizer memcheck and racecheck on the
# --quick shape set, then the benchmarks. Logs go to $OUT (or ./gpu-out). Prints a summary.
#   bash gpu-bin/gpu_run.sh [conf|san|bench]...   (default: all three)
set -u
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
steps="${*:-conf san bench}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total,temperature.gpu,power.draw \
    --format=csv > "$OUT/gpu.txt" 2>&1
date -u >> "$OUT/gpu.txt"
summary=""
for s in $steps; do
    case "$s" in
    conf)
        gpu-bin/cuda_conformance > "$OUT/conformance.log" 2>&1
        summary+="conformance rc=$? $(tail -1 "$OUT/conformance.log")"$'\n'
        grep -E "FAIL|launcher failed" "$OUT/conformance.log" | head -20
        ;;
    san)
        SAN=compute-sanitizer
        command -v $SAN >/dev/null || SAN=/usr/local/cuda/bin/compute-sanitizer
        $SAN --tool memcheck --error-exitcode 9 gpu-bin/cuda_conformance --quick > "$OUT/memcheck.log" 2>&1
        summary+="memcheck rc=$? $(grep -E 'ERROR SUMMARY|cases' "$OUT/memcheck.log" | tr '\n' ' ')"$'\n'
        $SAN --tool racecheck --error-exitcode 9 gpu-bin/cuda_conformance --quick > "$OUT/racecheck.log" 2>&1
        summary+="racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|cases' "$OUT/racecheck.log" | tr '\n' ' ')"$'\n'
        ;;
    bench)
        gpu-bin/cuda_bench > "$OUT/bench.log" 2>&1
        summary+="bench rc=$?"$'\n'
        cat "$OUT/bench.log"
        ;;
    esac
done
echo "$summary"
