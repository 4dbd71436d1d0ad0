#!/usr/bin/env bash
# Runs a command in a virtual machine with a real kernel: Debian 12 (kernel 6.1, systemd 252) or 13
# (6.12, 257) booted under qemu, cgroup2 as the only hierarchy with the memory, cpu and pids
# controllers, PSI, swap and systemd-oomd, and the user alice (uid 1000) whose user manager
# (user@1000.service) runs from boot (linger), so that her scopes outlive any one login
# (docs/testing.md, "A virtual machine").
#
#   scripts/vm-rig.sh --release 12|13 [--share DIR] [--timeout SECONDS] -- COMMAND
#   scripts/vm-rig.sh --fetch 12 13          # only make those disk images (once, into the cache)
#
# The images are made once with debootstrap from Debian's packages under
# $SYNAPS_RIG_CACHE/vm/SUITE (default ~/.cache/synaps-scope): the root as an ext4 disk, the root's
# own kernel and initramfs, a 512 MB swap disk. Each run boots them with -snapshot (the images are
# never changed) under TCG (KVM hangs this machine's guests in early boot), with no network.
# COMMAND is one shell command line that the guest's root runs once the system is up, in /srv/synaps,
# a copy of DIR (the host's directory is never written); `runuser -l alice -c CMD` there logs alice
# in through PAM (a logind session-cN.scope). What COMMAND prints comes back on this script's
# standard output, and its exit status is this script's. Whatever COMMAND does, the machine is
# powered off within --timeout seconds (default 900) of booting, and killed 180 s after that. The
# guest says it is alive every 15 s, with its uptime, free memory and swap and memory pressure
# (the last of these are printed when it goes silent); one silent for 300 s (seen once in CI: a guest that stopped
# with its own timeout never firing, the host's qemu idle) is killed then. Exit status 3 means
# the guest stopped answering or never reported the command's status (the console's last lines
# are printed), not that the command failed.
set -euo pipefail

here="$(dirname "$(readlink -f "$0")")"
releases_known="12 13"
usage="usage: $0 --release ${releases_known// /|} [--share DIR] [--timeout SECONDS] -- COMMAND | $0 --fetch RELEASE..."

release=""
share=""
timeout=900
fetch_only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release="${2:-}"; shift 2 ;;
    --share) share="${2:?$usage}"; shift 2 ;;
    --timeout) timeout="${2:?$usage}"; shift 2 ;;
    --fetch) shift; fetch_only=("$@"); set --; break ;;
    --) shift; break ;;
    *) echo "vm-rig: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "vm-rig: must run as root (debootstrap, mkfs.ext4 -d of a root's files)" >&2; exit 2; }
case "$timeout" in '' | *[!0-9]*) echo "vm-rig: --timeout takes whole seconds, not '$timeout'" >&2; exit 2 ;; esac

cache="${SYNAPS_RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/synaps-scope}/vm"
# Bump when what an image holds changes, so an older cache is made again.
layout="vm-image 6"

suite_of() { case "$1" in 12) echo bookworm ;; 13) echo trixie ;; esac; }
systemd_of() { case "$1" in 12) echo 252 ;; 13) echo 257 ;; esac; }

