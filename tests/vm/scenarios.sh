#!/usr/bin/env bash
# The seed's scenario against the real systemd-oomd and a real memory controller, run by the guest's
# root inside scripts/vm-rig.sh (scripts/test-vm.sh puts this directory and the release artifacts in
# /srv/synaps). alice installs the C tarball as its README says; her agent daemon (daemon.py) runs
# in its own daemon scope (daemon_scope_slice) and launches an idle tool and a runaway (hog.py),
# each through the installed `synaps-scope run`.
#
#   scenarios.sh oomd CASE...   CASE = RULE:PLACEMENT:MODE[:BUS]
#       RULE       swap        ManagedOOMSwap=kill on -.slice (Fedora 34, Ubuntu 22.04)
#                  user        ManagedOOMMemoryPressure=kill on user@.service (Ubuntu, Fedora today)
#                  slices      ManagedOOMMemoryPressure=kill on every slice of the user's manager (user/slice.d/)
#                  both        both rules on, as Debian, Fedora and Ubuntu ship them, the pressure
#                              rule the one that acts
#       PLACEMENT  login       the daemon is started from alice's login shell (session-cN.scope)
#                  tab         ... from a terminal tab's own scope under app.slice
#       MODE       scoped      every launch in its own scope (the default)
#                  direct      the control: SYNAPS_PROCESS_SCOPES=off for the daemon and its tools
#                  leaf        scoped, the runaway 900 cgroups below its scope (leaf.sh), where oomd,
#                              which kills leaf cgroups, kills it; the daemon watching it held to
#                              512 descriptors
#       BUS        dbus-daemon alice's session bus as Debian ships it (the default)
#                  dbus-broker her session bus is dbus-broker (Fedora's and Arch's), for this case
#   scenarios.sh cap            the operator's cap: tool_scope_slice with MemoryMax=, the kernel's
#                               OOM killer inside the tool's scope; R12's warnings
#   scenarios.sh calm [SECONDS] the calm control of the warning before oomd acts: ordinary work,
#                               watched, under the pressure rule; no warning
#   scenarios.sh handles        scope handles against real controllers: Python, C, Node
#   scenarios.sh limits         each tool's own limits (synaps-scope run -p, both wrappers): the
#                               kernel enforces them in the tool's scope, and `run --wait` tells
#                               how it ended
#   (cap and limits are in kernel-cases.sh, which only those steps source: scripts/oomd-demo.sh
#   stages this file, daemon.py and hog.py alone, for an oomd step)
#
# Prints "ok: ..." per check and exits non-zero at the first that fails. Under TCG thrashing is
# slow, so the pressure rules act at 2 % for 5 s (distributions ship 50-80 % for 20-30 s): which
# cgroup oomd picks is the subject, not when; and alice's app.slice has MemoryHigh= under them, so
# that the runaway's stall is its own rather than the machine's services' (configure).
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
release="$(. /etc/os-release && echo "$VERSION_ID")"
wheel=$(ls "$here"/dist/synaps_scope-*.whl 2>/dev/null || true)
systemd_version=$(systemctl --version | awk 'NR == 1 {print $2}')
label="Debian $release (systemd $systemd_version, kernel $(uname -r))"
fail() { echo "FAIL: $label: $*" >&2; exit 1; }
ok() { echo "ok: $label: $*"; }
alice() { runuser -l alice -c "$1"; }
wait_until() { # wait_until SECONDS COMMAND...
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.2; done
}

# alice installs the C tarball as its README says (unpacked into ~/.local, bin/ on PATH), and the
# wheel into a venv (~/venv), whose python runs her daemon.
install_artifacts() {
  [ -x /home/alice/.local/bin/synaps-scope ] && return
  local tarball
  tarball=$(ls "$here"/dist/synaps-scope-*-linux-gnu.tar.gz)
  alice "mkdir -p ~/.local && tar -xzf $tarball -C ~/.local --strip-components=1"
  alice 'synaps-scope --version >/dev/null' || fail "the tarball's synaps-scope does not run as alice"
  if [ -n "$wheel" ]; then
    # The release's pip, run in the venv (ensurepip would compile a pip of its own, minutes under TCG).
    alice "python3 -m venv --without-pip --system-site-packages ~/venv && ~/venv/bin/python -m pip install -q --no-index $wheel" \
      || fail "the wheel does not install as alice"
  else
    alice 'python3 -m venv ~/venv'
    echo "note: no wheel staged (scripts/oomd-demo.sh stages only the command line): the daemon makes no scope handle, so how the runaway's scope ended is not asked"
  fi
  alice 'mkdir -p ~/.config/synaps && printf "daemon_scope_slice = agent-daemon.slice\n" >~/.config/synaps/config'
  alice 'mkdir -p ~/.config/systemd/user && printf "[Slice]\nMemoryHigh=infinity\n" >~/.config/systemd/user/agent-daemon.slice && systemctl --user daemon-reload'
  ok "alice installed the C tarball into ~/.local ($(alice 'command -v synaps-scope'))${wheel:+ and the wheel into ~/venv}"
}

