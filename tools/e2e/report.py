"""Judge and tabulate e2e results (#10): correctness against no speculation, acceptance, speed
ratios, bad-configuration checks. Pure Python on the result dicts the workers write, so it runs
(and is tested) on CPU; `bench/e2e.py report` re-renders committed results here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

# A greedy divergence counts as rounding (legitimate) when the reference run's own top-2
# logprob margin at the first differing position is below this: bf16 logits carry ~3 significant
# digits, and the spec paths reorder GDN sums (fp16/bf16 state) differently from no speculation.
ROUNDING_MARGIN = 0.05
# No bound on the NUMBER of tie divergences: ties are a property of the model, not of a backend.
# On the tiny bf16 model (H200, session 2) vLLM's own spec path (`native`, fp32 state) left no
# speculation in 56 of 64 requests over 256 tokens, every first divergence at a reference margin
# of 0 or 1-2 bf16 steps of the logit (0.0156, 0.0312); the fp16-state backends flip a few more
# ties, earlier. What tells a bug from rounding is the margin: a state error large enough to
# matter flips tokens whose margin is clear, and most positions have a clear margin. The control's
# count and median first-divergence position are printed beside every backend for comparison.
CONTROL_BACKEND = "native"
# job statuses of a job that ran to its end (a bad configuration that failed with the designed
# message is "expected-error"); every other status is a job that did not complete
COMPLETED = ("ok", "expected-error")


@dataclass
class Divergence:
    request: int
    position: int  # first differing output position
    reference_token: int
    token: int
    reference_margin: float | None  # top1 - top2 logprob of the reference at that position


@dataclass
class Comparison:
    backend: str
    requests: int
    identical: int
    divergences: list[Divergence]
    verdict: str  # "identical" | "bounded" | "DIVERGES" | "no reference" | "error"
    note: str = ""


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """First index where the two token lists differ (a length difference counts), else None."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(
    backend: str,
    reference: dict,
    candidate: dict,
    margin: float = ROUNDING_MARGIN,
) -> Comparison:
    """candidate vs reference (both: {"tokens": [[...]], "margins": [[...]] | None})."""
    ref_tokens, tokens = reference["tokens"], candidate["tokens"]
    if len(ref_tokens) != len(tokens):
        return Comparison(
            backend,
            len(tokens),
            0,
            [],
            "error",
            f"{len(tokens)} outputs vs {len(ref_tokens)} in the reference",
        )
    margins = reference.get("margins") or [None] * len(ref_tokens)
    divergences = []
    for i, (ref, out) in enumerate(zip(ref_tokens, tokens, strict=True)):
        pos = first_divergence(ref, out)
        if pos is None:
            continue
        row = margins[i] or []
        gap = row[pos] if pos < len(row) else None
        divergences.append(
            Divergence(
                i, pos, ref[pos] if pos < len(ref) else -1, out[pos] if pos < len(out) else -1, gap
            )
        )
    identical = len(tokens) - len(divergences)
    if not divergences:
        verdict, note = "identical", ""
    else:
        rounding = [
            d for d in divergences if d.reference_margin is not None and d.reference_margin < margin
        ]
        worst = max((d.reference_margin or 0.0) for d in divergences)
        positions = sorted(d.position for d in divergences)
        summary = (
            f"{len(divergences)} request(s) diverge, first divergence median token "
            f"{positions[len(positions) // 2]}"
        )
        if len(rounding) == len(divergences):
            verdict = "bounded"
            note = f"{summary}, all at reference top-2 margins < {margin} (max {worst:.3f}): ties"
        else:
            verdict = "DIVERGES"
            note = (
                f"{summary}; {len(divergences) - len(rounding)} at a clear reference margin "
                f"(max {worst:.3f})"
            )
    return Comparison(backend, len(tokens), identical, divergences, verdict, note)


def acceptance(metrics: dict | None) -> dict | None:
    """Mean accepted draft tokens per step and per-position rates from the spec counters."""
    if not metrics or not metrics.get("spec_decode_num_drafts"):
        return None
    drafts = metrics["spec_decode_num_drafts"]
    accepted = metrics.get("spec_decode_num_accepted_tokens", 0)
    draft_tokens = metrics.get("spec_decode_num_draft_tokens", 0)
    per_pos = metrics.get("spec_decode_num_accepted_tokens_per_pos") or []
    return {
        "accepted_per_step": accepted / drafts,
        "tokens_per_step": 1 + accepted / drafts,
        "draft_acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "per_position": [round(x / drafts, 3) for x in per_pos],
    }


