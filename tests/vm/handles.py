"""Scope handles against real controllers (memory, pids), as alice with the installed wheel in the
VM: stats() returns the figures the cgroup's own files hold, and ending() tells a handle's kill
and a tool that ended on its own apart, asked only after the exit status is in and the manager
has collected the scope."""

import os
import subprocess
import time

import synaps_scope
from synaps_scope import ScopeHandle


def ok(text: str) -> None:
    print(f"ok: {text}", flush=True)


# 64 MB held and three processes (two sleeps, and python, which sh became) in a tool's scope.
tool = synaps_scope.Popen(
    ["sh", "-c", "sleep 300 & sleep 300 & exec python3 -c 'import time; b = bytearray(b\"x\") * (64 << 20); print(\"held\", flush=True); time.sleep(300)'"],
    stdout=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
)
assert tool.scope_unit is not None, "not scoped"
assert tool.stdout is not None
assert tool.stdout.readline().strip() == b"held"
handle = ScopeHandle.from_pid(tool.scope_unit, tool.pid)
controllers = open(os.path.join(handle.cgroup, "cgroup.controllers")).read().split()
assert {"memory", "pids"} <= set(controllers), controllers


def read(name: str) -> int:
    return int(open(os.path.join(handle.cgroup, name)).read())


stats = handle.stats()
memory_file, pids_file = read("memory.current"), read("pids.current")
assert stats.memory_current is not None and abs(stats.memory_current - memory_file) < (4 << 20), (stats, memory_file)
assert stats.memory_current >= 64 << 20, stats
assert stats.pids_current == pids_file == 3, (stats, pids_file)
peak = stats.memory_peak
if os.path.exists(os.path.join(handle.cgroup, "memory.peak")):
    assert peak is not None and peak >= stats.memory_current, stats
    peak_text = f", memory.peak {peak >> 20} MB"
else:
    assert peak is None, stats  # memory.peak came with Linux 5.19
    peak_text = ", no memory.peak (Linux < 5.19): None"
ok(f"stats() of {tool.scope_unit}: memory.current {stats.memory_current >> 20} MB (file: {memory_file >> 20} MB), pids.current {stats.pids_current} (file: {pids_file}){peak_text}")
killed = handle.kill(10.0)
assert len(killed) == 3, killed
tool.wait(timeout=10)


def wait_collected(handle: ScopeHandle) -> None:
    deadline = time.monotonic() + 10
    while os.path.exists(handle.cgroup):
        assert time.monotonic() < deadline, "the manager never collected the scope"
        time.sleep(0.01)


wait_collected(handle)
after = handle.stats()
assert after.memory_current is None and after.pids_current is None, after
ok(f"kill() emptied it ({len(killed)} processes); stats() of the collected scope: {after}")
ending = handle.ending()
assert ending.kind == "handle-kill", ending
ok(f"ending() after the tool's exit status ({tool.returncode}) and the scope's collection: {ending}")

quiet = synaps_scope.Popen(["sh", "-c", "sleep 0.5; exit 7"], stdin=subprocess.DEVNULL)
assert quiet.scope_unit is not None
deadline = time.monotonic() + 10
while True:
    try:
        quiet_handle = ScopeHandle.from_pid(quiet.scope_unit, quiet.pid)
        break
    except synaps_scope.NotInScopeError:
        assert time.monotonic() < deadline, "the tool never reached its scope"
        time.sleep(0.01)
assert quiet_handle.ending().kind == "running"
assert quiet.wait(timeout=10) == 7
wait_collected(quiet_handle)
ending = quiet_handle.ending()
assert ending.kind == "on-its-own" and ending.kernel_oom_kills == 0, ending
ok(f"a tool that exited 7 on its own: {ending}")
