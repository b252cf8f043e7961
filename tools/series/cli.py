"""Command line of the series tooling: ``python -m tools.series <command> --help``."""

from __future__ import annotations

import argparse
import os

from tools.series.errors import SeriesError, run_cli
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


def _cmd_export(args: argparse.Namespace) -> int:
    from tools.series.export import export_series

    export_series(default_layout(args.root))
    return 0


def _cmd_rebase(args: argparse.Namespace) -> int:
    from tools.series import rebase

    layout = default_layout(args.root)
    if args.abort:
        return rebase.abort_rebase(layout)
    if args.continue_:
        return rebase.continue_rebase(layout)
    if not args.target:
        raise SeriesError("give REF|VERSION (e.g. 0.34.0 or origin/main), --continue or --abort")
    return rebase.rebase_series(layout, args.target, source=args.source)


def _cmd_check_patches(args: argparse.Namespace) -> int:
    from tools.series.check import check_patches

    return check_patches(default_layout(args.root), against_branch=args.branch)


def _cmd_lint_vllm(args: argparse.Namespace) -> int:
    from tools.series.lint import lint_vllm

    return lint_vllm(default_layout(args.root), files=args.files, fix=args.fix)


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

    export = commands.add_parser(
        "export",
        prog=wrapper,
        help="regenerate patches/ from branch gdn-ucache",
        description="Regenerate patches/*.patch and patches/series from the commits of branch "
        "gdn-ucache in vllm/ (base..gdn-ucache), deterministically: no commit hashes, dates "
        "or version signatures; names from subjects; order in patches/series.",
    )
    export.set_defaults(func=_cmd_export)

    rebase = commands.add_parser(
        "rebase",
        prog=wrapper,
        help="move the series onto another vLLM base (git ref or release version)",
        description="Move the series onto REF (a git ref in vllm/, fetched from origin if "
        "needed) or VERSION (a vLLM release, imported like the pinned one), patch by patch. "
        "Stops at the first conflict with patches/ untouched; on success prints git "
        "range-diff old vs new, refreshes patches/ and (for a release) vllm.pin.",
    )
    rebase.add_argument("target", nargs="?", metavar="REF|VERSION")
    rebase.add_argument(
        "--source",
        choices=("auto", "git", "sdist"),
        default="auto",
        help="for VERSION: import from git (tag vVERSION) or the PyPI sdist (default: auto)",
    )
    rebase.add_argument(
        "--continue",
        dest="continue_",
        action="store_true",
        help="go on after resolving a conflict (git am --continue first)",
    )
    rebase.add_argument("--abort", action="store_true", help="drop a stopped rebase")
    rebase.set_defaults(func=_cmd_rebase)

    check = commands.add_parser(
        "check-patches",
        prog=wrapper,
        help="verify the patch conventions of patches/README.md",
        description="Verify every patch: format-patch output from scripts/export.sh, "
        "'[Tag] Title' subject, a why-paragraph, Upstream-PR:, Drop-when: and Signed-off-by: "
        "trailers; and that patches/series lists exactly the patch files.",
    )
    check.add_argument(
        "--branch",
        action="store_true",
        help="also require patches/ to equal a fresh export of branch gdn-ucache "
        "(ignoring index lines and @@ line numbers)",
    )
    check.set_defaults(func=_cmd_check_patches)

    lint = commands.add_parser(
        "lint-vllm",
        prog=wrapper,
        help="run vLLM's own checks on the files the series changes",
        description="Run vLLM's ruff check, ruff format, typos, SPDX-header and "
        "forbidden-imports checks (vLLM's config and pinned versions, from PyPI wheels in a "
        "cached venv) inside vllm/ on the files changed between the base and the work tree.",
    )
    lint.add_argument(
        "files", nargs="*", help="files inside vllm/ (default: all the series changes)"
    )
    lint.add_argument(
        "--fix", action="store_true", help="let ruff fix/format and add missing SPDX headers"
    )
    lint.set_defaults(func=_cmd_lint_vllm)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), argv)
