"""Command line of the rebase CI: ``python -m tools.rebase_ci <command> --help``.

The ``scripts/{version-matrix,bisect-upstream,report,pr-prep}.sh`` wrappers call it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tools.series.errors import run_cli
from tools.series.layout import default_layout

DEFAULT_OUT = "build/rebase-ci"  # inside the project root; /build/ is git-ignored
DEFAULT_PR_OUT = "build/pr-prep"


def _path(name: str) -> Path:
    """A path argument, relative to where the user ran the wrapper script (it cds to the root)."""
    return Path(os.environ.get("GDN_CALLER_CWD", ".")) / name


def _out(args: argparse.Namespace, default: str = DEFAULT_OUT) -> Path:
    """--out as given (caller-relative), else the default inside the project root."""
    return _path(args.out) if args.out else default_layout(args.root).root / default


def _test_command(args: argparse.Namespace, default: str | None) -> str | None:
    if getattr(args, "no_test", False):
        return None
    return args.test_cmd or default


def _cmd_matrix(args: argparse.Namespace) -> int:
    from tools.rebase_ci.evaluate import STATIC_TEST
    from tools.rebase_ci.matrix import (
        available_releases,
        matrix_json,
        pinned_failed,
        run_matrix,
        select_versions,
        write_outputs,
    )

    layout = default_layout(args.root)
    pinned = layout.pinned_version()
    versions = args.versions
    if not versions:
        offline = os.environ.get("GDN_UCACHE_OFFLINE", "") not in ("", "0")
        try:
            releases = available_releases(layout, offline)
        except Exception as exc:  # pip's index unreachable: judge what is cached, say so
            print(f"warning: cannot list vLLM releases ({exc}); using the cached sdists")
            releases = available_releases(layout, offline=True)
        versions = select_versions(releases, pinned, args.previous, args.newer)
    if pinned not in versions:
        versions = [pinned, *versions]  # the pinned release always decides the exit status
    bases = [*versions, *args.ref]
    test = _test_command(args, STATIC_TEST)
    print(f"version matrix: {', '.join(bases)} (pinned {pinned}; tests: {test or 'none'})")
    rows = run_matrix(layout, bases, test, source=args.source, test_timeout=args.test_timeout)
    data = matrix_json(layout, rows, test)
    json_path, md_path = write_outputs(data, _out(args))
    print()
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}")
    if pinned_failed(data):
        print(f"error: the series does not apply (or pass) on the pinned vLLM {pinned}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _cmd_bisect(args: argparse.Namespace) -> int:
    from tools.rebase_ci.bisect import bisect_upstream
    from tools.rebase_ci.report import bisect_markdown

    layout = default_layout(args.root)
    result = bisect_upstream(layout, args.good, args.bad, _test_command(args, None))
    out = _out(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bisect-result.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "bisect-summary.md").write_text(bisect_markdown(result))
    print(f"wrote {out / 'bisect-result.json'} and {out / 'bisect-summary.md'}")
    return 0


def _cmd_bisect_step(args: argparse.Namespace) -> int:
    from tools.rebase_ci.bisect import bisect_step

    return bisect_step(default_layout(args.root), _test_command(args, None))


def _cmd_check(args: argparse.Namespace) -> int:
    from tools.rebase_ci.matrix import matrix_json, run_matrix, write_outputs

    layout = default_layout(args.root)
    rows = run_matrix(layout, args.bases, _test_command(args, None), source=args.source)
    data = matrix_json(layout, rows, _test_command(args, None))
    write_outputs(data, _out(args))
    return 0 if all(row.ok for row in rows) else 1


def _cmd_nightly(args: argparse.Namespace) -> int:
    from tools.rebase_ci.evaluate import STATIC_TEST
    from tools.rebase_ci.nightly import nightly

    return nightly(
        default_layout(args.root),
        args.target,
        _out(args),
        _test_command(args, STATIC_TEST),
        rebase=not args.no_rebase,
    )


def _cmd_report(args: argparse.Namespace) -> int:
    from tools.rebase_ci.report import render

    text = render([_path(p) for p in args.results])
    if args.output:
        _path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_pr_prep(args: argparse.Namespace) -> int:
    from tools.rebase_ci.pr_prep import prepare_prs

    layout = default_layout(args.root)
    prepare_prs(
        layout,
        base=args.base,
        out_dir=_out(args, DEFAULT_PR_OUT),
        signoff=args.signoff,
        lint=not args.no_lint,
    )
    return 0


def _add_test_options(parser: argparse.ArgumentParser, default_help: str) -> None:
    parser.add_argument(
        "--test-cmd",
        metavar="CMD",
        help="bash command run in a checkout of the base after each patch is applied "
        "(env: GDN_SERIES_PATCH, GDN_SERIES_PATCH_FILES, GDN_VLLM_BASE); 'static' = "
        f"syntax and undefined-name check of the touched files. {default_help}",
    )
    parser.add_argument("--no-test", action="store_true", help="judge applying only")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.rebase_ci", description=__doc__)
    wrapper = os.environ.get("SERIES_PROG")
    parser.add_argument("--root", help="project root (default: $GDN_UCACHE_ROOT or this checkout)")
    commands = parser.add_subparsers(dest="command", required=True)

    matrix = commands.add_parser(
        "matrix",
        prog=wrapper,
        help="judge the series on several vLLM releases; print and write the matrix",
        description="Import each vLLM release (PyPI sdist, cached) as branch vllm-<version> "
        "in vllm/ and judge every patch on it: applies / conflicts / fails tests. Writes "
        "version-matrix.json and .md. Exit 1 only if the pinned release fails.",
    )
    matrix.add_argument("versions", nargs="*", help="releases (default: pinned + --previous)")
    matrix.add_argument("--previous", type=int, default=2, help="older releases (default 2)")
    matrix.add_argument(
        "--newer", action="store_true", help="also the newest release after the pinned one"
    )
    matrix.add_argument(
        "--ref", action="append", default=[], help="also a git ref in vllm/ (repeatable)"
    )
    matrix.add_argument("--source", choices=("auto", "git", "sdist"), default="sdist")
    matrix.add_argument("--test-timeout", type=float, default=1800.0, help="seconds per test run")
    matrix.add_argument("--out", help=f"output dir (default: {DEFAULT_OUT} in the project root)")
    _add_test_options(matrix, "Default: static.")
    matrix.set_defaults(func=_cmd_matrix)

    check = commands.add_parser(
        "check", prog=wrapper, help="judge the series on given bases (no pinned-row rule)"
    )
    check.add_argument("bases", nargs="+", help="release versions or git refs in vllm/")
    check.add_argument("--source", choices=("auto", "git", "sdist"), default="auto")
    check.add_argument("--out", help=f"output dir (default: {DEFAULT_OUT} in the project root)")
    _add_test_options(check, "Default: none.")
    check.set_defaults(func=_cmd_check)

    bisect = commands.add_parser(
        "bisect",
        prog=wrapper,
        help="find the first upstream commit in GOOD..BAD where the series breaks",
        description="git bisect run over GOOD..BAD in a scratch repository sharing vllm/'s "
        "objects; the predicate is apply --check on each commit (plus --test-cmd).",
    )
    bisect.add_argument("good", help="commit, ref or release where the series applies")
    bisect.add_argument("bad", help="commit, ref or release where it does not")
    bisect.add_argument("--out", help=f"output dir (default: {DEFAULT_OUT} in the project root)")
    _add_test_options(bisect, "Default: none (apply only).")
    bisect.set_defaults(func=_cmd_bisect)

    step = commands.add_parser("bisect-step", help=argparse.SUPPRESS)
    _add_test_options(step, "")
    step.set_defaults(func=_cmd_bisect_step)

    night = commands.add_parser(
        "nightly",
        prog=wrapper,
        help="the rebase job: check TARGET, bisect on failure, rebase on success, summarize",
        description="Judge the series on TARGET (commit/ref in vllm/); on failure bisect from "
        "the pinned release's fork point and name the culprit; on success run "
        "scripts/rebase.sh TARGET. Writes summary.md, nightly.json and the JSON results to "
        "--out. Exit 1 when the series did not rebase.",
    )
    night.add_argument("target", help="commit or ref in vllm/ (e.g. origin/main)")
    night.add_argument("--out", help=f"output dir (default: {DEFAULT_OUT} in the project root)")
    night.add_argument("--no-rebase", action="store_true", help="check and bisect only")
    _add_test_options(night, "Default: static.")
    night.set_defaults(func=_cmd_nightly)

    report = commands.add_parser(
        "report",
        prog=wrapper,
        help="markdown table from version-matrix.json / bisect-result.json",
    )
    report.add_argument("results", nargs="+", help="JSON files written by matrix/check/bisect")
    report.add_argument("-o", "--output", help="write here instead of stdout")
    report.set_defaults(func=_cmd_report)

    pr_prep = commands.add_parser(
        "pr-prep",
        prog=wrapper,
        help="build one branch per upstream PR of the stack and write each PR description",
        description="Split patches/series by Upstream-PR into the PRs of "
        "tools/rebase_ci/pr_stack.toml; build branches pr/<n>-<name> in vllm/ (stacked, on "
        "--base), check sign-offs, subjects and vLLM lint; write <out>/<n>-<name>.md.",
    )
    pr_prep.add_argument(
        "--base", help="vLLM base commit/ref/release (default: the pinned base branch)"
    )
    pr_prep.add_argument(
        "--out", help=f"where the descriptions go (default: {DEFAULT_PR_OUT} in the project root)"
    )
    pr_prep.add_argument(
        "--signoff", action="store_true", help="add your Signed-off-by where one is missing"
    )
    pr_prep.add_argument(
        "--no-lint",
        action="store_true",
        help="skip vLLM's lint (scripts/lint-vllm.sh's checks) on each branch's changed files",
    )
    pr_prep.set_defaults(func=_cmd_pr_prep)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), argv)
