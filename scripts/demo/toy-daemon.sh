#!/usr/bin/env bash
# A toy agent daemon for the oomd demonstration: reads commands from the FIFO $1 and answers on $2.
#   launch  starts a memory-hungry tool command through `synaps-scope run --kind tool`
#   ping    answers "pong", proving the daemon is alive
set -u
exec 3<>"$1"
while read -r command <&3; do
  case "$command" in
    launch)
      # Holds ~256 MB: tail keeps the one endless "line" of NULs in memory until killed.
      "$SYNAPS_SCOPE_BIN" run --kind tool -- sh -c '(head -c 268435456 /dev/zero; exec sleep 1000) | tail >/dev/null' &
      echo "tool $!" >> "$2" ;;
    ping)
      echo "pong $$" >> "$2" ;;
  esac
done
