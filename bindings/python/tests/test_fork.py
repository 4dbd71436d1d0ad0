"""Hosts that fork, from Python: a child made by os.fork() or by multiprocessing's fork start method
while other threads of its parent are in requests gets its first answer within its own bound, as a
fresh process would; a child that never calls the library holds no connection the manager writes
to; and the parent's own requests go on as before."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set

import pytest

import synaps_scope
from conftest import Manager

FINE, TOO_LATE, DIRECT, KEPT_A_CONNECTION = 0, 1, 2, 3
BOUND = 1.0

# Python 3.12 and later warn when a process with threads forks; forking amid threads is the point.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def first_request(env: Dict[str, str]) -> int:
    """A child's first request: scoped, within its bound."""
    started = time.monotonic()
    launcher = synaps_scope.launcher_for_env(env, probe_timeout=BOUND)
    if time.monotonic() - started > BOUND + 0.1:
        return TOO_LATE
    return FINE if launcher is not None else DIRECT


@contextlib.contextmanager
def threads_asking(env: Dict[str, str]) -> Iterator[None]:
    """Three threads in requests, one after another, for as long as the block runs."""
    stop = threading.Event()

    def ask() -> None:
        while not stop.is_set():
            synaps_scope.launcher_for_env(env)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def status_within(pid: int, limit: float) -> Optional[int]:
    """The child's exit status within `limit` seconds, or None (it hung, and was killed)."""
    end = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.005)


def forked(child: Callable[[], int]) -> int:
    """Forks a child that runs `child` and leaves with its status; its pid."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = child()
        finally:
            os._exit(code)
    return pid


def test_children_of_os_fork_amid_requests_answer_within_their_own_bound(manager: Manager) -> None:
    outcomes: List[Optional[int]] = []
    with threads_asking(manager.env):
        for _ in range(30):
            pid = forked(lambda: first_request(manager.env))
            outcomes.append(status_within(pid, 5 * BOUND))
            time.sleep(0.003)
    assert outcomes == [FINE] * 30, f"hung: None, past the bound: {TOO_LATE}, direct: {DIRECT}: {outcomes}"
    assert synaps_scope.launcher_for_env(manager.env) is not None, "the parent's requests go on"


def report(env: Dict[str, str]) -> None:
    raise SystemExit(first_request(env))


def test_multiprocessing_fork_children_amid_requests_answer_within_their_own_bound(manager: Manager) -> None:
    context = multiprocessing.get_context("fork")
    outcomes: List[Optional[int]] = []
    with threads_asking(manager.env):
        for _ in range(15):
            child = context.Process(target=report, args=(manager.env,))
            child.start()
            child.join(5 * BOUND)
            if child.is_alive():
                child.kill()
                child.join()
                outcomes.append(None)
            else:
                outcomes.append(child.exitcode)
    assert outcomes == [FINE] * 15, f"hung: None, past the bound: {TOO_LATE}, direct: {DIRECT}: {outcomes}"


def sockets() -> Set[int]:
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                found.add(int(name))
    return found


def still_connected(fd: int) -> bool:
    """Whether socket `fd` (if still open here) has a peer that can still write to it."""
    if fd not in sockets():
        return False
    probe = socket.socket(fileno=os.dup(fd))
    probe.setblocking(False)
    try:
        return probe.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    finally:
        probe.close()


def test_a_child_that_never_calls_the_library_holds_no_connection_the_manager_writes_to(manager: Manager) -> None:
    before = sockets()
    assert synaps_scope.launcher_for_env(manager.env) is not None
    kept = sockets() - before
    assert len(kept) == 1, "the probe keeps its connection for the next request"

    def sleep_then_look() -> int:
        time.sleep(1.5)
        return KEPT_A_CONNECTION if any(still_connected(fd) for fd in kept) else FINE

    pid = forked(sleep_then_look)
    for _ in range(20):
        assert synaps_scope.launcher_for_env(manager.env) is not None
    assert status_within(pid, 5) == FINE


SLOW_MANAGER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "slow_manager.py"


def test_a_child_of_a_host_that_stopped_waiting_for_a_turn_holds_no_ticket_once_the_host_has_exited(
    manager: Manager, tmp_path: Path
) -> None:
    """A host whose request stopped waiting for a turn (one stuck ahead of it) forks a child that
    never calls the library and exits; once the stuck turn ends, another process's request takes
    its turn at once while that child lives (the host's ticket went with the host)."""
    runtime = tmp_path / "runtime"
    (runtime / "systemd").mkdir(parents=True)
    # The first authentication through the stand-in is held 3 s: that request's turn is stuck.
    slow = subprocess.Popen(
        [sys.executable, str(SLOW_MANAGER), "--listen", str(runtime / "systemd" / "private"),
         "--to", str(manager.runtime_dir / "systemd" / "private"),
         "--needle", "AUTH", "--delay", "3", "--first-only"],
        stdout=subprocess.PIPE,
        text=True,
    )
    grandchild = 0
    try:
        assert slow.stdout is not None and slow.stdout.readline().strip() == "ready"
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env["XDG_RUNTIME_DIR"] = str(runtime)
        # The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
        # behind one, is never used there, so the launcher program is.
        env["SYNAPS_SCOPE_LAUNCHER"] = "synaps-scope-exec"
        stuck: List[Optional[synaps_scope.ScopeLauncher]] = []
        holder = threading.Thread(target=lambda: stuck.append(synaps_scope.launcher_for_env(env, probe_timeout=5.0)))
        holder.start()
        time.sleep(0.3)
        pid_file = tmp_path / "grandchild"

        def sleeper() -> int:
            time.sleep(8)
            return FINE

        def host() -> int:
            # Its turn does not come within 0.3 s: it talks to the manager without one, and its
            # ticket waits on in a thread of its own.
            synaps_scope.launcher_for_env(env, probe_timeout=0.3)
            pid_file.write_text(str(forked(sleeper)))
            return FINE

        assert status_within(forked(host), 3.0) == FINE
        grandchild = int(pid_file.read_text())
        holder.join()
        assert stuck[0] is not None, "the stuck request still ends scoped"
        started = time.monotonic()
        assert status_within(forked(lambda: first_request(env)), 5.0) == FINE
        took = time.monotonic() - started
        assert took < 0.25, f"a request took {took:.3f} s while the child of a host that had a ticket lived"
    finally:
        if grandchild:
            os.kill(grandchild, signal.SIGKILL)
        slow.kill()
        slow.wait()
