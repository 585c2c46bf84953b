"""DGL's transforms that derive a graph from another's edges: ``reverse``, ``add_reverse_edges``,
``to_bidirected``, ``to_simple``, ``line_graph``, ``khop_adj`` / ``khop_graph``,
``metapath_reachable_graph``, and the graph measures ``laplacian_lambda_max`` and ``norm_by_dst``; DGL
2.1's edge orders and feature rules.

A new graph has the argument's ``idtype`` and, unless a function says
otherwise, its node types in order. "Copied" features are the argument's
tensors held by the new graph (a later write to either graph stays its own).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg
import torch

from .batching import unbatch
from .core import Graph
from .subgraph import ID

__all__ = [
    "add_reverse_edges",
    "khop_adj",
    "khop_graph",
    "laplacian_lambda_max",
    "line_graph",
    "metapath_reachable_graph",
    "norm_by_dst",
    "reverse",
    "to_bidirected",
    "to_simple",
    "to_simple_graph",
]


def _relations(g: Graph) -> list[tuple[tuple, torch.Tensor, torch.Tensor]]:
    """Every relation's (canonical key, local src, local dst), int64 in edge-id order."""
    out = []
    for key in g.canonical_etypes:
        src, dst = g.find_edges(key)
        out.append((key, src.long(), dst.long()))
    return out


def _new(g: Graph, relations, ntypes=None, counts=None) -> Graph:
    """A graph of ``relations`` ``[(key, src, dst)]`` over ``g``'s node types (or ``ntypes`` of ``counts``
    nodes), in ``g``'s idtype."""
    ntypes = g.ntypes if ntypes is None else ntypes
    counts = [g.num_nodes(t) for t in ntypes] if counts is None else counts
    out = Graph._build(ntypes, counts, relations, g.device)
    out.idtype = g.idtype
    return out


def _copy_nodes(g: Graph, out: Graph, ntypes=None) -> None:
    """``g``'s node features of each of ``ntypes`` (all of ``out``'s by default) into ``out``."""
    for name in out.ntypes if ntypes is None else ntypes:
        t, new_t = g.ntype_id(name), out.ntype_id(name)
        for key in g._nstore.typed_keys(t):
            out._nstore.set_typed(key, new_t, g._nstore.get_typed(key, t))


def _copy_edges(g: Graph, out: Graph, rows: list) -> None:
    """Relation ``r``'s edge features of ``g`` into relation ``r`` of ``out``, the rows ``rows[r]`` (None: as
    they are)."""
    for r, ids in enumerate(rows):
        for key in g._estore.typed_keys(r):
            values = g._estore.get_typed(key, r)
            out._estore.set_typed(key, r, values if ids is None else values.index_select(0, ids))


def _refuse_block(g: Graph, call: str) -> None:
    if getattr(g, "is_block", False):
        raise TypeError(f"{call}: a block is not transformed (nor is DGL's); transform the graph it was made from")


def _one_type_relations(g: Graph, call: str) -> None:
    for key in g.canonical_etypes:
        if key[0] != key[2]:
            raise ValueError(
                f"{call}: relation {key} joins two node types, where reverse edges are not "
                "defined (DGL's error too); pass ignore_bipartite=True to keep it as it is"
            )


def reverse(
    g: Graph, copy_ndata: bool = True, copy_edata: bool = False, *, share_ndata=None, share_edata=None
) -> Graph:
    """DGL's ``reverse``: every relation ``(s, r, d)`` becomes ``(d, r, s)`` with each edge turned round,
    edge ids kept; node (edge) features copied when ``copy_ndata`` (``copy_edata``). ``share_*``: DGL's old
    names of ``copy_*``."""
    _refuse_block(g, "reverse")
    copy_ndata = copy_ndata if share_ndata is None else share_ndata
    copy_edata = copy_edata if share_edata is None else share_edata
    out = _new(g, [((d, r, s), dst, src) for (s, r, d), src, dst in _relations(g)])
    if copy_ndata:
        _copy_nodes(g, out)
    if copy_edata:
        _copy_edges(g, out, [None] * len(g.canonical_etypes))
    return out


