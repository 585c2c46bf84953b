"""``gnnc train``: full-batch GCN/GAT on Planetoid, mini-batch R-GCN/R-GAT/HGT (``--minibatch``), or distributed
training across worker processes (``--dist``)."""

from __future__ import annotations

import os

import torch

from .. import data
from ..data.replicas import SUFFIX
from ..training import COMPILE_MODES, planetoid_experiment
from ..training.minibatch import STAGES, train_minibatch
from .arguments import (
    COMPILE_ENV,
    DATA_DIR_HELP,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_FLOAT,
    SCALE,
    UsageError,
    number,
    require_device,
)
from .graphs import real_path, replica_name, synthetic_replica


def add_parser(subparsers) -> None:
    """Add the ``train`` command to ``gnnc``'s subparsers."""
    train = subparsers.add_parser(
        "train", help="train GCN/GAT on Planetoid, or mini-batch R-GCN/R-GAT/HGT (--minibatch)"
    )
    train.add_argument(
        "--model",
        choices=["gcn", "gat", "rgcn", "rgat", "hgt"],
        default=None,
        help="default gcn; rgcn with --minibatch",
    )
    train.add_argument(
        "--dataset",
        default=None,
        help="the real cora or citeseer (default cora) or a homogeneous replica (cora-replica); with --minibatch "
        "a synthetic replica (default mag)",
    )
    train.add_argument("--data-dir", help=DATA_DIR_HELP)
    train.add_argument("--seed", type=int, default=0, help="seed of the model, the split shuffles and the replica")
    train.add_argument("--epochs", type=POSITIVE, default=None, help="default: the model's recipe (3 with --minibatch)")
    train.add_argument(
        "--compile",
        nargs="?",
        const="auto",
        choices=["auto", "always"],
        default=None,
        help="auto (the default): compiled, unless one epoch timed on both paths runs faster eagerly (the line "
        "'path: ...' says which and why; --minibatch and --dist compile without measuring); always: compiled, not "
        f"measured. ${COMPILE_ENV} (auto, always or never) sets the default",
    )
    train.add_argument(
        "--no-compile", dest="compile", action="store_const", const="never", help="run the eager executor"
    )
    mb = train.add_argument_group("mini-batch training")
    mb.add_argument("--minibatch", action="store_true", help="sampled mini-batch training of the target node type")
    train.add_argument(
        "--scale", type=SCALE, default=None, help="synthetic replica scale (default 1; 0.01 with --minibatch or --dist)"
    )
    mb.add_argument("--fanouts", type=int, nargs="+", default=[25, 20], help="per layer, input layer first; -1 = all")
    mb.add_argument("--batch-size", type=POSITIVE, default=1024, help="seed nodes per mini-batch")
    mb.add_argument("--hidden", type=POSITIVE, default=64, help="hidden width")
    mb.add_argument("--lr", type=POSITIVE_FLOAT, default=0.01, help="learning rate")
    mb.add_argument(
        "--learnable",
        nargs="+",
        default=["non-target"],
        metavar="NTYPE",
        help="types with learnable embeddings: non-target (default), missing, or type names",
    )
    mb.add_argument("--checkpoint", metavar="DIR", help="write a checkpoint here after every epoch")
    mb.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    mb.add_argument(
        "--device",
        default="cpu",
        help="torch device to train on; with --dist cpu (gloo) or cuda (worker LOCAL_RANK on GPU LOCAL_RANK, NCCL)",
    )
    dist = train.add_argument_group("distributed training (--dist: torchrun workers; gloo, or NCCL with --device cuda)")
    dist.add_argument(
        "--dist",
        action="store_true",
        help="train across worker processes: RAF on meta partitions or the vanilla data-parallel baseline",
    )
    dist.add_argument("--nproc", type=POSITIVE, default=2, help="worker processes on this machine")
    dist.add_argument(
        "--mode",
        choices=["raf", "vanilla"],
        default="raf",
        help="raf: relation-aggregation-first on meta partitions; vanilla: data-parallel baseline",
    )
    dist.add_argument(
        "--partition",
        choices=["metis", "random"],
        default="metis",
        help="vanilla: edge-cut partitioning (RAF always uses meta partitions)",
    )
    dist.add_argument(
        "--partitions",
        metavar="DIR",
        help="partitions written by gnnc partition (default: partition the replica into a temporary directory)",
    )
    dist.add_argument(
        "--shared-learnable",
        choices=["owner", "replicate"],
        default="owner",
        help="RAF: learnable rows of a type several partitions hold live with one owner (exact) "
        "or are copied per partition (Heta)",
    )
    dist.add_argument("--dist-timeout", type=POSITIVE_FLOAT, default=300.0, help="seconds a worker waits for its peers")
    dist.add_argument("--nnodes", type=POSITIVE, default=1, help="machines; run the same command on each")
    dist.add_argument("--node-rank", type=NON_NEGATIVE, default=0, help="this machine's index among --nnodes")
    dist.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="torchrun rendezvous address for several machines")
    dist.add_argument(
        "--report",
        metavar="FILE",
        help="rank 0 writes every worker's per-epoch losses, seconds, bytes and cache counts as JSON",
    )
    dist.add_argument(
        "--cache-fraction",
        type=number(float, 0.0),
        default=0.0,
        metavar="F",
        help="Heta's feature cache on every worker, F times the bytes of the rows it stores, built "
        "from pre-sampling (default 0: no cache); --checkpoint DIR [--resume] work with --dist too",
    )
    train.set_defaults(func=cmd_train)


