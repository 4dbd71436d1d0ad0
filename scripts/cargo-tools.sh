#!/usr/bin/env bash
# The cargo subcommands the suite and the release build run, from crates.io at pinned versions,
# each installed once into cargo's bin directory when it is missing:
#   cargo-c          cargo cinstall: the C library, its header, pkg-config and CMake files
#   cargo-zigbuild   the artifacts linked against glibc 2.17 (scripts/dist.sh)
#   cargo-fuzz       the fuzz targets (scripts/fuzz.sh)
# Built without optimisation or debug info: optimised, cargo-c (which compiles cargo itself) took
# 9.5 minutes of a fresh two-core machine's run; what these tools do is hand work to cargo and
# rustc, whose speed is their own.
#   scripts/cargo-tools.sh cargo-c cargo-zigbuild cargo-fuzz
set -euo pipefail
for tool in "$@"; do
  case "$tool" in
    cargo-c) command -v cargo-cinstall >/dev/null && continue; spec=(cargo-c --version 0.10.24+cargo-0.98.0) ;;
    cargo-zigbuild) command -v cargo-zigbuild >/dev/null && continue; spec=(cargo-zigbuild --version 0.24.1) ;;
    cargo-fuzz) command -v cargo-fuzz >/dev/null && continue; spec=(cargo-fuzz --version 0.13.2) ;;
    *) echo "cargo-tools.sh: unknown tool '$tool' (cargo-c, cargo-zigbuild, cargo-fuzz)" >&2; exit 2 ;;
  esac
  echo "== installing $tool from crates.io (once)"
  CARGO_PROFILE_DEV_DEBUG=0 cargo install -q --locked --debug "${spec[@]}"
done
