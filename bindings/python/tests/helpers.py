"""Helpers the Python tests share."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Awaitable, Dict, List, Optional, Tuple, TypeVar

import pytest

import synaps_scope

T = TypeVar("T")
CGROUP_OF_SELF = "grep '^0::' /proc/$$/cgroup | cut -c4-"
PRINT_ARGS = "for a; do printf '%s\\0' \"$a\"; done"


def no_bus_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")}


def config_env(tmp_path: Path, text: str) -> Dict[str, str]:
    config = tmp_path / "config"
    config.write_text(text)
    return {**os.environ, "SYNAPS_CONFIG": str(config)}


async def longest_stall(work: Awaitable[T]) -> Tuple[T, float]:
    """Awaits ``work`` while a coroutine ticks every 10 ms; returns its result and the longest gap
    between ticks, in seconds."""
    gaps: List[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    try:
        result = await work
    finally:
        done.set()
        await tick
    return result, max(gaps)


def scope_warnings(caplog: pytest.LogCaptureFixture, needle: str) -> List[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "synaps_scope" and r.levelno == logging.WARNING and needle in r.getMessage()
    ]


def handle_once_in_scope(proc: synaps_scope.Popen) -> synaps_scope.ScopeHandle:
    """The handle of ``proc``'s scope, once the child has entered it."""
    assert proc.scope_unit is not None
    deadline = time.monotonic() + 10
    while True:
        try:
            return synaps_scope.ScopeHandle.from_pid(proc.scope_unit, proc.pid)
        except synaps_scope.ScopeError:
            assert time.monotonic() < deadline, "the child never reached its scope"
            time.sleep(0.005)


OOMD_BUS = Path(__file__).resolve().parents[3] / "tests" / "tools" / "oomd_bus.py"


class OomdBus:
    """A bus standing for the system bus with a stand-in systemd-oomd on it (tests/tools/oomd_bus.py;
    the real oomd acts in the virtual machine), and the environment that names it. With
    ``slow_set_up`` (seconds), the environment names a stand-in in front of the bus that holds a
    subscription's question on oomd's introspection that long."""

    def __init__(self, directory: Path, slow_set_up: Optional[float] = None) -> None:
        slow = [] if slow_set_up is None else [str(slow_set_up)]
        command = [sys.executable, str(OOMD_BUS), str(directory), *slow]
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        ready = self._proc.stdout.readline().split()
        assert ready[:1] == ["ready"], ready
        self.env = {**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": ready[1]}

    def killed(self, cgroup: str, reason: str) -> None:
        """Sends oomd's Killed(cgroup, reason), as oomd does after a kill."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(f"kill {cgroup} {reason}\n")
        self._proc.stdin.flush()
        assert self._proc.stdout.readline().strip() == "sent"

    def oomd_kill_begun(self, directory: str, cgroup: str, reason: str, busy_ms: int) -> None:
        """Has the stand-in make oomd's whole kill of the cgroup at ``directory`` in one turn of its
        loop (its mark, the kill, ``busy_ms`` of other work, its signal), answering nothing on the
        bus meanwhile; ``sent`` waits for its end."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"oomd-kill {directory} {cgroup} {reason} {busy_ms}\n")
        self._proc.stdin.flush()

    def sent(self) -> None:
        """Waits until the signal of the kill begun is out."""
        assert self._proc.stdout is not None
        assert self._proc.stdout.readline().strip() == "sent"

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)
