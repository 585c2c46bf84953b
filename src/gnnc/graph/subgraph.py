"""DGL's subgraph extraction and ``to_block``, with DGL 2.1's semantics.

Every function returns a new graph with the parent's node types and
relations (``edge_type_subgraph`` / ``node_type_subgraph``: the chosen ones)
and the parent's ``idtype``; features of the kept nodes and edges are
gathered into it (writes to either graph stay their own), except that the
type subgraphs share the parent's features of their types as DGL's do
(``gnnc.graph.shared_types``). ``store_ids``
records parent ids as ``_ID`` (DGL's ``NID`` / ``EID``, in ``idtype``):
always for edges, for nodes only where they were renumbered.

Ids are given per node type / relation as DGL takes them: an int, a
sequence, an array, an integer tensor or a boolean mask; a dict by type name
(by relation name or canonical triple for edges) on a graph with several. The
orders are DGL's:

- ``node_subgraph``: nodes in the order given; a relation's edges by source
  in that order, then by edge id (DGL's CSR slice).
- ``edge_subgraph``, and ``in_subgraph`` / ``out_subgraph`` with
  ``relabel_nodes``: a node type's nodes in order of first appearance over the
  kept edges, relation by relation, sources then destinations.
- ``in_subgraph`` / ``out_subgraph``: the in- (out-) edges of each given node
  in turn, by edge id.
- ``khop_*_subgraph``: the nodes within ``k`` hops, sorted, then
  ``node_subgraph``.
- ``to_block``: see :func:`to_block`.
"""

from __future__ import annotations

import numpy as np
import torch

from .block import Block
from .blocks import gathered_block
from .core import Graph
from .shared_types import SharedTypes
from .validate import as_ids, check_range

ID = "_ID"  # DGL's NID / EID


# ------------------------------------------------------------------ id arguments
def _ids(g: Graph, value, count: int, what: str, noun: str) -> torch.Tensor:
    """One type's ids (int, sequence, array, tensor or boolean mask over ``count``) as int64 on ``g``'s device."""
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    t = t.reshape(-1).to(g.device)
    ids = torch.nonzero(t).squeeze(1) if t.dtype == torch.bool else as_ids(t, what, noun)
    check_range(ids, count, what, noun)
    return ids


def _by_type(names: list, value, call: str, kind: str) -> dict:
    """A per-type argument as ``{type name: ids}``: the dict given, or the one type's."""
    if isinstance(value, dict):
        return value
    if len(names) != 1:
        raise ValueError(f"{call}: the graph has several {kind} types {names}; give a dict of ids by type")
    return {names[0]: value}


def _node_ids(g: Graph, nodes, call: str, distinct: bool = True) -> dict[int, torch.Tensor]:
    """``{node type index: ids}`` of a node argument; DGL takes distinct ids only, and so does gnnc."""
    out = {}
    for name, value in _by_type(g.index.ntypes, nodes, call, "node").items():
        t = g.ntype_id(name)
        ids = _ids(g, value, g.index.ntype_counts[t], f"{call} nodes[{name!r}]", "node")
        if distinct and torch.unique(ids).numel() != ids.numel():
            raise ValueError(f"{call}: nodes[{name!r}] holds a node more than once; give each node once")
        out[t] = ids
    return out


def _edge_ids(g: Graph, edges, call: str) -> dict[int, torch.Tensor]:
    out = {}
    for name, value in _by_type(g.canonical_etypes, edges, call, "edge").items():
        r = g.etype_id(name)
        out[r] = _ids(g, value, g.index.rel_counts[r], f"{call} edges[{name!r}]", "edge")
    return out


def _positions(ids: torch.Tensor, count: int) -> torch.Tensor:
    """Table over a type's ``count`` nodes: each node's position in ``ids``, -1 for the others."""
    table = torch.full((count,), -1, dtype=torch.int64, device=ids.device)
    table[ids] = torch.arange(ids.numel(), device=ids.device)
    return table


