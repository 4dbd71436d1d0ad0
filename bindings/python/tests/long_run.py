"""The long run (issue 13): a million wraps and ten thousand probes in one process, RSS sampled
every 100,000 wraps; over the second half it must stay flat within 8 MB (a leak of 16 bytes a
wrap would exceed that). Run by scripts/long-run.sh: python bindings/python/tests/long_run.py"""

from __future__ import annotations

import gc
import sys
import time

import synaps_scope

WRAPS = 1_000_000
PROBES = 10_000
MARGIN_MB = 8.0


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> int:
    launcher = synaps_scope.launcher_for_env()
    if launcher is None:
        print("python long run FAILED: the long run needs a manager that scopes launches", file=sys.stderr)
        return 1
    started = time.monotonic()
    samples = []
    for i in range(1, WRAPS + 1):
        if launcher.wrap(["sh", "-c", "exit 0", str(i)]).unit is None:
            print(f"python long run FAILED: wrap {i} left the argv unwrapped", file=sys.stderr)
            return 1
        if i % 100_000 == 0:
            gc.collect()
            samples.append(rss_mb())
    before = rss_mb()
    for i in range(1, PROBES + 1):
        if synaps_scope.launcher_for_env() is None:
            print(f"python long run FAILED: probe {i} went direct", file=sys.stderr)
            return 1
    gc.collect()
    after = rss_mb()
    half = samples[len(samples) // 2 - 1 :]
    growth = max(half) - half[0]
    print(f"python long run: {WRAPS} wraps, RSS every 100,000 (MB): {' '.join(f'{s:.1f}' for s in samples)}")
    print(
        f"python long run: second half grew {growth:.1f} MB (margin {MARGIN_MB:.0f}); {PROBES} probes: "
        f"{before:.1f} -> {after:.1f} MB; {time.monotonic() - started:.0f} s"
    )
    if growth >= MARGIN_MB or after - before >= MARGIN_MB:
        print("python long run FAILED: memory grew past the margin", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
