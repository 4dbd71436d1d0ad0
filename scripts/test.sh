#!/usr/bin/env bash
# The project's whole test suite: formatting, lints, then every test (unit, integration, CLI, doc,
# and the C ABI from C under sanitizers) against a real private systemd user manager of the
# versions the rig runs (247, 252, 254, 257 and 262), each suite where docs/testing.md places it
# ("Where each suite runs", read by scripts/placement.sh: once, on every version, or with both
# wrappers, the launcher program synaps-scope-exec and systemd-run: SYNAPS_SCOPE_LAUNCHER), plus the
# installed C library built through pkg-config, and the Python module's wheel in a fresh venv with
# pytest, mypy --strict and stubtest, and the Node package (npm ci, tsc --strict on the tests' usage
# of index.d.ts, node --test), a fuzz smoke run of every fuzz target, a short run of the benchmarks on each
# systemd version (among them 64 launches at once against 64 bare systemd-run), the long runs
# (scripts/long-run.sh) on the newest, and every artifact of scripts/dist.sh (wheel, npm package,
# C tarball, crates) installed and used from outside the repository (scripts/test-dist.sh) on the oldest and the newest, and again as a normal user in a
# login session of booted Debian 11, 12 and 13 (scripts/test-session.sh: systemd 247, 252, 257; 12 and 13 also with dbus-broker as the user bus;
# in 12 and 13 also a short run of the launch benchmark's ways to the manager, scripts/bench-session.sh),
# and against the real systemd-oomd with a real kernel's memory controller in a virtual machine
# of Debian 12 and 13 (scripts/test-vm.sh).
#
#   scripts/test.sh                      # everything, every version (as root)
#   scripts/test.sh rust python          # only these phases (and what they are built from)
#   SYNAPS_SYSTEMD_VERSIONS="252 262" SYNAPS_SESSION_RELEASES="12" scripts/test.sh
#   SYNAPS_BUSY_CPUS=2 scripts/test.sh rust c python node   # beside two CPU hogs
#   SYNAPS_SYSTEMD_VERSIONS=262 scripts/test.sh lint rust c python node   # the quick subset
#
# Phases, in the order they run: lint (rustfmt, clippy), fuzz (a smoke run of every target), and
# per systemd version rust (cargo test of the core, the command line and the launcher program),
# c (the C ABI from C under sanitizers, and the installed library through pkg-config), python,
# node, bench; then dist (the artifacts installed from outside the repository), session
# (booted Debian login sessions), vm (the real systemd-oomd and memory controller in a virtual
# machine: scripts/test-vm.sh) and long (the long runs). Exits non-zero if anything fails or is
# skipped; the last lines give the time of every phase (a warning past its 40 minutes) and summarise
# each version's counts.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

all_phases="lint fuzz rust c python node bench dist session vm long"
phases="${*:-$all_phases}"
for phase in $phases; do
  case " $all_phases " in
    *" $phase "*) ;;
    *) echo "test.sh: unknown phase '$phase' (phases: $all_phases)" >&2; exit 2 ;;
  esac
done
# Whether any of the named phases was asked for.
want() {
  local phase
  for phase in "$@"; do
    case " $phases " in *" $phase "*) return 0 ;; esac
  done
  return 1
}

[ "$(id -u)" = 0 ] || { echo "test.sh: run as root: the tests start private systemd user managers" >&2; exit 2; }

