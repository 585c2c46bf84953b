"""Epoch time and bytes per step of RAF and vanilla-METIS across emulated machines with shaped links (root).

    sudo python bench/emulated_training.py [--scale 0.02] [--machines 2 4] [--rates 1gbit 10gbit]
                                           [--delay-ms 0] [--nproc 1] [--epochs 1] [--json FILE]

For every machine count and link rate: the mag replica with reverse
relations is partitioned for ``machines * nproc`` workers (meta partitions
for RAF, METIS for vanilla), ``emulated_machines`` builds the machines with
links of that rate (and ``--delay-ms`` one-way latency, where the kernel has
tc netem), and each configuration of ``distributed_comm.CONFIGS`` but the
random baseline trains as one torchrun per machine (2-layer R-GCN, hidden 64,
fanouts [25, 20], batch 1024, compiled, no evaluation). Printed per run: the
epoch time (slowest worker), MiB sent per step summed over workers, and RAF's
seconds per stage (slowest worker per stage).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distributed_comm import CONFIGS, MiB, summarize
from emulated_jobs import RDZV_PORT, job_env
from emulated_machines import EmulatedMachines
from gnnc.distributed.launch import prepare_partitions, torchrun_command, worker_args
from gnnc.training.minibatch import STAGES


def run_job(cluster, args, mode, shared, parts_dir, facts, report) -> dict:
    wargs = worker_args(
        parts_dir,
        mode,
        "rgcn",
        [25, 20],
        1024,
        args.epochs,
        0.01,
        64,
        0,
        ["non-target"],
        facts["num_classes"],
        facts["target"],
        600,
        report=report,
        evaluate=False,
        compiled=True,
        shared_learnable=shared,
    )
    procs = [
        cluster.popen(
            i,
            torchrun_command(args.nproc, wargs, cluster.count, i, f"{cluster.address(0)}:{RDZV_PORT}"),
            env=job_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(cluster.count)
    ]
    errors = [p.communicate()[1] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"{mode} ({shared}) failed:\n" + "\n".join(e[-3000:] for e in errors))
    return json.loads(Path(report).read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.02)
    p.add_argument("--machines", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rates", nargs="+", default=["1gbit", "10gbit"])
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--nproc", type=int, default=1, help="workers per machine")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--json", help="also write every summary here")
    args = p.parse_args(argv)
    configs = [c for c in CONFIGS if c[2] != "random"]
    results = []
    with tempfile.TemporaryDirectory(prefix="gnnc-emulated-") as tmp:
        tmp = Path(tmp)
        for machines in args.machines:
            world = machines * args.nproc
            facts = {}
            for method in ("meta", "metis"):
                facts = prepare_partitions("mag", args.scale, 0, method, world, 2, tmp / f"{method}{world}")
            for rate in args.rates:
                with EmulatedMachines(machines, rate=rate, delay_ms=args.delay_ms) as cluster:
                    for label, mode, method, shared in configs:
                        start = time.perf_counter()
                        result = run_job(
                            cluster, args, mode, shared, tmp / f"{method}{world}", facts, tmp / "report.json"
                        )
                        s = summarize(result)
                        results.append({"machines": machines, "rate": rate, "label": label, **s})
                        print(
                            f"done: {machines} machines {rate} {label} ({time.perf_counter() - start:.0f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
    print(
        f"mag replica at scale {args.scale} with reverse relations, {args.nproc} worker(s) per machine, "
        f"links {' / '.join(args.rates)} with {args.delay_ms:g} ms added latency, R-GCN 2 layers, hidden 64, "
        f"fanouts [25, 20], batch 1024, compiled, {args.epochs} epoch(s)"
    )
    print(
        f"{'machines':>8} {'rate':>7} {'configuration':<24} {'steps':>5} {'MiB/step':>9} {'epoch s':>8}  "
        + " ".join(f"{s[:10]:>10}" for s in STAGES)
    )
    for r in results:
        print(
            f"{r['machines']:>8} {r['rate']:>7} {r['label']:<24} {r['steps']:>5.0f} {r['per_step'] / MiB:>9.2f} "
            f"{r['epoch_seconds']:>8.1f}  " + " ".join(f"{r['stage_seconds'][k]:>10.1f}" for k in STAGES)
        )
    for machines in args.machines:
        for rate in args.rates:
            rows = {r["label"]: r for r in results if (r["machines"], r["rate"]) == (machines, rate)}
            raf, vanilla = rows[configs[0][0]], rows["vanilla METIS"]
            print(
                f"{machines} machines, {rate}: vanilla-METIS / RAF (exact) epoch time "
                f"{vanilla['epoch_seconds'] / raf['epoch_seconds']:.2f}x, bytes per step "
                f"{vanilla['per_step'] / raf['per_step']:.1f}x"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
