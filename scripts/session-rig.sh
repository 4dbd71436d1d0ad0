#!/usr/bin/env bash
# Runs a command as a normal user in a real login session on a booted Debian release: systemd as
# PID 1 in a container, logind, user@UID.service started by a PAM login, /run/user/UID with the
# session bus, the user's scopes in a delegated cgroup subtree (docs/testing.md).
#
#   scripts/session-rig.sh --release 11|12|13 [--user-bus dbus-daemon|dbus-broker] [--bind-ro HOST-DIR:DIR]... -- COMMAND...
#   scripts/session-rig.sh --fetch 11 12 13        # only make those roots (once, into the cache)
#
# Debian 11 (bullseye: systemd 247, glibc 2.31, Python 3.9), 12 (bookworm: 252, 2.36, 3.11) and 13
# (trixie: 257, 2.41, 3.13) roots are made once with debootstrap from Debian's packages under
# $SYNAPS_RIG_CACHE/roots (default ~/.cache/synaps-scope/roots), with the release's own python3,
# gcc, g++, cmake and pkg-config, the users alice (uid 1000) and bob (uid 1001), and the machine's
# own Node 20 (an upstream build, as users of older releases install it) in /usr/local. Each run
# boots the root with systemd-nspawn over a throwaway overlay (nothing a run does is kept), waits
# until the system is up, runs COMMAND through `runuser -l alice` (PAM: a logind session,
# user@1000.service) and always powers the container off, killing it if it does not stop in time.
# COMMAND is one shell command line run by alice's login shell. Inside, /srv/synaps-host holds what
# the host offers the session (its CA bundle and npm registry, in /etc/profile.d/synaps-rig.sh).
# The session may run `sudo-bob CMD` to run CMD as bob in his own login session.
# The user bus is Debian's default, dbus-daemon (dbus-user-session); with --user-bus dbus-broker
# (Debian 12 and 13) it is dbus-broker, enabled for every user as a user would enable it
# (`systemctl --global enable dbus-broker.service`, which Fedora and Arch ship as their default)
# before alice logs in.
set -euo pipefail

here="$(dirname "$(readlink -f "$0")")"
releases_known="11 12 13"
usage="usage: $0 --release ${releases_known// /|} [--user-bus dbus-daemon|dbus-broker] [--bind-ro HOST:DIR]... -- COMMAND | $0 --fetch RELEASE..."

release=""
user_bus=dbus-daemon
fetch_only=()
binds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release="${2:-}"; shift 2 ;;
    --user-bus) user_bus="${2:-}"; shift 2 ;;
    --bind-ro) binds+=("--bind-ro=${2:?$usage}"); shift 2 ;;
    --fetch) shift; fetch_only=("$@"); set --; break ;;
    --) shift; break ;;
    *) echo "session-rig: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "session-rig: must run as root (debootstrap, systemd-nspawn)" >&2; exit 2; }

cache="${SYNAPS_RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/synaps-scope}/roots"
# Bump when what a root holds changes, so an older cache is made again.
layout="session-root 3"

suite_of() { case "$1" in 11) echo bullseye ;; 12) echo bookworm ;; 13) echo trixie ;; esac; }
systemd_of() { case "$1" in 11) echo 247 ;; 12) echo 252 ;; 13) echo 257 ;; esac; }

