#!/usr/bin/env python3
"""sass_loops.py: where a kernel's inner-loop instructions come from (no GPU needed).

Builds one kernels/cuda/*.cu file for one architecture with the build's flags plus -lineinfo
into a cubin, disassembles it with nvdisasm -gi, and for every kernel whose mangled name
contains NAME prints each loop (a backward branch) that holds tensor-core mma instructions
(IMMA/HMMA), innermost first (--all: the loops around them too): its SASS count, its mma
count, the opcode mix and the instructions charged to the source line each came from (the
innermost inlined frame). A loop is the layout's range from a label to a branch back to it, so
a range the compiler interleaved with other code counts that code too: the mma count says
whether a range is one step. bench/NOTES.md 7, sessions 27-28, used this to find the GEMV
steps' register copies and address arithmetic.

nvdisasm is not in this machine's toolkit; PyPI has it:
    pip download --no-deps nvidia-cuda-nvdisasm -d /tmp/nvd && cd /tmp/nvd && unzip -oq *.whl
    export NVDISASM=/tmp/nvd/nvidia/cu13/bin/nvdisasm

Usage (repository root):
    python3 tools/gpu/sass_loops.py kernels/cuda/gemv_mma_q6k.cu 'gemv_mma_q6kILi1ELi2ELb0ELi2ELb1E'
    [--arch sm_90a] [--lines N] [--all] (N source lines a loop, largest first; default 25)
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

NVCC = "/usr/local/cuda/bin/nvcc"
INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P[0-9T]\s+)?([A-Z0-9_.]+)")
FRAME = re.compile(r'\s*//## File "([^"]+)", line (\d+)')
LABEL = re.compile(r"^(\.L_x_\d+):")
BRANCH = re.compile(r"BRA(?:\.[A-Z]+)? `\((\.L_x_\d+)\)")


def fail(msg):
    sys.stderr.write("sass_loops: %s\n" % msg)
    sys.exit(1)


def find_nvdisasm():
    for cand in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"),
                 "/usr/local/cuda/bin/nvdisasm"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail("no nvdisasm: set NVDISASM (see this file's docstring for the PyPI wheel)")


def functions(sass):
    """{mangled name: [lines]} of the disassembly's .text sections."""
    out, name = {}, None
    for line in sass.split("\n"):
        m = re.match(r"\s*\.section\s+\.text\.([^,]+),", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def loops(lines):
    """(start, end) of each backward branch's range that holds an mma instruction."""
    labels = {}
    for i, line in enumerate(lines):
        m = LABEL.match(line)
        if m:
            labels[m.group(1)] = i
    for i, line in enumerate(lines):
        m = BRANCH.search(line)
        if m and labels.get(m.group(1), i) < i:
            a = labels[m.group(1)]
            if any(("IMMA" in x or "HMMA" in x) for x in lines[a:i + 1]):
                yield a, i


def charge(lines):
    """Instructions of lines, by (file, line) of their innermost frame, and by opcode."""
    by_src, ops, frame, fresh = collections.Counter(), collections.Counter(), ("?", 0), True
    for line in lines:
        m = FRAME.match(line)
        if m:
            if fresh:  # the first frame printed before an instruction is its innermost one
                frame = (os.path.basename(m.group(1)), int(m.group(2)))
                fresh = False
            continue
        m = INSTR.search(line)
        if m:
            by_src[frame] += 1
            ops[m.group(2).split(".")[0]] += 1
            fresh = True
    return by_src, ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="a .cu file of kernels/cuda")
    ap.add_argument("name", help="a substring of the kernels' mangled names")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--lines", type=int, default=25)
    ap.add_argument("--all", action="store_true", help="the outer loops around them too")
    a = ap.parse_args()
    if not os.path.isfile(a.source):
        fail("%s: no such file" % a.source)
    nvdisasm = find_nvdisasm()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        arch = a.arch.replace("sm_", "")
        cmd = [NVCC, "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-lineinfo", "-I.", "-Iinclude",
               "-gencode", "arch=compute_%s,code=sm_%s" % (arch, arch), "-cubin", "-o", cubin,
               a.source]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail("nvcc failed:\n" + r.stderr[-4000:])
        r = subprocess.run([nvdisasm, "-gi", "-c", cubin], capture_output=True, text=True)
        if r.returncode != 0:
            fail("nvdisasm failed:\n" + r.stderr[-4000:])
    found = 0
    for fn, lines in functions(r.stdout).items():
        if a.name not in fn:
            continue
        found += 1
        print(fn)
        found_loops = sorted(set(loops(lines)), key=lambda r: r[1] - r[0])
        inner = []
        for s, e in found_loops:  # innermost first; a range holding one already kept is outer
            if a.all or not any(s <= s2 and e2 <= e for s2, e2 in inner):
                inner.append((s, e))
        for s, e in inner:
            by_src, ops = charge(lines[s:e + 1])
            mma = sum(n for op, n in ops.items() if op in ("IMMA", "HMMA"))
            print("  loop (disassembly lines %d-%d): %d SASS, %d mma" %
                  (s + 1, e + 1, sum(ops.values()), mma))
            print("    " + ", ".join("%s %d" % kv for kv in ops.most_common(12)))
            for (f, ln), n in by_src.most_common(a.lines):
                print("    %4d  %s:%d" % (n, f, ln))
    if not found:
        fail("no kernel of %s has '%s' in its mangled name" % (a.source, a.name))


if __name__ == "__main__":
    main()