# alice's manager runs from boot (linger) and must outlive every case; when it does not, what the
# machine's journal says of it and of oomd's actions comes with the failure.
manager_running() { # manager_running WHEN
  systemctl is-active -q user@1000.service && return
  systemctl status --no-pager --lines=0 user@1000.service || true
  journalctl -q -o short-monotonic --no-pager -n 40 -u user@1000.service -u systemd-oomd -u user-1000.slice || true
  journalctl -k -q -o short-monotonic --no-pager | grep -i -A2 'out of memory\|oom-kill' | tail -n 8 || true
  fail "alice's user manager is not running $1"
}

# What the machine gives: cgroup2 only, with the memory controller; swap; oomd; alice's manager.
check_machine() {
  [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || fail "/sys/fs/cgroup is not cgroup2"
  ! grep -q ' cgroup ' /proc/mounts || fail "a cgroup v1 hierarchy is mounted"
  grep -qw memory /sys/fs/cgroup/cgroup.controllers || fail "no memory controller"
  [ -e /proc/pressure/memory ] || fail "no PSI"
  [ "$(swapon --show=NAME --noheadings | wc -l)" -ge 1 ] || fail "no swap"
  systemctl is-active -q systemd-oomd || fail "systemd-oomd is not running"
  manager_running "as the scenarios start"
  ok "cgroup2 only ($(cat /sys/fs/cgroup/cgroup.controllers)), PSI, $(swapon --show=SIZE --noheadings | tr -d ' ') swap, systemd-oomd, user@1000.service"
}

# configure RULE: oomd's rules as distributions ship them (the pressure limit lowered for TCG).
# Debian's systemd-oomd ships two drop-ins, as Fedora 34 and Ubuntu 22.04 did: ManagedOOMSwap=kill
# on -.slice and ManagedOOMMemoryPressure=kill (50 %) on user@.service. A rule is taken away by an
# empty drop-in of the same name in /etc, which hides the package's.
configure() {
  local system=/etc/systemd/system
  rm -rf "$system/-.slice.d" "$system/user@.service.d" "$system/slice.d" /etc/systemd/user/slice.d /etc/systemd/oomd.conf.d
  mkdir -p /etc/systemd/oomd.conf.d "$system/-.slice.d" "$system/user@.service.d"
  printf '[OOM]\nDefaultMemoryPressureDurationSec=5s\n' >/etc/systemd/oomd.conf.d/10-synaps-vm.conf
  local swap_rule="$system/-.slice.d/10-oomd-root-slice-defaults.conf"
  local user_rule="$system/user@.service.d/10-oomd-user-service-defaults.conf"
  local pressure='ManagedOOMMemoryPressure=kill\nManagedOOMMemoryPressureLimit=2%%\n'
  local monitored
  # The lowest pressure limit of the rules in force: what settle waits for pressure to fall under.
  lowest_limit=2
  case "$1" in
    swap) # both, as shipped: the package's user@.service rule acts at 50 %
      printf '[Slice]\nManagedOOMSwap=kill\n' >"$swap_rule"
      lowest_limit=50
      monitored='Path: /$' ;;
    user)
      : >"$swap_rule"
      printf "[Service]\n$pressure" >"$user_rule"
      monitored='Path: /user.slice/user-1000.slice/user@1000.service$' ;;
    slices)
      : >"$swap_rule"; : >"$user_rule"
      # The user manager's slices only: on the system's own slices, at the rig's 2 %, the
      # runaway's reclaim of the services' pages made oomd kill systemd-journald (seen once,
      # Debian 12), which says nothing of where the library puts a tool; systemd advises against
      # pressure kills of system services.
      mkdir -p /etc/systemd/user/slice.d
      printf "[Slice]\n$pressure" >/etc/systemd/user/slice.d/10-oomd-per-slice-defaults.conf
      monitored='Path: /user.slice/user-1000.slice/user@1000.service/app.slice$' ;;
    both) # both rules on, as shipped, with the pressure rule's limit lowered so that it acts
      printf '[Slice]\nManagedOOMSwap=kill\n' >"$swap_rule"
      printf "[Service]\n$pressure" >"$user_rule"
      monitored='Path: /user.slice/user-1000.slice/user@1000.service$' ;;
    none) : >"$swap_rule"; : >"$user_rule"; monitored="" ;;
    *) fail "unknown rule $1" ;;
  esac
  # The pressure rules: alice's app.slice, where terminal tabs and tools go, has MemoryHigh=, so
  # that the runaway past it is reclaimed from its own cgroup and the stall is its own. Without
  # it, under TCG, the runaway's growth took the machine's own services' pages instead, and the
  # stall was theirs (seen: the machine's pressure at 28 % while app.slice's stayed at 0.5 %, and
  # no kill in 240 s). Which cgroup oomd picks is the subject; a slice's MemoryHigh= moves no tool.
  # Set at run time, so that it applies at once and a later rule's case takes it off. app_high is
  # what app.slice's memory.high then reads, for oomd_case to check.
  local high_setting=infinity
  app_high=max
  [ "$1" != user ] && [ "$1" != slices ] && [ "$1" != both ] || { high_setting=512M; app_high=$((512 << 20)); }
  alice "timeout 120 systemctl --user set-property --runtime app.slice MemoryHigh=$high_setting" || fail "alice could not set app.slice's MemoryHigh=$high_setting"
  local try
  for try in 1 2 3; do
    timeout 120 systemctl daemon-reload || fail "systemctl daemon-reload did not finish within 120 s"
    timeout 120 runuser -l alice -c 'systemctl --user daemon-reload' || fail "alice's daemon-reload did not finish within 120 s"
    timeout 120 systemctl restart systemd-oomd || fail "systemd-oomd did not restart within 120 s"
    # oomd learns the monitored cgroups from the managers, a moment after it starts.
    [ -z "$monitored" ] || wait_until 10 sh -c "oomctl | grep -q '$monitored'" && return 0
    echo "note: oomd does not monitor what the $1 rule names yet (try $try); reloading again"
  done
  oomctl
  fail "oomd never monitored what the $1 rule names ($monitored)"
}

