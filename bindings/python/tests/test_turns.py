"""A turn is held until its holder lets it go, from Python (issue 48): while a request of this
process holds its turn (its first authentication held 600 ms by a stand-in in front of the
manager), this process opens and closes every file of the runtime directory, or makes a request
that spells the directory with a slash more, or through a symlink; another process's request
must still wait for the held turn."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict

import pytest

import synaps_scope
from conftest import Manager

SLOW_MANAGER = Path(__file__).resolve().parents[3] / "tests" / "tools" / "slow_manager.py"
HELD = 0.6

# Another process's request, timed from its start to its answer.
OTHER = (
    "import os, sys, synaps_scope\n"
    "launcher = synaps_scope.launcher_for_env(dict(os.environ), probe_timeout=3.0)\n"
    "sys.exit(0 if launcher is not None else 1)\n"
)


def close_every_file(runtime: Path) -> None:
    for path in runtime.iterdir():
        if path.is_file():
            with open(path, "rb"):
                pass


def spelt_with_a_slash_more(env: Dict[str, str], runtime: Path) -> None:
    synaps_scope.launcher_for_env({**env, "XDG_RUNTIME_DIR": f"{runtime}/"}, probe_timeout=0.15)


def through_a_symlink(env: Dict[str, str], runtime: Path) -> None:
    link = runtime.parent / "link"
    link.symlink_to(runtime)
    synaps_scope.launcher_for_env({**env, "XDG_RUNTIME_DIR": str(link)}, probe_timeout=0.15)


CASES: Dict[str, Callable[[Dict[str, str], Path], None]] = {
    "nothing else": lambda env, runtime: None,
    "the host closes every file of the directory": lambda env, runtime: close_every_file(runtime),
    "a request that spells the directory with a slash more": spelt_with_a_slash_more,
    "a request through a symlink to the directory": through_a_symlink,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_held_turn_is_waited_for(manager: Manager, tmp_path: Path, case: str) -> None:
    runtime = tmp_path / "runtime"
    (runtime / "systemd").mkdir(parents=True)
    slow = subprocess.Popen(
        [sys.executable, str(SLOW_MANAGER), "--listen", str(runtime / "systemd" / "private"),
         "--to", str(manager.runtime_dir / "systemd" / "private"),
         "--needle", "AUTH", "--delay", str(HELD), "--first-only"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert slow.stdout is not None and slow.stdout.readline().strip() == "ready"
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env["XDG_RUNTIME_DIR"] = str(runtime)
        # The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
        # behind one, is never used there, so the launcher program is.
        env["SYNAPS_SCOPE_LAUNCHER"] = "synaps-scope-exec"
        began = time.monotonic()
        holder = threading.Thread(target=lambda: synaps_scope.launcher_for_env(env, probe_timeout=3.0))
        holder.start()
        time.sleep(0.1)
        CASES[case](env, runtime)
        other = subprocess.run([sys.executable, "-c", OTHER], env=env, timeout=10)
        ended = time.monotonic() - began
        holder.join()
        assert other.returncode == 0
        assert ended >= HELD, f"{case}: the other process's request ended {ended:.3f} s after the turn was taken"
    finally:
        slow.kill()
        slow.wait()
