#!/usr/bin/env bash
# The project's whole test suite: formatting, lints, then every test (unit, integration, CLI, doc,
# and the C ABI from C under sanitizers) against a real private systemd user manager of each
# version the rig runs (247, 252, 254, 257 and 262), once with each wrapper (the launcher program
# synaps-scope-exec, then systemd-run: SYNAPS_SCOPE_LAUNCHER), plus the installed C library built through
# pkg-config, and the Python module's wheel in a fresh venv with pytest, mypy --strict and
# stubtest, and the Node package (npm ci, tsc --strict on the tests' usage of index.d.ts,
# node --test), a fuzz smoke run of every fuzz target, a short run of the benchmarks on each
# systemd version (among them 256 launches at once against 256 bare systemd-run), the long runs
# (scripts/long-run.sh) on the newest, and every artifact of scripts/dist.sh (wheel, npm package,
# C tarball, crates) installed and used from outside the repository (scripts/test-dist.sh) on the oldest and the newest, and again as a normal user in a
# login session of booted Debian 11, 12 and 13 (scripts/test-session.sh: systemd 247, 252, 257;
# in 12 and 13 also a short run of the launch benchmark's ways to the manager, scripts/bench-session.sh),
# and against the real systemd-oomd with a real kernel's memory controller in a virtual machine
# of Debian 12 and 13 (scripts/test-vm.sh).
#
#   scripts/test.sh                      # everything, every version (as root)
#   scripts/test.sh rust python          # only these phases (and what they are built from)
#   SYNAPS_SYSTEMD_VERSIONS="252 262" SYNAPS_SESSION_RELEASES="12" scripts/test.sh
#   SYNAPS_BUSY_CPUS=2 scripts/test.sh rust c python node   # beside two CPU hogs
#
# Phases, in the order they run: lint (rustfmt, clippy), fuzz (a smoke run of every target), and
# per systemd version rust (cargo test of the core, the command line and the launcher program),
# c (the C ABI from C under sanitizers, and the installed library through pkg-config), python,
# node, bench; then dist (the artifacts installed from outside the repository), session
# (booted Debian login sessions), vm (the real systemd-oomd and memory controller in a virtual
# machine: scripts/test-vm.sh) and long (the long runs). Exits non-zero if anything fails or is
# skipped; the last lines summarise each version's counts.
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
command -v cargo >/dev/null || { echo "test.sh: cargo not found" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "test.sh: needs Node 20 and npm" >&2; exit 2; }

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

scratch="$(mktemp -d)"
roots_pid=""
images_pid=""
hog_pids=""
trap 'rm -rf "$scratch"; for p in $roots_pid $images_pid $hog_pids; do kill "$p" 2>/dev/null || true; done' EXIT

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

if want lint; then
  echo "== rustfmt, clippy"
  cargo fmt --all --check
  (cd fuzz && cargo fmt --check)
  cargo clippy --workspace --exclude synaps-scope-python --all-targets --locked -- -D warnings
  cargo clippy -p synaps-scope-python --features pyo3/extension-module --all-targets --locked -- -D warnings
fi
cargo build --all-targets --locked

dist="$scratch/dist"
if want python dist session vm long; then
  echo "== dist: every artifact (scripts/dist.sh), tested after the suites from outside the repository"
  SYNAPS_DIST_DIR="$dist" scripts/dist.sh
fi

c_prefix="$scratch/c"
if want c long; then
  echo "== C library: cargo cinstall into a scratch prefix"
  # cargo-c from crates.io, pinned to the newest release that builds with this toolchain.
  command -v cargo-cinstall >/dev/null || cargo install --locked cargo-c --version 0.10.24+cargo-0.98.0
  # Built in a target directory of its own, as a packager's CARGO_TARGET_DIR would put it: what is
  # installed must be what was just built there, never a library left in ./target.
  c_target="$scratch/c-target"
  CARGO_TARGET_DIR="$c_target" cargo cinstall --locked --release -p synaps-scope-ffi --prefix "$c_prefix" --libdir "$c_prefix/lib"
  built=$(find "$c_target" -path '*/release/libsynaps_scope.so' -not -path '*/deps/*' | head -n 1)
  cmp "$built" "$c_prefix/lib/libsynaps_scope.so.1.0.0" || { echo "test.sh: the installed library is not the one just built ($built)" >&2; exit 1; }
fi

venv="$scratch/venv"
if want python long; then
  echo "== Python: the dist wheel in a fresh venv, its types checked"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "$dist"/synaps_scope-*-cp39-abi3-manylinux*.whl pytest mypy
  (cd bindings/python && "$venv/bin/python" -m mypy --strict tests python/synaps_scope)
  (cd "$scratch" && "$venv/bin/python" -m mypy.stubtest synaps_scope._native)
fi

if want fuzz; then
  echo "== fuzz smoke: every target a few seconds (scripts/fuzz.sh 60 is the full run)"
  scripts/fuzz.sh "${SYNAPS_FUZZ_SECONDS:-5}"
fi

