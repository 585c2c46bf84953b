"""The ``gnnc`` command: demo, datasets, info, train, explain, partition, bench.

Real data (cora, citeseer, FB15k-237, WN18RR) is found by the rule of
``gnnc.data.paths``: ``--data-dir``, else ``$GNNC_DATA``, else
``../shared/data`` beside a source checkout, else ``~/.cache/gnnc/data``.
A graph name means the real files for cora/citeseer/FB15k-237/WN18RR in
every command; their synthetic replicas are named as such (``cora-replica``,
``gnnc.data.replicas``), and commands that build one say so, with its scale
and size. Every failure is one line on stderr naming the culprit and the
fix, exit code 2; ``--debug`` or ``GNNC_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from . import progress
from .backend import CHOICES as BACKENDS
from .data.citation import processing_note
from .data.download_cli import add_download_arguments
from .data.registry import REAL_DATASETS
from .data.replicas import is_replica, label, registry_name
from .spread import busy_warning, measure


def _demo_cases(args):
    from . import data, models

    gat_ds = data.synthetic(args.gat_graph, scale=args.gat_scale, seed=args.seed)
    gat = models.GATConv(gat_ds.graph.ndata_all["feat"].shape[1], 8, num_heads=8)
    yield "GAT (8 heads x 8)", gat_ds, gat
    rgcn_ds = data.synthetic(args.rgcn_graph, scale=args.rgcn_scale, seed=args.seed, feat_dim=16)
    rgcn = models.RGCNConv(16, 16, num_rels=len(rgcn_ds.graph.canonical_etypes))
    yield "RGCN (16 -> 16)", rgcn_ds, rgcn


def cmd_demo(args) -> int:
    from .compile import compile as compile_model

    torch.manual_seed(args.seed)
    busy = busy_warning()
    rows = []
    for name, ds, model in _demo_cases(args):
        g, x = ds.graph, ds.graph.ndata_all["feat"]
        fast = compile_model(model)
        with torch.no_grad():
            gap = (fast(g, x) - model(g, x)).abs().max().item()
        timings = []
        for runner in (model, fast):
            with torch.no_grad():
                fwd = measure(lambda: runner(g, x), args.runs, f"{name} forward")

            def train_step():
                runner.zero_grad()
                runner(g, x).sum().backward()

            timings += [fwd, measure(train_step, args.runs, f"{name} forward+backward")]
        rows.append((name, ds.name, g.num_nodes(), g.num_edges(), len(g.canonical_etypes), *timings, gap))
    busy = busy_warning() or busy  # at the end too: the load average lags
    if busy:
        print(
            f"gnnc demo: {busy}; rerun on an idle machine, or with fewer threads (OMP_NUM_THREADS=1)",
            file=sys.stderr,
            flush=True,
        )
    print(
        f"gnnc demo: eager UDF executor vs gnnc.compile, {torch.get_num_threads()} CPU threads; ms per call, "
        f"median (interquartile range) of {args.runs} runs after a warm-up"
    )
    print(
        f"{'model':<18} {'graph':<7} {'nodes':>7} {'edges':>7} {'rels':>4} | {'eager fwd':>17} "
        f"{'compiled':>17} {'speedup':>7} | {'eager f+b':>17} {'compiled':>17} {'speedup':>7} | max |diff|"
    )
    for model, graph, n, e, r, efwd, eb, cfwd, cb, gap in rows:
        print(
            f"{model:<18} {graph:<7} {n:>7,} {e:>7,} {r:>4} | {efwd!s:>17} {cfwd!s:>17} "
            f"{efwd.median / cfwd.median:>6.1f}x | {eb!s:>17} {cb!s:>17} {eb.median / cb.median:>6.1f}x | {gap:.1e}"
        )
    return 0


def cmd_datasets(args) -> int:
    from . import data
    from .data import paths

    print("Synthetic replicas (gnnc.data.synthetic(name, scale=1.0, seed=0)); full-scale figures:")
    print(f"  {'name':<16} {'kind':<14} {'nodes':>11} {'edges':>12} {'ntypes':>6} {'rels':>5} {'feat':>5}  source")
    for d in data.list_datasets():
        print(
            f"  {label(d.name):<16} {d.kind:<14} {d.num_nodes:>11,} {d.num_edges:>12,} {d.num_ntypes:>6} "
            f"{d.num_relations:>5} {d.feat_dim:>5}  {d.paper}"
        )
    root = paths.data_root(args.data_dir)
    print(
        f"Real-data loaders (files under {paths.describe_root(args.data_dir)}); as a graph name, cora and "
        f"citeseer mean these files in every command (their replicas: cora-replica, citeseer-replica):"
    )
    for d in REAL_DATASETS.values():
        missing = d.missing(root)
        state = (
            "found"
            if not missing
            else "absent"
            if len(missing) == len(d.files)
            else f"incomplete, missing {', '.join(Path(m).name for m in missing)}"
        )
        print(f"  {d.name:<10} gnnc.data.{d.loader:<15} {d.pattern:<24} {state:<7} {d.figures}")
    return 0


def scale_note(scale: float) -> str:
    """``'scale 0.05 (5% of the published size)'`` or ``'scale 1 (the full published size)'``."""
    if scale == 1:
        return "scale 1 (the full published size)"
    return f"scale {scale:g} ({scale * 100:g}% of the published size)"


def _check_synthetic(name: str, command: str) -> str:
    """The ``gnnc.data.synthetic`` name of replica ``name``; a real dataset's bare name is refused."""
    try:
        return registry_name(name, command)
    except ValueError as err:
        raise UsageError(str(err)) from None


