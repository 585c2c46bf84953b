"""``GraphContext``: the structure tensors a compiled plan reads for one edge block.

A block is the whole graph (``rel=None``: all edges, all nodes are
destinations) or one relation (its edges; destinations are its dst type).
Contexts are cached on the graph's index, so building one is free after the
first call on a graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass
class GraphContext:
    """Index tensors of one block in internal edge order.

    ``src`` / ``dst`` are global node ids; ``dst_local`` counts from the
    first destination node ``node_lo``; ``edge_rel`` are global relation ids.
    """

    index: object
    rel: int | None
    src: torch.Tensor
    dst: torch.Tensor
    node_lo: int
    node_hi: int
    edge_lo: int
    edge_hi: int

    @property
    def num_nodes(self) -> int:
        return self.index.num_nodes

    @property
    def num_dst(self) -> int:
        return self.node_hi - self.node_lo

    @property
    def num_edges(self) -> int:
        return self.edge_hi - self.edge_lo

    @cached_property
    def dst_local(self) -> torch.Tensor:
        return self.dst - self.node_lo if self.node_lo else self.dst

    @cached_property
    def edge_rel(self) -> torch.Tensor:
        return self.index.edge_rel[self.edge_lo:self.edge_hi]

    @cached_property
    def src_type(self) -> torch.Tensor:
        return self.index.node_type[self.src]

    @cached_property
    def dst_type(self) -> torch.Tensor:
        return self.index.node_type[self.dst]

    @cached_property
    def dst_node_type(self) -> torch.Tensor:
        """Node type of every destination-range node."""
        return self.index.node_type[self.node_lo:self.node_hi]

    @cached_property
    def in_degrees(self) -> torch.Tensor:
        return torch.bincount(self.dst_local, minlength=self.num_dst)

    @cached_property
    def has_in_edges(self) -> torch.Tensor:
        return self.in_degrees > 0

    @cached_property
    def rel_ptr(self) -> list[int]:
        """Edge offsets (block-local) of every relation: edges are sorted by relation."""
        return [min(max(o - self.edge_lo, 0), self.num_edges) for o in self.index.rel_offsets]

    @cached_property
    def ntype_ptr(self) -> list[int]:
        """Global node offsets of every node type: nodes are grouped by type."""
        return list(self.index.ntype_offsets)

    @cached_property
    def dst_ntype_ptr(self) -> list[int]:
        """Node-type offsets within the destination range."""
        return [min(max(o - self.node_lo, 0), self.num_dst) for o in self.index.ntype_offsets]

    def buckets(self):
        return self.index.degree_buckets(self.rel)


def graph_context(g, rel: int | None) -> GraphContext:
    """The (cached) context of the whole graph or of relation ``rel``."""
    index = g.index
    cache = index.__dict__.setdefault("_contexts", {})
    if rel not in cache:
        if rel is None:
            elo, ehi, nlo, nhi = 0, index.num_edges, 0, index.num_nodes
        else:
            elo, ehi = index.rel_range(rel)
            nlo, nhi = index.ntype_range(index.ntypes.index(index.etypes[rel][2]))
        cache[rel] = GraphContext(index, rel, index.src[elo:ehi], index.dst[elo:ehi], nlo, nhi, elo, ehi)
    return cache[rel]
