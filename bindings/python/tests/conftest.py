"""Fixtures: the rig's real user manager, and managers of a test's own to stop or kill."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from helpers import OomdBus


def _rig_or_fail() -> Dict[str, str]:
    names = ("SYNAPS_RIG_SYSTEMD_VERSION", "SYNAPS_RIG_MANAGER", "SYNAPS_RIG_CGROUP")
    found = {name: os.environ.get(name, "") for name in names}
    if all(found.values()) and os.environ.get("XDG_RUNTIME_DIR"):
        return found
    if os.environ.get("SYNAPS_SKIP_MANAGER_TESTS") == "1":
        pytest.skip("SYNAPS_SKIP_MANAGER_TESTS=1: this test needs a real systemd user manager")
    pytest.fail(
        "this test needs a real systemd user manager and none was started: run it through "
        "`scripts/systemd-rig.sh [--systemd 247|252|254|257|262] -- python -m pytest bindings/python/tests` as root "
        "(scripts/test.sh does), or set SYNAPS_SKIP_MANAGER_TESTS=1 to skip such tests on purpose"
    )


@pytest.fixture
def rig() -> Dict[str, str]:
    """The rig's manager (XDG_RUNTIME_DIR already points at it)."""
    return _rig_or_fail()


class Manager:
    """A systemd user manager of the test's own, in its own cgroup and XDG_RUNTIME_DIR."""

    def __init__(self, rig: Dict[str, str]) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="synaps-py-manager-"))
        self.runtime_dir = self.scratch / "runtime"
        self.runtime_dir.mkdir(mode=0o700)
        self.cgroup = Path(rig["SYNAPS_RIG_CGROUP"]) / f"py-manager-{os.getpid()}-{self.scratch.name}"
        service = self.cgroup / "user@0.service"
        service.mkdir(parents=True)
        log = open(self.scratch / "manager.log", "wb")
        self.process = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec "$2" --user', "sh", str(service), rig["SYNAPS_RIG_MANAGER"]],
            env={**os.environ, "XDG_RUNTIME_DIR": str(self.runtime_dir)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the test's manager exited: {(self.scratch / 'manager.log').read_text()}")
            state = subprocess.run(
                ["systemctl", "--user", "is-system-running"], env=self.env, capture_output=True, text=True
            ).stdout.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the test's user manager did not come up within 10 s")
            time.sleep(0.02)

    @property
    def env(self) -> Dict[str, str]:
        return {**os.environ, "XDG_RUNTIME_DIR": str(self.runtime_dir)}

    def signal(self, name: str) -> None:
        subprocess.run(["kill", f"-{name}", str(self.process.pid)], check=True)

    def close(self) -> None:
        if self.process.poll() is None:
            self.signal("CONT")
            self.process.kill()
        self.process.wait()
        try:
            (self.cgroup / "cgroup.kill").write_text("1")
        except OSError:
            pass
        deadline = time.monotonic() + 5
        while self.cgroup.exists() and time.monotonic() < deadline:
            subprocess.run(["find", str(self.cgroup), "-depth", "-type", "d", "-exec", "rmdir", "{}", "+"], stderr=subprocess.DEVNULL)
            time.sleep(0.02)
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture
def manager(rig: Dict[str, str]) -> Iterator[Manager]:
    own = Manager(rig)
    try:
        yield own
    finally:
        own.close()


@pytest.fixture
def oomd_bus(rig: Dict[str, str], tmp_path: Path) -> Iterator[OomdBus]:
    bus = OomdBus(tmp_path)
    yield bus
    bus.close()
