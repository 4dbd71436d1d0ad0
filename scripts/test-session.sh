#!/usr/bin/env bash
# Tests every artifact of scripts/dist.sh where users run it: as a normal user (alice, uid 1000) in
# a real login session of a booted Debian 11, 12 and 13 (scripts/session-rig.sh), installed as
# README says with that release's own python3, pip, gcc, g++, cmake and pkg-config, and an upstream
# Node 20. In each release, as alice:
#   - everything scripts/test-dist.sh checks (wheel in a venv, npm package, C tarball from C and
#     C++ through pkg-config and CMake, shared and static), each child in a scope under
#     user@1000.service;
#   - the C tarball's command line: run, wrap, doctor (which names the release's systemd); run
#     and doctor with the system bus named as the session bus (the system manager passed over);
#     run from an unprivileged sandbox's pid namespace (bwrap --unshare-pid, a user namespace):
#     scoped where the manager takes a pidfd (Debian 13), else direct with the reason;
#   - the wheel: run, Popen, asyncio, a login shell through a real PTY keeping its -bash argv[0],
#     and scope handles: pids, stats, a kill of a tree with setsid escapees that leaves the caller
#     untouched, the caller's own scope refused, and bob's (uid 1001) scope refused with a clear
#     error (tests/dist/check_session.py); the same handles from C (tests/dist/handles.c, through
#     pkg-config) and from Node (tests/dist/check_session.js).
#
# A release may name its user bus, RELEASE:dbus-broker (12 and 13; scripts/session-rig.sh
# --user-bus); the checks then also see that the session bus is dbus-broker.
#
#   scripts/test-session.sh DIST-DIRECTORY [RELEASE[:BUS]...]     # default: 11 12 13
set -euo pipefail

if [ "${1:-}" != --inside ]; then
  here="$(dirname "$(readlink -f "$0")")"
  repo="$(readlink -f "$here/..")"
  dist="$(readlink -f "${1:?usage: $0 DIST-DIRECTORY [RELEASE...]}")"
  shift
  releases=("$@")
  [ ${#releases[@]} -gt 0 ] || releases=(11 12 13)
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml")
  # What the session sees, read-only: the artifacts and the checks, never the repository.
  stage="$(mktemp -d /tmp/synaps-session-stage.XXXXXX)"
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/dist" "$stage/src"
  cp "$dist"/* "$stage/dist/"
  cp "$repo"/tests/dist/* "$repo/examples/c/spawn.c" "$stage/src/"
  cp "$here/test-dist.sh" "$here/test-session.sh" "$stage/"
  chmod -R a+rX "$stage"
  summary=()
  for spec in "${releases[@]}"; do
    release="${spec%%:*}" bus=dbus-daemon
    [ "$spec" = "$release" ] || bus="${spec#*:}"
    echo "== Debian $release, user bus $bus: the artifacts as a normal user in a login session"
    log="$stage/session-$release-$bus.log"
    started=$SECONDS
    "$here/session-rig.sh" --release "$release" --user-bus "$bus" --bind-ro "$stage:/srv/synaps" -- \
      "bash /srv/synaps/test-session.sh --inside $version" 2>&1 | tee "$log" \
      || { echo "test-session: FAILED on Debian $release with $bus" >&2; exit 1; }
    summary+=("Debian $release (systemd $(sed -n 's/.*booted (systemd \([0-9]*\),.*/\1/p' "$log" | head -n 1), $bus): $(grep -c '^ok: ' "$log") checks passed as alice in $((SECONDS - started)) s")
  done
  printf '%s\n' "${summary[@]}"
  exit 0
fi

version="$2"
fail() { echo "test-session: $*" >&2; exit 1; }
uid=$(id -u)
[ "$uid" != 0 ] || fail "runs as a normal user, not root"
[ -n "${XDG_RUNTIME_DIR:-}" ] && [ -S "$XDG_RUNTIME_DIR/bus" ] || fail "no session bus: XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-(unset)}"
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
[[ "$own" == /user.slice/user-"$uid".slice/session-*.scope ]] || fail "not in a logind session scope: $own"
bus_service=$(systemctl --user show -p Id --value dbus.service)
case "$SYNAPS_SESSION_USER_BUS:$bus_service" in
  dbus-daemon:dbus.service | dbus-broker:dbus-broker.service) ;;
  *) fail "the user bus should be $SYNAPS_SESSION_USER_BUS, but dbus.service is $bus_service" ;;
