#!/usr/bin/env bash
# The seed's scenario against the real systemd-oomd and a real memory controller: boots Debian 12
# and 13 under qemu (scripts/vm-rig.sh) and runs tests/vm/scenarios.sh there as root, with the
# release artifacts of DIST-DIRECTORY, which alice installs as their READMEs say:
#   - oomd, both rules distributions ship (ManagedOOMSwap=kill on -.slice; ManagedOOMMemoryPressure=kill
#     on user@.service, and on every slice of the user's manager; both at once as shipped, each
#     acting), a daemon started from a login shell and one started in
#     a terminal tab's scope: scoped, oomd's own journal line names the runaway's scope and the
#     daemon and its other tool live on; each rule's placement with its control (scopes off: the
#     swap rule's on Debian 12, the pressure rules' on 13), where oomd kills the daemon's own
#     cgroup, and on 13 the swap rule once more with dbus-broker as alice's session bus;
#   - the warning before oomd acts: in each scoped case the daemon's one watch on both its tools
#     warned of the runaway's scope (never the idle one's) before oomd killed it, its lead time
#     written down; and the calm control (ordinary work, watched, under both rules: no warning;
#     180 s on Debian 13 and 60 s on 12, or SYNAPS_VM_CALM seconds on each);
#   - the operator's cap (tool_scope_slice with MemoryMax=: the kernel's OOM killer inside the
#     tool's scope) and R12 against real limits;
#   - each tool's own limits (`synaps-scope run --wait -p ...` through both wrappers): MemoryMax,
#     MemoryHigh, TasksMax and CPUQuota enforced by the kernel in the tool's scope;
#   - scope handles against real memory and pids controllers from Python (the wheel), C (a program
#     built here against the C tarball, linked to the library alice unpacked) and Node (the
#     machine's node, with an npm project that installed the package tarball here: the virtual
#     machine has no network for npm to fetch koffi).
#
#   scripts/test-vm.sh DIST-DIRECTORY [RELEASE...]      # default: 12 13
#   SYNAPS_VM_CASES="swap:login:scoped swap:login:direct" scripts/test-vm.sh dist 12
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
repo="$(readlink -f "$here/..")"
dist="$(readlink -f "${1:?usage: $0 DIST-DIRECTORY [RELEASE...]}")"
shift
releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(12 13)
# Every scoped case runs on every release: which cgroup each release's oomd picks, and which rule
# its Killed signal names, is the subject. The controls (scopes off: oomd takes the daemon with the
# runaway, which share a cgroup when the library launches directly, whatever the release) show what
# the scopes are for, once for each place a rule is set: the swap rule's on Debian 12, the pressure
# rules' on 13, so that the two guests, which run at once, take about as long; on 13 too a runaway
# in a cgroup below its scope, and the swap rule once more with dbus-broker as the session bus.
scoped_cases="swap:login:scoped swap:tab:scoped user:tab:scoped slices:tab:scoped both:tab:scoped"
controls_12="swap:login:direct swap:tab:direct"
controls_13="user:tab:direct slices:tab:direct"
# calm_of RELEASE: the calm control's seconds. Several minutes on the newer release, one on the
# older, within the suite's 40 minutes.
calm_of() {
  if [ -n "${SYNAPS_VM_CALM:-}" ]; then echo "$SYNAPS_VM_CALM"
  elif [ "$1" = 13 ]; then echo 180
  else echo 60; fi
}
cases_of() { # cases_of RELEASE
  if [ -n "${SYNAPS_VM_CASES:-}" ]; then echo "$SYNAPS_VM_CASES"
  elif [ "$1" = 13 ]; then echo "$scoped_cases $controls_13 swap:login:scoped:dbus-broker user:tab:leaf"
  else echo "$scoped_cases $controls_12"; fi
}
# steps_of RELEASE: each step of the guest's run, a line each (scenarios.sh's arguments). The two
# guests run at once (below); Debian 13, whose calm control is the long one, runs it first, while
# Debian 12 does its heavy work (runaways, the kernel's OOM killer, a CPU quota), and Debian 12's
# calm comes last: a guest's pressure cases then seldom share the host's cores with the other's.
steps_of() {
  local case
  [ "$1" != 13 ] || echo "calm $(calm_of "$1")"
  for case in $(cases_of "$1"); do echo "oomd $case"; done
  printf '%s\n' cap limits handles
  [ "$1" = 13 ] || echo "calm $(calm_of "$1")"
}

stage="$(mktemp -d /tmp/synaps-vm-stage.XXXXXX)"
trap 'rm -rf "$stage"' EXIT  # and, once the guests start, their process groups (below)
mkdir "$stage/dist"
find "$repo/tests/vm" -maxdepth 1 -type f -exec cp {} "$stage/" \;  # not a __pycache__ of theirs
cp "$dist"/synaps-scope-*-linux-gnu.tar.gz "$dist"/synaps_scope-*.whl "$stage/dist/"
rm "$stage/handles.c" "$stage/handles.js" "$stage/watch.c" "$stage/watch.js"
# C: built here against the tarball, linked to where alice unpacks its library.
mkdir "$stage/c-tarball"
tar -xzf "$stage"/dist/synaps-scope-*-linux-gnu.tar.gz -C "$stage/c-tarball" --strip-components=1
cc -std=c11 -Wall -Wextra -Werror -pedantic "$repo/tests/vm/handles.c" -I"$repo/tests/dist" -I"$stage/c-tarball/include" \
  -L"$stage/c-tarball/lib" -lsynaps_scope -Wl,-rpath,/home/alice/.local/lib -o "$stage/handles-c"
