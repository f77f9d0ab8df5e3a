#!/usr/bin/env python3
"""unalign_norms.py SRC.gguf DST.gguf: the same model with every layer's attn_norm / ffn_norm
weight at a file offset = 8 (mod 16) (general.alignment 8; every other tensor 32-aligned).

fuse-norm-matmul folds those norms like any other; the CUDA kernels read a folded norm weight as
float4, so with mapped weights (`loom run --weights mapped`, where the device pointer keeps the
file offset's alignment) the CUDA backend must run such a node as rms_norm + the plain matmul
(executor/cuda_backend.h, loom_exec_cuda_prenorm_folds). Session 6's device check (host R1)
compared -O2, -O2 less fuse-norm-matmul, LOOM_CUDA_PRENORM=0 and the CPU on the result.
KV pairs and tensor data are copied byte for byte (gguf-py's reader); only the layout changes.
"""
import struct
import sys

import gguf


def main(src, dst):
    r = gguf.GGUFReader(src)
    raw = open(src, 'rb').read()
    kvs = [b''.join(bytes(p.tobytes()) for p in f.parts) for name, f in r.fields.items()
           if not name.startswith('GGUF.') and name != 'general.alignment']
    key = b'general.alignment'
    kvs.append(struct.pack('<Q', len(key)) + key + struct.pack('<II', 4, 8))  # u32 8
    infos, blobs, off = [], [], 0
    for t in r.tensors:
        off = (off + 31) // 32 * 32
        if t.name.endswith(('attn_norm.weight', 'ffn_norm.weight')):
            off += 8
        name = t.name.encode()
        dims = [int(d) for d in t.shape]
        infos.append(struct.pack('<Q', len(name)) + name + struct.pack('<I', len(dims)) +
                     b''.join(struct.pack('<Q', d) for d in dims) +
                     struct.pack('<IQ', int(t.tensor_type), off))
        blobs.append((off, raw[t.data_offset:t.data_offset + t.n_bytes]))
        off += t.n_bytes
    head = b'GGUF' + struct.pack('<IQQ', 3, len(r.tensors), len(kvs)) + b''.join(kvs)
    head += b''.join(infos)
    head += b'\0' * (-len(head) % 8)
    data = bytearray(off)
    for o, b in blobs:
        data[o:o + len(b)] = b
    with open(dst, 'wb') as f:
        f.write(head + bytes(data))
    moved = [t.name for t in gguf.GGUFReader(dst).tensors if t.data_offset % 16]
    print(f'{dst}: {len(moved)} tensors at offsets not 16-byte aligned')


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: unalign_norms.py SRC.gguf DST.gguf')
    main(sys.argv[1], sys.argv[2])
