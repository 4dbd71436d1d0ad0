#!/usr/bin/env bash
# Runs a command against a private systemd user manager of a chosen version (docs/testing.md).
#
#   scripts/systemd-rig.sh [--systemd 247|252|254|257|262] -- COMMAND ARGS...
#   scripts/systemd-rig.sh --fetch 254 257 262     # only download and prepare those versions
#
# 252 is the machine's own systemd. 254 comes from Debian's bookworm-backports, 257 from trixie and
# 262 from sid: downloaded once with apt-get download and unpacked with dpkg -x under
# $SYNAPS_RIG_CACHE (default ~/.cache/synaps-scope), never installed into /. Their binaries are
# patched (patchelf) to load their own libraries (and, for 257 and 262, their own glibc) through
# their ELF interpreter and rpath, so that no LD_LIBRARY_PATH is ever set: systemd-run execs the
# command in place, and such a variable would reach the host's programs it runs.
#
# Inside a private mount namespace the rig mounts cgroup2, lays the chosen version's manager,
# executor and user units over /usr/lib/systemd (a read-only overlay, so a daemon-reexec stays on
# that version), starts `systemd --user`, checks that the manager and the systemd-run first on PATH
# are of that version, and runs the command in a cgroup of its own with XDG_RUNTIME_DIR pointing at
# the manager. Exported for tests:
#   SYNAPS_RIG_SYSTEMD_VERSION  the major version of the running manager and of systemd-run/systemctl
#   SYNAPS_RIG_MANAGER          the `systemd` binary of that version (run it with --user)
#   SYNAPS_RIG_CGROUP           a cgroup2 directory under which tests may make their own
#   SYNAPS_RIG_MANAGER_PID      the pid of the rig's manager (benchmarks stop it briefly)
#   SYNAPS_RIG_CACHE            where the downloaded versions are kept (a nested rig reuses it)
#   SYNAPS_RIG_OTHER_SYSTEMD_RUN  a real systemd-run of another version, for version-mismatch tests
#   SYNAPS_RIG_XDG_DBUS_PROXY  Flatpak's bus proxy, xdg-dbus-proxy 0.1.6 (Debian 13's), runnable here
# Whatever the command does, even leaving the manager stopped (SIGSTOP) or processes behind, the
# manager is resumed and killed, everything in the rig's cgroups is killed and the cgroups removed.
set -euo pipefail

here="$(dirname "$(readlink -f "$0")")"
versions_known="247 252 254 257 262"
usage="usage: $0 [--systemd ${versions_known// /|}] -- COMMAND... | $0 --fetch VERSION..."

version=252
fetch_only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --systemd) version="${2:-}"; shift 2 ;;
    --fetch) shift; fetch_only=("$@"); set --; break ;;
    --) shift; break ;;
    *) echo "systemd-rig: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "systemd-rig: must run as root (it mounts cgroup2 and an overlay in a private namespace)" >&2; exit 2; }

export SYNAPS_RIG_CACHE="${SYNAPS_RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/synaps-scope}"
# Bump when the prepared layout changes, so an older cache is prepared again.
layout="rig-layout 2"

# The Debian suite and packages each version comes from. 257 and 262 need a newer glibc than
# Debian 12's (and 257 a newer OpenSSL); 254 was built for Debian 12 and uses the host's.
suite_of() { case "$1" in 247) echo bullseye ;; 254) echo bookworm-backports ;; 257) echo trixie ;; 262) echo sid ;; esac; }
packages_of() {
  case "$1" in
    247) echo systemd ;;
    254) echo systemd libsystemd-shared ;;
    257) echo systemd libsystemd-shared libc6 libssl3t64 ;;
    262) echo systemd libsystemd-shared libc6 ;;
  esac
}

# shellcheck source=scripts/debian-mirror.sh
. "$here/debian-mirror.sh"

# The first of PATHS (relative to $1) that exists.
first_in() {
  local root="$1"; shift
  local p
  for p in "$@"; do [ -e "$root/$p" ] && { echo "$root/$p"; return; }; done
  echo "systemd-rig: none of $* under $root" >&2; return 1
}