# Every case starts with swap empty: what the one before pushed out (the machine's own services)
# stays there until touched, and a case's pressure would then be theirs rather than the runaway's.
drain_swap() {
  local held devices device
  held=$(swapon --show=USED --noheadings --bytes | awk '{s += $1} END {print int(s / 1048576)}')
  devices=$(swapon --show=NAME --noheadings)
  for device in $devices; do
    timeout 120 swapoff "$device" || fail "swapoff $device did not empty swap ($held MB) within 120 s"
    swapon "$device" || fail "swapon $device failed"
  done
  [ "$held" -lt 16 ] || echo "note: drained $held MB from swap before the case"
}

# some_avg10 PRESSURE-FILE: the share of time some task stalled, over the last 10 s, in %.
some_avg10() { awk -F'[ =]' '/^some/ {print $3}' "$1"; }

# Every case starts with pressure well under the limits in force: the pressure of the case before
# (or of drain_swap's swapoff, which faults the pushed-out pages back in) decays over tens of
# seconds (avg10 falls by e every 10 s), and with the rig's 2 % limits oomd would act on that
# (seen: a control case's kill 3 s in, for the pressure its predecessor left) rather than on the
# runaway's. Half the lowest limit of configure's rules: under the swap rule's 50 % that takes a
# few seconds, under the 2 % rules 20-30 s.
settle() {
  local bar pressure
  bar=$(awk -v limit="$lowest_limit" 'BEGIN {print limit / 2}')
  pressure="awk -v bar=$bar '/^some/ {split(\$2, a, \"=\"); exit !(a[2] < bar)}' /proc/pressure/memory"
  wait_until 90 sh -c "$pressure" || echo "note: memory pressure still $(some_avg10 /proc/pressure/memory) % after 90 s of waiting (bar $bar %)"
}

pid_of() { cut -d' ' -f1 "$1"; }
cgroup_in() { cut -d' ' -f2- "$1"; }
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.Z' "/proc/$1/status" 2>/dev/null; }

