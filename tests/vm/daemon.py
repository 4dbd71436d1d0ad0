"""A toy agent daemon for the VM scenarios. Launches two tool commands the way an agent daemon
does, each through the installed command line's `synaps-scope run --kind tool`: an idle one and
the runaway (hog.py). Then it beats a heartbeat into STATE/heartbeat until it is killed, and once
the runaway has ended it launches one more tool, to show that it still works.

    python3 daemon.py STATE HOG scoped|direct|leaf (HOG: what hog.py takes, MB or swap:PCT)

leaf: scoped, but the runaway makes a cgroup below its scope (leaf.sh), moves there and gives it
the memory controller, as a tool that runs its own sandbox does.

STATE/daemon, STATE/idle, STATE/hog: "PID CGROUP" of the daemon and of each tool, once the tool's
cgroup has settled (the launcher program moves itself into its scope before it execs the tool).
With SYNAPS_VM_WAIT=1 the runaway is launched through `synaps-scope run --wait`, and the command
line's stderr goes to STATE/hog.stderr, each line after the moment it came (time.monotonic()).
STATE/after: the cgroup of the tool launched after the runaway ended, and its exit status.
STATE/ending: scoped, how the runaway's scope ended, as a handle made while it ran tells it once
its exit status is in (the installed wheel's ScopeHandle.ending): "KIND RULE KILLS EVIDENCE
MESSAGE".
STATE/warnings: scoped, each warning before systemd-oomd acts that the daemon's one watch on both
tools' scopes gave (the wheel's OomdWatch), one per line: "SECONDS UNIT RULE SURE FIGURE LIMIT
HELD DURATION", SECONDS on time.monotonic(); STATE/watch: what the watch said when made.
STATE/killed_at: time.monotonic() when the runaway's scope was seen killed (the library's reading
of oomd's mark, else the daemon's seeing its exit), for the warnings' lead time.
STATE/warnings-c, STATE/warnings-node, STATE/warnings-python: the same watch made from C
(watch-c), from Node (watch.js), where scripts/test-vm.sh staged them, and from Python's asyncio
(watch.py: `async for`), each warning as "SECONDS UNIT RULE SURE FIGURE LIMIT"; STATE/watchers-launched: when each was launched; STATE/watchers:
each one's exit status once the runaway's end made the daemon stop them; STATE/go: when the
runaway was let grow, once every watcher watched (or 120 s passed: "without" names who did not);
STATE/watchers-memory:
how much of each was in swap and how much resident as the daemon saw the runaway end.
STATE/trigger: the library's word on the kernel's PSI trigger on each monitored unit: set, or why not.
STATE/oomd_delay: where oomd killed it, the milliseconds from the library's reading of oomd's mark
(written before the kill) to its hearing oomd's Killed signal (sent after it), from the library's
own debug lines (the signal on its way is caught up with by a ping oomd answers after it).
STATE/debug: the library's debug lines on oomd (its marks read, its signal heard, a subscription
that could not be made), each after its moment (time.monotonic()), for a failure to show.
"""

import atexit
import logging
import os
import subprocess
import sys
import threading
import time

try:
    import synaps_scope
except ImportError:  # scripts/oomd-demo.sh stages only the command line
    synaps_scope = None

state, hog_limit, mode = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))


