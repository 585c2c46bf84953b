"""``gnnc train --dist``: start workers with torchrun, and the worker entry point.

``run_cli(args)`` (the ``gnnc train --dist`` namespace) partitions a
synthetic replica into a temporary directory (meta partitions for RAF,
METIS or random ones for the vanilla baseline) unless ``--partitions``
names a directory written by ``gnnc partition``, then runs
``torchrun_command`` and returns its exit status.

Each worker (``python -m gnnc.distributed.launch ...``, started by
torchrun, which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT) joins the process group with a bounded timeout (gloo; with
``--device cuda``, NCCL, the worker computing on GPU LOCAL_RANK of its
machine as ``gnnc.distributed.trainer`` describes), loads the partitions,
keeps its own part, trains with ``RAFTrainer`` or ``VanillaTrainer`` and prints
per-epoch lines on rank 0; ``--report FILE`` makes rank 0 write every
rank's per-epoch losses, wall and CPU seconds, bytes and collective rounds as JSON. A worker that fails (a
peer died, a timeout, a bad input) prints the error naming its rank and
exits with status 1 at once, so torchrun stops the others.

``--checkpoint DIR`` writes a checkpoint after every epoch
(``gnnc.distributed.checkpoint``: a file per rank, the replicated state once,
a manifest) and ``--resume`` continues from it up to ``--epochs`` epochs in
all, with the losses of an uninterrupted run; the report then covers the
epochs before the interruption too. ``--cache-fraction F`` (> 0) gives
every rank Heta's feature cache over the rows it stores, built from
pre-sampling after a resume; epoch lines and the report add its hits,
misses and store bytes (with and without cache) per node type.

Across machines, run the same command on each machine with ``--nnodes M
--node-rank i --rdzv-endpoint HOST:PORT`` (torchrun's static rendezvous on machine 0,
which every machine reaches; GLOO_SOCKET_IFNAME names the interface gloo uses) and the partition
directory at the same path on each; a rank reads the manifest and keeps only its own part's graph and rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

WORKER_MODULE = "gnnc.distributed.launch"
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def torchrun_command(
    nproc: int, worker_args: list, nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None
) -> list[str]:
    """argv that starts ``nproc`` workers here with torchrun (``torch.distributed.run``).

    One machine without an endpoint uses ``--standalone`` (a free local
    port). Several machines use torchrun's static rendezvous at
    ``rdzv_endpoint`` (a TCP store on machine ``node_rank`` 0's address):
    machine ``node_rank`` runs ranks ``node_rank * nproc`` to
    ``(node_rank + 1) * nproc - 1``, and a torchrun whose workers failed
    ends at once (c10d's elastic rendezvous would first try to close the
    rendezvous on its host, and waits without end when that host is cut
    off). Workers are not restarted: a failure ends the run.
    """
    if nproc < 1 or nnodes < 1:
        raise ValueError(f"torchrun_command: nproc and nnodes must be positive, got {nproc} and {nnodes}")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--max-restarts=0"]
    if nnodes == 1 and rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ValueError("torchrun_command: several machines need a rendezvous endpoint HOST:PORT")
        cmd += [
            f"--nnodes={nnodes}",
            f"--node-rank={node_rank}",
            "--rdzv-backend=static",
            f"--rdzv-endpoint={rdzv_endpoint}",
        ]
    return cmd + ["-m", WORKER_MODULE, *map(str, worker_args)]


def worker_args(
    partitions,
    mode: str,
    model: str,
    fanouts,
    batch_size: int,
    epochs: int,
    lr: float,
    hidden: int,
    seed: int,
    learnable,
    num_classes: int,
    target: str,
    timeout_s: float,
    report=None,
    dtype: str = "float32",
    evaluate: bool = True,
    compiled: bool = False,
    shared_learnable: str = "owner",
    checkpoint=None,
    resume: bool = False,
    cache_fraction: float = 0.0,
    device: str = "cpu",
) -> list[str]:
    """The worker's command line for these settings (see ``worker_parser``)."""
    args = [
        "--partitions",
        str(partitions),
        "--mode",
        mode,
        "--model",
        model,
        "--fanouts",
        *map(str, fanouts),
        "--batch-size",
        str(batch_size),
        "--epochs",
        str(epochs),
        "--lr",
        str(lr),
        "--hidden",
        str(hidden),
        "--seed",
        str(seed),
        "--learnable",
        *learnable,
        "--num-classes",
        str(num_classes),
        "--target",
        target,
        "--timeout",
        str(timeout_s),
        "--dtype",
        dtype,
        "--shared-learnable",
        shared_learnable,
        "--cache-fraction",
        str(cache_fraction),
        "--device",
        device,
    ]
    if report is not None:
        args += ["--report", str(report)]
    if checkpoint is not None:
        args += ["--checkpoint", str(checkpoint)]
    if resume:
        args.append("--resume")
    if not evaluate:
        args.append("--no-eval")
    if compiled:
        args.append("--compile")
    return args


def worker_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gnnc.distributed.launch",
        description="one gnnc distributed training worker (started by torchrun)",
    )
    p.add_argument("--partitions", required=True, help="partition directory (manifest.json, part0/, ...)")
    p.add_argument("--mode", choices=["raf", "vanilla"], required=True)
    p.add_argument("--model", choices=["rgcn", "rgat", "hgt"], default="rgcn")
    p.add_argument("--fanouts", type=int, nargs="+", default=[25, 20])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learnable", nargs="+", default=["non-target"])
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--target", required=True, help="the labelled node type")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for peers")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--report", help="rank 0 writes per-epoch seconds and bytes of every rank here (JSON)")
    p.add_argument("--no-eval", action="store_true", help="skip validation / test accuracy")
    p.add_argument("--compile", action="store_true", help="run message passing through the gnnc compiler")
    p.add_argument(
        "--shared-learnable",
        choices=["owner", "replicate"],
        default="owner",
        help="RAF: learnable rows of a type several partitions hold live with one owner (exact) "
        "or are copied per partition (Heta)",
    )
    p.add_argument("--checkpoint", metavar="DIR", help="write a checkpoint here after every epoch")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint")
    p.add_argument(
        "--cache-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="feature cache of F times the bytes of the rows each rank stores (0: no cache)",
    )
    p.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cuda: compute on GPU LOCAL_RANK and join with NCCL; cpu: gloo",
    )
    return p


