"""Blocks whose two sides are separate node sets, with DGL 2.1's semantics.

- :func:`create_block`: DGL's ``create_block``: a block from its relations' edges, source ids and
  destination ids each counted from 0 within their node type.
- :func:`gathered_block`: the block of parent nodes and edges ``to_block(include_dst_in_src=False)``
  makes (``gnnc.graph.subgraph.to_block``).
- :func:`block_to_graph`: DGL's ``block_to_graph``: the block as a uni-bipartite graph, node type ``t``
  of the source side named ``t_src`` and of the destination side ``t_dst``.

Their layout is ``gnnc.graph.block``'s for separate sides.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .block import Block
from .core import DEFAULT_ETYPE, DEFAULT_NTYPE, Graph, heterograph
from .edge_data import check_idtype, relation_edges
from .validate import canonical_key, check_range

__all__ = ["block_to_graph", "create_block"]

ID = "_ID"  # DGL's NID / EID


def create_block(data_dict, num_src_nodes=None, num_dst_nodes=None, idtype=None, device=None) -> Block:
    """DGL's ``create_block``: ``data_dict`` maps ``(src_type, rel, dst_type)`` to its edges in any of DGL's
    forms (``gnnc.graph.edge_data``), or is one relation's edges (types ``_N``, relation ``_E``; the counts are
    then ints). ``num_src_nodes`` / ``num_dst_nodes`` (both or neither) map a type to its source / destination
    node count; without them each is its relations' largest id + 1. As DGL's, the source types are the
    relations' source ends (or the given count's keys), the destination types their destination ends, types
    and relations sorted. ValueError names a count smaller than an id, or a relation whose id lists differ
    in length."""
    if not isinstance(data_dict, Mapping):
        data_dict = {(DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE): data_dict}
        if num_src_nodes is not None or num_dst_nodes is not None:
            num_src_nodes, num_dst_nodes = {DEFAULT_NTYPE: num_src_nodes}, {DEFAULT_NTYPE: num_dst_nodes}
    if (num_src_nodes is None) != (num_dst_nodes is None):
        raise ValueError("create_block: give both num_src_nodes and num_dst_nodes, or neither")
    infer = num_src_nodes is None
    counts = ({}, {}) if infer else (dict(num_src_nodes), dict(num_dst_nodes))
    relations, types = [], set()
    for key, data in data_dict.items():
        key = canonical_key(key)
        src, dst, relation_idtype = relation_edges(data, f"create_block relation {key}", idtype)
        if src.numel() != dst.numel():
            raise ValueError(
                f"create_block: relation {key} has {src.numel()} source ids but {dst.numel()} destination ids"
            )
        types.add(relation_idtype)
        for side, (ntype, ids, what) in enumerate(((key[0], src, "source"), (key[2], dst, "destination"))):
            if infer:
                counts[side][ntype] = max(counts[side].get(ntype, 0), int(ids.max()) + 1 if ids.numel() else 0)
            elif ntype not in counts[side]:
                raise KeyError(
                    f"create_block: relation {key} uses {what} type {ntype!r}, which is not in "
                    f"num_{'src' if side == 0 else 'dst'}_nodes"
                )
            check_range(ids, int(counts[side][ntype]), f"create_block relation {key} {what} ({ntype!r})")
        relations.append((key, src, dst))
    if len(types) > 1:
        raise ValueError(f"create_block: relations must have ids of one type, got {sorted(map(str, types))}")
    relations.sort(key=lambda relation: relation[0])
    srctypes, dsttypes = sorted(counts[0]), sorted(counts[1])
    ntypes = sorted(set(srctypes) | set(dsttypes))
    num_src = [int(counts[0].get(t, 0)) for t in ntypes]
    num_dst = [int(counts[1].get(t, 0)) for t in ntypes]
    if device is None:
        device = next((s.device for _, s, _ in relations), torch.device("cpu"))
    index = Graph._build(ntypes, [max(s, d) for s, d in zip(num_src, num_dst)], relations, device).index
    sides = None if srctypes == dsttypes == ntypes else (srctypes, dsttypes)
    out = Block(
        index,
        torch.arange(sum(num_src), device=device),
        num_dst,
        torch.arange(index.num_edges, device=device),
        num_src_per_type=num_src,
        side_types=sides,
    )
    out.idtype = types.pop() if types else check_idtype(idtype or torch.int64)
    return out


def gathered_block(g: Graph, sources: list, dst: list, edges: list, relations: list) -> Block:
    """The block of ``g``'s types whose source side of type ``t`` is parent nodes ``sources[t]``, destination
    side ``dst[t]``, and relation ``r`` parent edges ``edges[r]`` as ``relations[r]`` (block-local src, dst):
    each side and the edges with their parent's features and parent ids as ``_ID``."""
    num_src, num_dst = [s.numel() for s in sources], [d.numel() for d in dst]
    keyed = [(key, s, d) for key, (s, d) in zip(g.canonical_etypes, relations)]
    index = Graph._build(g.ntypes, [max(s, d) for s, d in zip(num_src, num_dst)], keyed, g.device).index
    offsets = g.index.ntype_offsets
    out = Block(
        index,
        torch.cat([ids + offsets[t] for t, ids in enumerate(sources)]),
        num_dst,
        torch.cat([e + g.index.rel_offsets[r] for r, e in enumerate(edges)]),
        num_src_per_type=num_src,
    )
    out.idtype = g.idtype
    for store, new, chosen in (
        (g._nstore, out._nstore, sources),
        (g._nstore, out._nstore.dst, dst),
        (g._estore, out._estore, edges),
    ):
        for t, ids in enumerate(chosen):
            for key in store.typed_keys(t):
                new.set_typed(key, t, store.get_typed(key, t).index_select(0, ids))
            new.set_typed(ID, t, ids.to(g.idtype))
    return out


def block_to_graph(block: Block) -> Graph:
    """DGL's ``block_to_graph``: a graph of node types ``t_src`` (``block.srctypes``) and ``t_dst``
    (``block.dsttypes``), relation ``(s, rel, d)`` as ``(s_src, rel, d_dst)``, holding the block's feature
    tensors themselves (each side's and the edges')."""
    if not getattr(block, "is_block", False):
        raise TypeError(f"block_to_graph expects a block, got {type(block).__name__}")
    counts = {f"{t}_src": block.num_nodes(f"SRC/{t}") for t in block.srctypes}
    counts.update({f"{t}_dst": block.num_dst_nodes(t) for t in block.dsttypes})
    keys = {key: (f"{key[0]}_src", key[1], f"{key[2]}_dst") for key in block.canonical_etypes}
    out = heterograph(
        {new: block.find_edges(key) for key, new in keys.items()}, counts, block.device, idtype=block.idtype
    )
    for side, types in (("src", block.srctypes), ("dst", block.dsttypes)):
        for t in types:
            out.nodes[f"{t}_{side}"].data.update(_side_features(block, side, t))
    if len(keys) == 1:  # stored whole: edata gives each tensor as set
        out.edata.update(block.edata)
    else:
        for key, new in keys.items():
            out.edges[new].data.update(block.edges[key].data)
    return out


def _side_features(block: Block, side: str, ntype: str):
    """The features of ``side`` of node type ``ntype``, each the tensor stored (a one-type block's are stored
    whole: ``srcdata`` / ``dstdata`` give them as set)."""
    if len(block.index.ntypes) == 1:
        return block.srcdata if side == "src" else block.dstdata
    return (block.srcnodes if side == "src" else block.dstnodes)[ntype].data
