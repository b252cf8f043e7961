"""Offline check of the image's install step, without Docker.

No Docker engine exists on the project's machines and no image can be pulled, so CI proves the
Dockerfile's logic on the real vllm wheel instead: in a cached virtualenv
``$GDN_UCACHE_CACHE/container-venv/vllm-<pin>-py<X.Y>`` (CPU machine):

1. create the venv and install the pinned vllm wheel with all its dependencies (once; the
   wheels are kept in ``$GDN_UCACHE_CACHE/container-wheels/vllm-<pin>-py<X.Y>``);
2. make the installed vllm pristine again: every ``vllm/`` file is checked against the
   wheel's RECORD (a previous run patched it); differing files are restored from the wheel,
   files an earlier series created are removed;
3. run the image's install step (``python -m tools.container install`` -> ``apply.sh --target``)
   with the venv's python against the venv's site-packages; it prints the changed files;
4. import every module the series touches (on this CPU-only machine);
5. parse the served command (``tools.container.serve``) with the patched ``vllm serve`` parser
   and check that the engine arguments come out as intended;
6. run the tests the series adds or changes under ``tests/`` (vLLM's test tree from the pinned
   sdist with the series' test hunks applied) against the installed, patched vllm, on CPU
   (see SERIES_TEST_ENV).
"""

from __future__ import annotations

import ast
import base64
import contextlib
import csv
import difflib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from tools.container.install import touched_package_files
from tools.container.serve import (
    NUM_SPECULATIVE_TOKENS,
    REPLAYSSM_BUFFER_LEN,
    SPEC_BACKEND,
    SSM_CACHE_DTYPE,
    serve_args,
)
from tools.series.errors import SeriesError
from tools.series.layout import PROJECT_ROOT, Layout
from tools.series.patchfile import parse_patch, read_series
from tools.series.target import apply_hunks, parse_diff, split_lines

