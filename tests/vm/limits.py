"""A tool for the VM's limits case, run in the scope it reports on (`synaps-scope run -p ...`):

    python3 limits.py max           prints its scope's memory.max, then grows by 8 MB every 20 ms
                                    until the kernel's OOM killer ends it
    python3 limits.py high MB       grows to MB megabytes, then prints its scope's memory.high and
                                    the `high` count of its memory.events, and exits 0
    python3 limits.py tasks N       forks N children that sleep; prints how many forks succeeded
                                    and the error of the first that did not
    python3 limits.py spin SECONDS  spins for SECONDS of wall time and prints the CPU time its scope
                                    used (cpu.stat usage_usec) over that wall time
"""

import os
import sys
import time

STEP = 8 << 20


def own(name: str) -> str:
    with open("/proc/self/cgroup") as f:
        path = next(line[3:].strip() for line in f if line.startswith("0::"))
    with open(f"/sys/fs/cgroup{path}/{name}") as f:
        return f.read()


def field(text: str, key: str) -> int:
    return next(int(line.split()[1]) for line in text.splitlines() if line.split()[0] == key)


what = sys.argv[1]
if what == "max":
    print(f"memory.max {own('memory.max').strip()}", flush=True)
    chunks = []
    while True:
        chunks.append(bytearray(b"\x01") * STEP)
        time.sleep(0.02)
elif what == "high":
    chunks = []
    while len(chunks) * STEP < int(sys.argv[2]) << 20:
        chunks.append(bytearray(b"\x01") * STEP)
    print(f"memory.high {own('memory.high').strip()} high {field(own('memory.events'), 'high')}", flush=True)
elif what == "tasks":
    children, failed = [], "none"
    for _ in range(int(sys.argv[2])):
        try:
            pid = os.fork()
        except OSError as e:
            failed = type(e).__name__
            break
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    print(f"forks {len(children)} then {failed} pids.max {own('pids.max').strip()}", flush=True)
    for pid in children:
        os.waitpid(pid, 0)
elif what == "spin":
    seconds = float(sys.argv[2])
    before, start = field(own("cpu.stat"), "usage_usec"), time.monotonic()
    while time.monotonic() - start < seconds:
        pass
    used = field(own("cpu.stat"), "usage_usec") - before
    wall = time.monotonic() - start
    print(f"cpu {used / 1e6 / wall:.2f} cpu.max {own('cpu.max').strip()}", flush=True)
else:
    sys.exit(f"usage: {__doc__}")
