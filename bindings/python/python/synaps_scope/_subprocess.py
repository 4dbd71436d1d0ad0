"""The ``subprocess`` and ``asyncio`` look-alikes that launch in a scope: :class:`Popen`,
:func:`run` and :class:`CompletedProcess`, :func:`create_subprocess_exec` and
:class:`ScopedProcess`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import weakref
from asyncio.subprocess import Process
from typing import IO, Any, Dict, List, Optional, Tuple, Union, cast

from ._args import DEFAULT_KILL_TIMEOUT, DEFAULT_PROBE_TIMEOUT, Env, Limits, StrOrBytesPath
from ._errors import ScopeError, ScopeNotFoundError
from ._handle import ScopeHandle
from ._launcher import ScopeLauncher, launcher_for_env, launcher_for_env_async


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
