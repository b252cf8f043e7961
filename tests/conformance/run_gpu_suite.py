"""Run the whole GPU conformance suite in one command and write the results summary.

    python3 tests/conformance/run_gpu_suite.py --out DIR [--backends flashinfer,ours]
        [--arms serving,bf16,fp16_io] [--deadline-s 240] [--jobs 16]

Every (backend, arm, unit) runs in its own process (a unit = the cases that share one compiled
kernel), so CuTe-DSL compiles proceed in parallel and a kernel fault cannot take other arms down.
Writes DIR/conformance.json (each case's summary, drift series, errors, seeds, timings, the command)
and DIR/conformance.md (a table), plus DIR/units.log (each process's output). Needs only torch (and
CuTe-DSL for the kernel backends). Backends that are unavailable are listed with the reason.
Exit status 0 when every case that ran passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from kernels.reference.backends import KERNEL_BACKENDS, get_backend  # noqa: E402
from kernels.reference.harness import fresh_seed  # noqa: E402
from kernels.reference.tolerances import TOLERANCES  # noqa: E402
from tests.conformance.cases import CASES, Case, arms_for, run_case  # noqa: E402

# Cheap, decisive cases first; the drift and the 64-bit unit are their own processes anyway.
_KIND_ORDER = {"harness": 0, "graph_vs_eager": 1, "drift": 2}


def _selected(arm: str, backend_arms: tuple[str, ...], names: set[str] | None) -> list[Case]:
    return [c for c in CASES if arm in arms_for(c, backend_arms) and (not names or c.name in names)]


def _unit_cases(
    arm: str, unit: str, backend_arms: tuple[str, ...], names: set[str] | None = None
) -> list[Case]:
    chosen = [c for c in _selected(arm, backend_arms, names) if c.unit == unit]
    return sorted(
        chosen,
        key=lambda c: (_KIND_ORDER.get(c.kind, len(_KIND_ORDER)), c.name == "misaligned_cursors"),
    )


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str, allow_nan=True))
    tmp.replace(path)


def run_unit(
    backend_name: str,
    arm: str,
    unit: str,
    out: Path,
    deadline: float,
    names: set[str] | None = None,
    max_steps: int | None = None,
) -> int:
    """Child process: run one unit's cases, rewriting `out` after each case."""
    torch.set_num_threads(1)  # many units share the host's cores; their CPU tensors are tiny
    if backend_name != "flashinfer":
        os.nice(5)  # the anchor's units finish first when cores are short
    backend = get_backend(backend_name)
    results: dict[str, Any] = {}
    cases = _unit_cases(arm, unit, backend.arms(), names)
    handles: dict[str, Any] = {}
    for case in cases:
        seed = fresh_seed()
        layout = case.config.get("layout", "compact")
        entry: dict[str, Any] = {"seed": seed, "kind": case.kind, "description": case.description}
        start = time.monotonic()
        remaining = deadline - time.monotonic()
        if remaining < 10:
            entry.update(status="skipped", reason=f"deadline ({remaining:.0f} s left)")
        else:
            try:
                if layout not in handles:
                    handles[layout] = backend.load(arm, layout)
                handle = handles[layout]
                if case.config["num_tokens"] not in handle.supported_t:
                    entry.update(
                        status="skipped", reason=f"T={case.config['num_tokens']} unsupported"
                    )
                else:
                    print(f"[{backend_name}/{arm}/{unit}] {case.name} seed={seed}", flush=True)
                    steps = {"steps": min(case.config["steps"], max_steps)} if max_steps else {}
                    partner = None
                    if case.kind == "layout_equivalence":
                        if "vllm" not in handles:
                            handles["vllm"] = backend.load(arm, "vllm")
                        partner = handles["vllm"]
                    result = run_case(handle, case, seed, steps, deadline - 5, partner)
                    entry.update(result)
                    entry["status"] = "passed" if result["ok"] else "failed"
            except Exception as exc:  # recorded, not raised: other cases still run
                status = "rejected" if case.may_reject and handles.get(layout) else "error"
                entry.update(status=status, error=f"{type(exc).__name__}: {exc}")
                entry["traceback"] = traceback.format_exc()[-3000:]
        entry["wall_s"] = round(time.monotonic() - start, 2)
        print(
            f"[{backend_name}/{arm}/{unit}] {case.name}: {entry['status']} "
            f"({entry['wall_s']} s) {entry.get('failure_text', entry.get('error', ''))[:600]}",
            flush=True,
        )
        results[case.name] = entry
        _write_json(out, results)
    return 0


