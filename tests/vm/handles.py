"""Scope handles against real controllers (memory, pids), as alice with the installed wheel in the
VM: stats() returns the figures the cgroup's own files hold, and ending() tells a handle's kill
and a tool that ended on its own apart, asked only after the exit status is in and the manager
has collected the scope, with what each answer rests on. Against the real manager, kernel and
systemd-oomd (which sends its Killed signal here, 252 and later): a clean-up kill of an empty
scope is no kill; a mark a tool forged is not oomd's; the kernel's OOM kills in scopes the
manager collects at once are all counted; and what the subscription to oomd's signal costs."""

import os
import signal
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
assert (ending.kind, ending.evidence, ending.forgeable) == ("handle-kill", "own-kill", False), ending
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
assert (ending.kind, ending.kernel_oom_kills, ending.evidence) == ("on-its-own", 0, "memory-events"), ending
ok(f"a tool that exited 7 on its own: {ending}")


def scoped(argv: "list[str]", env: "dict[str, str] | None" = None) -> "tuple[synaps_scope.Popen, ScopeHandle]":
    """argv in a scope of its own, printing "ready" first, and a handle on it."""
    proc = synaps_scope.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.scope_unit is not None and proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    return proc, ScopeHandle.from_pid(proc.scope_unit, proc.pid)


def manager_pid() -> int:
    """alice's own user manager, which she may stop and continue."""
    out = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", f"user@{os.getuid()}.service"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


# A daemon reaps its tool, then kills the scope to sweep up, in the moment before the manager
# collects it (held here by stopping alice's own manager): the kill finds nobody.
proc, clean = scoped(["sh", "-c", "echo ready; read x; exit 0"])
manager = manager_pid()
os.kill(manager, signal.SIGSTOP)
try:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert os.path.exists(clean.cgroup), "the stopped manager left the scope"
    swept = clean.kill(5.0)
finally:
    os.kill(manager, signal.SIGCONT)
assert swept == [], swept
wait_collected(clean)
ending = clean.ending()
assert (ending.kind, ending.evidence) == ("on-its-own", "memory-events"), ending
ok(f"a clean-up kill of the empty scope after the tool's exit 0 found nobody: {ending}")

# A tool writes oomd's marks on its own cgroup and exits 0. systemd-oomd runs here and sends its
# Killed signal: no signal came, so the marks are not oomd's. The answer waits for the signal no
# longer than oomd takes between its mark and its signal (500 ms), whatever the caller's timeout,
# and is kept: the next ask gets it at once.
threads_before = [t for t in os.listdir("/proc/self/task")]
proc, forged = scoped(["sh", "-c", "echo ready; read x; exit 0"])
signal_threads = [t for t in os.listdir("/proc/self/task")
                  if open(f"/proc/self/task/{t}/comm").read().strip() == "synaps-oomd-sig"]
assert len(signal_threads) == 1, "no subscription to oomd's signal, with systemd-oomd running"
for mark in ("user.oomd_ooms", "user.oomd_kill"):
    os.setxattr(forged.cgroup, mark, b"1")
assert proc.stdin is not None
proc.stdin.close()
assert proc.wait(timeout=10) == 0
wait_collected(forged)
asked = time.monotonic()
ending = forged.ending(timeout=5.0)
waited = time.monotonic() - asked
assert (ending.kind, ending.evidence) == ("on-its-own", "memory-events"), ending
assert waited < 0.75, f"the answer waited {waited:.2f} s of a 5 s timeout for a signal"
asked_again = time.monotonic()
assert forged.ending(timeout=5.0) == ending
again = time.monotonic() - asked_again
assert again < 0.05, f"the answer was not kept: the next ask took {again:.3f} s"
ok(f"oomd's marks forged by the tool, with oomd's signal heard: {ending} (waited {waited:.2f} s of a 5 s timeout for a signal; the next ask {again * 1000:.1f} ms)")

# What the subscription costs: one thread and one system bus connection while a handle lives.
fds_with = len(os.listdir("/proc/self/fd"))
del forged, clean, handle, quiet_handle
deadline = time.monotonic() + 10
while any(open(f"/proc/self/task/{t}/comm").read().strip() == "synaps-oomd-sig"
          for t in os.listdir("/proc/self/task") if os.path.exists(f"/proc/self/task/{t}")):
    assert time.monotonic() < deadline, "the subscription outlived the last handle"
    time.sleep(0.01)
fds_without = len(os.listdir("/proc/self/fd"))
ok(f"the subscription to oomd's signal: 1 thread and {fds_with - fds_without} descriptor(s) while a handle lived, none after the last")

# The kernel's OOM killer inside a slice's MemoryMax=, in scopes the manager collects the moment
# they end: every count is read before the cgroup goes (asked after collection, each time). The
# tool outgrows the slice once its handle is made, as a daemon's tool does after its first moments.
units = os.path.expanduser("~/.config/systemd/user")
os.makedirs(units, exist_ok=True)
with open(os.path.join(units, "synaps-oom.slice"), "w") as f:
    f.write("[Slice]\nMemoryMax=48M\nMemorySwapMax=0\n")
subprocess.run(["systemctl", "--user", "daemon-reload"], check=True)
config = os.path.expanduser("~/synaps-oom.config")
with open(config, "w") as f:
    f.write("tool_scope_slice = synaps-oom.slice\n")
env = {**os.environ, "SYNAPS_CONFIG": config}
rounds = 10
for round in range(rounds):
    proc, oom = scoped(["python3", "-c", "import sys; print('ready', flush=True); sys.stdin.readline(); b = bytearray(256 << 20)"], env=env)
    assert "/synaps-oom.slice/" in oom.cgroup, oom.cgroup
    assert proc.stdin is not None
    # The first round's scope is swept with a kill once the tool is gone, before the manager
    # collects it (held by stopping alice's manager): the kernel's kill is still what is told.
    if round == 0:
        os.kill(manager, signal.SIGSTOP)
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == -9, proc.returncode
        if round == 0:
            assert oom.kill(5.0) == [], "the sweep found a process"
    finally:
        if round == 0:
            os.kill(manager, signal.SIGCONT)
    wait_collected(oom)
    ending = oom.ending()
    assert (ending.kind, ending.evidence) == ("kernel-oom", "memory-events") and ending.kernel_oom_kills >= 1, (round, ending)
ok(f"the kernel's OOM killer in {rounds} of {rounds} scopes collected at once (the first swept with a kill that found nobody): each told exactly (memory.events, read before the cgroup went or told from the parent slice's): {ending}")
