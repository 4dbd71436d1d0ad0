"""What every part of synaps_scope takes: the default bounds, the types of its arguments, and
their conversion to what the native module takes (bytes, pairs, checked ints). Imports no other
module of the package but the native one."""

from __future__ import annotations

import os
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from . import _native


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