# Kills whatever a case left, by cgroup (never alice's manager or the machine's own).
sweep() {
  local cg
  for cg in "$@"; do
    case "$cg" in */synaps-*.scope | */session-*.scope | */vte-spawn-*.scope)
      [ -d "/sys/fs/cgroup$cg" ] && echo 1 >"/sys/fs/cgroup$cg/cgroup.kill" 2>/dev/null || true ;;
    esac
  done
  pkill -KILL -u alice -f '/srv/synaps/(daemon|hog)\.py' 2>/dev/null || true
  wait_until 20 sh -c '! pgrep -u alice -f "/srv/synaps/(daemon|hog)\.py" >/dev/null' || true
}

# user_bus BUS: alice's session bus becomes BUS (dbus-daemon or dbus-broker), as a user switches it
# (`systemctl --global enable dbus-broker.service`, whose alias is dbus.service), and her manager,
# started anew, is on it.
user_bus() {
  local bus="$1" service=dbus.service
  case "$bus" in
    dbus-broker) systemctl --global enable -q dbus-broker.service; service=dbus-broker.service ;;
    dbus-daemon) systemctl --global disable -q dbus-broker.service ;;
    *) fail "unknown user bus $bus" ;;
  esac
  # Her manager starts anew (she lingers), as at her next login after the switch.
  timeout 120 systemctl restart user@1000.service || fail "alice's manager did not restart within 120 s"
  alice 'systemctl --user start dbus.socket dbus.service' || fail "alice's session bus did not start as $bus"
  [ "$(alice 'systemctl --user show -p Id --value dbus.service')" = "$service" ] || fail "alice's dbus.service is not $service"
  wait_until 10 pgrep -u alice -x "$bus" >/dev/null || fail "no $bus of alice's runs"
  # Her manager joins the new bus: a question over the bus alone is answered.
  wait_until 10 runuser -l alice -c 'env -u XDG_RUNTIME_DIR DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus systemctl --user show -p Version >/dev/null 2>&1' \
    || fail "alice's manager is not on her $bus"
}

# warned_first CASE STATE HOG-UNIT IDLE-UNIT RULE: the daemon's one watch on both tools' scopes
# (daemon.py) warned of the runaway's scope under RULE before oomd killed it, never of the idle
# tool's; the lead time, from the first such warning to the kill (the library's reading of oomd's
# mark, written just before it), is written down: under the pressure rule at least half of oomd's
# duration, under the swap rule any time before the kill.
warned_first() {
  local case="$1" state="$2" hog_unit="$3" idle_unit="$4" rule="$5" first killed_at lead floor
  wait_until 10 test -s "$state/killed_at" || fail "$case: the daemon did not write down when the runaway was killed"
  [ -s "$state/warnings" ] || fail "$case: the daemon was not warned before oomd killed the runaway (its watch: $(cat "$state/watch" 2>/dev/null))"
  ! grep -q " $idle_unit " "$state/warnings" || fail "$case: the daemon was warned of its idle tool, which oomd did not kill: $(cat "$state/warnings")"
  first=$(awk -v u="$hog_unit" -v r="$rule" '$2 == u && $3 == r {print; exit}' "$state/warnings")
  [ -n "$first" ] || fail "$case: no warning of the runaway's scope under the $rule rule: $(cat "$state/warnings")"
  killed_at=$(cat "$state/killed_at")
  lead=$(awk -v k="$killed_at" -v w="${first%% *}" 'BEGIN {printf "%.1f", k - w}')
  floor=0
  [ "$rule" = swap ] || floor=$(echo "$first" | awk '{print $8 / 2}')
  awk -v l="$lead" -v f="$floor" 'BEGIN {exit !(l > f)}' \
    || fail "$case: warned ${lead} s before oomd's kill, not more than $floor s: $(cat "$state/warnings")"
  local trigger="no PSI trigger asked for (the swap rule alone)"
  [ ! -s "$state/trigger" ] || trigger=$(sed 's/^a PSI trigger on \([^ ]*\) .*/a PSI trigger on \1/; s/; read at .*//' "$state/trigger" | sort -u | paste -sd';')
  ok "$case: the daemon was warned ${lead} s before oomd killed the runaway (at least $floor s wanted), of it alone of its two tools: \"$(echo "$first" | cut -d' ' -f2-)\"; $(wc -l <"$state/warnings") warning(s) in all; $trigger"
}

