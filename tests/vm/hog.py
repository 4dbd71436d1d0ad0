"""A runaway tool for the VM scenarios: grows by 8 MB every 20 ms up to TARGET_MB, then keeps
touching every page it holds (so that, beyond RAM, it thrashes through swap) until killed.

    python3 hog.py TARGET_MB
"""

import sys
import time

STEP = 8 << 20
PAGE = 4096

target = int(sys.argv[1]) << 20
chunks = []
while len(chunks) * STEP < target:
    chunks.append(bytearray(b"\x01") * STEP)  # filled, so every page is really there
    time.sleep(0.02)
print(f"hog: holding {len(chunks) * STEP >> 20} MB", flush=True)
turn = 0
while True:
    turn = (turn + 1) & 0xFF
    for chunk in chunks:
        chunk[::PAGE] = bytes([turn]) * len(range(0, STEP, PAGE))
