"""Bounds and bad input from Python: the probe never holds a caller, the GIL or the event loop past
its bound, against stopped managers of a test's own; bad input raises Python exceptions."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from typing import Dict, List, Tuple

import pytest

import synaps_scope
from conftest import Manager
from helpers import CGROUP_OF_SELF, longest_stall, handle_once_in_scope


def test_the_asyncio_helper_never_stalls_the_loop(rig: Dict[str, str]) -> None:
    async def launch(i: int) -> str:
        proc = await synaps_scope.create_subprocess_exec("sh", "-c", CGROUP_OF_SELF, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert proc.returncode == 0, i
        assert proc.scope_unit is not None and out.decode().strip().endswith(proc.scope_unit), i
        return proc.scope_unit

    async def main() -> Tuple[List[str], float]:
        return await longest_stall(asyncio.gather(*(launch(i) for i in range(20))))

    units, worst = asyncio.run(main())
    assert len(set(units)) == 20
    assert worst < 0.1, f"the event loop stalled for {worst * 1000:.0f} ms"


def test_the_probe_releases_the_gil(manager: Manager) -> None:
    assert synaps_scope.launcher_for_env(manager.env) is not None
    ticks: List[float] = []
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    manager.signal("STOP")
    worker = threading.Thread(target=count)
    worker.start()
    try:
        started = time.monotonic()
        assert synaps_scope.launcher_for_env(manager.env, probe_timeout=1.0) is None
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        worker.join()
        manager.signal("CONT")
    assert 1.0 <= elapsed < 1.5, elapsed
    during = [t for t in ticks if started <= t <= started + elapsed]
    assert len(during) > 200, f"the Python thread ran only {len(during)} times during the probe"
    assert max(b - a for a, b in zip(during, during[1:])) < 0.1


def test_bounds_too_large_for_the_clock_saturate_instead_of_panicking(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env(probe_timeout=1e19)
    assert launcher is not None
    proc = synaps_scope.Popen(["sleep", "30"], probe_timeout=1e19)
    handle = handle_once_in_scope(proc)
    assert handle.kill(timeout=1e19) == [proc.pid]
    handle.wait_empty(1e19)
    assert proc.wait() != 0


def test_probes_of_a_stopped_manager_never_stall_the_loop(manager: Manager) -> None:
    async def launch() -> None:
        proc = await synaps_scope.create_subprocess_exec("true", env=manager.env, probe_timeout=0.3)
        assert proc.scope_unit is None, "a stopped manager means a direct launch"
        assert await proc.wait() == 0

    async def main() -> float:
        _, worst = await longest_stall(asyncio.gather(*(launch() for _ in range(20))))
        return worst

    manager.signal("STOP")
    try:
        worst = asyncio.run(main())
    finally:
        manager.signal("CONT")
    assert worst < 0.1, f"the event loop stalled for {worst * 1000:.0f} ms"


def test_async_requests_answered_or_cancelled_leave_no_descriptor_behind(manager: Manager) -> None:
    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def answered() -> None:
        assert await synaps_scope.launcher_for_env_async(manager.env, probe_timeout=0.2) is None

    async def cancelled() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(synaps_scope.launcher_for_env_async(manager.env, probe_timeout=0.2), 0.01)

    async def main() -> None:
        await asyncio.gather(*(answered() for _ in range(50)), *(cancelled() for _ in range(50)))

    # A connection an earlier test's probe kept is closed 500 ms after its last use: counted
    # before and closed during this test, it would read as one descriptor less.
    time.sleep(0.6)
    before = descriptors()
    manager.signal("STOP")
    try:
        asyncio.run(main())
        time.sleep(0.4)  # the cancelled requests' probes end within their bound
    finally:
        manager.signal("CONT")
    gc.collect()
    assert descriptors() == before, f"{descriptors() - before} descriptors left open by 100 requests"


def test_64_requests_against_a_stopped_manager_each_answer_within_their_own_bound(manager: Manager) -> None:
    bound = 0.5
    assert synaps_scope.launcher_for_env(manager.env) is not None
    manager.signal("STOP")
    try:
        took: List[float] = []
        lock = threading.Lock()

        def request() -> None:
            started = time.monotonic()
            assert synaps_scope.launcher_for_env(manager.env, probe_timeout=bound) is None
            with lock:
                took.append(time.monotonic() - started)

        threads = [threading.Thread(target=request) for _ in range(64)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(took) == 64 and max(took) < bound + 0.1, f"threads: slowest {max(took):.3f} s"

        async def one() -> float:
            started = time.monotonic()
            launcher = await synaps_scope.launcher_for_env_async(manager.env, probe_timeout=bound)
            assert launcher is None
            return time.monotonic() - started

        async def all_of_them() -> List[float]:
            return list(await asyncio.gather(*(one() for _ in range(64))))

        answered = asyncio.run(all_of_them())
        assert max(answered) < bound + 0.1, f"asyncio: slowest {max(answered):.3f} s"
    finally:
        manager.signal("CONT")


def test_bad_inputs_raise_python_exceptions(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    with pytest.raises(ValueError, match="kind"):
        synaps_scope.launcher_for_env(kind="shell")
    for timeout in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="probe_timeout"):
            synaps_scope.launcher_for_env(probe_timeout=timeout)
    with pytest.raises(TypeError):
        synaps_scope.launcher_for_env(probe_timeout="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        synaps_scope.launcher_for_env(env=["PATH=/bin"])  # type: ignore[arg-type]
    empty = launcher.wrap([])  # left unwrapped, as an unresolvable program is (R4)
    assert (empty.argv, empty.unit) == ([], None)
    with pytest.raises(TypeError, match="sequence"):
        launcher.wrap("ls -l")
    with pytest.raises(TypeError, match="argument"):
        launcher.wrap(["ls", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls", "a\0b"])
    with pytest.raises(ValueError, match="'='"):
        launcher.wrap(["ls"], env={"A=B": "x"})
    with pytest.raises(ValueError, match="cwd cannot contain NUL"):
        launcher.wrap(["ls"], cwd="/tmp\0x")
    with pytest.raises(ValueError, match="cwd cannot contain NUL"):
        synaps_scope.resolve_program("ls", cwd=b"/\0")
    with pytest.raises(ValueError):
        launcher.wrap(["ls"], env={"": "x"})
    with pytest.raises(ValueError, match="NUL"):
        synaps_scope.launcher_for_env({"PATH": "/bin\0"})
    with pytest.raises(TypeError, match="environment value"):
        launcher.wrap(["ls"], env={"A": 1})  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        synaps_scope.resolve_program("")
    with pytest.raises(synaps_scope.NotOurScopeError):
        synaps_scope.ScopeHandle.from_pid("app.slice", 1)
    with pytest.raises(synaps_scope.ScopeNotFoundError):
        synaps_scope.ScopeHandle.from_manager("synaps-tool-0123456789abcdef0123456789abcdef.scope")
    # Issue 13, item 6: a pid is an int from 1 to 2**31 - 1; a bool would have meant pid 1.
    unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope"
    for bad_type in (True, 1.5, "5", None):
        with pytest.raises(TypeError, match="pid must be an int"):
            synaps_scope.ScopeHandle.of_process(bad_type)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="pid must be an int"):
            synaps_scope.ScopeHandle.from_pid(unit, bad_type)  # type: ignore[arg-type]
    for bad_number in (-1, 0, 2**31, 2**32 + 1):
        with pytest.raises(ValueError, match="pid must be a whole number from 1 to 2147483647"):
            synaps_scope.ScopeHandle.of_process(bad_number)
        with pytest.raises(ValueError, match="pid must be a whole number from 1 to 2147483647"):
            synaps_scope.ScopeHandle.from_pid(unit, bad_number)
    for bad_timeout in (-1e19, 1e-12, float("-inf")):
        with pytest.raises(ValueError):
            synaps_scope.launcher_for_env(probe_timeout=bad_timeout)
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls"], env={"A": "x\0y"})
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls"], executable="/bin/l\0s")
