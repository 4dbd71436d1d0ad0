"""The doctor: :func:`diagnose` and :func:`doctor`, the report ``synaps-scope doctor`` prints, and
its :class:`Verdict`."""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional

from . import _native
from ._args import DEFAULT_PROBE_TIMEOUT, Env, _env_pairs


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
