"""``gnnc train``'s measured path against both forced paths: full-batch GCN and GAT, one process, one thread.

For each dataset and model, three trainings with the same seed and epochs run one after another: ``auto``
(the path measured before the first epoch, as ``gnnc train`` does), ``never`` (``--no-compile``) and
``always`` (``--compile always``). The table gives each one's median epoch (the measurement excluded), the
whole run (measurement included), the path ``auto`` chose with the two medians it chose on, and whether
``auto``'s accuracies equal those of the forced run of the path it chose (they must: the measurement
leaves nothing behind).

    python bench/path_choice.py --datasets cora-replica cora --models gcn gat --epochs 40 \\
        --out bench/results/path-choice
    python bench/path_choice.py --datasets cora-replica:0.01 --out bench/results/path-choice/tiny
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess

import torch

from gnnc import data
from gnnc.data import paths
from gnnc.training import planetoid_experiment

MODES = ("auto", "never", "always")


def _dataset(spec: str):
    """``cora`` (the real files), ``cora-replica`` (Cora-sized) or ``cora-replica:0.01`` (a scaled replica)."""
    name, _, scale = spec.partition(":")
    if name.endswith("-replica"):
        return data.synthetic(name.removesuffix("-replica"), scale=float(scale or 1.0), seed=0)
    return data.load_planetoid(name, paths.resolve(None, "planetoid", f"real dataset {name}"))


def _row(dataset: str, model: str, runs: dict) -> dict:
    auto = runs["auto"]
    forced = runs["never" if auto.path == "eager" else "always"]
    return {
        "dataset": dataset,
        "model": model,
        "chosen": auto.path,
        "measured_compiled_ms": auto.choice.compiled_median * 1e3,
        "measured_eager_ms": auto.choice.eager_median * 1e3,
        "epoch_ms": {m: statistics.median(r.epoch_seconds) * 1e3 for m, r in runs.items()},
        "run_s": {m: r.seconds for m, r in runs.items()},
        "test_acc": {m: r.test_acc for m, r in runs.items()},
        "same_numbers_as_forced": (auto.best_epoch, auto.val_acc, auto.test_acc)
        == (forced.best_epoch, forced.val_acc, forced.test_acc),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["cora-replica", "cora"])
    p.add_argument("--models", nargs="+", default=["gcn", "gat"], choices=["gcn", "gat"])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="folder for results.json and README.md")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in args.datasets:
        ds = _dataset(name)
        for model in args.models:
            runs = {
                mode: planetoid_experiment(
                    model, ds, seed=args.seed, epochs=args.epochs, progress=False, compile_mode=mode
                )
                for mode in MODES
            }
            rows.append(_row(name, model, runs))
            print(_line(rows[-1]), flush=True)
    if args.out:
        _write(args, rows)


HEADER = (
    f"{'dataset':<18} {'model':<5} {'chosen':<8} {'measured c/e ms':>16} "
    f"{'epoch ms: chosen':>17} {'eager':>7} {'compiled':>9} {'run s: chosen':>14} {'eager':>7} "
    f"{'compiled':>9} same numbers"
)


def _line(r: dict) -> str:
    e, t = r["epoch_ms"], r["run_s"]
    measured = f"{r['measured_compiled_ms']:.1f}/{r['measured_eager_ms']:.1f}"
    return (
        f"{r['dataset']:<18} {r['model']:<5} {r['chosen']:<8} {measured:>16} {e['auto']:>17.1f} {e['never']:>7.1f} "
        f"{e['always']:>9.1f} {t['auto']:>14.1f} {t['never']:>7.1f} {t['always']:>9.1f} "
        f"{'yes' if r['same_numbers_as_forced'] else 'NO'}"
    )


def _write(args, rows) -> None:
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    load = os.getloadavg()
    meta = {
        "commit": commit.stdout.strip(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "load_average_at_end": load,
        "epochs": args.epochs,
        "seed": args.seed,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write("\n".join([HEADER, *map(_line, rows)]) + "\n")


if __name__ == "__main__":
    main()