cc -std=c11 -Wall -Wextra -Werror -pedantic "$repo/tests/vm/watch.c" -I"$repo/tests/dist" -I"$stage/c-tarball/include" \
  -L"$stage/c-tarball/lib" -lsynaps_scope -lpthread -Wl,-rpath,/home/alice/.local/lib -o "$stage/watch-c"
rm -rf "$stage/c-tarball"
# Node: the machine's node and an npm project that installed the package tarball.
mkdir "$stage/node-project"
(cd "$stage/node-project" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$dist"/synaps-scope-*.tgz >/dev/null)
cp "$repo/tests/vm/handles.js" "$repo/tests/vm/watch.js" "$stage/node-project/"
cp "$(readlink -f "$(command -v node)")" "$stage/node"
chmod -R a+rX "$stage"

# run_release RELEASE: boots RELEASE's guest and runs its steps there, its output prefixed with the
# release; its summary line goes to $stage/summary-RELEASE. Non-zero where a step failed.
run_release() {
  local release="$1" log="$stage/vm-$1.log" started=$SECONDS boots=0 status step command left steps checks
  echo "== Debian $release in a virtual machine: systemd-oomd, the memory controller, a real kernel"
  # A guest that stopped answering or never reported its status (vm-rig's status 3: the guest's
  # kernel or qemu, not a scenario's failure; seen: a guest kernel's panic in kmalloc under the
  # runaway's memory pressure, and in the scheduler under a CPU quota, once in about ten boots under
  # TCG) is booted again, at most twice, for the steps it had not finished: each step says "done:"
  # as it ends, and a step that fails is never run again.
  mapfile -t steps < <(steps_of "$release")
  : >"$log"
  while :; do
    boots=$((boots + 1))
    status=0
    command=""
    for step in "${steps[@]}"; do
      command+="${command:+ && }bash scenarios.sh $step && echo 'done: $step'"
    done
    "$here/vm-rig.sh" --release "$release" --share "$stage" --timeout "${SYNAPS_VM_TIMEOUT:-1200}" -- \
      "$command" 2>&1 | tee -a "$log" || status=${PIPESTATUS[0]}
    [ "$status" = 3 ] && [ "$boots" -lt 3 ] || break
    left=()
    for step in "${steps[@]}"; do grep -qxF "done: $step" "$log" || left+=("$step"); done
    steps=("${left[@]}")
    # Every step said it was done: what went silent came after them (the power-off, say).
    if [ ${#steps[@]} = 0 ]; then
      echo "test-vm: Debian $release's guest went silent after every step was done; not booted again"
      status=0
      break
    fi
    echo "test-vm: Debian $release's guest stopped answering (its kernel or qemu, before the scenarios ended); booting it again for what it had not finished: ${steps[*]}"
  done
  [ "$status" = 0 ] || { echo "test-vm: FAILED on Debian $release (vm-rig status $status)" >&2; return 1; }
  # Each step checks the machine again, in the same words: counted once a boot.
  checks=$(($(grep '^ok: ' "$log" | grep -vc ': cgroup2 only (' || true) + boots))
  echo "Debian $release in a VM: $checks checks passed in $((SECONDS - started)) s ($boots boot(s))" >"$stage/summary-$release"
}

# The releases' guests run at once, each under TCG on the host's cores: most of a guest's time is
# waiting (for pressure to settle between cases, for oomd's duration, the calm control's minutes),
# which the other guest's work fills; steps_of orders their steps so that one's calm control meets
# the other's runaways. Each line says whose it is. qemu keeps each guest's writes on the host
# (vm-rig.sh wants 3 GB free for one), so all of them must fit at once. Each release runs in a
# process group of its own, ended with this script however it ends.
needed_mb=$((3072 * ${#releases[@]}))
free_mb=$(df --output=avail --block-size=1M "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ')
if [ "$free_mb" -lt "$needed_mb" ]; then
  echo "test-vm: only $free_mb MB free in ${TMPDIR:-/tmp}, where qemu keeps the guests' writes; $needed_mb MB wanted for ${#releases[@]} guests at once" >&2
  exit 2
fi
export -f run_release steps_of cases_of calm_of
export here stage scoped_cases controls_12 controls_13
pids=()
trap 'for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done; rm -rf "$stage"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for release in "${releases[@]}"; do
  setsid --wait bash -c 'set -euo pipefail; run_release "$1" 2>&1 | sed -u "s/^/[Debian $1] /"' _ "$release" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
pids=()
for release in "${releases[@]}"; do cat "$stage/summary-$release" 2>/dev/null || true; done
[ "$failed" = 0 ] || { echo "test-vm: FAILED" >&2; exit 1; }
