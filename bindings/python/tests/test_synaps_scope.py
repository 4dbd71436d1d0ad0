"""synaps_scope from Python, against real systemd user managers (the rig's, and a test's own)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Awaitable, Dict, Iterator, List, Tuple, TypeVar

import pytest

import synaps_scope
from conftest import Manager

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


def test_a_popen_child_runs_in_its_own_scope(rig: Dict[str, str]) -> None:
    with synaps_scope.Popen(["sh", "-c", f"{CGROUP_OF_SELF}; echo $$"], stdout=subprocess.PIPE, text=True) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    unit = proc.scope_unit
    assert unit is not None and unit.startswith("synaps-tool-") and unit.endswith(".scope")
    cgroup, pid = out.splitlines()
    assert cgroup.endswith(f"/app.slice/{unit}")
    assert int(pid) == proc.pid, "the pid Popen knows is the command's pid"


def test_the_native_module_exports_no_c_abi_symbol() -> None:
    """The extension links the core crate alone: the C ABI's scope_* functions are not in it."""
    import synaps_scope._native as native_module

    native = native_module.__file__
    assert native is not None
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", native], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "PyInit__native" in symbols
    assert [s for s in symbols if s.startswith("scope_")] == []


def test_the_rig_sets_no_ld_library_path_and_children_load_the_host_s_libc(rig: Dict[str, str]) -> None:
    assert "LD_LIBRARY_PATH" not in os.environ
    with synaps_scope.Popen(["sh", "-c", "env; echo ---; cat /proc/$$/maps"], stdout=subprocess.PIPE, text=True) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and proc.scope_unit is not None
    child_env, maps = out.split("---\n", 1)
    assert not [line for line in child_env.splitlines() if line.startswith("LD_LIBRARY_PATH=")]
    loaded = {line.split()[5] for line in maps.splitlines() if len(line.split()) > 5 and "libc.so" in line}
    assert loaded and all(f.startswith("/usr/lib/") for f in loaded), loaded


