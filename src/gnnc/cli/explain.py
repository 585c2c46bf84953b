"""``gnnc explain``: the MP-DFG of a reference model before and after optimization, and the path (compiled or
eager) a measurement of its forward picks."""

from __future__ import annotations

from .. import backend, models, stage_timings
from ..backend import CHOICES as BACKENDS
from ..compile import compile, explain
from .arguments import POSITIVE, SCALE, require_device
from .graphs import synthetic_replica

EXPLAIN_MODELS = ("gcn", "gat", "rgcn", "rgat", "hgt", "edgeconv", "simple-hgn")


def add_parser(subparsers) -> None:
    """Add the ``explain`` command to ``gnnc``'s subparsers."""
    exp = subparsers.add_parser("explain", help="show the MP-DFG of a reference model before and after optimization")
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
    exp.add_argument(
        "--timings",
        action="store_true",
        help="instead of the MP-DFG: the wall time per stage (tracing, each pass, graph preparation, numba "
        "compile or cache load, run) of the first and the second training step (forward, sum, backward)",
    )
    exp.set_defaults(func=cmd_explain)


def cmd_explain(args) -> int:
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
    model = builders[args.model]().to(args.device)
    if args.timings:
        print(step_timings(model, g, x, args.backend))
        return 0
    print(explain(model.eval(), g, x, dot=args.dot, backend=args.backend, measure_paths=True))
    return 0


def step_timings(model, g, x, backend_choice: str) -> str:
    """Stage tables of the first two training steps (forward, sum of the outputs, backward) of ``model``
    compiled, side by side."""
    compiled = compile(model, backend_choice)
    steps = {}
    for name in ("first step", "second step"):
        with stage_timings.recording() as steps[name]:
            out = compiled(g, x)
            sum(t.sum() for t in (out.values() if isinstance(out, dict) else [out])).backward()
    return stage_timings.side_by_side(steps)