def add_reverse_edges(
    g: Graph,
    readonly=None,
    copy_ndata: bool = True,
    copy_edata: bool = False,
    ignore_bipartite: bool = False,
    exclude_self: bool = True,
) -> Graph:
    """DGL's ``add_reverse_edges``: each relation between one node type gets, after its edges, their reverses
    in the same order (none for a self loop when ``exclude_self``); a relation between two types is refused
    (ValueError) or, with ``ignore_bipartite``, kept as it is. With ``copy_edata`` a reverse edge has its
    edge's features. ``readonly``: DGL's, ignored."""
    if not ignore_bipartite:
        _one_type_relations(g, "add_reverse_edges")
    relations, rows = [], []
    for key, src, dst in _relations(g):
        eids = torch.arange(src.numel(), device=g.device)
        if key[0] != key[2]:
            relations.append((key, src, dst))
            rows.append(eids)
            continue
        back = src != dst if exclude_self else torch.ones_like(src, dtype=torch.bool)
        relations.append((key, torch.cat([src, dst[back]]), torch.cat([dst, src[back]])))
        rows.append(torch.cat([eids, eids[back]]))
    out = _new(g, relations)
    if copy_ndata:
        _copy_nodes(g, out)
    if copy_edata:
        _copy_edges(g, out, rows)
        for r, ids in enumerate(rows):
            out._estore.set_typed(ID, r, g.ids(ids))
    return out


def to_simple(
    g: Graph,
    return_counts="count",
    writeback_mapping: bool = False,
    copy_ndata: bool = True,
    copy_edata: bool = False,
    aggregator: str = "arbitrary",
):
    """DGL's ``to_simple``: each relation's parallel edges merged into one, the edges sorted by (source,
    destination).

    ``return_counts`` names the edge feature holding how many edges each one
    merged (None: none). With ``copy_edata`` a merged edge's features are
    those of the first edge it merged (``aggregator='arbitrary'``), or their
    ``'sum'`` / ``'mean'``. With ``writeback_mapping`` also returns, for every
    edge of ``g``, the id of its merged edge (a dict by canonical relation when
    there are several)."""
    _refuse_block(g, "to_simple")
    if aggregator not in ("arbitrary", "sum", "mean"):
        raise ValueError(f"to_simple: aggregator must be 'arbitrary', 'sum' or 'mean', got {aggregator!r}")
    relations, maps, counts = [], [], []
    for key, src, dst in _relations(g):
        width = g.num_nodes(key[2])
        pairs, inverse, count = torch.unique(src * width + dst, return_inverse=True, return_counts=True)
        relations.append((key, pairs.div(width, rounding_mode="floor") if width else pairs, pairs % max(width, 1)))
        maps.append(inverse)
        counts.append(count)
    out = _new(g, relations)
    if copy_ndata:
        _copy_nodes(g, out)
    if copy_edata:
        _merge_edge_features(g, out, maps, counts, aggregator)
    if return_counts is not None:
        for r, count in enumerate(counts):
            out._estore.set_typed(return_counts, r, g.ids(count))
    if not writeback_mapping:
        return out
    maps = [g.ids(m) for m in maps]
    return out, (maps[0] if len(maps) == 1 else dict(zip(g.canonical_etypes, maps)))


def _merge_edge_features(g: Graph, out: Graph, maps, counts, aggregator: str) -> None:
    """Each merged edge's features (DGL's: ``'arbitrary'`` takes its first edge's, with that edge's id as
    ``_ID``)."""
    for r, (merged, count) in enumerate(zip(maps, counts)):
        first = torch.full((count.numel(),), merged.numel(), dtype=torch.int64, device=g.device)
        first.scatter_reduce_(0, merged, torch.arange(merged.numel(), device=g.device), "amin")
        if aggregator == "arbitrary":
            out._estore.set_typed(ID, r, g.ids(first))
        for key in g._estore.typed_keys(r):
            values = g._estore.get_typed(key, r)
            if aggregator == "arbitrary":
                out._estore.set_typed(key, r, values.index_select(0, first))
                continue
            total = values.new_zeros((count.numel(),) + tuple(values.shape[1:])).index_add_(0, merged, values)
            if aggregator == "mean":
                total = total / count.to(values.dtype).reshape((-1,) + (1,) * (values.dim() - 1))
            out._estore.set_typed(key, r, total)


def to_simple_graph(g: Graph) -> Graph:
    """DGL's deprecated ``to_simple_graph``: :func:`to_simple` with its defaults."""
    return to_simple(g)


def to_bidirected(g: Graph, copy_ndata: bool = False, readonly=None) -> Graph:
    """DGL's ``to_bidirected``: :func:`add_reverse_edges` then :func:`to_simple` (no counts, no edge
    features); every relation must join one node type. ``readonly``: DGL's, ignored."""
    _one_type_relations(g, "to_bidirected")
    both = add_reverse_edges(g, copy_ndata=copy_ndata, copy_edata=False)
    return to_simple(both, return_counts=None, copy_ndata=copy_ndata, copy_edata=False)


