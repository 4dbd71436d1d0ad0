#!/usr/bin/env bash
# Builds the launcher program the way it ships: release, linked statically against glibc
# (static-pie), so a launch does not pay for the dynamic loader (about 0.5 ms a launch, measured
# side by side on systemd 262 with benches/launch.rs). Prints the path of the built program.
# Only the launcher program is static: the libraries (C, Python, Node) stay dynamic.
#
#   scripts/build-exec.sh            # honours CARGO_TARGET_DIR
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
cargo rustc -q --release --locked -p synaps-scope-exec --bin synaps-scope-exec -- -C target-feature=+crt-static
echo "${CARGO_TARGET_DIR:-$PWD/target}/release/synaps-scope-exec"
