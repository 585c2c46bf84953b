"""The dilation factor D: this box's compute for one training step against one T4 GPU's for the same step.

    python bench/dilation.py [--scale 0.02] [--fanouts 25 10] [--steps 12] [--core 1] [--json FILE]

One process pinned to one core (``--core``), one thread (torch and
numba), trains RAF's R-GCN on the mag replica with reverse relations as a
single rank (``Comm.local()``, one meta partition: no communication),
compiled, hidden 64, batch 1024. The first ``--warmup`` steps (compilation)
are dropped; printed: the median wall and CPU seconds of a whole step
(sample, feature fetch, forward, backward, updates) and of each stage, and
``D = median CPU seconds per step / T4_STEP_SECONDS``. CPU time is used
because this box is shared: a process that waits for the core is not
charged for the wait, so CPU time is what the step costs one core alone.

The reference is DGL's own measurement on Heta's testbed instance (AWS
g4dn.metal, T4 GPUs): ``examples/core/rgcn/README.md`` in dmlc/dgl (commit
3d16000b), R-GCN on ogbn-mag with reverse relations, 2 layers, hidden 64,
batch 1024, fanouts [25, 10], sampling on the CPU and training on 1 T4:
~73.6 s per training epoch. ogbn-mag has 629,571 training papers, so an
epoch is ceil(629571 / 1024) = 615 steps and one T4 step takes 73.6 / 615 =
0.1197 s. A link of B bit/s on that cluster is emulated here at B / D.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numba
import torch

T4_EPOCH_SECONDS = 73.6  # dmlc/dgl examples/core/rgcn/README.md, g4dn.metal, 1 T4, ogbn-mag
MAG_TRAIN_PAPERS = 629_571  # ogbn-mag's training split
T4_BATCH = 1024
T4_STEP_SECONDS = T4_EPOCH_SECONDS / math.ceil(MAG_TRAIN_PAPERS / T4_BATCH)


def measure(scale: float, fanouts: list, steps: int, warmup: int, seed: int = 0) -> dict:
    """Wall and CPU seconds of each of ``warmup + steps`` single-rank RAF steps, and stage seconds."""
    from gnnc.distributed import load_partitions
    from gnnc.distributed.collectives import Comm
    from gnnc.distributed.launch import prepare_partitions
    from gnnc.distributed.raf import RAFTrainer

    with tempfile.TemporaryDirectory(prefix="gnnc-dilation-") as tmp:
        facts = prepare_partitions("mag", scale, seed, "meta", 1, len(fanouts), tmp)
        parts = load_partitions(tmp)
    comm = Comm.local()
    trainer = RAFTrainer(
        comm, parts, "rgcn", fanouts, T4_BATCH, 0.01, seed, num_classes=facts["num_classes"], compiled=True
    )
    wall, cpu = [], []
    while len(wall) < warmup + steps:
        for seeds in trainer.epoch_batches():
            if len(wall) == warmup + steps:
                break
            w, c = time.perf_counter(), time.process_time()
            trainer.train_step(seeds)
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
    stages = {
        s: statistics.median(r.seconds.get(s, 0.0) for r in comm.meter.steps[warmup:])
        for s in comm.meter.steps[-1].seconds
    }
    return {"wall": wall[warmup:], "cpu": cpu[warmup:], "stage_wall_median": stages}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.02)
    p.add_argument("--fanouts", type=int, nargs="+", default=[25, 10])
    p.add_argument("--steps", type=int, default=12, help="measured steps, after the warm-up")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--core", type=int, default=1, help="the one core the process runs on")
    p.add_argument("--json", help="also write the measurement here")
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    load = os.getloadavg()
    got = measure(args.scale, args.fanouts, args.steps, args.warmup)
    wall, cpu = statistics.median(got["wall"]), statistics.median(got["cpu"])
    dilation = cpu / T4_STEP_SECONDS
    print(
        f"mag replica at scale {args.scale} with reverse relations, RAF R-GCN as one rank, compiled, hidden 64, "
        f"batch {T4_BATCH}, fanouts {args.fanouts}, core {args.core}, 1 thread; load average "
        f"{load[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"step: median wall {wall:.3f} s, median CPU {cpu:.3f} s over {len(got['cpu'])} steps after "
        f"{args.warmup} warm-up"
    )
    print("stages (median wall s): " + ", ".join(f"{s} {v:.3f}" for s, v in got["stage_wall_median"].items()))
    print(
        f"T4 step (DGL's g4dn.metal figure): {T4_EPOCH_SECONDS} s / {math.ceil(MAG_TRAIN_PAPERS / T4_BATCH)} steps "
        f"= {T4_STEP_SECONDS:.4f} s;  D = {cpu:.3f} / {T4_STEP_SECONDS:.4f} = {dilation:.1f}"
    )
    if args.json:
        record = {**vars(args), **got, "median_wall": wall, "median_cpu": cpu, "dilation": dilation, "load": load}
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
