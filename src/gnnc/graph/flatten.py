"""DGL's relation slices with wildcards (``g['user', :, 'game']``, ``g[:, :, :]``, an ambiguous name).

A slice matching one relation is that relation's view (``gnnc.graph.relation_view``). Matching several, DGL
flattens them into one new graph with one relation: its source nodes are every node of the relations'
source types (types in graph order, each type's nodes in id order), its destination nodes likewise (one node
type when the two sets of types are the same), its edges the relations' edges (relations in graph order,
each in edge-id order). Types are named by their sorted names joined with ``+``. Features are copies: a
feature every non-empty type (relation) holds with one dtype and row shape is concatenated, others are
dropped; ``_TYPE`` / ``_ID`` record each node's and edge's type id and id in the parent graph.
"""

from __future__ import annotations

import torch

from .combine import combine_features
from .core import Graph
from .relation_view import RelationGraph
from .type_names import combine_names

NTYPE = ETYPE = "_TYPE"  # DGL's reserved names (``dgl.base``)
NID = EID = "_ID"
_FULL = slice(None)
_SYNTAX = (
    "Invalid slice syntax. Use g['etype'] or g['srctype', 'etype', 'dsttype'] for one relation, and ':' "
    "for any type (g['srctype', :, 'dsttype'])"
)


def relation_slice(g, key):
    """``g[key]``: the view of the one relation ``key`` names, else the graph flattening the relations it
    matches; KeyError naming the relations when it matches none."""
    rels = matching_relations(g, key)
    if not rels:
        raise KeyError(f"unknown relation {key!r}; relations: {g.canonical_etypes}")
    return RelationGraph(g, rels[0]) if len(rels) == 1 else flatten_relations(g, rels)


def matching_relations(g, key) -> list[int]:
    """Ids of the relations a ``g[key]`` slice names (``key``: a name, or a triple of names and ``:``)."""
    if not isinstance(key, tuple):
        key = (_FULL, key, _FULL)
    if len(key) != 3:
        raise ValueError(_SYNTAX)
    for part in key:
        if isinstance(part, slice) and part != _FULL:
            raise ValueError(_SYNTAX)
    return [
        r
        for r, triple in enumerate(g.canonical_etypes)
        if all(part == _FULL or part == name for part, name in zip(key, triple))
    ]


def flatten_relations(g, rels: list[int]) -> Graph:
    """The graph flattening relations ``rels`` (ids, graph order) of ``g``, as DGL's."""
    if g.is_block:
        raise NotImplementedError(
            "a slice matching several relations of a block: gnnc flattens the relations of a "
            "graph, not of a block (DGL's result is a block with its own source and "
            "destination counts); slice one relation, or flatten the graph before to_block"
        )
    triples = [g.canonical_etypes[r] for r in rels]
    size = [g.num_nodes(t) for t in g.ntypes]
    src_types = sorted({g.ntype_id(s) for s, _, _ in triples})
    dst_types = sorted({g.ntype_id(d) for _, _, d in triples})
    sides = [src_types] if src_types == dst_types else [src_types, dst_types]
    ntypes = [combine_names(g.ntypes, types) for types in sides]
    key = (ntypes[0], combine_names(g.etypes, rels), ntypes[-1])
    src_at, dst_at = _offsets(size, src_types), _offsets(size, dst_types)
    ends = [g.find_edges(None, triple) for triple in triples]
    src = torch.cat([u.long() + src_at[g.ntype_id(s)] for (u, _), (s, _, _) in zip(ends, triples)])
    dst = torch.cat([v.long() + dst_at[g.ntype_id(d)] for (_, v), (_, _, d) in zip(ends, triples)])
    out = Graph._build(ntypes, [sum(size[t] for t in types) for types in sides], [(key, src, dst)], g.device)
    out.idtype = g.idtype
    for ntype, types in zip(ntypes, sides):
        data = out.nodes[ntype].data
        data.update(combine_features([(g.nodes[g.ntypes[t]].data, size[t]) for t in types]))
        data[NTYPE] = torch.cat([torch.full((size[t],), t, device=g.device) for t in types])
        data[NID] = torch.cat([torch.arange(size[t], device=g.device) for t in types])
    data = out.edges[key].data
    data.update(combine_features([(g.edges[triple].data, g.num_edges(triple)) for triple in triples]))
    data[ETYPE] = torch.cat(
        [torch.full((g.num_edges(triple),), r, dtype=g.idtype, device=g.device) for r, triple in zip(rels, triples)]
    )
    data[EID] = torch.cat([torch.arange(g.num_edges(triple), dtype=g.idtype, device=g.device) for triple in triples])
    return out


def _offsets(size: list[int], types: list[int]) -> dict[int, int]:
    """Where each of ``types``' nodes start when the types' nodes are laid end to end."""
    offsets, start = {}, 0
    for t in types:
        offsets[t] = start
        start += size[t]
    return offsets
