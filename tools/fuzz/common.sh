# common.sh: what the build*.sh beside it share (sourced from the repository root, not run): the
# compiler, the harnesses' libFuzzer + sanitizer flags, and the IR library's sources as one glob,
# so that a harness linking the IR follows the library's files as they change.
CC="${CC:-clang}"
fuzz_flags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -DLOOM_DEBUG=1 -I. -Iinclude
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
ir_srcs=(ir/*.c include/status.c kernels/quant/types.c)
