# The cases where the kernel acts rather than systemd-oomd, sourced by scenarios.sh for its `cap`
# and `limits` steps (it defines the helpers used here: alice, ok, fail, wait_until, configure,
# cgroup_in, pid_of, alive, sweep, $here): the operator's cap (tool_scope_slice with MemoryMax=,
# the kernel's OOM killer inside the tool's scope; R12's warnings) and each tool's own limits
# (`synaps-scope run --wait -p ...` through both wrappers).
# shellcheck shell=bash

# The operator's cap: a slice with MemoryMax= in alice's unit files, named by tool_scope_slice.
cap_case() {
  configure none
  alice 'printf "[Slice]\nMemoryMax=160M\nMemorySwapMax=0\n" >~/.config/systemd/user/agent-tools.slice && systemctl --user daemon-reload'
  alice 'printf "daemon_scope_slice = agent-daemon.slice\ntool_scope_slice = agent-tools.slice\n" >~/.config/synaps/config'
  local state; state=$(mktemp -d /tmp/case.XXXXXX); chmod 0777 "$state"
  alice "exec synaps-scope run --kind daemon -- ~/venv/bin/python $here/daemon.py $state 400 scoped" >"$state/log" 2>&1 &
  wait_until 30 test -s "$state/hog" || { cat "$state/log"; fail "cap: the daemon did not launch its tools"; }
  local daemon_cg hog_cg idle_cg
  daemon_cg=$(cgroup_in "$state/daemon"); hog_cg=$(cgroup_in "$state/hog"); idle_cg=$(cgroup_in "$state/idle")
  [[ "$hog_cg" == */agent.slice/agent-tools.slice/synaps-tool-*.scope ]] || fail "cap: the runaway is not in agent-tools.slice: $hog_cg"
  [[ "$idle_cg" == */agent.slice/agent-tools.slice/synaps-tool-*.scope ]] || fail "cap: the idle tool is not in agent-tools.slice: $idle_cg"
  # The runaway grows once the daemon's watchers watch (daemon.py makes STATE/go, within 120 s).
  wait_until 130 test -s "$state/go" || { cat "$state/log"; fail "cap: the daemon never let the runaway grow"; }
  wait_until 120 test -s "$state/after" || { cat "$state/log"; fail "cap: the runaway was not killed within 120 s of its growing ($(cat "$state/go"))"; }
  local after; after=$(cat "$state/after")
  [[ "$after" == *" hog -9" ]] || fail "cap: the runaway ended otherwise than by SIGKILL: $after"
  local slice_events; slice_events="/sys/fs/cgroup${hog_cg%/*}/memory.events"
  [ "$(awk '$1 == "oom_kill" {print $2}' "$slice_events")" -ge 1 ] || fail "cap: the slice's memory.events counts no OOM kill: $(cat "$slice_events")"
  alive "$(pid_of "$state/daemon")" || fail "cap: the daemon died"
  alive "$(pid_of "$state/idle")" || fail "cap: the other tool in the same slice died"
  wait_until 30 test -s "$state/ending" || fail "cap: the daemon's handle told nothing"
  [[ "$(cat "$state/ending")" == "kernel-oom None "[1-9]*" memory-events "* ]] || fail "cap: the handle told \"$(cat "$state/ending")\", not the kernel's OOM kill on memory.events"
  ok "operator's cap: the daemon's handle tells: $(cut -d' ' -f5- "$state/ending")"
  ok "operator's cap: agent-tools.slice MemoryMax=160M; the kernel's OOM killer killed the runaway in $(basename "$hog_cg") (slice memory.events: oom_kill $(awk '$1 == "oom_kill" {print $2}' "$slice_events")); the daemon and the other tool in the slice live on"
  # R12: nothing said of a slice with limits; one warning for a misspelled one.
  grep -q 'agent-tools.slice' "$state/log" && fail "cap: a warning about agent-tools.slice, which has limits: $(cat "$state/log")"
  local warned
  warned=$(alice 'SYNAPS_PROCESS_SCOPES=on synaps-scope run --kind tool -- sh -c "sleep 2" 2>&1 >/dev/null; true' | grep -c 'agent-tools.slice' || true)
  [ "$warned" = 0 ] || fail "cap: R12 warned about agent-tools.slice, which has MemoryMax"
  alice 'printf "tool_scope_slice = agent-tool.slice\n" >~/.config/synaps/config'
  warned=$(alice 'synaps-scope run --kind tool -- sh -c "sleep 2" 2>&1 >/dev/null; true')
  grep -q 'agent-tool.slice' <<<"$warned" || fail "cap: no R12 warning for the misspelled agent-tool.slice: $warned"
  [ "$(echo "$warned" | grep -c 'agent-tool.slice')" = 1 ] || fail "cap: R12 warned more than once: $warned"
  ok "R12 against a real manager reading real limits: silent for agent-tools.slice (MemoryMax=160M), one warning for agent-tool.slice: $(echo "$warned" | grep 'agent-tool.slice' | head -c 200)"
  alice 'printf "daemon_scope_slice = agent-daemon.slice\n" >~/.config/synaps/config'
  sweep "$daemon_cg" "$hog_cg" "$idle_cg"
  rm -rf "$state"
}

