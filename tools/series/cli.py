"""Command line of the series tooling: ``python -m tools.series <command> --help``."""

from __future__ import annotations

import argparse
import os
import sys

from tools.series.errors import SeriesError
from tools.series.layout import default_layout


def _cmd_populate(args: argparse.Namespace) -> int:
    from tools.series.populate import populate

    populate(default_layout(args.root), source=args.source)
    return 0


def _cmd_apply(args: argparse.Namespace) -> int:
    layout = default_layout(args.root)
    if args.target:
        from tools.series.target import apply_to_target

        return apply_to_target(layout, args.target, force=args.force, dry_run=args.dry_run)
    if args.force or args.dry_run:
        raise SeriesError("--force and --dry-run only go with --target DIR")
    if args.check:
        from tools.series.apply import check_series

        lines = check_series(layout)
        width = max((len(line.name) for line in lines), default=0)
        for line in lines:
            detail = f"  ({line.detail})" if line.detail else ""
            print(f"{line.name:<{width}}  {line.status}{detail}")
        if not lines:
            print("patches/series is empty")
        return 1 if any(line.status in ("fails", "blocked") for line in lines) else 0
    from tools.series.apply import apply_series

    apply_series(layout, reset=args.reset)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.series", description=__doc__)
    # The scripts/*.sh wrappers set SERIES_PROG so --help names the script the user ran.
    wrapper = os.environ.get("SERIES_PROG")
    parser.add_argument(
        "--root",
        help="project root holding vllm.pin, patches/ and vllm/ "
        "(default: $GDN_UCACHE_ROOT or this checkout)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    populate = commands.add_parser(
        "populate",
        prog=wrapper,
        help="create vllm/ with the pinned base branch vllm-<version> and branch gdn-ucache",
        description="Populate vllm/ from upstream git when reachable, else from the PyPI "
        "source release imported as a deterministic commit (cached in $GDN_UCACHE_CACHE).",
    )
    populate.add_argument(
        "--source",
        choices=("auto", "git", "sdist"),
        default="auto",
        help="where the base comes from (default: auto = git if reachable, else sdist)",
    )
    populate.set_defaults(func=_cmd_populate)

    apply = commands.add_parser(
        "apply",
        prog=wrapper,
        help="apply patches/ onto branch gdn-ucache in vllm/ (or onto an installed vllm)",
        description="Build branch gdn-ucache in vllm/ from the base and apply patches/series "
        "in order with git am -3. Idempotent.",
    )
    apply.add_argument(
        "--check",
        action="store_true",
        help="report each patch as applied / applies cleanly / fails; change nothing",
    )
    apply.add_argument(
        "--reset",
        action="store_true",
        help="rebuild gdn-ucache from the base (the old branch is kept as gdn-ucache-backup-N)",
    )
    apply.add_argument(
        "--target",
        metavar="DIR",
        help="apply the vllm/ part of the series to an installed vllm package instead "
        "(DIR = site-packages or the vllm package dir); needs neither git nor patch",
    )
    apply.add_argument(
        "--force", action="store_true", help="with --target: accept a different vllm version"
    )
    apply.add_argument(
        "--dry-run", action="store_true", help="with --target: report, write nothing"
    )
    apply.set_defaults(func=_cmd_apply)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SeriesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
