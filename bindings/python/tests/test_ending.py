"""How a scope ended, from Python: told by a handle made while the tool ran, asked only after the
tool's exit status is in and the manager has collected the scope. The rig's cgroup2 tree has no
memory controller, so an ending without a mark is "unknown" here (the virtual machine shows
"on-its-own", "kernel-oom" and the real systemd-oomd's kills)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Dict

import synaps_scope
from helpers import handle_once_in_scope


def wait_collected(handle: synaps_scope.ScopeHandle) -> None:
    deadline = time.monotonic() + 10
    while os.path.exists(handle.cgroup):
        assert time.monotonic() < deadline, "the manager never collected the scope"
        time.sleep(0.005)


def test_a_handles_kill_is_told_after_the_scope_is_collected(rig: Dict[str, str]) -> None:
    proc = synaps_scope.Popen(["sh", "-c", "sleep 100 & exec sleep 100"])
    handle = handle_once_in_scope(proc)
    assert handle.ending().kind == "running"
    other = synaps_scope.ScopeHandle.of_process(proc.pid)
    handle.kill()
    assert proc.wait(timeout=10) == -9
    wait_collected(handle)
    for h in (handle, other):
        ending = h.ending()
        assert ending == synaps_scope.ScopeEnding("handle-kill", None, 0, ""), ending
        assert str(ending) == "killed through a scope handle"


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
    assert (ending.kind, ending.oomd_rule) == ("oomd", None), ending
    assert str(ending) == "killed by systemd-oomd"
    memory = "memory" in open(os.path.join(os.path.dirname(quiet_handle.cgroup), "cgroup.subtree_control")).read().split()
    assert quiet_handle.ending().kind == ("on-its-own" if memory else "unknown")