def make_trainer(comm, parts, args):
    """``RAFTrainer`` or ``VanillaTrainer`` for the worker arguments ``args``, computing on ``comm.device``."""
    from .raf import RAFTrainer
    from .vanilla import VanillaTrainer

    learnable = args.learnable[0] if args.learnable in (["non-target"], ["missing"]) else args.learnable
    options = dict(
        num_classes=args.num_classes,
        hidden=args.hidden,
        learnable=learnable,
        dtype=DTYPES[args.dtype],
        compiled=args.compile,
        device=comm.device,
    )
    if args.mode == "raf":
        return RAFTrainer(
            comm,
            parts,
            args.model,
            args.fanouts,
            args.batch_size,
            args.lr,
            args.seed,
            shared_learnable=args.shared_learnable,
            **options,
        )
    return VanillaTrainer(
        comm, parts, args.model, args.fanouts, args.batch_size, args.lr, args.seed, target=args.target, **options
    )


def _gather_epoch(comm, stats, ntypes: list) -> dict:
    """This epoch's losses, and every rank's wall and CPU seconds, bytes and rounds per step and cache
    counts (rank order), outside the step records."""
    from ..training.minibatch import STAGES
    from .trainer import CACHE_FIELDS

    mine = torch.tensor(
        [
            [stats.seconds.get(s, 0.0) for s in STAGES],
            [stats.sent_per_step.get(s, 0.0) for s in STAGES],
            [stats.received_per_step.get(s, 0.0) for s in STAGES],
            [stats.rounds_per_step.get(s, 0.0) for s in STAGES],
            [stats.cpu_seconds.get(s, 0.0) for s in STAGES],
        ],
        dtype=torch.float64,
    )
    with comm.meter.outside_steps():
        ranks = comm.all_gather(mine)
        if stats.cache is not None:
            counts = torch.tensor(
                [[stats.cache.get(t, {}).get(k, 0) for k in CACHE_FIELDS] for t in ntypes], dtype=torch.float64
            )
            caches = [
                {t: dict(zip(CACHE_FIELDS, map(int, row.tolist()))) for t, row in zip(ntypes, c) if row.any()}
                for c in comm.all_gather(counts)
            ]
    record = {
        "epoch": stats.epoch,
        "loss": stats.loss,
        "losses": stats.losses,
        "train_acc": stats.train_acc,
        "val_acc": stats.val_acc,
        "test_acc": stats.test_acc,
        "steps": stats.steps,
        "eval_seconds": stats.eval_seconds,
        "ranks": [
            {
                "seconds": dict(zip(STAGES, r[0].tolist())),
                "sent_per_step": dict(zip(STAGES, r[1].tolist())),
                "received_per_step": dict(zip(STAGES, r[2].tolist())),
                "rounds_per_step": dict(zip(STAGES, r[3].tolist())),
                "cpu_seconds": dict(zip(STAGES, r[4].tolist())),
            }
            for r in ranks
        ],
    }
    if stats.cache is not None:
        for entry, cache in zip(record["ranks"], caches):
            entry["cache"] = cache
    return record


