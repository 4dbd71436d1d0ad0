#!/usr/bin/env bash
# See systemd-oomd itself spare a daemon. Boots Debian 12 (or 13) in a virtual machine
# (scripts/vm-rig.sh: a real kernel with the memory controller, swap and systemd-oomd), configures
# oomd as Fedora 34 and Ubuntu 22.04 shipped it (ManagedOOMSwap=kill on -.slice: under memory and
# swap exhaustion, kill the cgroup using the most swap), and as alice, from her login shell, starts
# a toy agent daemon in its own daemon scope that launches an idle tool and a runaway through
# `synaps-scope run` (the runaway through `run --wait`). Prints the warning `run --wait` gave
# before oomd acted, then oomd's own journal line for the scoped run, then for the control with
# SYNAPS_PROCESS_SCOPES=off, where the runaway shares the daemon's cgroup.
#
#   scripts/oomd-demo.sh [--release 12|13]     # as root; about 3 minutes after the first run
#
# The first run makes the disk image (debootstrap, about 100 s) and builds the command line and the
# launcher program (release). Where no virtual machine can run here (not root, or no
# qemu-system-x86_64 to be had), it says so and runs scripts/demo/stand-in-kill.sh instead, where
# this script, not oomd, kills the cgroup oomd would pick.
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
root="$(dirname "$here")"
release=12
[ "${1:-}" != --release ] || release="${2:?usage: $0 [--release 12|13]}"

why_not=""
if [ "$(id -u)" != 0 ]; then
  why_not="the virtual machine needs root (debootstrap, mkfs.ext4 -d of a root's files)"
elif ! command -v qemu-system-x86_64 >/dev/null && ! command -v apt-get >/dev/null; then
  why_not="no qemu-system-x86_64 here, and no apt-get to install it"
fi
if [ -n "$why_not" ]; then
  echo "oomd-demo: $why_not; showing the STAND-IN instead: this script kills the cgroup oomd would pick, not systemd-oomd" >&2
  exec "$here/demo/stand-in-kill.sh"
fi

stage="$(mktemp -d /tmp/synaps-oomd-demo.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
echo "== building the command line and the launcher program (release)"
(cd "$root" && cargo build -q --release --locked -p synaps-scope-cli)
exec_program=$("$here/build-exec.sh")
tree="$stage/tarball/synaps-scope-demo-x86_64-linux-gnu"
install -D -m 0755 "$root/target/release/synaps-scope" "$tree/bin/synaps-scope"
install -D -m 0755 "$exec_program" "$tree/libexec/synaps-scope/synaps-scope-exec"
mkdir -p "$stage/share/dist"
tar -czf "$stage/share/dist/synaps-scope-demo-x86_64-linux-gnu.tar.gz" -C "$stage/tarball" synaps-scope-demo-x86_64-linux-gnu
cp "$root"/tests/vm/scenarios.sh "$root"/tests/vm/daemon.py "$root"/tests/vm/hog.py "$stage/share/"
chmod -R a+rX "$stage/share"

echo "== Debian $release in a virtual machine: the real systemd-oomd, ManagedOOMSwap=kill on -.slice"
"$here/vm-rig.sh" --release "$release" --share "$stage/share" --timeout 600 -- \
  'bash scenarios.sh oomd swap:login:scoped swap:login:direct'
echo "== result: with scopes, the runaway's scope was warned of before systemd-oomd killed it alone, and the daemon lived on; without them oomd killed the daemon's cgroup, the daemon with it"
