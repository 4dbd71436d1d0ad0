"""Run child processes in their own systemd scope, so systemd-oomd kills only the runaway child.

Each launch first runs a fresh probe of the user's systemd manager, bounded at 3 s, with the GIL
released; when scopes are unavailable the command starts exactly as it would without this module::

    import synaps_scope
    proc = synaps_scope.Popen(["cargo", "test"])      # in its own scope when one can be had
    print(proc.scope_unit, proc.wait())               # synaps-tool-<32 hex>.scope (None: direct)

Arguments and environments may be str, bytes or os.PathLike; non-UTF-8 values round-trip through
os.fsencode/os.fsdecode. Diagnostics go to ``logging.getLogger("synaps_scope")``.
"""

from __future__ import annotations

import asyncio
import enum
import os
import subprocess
import threading
import weakref
from asyncio.subprocess import Process
from dataclasses import dataclass, field
from typing import (
    IO,
    Any,
    AsyncIterator,
    Callable,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

from . import _native
from ._errors import (
    CannotWarnError,
    NotInScopeError,
    NotOurScopeError,
    ScopeError,
    ScopeNotFoundError,
    ScopeRequiredError,
    ScopeTimeoutError,
)

__all__ = [
    "DEFAULT_KILL_TIMEOUT",
    "DEFAULT_PROBE_TIMEOUT",
    "EXEC_FAILED_STATUS",
    "CannotWarn",
    "CannotWarnError",
    "CompletedProcess",
    "NotInScopeError",
    "NotOurScopeError",
    "OomdWarning",
    "OomdWatch",
    "Popen",
    "Pressure",
    "PressureLine",
    "ScopeError",
    "ScopeHandle",
    "ScopeLauncher",
    "ScopeNotFoundError",
    "ScopePressure",
    "ScopeRequiredError",
    "ScopeEnding",
    "ScopeStats",
    "ScopeTimeoutError",
    "ScopedProcess",
    "Wrapped",
    "Diagnosis",
    "Limits",
    "Unenforced",
    "Verdict",
    "check_limits",
    "create_subprocess_exec",
    "diagnose",
    "doctor",
    "flush_warnings",
    "launcher_for_env",
    "launcher_for_env_async",
    "resolve_program",
    "run",
]

__version__: str = _native.__version__

#: How long a launcher request may probe by default, in seconds.
DEFAULT_PROBE_TIMEOUT: float = _native.DEFAULT_PROBE_TIMEOUT

#: How long a kill, or a wait for a scope to empty, may take by default, in seconds.
DEFAULT_KILL_TIMEOUT: float = _native.DEFAULT_KILL_TIMEOUT

#: The exit status of a scoped child whose scope could not be made in ``process_scopes =
#: required`` mode: the command did not run (launcher program ``synaps-scope-exec`` only).
EXEC_FAILED_STATUS: int = _native.EXEC_FAILED_STATUS

StrOrBytesPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: An environment: str or bytes keys and values (None means ``os.environ``).
Env = Union[Mapping[str, str], Mapping[bytes, bytes]]
_Pairs = List[Tuple[bytes, bytes]]
#: A scope's resource limits: systemd's property names and values in its own syntax,
#: ``{"MemoryMax": "2G", "CPUQuota": "200%", "TasksMax": 64}``.
Limits = Mapping[str, Union[str, int]]


class Unenforced(NamedTuple):
    """A limit that will not be enforced: the launch goes on without it (with a warning), unless
    ``process_scopes = required`` refuses it."""

    property: str
    why: str
    #: Whether it still reaches the manager, which records it without applying it.
    passed: bool


def _limit_pairs(limits: Optional[Limits]) -> List[Tuple[str, str]]:
    if limits is None:
        return []
    if not isinstance(limits, Mapping):
        raise TypeError(f"limits must be a mapping of names to values, not {type(limits).__name__}")
    pairs = []
    for name, value in limits.items():
        if not isinstance(name, str):
            raise TypeError(f"a limit's name must be a str, not {type(name).__name__}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(f"the value of {name} must be a str or an int, not {type(value).__name__}")
        pairs.append((name, str(value)))
    return pairs


def check_limits(limits: Limits) -> None:
    """Checks ``limits`` as every launch does, before anything runs: raises ValueError for a
    name that is not one a launch may set (``MemoryMax``, ``MemoryHigh``, ``MemorySwapMax``,
    ``CPUWeight``, ``CPUQuota``, ``TasksMax``, ``IOWeight``) or a value that is not one for it."""
    _native.check_limits(_limit_pairs(limits))


def _fsencode(value: object, what: str) -> bytes:
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.fsencode(value)
    raise TypeError(f"{what} must be str, bytes or os.PathLike, not {type(value).__name__}")


def _env_pairs(env: Optional[Env]) -> _Pairs:
    if env is None:
        return list(os.environb.items())
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping, not {type(env).__name__}")
    return [(_fsencode(k, "an environment key"), _fsencode(v, "an environment value")) for k, v in env.items()]


def _argv_bytes(argv: Sequence[StrOrBytesPath]) -> List[bytes]:
    if isinstance(argv, (str, bytes, os.PathLike)):
        raise TypeError("argv must be a sequence of arguments, not a single string")
    return [_fsencode(arg, "an argument") for arg in argv]


def _pid(value: object) -> int:
    """A process id as Python hands it over: an int, not a bool (which would mean pid 1). Which
    numbers are pids is the library's one rule (ValueError for the rest)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"pid must be an int, not {type(value).__name__}")
    return value


def _cwd_bytes(cwd: Optional[StrOrBytesPath]) -> Optional[bytes]:
    return None if cwd is None else _fsencode(cwd, "cwd")


@dataclass(frozen=True)
class Wrapped:
    """A command line ready to spawn, and the scope it will run in."""

    #: The argv to spawn (``synaps-scope-exec … -- /abs/program argv0 args…``, or
    #: ``systemd-run … -- /abs/program args…``, or the argv unchanged).
    argv: List[str]
    #: The scope's unit name; None when the program could not be resolved and was left unwrapped,
    #: so that spawning it fails as it would without scopes.
    unit: Optional[str]

    @property
    def argv_bytes(self) -> List[bytes]:
        """The argv as bytes (``os.fsencode`` of each argument)."""
        return [os.fsencode(arg) for arg in self.argv]


class ScopeLauncher:
    """Turns ``program args…`` into an argv that runs it in a new scope: through the project's
    launcher program ``synaps-scope-exec`` (which keeps ``argv[0]``), or ``systemd-run``.

    Made by :func:`launcher_for_env` after a successful probe. After that, a failure of the
    wrapped launch is an error to report, never a reason to run the command again directly: it
    may already have run.
    """

    __slots__ = ("_native",)

    def __init__(self, native: _native.ScopeLauncher) -> None:
        self._native = native

    @property
    def kind(self) -> str:
        """``"tool"`` or ``"daemon"``."""
        return self._native.kind

    @property
    def slice(self) -> Optional[str]:
        """The slice passed as ``--slice``, if any."""
        return self._native.slice

    @property
    def required(self) -> bool:
        """Whether ``process_scopes = required`` was in force: a launch this launcher cannot
        scope fails rather than running directly."""
        return self._native.required

    @property
    def wrapper(self) -> str:
        """``"synaps-scope-exec"`` (the project's launcher program) or ``"systemd-run"``."""
        return self._native.wrapper

    @property
    def wrapper_program(self) -> str:
        """The absolute path of the wrapper: the first element of every wrapped argv."""
        return os.fsdecode(self._native.wrapper_program)

    @property
    def systemd_version(self) -> Optional[int]:
        """The major version of the systemd-run in use (None with the launcher program, or when
        unknown)."""
        return self._native.systemd_version

    @property
    def systemd_run(self) -> Optional[str]:
        """The absolute path of the systemd-run in use (None with the launcher program)."""
        path = self._native.systemd_run
        return None if path is None else os.fsdecode(path)

    def wrap(
        self,
        argv: Sequence[StrOrBytesPath],
        env: Optional[Env] = None,
        cwd: Optional[StrOrBytesPath] = None,
        *,
        executable: Optional[StrOrBytesPath] = None,
    ) -> Wrapped:
        """Rewrites ``argv`` to run in a new scope. ``env`` (None: ``os.environ``) and ``cwd``
        (None: this process's) are the child's: the program is resolved with them first. With
        ``executable`` (as :class:`subprocess.Popen` takes it), that program runs and ``argv[0]``
        is only what it sees, e.g. ``-bash`` for a login shell; systemd-run cannot pass an
        ``argv[0]``, so there the program sees its own path."""
        program = None if executable is None else _fsencode(executable, "executable")
        wrapped = self._native.wrap(_argv_bytes(argv), _env_pairs(env), _cwd_bytes(cwd), program)
        return Wrapped([os.fsdecode(arg) for arg in wrapped.argv], wrapped.unit)

    def wrap_shell(
        self,
        args: Union[StrOrBytesPath, Sequence[StrOrBytesPath]],
        env: Optional[Env] = None,
        cwd: Optional[StrOrBytesPath] = None,
        *,
        executable: Optional[StrOrBytesPath] = None,
    ) -> Wrapped:
        """A shell command in a new scope, as ``subprocess`` runs one with ``shell=True``: the
        shell (``executable``, or ``/bin/sh``) runs ``-c`` with ``args`` (a string, or a sequence
        whose first item is the command and the others ``$0``, ``$1``…)."""
        words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        shell = None if executable is None else _fsencode(executable, "executable")
        wrapped = self._native.wrap_shell(_argv_bytes(words), _env_pairs(env), _cwd_bytes(cwd), shell)
        return Wrapped([os.fsdecode(arg) for arg in wrapped.argv], wrapped.unit)

    def with_limits(self, limits: Limits) -> ScopeLauncher:
        """This launcher with ``limits`` for the scope of each launch it wraps, e.g.
        ``{"MemoryMax": "2G", "CPUQuota": "200%"}``. A limit that will not be enforced (the user
        manager was not given its cgroup controller, or the systemd-run in use cannot pass the
        value) is logged as a warning and listed in :attr:`unenforced`; in ``required`` mode it
        raises :class:`ScopeRequiredError` instead. Raises ValueError for a bad name or value.
        Does not block."""
        return ScopeLauncher(self._native.with_limits(_limit_pairs(limits)))

    @property
    def limits(self) -> Dict[str, str]:
        """The limits each launch gives its scope."""
        return dict(self._native.limits)

    @property
    def unenforced(self) -> List[Unenforced]:
        """The limits that will not be enforced, and why."""
        return [Unenforced(*u) for u in self._native.unenforced]

    def __repr__(self) -> str:
        return repr(self._native)


def launcher_for_env(
    env: Optional[Env] = None,
    kind: str = "tool",
    *,
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
    limits: Optional[Limits] = None,
) -> Optional[ScopeLauncher]:
    """A fresh, bounded availability check for a launch of ``kind`` (``"tool"`` or ``"daemon"``)
    with the child's environment ``env`` (None: ``os.environ``). Returns a launcher, or None to
    launch directly. Blocks up to ``probe_timeout`` seconds with the GIL released; from asyncio,
    use :func:`launcher_for_env_async`. Raises :class:`ScopeRequiredError` only in
    ``process_scopes = required`` mode. With ``limits``, the launcher is
    :meth:`ScopeLauncher.with_limits` of them (checked before the probe)."""
    _check_request(kind, probe_timeout)
    pairs = _limit_pairs(limits)
    if pairs:
        _native.check_limits(pairs)
    native = _native.launcher_for_env(_env_pairs(env), kind, float(probe_timeout))
    if native is not None and pairs:
        native = native.with_limits(pairs)
    return None if native is None else ScopeLauncher(native)


def _check_request(kind: object, probe_timeout: object) -> None:
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, not {type(kind).__name__}")
    if isinstance(probe_timeout, bool) or not isinstance(probe_timeout, (int, float)):
        raise TypeError(f"probe_timeout must be a number of seconds, not {type(probe_timeout).__name__}")


async def launcher_for_env_async(
    env: Optional[Env] = None,
    kind: str = "tool",
    *,
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
    limits: Optional[Limits] = None,
) -> Optional[ScopeLauncher]:
    """:func:`launcher_for_env` on a thread of its own: never blocks the loop, and never waits
    for a pool's free worker, so every request answers within its own ``probe_timeout``. The
    probe's thread never takes the GIL: it wakes the loop through a descriptor, and the loop's
    own thread takes the answer, so probes that answer together never stall the loop."""
    _check_request(kind, probe_timeout)
    pairs = _limit_pairs(limits)
    if pairs:
        _native.check_limits(pairs)
    pending = _native.begin_launcher_for_env(_env_pairs(env), kind, float(probe_timeout))
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(pending.fileno(), _settle_once, ready)
    try:
        await ready
    finally:
        loop.remove_reader(pending.fileno())
    native = pending.result()
    if native is not None and pairs:
        native = native.with_limits(pairs)
    return None if native is None else ScopeLauncher(native)


def _settle_once(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def flush_warnings(timeout: float = DEFAULT_PROBE_TIMEOUT) -> bool:
    """For a program about to exit: waits at most ``timeout`` seconds for the background slice
    checks still running, so that their warnings reach ``logging``, then logs a WARNING for each
    check that got no answer. True when every check had finished. A short script that launches a
    command and exits calls it last; a long-running host need not."""
    return _native.flush_warnings(float(timeout))


class Verdict(enum.IntEnum):
    """What :func:`diagnose` concludes of every kind; its value is ``synaps-scope doctor``'s exit
    status."""

    #: Every kind would launch in scopes.
    SCOPED = 0
    #: Some kind would launch directly, not in a scope.
    DIRECT = 1
    #: The environment given is one no process can hold (bad input).
    BAD_INPUT = 2
    #: ``required`` mode would refuse some kind's launches.
    REFUSED = 3

    @property
    def words(self) -> str:
        """The verdict for a person, as the report's last line says it."""
        return _VERDICT_WORDS[self.value]


_VERDICT_WORDS = {code: words for code, _name, words in _native.verdicts()}


class Diagnosis(NamedTuple):
    """What :func:`diagnose` found: the report for a person, and its verdict."""

    report: str
    verdict: Verdict


def diagnose(env: Optional[Env] = None, timeout: float = DEFAULT_PROBE_TIMEOUT) -> Diagnosis:
    """The report ``synaps-scope doctor`` prints and its verdict: which launcher program this
    module uses and how it was found, the user manager, the configuration, and whether launches of
    each kind would run in scopes, and why not. Runs the same checks a launch runs, each bounded by
    ``timeout`` seconds, with the GIL released. ``python -m synaps_scope doctor`` prints it."""
    report, verdict = _native.diagnose(_env_pairs(env), float(timeout))
    return Diagnosis(report, Verdict(verdict))


def doctor(env: Optional[Env] = None, timeout: float = DEFAULT_PROBE_TIMEOUT) -> str:
    """The report of :func:`diagnose`, without its verdict."""
    return diagnose(env, timeout).report


def resolve_program(
    program: StrOrBytesPath,
    env: Optional[Env] = None,
    cwd: Optional[StrOrBytesPath] = None,
) -> str:
    """The absolute path execvp in a child with ``env`` and ``cwd`` would run for ``program``.
    Raises FileNotFoundError when there is none."""
    path = _native.resolve(_fsencode(program, "program"), _env_pairs(env), _cwd_bytes(cwd))
    return os.fsdecode(path)


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
        is there and its signal is heard but has not come, waits for it no longer than oomd takes
        to send it; for an oomd kill no signal named, the rule is asked of the user and system
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


def _scoped_args(args: Any, kwargs: Dict[str, Any], launcher: Optional[ScopeLauncher]) -> Tuple[Any, Optional[str]]:
    """The args to spawn with ``launcher`` (unchanged when None), and the unit. A shell command
    becomes ``/bin/sh -c …`` (``executable=`` is then the shell); otherwise ``executable=`` is the
    program that runs with ``args[0]`` as its ``argv[0]``. Both keyword arguments are consumed."""
    if launcher is None:
        return args, None
    if kwargs.get("shell"):
        kwargs["shell"] = False
        shell = kwargs.pop("executable", None)
        wrapped = launcher.wrap_shell(args, kwargs.get("env"), kwargs.get("cwd"), executable=shell)
        return wrapped.argv, wrapped.unit
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    executable = kwargs.pop("executable", None)
    wrapped = launcher.wrap(argv, kwargs.get("env"), kwargs.get("cwd"), executable=executable)
    return wrapped.argv, wrapped.unit


_USER_SWITCHES = ("user", "group", "extra_groups")


def _unless_user_switch(launcher: Optional[ScopeLauncher], kwargs: Dict[str, Any]) -> Optional[ScopeLauncher]:
    """``launcher``, or None for a child that switches user (``user=``, ``group=``,
    ``extra_groups=``), by the library's rule: such a child runs directly, with one WARNING per
    process saying why; in ``required`` mode it is refused with :class:`ScopeRequiredError` before
    anything is spawned."""
    switches = [f"{name}={kwargs[name]!r}" for name in _USER_SWITCHES if kwargs.get(name) is not None]
    if launcher is None or not switches:
        return launcher
    launcher._native.user_switch(", ".join(switches))
    return None


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """A :class:`subprocess.Popen` whose child runs in its own scope when one can be had
    (``scope_unit`` names it; None for a direct launch). Takes every Popen argument; ``shell=True``
    runs ``/bin/sh -c`` in the scope. The probe blocks up to ``probe_timeout`` seconds.
    ``limits`` are the scope's resource limits (:meth:`ScopeLauncher.with_limits`)."""

    scope_unit: Optional[str]
    #: What was spawned in the scope's name (``synaps-scope-exec … -- program args…``); None for a
    #: direct launch. ``args`` stays what the caller passed, scoped or not, as in its messages
    #: (:class:`subprocess.TimeoutExpired`, :class:`subprocess.CalledProcessError`).
    scope_argv: Optional[List[Any]]

    def __init__(
        self,
        args: Any,
        *,
        kind: str = "tool",
        probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
        limits: Optional[Limits] = None,
        **kwargs: Any,
    ) -> None:
        launcher = launcher_for_env(kwargs.get("env"), kind, probe_timeout=probe_timeout, limits=limits)
        launcher = _unless_user_switch(launcher, kwargs)
        spawn_args, self.scope_unit = _scoped_args(args, kwargs, launcher)
        self.scope_argv = list(spawn_args) if self.scope_unit is not None else None
        # The manager kill_scope asks once the child is gone: the one of the launch's
        # environment, as it was then.
        env = kwargs.get("env")
        self._scope_env: Env = dict(env) if env is not None else dict(os.environ)
        super().__init__(spawn_args, **kwargs)
        self.args = args

    def kill_scope(self, timeout: float = DEFAULT_KILL_TIMEOUT) -> None:
        """Kills every process of the child's scope (descendants that left its process group
        included), also after the child was waited for: what it left running there goes too. For a
        direct launch, kills the child itself while it runs. Raises :class:`ScopeError` where the
        scope's processes could not be killed (the manager cannot say where the scope is, or they
        outlived ``timeout``); a scope the manager no longer has holds nothing to kill."""
        if self.scope_unit is None:
            if self.returncode is None:
                self.kill()
            return
        if self.returncode is None:
            try:
                # The child itself names its scope while it runs (its cgroup, by its pid).
                ScopeHandle.from_pid(self.scope_unit, self.pid).kill(timeout)
                return
            except ScopeError:
                # Not yet in its scope (the launcher program is still asking for it), or just
                # ended: kill the child, then what its scope still holds.
                self.kill()
        # Reaped, or it left: the scope is found by its unit, whose name this launch made (random,
        # its own); the manager collects a scope once it is empty, so one it no longer has is done.
        try:
            handle = ScopeHandle.from_manager(self.scope_unit, self._scope_env, timeout)
        except ScopeNotFoundError:
            return
        handle.kill(timeout)


class CompletedProcess(subprocess.CompletedProcess):  # type: ignore[type-arg]
    """:class:`subprocess.CompletedProcess` with the scope the command ran in. ``args`` is what
    the caller passed; ``scope_argv`` what was spawned in the scope's name (None: direct)."""

    def __init__(
        self, args: Any, returncode: int, stdout: Any, stderr: Any, scope_unit: Optional[str], scope_argv: Optional[List[Any]] = None
    ) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.scope_unit = scope_unit
        self.scope_argv = scope_argv


def run(
    args: Any,
    *,
    kind: str = "tool",
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
    limits: Optional[Limits] = None,
    input: Any = None,
    capture_output: bool = False,
    timeout: Optional[float] = None,
    check: bool = False,
    **kwargs: Any,
) -> CompletedProcess:
    """Like :func:`subprocess.run`, in a scope: on a timeout the whole scope is killed, not just
    the child, so its descendants go too."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, kind=kind, probe_timeout=probe_timeout, limits=limits, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill_scope()
            process.wait()
            raise
        except BaseException:
            process.kill_scope()
            raise
        returncode = process.poll()
        assert returncode is not None
    if check and returncode:
        raise subprocess.CalledProcessError(returncode, process.args, output=stdout, stderr=stderr)
    return CompletedProcess(process.args, returncode, stdout, stderr, process.scope_unit, process.scope_argv)


#: One spawn at a time on each event loop (see :func:`create_subprocess_exec`).
_spawn_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


class ScopedProcess(Process):
    """An :class:`asyncio.subprocess.Process` with the scope it runs in (None: direct), and what
    was spawned in the scope's name (``scope_argv``; None: direct)."""

    scope_unit: Optional[str]
    scope_argv: Optional[List[Any]]


async def create_subprocess_exec(
    program: StrOrBytesPath,
    *args: StrOrBytesPath,
    kind: str = "tool",
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
    limits: Optional[Limits] = None,
    stdin: Union[int, IO[Any], None] = None,
    stdout: Union[int, IO[Any], None] = None,
    stderr: Union[int, IO[Any], None] = None,
    limit: int = 2**16,
    **kwargs: Any,
) -> ScopedProcess:
    """Like :func:`asyncio.create_subprocess_exec`, in a scope. The probe runs on a thread of its
    own, so the event loop never blocks on it."""
    launcher = await launcher_for_env_async(kwargs.get("env"), kind, probe_timeout=probe_timeout, limits=limits)
    launcher = _unless_user_switch(launcher, kwargs)
    argv, unit = _scoped_args([program, *args], kwargs, launcher)
    # asyncio forks and execs on the loop's own thread. Probes that answer together would wake
    # many launches in one iteration of the loop, spawning back to back and stalling it; one spawn
    # at a time, each followed by a yield to the loop, spreads them out, one per iteration.
    spawning = _spawn_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with spawning:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=stdin, stdout=stdout, stderr=stderr, limit=limit, **kwargs
        )
        await asyncio.sleep(0)
    # asyncio makes the Process itself and takes no class to make; ScopedProcess adds no state
    # but the unit, so the instance becomes one in place.
    process.__class__ = ScopedProcess
    scoped = cast(ScopedProcess, process)
    scoped.scope_unit = unit
    scoped.scope_argv = list(argv) if unit is not None else None
    return scoped
