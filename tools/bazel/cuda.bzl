"""cuda_library: compiles .cu files with nvcc in genrules and wraps the objects in a cc_library.

Bazel 4 has no CUDA rules and we build offline, so each .cu becomes one genrule that runs
/usr/local/cuda/bin/nvcc for sm_87 (Jetson Orin) and sm_90a (H100/H200) with -Xptxas -v. The
ptxas resource report (registers, shared memory, stack frame, spill stores/loads per kernel and
architecture) is kept as an output file `<name>_ptxas/<file>.ptxas.txt`, collected in the
filegroup `<name>_ptxas`, so a test can fail on spills without a GPU. The objects are host+device
objects (whole-program compilation, no relocatable device code), linked against the static
CUDA runtime, so binaries carry no libcudart dependency. `--define loom_lineinfo=1` adds
-lineinfo (source lines for ncu and compute-sanitizer; the same SASS): tools/bazel/BUILD.

Usage (in a BUILD file):
    load("//tools/bazel:cuda.bzl", "cuda_library")
    cuda_library(name = "cuda", srcs = ["gemv.cu"], hdrs = ["cuda_kernels.h"],
                 cuda_hdrs = ["common.cuh"], extra_srcs = ["//include:loom/status.h"])
"""

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-gencode arch=compute_87,code=sm_87",
    "-gencode arch=compute_90a,code=sm_90a",
    "-Xcompiler -fPIC",
    "-Xptxas -v",
    "-I.",
    "-Iinclude",
    "-I$(GENDIR)",
])

def _nvcc_cmd(src, obj, log, extra):
    return ("{nvcc} {flags} {extra} -c $(location {src}) -o $(location {obj}) " +
            "2> $(location {log}) || {{ cat $(location {log}) >&2; exit 1; }}").format(
        nvcc = NVCC,
        flags = NVCC_FLAGS,
        extra = " ".join(extra),
        src = src,
        obj = obj,
        log = log,
    )

def cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], extra_srcs = [], deps = [],
                 visibility = None, nvcc_flags = []):
    """srcs: .cu files; hdrs: public C headers; cuda_hdrs: private .cuh headers;
    extra_srcs: headers of other packages the .cu files include (exported files)."""
    objs = []
    logs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_library srcs must be .cu files: " + src)
        base = src[:-3]
        obj = "%s_obj/%s.o" % (name, base)
        log = "%s_ptxas/%s.ptxas.txt" % (name, base)
        native.genrule(
            name = "%s_nvcc_%s" % (name, base.replace("/", "_")),
            srcs = [src] + hdrs + cuda_hdrs + extra_srcs,
            outs = [obj, log],
            # ptxas -v writes its report on stderr; keep it, and show it when nvcc fails.
            cmd = select({
                "//tools/bazel:lineinfo": _nvcc_cmd(src, obj, log, nvcc_flags + ["-lineinfo"]),
                "//conditions:default": _nvcc_cmd(src, obj, log, nvcc_flags),
            }),
            tags = ["no-remote"],
            message = "nvcc " + src,
        )
        objs.append(obj)
        logs.append(log)

    native.filegroup(
        name = name + "_ptxas",
        srcs = logs,
        visibility = visibility,
    )
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps,
        linkopts = ["-L/usr/local/cuda/lib64", "-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lstdc++", "-lm"],
        visibility = visibility,
    )
