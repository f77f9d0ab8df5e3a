#!/usr/bin/env python3
"""interop.py: GGUF interoperability between loom and llama.cpp's `gguf` Python package.

    interop.py check FILE   read FILE with gguf.GGUFReader and compare it with SPEC (exit 1 on
                            any difference, printing each one)
    interop.py write FILE   write SPEC with gguf.GGUFWriter

SPEC is the same content that tests/gguf/interop_test.c writes with loom's writer and checks
with loom's reader (keep the two in step): every metadata value type, arrays of every element
type including strings and a nested array, a custom alignment, and tensors of several ggml types
and 1..4 dimensions whose bytes follow pattern_bytes().
"""
import struct
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as V, GGMLQuantizationType as Q

KEYS = [
    ("general.architecture", V.STRING, "loomtest", None),
    ("general.alignment", V.UINT32, 64, None),
    ("test.u8", V.UINT8, 200, None),
    ("test.i8", V.INT8, -100, None),
    ("test.u16", V.UINT16, 60000, None),
    ("test.i16", V.INT16, -30000, None),
    ("test.u32", V.UINT32, 4000000000, None),
    ("test.i32", V.INT32, -2000000000, None),
    ("test.f32", V.FLOAT32, 1.5, None),
    ("test.bool", V.BOOL, True, None),
    ("test.string", V.STRING, 'h\u00e9llo "q"\n\t\\ \u2713', None),
    ("test.empty_string", V.STRING, "", None),
    ("test.u64", V.UINT64, 2**63 + 5, None),
    ("test.i64", V.INT64, -(2**62) - 3, None),
    ("test.f64", V.FLOAT64, 3.141592653589793, None),
    ("test.arr.u8", V.ARRAY, [1, 2, 255], V.UINT8),
    ("test.arr.i8", V.ARRAY, [-128, 0, 127], V.INT8),
    ("test.arr.u16", V.ARRAY, [0, 65535], V.UINT16),
    ("test.arr.i16", V.ARRAY, [-32768, 32767], V.INT16),
    ("test.arr.u32", V.ARRAY, [7, 4294967295], V.UINT32),
    ("test.arr.i32", V.ARRAY, [-1, 0, 2147483647], V.INT32),
    ("test.arr.f32", V.ARRAY, [0.5, -2.25, 1e30], V.FLOAT32),
    ("test.arr.bool", V.ARRAY, [True, False, True], V.BOOL),
    ("test.arr.string", V.ARRAY, ["a", "", "ccc \u2713"], V.STRING),
    ("test.arr.u64", V.ARRAY, [0, 2**64 - 1], V.UINT64),
    ("test.arr.i64", V.ARRAY, [-(2**63), 2**63 - 1], V.INT64),
    ("test.arr.f64", V.ARRAY, [1e-300, -0.0], V.FLOAT64),
    ("test.arr.nested", V.ARRAY, [[1, 2], [3]], V.ARRAY),  # array of arrays of i32
]

# name, ggml type, ne (ggml order: ne[0] is the row length)
TENSORS = [
    ("t.f32", Q.F32, [4, 3]),
    ("t.f16", Q.F16, [8]),
    ("t.bf16", Q.BF16, [2, 2, 2, 2]),
    ("t.q8_0", Q.Q8_0, [64, 2]),
    ("t.q4_k", Q.Q4_K, [256, 1, 2]),
    ("t.q6_k", Q.Q6_K, [256]),
    ("t.q5_k", Q.Q5_K, [512, 1]),
]


def pattern_bytes(index, nbytes):
    """Tensor `index`'s bytes: byte i is (i * 131 + index * 17 + 7) mod 256."""
    i = np.arange(nbytes, dtype=np.uint64)
    return ((i * 131 + index * 17 + 7) % 256).astype(np.uint8)


def tensor_nbytes(qtype, ne):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = 1
    for d in ne:
        n *= d
    return n // block * size


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def flatten(v):
    return [y for x in v for y in flatten(x)] if isinstance(v, list) else [v]


def check(path):
    errors = []
    reader = gguf.GGUFReader(path)
    fields = [(k, f) for k, f in reader.fields.items() if not k.startswith("GGUF.")]
    names = [k for k, _ in fields]
    want_names = [k[0] for k in KEYS]
    if names != want_names:
        errors.append(f"keys {names} != {want_names}")
    fmap = dict(fields)
    for key, vtype, val, sub in KEYS:
        f = fmap.get(key)
        if f is None:
            continue
        if f.types[0] != vtype:
            errors.append(f"{key}: type {f.types[0].name} != {vtype.name}")
            continue
        got = f.contents()
        want = val
        if vtype == V.ARRAY:
            if sub == V.ARRAY:
                want_types = [V.ARRAY, V.ARRAY, V.INT32]
                want = flatten(val)
                # parts: key len, key, type, itype, n, then per inner array: itype, n, elements
                inner = [int(p[0]) for p in f.parts[5:] if p.dtype == np.uint64]
                if inner != [len(x) for x in val]:
                    errors.append(f"{key}: inner array lengths {inner}")
            else:
                want_types = [V.ARRAY, sub]
            if list(f.types) != want_types:
                errors.append(f"{key}: types {[t.name for t in f.types]}")
            if sub == V.FLOAT32:
                want = [f32(x) for x in val]
        elif vtype == V.FLOAT32:
            want = f32(val)
        if vtype == V.ARRAY and sub in (V.FLOAT32, V.FLOAT64):
            same = [struct.pack("<d", a) for a in got] == [struct.pack("<d", b) for b in want]
        else:
            same = got == want
        if not same:
            errors.append(f"{key}: value {got!r} != {want!r}")
    tnames = [t.name for t in reader.tensors]
    if tnames != [t[0] for t in TENSORS]:
        errors.append(f"tensors {tnames}")
    tmap = {t.name: t for t in reader.tensors}
    for index, (name, qtype, ne) in enumerate(TENSORS):
        t = tmap.get(name)
        if t is None:
            continue
        if t.tensor_type != qtype:
            errors.append(f"{name}: type {t.tensor_type.name} != {qtype.name}")
        if [int(x) for x in t.shape] != ne:
            errors.append(f"{name}: shape {list(t.shape)} != {ne}")
        nbytes = tensor_nbytes(qtype, ne)
        if t.n_bytes != nbytes:
            errors.append(f"{name}: n_bytes {t.n_bytes} != {nbytes}")
        if t.data_offset % 64 != 0:
            errors.append(f"{name}: data offset {t.data_offset} not 64-aligned")
        if t.data.tobytes() != pattern_bytes(index, nbytes).tobytes():
            errors.append(f"{name}: bytes differ")
    for e in errors:
        print("interop check: " + e, file=sys.stderr)
    if not errors:
        print(f"interop check: {path}: {len(KEYS)} keys and {len(TENSORS)} tensors match")
    return 1 if errors else 0


def write(path):
    w = gguf.GGUFWriter(path, "loomtest")  # writes general.architecture first
    for key, vtype, val, sub in KEYS[1:]:
        if key == "general.alignment":
            w.add_custom_alignment(val)
        else:
            w.add_key_value(key, val, vtype, sub_type=sub)
    for index, (name, qtype, ne) in enumerate(TENSORS):
        data = pattern_bytes(index, tensor_nbytes(qtype, ne))
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        byte_shape = list(reversed(ne))
        byte_shape[-1] = ne[0] // block * size
        w.add_tensor(name, data.reshape(byte_shape), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[2]) if sys.argv[1] == "check" else write(sys.argv[2]))
