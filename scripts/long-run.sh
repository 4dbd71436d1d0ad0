#!/usr/bin/env bash
# The long runs (issue 13): in one process each, through the C library installed at PREFIX (built
# against it with pkg-config), the Python module installed in VENV and the Node package, a million
# wraps and ten thousand probes, with the RSS sampled every 100,000 wraps; each fails unless the
# second half stays flat within 8 MB and the probes add under 8 MB. The three run at once, each a
# process of its own on one core (one after another they took 46, 113 and 185 s here): a leak is
# measured in its own process's RSS, which the others do not touch. Run inside
# scripts/systemd-rig.sh. Usage: scripts/long-run.sh PREFIX VENV
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
prefix="$1" venv="$2"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -std=c11 -Wall -Wextra -Werror -pedantic -O2 crates/ffi/tests/c/long_run.c \
  $(pkg-config --cflags --libs synaps_scope) -Wl,-rpath,"$prefix/lib" -o "$bin/long_run"
"$bin/long_run" >"$bin/c.log" 2>&1 &
c=$!
"$venv/bin/python" bindings/python/tests/long_run.py >"$bin/python.log" 2>&1 &
python=$!
SYNAPS_SCOPE_LIB="$prefix/lib/libsynaps_scope.so" node --expose-gc bindings/node/test/long_run.js >"$bin/node.log" 2>&1 &
node=$!
failed=0
for run in c python node; do
  wait "${!run}" || failed=1
  cat "$bin/$run.log"
done
exit "$failed"
