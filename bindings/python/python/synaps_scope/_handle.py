"""Handles on running scopes: :class:`ScopeHandle` (find, read, kill, wait for, and tell how a scope
ended) and :class:`OomdWatch` (warnings before systemd-oomd acts on one). They refer to each other
(a handle's :meth:`ScopeHandle.watch_oomd`; a watch takes handles), so they live together."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import AsyncIterator, Callable, List, Optional, Sequence, Tuple, Union

from . import _native
from ._args import DEFAULT_KILL_TIMEOUT, DEFAULT_PROBE_TIMEOUT, Env, _env_pairs, _pid
from ._readings import (
    CannotWarn,
    OomdWarning,
    ScopeEnding,
    ScopePressure,
    ScopeStats,
    _pressure,
)


class ScopeHandle:
    """A running scope of this library, found by the unit name that :meth:`ScopeLauncher.wrap`
    returned. Anything that is not a ``synaps-*.scope`` is refused with
    :class:`NotOurScopeError`, so a direct launch can never kill its caller's cgroup."""

    __slots__ = ("_native",)

    def __init__(self, native: _native.ScopeHandle) -> None:
        self._native = native

    @classmethod
    def from_pid(cls, unit: str, pid: int) -> ScopeHandle:
        """The scope ``unit``, found through the cgroup of ``pid``, a process in it."""
        return cls(_native.ScopeHandle.from_pid(unit, _pid(pid)))

    @classmethod
    def of_process(cls, pid: int) -> ScopeHandle:
        """The scope process ``pid`` runs in."""
        return cls(_native.ScopeHandle.of_process(_pid(pid)))

    @classmethod
    def from_manager(cls, unit: str, env: Optional[Env] = None, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ScopeHandle:
        """The scope ``unit``, found by asking the user manager (GIL released)."""
        return cls(_native.ScopeHandle.from_manager(unit, _env_pairs(env), float(timeout)))

    @property
    def unit(self) -> str:
        return self._native.unit

    @property
    def cgroup(self) -> str:
        """The scope's cgroup directory."""
        return os.fsdecode(self._native.cgroup)

    def pids(self) -> List[int]:
        """Every process in the scope; empty once it is gone."""
        return self._native.pids()

    def stats(self) -> ScopeStats:
        return ScopeStats(*self._native.stats())

    def pressure(self) -> ScopePressure:
        """The scope's pressure stall information (``memory.pressure``, ``cpu.pressure``,
        ``io.pressure``)."""
        memory, cpu, io = self._native.pressure()
        return ScopePressure(_pressure(memory), _pressure(cpu), _pressure(io))

    def kill(self, timeout: float = DEFAULT_KILL_TIMEOUT) -> List[int]:
        """Kills every process in the scope, descendants that left the process group included,
        and waits up to ``timeout`` seconds until it is empty. Returns the pids that were in it.
        Empty as the kernel counts it: a killed process may still be finishing its exit (not yet a
        zombie), but runs none of its own code again."""
        return self._native.kill(float(timeout))

    def wait_empty(self, timeout: float) -> None:
        """Waits up to ``timeout`` seconds until the scope is empty (:class:`ScopeTimeoutError`)."""
        self._native.wait_empty(float(timeout))

    def ending(self, env: Optional[Env] = None, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ScopeEnding:
        """How the scope ended: answered after the manager has collected it too, from what this
        handle kept since it was made (so make the handle while the tool runs). Where oomd's mark
        is there and its signal is heard but has not come, waits for it until oomd answers a ping
        sent after the mark; for an oomd kill no signal named, the rule is asked of the user and system
        managers; both within ``timeout``, with the GIL released. Once the scope has ended, the
        first answer is kept and given again."""
        return ScopeEnding(*self._native.ending(_env_pairs(env), float(timeout)))

    def watch_oomd(
        self,
        callback: Optional[Callable[[OomdWarning], object]] = None,
        env: Optional[Env] = None,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
    ) -> OomdWatch:
        """A watch on this scope for systemd-oomd's rules (:class:`OomdWatch`)."""
        return OomdWatch([self], callback, env, timeout)

    def __repr__(self) -> str:
        return f"ScopeHandle(unit={self.unit!r}, cgroup={self.cgroup!r})"


def _dispatcher(watch: "weakref.ref[OomdWatch]") -> Callable[[Tuple[str, str, str, float, float, float, float, str, str]], None]:
    """What the native watch calls, on the library's watching thread: holds the watch weakly, so
    that an unreferenced watch is collected (and closed)."""

    def dispatch(raw: Tuple[str, str, str, float, float, float, float, str, str]) -> None:
        alive = watch()
        if alive is not None:
            alive._dispatch(OomdWarning(*raw))

    return dispatch


class OomdWatch:
    """Watches scopes for systemd-oomd's rules, and warns before oomd acts on one: ``callback``
    is called with each :class:`OomdWarning` on the library's one watching thread (keep it short;
    hand work to your own thread or loop), and ``async for warning in watch`` yields them on the
    running event loop. Asking the managers which rules cover each scope blocks up to ``timeout``
    seconds (GIL released). Scopes it cannot warn about are in :attr:`cannot_warn`; where none
    can be, :class:`CannotWarnError` says why. :meth:`close` (or leaving a ``with`` block) stops
    it: no call after it returns, and every ``async for`` ends; so does its collection, so keep
    a reference for as long as it should warn."""

    def __init__(
        self,
        handles: Union[ScopeHandle, Sequence[ScopeHandle]],
        callback: Optional[Callable[[OomdWarning], object]] = None,
        env: Optional[Env] = None,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
    ) -> None:
        self._callback = callback
        self._lock = threading.Lock()
        self._queues: List[Tuple[asyncio.AbstractEventLoop, "asyncio.Queue[Optional[OomdWarning]]"]] = []
        self._closed = False
        natives = []
        for handle in [handles] if isinstance(handles, ScopeHandle) else handles:
            if not isinstance(handle, ScopeHandle):
                raise TypeError(f"OomdWatch takes ScopeHandles, not {type(handle).__name__}")
            natives.append(handle._native)
        self._native = _native.OomdWatch(natives, _env_pairs(env), float(timeout), _dispatcher(weakref.ref(self)))

    @property
    def watched(self) -> List[str]:
        """The units of the scopes this watch can warn about."""
        return self._native.watched

    @property
    def cannot_warn(self) -> List[CannotWarn]:
        """The scopes given that this watch cannot warn about, and why."""
        return [CannotWarn(*why) for why in self._native.cannot_warn]

    def _dispatch(self, warning: OomdWarning) -> None:
        if self._callback is not None:
            self._callback(warning)
        with self._lock:
            queues = list(self._queues)
        for loop, queue in queues:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, warning)
            except RuntimeError:  # that loop is closed
                pass

    def close(self) -> None:
        """Stops the watch: no callback after this returns, and every ``async for`` ends."""
        self._native.close()
        with self._lock:
            self._closed = True
            queues, self._queues = self._queues, []
        for loop, queue in queues:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:
                pass

    def __enter__(self) -> OomdWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __aiter__(self) -> AsyncIterator[OomdWarning]:
        queue: "asyncio.Queue[Optional[OomdWarning]]" = asyncio.Queue()
        with self._lock:
            if self._closed:
                queue.put_nowait(None)
            else:
                self._queues.append((asyncio.get_running_loop(), queue))
        return _warnings(self, queue)

    def __repr__(self) -> str:
        return f"OomdWatch(watched={self.watched!r}, cannot_warn={[why.unit for why in self.cannot_warn]!r})"


async def _warnings(watch: OomdWatch, queue: "asyncio.Queue[Optional[OomdWarning]]") -> AsyncIterator[OomdWarning]:
    """The warnings ``watch`` puts in ``queue``, until it is closed. Holds the watch: a loop over a
    watch that nothing else keeps (``async for w in handle.watch_oomd()``) keeps it warning for as
    long as it iterates."""
    while True:
        warning = await queue.get()
        if warning is None:
            return
        yield warning
