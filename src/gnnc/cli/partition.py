"""``gnnc partition``: partition a graph (meta, METIS or random) and write it to disk."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..data.replicas import is_replica
from ..distributed import add_reverse_relations, meta_partition, metis_partition, random_partition, save_partitions
from ..distributed.meta_partition import MetaTree
from .arguments import DATA_DIR_HELP, POSITIVE, SCALE, HelpFormatter
from .graphs import load_graph, synthetic_replica


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``partition`` command to ``gnnc``'s subparsers."""
    p = subparsers.add_parser(
        "partition",
        help="partition a graph for distributed training (meta, METIS, random)",
        formatter_class=HelpFormatter,
        description="Partition a graph and write it to --out. A synthetic name builds its "
        "replica at --scale (default 1: the full published size, gigabytes "
        "for mag); the command prints the size before it starts and the bytes "
        "written at the end.",
    )
    p.add_argument(
        "graph",
        help="a synthetic replica (cora-replica, mag, ...), the real cora/citeseer/FB15k-237/"
        "WN18RR, or a .npz/.tar.gz path",
    )
    p.add_argument(
        "--method",
        choices=["meta", "metis", "random"],
        default="meta",
        help="meta: Heta's metatree partitions; metis / random: edge-cut partitions of the nodes",
    )
    p.add_argument("--parts", type=POSITIVE, required=True, help="number of partitions")
    p.add_argument("--out", required=True, help="output directory (manifest.json, part0/, part1/, ...)")
    p.add_argument("--target", help="target node type for meta (default: the dataset's labelled type)")
    p.add_argument("--depth", type=POSITIVE, default=2, help="metatree depth = number of HGNN layers (meta)")
    p.add_argument(
        "--metapath",
        action="append",
        metavar="REL,REL,...",
        help="meta: build the metatree from metapaths instead (relations from the target "
        "outward, comma-separated); repeat for several",
    )
    p.add_argument(
        "--add-reverse",
        action="store_true",
        help="first add reverse relations (Heta's ogbn-mag has 4 relations + 3 reverses)",
    )
    p.add_argument("--scale", type=SCALE, default=1.0, help="replica scale for synthetic graphs")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic replica and of random / METIS")
    p.add_argument("--data-dir", help=DATA_DIR_HELP)
    p.set_defaults(func=cmd_partition)
    return p


def cmd_partition(args) -> int:
    start = time.perf_counter()
    g, target = _load(args)
    if args.add_reverse:
        g = add_reverse_relations(g)
    loaded = time.perf_counter()
    if args.method == "meta":
        if target is None:
            raise SystemExit(f"gnnc partition: --target is required for this graph; node types: {g.ntypes}")
        metapaths = [m.split(",") for m in args.metapath] if args.metapath else None
        parts = meta_partition(g, target, args.parts, args.depth, metapaths)
    elif args.method == "metis":
        parts = metis_partition(g, args.parts, args.seed)
    else:
        parts = random_partition(g, args.parts, args.seed)
    split = time.perf_counter()
    manifest = save_partitions(parts, args.out)
    done = time.perf_counter()
    print(
        f"{args.graph}: {g.num_nodes():,} nodes of {len(g.ntypes)} types, {g.num_edges():,} edges of "
        f"{len(g.canonical_etypes)} relations; {args.method} partitioning into {args.parts}"
    )
    print(_report(parts))
    written = sum(f.stat().st_size for f in Path(args.out).rglob("*") if f.is_file())
    print(
        f"load {loaded - start:.2f} s, partition {split - loaded:.2f} s, save {done - split:.2f} s; "
        f"manifest: {manifest}; {written / 2**20:,.1f} MiB in {args.out}"
    )
    return 0


def _load(args):
    """(graph, target type or None) for the command line's graph spec."""
    if is_replica(args.graph):
        ds = synthetic_replica(args.graph, args.scale, "partition", seed=args.seed)
        return ds.graph, args.target or ds.target_ntype
    g = load_graph(args.graph, args.scale, args.data_dir, "partition")
    return g, args.target or (g.ntypes[0] if len(g.ntypes) == 1 else None)


def _report(parts) -> str:
    """Per-part table and balance; the metatree and its pieces for meta partitions."""
    lines = []
    if parts.method == "meta":
        lines.append("metatree:")
        lines += ["  " + line for line in MetaTree.from_json(parts.params["tree"]).lines()]
        lines.append(f"sub-metatree weights (descending): {parts.params['subtree_weights']}")
    else:
        total = sum(n for _, n in parts.schema.relations)
        lines.append(f"edge cut: {parts.params['edge_cut']:,} of {total:,} edges")
    for p in parts.parts:
        owned = sum(p.num_owned.values())
        halo = sum(p.node_counts.values()) - owned
        boundary = {t: int(ids.numel()) for t, ids in p.boundary.items()}
        lines.append(
            f"part {p.part_id}: {len(p.relations)} relations, {p.num_edges:,} edges, "
            f"{owned:,} owned nodes, {halo:,} halo nodes, boundary {boundary}"
        )
        if parts.method == "meta":
            replica, replicas = p.info["replica"]
            lines.append(
                f"  relations {[r for _, r, _ in p.relations]}; load {p.info['load']:,.0f}"
                + (f"; replica {replica + 1} of {replicas}" if replicas > 1 else "")
            )
    balance = parts.balance()
    if parts.method == "meta":
        balance["metatree_load"] = parts.params["load_balance"]
    lines.append("balance (max/mean): " + ", ".join(f"{k} {v:.3f}" for k, v in balance.items()))
    return "\n".join(lines)
