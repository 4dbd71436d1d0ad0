"""The calm control of the warning before systemd-oomd acts (scenarios.sh calm): launches one
ordinary tool through the installed `synaps-scope run` (it holds 200 MB and keeps working over it,
and nothing runs away), watches its scope with the wheel's OomdWatch for SECONDS, and prints
"watched N warnings M pressure P cpu C gone G threads T idle I trigger W": N the scopes watched, M the warnings
given, P the highest full avg10 of the monitored unit's memory.pressure seen (sampled each second),
C the CPU time the library's watching thread used over the first half of the SECONDS (ms), G over
the second half, after a second tool's slice (synaps-gone.slice, given the pressure rule of its own)
was stopped and its cgroup removed under the live watch (issue 60,
item 5: the PSI trigger of a removed cgroup errs at once, every time, and was polled in a loop), T
how many such threads the process has, I the clock ticks it used in the 3 s after the watch was
closed (none is left), and W whether the kernel's PSI trigger on the monitored unit could be set
(`armed`, else why not); `gone-trigger` the same of synaps-gone.slice.
The warnings are taken both by a callback and by `async for`, which closing the
watch ends. On the way, a forked child makes and closes a watch of its own, and 100 watches made
and closed keep no descriptor and no thread.

    python3 calm.py STATE SECONDS
"""

import asyncio
import logging
import os
import subprocess
import sys
import time
import uuid
import warnings as python_warnings

import synaps_scope

# The fork below is the point: a host with threads that forks.
python_warnings.filterwarnings("ignore", message="This process .* is multi-threaded", category=DeprecationWarning)


