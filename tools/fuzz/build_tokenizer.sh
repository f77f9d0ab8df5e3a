#!/bin/bash
# build_tokenizer.sh: builds the libFuzzer harness of the tokenizer (tokenizer_fuzz.c) with clang
# into .fuzz/ (git-ignored), with a seed corpus of texts (the vocab test strings of
# ../shared/testdata, mode byte prepended) and of vocabulary files (mode byte 0).
#   bash tools/fuzz/build_tokenizer.sh
#   LOOM_TESTDATA=../shared/testdata .fuzz/tokenizer_fuzz -max_total_time=300 .fuzz/corpus/tokenizer
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.fuzz
mkdir -p "$out/corpus/tokenizer"
source tools/fuzz/common.sh
"$CC" "${fuzz_flags[@]}" tools/fuzz/tokenizer_fuzz.c loaders/tokenizer.c \
    loaders/tokenizer_encode.c loaders/pretok.c loaders/unicode.c loaders/gguf.c \
    loaders/gguf_access.c loaders/gguf_writer.c kernels/quant/types.c include/status.c -lm \
    -o "$out/tokenizer_fuzz"
testdata="${LOOM_TESTDATA:-../shared/testdata}"
if [ -d "$testdata/vocab" ]; then
    python3 - "$testdata" "$out/corpus/tokenizer" <<'PY'
import glob, os, sys
td, out = sys.argv[1], sys.argv[2]
k = 0
for inp in glob.glob(td + "/vocab/*.inp"):
    for s in open(inp, "rb").read().split(b"\n__ggml_vocab_test__\n"):
        for mode in (32, 41, 57, 200):
            open(os.path.join(out, "text%04d" % k), "wb").write(bytes([mode]) + s)
            k += 1
for g in glob.glob(td + "/golden/tiny_qwen2*.gguf") + glob.glob(td + "/models/stories260K.gguf"):
    open(os.path.join(out, "gguf%04d" % k), "wb").write(b"\x00" + open(g, "rb").read())
    k += 1
PY
fi
echo "built $out/tokenizer_fuzz; seed corpus in $out/corpus/tokenizer ($(ls "$out/corpus/tokenizer" | wc -l) files)"