# unpack_from_debian SUITE DIR PACKAGE/SUITE...: downloads those packages from Debian's SUITE with
# apt-get (its own lists and sources, never the host's) and unpacks them all into DIR, made anew.
unpack_from_debian() {
  local suite="$1" dir="$2" mirror work deb
  shift 2
  mirror=$(debian_mirror)
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/debs"
  echo "deb $mirror $suite main" > "$work/sources.list"
  local opts=(-o "APT::Sandbox::User=root" -o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$work/lists" -o "Acquire::Languages=none"
              -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false")
  apt-get "${opts[@]}" update -qq >&2
  (cd "$work/debs" && apt-get "${opts[@]}" download -qq "$@" >&2)
  rm -rf "$dir"; mkdir -p "$dir"
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$dir"; done
  rm -rf "$work"
}

# Downloads, unpacks and patches systemd $1 into $SYNAPS_RIG_CACHE/systemd-$1 once; prints the root.
prepare() {
  local v="$1" root="$SYNAPS_RIG_CACHE/systemd-$1"
  if [ "$(cat "$root/.rig-ready" 2>/dev/null)" = "$layout" ]; then echo "$root"; return; fi
  command -v patchelf >/dev/null || { echo "systemd-rig: patchelf is needed to prepare systemd $v (apt-get install patchelf)" >&2; return 1; }
  local suite pkgs=() p tmp="$root.tmp"
  suite=$(suite_of "$v")
  echo "systemd-rig: fetching systemd $v from Debian's $suite (once, into $root)" >&2
  for p in $(packages_of "$v"); do pkgs+=("$p/$suite"); done
  unpack_from_debian "$suite" "$tmp" "${pkgs[@]}"

  # Patch the four programs the rig runs to load their own libraries without LD_LIBRARY_PATH.
  local libdir="$tmp/usr/lib/x86_64-linux-gnu" rpath interp=""
  # 247 keeps its shared library in /lib/systemd, later versions in /usr/lib/<triplet>/systemd.
  rpath="$root/usr/lib/x86_64-linux-gnu/systemd:$root/lib/systemd"
  if [ -e "$libdir/ld-linux-x86-64.so.2" ]; then
    interp="$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    rpath="$rpath:$root/usr/lib/x86_64-linux-gnu"
  fi
  local manager executor="" systemctl run
  manager=$(first_in "$tmp" usr/lib/systemd/systemd lib/systemd/systemd)
  [ -e "$tmp/usr/lib/systemd/systemd-executor" ] && executor="$tmp/usr/lib/systemd/systemd-executor"
  systemctl=$(first_in "$tmp" usr/bin/systemctl bin/systemctl)
  run=$(first_in "$tmp" usr/bin/systemd-run)
  for bin in "$manager" $executor "$systemctl" "$run"; do
    [ -z "$interp" ] || patchelf --set-interpreter "$interp" "$bin"
    patchelf --force-rpath --set-rpath "$rpath" "$bin"
  done

  # What the overlay lays over /usr/lib/systemd: the manager, its executor (255 and later) and
  # the user units; everything else there stays the host's.
  local units; units=$(first_in "$tmp" usr/lib/systemd/user lib/systemd/user)
  mkdir -p "$tmp/rig/overlay" "$tmp/rig/bin"
  cp -a "$manager" "$tmp/rig/overlay/systemd"
  [ -z "$executor" ] || cp -a "$executor" "$tmp/rig/overlay/systemd-executor"
  cp -a "$units" "$tmp/rig/overlay/user"
  ln -s "${systemctl/#$tmp/$root}" "$tmp/rig/bin/systemctl"
  ln -s "${run/#$tmp/$root}" "$tmp/rig/bin/systemd-run"

  rm -rf "$root"; mv "$tmp" "$root"
  local got; got=$("$root/rig/bin/systemd-run" --version | awk 'NR == 1 {print $2}')
  [ "$got" = "$v" ] || { echo "systemd-rig: Debian's $suite now has systemd $got, not $v; the rig needs updating" >&2; rm -rf "$root"; return 1; }
  echo "$layout" > "$root/.rig-ready"
  echo "$root"
}

# Flatpak's bus proxy as Debian 13 ships it (xdg-dbus-proxy 0.1.6: Debian 12's 0.1.4 drops a client
# that sends AUTH and BEGIN in one write), unpacked once into $SYNAPS_RIG_CACHE/xdg-dbus-proxy-0.1
# with trixie's libc, GLib (it needs 2.80) and libmount, patched to load them as the 257 rig is; its other
# libraries are the host's.
# Prints the program's path.
prepare_proxy() {
  local root="$SYNAPS_RIG_CACHE/xdg-dbus-proxy-0.1"
  if [ "$(cat "$root/.rig-ready" 2>/dev/null)" = "$layout" ]; then echo "$root/usr/bin/xdg-dbus-proxy"; return; fi
  command -v patchelf >/dev/null || { echo "systemd-rig: patchelf is needed to prepare xdg-dbus-proxy (apt-get install patchelf)" >&2; return 1; }
  local tmp="$root.tmp"
  echo "systemd-rig: fetching xdg-dbus-proxy from Debian's trixie (once, into $root)" >&2
  unpack_from_debian trixie "$tmp" xdg-dbus-proxy/trixie libc6/trixie libglib2.0-0t64/trixie libmount1/trixie libblkid1/trixie
  patchelf --set-interpreter "$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$tmp/usr/bin/xdg-dbus-proxy"
  patchelf --force-rpath --set-rpath "$root/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" \
    "$tmp/usr/bin/xdg-dbus-proxy"
  rm -rf "$root"; mv "$tmp" "$root"
  local got; got=$("$root/usr/bin/xdg-dbus-proxy" --version 2>&1 | awk '{print $NF}')
  case "$got" in 0.1.6*) ;; *) echo "systemd-rig: trixie's xdg-dbus-proxy says '$got', not 0.1.6; the rig needs updating" >&2; rm -rf "$root"; return 1 ;; esac
  echo "$layout" > "$root/.rig-ready"
  echo "$root/usr/bin/xdg-dbus-proxy"
}