def synthetic_replica(name: str, scale: float, command: str, **options):
    """``gnnc.data.synthetic(name, scale, **options)`` for a command line, saying what it builds and how big."""
    from . import data

    name = _check_synthetic(name, command)
    info = data.get_info(name)
    print(
        f"{label(name)}: synthetic replica at {scale_note(scale)}, about {round(info.num_nodes * scale):,} nodes and "
        f"{round(info.num_edges * scale):,} edges; --scale changes it",
        flush=True,
    )
    return data.synthetic(name, scale=scale, **options)


def _real_path(name: str, data_dir: str | None) -> Path:
    """The file or folder the loader of real dataset ``name`` reads, by the data-location rule."""
    from .data import paths

    d = REAL_DATASETS[name]
    subdir = str(Path(d.files[0]).parent) if d.loader == "load_planetoid" else d.files[0]
    return paths.resolve(None, subdir, f"real dataset {name}", root=data_dir)


def load_graph(spec: str, scale: float, data_dir: str | None, command: str = "info"):
    """A graph named on the command line: .npz path, real dataset name, synthetic name, or a KG path."""
    from . import data

    real = {n.lower(): n for n in REAL_DATASETS}
    if spec.endswith(".npz"):
        return data.load_npz(spec)
    if spec.lower() in real:
        name = real[spec.lower()]
        path = _real_path(name, data_dir)
        print(f"{name}: real dataset from {path}", flush=True)
        if name in ("cora", "citeseer"):
            return data.load_planetoid(name, path).graph
        return data.load_kg(path).graph
    if spec.endswith((".tar.gz", ".tgz")) or Path(spec).is_dir():
        return data.load_kg(spec).graph
    if is_replica(spec):
        return synthetic_replica(spec, scale, command).graph
    raise UsageError(
        f"unknown graph {spec!r}: give a synthetic name ({', '.join(data.DATASETS)}), "
        f"{'/'.join(REAL_DATASETS)}, or an existing .npz / KG path (`gnnc datasets` lists them)"
    )


def _features(store) -> str:
    """``'feat float32 [2708, 1433], label int64 [2708]'`` or ``'none'``."""
    items = [f"{k} {str(v.dtype).replace('torch.', '')} {list(v.shape)}" for k, v in store.items()]
    return ", ".join(items) or "none"


def cmd_info(args) -> int:
    g = load_graph(args.graph, args.scale, args.data_dir)
    print(g.metagraph())
    deg = g.in_degrees().double()
    if deg.numel():
        print(
            f"in-degree: min {int(deg.min())}, mean {deg.mean():.2f}, max {int(deg.max())}, "
            f"zero in-degree nodes {int((deg == 0).sum()):,}"
        )
    if g.is_homogeneous:
        print(f"node features: {_features(g.ndata)}; edge features: {_features(g.edata)}")
    else:
        for t in g.ntypes:
            print(f"node features of {t}: {_features(g.nodes[t].data)}")
    if note := processing_note(args.graph):
        print(note)
    return 0


