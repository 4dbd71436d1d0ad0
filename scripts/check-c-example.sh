#!/usr/bin/env bash
# Builds examples/c/spawn.c against an installed libsynaps_scope through pkg-config, linked both
# shared and static, with -Wall -Wextra -Werror -pedantic, and checks that each puts its child in
# the scope it names. Run inside scripts/systemd-rig.sh. Usage: scripts/check-c-example.sh PREFIX
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
prefix="$1"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
strict=(-std=c11 -Wall -Wextra -Werror -pedantic)
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT

# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc "${strict[@]}" examples/c/spawn.c $(pkg-config --cflags --libs synaps_scope) -Wl,-rpath,"$prefix/lib" -o "$bin/spawn-shared"
static_libs=$(pkg-config --static --libs synaps_scope | sed 's/-lsynaps_scope\b/-l:libsynaps_scope.a/')
# shellcheck disable=SC2046,SC2086
cc "${strict[@]}" examples/c/spawn.c $(pkg-config --cflags synaps_scope) $static_libs -o "$bin/spawn-static"
# (grep reads a captured string: `ldd | grep -q` under pipefail fails when grep's early exit
# kills ldd with SIGPIPE.)
if grep -q synaps_scope <<<"$(ldd "$bin/spawn-static")"; then echo "check-c-example: the static build links the .so" >&2; exit 1; fi

for linkage in shared static; do
  out=$("$bin/spawn-$linkage" sh -c 'grep ^0:: /proc/$$/cgroup')
  unit=$(printf '%s\n' "$out" | sed -n 's/^pid [0-9]* in \(synaps-tool-[0-9a-f]*\.scope\)$/\1/p')
  cgroup=$(printf '%s\n' "$out" | sed -n 's/^0:://p')
  if [ -z "$unit" ] || [ "${cgroup##*/}" != "$unit" ]; then
    echo "check-c-example: the $linkage example did not run its child in its scope:" >&2
    printf '%s\n' "$out" >&2
    exit 1
  fi
  echo "C example ($linkage, pkg-config): child ran in $unit"
done
status=0
"$bin/spawn-shared" synaps-no-such-program 2>/dev/null || status=$?
[ "$status" = 127 ] || { echo "check-c-example: a missing program gave $status, not 127" >&2; exit 1; }
