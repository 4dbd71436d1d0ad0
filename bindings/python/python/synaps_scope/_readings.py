"""What a scope handle and an oomd watch report: usage, pressure, how a scope ended, oomd's
warnings and the scopes a watch cannot warn about. Plain values; imports no other module of the
package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Tuple


@dataclass(frozen=True)
class ScopeStats:
    """A scope's usage; None where the kernel's controller for it is not enabled."""

    memory_current: Optional[int]
    memory_peak: Optional[int]
    pids_current: Optional[int]


class PressureLine(NamedTuple):
    """One line of a pressure file: the share of the last 10, 60 and 300 seconds spent waiting, in
    percent, and the whole time spent waiting, in microseconds."""

    avg10: float
    avg60: float
    avg300: float
    total_usec: int


class Pressure(NamedTuple):
    """One resource's pressure: ``some`` task waited; ``full``: every task did (None where the
    kernel does not count it)."""

    some: PressureLine
    full: Optional[PressureLine]


class ScopePressure(NamedTuple):
    """A scope's pressure stall information per resource; None where the kernel has no PSI or
    the scope is gone. ``memory`` is what systemd-oomd's pressure rule reads."""

    memory: Optional[Pressure]
    cpu: Optional[Pressure]
    io: Optional[Pressure]


def _pressure(raw: Optional[Tuple[Tuple[float, float, float, int], Optional[Tuple[float, float, float, int]]]]) -> Optional[Pressure]:
    if raw is None:
        return None
    some, full = raw
    return Pressure(PressureLine(*some), None if full is None else PressureLine(*full))


@dataclass(frozen=True)
class ScopeEnding:
    """How a scope ended (:meth:`ScopeHandle.ending`).

    ``kind`` is one of ``"running"``, ``"oomd"`` (systemd-oomd killed it), ``"kernel-oom"`` (the
    kernel's OOM killer killed ``kernel_oom_kills`` processes in it, at a slice's memory limit,
    say), ``"handle-kill"`` (a scope handle's kill that found processes in it), ``"on-its-own"``
    or ``"unknown"`` (no evidence of a kill, and no count of the kernel's). ``oomd_rule`` is
    ``"swap"`` or ``"memory-pressure"`` for an oomd kill where oomd's signal names it or only one
    rule covers the scope, else None.

    ``evidence`` says what the answer rests on: ``"cgroup-events"``, ``"oomd-signal"`` (systemd-oomd's
    ``Killed`` signal, which no process of the user can send), ``"oomd-mark"``, ``"own-kill"`` (a
    kill through this handle), ``"kill-mark"``, ``"memory-events"``, ``"memory-events-lost"`` or
    ``"none"``; ``forgeable`` is True where any process of the user could have made it (a mark on
    the cgroup)."""

    kind: str
    oomd_rule: Optional[str]
    kernel_oom_kills: int
    evidence: str
    forgeable: bool
    message: str = field(compare=False)

    def __str__(self) -> str:
        return self.message


class OomdWarning(NamedTuple):
    """systemd-oomd is on its way to kill the scope ``unit`` (:class:`OomdWatch`).

    ``rule`` is ``"memory-pressure"`` or ``"swap"``; ``monitored`` the unit the rule is set on;
    ``figure`` and ``limit`` in percent: the monitored unit's memory pressure (``full avg10``) and
    the limit oomd acts past, or the share of swap used and oomd's ``SwapUsedLimit``; under the
    pressure rule, ``held_for`` is how long (seconds) it has been over the limit, of the
    ``duration`` oomd waits. ``sure`` is ``"possible"`` (past the limit, or within 10 points or
    10 s of the swap limit, and this scope ranks first among oomd's candidates) or ``"likely"``
    (held for half the duration with reclaim going on, or within 3 points of the swap limit)."""

    unit: str
    rule: str
    monitored: str
    figure: float
    limit: float
    held_for: float
    duration: float
    sure: str
    message: str

    def __str__(self) -> str:
        return self.message


class CannotWarn(NamedTuple):
    """A scope a watch cannot warn about: ``kind`` as :class:`CannotWarnError` says it."""

    unit: str
    kind: str
    message: str
