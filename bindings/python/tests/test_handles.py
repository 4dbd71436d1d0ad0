"""Scope handles from Python: finding, killing and reading a scope, and the scopes never touched."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest

import synaps_scope
from helpers import handle_once_in_scope


def test_a_scope_removed_while_it_is_read_is_empty_not_an_error(rig: Dict[str, str]) -> None:
    """The manager removes a scope's cgroup once its last process dies, also between a read's
    open and its read (ENODEV). A thread reads the scope while it is killed, many times over."""
    for round in range(15):
        proc = synaps_scope.Popen(["sleep", "1000"])
        handle = handle_once_in_scope(proc)
        errors: List[str] = []

        def hammer() -> None:
            end = time.monotonic() + 10
            while os.path.isdir(handle.cgroup) and time.monotonic() < end:
                try:
                    handle.pids()
                    handle.stats()
                except synaps_scope.ScopeError as e:
                    errors.append(str(e))
                    return

        reader = threading.Thread(target=hammer)
        reader.start()
        try:
            assert handle.kill(timeout=5) == [proc.pid], f"round {round}"
        finally:
            reader.join()
            proc.wait()
        assert errors == [], f"round {round}"
        assert handle.pids() == []


def test_another_users_scope_is_refused_with_a_clear_error(rig: Dict[str, str]) -> None:
    """Another user's scope sits in the subtree delegated to that user, so its cgroup is that
    user's: handed to uid 1000 here as delegation hands it (scripts/test-session.sh meets a real
    one). Every route refuses it with a PermissionError naming the owner; given back, it is ours."""
    proc = synaps_scope.Popen(["sleep", "1000"])
    handle = handle_once_in_scope(proc)
    assert proc.scope_unit is not None
    unit = proc.scope_unit
    os.chown(handle.cgroup, 1000, -1)
    try:
        expected = f"{unit} belongs to uid 1000, not to this user (uid 0); refusing it"
        for route in ("from_pid", "of_process", "from_manager"):
            with pytest.raises(synaps_scope.NotOurScopeError, match=re.escape(expected)) as refused:
                if route == "from_pid":
                    synaps_scope.ScopeHandle.from_pid(unit, proc.pid)
                elif route == "of_process":
                    synaps_scope.ScopeHandle.of_process(proc.pid)
                else:
                    synaps_scope.ScopeHandle.from_manager(unit)
            assert isinstance(refused.value, PermissionError)
        assert proc.poll() is None, "nothing in it was touched"
    finally:
        os.chown(handle.cgroup, 0, -1)
    synaps_scope.ScopeHandle.of_process(proc.pid).kill(timeout=5)
    assert proc.wait(timeout=5) == -signal.SIGKILL


def test_the_scope_kill_reaches_an_escaped_descendant(rig: Dict[str, str], tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped"
    script = f"( setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' & ); exec sleep 1000"
    proc = synaps_scope.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.005)
    escaped = int(pidfile.read_text())
    assert proc.scope_unit is not None
    handle = synaps_scope.ScopeHandle.from_pid(proc.scope_unit, escaped)
    assert sorted(handle.pids()) == sorted([proc.pid, escaped])
    stats = handle.stats()
    assert (stats.memory_current is None) == (not os.path.exists(os.path.join(handle.cgroup, "memory.current")))
    pressure = handle.pressure()
    for resource, name in [(pressure.memory, "memory"), (pressure.cpu, "cpu"), (pressure.io, "io")]:
        assert (resource is not None) == os.path.exists(os.path.join(handle.cgroup, f"{name}.pressure"))
    assert pressure.memory is not None and pressure.memory.full is not None
    assert 0 <= pressure.memory.some.avg10 <= 100 and isinstance(pressure.memory.some.total_usec, int)
    os.killpg(proc.pid, 9)
    proc.wait()
    assert Path(f"/proc/{escaped}").exists(), "a process-group kill misses it"
    assert handle.kill(timeout=5) == [escaped]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{escaped}/status").exists():
        if "State:\tZ" in Path(f"/proc/{escaped}/status").read_text():
            break
        time.sleep(0.005)
    assert handle.pids() == []
    with pytest.raises(synaps_scope.NotOurScopeError):
        synaps_scope.ScopeHandle.of_process(os.getpid())
    with pytest.raises(PermissionError):
        synaps_scope.ScopeHandle.from_pid("app.slice", os.getpid())


def test_run_kills_the_whole_scope_on_timeout(rig: Dict[str, str], tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    script = f"sleep 1000 & echo $! > {pidfile}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        synaps_scope.run(["sh", "-c", script], timeout=0.5)
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        status = Path(f"/proc/{grandchild}/status").read_text() if Path(f"/proc/{grandchild}/status").exists() else ""
        if "State:\tZ" in status:
            break
        time.sleep(0.01)
    status_path = Path(f"/proc/{grandchild}/status")
    assert not status_path.exists() or "State:\tZ" in status_path.read_text(), "the grandchild outlived the timeout"


HOLDS_CALLER_CHECK = """
import subprocess, synaps_scope
child = subprocess.Popen(["sleep", "100"])
try:
    synaps_scope.ScopeHandle.of_process(child.pid).kill(5)
    print("killed")
except synaps_scope.NotOurScopeError as refused:
    print("refused:", refused)
finally:
    child.kill()
    child.wait()
"""


def test_a_scope_that_holds_the_caller_is_never_killed(rig: Dict[str, str]) -> None:
    """Issue 13, item 1: a daemon in a scope of its own asks for its direct child's scope."""
    done = synaps_scope.run([sys.executable, "-c", HOLDS_CALLER_CHECK], kind="daemon", capture_output=True)
    out = done.stdout.decode()
    assert done.returncode == 0, (done.returncode, out, done.stderr)
    assert out.startswith("refused:") and "holds this process" in out, out
