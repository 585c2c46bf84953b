"""Communication and epoch time of RAF vs the vanilla baseline (METIS, random) on the mag replica.

    python bench/distributed_comm.py [--scale 0.05] [--nproc 2] [--epochs 1] [--learnable non-target]
                                     [--cache-fraction F] [--skip-random] [--skip-copies]
                                     [--json FILE]

Builds ``gnnc.data.synthetic('mag', scale)`` with reverse relations (4 + 3
relations), partitions it for ``--nproc`` workers three ways (meta for RAF,
METIS and random for vanilla) and trains each configuration with torchrun
(``gnnc.distributed.launch``): 2-layer R-GCN, hidden 64, fanouts [25, 20],
batch 1024 (RAF: one batch shared by all workers; vanilla: 1024 per worker,
DGL's convention), compiled message passing, no evaluation
(``--skip-random`` leaves the random partitioning out, ``--skip-copies``
RAF with Heta's copies). RAF runs twice:
``owner`` (exact: learnable rows of types several partitions hold live with
one owner, the others fetch them) and ``replicate`` (Heta: each partition
trains its own copy). Bytes come from ``gnnc.distributed.meter``'s counters:
for each configuration, the bytes all workers send per step (each byte on the
wire counted once), by stage, per step and per epoch, and the epoch time (the
slowest worker's training time). Per-epoch bytes compare the same work (every
training node once); per-step bytes compare one step of each. With
``--cache-fraction F`` every worker also runs Heta's feature cache (F times
the bytes of the rows it stores) and the hit rate and store bytes read per
epoch, with and without cache, are printed per configuration.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gnnc.distributed.launch import prepare_partitions, torchrun_command, worker_args
from gnnc.training.minibatch import STAGES

MiB = 2.0**20
CONFIGS = (  # label, mode, partitioning, RAF shared-learnable policy
    ("RAF (meta, exact)", "raf", "meta", "owner"),
    ("RAF (meta, Heta copies)", "raf", "meta", "replicate"),
    ("vanilla METIS", "vanilla", "metis", "owner"),
    ("vanilla random", "vanilla", "random", "owner"),
)


def run_config(args, mode: str, method: str, shared: str, parts_dir: Path, facts: dict, report: Path) -> dict:
    wargs = worker_args(
        parts_dir,
        mode,
        "rgcn",
        args.fanouts,
        args.batch_size,
        args.epochs,
        args.lr,
        args.hidden,
        args.seed,
        args.learnable,
        facts["num_classes"],
        facts["target"],
        args.timeout,
        report=report,
        evaluate=False,
        compiled=True,
        shared_learnable=shared,
        cache_fraction=args.cache_fraction,
    )
    start = time.perf_counter()
    done = subprocess.run(torchrun_command(args.nproc, wargs), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{mode} on {method} partitions failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result = json.loads(report.read_text())
    result["wall_seconds"] = wall
    return result


def summarize(result: dict) -> dict:
    """Mean over epochs: bytes sent per step by stage (summed over workers), steps, epoch seconds."""
    epochs = result["epochs"]
    per_stage = {s: sum(sum(r["sent_per_step"][s] for r in e["ranks"]) for e in epochs) / len(epochs) for s in STAGES}
    steps = sum(e["steps"] for e in epochs) / len(epochs)
    seconds = sum(max(sum(r["seconds"].values()) for r in e["ranks"]) for e in epochs) / len(epochs)
    stage_seconds = {
        s: sum(max(r["seconds"].get(s, 0.0) for r in e["ranks"]) for e in epochs) / len(epochs) for s in STAGES
    }
    total = sum(per_stage.values())
    out = {
        "per_stage": per_stage,
        "per_step": total,
        "steps": steps,
        "per_epoch": total * steps,
        "epoch_seconds": seconds,
        "stage_seconds": stage_seconds,
        "loss": epochs[-1]["loss"],
    }
    if "cache" in epochs[0]["ranks"][0]:
        counts = [c for e in epochs for r in e["ranks"] for c in r["cache"].values()]
        hits, misses = sum(c["hits"] for c in counts), sum(c["misses"] for c in counts)
        moved = sum(c["bytes_moved"] for c in counts) / len(epochs)
        out["cache"] = {
            "hit_rate": hits / max(hits + misses, 1),
            "store_bytes": moved,
            "store_bytes_without": moved + sum(c["bytes_saved"] for c in counts) / len(epochs),
        }
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.05, help="replica scale (ogbn-mag = 1.0)")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--fanouts", type=int, nargs="+", default=[25, 20])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learnable", nargs="+", default=["non-target"])
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--cache-fraction",
        type=float,
        default=0.0,
        help="Heta's feature cache on every worker, this fraction of the bytes of its stored rows",
    )
    p.add_argument("--skip-random", action="store_true", help="leave out vanilla on random partitions")
    p.add_argument("--skip-copies", action="store_true", help="leave out RAF with Heta's copies")
    p.add_argument("--json", help="also write the summaries and the trainers' reports here")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gnnc-bench-") as tmp:
        tmp = Path(tmp)
        facts, split_seconds = {}, {}
        configs = [
            c
            for c in CONFIGS
            if not (args.skip_random and c[2] == "random") and not (args.skip_copies and c[3] == "replicate")
        ]
        for method in sorted({c[2] for c in configs}):
            start = time.perf_counter()
            facts = prepare_partitions(
                "mag", args.scale, args.seed, method, args.nproc, len(args.fanouts), tmp / method
            )
            split_seconds[method] = time.perf_counter() - start
        for label, mode, method, shared in configs:
            result = run_config(args, mode, method, shared, tmp / method, facts, tmp / f"{label}.json")
            rows.append((label, {**summarize(result), "report": result}, result["wall_seconds"]))
            print(f"done: {label} ({result['wall_seconds']:.0f} s)", file=sys.stderr, flush=True)
    print(
        f"mag replica at scale {args.scale}, {args.nproc} workers (gloo, CPU), R-GCN 2 layers, hidden {args.hidden}, "
        f"fanouts {args.fanouts}, batch {args.batch_size}, learnable {' '.join(args.learnable)}; partitioning "
        + ", ".join(f"{m} {s:.1f} s" for m, s in split_seconds.items())
        + " (incl. replica build)"
    )
    print("MiB sent per step, summed over workers (each byte on the wire once), by stage:")
    head = f"{'configuration':<24} {'steps':>5} " + " ".join(f"{s[:10]:>10}" for s in STAGES)
    print(head + f" {'MiB/step':>9} {'MiB/epoch':>10} {'epoch s':>8}")
    for label, s, _ in rows:
        print(
            f"{label:<24} {s['steps']:>5.0f} "
            + " ".join(f"{s['per_stage'][k] / MiB:>10.2f}" for k in STAGES)
            + f" {s['per_step'] / MiB:>9.2f} {s['per_epoch'] / MiB:>10.1f} {s['epoch_seconds']:>8.1f}"
        )
    print("seconds per epoch by stage (slowest worker per stage):")
    print(f"{'configuration':<24} " + " ".join(f"{s[:10]:>10}" for s in STAGES))
    for label, s, _ in rows:
        print(f"{label:<24} " + " ".join(f"{s['stage_seconds'][k]:>10.1f}" for k in STAGES))
    if args.cache_fraction > 0:
        print(f"feature cache ({args.cache_fraction:g} of each worker's stored bytes), all workers, per epoch:")
        for label, s, _ in rows:
            c = s["cache"]
            print(
                f"{label:<24} hit rate {c['hit_rate']:6.1%}  store reads {c['store_bytes'] / MiB:8.1f} MiB, "
                f"{c['store_bytes_without'] / MiB:8.1f} MiB without cache"
            )
    base = rows[0][1]
    print(
        "vanilla / RAF (exact) bytes: "
        + ", ".join(
            f"{label}: {s['per_step'] / base['per_step']:.1f}x per step, {s['per_epoch'] / base['per_epoch']:.1f}x per "
            f"epoch"
            for label, s, _ in rows
            if label.startswith("vanilla")
        )
    )
    if args.json:
        Path(args.json).write_text(json.dumps({label: s for label, s, _ in rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
