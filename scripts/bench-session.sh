#!/usr/bin/env bash
# Runs the launch benchmark's ways to the manager (benches/launch.rs, SYNAPS_BENCH_ONLY=routes)
# as a normal user in a real login session of booted Debian releases (scripts/session-rig.sh):
# alice's own user manager, her session bus (dbus-daemon, from dbus-user-session), the release
# build of the launcher program as it ships (scripts/build-exec.sh). Side by side in one run: a
# bare systemd-run, a launch along each route, the floor, a plain spawn, and the manager's and the
# broker's CPU per launch.
#
# A release may name its user bus, RELEASE:dbus-broker (scripts/session-rig.sh --user-bus): the
# broker's CPU is then dbus-broker's.
#
#   scripts/bench-session.sh [RELEASE[:BUS]...]     # default: 12 13 12:dbus-broker 13:dbus-broker
#   SYNAPS_BENCH_QUICK=1 scripts/bench-session.sh 12
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(12 13 12:dbus-broker 13:dbus-broker)

exec_program=$(scripts/build-exec.sh)
bench=$(cargo bench --locked --bench launch --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "launch" and m.get("executable"):
        print(m["executable"])')
[ -x "$bench" ] || { echo "bench-session: the launch benchmark did not build" >&2; exit 1; }
stage=$(mktemp -d /tmp/synaps-bench-session.XXXXXX)
trap 'rm -rf "$stage"' EXIT
cp "$bench" "$stage/launch"
cp "$exec_program" "$stage/synaps-scope-exec"
chmod -R a+rX "$stage"

for spec in "${releases[@]}"; do
  release="${spec%%:*}" bus=dbus-daemon
  [ "$spec" = "$release" ] || bus="${spec#*:}"
  echo "== Debian $release, as alice in her login session, user bus $bus"
  scripts/session-rig.sh --release "$release" --user-bus "$bus" --bind-ro "$stage:/srv/bench" -- \
    "SYNAPS_BENCH_ONLY=routes SYNAPS_BENCH_QUICK=${SYNAPS_BENCH_QUICK:-} SYNAPS_BENCH_EXEC=/srv/bench/synaps-scope-exec /srv/bench/launch --bench"
done