# surface_warned CASE STATE SURFACE HOG-UNIT IDLE-UNIT RULE: the same watch made from C, Node or
# Python's asyncio (watch-c, watch.js, watch.py, which daemon.py starts beside its tools, and which
# watch before the runaway grows) warned of the runaway's scope under RULE, never of the idle
# tool's, and nothing after the watch was freed
# (Python: closing it ended its `async for`). C's callback, on the library's thread, warned before
# oomd killed it. Node's and Python's warnings reach their host's event loop, which runs only once
# the kernel gives the host its pages back: their lead over the kill and their lag behind C's are
# written down, not bounded (the same reading as C's, to the figure, reached Node's listener 4.6 s
# later in one run, 0.1 s in another; an idle host's pages go first amid the thrash).
surface_warned() {
  local case="$1" state="$2" surface="$3" hog_unit="$4" idle_unit="$5" rule="$6" file first lead paged
  file="$state/warnings-$surface"
  wait_until 30 sh -c "grep -q ' 0$' '$state/watchers' 2>/dev/null && [ \$(grep -c ' 0$' '$state/watchers') = 3 ]" \
    || fail "$case: the C, Node and Python watchers did not all end cleanly: $(cat "$state/watchers" 2>/dev/null); launched at $(cat "$state/watchers-launched" 2>/dev/null | paste -sd' '), the runaway let grow at $(cat "$state/go" 2>/dev/null), stopped at $(cat "$state/killed_at" 2>/dev/null); what each wrote: $(for s in c node python; do echo "$s: $(head -c 300 "$state/warnings-$s" 2>/dev/null | paste -sd'|')"; done | paste -sd';')"
  grep -q '^watching 2$' "$file" || fail "$case ($surface): the watch did not watch both tools: $(cat "$file" 2>/dev/null)"
  ! grep -q '^after-' "$file" || fail "$case ($surface): a warning came after the watch was freed: $(cat "$file")"
  [ "$surface" != python ] || tail -n 1 "$file" | grep -q '^ended$' \
    || fail "$case (python): closing the watch did not end its async for: $(cat "$file")"
  ! grep -q " $idle_unit " "$file" || fail "$case ($surface): warned of the idle tool: $(cat "$file")"
  first=$(awk -v u="$hog_unit" -v r="$rule" '$2 == u && $3 == r {print; exit}' "$file")
  [ -n "$first" ] || fail "$case ($surface): no warning of the runaway's scope under the $rule rule: $(cat "$file")"
  lead=$(awk -v k="$(cat "$state/killed_at")" -v w="${first%% *}" 'BEGIN {printf "%.1f", k - w}')
  paged=$(sed -n "s/^$surface //p" "$state/watchers-memory" 2>/dev/null)
  if [ "$surface" = c ]; then
    awk -v l="$lead" 'BEGIN {exit !(l > 0)}' || fail "$case ($surface): warned ${lead} s after oomd's kill: $first (the watcher at the kill: ${paged:-?})"
    ok "$case: the same watch from $surface warned ${lead} s before oomd's kill, of the runaway alone, and nothing after it was freed: \"${first#* }\" (the watcher at the kill: ${paged:-?})"
    return
  fi
  local c_first lag
  c_first=$(awk -v u="$hog_unit" -v r="$rule" '$2 == u && $3 == r {print; exit}' "$state/warnings-c")
  [ -n "$c_first" ] || fail "$case ($surface): the C watch gave no warning to compare with"
  lag=$(awk -v s="${first%% *}" -v c="${c_first%% *}" 'BEGIN {printf "%.1f", s - c}')
  ok "$case: the same watch from $surface warned of the runaway alone, ${lead} s before oomd's kill and ${lag} s after the C watch's, and nothing after it was freed: \"${first#* }\" (the watcher at the kill: ${paged:-?})"
}

# run_wait_warned CASE STATE HOG-UNIT RULE: `synaps-scope run --wait`, through which the daemon
# launched the runaway, printed the warning line (naming oomd, the rule and the runaway's scope)
# before oomd killed it.
run_wait_warned() {
  local case="$1" state="$2" hog_unit="$3" rule="$4" line killed_at lead
  wait_until 10 test -s "$state/killed_at" || fail "$case: the daemon did not write down when the runaway was killed"
  line=$(grep -m1 "systemd-oomd's $rule rule is on its way to killing $hog_unit " "$state/hog.stderr" || true)
  [ -n "$line" ] || fail "$case: run --wait printed no warning of the runaway's scope under the $rule rule: $(cat "$state/hog.stderr" 2>/dev/null)"
  killed_at=$(cat "$state/killed_at")
  lead=$(awk -v k="$killed_at" -v w="${line%% *}" 'BEGIN {printf "%.1f", k - w}')
  awk -v l="$lead" 'BEGIN {exit !(l > 0)}' || fail "$case: run --wait's warning came ${lead} s after oomd's kill: $line"
  ok "$case: run --wait warned ${lead} s before oomd's kill: \"${line#* }\""
}

