"""DGL's ``to_homogeneous`` / ``to_heterogeneous``: one node and edge type, with the types as features.

``to_homogeneous`` numbers nodes type by type and edges relation by relation, in the graph's type order
(DGL's: sorted), and stores each node's type id and id within its type (``_TYPE``, ``_ID``) and each edge's
relation id and id within it. ``to_heterogeneous`` inverts it: nodes and edges of each type in their order
in the homogeneous graph, which the ``_ID`` features record.
"""
from __future__ import annotations

import torch

from .core import Graph, graph, heterograph

NID, EID, NTYPE, ETYPE = "_ID", "_ID", "_TYPE", "_TYPE"  # DGL's reserved feature names


def _shared(views: list, names, kind: str) -> dict:
    """``{name: rows of every type, concatenated}`` for ``names`` (every type must hold each)."""
    out = {}
    for name in names or ():
        missing = [i for i, view in enumerate(views) if name not in view]
        if missing:
            raise KeyError(f"to_homogeneous: {kind} feature {name!r} is missing on {len(missing)} type(s)")
        out[name] = torch.cat([view[name] for view in views])
    return out


def to_homogeneous(g: Graph, ndata=None, edata=None, store_type: bool = True, return_count: bool = False):
    """The graph as one node type and one relation; ``ndata`` / ``edata``: features (held by every type) to
    carry over; ``return_count``: also the node counts per type and edge counts per relation."""
    ntype_counts = [g.num_nodes(t) for t in g.ntypes]
    etype_counts = [g.num_edges(key) for key in g.canonical_etypes]
    offsets = torch.tensor([0, *ntype_counts], device=g.device).cumsum(0)
    srcs, dsts = [], []
    for key in g.canonical_etypes:
        src, dst = g.find_edges(key)
        srcs.append(src.long() + offsets[g.ntype_id(key[0])])
        dsts.append(dst.long() + offsets[g.ntype_id(key[2])])
    out = graph((torch.cat(srcs) if srcs else torch.zeros(0, dtype=torch.int64),
                 torch.cat(dsts) if dsts else torch.zeros(0, dtype=torch.int64)),
                num_nodes=sum(ntype_counts), idtype=g.idtype, device=g.device)
    out.ndata.update(_shared([g.nodes[t].data for t in g.ntypes], ndata, "node"))
    out.edata.update(_shared([g.edges[key].data for key in g.canonical_etypes], edata, "edge"))
    if store_type:
        out.ndata[NTYPE] = torch.repeat_interleave(torch.arange(len(ntype_counts), device=g.device),
                                                   torch.tensor(ntype_counts, device=g.device))
        out.edata[ETYPE] = torch.repeat_interleave(torch.arange(len(etype_counts), device=g.device),
                                                   torch.tensor(etype_counts, device=g.device))
    out.ndata[NID] = torch.cat([torch.arange(n, device=g.device) for n in ntype_counts]) if ntype_counts \
        else torch.zeros(0, dtype=torch.int64)
    out.edata[EID] = torch.cat([torch.arange(n, device=g.device) for n in etype_counts]) if etype_counts \
        else torch.zeros(0, dtype=torch.int64)
    return (out, ntype_counts, etype_counts) if return_count else out


def to_heterogeneous(g: Graph, ntypes, etypes, ntype_field: str = NTYPE, etype_field: str = ETYPE,
                     metagraph=None) -> Graph:
    """The heterograph whose nodes of type ``ntypes[i]`` are those with ``ndata[ntype_field] == i`` and whose
    relation (``ntypes[s]``, ``etypes[r]``, ``ntypes[d]``) holds the edges of type id ``r`` from type ``s`` to
    type ``d``, each in its order in ``g``; other features are split by type, and ``_ID`` records each node's
    and edge's id in ``g``. (``metagraph`` is not supported: the relations are those the edges show.)"""
    if len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise ValueError("to_heterogeneous takes a graph with one node type and one relation")
    if metagraph is not None:
        raise NotImplementedError("to_heterogeneous(metagraph=...) is not supported; the relations are inferred")
    node_type = g.ndata[ntype_field].long()
    edge_type = g.edata[etype_field].long()
    counts = torch.bincount(node_type, minlength=len(ntypes))
    order = torch.argsort(node_type, stable=True)
    local = torch.empty_like(node_type)
    local[order] = torch.arange(node_type.numel(), device=g.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts)
    src, dst = (t.long() for t in g.find_edges())
    triple = torch.stack([node_type[src], edge_type, node_type[dst]], 1)
    kinds, which = torch.unique(triple, dim=0, return_inverse=True)
    groups = [torch.nonzero(which == i).flatten() for i in range(kinds.shape[0])]
    keys = [(ntypes[int(s)], etypes[int(r)], ntypes[int(d)]) for s, r, d in kinds.tolist()]
    out = heterograph({key: (local[src[rows]], local[dst[rows]]) for key, rows in zip(keys, groups)},
                      {t: int(counts[i]) for i, t in enumerate(ntypes)}, g.device, idtype=g.idtype)
    nodes_of = {t: torch.nonzero(node_type == i).flatten() for i, t in enumerate(ntypes)}
    for name in g.ndata:
        if name not in (ntype_field, NID):
            for t in ntypes:
                out.nodes[t].data[name] = g.ndata[name].index_select(0, nodes_of[t])
    for name in g.edata:
        if name not in (etype_field, EID):
            for key, rows in zip(keys, groups):
                out.edges[key].data[name] = g.edata[name].index_select(0, rows)
    for t in ntypes:
        out.nodes[t].data[NID] = nodes_of[t]
    for key, rows in zip(keys, groups):
        out.edges[key].data[EID] = rows
    return out


__all__ = ["to_homogeneous", "to_heterogeneous"]