def check_dist_device(device: str, nproc: int) -> None:
    """UsageError unless every one of ``nproc`` workers here can have ``device``: 'cpu', or 'cuda' with a GPU
    per worker."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--dist takes --device cpu or cuda (each worker then uses GPU LOCAL_RANK), not {device!r}")
    require_device(device)
    if device == "cuda" and nproc > torch.cuda.device_count():
        raise UsageError(
            f"--device cuda gives each worker a GPU of its own, but --nproc {nproc} exceeds the "
            f"{torch.cuda.device_count()} GPU(s) here; lower --nproc"
        )


def compile_mode(flag: str | None) -> str:
    """The ``COMPILE_MODES`` entry a run uses: ``flag`` (from --compile / --no-compile), else ``$GNNC_COMPILE``,
    else ``auto``."""
    if flag is not None:
        return flag
    mode = os.environ.get(COMPILE_ENV, "auto")
    if mode not in COMPILE_MODES:
        raise UsageError(f"${COMPILE_ENV} is {mode!r}; set it to one of {', '.join(COMPILE_MODES)}, or unset it")
    return mode


def cmd_train(args) -> int:
    args.compile = compile_mode(args.compile)
    if args.scale is None:  # a full-batch replica at the published size; sampled training's large graphs smaller
        args.scale = 0.01 if args.minibatch or args.dist else 1.0
    if args.dist:
        from ..distributed.launch import run_cli as run_dist

        check_dist_device(args.device, args.nproc)
        return run_dist(args)
    if args.minibatch:
        if args.resume and not args.checkpoint:
            raise UsageError("--resume needs --checkpoint DIR (the folder an earlier run wrote)")
        dataset = replica_name(args.dataset or "mag", "train --minibatch")
        if args.model not in (None, "rgcn", "rgat", "hgt"):
            raise UsageError(
                f"mini-batch training takes --model rgcn/rgat/hgt, not {args.model}; drop --minibatch "
                "for full-batch gcn/gat on cora or citeseer"
            )
        return run_minibatch(
            dataset,
            scale=args.scale,
            model=args.model,
            fanouts=args.fanouts,
            batch_size=args.batch_size,
            epochs=args.epochs,
            lr=args.lr,
            hidden=args.hidden,
            seed=args.seed,
            learnable=args.learnable,
            checkpoint_dir=args.checkpoint,
            resume=args.resume,
            device=args.device,
            compiled=args.compile != "never",
        )
    return run_full_batch(args)


def full_batch_dataset(name: str, data_dir: str | None, scale: float, seed: int):
    """The real cora/citeseer files, or a homogeneous replica (``cora-replica``), announced."""
    if name.endswith(SUFFIX):  # new here, so a replica is always named as one (pubmed-replica, not pubmed)
        if data.get_info(replica_name(name, "train")).kind != "homogeneous":
            raise UsageError(f"full-batch training takes a homogeneous graph, not {name}; add --minibatch for it")
        return synthetic_replica(name, scale, "train", seed=seed)
    if name not in ("cora", "citeseer"):
        raise UsageError(
            f"full-batch training takes --dataset cora/citeseer (the real files) or a homogeneous replica named as "
            f"one (cora-replica, {name}-replica), not {name}; add --minibatch for the heterogeneous replicas "
            "and rgcn/rgat/hgt"
        )
    folder = real_path(name, data_dir)
    ds = data.load_planetoid(name, folder)
    print(f"the real {name} from {folder}: {ds.graph.num_nodes():,} nodes, {ds.graph.num_edges():,} edges", flush=True)
    return ds


def run_full_batch(args) -> int:
    """Full-batch GCN/GAT with the paper's recipe; prints the measured path (``--compile auto``) and the result."""
    dataset, model = args.dataset or "cora", args.model or "gcn"
    if model not in ("gcn", "gat"):
        raise UsageError(f"full-batch training takes --model gcn/gat, not {model}; add --minibatch for rgcn/rgat/hgt")
    ds = full_batch_dataset(dataset, args.data_dir, args.scale, args.seed)
    result = planetoid_experiment(model, ds, seed=args.seed, epochs=args.epochs, compile_mode=args.compile)
    if result.choice is not None:
        print(f"path: {result.choice}; --no-compile or --compile always forces one", flush=True)
    print(
        f"{model.upper()} on {dataset} ({PATH_NOTES[args.compile, result.path]}): test accuracy "
        f"{result.test_acc * 100:.1f}% (best val {result.val_acc * 100:.1f}% at epoch "
        f"{result.best_epoch}/{result.epochs_run}, seed {args.seed}, {result.seconds:.1f} s)"
    )
    return 0


