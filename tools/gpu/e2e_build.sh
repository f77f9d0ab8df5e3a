#!/bin/bash
# e2e_build.sh: builds the end-to-end GPU check (the `loom` tool and tests/gpu_e2e:e2e_check,
# cudart linked statically) with -c opt and copies them, e2e.sh and the test models the check
# needs into the git-ignored folder DEST (default gpu-bin/e2e; one per engineer, e.g.
# gpu-bin-exec: carry it). On the GPU machine:
#   bash DEST/e2e.sh [steps]           # logs under $OUT
# Usage: e2e_build.sh [DEST] [bazel flags...]. Refuses binaries linked against a sanitizer.
# E2E_EXTRA="pkg/name ..." builds and copies those binaries too (//pkg:name; tools/gpu/pack_bin.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
TD="${LOOM_TESTDATA:-$(pwd)/../shared/testdata}"
D=gpu-bin/e2e
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then D="$1"; shift; fi
bins="tools/loom tests/gpu_e2e/e2e_check ${E2E_EXTRA:-}"
targets=""
for f in $bins; do targets+=" //${f%/*}:${f##*/}"; done
bazel build -c opt $targets "$@"
bin="$(bazel info -c opt "$@" bazel-bin 2>/dev/null)"
for f in $bins; do
    if ldd "$bin/$f" | grep -q -E "libasan|libubsan"; then
        echo "e2e_build: $bin/$f is linked against a sanitizer; rebuild plain" >&2
        exit 1
    fi
done
rm -rf "$D"
mkdir -p "$D/testdata/golden" "$D/testdata/models"
for f in $bins; do install -m 0755 "$bin/$f" "$D/${f##*/}"; done
install -m 0755 tools/gpu/e2e.sh "$D/e2e.sh"
cp "$TD"/golden/*.gguf "$TD"/golden/sequences.txt "$D/testdata/golden/"
cp "$TD"/models/*.gguf "$D/testdata/models/"
du -sh "$D"