def cache_line(record: dict) -> str:
    """The cache counts of an epoch record summed over ranks, and the bytes the ranks fetched from each other."""
    from .trainer import CACHE_FIELDS, format_cache

    total = {}
    for rank in record["ranks"]:
        for t, counts in rank["cache"].items():
            into = total.setdefault(t, dict.fromkeys(CACHE_FIELDS, 0))
            for k in CACHE_FIELDS:
                into[k] += counts[k]
    fetched = sum(r["received_per_step"]["feature fetch"] for r in record["ranks"]) * record["steps"]
    return (
        f"  all ranks: {format_cache(total)}; rows received from other ranks {fetched / 2**20:.2f} MiB "
        "(a rank caches the rows it stores; it serves the others' requests through its cache)"
    )


def run_worker(comm, parts, args):
    """Train (resuming and checkpointing as ``args`` say) and return the trainer and every epoch's record."""
    from ..checkpoints import check_writable
    from .checkpoint import load_checkpoint, save_checkpoint

    if args.checkpoint:
        check_writable(args.checkpoint)  # before an epoch is spent
    trainer = make_trainer(comm, parts, args)
    records = load_checkpoint(trainer, args.checkpoint)["records"] if args.resume else []
    if comm.rank == 0 and args.resume:
        print(f"resumed from {args.checkpoint} after epoch {trainer.epoch}", flush=True)
    if args.cache_fraction > 0:
        start = time.perf_counter()
        cache = trainer.build_cache(args.cache_fraction)
        if comm.rank == 0:
            rows = ", ".join(f"{t} {plan.rows:,}" for t, plan in cache.plan.items())
            print(
                f"rank 0 feature cache: {cache.cache_bytes() / 2**20:.2f} MiB ({rows} rows), built in "
                f"{time.perf_counter() - start:.1f}s",
                flush=True,
            )
    while trainer.epoch < args.epochs:
        stats = trainer.run_epoch(evaluate=not args.no_eval)
        records.append(_gather_epoch(comm, stats, trainer.inputs.ntypes))
        if comm.rank == 0:
            print(stats.format(args.epochs), flush=True)
            if stats.cache is not None:
                print(cache_line(records[-1]), flush=True)
        if args.checkpoint:
            save_checkpoint(trainer, args.checkpoint, extra={"records": records})
    return trainer, records


