"""A daemon's watch from Python's asyncio on its tools' scopes, as alice in the virtual machine,
against the real systemd-oomd, with the installed wheel; started by daemon.py beside its tools:

    python watch.py FILE UNIT...

FILE gets "started SECONDS" as the program starts, then each warning that ``async for warning in
watch`` yields as "SECONDS UNIT RULE SURE FIGURE LIMIT" (SECONDS on time.monotonic()). On SIGTERM the watch is closed, which must end the
``async for`` (FILE then gets "ended"), and the program exits 0.
"""

import asyncio
import signal
import sys
import time
from typing import List

import synaps_scope


def write(file: str, line: str) -> None:
    with open(file, "a") as out:
        out.write(line + "\n")


async def main(file: str, units: List[str]) -> None:
    write(file, f"started {time.monotonic():.3f}")
    handles = [synaps_scope.ScopeHandle.from_manager(unit) for unit in units]
    watch = synaps_scope.OomdWatch(handles)
    write(file, f"watching {len(watch.watched)}")
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, watch.close)
    async for warning in watch:
        write(
            file,
            f"{time.monotonic():.3f} {warning.unit} {warning.rule} {warning.sure} "
            f"{warning.figure:.2f} {warning.limit:.2f}",
        )
    write(file, "ended")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2:]))
    except Exception as e:
        write(sys.argv[1], f"failed {e!r}")
        sys.exit(1)
