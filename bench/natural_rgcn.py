"""DGL's entity-classification RGCN layer as users write it, eager vs compiled vs gnnc's own RGCNConv.

The natural layer indexes its (optionally basis-decomposed) weight by an
integer edge feature inside the message UDF::

    w = weight[edges.data['rel_type']]
    msg = torch.bmm(edges.src['h'].unsqueeze(1), w).squeeze() * edges.data['norm']

Graph: the ``pubmed`` synthetic replica (19,717 nodes, 88,651 edges) with
every edge given one of ``--rels`` random relations and ``--width``-wide
random features. gnnc's ``RGCNConv`` runs on the same edges as a
heterograph with one relation per type (no self loop, no bias: the same
arithmetic). Each system runs in a fresh process; times are medians of
``--runs`` runs after ``--warmup`` warm-ups (inference under no_grad, and a
training step: forward, sum, backward); peak is, per mode, the resident-set
high-water mark (reset through /proc/self/clear_refs) above what the process
held when the mode started (its warm-ups included).

    python bench/natural_rgcn.py --runs 10 [--bases 10] [--threads 1] [--json out.json]

On a machine shared with other jobs, ``--threads 1`` gives far steadier
times: a multi-threaded parallel region waits for its slowest thread.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from natural_models import RGCNLayer  # DGL's entity-classification layer, as users write it

SYSTEMS = ("eager", "compiled", "compiled, index_typed off", "gnnc RGCNConv compiled")


def _graphs(dataset: str, rels: int, width: int, seed: int):
    import gnnc

    ds = gnnc.data.synthetic(dataset, seed=seed, with_features=False)
    src, dst = ds.graph.edges()
    gen = torch.Generator().manual_seed(seed)
    rel = torch.randint(0, rels, (src.numel(),), generator=gen)
    n = ds.graph.num_nodes()
    homo = gnnc.graph((src, dst), num_nodes=n)
    homo.edata["rel_type"] = rel
    # 1 / (in-edges of the destination with the same relation), DGL's entity-classification norm
    key = dst * rels + rel
    counts = torch.bincount(key, minlength=n * rels)
    homo.edata["norm"] = counts[key].to(torch.float32).reciprocal().unsqueeze(1)
    hetero = gnnc.heterograph(
        {("node", f"r{r}", "node"): (src[rel == r], dst[rel == r]) for r in range(rels)}, num_nodes={"node": n}
    )
    x = torch.randn(n, width, generator=gen)
    return homo, hetero, x


def run_system(system: str, args, queue) -> None:
    import gnnc
    from harness.procfs import reset_peak, status_kib

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    homo, hetero, x = _graphs(args.dataset, args.rels, args.width, args.seed)
    bases = args.bases if args.bases else -1
    if system == "gnnc RGCNConv compiled":
        layer = gnnc.models.RGCNConv(
            args.width, args.width, args.rels, num_bases=args.bases or None, self_loop=False, bias=False
        )
        model = gnnc.compile(layer)

        def forward(inp):
            return model(hetero, inp)
    else:
        layer = RGCNLayer(args.width, args.width, args.rels, num_bases=bases)
        model = {
            "eager": layer,
            "compiled": gnnc.compile(layer),
            "compiled, index_typed off": gnnc.compile(layer, index_typed=False),
        }[system]

        def forward(inp):
            return model(homo, inp)

    def train_step():
        inp = x.requires_grad_(True) if not x.requires_grad else x
        layer.zero_grad(set_to_none=True)
        forward(inp).sum().backward()

    def infer():
        with torch.no_grad():
            forward(x)

    result = {"system": system}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for mode, step in (("inference", infer), ("training", train_step)):
            before = status_kib("VmRSS")
            reset_peak()
            for _ in range(args.warmup):
                step()
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
            result[f"{mode}_ms"] = 1e3 * statistics.median(times)
            result[f"{mode}_ms_all"] = [round(1e3 * t, 2) for t in times]
            result[f"{mode}_peak_extra_mib"] = (status_kib("VmHWM") - before) / 1024
    result["warnings"] = sorted({str(w.message)[:200] for w in caught})
    result.update(nodes=homo.num_nodes(), edges=homo.num_edges(), threads=torch.get_num_threads())
    queue.put(result)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="pubmed")
    p.add_argument("--rels", type=int, default=50)
    p.add_argument("--bases", type=int, default=0, help="basis decomposition with this many bases (0: none)")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    p.add_argument("--json", help="write results here")
    args = p.parse_args()

    ctx = mp.get_context("spawn")
    rows = []
    for system in args.systems:
        q = ctx.Queue()
        proc = ctx.Process(target=run_system, args=(system, args, q))
        proc.start()
        rows.append(q.get())
        proc.join()
    first = rows[0]
    print(
        f"{args.dataset} replica: {first['nodes']:,} nodes, {first['edges']:,} edges, {args.rels} relations, "
        f"width {args.width}, bases {args.bases or 'none'}, {first['threads']} threads; "
        f"median of {args.runs} runs after {args.warmup} warm-ups"
    )
    print(f"| {'system':<28} | {'inference ms':>12} | {'peak MiB':>8} | {'training step ms':>16} | {'peak MiB':>8} |")
    print(f"|{'-' * 30}|{'-' * 13}:|{'-' * 9}:|{'-' * 17}:|{'-' * 9}:|")
    for r in rows:
        print(
            f"| {r['system']:<28} | {r['inference_ms']:>12.1f} | {r['inference_peak_extra_mib']:>8.0f} | "
            f"{r['training_ms']:>16.1f} | {r['training_peak_extra_mib']:>8.0f} |"
        )
    for r in rows:
        for w in r["warnings"]:
            print(f"warning ({r['system']}): {w}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
