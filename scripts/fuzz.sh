#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 60) with cargo-fuzz (libFuzzer + AddressSanitizer).
# Installs cargo-fuzz from crates.io if it is missing; stable Rust is enough (RUSTC_BOOTSTRAP lets
# cargo-fuzz pass its -Z flags). A crash fails the run and leaves its input in fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
seconds="${1:-60}"
shift || true
scripts/cargo-tools.sh cargo-fuzz
export RUSTC_BOOTSTRAP=1
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target"
  # Committed seeds (real messages of the manager, for instance) start the corpus where present.
  seeds=()
  [ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
  status=0
  cargo fuzz run "$target" "fuzz/corpus/$target" "${seeds[@]}" -- -max_total_time="$seconds" -rss_limit_mb=2048 >"$log" 2>&1 || status=$?
  runs=$(grep -oE '^Done [0-9]+ runs' "$log" | tail -n1 || true)
  if [ "$status" != 0 ] || [ -z "$runs" ]; then
    tail -n 80 "$log" >&2
    echo "fuzz: $target failed (exit $status); its input is in fuzz/artifacts/$target" >&2
    exit 1
  fi
  echo "fuzz: $target: ${runs#Done } in ${seconds}s, no crash"
done
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a crash"
