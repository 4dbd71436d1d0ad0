"""A launch's resource limits from Python, against the rig's real user manager: a dict of systemd's
names and values reaches the scope's unit (read back from inside it) through each entry point,
bad ones raise ValueError before anything runs, and a limit the manager has no controller for is
logged, listed and refused in ``required`` mode."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Dict

import pytest

import synaps_scope

#: Prints the launch's own scope's properties as its manager holds them.
READ_BACK = (
    "unit=$(grep '^0::' /proc/$$/cgroup); unit=${unit##*/}; "
    'systemctl --user show -p MemoryMax -p TasksMax -p CPUQuotaPerSecUSec -- "$unit"'
)
LIMITS: synaps_scope.Limits = {"MemoryMax": "64M", "TasksMax": 8, "CPUQuota": "50%"}
HELD = {"MemoryMax=67108864", "TasksMax=8", "CPUQuotaPerSecUSec=500ms"}


def held(output: str) -> set[str]:
    return {line for line in output.splitlines() if line}


def test_run_popen_and_asyncio_give_the_scope_its_limits(rig: Dict[str, str]) -> None:
    done = synaps_scope.run(["sh", "-c", READ_BACK], limits=LIMITS, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert held(done.stdout) == HELD
    with synaps_scope.Popen(["sh", "-c", READ_BACK], limits=LIMITS, stdout=subprocess.PIPE, text=True) as proc:
        out, _ = proc.communicate(timeout=30)
    assert held(out) == HELD

    async def spawned() -> str:
        proc = await synaps_scope.create_subprocess_exec(
            "sh", "-c", READ_BACK, limits=LIMITS, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        return out.decode()

    assert held(asyncio.run(spawned())) == HELD


def test_a_launcher_with_limits_wraps_them_and_keeps_the_original(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env()
    assert launcher is not None
    limited = launcher.with_limits(LIMITS)
    assert limited.limits == {"MemoryMax": "64M", "TasksMax": "8", "CPUQuota": "50%"}
    assert launcher.limits == {}
    argv = limited.wrap(["true"]).argv
    if limited.wrapper == "systemd-run":
        assert "--property=MemoryMax=64M" in argv
    else:
        assert "--property=TasksMax=8" in argv
    assert not any(arg.startswith("--property") for arg in launcher.wrap(["true"]).argv)


def test_a_limit_without_its_controller_is_said_and_refused_in_required_mode(rig: Dict[str, str]) -> None:
    launcher = synaps_scope.launcher_for_env(limits={"MemoryMax": "64M"})
    assert launcher is not None
    # The rig's cgroup tree has no memory controller.
    assert [u.property for u in launcher.unenforced] == ["MemoryMax"]
    unenforced = launcher.unenforced[0]
    assert "no memory controller" in unenforced.why and unenforced.passed
    with pytest.raises(synaps_scope.ScopeRequiredError, match="MemoryMax will not be enforced"):
        synaps_scope.launcher_for_env({**os.environ, "SYNAPS_PROCESS_SCOPES": "required"}, limits={"MemoryMax": "1G"})


def test_bad_limits_raise_before_anything_runs(rig: Dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for limits, error in [
        ({"Slice": "x.slice"}, ValueError),
        ({"MemoryMax": "lots"}, ValueError),
        ({"TasksMax": True}, TypeError),
        ({"MemoryMax": 1.5}, TypeError),
        (["MemoryMax=1G"], TypeError),
    ]:
        with pytest.raises(error):
            synaps_scope.run(["touch", str(marker)], limits=limits)  # type: ignore[arg-type]
        assert not marker.exists()
    with pytest.raises(ValueError, match="property MemoryMax=lots is not a size"):
        synaps_scope.check_limits({"MemoryMax": "lots"})
    synaps_scope.check_limits({"MemoryMax": "2G", "IOWeight": 100})
