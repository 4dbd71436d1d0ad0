"""A runaway tool for the VM scenarios: grows by 8 MB every 20 ms, then keeps touching every page
it holds (so that, beyond RAM, it thrashes through swap) until killed.

    python3 hog.py MB           grows to MB megabytes
    python3 hog.py swap:PCT     grows until PCT % of swap holds its own pages: past RAM, so it
                                thrashes, yet never so far that the kernel's OOM killer would act
                                before oomd. Its own pages, not swap in use: what an earlier case
                                left in swap (other processes' pages, pushed out and never touched
                                since) would otherwise stop it before it thrashes at all.
"""

import os
import sys
import time

STEP = 8 << 20
PAGE = 4096


def kilobytes(path: str, key: str) -> int:
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def own_swap_percent() -> float:
    return 100.0 * kilobytes("/proc/self/status", "VmSwap") / max(kilobytes("/proc/meminfo", "SwapTotal"), 1)


limit = sys.argv[1]
chunks = []
# SYNAPS_VM_GO: a file the daemon makes once its watchers watch; the runaway grows only then, within
# 300 s (daemon.py says why).
go = os.environ.get("SYNAPS_VM_GO")
go_by = time.monotonic() + 300
while go and not os.path.exists(go) and time.monotonic() < go_by:
    time.sleep(0.05)


def grown() -> bool:
    if limit.startswith("swap:"):
        return own_swap_percent() >= float(limit[5:])
    return len(chunks) * STEP >= int(limit) << 20


while not grown():
    chunks.append(bytearray(b"\x01") * STEP)  # filled, so every page is really there
    time.sleep(0.02)
print(f"hog: holding {len(chunks) * STEP >> 20} MB", flush=True)
turn = 0
while True:
    turn = (turn + 1) & 0xFF
    for chunk in chunks:
        chunk[::PAGE] = bytes([turn]) * len(range(0, STEP, PAGE))
