#!/usr/bin/env bash
# Tests the artifacts scripts/dist.sh built, the way their users would use them, from a place that
# cannot see the repository: a private mount namespace where the repository, ~/.cargo and
# ~/.rustup are empty, PATH holds no cargo, HOME is new and no SYNAPS_* variable is set.
#   - a fresh venv installs the wheel and runs synaps_scope.run in a scope (tests/dist/check_wheel.py)
#   - an empty npm project installs the tarball (koffi from the registry) and spawns a scoped child,
#     with the package's own library, then with the C tarball's through the dynamic loader, then
#     with neither (tests/dist/check_npm.js)
#   - a C program and a C++ program, each built against the unpacked C tarball through pkg-config
#     and through CMake, shared and static, run their child in a scope
# Every artifact must use its own launcher program, found with no configuration. Run inside
# scripts/systemd-rig.sh (as scripts/test.sh does, on the oldest and newest systemd):
#
#   scripts/systemd-rig.sh --systemd 262 -- scripts/test-dist.sh dist
set -euo pipefail

if [ "${SYNAPS_DIST_HIDDEN:-}" != 1 ]; then
  repo="$(dirname "$(readlink -f "$0")")/.."
  repo="$(readlink -f "$repo")"
  dist="$(readlink -f "${1:?usage: $0 DIST-DIRECTORY}")"
  work="$(mktemp -d /tmp/synaps-dist-check.XXXXXX)"
  mkdir -p "$work/dist" "$work/src"
  cp "$dist"/* "$work/dist/"
  cp "$repo"/tests/dist/* "$repo/examples/c/spawn.c" "$work/src/"
  cp "$0" "$work/test-dist.sh"
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml")
  # npm's registry as configured for this user, before HOME changes.
  registry="$(npm config get registry)"
  hide=("$repo")
  for dir in "$HOME/.cargo" "$HOME/.rustup"; do [ -d "$dir" ] && hide+=("$dir"); done
  status=0
  SYNAPS_DIST_HIDDEN=1 npm_config_registry="$registry" npm_config_update_notifier=false unshare --mount --propagation private -- \
    bash -c 'for dir in "${@:4}"; do mount -t tmpfs -o ro tmpfs "$dir"; done; exec bash "$1/test-dist.sh" "$1" "$2" "$3"' \
    _ "$work" "$version" "$repo" "${hide[@]}" || status=$?
  rm -rf "$work"
  exit "$status"
fi

work="$1" version="$2" repo="$3"
cd "$work"
unset SYNAPS_SCOPE_EXEC SYNAPS_SCOPE_LAUNCHER SYNAPS_SCOPE_LIB SYNAPS_CONFIG CARGO_HOME RUSTUP_HOME \
  CARGO_TARGET_DIR XDG_CONFIG_HOME LD_LIBRARY_PATH
# The rig's PATH (its systemd-run first), less every directory that holds cargo or rustc.
user_path=""
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -x "$dir/cargo" ] || [ -x "$dir/rustc" ] || user_path="${user_path:+$user_path:}$dir"
done
export PATH="$user_path"
export HOME="$work/home"
mkdir -p "$HOME"
fail() { echo "test-dist: $*" >&2; exit 1; }
if command -v cargo >/dev/null || command -v rustc >/dev/null; then fail "cargo or rustc is on PATH"; fi
[ ! -e "$repo/Cargo.toml" ] || fail "the repository is visible at $repo"
passed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
# Every link to a file in the README of directory $1 and in its docs/ leads to one shipped there.
links_resolve() {
  local dir="$1" page target missing=()
  for page in "$dir/README.md" "$dir"/docs/*.md; do
    while read -r target; do
      target="${target%%#*}"
      case "$target" in "" | *://* | mailto:*) continue ;; esac
      [ -e "$(dirname "$page")/$target" ] || missing+=("${page#"$dir"/} -> $target")
    done < <(grep -o '](\([^)]*\))' "$page" | sed 's/^](\(.*\))$/\1/')
  done
  [ ${#missing[@]} -eq 0 ] || fail "in $dir, links to files not shipped: ${missing[*]}"
}

echo "== wheel: a fresh venv"
wheel=$(ls dist/synaps_scope-"$version"-cp39-abi3-manylinux*.whl)
python3 -m venv venv
venv/bin/pip install -q --no-index "$wheel"
(cd / && "$work/venv/bin/python" "$work/src/check_wheel.py" "$version")
pass "wheel"

echo "== npm: an empty project"
mkdir project
(cd project && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$work/dist/synaps-scope-$version.tgz")
cp src/check_npm.js project/
(cd project && node check_npm.js "$version" own)
pass "npm package, its own library"
(cd project && out=$(npx --no-install synaps-scope doctor) && grep -q '^verdict: *scopes will be used (exit 0)$' <<<"$out") \
  || fail "npx synaps-scope doctor did not report scopes"
pass "npx synaps-scope doctor"
links_resolve project/node_modules/synaps-scope
pass "npm package: the links of its README and docs lead to files in the package"

echo "== C tarball: unpacked"
mkdir c
tar -C c -xzf "dist/synaps-scope-$version-$(uname -m)-linux-gnu.tar.gz"
prefix="$work/c/synaps-scope-$version-$(uname -m)-linux-gnu"
[ "$(readelf -d "$prefix/lib/libsynaps_scope.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" = "libsynaps_scope.so.${version%%.*}" ] \
  || fail "the soname is not libsynaps_scope.so.${version%%.*}"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion synaps_scope)" = "$version" ] || fail "pkg-config says $(pkg-config --modversion synaps_scope)"
# Commands' output is captured before grep reads it: under pipefail, `cmd | grep -q` fails when
# grep's early exit kills cmd with SIGPIPE.
report=$("$prefix/bin/synaps-scope" doctor) || fail "the tarball's synaps-scope doctor exited $?: $report"
grep -qx "  synaps-scope-exec: $prefix/bin/../libexec/synaps-scope/synaps-scope-exec (in the libexec directory of $prefix/bin/synaps-scope)" <<<"$report" \
  || fail "the tarball's synaps-scope doctor does not use the tarball's launcher program: $report"
links_resolve "$prefix/share/doc/synaps-scope"
pass "C tarball: soname, pkg-config version, doctor, the links of its README and docs lead to files in it"

# The launcher program a shared build of the library uses: the tarball's, found from the library.
expect_scoped() {
  local what="$1" wrapper="$2"; shift 2
  local out unit cgroup
  out=$("$@" sh -c 'grep ^0:: /proc/$$/cgroup')
  unit=$(sed -n 's/^pid [0-9]* in \(synaps-tool-[0-9a-f]*\.scope\)$/\1/p' <<<"$out")
  cgroup=$(sed -n 's/^0:://p' <<<"$out")
  [ -n "$unit" ] && [ "${cgroup##*/}" = "$unit" ] || fail "$what did not run its child in its scope: $out"
  # Made by this user's own manager, in the subtree delegated to it.
  [[ "$cgroup" == */user@"$(id -u)".service/* ]] || fail "$what's scope is not under user@$(id -u).service: $cgroup"
  if [ -n "$wrapper" ]; then
    grep -qx "wrapper $wrapper" <<<"$out" || fail "$what used another wrapper than $wrapper: $out"
  fi
  pass "$what: child in $unit"
}
strict=(-Wall -Wextra -Werror -pedantic)
# shellcheck disable=SC2046 # pkg-config prints flags
cc -std=c11 "${strict[@]}" src/spawn.c $(pkg-config --cflags --libs synaps_scope) -Wl,-rpath,"$(pkg-config --variable=libdir synaps_scope)" -o spawn-c
grep -q "libsynaps_scope.so.${version%%.*} => $prefix/lib/" <<<"$(ldd spawn-c)" || fail "spawn-c does not load the tarball's library: $(ldd spawn-c)"
expect_scoped "C, pkg-config, shared" "" ./spawn-c
# shellcheck disable=SC2046
cc -std=c11 "${strict[@]}" src/spawn.c $(pkg-config --cflags synaps_scope) "$prefix/lib/libsynaps_scope.a" $(pkg-config --static --libs-only-l synaps_scope | sed 's/-lsynaps_scope\b//') -o spawn-c-static
if grep -q synaps_scope <<<"$(ldd spawn-c-static)"; then fail "the static C build loads the shared library"; fi
# A static link holds the library in the program itself, so no launcher program sits beside it:
# the launch goes through one in PATH or the system's libexec, else through systemd-run.
expect_scoped "C, pkg-config, static" "" ./spawn-c-static

# shellcheck disable=SC2046
c++ -std=c++17 "${strict[@]}" src/spawn.cpp $(pkg-config --cflags --libs synaps_scope) -Wl,-rpath,"$prefix/lib" -o spawn-cpp
expect_scoped "C++, pkg-config, shared" "$prefix/lib/../libexec/synaps-scope/synaps-scope-exec" ./spawn-cpp

cmake -S src -B build -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build >/dev/null
expect_scoped "C++, CMake, shared" "$prefix/lib/../libexec/synaps-scope/synaps-scope-exec" build/spawn-shared
grep -qx "version $version" <<<"$(build/spawn-shared true)" || fail "scope_version() is not $version"
expect_scoped "C++, CMake, static" "" build/spawn-static
expect_scoped "C, CMake, shared" "" build/spawn-c-shared
expect_scoped "C, CMake, static" "" build/spawn-c-static

echo "== npm: the system's C library, through the dynamic loader"
mv project/node_modules/synaps-scope/prebuilds prebuilds-aside
(cd project && LD_LIBRARY_PATH="$prefix/lib" node check_npm.js "$version" system "$prefix/lib")
pass "npm package, the C tarball's library by its soname"
(cd project && node check_npm.js "$version" none)
pass "npm package, no library: every place named"

echo "test-dist: $passed checks passed (systemd ${SYNAPS_RIG_SYSTEMD_VERSION:-?})"