esac
# The bus starts when first spoken to (dbus.socket): speak to it, then see who answered.
busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetId >/dev/null \
  || fail "the session bus does not answer"
pgrep -u "$uid" -x "$SYNAPS_SESSION_USER_BUS" >/dev/null || fail "no $SYNAPS_SESSION_USER_BUS of uid $uid runs"
echo "ok: the session bus is $SYNAPS_SESSION_USER_BUS ($bus_service)"
echo "ok: a login session of $(id -un) (uid $uid) in $own, $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | awk 'NR == 1 {print $NF}'), $(python3 --version), node $(node --version)"

work="$(mktemp -d)"
cp -r /srv/synaps/dist /srv/synaps/src "$work/"
# The same checks as from outside the repository on the build machine; here with the release's tools.
SYNAPS_DIST_HIDDEN=1 bash /srv/synaps/test-dist.sh "$work" "$version" /srv/synaps/no-repository

cd "$work"
prefix="$work/c/synaps-scope-$version-$(uname -m)-linux-gnu"
pass() { echo "ok: $*"; }

echo "== the C tarball's command line"
out=$("$prefix/bin/synaps-scope" run -- sh -c 'grep ^0:: /proc/$$/cgroup')
[[ "$out" == "0::/user.slice/user-$uid.slice/user@$uid.service/app.slice/synaps-tool-"*.scope ]] \
  || fail "synaps-scope run did not land in a scope of user@$uid.service: $out"
pass "synaps-scope run: ${out#0::}"
# One manager: the system bus named as the session bus (as root's is, where its session bus
# address is the system bus's). Its org.freedesktop.systemd1 is the system manager: passed over
# for the user's private socket, and doctor says why.
report=$(DBUS_SESSION_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket "$prefix/bin/synaps-scope" doctor) \
  || fail "synaps-scope doctor with the system bus as the session bus exited $?: $report"
grep -q "^reached by: *private socket $XDG_RUNTIME_DIR/systemd/private (the session bus passed over: .*is the system manager)" <<<"$report" \
  || fail "with the system bus as the session bus, doctor does not say it was passed over for the system manager: $report"
out=$(DBUS_SESSION_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket "$prefix/bin/synaps-scope" run -- sh -c 'grep ^0:: /proc/$$/cgroup')
[[ "$out" == "0::/user.slice/user-$uid.slice/user@$uid.service/app.slice/synaps-tool-"*.scope ]] \
  || fail "with the system bus as the session bus, synaps-scope run did not land in a scope of user@$uid.service: $out"
pass "the system bus named as the session bus: its manager passed over for the private socket, the launch in ${out#0::}"
# From there the manager is named the launch's process by a pidfd where it takes one (257 on);
# before, nothing names that process alone (the socket's other end, "the sender", could be a relay
# that passes descriptors), and the launch is direct with the reason.
out=$(bwrap --dev-bind / / --unshare-pid --proc /proc -- "$prefix/bin/synaps-scope" run -- sh -c 'echo "pid $$ $(grep ^0:: /proc/self/cgroup)"' 2>"$HOME/bwrap.err") \
  || fail "synaps-scope run in an unprivileged sandbox's pid namespace (bwrap --unshare-pid) failed: $out $(cat "$HOME/bwrap.err")"
if [ "${SYNAPS_SESSION_SYSTEMD%%[!0-9]*}" -ge 257 ]; then
  [[ "$out" == "pid "[0-9]*" 0::/user.slice/user-$uid.slice/user@$uid.service/app.slice/synaps-tool-"*.scope ]] \
    || fail "synaps-scope run from bwrap --unshare-pid did not land in a scope of user@$uid.service: $out"
  pass "synaps-scope run in an unprivileged sandbox's pid namespace (bwrap --unshare-pid, $(bwrap --version)): ${out}"
else
  [[ "$out" == "pid "[0-9]*" 0::/"* && "$out" != *synaps-tool-* ]] && grep -q "takes no pidfd" "$HOME/bwrap.err" \
    || fail "synaps-scope run from bwrap --unshare-pid on systemd $SYNAPS_SESSION_SYSTEMD was not direct with the reason: $out $(cat "$HOME/bwrap.err")"
  pass "synaps-scope run in an unprivileged sandbox's pid namespace (bwrap --unshare-pid, $(bwrap --version)) on systemd $SYNAPS_SESSION_SYSTEMD, which takes no pidfd: direct, with the reason (${out})"
