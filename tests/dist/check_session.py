"""Run by a normal user in a login session of a booted release (scripts/test-session.sh), from a
venv that installed the wheel: the module's launches land in scopes of the user's own manager
(user@UID.service), and its scope handles work in the user's delegated subtree, refuse the
caller's own scope, and refuse another user's scope with a clear error.
Usage: python check_session.py C-TARBALL-PREFIX OTHER-USERS-PID (Python 3.9+)"""

import asyncio
import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time

import synaps_scope
from synaps_scope import NotOurScopeError, ScopeHandle

prefix, other_pid = sys.argv[1], int(sys.argv[2])
uid = os.getuid()
assert uid != 0, "run this as a normal user"
own_before = open("/proc/self/cgroup").read()
unit_re = r"synaps-tool-[0-9a-f]{32}\.scope"
delegated = f"/user.slice/user-{uid}.slice/user@{uid}.service/app.slice/"


def ok(what: str) -> None:
    print(f"ok: {what}", flush=True)


def in_own_scope(cgroup: str, unit: "str | None") -> None:
    assert unit is not None and re.fullmatch(unit_re, unit), unit
    assert cgroup.strip() == f"0::{delegated}{unit}", (cgroup, unit)


where = ["sh", "-c", "grep ^0:: /proc/$$/cgroup"]

done = synaps_scope.run(where, capture_output=True, check=True)
in_own_scope(done.stdout.decode(), done.scope_unit)
ok(f"synaps_scope.run: {done.scope_unit} under user@{uid}.service")

with synaps_scope.Popen(where, stdout=subprocess.PIPE) as process:
    out, _ = process.communicate(timeout=30)
in_own_scope(out.decode(), process.scope_unit)
ok(f"synaps_scope.Popen: {process.scope_unit}")


async def async_launch() -> "tuple[bytes, str | None]":
    child = await synaps_scope.create_subprocess_exec(*where, stdout=asyncio.subprocess.PIPE)
    stdout, _ = await child.communicate()
    return stdout, child.scope_unit


out, unit = asyncio.run(async_launch())
in_own_scope(out.decode(), unit)
ok(f"synaps_scope.create_subprocess_exec: {unit}")


def take_terminal() -> None:
    """In the child, after setsid: the PTY on stdin becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


# A login shell on a real PTY, as a terminal starts one: a new session whose controlling terminal
# is the PTY, and argv[0] "-bash".
leader, follower = pty.openpty()
with synaps_scope.Popen(
    ["-bash"],
    executable="/bin/bash",
    stdin=follower,
    stdout=follower,
    stderr=follower,
    start_new_session=True,
    preexec_fn=take_terminal,
) as shell:
    os.close(follower)
    os.write(leader, b'echo "argv0=[$0] tty=[$(tty)] sid=[$(ps -o sid= $$)]"; grep ^0:: /proc/$$/cgroup; exit 7\n')
    seen = b""
    deadline = time.monotonic() + 30
    # Everything the shell writes, until it has exited and the PTY reads as closed (EIO).
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert shell.wait(timeout=30) == 7, seen
os.close(leader)
text = seen.decode(errors="replace")
assert "argv0=[-bash]" in text, text
assert re.search(r"tty=\[/dev/pts/\d+\]", text), text
assert re.search(rf"sid=\[ *{shell.pid}\]", text), (text, shell.pid)
assert f"0::{delegated}{shell.scope_unit}" in text, (text, shell.scope_unit)
ok(f"a login shell on a PTY kept argv[0] -bash in {shell.scope_unit}")

# A tree with escapees: two children leave the process group and session with setsid.
tree = synaps_scope.Popen(
    ["sh", "-c", "setsid sleep 300 & setsid sh -c 'sleep 300 & wait' & sleep 300 & wait"],
    stdin=subprocess.DEVNULL,
)
assert tree.scope_unit is not None
deadline = time.monotonic() + 10
while True:
    try:
        handle = ScopeHandle.from_pid(tree.scope_unit, tree.pid)
        break
    except synaps_scope.NotInScopeError:
        # The launcher program is still making the scope it will exec the command in.
        assert time.monotonic() < deadline, "the tree never reached its scope"
        time.sleep(0.01)
assert handle.cgroup.endswith(f"{delegated}{tree.scope_unit}"), handle.cgroup
deadline = time.monotonic() + 10
while len(handle.pids()) < 5 and time.monotonic() < deadline:
    time.sleep(0.05)
pids = handle.pids()
assert len(pids) >= 5, pids  # sh, two setsid escapees (one with a child), a sleep
sessions = {os.getsid(p) for p in pids if os.path.exists(f"/proc/{p}")}
assert len(sessions) >= 2, f"no setsid escapee among {pids}: sessions {sessions}"
stats = handle.stats()
# This machine's cgroup2 tree has no memory or pids controller delegated, so those read None;
# said, not skipped: where the controllers are enabled they are numbers.
controllers = open(os.path.join(handle.cgroup, "cgroup.controllers")).read().split()
if "memory" in controllers:
    assert stats.memory_current is not None and stats.memory_current > 0, stats
else:
    assert stats.memory_current is None, stats
    print("note: no memory controller in this cgroup tree (this machine binds it to cgroup v1): memory figures are not shown")
killed = handle.kill(10.0)
assert set(pids) <= set(killed), (pids, killed)
assert handle.pids() == [], handle.pids()
PF_EXITING = 0x4


def dead(pid: int) -> bool:
    """Gone, a zombie, or in its exit. The kernel takes a killed process out of its cgroup during
    its exit, before it is a zombie, so an empty scope may still show one running its exit
    (state R or D, with PF_EXITING in its flags); it runs no code of its own again."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    state, flags = fields[0], int(fields[6])
    return state in ("Z", "X") or bool(flags & PF_EXITING)