def line_graph(g: Graph, backtracking: bool = True, shared: bool = False) -> Graph:
    """DGL's ``line_graph`` of a homogeneous graph: a node per edge, and an edge ``e1 -> e2`` where ``e1``
    ends at the node ``e2`` starts from (``e1 != e2``; not back to ``e1``'s source unless
    ``backtracking``), ordered by ``e1`` then ``e2``. ``shared``: node features are ``g``'s edge features."""
    if not g.is_homogeneous:
        raise ValueError("line_graph: only a homogeneous graph has a line graph here (and in DGL)")
    ((key, src, dst),) = _relations(g)
    by_src = torch.argsort(src, stable=True)
    starts = torch.searchsorted(src[by_src], dst)
    ends = torch.searchsorted(src[by_src], dst, right=True)
    lengths = ends - starts
    first = torch.repeat_interleave(torch.arange(src.numel(), device=g.device), lengths)
    offsets = torch.arange(int(lengths.sum()), device=g.device) - torch.repeat_interleave(
        torch.cumsum(lengths, 0) - lengths, lengths
    )
    second = by_src[torch.repeat_interleave(starts, lengths) + offsets]
    keep = (first != second) & (backtracking | (dst[second] != src[first]))
    out = _new(g, [(key, first[keep], second[keep])], counts=[src.numel()])
    if shared:
        for name in g._estore.typed_keys(0):
            out._nstore.set_typed(name, 0, g._estore.get_typed(name, 0))
    return out


def _adjacency_power(g: Graph, k: int, call: str) -> sp.csr_matrix:
    if not g.is_homogeneous:
        raise ValueError(f"{call}: only a homogeneous graph is supported (as in DGL)")
    return (g.adj_external(scipy_fmt="csr") ** k).tocsr()


def khop_adj(g: Graph, k: int) -> torch.Tensor:
    """DGL's ``khop_adj``: the dense ``[N, N]`` float32 matrix ``A ** k`` where ``A[u, v]`` counts the edges
    ``u -> v``."""
    return torch.as_tensor(np.asarray(_adjacency_power(g, k, "khop_adj").todense(), dtype=np.float32))


def khop_graph(g: Graph, k: int, copy_ndata: bool = True) -> Graph:
    """DGL's ``khop_graph``: an edge ``u -> v`` for each walk of ``k`` edges from ``u`` to ``v``, sorted by
    (u, v); node features copied when ``copy_ndata``."""
    adj = _adjacency_power(g, k, "khop_graph").tocoo()
    adj.sum_duplicates()
    counts = adj.data.astype(np.int64)
    src, dst = (torch.from_numpy(np.repeat(ends.astype(np.int64), counts)) for ends in (adj.row, adj.col))
    out = _new(g, [(g.canonical_etypes[0], src, dst)])
    if copy_ndata:
        _copy_nodes(g, out)
    return out


def metapath_reachable_graph(g: Graph, metapath) -> Graph:
    """DGL's ``metapath_reachable_graph``: relation ``(s, '_E', d)`` with an edge ``u -> v`` (sorted by
    (u, v)) where a walk from ``u`` along relations ``metapath`` reaches ``v``; node types ``s`` and ``d``
    with their features copied."""
    adj = None
    for etype in metapath:
        step = g.adj_external(scipy_fmt="csr", etype=etype)
        adj = step if adj is None else adj @ step
    src, dst = (torch.from_numpy(ends.astype(np.int64)) for ends in (adj != 0).tocsr().nonzero())
    s, d = g.to_canonical_etype(metapath[0])[0], g.to_canonical_etype(metapath[-1])[2]
    ntypes = sorted({s, d})  # DGL's order of node types
    out = _new(g, [((s, "_E", d), src, dst)], ntypes, [g.num_nodes(t) for t in ntypes])
    _copy_nodes(g, out)
    return out


def laplacian_lambda_max(g: Graph) -> list[float]:
    """DGL's ``laplacian_lambda_max``: per graph of a batch, the largest eigenvalue of its symmetric
    normalised Laplacian ``I - D^-1/2 A D^-1/2`` (in-degrees, at least 1)."""
    out = []
    for part in unbatch(g):
        n = part.num_nodes()
        adj = part.adj_external(transpose=True, scipy_fmt="csr").astype(float)
        norm = sp.diags(part.in_degrees().numpy().clip(1) ** -0.5, dtype=float)
        laplacian = sp.eye(n) - norm @ adj @ norm
        out.append(scipy.sparse.linalg.eigs(laplacian, 1, which="LM", return_eigenvectors=False)[0].real)
    return out


def norm_by_dst(g: Graph, etype=None) -> torch.Tensor:
    """DGL's ``norm_by_dst``: for every edge (of relation ``etype``), 1 / the in-degree of its destination,
    float32."""
    dst = g.edges(etype=etype)[1]
    _, inverse, counts = torch.unique(dst, return_inverse=True, return_counts=True)
    return 1.0 / counts.index_select(0, inverse).to(torch.float32)