fi
out=$("$prefix/bin/synaps-scope" wrap -- true)
grep -q -- "--unit=synaps-tool-[0-9a-f]\{32\}\.scope" <<<"$out" || fail "synaps-scope wrap printed no scope unit: $out"
pass "synaps-scope wrap"
report=$("$prefix/bin/synaps-scope" doctor) || fail "synaps-scope doctor exited $?: $report"
grep -q "^user manager:  systemd $SYNAPS_SESSION_SYSTEMD[ .~-]" <<<"$report" || fail "doctor does not name systemd $SYNAPS_SESSION_SYSTEMD: $report"
grep -qx 'verdict: *scopes will be used (exit 0)' <<<"$report" || fail "doctor does not say scopes will be used: $report"
pass "synaps-scope doctor: systemd $SYNAPS_SESSION_SYSTEMD, scopes will be used"

echo "== bursts of 64 launches, each amid a re-exec or a reload of alice's manager (as a distribution's upgrade does)"
for event in daemon-reexec:0 daemon-reexec:0.04 daemon-reexec:0.08 daemon-reload:0.04; do
  delay=${event#*:}
  log="$work/${event/:/-}.log"
  : >"$log"
  pids=()
  for _ in $(seq 64); do
    SYNAPS_PROCESS_SCOPES=required "$prefix/bin/synaps-scope" run -- sh -c 'grep ^0:: /proc/$$/cgroup >>"$1"' sh "$log" \
      </dev/null >/dev/null 2>>"$work/reexec.err" &
    pids+=($!)
  done
  sleep "$delay"
  systemctl --user "${event%:*}"
  failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  scoped=$(grep -c "^0::/user.slice/user-$uid.slice/user@$uid.service/app.slice/synaps-tool-.*\.scope$" "$log" || true)
  [ "$failed" = 0 ] && [ "$scoped" = 64 ] \
    || fail "${event%:*} ${delay} s into 64 launches: $scoped of 64 scoped, $failed failed: $(head -c 2000 "$work/reexec.err")"
done
pass "256 of 256 launches scoped amid three re-executions and a reload of the manager (required mode, the session bus and the private socket)"

echo "== bob (uid 1001) starts a scope of his own, for the handle checks"
bob_pid=$(sudo-bob "mkdir -p c && tar -C c -xzf /srv/synaps/dist/synaps-scope-$version-$(uname -m)-linux-gnu.tar.gz && { c/*/bin/synaps-scope run -- sleep 120 </dev/null >/dev/null 2>&1 & echo \$!; }")
[[ "$bob_pid" =~ ^[0-9]+$ ]] || fail "bob's scope did not start: $bob_pid"
for _ in $(seq 50); do
  grep -q '/user@1001.service/app.slice/synaps-tool-' "/proc/$bob_pid/cgroup" 2>/dev/null && break
  sleep 0.1
done
bob_cgroup=$(sed -n 's/^0:://p' "/proc/$bob_pid/cgroup")
[[ "$bob_cgroup" == */user@1001.service/app.slice/synaps-tool-*.scope ]] || fail "bob's command is not in his scope: $bob_cgroup"
pass "bob's scope: $bob_cgroup"

echo "== the wheel: run, Popen, asyncio, a login shell on a PTY, scope handles"
venv/bin/python src/check_session.py "$prefix" "$bob_pid"
echo "== scope handles from C (the C tarball, the release's cc) and from Node (the npm package)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046 # pkg-config prints flags
cc -std=c11 -Wall -Wextra -Werror -pedantic src/handles.c $(pkg-config --cflags --libs synaps_scope) \
  -Wl,-rpath,"$prefix/lib" -o handles
./handles "$bob_pid"
pass "C handles"
mv prebuilds-aside project/node_modules/synaps-scope/prebuilds
cp src/check_session.js project/
(cd project && node check_session.js "$bob_pid")
pass "Node handles"
[ -d "/proc/$bob_pid" ] || fail "bob's command died"
pass "bob's command still runs"
echo "test-session: Debian $SYNAPS_SESSION_RELEASE, systemd $SYNAPS_SESSION_SYSTEMD: every check passed"