def require_device(device: str) -> None:
    """UsageError unless ``device`` can run here: a CUDA device needs ``torch.cuda.is_available()``."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"--device {device} needs an NVIDIA GPU, but torch.cuda.is_available() is False here "
            f"(torch {torch.__version__})"
        )


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


def cmd_train(args) -> int:
    if args.dist:
        from .distributed.launch import run_cli as run_dist

        check_dist_device(args.device, args.nproc)
        return run_dist(args)
    if args.minibatch:
        from .minibatch import run_cli

        if args.resume and not args.checkpoint:
            raise UsageError("--resume needs --checkpoint DIR (the folder an earlier run wrote)")
        dataset = _check_synthetic(args.dataset or "mag", "train --minibatch")
        if args.model not in (None, "rgcn", "rgat", "hgt"):
            raise UsageError(
                f"mini-batch training takes --model rgcn/rgat/hgt, not {args.model}; drop --minibatch "
                "for full-batch gcn/gat on cora or citeseer"
            )
        return run_cli(
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
            compiled=args.compile,
        )
    from . import data
    from .training import planetoid_experiment

    dataset, model = args.dataset or "cora", args.model or "gcn"
    if dataset not in ("cora", "citeseer") or model not in ("gcn", "gat"):
        raise UsageError(
            f"full-batch training takes --dataset cora/citeseer and --model gcn/gat, not "
            f"{dataset}/{model}; add --minibatch for the synthetic graphs and rgcn/rgat/hgt"
        )
    folder = _real_path(dataset, args.data_dir)
    ds = data.load_planetoid(dataset, folder)
    print(
        f"{model.upper()} on the real {dataset} from {folder}: {ds.graph.num_nodes():,} nodes, "
        f"{ds.graph.num_edges():,} edges",
        flush=True,
    )
    result = planetoid_experiment(model, ds, seed=args.seed, epochs=args.epochs, compiled=args.compile)
    print(
        f"{model.upper()} on {dataset} ({'compiled' if args.compile else 'eager: --no-compile'}): test accuracy "
        f"{result.test_acc * 100:.1f}% (best val {result.val_acc * 100:.1f}% at epoch "
        f"{result.best_epoch}/{result.epochs_run}, seed {args.seed}, {result.seconds:.1f} s)"
    )
    return 0


EXPLAIN_MODELS = ("gcn", "gat", "rgcn", "rgat", "hgt", "edgeconv", "simple-hgn")


def cmd_explain(args) -> int:
    from . import backend, explain, models

    require_device(args.device)
    backend.resolve(args.backend, args.device)  # a backend that cannot run there stops before any work
    g = synthetic_replica(args.graph, args.scale, "explain", seed=0, feat_dim=args.feat_dim).graph.to(args.device)
    x = g.ndata_all["feat"]
    width, rels, types = x.shape[1], len(g.canonical_etypes), len(g.ntypes)
    builders = {
        "gcn": lambda: models.GCNConv(width, 16),
        "gat": lambda: models.GATConv(width, 8, num_heads=4),
        "rgcn": lambda: models.RGCNConv(width, 16, rels),
        "rgat": lambda: models.RGATConv(width, 8, rels, num_heads=2),
        "hgt": lambda: models.HGTConv(width, width, types, rels, 4),
        "edgeconv": lambda: models.EdgeConv(width, 16),
        "simple-hgn": lambda: models.SimpleHGNConv(width, 8, rels, edge_dim=4, num_heads=2),
    }
    print(explain(builders[args.model]().to(args.device).eval(), g, x, dot=args.dot, backend=args.backend))
    return 0


# ------------------------------------------------------------- command line
class UsageError(Exception):
    """A failure the user can fix: ``main`` prints its one-line message (culprit and fix), exit code 2."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions wrapped line by line (their line breaks kept); every option's default appended unless its
    help already states one."""

    def _fill_text(self, text, width, indent):
        import textwrap

        lines = []
        for line in text.splitlines():
            lead = indent + line[: len(line) - len(line.lstrip())]
            lines.append(textwrap.fill(line.strip(), width, initial_indent=lead, subsequent_indent=lead) or "")
        return "\n".join(lines)

    def _get_help_string(self, action):
        help_ = action.help or ""
        if (
            any(action.default is v for v in (None, False, argparse.SUPPRESS))
            or "default" in help_
            or not action.option_strings
        ):
            return help_
        default = " ".join(map(str, action.default)) if isinstance(action.default, list) else "%(default)s"
        return f"{help_} (default: {default})"


class Parser(argparse.ArgumentParser):
    """argparse with ``HelpFormatter`` and one-line errors that point at ``--help``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def _number(kind, low, high=None, low_open=False):
    """An argparse type: ``kind`` within [low, high] (``low_open``: above low); the message says the range."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if value < low or (low_open and value == low) or (high is not None and value > high):
            bound = (
                f"in ({low:g}, {high:g}]"
                if low_open and high is not None
                else f"above {low:g}"
                if low_open
                else f"at least {low:g}"
                if high is None
                else f"in [{low:g}, {high:g}]"
            )
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be {bound}")
        return value

    parse.__name__ = kind.__name__
    return parse


SCALE = _number(float, 0.0, 1.0, low_open=True)
POSITIVE = _number(int, 1)
NON_NEGATIVE = _number(int, 0)
POSITIVE_FLOAT = _number(float, 0.0, low_open=True)
DEBUG_ENV = "GNNC_DEBUG"
QUIET_HELP = "no progress bars or per-epoch lines, results and errors only (also TQDM_DISABLE=1)"
DATA_DIR_HELP = "folder holding planetoid/ and kg/ (default: $GNNC_DATA, else ../shared/data, else ~/.cache/gnnc/data)"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gnnc")
    except PackageNotFoundError:
        from . import __version__

        return f"{__version__} (not installed)"


RULE_LINES = "\n  ".join(
    (
        "--data-dir DIR",
        "$GNNC_DATA",
        "../shared/data beside a source checkout, when present",
        "~/.cache/gnnc/data ($XDG_CACHE_HOME/gnnc/data), the per-user default",
    )
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gnnc",
        description="GNN UDF compiler: compile message-passing UDFs; demos, datasets, "
        "training, partitioning and benchmarks.",
        epilog=f"real data (cora, citeseer, FB15k-237, WN18RR) is read from the first of:\n  {RULE_LINES}\n"
        f"failures print one line and exit with code 2; --debug or {DEBUG_ENV}=1 shows the traceback",
    )
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print gnnc's version and exit"
    )
    p.add_argument("--debug", action="store_true", help=f"show the traceback of a failure (also {DEBUG_ENV}=1)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run GAT and RGCN on bundled synthetic graphs and time them")
    demo.add_argument("--gat-graph", default="pubmed", help="synthetic graph of the GAT case")
    demo.add_argument("--gat-scale", type=SCALE, default=1.0, help="replica scale of the GAT graph")
    demo.add_argument("--rgcn-graph", default="aifb", help="synthetic graph of the RGCN case")
    demo.add_argument("--rgcn-scale", type=SCALE, default=1.0, help="replica scale of the RGCN graph")
    demo.add_argument("--runs", type=POSITIVE, default=5, help="timed runs per measurement (median reported)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the graphs and the models")
    demo.set_defaults(func=cmd_demo)

    ds = sub.add_parser(
        "datasets",
        help="list synthetic generators and real-data loaders, and which files exist; "
        "`gnnc datasets download NAME` fetches a real dataset",
    )
    ds.add_argument("--data-dir", help=DATA_DIR_HELP)
    add_download_arguments(ds, cmd_datasets)

    info = sub.add_parser("info", help="summarise a graph's node types, relations, degrees and features")
    info.add_argument("graph", help="synthetic name, cora/citeseer, FB15k-237/WN18RR, or a .npz/.tar.gz path")
    info.add_argument("--scale", type=SCALE, default=1.0, help="replica scale for synthetic graphs")
    info.add_argument("--data-dir", help=DATA_DIR_HELP)
    info.set_defaults(func=cmd_info)

    train = sub.add_parser("train", help="train GCN/GAT on Planetoid, or mini-batch R-GCN/R-GAT/HGT (--minibatch)")
    train.add_argument(
        "--model",
        choices=["gcn", "gat", "rgcn", "rgat", "hgt"],
        default=None,
        help="default gcn; rgcn with --minibatch",
    )
    train.add_argument(
        "--dataset",
        default=None,
        help="the real cora or citeseer (default cora); with --minibatch a synthetic replica (default mag)",
    )
    train.add_argument("--data-dir", help=DATA_DIR_HELP)
    train.add_argument("--seed", type=int, default=0, help="seed of the model, the split shuffles and the replica")
    train.add_argument("--epochs", type=POSITIVE, default=None, help="default: the model's recipe (3 with --minibatch)")
    train.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the model through gnnc.compile (the default; --no-compile runs the eager executor)",
    )
    mb = train.add_argument_group("mini-batch training")
    mb.add_argument("--minibatch", action="store_true", help="sampled mini-batch training of the target node type")
    mb.add_argument("--scale", type=SCALE, default=0.01, help="synthetic replica scale")
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
        type=_number(float, 0.0),
        default=0.0,
        metavar="F",
        help="Heta's feature cache on every worker, F times the bytes of the rows it stores, built "
        "from pre-sampling (default 0: no cache); --checkpoint DIR [--resume] work with --dist too",
    )
    train.set_defaults(func=cmd_train)

    exp = sub.add_parser("explain", help="show the MP-DFG of a reference model before and after optimization")
    exp.add_argument("--model", choices=EXPLAIN_MODELS, default="gat", help="reference model to explain")
    exp.add_argument(
        "--graph", default="cora-replica", help="synthetic replica to trace on (`gnnc datasets` lists them)"
    )
    exp.add_argument("--scale", type=SCALE, default=0.05, help="replica scale (the graph's size sets the FLOPs shown)")
    exp.add_argument("--feat-dim", type=POSITIVE, default=16, help="input feature width")
    exp.add_argument("--dot", metavar="FILE", help="also write the optimized graphs as Graphviz dot here")
    exp.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="backend of the plans (auto: numba on CPU, triton on CUDA); triton on the CPU runs under "
        "Triton's interpreter: TRITON_INTERPRET=1 gnnc explain --backend triton",
    )
    exp.add_argument("--device", default="cpu", help="device of the graph and the model, e.g. cuda")
    exp.set_defaults(func=cmd_explain)

    from .bench_cli import add_bench_parser
    from .distributed.partition_cli import add_partition_parser

    add_partition_parser(sub)
    add_bench_parser(sub)
    for command in sub.choices.values():
        if command.prefix_chars == "-":  # the stand-in bench parser of a wheel install takes anything
            command.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help=f"show the traceback of a failure (also {DEBUG_ENV}=1)",
            )
            if "--quiet" not in command._option_string_actions:  # bench's harness has its own
                command.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p


def _one_line(text) -> str:
    return " ".join(str(text).split())


def main(argv=None) -> int:
    """Run ``gnnc``; a failure is one line on stderr and exit code 2 (the traceback with --debug / GNNC_DEBUG=1)."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    progress.set_quiet(args.quiet)
    prog = f"gnnc {args.command}"
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exit_:  # a message from code that exits itself (the bench harness)
        if debug or exit_.code is None or isinstance(exit_.code, int):
            raise
        message = _one_line(exit_.code)
        print(message if message.startswith("gnnc") else f"{prog}: error: {message}", file=sys.stderr)
        return 2
    except (UsageError, OSError) as err:
        if debug:
            raise
        if isinstance(err, OSError) and err.filename and err.strerror:  # as open() raises it: add the fix
            err = f"{err.filename}: {err.strerror}; check the path (its folder must exist) and its permissions"
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # a CLI prints one line; --debug shows the rest
        if debug:
            raise
        text = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(
            f"{prog}: error: {type(err).__name__}: {_one_line(text)} (rerun with --debug or {DEBUG_ENV}=1 "
            f"for the traceback)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
