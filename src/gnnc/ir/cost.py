"""Cost model: FLOPs and bytes of the candidate plans of a relational operator on one graph.

Compiled plans are cached per graph schema, so the choices that depend on
the graph's statistics — edges E, and the unique (relation, source) and
(relation, destination) pairs Ps and Pd (Hector's compact materialization)
— are made when a plan runs on a graph, from these estimates:

- pair tables (``pair_table``): a typed linear map of edge rows computed
  per unique pair (2 P K M FLOPs, P rows, plus an 8-byte pair index per
  edge) or per edge (2 E K M FLOPs, E rows). Compact whenever the pairs
  save at least ``MIN_PAIR_SAVING`` of the rows; otherwise the table is one
  row per edge and the index is the identity, so no index is read.
- typed aggregation (``typed_aggregation``): ``sum_e w_e x[src] W_rel`` per
  destination, either transformed first per source pair, then aggregated
  (2 Ps K M + 2 E M), or aggregated first per destination pair, then
  transformed and summed per node (2 E K + 2 Pd K M + Pd M) — R-GCN's two
  orders, PyG's RGCNConv taking the second, DGL's RelGraphConv the first.
- typed scores (``typed_dot``): HGT's ``(k W_r) . q`` with the relation
  matrix applied per source pair to k, or transposed per destination pair
  to q (2 P H D^2 FLOPs on either side's pair count P).
Each returns every candidate with its estimate and marks the cheapest
(FLOPs plus bytes moved, bytes weighted as ``BYTE_COST`` FLOPs: a CPU core
does ~10 FLOPs in the time it moves a byte from memory).

With ``gnnc.compile(model, autotune=True)`` the order choices are measured
instead (``choose``): the first call on a graph times every candidate once
and the fastest is kept for that graph and operator shape.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..failures import stage
from ..scoped import scoped

if TYPE_CHECKING:  # a block's context, built by the executors: named for types only
    from .context import GraphContext

MIN_PAIR_SAVING = 0.1
_COST_MODEL = stage("cost model")  # what a failure in a choice is named
TRANSFORM_FIRST = "transform per source pair, then aggregate"
AGGREGATE_FIRST = "aggregate per destination pair, then transform"
BY_SOURCE = "source pairs: k W_r per source pair"
BY_DESTINATION = "destination pairs: q W_r^T per destination pair"
BYTE_COST = 10
INDEX_BYTES = 8


@dataclass(frozen=True)
class Candidate:
    """One way to run an operator, with its estimated work on this graph."""

    name: str
    flops: int
    bytes: int

    @property
    def cost(self) -> int:
        return self.flops + BYTE_COST * self.bytes


def cheapest(candidates: list[Candidate]) -> Candidate:
    return min(candidates, key=lambda c: c.cost)


@_COST_MODEL
def pair_table(num_edges: int, num_pairs: int, k: int, m: int, itemsize: int = 4) -> tuple[list[Candidate], str]:
    """Candidates for a [rows, K] @ [K, M] typed map of edge rows, and the choice (``compact`` / ``per edge``)."""
    candidates = [
        Candidate("per edge", 2 * num_edges * k * m, num_edges * (k + m) * itemsize),
        Candidate("compact", 2 * num_pairs * k * m, num_pairs * (k + m) * itemsize + num_edges * INDEX_BYTES),
    ]
    return candidates, "compact" if compacts(num_edges, num_pairs) else "per edge"


def compacts(num_edges: int, num_pairs: int) -> bool:
    """Whether a pair table of ``num_pairs`` rows replaces ``num_edges`` edge rows (saves enough rows)."""
    return num_pairs <= (1 - MIN_PAIR_SAVING) * num_edges


@_COST_MODEL
def typed_aggregation(
    num_edges: int, src_pairs: int, dst_pairs: int, k: int, m: int, itemsize: int = 4
) -> tuple[list[Candidate], str]:
    """Candidates for ``sum_e w_e x[src[e]] W[rel(e)]`` by destination, and the cheapest one's name."""
    candidates = [
        Candidate(
            TRANSFORM_FIRST,
            2 * src_pairs * k * m + 2 * num_edges * m,
            (src_pairs * (k + m) + num_edges * m) * itemsize + num_edges * INDEX_BYTES,
        ),
        Candidate(
            AGGREGATE_FIRST,
            2 * num_edges * k + 2 * dst_pairs * k * m + dst_pairs * m,
            (num_edges * k + dst_pairs * (k + 2 * m)) * itemsize + num_edges * INDEX_BYTES,
        ),
    ]
    return candidates, cheapest(candidates).name


@_COST_MODEL
def typed_dot(
    num_edges: int, src_pairs: int, dst_pairs: int, heads: int, d: int, itemsize: int = 4
) -> tuple[list[Candidate], str]:
    """Candidates for the per-head scores ``(k[src] W_rel) . q[dst]`` ([D, D] matrices), and the cheaper one."""
    dot = 2 * num_edges * heads * d
    candidates = [
        Candidate(
            BY_SOURCE,
            2 * src_pairs * heads * d * d + dot,
            (2 * src_pairs * heads * d + num_edges * heads) * itemsize + num_edges * INDEX_BYTES,
        ),
        Candidate(
            BY_DESTINATION,
            2 * dst_pairs * heads * d * d + dot,
            (2 * dst_pairs * heads * d + num_edges * heads) * itemsize + num_edges * INDEX_BYTES,
        ),
    ]
    return candidates, cheapest(candidates).name


def describe(title: str, candidates: list[Candidate], chosen: str) -> list[str]:
    """Lines for ``gnnc explain``: each candidate's FLOPs and bytes, the chosen one marked."""
    lines = [f"  {title}:"]
    for c in candidates:
        mark = "*" if c.name == chosen else " "
        lines.append(f"   {mark} {c.name:<48} {c.flops:>16,} FLOPs {c.bytes:>16,} bytes")
    return lines


_AUTOTUNE: contextvars.ContextVar = contextvars.ContextVar("gnnc_autotune", default=False)


def autotuning(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Context manager: inside it, ``choose`` times the candidates (``enabled``) instead of taking the
    estimate."""
    return scoped(_AUTOTUNE, bool(enabled))


@_COST_MODEL
def choose(ctx: GraphContext, key: Hashable, estimated: str, runs: Mapping[str, Callable[[], object]]) -> str:
    """The candidate to run: ``estimated`` (the cost model's pick), or under ``autotuning`` the fastest of
    ``runs`` (name -> function computing it), timed once each without gradients on the first call for this
    ``key`` on block ``ctx`` and remembered there."""
    if not _AUTOTUNE.get():
        return estimated
    tuned = ctx.__dict__.setdefault("_autotuned", {})
    if key not in tuned:
        times = {}
        with torch.no_grad():
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name] = time.perf_counter() - start
        tuned[key] = min(times, key=times.__getitem__)
    return tuned[key]