def _markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# GPU conformance results",
        "",
        f"Command: `{summary['command']}`",
        "",
        f"Device: {summary['device']}; torch {summary['torch']}; date {summary['date']} UTC.",
        "",
        "Errors are per-block relative errors (kernels/reference/tolerances.py); `y_true` and "
        "`state_true` against the float64 truth, `y_local`/`fold` against the oracle run on the "
        "backend's own pre-step state.",
        "",
    ]
    for name, why in summary["unavailable"].items():
        lines.append(f"- backend `{name}` not run: {why}")
    lines += [
        "",
        "| backend | arm | case | status | steps | flush rows | wrap rows | y_true max | "
        "y_local max | state_true max | fold max | u_append max | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(x: Any) -> str:
        return f"{x:.2e}" if isinstance(x, float) else ("" if x is None else str(x))

    for row in summary["cases"]:
        s = row.get("summary", {})
        lines.append(
            f"| {row['backend']} | {row['arm']} | {row['case']} | {row['status']} | "
            f"{fmt(s.get('steps'))} | {fmt(s.get('flush_rows'))} | {fmt(s.get('wrap_rows'))} | "
            f"{fmt(s.get('y_true_max'))} | {fmt(s.get('y_local_max'))} | "
            f"{fmt(s.get('state_true_max'))} | {fmt(s.get('fold_max'))} | "
            f"{fmt(s.get('u_append_max'))} | {fmt(row.get('wall_s'))} |"
        )
    problems = [r for r in summary["cases"] if r["status"] in ("failed", "error")]
    if problems:
        lines += ["", "## Failures and errors", ""]
        for row in problems:
            text = row.get("failure_text") or row.get("error") or ""
            lines.append(f"- {row['backend']}/{row['arm']}/{row['case']}: `{text[:800]}`")
    lines += [
        "",
        "## Tolerances (per arm)",
        "",
        "```",
        json.dumps(summary["tolerances"], indent=1),
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=False, default=Path("results/conformance"))
    parser.add_argument("--backends", default=",".join(KERNEL_BACKENDS))
    parser.add_argument("--arms", default="serving,bf16,fp16_io")
    parser.add_argument("--deadline-s", type=float, default=240.0)
    parser.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1))
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--max-steps", type=int, help="cap every case's steps (smoke runs)")
    parser.add_argument(
        "--unit", nargs=3, metavar=("BACKEND", "ARM", "UNIT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--unit-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--deadline-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = {n for n in args.cases.split(",") if n} or None
    if args.unit:
        return run_unit(*args.unit, args.unit_out, args.deadline_at, names, args.max_steps)

    started = time.monotonic()
    deadline = started + args.deadline_s
    command = " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    print(f"torch {torch.__version__}, {device}, python {platform.python_version()}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gdn_conformance_"))
    unavailable: dict[str, str] = {}
    jobs: list[tuple[str, str, str]] = []
    for name in [b for b in args.backends.split(",") if b]:
        backend = get_backend(name)
        ok, why = backend.available()
        if not ok:
            unavailable[name] = why
            print(f"backend {name}: unavailable: {why}", flush=True)
            continue
        for arm in [a for a in args.arms.split(",") if a in backend.arms()]:
            units = sorted({c.unit for c in _selected(arm, backend.arms(), names)})
            jobs += [(name, arm, unit) for unit in units]
    # the mandatory backend's units start first; the drift and 64-bit units are the longest
    jobs.sort(key=lambda j: (j[0] != "flashinfer", j[2] not in ("drift", "huge")))
    print(f"{len(jobs)} units: {jobs}", flush=True)

    running: list[tuple[subprocess.Popen, tuple[str, str, str], Path, Any]] = []
    pending = list(jobs)
    while pending or running:
        while pending and len(running) < args.jobs:
            job = pending.pop(0)
            out = work / f"{'_'.join(job)}.json"
            log = (work / f"{'_'.join(job)}.log").open("w")
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--unit",
                *job,
                "--unit-out",
                str(out),
                "--deadline-at",
                str(deadline),
                "--cases",
                args.cases,
            ]
            if args.max_steps:
                cmd += ["--max-steps", str(args.max_steps)]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT
            )
            running.append((proc, job, out, log))
        time.sleep(0.5)
        for item in list(running):
            proc, job, out, log = item
            if proc.poll() is None and time.monotonic() > deadline + 30:
                proc.kill()  # our own child, by its handle
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                print(
                    f"unit {'/'.join(job)} exited {proc.returncode} "
                    f"after {time.monotonic() - started:.0f} s",
                    flush=True,
                )

    rows: list[dict[str, Any]] = []
    with (args.out / "units.log").open("w") as merged:
        for job in jobs:
            stem = "_".join(job)
            merged.write(f"===== {'/'.join(job)}\n")
            log_path = work / f"{stem}.log"
            merged.write(log_path.read_text()[-20000:] if log_path.exists() else "(no log)\n")
            out = work / f"{stem}.json"
            results = json.loads(out.read_text()) if out.exists() else {}
            backend, arm, unit = job
            expected = _unit_cases(arm, unit, get_backend(backend).arms(), names)
            for case in expected:
                entry = results.get(
                    case.name,
                    {"status": "error", "error": "no result (process crashed or was killed)"},
                )
                rows.append({"backend": backend, "arm": arm, "case": case.name, **entry})
    summary = {
        "command": command,
        "device": device,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "wall_s": round(time.monotonic() - started, 1),
        "unavailable": unavailable,
        "tolerances": {arm: vars(tol) for arm, tol in TOLERANCES.items() if arm != "f64"},
        "counts": {
            status: sum(1 for r in rows if r["status"] == status)
            for status in ("passed", "failed", "error", "rejected", "skipped")
        },
        "cases": rows,
    }
    _write_json(args.out / "conformance.json", summary)
    (args.out / "conformance.md").write_text(_markdown(summary))
    print(json.dumps(summary["counts"]), f"wall {summary['wall_s']} s", flush=True)
    return 0 if summary["counts"]["failed"] == summary["counts"]["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
