"""Bar charts of one run, as in the papers' figures: time per model per dataset per system, log scale.

One PNG per mode; one panel per model; failed configurations (OOM,
TIMEOUT, MISMATCH, ...) get their status written where their bar would be.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .models import MODELS
from .report import MODE_TITLES

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def plot_mode(record: dict, mode: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in record["rows"] if r["mode"] == mode]
    models = list(dict.fromkeys(r["model"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    color = {s: COLORS[i % len(COLORS)] for i, s in enumerate(systems)}
    ncols = min(4, len(models))
    nrows = math.ceil(len(models) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.9 * nrows), squeeze=False)
    ok_times = [r["time_ms"] for r in rows if r["status"] == "ok"]
    low, high = (min(ok_times) / 4, max(ok_times) * 4) if ok_times else (0.1, 10)
    for ax, model in zip(axes.flat, models):
        mine = [r for r in rows if r["model"] == model]
        datasets = list(dict.fromkeys(r["dataset"] for r in mine))
        here = [s for s in systems if any(r["system"] == s for r in mine)]
        width = 0.8 / len(here)
        for j, system in enumerate(here):
            for i, dataset in enumerate(datasets):
                row = next((r for r in mine if (r["system"], r["dataset"]) == (system, dataset)), None)
                if row is None:
                    continue
                x = i - 0.4 + width * (j + 0.5)
                if row["status"] == "ok":
                    ax.bar(x, row["time_ms"], width, color=color[system])
                else:
                    ax.text(
                        x,
                        low * 1.3,
                        row["status"],
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        color="#c00000",
                        fontweight="bold",
                    )
        ax.set_yscale("log")
        ax.set_ylim(low, high)
        ax.set_xticks(range(len(datasets)), datasets, fontsize=8)
        ax.set_title(MODELS[model].title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", which="major", alpha=0.3)
    for ax in list(axes.flat)[len(models) :]:
        ax.axis("off")
    axes[0][0].set_ylabel("ms (log)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=color[s]) for s in systems]
    fig.legend(handles, systems, loc="lower center", ncol=len(systems), fontsize=8, frameon=False)
    fig.suptitle(f"gnnc bench ({record['preset']}): {MODE_TITLES[mode]}", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(path, dpi=80, format="png")
    plt.close(fig)


def missing() -> str | None:
    """Why no plots can be drawn here, in one line; None when they can."""
    try:
        import matplotlib  # noqa: F401 - whether it imports
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]' draws them)"
    return None


def plot(record: dict, out_dir: Path) -> list[Path]:
    """``<mode>.png`` in ``out_dir`` for every mode of the run that has rows; each is drawn into a temporary
    file and renamed, so a reader never sees half a PNG. None without matplotlib (``missing``)."""
    if missing():
        return []
    paths = []
    for mode in record["settings"]["modes"]:
        if not any(r["mode"] == mode for r in record["rows"]):
            continue
        path, tmp = out_dir / f"{mode}.png", out_dir / f".{mode}.png.tmp"
        plot_mode(record, mode, tmp)
        os.replace(tmp, path)
        paths.append(path)
    return paths
