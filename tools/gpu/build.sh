#!/bin/bash
# build.sh: builds the GPU-side binaries with Bazel (the CUDA conformance suite and the
# benchmarks, cudart linked statically) and copies them into the git-ignored folder gpu-bin/,
# ready for the device tool's `carry` (carry: ["gpu-bin"]). On the GPU machine:
#   gpu-bin/cuda_conformance [--quick]      # exit 0 = every kernel matches its CPU twin
#   gpu-bin/cuda_bench [--quick]            # prints the table of bench/RESULTS.md
#   bash gpu-bin/gpu_run.sh                 # both, plus compute-sanitizer, logs under $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build -c opt //tests/gpu:cuda_conformance //bench:cuda_bench "$@"
mkdir -p gpu-bin
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
install -m 0755 "$bin/tests/gpu/cuda_conformance" gpu-bin/cuda_conformance
install -m 0755 "$bin/bench/cuda_bench" gpu-bin/cuda_bench
install -m 0755 tools/gpu/gpu_run.sh gpu-bin/gpu_run.sh
ls -l gpu-bin
