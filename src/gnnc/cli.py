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
    torch.manual_seed(args.seed)
    rows = []
    for name, ds, model in _demo_cases(args):
        g = ds.graph
        x = g.ndata["feat"]
        with torch.no_grad():
            fwd = _median_ms(lambda: model(g, x), args.runs, f"{name} forward")

        def train_step():
            model.zero_grad()
            model(g, x).sum().backward()

        step = _median_ms(train_step, args.runs, f"{name} forward+backward")
        rows.append((name, ds.name, g.num_nodes(), g.num_edges(), len(g.canonical_etypes), fwd, step))
    print(f"gnnc demo: eager UDF executor, {torch.get_num_threads()} CPU threads, "
          f"median of {args.runs} runs after warm-up")
    header = ("model", "graph", "nodes", "edges", "relations", "forward ms", "fwd+bwd ms")
    print(f"{header[0]:<18} {header[1]:<16} {header[2]:>9} {header[3]:>10} {header[4]:>9} "
          f"{header[5]:>11} {header[6]:>11}")
    for model, graph, n, e, r, fwd, step in rows:
        print(f"{model:<18} {graph:<16} {n:>9,} {e:>10,} {r:>9} {fwd:>11.1f} {step:>11.1f}")
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
    from . import data
    from .training import planetoid_experiment

    root = data_root(args.data_dir)
    ds = data.load_planetoid(args.dataset, root / "planetoid" if root else None)
    result = planetoid_experiment(args.model, ds, seed=args.seed, epochs=args.epochs)
    print(f"{args.model.upper()} on {args.dataset}: test accuracy {result.test_acc * 100:.1f}% "
          f"(best val {result.val_acc * 100:.1f}% at epoch {result.best_epoch}/{result.epochs_run}, "
          f"seed {args.seed}, {result.seconds:.1f} s)")
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

    train = sub.add_parser("train", help="train GCN or GAT on a Planetoid dataset")
    train.add_argument("--model", choices=["gcn", "gat"], default="gcn")
    train.add_argument("--dataset", choices=["cora", "citeseer"], default="cora")
    train.add_argument("--data-dir", help="directory of real datasets (default $GNNC_DATA)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--epochs", type=int, default=None, help="default: the model's recipe")
    train.set_defaults(func=cmd_train)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
