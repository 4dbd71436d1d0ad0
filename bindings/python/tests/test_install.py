"""What an installed synaps_scope reports about itself: its version, and (doctor) which launcher
program it uses and how it found it, with no configuration when one sits beside the module."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import synaps_scope


def unconfigured_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SYNAPS_SCOPE_")}


def test_the_module_version_is_the_installed_distribution_version() -> None:
    assert synaps_scope.__version__ == importlib.metadata.version("synaps-scope")


def test_doctor_reports_the_launcher_program_in_use(rig: Dict[str, str]) -> None:
    report = synaps_scope.doctor()
    exec_program = os.environ.get("SYNAPS_SCOPE_EXEC")
    if exec_program:
        assert f"  synaps-scope-exec: {exec_program} (named by SYNAPS_SCOPE_EXEC)" in report.splitlines(), report
    assert "verdict:       scopes will be used (exit 0)" in report.splitlines(), report
    # The way to the manager (the rig's session bus once the manager is on it, else the private
    # socket) and the order tried.
    runtime = os.environ["XDG_RUNTIME_DIR"]
    private = f"reached by:    private socket {runtime}/systemd/private"
    ways = {private, f"reached by:    session bus unix:path={runtime}/bus"}
    # Right after the rig starts, its manager may not own its name on the bus yet.
    not_yet = f"{private} (the session bus passed over: Could not get owner of name 'org.freedesktop.systemd1'"
    assert ways & set(report.splitlines()) or not_yet in report, report
    order = "systemd-run's" if os.environ.get("SYNAPS_SCOPE_LAUNCHER") == "systemd-run" else "the launcher program's"
    assert f"  in the order {order}" in report, report


def test_the_verdict_is_a_value_and_the_command_line_exits_with_it(rig: Dict[str, str]) -> None:
    report, verdict = synaps_scope.diagnose()
    assert verdict is synaps_scope.Verdict.SCOPED and int(verdict) == 0, report
    assert f"verdict:       {verdict.words} (exit 0)" in report.splitlines(), report
    required = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")}
    required["SYNAPS_PROCESS_SCOPES"] = "required"
    refused = synaps_scope.diagnose(env=required)
    assert refused.verdict is synaps_scope.Verdict.REFUSED and int(refused.verdict) == 3
    assert refused.verdict.words == "required mode will refuse launches"
    # Each verdict's number and words are the core's.
    assert [(v.value, v.words) for v in synaps_scope.Verdict] == [
        (code, words) for code, _name, words in synaps_scope._native.verdicts()
    ]
    # `python -m synaps_scope doctor`: 3 when required mode would refuse, 2 for a usage error or bad
    # input, as `synaps-scope doctor` and `npx synaps-scope doctor` exit.
    doctor = [sys.executable, "-m", "synaps_scope", "doctor"]
    done = subprocess.run(doctor, env=required, capture_output=True, text=True)
    assert done.returncode == 3, done.stdout + done.stderr
    usage = subprocess.run([*doctor, "--bogus"], env=required, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr, usage.stderr
    bad = subprocess.run([*doctor, "--timeout", "0"], env=required, capture_output=True, text=True)
    assert bad.returncode == 2 and "timeout must be a positive number" in bad.stderr, bad.stderr
    helped = subprocess.run([*doctor, "--help"], env=required, capture_output=True, text=True)
    assert "3 required mode would refuse" in " ".join(helped.stdout.split()), helped.stdout


def test_doctor_refuses_bad_input_clearly() -> None:
    with pytest.raises(ValueError, match="timeout"):
        synaps_scope.doctor(timeout=0)
    with pytest.raises(ValueError, match="environment"):
        synaps_scope.doctor(env={"": "x"})


def test_a_launcher_program_beside_the_module_is_used_with_no_configuration(
    rig: Dict[str, str], tmp_path: Path
) -> None:
    # A copy of the installed package with the launcher program beside its native module, as the
    # wheel ships it.
    exec_program = os.environ.get("SYNAPS_SCOPE_EXEC")
    if not exec_program:
        pytest.fail("SYNAPS_SCOPE_EXEC must name the launcher program built for this test run")
    package = tmp_path / "synaps_scope"
    shutil.copytree(Path(synaps_scope.__file__).parent, package)
    shutil.copy2(exec_program, package / "synaps-scope-exec")
    (native,) = package.glob("_native*.so")
    env = dict(unconfigured_env(), PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "synaps_scope", "doctor"], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    line = f"  synaps-scope-exec: {package}/synaps-scope-exec (beside {native})"
    assert line in done.stdout.splitlines(), done.stdout + done.stderr
    assert f"launcher:      synaps-scope-exec {package}/synaps-scope-exec " in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
