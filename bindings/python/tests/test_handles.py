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
from typing import Callable, Dict, List

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


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie not yet reaped)."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def test_kill_scope_after_wait_kills_what_the_tool_left(rig: Dict[str, str], tmp_path: Path) -> None:
    """After ``wait()`` returned, ``kill_scope()`` still kills what the tool left in its scope; once
    the manager has collected the scope there is nothing left, and it says nothing."""
    pidfile = tmp_path / "left"
    proc = synaps_scope.Popen(["sh", "-c", f"sleep 1000 & echo $! > {pidfile}"])
    assert proc.scope_unit is not None
    assert proc.wait(timeout=10) == 0
    left = int(pidfile.read_text())
    assert not gone(left), "the tool left a sleep running in its scope"
    proc.kill_scope()
    deadline = time.monotonic() + 5
    while not gone(left):
        assert time.monotonic() < deadline, "kill_scope after wait left the sleep running"
        time.sleep(0.005)
    deadline = time.monotonic() + 10
    while True:
        try:
            synaps_scope.ScopeHandle.from_manager(proc.scope_unit)
        except synaps_scope.ScopeNotFoundError:
            break
        assert time.monotonic() < deadline, "the manager never collected the scope"
        time.sleep(0.01)
    proc.kill_scope()


def test_args_and_cmd_are_the_callers_command(rig: Dict[str, str]) -> None:
    """``args`` (and the ``cmd`` of the errors made from it) are what the caller passed, scoped or
    not; what was spawned in the scope's name is ``scope_argv``."""
    done = synaps_scope.run(["true"])
    assert done.scope_unit is not None and done.args == ["true"], done.args
    assert done.scope_argv is not None and os.path.basename(done.scope_argv[-1]) == "true" and done.scope_argv != ["true"]
    shell = synaps_scope.run("exit 0", shell=True)
    assert shell.args == "exit 0" and shell.scope_argv is not None
    with pytest.raises(subprocess.CalledProcessError) as failed:
        synaps_scope.run(["false"], check=True)
    assert failed.value.cmd == ["false"]
    with pytest.raises(subprocess.TimeoutExpired) as late:
        synaps_scope.run(["sleep", "10"], timeout=0.2)
    assert late.value.cmd == ["sleep", "10"]
    with synaps_scope.Popen(["sleep", "10"]) as proc:
        assert proc.args == ["sleep", "10"]
        with pytest.raises(subprocess.TimeoutExpired) as waited:
            proc.wait(timeout=0.1)
        assert waited.value.cmd == ["sleep", "10"]
        proc.kill_scope()
    direct = synaps_scope.run(["true"], env={**os.environ, "SYNAPS_PROCESS_SCOPES": "off"})
    assert direct.scope_unit is None and direct.scope_argv is None and direct.args == ["true"]


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


STOP_MANAGER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "stop_manager.py"


def interrupted_after(seconds: float, call: Callable[[], object]) -> float:
    """Sends this process SIGINT ``seconds`` into ``call`` and returns how long after the signal
    ``call`` raised KeyboardInterrupt."""
    sent: List[float] = []

    def interrupt() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own handler, as at a terminal: a run started in the background of a script inherits
    # SIGINT ignored, and Python then leaves it so.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.monotonic() - sent[0]
    finally:
        timer.cancel()
        if before is not None:  # None: a handler installed from C, which stays
            signal.signal(signal.SIGINT, before)


def test_ctrl_c_reaches_a_blocking_call_within_100_ms(rig: Dict[str, str]) -> None:
    """SIGINT during a wait of the module's raises KeyboardInterrupt at once (the call looks for
    signals every 50 ms, as the standard library's waits do), not when its own timeout is out."""
    proc = synaps_scope.Popen(["sleep", "100"])
    handle = handle_once_in_scope(proc)
    late = interrupted_after(0.3, lambda: handle.wait_empty(15))
    stopped_at = time.monotonic()
    stopped = subprocess.run([sys.executable, str(STOP_MANAGER)], capture_output=True, text=True, check=True)
    try:
        probe_late = interrupted_after(
            0.3, lambda: synaps_scope.launcher_for_env(probe_timeout=10, env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": ""})
        )
    finally:
        os.kill(int(stopped.stdout), signal.SIGCONT)
    print(f"KeyboardInterrupt {late * 1000:.0f} ms after SIGINT in wait_empty, {probe_late * 1000:.0f} ms in a probe")
    assert late < 0.25 and probe_late < 0.25, (late, probe_late)
    assert time.monotonic() - stopped_at < 5
    assert handle.kill(5) == [proc.pid]
    proc.wait()
