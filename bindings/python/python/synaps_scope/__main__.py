"""``python -m synaps_scope doctor``: what this installation of the module finds on this machine
(its launcher program and how it was found, the user manager, the configuration) and whether
launches would run in scopes. Exits as ``synaps-scope doctor`` does: 0 when launches would run in
scopes, 1 when they would go direct, 2 when required mode would refuse them."""

from __future__ import annotations

import argparse
import re
import sys
from typing import List, Optional

from . import DEFAULT_PROBE_TIMEOUT, doctor


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synaps_scope")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("doctor", help="report what launches would do, and why")
    check.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_PROBE_TIMEOUT,
        help="the bound on each probe, in seconds (default %(default)s)",
    )
    args = parser.parse_args(argv)
    report = doctor(timeout=args.timeout)
    sys.stdout.write(report)
    # The report's last line is its verdict, "verdict: ... (exit N)".
    verdict = re.search(r"\(exit (\d+)\)\s*$", report)
    return int(verdict.group(1)) if verdict else 2


if __name__ == "__main__":
    sys.exit(main())