def _train(args):
    """Train as ``args`` say, write the report, and end the process (``process_group.leave``): does not return."""
    from .partition_io import load_partitions
    from .process_group import init_from_env, leave

    if args.resume and not args.checkpoint:
        raise ValueError("--resume needs --checkpoint DIR")
    comm = init_from_env(args.timeout, device=args.device)
    parts = load_partitions(args.partitions)
    _, records = run_worker(comm, parts, args)
    if comm.rank == 0 and args.report:
        Path(args.report).write_text(
            json.dumps(
                {
                    "mode": args.mode,
                    "method": parts.method,
                    "world": comm.world,
                    "device": args.device,
                    "model": args.model,
                    "fanouts": args.fanouts,
                    "batch_size": args.batch_size,
                    "cache_fraction": args.cache_fraction,
                    "epochs": records,
                },
                indent=1,
            )
        )
    leave(comm, 0)


def worker_main(argv=None):
    """Entry point of one worker: exits 0 when done; on any error, reports it with the rank and machine and
    exits 1 at once. Does not return."""
    args = worker_parser().parse_args(argv)
    try:
        _train(args)
    except Exception as err:  # noqa: BLE001 - every failure must end this worker promptly
        from .peer_failure import PeerFailure, machine_name

        if not isinstance(err, PeerFailure):
            traceback.print_exc()

        print(
            f"gnnc worker rank {os.environ.get('RANK', '?')} on {machine_name()}: {type(err).__name__}: {err}",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(1)  # no clean shutdown: the process group may wait on dead peers


def prepare_partitions(dataset: str, scale: float, seed: int, method: str, parts: int, depth: int, out) -> dict:
    """Partition a synthetic replica (with reverse relations) into ``out``; returns target and classes."""
    from ..data import synthetic
    from . import add_reverse_relations, meta_partition, metis_partition, random_partition, save_partitions

    ds = synthetic(dataset, scale=scale, seed=seed)
    g = add_reverse_relations(ds.graph)
    if method == "meta":
        split = meta_partition(g, ds.target_ntype, parts, depth)
    elif method == "metis":
        split = metis_partition(g, parts, seed)
    else:
        split = random_partition(g, parts, seed)
    save_partitions(split, out)
    return {"target": ds.target_ntype, "num_classes": ds.num_classes}


def run_cli(args) -> int:
    """``gnnc train --dist``: partition if needed, then run the workers through torchrun."""
    from ..data import get_info
    from .partition_io import load_partitions

    if args.resume and not args.checkpoint:
        raise SystemExit("gnnc train --dist: --resume needs --checkpoint DIR")
    if args.cache_fraction < 0:
        raise SystemExit(f"gnnc train --dist: --cache-fraction must be non-negative, got {args.cache_fraction}")
    dataset, model = args.dataset or "mag", args.model or "rgcn"
    if model not in ("rgcn", "rgat", "hgt"):
        raise SystemExit(f"gnnc train --dist: --model must be rgcn, rgat or hgt, got {model!r}")
    epochs = 3 if args.epochs is None else args.epochs
    method = "meta" if args.mode == "raf" else args.partition
    with tempfile.TemporaryDirectory(prefix="gnnc-parts-") as tmp:
        if args.partitions:
            parts = load_partitions(args.partitions)
            info = get_info(dataset)
            facts = {"target": parts.params.get("target") or info.target_ntype, "num_classes": info.num_classes}
            directory = args.partitions
        else:
            directory = Path(tmp)
            facts = prepare_partitions(
                dataset, args.scale, args.seed, method, args.nproc * args.nnodes, len(args.fanouts), directory
            )
        wargs = worker_args(
            directory,
            args.mode,
            model,
            args.fanouts,
            args.batch_size,
            epochs,
            args.lr,
            args.hidden,
            args.seed,
            args.learnable,
            facts["num_classes"],
            facts["target"],
            args.dist_timeout,
            args.report,
            compiled=args.compile != "never",
            shared_learnable=args.shared_learnable,
            checkpoint=args.checkpoint,
            resume=args.resume,
            cache_fraction=args.cache_fraction,
            device=args.device,
        )
        cmd = torchrun_command(args.nproc, wargs, args.nnodes, args.node_rank, args.rdzv_endpoint)
        print("gnnc: " + shlex.join(cmd), flush=True)
        return subprocess.call(cmd)


if __name__ == "__main__":
    worker_main()
