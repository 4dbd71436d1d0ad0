#!/usr/bin/env bash
# Builds every artifact a user installs, into dist/ (or $SYNAPS_DIST_DIR):
#   synaps_scope-V-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#                                              pip install it (CPython 3.9+, the launcher inside)
#   synaps-scope-V.tgz                         npm install it (prebuilt linux-x64 library and launcher)
#   synaps-scope-V-ARCH-linux-gnu.tar.gz       the C library: shared and static, header, pkg-config,
#                                              CMake package, the launcher in libexec, the CLI in bin
#   synaps-scope-V.crate, synaps-scope-exec-V.crate, synaps-scope-cli-V.crate   (cargo package)
#   SHA256SUMS
# Each artifact carries the launcher program synaps-scope-exec (static-pie, scripts/build-exec.sh)
# where its library finds it with no configuration: beside the library, or in its
# ../libexec/synaps-scope. scripts/test-dist.sh tests them from outside the repository, and
# scripts/test-session.sh as a normal user in booted Debian 11, 12 and 13.
#
# Every artifact runs on glibc 2.17 or newer (manylinux2014: Debian 8+, Ubuntu 14.04+, RHEL 7+):
# the C library, the command line and the wheel's extension are linked by zig against glibc 2.17's
# symbols (scripts/cc-glibc-2.17.sh, maturin --zig; zig from PyPI's ziglang, cargo-zigbuild from
# crates.io), and the launcher program is static. The script fails when an artifact needs a newer
# glibc than that.
#
#   scripts/dist.sh
#   SYNAPS_DIST_ALLOW_DIRTY=1 scripts/dist.sh   # while working: package uncommitted changes too
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
repo="$PWD"
command -v cargo >/dev/null || { echo "dist.sh: cargo not found" >&2; exit 2; }
command -v npm >/dev/null || { echo "dist.sh: npm not found" >&2; exit 2; }

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
major="${version%%.*}"
arch="$(uname -m)"
out="${SYNAPS_DIST_DIR:-$repo/dist}"
stage="$(mktemp -d)"
bundled="$repo/bindings/python/python/synaps_scope/synaps-scope-exec"
trap 'rm -rf "$stage" "$bundled"' EXIT
rm -rf "$out"
mkdir -p "$out"
echo "== dist: synaps-scope $version for $arch-linux-gnu into $out"

echo "== build tools: zig (PyPI's ziglang), maturin and auditwheel in a venv; cargo-zigbuild, cargo-c"
python3 -m venv "$stage/build-venv"
"$stage/build-venv/bin/pip" install -q --upgrade pip 'maturin>=1.5,<2' 'auditwheel>=6' 'ziglang>=0.13'
"$repo/scripts/cargo-tools.sh" cargo-zigbuild cargo-c
export PATH="$stage/build-venv/bin:$PATH" SYNAPS_ZIG_PYTHON="$stage/build-venv/bin/python"
target="${CARGO_TARGET_DIR:-$repo/target}"
# What links against glibc is built apart from the usual builds, with zig as the linker.
glibc_target="$target/glibc-2.17"
glibc_floor=2.17
glibc_build() {
  CARGO_TARGET_DIR="$glibc_target" CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER="$repo/scripts/cc-glibc-2.17.sh" "$@"
}
# The newest glibc symbol version FILE needs, and a failure if it is newer than the floor.
check_glibc() {
  local needed
  needed=$(objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  [ "$(printf '%s\n' "$needed" "$glibc_floor" | sort -V | tail -n 1)" = "$glibc_floor" ] \
    || { echo "dist.sh: $1 needs glibc $needed, newer than $glibc_floor" >&2; exit 1; }
  echo "$1: glibc ${needed:-(none)} at most"
}

echo "== the launcher program (static-pie) and the command line"
exec_program="$(scripts/build-exec.sh | tail -n 1)"
glibc_build cargo build -q --release --locked -p synaps-scope-cli --target x86_64-unknown-linux-gnu
cli_program="$glibc_target/x86_64-unknown-linux-gnu/release/synaps-scope"
check_glibc "$cli_program"
if grep -q '=>' <<<"$(ldd "$exec_program" 2>&1)"; then echo "dist.sh: $exec_program is not static" >&2; exit 1; fi
# Shipped without debug information (the release profile keeps line tables for benchmarks).
strip --strip-debug -o "$stage/synaps-scope-exec" "$exec_program"
exec_program="$stage/synaps-scope-exec"

echo "== C library (cargo-c)"
c_name="synaps-scope-$version-$arch-linux-gnu"
c_root="$stage/$c_name"
glibc_build cargo cinstall --locked --release -p synaps-scope-ffi --target x86_64-unknown-linux-gnu \
  --prefix /usr --libdir lib --destdir "$stage/cinstall"
mkdir -p "$c_root/libexec/synaps-scope" "$c_root/bin" "$c_root/lib/cmake/synaps_scope" "$c_root/share/doc/synaps-scope"
cp -a "$stage/cinstall/usr/include" "$stage/cinstall/usr/lib" "$c_root/"
# Relocatable: pkg-config takes the prefix from where the .pc file sits.
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$c_root/lib/pkgconfig/synaps_scope.pc"
install -m 0755 "$exec_program" "$c_root/libexec/synaps-scope/synaps-scope-exec"
install -m 0755 "$cli_program" "$c_root/bin/synaps-scope"
strip --strip-debug "$c_root/lib/libsynaps_scope.so.$version" "$c_root/lib/libsynaps_scope.a" "$c_root/bin/synaps-scope"
check_glibc "$c_root/lib/libsynaps_scope.so.$version"
# What a static link needs besides the archive, as cargo-c computed it for the .pc file.
static_libs=$(sed -n 's/^Libs.private: *//p' "$c_root/lib/pkgconfig/synaps_scope.pc" | tr ' ' '\n' | sed -n 's/^-l//p' | paste -sd ';')
for file in synaps_scope-config synaps_scope-config-version; do
  sed -e "s/@VERSION@/$version/g" -e "s/@VERSION_MAJOR@/$major/g" -e "s/@STATIC_LIBS@/$static_libs/g" \
    "crates/ffi/cmake/$file.cmake.in" >"$c_root/lib/cmake/synaps_scope/$file.cmake"
done
# README's links lead into docs/, and docs/c.md's to examples/: both go beside it wherever it goes.
cp -r README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE docs examples "$c_root/share/doc/synaps-scope/"
soname=$(readelf -d "$c_root/lib/libsynaps_scope.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libsynaps_scope.so.$major" ] || { echo "dist.sh: soname $soname, not libsynaps_scope.so.$major" >&2; exit 1; }
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$c_name.tar.gz" "$c_name"

echo "== Python wheel (maturin --zig), checked with auditwheel"
install -m 0755 "$exec_program" "$bundled"
CARGO_TARGET_DIR="$glibc_target" maturin build -q --release --locked --strip --zig --compatibility manylinux_2_17 \
  --target x86_64-unknown-linux-gnu --manifest-path bindings/python/Cargo.toml --out "$stage/wheel"
wheel=$(ls "$stage"/wheel/synaps_scope-"$version"-cp39-abi3-manylinux*.whl)
auditwheel show "$wheel" | tee "$stage/auditwheel.txt"
# auditwheel names the tag the wheel's symbols meet: it must be the floor, and the wheel must carry it.
policy=$(grep -o 'manylinux_[0-9]*_[0-9]*_[a-z0-9_]*' "$stage/auditwheel.txt" | head -n 1)
[ "$policy" = "manylinux_${glibc_floor/./_}_$arch" ] || { echo "dist.sh: the wheel's symbols meet $policy, not manylinux_${glibc_floor/./_}_$arch" >&2; exit 1; }
case "$wheel" in *"$policy"*) ;; *) echo "dist.sh: $wheel is not tagged $policy, the tag its symbols meet" >&2; exit 1 ;; esac
cp "$wheel" "$out/"