# Compiled dependencies are kept between runs, as the rig's systemd packages, the Debian roots and
# the VM images are: a fresh clone's target/ and fuzz/target/ are links into SYNAPS_BUILD_CACHE
# (default ~/.cache/synaps-scope/build; set it empty for none). Cargo rebuilds whatever changed,
# and the workspace's own crates always in a clone at a new path (their path is in their
# fingerprint); what is reused is what crates.io's crates compiled to. Incremental compilation
# is off: it saves nothing on a clean clone and left 17 GB a run behind in the cache. Cargo
# never removes the builds of an older version or another clone's path: what no build has read
# for a week goes (the disk is mounted relatime, so a file read is marked so at least daily, and
# cargo builds again whatever it finds missing). The cache is emptied past 20 GB, or when its
# disk has less than 20 GB free (a run writes several GB besides; the disk this runs on is
# shared, and was once filled, failing CI with ENOSPC).
export CARGO_INCREMENTAL=0
build_cache="${SYNAPS_BUILD_CACHE-$HOME/.cache/synaps-scope/build}"
if [ -n "$build_cache" ]; then
  if [ -d "$build_cache" ]; then
    find "$build_cache" -type f -atime +7 -delete
    cache_gb=$(du -s --block-size=1G "$build_cache" | cut -f1)
    free_gb=$(df --output=avail --block-size=1G "$build_cache" | tail -1 | tr -d ' ')
    if [ "$cache_gb" -gt 20 ] || [ "$free_gb" -lt 20 ]; then
      echo "== the build cache $build_cache ($cache_gb GB, $free_gb GB free on its disk): emptied"
      rm -rf "$build_cache"
    fi
  fi
  for dir in target fuzz/target; do
    if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
      mkdir -p "$build_cache/$dir"
      ln -s "$build_cache/$dir" "$dir"
    fi
  done
fi
command -v cargo >/dev/null || { echo "test.sh: cargo not found" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "test.sh: needs Node 20 and npm" >&2; exit 2; }

