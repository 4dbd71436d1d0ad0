#!/usr/bin/env bash
# Builds every artifact a user installs, into dist/ (or $SYNAPS_DIST_DIR):
#   synaps_scope-V-cp39-abi3-manylinux_*.whl   pip install it (CPython 3.9+, the launcher inside)
#   synaps-scope-V.tgz                         npm install it (prebuilt linux-x64 library and launcher)
#   synaps-scope-V-ARCH-linux-gnu.tar.gz       the C library: shared and static, header, pkg-config,
#                                              CMake package, the launcher in libexec, the CLI in bin
#   synaps-scope-V.crate, synaps-scope-exec-V.crate, synaps-scope-cli-V.crate   (cargo package)
#   SHA256SUMS
# Each artifact carries the launcher program synaps-scope-exec (static-pie, scripts/build-exec.sh)
# where its library finds it with no configuration: beside the library, or in its
# ../libexec/synaps-scope. scripts/test-dist.sh tests them from outside the repository.
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

echo "== the launcher program (static-pie) and the command line"
exec_program="$(scripts/build-exec.sh | tail -n 1)"
cargo build -q --release --locked -p synaps-scope-cli
target="${CARGO_TARGET_DIR:-$repo/target}"
if grep -q '=>' <<<"$(ldd "$exec_program" 2>&1)"; then echo "dist.sh: $exec_program is not static" >&2; exit 1; fi
# Shipped without debug information (the release profile keeps line tables for benchmarks).
strip --strip-debug -o "$stage/synaps-scope-exec" "$exec_program"
exec_program="$stage/synaps-scope-exec"

echo "== C library (cargo-c)"
command -v cargo-cinstall >/dev/null || cargo install --locked cargo-c --version 0.10.24+cargo-0.98.0
c_name="synaps-scope-$version-$arch-linux-gnu"
c_root="$stage/$c_name"
cargo cinstall --locked --release -p synaps-scope-ffi --prefix /usr --libdir lib --destdir "$stage/cinstall"
mkdir -p "$c_root/libexec/synaps-scope" "$c_root/bin" "$c_root/lib/cmake/synaps_scope" "$c_root/share/doc/synaps-scope"
cp -a "$stage/cinstall/usr/include" "$stage/cinstall/usr/lib" "$c_root/"
# Relocatable: pkg-config takes the prefix from where the .pc file sits.
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$c_root/lib/pkgconfig/synaps_scope.pc"
install -m 0755 "$exec_program" "$c_root/libexec/synaps-scope/synaps-scope-exec"
install -m 0755 "$target/release/synaps-scope" "$c_root/bin/synaps-scope"
strip --strip-debug "$c_root/lib/libsynaps_scope.so.$version" "$c_root/lib/libsynaps_scope.a" "$c_root/bin/synaps-scope"
# What a static link needs besides the archive, as cargo-c computed it for the .pc file.
static_libs=$(sed -n 's/^Libs.private: *//p' "$c_root/lib/pkgconfig/synaps_scope.pc" | tr ' ' '\n' | sed -n 's/^-l//p' | paste -sd ';')
for file in synaps_scope-config synaps_scope-config-version; do
  sed -e "s/@VERSION@/$version/g" -e "s/@VERSION_MAJOR@/$major/g" -e "s/@STATIC_LIBS@/$static_libs/g" \
    "crates/ffi/cmake/$file.cmake.in" >"$c_root/lib/cmake/synaps_scope/$file.cmake"
done
cp README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$c_root/share/doc/synaps-scope/"
soname=$(readelf -d "$c_root/lib/libsynaps_scope.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libsynaps_scope.so.$major" ] || { echo "dist.sh: soname $soname, not libsynaps_scope.so.$major" >&2; exit 1; }
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$c_name.tar.gz" "$c_name"

echo "== Python wheel (maturin), checked with auditwheel"
python3 -m venv "$stage/build-venv"
"$stage/build-venv/bin/pip" install -q --upgrade pip 'maturin>=1.5,<2' 'auditwheel>=6'
install -m 0755 "$exec_program" "$bundled"
"$stage/build-venv/bin/maturin" build -q --release --locked --strip --manifest-path bindings/python/Cargo.toml \
  --out "$stage/wheel"
wheel=$(ls "$stage"/wheel/synaps_scope-"$version"-cp39-abi3-manylinux_*.whl)
"$stage/build-venv/bin/auditwheel" show "$wheel" | tee "$stage/auditwheel.txt"
# auditwheel names the tag the wheel's symbols meet; the wheel must carry exactly that one.
policy=$(grep -o 'manylinux_[0-9]*_[0-9]*_[a-z0-9_]*' "$stage/auditwheel.txt" | head -n 1)
case "$wheel" in *"$policy"*) ;; *) echo "dist.sh: $wheel is not tagged $policy, the tag its symbols meet" >&2; exit 1 ;; esac
cp "$wheel" "$out/"

echo "== npm package (npm pack)"
npm_root="$stage/npm"
mkdir -p "$npm_root/prebuilds/linux-x64"
cp bindings/node/package.json bindings/node/index.js bindings/node/index.d.ts bindings/node/cli.js \
  README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$npm_root/"
install -m 0755 "$c_root/lib/libsynaps_scope.so.$version" "$npm_root/prebuilds/linux-x64/libsynaps_scope.so"
install -m 0755 "$exec_program" "$npm_root/prebuilds/linux-x64/synaps-scope-exec"
(cd "$npm_root" && npm pack --silent --pack-destination "$out" >/dev/null)

echo "== crates (cargo package), docs (cargo doc, warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --locked -p synaps-scope -p synaps-scope-ffi
cargo package -q --locked ${SYNAPS_DIST_ALLOW_DIRTY:+--allow-dirty} -p synaps-scope -p synaps-scope-exec -p synaps-scope-cli
for crate in synaps-scope synaps-scope-exec synaps-scope-cli; do
  cp "$target/package/$crate-$version.crate" "$out/"
done

(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "== dist: built"
ls -l "$out"
glibc=$(objdump -T "$c_root/lib/libsynaps_scope.so.$version" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
echo "the C library and the Python extension need glibc ${glibc#GLIBC_} or newer (wheel tag $policy); the launcher program is static"
