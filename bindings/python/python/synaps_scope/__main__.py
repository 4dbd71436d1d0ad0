"""``python -m synaps_scope doctor``: what this installation of the module finds on this machine
(its launcher program and how it was found, the user manager, the configuration) and whether
launches would run in scopes. Exits as ``synaps-scope doctor`` does: 0 when launches would run in
scopes, 1 when they would go direct, 2 for a usage error or bad input, 3 when required mode would
refuse them."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import DEFAULT_PROBE_TIMEOUT, diagnose


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synaps_scope")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "doctor",
        help="report what launches would do, and why",
        epilog="exit status: 0 scoped, 1 direct, 2 usage error or bad input, "
        "3 required mode would refuse",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_PROBE_TIMEOUT,
        help="the bound on each probe, in seconds (default %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        report, verdict = diagnose(timeout=args.timeout)
    except ValueError as bad:
        parser.error(str(bad))
    sys.stdout.write(report)
    return int(verdict)


if __name__ == "__main__":
    sys.exit(main())
