#!/usr/bin/env python3
"""A bus standing for the system bus with a stand-in systemd-oomd on it, for the tests of the C,
Python and Node surfaces (the real oomd is in the virtual machine): starts a bare dbus-daemon with
its socket in DIRECTORY and oomd_standin.py on it, prints "ready ADDRESS" on stdout (the address
for DBUS_SYSTEM_BUS_ADDRESS), then hands each line on stdin ("kill CGROUP REASON", or "oomd-kill DIRECTORY CGROUP REASON BUSY_MS"
for oomd's whole kill) to the stand-in, which sends oomd's Killed(CGROUP, REASON) signal, and
prints "sent" once it is out. Both end when
stdin closes. With SECONDS, the address printed is that of slow_manager.py in front of the bus,
which holds the first question on oomd's introspection SECONDS (a system bus slow to answer a
subscription's set-up, as one amid the thrash oomd acts on was seen to be).

    oomd_bus.py DIRECTORY [SECONDS]
"""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing left behind in the repository's tree

directory = sys.argv[1]
socket_path = os.path.join(directory, "system_bus")
address = f"unix:path={socket_path}"
slow = None
bus = subprocess.Popen(
    ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
try:
    deadline = time.monotonic() + 10
    while not os.path.exists(socket_path):
        if time.monotonic() > deadline:
            sys.exit("oomd_bus.py: dbus-daemon made no socket in 10 s")
        time.sleep(0.01)
    standin = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oomd_standin.py"), address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert standin.stdin is not None and standin.stdout is not None
    ready = standin.stdout.readline()
    if not ready.startswith("ready "):
        sys.exit(f"oomd_bus.py: the stand-in did not start: {ready!r}")
    if len(sys.argv) > 2:
        slow_path = os.path.join(directory, "slow_system_bus")
        slow = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_manager.py"),
             "--listen", slow_path, "--to", socket_path, "--needle", "org.freedesktop.DBus.Introspectable",
             "--delay", sys.argv[2], "--first-only"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert slow.stdout is not None
        if slow.stdout.readline().strip() != "ready":
            sys.exit("oomd_bus.py: slow_manager.py did not start")
        address = f"unix:path={slow_path}"
    print(f"ready {address}", flush=True)
    for line in sys.stdin:
        standin.stdin.write(line)
        standin.stdin.flush()
        print(standin.stdout.readline().strip(), flush=True)
    standin.kill()
    standin.wait()
finally:
    if slow is not None:
        slow.kill()
        slow.wait()
    bus.kill()
    bus.wait()