def test_launcher_reports_what_it_uses(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env(kind="daemon")
    assert launcher is not None
    assert (launcher.kind, launcher.slice) == ("daemon", None)
    asked = os.environ.get("SYNAPS_SCOPE_LAUNCHER", "auto")
    if asked != "auto":
        assert launcher.wrapper == asked
    wrapped = launcher.wrap(["true"])
    assert wrapped.unit is not None and wrapped.unit.startswith("synaps-daemon-")
    assert wrapped.argv[0] == launcher.wrapper_program and os.path.isabs(launcher.wrapper_program)
    if launcher.wrapper == "systemd-run":
        assert launcher.systemd_run == launcher.wrapper_program
        assert launcher.systemd_version == int(rig["SYNAPS_RIG_SYSTEMD_VERSION"])
        assert ("--expand-environment=no" in wrapped.argv) == (launcher.systemd_version >= 254)
    else:
        assert launcher.wrapper == "synaps-scope-exec"
        assert (launcher.systemd_run, launcher.systemd_version) == (None, None)
        assert "--expand-environment=no" not in wrapped.argv


def test_a_login_shell_keeps_its_dash_argv0(rig: Dict[str, str]) -> None:
    out = synaps_scope.run(["-sh", "-c", 'printf %s "$0"'], executable="sh", capture_output=True, check=True)
    assert out.scope_unit is not None
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    if launcher.wrapper == "synaps-scope-exec":
        assert out.stdout == b"-sh"
    else:
        assert out.stdout.startswith(b"/"), "systemd-run passes the program's path as argv[0]"


def test_non_utf8_arguments_round_trip(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    payload: List[synaps_scope.StrOrBytesPath] = [
        os.fsdecode(b"\xff\xfe"),
        b"\x80raw",
        "${HOME}",
        "",
        "-h",
        "caf\u00e9",
        Path("/x y"),
    ]
    wrapped = launcher.wrap(["sh", "-c", PRINT_ARGS, "sh", *payload])
    expected = [os.fsencode(a) for a in payload]
    assert wrapped.argv_bytes[-len(payload):] == expected
    assert wrapped.argv[-len(payload):] == [os.fsdecode(a) for a in expected]
    out = subprocess.run(wrapped.argv, stdout=subprocess.PIPE, check=True).stdout
    assert out.split(b"\0")[:-1] == expected

    result = synaps_scope.run(["sh", "-c", PRINT_ARGS, "sh", *payload], capture_output=True, check=True)
    assert result.scope_unit is not None
    assert result.stdout.split(b"\0")[:-1] == expected


def test_the_childs_path_picks_the_program(rig: Dict[str, str], tmp_path: Path) -> None:
    for name in ("parent", "child"):
        (tmp_path / name).mkdir()
        program = tmp_path / name / "which-one"
        program.write_text(f"#!/bin/sh\necho {name}\n")
        program.chmod(0o755)
    child_env = {**os.environ, "PATH": f"{tmp_path / 'child'}:/usr/bin:/bin"}
    parent_env = {**os.environ, "PATH": f"{tmp_path / 'parent'}:/usr/bin:/bin"}
    launcher = synaps_scope.launcher_for_env(parent_env)
    assert launcher is not None
    wrapped = launcher.wrap(["which-one"], env=child_env)
    assert str(tmp_path / "child" / "which-one") in wrapped.argv
    assert synaps_scope.resolve_program("which-one", env=child_env) == str(tmp_path / "child" / "which-one")
    with synaps_scope.Popen(["which-one"], env=child_env, stdout=subprocess.PIPE) as proc:
        assert proc.communicate(timeout=30)[0] == b"child\n"
    assert proc.scope_unit is not None

    with pytest.raises(FileNotFoundError):
        synaps_scope.resolve_program("synaps-no-such-program", env=child_env)
    missing = launcher.wrap(["synaps-no-such-program", "x"], env=child_env)
    assert missing == synaps_scope.Wrapped(["synaps-no-such-program", "x"], None)
    with pytest.raises(FileNotFoundError):
        synaps_scope.Popen(["synaps-no-such-program"], env=child_env)


def test_shell_and_cwd_run_in_the_scope(rig: Dict[str, str], tmp_path: Path) -> None:
    result = synaps_scope.run(f"{CGROUP_OF_SELF}; pwd", shell=True, cwd=tmp_path, capture_output=True, text=True)
    cgroup, cwd = result.stdout.splitlines()
    assert result.scope_unit is not None and cgroup.endswith(result.scope_unit)
    assert cwd == str(tmp_path)


def test_no_manager_means_a_direct_launch(rig: Dict[str, str]) -> None:
    env = no_bus_env()
    assert synaps_scope.launcher_for_env(env) is None
    with synaps_scope.Popen(["sh", "-c", CGROUP_OF_SELF], env=env, stdout=subprocess.PIPE, text=True) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.scope_unit is None
    assert ".scope" not in out


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


def test_a_slice_check_the_busy_manager_did_not_answer_asks_again_on_its_own_and_warns_once(
    rig: Dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    with slow_slice_checks(tmp_path, first_only=True) as runtime:
        env = {
            **config_env(tmp_path, "tool_scope_slice = pybusy.slice\n"),
            "XDG_RUNTIME_DIR": runtime,
        }
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
        env = {
            **config_env(tmp_path, "tool_scope_slice = pyflush.slice\n"),
            "XDG_RUNTIME_DIR": runtime,
        }
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


def test_required_raises(rig: Dict[str, str]) -> None:
    env = {**no_bus_env(), "SYNAPS_PROCESS_SCOPES": "required"}
    with pytest.raises(synaps_scope.ScopeRequiredError, match="required") as raised:
        synaps_scope.launcher_for_env(env)
    assert isinstance(raised.value, synaps_scope.ScopeError)
    with pytest.raises(synaps_scope.ScopeRequiredError):
        synaps_scope.Popen(["true"], env=env)


def test_the_asyncio_helper_never_stalls_the_loop(rig: Dict[str, str]) -> None:
    async def launch(i: int) -> str:
        proc = await synaps_scope.create_subprocess_exec("sh", "-c", CGROUP_OF_SELF, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert proc.returncode == 0, i
        assert proc.scope_unit is not None and out.decode().strip().endswith(proc.scope_unit), i
        return proc.scope_unit

    async def main() -> Tuple[List[str], float]:
        return await longest_stall(asyncio.gather(*(launch(i) for i in range(20))))

    units, worst = asyncio.run(main())
    assert len(set(units)) == 20
    assert worst < 0.1, f"the event loop stalled for {worst * 1000:.0f} ms"


def test_the_probe_releases_the_gil(manager: Manager) -> None:
    assert synaps_scope.launcher_for_env(manager.env) is not None
    ticks: List[float] = []
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    manager.signal("STOP")
    worker = threading.Thread(target=count)
    worker.start()
    try:
        started = time.monotonic()
        assert synaps_scope.launcher_for_env(manager.env, probe_timeout=1.0) is None
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        worker.join()
        manager.signal("CONT")
    assert 1.0 <= elapsed < 1.5, elapsed
    during = [t for t in ticks if started <= t <= started + elapsed]
    assert len(during) > 200, f"the Python thread ran only {len(during)} times during the probe"
    assert max(b - a for a, b in zip(during, during[1:])) < 0.1


def test_bounds_too_large_for_the_clock_saturate_instead_of_panicking(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env(probe_timeout=1e19)
    assert launcher is not None
    proc = synaps_scope.Popen(["sleep", "30"], probe_timeout=1e19)
    handle = handle_once_in_scope(proc)
    assert handle.kill(timeout=1e19) == [proc.pid]
    handle.wait_empty(1e19)
    assert proc.wait() != 0


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


def test_a_scope_removed_while_it_is_read_is_empty_not_an_error(rig: Dict[str, str]) -> None:
    """The manager removes a scope's cgroup once its last process dies, also between a read's
    open and its read (ENODEV). A thread reads the scope while it is killed, many times over."""
    for round in range(15):
        proc = synaps_scope.Popen(["sleep", "1000"])
        handle = handle_once_in_scope(proc)
        errors: List[str] = []

        def hammer() -> None:
            end = time.monotonic() + 10
            while os.path.isdir(handle.cgroup) and time.monotonic() < end:
                try:
                    handle.pids()
                    handle.stats()
                except synaps_scope.ScopeError as e:
                    errors.append(str(e))
                    return

        reader = threading.Thread(target=hammer)
        reader.start()
        try:
            assert handle.kill(timeout=5) == [proc.pid], f"round {round}"
        finally:
            reader.join()
            proc.wait()
        assert errors == [], f"round {round}"
        assert handle.pids() == []


def test_another_users_scope_is_refused_with_a_clear_error(rig: Dict[str, str]) -> None:
    """Another user's scope sits in the subtree delegated to that user, so its cgroup is that
    user's: handed to uid 1000 here as delegation hands it (scripts/test-session.sh meets a real
    one). Every route refuses it with a PermissionError naming the owner; given back, it is ours."""
    proc = synaps_scope.Popen(["sleep", "1000"])
    handle = handle_once_in_scope(proc)
    assert proc.scope_unit is not None
    unit = proc.scope_unit
    os.chown(handle.cgroup, 1000, -1)
    try:
        expected = f"{unit} belongs to uid 1000, not to this user (uid 0); refusing it"
        for route in ("from_pid", "of_process", "from_manager"):
            with pytest.raises(synaps_scope.NotOurScopeError, match=re.escape(expected)) as refused:
                if route == "from_pid":
                    synaps_scope.ScopeHandle.from_pid(unit, proc.pid)
                elif route == "of_process":
                    synaps_scope.ScopeHandle.of_process(proc.pid)
                else:
                    synaps_scope.ScopeHandle.from_manager(unit)
            assert isinstance(refused.value, PermissionError)
        assert proc.poll() is None, "nothing in it was touched"
    finally:
        os.chown(handle.cgroup, 0, -1)
    synaps_scope.ScopeHandle.of_process(proc.pid).kill(timeout=5)
    assert proc.wait(timeout=5) == -signal.SIGKILL


def test_the_scope_kill_reaches_an_escaped_descendant(rig: Dict[str, str], tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped"
    script = f"( setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' & ); exec sleep 1000"
    proc = synaps_scope.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.005)
    escaped = int(pidfile.read_text())
    assert proc.scope_unit is not None
    handle = synaps_scope.ScopeHandle.from_pid(proc.scope_unit, escaped)
    assert sorted(handle.pids()) == sorted([proc.pid, escaped])
    stats = handle.stats()
    assert (stats.memory_current is None) == (not os.path.exists(os.path.join(handle.cgroup, "memory.current")))
    os.killpg(proc.pid, 9)
    proc.wait()
    assert Path(f"/proc/{escaped}").exists(), "a process-group kill misses it"
    assert handle.kill(timeout=5) == [escaped]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{escaped}/status").exists():
        if "State:\tZ" in Path(f"/proc/{escaped}/status").read_text():
            break
        time.sleep(0.005)
    assert handle.pids() == []
    with pytest.raises(synaps_scope.NotOurScopeError):
        synaps_scope.ScopeHandle.of_process(os.getpid())
    with pytest.raises(PermissionError):
        synaps_scope.ScopeHandle.from_pid("app.slice", os.getpid())


def test_run_kills_the_whole_scope_on_timeout(rig: Dict[str, str], tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    script = f"sleep 1000 & echo $! > {pidfile}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        synaps_scope.run(["sh", "-c", script], timeout=0.5)
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        status = Path(f"/proc/{grandchild}/status").read_text() if Path(f"/proc/{grandchild}/status").exists() else ""
        if "State:\tZ" in status:
            break
        time.sleep(0.01)
    status_path = Path(f"/proc/{grandchild}/status")
    assert not status_path.exists() or "State:\tZ" in status_path.read_text(), "the grandchild outlived the timeout"


def test_a_child_that_switches_user_runs_directly_with_one_warning(
    rig: Dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13, item 3: a scope of this user's manager cannot hold another user's process."""
    caplog.set_level(logging.WARNING, logger="synaps_scope")
    script = f"id -u; id -g; {CGROUP_OF_SELF}"
    for switch in ({"user": 65534}, {"group": 65534}, {"user": 65534, "extra_groups": [65534]}):
        child = synaps_scope.Popen(["sh", "-c", script], stdout=subprocess.PIPE, cwd="/", **switch)
        out, _ = child.communicate(timeout=10)
        assert child.returncode == 0 and child.scope_unit is None, (child.returncode, out)
        uid, gid, cgroup = out.decode().split()
        assert uid == ("65534" if "user" in switch else "0") and gid == ("65534" if "group" in switch else "0")
        assert "synaps-tool-" not in cgroup, cgroup
    warnings = scope_warnings(caplog, "switches user")
    assert len(warnings) == 1 and "cannot hold another user's process" in warnings[0], warnings

    required = {**os.environ, "SYNAPS_PROCESS_SCOPES": "required"}
    with pytest.raises(synaps_scope.ScopeRequiredError, match="switches user"):
        synaps_scope.Popen(["true"], env=required, user=65534)

    async def in_asyncio() -> Tuple[int, bytes]:
        process = await synaps_scope.create_subprocess_exec(
            "sh", "-c", "id -u", stdout=asyncio.subprocess.PIPE, user=65534, cwd="/"
        )
        out, _ = await process.communicate()
        return await process.wait(), out

    assert asyncio.run(in_asyncio()) == (0, b"65534\n")


def test_a_script_without_a_shebang_fails_scoped_as_it_does_direct(rig: Dict[str, str], tmp_path: Path) -> None:
    """Issue 13, item 14: ENOEXEC from Popen both ways, never a run through /bin/sh."""
    log = tmp_path / "ran"
    bare = tmp_path / "bare"
    bare.write_text(f"echo ran >> '{log}'\n")
    bare.chmod(0o755)
    with pytest.raises(OSError) as direct:
        subprocess.Popen([str(bare)])
    with pytest.raises(OSError) as scoped:
        synaps_scope.Popen([str(bare)])
    assert direct.value.errno == scoped.value.errno == 8, (direct.value, scoped.value)
    assert not log.exists()


HOLDS_CALLER_CHECK = """
import subprocess, synaps_scope
child = subprocess.Popen(["sleep", "100"])
try:
    synaps_scope.ScopeHandle.of_process(child.pid).kill(5)
    print("killed")
except synaps_scope.NotOurScopeError as refused:
    print("refused:", refused)
finally:
    child.kill()
    child.wait()
"""


def test_a_scope_that_holds_the_caller_is_never_killed(rig: Dict[str, str]) -> None:
    """Issue 13, item 1: a daemon in a scope of its own asks for its direct child's scope."""
    done = synaps_scope.run([sys.executable, "-c", HOLDS_CALLER_CHECK], kind="daemon", capture_output=True)
    out = done.stdout.decode()
    assert done.returncode == 0, (done.returncode, out, done.stderr)
    assert out.startswith("refused:") and "holds this process" in out, out


def test_bad_inputs_raise_python_exceptions(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    with pytest.raises(ValueError, match="kind"):
        synaps_scope.launcher_for_env(kind="shell")
    for timeout in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="probe_timeout"):
            synaps_scope.launcher_for_env(probe_timeout=timeout)
    with pytest.raises(TypeError):
        synaps_scope.launcher_for_env(probe_timeout="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        synaps_scope.launcher_for_env(env=["PATH=/bin"])  # type: ignore[arg-type]
    empty = launcher.wrap([])  # left unwrapped, as an unresolvable program is (R4)
    assert (empty.argv, empty.unit) == ([], None)
    with pytest.raises(TypeError, match="sequence"):
        launcher.wrap("ls -l")
    with pytest.raises(TypeError, match="argument"):
        launcher.wrap(["ls", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls", "a\0b"])
    with pytest.raises(ValueError, match="'='"):
        launcher.wrap(["ls"], env={"A=B": "x"})
    with pytest.raises(ValueError, match="cwd cannot contain NUL"):
        launcher.wrap(["ls"], cwd="/tmp\0x")
    with pytest.raises(ValueError, match="cwd cannot contain NUL"):
        synaps_scope.resolve_program("ls", cwd=b"/\0")
    with pytest.raises(ValueError):
        launcher.wrap(["ls"], env={"": "x"})
    with pytest.raises(ValueError, match="NUL"):
        synaps_scope.launcher_for_env({"PATH": "/bin\0"})
    with pytest.raises(TypeError, match="environment value"):
        launcher.wrap(["ls"], env={"A": 1})  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        synaps_scope.resolve_program("")
    with pytest.raises(synaps_scope.NotOurScopeError):
        synaps_scope.ScopeHandle.from_pid("app.slice", 1)
    with pytest.raises(synaps_scope.ScopeNotFoundError):
        synaps_scope.ScopeHandle.from_manager("synaps-tool-0123456789abcdef0123456789abcdef.scope")
    # Issue 13, item 6: a pid is an int from 1 to 2**31 - 1; a bool would have meant pid 1.
    unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope"
    for bad_type in (True, 1.5, "5", None):
        with pytest.raises(TypeError, match="pid must be an int"):
            synaps_scope.ScopeHandle.of_process(bad_type)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="pid must be an int"):
            synaps_scope.ScopeHandle.from_pid(unit, bad_type)  # type: ignore[arg-type]
    for bad_number in (-1, 0, 2**31, 2**32 + 1):
        with pytest.raises(ValueError, match="pid must be from 1 to 2147483647"):
            synaps_scope.ScopeHandle.of_process(bad_number)
        with pytest.raises(ValueError, match="pid must be from 1 to 2147483647"):
            synaps_scope.ScopeHandle.from_pid(unit, bad_number)
    for bad_timeout in (-1e19, 1e-12, float("-inf")):
        with pytest.raises(ValueError):
            synaps_scope.launcher_for_env(probe_timeout=bad_timeout)
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls"], env={"A": "x\0y"})
    with pytest.raises(ValueError, match="NUL"):
        launcher.wrap(["ls"], executable="/bin/l\0s")


def test_a_program_whose_path_holds_newlines_and_odd_bytes_runs_once_in_its_scope(
    rig: Dict[str, str], tmp_path: Path
) -> None:
    """Issue 13: a careless caller's program path, with newlines, a unit-file setting between them
    and a byte that is not UTF-8, runs exactly once, scoped; after a daemon-reload its scope has
    still no MemoryMax (nothing of the path reached the unit file as a setting)."""
    log = tmp_path / "ran"
    program = os.fsencode(tmp_path) + b"/a\nMemoryMax=4096\n\xff.sh"
    unit_of_self = "$(basename \"$(grep '^0::' /proc/$$/cgroup | cut -c4-)\")"
    with open(program, "wb") as script:
        script.write(
            f"""#!/bin/sh
echo ran >> '{log}'
systemctl --user daemon-reload
systemctl --user show -p MemoryMax --value -- "{unit_of_self}" >> '{log}'
""".encode()
        )
    os.chmod(program, 0o755)
    child = synaps_scope.Popen([program])
    assert child.wait(timeout=30) == 0
    assert child.scope_unit is not None
    assert log.read_text() == "ran\ninfinity\n", "ran once; MemoryMax untouched"


def test_probes_of_a_stopped_manager_never_stall_the_loop(manager: Manager) -> None:
    async def launch() -> None:
        proc = await synaps_scope.create_subprocess_exec("true", env=manager.env, probe_timeout=0.3)
        assert proc.scope_unit is None, "a stopped manager means a direct launch"
        assert await proc.wait() == 0

    async def main() -> float:
        _, worst = await longest_stall(asyncio.gather(*(launch() for _ in range(20))))
        return worst

    manager.signal("STOP")
    try:
        worst = asyncio.run(main())
    finally:
        manager.signal("CONT")
    assert worst < 0.1, f"the event loop stalled for {worst * 1000:.0f} ms"


def test_async_requests_answered_or_cancelled_leave_no_descriptor_behind(manager: Manager) -> None:
    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def answered() -> None:
        assert await synaps_scope.launcher_for_env_async(manager.env, probe_timeout=0.2) is None

    async def cancelled() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(synaps_scope.launcher_for_env_async(manager.env, probe_timeout=0.2), 0.01)

    async def main() -> None:
        await asyncio.gather(*(answered() for _ in range(50)), *(cancelled() for _ in range(50)))

    before = descriptors()
    manager.signal("STOP")
    try:
        asyncio.run(main())
        time.sleep(0.4)  # the cancelled requests' probes end within their bound
    finally:
        manager.signal("CONT")
    gc.collect()
    assert descriptors() == before, f"{descriptors() - before} descriptors left open by 100 requests"


def test_64_requests_against_a_stopped_manager_each_answer_within_their_own_bound(manager: Manager) -> None:
    bound = 0.5
    assert synaps_scope.launcher_for_env(manager.env) is not None
    manager.signal("STOP")
    try:
        took: List[float] = []
        lock = threading.Lock()

        def request() -> None:
            started = time.monotonic()
            assert synaps_scope.launcher_for_env(manager.env, probe_timeout=bound) is None
            with lock:
                took.append(time.monotonic() - started)

        threads = [threading.Thread(target=request) for _ in range(64)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(took) == 64 and max(took) < bound + 0.1, f"threads: slowest {max(took):.3f} s"

        async def one() -> float:
            started = time.monotonic()
            launcher = await synaps_scope.launcher_for_env_async(manager.env, probe_timeout=bound)
            assert launcher is None
            return time.monotonic() - started

        async def all_of_them() -> List[float]:
            return list(await asyncio.gather(*(one() for _ in range(64))))

        answered = asyncio.run(all_of_them())
        assert max(answered) < bound + 0.1, f"asyncio: slowest {max(answered):.3f} s"
    finally:
        manager.signal("CONT")
