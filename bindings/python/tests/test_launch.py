"""synaps_scope launches from Python, against the rig's real user manager: scoped children, their
argv, program and cwd, direct launches and why."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import synaps_scope
from conftest import Manager
from helpers import CGROUP_OF_SELF, PRINT_ARGS, handle_once_in_scope, no_bus_env, scope_warnings


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

    # A sequence: the first item is the command, the others $0, $1… (as subprocess hands them).
    words = ['test "$0 $1" = "x y" && ' + CGROUP_OF_SELF, "x", "y"]
    result = synaps_scope.run(words, shell=True, executable="/bin/bash", capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.scope_unit is not None and result.stdout.strip().endswith(result.scope_unit)
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    wrapped = launcher.wrap_shell("echo a b")
    assert wrapped.argv[-3:] == ["/bin/sh", "-c", "echo a b"] and wrapped.unit is not None


def test_no_manager_means_a_direct_launch(rig: Dict[str, str]) -> None:
    env = no_bus_env()
    assert synaps_scope.launcher_for_env(env) is None
    with synaps_scope.Popen(["sh", "-c", CGROUP_OF_SELF], env=env, stdout=subprocess.PIPE, text=True) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.scope_unit is None
    assert ".scope" not in out


def test_required_raises(rig: Dict[str, str]) -> None:
    env = {**no_bus_env(), "SYNAPS_PROCESS_SCOPES": "required"}
    with pytest.raises(synaps_scope.ScopeRequiredError, match="required") as raised:
        synaps_scope.launcher_for_env(env)
    assert isinstance(raised.value, synaps_scope.ScopeError)
    with pytest.raises(synaps_scope.ScopeRequiredError):
        synaps_scope.Popen(["true"], env=env)


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


def test_from_a_pid_namespace_a_launch_is_scoped_or_direct_with_the_reason(rig: Dict[str, str]) -> None:
    """From a pid namespace the manager is outside of (a sandbox's `unshare --pid`), the launcher
    program names its process by a pidfd and is scoped where the manager takes one (systemd 257
    on), else the launch is direct and the warning says why; systemd-run cannot reach the manager
    from there, so the launch is direct and the warning says why."""
    unit, cgroup, stderr = popen_in_a_pid_namespace(None)
    if os.environ.get("SYNAPS_SCOPE_LAUNCHER") == "systemd-run":
        assert unit == "None" and ".scope" not in cgroup
        assert "WARNING" in stderr and "pid namespace" in stderr, stderr
    elif int(os.environ["SYNAPS_RIG_SYSTEMD_VERSION"]) < 257:
        assert unit == "None" and "synaps-tool-" not in cgroup, cgroup
        assert "WARNING" in stderr and "takes no pidfd" in stderr, stderr
    else:
        assert unit.startswith("synaps-tool-") and cgroup.endswith(f"/{unit}")
        assert stderr == ""


def popen_in_a_pid_namespace(env: Optional[Dict[str, str]]) -> Tuple[str, str, str]:
    """A `synaps_scope.Popen` child that prints its cgroup, made from a pid namespace of its own
    (`unshare --pid`) with `env` (else this process's): its scope unit (`None` for none), the
    cgroup it ran in, and what the parent said on stderr (its warnings through `logging`)."""
    script = (
        "import logging, subprocess, synaps_scope\n"
        "logging.basicConfig(format='%(levelname)s %(message)s')\n"
        f"p = synaps_scope.Popen(['sh', '-c', {CGROUP_OF_SELF!r}], stdout=subprocess.PIPE, text=True)\n"
        "out, _ = p.communicate(timeout=30)\n"
        "print(p.scope_unit, out.strip(), p.returncode)\n"
    )
    proc = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    unit, cgroup, status = proc.stdout.split()
    assert status == "0"
    return unit, cgroup, proc.stderr


SQUATTER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "name_squatter.py"


def test_from_a_pid_namespace_with_the_session_bus_alone_a_pidfd_names_the_launch_or_it_is_direct(
    manager: Manager,
) -> None:
    """From a pid namespace the broker is outside of, with the session bus alone (no private
    socket), "the sender" cannot be told from a proxy's: a manager that takes a pidfd (systemd 257
    on) is sent one and the child is scoped; before 257 the launch is direct, and the warning
    says why."""
    subprocess.run(["systemctl", "--user", "start", "dbus.socket", "dbus.service"], env=manager.env, check=True)
    env = {k: v for k, v in manager.env.items() if k != "XDG_RUNTIME_DIR"}
    env.update(
        SYNAPS_SCOPE_LAUNCHER="synaps-scope-exec",
        DBUS_SESSION_BUS_ADDRESS=f"unix:path={manager.runtime_dir}/bus",
    )
    unit, cgroup, stderr = popen_in_a_pid_namespace(env)
    if int(os.environ["SYNAPS_RIG_SYSTEMD_VERSION"]) >= 257:
        assert unit.startswith("synaps-tool-") and cgroup.endswith(f"/{unit}"), cgroup
        assert stderr == ""
    else:
        assert unit == "None" and "synaps-tool-" not in cgroup, cgroup
        assert "WARNING" in stderr and "takes no pidfd" in stderr, stderr


def test_a_session_bus_where_a_program_that_is_no_manager_owns_its_name_is_passed_over(
    rig: Dict[str, str], tmp_path: Path
) -> None:
    """One manager for one environment: where the session bus's org.freedesktop.systemd1 is a
    program that is no systemd manager, the launch, its probe and ScopeHandle.from_manager reach
    the manager of XDG_RUNTIME_DIR by its private socket, and doctor says why the bus was passed
    over; with the session bus alone there is no scope, and no wait."""
    socket = tmp_path / "bus"
    address = f"unix:path={socket}"
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"],
        stdout=subprocess.DEVNULL,
    )
    squatter = None
    try:
        for _ in range(1000):
            if socket.exists():
                break
            time.sleep(0.01)
        squatter = subprocess.Popen([sys.executable, str(SQUATTER), address], stdout=subprocess.PIPE, text=True)
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": address}
        if os.environ.get("SYNAPS_SCOPE_LAUNCHER") != "systemd-run":
            report = synaps_scope.doctor(env)
            assert "does not answer as a systemd manager" in report, report
        with synaps_scope.Popen(["sleep", "30"], env=env) as proc:
            unit = proc.scope_unit
            assert unit is not None
            in_scope = handle_once_in_scope(proc)
            handle = synaps_scope.ScopeHandle.from_manager(unit, env, 3.0)
            assert handle.cgroup == in_scope.cgroup and handle.pids() == [proc.pid]
            proc.kill()
        bus_only = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"}
        started = time.monotonic()
        assert synaps_scope.launcher_for_env(bus_only) is None
        assert time.monotonic() - started < 1.0
    finally:
        for process in (squatter, daemon):
            if process is not None:
                process.kill()
                process.wait()


def test_a_wrapped_argv_spawned_twice_leaves_the_first_tool_running(rig: Dict[str, str], tmp_path: Path) -> None:
    """A host that keeps its wrapped line and spawns it again names one unit twice: the second
    launch never ends the first tool. Through the launcher program the second command runs once
    unscoped (on) or not at all with 125 (required); systemd-run refuses the taken name."""
    modes = ["on"] if os.environ.get("SYNAPS_SCOPE_LAUNCHER") == "systemd-run" else ["on", "required"]
    for mode in modes:
        runs, quick = tmp_path / f"runs-{mode}", tmp_path / f"quick-{mode}"
        launcher = synaps_scope.launcher_for_env({**os.environ, "SYNAPS_PROCESS_SCOPES": mode})
        assert launcher is not None
        # Told to end at once only before it begins: the first, told after it recorded itself, sleeps on.
        script = f"[ -e '{quick}' ]; q=$?; {CGROUP_OF_SELF} >> '{runs}'; [ $q = 0 ] || exec sleep 60"
        wrapped = launcher.wrap(["sh", "-c", script])
        assert wrapped.unit is not None
        first = subprocess.Popen(wrapped.argv, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while not (runs.exists() and runs.read_text().endswith("\n")) and time.monotonic() < deadline:
                time.sleep(0.005)
            assert runs.read_text().strip().endswith(f"/{wrapped.unit}")
            quick.touch()
            second = subprocess.run(wrapped.argv, capture_output=True, text=True, timeout=30)
            assert first.poll() is None, f"{mode}: the first tool was ended: {second.stderr}"
            own = [line for line in Path(f"/proc/{first.pid}/cgroup").read_text().splitlines() if line.startswith("0::")]
            assert own[0].endswith(f"/{wrapped.unit}"), own
            lines = runs.read_text().splitlines()
            if launcher.wrapper == "systemd-run":
                assert (second.returncode, len(lines)) == (1, 1), second.stderr
                assert wrapped.unit in second.stderr
            elif mode == "on":
                assert (second.returncode, len(lines)) == (0, 2), second.stderr
                assert not lines[1].endswith(wrapped.unit)
                assert f"already has a unit named {wrapped.unit}" in second.stderr
            else:
                assert (second.returncode, len(lines)) == (synaps_scope.EXEC_FAILED_STATUS, 1), second.stderr
        finally:
            first.kill()
            first.wait()


RELAY = Path(__file__).resolve().parents[3] / "tests" / "tools" / "bus_relay.py"


@pytest.mark.parametrize("pass_fds", [False, True])
def test_systemd_run_behind_a_relay_is_not_used(rig: Dict[str, str], tmp_path: Path, pass_fds: bool) -> None:
    """systemd-run behind a relay in front of the manager's private socket would make the scope,
    then fail to find it as the sender's (the relay's) unit and never run the command: no launcher,
    and `required` raises with the reason."""
    (tmp_path / "systemd").mkdir()
    socket = tmp_path / "relayed"
    target = Path(os.environ["XDG_RUNTIME_DIR"]) / "systemd" / "private"
    argv = [sys.executable, str(RELAY)] + (["--pass-fds"] if pass_fds else []) + [str(socket), str(target)]
    relay = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert relay.stdout is not None and relay.stdout.readline().strip() == "ready"
        (tmp_path / "systemd" / "private").symlink_to(socket)
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env.update(XDG_RUNTIME_DIR=str(tmp_path), SYNAPS_SCOPE_LAUNCHER="systemd-run")
        assert synaps_scope.launcher_for_env(env) is None
        with pytest.raises(synaps_scope.ScopeError, match="never running the command"):
            synaps_scope.launcher_for_env({**env, "SYNAPS_PROCESS_SCOPES": "required"})
    finally:
        relay.kill()
        relay.wait()