def _relation(g: Graph, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Relation ``r``'s (src, dst), local int64 ids in edge-id order."""
    src, dst = g.find_edges(g.canonical_etypes[r])
    return src.long(), dst.long()


# --------------------------------------------------------------------- building
def gathered_graph(g: Graph, nodes: list, edges: list, relations: list, store_ids: bool, cls=Graph, **block):
    """The graph of ``g``'s types whose node type ``t`` holds parent nodes ``nodes[t]`` (None: all of them, not
    renumbered) and relation ``r`` parent edges ``edges[r]`` as ``relations[r]`` (new local src, dst); their
    features gathered, ids stored as ``_ID`` when ``store_ids``. ``cls`` / ``block``: a :class:`Block`'s."""
    counts = [g.index.ntype_counts[t] if ids is None else ids.numel() for t, ids in enumerate(nodes)]
    keyed = [(key, s, d) for key, (s, d) in zip(g.canonical_etypes, relations)]
    out = Graph._build(g.index.ntypes, counts, keyed, g.device)
    if cls is not Graph:
        out = cls(out.index, **block)
    out.idtype = g.idtype
    for store, new, chosen in ((g._nstore, out._nstore, nodes), (g._estore, out._estore, edges)):
        for t, ids in enumerate(chosen):
            for key in store.typed_keys(t):
                rows = store.get_typed(key, t)
                new.set_typed(key, t, rows if ids is None else rows.index_select(0, ids))
            if store_ids and ids is not None:
                new.set_typed(ID, t, ids.to(g.idtype))
    return out


def first_seen(arrays: list[torch.Tensor], device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The distinct values of ``arrays`` in order of first appearance, and each array renumbered to them."""
    values = torch.cat(arrays) if arrays else torch.zeros(0, dtype=torch.int64, device=device)
    uniq, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((uniq.numel(),), values.numel(), dtype=torch.int64, device=device)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel(), device=device), "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=device)
    return uniq[order], list(rank[inverse].split([a.numel() for a in arrays]))


def _from_edges(g: Graph, edges: list, relabel_nodes: bool, store_ids: bool) -> Graph:
    """The subgraph of parent edges ``edges[r]`` (every relation, in order), nodes renumbered by first
    appearance when ``relabel_nodes`` (DGL's edge subgraph), else all kept."""
    ends = [tuple(x.index_select(0, e) for x in _relation(g, r)) for r, e in enumerate(edges)]
    if not relabel_nodes:
        return gathered_graph(g, [None] * len(g.index.ntypes), edges, ends, store_ids)
    by_type = [[] for _ in g.index.ntypes]  # (relation, end) of every array of each node type, in DGL's order
    for r, (st, _, dt) in enumerate(g.canonical_etypes):
        by_type[g.ntype_id(st)].append((r, 0))
        by_type[g.ntype_id(dt)].append((r, 1))
    nodes, renamed = [], [list(pair) for pair in ends]
    for arrays in by_type:
        kept, parts = first_seen([ends[r][end] for r, end in arrays], g.device)
        nodes.append(kept)
        for (r, end), part in zip(arrays, parts):
            renamed[r][end] = part
    return gathered_graph(g, nodes, edges, [tuple(pair) for pair in renamed], store_ids)


def _empty(g: Graph) -> torch.Tensor:
    return torch.zeros(0, dtype=torch.int64, device=g.device)


def _refuse_block(g, call: str) -> None:
    if getattr(g, "is_block", False):  # a relation slice is not a block
        raise TypeError(
            f"{call}: a block's subgraph is not taken (nor is DGL's); take it from the graph the block was made from"
        )


def _output(sub: Graph, output_device):
    return sub if output_device is None else sub.to(output_device)


# -------------------------------------------------------------------- functions
def node_subgraph(g: Graph, nodes, *, relabel_nodes: bool = True, store_ids: bool = True, output_device=None) -> Graph:
    """DGL's ``node_subgraph``: the edges of every relation whose two ends are among ``nodes``; with
    ``relabel_nodes`` only those nodes, in the order given (``ndata['_ID']`` their parent ids)."""
    _refuse_block(g, "node_subgraph")
    g = _as_graph(g)
    chosen = _node_ids(g, nodes, "node_subgraph")
    sets = [chosen.get(t, _empty(g)) for t in range(len(g.index.ntypes))]
    edges, relations = [], []
    for r, (st, _, dt) in enumerate(g.canonical_etypes):
        src, dst = _relation(g, r)
        s_t, d_t = g.ntype_id(st), g.ntype_id(dt)
        pos_src = _positions(sets[s_t], g.index.ntype_counts[s_t]).index_select(0, src)
        pos_dst = _positions(sets[d_t], g.index.ntype_counts[d_t]).index_select(0, dst)
        eids = torch.nonzero((pos_src >= 0) & (pos_dst >= 0)).squeeze(1)
        eids = eids.index_select(0, torch.argsort(pos_src.index_select(0, eids), stable=True))
        edges.append(eids)
        ends = (pos_src, pos_dst) if relabel_nodes else (src, dst)
        relations.append(tuple(x.index_select(0, eids) for x in ends))
    kept = sets if relabel_nodes else [None] * len(sets)
    return _output(gathered_graph(g, kept, edges, relations, store_ids), output_device)


def edge_subgraph(g: Graph, edges, *, relabel_nodes: bool = True, store_ids: bool = True, output_device=None) -> Graph:
    """DGL's ``edge_subgraph``: the given edges of each relation (none of a relation not named), in the order
    given; with ``relabel_nodes`` only their end nodes (see the module for the order)."""
    if relabel_nodes:
        _refuse_block(g, "edge_subgraph")
    g = _as_graph(g)
    chosen = _edge_ids(g, edges, "edge_subgraph")
    edges = [chosen.get(r, _empty(g)) for r in range(len(g.canonical_etypes))]
    return _output(_from_edges(g, edges, relabel_nodes, store_ids), output_device)


def in_subgraph(g: Graph, nodes, *, relabel_nodes: bool = False, store_ids: bool = True, output_device=None) -> Graph:
    """DGL's ``in_subgraph``: every in-edge of ``nodes``, of every relation; all the parent's nodes unless
    ``relabel_nodes`` (then the kept edges' ends)."""
    return _output(_edges_at(g, nodes, 1, relabel_nodes, store_ids, "in_subgraph"), output_device)


def out_subgraph(g: Graph, nodes, *, relabel_nodes: bool = False, store_ids: bool = True, output_device=None) -> Graph:
    """DGL's ``out_subgraph``: every out-edge of ``nodes``, as :func:`in_subgraph`."""
    return _output(_edges_at(g, nodes, 0, relabel_nodes, store_ids, "out_subgraph"), output_device)


def _edges_at(g: Graph, nodes, end: int, relabel_nodes: bool, store_ids: bool, call: str) -> Graph:
    _refuse_block(g, call)
    g = _as_graph(g)
    chosen = _node_ids(g, nodes, call)
    edges = []
    for r, key in enumerate(g.canonical_etypes):
        t = g.ntype_id(key[2 * end])
        if t not in chosen:
            edges.append(_empty(g))
            continue
        pos = _positions(chosen[t], g.index.ntype_counts[t]).index_select(0, _relation(g, r)[end])
        eids = torch.nonzero(pos >= 0).squeeze(1)
        edges.append(eids.index_select(0, torch.argsort(pos.index_select(0, eids), stable=True)))
    return _from_edges(g, edges, relabel_nodes, store_ids)


def khop_in_subgraph(
    g: Graph, nodes, k: int, *, relabel_nodes: bool = True, store_ids: bool = True, output_device=None
):
    """DGL's ``khop_in_subgraph``: the node subgraph of ``nodes`` and every node with a path of at most ``k``
    edges into them (sorted by id). With ``relabel_nodes``, returns (subgraph, the seeds' new ids), the ids in
    the form ``nodes`` took (a dict for a dict)."""
    return _khop(g, nodes, k, 1, relabel_nodes, store_ids, output_device, "khop_in_subgraph")


def khop_out_subgraph(
    g: Graph, nodes, k: int, *, relabel_nodes: bool = True, store_ids: bool = True, output_device=None
):
    """DGL's ``khop_out_subgraph``: as :func:`khop_in_subgraph` along out-edges."""
    return _khop(g, nodes, k, 0, relabel_nodes, store_ids, output_device, "khop_out_subgraph")


def _khop(g: Graph, nodes, k: int, toward: int, relabel_nodes, store_ids, output_device, call: str):
    _refuse_block(g, call)
    g = _as_graph(g)
    seeds = _node_ids(g, nodes, call, distinct=False)
    reached = {t: [ids] for t, ids in seeds.items()}
    frontier = seeds
    for _ in range(k):
        found = {}
        for r, key in enumerate(g.canonical_etypes):
            t_from, t_to = g.ntype_id(key[2 * toward]), g.ntype_id(key[2 - 2 * toward])
            if t_from not in frontier:
                continue
            ends = _relation(g, r)
            hit = torch.isin(ends[toward], frontier[t_from])
            found.setdefault(t_to, []).append(ends[1 - toward][hit])
        frontier = {t: torch.unique(torch.cat(parts)) for t, parts in found.items()}
        for t, ids in frontier.items():
            reached.setdefault(t, []).append(ids)
    inverse, kept = {}, {}
    for t, parts in reached.items():
        kept[g.index.ntypes[t]], inverse[t] = torch.unique(torch.cat(parts), return_inverse=True)
    sub = _output(node_subgraph(g, kept, relabel_nodes=relabel_nodes, store_ids=store_ids), output_device)
    if not relabel_nodes:
        return sub
    moved = {t: inverse[t][: ids.numel()].to(sub.device) for t, ids in seeds.items()}
    if isinstance(nodes, dict):
        return sub, {g.index.ntypes[t]: ids for t, ids in moved.items()}
    return sub, next(iter(moved.values()))


def edge_type_subgraph(g: Graph, etypes, output_device=None) -> Graph:
    """DGL's ``edge_type_subgraph``: relations ``etypes`` (names or canonical triples) with every edge, and
    the node types they join (in the parent's order) with every node; features as the parent's."""
    g = _as_graph(g)
    rels = sorted({g.etype_id(e) for e in etypes})
    keys = [g.canonical_etypes[r] for r in rels]
    types = [t for t in g.index.ntypes if any(t in (st, dt) for st, _, dt in keys)]
    return _output(_of_relations(g, rels, types), output_device)


def _of_relations(g: Graph, rels: list[int], types: list[str]) -> Graph:
    """The graph of relations ``rels`` of ``g`` and node types ``types`` (in that order), all their nodes and
    edges, sharing ``g``'s features of them (``gnnc.graph.shared_types``)."""
    keys = [g.canonical_etypes[r] for r in rels]
    relations = [(key, *_relation(g, r)) for r, key in zip(rels, keys)]
    out = Graph._build(types, [g.num_nodes(t) for t in types], relations, g.device)
    out.idtype = g.idtype
    nodes = [g.ntype_id(name) for name in out.ntypes]
    edges = [g.etype_id(key) for key in out.canonical_etypes]
    out._nstore = SharedTypes(g._nstore, nodes, out._nstore.names)
    out._estore = SharedTypes(g._estore, edges, out._estore.names)
    return out


def node_type_subgraph(g: Graph, ntypes, output_device=None) -> Graph:
    """DGL's ``node_type_subgraph``: :func:`edge_type_subgraph` of the relations joining two of ``ntypes``
    (ValueError when none does)."""
    g = _as_graph(g)
    wanted = {g.index.ntypes[g.ntype_id(t)] for t in ntypes}
    keys = [key for key in g.canonical_etypes if key[0] in wanted and key[2] in wanted]
    if not keys:
        raise ValueError(f"node_type_subgraph: no relation joins node types {sorted(wanted)}")
    return edge_type_subgraph(g, keys, output_device)


def _as_graph(g) -> Graph:
    """A graph, or a relation slice ``g[etype]`` as the graph of its relation (DGL's slices are graphs)."""
    if isinstance(g, Graph):
        return g
    return _of_relations(g.parent, [g.rel], g.ntypes)


# --------------------------------------------------------------------- to_block
def to_block(g: Graph, dst_nodes=None, include_dst_in_src: bool = True, src_nodes=None) -> Block:
    """DGL's ``to_block``: the block for message passing into ``dst_nodes`` (by default every node with an
    in-edge, sorted by id, per type).

    Every edge of a relation whose destination type has destination nodes is
    kept, in edge-id order; each must end at a destination node (ValueError
    otherwise). The source nodes of a type are its destination nodes, in the
    order given, then the other sources of the kept edges in order of first
    appearance, relation by relation; ``src_nodes`` gives them instead (it must
    start with the destination nodes and hold every source). ``srcdata`` /
    ``dstdata`` / ``edata`` hold the parent's features of those nodes and edges
    with their parent ids as ``_ID`` (the destination side the destination rows of the source side's).
    With ``include_dst_in_src=False`` the source nodes are only the kept edges' sources (``src_nodes`` need
    not start with the destination nodes), and the block's sides are separate node sets
    (``gnnc.graph.blocks.gathered_block``).
    """
    _refuse_block(g, "to_block")
    g = _as_graph(g)
    n_types = len(g.index.ntypes)
    if dst_nodes is None:
        found = {}
        for r, (_, _, dt) in enumerate(g.canonical_etypes):
            found.setdefault(dt, []).append(_relation(g, r)[1])
        dst_nodes = {t: torch.unique(torch.cat(parts)) for t, parts in found.items()}
    dst = _node_ids(g, dst_nodes, "to_block dst_nodes")
    dst = [dst.get(t, _empty(g)) for t in range(n_types)]
    edges, ends = [], []
    for r, key in enumerate(g.canonical_etypes):
        src, d = _relation(g, r)
        if dst[g.ntype_id(key[2])].numel() == 0:
            src, d = src[:0], d[:0]
        edges.append(torch.arange(src.numel(), device=g.device))
        ends.append((src, d))
    given = None if src_nodes is None else _node_ids(g, src_nodes, "to_block src_nodes")
    sources = []
    for t in range(n_types):
        from_edges = [src for (src, _), key in zip(ends, g.canonical_etypes) if g.ntype_id(key[0]) == t]
        if given is None:
            sources.append(first_seen([dst[t]] * include_dst_in_src + from_edges, g.device)[0])
            continue
        ids = given.get(t, _empty(g))
        if include_dst_in_src and not torch.equal(ids[: dst[t].numel()], dst[t]):
            raise ValueError(
                f"to_block: src_nodes[{g.index.ntypes[t]!r}] must start with that type's destination nodes, "
                "in their order"
            )
        sources.append(ids)
    relations = []
    for (src, d), key in zip(ends, g.canonical_etypes):
        s_t, d_t = g.ntype_id(key[0]), g.ntype_id(key[2])
        relations.append(
            (
                _local(sources[s_t], src, g.num_nodes(key[0]), key, "source", "src_nodes"),
                _local(dst[d_t], d, g.num_nodes(key[2]), key, "destination", "dst_nodes"),
            )
        )
    if not include_dst_in_src:
        return gathered_block(g, sources, dst, edges, relations)
    offsets = torch.tensor(g.index.ntype_offsets[:n_types], device=g.device)
    block = {
        "src_ids": torch.cat([ids + offsets[t] for t, ids in enumerate(sources)]),
        "num_dst_per_type": [ids.numel() for ids in dst],
        "parent_eids": torch.cat([e + g.index.rel_offsets[r] for r, e in enumerate(edges)]),
    }
    out = gathered_graph(g, sources, edges, relations, True, Block, **block)
    out._nstore.share_destination_rows()
    return out


def _local(nodes: torch.Tensor, ends: torch.Tensor, count: int, key, side: str, argument: str) -> torch.Tensor:
    """Positions of ``ends`` among ``nodes``; ValueError naming an end that is not among them."""
    pos = _positions(nodes, count).index_select(0, ends)
    if bool((pos < 0).any()):
        missing = int(ends[torch.nonzero(pos < 0)[0]])
        raise ValueError(
            f"to_block: relation {key} has an edge whose {side} node {missing} is not among "
            f"{argument}; {argument} must hold every {side} of the relation's edges"
        )
    return pos