if want node long; then
  echo "== Node: install the package's dependencies from the npm registry, check its types"
  (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error && npx tsc -p tsconfig.json)
fi

versions="${SYNAPS_SYSTEMD_VERSIONS:-247 252 254 257 262}"
echo "== systemd $versions: fetch what the rig lacks (once, into its cache)"
# shellcheck disable=SC2086 # one version per word
scripts/systemd-rig.sh --fetch $versions

per_version=false
want rust c python node bench && per_version=true
counted=false
want rust c python node && counted=true

summary=()
versions_run="$versions"
$per_version || versions_run=""
for version in $versions_run; do
  echo "== tests against systemd $version"
  started=$SECONDS
  log="$(mktemp)"
  status=0
  for wrapper in synaps-scope-exec systemd-run; do
    echo "== systemd $version, wrapper $wrapper"
    export SYNAPS_SCOPE_LAUNCHER="$wrapper" SYNAPS_SCOPE_EXEC="$PWD/target/debug/synaps-scope-exec"
    if want rust; then
      scripts/systemd-rig.sh --systemd "$version" -- cargo test --locked -p synaps-scope -p synaps-scope-cli \
        -p synaps-scope-exec 2>&1 | tee -a "$log" || status=$?
    fi
    if want c; then
      scripts/systemd-rig.sh --systemd "$version" -- scripts/check-c-example.sh "$c_prefix" || status=$?
      scripts/systemd-rig.sh --systemd "$version" -- cargo test --locked -p synaps-scope-ffi 2>&1 | tee -a "$log" \
        || status=$?
    fi
    if want python; then
      scripts/systemd-rig.sh --systemd "$version" -- "$venv/bin/python" -m pytest bindings/python/tests -q -rs \
        -p no:cacheprovider 2>&1 | tee -a "$log" || status=$?
    fi
    if want node; then
      scripts/systemd-rig.sh --systemd "$version" -- node --test --test-concurrency=1 --test-reporter=tap \
        bindings/node/test/*.test.js 2>&1 | tee -a "$log" || status=$?
    fi
    unset SYNAPS_SCOPE_LAUNCHER SYNAPS_SCOPE_EXEC
  done
  if want bench; then
    SYNAPS_BENCH_QUICK=1 scripts/systemd-rig.sh --systemd "$version" -- cargo bench --locked --bench launch || status=$?
    # 256 `synaps-scope run` at once against 256 bare systemd-run: every one scoped, and sooner.
    SYNAPS_BENCH_QUICK=1 scripts/systemd-rig.sh --systemd "$version" -- cargo bench --locked -p synaps-scope-cli --bench burst || status=$?
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
newest="${versions##* }"
oldest="${versions%% *}"
for version in $(want dist && printf '%s\n' "$oldest" "$newest" | uniq); do
  echo "== the artifacts as their users install them, against systemd $version (scripts/test-dist.sh)"
  log="$(mktemp)"
  scripts/systemd-rig.sh --systemd "$version" -- scripts/test-dist.sh "$dist" 2>&1 | tee "$log" \
    || { rm -f "$log"; printf '%s\n' "${summary[@]}"; echo "test.sh: FAILED: the artifacts on systemd $version" >&2; exit 1; }
  summary+=("artifacts on systemd $version: $(grep -c '^ok: ' "$log") checks passed (wheel, npm package, C tarball from C and C++ through pkg-config and CMake)")
  rm -f "$log"
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
  "$@" 2>&1 | tee "$log" || { rm -f "$log"; printf '%s\n' "${summary[@]}"; echo "test.sh: FAILED: $failure" >&2; exit 1; }
  while IFS= read -r line; do summary+=("$line"); done < <(grep -E "$pattern" "$log")
  rm -f "$log"
}
if [ -n "$releases" ]; then
  # shellcheck disable=SC2086 # one release per word
  booted_phase "the booted roots of Debian $releases" "$roots_pid" "$roots_log" \
    '^Debian [0-9]+ \(systemd [0-9]+\): [0-9]+ checks passed' "the artifacts in a booted login session" \
    scripts/test-session.sh "$dist" $releases
  roots_pid=""
  # The benchmark is built here, against this machine's glibc (2.36): Debian 11's 2.31 cannot run it.
  bench_releases=$(for r in $releases; do case "$r" in 12|13) printf '%s ' "$r" ;; esac; done)
  if want bench && [ -n "$bench_releases" ]; then
    echo "== the launch benchmark's ways to the manager as alice in a login session of Debian $bench_releases"
    # shellcheck disable=SC2086 # one release per word
    SYNAPS_BENCH_QUICK=1 scripts/bench-session.sh $bench_releases \
      || { printf '%s\n' "${summary[@]}"; echo "test.sh: FAILED: the launch benchmark in a booted login session" >&2; exit 1; }
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
fi
echo "== summary ($phases)"
printf '%s\n' "${summary[@]}"
echo "total: ${total_passed:-0} passed, ${total_failed:-0} failed ($SECONDS s in all)"
