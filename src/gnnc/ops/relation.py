"""The one relation a graph operator of ``gnnc.ops`` (gspmm, gsddmm) runs on, as index tensors.

DGL's operators take a graph with one relation (homogeneous, uni-bipartite, a block or a relation slice
``g[etype]``); their operands are tensors of that relation's source nodes (``u``), destination nodes (``v``)
and edges (``e``, in the user's edge order). Here the relation's edges are in gnnc's internal order, which
the kernels take as is; edge operands and edge results move between the two orders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph.relation_view import RelationGraph
from ..ir.context import graph_context

TARGETS = ("u", "v", "e")


@dataclass(frozen=True)
class Relation:
    """Edges ``lo..hi`` of ``index`` (internal order): ``src``/``dst`` count from the first node of their type."""

    index: object
    src: torch.Tensor
    dst: torch.Tensor
    num_src: int
    num_dst: int
    lo: int
    hi: int

    @property
    def num_edges(self) -> int:
        return self.hi - self.lo

    def from_user(self, x: torch.Tensor) -> torch.Tensor:
        return self.index.from_user_order(x, self.lo, self.hi)

    def to_user(self, x: torch.Tensor) -> torch.Tensor:
        return self.index.to_user_order(x, self.lo, self.hi)

    def rows(self, target: str) -> int:
        """Rows an operand on ``target`` (u, v or e) has."""
        return {"u": self.num_src, "v": self.num_dst, "e": self.num_edges}[target]

    def ends(self, target: str) -> torch.Tensor:
        """Row of the ``target`` operand every edge reads, internal order."""
        if target == "u":
            return self.src
        if target == "v":
            return self.dst
        return torch.arange(self.num_edges, device=self.src.device)


def relation_of(g, op: str) -> Relation:
    """``g``'s only relation (``g`` a relation slice: that relation). A graph of several relations is an
    error: DGL's per-type operand lists are not taken here, an operator runs on ``g[etype]``."""
    if isinstance(g, RelationGraph):
        parent, rel = g.parent, g.rel
    elif len(g.canonical_etypes) == 1:
        parent, rel = g, 0
    else:
        raise ValueError(
            f"{op}: the graph has {len(g.canonical_etypes)} relations; gnnc's {op} runs on one "
            f"relation (DGL's lists of per-type operands are not supported): call it on g[etype] "
            f"for each of {g.canonical_etypes}"
        )
    ctx = graph_context(parent, rel)
    src_type, _, dst_type = parent.canonical_etypes[rel]
    src_lo = parent.index.ntype_range(parent.ntype_id(src_type))[0]
    return Relation(
        parent.index,
        ctx.src - src_lo if src_lo else ctx.src,
        ctx.dst_local,
        parent.num_src_nodes(src_type),
        parent.num_dst_nodes(dst_type),
        ctx.edge_lo,
        ctx.edge_hi,
    )


def check_operand(op: str, name: str, x, rows: int, where: str) -> torch.Tensor:
    """``x`` as an operand of ``rows`` rows of floating point (TypeError / ValueError naming it otherwise)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{op}: {name} must be floating point (as DGL's kernels require), got {x.dtype}")
    if x.dim() == 0 or x.shape[0] != rows:
        raise ValueError(f"{op}: {name} must have one row per {where} ({rows}), got shape {tuple(x.shape)}")
    return x
