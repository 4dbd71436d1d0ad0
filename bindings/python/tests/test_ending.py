"""How a scope ended, from Python: told by a handle made while the tool ran, asked only after the
tool's exit status is in and the manager has collected the scope, with what each answer rests on.
The rig's cgroup2 tree has no memory controller, so an ending without evidence of a kill is
"unknown" here (the virtual machine shows "on-its-own", "kernel-oom" and the real systemd-oomd's
kills). There is no system bus on the rig: oomd's signal cannot be heard, and its mark (written
here as oomd writes it, a stand-in) is the evidence, said to be forgeable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

import synaps_scope
from helpers import OomdBus, handle_once_in_scope


def wait_collected(handle: synaps_scope.ScopeHandle) -> None:
    deadline = time.monotonic() + 10
    while os.path.exists(handle.cgroup):
        assert time.monotonic() < deadline, "the manager never collected the scope"
        time.sleep(0.005)


STOP_MANAGER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "stop_manager.py"


@contextmanager
def manager_stopped() -> Iterator[None]:
    """The rig's manager stopped (SIGSTOP) meanwhile: a scope that empties stays uncollected, as in
    the moment between a tool's exit and the manager's clean-up (a watchdog continues it after
    5 s should this process die first)."""
    pid = int(subprocess.run([sys.executable, str(STOP_MANAGER)], capture_output=True, text=True, check=True).stdout)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def no_kill(handle: synaps_scope.ScopeHandle) -> synaps_scope.ScopeEnding:
    """An ending without evidence of a kill: on its own with a memory controller, else unknown."""
    memory = "memory" in open(os.path.join(handle.cgroup, "cgroup.controllers")).read().split()
    if memory:
        return synaps_scope.ScopeEnding("on-its-own", None, 0, "memory-events", False, "")
    return synaps_scope.ScopeEnding("unknown", None, 0, "none", False, "")


def no_kill_after(handle: synaps_scope.ScopeHandle) -> synaps_scope.ScopeEnding:
    """An ending without evidence of a kill, asked after the scope was collected: on its own where
    its slice gives it a memory controller, else unknown."""
    slice_dir = os.path.dirname(handle.cgroup)
    memory = "memory" in open(os.path.join(slice_dir, "cgroup.subtree_control")).read().split()
    if memory:
        return synaps_scope.ScopeEnding("on-its-own", None, 0, "memory-events", False, "")
    return synaps_scope.ScopeEnding("unknown", None, 0, "none", False, "")


def test_a_handles_kill_is_told_after_the_scope_is_collected(rig: Dict[str, str]) -> None:
    proc = synaps_scope.Popen(["sh", "-c", "sleep 100 & exec sleep 100"])
    handle = handle_once_in_scope(proc)
    assert handle.ending().kind == "running"
    other = synaps_scope.ScopeHandle.of_process(proc.pid)
    handle.kill()
    assert proc.wait(timeout=10) == -9
    wait_collected(handle)
    ending = handle.ending()
    assert ending == synaps_scope.ScopeEnding("handle-kill", None, 0, "own-kill", False, ""), ending
    assert str(ending) == "killed through a scope handle (told by this handle's own kill)"
    # Another handle knows of the kill by its mark alone, which any process of the user could write.
    ending = other.ending()
    assert ending == synaps_scope.ScopeEnding("handle-kill", None, 0, "kill-mark", True, ""), ending


def test_a_clean_up_kill_of_an_empty_scope_is_not_a_kill(rig: Dict[str, str]) -> None:
    """A daemon reaps its tool, then kills the scope to sweep up: the kill finds nobody."""
    proc = synaps_scope.Popen(["sh", "-c", "echo ready; read x; exit 0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    handle = handle_once_in_scope(proc)
    expected = no_kill(handle)
    assert proc.stdin is not None and proc.stdout is not None
    # The tool itself runs (the launcher program is done with the manager) before it is stopped.
    assert proc.stdout.readline() == b"ready\n"
    with manager_stopped():
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        assert os.path.exists(handle.cgroup), "the stopped manager left the scope"
        assert handle.kill() == []
    wait_collected(handle)
    assert handle.ending() == expected


def test_an_oomd_mark_is_told_as_its_kill_and_nothing_else_is_guessed(rig: Dict[str, str]) -> None:
    """systemd-oomd marks a cgroup (user.oomd_ooms) before it kills it: played here exactly so."""
    killed = synaps_scope.Popen(["sleep", "100"])
    killed_handle = handle_once_in_scope(killed)
    quiet = synaps_scope.Popen(["sh", "-c", "read x; exit 3"], stdin=subprocess.PIPE)
    quiet_handle = handle_once_in_scope(quiet)
    os.setxattr(killed_handle.cgroup, "user.oomd_ooms", b"1")
    with open(os.path.join(killed_handle.cgroup, "cgroup.kill"), "w") as f:
        f.write("1")
    assert quiet.stdin is not None
    quiet.stdin.close()
    assert killed.wait(timeout=10) == -9 and quiet.wait(timeout=10) == 3
    wait_collected(killed_handle)
    wait_collected(quiet_handle)
    ending = killed_handle.ending(timeout=2.0)
    assert ending == synaps_scope.ScopeEnding("oomd", None, 0, "oomd-mark", True, ""), ending
    assert str(ending).startswith("killed by systemd-oomd (told by systemd-oomd's mark on the cgroup, which any process"), str(ending)
    assert quiet_handle.ending() == no_kill_after(quiet_handle)


@pytest.mark.parametrize("mark", ["user.oomd_ooms", "user.oomd_kill"])
def test_an_oomd_kill_swept_up_by_a_handles_kill_is_still_oomds(rig: Dict[str, str], mark: str) -> None:
    """oomd (a stand-in) kills the cgroup the tool made below its scope; the daemon then kills the
    scope to sweep up the tool itself: what ended the tool was oomd's, and that is what is told.
    oomd marks before the kill from 251 on (user.oomd_ooms), and after it in every version
    (user.oomd_kill, the only mark before 251: Ubuntu 22.04's 249)."""
    proc = synaps_scope.Popen(
        ["sh", "-c", 'read dir; sleep 100 & echo $! > "$dir/leaf/cgroup.procs"; echo moved; exec sleep 100'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    handle = handle_once_in_scope(proc)
    leaf = os.path.join(handle.cgroup, "leaf")
    os.mkdir(leaf)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(handle.cgroup.encode() + b"\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"moved\n"
    if mark == "user.oomd_ooms":
        os.setxattr(leaf, mark, b"1")
    with open(os.path.join(leaf, "cgroup.kill"), "w") as f:
        f.write("1")
    deadline = time.monotonic() + 10
    while open(os.path.join(leaf, "cgroup.procs")).read().strip():
        assert time.monotonic() < deadline, "the kill below the scope did not empty it"
        time.sleep(0.005)
    if mark == "user.oomd_kill":
        os.setxattr(leaf, mark, b"1")
    assert handle.kill() == [proc.pid]
    assert proc.wait(timeout=10) == -9
    wait_collected(handle)
    assert handle.ending() == synaps_scope.ScopeEnding("oomd", None, 0, "oomd-mark", True, "")


# A tool that makes a cgroup below its scope (named by its first argument), moves into it, and
# says so: oomd, which kills leaf cgroups, kills it there.
INTO_A_CGROUP_BELOW = 'd="/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/$1"; mkdir "$d" && echo $$ > "$d/cgroup.procs" && echo moved && exec sleep 100'


def scoped_below(name: str, env: Dict[str, str]) -> Tuple[synaps_scope.Popen, synaps_scope.ScopeHandle]:
    """A tool in a cgroup ``name`` below its scope, and a handle on the scope (made with ``env``,
    which names the system bus)."""
    proc = synaps_scope.Popen(["sh", "-c", INTO_A_CGROUP_BELOW, "sh", name], stdout=subprocess.PIPE)
    assert proc.scope_unit is not None and proc.stdout is not None
    # The tool runs only once its scope is made: asked after it spoke, the manager knows the scope.
    assert proc.stdout.readline() == b"moved\n"
    return proc, synaps_scope.ScopeHandle.from_manager(proc.scope_unit, env)


def oomd_kills(handle: synaps_scope.ScopeHandle, below: str, bus: OomdBus, reason: str) -> None:
    """oomd's kill of the cgroup ``below`` the scope of ``handle``: its mark, the kill, its signal."""
    leaf = os.path.join(handle.cgroup, below)
    os.setxattr(leaf, "user.oomd_ooms", b"1")
    with open(os.path.join(leaf, "cgroup.kill"), "w") as f:
        f.write("1")
    bus.killed(oomd_path(handle) + "/" + below, reason)


def oomd_path(handle: synaps_scope.ScopeHandle) -> str:
    """The scope's cgroup path from the hierarchy's root, as oomd names it."""
    return "/" + os.path.relpath(handle.cgroup, "/sys/fs/cgroup")


def test_oomds_kill_of_a_cgroup_below_the_scope_is_told_by_its_signal(oomd_bus: OomdBus) -> None:
    """The leaf case: oomd (a stand-in on a bus standing for the system bus) kills the cgroup the
    tool made below its scope, and signals it: told as oomd's, under the rule its signal names, on
    evidence no process of the user can make. The signal comes 1 s after the kill (oomd busy in the
    same turn of its loop) and after the question: the answer waits for it."""
    proc, handle = scoped_below("leaf", oomd_bus.env)
    oomd_bus.oomd_kill_begun(os.path.join(handle.cgroup, "leaf"), oomd_path(handle) + "/leaf", "memory-pressure", 1000)
    assert proc.wait(timeout=10) == -9
    wait_collected(handle)
    ending = handle.ending(oomd_bus.env)
    oomd_bus.sent()
    assert ending == synaps_scope.ScopeEnding("oomd", "memory-pressure", 0, "oomd-signal", False, ""), ending
    assert "told by systemd-oomd's Killed signal" in str(ending), str(ending)


def test_a_kill_of_a_cgroup_named_after_another_scope_is_never_that_scopes(oomd_bus: OomdBus) -> None:
    """The framing case: tool A makes a cgroup below its own scope named after B's unit, and oomd
    kills it there. A is told oomd's kill; B, which ended on its own, is never told it."""
    b = synaps_scope.Popen(["sh", "-c", "echo ready; read _; exit 0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert b.scope_unit is not None and b.stdin is not None and b.stdout is not None
    assert b.stdout.readline() == b"ready\n"
    b_handle = synaps_scope.ScopeHandle.from_manager(b.scope_unit, oomd_bus.env)
    a, a_handle = scoped_below(b.scope_unit, oomd_bus.env)
    oomd_kills(a_handle, b.scope_unit, oomd_bus, "memory-used")
    assert a.wait(timeout=10) == -9
    b.stdin.close()
    assert b.wait(timeout=10) == 0
    wait_collected(a_handle)
    wait_collected(b_handle)
    assert a_handle.ending(oomd_bus.env) == synaps_scope.ScopeEnding("oomd", "swap", 0, "oomd-signal", False, "")
    assert b_handle.ending(oomd_bus.env) == no_kill_after(b_handle)


def test_a_kill_after_a_slow_set_up_is_heard(rig: Dict[str, str], tmp_path: Path) -> None:
    """A system bus slow to answer the subscription's set-up (oomd's introspection held 1 s, as a
    machine amid the thrash oomd acts on was seen to answer past the quarter second a handle
    waits): the handle is made without waiting for it, and oomd's kill once the set-up is done is
    told by its signal."""
    bus = OomdBus(tmp_path, slow_set_up=1)
    try:
        proc = synaps_scope.Popen(["sh", "-c", "echo ready; exec sleep 100"], stdout=subprocess.PIPE)
        assert proc.scope_unit is not None and proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        asked = time.monotonic()
        handle = synaps_scope.ScopeHandle.from_manager(proc.scope_unit, bus.env)
        waited = time.monotonic() - asked
        assert waited < 0.9, f"the handle waited {waited:.3f} s for the slow bus"
        time.sleep(3)  # the set-up done: its held question answered 1 s after it was asked
        os.setxattr(handle.cgroup, "user.oomd_ooms", b"1")
        with open(os.path.join(handle.cgroup, "cgroup.kill"), "w") as f:
            f.write("1")
        bus.killed(oomd_path(handle), "memory-used")
        assert proc.wait(timeout=10) == -9
        wait_collected(handle)
        assert handle.ending(bus.env) == synaps_scope.ScopeEnding("oomd", "swap", 0, "oomd-signal", False, "")
    finally:
        bus.close()


def test_a_forged_mark_waits_only_for_oomds_answer_and_the_answer_is_kept(oomd_bus: OomdBus) -> None:
    """A tool writes oomd's mark on its own scope and exits 0: where oomd's signal is heard, the
    mark is not oomd's; the answer waits only for oomd's answer to a ping, however long the caller
    would wait, and the next ask gets it at once."""
    proc = synaps_scope.Popen(["sh", "-c", "echo ready; read _; exit 0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.scope_unit is not None and proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    handle = synaps_scope.ScopeHandle.from_manager(proc.scope_unit, oomd_bus.env)
    os.setxattr(handle.cgroup, "user.oomd_ooms", b"1")
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    wait_collected(handle)
    asked = time.monotonic()
    first = handle.ending(oomd_bus.env, timeout=5)
    waited = time.monotonic() - asked
    assert first == no_kill_after(handle), first
    assert waited < 0.25, f"the answer waited {waited:.3f} s"
    again = time.monotonic()
    assert handle.ending(oomd_bus.env, timeout=5) == first
    assert time.monotonic() - again < 0.05


def watched(inode: int) -> bool:
    """Whether this process's inotify instance watches ``inode`` (its fdinfo lists each watch)."""
    wanted = f" ino:{inode:x} "
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            info = open(f"/proc/self/fdinfo/{fd}").read()
        except OSError:
            continue
        if any(line.startswith("inotify ") and wanted in line for line in info.splitlines()):
            return True
    return False


def test_the_last_handle_on_an_empty_scope_takes_its_watches_away(rig: Dict[str, str]) -> None:
    """What watches an empty scope goes with its last handle, before the manager removes it (a
    process that exits with a watch in place waits out the kernel's teardown of it); one handle
    among others leaves it to the rest; a scope that still runs stays watched without a handle."""
    running = synaps_scope.Popen(["sleep", "100"])
    handle = handle_once_in_scope(running)
    inode = os.stat(handle.cgroup).st_ino
    del handle
    assert watched(inode), "a running scope stays watched without a handle"
    running.kill_scope()
    running.wait(timeout=10)

    proc = synaps_scope.Popen(["sh", "-c", "echo ready; read x; exit 0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    handle = handle_once_in_scope(proc)
    inode = os.stat(handle.cgroup).st_ino
    other = synaps_scope.ScopeHandle.of_process(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    assert watched(inode), "the running scope is watched"
    with manager_stopped():
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        deadline = time.monotonic() + 10
        while "populated 0" not in open(os.path.join(handle.cgroup, "cgroup.events")).read():
            assert time.monotonic() < deadline, "the scope never emptied"
            time.sleep(0.005)
        expected = no_kill(handle)
        del handle
        assert watched(inode), "another handle still asks about the scope"
        assert other.ending() == expected
        del other
        assert not watched(inode), "no handle is left on the empty scope, so no watch"
