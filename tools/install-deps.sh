#!/bin/bash
# install-deps.sh: installs what a fresh Debian machine lacks to build and test loom, and writes
# .bazelrc.local (the offline repository overrides, which need this checkout's absolute path).
# Does nothing that is already done; safe to run on every `make`.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# clang + libclang-rt-dev: the libFuzzer harnesses (tools/fuzz); graphviz: `dot` in tests/ir;
# python3-regex: tests/tokenizer/gen_pretok_cases.py, which regenerates pretok_cases.inc.
for pkg in bazel-bootstrap bazel-platforms protobuf-c-compiler libprotobuf-c-dev libcriterion-dev \
           clang libclang-rt-dev graphviz python3-pip python3-regex; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing ${need[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# llama.cpp's `gguf` Python package (pulls numpy) for the GGUF interop test, which skips without
# it: optional, so a failure only warns. --user --break-system-packages covers Debian's
# externally-managed python3.
if command -v python3 >/dev/null && ! python3 -c "import gguf" >/dev/null 2>&1; then
    python3 -m pip install --quiet gguf >/dev/null 2>&1 ||
        python3 -m pip install --quiet --user --break-system-packages gguf >/dev/null 2>&1 ||
        echo "install-deps: could not pip install gguf; the GGUF interop test will skip" >&2
fi

# The CUDA toolkit is not a Debian package here: tools/bazel/cuda.bzl runs /usr/local/cuda/bin/nvcc,
# and //tools:loom links the CUDA backend, so without it the build stops; say so up front.
[ -x /usr/local/cuda/bin/nvcc ] ||
    echo "install-deps: /usr/local/cuda/bin/nvcc not found: //kernels/cuda (linked into //tools:loom)" \
         "cannot build; install the CUDA toolkit (12.x or 13.x) under /usr/local/cuda" >&2

here="$(pwd)"
rc="build --override_repository=rules_cc=$here/third_party/bazel/rules_cc
build --override_repository=rules_java=$here/third_party/bazel/rules_java
build --override_repository=remote_coverage_tools=$here/third_party/bazel/remote_coverage_tools
build --override_repository=platforms=/usr/share/bazel/platforms
fetch --override_repository=rules_cc=$here/third_party/bazel/rules_cc
fetch --override_repository=rules_java=$here/third_party/bazel/rules_java
fetch --override_repository=remote_coverage_tools=$here/third_party/bazel/remote_coverage_tools
fetch --override_repository=platforms=/usr/share/bazel/platforms
query --override_repository=rules_cc=$here/third_party/bazel/rules_cc
query --override_repository=rules_java=$here/third_party/bazel/rules_java
query --override_repository=remote_coverage_tools=$here/third_party/bazel/remote_coverage_tools
query --override_repository=platforms=/usr/share/bazel/platforms"
if [ ! -f .bazelrc.local ] || [ "$(cat .bazelrc.local)" != "$rc" ]; then
    printf '%s\n' "$rc" > .bazelrc.local
fi
