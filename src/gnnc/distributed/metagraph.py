"""The weighted metagraph meta-partitioning works on, and the graph surgery partitions need.

``WeightedMetagraph.of(g)`` is Heta's input (§5): one vertex per node type
weighted by its node count (feature bytes kept beside it for reports), one
link per relation weighted by its edge count. ``typed_subgraph`` cuts a
graph down to chosen relations / edges and node types / nodes; every
partition is built with it. (The reverse relations partitioners usually
want first come from ``gnnc.graph.reverse_relations``.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph import Graph, heterograph

Relation = tuple[str, str, str]


@dataclass(frozen=True)
class WeightedMetagraph:
    """Node types with node counts and feature bytes, relations with edge counts.

    Dict orders follow the graph's node-type and relation order.
    """

    node_counts: dict[str, int]
    feature_bytes: dict[str, int]
    edge_counts: dict[Relation, int]

    @classmethod
    def of(cls, g: Graph) -> WeightedMetagraph:
        """The metagraph of ``g``; feature bytes count every node feature of a type."""
        counts = {t: g.num_nodes(t) for t in g.ntypes}
        nbytes = {t: sum(v.numel() * v.element_size() for v in g.nodes[t].data.values()) for t in g.ntypes}
        return cls(counts, nbytes, {rel: g.num_edges(rel) for rel in g.canonical_etypes})

    @property
    def ntypes(self) -> list[str]:
        return list(self.node_counts)

    @property
    def relations(self) -> list[Relation]:
        return list(self.edge_counts)

    def in_relations(self, ntype: str) -> list[Relation]:
        """Relations whose destination is ``ntype`` (their messages arrive there), in graph order."""
        return [rel for rel in self.edge_counts if rel[2] == ntype]

    def resolve(self, relation) -> Relation:
        """Canonical relation of a name or (src, name, dst); KeyError naming the culprit."""
        if isinstance(relation, (tuple, list)):
            key = tuple(relation)
            if key in self.edge_counts:
                return key
            raise KeyError(f"unknown relation {key!r}; relations: {self.relations}")
        matches = [rel for rel in self.edge_counts if rel[1] == relation]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"unknown relation {relation!r}; relations: {[r for _, r, _ in self.relations]}")
        raise KeyError(f"relation name {relation!r} is ambiguous; use one of {matches}")

    def weight(self, ntypes, relations) -> int:
        """Sum of vertex weights (node counts) and link weights (edge counts)."""
        return sum(self.node_counts[t] for t in ntypes) + sum(self.edge_counts[r] for r in relations)


def typed_subgraph(g: Graph, ntypes, relations, node_ids: dict | None = None, edge_ids: dict | None = None) -> Graph:
    """The part of ``g`` on some node types / nodes and relations / edges.

    Node types and relations keep ``g``'s order. ``node_ids[t]`` lists the
    parent ids (local to type t) that become local nodes 0, 1, ... of type t
    (default: every node, same ids); ``edge_ids[rel]`` lists the parent edge
    ids (within the relation, user order) kept, in local edge order (default:
    every edge). Edge features and type parameters come along; node features
    do not (partitions store them per owner). ValueError when a kept edge
    ends at a node that is not kept.
    """
    node_ids, edge_ids = node_ids or {}, edge_ids or {}
    keep_types = [t for t in g.ntypes if t in set(ntypes)]
    keep_rels = [rel for rel in g.canonical_etypes if rel in set(map(tuple, relations))]
    lookup = {t: _lookup(ids, g.num_nodes(t)) for t, ids in node_ids.items()}
    data = {}
    for rel in keep_rels:
        s, _, d = rel
        if s not in keep_types or d not in keep_types:
            raise ValueError(f"relation {rel} needs node types {s!r} and {d!r}, kept types are {keep_types}")
        src, dst = g.find_edges(rel)
        if rel in edge_ids:
            src, dst = src[edge_ids[rel]], dst[edge_ids[rel]]
        data[rel] = (_relabel(src, lookup.get(s), rel, s), _relabel(dst, lookup.get(d), rel, d))
    counts = {t: (len(node_ids[t]) if t in node_ids else g.num_nodes(t)) for t in keep_types}
    out = heterograph(data, num_nodes=counts)
    for rel in keep_rels:
        for key, value in g.edges[rel].data.items():
            out.edges[rel].data[key] = value[edge_ids[rel]] if rel in edge_ids else value
    type_rows = torch.tensor([g.ntype_id(t) for t in out.ntypes], dtype=torch.int64)  # by name: out is sorted
    rel_rows = torch.tensor([g.etype_id(rel) for rel in out.canonical_etypes], dtype=torch.int64)
    for key, value in g.ntype_data.items():
        out.ntype_data[key] = value.index_select(0, type_rows.to(value.device))
    for key, value in g.etype_data.items():
        out.etype_data[key] = value.index_select(0, rel_rows.to(value.device))
    return out


def node_features(g: Graph, ntype: str, ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Every node feature of ``ntype`` (rows ``ids`` of the type, or all)."""
    data = g.nodes[ntype].data
    return {key: (value if ids is None else value[ids]) for key, value in data.items()}


def _lookup(ids, count: int) -> torch.Tensor:
    ids = torch.as_tensor(ids, dtype=torch.int64)
    table = torch.full((count,), -1, dtype=torch.int64)
    table[ids] = torch.arange(ids.numel())
    return table


def _relabel(ids: torch.Tensor, table: torch.Tensor | None, rel: Relation, ntype: str) -> torch.Tensor:
    if table is None:
        return ids
    local = table[ids]
    if ids.numel() and int(local.min()) < 0:
        bad = int(ids[local < 0][0])
        raise ValueError(f"relation {rel}: edge ends at {ntype!r} node {bad}, which is not among the kept nodes")
    return local