# calm_case SECONDS: the calm control, under both rules as shipped (the pressure rule at the VM's
# 2 % for 5 s, on user@.service; the swap rule on -.slice, whose figures are read each second): a daemon's
# watch on an ordinary tool (it holds 200 MB and works, and nothing runs away) gives no warning in
# SECONDS, and oomd acts on nothing meanwhile; the watch's one thread uses the CPU time written
# down, and none once the watch is closed.
calm_case() {
  configure both
  drain_swap
  settle
  local state cursor; state=$(mktemp -d /tmp/calm.XXXXXX); chmod 0777 "$state"
  cursor=$(journalctl -u systemd-oomd --show-cursor -n 0 -q | sed -n 's/^-- cursor: //p')
  alice "~/venv/bin/python $here/calm.py $state $1" >"$state/log" 2>&1 || { cat "$state/log"; fail "calm: the watching daemon failed"; }
  local kills; kills=$(journalctl -u systemd-oomd --after-cursor="$cursor" -q -o cat | grep -c '^Killed ' || true)
  [ "$kills" = 0 ] || fail "calm: oomd killed $kills cgroup(s) meanwhile, so the machine was not calm"
  grep -q '^watched 2 warnings 0 .* threads 1 idle 0 trigger ' "$state/log" || fail "calm: $(cat "$state/log")"
  # A monitored slice removed under the live watch costs it no more than 1 % of a CPU over the
  # half that follows (its dead PSI trigger was polled in a loop: 2.9 s of CPU in 3 s).
  local gone; gone=$(sed -n 's/^watched .* gone \([0-9]*\) .*/\1/p' "$state/log")
  [ -n "$gone" ] && [ "$gone" -le $(( $1 * 1000 / 2 / 100 )) ] || fail "calm: the watch used ${gone:-?} ms of CPU in $(( $1 / 2 )) s after a monitored slice was removed: $(cat "$state/log")"
  # Linux 6.4 and later let alice set a PSI trigger on her own slice (Debian 13): the one that
  # would spin once its cgroup is gone.
  [ "$release" != 13 ] || grep -q ' gone-trigger armed$' "$state/log" || fail "calm: no PSI trigger was set on the slice that goes away: $(cat "$state/log")"
  ok "calm control: $1 s of ordinary work under both rules (pressure at 2 % for 5 s, swap at 90 %), watched: no warning, no kill; a monitored slice removed halfway ($(grep '^watched' "$state/log"))"
  rm -rf "$state"
}

