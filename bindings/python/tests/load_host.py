"""The host of test_load.py, in a process of its own so that the test sees a crash as the signal
that ended it: 10,000 concurrent calls of each kind from as many threads (a probe with the rig's manager, one
with none, and handle calls: a handle found through the manager, a bounded wait, an ending and a
watch, 2,500 each), and 10,000 probes and SPAWNS launches at once from asyncio, each tallied by how it settled. Prints one
JSON line."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Counter, Dict, List

import synaps_scope

CALLS = 10_000


def outcome(call: Callable[[], str]) -> str:
    try:
        return call()
    except synaps_scope.CannotWarnError as error:
        return f"cannot warn: {error.kind}"
    except synaps_scope.ScopeError as error:
        return type(error).__name__
    except Exception as error:  # noqa: BLE001 - the tally names what else it was
        return f"not a ScopeError: {error!r}"


def from_threads(call: Callable[[], str]) -> Dict[str, int]:
    """`call` from CALLS threads at once."""
    results: Counter[str] = collections.Counter()
    lock = threading.Lock()

    def run() -> None:
        said = outcome(call)
        with lock:
            results[said] += 1

    threads = [threading.Thread(target=run) for _ in range(CALLS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(results)


def no_bus_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")}


def launched(launcher: object) -> str:
    return "direct" if launcher is None else "scoped"


async def from_asyncio(spawns: int) -> Dict[str, Dict[str, int]]:
    async def probe(env: object) -> str:
        try:
            return launched(await synaps_scope.launcher_for_env_async(env))  # type: ignore[arg-type]
        except synaps_scope.ScopeError as error:
            return type(error).__name__

    async def launch() -> str:
        try:
            proc = await synaps_scope.create_subprocess_exec("true", stdin=subprocess.DEVNULL)
            return f"exit {await proc.wait()} {'direct' if proc.scope_unit is None else 'scoped'}"
        except synaps_scope.ScopeError as error:
            return type(error).__name__
        except OSError as error:
            return f"spawn failed: {error.errno}"

    probes = await asyncio.gather(*(probe(None) for _ in range(CALLS)))
    launches: List[str] = await asyncio.gather(*(launch() for _ in range(spawns)))
    return {"probes": dict(collections.Counter(probes)), "launches": dict(collections.Counter(launches))}


def main() -> None:
    spawns = int(sys.argv[1])
    threading.stack_size(256 * 1024)
    sleeper = synaps_scope.Popen(["sleep", "120"])
    assert sleeper.scope_unit is not None
    unit = sleeper.scope_unit
    for _ in range(400):
        try:
            handle = synaps_scope.ScopeHandle.from_pid(unit, sleeper.pid)
            break
        except synaps_scope.ScopeError:
            time.sleep(0.005)

    def empty() -> str:
        handle.wait_empty(0.02)
        return "empty"

    def watch() -> str:
        handle.watch_oomd().close()
        return "watch"

    kinds = [
        lambda: synaps_scope.ScopeHandle.from_manager(unit).unit and "found",
        empty,
        lambda: handle.ending().kind,
        watch,
    ]
    calls = itertools.cycle(kinds)
    report: Dict[str, object] = {
        "launchers": from_threads(lambda: launched(synaps_scope.launcher_for_env())),
        "direct": from_threads(lambda: launched(synaps_scope.launcher_for_env(no_bus_env()))),
        "handles": from_threads(lambda: next(calls)()),
        "asyncio": asyncio.run(from_asyncio(spawns)),
    }
    report["killed"] = len(handle.kill())
    sleeper.wait()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
