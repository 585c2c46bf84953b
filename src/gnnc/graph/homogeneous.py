"""DGL's ``to_homogeneous`` / ``to_heterogeneous``: one node and edge type, with the types as features.

``to_homogeneous`` numbers nodes type by type and edges relation by relation, in the graph's type order
(DGL's: sorted), and stores each node's type id and id within its type (``_TYPE``, ``_ID``) and each edge's
relation id and id within it. ``to_heterogeneous`` inverts it: nodes and edges of each type in their order
in the homogeneous graph, which the ``_ID`` features record.
"""

from __future__ import annotations

import torch

from .combine import combine_features
from .core import Graph, graph, heterograph

NID, EID, NTYPE, ETYPE = "_ID", "_ID", "_TYPE", "_TYPE"  # DGL's reserved feature names


def to_homogeneous(g: Graph, ndata=None, edata=None, store_type: bool = True, return_count: bool = False):
    """The graph as one node type and one relation; ``ndata`` / ``edata``: features to carry over (as DGL's:
    read on the types with rows, where the first must hold each and one a later type lacks is dropped:
    ``gnnc.graph.combine``); ``return_count``: also the node counts per type and edge counts per relation."""
    ntype_counts = [g.num_nodes(t) for t in g.ntypes]
    etype_counts = [g.num_edges(key) for key in g.canonical_etypes]
    offsets = torch.tensor([0, *ntype_counts], device=g.device).cumsum(0)
    srcs, dsts = [], []
    for key in g.canonical_etypes:
        src, dst = g.find_edges(key)
        srcs.append(src.long() + offsets[g.ntype_id(key[0])])
        dsts.append(dst.long() + offsets[g.ntype_id(key[2])])
    out = graph(
        (
            torch.cat(srcs) if srcs else torch.zeros(0, dtype=torch.int64),
            torch.cat(dsts) if dsts else torch.zeros(0, dtype=torch.int64),
        ),
        num_nodes=sum(ntype_counts),
        idtype=g.idtype,
        device=g.device,
    )
    out.ndata.update(combine_features([(g.nodes[t].data, g.num_nodes(t)) for t in g.ntypes], ndata or ()))
    out.edata.update(
        combine_features([(g.edges[key].data, g.num_edges(key)) for key in g.canonical_etypes], edata or ())
    )
    if store_type:
        out.ndata[NTYPE] = torch.repeat_interleave(
            torch.arange(len(ntype_counts), device=g.device), torch.tensor(ntype_counts, device=g.device)
        )
        out.edata[ETYPE] = torch.repeat_interleave(
            torch.arange(len(etype_counts), device=g.device), torch.tensor(etype_counts, device=g.device)
        )
    out.ndata[NID] = (
        torch.cat([torch.arange(n, device=g.device) for n in ntype_counts])
        if ntype_counts
        else torch.zeros(0, dtype=torch.int64)
    )
    out.edata[EID] = (
        torch.cat([torch.arange(n, device=g.device) for n in etype_counts])
        if etype_counts
        else torch.zeros(0, dtype=torch.int64)
    )
    return (out, ntype_counts, etype_counts) if return_count else out


def to_heterogeneous(
    g: Graph, ntypes, etypes, ntype_field: str = NTYPE, etype_field: str = ETYPE, metagraph=None
) -> Graph:
    """The heterograph whose nodes of type ``ntypes[i]`` are those with ``ndata[ntype_field] == i`` and whose
    relation (``ntypes[s]``, ``etypes[r]``, ``ntypes[d]``) holds the edges of type id ``r`` from type ``s`` to
    type ``d``, each in its order in ``g``; other features are split by type, and ``_ID`` records each node's
    and edge's id in ``g``. The relations are those the edges show, or, given DGL's ``metagraph`` (a networkx
    MultiDiGraph of node types keyed by relation name, or ``g.metagraph()``), its relations, in its order and
    with or without edges (edges of a relation it lacks are left out, as DGL's)."""
    if len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise ValueError("to_heterogeneous takes a graph with one node type and one relation")
    node_type = g.ndata[ntype_field].long()
    edge_type = g.edata[etype_field].long()
    counts = torch.bincount(node_type, minlength=len(ntypes))
    order = torch.argsort(node_type, stable=True)
    local = torch.empty_like(node_type)
    local[order] = torch.arange(node_type.numel(), device=g.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts
    )
    src, dst = (t.long() for t in g.find_edges())
    triple = torch.stack([node_type[src], edge_type, node_type[dst]], 1)
    if metagraph is None:
        kinds = torch.unique(triple, dim=0).tolist()
    else:
        _names_tell_relations_apart(etypes)
        kinds = [(ntypes.index(s), etypes.index(r), ntypes.index(d)) for s, d, r in metagraph.edges(keys=True)]
    groups = [torch.nonzero((triple == triple.new_tensor(kind)).all(1)).flatten() for kind in kinds]
    keys = [(ntypes[s], etypes[r], ntypes[d]) for s, r, d in kinds]
    out = heterograph(
        {key: (local[src[rows]], local[dst[rows]]) for key, rows in zip(keys, groups)},
        {t: int(counts[i]) for i, t in enumerate(ntypes)},
        g.device,
        idtype=g.idtype,
    )
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


def _names_tell_relations_apart(etypes) -> None:
    """A metagraph names relations by name: refuse ``etypes`` where one name stands for two type ids (DGL then
    takes the last id and silently drops the other relation's edges)."""
    twice = sorted({name for name in etypes if list(etypes).count(name) > 1})
    if twice:
        raise ValueError(
            f"to_heterogeneous(metagraph=...): relation name(s) {twice} stand for several type ids in "
            "etypes, so the metagraph's relations cannot be told apart by name (DGL keeps the last id "
            "and drops the other relations' edges); pass metagraph=None to take the relations from the "
            "edges"
        )


__all__ = ["to_heterogeneous", "to_homogeneous"]
