"""A burst of launches stays scoped (issue 22): 256 threads of one host call ``synaps_scope.run``
at once on a healthy manager with the default bound, each command recording the cgroup it
starts in. Every one runs exactly once, in its own scope from its first instruction."""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import synaps_scope

LAUNCHES = 256
# One shell and its builtins: a grep and a cut in a subshell for each of 256 took a third of two
# cores' CPU, which the launches' turns then lacked.
RECORD = (
    'while IFS= read -r line; do case $line in 0::*) '
    'printf "%s %s\\n" "$0" "${line#0::}" >> "$1";; esac; done < /proc/$$/cgroup'
)


def test_256_threads_running_at_once_each_start_in_their_own_scope_once(rig: Dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "burst.log"
    env = dict(os.environ, SYNAPS_SCOPE_LAUNCHER="synaps-scope-exec")
    start = threading.Barrier(LAUNCHES)
    done: List[Optional[synaps_scope.CompletedProcess]] = [None] * LAUNCHES

    def launch(n: int) -> None:
        start.wait()
        done[n] = synaps_scope.run(["sh", "-c", RECORD, str(n), str(log)], env=env, capture_output=True)

    threads = [threading.Thread(target=launch, args=(n,)) for n in range(LAUNCHES)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - began
    units: Dict[str, str] = {}
    for n, result in enumerate(done):
        assert result is not None and result.returncode == 0, (n, result)
        assert result.stderr == b"", result.stderr
        assert result.scope_unit is not None, f"launch {n} went direct"
        units[str(n)] = result.scope_unit
    lines = [line.split(" ", 1) for line in log.read_text().splitlines()]
    runs = collections.Counter(n for n, _ in lines)
    assert runs == collections.Counter({str(n): 1 for n in range(LAUNCHES)}), "each command runs exactly once"
    unscoped = [(n, cgroup) for n, cgroup in lines if not cgroup.endswith("/" + units[n])]
    assert unscoped == [], f"{len(unscoped)} started outside their scope, e.g. {unscoped[:3]}"
    print(f"{LAUNCHES} threads calling synaps_scope.run at once: all scoped, last exit after {took:.2f} s")
