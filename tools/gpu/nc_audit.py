#!/usr/bin/env python3
"""nc_audit.py: every non-coherent global load of the CUDA kernels, and what it reads.

A kernel launched with programmatic dependent launch (kernels/cuda/common.cuh: launch(),
pdl_wait()) is resident while the kernels before it on the stream still write; a load through
the non-coherent read-only path (PTX ld.global.nc, SASS LDG.E*.CONSTANT: __ldg, or what the
compiler derives from const __restrict__) may serve a stale line after griddepcontrol.wait. Only
data constant for the whole program (weights, norm weights) may be read so; activations, the
residual, q/k/v, partials, scratch, logits and the KV cache must not (bench/NOTES.md 7, session
18). Two views, one per input kind:

PTX (nvcc -ptx): per kernel, every ld.global.nc and the parameter it reads, found by a backward
slice over the address (through add/sub/mov/cvta/and/or/selp and mad's addend, never through
index arithmetic: mul, shl, cvt), named as "param N +OFF" (OFF: the byte offset inside a by-value
struct parameter; "+ 64*i": an array of 64-byte elements indexed at run time, e.g. Seg seg[3]).
Map N and OFF to the field by hand from the kernel's signature and struct layout. A load merging
several pointers (selp) counts once under each, so the totals may exceed the loads.

SASS with line info (nvdisasm -gi of a cubin built with -lineinfo): per kernel, every
LDG*.CONSTANT and the kernels/cuda source line it comes from. A CONSTANT load whose innermost
frame is not the __ldg intrinsic (sm_32_intrinsics.hpp) is the compiler's own promotion of a
plain load; those are marked "PROMOTED" and make the exit status 1. (Audit at c61bb9a: none,
and every object's CONSTANT loads equal its PTX ld.global.nc in number, sm_87 and sm_90a alike.)

Usage (from the repository root; cuobjdump / nvdisasm come with the toolkit, or from PyPI's
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm where the toolkit lacks them):
    FLAGS="-std=c++17 -O3 -I. -Iinclude -Ibazel-bin -gencode arch=compute_90a,code=sm_90a"
    nvcc $FLAGS -ptx kernels/cuda/gemv.cu -o /tmp/gemv.ptx          # (code=compute_90a)
    nvcc $FLAGS -lineinfo -cubin kernels/cuda/gemv.cu -o /tmp/gemv.cubin
    nvdisasm -gi /tmp/gemv.cubin > /tmp/gemv.sass
    python3 tools/gpu/nc_audit.py /tmp/gemv.ptx /tmp/gemv.sass [--full] [--kernel SUBSTR]
An object or cubin is also taken (cuobjdump -ptx, which needs PTX embedded; the kernels/cuda
objects carry SASS only). Exit status: 0, or 1 when SASS shows a PROMOTED load.
"""
import argparse
import collections
import math
import re
import shutil
import subprocess
import sys