def judge_correctness(results: list[dict]) -> list[dict]:
    """Group correctness results by (model, mode); compare each backend with `nospec`."""
    groups: dict[tuple[str, str, str], dict[str, dict]] = {}
    for res in results:
        job = res["job"]
        if job["suite"] in ("correctness", "smoke"):
            groups.setdefault((job["suite"], job["model"], job["mode"]), {})[job["backend"]] = res
    rows = []
    for (suite, model, mode), by_backend in sorted(groups.items()):
        ref = by_backend.get("nospec")
        control = by_backend.get(CONTROL_BACKEND)
        control_note = ""
        if ref is not None and ref["status"] == "ok" and control and control["status"] == "ok":
            own = compare_outputs(CONTROL_BACKEND, ref["output"], control["output"])
            if own.divergences:
                control_note = f" [native: {own.note.split(', all at')[0]}]"
        for backend, res in sorted(by_backend.items()):
            row = {
                "suite": suite,
                "model": model,
                "mode": mode if suite == "correctness" else f"{mode} ({suite})",
                "backend": backend,
                "status": res["status"],
                "preemptions": (res.get("metrics") or {}).get("num_preemptions"),
                "acceptance": acceptance(res.get("metrics")),
                "seconds": res.get("seconds"),
            }
            if res["status"] == "expected-error":
                row |= {"verdict": "refused (by design)", "note": (res.get("error") or "")[-200:]}
            elif res["status"] != "ok":
                row |= {"verdict": res["status"], "note": (res.get("error") or "")[:300]}
            elif backend == "nospec":
                check = res.get("prefill_check")
                row |= {"verdict": "reference", "note": "", "prefill_check": check}
            elif ref is None or ref["status"] != "ok":
                row |= {"verdict": "no reference", "note": "nospec did not run in this mode"}
            else:
                comp = compare_outputs(backend, ref["output"], res["output"])
                if backend == CONTROL_BACKEND:
                    if comp.verdict == "bounded":
                        comp.verdict = "control"  # vLLM's own path: its ties are measured
                elif comp.divergences:
                    comp.note += control_note
                row |= {
                    "verdict": comp.verdict,
                    "note": comp.note,
                    "prefill_check": res.get("prefill_check"),
                    "identical": f"{comp.identical}/{comp.requests}",
                    "divergences": [asdict(d) for d in comp.divergences[:8]],
                }
            rows.append(row)
    return rows


def _other_level(model: str) -> str:
    if model.endswith("-agree"):
        return model.removesuffix("-agree") + "-reject"
    if model.endswith("-reject"):
        return model.removesuffix("-reject") + "-agree"
    return model


def sample_range(point: dict) -> tuple[float, float] | None:
    """(min, max) decode tokens/s over a speed point's timed samples; None for a point without
    samples (files before session 3 kept only the single-shot value)."""
    values = [s["decode_tok_s"] for s in point.get("samples") or []]
    return (min(values), max(values)) if values else None


def ranges_overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    """Whether two sample ranges overlap; None when either is unknown."""
    if a is None or b is None:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def speed_rows(results: list[dict], state_bytes: dict | None = None) -> list[dict]:
    """Decode tokens/s per (model, backend, batch) with ratios to native spec and nospec, the
    timed samples' range, and whether that range overlaps native's (the ratio is then noise)."""
    table: dict[tuple[str, int], dict[str, dict]] = {}
    for res in results:
        if res["job"]["suite"] != "speed" or res["status"] != "ok":
            continue
        for point in res.get("speed", []):
            table.setdefault((res["job"]["model"], point["batch"]), {})[res["job"]["backend"]] = (
                point
            )
    rows = []
    for (model, batch), by_backend in sorted(table.items()):
        # -agree and -reject checkpoints share the target model (only mtp.* differs), so one
        # nospec run serves both acceptance levels.
        sibling = table.get((_other_level(model), batch), {})
        native_point = by_backend.get("native")
        nospec_point = by_backend.get("nospec", sibling.get("nospec"))
        native = native_point["decode_tok_s"] if native_point else None
        nospec = nospec_point["decode_tok_s"] if nospec_point else None
        native_range = sample_range(native_point) if native_point else None
        for backend, point in sorted(by_backend.items()):
            tok_s = point["decode_tok_s"]
            spread = sample_range(point)
            rows.append(
                {
                    "model": model,
                    "batch": batch,
                    "backend": backend,
                    "decode_tok_s": tok_s,
                    "samples": len(point.get("samples") or []),
                    "samples_min": spread[0] if spread else None,
                    "samples_max": spread[1] if spread else None,
                    "vs_native": tok_s / native if native else None,
                    "vs_native_within_noise": (
                        None if backend == "native" else ranges_overlap(spread, native_range)
                    ),
                    "vs_nospec": tok_s / nospec if nospec else None,
                    "state_mib_per_request": (state_bytes or {}).get((model, backend)),
                }
            )
    return rows


def _fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def samples_cell(row: dict) -> str:
    """`min-max (max/min)` of a speed row's timed samples, `-` for a file without samples."""
    low, high = row.get("samples_min"), row.get("samples_max")
    if low is None or high is None:
        return "-"
    spread = f"{high / low:.2f}x" if low > 0 else "-"
    return f"{low:.0f}-{high:.0f} ({spread})"


def vs_native_cell(row: dict) -> str:
    cell = _fmt(row["vs_native"])
    return f"{cell} (noise)" if row.get("vs_native_within_noise") else cell


def prefill_cell(check: dict | None) -> str:
    """`off/total (max gap)`: generated tokens that are not the full-prefill argmax within
    ROUNDING_MARGIN (bench/e2e.py prefill_check)."""
    if not check:
        return "-"
    if "error" in check:
        return "error: " + check["error"][:60]
    return f"{check['off_argmax']}/{check['tokens']} (max {check['max_gap']:.3f})"


