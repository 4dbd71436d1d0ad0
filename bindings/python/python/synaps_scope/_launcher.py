"""Launchers: the bounded probe that decides whether a launch runs in a scope
(:func:`launcher_for_env`, :func:`launcher_for_env_async`), the :class:`ScopeLauncher` that wraps
a command line for one, limits, program resolution and the flush of the background checks'
warnings."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

from . import _native
from ._args import (
    DEFAULT_PROBE_TIMEOUT,
    Env,
    Limits,
    StrOrBytesPath,
    _argv_bytes,
    _cwd_bytes,
    _env_pairs,
    _fsencode,
    _limit_pairs,
)


class Unenforced(NamedTuple):
    """A limit that will not be enforced: the launch goes on without it (with a warning), unless
    ``process_scopes = required`` refuses it."""

    property: str
    why: str
    #: Whether it still reaches the manager, which records it without applying it.
    passed: bool


def check_limits(limits: Limits) -> None:
    """Checks ``limits`` as every launch does, before anything runs: raises ValueError for a
    name that is not one a launch may set (``MemoryMax``, ``MemoryHigh``, ``MemorySwapMax``,
    ``CPUWeight``, ``CPUQuota``, ``TasksMax``, ``IOWeight``) or a value that is not one for it."""
    _native.check_limits(_limit_pairs(limits))


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


def resolve_program(
    program: StrOrBytesPath,
    env: Optional[Env] = None,
    cwd: Optional[StrOrBytesPath] = None,
) -> str:
    """The absolute path execvp in a child with ``env`` and ``cwd`` would run for ``program``.
    Raises FileNotFoundError when there is none."""
    path = _native.resolve(_fsencode(program, "program"), _env_pairs(env), _cwd_bytes(cwd))
    return os.fsdecode(path)