def cgroup(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        return next(line[3:].strip() for line in f if line.startswith("0::"))


def record_line(name, text):
    """Adds `text` as a line to STATE/NAME."""
    with open(os.path.join(state, name), "a") as f:
        f.write(text + "\n")


def record(name, text):
    with open(os.path.join(state, name + ".tmp"), "w") as f:
        f.write(text + "\n")
    os.rename(os.path.join(state, name + ".tmp"), os.path.join(state, name))


def stamped(stream, name):
    """Copies the lines of `stream` into STATE/NAME.stderr as they come, each after the moment
    (time.monotonic()) it came."""
    with open(os.path.join(state, name + ".stderr"), "a") as out:
        for line in stream:
            out.write(f"{time.monotonic():.3f} {line}")
            out.flush()


def launch(name, argv, wait=False):
    """The tool, through `synaps-scope run` (`--wait`: as a child of the command line, which waits
    outside the tool's scope and tells on stderr, into STATE/NAME.stderr, what befell it)."""
    run = ["synaps-scope", "run", "--wait"] if wait else ["synaps-scope", "run"]
    tool = subprocess.Popen([*run, "--kind", "tool", "--", *argv], stderr=subprocess.PIPE if wait else None, text=True)
    if wait:
        threading.Thread(target=stamped, args=(tool.stderr, name), daemon=True).start()
    # The process in the tool's scope: the command line's child when it waits, else itself.
    deadline = time.monotonic() + 10
    pid = tool.pid
    while wait and pid == tool.pid and time.monotonic() < deadline:
        try:
            with open(f"/proc/{tool.pid}/task/{tool.pid}/children") as f:
                pid = int(f.read().split()[0])
        except (IndexError, OSError):
            time.sleep(0.01)
    # Scoped, the tool's cgroup is its own scope once the launcher program has made it; direct, it
    # is the daemon's from the start.
    where = cgroup(pid)
    while mode != "direct" and "/synaps-tool-" not in where and time.monotonic() < deadline:
        time.sleep(0.05)
        where = cgroup(pid)
    # The scope's own cgroup, whether or not the tool has moved below it yet.
    where = where[: where.index(".scope") + len(".scope")] if "/synaps-tool-" in where else where
    record(name, f"{pid} {where}")
    return tool


def paged(pid):
    """How much of process `pid`'s memory is in swap and how much resident, as its status says."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return f"swap {fields['VmSwap'].strip()} resident {fields['VmRSS'].strip()}"
    except (OSError, KeyError):
        return "gone"


class OomdTimes(logging.Handler):
    """When the library first read oomd's mark, and first heard its signal (time.monotonic)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.mark = None
        self.signal = None

    def emit(self, record):
        line = record.getMessage()
        if "oomd" in line or line.startswith("marks read on "):
            record_line("debug", f"{time.monotonic():.3f} {line}")
        if line.startswith("a PSI trigger on ") or line.startswith("no PSI trigger on "):
            record_line("trigger", line)
        if self.mark is None and line.startswith("marks read on ") and "user.oomd_ooms" in line:
            self.mark = time.monotonic()
        elif self.signal is None and line.startswith("systemd-oomd killed "):
            self.signal = time.monotonic()


oomd_times = OomdTimes()
logging.getLogger("synaps_scope").addHandler(oomd_times)
logging.getLogger("synaps_scope").setLevel(logging.DEBUG)

record("daemon", f"{os.getpid()} {cgroup(os.getpid())}")
# The runaway grows only once the watchers below watch (hog.py waits for STATE/go): a daemon's
# watch is in place before its tool runs away. Started beside a runaway already thrashing, Node's
# watcher took 62 s to write its first line on Debian 12 under TCG, after oomd's kill.
go = os.path.join(state, "go")
os.environ["SYNAPS_VM_GO"] = go
# A daemon that fails before its watchers watch still lets the runaway go: the case then fails on
# the daemon's own error (STATE/log), not on a runaway that waits.
atexit.register(lambda: os.path.exists(go) or record("go", f"{time.monotonic():.3f} the daemon ended first"))
idle = launch("idle", ["sleep", "100000"])
hog_argv = ["python3", os.path.join(here, "hog.py"), hog_limit]
if mode == "leaf":
    hog_argv = ["sh", os.path.join(here, "leaf.sh"), *hog_argv]
# SYNAPS_VM_WAIT=1: the runaway through `run --wait`, whose line on stderr warns before oomd acts.
hog = launch("hog", hog_argv, wait=os.environ.get("SYNAPS_VM_WAIT") == "1")
# Made from the unit's name (the tool may already be in its cgroup below the scope).
unit = open(os.path.join(state, "hog")).read().split()[1].rsplit("/", 1)[1]
handle = synaps_scope.ScopeHandle.from_manager(unit) if synaps_scope and mode != "direct" else None
watch = None
watchers = []
if handle is not None:
    idle_unit = open(os.path.join(state, "idle")).read().split()[1].rsplit("/", 1)[1]
    warned = []

    def on_warning(warning):
        warned.append(
            f"{time.monotonic():.3f} {warning.unit} {warning.rule} {warning.sure} {warning.figure:.2f} "
            f"{warning.limit:.2f} {warning.held_for:.1f} {warning.duration:.1f}"
        )
        record("warnings", "\n".join(warned))

    try:
        watch = synaps_scope.OomdWatch([synaps_scope.ScopeHandle.from_manager(idle_unit), handle], on_warning)
        record("watch", f"watched {' '.join(watch.watched)} cannot {watch.cannot_warn}")
    except synaps_scope.CannotWarnError as e:
        record("watch", f"cannot {e.kind}: {e}")
    # The same watch from C and from Node, where scripts/test-vm.sh staged them, and from asyncio.
    surfaces = {
        "c": [os.path.join(here, "watch-c")],
        "node": [os.path.join(here, "node"), os.path.join(here, "node-project", "watch.js")],
        "python": [sys.executable, os.path.join(here, "watch.py")],
    }
    # Started at once, beside the daemon: launched through the manager into scopes of their own
    # (kept out of swap), Node's was twice still starting amid the thrash when oomd acted.
    for surface, command in surfaces.items():
        if all(os.path.exists(part) for part in command):
            argv = [*command, os.path.join(state, f"warnings-{surface}"), idle_unit, unit]
            watchers.append((surface, subprocess.Popen(argv)))
            record_line("watchers-launched", f"{surface} {time.monotonic():.3f}")


def watching(surface, watcher):
    """Whether the watcher has said what it watches, failed, or ended."""
    try:
        with open(os.path.join(state, f"warnings-{surface}")) as f:
            said = f.read().splitlines()
    except OSError:
        said = []
    return watcher.poll() is not None or any(line.startswith(("watching ", "failed")) for line in said)


go_by = time.monotonic() + 120
while time.monotonic() < go_by and not all(watching(*w) for w in watchers):
    time.sleep(0.1)
late = " ".join(surface for surface, watcher in watchers if not watching(surface, watcher))
record("go", f"{time.monotonic():.3f}{' without ' + late if late else ''}")
after_done = False
while True:
    record("heartbeat", str(time.time()))
    if not after_done and hog.poll() is not None:
        seen_ended = time.monotonic()
        for surface, watcher in watchers:
            record_line("watchers-memory", f"{surface} {paged(watcher.pid)}")
        after = subprocess.Popen(
            ["synaps-scope", "run", "--kind", "tool", "--", "sh", "-c", "grep ^0:: /proc/self/cgroup"],
            stdout=subprocess.PIPE,
            text=True,
        )
        out, _ = after.communicate(timeout=30)
        record("killed_at", f"{oomd_times.mark if oomd_times.mark is not None else seen_ended:.3f}")
        record("after", f"{out.strip()[3:]} exit {after.returncode} hog {hog.returncode}")
        if handle is not None:
            ending = handle.ending()
            record("ending", f"{ending.kind} {ending.oomd_rule} {ending.kernel_oom_kills} {ending.evidence} {ending}")
            if oomd_times.mark is not None and oomd_times.signal is not None:
                record("oomd_delay", f"{(oomd_times.signal - oomd_times.mark) * 1000:.1f}")
        # The C, Node and Python watchers end their watches (no warning may come after) and exit.
        for _, watcher in watchers:
            watcher.terminate()
        for surface, watcher in watchers:
            record_line("watchers", f"{surface} {watcher.wait(timeout=30)}")
        after_done = True
    time.sleep(0.1)