need_tools() {
  local need=()
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v nsenter >/dev/null || need+=(util-linux)
  [ ${#need[@]} -eq 0 ] && return
  echo "session-rig: installing ${need[*]} from Debian's packages" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
}

# shellcheck source=scripts/debian-mirror.sh
. "$here/debian-mirror.sh"

# Makes the root of release $1 once; prints its path.
prepare() {
  local r="$1" suite root
  suite=$(suite_of "$r"); root="$cache/$suite"
  if [ "$(cat "$root/.rig-ready" 2>/dev/null)" = "$layout" ]; then echo "$root"; return; fi
  need_tools
  local node npm_dir tmp="$root.tmp" started=$SECONDS
  node=$(command -v node) || { echo "session-rig: the machine's Node 20 (node) is needed to put into the root" >&2; return 1; }
  npm_dir="$(dirname "$(readlink -f "$node")")/../lib/node_modules/npm"
  [ -f "$npm_dir/bin/npm-cli.js" ] || { echo "session-rig: npm not found beside $node ($npm_dir)" >&2; return 1; }
  echo "session-rig: making a Debian $r ($suite) root with debootstrap (once, into $root)" >&2
  # A debootstrap that was killed leaves its /proc and /sys mounted in the unfinished root.
  awk -v under="$tmp/" 'index($2, under) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n 1 umount -l
  rm -rf "$tmp"; mkdir -p "$cache"
  # dbus-broker is installed, not enabled: --user-bus chooses it per boot.
  local broker=""
  [ "$r" = 11 ] || broker=",dbus-broker"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,procps,binutils,python3,python3-venv,gcc,g++,make,cmake,pkg-config,ca-certificates,bubblewrap$broker \
    "$suite" "$tmp" "$(debian_mirror)" >"$cache/$suite.debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/$suite.debootstrap.log" >&2; echo "session-rig: debootstrap $suite failed" >&2; return 1; }
  chroot "$tmp" useradd -m -u 1000 -s /bin/bash alice
  chroot "$tmp" useradd -m -u 1001 -s /bin/bash bob
  # Debian's dbus-broker package makes itself the system and the user bus when installed; the
  # release's default is dbus-daemon, and --user-bus chooses per boot.
  if [ -n "$broker" ]; then
    chroot "$tmp" systemctl disable -q dbus-broker.service
    chroot "$tmp" systemctl --global disable -q dbus-broker.service
  fi
  # bob lingers: his user manager runs from boot, so a scope of his outlives the login that made it.
  mkdir -p "$tmp/var/lib/systemd/linger"; touch "$tmp/var/lib/systemd/linger/bob"
  # The machine's Node 20 (an upstream build, glibc 2.28) and its npm, where users put such a build.
  install -D -m 0755 "$node" "$tmp/usr/local/bin/node"
  mkdir -p "$tmp/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$tmp/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/usr/local/bin/npx"
  # Where host facts are bound in at each boot; the login shell reads them.
  mkdir -p "$tmp/srv/synaps-host"
  ln -s /srv/synaps-host/profile.sh "$tmp/etc/profile.d/synaps-rig.sh"
  # A login as bob from alice's session, for tests of another user's scopes (root runs it).
  printf '#!/bin/sh\n# Runs "$*" as bob in his own login session.\nexec /srv/synaps-host/as-bob "$@"\n' >"$tmp/usr/local/bin/sudo-bob"
  chmod 0755 "$tmp/usr/local/bin/sudo-bob"
  # Boot quickly: nothing the tests do needs these.
  chroot "$tmp" systemctl mask -q systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer fstrim.timer man-db.timer 2>/dev/null || true
  chroot "$tmp" apt-get clean
  rm -rf "$root"; mv "$tmp" "$root"
  echo "$layout" >"$root/.rig-ready"
  echo "session-rig: Debian $r root made in $((SECONDS - started)) s" >&2
  echo "$root"
}

if [ ${#fetch_only[@]} -gt 0 ]; then
  for r in "${fetch_only[@]}"; do
    case " $releases_known " in *" $r "*) ;; *) echo "session-rig: unsupported release $r ($usage)" >&2; exit 2 ;; esac
    prepare "$r" >/dev/null
  done
  exit 0
fi
case " $releases_known " in *" $release "*) ;; *) echo "session-rig: --release ${releases_known// /|} is needed ($usage)" >&2; exit 2 ;; esac
case "$release:$user_bus" in
  *:dbus-daemon | 12:dbus-broker | 13:dbus-broker) ;;
  *) echo "session-rig: --user-bus $user_bus is not offered on Debian $release ($usage)" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "session-rig: no command given ($usage)" >&2; exit 2; }
need_tools
root=$(prepare "$release")

host="$(mktemp -d /tmp/synaps-session.XXXXXX)"
chmod 0755 "$host"
# What the host offers the session: its CA bundle and npm registry (the machine's own settings),
# so that pip and npm inside reach the registries as the host's do.
ca=""
for f in "${SSL_CERT_FILE:-}" "${NODE_EXTRA_CA_CERTS:-}" /etc/ssl/certs/ca-certificates.crt; do
  [ -n "$f" ] && [ -f "$f" ] && { ca="$f"; break; }
