#!/bin/sh
# A C compiler and linker driver whose programs and libraries need no glibc symbol newer than 2.17
# (manylinux2014): zig's cc with the glibc 2.17 target, through cargo-zigbuild, which adapts the
# arguments rustc passes to a linker. scripts/dist.sh names it as cargo's linker for the C library,
# the command line and the npm package's library; maturin --zig does the same for the wheel.
# zig comes from PyPI's ziglang (run by the python named in SYNAPS_ZIG_PYTHON, else python3).
export CARGO_ZIGBUILD_ZIG_COMMAND="${SYNAPS_ZIG_PYTHON:-python3}" CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'
exec cargo-zigbuild zig cc -- -g -fno-sanitize=all -target x86_64-linux-gnu.2.17 "$@"