# A launch's own limits (A6) as alice, through each wrapper: MemoryMax is the kernel's limit inside
# the tool's scope (its memory.max, its OOM kill told by `run --wait`, exit 137, the daemon beside it
# alive), MemoryHigh throttles without a kill, TasksMax stops the fork past it, CPUQuota holds a
# spinning tool to about half a CPU; a limit whose controller alice's manager lacks is said.
limits_case() {
  configure none
  local controllers
  controllers=$(alice 'synaps-scope doctor' | sed -n 's/^limits: *//p')
  [ -n "$controllers" ] || fail "limits: doctor names no controllers"
  ok "limits: doctor: $controllers"
  local state; state=$(mktemp -d /tmp/limits.XXXXXX); chmod 0777 "$state"
  alice "exec synaps-scope run --kind daemon -- sleep 600" >"$state/daemon.log" 2>&1 &
  local daemon=$!
  wait_until 10 sh -c "pgrep -u alice -x sleep >/dev/null" || fail "limits: the daemon did not start"
  local tool="$here/limits.py" out status
  for wrapper in synaps-scope-exec systemd-run; do
    local run="SYNAPS_SCOPE_LAUNCHER=$wrapper synaps-scope run --wait"
    status=0
    out=$(alice "$run -p MemoryMax=64M -p MemorySwapMax=0 -- python3 $tool max 2>&1") || status=$?
    [ "$status" = 137 ] || fail "limits ($wrapper): MemoryMax=64M: exit status $status, not 137: $out"
    grep -q '^memory.max 67108864$' <<<"$out" || fail "limits ($wrapper): the scope's memory.max while it ran: $out"
    grep -q "killed by the kernel's OOM killer under MemoryMax=64M (told by the kernel's memory.events" <<<"$out"       || fail "limits ($wrapper): run --wait did not tell the kernel's OOM kill: $out"
    alive "$(pgrep -u alice -x sleep | head -1)" || fail "limits ($wrapper): the daemon beside the tool died"
    # The peak is read within one of the tool's 8 MB steps of the limit.
    local peak; peak=$(echo "$out" | sed -n 's/.*memory peak \([0-9]*\)\.[0-9] MiB.*/\1/p')
    [ -n "$peak" ] && [ "$peak" -ge 52 ] && [ "$peak" -le 64 ] || fail "limits ($wrapper): run --wait told a memory peak of ${peak:-nothing} MiB under MemoryMax=64M: $out"
    ok "limits ($wrapper): MemoryMax=64M: the kernel killed the tool in its scope, the daemon lives; run --wait: $(echo "$out" | grep '^synaps-scope: synaps-tool')"

    out=$(alice "$run -p MemoryHigh=32M -- python3 $tool high 64 2>&1") || fail "limits ($wrapper): MemoryHigh=32M: the tool did not live: $out"
    local high; high=$(echo "$out" | sed -n 's/^memory.high 33554432 high \([0-9]*\)$/\1/p')
    [ -n "$high" ] && [ "$high" -gt 0 ] || fail "limits ($wrapper): MemoryHigh=32M did not throttle (memory.events high): $out"
    ok "limits ($wrapper): MemoryHigh=32M: the tool grew to 64 MB and lived, throttled $high times (memory.events high)"

    out=$(alice "$run -p TasksMax=8 -- python3 $tool tasks 12 2>&1") || fail "limits ($wrapper): TasksMax=8: $out"
    grep -q '^forks 7 then BlockingIOError pids.max 8$' <<<"$out" || fail "limits ($wrapper): TasksMax=8: $out"
    ok "limits ($wrapper): TasksMax=8: the tool and 7 children; the next fork failed (EAGAIN), pids.max 8"

    out=$(alice "$run -p CPUQuota=50% -- python3 $tool spin 4 2>&1") || fail "limits ($wrapper): CPUQuota=50%: $out"
    if [[ "$controllers" == *"controllers "*cpu* ]]; then
      local used; used=$(echo "$out" | sed -n 's/^cpu \([0-9.]*\) cpu.max 50000 100000$/\1/p')
      [ -n "$used" ] && awk -v u="$used" 'BEGIN { exit !(u >= 0.35 && u <= 0.65) }'         || fail "limits ($wrapper): CPUQuota=50% did not hold the spinning tool to about half a CPU: $out"
      ok "limits ($wrapper): CPUQuota=50%: the spinning tool used $used of a CPU (cpu.max 50000 100000)"
    else
      grep -q 'CPUQuota will not be enforced: the user manager has no cpu controller' <<<"$out"         || fail "limits ($wrapper): CPUQuota=50% without a cpu controller was not said: $out"
      ok "limits ($wrapper): CPUQuota=50%: alice's manager has no cpu controller, and the launch says so"
    fi
    # A limit whose controller alice's manager was not given is said, and refused in required mode.
    if [[ "$controllers" != *"controllers "*io* ]]; then
      out=$(alice "$run -p IOWeight=50 -- true 2>&1") || fail "limits ($wrapper): IOWeight=50: $out"
      grep -q 'warning: IOWeight will not be enforced: the user manager has no io controller' <<<"$out" \
        || fail "limits ($wrapper): IOWeight=50 without an io controller was not said: $out"
      status=0
      out=$(alice "SYNAPS_PROCESS_SCOPES=required $run -p IOWeight=50 -- touch $state/ran 2>&1") || status=$?
      [ "$status" = 3 ] && [ ! -e "$state/ran" ] || fail "limits ($wrapper): required mode ran a launch whose IOWeight will not hold (exit $status): $out"
      ok "limits ($wrapper): IOWeight=50: alice's manager has no io controller; the launch says so, and required mode runs nothing (exit 3)"
    fi
  done
  kill "$daemon" 2>/dev/null || true
  pkill -u alice -x sleep || true
  rm -rf "$state"
}
