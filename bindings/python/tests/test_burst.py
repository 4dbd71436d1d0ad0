"""A burst of launches stays scoped (issue 22): 256 threads of one host call ``synaps_scope.run``
at once on a healthy manager with the default bound, each command recording the cgroup it
starts in. Every one runs exactly once, in its own scope from its first instruction. And 16 at
once with a 1 s bound while the session bus's broker is stopped (issue 38): all scoped."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import synaps_scope
from conftest import Manager

LAUNCHES = 256
# One shell and its builtins: a grep and a cut in a subshell for each of 256 took a third of two
# cores' CPU, which the launches' turns then lacked.
RECORD = (
    'while IFS= read -r line; do case $line in 0::*) '
    'printf "%s %s\\n" "$0" "${line#0::}" >> "$1";; esac; done < /proc/$$/cgroup'
)


def all_scoped_at_once(launches: int, env: Dict[str, str], log: Path, probe_timeout: float) -> float:
    """``launches`` threads calling ``synaps_scope.run`` at once with ``env``: each command runs
    once, in its own scope from its first instruction, nothing said. How long the last took."""
    start = threading.Barrier(launches)
    done: List[Optional[synaps_scope.CompletedProcess]] = [None] * launches

    def launch(n: int) -> None:
        start.wait()
        done[n] = synaps_scope.run(
            ["sh", "-c", RECORD, str(n), str(log)], env=env, capture_output=True, probe_timeout=probe_timeout
        )

    threads = [threading.Thread(target=launch, args=(n,)) for n in range(launches)]
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
    assert runs == collections.Counter({str(n): 1 for n in range(launches)}), "each command runs exactly once"
    unscoped = [(n, cgroup) for n, cgroup in lines if not cgroup.endswith("/" + units[n])]
    assert unscoped == [], f"{len(unscoped)} started outside their scope, e.g. {unscoped[:3]}"
    return took


def test_256_threads_running_at_once_each_start_in_their_own_scope_once(rig: Dict[str, str], tmp_path: Path) -> None:
    env = dict(os.environ, SYNAPS_SCOPE_LAUNCHER="synaps-scope-exec")
    took = all_scoped_at_once(LAUNCHES, env, tmp_path / "burst.log", synaps_scope.DEFAULT_PROBE_TIMEOUT)
    print(f"{LAUNCHES} threads calling synaps_scope.run at once: all scoped, last exit after {took:.2f} s")


def test_a_stopped_session_bus_broker_costs_a_burst_one_wait(manager: Manager, tmp_path: Path) -> None:
    """The session bus's broker stopped (SIGSTOP: it accepts and answers nothing): 16 threads at
    once with a 1 s bound each, through the launcher program, all scoped; the first to find the
    broker silent marks the runtime directory, and the rest take the private socket at once."""
    env = dict(
        manager.env,
        SYNAPS_SCOPE_LAUNCHER="synaps-scope-exec",
        DBUS_SESSION_BUS_ADDRESS=f"unix:path={manager.runtime_dir}/bus",
    )
    subprocess.run(["systemctl", "--user", "start", "dbus.socket", "dbus.service"], env=manager.env, check=True)
    broker = int(
        subprocess.run(
            ["systemctl", "--user", "show", "-p", "MainPID", "--value", "dbus.service"],
            env=manager.env, capture_output=True, text=True, check=True,
        ).stdout
    )
    assert broker > 0, "the session bus's broker runs"
    os.kill(broker, signal.SIGSTOP)
    try:
        took = all_scoped_at_once(16, env, tmp_path / "burst.log", 1.0)
    finally:
        os.kill(broker, signal.SIGCONT)
    print(f"16 threads at once, the broker stopped, 1 s bound: all scoped, last exit after {took:.2f} s")
