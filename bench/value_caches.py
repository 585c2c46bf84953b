"""Per-call cost of the caches that hold values derived from user tensors (issue 41), on the natural RGCN
rows' inputs: a hit (the source tensor compared by contents, ``gnnc.graph.value_cache``) against no cache
(the value rebuilt on every call). Medians of 30 calls after one, one thread.

    python bench/value_caches.py mutag,bgs
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import natural_udfs
from gnnc.backend.pytorch import index_matmul
from gnnc.forward.replay import type_rows
from gnnc.runtime import plan as plan_runner
from harness import datasets


def median_ms(call, repeats: int = 30) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def costs(g) -> dict:
    """{cache: (hit ms, rebuilt ms)} for one natural graph."""
    index, rel, norm, ntype = g.index, g.edata["rel_type"], g.edata["norm"], g.ndata["ntype"]
    edges, relations, types = rel.numel(), int(rel.max()) + 1, tuple(range(int(ntype.max()) + 1))
    out = {
        f"{name} in internal order": (
            median_ms(lambda u=user: plan_runner._internal_order(index, u, 0, edges)),
            median_ms(lambda u=user: index.from_user_order(u, 0, edges)),
        )
        for name, user in (("rel_type", rel), ("norm", norm))
    }
    internal = plan_runner._internal_order(index, rel, 0, edges)

    def regrouped():
        index_matmul.clear_groupings()
        index_matmul.grouping(internal, relations)

    out["rel_type grouping"] = (median_ms(lambda: index_matmul.grouping(internal, relations)), median_ms(regrouped, 5))
    out["ntype layout"] = (
        median_ms(lambda: type_rows.type_layout(ntype, types)),
        median_ms(lambda: type_rows._layout(ntype, types)),
    )
    return out


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        for name in (sys.argv[1] if len(sys.argv) > 1 else "mutag").split(","):
            g = natural_udfs.natural_graph(datasets.load(name, False, 0, Path(scratch)))
            print(f"{name}: {g.num_edges()} edges, {g.num_nodes()} nodes")
            for cache, (hit, rebuilt) in costs(g).items():
                print(f"  {cache:26s} hit {hit:8.3f} ms   no cache {rebuilt:8.3f} ms")


if __name__ == "__main__":
    main()
