#!/usr/bin/env bash
# Runs a command inside a private systemd user manager (../shared/TESTRIG.md).
#
#   scripts/systemd-rig.sh [--systemd 252|254] -- COMMAND ARGS...
#
# 252 is the installed systemd; 254 comes from Debian's bookworm-backports, downloaded once and
# unpacked under $SYNAPS_RIG_CACHE (default ~/.cache/synaps-scope), never into /.
# The command runs as root in a private mount namespace with XDG_RUNTIME_DIR pointing at the
# manager, and these variables for tests that start managers of their own:
#   SYNAPS_RIG_SYSTEMD_VERSION  the major version of the running manager and clients
#   SYNAPS_RIG_MANAGER          an executable that runs `systemd --user` of that version
#   SYNAPS_RIG_CGROUP           a cgroup2 directory under which tests may make their own
#   SYNAPS_RIG_MANAGER_PID      the pid of the rig's manager (benchmarks stop it briefly)
# Whatever the command does, the manager is killed and its cgroups are removed afterwards.
set -euo pipefail

version=252
while [ $# -gt 0 ]; do
  case "$1" in
    --systemd) version="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "systemd-rig: unknown option $1 (usage: $0 [--systemd 252|254] -- COMMAND...)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "systemd-rig: no command given" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "systemd-rig: must run as root (it mounts cgroup2 in a private namespace)" >&2; exit 2; }

cache="${SYNAPS_RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/synaps-scope}"

# Downloads systemd 254 from bookworm-backports into $cache/systemd-254 once.
fetch_254() {
  local root="$cache/systemd-254"
  if [ -x "$root/lib/systemd/systemd" ] && [ -x "$root/usr/bin/systemd-run" ]; then
    echo "$root"; return
  fi
  local mirror
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$mirror" ] || { echo "systemd-rig: no Debian mirror named in /etc/apt to fetch systemd 254 from" >&2; exit 1; }
  local work; work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/debs"
  echo "deb $mirror bookworm-backports main" > "$work/sources.list"
  local opts=(-o "APT::Sandbox::User=root" -o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$work/lists")
  echo "systemd-rig: fetching systemd 254 from bookworm-backports (once)" >&2
  apt-get "${opts[@]}" update -qq >&2
  (cd "$work/debs" && apt-get "${opts[@]}" download -qq systemd/bookworm-backports libsystemd-shared/bookworm-backports >&2)
  rm -rf "$root.tmp"; mkdir -p "$root.tmp"
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$root.tmp"; done
  rm -rf "$root"; mv "$root.tmp" "$root"; rm -rf "$work"
  echo "$root"
}

bin="$(mktemp -d /tmp/synaps-rig-bin.XXXXXX)"
case "$version" in
  252)
    printf '#!/bin/sh\nexec /lib/systemd/systemd "$@"\n' > "$bin/systemd-manager" ;;
  254)
    root=$(fetch_254)
    lib="$root/usr/lib/x86_64-linux-gnu/systemd"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$root/lib/systemd/systemd" > "$bin/systemd-manager"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$root/usr/bin/systemd-run" > "$bin/systemd-run"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$root/bin/systemctl" > "$bin/systemctl"
    export PATH="$bin:$PATH" ;;
  *) echo "systemd-rig: unsupported systemd version $version (252 or 254)" >&2; exit 2 ;;
esac
chmod +x "$bin"/*
got=$(systemd-run --version | head -n1 | awk '{print $2}')
[ "$got" = "$version" ] || { echo "systemd-rig: wanted systemd-run $version, PATH finds $got" >&2; exit 1; }

export SYNAPS_RIG_SYSTEMD_VERSION="$version" SYNAPS_RIG_MANAGER="$bin/systemd-manager" SYNAPS_RIG_BIN="$bin"
status=0
unshare --mount --propagation private "$BASH" "$(dirname "$(readlink -f "$0")")/rig-inner.sh" "$@" || status=$?
rm -rf "$bin"
exit "$status"
