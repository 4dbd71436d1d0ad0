"""The library's warnings reach Python logging: refused slices, slices without limits (R12), checks
the manager did not answer, from any thread."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import synaps_scope
from helpers import config_env, scope_warnings


def test_the_log_level_is_the_logger_s_own(rig: Dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """Python's way to set the level (docs/surfaces.md): the synaps_scope logger's own level."""
    off = {**os.environ, "SYNAPS_PROCESS_SCOPES": "off"}

    def debug_lines() -> List[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "synaps_scope" and r.levelno == logging.DEBUG and "launching directly" in r.getMessage()
        ]

    caplog.set_level(logging.WARNING, logger="synaps_scope")
    assert synaps_scope.launcher_for_env(off) is None
    assert debug_lines() == []
    caplog.set_level(logging.DEBUG, logger="synaps_scope")
    assert synaps_scope.launcher_for_env(off) is None
    assert len(debug_lines()) == 1, debug_lines()


def test_a_refused_slice_warns_once_through_logging(
    rig: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    env = config_env(tmp_path, "tool_scope_slice = pyrefused.service\n")
    for _ in range(5):
        assert synaps_scope.launcher_for_env(env) is None
    warnings = scope_warnings(caplog, "pyrefused.service")
    assert len(warnings) == 1, warnings
    assert "is not a slice" in warnings[0]


SLOW_MANAGER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "slow_manager.py"


@contextlib.contextmanager
def slow_slice_checks(tmp_path: Path, first_only: bool) -> Iterator[str]:
    """A stand-in for the rig manager's private socket that forwards everything at once but the
    slice check's questions, held 5 s (only the first, with ``first_only``): a manager too busy to
    answer a slice check within its bound. Yields the runtime directory to use."""
    runtime = tmp_path / "slow-runtime"
    (runtime / "systemd").mkdir(parents=True)
    args = [
        sys.executable, str(SLOW_MANAGER),
        "--listen", str(runtime / "systemd" / "private"),
        "--to", os.path.join(os.environ["XDG_RUNTIME_DIR"], "systemd", "private"),
        "--needle", "org.freedesktop.systemd1.Slice", "--delay", "5",
    ] + (["--first-only"] if first_only else [])
    proxy = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None and proxy.stdout.readline().strip() == "ready"
        yield str(runtime)
    finally:
        proxy.kill()
        proxy.wait()


def slice_env_at(tmp_path: Path, slice: str, runtime: str) -> Dict[str, str]:
    """An environment whose tool slice is `slice`, reaching the manager through `runtime`. Where
    that is a stand-in, a relay in front of the manager, systemd-run (which would lose the launch
    behind one) is never used, so the launcher program is."""
    return {
        **config_env(tmp_path, f"tool_scope_slice = {slice}\n"),
        "XDG_RUNTIME_DIR": runtime,
        "SYNAPS_SCOPE_LAUNCHER": "synaps-scope-exec",
    }


def test_a_slice_check_the_busy_manager_did_not_answer_asks_again_on_its_own_and_warns_once(
    rig: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    with slow_slice_checks(tmp_path, first_only=True) as runtime:
        env = slice_env_at(tmp_path, "pybusy.slice", runtime)
        started = time.monotonic()
        assert synaps_scope.launcher_for_env(env, probe_timeout=0.3) is not None
        assert time.monotonic() - started < 0.4, "a request waited for the check"
        # No further request: the check asks again by itself after its pause.
        deadline = time.monotonic() + 10
        while not scope_warnings(caplog, "pybusy.slice"):
            assert time.monotonic() < deadline, "the warning never came"
            time.sleep(0.05)
        for _ in range(5):
            assert synaps_scope.launcher_for_env(env, probe_timeout=0.3) is not None
        time.sleep(1.5)
    warnings = scope_warnings(caplog, "pybusy.slice")
    assert len(warnings) == 1 and "slice pybusy.slice sets no limits" in warnings[0], warnings


def test_flush_warnings_reports_a_slice_check_without_an_answer(
    rig: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    with slow_slice_checks(tmp_path, first_only=False) as runtime:
        env = slice_env_at(tmp_path, "pyflush.slice", runtime)
        assert synaps_scope.launcher_for_env(env, probe_timeout=0.5) is not None
        started = time.monotonic()
        assert synaps_scope.flush_warnings(0.3) is False
        assert time.monotonic() - started < 0.5
    warnings = scope_warnings(caplog, "pyflush.slice")
    assert len(warnings) == 1, warnings
    assert "could not check whether slice pyflush.slice sets any limits" in warnings[0], warnings
    with pytest.raises(ValueError):
        synaps_scope.flush_warnings(-1)


def test_a_slice_without_limits_warns_from_the_background_thread(
    rig: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    env = config_env(tmp_path, "tool_scope_slice = pyundefined.slice\n")
    assert synaps_scope.launcher_for_env(env) is not None
    deadline = time.monotonic() + 10
    while not scope_warnings(caplog, "pyundefined.slice") and time.monotonic() < deadline:
        time.sleep(0.01)
    warnings = scope_warnings(caplog, "pyundefined.slice")
    assert len(warnings) == 1 and "sets no limits" in warnings[0], warnings


CONCURRENT_HOST = """
import logging, os, sys, threading, time
import synaps_scope

slice_name, undefined, plain = sys.argv[1:4]
warned = []

class Collect(logging.Handler):
    def emit(self, record):
        if record.levelno == logging.WARNING and f"slice {slice_name} sets no limits" in record.getMessage():
            warned.append(record.getMessage())

logging.getLogger("synaps_scope").addHandler(Collect())
logging.getLogger("synaps_scope").setLevel(logging.DEBUG)

def launch_plain():
    for _ in range(5):
        assert synaps_scope.launcher_for_env({**os.environ, "SYNAPS_CONFIG": plain}) is not None

threads = [threading.Thread(target=launch_plain) for _ in range(6)]
for t in threads:
    t.start()
assert synaps_scope.launcher_for_env({**os.environ, "SYNAPS_CONFIG": undefined}) is not None
for t in threads:
    t.join()
deadline = time.monotonic() + 10
while not warned and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.3)
print(len(warned))
"""


def test_a_slice_warning_reaches_python_logging_once_while_other_threads_launch(
    rig: Dict[str, str], tmp_path: Path
) -> None:
    """In each of 20 fresh interpreters (tracing decides a callsite's interest once per process):
    six threads launch with a config naming no slice while one request names an undefined one;
    its warning reaches Python logging exactly once."""
    plain = tmp_path / "plain.config"
    plain.write_text("")
    counts = []
    for run in range(20):
        slice_name = f"pyconcurrent{run}.slice"
        undefined = tmp_path / f"{run}.config"
        undefined.write_text(f"tool_scope_slice = {slice_name}\n")
        out = subprocess.run(
            [sys.executable, "-c", CONCURRENT_HOST, slice_name, str(undefined), str(plain)],
            capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        counts.append(int(out.stdout.strip().splitlines()[-1]))
    assert counts == [1] * 20, counts
