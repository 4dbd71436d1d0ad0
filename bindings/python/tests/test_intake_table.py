"""tests/cases/bad_input.json from Python: every bad value Python can hand over is refused as bad
input (ValueError, the class every surface gives it) by each call that takes it. The Rust, command
line, C and Node surfaces run the same cases."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Callable, Dict, List, Tuple

import pytest

import synaps_scope

CASES: List[Dict[str, Any]] = json.loads(
    (pathlib.Path(__file__).resolve().parents[3] / "tests" / "cases" / "bad_input.json").read_text()
)["cases"]


def calls(case: Dict[str, Any]) -> List[Tuple[str, Callable[[], object]]]:
    """Each call of the public API that takes the case's value, or none when Python cannot hand
    it over (a C envp entry, a number given for a kind or shell words, a bound in ms)."""
    if "env" in case:
        env = {key.encode(): value.encode() for key, value in case["env"]}
        return [
            ("launcher_for_env", lambda: synaps_scope.launcher_for_env(env)),
            ("resolve_program", lambda: synaps_scope.resolve_program("sh", env)),
            ("diagnose", lambda: synaps_scope.diagnose(env)),
        ]
    if "bound_s" in case:
        seconds = case["bound_s"]
        return [
            ("launcher_for_env", lambda: synaps_scope.launcher_for_env(probe_timeout=seconds)),
            ("flush_warnings", lambda: synaps_scope.flush_warnings(seconds)),
            ("diagnose", lambda: synaps_scope.diagnose(timeout=seconds)),
        ]
    if "pid" in case:
        pid = case["pid"]
        unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope"
        return [
            ("ScopeHandle.of_process", lambda: synaps_scope.ScopeHandle.of_process(pid)),
            ("ScopeHandle.from_pid", lambda: synaps_scope.ScopeHandle.from_pid(unit, pid)),
        ]
    if "kind" in case:
        kind = case["kind"]
        return [("launcher_for_env", lambda: synaps_scope.launcher_for_env(kind=kind))]
    if "limit" in case:
        limits = {case["limit"][0]: case["limit"][1]}
        return [
            ("check_limits", lambda: synaps_scope.check_limits(limits)),
            ("launcher_for_env", lambda: synaps_scope.launcher_for_env(limits=limits)),
            ("Popen", lambda: synaps_scope.Popen(["true"], limits=limits)),
        ]
    assert any(key in case for key in ("entry", "bound_ms", "kind_code", "shell_words_code")), case
    return []


def class_of(error: BaseException) -> str:
    """The class of a failure, as Python's one map (py_error) gives it."""
    if isinstance(error, synaps_scope.ScopeError):
        return "library"
    if isinstance(error, ValueError):
        return "invalid-input"
    return type(error).__name__


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_a_bad_value_is_bad_input_on_every_call_that_takes_it(case: Dict[str, Any]) -> None:
    for name, call in calls(case):
        with pytest.raises(Exception) as raised:
            call()
        assert class_of(raised.value) == case["class"], f"{name}: {raised.value!r}"


def test_python_runs_most_of_the_table() -> None:
    assert sum(len(calls(case)) for case in CASES) >= 56