done
{
  echo "# Written by scripts/session-rig.sh for this boot."
  if [ -n "$ca" ]; then
    cp "$ca" "$host/ca.crt"
    echo "export NODE_EXTRA_CA_CERTS=/srv/synaps-host/ca.crt SSL_CERT_FILE=/srv/synaps-host/ca.crt PIP_CERT=/srv/synaps-host/ca.crt npm_config_cafile=/srv/synaps-host/ca.crt"
  fi
  registry=$(npm config get registry 2>/dev/null || true)
  [ -z "$registry" ] || printf 'export npm_config_registry=%q npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false\n' "$registry"
  echo "export SYNAPS_SESSION_RELEASE=$release SYNAPS_SESSION_SYSTEMD=$(systemd_of "$release") SYNAPS_SESSION_USER_BUS=$user_bus"
} >"$host/profile.sh"
printf '#!/bin/sh\n# Written by scripts/session-rig.sh: asks the host side to run "$*" as bob.\nprintf "%%s\\n" "$*" >/srv/synaps-host/bob.fifo && cat /srv/synaps-host/bob.out.fifo\n' >"$host/as-bob"
chmod 0644 "$host"/*
chmod 0755 "$host/as-bob"

nspawn_pid="" leader="" bob_server=""
cleanup() {
  [ -z "$bob_server" ] || kill "$bob_server" 2>/dev/null || true
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$nspawn_pid" 2>/dev/null; then
      echo "session-rig: the container did not power off within 10 s; killing it" >&2
      [ -z "$leader" ] || kill -KILL "$leader" 2>/dev/null || true
      kill -KILL "$nspawn_pid" 2>/dev/null || true
    fi
    wait "$nspawn_pid" 2>/dev/null || true
  fi
  rm -rf "$host"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

log="$host/boot.log"
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn --register=no --keep-unit -q -D "$root" --volatile=overlay \
  --bind-ro="$host:/srv/synaps-host" "${binds[@]}" -b --console=pipe >"$log" 2>&1 </dev/null &
nspawn_pid=$!
state=""
for _ in $(seq 600); do
  kill -0 "$nspawn_pid" 2>/dev/null || { cat "$log" >&2; echo "session-rig: the container exited while booting" >&2; exit 1; }
  # The container's PID 1 is the child of nspawn that runs systemd; early on nspawn has another,
  # short-lived child, which is never taken for it (CI once waited on that one until its bound).
  leader=""
  for child in $(pgrep -P "$nspawn_pid" || true); do
    case "$(cat "/proc/$child/comm" 2>/dev/null)" in systemd|init) leader=$child; break ;; esac
  done
  if [ -n "$leader" ]; then
    state=$(nsenter -t "$leader" -a systemctl is-system-running 2>/dev/null || true)
    case "$state" in running|degraded) break ;; esac
  fi
  sleep 0.1
done
case "$state" in
  running|degraded) ;;
  *) tail -n 30 "$log" >&2; echo "session-rig: Debian $release did not finish booting within 60 s (state: ${state:-none}, PID 1: ${leader:-not found})" >&2; exit 1 ;;
esac
got=$(nsenter -t "$leader" -a systemctl --version | awk 'NR == 1 {print $2}')
[ "$got" = "$(systemd_of "$release")" ] || { echo "session-rig: Debian $release booted systemd $got, not $(systemd_of "$release")" >&2; exit 1; }

if [ "$user_bus" = dbus-broker ]; then
  nsenter -t "$leader" -a systemctl --global enable -q dbus-broker.service
fi

# Requests to run something as bob come through a FIFO, served here as root for the session.
mkfifo -m 0666 "$host/bob.fifo" "$host/bob.out.fifo"
(
  while read -r line <"$host/bob.fifo"; do
    nsenter -t "$leader" -a runuser -l bob -c "$line" >"$host/bob.out.fifo" 2>&1 || true
  done
) </dev/null >/dev/null 2>&1 &
bob_server=$!

echo "session-rig: Debian $release booted (systemd $got, user bus $user_bus); running the command as alice in a login session" >&2
status=0
nsenter -t "$leader" -a runuser -l alice -c "$*" </dev/null || status=$?
exit "$status"
