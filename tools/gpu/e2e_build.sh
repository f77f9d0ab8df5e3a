#!/bin/bash
# e2e_build.sh: builds the end-to-end GPU check (the `loom` tool and tests/gpu_e2e:e2e_check,
# cudart linked statically) with -c opt and copies them, e2e.sh and the test models the check
# needs into the git-ignored gpu-bin/e2e/ (carry: ["gpu-bin/e2e"]). On the GPU machine:
#   bash gpu-bin/e2e/e2e.sh            # logs under $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
TD="${LOOM_TESTDATA:-$(pwd)/../shared/testdata}"
bazel build -c opt //tools:loom //tests/gpu_e2e:e2e_check "$@"
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
rm -rf gpu-bin/e2e
mkdir -p gpu-bin/e2e/testdata/golden gpu-bin/e2e/testdata/models
install -m 0755 "$bin/tools/loom" gpu-bin/e2e/loom
install -m 0755 "$bin/tests/gpu_e2e/e2e_check" gpu-bin/e2e/e2e_check
install -m 0755 tools/gpu/e2e.sh gpu-bin/e2e/e2e.sh
cp "$TD"/golden/*.gguf "$TD"/golden/sequences.txt gpu-bin/e2e/testdata/golden/
cp "$TD"/models/*.gguf gpu-bin/e2e/testdata/models/
du -sh gpu-bin/e2e