if [ ${#fetch_only[@]} -gt 0 ]; then
  prepare_proxy >/dev/null
  for v in "${fetch_only[@]}"; do
    case " $versions_known " in *" $v "*) ;; *) echo "systemd-rig: unsupported systemd version $v ($usage)" >&2; exit 2 ;; esac
    [ "$v" = 252 ] || prepare "$v" >/dev/null
  done
  exit 0
fi
[ $# -gt 0 ] || { echo "systemd-rig: no command given ($usage)" >&2; exit 2; }

case "$version" in
  252)
    # The machine's own systemd; 254's systemd-run is the real client of another version.
    manager=/usr/lib/systemd/systemd overlay=""
    other_run="$(prepare 254)/rig/bin/systemd-run" ;;
  247|254|257|262)
    root=$(prepare "$version")
    manager=/usr/lib/systemd/systemd overlay="$root/rig/overlay"
    other_run=/usr/bin/systemd-run
    export PATH="$root/rig/bin:$PATH" ;;
  *) echo "systemd-rig: unsupported systemd version $version ($usage)" >&2; exit 2 ;;
esac
got=$(systemd-run --version | awk 'NR == 1 {print $2}')
[ "$got" = "$version" ] || { echo "systemd-rig: wanted systemd-run $version, PATH finds $got" >&2; exit 1; }
unset LD_LIBRARY_PATH

proxy=$(prepare_proxy)
export SYNAPS_RIG_SYSTEMD_VERSION="$version" SYNAPS_RIG_MANAGER="$manager" SYNAPS_RIG_OVERLAY="$overlay" \
  SYNAPS_RIG_OTHER_SYSTEMD_RUN="$other_run" SYNAPS_RIG_XDG_DBUS_PROXY="$proxy"
exec unshare --mount --propagation private "$BASH" "$here/rig-inner.sh" "$@"
