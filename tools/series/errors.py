"""One exception type for every user-facing failure of the project's tooling, and the CLI runner
that turns it into ``error: <message>`` and exit status 1."""

from __future__ import annotations

import argparse
import sys


class SeriesError(Exception):
    """A failure with a message that tells the user what happened and what to do.

    The CLI prints ``error: <message>`` and exits with status 1; no traceback.
    """


def run_cli(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` and run the chosen sub-command (its ``func`` default).

    SeriesError -> ``error: ...`` on stderr, exit 1; Ctrl-C -> exit 130.
    """
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SeriesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