# oomd_case RULE PLACEMENT MODE [BUS]
oomd_case() {
  local rule="$1" placement="$2" mode="$3" bus="${4:-dbus-daemon}" scopes=on state cursor line killed daemon_cg hog_cg idle_cg
  [ "$mode" = direct ] && scopes=off
  [ "$bus" = dbus-daemon ] || user_bus "$bus"
  configure "$rule"
  state=$(mktemp -d /tmp/case.XXXXXX); chmod 0777 "$state"
  drain_swap
  settle
  # Beyond RAM + swap for the swap rule; for the pressure rules, past app.slice's MemoryHigh= (it
  # thrashes through 40 % of swap with its own pages) but with the rest of swap left, so that the
  # kernel's OOM killer never acts before oomd.
  local hog_mb=1400
  [ "$rule" = swap ] || hog_mb=swap:40
  local daemon="env SYNAPS_PROCESS_SCOPES=$scopes SYNAPS_VM_WAIT=1 synaps-scope run --kind daemon -- ~/venv/bin/python $here/daemon.py $state $hog_mb $mode"
  # Fewer descriptors than the levels the runaway nests below its scope (issue 60, item 6).
  [ "$mode" = leaf ] && daemon="prlimit --nofile=512 $daemon"
  cursor=$(journalctl -u systemd-oomd --show-cursor -n 0 -q | sed -n 's/^-- cursor: //p')
  case "$placement" in
    login) alice "exec $daemon" >"$state/log" 2>&1 & ;;
    tab) alice "exec systemd-run --user --scope --quiet --unit=vte-spawn-$(cat /proc/sys/kernel/random/uuid).scope -- sh -c 'exec $daemon'" >"$state/log" 2>&1 & ;;
  esac
  wait_until 30 test -s "$state/hog" || { cat "$state/log"; fail "$rule/$placement/$mode: the daemon did not launch its tools"; }
  local by=""
  if [ "$bus" != dbus-daemon ]; then
    # The launches reach the manager through this bus, not past it.
    by=$(alice 'synaps-scope doctor' | sed -n 's/^reached by: *//p')
    [[ "$by" == "session bus "* ]] || fail "$rule/$placement/$mode: with $bus, doctor says the launches reach the manager by: $by"
    by=" (session bus: $bus)"
  fi
  daemon_cg=$(cgroup_in "$state/daemon"); hog_cg=$(cgroup_in "$state/hog"); idle_cg=$(cgroup_in "$state/idle")
  case "$mode" in
    scoped | leaf)
      [[ "$daemon_cg" == */agent-daemon.slice/synaps-daemon-*.scope ]] || fail "$rule/$placement: the daemon is not in its daemon scope: $daemon_cg"
      [[ "$hog_cg" == */app.slice/synaps-tool-*.scope ]] || fail "$rule/$placement: the runaway is not in its own scope: $hog_cg" ;;
    direct)
      [ "$hog_cg" = "$daemon_cg" ] || fail "$rule/$placement/direct: the runaway is not in the daemon's cgroup" ;;
  esac
  # app.slice holds configure's MemoryHigh=, and no other slice has one.
  local high want=max slice="${hog_cg%/*}"
  [[ "$slice" != */app.slice ]] || want=$app_high
  high=$(cat "/sys/fs/cgroup$slice/memory.high")
  [ "$high" = "$want" ] || fail "$rule/$placement/$mode: the runaway's slice $slice has memory.high $high, not $want"
  local where="from a login shell"; [ "$placement" = tab ] && where="from a terminal tab's scope"
  # The runaway grows once the daemon's watchers watch (daemon.py makes STATE/go, within 120 s).
  wait_until 130 test -s "$state/go" || { cat "$state/log"; fail "$rule/$placement/$mode: the daemon never let the runaway grow"; }
  # oomd's own journal line: "Killed CGROUP due to ...".
  local waited=$SECONDS
  line=""
  wait_until 240 sh -c "journalctl -u systemd-oomd --after-cursor='$cursor' -q -o cat | grep -q '^Killed '" || true
  line=$(journalctl -u systemd-oomd --after-cursor="$cursor" -q -o cat | grep -m1 '^Killed ' || true)
  if [ -z "$line" ]; then
    oomctl; cat /proc/pressure/memory; free -m; journalctl -k -q -o cat | grep -i -A2 'out of memory\|oom-kill' | tail -n 6
    cat "$state/log" "$state/after" 2>/dev/null
    sweep "$daemon_cg" "$hog_cg" "$idle_cg"
    fail "$rule/$placement/$mode: systemd-oomd did not act within 240 s"
  fi
  killed=$(echo "$line" | awk '{print $2}')
  local acted=$((SECONDS - waited))
  # Memory pressure (some, avg10) as oomd acted, of the whole machine and of the runaway's slice:
  # the machine's counts every stall, the runaway's own among them; when it stands far above the
  # slice's, the machine's services are what stall (its pages taken), as in CI's failed run.
  local pressures
  pressures="machine $(some_avg10 /proc/pressure/memory) %, ${slice##*/} $(some_avg10 "/sys/fs/cgroup$slice/memory.pressure") %"
  sleep 1
  case "$mode" in
    scoped | leaf)
      local target="$hog_cg" what="the runaway's scope"
      [ "$mode" = scoped ] || { target="$hog_cg/leaf$(printf '/d%.0s' $(seq 899))"; what="the cgroup the runaway made 900 levels below its scope"; }
      [ "$killed" = "$target" ] || fail "$rule/$placement/$mode: oomd killed $killed, not $what $target ($line)"
      alive "$(pid_of "$state/daemon")" || fail "$rule/$placement/$mode: the daemon died with the runaway"
      alive "$(pid_of "$state/idle")" || fail "$rule/$placement/$mode: the daemon's other tool died with the runaway"
      wait_until 30 test -s "$state/after" || fail "$rule/$placement/$mode: the daemon launched nothing after the kill"
      [[ "$(cat "$state/after")" == */app.slice/synaps-tool-*.scope\ exit\ 0\ * ]] || fail "$rule/$placement/$mode: the next tool: $(cat "$state/after")"
      local expected_rule=memory-pressure; [ "$rule" = swap ] && expected_rule=swap
      run_wait_warned "$rule/$placement/$mode" "$state" "${hog_cg##*/}" "$expected_rule"
      ok "$rule rule, daemon $where$by, $mode: oomd killed $what alone after $acted s, the daemon and its other tool live on and it launched the next tool (memory pressure then: $pressures): \"$line\""
      # systemd-oomd 252 and later names the rule in its Killed signal (memory-used: the swap
      # rule), heard from the owner of org.freedesktop.oom1: the rule is told even where both
      # kinds cover the scope, as Debian, Fedora and Ubuntu ship them.
      if [ -n "$wheel" ]; then
        wait_until 30 test -s "$state/ending" || fail "$rule/$placement/$mode: the daemon's handle told nothing"
        [[ "$(cat "$state/ending")" == "oomd $expected_rule 0 oomd-signal "* ]] \
          || { tail -n 20 "$state/debug" 2>/dev/null; fail "$rule/$placement/$mode: the handle told \"$(cat "$state/ending")\", not an oomd kill under the $expected_rule rule on oomd's signal"; }
        ok "$rule rule, $mode: the daemon's handle on the runaway's scope, asked after its exit status was in: $(cut -d' ' -f5- "$state/ending")"
        warned_first "$rule/$placement/$mode" "$state" "${hog_cg##*/}" "${idle_cg##*/}" "$expected_rule"
        surface_warned "$rule/$placement/$mode" "$state" c "${hog_cg##*/}" "${idle_cg##*/}" "$expected_rule"
        surface_warned "$rule/$placement/$mode" "$state" node "${hog_cg##*/}" "${idle_cg##*/}" "$expected_rule"
        surface_warned "$rule/$placement/$mode" "$state" python "${hog_cg##*/}" "${idle_cg##*/}" "$expected_rule"
        # oomd's delay from its mark to its signal as the library saw them: no bound of the
        # library's (it catches up with a ping oomd answers after the signal), written down.
        if [ -s "$state/oomd_delay" ]; then
          ok "$rule rule, $mode: oomd's signal came $(cat "$state/oomd_delay") ms after the library read its mark"
        else
          echo "note: $rule/$placement/$mode: the library did not read oomd's mark before its signal came (no delay to measure)"
        fi
      fi
      ;;
    direct)
      [ "$killed" = "$daemon_cg" ] || fail "$rule/$placement/direct: oomd killed $killed, not the daemon's cgroup $daemon_cg ($line)"
      wait_until 10 sh -c "! test -e /proc/$(pid_of "$state/daemon")" || fail "$rule/$placement/direct: the daemon outlived its cgroup's kill"
      ok "$rule rule, daemon $where, control (scopes off): oomd killed the daemon's own cgroup, the daemon with it, after $acted s (memory pressure then: $pressures): \"$line\"" ;;
  esac
  # oomd killed that cgroup and nothing else: a kill elsewhere (alice's daemon later, the
  # machine's own services, the rig's job, which would leave a guest that looks silent) fails.
  local kills
  kills=$(journalctl -u systemd-oomd --after-cursor="$cursor" -q -o cat | awk '/^Killed / {print $2}' | sort -u)
  [ "$kills" = "$killed" ] || fail "$rule/$placement/$mode: oomd killed more than $killed: $(echo "$kills" | tr '\n' ' ')"
  sweep "$daemon_cg" "$hog_cg" "$idle_cg"
  manager_running "after the $rule/$placement/$mode case"
  rm -rf "$state"
  [ "$bus" = dbus-daemon ] || user_bus dbus-daemon
}

check_machine
install_artifacts
what="${1:-}"; shift || true
case "$what" in
  oomd) for c in "$@"; do IFS=: read -r rule placement mode bus <<<"$c"; oomd_case "$rule" "$placement" "$mode" "$bus"; done ;;
  # shellcheck source=tests/vm/kernel-cases.sh
  cap) . "$here/kernel-cases.sh"; cap_case ;;
  calm) calm_case "${1:-120}" ;;
  # shellcheck source=tests/vm/kernel-cases.sh
  limits) . "$here/kernel-cases.sh"; limits_case ;;
  handles)
    alice "~/venv/bin/python $here/handles.py" || fail "the Python wheel's handles"
    alice "$here/handles-c" || fail "the C library's handles"
    alice "$here/node $here/node-project/handles.js" || fail "the npm package's handles" ;;
  *) fail "usage: scenarios.sh oomd CASE... | calm [SECONDS] | cap | limits | handles" ;;
esac
