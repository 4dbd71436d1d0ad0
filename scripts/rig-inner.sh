#!/usr/bin/env bash
# The part of systemd-rig.sh that runs inside the private mount namespace: mounts cgroup2 and the
# version's overlay, starts the user manager, runs the command in a cgroup of its own, and always
# tears the manager, whatever the command left behind, and the cgroups down.
set -euo pipefail

umount -R /sys/fs/cgroup 2>/dev/null || true
mount -t cgroup2 none /sys/fs/cgroup
mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; }
mkdir -p /run/systemd/system
# A nested rig of the same version finds the overlay already in place.
if [ -n "$SYNAPS_RIG_OVERLAY" ] && ! cmp -s "$SYNAPS_RIG_OVERLAY/systemd" /usr/lib/systemd/systemd; then
  mount -t overlay overlay -o "ro,lowerdir=$SYNAPS_RIG_OVERLAY:/usr/lib/systemd" /usr/lib/systemd
fi

base="/sys/fs/cgroup/synaps-rig-$$"
scratch="$(mktemp -d /tmp/synaps-rig.XXXXXX)"
mkdir -p "$base/user@0.service" "$base/tests" "$base/command"
# Toolchains keep their real homes; everything else the command does sees a temporary HOME.
export CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export XDG_RUNTIME_DIR="$scratch/runtime" XDG_CONFIG_HOME="$scratch/config" HOME="$scratch/home"
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"; mkdir -p "$XDG_CONFIG_HOME" "$HOME"
# A tmpfs, as logind makes /run/user/UID: the manager writes each transient unit's file there, and
# on the disk's filesystem that cost it a sixth of its time in a burst (ext4 inode allocation).
mount -t tmpfs -o mode=0700 tmpfs "$XDG_RUNTIME_DIR"

manager_pid=""
cleanup() {
  if [ -n "$manager_pid" ]; then
    # A stopped manager is resumed first: a signal other than SIGKILL would wait on it forever.
    if [ "$(awk '{print $3}' "/proc/$manager_pid/stat" 2>/dev/null)" = T ]; then
      echo "systemd-rig: the command left the manager stopped; resuming it to end it" >&2
    fi
    kill -CONT "$manager_pid" 2>/dev/null || true
    kill -KILL "$manager_pid" 2>/dev/null || true
    wait "$manager_pid" 2>/dev/null || true
  fi
  # Anything left in the rig's cgroups (scopes, test managers, the command's leftovers) goes too.
  echo 1 > "$base/cgroup.kill" 2>/dev/null || true
  for _ in $(seq 50); do
    find "$base" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$base" ] || break
    sleep 0.1
  done
  [ -d "$base" ] && echo "systemd-rig: could not remove $base" >&2
  umount -l "$XDG_RUNTIME_DIR" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

sh -c 'echo $$ > "$1/cgroup.procs" && exec "$2" --user' sh "$base/user@0.service" "$SYNAPS_RIG_MANAGER" \
  >"$scratch/manager.log" 2>&1 &
manager_pid=$!
for _ in $(seq 100); do
  [ -S "$XDG_RUNTIME_DIR/systemd/private" ] && break
  kill -0 "$manager_pid" 2>/dev/null || { echo "systemd-rig: the user manager exited at start; its log:" >&2; cat "$scratch/manager.log" >&2; exit 1; }
  sleep 0.05
done
[ -S "$XDG_RUNTIME_DIR/systemd/private" ] || { echo "systemd-rig: the user manager did not come up within 5 s" >&2; exit 1; }
running=$(systemctl --user show -p Version --value 2>&1 || true)
case "$running" in
  "$SYNAPS_RIG_SYSTEMD_VERSION"|"$SYNAPS_RIG_SYSTEMD_VERSION".*|"$SYNAPS_RIG_SYSTEMD_VERSION"[~-]*) ;;
  *) echo "systemd-rig: wanted a systemd $SYNAPS_RIG_SYSTEMD_VERSION manager, it says: $running" >&2; exit 1 ;;
esac
export SYNAPS_RIG_CGROUP="$base/tests" SYNAPS_RIG_MANAGER_PID="$manager_pid"
status=0
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$base/command" "$@" || status=$?
exit "$status"
