#!/bin/bash
# pack_bin.sh: e2e_build.sh's folder (loom, e2e_check, e2e.sh, the test models) plus
# cuda_conformance, cuda_bench and step_timeline with CUPTI, stripped, as DEST/b.tar.xz (default
# gpu-bin-x, git-ignored; under the device tool's 64 MiB carry limit: carry DEST). On the device:
# tar xJf DEST/b.tar.xz -C /tmp/b gives them in /tmp/b/e2e. Usage: pack_bin.sh [DEST].
set -euo pipefail
cd "$(dirname "$0")/../.."
D="${1:-gpu-bin-x}"
st="$D/stage/e2e"
rm -rf "$D/stage"
E2E_EXTRA="tests/gpu/cuda_conformance bench/cuda_bench bench/step_timeline" \
    bash tools/gpu/e2e_build.sh "$st"
for f in loom e2e_check cuda_conformance cuda_bench step_timeline; do strip "$st/$f"; done
cp /usr/local/cuda/lib64/libcupti.so.13 "$st/"
(cd "$D/stage" && XZ_OPT=-T2 tar cJf ../b.tar.xz e2e)
rm -rf "$D/stage"
ls -la "$D/b.tar.xz"
