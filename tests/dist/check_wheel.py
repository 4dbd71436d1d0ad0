"""Run from a fresh venv that installed the wheel, outside the repository (scripts/test-dist.sh):
the module is the wheel's, carries its launcher program and uses it with no configuration, and
`synaps_scope.run` puts a command in its own scope. Usage: python check_wheel.py VERSION"""

import glob
import os
import re
import subprocess
import sys

import synaps_scope

version = sys.argv[1]
package = os.path.dirname(os.path.realpath(synaps_scope.__file__))
assert "site-packages" in package, package
assert synaps_scope.__version__ == version, (synaps_scope.__version__, version)

(native,) = glob.glob(os.path.join(package, "_native*.so"))
bundled = os.path.join(package, "synaps-scope-exec")
assert os.access(bundled, os.X_OK), f"{bundled} is not an executable in the installed wheel"

report = synaps_scope.doctor()
line = f"  synaps-scope-exec: {bundled} (beside {native})"
assert line in report.splitlines(), f"doctor does not say the bundled launcher is used:\n{report}"
assert "verdict:       scopes will be used (exit 0)" in report, report

launcher = synaps_scope.launcher_for_env()
assert launcher is not None, "no launcher: scopes unavailable"
assert launcher.wrapper == "synaps-scope-exec" and launcher.wrapper_program == bundled, (
    launcher.wrapper,
    launcher.wrapper_program,
)

done = synaps_scope.run(["sh", "-c", "grep ^0:: /proc/$$/cgroup"], capture_output=True, check=True)
unit = done.scope_unit
cgroup = done.stdout.decode().strip()
assert unit is not None and re.fullmatch(r"synaps-tool-[0-9a-f]{32}\.scope", unit), unit
assert cgroup.rsplit("/", 1)[-1] == unit, (cgroup, unit)
# Made by this user's own manager, in the subtree delegated to it.
assert f"/user@{os.getuid()}.service/" in cgroup, (cgroup, os.getuid())

doctor = subprocess.run([sys.executable, "-m", "synaps_scope", "doctor"], capture_output=True, text=True)
assert doctor.returncode == 0 and line in doctor.stdout.splitlines(), (doctor.returncode, doctor.stdout, doctor.stderr)
print(f"wheel: synaps_scope {version} ran its child in {unit} through {bundled}")
