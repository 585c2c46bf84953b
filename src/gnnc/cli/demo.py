"""``gnnc demo``: GAT and RGCN on synthetic graphs, timed eager against ``gnnc.compile``."""

from __future__ import annotations

import sys

import torch

from .. import data, models
from ..compile import compile as compile_model
from ..spread import busy_warning, measure
from .arguments import POSITIVE, SCALE
from .graphs import replica_name


def add_parser(subparsers) -> None:
    """Add the ``demo`` command to ``gnnc``'s subparsers."""
    demo = subparsers.add_parser("demo", help="run GAT and RGCN on bundled synthetic graphs and time them")
    demo.add_argument("--gat-graph", default="pubmed", help="synthetic graph of the GAT case")
    demo.add_argument("--gat-scale", type=SCALE, default=1.0, help="replica scale of the GAT graph")
    demo.add_argument("--rgcn-graph", default="aifb-replica", help="synthetic graph of the RGCN case")
    demo.add_argument("--rgcn-scale", type=SCALE, default=1.0, help="replica scale of the RGCN graph")
    demo.add_argument("--runs", type=POSITIVE, default=5, help="timed runs per measurement (median reported)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the graphs and the models")
    demo.set_defaults(func=cmd_demo)


def _demo_cases(args):
    gat_ds = data.synthetic(replica_name(args.gat_graph, "demo"), scale=args.gat_scale, seed=args.seed)
    gat = models.GATConv(gat_ds.graph.ndata_all["feat"].shape[1], 8, num_heads=8)
    yield "GAT (8 heads x 8)", gat_ds, gat
    rgcn_ds = data.synthetic(replica_name(args.rgcn_graph, "demo"), scale=args.rgcn_scale, seed=args.seed, feat_dim=16)
    rgcn = models.RGCNConv(16, 16, num_rels=len(rgcn_ds.graph.canonical_etypes))
    yield "RGCN (16 -> 16)", rgcn_ds, rgcn


def cmd_demo(args) -> int:
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
        fewer = ", or with fewer threads (OMP_NUM_THREADS=1)" if torch.get_num_threads() > 1 else ""
        print(f"gnnc demo: {busy}; rerun on an idle machine{fewer}", file=sys.stderr, flush=True)
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