ENTRY_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(")
PARAM_RE = re.compile(r"\[\s*([\w$]+_param_(\d+))\s*(?:\+\s*(-?\d+))?\s*\]")
REG_RE = re.compile(r"%[\w$]+")
NO_DEST = ("st.", "st ", "red.", "prefetch", "cp.", "bar", "ret", "bra", "membar", "fence",
           "griddepcontrol", "barrier", "exit", "trap", "call", "mbarrier.init", "cp.async",
           "stmatrix", "wgmma.fence", "wgmma.commit", "wgmma.wait", "elect", "setmaxnreg")
FOLLOW_ALL = ("add.", "sub.", "mov.", "cvta.", "and.", "or.", "xor.", "selp.")


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                         text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def fold_templates(name):
    """void ns::kernel<...>(args) -> ns::kernel<>: template arguments, the return type and the
    parameter list dropped, so all instances of one kernel group together."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<>")
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    if s.endswith(")"):  # strip the trailing balanced parameter list
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += s[i] == ")"
            depth -= s[i] == "("
            if depth == 0:
                s = s[:i]
                break
    s = s.replace("(anonymous namespace)::", "")
    return s.split(" ")[-1] if " " in s else s


def kernels(text):
    """Yields (mangled name, [instruction strings]) for every .entry of a PTX text."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = ENTRY_RE.match(lines[i])
        if not m:
            i += 1
            continue
        name = m.group(1)
        while i < len(lines) and "{" not in lines[i]:
            i += 1
        depth, body = 0, []
        while i < len(lines):
            s = lines[i].split("//")[0]
            depth += s.count("{") - s.count("}")
            body.append(s)
            i += 1
            if depth == 0:
                break
        yield name, instructions(body)


def instructions(body):
    """Statements of a kernel body (';'-terminated), labels and braces dropped."""
    text = "\n".join(body)
    out = []
    for stmt in text.split(";"):
        s = stmt.strip()
        # inline-asm scopes: drop the braces, keep what is inside
        s = re.sub(r"^[{}\s]+", "", s)
        s = re.sub(r"^\$?[\w$]+:\s*", "", s)  # label
        s = s.strip()
        if not s or s.startswith("."):
            continue
        out.append(s)
    return out


def split_ops(operands):
    """Top-level comma split that keeps {a,b} vectors and [addr] whole."""
    ops, cur, depth = [], "", 0
    for ch in operands:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        ops.append(cur.strip())
    return ops


def parse(stmt):
    s = re.sub(r"^@!?%[\w$]+\s+", "", stmt)  # predicate guard
    parts = s.split(None, 1)
    return parts[0], split_ops(parts[1]) if len(parts) > 1 else []


def audit_kernel(insts):
    defs = collections.defaultdict(list)
    parsed = []
    for st in insts:
        op, ops = parse(st)
        parsed.append((op, ops))
        if not ops or op.startswith(NO_DEST):
            continue
        for r in REG_RE.findall(ops[0]):
            defs[r].append((op, ops))

    def stride_of(reg, depth=0):
        """The constant a dynamic index register is a multiple of (mul/shl by an immediate,
        through cvt and mov), or None."""
        if depth > 8:
            return None
        for op, ops in defs.get(reg, []):
            srcs = ops[1:]
            imm = [int(x) for x in srcs if re.fullmatch(r"-?\d+", x)]
            regs = [x for x in srcs if x.startswith("%")]
            if op.startswith(("mul.wide", "mul.lo")) and imm:
                return abs(imm[0])
            if op.startswith("shl.") and imm:
                return 1 << imm[0]
            if op.startswith(("cvt.", "mov.")) and len(regs) == 1:
                return stride_of(regs[0], depth + 1)
            if op.startswith("add.") and len(regs) == 2:
                a, b = stride_of(regs[0], depth + 1), stride_of(regs[1], depth + 1)
                return math.gcd(a, b) if a and b else None
        return None

    def param_base(reg, depth=0):
        """(param number, constant offset) when reg is a parameter's address plus constants
        (and possibly indices: then the strides collected in `dyn`), else None."""
        if depth > 16:
            return None
        for op, ops in defs.get(reg, []):
            srcs = ops[1:]
            if op.startswith("mov.") and srcs and "_param_" in srcs[0]:
                return (re.search(r"_param_(\d+)", srcs[0]).group(1), 0, [])
            if op.startswith(("add.", "cvta.", "mov.")):
                regs = [x for x in srcs if x.startswith("%")]
                imm = sum(int(x) for x in srcs if re.fullmatch(r"-?\d+", x))
                for i, r in enumerate(regs):
                    b = param_base(r, depth + 1)
                    if b:
                        dyn = list(b[2]) + [stride_of(o) for o in regs if o != r]
                        return (b[0], b[1] + imm, dyn)
        return None

    def param_slots(addr):
        """Names the parameter slot of an ld.param address: [sym+off], or [%reg+off] with %reg
        the address of a parameter (mov.b64 %reg, sym) plus constants and indices."""
        m = PARAM_RE.search(addr)
        if m:
            return ["param %s +%s" % (m.group(2), m.group(3) or 0)]
        m = re.search(r"\[\s*(%[\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]", addr)
        b = param_base(m.group(1)) if m else None
        if not b:
            return ["param ? " + addr]
        off = b[1] + int(m.group(2) or 0)
        dyn = "".join(" + %s*i" % (d if d else "?") for d in b[2])
        return ["param %s +%d%s" % (b[0], off, dyn)]

    def roots_of(addr_regs):
        """Backward slice of an address; returns {root description: via_cvta}."""
        roots = {}
        seen = set()
        work = [(r, False) for r in addr_regs]
        while work:
            reg, cvta = work.pop()
            if (reg, cvta) in seen:
                continue
            seen.add((reg, cvta))
            for op, ops in defs.get(reg, []):
                srcs = ops[1:]
                if op.startswith("ld.param"):
                    if not re.search(r"\.(u64|b64|s64)$", op):
                        continue  # a 32-bit parameter: an index or a size, not a pointer
                    for key in param_slots(srcs[0] if srcs else ""):
                        roots[key] = True
                    continue
                if op.startswith("ld.") or op.startswith("atom") or op.startswith("ldu"):
                    # pointer read from memory: name where that address comes from
                    inner = roots_of(REG_RE.findall(srcs[0]) if srcs else [])
                    m = PARAM_RE.search(srcs[0]) if srcs else None
                    space = op.split(".")[1] if "." in op else op
                    if m:
                        inner = {"param %s" % m.group(2): True}
                    for k in inner or {"?": False}:
                        key = "indirect: %s via %s" % (space, k)
                        roots[key] = True
                    continue
                if op.startswith("mov.") and srcs and "_param_" in srcs[0]:
                    m = re.search(r"_param_(\d+)", srcs[0])
                    key = "param %s (address of the struct, dynamic offset)" % m.group(1)
                    roots[key] = True
                    continue
                if op.startswith("cvta.to.global"):
                    follow = srcs
                    nxt = True
                elif op.startswith(FOLLOW_ALL):
                    follow = srcs[:2] if op.startswith("selp.") else srcs
                    nxt = cvta
                elif op.startswith("mad."):
                    follow = srcs[2:3]
                    nxt = cvta
                else:
                    continue  # index arithmetic (mul, shl, cvt, ...) or a special register
                for s in follow:
                    for r in REG_RE.findall(s):
                        work.append((r, nxt))
        return roots

    result = collections.defaultdict(lambda: [0, set()])
    for op, ops in parsed:
        if not op.startswith("ld.global.nc") and not op.startswith("ld.global.ca.nc"):
            continue
        addr = ops[-1] if ops else ""
        width = op[len("ld.global.nc."):] if op.startswith("ld.global.nc.") else op
        roots = roots_of(REG_RE.findall(addr)) if REG_RE.findall(addr) else {}
        if not roots:
            roots = {"? " + addr: True}
        for k, via in roots.items():
            key = k
            result[key][0] += 1
            result[key][1].add(width)
    return result


def audit_sass(text):
    """{mangled kernel: Counter of 'ldg FILE:LINE' / 'PROMOTED FILE:LINE'} for every
    LDG*.CONSTANT of nvdisasm -gi text; the site is the innermost kernels/cuda frame."""
    out = collections.OrderedDict()
    fn, block, info = None, [], False
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            fn, block, info = m.group(1), [], False
            out.setdefault(fn, collections.Counter())
            continue
        if line.lstrip().startswith("//## File"):
            if not info:
                block = []
            block.append(line.strip()[len("//## "):].split(" inlined at ")[0])
            info = True
            continue
        if "/*" not in line:
            continue
        info = False
        if fn is None or not re.search(r"\bLDG\S*\.CONSTANT\b", line):
            continue
        kind = "ldg" if block and "sm_32_intrinsics" in block[0] else "PROMOTED"
        site = next((b for b in block if "kernels/cuda/" in b), block[0] if block else "?")
        m = re.match(r'File "(.*?)", line (\d+)', site)
        site = "%s:%s" % (m.group(1).split("kernels/cuda/")[-1], m.group(2)) if m else site
        out[fn]["%s %s" % (kind, site)] += 1
    return out


def read_input(path):
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"\x7fELF" or path.endswith((".o", ".a", ".so", ".cubin", ".fatbin")):
        exe = shutil.which("cuobjdump")
        if not exe:
            sys.exit("nc_audit: %s is an object and cuobjdump is not on PATH" % path)
        return subprocess.run([exe, "-ptx", path], capture_output=True, text=True).stdout
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--full", action="store_true", help="one entry per template instance")
    ap.add_argument("--kernel", default="", help="only kernels whose name contains this")
    args = ap.parse_args()
    per = collections.OrderedDict()
    names = {}
    for path in args.inputs:
        text = read_input(path)
        if "//## File" in text or re.search(r"^\s*\.text\.\S+:", text, re.M):
            for mangled, res in audit_sass(text).items():
                names[mangled] = None
                per.setdefault(mangled, {}).update(
                    {"sass: " + k: [n, {"SASS"}] for k, n in res.items()})
        else:
            for mangled, insts in kernels(text):
                names[mangled] = None
                per.setdefault(mangled, {}).update(audit_kernel(insts))
    dem = demangle(list(names))
    grouped = collections.OrderedDict()
    for mangled, res in per.items():
        name = dem[mangled] if args.full else fold_templates(dem[mangled])
        if args.kernel and args.kernel not in name:
            continue
        g = grouped.setdefault(name, collections.OrderedDict())
        g.setdefault("__n", [0, set()])[0] += 1
        for k, (n, w) in res.items():
            e = g.setdefault(k, [0, set()])
            e[0] += n
            e[1] |= w
    total = 0
    for name, g in grouped.items():
        inst = g.pop("__n")[0]
        n = sum(v[0] for v in g.values())
        total += n
        print("%s  [%d instance%s]%s" % (name, inst, "" if inst == 1 else "s",
                                          "" if g else "  none"))
        for k, (cnt, w) in sorted(g.items()):
            print("    %-60s %6d  (%s)" % (k, cnt, ", ".join(sorted(w))))
    promoted = sum(v[0] for g in grouped.values() for k, v in g.items() if "PROMOTED" in k)
    print("total: %d hits%s" % (total, ", %d PROMOTED (not __ldg)" % promoted if promoted else ""))
    return 1 if promoted else 0


if __name__ == "__main__":
    sys.exit(main())
