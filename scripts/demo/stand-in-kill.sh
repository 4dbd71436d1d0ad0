#!/usr/bin/env bash
# The systemd-oomd scenario with a STAND-IN for oomd, for machines where scripts/oomd-demo.sh cannot
# boot its virtual machine: a daemon in its own Daemon scope launches a memory-hungry tool; the
# cgroup oomd would pick (the largest) is killed the way oomd kills it, through cgroup.kill, by this
# script, not by systemd-oomd. With scopes the tool dies alone and the daemon goes on; without them
# (the daemon's children launched with SYNAPS_PROCESS_SCOPES=off) the same kill takes the daemon too.
#
#   scripts/demo/stand-in-kill.sh
#
# Uses the reachable user manager, or, when there is none, starts a private one (as root) with
# scripts/systemd-rig.sh. Exits non-zero if the scoped run loses the daemon or the unscoped run
# does not. Only ever kills cgroups named synaps-*.scope that this demonstration made.
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
root="$(dirname "$here")"

if ! systemctl --user show -p Version >/dev/null 2>&1 || [ -z "${XDG_RUNTIME_DIR:-}${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
  [ -z "${SYNAPS_DEMO_IN_RIG:-}" ] || { echo "oomd-demo: the private manager is not reachable" >&2; exit 1; }
  echo "oomd-demo: no user manager reachable; starting a private one (scripts/systemd-rig.sh)"
  exec "$here/systemd-rig.sh" -- env SYNAPS_DEMO_IN_RIG=1 "$0" "$@"
fi
if [ -z "${SYNAPS_SCOPE_BIN:-}" ]; then
  (cd "$root" && cargo build -q --bin synaps-scope)
  export SYNAPS_SCOPE_BIN="$root/target/debug/synaps-scope"
fi
mount_point=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' /proc/self/mountinfo)
[ -n "$mount_point" ] || { echo "oomd-demo: no cgroup2 hierarchy mounted" >&2; exit 1; }

work="$(mktemp -d)"
daemon_pid=""
kill_demo_cgroups() { # whatever is left in this demonstration's own scopes
  local cg
  for cg in $(cat "$work/cgroups" 2>/dev/null); do { echo 1 > "$mount_point$cg/cgroup.kill"; } 2>/dev/null || true; done
  : > "$work/cgroups"
}
cleanup() {
  [ -z "$daemon_pid" ] || kill -KILL "$daemon_pid" 2>/dev/null || true
  kill_demo_cgroups
  rm -rf "$work"
}
trap cleanup EXIT

cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.Z' "/proc/$1/status" 2>/dev/null; }
short() { echo "${1##*/}"; }
rss_mb() { # RSS of every process in cgroup $1, in MB
  local total=0 pid kb
  for pid in $(cat "$mount_point$1/cgroup.procs" 2>/dev/null); do
    kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    total=$((total + ${kb:-0}))
  done
  echo $((total / 1024))
}
wait_until() { # wait_until SECONDS COMMAND...: polls COMMAND until it succeeds
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.05; done
}
reply() { # reply WORD: waits for the daemon's next answer starting with WORD, prints its value
  wait_until 10 grep -q "^$1 " "$work/replies" || return 1
  local line; line=$(grep "^$1 " "$work/replies" | tail -n1); sed -i "/^$1 /d" "$work/replies"; echo "${line#* }"
}

# run_case LABEL TOOL_SCOPES: prints what happened; sets $daemon_survived to yes or no.
run_case() {
  local label="$1" tool_scopes="$2"
  echo "== $label"
  rm -f "$work/commands" "$work/replies"; mkfifo "$work/commands"; : > "$work/replies"
  SYNAPS_PROCESS_SCOPES=on "$SYNAPS_SCOPE_BIN" run --kind daemon -- \
    env SYNAPS_PROCESS_SCOPES="$tool_scopes" bash "$here/demo/toy-daemon.sh" "$work/commands" "$work/replies" \
    </dev/null >>"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  disown "$daemon_pid"  # its death is this demonstration's subject, not a job notice
  wait_until 10 grep -q 'synaps-daemon-.*\.scope$' "/proc/$daemon_pid/cgroup" \
    || { echo "oomd-demo: the daemon did not start in a Daemon scope" >&2; return 1; }
  local daemon_cg; daemon_cg=$(cgroup_of "$daemon_pid"); echo "$daemon_cg" >> "$work/cgroups"
  echo launch > "$work/commands"
  local tool_pid; tool_pid=$(reply tool)
  tool_grew() { [ "$(rss_mb "$(cgroup_of "$tool_pid")")" -ge 200 ]; }
  wait_until 20 tool_grew || { echo "oomd-demo: the tool never grew" >&2; return 1; }
  local tool_cg; tool_cg=$(cgroup_of "$tool_pid"); echo "$tool_cg" >> "$work/cgroups"
  echo "daemon  pid $daemon_pid in $(short "$daemon_cg")"
  echo "tool    pid $tool_pid in $(short "$tool_cg")"

  # oomd kills the largest candidate cgroup; the candidates are this demonstration's own.
  local pick="" pick_mb=-1 cg mb
  for cg in $(printf '%s\n' "$daemon_cg" "$tool_cg" | sort -u); do
    mb=$(rss_mb "$cg"); echo "cgroup  $(short "$cg") holds $mb MB"
    if [ "$mb" -gt "$pick_mb" ]; then pick="$cg"; pick_mb="$mb"; fi
  done
  case "$(short "$pick")" in synaps-*.scope) ;; *) echo "oomd-demo: refusing to kill $pick" >&2; return 1 ;; esac
  echo "stand-in for oomd kills $(short "$pick") ($pick_mb MB) with cgroup.kill"
  echo 1 > "$mount_point$pick/cgroup.kill"
  tool_gone() { ! alive "$tool_pid"; }
  wait_until 5 tool_gone || { echo "oomd-demo: the tool survived the kill" >&2; return 1; }
  sleep 0.2

  if alive "$daemon_pid"; then
    echo ping > "$work/commands"; local pong; pong=$(reply pong)
    echo launch > "$work/commands"; local next; next=$(reply tool)
    wait_until 10 grep -q 'synaps-tool-.*\.scope$' "/proc/$next/cgroup" || true
    cgroup_of "$next" >> "$work/cgroups"
    echo "after   tool killed; the daemon (pid $pong) survived, answered, and launched the next tool (pid $next) in $(short "$(cgroup_of "$next")")"
    daemon_survived=yes
    kill -KILL "$daemon_pid" 2>/dev/null || true
  else
    echo "after   tool killed, and the daemon (pid $daemon_pid) died with it"
    daemon_survived=no
  fi
  daemon_pid=""
  kill_demo_cgroups
}

run_case "with scopes: each tool command in its own scope" on
with_scopes=$daemon_survived
run_case "without scopes: tool commands in the daemon's own cgroup" off
without_scopes=$daemon_survived

if [ "$with_scopes" = yes ] && [ "$without_scopes" = no ]; then
  echo "== result: with scopes only the runaway tool died; without them the same kill took the daemon too"
else
  echo "== result: UNEXPECTED (daemon survived with scopes: $with_scopes; without: $without_scopes)" >&2
  cat "$work/daemon.log" >&2
  exit 1
fi
