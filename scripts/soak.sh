#!/usr/bin/env bash
# The first rules checked over random schedules for longer than the suite does (tests/rules.rs):
# launches and the system's events against a real user manager of the rig, every rule checked
# after every step. A failure prints its seed, its steps, the rule broken and the shortest
# schedule found that still breaks it; `--seed S` replays from that seed.
#
#   scripts/soak.sh --minutes 30                      # newest systemd, seeds from the clock
#   scripts/soak.sh --minutes 5 --seed 1234 --systemd 247
#   scripts/soak.sh --minutes 2 --tree /tmp/v140      # another tree's programs (a release's
#                                                     # worktree: git worktree add /tmp/v140 e583969)
#   scripts/soak.sh --minutes 1 --steps 8             # shorter schedules
#   scripts/soak.sh --minutes 3 --tree /tmp/v140 --keep-going   # on past each break: one story
#                                                     # told of each kind of break found
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

minutes=10 seed="" systemd=262 tree="" steps="" keep_going=0
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --systemd) systemd="$2"; shift 2 ;;
    --tree) tree="$(readlink -f "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    *) echo "soak.sh: unknown option $1 (--minutes N, --seed S, --systemd V, --tree DIR, --steps N, --keep-going)" >&2; exit 2 ;;
  esac
done
case "$minutes" in ''|*[!0-9]*) echo "soak.sh: --minutes takes a whole number" >&2; exit 2 ;; esac

if [ -n "$tree" ]; then
  echo "== building the programs under test in $tree"
  (cd "$tree" && cargo build -q -p synaps-scope-cli -p synaps-scope-exec -p synaps-scope-ffi)
fi
export SYNAPS_RULES_SECONDS=$((minutes * 60)) SYNAPS_RULES_SEED="$seed" SYNAPS_RULES_TREE="$tree"
export SYNAPS_RULES_STEPS="$steps" SYNAPS_RULES_KEEP_GOING="$keep_going"
exec scripts/systemd-rig.sh --systemd "$systemd" -- \
  cargo test -q --test rules -- --nocapture --test-threads=1
