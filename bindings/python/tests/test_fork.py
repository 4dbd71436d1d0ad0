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
import threading
import time
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