# What the last line says ran, by (mode, path run).
PATH_NOTES = {
    ("never", "eager"): "eager: --no-compile",
    ("always", "compiled"): "compiled: --compile always",
    ("auto", "compiled"): "compiled",
    ("auto", "eager"): "eager: measured faster",
}


def run_minibatch(
    dataset: str | None = None,
    *,
    scale: float = 0.01,
    model: str | None = None,
    fanouts=(25, 20),
    batch_size: int = 1024,
    epochs: int | None = None,
    lr: float = 0.01,
    hidden: int = 64,
    seed: int = 0,
    learnable="non-target",
    checkpoint_dir=None,
    resume: bool = False,
    device: str = "cpu",
    compiled: bool = True,
    progress: bool = True,
) -> int:
    """``gnnc train --minibatch``: train on a synthetic replica and print the per-epoch breakdown.

    None picks the defaults (dataset mag, model rgcn, 3 epochs); ``learnable``
    may be a one-element list holding 'non-target' or 'missing', as argparse gives it.
    ``compiled=False`` runs the layers on the eager executor instead of the compiler.
    """
    dataset, model, epochs = dataset or "mag", model or "rgcn", 3 if epochs is None else epochs
    if isinstance(learnable, (list, tuple)) and len(learnable) == 1 and learnable[0] in ("non-target", "missing"):
        learnable = learnable[0]
    ds = data.synthetic(dataset, scale=scale, seed=seed)
    g = ds.graph
    print(
        f"{dataset} replica at scale {scale}: {g.num_nodes():,} nodes, {g.num_edges():,} edges, "
        f"target {ds.target_ntype!r}; {model} {'compiled' if compiled else 'eager (--no-compile)'}, "
        f"fanouts {list(fanouts)}, batch {batch_size}, hidden {hidden}"
    )
    result = train_minibatch(
        ds,
        model,
        list(fanouts),
        batch_size,
        epochs,
        lr,
        seed,
        checkpoint_dir,
        resume,
        progress,
        hidden=hidden,
        learnable=learnable,
        device=device,
        compiled=compiled,
    )
    if not result.epochs:
        print("nothing trained")
        return 0
    header = f"{'epoch':>5} {'loss':>8} {'val':>6} {'test':>6} " + " ".join(f"{s:>16}" for s in STAGES)
    print(header)
    for s in result.epochs:
        print(
            f"{s.epoch:>5} {s.loss:>8.4f} {s.val_acc * 100:>5.1f}% {s.test_acc * 100:>5.1f}% "
            + " ".join(f"{s.times[k]:>15.3f}s" for k in STAGES)
        )
    final = result.final
    print(f"final: val {final.val_acc * 100:.1f}%, test {final.test_acc * 100:.1f}% after {final.epoch} epochs")
    return 0
