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

# The package only gathers the public names; each lives in the private module of its concept:
#   _args        defaults, argument types and their conversion (imports only _native)
#   _errors      the exceptions
#   _readings    the values handles and watches report
#   _launcher    the probe, ScopeLauncher, limits, program resolution
#   _doctor      diagnose, doctor, Verdict
#   _handle      ScopeHandle and OomdWatch
#   _subprocess  Popen, run, create_subprocess_exec
# Each imports only modules listed above it.

from . import _native
from ._args import (
    DEFAULT_KILL_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    EXEC_FAILED_STATUS,
    Env as Env,
    Limits,
    StrOrBytesPath as StrOrBytesPath,
)
from ._doctor import Diagnosis, Verdict, diagnose, doctor
from ._errors import (
    CannotWarnError,
    NotInScopeError,
    NotOurScopeError,
    ScopeError,
    ScopeNotFoundError,
    ScopeRequiredError,
    ScopeTimeoutError,
)
from ._handle import OomdWatch, ScopeHandle
from ._launcher import (
    ScopeLauncher,
    Unenforced,
    Wrapped,
    check_limits,
    flush_warnings,
    launcher_for_env,
    launcher_for_env_async,
    resolve_program,
)
from ._readings import CannotWarn, OomdWarning, Pressure, PressureLine, ScopeEnding, ScopePressure, ScopeStats
from ._subprocess import CompletedProcess, Popen, ScopedProcess, create_subprocess_exec, run

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
