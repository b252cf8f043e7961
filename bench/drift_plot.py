"""Plot the long-run drift curves of a conformance run (results/conformance/*.json) to a PNG.

    python3 bench/drift_plot.py results/conformance/h200-conformance.json docs/conformance-drift.png

One panel per metric (draft outputs y and reconstructed state, both against the float64 truth),
one line per backend/arm: the per-step maximum over (request, head) blocks, with the tolerance.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: Path, dst: Path) -> None:
    data = json.loads(src.read_text())
    drift_rows = [r for r in data["cases"] if r["case"] == "drift" and "series" in r]
    if not drift_rows:
        raise SystemExit(f"{src}: no drift series")
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharex=True)
    for ax, metric, tol_key, title in (
        (axes[0], "y_true", "y_true_rel", "draft outputs y vs float64 truth"),
        (axes[1], "state_true", "state_true_rel", "checkpoint + window vs float64 truth"),
    ):
        for row in drift_rows:
            series = row["series"][metric]["max"]
            label = f"{row['backend']} / {row['arm']}"
            (line,) = ax.plot(range(len(series)), series, lw=0.7, label=label)
            tol = data["tolerances"][row["arm"]][tol_key]
            ax.axhline(tol, color=line.get_color(), ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("step (batch 8, T=4, random accepted n in [1, 4])")
        ax.set_ylabel("max relative error per step (dashed: tolerance)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"ReplaySSM long-run drift on {data['device']}")
    fig.tight_layout()
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
