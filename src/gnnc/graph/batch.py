"""``batch`` and ``unbatch``: many graphs as one graph (DGL's ``dgl.batch``), for graph-level tasks.

The batched graph holds the graphs side by side: graph i's nodes of each
type follow graph i-1's, its edges of each relation likewise, and its
features are the graphs' features concatenated. Message passing on it equals
message passing on each graph apart (no edge joins two graphs);
``gnnc.readout`` pools its node or edge features per graph.
"""
from __future__ import annotations

import torch

from .core import Graph, heterograph


def batch(graphs) -> Graph:
    """One graph holding ``graphs`` in order, with ``batch_num_nodes`` / ``batch_num_edges`` per graph.

    The graphs must have the same node types and relations, on one device,
    and each node type's (relation's) features the same names in every
    graph; a ValueError names the graph and what differs.
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("batch needs at least one graph")
    first = graphs[0]
    for i, g in enumerate(graphs[1:], 1):
        if g.ntypes != first.ntypes or g.canonical_etypes != first.canonical_etypes:
            raise ValueError(f"batch: graph {i} has node types {g.ntypes} and relations {g.canonical_etypes}; "
                             f"graph 0 has {first.ntypes} and {first.canonical_etypes}")
        if g.device != first.device:
            raise ValueError(f"batch: graph {i} is on {g.device}, graph 0 on {first.device}")
    nodes = torch.tensor([[g.num_nodes(t) for t in first.ntypes] for g in graphs], dtype=torch.int64)
    edges = torch.tensor([[g.num_edges(r) for r in first.canonical_etypes] for g in graphs], dtype=torch.int64)
    starts = nodes.cumsum(0) - nodes  # first node of every graph, per type
    relations = {}
    for key in first.canonical_etypes:
        s, d = first.ntype_id(key[0]), first.ntype_id(key[2])
        ends = [g.find_edges(key) for g in graphs]
        relations[key] = (torch.cat([src + int(starts[i, s]) for i, (src, _) in enumerate(ends)]),
                          torch.cat([dst + int(starts[i, d]) for i, (_, dst) in enumerate(ends)]))
    out = heterograph(relations, dict(zip(first.ntypes, nodes.sum(0).tolist())), first.device)
    for t in first.ntypes:
        _concat_features([g.nodes[t].data for g in graphs], out.nodes[t].data, f"node type {t!r}")
    for key in first.canonical_etypes:
        _concat_features([g.edges[key].data for g in graphs], out.edges[key].data, f"relation {key}")
    out.batch_counts = (nodes, edges)
    return out


def _concat_features(parts, target, what: str) -> None:
    names = list(parts[0].keys())
    for i, data in enumerate(parts[1:], 1):
        if set(data.keys()) != set(names):
            raise ValueError(f"batch: {what} of graph {i} has features {sorted(data.keys())}, graph 0 has "
                             f"{sorted(names)}")
    for name in names:
        target[name] = torch.cat([data[name] for data in parts])


def unbatch(g: Graph) -> list[Graph]:
    """The graphs ``batch`` joined into ``g``, with their features (any graph: ``[g]``'s copy when not batched)."""
    nodes, edges = g.batch_num_nodes_by_type(), g.batch_num_edges_by_type()
    node_starts, edge_starts = nodes.cumsum(0) - nodes, edges.cumsum(0) - edges
    ends = [g.find_edges(key) for key in g.canonical_etypes]
    out = []
    for i in range(nodes.shape[0]):
        relations = {}
        for r, (key, (src, dst)) in enumerate(zip(g.canonical_etypes, ends)):
            lo, hi = int(edge_starts[i, r]), int(edge_starts[i, r] + edges[i, r])
            relations[key] = (src[lo:hi] - int(node_starts[i, g.ntype_id(key[0])]),
                              dst[lo:hi] - int(node_starts[i, g.ntype_id(key[2])]))
        part = heterograph(relations, dict(zip(g.ntypes, nodes[i].tolist())), g.device)
        for t, ntype in enumerate(g.ntypes):
            lo = int(node_starts[i, t])
            for name, value in g.nodes[ntype].data.items():
                part.nodes[ntype].data[name] = value[lo:lo + int(nodes[i, t])]
        for r, key in enumerate(g.canonical_etypes):
            lo = int(edge_starts[i, r])
            for name, value in g.edges[key].data.items():
                part.edges[key].data[name] = value[lo:lo + int(edges[i, r])]
        out.append(part)
    return out
