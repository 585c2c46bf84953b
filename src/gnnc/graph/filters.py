"""DGL's ``filter_nodes`` / ``filter_edges``: the ids of the nodes (edges) of one type that a predicate
selects. The predicate is a node (edge) UDF returning one value per row, nonzero for a row it selects; it
runs as ``apply_nodes`` (``apply_edges``) does, inside a local scope, so the graph keeps no feature of it."""

from __future__ import annotations

import torch

from .core import ALL

_MASK = "_mask"


def filter_nodes(g, predicate, nodes=ALL, ntype=None) -> torch.Tensor:
    """Ids of the nodes ``nodes`` (every node of ``ntype`` by default) for which ``predicate`` is nonzero."""
    ntype = g.ntypes[g.ntype_id(ntype)]
    chosen = _chosen(g, nodes)
    with g.local_scope():
        g.apply_nodes(lambda batch: {_MASK: predicate(batch)}, chosen, ntype)
        return _selected(g, g.nodes[ntype].data[_MASK], chosen)


def filter_edges(g, predicate, edges=ALL, etype=None) -> torch.Tensor:
    """Ids of the edges ``edges`` (ids, or ``(u, v)`` node pairs; every edge of relation ``etype`` by
    default) for which ``predicate`` is nonzero."""
    etype = g.canonical_etypes[g.etype_id(etype)]
    if isinstance(edges, tuple):
        edges = g.edge_ids(*edges, etype=etype)
    chosen = _chosen(g, edges)
    with g.local_scope():
        g.apply_edges(lambda batch: {_MASK: predicate(batch)}, chosen, etype)
        return _selected(g, g.edges[etype].data[_MASK], chosen)


def _chosen(g, ids):
    """None for every row (DGL's ``ALL``), else the ids as an int64 tensor."""
    if isinstance(ids, str) and ids == ALL:
        return None
    return torch.as_tensor(ids, device=g.device).reshape(-1).long()


def _selected(g, mask: torch.Tensor, chosen) -> torch.Tensor:
    """The rows (of ``chosen``, else all) where the predicate's one value per row is nonzero."""
    if chosen is None:
        return g.ids(torch.nonzero(mask).reshape(-1))
    return g.ids(chosen[mask[chosen] != 0])
