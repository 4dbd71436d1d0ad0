#!/usr/bin/env python3
"""Stops (SIGSTOP) the user manager listening on $XDG_RUNTIME_DIR/systemd/private, found by its
peer credentials, and prints its pid: for tests that hold an empty scope uncollected for a moment,
as a busy manager does. The test continues it (SIGCONT); should the test die first, a watchdog
left behind continues it after SECONDS (default 5), so that no manager stays stopped.

    stop_manager.py [SECONDS]
"""
import os
import signal
import socket
import struct
import subprocess
import sys

seconds = sys.argv[1] if len(sys.argv) > 1 else "5"
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.connect(os.path.join(os.environ["XDG_RUNTIME_DIR"], "systemd", "private"))
    pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
subprocess.Popen(
    ["sh", "-c", f"sleep {seconds}; kill -CONT {pid}"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,
)
os.kill(pid, signal.SIGSTOP)
print(pid)