need_tools() {
  local need=()
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
  command -v mkswap >/dev/null || need+=(util-linux)
  [ ${#need[@]} -eq 0 ] && return
  echo "vm-rig: installing ${need[*]} from Debian's packages" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
}

# shellcheck source=scripts/debian-mirror.sh
. "$here/debian-mirror.sh"

# The guest's side: a oneshot unit, ordered after everything else that boot starts, mounts the job
# disk, turns swap on, runs the command with its output on the second serial port, reports its
# exit status there and powers the machine off.
job_unit='[Unit]
Description=synaps-scope VM rig: the job
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/synaps-vm-job
StandardOutput=file:/dev/ttyS1
StandardError=inherit
TimeoutStartSec=infinity
# The job of the rig itself (the scenarios, the heartbeat) is never a candidate for systemd-oomd:
# no rule of the scenarios covers system.slice now, but one did (oomd killed journald there once), and
# a kill of the job would leave a guest that looks silent.
ManagedOOMPreference=omit
[Install]
WantedBy=multi-user.target'
job_script='#!/bin/bash
# Written by scripts/vm-rig.sh: runs /srv/synaps/.command as root, then powers the machine off.
mkdir -p /srv/synaps.in /srv/synaps
mount -o ro /dev/vdb /srv/synaps.in && cp -a /srv/synaps.in/. /srv/synaps/ && umount /srv/synaps.in
swapon /dev/vdc
bound=$(cat /srv/synaps/.timeout)
(while sleep 15; do echo "synaps-vm-rig: alive: up $(cut -d" " -f1 /proc/uptime) s, $(awk "/^(MemAvailable|SwapFree):/ {printf \"%s %d MB, \", \$1, \$2 / 1024}" /proc/meminfo)memory pressure $(head -n 1 /proc/pressure/memory)"; done) &
heartbeat=$!
status=0
cd /srv/synaps && timeout --kill-after=10 "$bound" bash -c "$(cat /srv/synaps/.command)" 2>&1 </dev/null || status=$?
kill "$heartbeat"
echo "synaps-vm-rig: exit $status"
systemctl --no-block poweroff'

# Makes the images of release $1 once; prints their directory.
prepare() {
  local r="$1" suite dir
  suite=$(suite_of "$r"); dir="$cache/$suite"
  if [ "$(cat "$dir/.rig-ready" 2>/dev/null)" = "$layout" ]; then echo "$dir"; return; fi
  need_tools
  local tmp="$dir.tmp" root started=$SECONDS
  root="$tmp/root"
  echo "vm-rig: making a Debian $r ($suite) disk image with debootstrap (once, into $dir)" >&2
  # A debootstrap that was killed leaves its /proc and /sys mounted in the unfinished root.
  awk -v under="$tmp/" 'index($2, under) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n 1 umount -l
  rm -rf "$tmp"; mkdir -p "$tmp"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,systemd-oomd,udev,kmod,dbus,dbus-user-session,dbus-broker,libpam-systemd,procps,python3,python3-venv,python3-pip,linux-image-cloud-amd64,initramfs-tools \
    "$suite" "$root" "$(debian_mirror)" >"$cache/$suite.debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/$suite.debootstrap.log" >&2; echo "vm-rig: debootstrap $suite failed" >&2; return 1; }
  chroot "$root" useradd -m -u 1000 -s /bin/bash alice
  # Debian's dbus-broker package makes itself the system and the user bus when installed; the
  # release's default is dbus-daemon, and a scenario that wants dbus-broker switches to it.
  chroot "$root" systemctl disable -q dbus-broker.service
  chroot "$root" systemctl --global disable -q dbus-broker.service
  # alice's user manager runs from boot and stays between her logins.
  mkdir -p "$root/var/lib/systemd/linger"; touch "$root/var/lib/systemd/linger/alice"
  echo synaps-vm >"$root/etc/hostname"
  printf '%s\n' "$job_unit" >"$root/etc/systemd/system/synaps-vm-job.service"
  printf '%s\n' "$job_script" >"$root/usr/local/sbin/synaps-vm-job"
  chmod 0755 "$root/usr/local/sbin/synaps-vm-job"
  chroot "$root" systemctl enable -q synaps-vm-job.service systemd-oomd.service
  # Boot quickly: nothing the job does needs these.
  chroot "$root" systemctl mask -q systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer fstrim.timer man-db.timer serial-getty@ttyS0.service getty@tty1.service 2>/dev/null || true
  chroot "$root" apt-get clean
  cp "$(ls "$root"/boot/vmlinuz-* | tail -n 1)" "$tmp/vmlinuz"
  basename "$(ls "$root"/boot/vmlinuz-* | tail -n 1)" | sed 's/^vmlinuz-//' >"$tmp/kernel-version"
  cp "$(ls "$root"/boot/initrd.img-* | tail -n 1)" "$tmp/initrd"
  rm -f "$tmp/disk.raw"
  # mke2fs says "Creating regular file" on its standard output even with -q; this function's output
  # is the directory it made.
  mkfs.ext4 -q -L synaps-root -d "$root" "$tmp/disk.raw" 4G >&2
  # Swap as a disk of its own: a swap file inside the mkfs -d image is sparse, and refused.
  truncate -s 512M "$tmp/swap.raw"
  mkswap -q "$tmp/swap.raw" >/dev/null
  rm -rf "$root"
  rm -rf "$dir"; mv "$tmp" "$dir"
  echo "$layout" >"$dir/.rig-ready"
  echo "vm-rig: Debian $r image made in $((SECONDS - started)) s" >&2
  echo "$dir"
}

if [ ${#fetch_only[@]} -gt 0 ]; then
  for r in "${fetch_only[@]}"; do
    case " $releases_known " in *" $r "*) ;; *) echo "vm-rig: unsupported release $r ($usage)" >&2; exit 2 ;; esac
    prepare "$r" >/dev/null
  done
  exit 0
fi
case " $releases_known " in *" $release "*) ;; *) echo "vm-rig: --release ${releases_known// /|} is needed ($usage)" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { echo "vm-rig: no command given ($usage)" >&2; exit 2; }
need_tools
images=$(prepare "$release")

run="$(mktemp -d /tmp/synaps-vm.XXXXXX)"
qemu_pid=""
cleanup() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then kill -KILL "$qemu_pid" 2>/dev/null || true; fi
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

mkdir "$run/job"
[ -z "$share" ] || cp -a "$share/." "$run/job/"
printf '%s\n' "$*" >"$run/job/.command"
echo "$timeout" >"$run/job/.timeout"
size=$(( $(du -sm "$run/job" | cut -f1) * 2 + 64 ))
mkfs.ext4 -q -d "$run/job" "$run/job.raw" "${size}M" >/dev/null
rm -rf "$run/job"
: >"$run/out"

