"""The warning before systemd-oomd acts, where it cannot be given: the watch says why when it is
made (a CannotWarnError with its kind), never a silent watch. Against the rig's real manager, a
stand-in oomd on a bus standing for the system bus (tests/tools/oomd_bus.py, named as such: no
manager on that bus says which rules cover the scope), and with no system bus at all. The warnings
themselves come from the real oomd in the virtual machine (scripts/test-vm.sh: the daemon's
callback in each scoped case, `async for` in the calm control)."""

from __future__ import annotations

import os
import threading
import time
from typing import Dict, Iterator

import pytest

import synaps_scope
from helpers import OomdBus, handle_once_in_scope

NO_SYSTEM_BUS = {**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system_bus_socket"}


@pytest.fixture
def handle(rig: Dict[str, str]) -> Iterator[synaps_scope.ScopeHandle]:
    proc = synaps_scope.Popen(["sleep", "100"])
    handle = handle_once_in_scope(proc)
    yield handle
    handle.kill()
    proc.wait()


def test_with_no_system_bus_a_watch_says_oomd_cannot_be_asked(handle: synaps_scope.ScopeHandle) -> None:
    with pytest.raises(synaps_scope.CannotWarnError) as raised:
        handle.watch_oomd(print, NO_SYSTEM_BUS)
    assert isinstance(raised.value, synaps_scope.ScopeError)
    assert raised.value.kind == "no-oomd"
    assert raised.value.unit == handle.unit
    assert "/nonexistent/system_bus_socket" in str(raised.value)


def test_where_no_manager_says_which_rules_cover_the_scope_the_watch_says_so_with_the_gil_released(
    handle: synaps_scope.ScopeHandle, oomd_bus: OomdBus
) -> None:
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.0005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    started = time.monotonic()
    with pytest.raises(synaps_scope.CannotWarnError) as raised:
        synaps_scope.OomdWatch([handle], env=oomd_bus.env)
    stop.set()
    ticker.join()
    assert raised.value.kind == "cannot-ask"
    assert "-.slice could not say" in str(raised.value)
    assert time.monotonic() - started < 4
    assert ticks > 0


def test_bad_arguments_are_refused_before_anything_is_asked(handle: synaps_scope.ScopeHandle) -> None:
    with pytest.raises(ValueError):
        synaps_scope.OomdWatch([handle], timeout=0, env=NO_SYSTEM_BUS)
    with pytest.raises(synaps_scope.CannotWarnError) as raised:
        synaps_scope.OomdWatch([], env=NO_SYSTEM_BUS)
    assert raised.value.kind == "scope-gone"
    with pytest.raises(TypeError):
        synaps_scope.OomdWatch([object()], env=NO_SYSTEM_BUS)  # type: ignore[list-item]


class _StandInNativeWatch:
    """The native watch's part in the iteration (its close), for the lifetime check below: the
    warnings themselves come from the real oomd in the virtual machine."""

    def close(self) -> None:
        pass


def test_an_async_for_keeps_its_watch_alive_until_it_ends() -> None:
    """``async for w in handle.watch_oomd()`` holds the watch it iterates: a watch that nothing
    else keeps is not collected (and closed) under the loop, which would then wait for ever."""
    import asyncio
    import gc
    import weakref

    async def iterate() -> None:
        watch = object.__new__(synaps_scope.OomdWatch)
        watch._callback = None
        watch._lock = threading.Lock()
        watch._queues = []
        watch._closed = False
        watch._native = _StandInNativeWatch()  # type: ignore[assignment]
        warnings = watch.__aiter__()
        alive = weakref.ref(watch)
        del watch
        gc.collect()
        kept = alive()
        assert kept is not None, "the watch was collected under its own async for"
        kept._dispatch(synaps_scope.OomdWarning("u.scope", "swap", "-.slice", 91.0, 90.0, 0.0, 0.0, "likely", ""))
        kept.close()
        del kept
        got = [warning async for warning in warnings]
        assert [warning.unit for warning in got] == ["u.scope"]

    asyncio.run(iterate())
