"""Epoch time and bytes per step of RAF and vanilla-METIS across emulated machines with shaped links (root).

    sudo python bench/emulated_training.py [--scale 0.02] [--machines 2 4] [--rates 1gbit 10gbit]
                                           [--dilation 1] [--measure-rate RATE] [--delay-ms 0] [--nproc 1]
                                           [--epochs 1] [--skip-copies] [--json FILE]

For every machine count and link rate: the mag replica with reverse
relations is partitioned for ``machines * nproc`` workers (meta partitions
for RAF, METIS for vanilla), ``emulated_machines`` builds the machines with
links of that rate (and ``--delay-ms`` one-way latency, where the kernel has
tc netem), and each configuration of ``distributed_comm.CONFIGS`` but the
random baseline trains as one torchrun per machine (2-layer R-GCN, hidden 64,
fanouts [25, 20], batch 1024, compiled, no evaluation). Printed per run: the
epoch time (slowest worker), MiB sent per step summed over workers, and
seconds per stage (slowest worker per stage).

**Time-dilated links.** With ``--dilation D`` the rates are those of the
emulated cluster, whose compute is D times faster than this box's
(``bench/dilation.py`` measures D): a link of rate B is shaped at B / D, so
compute and wire time keep the cluster's ratio, D times slower.
``--measure-rate RATE`` first runs every configuration on links of RATE
(not dilated; a fast link, so that the epoch is almost all compute) for
``bench/projection.py`` to take the compute from. ``--json`` keeps, per run,
the summary and the trainers' full report (bytes and rounds per rank).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distributed_comm import CONFIGS, MiB, summarize
from emulated_jobs import RDZV_PORT, job_env
from emulated_machines import EmulatedMachines, parse_rate
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
    p.add_argument(
        "--dilation", type=float, nargs="+", default=[1.0], help="shape each link at rate / D, for each D given"
    )
    p.add_argument("--measure-rate", help="first run every configuration on these links, not dilated")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--nproc", type=int, default=1, help="workers per machine")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument(
        "--skip-copies", action="store_true", help="leave out RAF with Heta's copies of shared learnable rows"
    )
    p.add_argument("--json", help="also write every summary here")
    args = p.parse_args(argv)
    configs = [c for c in CONFIGS if c[2] != "random" and not (args.skip_copies and c[3] == "replicate")]
    results = []
    with tempfile.TemporaryDirectory(prefix="gnnc-emulated-") as tmp:
        tmp = Path(tmp)
        for machines in args.machines:
            world = machines * args.nproc
            facts = {}
            for method in ("meta", "metis"):
                facts = prepare_partitions("mag", args.scale, 0, method, world, 2, tmp / f"{method}{world}")
            runs = [(d, rate, shaped_rate(rate, d)) for d in args.dilation for rate in args.rates]
            if args.measure_rate:
                runs.insert(0, (1.0, f"{args.measure_rate} (compute)", args.measure_rate))
            for dilation, rate, shaped in runs:
                with EmulatedMachines(machines, rate=shaped, delay_ms=args.delay_ms) as cluster:
                    for label, mode, method, shared in configs:
                        start, load = time.perf_counter(), os.getloadavg()[0]
                        result = run_job(
                            cluster, args, mode, shared, tmp / f"{method}{world}", facts, tmp / "report.json"
                        )
                        s = summarize(result)
                        results.append(
                            {
                                "machines": machines,
                                "rate": rate,
                                "shaped": shaped,
                                "dilation": dilation,
                                "label": label,
                                "load": [load, os.getloadavg()[0]],
                                **s,
                                "report": result,
                            }
                        )
                        if args.json:  # after every run: an interrupted sweep keeps what it measured
                            Path(args.json).write_text(json.dumps(results, indent=1))
                        print(
                            f"done: {machines} machines {rate} / D {dilation:g} (shaped {shaped}) {label} "
                            f"({time.perf_counter() - start:.0f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
    print(
        f"mag replica at scale {args.scale} with reverse relations, {args.nproc} worker(s) per machine, "
        f"links {' / '.join(args.rates)} dilated by D = {' / '.join(map(str, args.dilation))} with "
        f"{args.delay_ms:g} ms added latency, "
        "R-GCN 2 layers, hidden 64, "
        f"fanouts [25, 20], batch 1024, compiled, {args.epochs} epoch(s)"
    )
    print(
        f"{'machines':>8} {'rate':>17} {'D':>5} {'shaped':>11} {'configuration':<24} {'steps':>5} {'MiB/step':>9} "
        f"{'epoch s':>8}  " + " ".join(f"{s[:10]:>10}" for s in STAGES) + "  load"
    )
    for r in results:
        print(
            f"{r['machines']:>8} {r['rate']:>17} {r['dilation']:>5g} {r['shaped']:>11} {r['label']:<24} "
            f"{r['steps']:>5.0f} {r['per_step'] / MiB:>9.2f} {r['epoch_seconds']:>8.1f}  "
            + " ".join(f"{r['stage_seconds'][k]:>10.1f}" for k in STAGES)
            + f"  {r['load'][0]:.1f}-{r['load'][1]:.1f}"
        )
    for machines, rate, dilation in dict.fromkeys((r["machines"], r["rate"], r["dilation"]) for r in results):
        rows = {
            r["label"]: r for r in results if (r["machines"], r["rate"], r["dilation"]) == (machines, rate, dilation)
        }
        raf, vanilla = rows[configs[0][0]], rows["vanilla METIS"]
        print(
            f"{machines} machines, {rate}, D {dilation:g}: vanilla-METIS / RAF (exact) epoch time "
            f"{vanilla['epoch_seconds'] / raf['epoch_seconds']:.2f}x, bytes per step "
            f"{vanilla['per_step'] / raf['per_step']:.1f}x"
        )
    return 0


def shaped_rate(rate: str, dilation: float) -> str:
    """The tc rate of a cluster link of ``rate`` dilated by ``dilation`` (whole kbit/s)."""
    if not dilation > 0:
        raise ValueError(f"--dilation must be positive, got {dilation}")
    return f"{round(parse_rate(rate) / dilation / 1e3)}kbit"


if __name__ == "__main__":
    sys.exit(main())