# The journal's notices and worse (systemd-oomd's kills among them) go to the console beside the
# kernel's messages, whose last lines are printed when a guest goes silent.
journal_to_console="systemd.journald.forward_to_console=1 systemd.journald.max_level_console=notice"
# -snapshot keeps every write the guest makes (its swap among them) in a file of qemu's in $run, and
# qemu pauses a guest whose write fails with ENOSPC, silently (seen in CI: the host's disk had been
# filled, and the guest went quiet in the middle of the swap case). So the host must have room for
# the guest's disks, and a silent guest's status is asked of qemu's monitor.
free_mb=$(df --output=avail --block-size=1M "$run" | tail -1 | tr -d ' ')
if [ "$free_mb" -lt 3072 ]; then
  echo "vm-rig: only $free_mb MB free on $(df --output=target "$run" | tail -1), where qemu keeps the guest's writes; at least 3072 MB wanted" >&2
  exit 2
fi
echo "vm-rig: booting Debian $release (kernel $(cat "$images/kernel-version"), TCG, 2 CPUs, 1 GiB, 512 MB swap)" >&2
started=$SECONDS
TMPDIR="$run" qemu-system-x86_64 -accel tcg,thread=multi -smp 2 -m 1024 -nodefaults -display none -no-reboot -nic none \
  -kernel "$images/vmlinuz" -initrd "$images/initrd" \
  -append "root=/dev/vda rw console=ttyS0 panic=-1 loglevel=4 systemd.show_status=0 $journal_to_console" \
  -drive "file=$images/disk.raw,format=raw,if=virtio,snapshot=on" \
  -drive "file=$run/job.raw,format=raw,if=virtio,snapshot=on" \
  -drive "file=$images/swap.raw,format=raw,if=virtio,snapshot=on" \
  -serial "file:$run/console" -serial "file:$run/out" -monitor "unix:$run/monitor,server=on,wait=off" \
  </dev/null >"$run/qemu.log" 2>&1 &
qemu_pid=$!
# The guest's own bound ends the command; this one ends a guest that never got that far, or that
# stopped answering.
deadline=$((SECONDS + timeout + 180))
silent_for=300
printed=0
heard=$SECONDS
size=0
# qemu_status: what qemu's monitor says of the guest ("running", or "paused (io-error)" when a
# write to its disks failed).
qemu_status() {
  python3 - "$run/monitor" <<'PY' 2>&1 || true
import socket, sys, time
with socket.socket(socket.AF_UNIX) as monitor:
    monitor.settimeout(5)
    monitor.connect(sys.argv[1])
    monitor.sendall(b"info status\n")
    time.sleep(1)
    said = monitor.recv(65536).decode(errors="replace")
print(" ".join(line.strip() for line in said.splitlines() if line.startswith("VM status")))
PY
}
shown() { tr -d "\r" | grep -v "^synaps-vm-rig: \(exit\|alive\)" || true; }
while kill -0 "$qemu_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] && [ $((SECONDS - heard)) -lt "$silent_for" ]; do
  now_size=$(stat -c %s "$run/out")
  if [ "$now_size" != "$size" ]; then size=$now_size; heard=$SECONDS; fi
  lines=$(wc -l <"$run/out")
  if [ "$lines" -gt "$printed" ]; then sed -n "$((printed + 1)),${lines}p" "$run/out" | shown; printed=$lines; fi
  sleep 1
done
if kill -0 "$qemu_pid" 2>/dev/null; then
  if [ $((SECONDS - heard)) -ge "$silent_for" ]; then
    echo "vm-rig: Debian $release said nothing for $silent_for s, not even that it is alive; killing it" >&2
    echo "vm-rig: qemu says: $(qemu_status)" >&2
    df -h "$run" >&2
  else
    echo "vm-rig: the machine did not power off within $((timeout + 180)) s of booting; killing it" >&2
  fi
  kill -KILL "$qemu_pid" 2>/dev/null || true
fi
wait "$qemu_pid" 2>/dev/null || true
qemu_pid=""
sed -n "$((printed + 1)),\$p" "$run/out" | shown
status=$(sed -n 's/^synaps-vm-rig: exit \([0-9]*\)\r*$/\1/p' "$run/out" | tail -n 1)
if [ -z "$status" ]; then
  # What the guest last said of itself: when it went silent, and how its memory stood.
  grep "^synaps-vm-rig: alive" "$run/out" | tr -d "\r" | tail -n 4 >&2 || true
  tail -n 40 "$run/console" >&2
  cat "$run/qemu.log" >&2
  echo "vm-rig: the job on Debian $release never finished (no exit status after $((SECONDS - started)) s; console above)" >&2
  exit 3
fi
echo "vm-rig: Debian $release: the job exited $status; the machine was up $((SECONDS - started)) s" >&2
exit "$status"
