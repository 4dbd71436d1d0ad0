#!/usr/bin/env bash
# Where each suite runs: the table of docs/testing.md ("Where each suite runs, and why that is
# enough") read as data, so that the suite's plan and its reasons are one text.
#   scripts/placement.sh list                              # "SUITE PLACEMENT", a row a line
#   scripts/placement.sh select VERSION WRAPPER OLDEST NEWEST
#       # the suites that run with systemd VERSION and WRAPPER (synaps-scope-exec or systemd-run),
#       # the oldest and newest versions of the run being OLDEST and NEWEST
# Placements: once, every-version, launches, bindings, bench (their meaning is in the document).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
table=docs/testing.md

rows() {
  awk '
    /^#/ { inside = ($0 ~ /^## Where each suite runs/) }
    inside && /^\| `/ {
      n = split($0, cell, "|")
      suite = cell[2]; placement = cell[3]
      gsub(/[ `]/, "", suite); gsub(/[ `]/, "", placement)
      print suite, placement
    }' "$table"
}

case "${1:-}" in
  list)
    rows
    ;;
  select)
    [ $# = 5 ] || { echo "placement.sh: select VERSION WRAPPER OLDEST NEWEST" >&2; exit 2; }
    version="$2" wrapper="$3" oldest="$4" newest="$5"
    end=false
    { [ "$version" = "$oldest" ] || [ "$version" = "$newest" ]; } && end=true
    launcher=false
    [ "$wrapper" = synaps-scope-exec ] && launcher=true
    while read -r suite placement; do
      case "$placement" in
        once) $launcher && [ "$version" = "$newest" ] ;;
        every-version) $launcher ;;
        launches) $launcher || $end ;;
        bindings) $end ;;
        bench) false ;;
        *) echo "placement.sh: $suite: unknown placement '$placement'" >&2; exit 1 ;;
      esac && echo "$suite"
    done < <(rows)
    exit 0
    ;;
  *)
    echo "placement.sh: usage: list | select VERSION WRAPPER OLDEST NEWEST" >&2
    exit 2
    ;;
esac
