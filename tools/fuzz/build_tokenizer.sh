#!/bin/bash
# build_tokenizer.sh: builds the libFuzzer harness of the tokenizer (tokenizer_fuzz.c) with clang
# into .fuzz/ (git-ignored), with a seed corpus of texts (the vocab test strings of
# ../shared/testdata, mode byte prepended) and of vocabulary files (mode byte 0): the test models'
# GGUF header and metadata with the tensors left out (~10 KB where the files are ~1.1 MB, so that
# the fuzzer mutates the tokenizer's keys at ~100x the rate).
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
import glob, os, struct, sys
td, out = sys.argv[1], sys.argv[2]
k = 0
for inp in glob.glob(td + "/vocab/*.inp"):
    for s in open(inp, "rb").read().split(b"\n__ggml_vocab_test__\n"):
        for mode in (32, 41, 57, 200):
            open(os.path.join(out, "text%04d" % k), "wb").write(bytes([mode]) + s)
            k += 1
# GGUF v3: magic, version, tensor count, key count, then the keys; the copy keeps the keys and
# declares no tensors (the file ends after the metadata)
fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(b, o, t):
    if t in fixed:
        return o + fixed[t]
    if t == 8:
        return o + 8 + struct.unpack_from("<Q", b, o)[0]
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, o)
        o += 12
        if et in fixed:
            return o + fixed[et] * n
        for _ in range(n):
            o = skip(b, o, et)
        return o
    raise ValueError("GGUF value type %d" % t)
for g in glob.glob(td + "/golden/tiny_qwen2*.gguf") + glob.glob(td + "/models/stories260K.gguf"):
    b = open(g, "rb").read()
    magic, ver, _, nkv = struct.unpack_from("<4sIQQ", b, 0)
    o = 24
    for _ in range(nkv):
        o += 8 + struct.unpack_from("<Q", b, o)[0]
        o = skip(b, o + 4, struct.unpack_from("<I", b, o)[0])
    meta = struct.pack("<4sIQQ", magic, ver, 0, nkv) + b[24:o]
    open(os.path.join(out, "gguf%04d" % k), "wb").write(b"\x00" + meta)
    k += 1
PY
fi
echo "built $out/tokenizer_fuzz; seed corpus in $out/corpus/tokenizer ($(ls "$out/corpus/tokenizer" | wc -l) files)"