class Triggers(logging.Handler):
    """The library's word on its PSI trigger: armed, or why not (its debug lines)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.said = "unsaid"
        self.gone = "unsaid"

    def emit(self, record):
        line = record.getMessage()
        if line.startswith("a PSI trigger on "):
            word = "armed"
        elif line.startswith("no PSI trigger on "):
            word = "none(" + line.split(": ", 1)[1].split(";")[0].replace(" ", "_") + ")"
        else:
            return
        # The slice that goes away is told apart: its trigger is the one that must not spin.
        if "/synaps-gone.slice" in line:
            self.gone = word
        else:
            self.said = word


triggers = Triggers()
logging.getLogger("synaps_scope").addHandler(triggers)
logging.getLogger("synaps_scope").setLevel(logging.DEBUG)

state, seconds = sys.argv[1], float(sys.argv[2])
work = "b = bytearray(200 << 20)\nwhile True:\n    for i in range(0, len(b), 4096): b[i] = (b[i] + 1) & 255\n    import time; time.sleep(0.5)\n"
tool = subprocess.Popen(["synaps-scope", "run", "--kind", "tool", "--", "python3", "-c", work])
deadline = time.monotonic() + 10
unit = None
while unit is None and time.monotonic() < deadline:
    with open(f"/proc/{tool.pid}/cgroup") as f:
        where = next(line[3:].strip() for line in f if line.startswith("0::"))
    if "/synaps-tool-" in where:
        unit = where.rsplit("/", 1)[1]
    time.sleep(0.05)
assert unit is not None, "the tool never ran in its scope"
# The second tool, in a slice of its own that goes away halfway (a unit name of the library's, so
# that a handle takes it).
gone_unit = f"synaps-tool-{uuid.uuid4().hex}.scope"
gone_tool = subprocess.Popen(
    ["systemd-run", "--user", "--scope", "--quiet", f"--unit={gone_unit}", "--slice=synaps-gone.slice", "sleep", "100000"]
)
deadline = time.monotonic() + 10
while not os.path.exists(f"/proc/{gone_tool.pid}/cgroup") or gone_unit not in open(f"/proc/{gone_tool.pid}/cgroup").read():
    assert time.monotonic() < deadline, "the second tool never ran in its scope"
    time.sleep(0.05)
# The slice is monitored under the pressure rule of its own, so that the watch sets a PSI trigger on
# it (Linux 6.4 and later let alice), the one that would spin once its cgroup is gone.
subprocess.run(
    ["systemctl", "--user", "set-property", "--runtime", "synaps-gone.slice", "ManagedOOMMemoryPressure=kill"],
    check=True,
)


def watcher_threads():
    """The library's watching threads of this process, and their CPU time in clock ticks."""
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as f:
            if f.read().strip() != "synaps-oomdwarn":
                continue
        with open(f"/proc/self/task/{task}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        found.append(int(fields[11]) + int(fields[12]))
    return found


async def calm():
    warnings = []
    iterated = []
    handles = [synaps_scope.ScopeHandle.from_manager(u) for u in (unit, gone_unit)]
    watch = synaps_scope.OomdWatch(handles, warnings.append)
    watched = len(watch.watched)

    async def consume():
        async for warning in watch:
            iterated.append(warning)

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.5)
    ticks_before = sum(watcher_threads())
    monitored = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/memory.pressure"
    highest = 0.0

    async def sample(window):
        nonlocal highest
        end = time.monotonic() + window
        while time.monotonic() < end:
            with open(monitored) as f:
                full = next(line for line in f if line.startswith("full"))
            highest = max(highest, float(full.split()[1].split("=")[1]))
            await asyncio.sleep(1)

    await sample(seconds / 2)
    ticks_half = sum(watcher_threads())
    subprocess.run(["systemctl", "--user", "stop", "synaps-gone.slice"], check=True)
    deadline = time.monotonic() + 10
    while os.path.exists("/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/synaps-gone.slice"):
        assert time.monotonic() < deadline, "the stopped slice's cgroup is still there"
        await asyncio.sleep(0.05)
    ticks_gone = sum(watcher_threads())
    await sample(seconds / 2)
    threads = watcher_threads()
    ms = 1000 / os.sysconf("SC_CLK_TCK")
    cpu_ms = (ticks_half - ticks_before) * ms
    gone_ms = (sum(threads) - ticks_gone) * ms
    # A host that forks: the child makes and closes a watch of its own (a thread of its own), never
    # waiting on the parent's, and ends within a bound.
    child = os.fork()
    if child == 0:
        try:
            synaps_scope.ScopeHandle.from_manager(unit).watch_oomd(print).close()
            os._exit(0)
        except BaseException:
            os._exit(1)
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        assert time.monotonic() < deadline, "the forked child's watch hung"
        await asyncio.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0, status
    # Watches made and closed over and over keep nothing: no descriptor, no thread. The first
    # opens what a process keeps while any handle lives (the subscription to oomd's signal), and
    # the library's pool keeps a connection to a manager for half a second after each question:
    # each count comes after the first watch, and after that half second.
    handle = synaps_scope.ScopeHandle.from_manager(unit)
    handle.watch_oomd(print).close()
    await asyncio.sleep(1.5)
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(100):
        handle.watch_oomd(print).close()
    await asyncio.sleep(1.5)
    kept = len(os.listdir("/proc/self/fd")) - fds
    assert kept <= 0, f"{kept} descriptors kept by 100 watches made and closed"
    assert len(watcher_threads()) == 1, watcher_threads()
    watch.close()
    # Closing ends every `async for` over the watch.
    await asyncio.wait_for(consumer, 5)
    assert len(iterated) == len(warnings), (iterated, warnings)
    # With no watch left, the thread does no work at all.
    closed = sum(watcher_threads())
    await asyncio.sleep(3)
    idle_ticks = sum(watcher_threads()) - closed
    return watched, warnings, highest, cpu_ms, gone_ms, threads, idle_ticks


watched, warnings, highest, cpu_ms, gone_ms, threads, idle_ticks = asyncio.run(calm())
tool.kill()
tool.wait()
gone_tool.wait()
print(
    f"watched {watched} warnings {len(warnings)} pressure {highest:.2f} cpu {cpu_ms:.0f} gone {gone_ms:.0f} threads {len(threads)} idle {idle_ticks} trigger {triggers.said} gone-trigger {triggers.gone}",
    *warnings,
    flush=True,
)