INSTALLED_MARKER = ".gdn-ucache-installed"
COMPLETE_MARKER = ".complete"
# The series applier refuses binary diffs, so compiled extensions need no hash check.
_BINARY_SUFFIXES = (".so",)
CHECK_MODEL = "Qwen/Qwen3.5-27B"
# How the series' tests run on a CPU-only host against the real vllm package:
# - VLLM_TARGET_DEVICE=cpu: vLLM's CPU platform (as vLLM's own CPU CI runs an accelerator wheel);
#   without it the platform is "unspecified" and configs that infer a device fail.
# - TRITON_INTERPRET=1: the series' Triton ops run in Triton's CPU interpreter (their tests
#   select it); GPU-only tests skip with a reason.
# - CUDA_VISIBLE_DEVICES="": vllm.triton_utils replaces Triton with a placeholder when no
#   GPU driver is active, except where the visible-device list is empty (its lenient path for
#   Ray workers); that keeps the real Triton for the interpreter.
# - --noconftest: vLLM's tests/conftest.py needs vLLM's test requirements (tblib, ...), which
#   the image does not have; the series' tests must not need its fixtures.
# Not HF_HUB_OFFLINE: in hub offline mode EngineArgs resolves model ids to local snapshots, so
# the series' own CLI test (EngineArgs with the default model) and the parse step fail. The slow
# hub retries once seen in CI came from upstream's tests in tests/test_config.py, which no longer
# run (selected_tests); the series' tests make no hub request.
SERIES_TEST_ENV = {"VLLM_TARGET_DEVICE": "cpu", "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
_HUB_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

_IMPORT_PROBE = """
import importlib, sys, time, traceback
failed = []
for name in sys.argv[1:]:
    start = time.time()
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed.append(name)
        print(f"  FAIL  {name}: {type(exc).__name__}: {exc}", flush=True)
        print("        " + "".join(traceback.format_exception(exc)[-3:]).replace(
            "\\n", "\\n        ")[-1500:], flush=True)
    else:
        print(f"  ok    {name} ({time.time() - start:.1f} s)", flush=True)
sys.exit(1 if failed else 0)
"""

_SERVE_PROBE = """
import json, sys
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser

expected = json.loads(sys.argv[1])
parser = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(["serve", *sys.argv[2:]])
if getattr(args, "model_tag", None) is not None:  # as `vllm serve` does
    args.model = args.model_tag
engine = AsyncEngineArgs.from_cli_args(args)
wrong = []
for key, want in expected.items():
    got = getattr(engine, key)
    print(f"  {key} = {got!r}")
    if got != want:
        wrong.append(f"{key}: got {got!r}, expected {want!r}")
if wrong:
    print("  MISMATCH: " + "; ".join(wrong))
    sys.exit(1)
"""


class Steps:
    """Numbered, timed steps; the summary lists each step's wall time."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.number = 0
        self.times: list[tuple[str, float]] = []
        self._started: float | None = None
        self._name = ""

    def start(self, name: str) -> None:
        self.finish()
        self.number += 1
        self._name, self._started = name, time.monotonic()
        print(f"\n[{self.number}/{self.total}] {name}", flush=True)

    def finish(self) -> None:
        if self._started is not None:
            elapsed = time.monotonic() - self._started
            self.times.append((self._name, elapsed))
            print(f"      ({elapsed:.1f} s)", flush=True)
            self._started = None


def venv_dir(layout: Layout) -> Path:
    """One venv per pinned vLLM version and Python minor version, reused between runs."""
    version = layout.pinned_version()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return layout.cache_dir / "container-venv" / f"vllm-{version}-py{python}"


def _offline() -> bool:
    return os.environ.get("GDN_UCACHE_OFFLINE", "") not in ("", "0")


def _run(command: list[str], **kwargs: object) -> None:
    # Inline probe scripts (python -c) are named, not echoed.
    shown = ["<probe>" if i and command[i - 1] == "-c" else w for i, w in enumerate(command)]
    print("  $ " + shlex.join(shown), flush=True)
    result = subprocess.run(command, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise SeriesError(f"{command[0]} {command[1]} ... failed (exit {result.returncode})")


def wheelhouse_dir(layout: Layout) -> Path:
    """The pinned vllm wheel and all its dependencies' wheels, downloaded once."""
    return layout.cache_dir / "container-wheels" / venv_dir(layout).name


def requirements(layout: Layout) -> list[str]:
    # pytest runs the series' tests inside the venv, so it comes from the wheelhouse too.
    return [f"vllm=={layout.pinned_version()}", "pytest"]


def ensure_wheelhouse(layout: Layout, python: Path) -> Path:
    # pip's HTTP cache cannot be relied on (a proxy may forbid storing responses), so the
    # downloads are kept as wheel files and installed with --no-index.
    wheelhouse = wheelhouse_dir(layout)
    wanted = " ".join(requirements(layout))
    complete = wheelhouse / COMPLETE_MARKER
    if complete.is_file() and complete.read_text().strip() == wanted:
        print(f"  wheelhouse {wheelhouse} (cached)")
        return wheelhouse
    if _offline():
        raise SeriesError(f"wheelhouse {wheelhouse} is incomplete and GDN_UCACHE_OFFLINE is set")
    _run(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "--only-binary",
            ":all:",
            "--dest",
            str(wheelhouse),
            *requirements(layout),
        ]
    )
    complete.write_text(wanted + "\n")
    return wheelhouse


def ensure_venv(layout: Layout) -> tuple[Path, Path]:
    """(venv python, wheelhouse), with the pinned vllm, its dependencies and pytest installed."""
    venv = venv_dir(layout)
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
    wheelhouse = ensure_wheelhouse(layout, python)
    wanted = " ".join(requirements(layout))
    marker = venv / INSTALLED_MARKER
    if marker.is_file() and marker.read_text().strip() == wanted:
        print(f"  {wanted} installed in {venv} (cached)")
        return python, wheelhouse
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            *requirements(layout),
        ]
    )
    marker.write_text(wanted + "\n")
    return python, wheelhouse


