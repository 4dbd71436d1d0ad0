#!/usr/bin/env bash
# Builds and installs the C library: libsynaps_scope.so.<ABI> (with that soname) and its
# libsynaps_scope.so link, libsynaps_scope.a, include/synaps_scope.h and a pkg-config file, so that
#   cc app.c $(pkg-config --cflags --libs synaps_scope)
# works. Usage: scripts/install-c.sh [--prefix /usr/local] [--destdir STAGING]
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

prefix=/usr/local destdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --destdir) destdir="$2"; shift 2 ;;
    *) echo "install-c: unknown option $1 (usage: $0 [--prefix DIR] [--destdir DIR])" >&2; exit 2 ;;
  esac
done

abi=$(sed -n 's/^pub const SCOPE_ABI_VERSION: u32 = \([0-9]*\);/\1/p' src/ffi/mod.rs)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ -n "$abi" ] && [ -n "$version" ] || { echo "install-c: cannot read the ABI or package version" >&2; exit 1; }

cargo build --release --locked --lib
native_libs=$(cargo rustc --release --locked --lib --crate-type staticlib -- --print native-static-libs 2>&1 \
  | sed -n 's/.*native-static-libs: //p' | tail -n1)
cargo rustc --release --locked --lib --crate-type cdylib -- -C "link-arg=-Wl,-soname,libsynaps_scope.so.$abi"

libdir="$destdir$prefix/lib" includedir="$destdir$prefix/include"
install -d "$libdir/pkgconfig" "$includedir"
install -m 0755 target/release/libsynaps_scope.so "$libdir/libsynaps_scope.so.$abi"
ln -sf "libsynaps_scope.so.$abi" "$libdir/libsynaps_scope.so"
install -m 0644 target/release/libsynaps_scope.a "$libdir/libsynaps_scope.a"
install -m 0644 include/synaps_scope.h "$includedir/synaps_scope.h"
cat > "$libdir/pkgconfig/synaps_scope.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: synaps_scope
Description: Run each child process in its own systemd scope
Version: $version
Libs: -L\${libdir} -lsynaps_scope
Libs.private: $native_libs
Cflags: -I\${includedir}
PC
echo "installed libsynaps_scope $version (ABI $abi) under $destdir$prefix"