# The time of every phase, printed at the end (also of a failed run), with a warning past 45
# minutes: CI has 90, and the whole suite is to stay within 40 on two cores (docs/testing.md).
phase_times=()
phase_mark=0
# timed PHASE: the time since the last mark was PHASE's.
timed() {
  phase_times+=("$(printf '%6d s  %s' $((SECONDS - phase_mark)) "$1")")
  phase_mark=$SECONDS
}
show_times() {
  [ ${#phase_times[@]} -gt 0 ] || return 0
  times_shown=true
  echo "== time of every phase"
  printf '%s\n' "${phase_times[@]}"
  echo "$SECONDS s in all"
  if [ "$SECONDS" -gt 2400 ]; then
    echo "test.sh: warning: the suite took $SECONDS s, past its budget of 40 minutes (CI's limit is 90)" >&2
  fi
}

# What a fresh Debian 12 machine with the Rust toolchain may lack, from Debian's packages.
need=()
{ [ -x /lib/systemd/systemd ] && command -v systemd-run && command -v systemctl; } >/dev/null || need+=(systemd)
command -v unshare >/dev/null || need+=(util-linux)
{ [ -x /usr/bin/kill ] || [ -x /bin/kill ]; } || need+=(procps)
command -v pkg-config >/dev/null || need+=(pkg-config)
# gdb: a C scenario whose forked child hangs shows that child's stacks with the failure.
command -v gdb >/dev/null || need+=(gdb)
command -v g++ >/dev/null || need+=(g++)
command -v python3 >/dev/null || need+=(python3 python3-venv)
command -v patchelf >/dev/null || need+=(patchelf)
command -v cmake >/dev/null || need+=(cmake)
[ -e /usr/lib/systemd/user/dbus.socket ] || need+=(dbus-user-session)
command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
# The relays and sandboxes a launch meets (tests/host_relay.rs, tests/relayed_bus.rs).
command -v socat >/dev/null || need+=(socat)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
  echo "== installing qemu-system-x86 from Debian's packages (the vm phase's machine)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86
fi

timed "installing what the machine lacks"
scratch="$(mktemp -d)"
roots_pid=""
images_pid=""
tools_pid=""
hog_pids=""
times_shown=false
trap 'status=$?; $times_shown || show_times; rm -rf "$scratch"; for p in $roots_pid $images_pid $tools_pid $hog_pids; do kill "$p" 2>/dev/null || true; done; exit $status' EXIT

# SYNAPS_BUSY_CPUS=N: N processes that only burn CPU, at the suite's own priority, for as long as
# it runs, as another job on a shared machine would (docs/testing.md, "A busy machine").
for _ in $(seq 1 "${SYNAPS_BUSY_CPUS:-0}"); do
  sh -c 'while :; do :; done' &
  hog_pids="$hog_pids $!"
done

# The booted roots take minutes to make (once); made in the background while everything builds.
releases="${SYNAPS_SESSION_RELEASES-11 12 13}"
want session || releases=""
roots_log="$scratch/roots.log"
if [ -n "$releases" ]; then
  # shellcheck disable=SC2086 # one release per word
  scripts/session-rig.sh --fetch $releases >"$roots_log" 2>&1 &
  roots_pid=$!
fi

# The virtual machines' disk images likewise (once).
vm_releases="${SYNAPS_VM_RELEASES-12 13}"
want vm || vm_releases=""
images_log="$scratch/images.log"
if [ -n "$vm_releases" ]; then
  # shellcheck disable=SC2086 # one release per word
  scripts/vm-rig.sh --fetch $vm_releases >"$images_log" 2>&1 &
  images_pid=$!
fi

# The cargo subcommands the asked phases run, installed from crates.io when missing (once: minutes
# on a fresh machine, cargo-c most), in the background while everything builds.
tools=()
want python dist session vm long && tools+=(cargo-zigbuild cargo-c)
want c long && tools+=(cargo-c)
want fuzz && tools+=(cargo-fuzz)
tools_log="$scratch/tools.log"
if [ ${#tools[@]} -gt 0 ]; then
  scripts/cargo-tools.sh "${tools[@]}" >"$tools_log" 2>&1 &
  tools_pid=$!
fi
# tools_ready: waits for those, once, and shows what they printed.
tools_ready() {
  [ -n "$tools_pid" ] || return 0
  wait "$tools_pid" || { cat "$tools_log" >&2; echo "test.sh: FAILED: installing ${tools[*]}" >&2; exit 1; }
  tools_pid=""
  cat "$tools_log"
}

if want lint; then
  echo "== rustfmt, clippy"
  cargo fmt --all --check
  (cd fuzz && cargo fmt --check)
  cargo clippy --workspace --exclude synaps-scope-python --all-targets --locked -- -D warnings
  cargo clippy -p synaps-scope-python --features pyo3/extension-module --all-targets --locked -- -D warnings
  timed "lint: rustfmt, clippy"
fi
cargo build --all-targets --locked
timed "build: every target, debug"

# The command line as it ships, for the burst of 256 `run` at once: a burst's pace is the pace of
# each turn's own code, and a debug build's turns missed the 3 s bound beside two CPU hogs where
# the release build's did not (crates/cli/tests/burst.rs). The C tarball's when the artifacts are
# built, else a release build.
dist="$scratch/dist"
if want python dist session vm long; then
  echo "== dist: every artifact (scripts/dist.sh), tested after the suites from outside the repository"
  tools_ready
  SYNAPS_DIST_DIR="$dist" scripts/dist.sh
  mkdir "$scratch/tarball"
  tar -xzf "$dist"/synaps-scope-*-linux-gnu.tar.gz -C "$scratch/tarball" --strip-components=1
  export SYNAPS_RELEASE_CLI="$scratch/tarball/bin/synaps-scope"
  timed "dist: every artifact built"
elif want rust; then
  cargo build --release --locked -p synaps-scope-cli --bin synaps-scope
  export SYNAPS_RELEASE_CLI="$PWD/target/release/synaps-scope"
  timed "build: the command line, release"
fi

c_prefix="$scratch/c"
if want c long; then
  echo "== C library: cargo cinstall into a scratch prefix"
  tools_ready
  # Built in a target directory of its own, as a packager's CARGO_TARGET_DIR would put it: what is
  # installed must be what was just built there, never a library left in ./target.
  c_target="$PWD/target/c-install"
  CARGO_TARGET_DIR="$c_target" cargo cinstall --locked --release -p synaps-scope-ffi --prefix "$c_prefix" --libdir "$c_prefix/lib"
  built=$(find "$c_target" -path '*/release/libsynaps_scope.so' -not -path '*/deps/*' | head -n 1)
  lib_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
  cmp "$built" "$c_prefix/lib/libsynaps_scope.so.$lib_version" || { echo "test.sh: the installed library is not the one just built ($built)" >&2; exit 1; }
  timed "C library: cargo cinstall"
fi

venv="$scratch/venv"
if want python long; then
  echo "== Python: the dist wheel in a fresh venv, its types checked"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "$dist"/synaps_scope-*-cp39-abi3-manylinux*.whl pytest mypy
  (cd bindings/python && "$venv/bin/python" -m mypy --strict tests python/synaps_scope)
  (cd "$scratch" && "$venv/bin/python" -m mypy.stubtest synaps_scope._native)
  timed "Python: venv, mypy, stubtest"
fi

if want fuzz; then
  echo "== fuzz smoke: every target a few seconds (scripts/fuzz.sh 60 is the full run)"
  tools_ready
  scripts/fuzz.sh "${SYNAPS_FUZZ_SECONDS:-5}"
  timed "fuzz: every target"
fi

if want node long; then
  echo "== Node: install the package's dependencies from the npm registry, check its types"
  (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error && npx tsc -p tsconfig.json)
  timed "Node: npm ci, tsc"
fi

versions="${SYNAPS_SYSTEMD_VERSIONS:-247 252 254 257 262}"
echo "== systemd $versions: fetch what the rig lacks (once, into its cache)"
# shellcheck disable=SC2086 # one version per word
scripts/systemd-rig.sh --fetch $versions
timed "rig: systemd $versions fetched"

per_version=false
want rust c python node bench && per_version=true
counted=false
want rust c python node && counted=true

newest="${versions##* }"
oldest="${versions%% *}"

# run_slot VERSION WRAPPER LOG SUITES: runs, in the rig of systemd VERSION with WRAPPER, those of
# SUITES (one a line: what scripts/placement.sh places there, from docs/testing.md) that the asked
# phases hold, their output also in LOG. Returns non-zero when any of them failed.
run_slot() {
  local version="$1" wrapper="$2" log="$3" status=0 suite package name
  local -A tests=()
  local units=() docs=() python=() node=() c_example=false
  while read -r suite; do
    case "$suite" in
      src/) want rust && { units+=("synaps-scope --lib"); docs+=(synaps-scope); } ;;
      crates/ffi/src/) want c && units+=("synaps-scope-ffi --lib") ;;
      crates/*/src/) want rust && units+=("$(crate_of "$suite") --bins") ;;
      crates/ffi/tests/*.rs)
        want c && tests[synaps-scope-ffi]+=" --test $(basename "$suite" .rs)" ;;
      tests/*.rs | crates/*/tests/*.rs)
        package=synaps-scope
        case "$suite" in crates/*) package="$(crate_of "$suite")" ;; esac
        want rust && tests[$package]+=" --test $(basename "$suite" .rs)" ;;
      scripts/check-c-example.sh) want c && c_example=true ;;
      bindings/python/tests/*) want python && python+=("$suite") ;;
      bindings/node/test/*) want node && node+=("$suite") ;;
      *) echo "test.sh: $suite is placed but test.sh does not know how to run it" >&2; return 1 ;;
    esac
  done <<<"$4"
  export SYNAPS_SCOPE_LAUNCHER="$wrapper" SYNAPS_SCOPE_EXEC="$PWD/target/debug/synaps-scope-exec"
  for name in "${units[@]}"; do
    # shellcheck disable=SC2086 # "PACKAGE --TARGETS"
    set -- $name
    scripts/systemd-rig.sh --systemd "$version" -- cargo test --locked -p "$@" 2>&1 | tee -a "$log" || status=$?
  done
  for package in "${docs[@]}"; do
    scripts/systemd-rig.sh --systemd "$version" -- cargo test --locked -p "$package" --doc 2>&1 | tee -a "$log" \
      || status=$?
  done
  for package in "${!tests[@]}"; do
    # shellcheck disable=SC2086 # one --test NAME pair per word pair
    scripts/systemd-rig.sh --systemd "$version" -- cargo test --locked -p "$package" ${tests[$package]} 2>&1 \
      | tee -a "$log" || status=$?
  done
  if $c_example; then
    scripts/systemd-rig.sh --systemd "$version" -- scripts/check-c-example.sh "$c_prefix" || status=$?
  fi
  if [ ${#python[@]} -gt 0 ]; then
    scripts/systemd-rig.sh --systemd "$version" -- "$venv/bin/python" -m pytest "${python[@]}" -q -rs \
      -p no:cacheprovider 2>&1 | tee -a "$log" || status=$?
  fi
  if [ ${#node[@]} -gt 0 ]; then
    scripts/systemd-rig.sh --systemd "$version" -- node --test --test-concurrency=1 --test-reporter=tap \
      "${node[@]}" 2>&1 | tee -a "$log" || status=$?
  fi
  unset SYNAPS_SCOPE_LAUNCHER SYNAPS_SCOPE_EXEC
  return "$status"
}

# crate_of crates/NAME/...: that crate's package name.
crate_of() {
  local dir="${1#crates/}"
  sed -n 's/^name = "\(.*\)"$/\1/p' "crates/${dir%%/*}/Cargo.toml" | head -n 1
}

summary=()
versions_run="$versions"
$per_version || versions_run=""
for version in $versions_run; do
  echo "== tests against systemd $version"
  started=$SECONDS
  log="$(mktemp)"
  status=0
  for wrapper in synaps-scope-exec systemd-run; do
    suites=$(scripts/placement.sh select "$version" "$wrapper" "$oldest" "$newest")
    if [ -z "$suites" ]; then
      echo "== systemd $version, wrapper $wrapper: no suite is placed here (docs/testing.md)"
      continue
    fi
    echo "== systemd $version, wrapper $wrapper"
    run_slot "$version" "$wrapper" "$log" "$suites" || status=$?
    timed "systemd $version, $wrapper: tests"
  done
  if want bench; then
    SYNAPS_BENCH_QUICK=1 scripts/systemd-rig.sh --systemd "$version" -- cargo bench --locked --bench launch || status=$?
    # 64 `synaps-scope run` at once against 64 bare systemd-run: every one scoped, and sooner.
    SYNAPS_BENCH_QUICK=1 scripts/systemd-rig.sh --systemd "$version" -- cargo bench --locked -p synaps-scope-cli --bench burst || status=$?
    # `run --wait` from its command's last act to its return, against systemd-run --user --wait.
    SYNAPS_BENCH_QUICK=1 scripts/systemd-rig.sh --systemd "$version" -- cargo bench --locked -p synaps-scope-cli --bench wait || status=$?
    timed "systemd $version: bench"
  fi
  # cargo's "test result: ok. N passed; N failed; N ignored", pytest's "N passed, N skipped in Ns",
  # node's TAP "# pass N", "# fail N", "# skipped N", "# todo N"
  read -r passed failed ignored < <(awk '
    /^test result:/ || / passed.* in [0-9.]+s/ || / failed.* in [0-9.]+s/ {
      for (i = 1; i < NF; i++) {
        if ($(i + 1) ~ /^passed/) p += $i; if ($(i + 1) ~ /^failed/) f += $i
        if ($(i + 1) ~ /^(ignored|skipped)/) g += $i
      } }
    /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 } /^# (skipped|todo) [0-9]+$/ { g += $3 }
    END { print p + 0, f + 0, g + 0 }' "$log")
  rm -f "$log"
  summary+=("systemd $version: $passed passed, $failed failed, $ignored ignored or skipped (exit $status, $((SECONDS - started)) s)")
  total_passed=$((${total_passed:-0} + passed)); total_failed=$((${total_failed:-0} + failed))
  if [ "$status" != 0 ] || [ "$failed" != 0 ] || [ "$ignored" != 0 ] || { $counted && [ "$passed" = 0 ]; }; then
    printf '%s\n' "${summary[@]}"
    echo "test.sh: FAILED on systemd $version" >&2
    exit 1
  fi
done
for version in $(want dist && printf '%s\n' "$oldest" "$newest" | uniq); do
  echo "== the artifacts as their users install them, against systemd $version (scripts/test-dist.sh)"
  log="$(mktemp)"
  scripts/systemd-rig.sh --systemd "$version" -- scripts/test-dist.sh "$dist" 2>&1 | tee "$log" \
    || { rm -f "$log"; printf '%s\n' "${summary[@]}"; echo "test.sh: FAILED: the artifacts on systemd $version" >&2; exit 1; }
  summary+=("artifacts on systemd $version: $(grep -c '^ok: ' "$log") checks passed (wheel, npm package, C tarball from C and C++ through pkg-config and CMake)")
  rm -f "$log"
  timed "artifacts on systemd $version"
done
# booted_phase WHAT PID LOG SUMMARY-PATTERN FAILURE COMMAND...: waits for the background job PID
# that made what the phase boots (its output in LOG), then runs COMMAND, keeping the lines of its
# output that match SUMMARY-PATTERN for the summary; fails with FAILURE.
booted_phase() {
  local what="$1" pid="$2" made_log="$3" pattern="$4" failure="$5" log
  shift 5
  echo "== $what (made in the background since the start)"
  wait "$pid" || { cat "$made_log" >&2; echo "test.sh: FAILED: making $what" >&2; exit 1; }
  cat "$made_log"
  log="$(mktemp)"
  if ! "$@" 2>&1 | tee "$log"; then
    show_times
    printf '%s\n' "${summary[@]}"
    # The failure's own lines again, last: a long phase's output scrolls them out of a log's tail.
    echo "== what failed in $failure:"
    grep -E -B 2 '^(\[[^]]*\] )?FAIL|FAILED' "$log" | tail -n 40 || true
    rm -f "$log"
    echo "test.sh: FAILED: $failure" >&2
    exit 1
  fi
  while IFS= read -r line; do summary+=("$line"); done < <(grep -E "$pattern" "$log")
  rm -f "$log"
  timed "$failure"
}
if [ -n "$releases" ]; then
  # shellcheck disable=SC2086 # one release per word
  # Debian 12 and 13 once more with dbus-broker as the user bus (Fedora's and Arch's default).
  with_broker=$(for r in $releases; do case "$r" in 12|13) printf ' %s:dbus-broker' "$r" ;; esac; done)
  # shellcheck disable=SC2086 # one release per word
  booted_phase "the booted roots of Debian $releases" "$roots_pid" "$roots_log" \
    '^Debian [0-9]+ \(systemd [0-9]+, [a-z-]+\): [0-9]+ checks passed' "the artifacts in a booted login session" \
    scripts/test-session.sh "$dist" $releases $with_broker
  roots_pid=""
  # The benchmark is built here, against this machine's glibc (2.36): Debian 11's 2.31 cannot run it.
  bench_releases=$(for r in $releases; do case "$r" in 12|13) printf '%s ' "$r" ;; esac; done)$with_broker
  if want bench && [ -n "$bench_releases" ]; then
    echo "== the launch benchmark's ways to the manager as alice in a login session of Debian $bench_releases"
    # shellcheck disable=SC2086 # one release per word
    SYNAPS_BENCH_QUICK=1 scripts/bench-session.sh $bench_releases \
      || { printf '%s\n' "${summary[@]}"; echo "test.sh: FAILED: the launch benchmark in a booted login session" >&2; exit 1; }
    timed "bench: login sessions of Debian $bench_releases"
  fi
fi
if [ -n "$vm_releases" ]; then
  # shellcheck disable=SC2086 # one release per word
  booted_phase "the virtual machines' disk images of Debian $vm_releases" "$images_pid" "$images_log" \
    '^Debian [0-9]+ in a VM: [0-9]+ checks passed' "the scenarios in the virtual machine (the real systemd-oomd)" \
    scripts/test-vm.sh "$dist" $vm_releases
  images_pid=""
fi
if want long; then
  echo "== long runs against systemd $newest: a million wraps and ten thousand probes in one process, C, Python and Node"
  SYNAPS_SCOPE_LAUNCHER=synaps-scope-exec SYNAPS_SCOPE_EXEC="$PWD/target/debug/synaps-scope-exec" \
    scripts/systemd-rig.sh --systemd "$newest" -- scripts/long-run.sh "$c_prefix" "$venv"
  summary+=("long runs on systemd $newest: passed")
  timed "long runs on systemd $newest"
fi
show_times
echo "== summary ($phases)"
printf '%s\n' "${summary[@]}"
echo "total: ${total_passed:-0} passed, ${total_failed:-0} failed"