echo "== npm package (npm pack)"
npm_root="$stage/npm"
mkdir -p "$npm_root/prebuilds/linux-x64"
cp bindings/node/package.json bindings/node/index.js bindings/node/index.d.ts bindings/node/cli.js \
  README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$npm_root/"
cp -r bindings/node/lib docs examples "$npm_root/"
install -m 0755 "$c_root/lib/libsynaps_scope.so.$version" "$npm_root/prebuilds/linux-x64/libsynaps_scope.so"
install -m 0755 "$exec_program" "$npm_root/prebuilds/linux-x64/synaps-scope-exec"
(cd "$npm_root" && npm pack --silent --pack-destination "$out" >/dev/null)

echo "== crates (cargo package), docs (cargo doc, warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --locked -p synaps-scope -p synaps-scope-ffi -p synaps-scope-cli -p synaps-scope-exec
# cargo package verifies each crate against the others through a registry of its own in its
# target directory's package/, unpacked into CARGO_HOME once per path and version and never
# again: a copy left by an earlier build of this same version would be verified against instead
# of this one.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/synaps-scope-"$version" \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/synaps-scope-*-"$version"
# Its verifying build gets a target directory of its own: in the shared one it left the packaged
# core under the unit hash of the workspace's, and later local builds of the C library and the
# Python extension linked that copy as fresh, however the sources had changed since.
package_target="$target/dist-package"
# There the packaged core is a registry crate, which cargo never rebuilds for a version it built
# before: its build of an earlier commit of this same version is dropped, or the command line and
# the launcher program would be verified against it.
rm -rf "$package_target"/debug/.fingerprint/synaps-scope-* "$package_target"/debug/deps/libsynaps_scope-* \
  "$package_target"/debug/deps/synaps_scope-*
CARGO_TARGET_DIR="$package_target" cargo package -q --locked ${SYNAPS_DIST_ALLOW_DIRTY:+--allow-dirty} \
  -p synaps-scope -p synaps-scope-exec -p synaps-scope-cli
for crate in synaps-scope synaps-scope-exec synaps-scope-cli; do
  cp "$package_target/package/$crate-$version.crate" "$out/"
done

(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "== dist: built"
ls -l "$out"
echo "the C library, the command line, the npm package's library and the Python extension need glibc $glibc_floor or newer (wheel tag $policy); the launcher program is static"
