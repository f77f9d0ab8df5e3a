#!/bin/bash
# pack_bin.sh: packs the -c opt GPU binaries (loom, e2e_check, cuda_conformance, cuda_bench,
# step_timeline with CUPTI) and the test models e2e_check reads into DEST/b.tar.xz (default
# gpu-bin-x, git-ignored; carry it). On the device: tar xJf DEST/b.tar.xz -C /tmp/b -> /tmp/b/e2e.
# Run the bazel build (-c opt) first; refuses binaries linked against a sanitizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
D="${1:-gpu-bin-x}"
TD="${LOOM_TESTDATA:-$(pwd)/../shared/testdata}"
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
st="$D/stage/e2e"
rm -rf "$D/stage" && mkdir -p "$st/testdata/golden" "$st/testdata/models"
for f in tools/loom tests/gpu_e2e/e2e_check tests/gpu/cuda_conformance bench/cuda_bench bench/step_timeline; do
    if ldd "$bin/$f" | grep -q -E "libasan|libubsan"; then
        echo "pack_bin: $f is linked against a sanitizer; rebuild plain" >&2
        exit 1
    fi
    install -m 0755 "$bin/$f" "$st/"
    strip "$st/$(basename "$f")"
done
cp "$TD"/golden/*.gguf "$TD"/golden/sequences.txt "$st/testdata/golden/"
cp "$TD"/models/*.gguf "$st/testdata/models/"
cp /usr/local/cuda/lib64/libcupti.so.13 "$st/"
(cd "$D/stage" && XZ_OPT=-T2 tar cJf ../b.tar.xz e2e)
rm -rf "$D/stage"
ls -la "$D/b.tar.xz"
