"""``gnnc info GRAPH``: a graph's node types, relations, degrees and features."""

from __future__ import annotations

from ..data import citation, rdf
from .arguments import DATA_DIR_HELP, SCALE
from .graphs import load_graph


def add_parser(subparsers) -> None:
    """Add the ``info`` command to ``gnnc``'s subparsers."""
    info = subparsers.add_parser("info", help="summarise a graph's node types, relations, degrees and features")
    info.add_argument(
        "graph",
        help="synthetic name, cora/citeseer, aifb/mutag/bgs/am, FB15k-237/WN18RR, or a .npz/.tar.gz path",
    )
    info.add_argument("--scale", type=SCALE, default=1.0, help="replica scale for synthetic graphs")
    info.add_argument("--data-dir", help=DATA_DIR_HELP)
    info.set_defaults(func=cmd_info)


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
    if note := citation.processing_note(args.graph) or rdf.processing_note(args.graph):
        print(note)
    return 0
