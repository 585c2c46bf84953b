"""The ``gnnc`` command: demo, datasets, info, train."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm


def _median_ms(fn, runs: int, desc: str) -> float:
    fn()  # warm-up: builds degree buckets and CSR caches
    times = []
    for _ in tqdm(range(runs), desc=desc, leave=False, delay=2):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _demo_cases(args):
    from . import data, models

    gat_ds = data.synthetic(args.gat_graph, scale=args.gat_scale, seed=args.seed)
    gat = models.GATConv(gat_ds.graph.ndata["feat"].shape[1], 8, num_heads=8)
    yield "GAT (8 heads x 8)", gat_ds, gat
    rgcn_ds = data.synthetic(args.rgcn_graph, scale=args.rgcn_scale, seed=args.seed, feat_dim=16)
    rgcn = models.RGCNConv(16, 16, num_rels=len(rgcn_ds.graph.canonical_etypes))
    yield "RGCN (16 -> 16)", rgcn_ds, rgcn


def cmd_demo(args) -> int:
    from .compile import compile as compile_model

    torch.manual_seed(args.seed)
    rows = []
    for name, ds, model in _demo_cases(args):
        g, x = ds.graph, ds.graph.ndata["feat"]
        fast = compile_model(model)
        with torch.no_grad():
            gap = (fast(g, x) - model(g, x)).abs().max().item()
        timings = []
        for runner in (model, fast):
            with torch.no_grad():
                fwd = _median_ms(lambda: runner(g, x), args.runs, f"{name} forward")

            def train_step():
                runner.zero_grad()
                runner(g, x).sum().backward()

            timings += [fwd, _median_ms(train_step, args.runs, f"{name} forward+backward")]
        rows.append((name, ds.name, g.num_nodes(), g.num_edges(), len(g.canonical_etypes), *timings, gap))
    print(f"gnnc demo: eager UDF executor vs gnnc.compile, {torch.get_num_threads()} CPU threads, "
          f"median of {args.runs} runs after warm-up (ms)")
    print(f"{'model':<18} {'graph':<7} {'nodes':>7} {'edges':>7} {'rels':>4} | {'eager fwd':>9} "
          f"{'compiled':>8} {'speedup':>7} | {'eager f+b':>9} {'compiled':>8} {'speedup':>7} | max |diff|")
    for model, graph, n, e, r, efwd, eb, cfwd, cb, gap in rows:
        print(f"{model:<18} {graph:<7} {n:>7,} {e:>7,} {r:>4} | {efwd:>9.1f} {cfwd:>8.1f} {efwd / cfwd:>6.1f}x | "
              f"{eb:>9.1f} {cb:>8.1f} {eb / cb:>6.1f}x | {gap:.1e}")
    return 0


REAL_LOADERS = (
    ("cora", "load_planetoid", "planetoid/ind.cora.*", "2,708 nodes, 10,556 edges, 1,433 features, 7 classes"),
    ("citeseer", "load_planetoid", "planetoid/ind.citeseer.*", "3,327 nodes, 9,104 edges, 3,703 features, 6 classes"),
    ("FB15k-237", "load_kg", "kg/FB15k-237.tar.gz", "14,541 entities, 237 relations (474 with inverses)"),
    ("WN18RR", "load_kg", "kg/WN18RR.tar.gz", "40,943 entities, 11 relations"),
)


def cmd_datasets(args) -> int:
    from . import data

    print("Synthetic replicas (gnnc.data.synthetic(name, scale=1.0, seed=0)); full-scale figures:")
    print(f"  {'name':<9} {'kind':<14} {'nodes':>11} {'edges':>12} {'ntypes':>6} {'rels':>5} {'feat':>5}  source")
    for d in data.list_datasets():
        print(f"  {d.name:<9} {d.kind:<14} {d.num_nodes:>11,} {d.num_edges:>12,} {d.num_ntypes:>6} "
              f"{d.num_relations:>5} {d.feat_dim:>5}  {d.paper}")
    root = data_root(args.data_dir)
    print(f"Real-data loaders (files under {root or '$GNNC_DATA, which is not set'}):")
    for name, loader, rel_path, figures in REAL_LOADERS:
        found = root is not None and any((root / rel_path).parent.glob((root / rel_path).name))
        print(f"  {name:<10} gnnc.data.{loader:<15} {rel_path:<24} {'found' if found else 'absent':<7} {figures}")
    return 0


def data_root(data_dir: str | None) -> Path | None:
    """The real-data folder: --data-dir, else $GNNC_DATA, else None."""
    import os

    root = data_dir or os.environ.get("GNNC_DATA")
    return Path(root) if root else None


def load_graph(spec: str, scale: float, data_dir: str | None):
    """A graph named on the command line: .npz path, real dataset name, or synthetic name."""
    from . import data

    root = data_root(data_dir)
    if spec.endswith(".npz"):
        return data.load_npz(spec)
    if spec.lower() in ("cora", "citeseer"):
        return data.load_planetoid(spec.lower(), root / "planetoid" if root else None).graph
    if spec in ("FB15k-237", "WN18RR"):
        return data.load_kg(root / "kg" / f"{spec}.tar.gz" if root else spec).graph
    if spec.endswith((".tar.gz", ".tgz")) or Path(spec).is_dir():
        return data.load_kg(spec).graph
    if spec in data.DATASETS:
        return data.synthetic(spec, scale=scale, with_features=False).graph
    raise SystemExit(f"gnnc: unknown graph {spec!r}: give a synthetic dataset name "
                     f"({', '.join(data.DATASETS)}), cora/citeseer, FB15k-237/WN18RR, or an .npz / KG path")


def cmd_info(args) -> int:
    g = load_graph(args.graph, args.scale, args.data_dir)
    print(g.metagraph())
    deg = g.in_degrees().double()
    if deg.numel():
        print(f"in-degree: min {int(deg.min())}, mean {deg.mean():.2f}, max {int(deg.max())}, "
              f"zero in-degree nodes {int((deg == 0).sum()):,}")
    if g.is_homogeneous:
        print(f"node features: {list(g.ndata) or 'none'}; edge features: {list(g.edata) or 'none'}")
    else:
        for t in g.ntypes:
            print(f"node features of {t}: {list(g.nodes[t].data) or 'none'}")
    return 0


def cmd_train(args) -> int:
    if args.dist:
        from .distributed.launch import run_cli as run_dist

        return run_dist(args)
    if args.minibatch:
        from .minibatch import run_cli

        if args.resume and not args.checkpoint:
            raise SystemExit("gnnc train: --resume needs --checkpoint DIR")
        return run_cli(args.dataset, scale=args.scale, model=args.model, fanouts=args.fanouts,
                       batch_size=args.batch_size, epochs=args.epochs, lr=args.lr, hidden=args.hidden,
                       seed=args.seed, learnable=args.learnable, checkpoint_dir=args.checkpoint,
                       resume=args.resume, device=args.device)
    from . import data
    from .training import planetoid_experiment

    dataset, model = args.dataset or "cora", args.model or "gcn"
    if dataset not in ("cora", "citeseer") or model not in ("gcn", "gat"):
        raise SystemExit("gnnc train: full-batch training takes --dataset cora/citeseer and --model gcn/gat; "
                         "use --minibatch for heterogeneous graphs")
    root = data_root(args.data_dir)
    ds = data.load_planetoid(dataset, root / "planetoid" if root else None)
    result = planetoid_experiment(model, ds, seed=args.seed, epochs=args.epochs, compiled=args.compile)
    print(f"{model.upper()} on {dataset}{' (compiled)' if args.compile else ''}: test accuracy "
          f"{result.test_acc * 100:.1f}% (best val {result.val_acc * 100:.1f}% at epoch "
          f"{result.best_epoch}/{result.epochs_run}, seed {args.seed}, {result.seconds:.1f} s)")
    return 0


def cmd_explain(args) -> int:
    from . import data, explain, models

    ds = data.synthetic(args.graph, scale=args.scale, seed=0, feat_dim=args.feat_dim)
    g = ds.graph
    x = g.ndata["feat"]
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
    print(explain(builders[args.model]().eval(), g, x, dot=args.dot))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gnnc", description="GNN UDF compiler")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run GAT and RGCN on bundled synthetic graphs and time them")
    demo.add_argument("--gat-graph", default="pubmed")
    demo.add_argument("--gat-scale", type=float, default=1.0)
    demo.add_argument("--rgcn-graph", default="aifb")
    demo.add_argument("--rgcn-scale", type=float, default=1.0)
    demo.add_argument("--runs", type=int, default=5)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)

    ds = sub.add_parser("datasets", help="list synthetic generators and real-data loaders")
    ds.add_argument("--data-dir", help="directory of real datasets (default $GNNC_DATA)")
    ds.set_defaults(func=cmd_datasets)

    info = sub.add_parser("info", help="summarise a graph's node types and relations")
    info.add_argument("graph", help="synthetic name, cora/citeseer, FB15k-237/WN18RR, or a .npz/.tar.gz path")
    info.add_argument("--scale", type=float, default=1.0, help="replica scale for synthetic graphs")
    info.add_argument("--data-dir", help="directory of real datasets (default $GNNC_DATA)")
    info.set_defaults(func=cmd_info)

    train = sub.add_parser("train", help="train GCN/GAT on Planetoid, or mini-batch R-GCN/R-GAT/HGT (--minibatch)")
    train.add_argument("--model", choices=["gcn", "gat", "rgcn", "rgat", "hgt"], default=None,
                       help="default gcn; rgcn with --minibatch")
    train.add_argument("--dataset", default=None,
                       help="cora or citeseer (default cora); with --minibatch a synthetic name (default mag)")
    train.add_argument("--data-dir", help="directory of real datasets (default $GNNC_DATA)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--epochs", type=int, default=None, help="default: the model's recipe (3 with --minibatch)")
    train.add_argument("--compile", action="store_true", help="run message passing through the compiler")
    mb = train.add_argument_group("mini-batch training")
    mb.add_argument("--minibatch", action="store_true", help="sampled mini-batch training of the target node type")
    mb.add_argument("--scale", type=float, default=0.01, help="synthetic replica scale")
    mb.add_argument("--fanouts", type=int, nargs="+", default=[25, 20], help="per layer, input layer first; -1 = all")
    mb.add_argument("--batch-size", type=int, default=1024)
    mb.add_argument("--hidden", type=int, default=64)
    mb.add_argument("--lr", type=float, default=0.01)
    mb.add_argument("--learnable", nargs="+", default=["non-target"], metavar="NTYPE",
                    help="types with learnable embeddings: non-target (default), missing, or type names")
    mb.add_argument("--checkpoint", metavar="DIR", help="write a checkpoint here after every epoch")
    mb.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    mb.add_argument("--device", default="cpu")
    dist = train.add_argument_group("distributed training (--dist: torchrun workers, gloo)")
    dist.add_argument("--dist", action="store_true", help="train across worker processes: RAF on meta "
                      "partitions or the vanilla data-parallel baseline")
    dist.add_argument("--nproc", type=int, default=2, help="worker processes on this machine")
    dist.add_argument("--mode", choices=["raf", "vanilla"], default="raf")
    dist.add_argument("--partition", choices=["metis", "random"], default="metis",
                      help="vanilla: edge-cut partitioning (RAF always uses meta partitions)")
    dist.add_argument("--partitions", metavar="DIR",
                      help="partitions written by gnnc partition (default: partition the replica into a temporary "
                           "directory)")
    dist.add_argument("--shared-learnable", choices=["owner", "replicate"], default="owner",
                      help="RAF: learnable rows of a type several partitions hold live with one owner (exact) "
                           "or are copied per partition (Heta)")
    dist.add_argument("--dist-timeout", type=float, default=300.0, help="seconds a worker waits for its peers")
    dist.add_argument("--nnodes", type=int, default=1, help="machines; run the same command on each")
    dist.add_argument("--node-rank", type=int, default=0, help="this machine's index among --nnodes")
    dist.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="torchrun rendezvous address for several machines")
    dist.add_argument("--report", metavar="FILE",
                      help="rank 0 writes every worker's per-epoch losses, seconds, bytes and cache counts as JSON")
    dist.add_argument("--cache-fraction", type=float, default=0.0, metavar="F",
                      help="Heta's feature cache on every worker, F times the bytes of the rows it stores, built "
                           "from pre-sampling (default 0: no cache); --checkpoint DIR [--resume] work with --dist too")
    train.set_defaults(func=cmd_train)

    exp = sub.add_parser("explain", help="show the MP-DFG of a reference model before and after optimization")
    exp.add_argument("--model", choices=["gcn", "gat", "rgcn", "rgat", "hgt", "edgeconv", "simple-hgn"], default="gat")
    exp.add_argument("--graph", default="cora", help="synthetic dataset name")
    exp.add_argument("--scale", type=float, default=0.05)
    exp.add_argument("--feat-dim", type=int, default=16)
    exp.add_argument("--dot", help="also write the optimized graphs as Graphviz dot here")
    exp.set_defaults(func=cmd_explain)

    from .bench_cli import add_bench_parser
    from .distributed.partition_cli import add_partition_parser

    add_partition_parser(sub)
    add_bench_parser(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