def site_dir(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pristine_problems(site: Path) -> list[str]:
    """Files under site/vllm that differ from the wheel's RECORD (or are not in it)."""
    records = sorted(site.glob("vllm-*.dist-info/RECORD"))
    if len(records) != 1:
        raise SeriesError(f"expected one vllm-*.dist-info/RECORD in {site}, found {len(records)}")
    expected: dict[str, str] = {}
    with records[0].open(newline="") as handle:
        for row in csv.reader(handle):
            if row and row[0].startswith("vllm/") and len(row) > 1 and row[1]:
                expected[row[0]] = row[1]
    problems = []
    for rel, want in expected.items():
        path = site / rel
        if rel.endswith(_BINARY_SUFFIXES):
            if not path.is_file():
                problems.append(f"missing {rel}")
            continue
        if not path.is_file():
            problems.append(f"missing {rel}")
        elif _record_hash(path) != want:
            problems.append(f"changed {rel}")
    for path in (site / "vllm").rglob("*"):
        rel = path.relative_to(site).as_posix()
        if path.is_file() and "__pycache__" not in path.parts and rel not in expected:
            problems.append(f"extra {rel}")
    return problems


def make_pristine(layout: Layout, wheelhouse: Path, site: Path) -> None:
    """Undo an earlier run's series: restore changed files from the wheel, drop created ones."""
    problems = pristine_problems(site)
    if not problems:
        print(f"  {site / 'vllm'} matches the wheel's RECORD")
        return
    wheels = sorted(wheelhouse.glob(f"vllm-{layout.pinned_version()}-*.whl"))
    if not wheels:
        raise SeriesError(f"no vllm wheel in {wheelhouse} to restore {site / 'vllm'} from")
    print(f"  {len(problems)} file(s) differ from {wheels[-1].name} (an earlier run's series):")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        for problem in problems:
            print(f"    {problem}")
            kind, rel = problem.split(" ", 1)
            path = site / rel
            if kind == "extra":  # created by an earlier series; not part of the wheel
                path.unlink()
                continue
            info = wheel.getinfo(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(wheel.read(info))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                path.chmod(mode)
    left = pristine_problems(site)
    if left:
        raise SeriesError(f"vllm in {site} is still not pristine: {', '.join(left[:5])}")
    print("  restored: vllm matches the wheel's RECORD again")


def module_name(rel: str) -> str | None:
    """vllm/a/b.py -> vllm.a.b; vllm/a/__init__.py -> vllm.a; non-Python files -> None."""
    if not rel.endswith(".py"):
        return None
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def series_test_files(layout: Layout) -> list[str]:
    """``tests/**/test_*.py`` files the series adds or changes (vLLM's tree), in order."""
    found: list[str] = []
    for patch in read_series(layout.patches_dir):
        for diff in parse_diff(parse_patch(patch).diff, patch.name):
            name = diff.path.rsplit("/", 1)[-1]
            if (
                diff.path.startswith("tests/")
                and name.startswith("test_")
                and name.endswith(".py")
                and not diff.is_deleted
                and diff.path not in found
            ):
                found.append(diff.path)
    return found


def build_test_tree(layout: Layout, destination: Path) -> dict[str, str | None]:
    """vLLM's tests/ (pinned sdist) plus the series' hunks under tests/, in ``destination``.

    No ``vllm/`` source goes there, so the tests import the installed, patched package.
    Returns the sdist text of every test file the series changes (None: the series adds it).
    """
    from tools.series.populate import fetch_sdist

    pin = layout.pin()
    sdist = fetch_sdist(layout, pin["VLLM_VERSION"], pin.get("VLLM_SDIST_SHA256"))
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        top = archive.getmembers()[0].name.split("/")[0]
        members = []
        for member in archive.getmembers():
            rel = member.name[len(top) + 1 :]
            if (rel.startswith("tests/") or rel == "pyproject.toml") and (
                member.isfile() or member.isdir()
            ):
                member.name = rel
                members.append(member)
        archive.extractall(destination, members=members, filter="data")
    originals: dict[str, str | None] = {}
    for patch in read_series(layout.patches_dir):
        for diff in parse_diff(parse_patch(patch).diff, patch.name):
            if not diff.path.startswith("tests/"):
                continue
            path = destination / diff.path
            if diff.path not in originals:
                originals[diff.path] = path.read_text() if path.is_file() else None
            if diff.is_deleted:
                path.unlink(missing_ok=True)
                continue
            current = [] if diff.is_new else split_lines(path.read_bytes().decode("utf-8"))
            after = apply_hunks(current, diff.hunks)
            if after is None:
                raise SeriesError(
                    f"{patch.name}: its hunks for {diff.path} do not apply to the sdist"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes("".join(after).encode("utf-8"))
    return originals


def _patches(count: int) -> str:
    return f"{count} patch" if count == 1 else f"{count} patches"


def selected_tests(tree: Path, rel: str, original: str | None) -> list[str]:
    """pytest node ids to run from one test file the series touches.

    A file the series adds runs whole. In a file it changes, only the top-level tests and
    test classes whose lines it added or changed run: the rest is upstream's suite, which
    needs what the image lacks (network, GPU, vLLM's test requirements).
    """
    current = (tree / rel).read_text()
    if original is None:
        return [rel]
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(
        a=original.splitlines(), b=current.splitlines(), autojunk=False
    )
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(start + 1, end + 1))
    selected = []
    for node in ast.parse(current).body:
        is_test = (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test")
        ) or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if is_test and changed & set(range(first, (node.end_lineno or node.lineno) + 1)):
            selected.append(f"{rel}::{node.name}")
    return selected


@contextlib.contextmanager
def venv_lock(layout: Layout) -> Iterator[None]:
    """One check at a time per venv: runs restore, patch and test the same site-packages."""
    venv = venv_dir(layout)
    lock_path = venv.parent / f"{venv.name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another container check to finish (lock {lock_path})", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def check_install(layout: Layout, run_tests: bool = True) -> int:
    with venv_lock(layout):
        return _check_install(layout, run_tests)


def _check_install(layout: Layout, run_tests: bool) -> int:
    started = time.monotonic()
    patches = read_series(layout.patches_dir)
    touched = touched_package_files(layout)
    modules = [m for m in (module_name(rel) for rel in touched) if m]
    steps = Steps(6)
    print(
        f"gdn-ucache container install check: vllm {layout.pinned_version()}, "
        f"{_patches(len(patches))}, {len(touched)} vllm file(s), cache {layout.cache_dir}"
    )

    steps.start("virtualenv with the pinned vllm wheel")
    python, wheelhouse = ensure_venv(layout)
    site = site_dir(python)

    steps.start("installed vllm is pristine (wheel RECORD)")
    make_pristine(layout, wheelhouse, site)

    steps.start("the image's install step: python -m tools.container install (apply.sh --target)")
    manifest = venv_dir(layout) / "series-manifest.txt"
    _run(
        [
            str(python),
            "-m",
            "tools.container",
            "--root",
            str(layout.root),
            "install",
            "--manifest",
            str(manifest),
        ],
        cwd=PROJECT_ROOT,  # the tooling; --root names the project (they differ in tests)
    )

    steps.start(f"import the {len(modules)} module(s) the series touches (CPU only)")
    if modules:
        _run([str(python), "-c", _IMPORT_PROBE, *modules], cwd="/")
    else:
        print("  no modules: the series changes no vllm/*.py file")

    steps.start("parse the served command with the patched `vllm serve`")
    expected = {
        "model": CHECK_MODEL,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS},
        "use_replayssm": True,
        "replayssm_buffer_len": REPLAYSSM_BUFFER_LEN,
        "mamba_ssm_cache_dtype": SSM_CACHE_DTYPE,
        "additional_config": {"gdn_spec_backend": SPEC_BACKEND},
    }
    # Building the parser resolves the default device; with no GPU here vLLM is told "cpu",
    # as vLLM's own CPU-only CI does with an accelerator wheel. Parsing is the same either way.
    _run(
        [str(python), "-c", _SERVE_PROBE, json.dumps(expected), *serve_args(CHECK_MODEL)],
        cwd="/",
        env={
            **{k: v for k, v in os.environ.items() if k not in _HUB_OFFLINE_VARS},
            "VLLM_TARGET_DEVICE": "cpu",
        },  # hub offline mode (set by a CI) would resolve the model id to a missing snapshot
    )

    tests = series_test_files(layout)
    steps.start(f"the series' tests ({len(tests)} file(s)) against the patched vllm")
    if not run_tests:
        print("  skipped (--skip-tests)")
    elif not tests:
        print("  no test files in the series")
    else:
        tree = venv_dir(layout) / "series-tests"
        originals = build_test_tree(layout, tree)
        selection = [node for rel in tests for node in selected_tests(tree, rel, originals[rel])]
        for rel in tests:
            if originals[rel] is not None:
                chosen = [n for n in selection if n.startswith(rel + "::")]
                print(f"  {rel} (changed upstream file): {len(chosen)} test(s) the series touches")
        _run(
            [
                str(python),
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rfEs",
                "--noconftest",
                *selection,
            ],
            cwd=tree,
            env={
                **{k: v for k, v in os.environ.items() if k not in _HUB_OFFLINE_VARS},
                **SERIES_TEST_ENV,
                "PYTHONPATH": str(tree),
            },
        )
    steps.finish()

    print(
        f"\nOK: {_patches(len(patches))} applied to vllm {layout.pinned_version()} (wheel) in "
        f"{time.monotonic() - started:.0f} s"
    )
    for name, seconds in steps.times:
        print(f"  {seconds:7.1f} s  {name}")
    return 0