assert all(dead(p) for p in pids), pids
tree.wait(timeout=10)
assert open("/proc/self/cgroup").read() == own_before, "the caller's cgroup changed"
ok(f"ScopeHandle: {len(pids)} processes in {len(sessions)} sessions listed and killed, the caller untouched")


def scoped_handle(popen: "synaps_scope.Popen") -> ScopeHandle:
    """A handle on the scope of `popen`, once the launcher program has made it."""
    assert popen.scope_unit is not None
    deadline = time.monotonic() + 10
    while True:
        try:
            return ScopeHandle.from_pid(popen.scope_unit, popen.pid)
        except synaps_scope.NotInScopeError:
            assert time.monotonic() < deadline, "the command never reached its scope"
            time.sleep(0.01)


# How a scope ended, and which oomd rule, asked of both managers: alice's app.slice is set to the
# swap rule, and no system unit has a rule (no systemd-oomd in this root). This script plays oomd
# (a stand-in: its mark, then a kill). With the system manager answering over the real system bus
# the rule is swap; with the system bus unreachable, the user manager's half names none.
subprocess.run(["systemctl", "--user", "set-property", "--runtime", "app.slice", "ManagedOOMSwap=kill"], check=True)
try:
    victim = synaps_scope.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    handle = scoped_handle(victim)
    # A second handle of its own: an answer once given is kept by the handle that gave it.
    other = scoped_handle(victim)
    os.setxattr(handle.cgroup, "user.oomd_ooms", b"1")
    with open(os.path.join(handle.cgroup, "cgroup.kill"), "w") as kill:
        kill.write("1")
    victim.wait(timeout=10)
    deadline = time.monotonic() + 10
    while os.path.exists(handle.cgroup):
        assert time.monotonic() < deadline, "the manager did not collect the scope"
        time.sleep(0.01)
    unreachable = {**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system_bus_socket"}
    both = handle.ending()
    half = other.ending(env=unreachable)
    kept = handle.ending(env=unreachable)
finally:
    subprocess.run(["systemctl", "--user", "set-property", "--runtime", "app.slice", "ManagedOOMSwap=auto"], check=True)
assert (both.kind, both.oomd_rule, both.evidence, both.forgeable) == ("oomd", "swap", "oomd-mark", True), both
assert (half.kind, half.oomd_rule, half.evidence) == ("oomd", None, "oomd-mark"), half
assert kept == both, f"the answer given was not kept: {kept}"
ok(f"an oomd mark (a stand-in's) after collection: {both}; with the system manager unreachable, no rule: {half}; asked again, the first answer kept")

# The caller's own scope: this script run again inside a daemon scope asks for its own.
probe = (
    "import os, synaps_scope\n"
    "try:\n"
    "    synaps_scope.ScopeHandle.of_process(os.getpid())\n"
    "except synaps_scope.NotOurScopeError as e:\n"
    "    print('refused:', e)\n"
    "else:\n"
    "    print('ACCEPTED')\n"
)
own = subprocess.run(
    [f"{prefix}/bin/synaps-scope", "run", "--kind", "daemon", "--", sys.executable, "-c", probe],
    capture_output=True,
    text=True,
    timeout=60,
)
assert own.returncode == 0 and own.stdout.startswith("refused:") and "holds this process" in own.stdout, own
ok(f"the caller's own scope is refused: {own.stdout.strip()}")

# Another user's scope: readable, never this user's to kill.
bob_cgroup = open(f"/proc/{other_pid}/cgroup").read().split("0::", 1)[1].strip()
bob_unit = bob_cgroup.rsplit("/", 1)[-1]
assert "/user@1001.service/" in bob_cgroup, bob_cgroup
for ask in (lambda: ScopeHandle.of_process(other_pid), lambda: ScopeHandle.from_pid(bob_unit, other_pid)):
    try:
        ask()
    except NotOurScopeError as e:
        assert isinstance(e, PermissionError)
        assert f"belongs to uid 1001, not to this user (uid {uid})" in str(e), str(e)
        refusal = str(e)
    else:
        raise AssertionError(f"a handle on bob's scope {bob_unit} was handed out")
assert os.path.exists(f"/proc/{other_pid}"), "bob's command died"
ok(f"another user's scope is refused: {refusal}")