def markdown(results: list[dict], state_bytes: dict | None = None, command: str = "") -> str:
    lines = ["# End to end on the H200 (#10)", ""]
    if command:
        lines += ["Command:", "", f"    {command}", ""]
    meta = next((r.get("host") for r in results if r.get("host")), None)
    if meta:
        lines += [f"Host: {meta}", ""]
    corr = judge_correctness(results)
    if corr:
        lines += [
            "## Correctness: greedy tokens against no speculation",
            "",
            "| model | mode | backend | verdict | identical | prefill check | tokens/step "
            "| preemptions | s | note |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in corr:
            acc = r.get("acceptance") or {}
            lines.append(
                f"| {r['model']} | {r['mode']} | {r['backend']} | {r['verdict']} | "
                f"{r.get('identical', '-')} | {prefill_cell(r.get('prefill_check'))} | "
                f"{_fmt(acc.get('tokens_per_step'))} | "
                f"{_fmt(r.get('preemptions'), 'd') if r.get('preemptions') is not None else '-'}"
                f" | {_fmt(r.get('seconds'), '.0f')} | {r.get('note', '')} |"
            )
        lines.append("")
    speed = speed_rows(results, state_bytes)
    if speed:
        lines += [
            "## Decode speed (tokens/s; ratios taken in one run)",
            "",
            "tok/s is the median of the timed samples; `samples` gives their min-max and max/min. "
            "`(noise)`: this backend's samples overlap native's in the same run, so the ratio "
            "does not show a difference.",
            "",
            "| model | batch | backend | tok/s | samples | vs native spec | vs no spec "
            "| GDN state MiB/request |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in speed:
            lines.append(
                f"| {r['model']} | {r['batch']} | {r['backend']} | {r['decode_tok_s']:.0f} | "
                f"{samples_cell(r)} | {vs_native_cell(r)} | {_fmt(r['vs_nospec'])} | "
                f"{_fmt(r['state_mib_per_request'])} |"
            )
        accs = [
            (res["job"]["model"], res["job"]["backend"], acceptance(res.get("metrics")))
            for res in results
            if res["job"]["suite"] == "speed" and res["status"] == "ok"
        ]
        accs = [a for a in accs if a[2]]
        if accs:
            lines += [
                "",
                "Measured acceptance (speed runs): "
                + "; ".join(f"{m} {b}: {a['tokens_per_step']:.2f} tokens/step" for m, b, a in accs),
            ]
        lines.append("")
    bad = [r for r in results if r["job"]["suite"] == "badconfig"]
    if bad:
        lines += [
            "## Bad configuration fails at init with the designed message",
            "",
            "| setting | result | message |",
            "|---|---|---|",
        ]
        for r in bad:
            msg = (r.get("error") or "").replace("\n", " ").replace("|", "/")[:240]
            lines.append(f"| {r['job']['mode']} | {r['status']} | {msg} |")
        lines.append("")
    other = [r for r in results if r["status"] not in COMPLETED]
    if other:
        lines += ["## Jobs that did not complete", ""]
        lines += [
            f"- {r['job']['suite']}/{r['job']['model']}/{r['job']['mode']}/"
            f"{r['job']['backend']}: {r['status']}"
            for r in other
        ]
        lines.append("")
    return "\n".join(lines)


def plot_speed(results: list[dict], path: Path) -> bool:
    """Decode tokens/s against batch, one panel per model. False if nothing to plot."""
    rows = speed_rows(results)
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for backend in sorted({r["backend"] for r in rows if r["model"] == model}):
            pts = sorted(
                (r["batch"], r["decode_tok_s"])
                for r in rows
                if r["model"] == model and r["backend"] == backend
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=backend)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (concurrent requests)")
        ax.set_ylabel("decode tokens/s")
        ax.set_title(model)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def compact(result: dict) -> dict:
    """A result without its token lists and margins (the judged rows keep what matters), so the
    committed JSON stays small: the work tree travels with every device call."""
    out = {k: v for k, v in result.items() if k not in ("output", "log_tail")}
    if result.get("output"):
        out["output"] = {
            "requests": len(result["output"]["tokens"]),
            "tokens": sum(len(t) for t in result["output"]["tokens"]),
        }
    return out


def load_results(paths: list[Path]) -> list[dict]:
    results = []
    for path in paths:
        data = json.loads(path.read_text())
        rows = data["results"] if isinstance(data, dict) else data
        # Compact files (report's own output) carry no tokens: only raw run files are judged.
        results.extend(
            r for r in rows if not r.get("output") or isinstance(r["output"].get("tokens"), list)
        )
    # A job cut by one run's deadline and completed by a resumed run is not "did not complete".
    done = {_job_key(r) for r in results if r["status"] in COMPLETED}
    return [r for r in results if r["status"] in COMPLETED or _job_key(r) not in done]


def _job_key(result: dict) -> tuple:
    job = result["job"]
    return (job["suite"], job["model"], job["mode"], job["backend"])
