"""DGL's structure queries of one relation: node and edge membership, neighbours, adjacency and incidence
matrices (``Graph.has_nodes``, ``has_edges_between``, ``predecessors``, ``successors``, ``adj_external``,
``inc``, ``adj``, ``adj_tensors``). Ids come back in the graph's ``idtype``; a scalar argument gives a
scalar answer, as in DGL."""

from __future__ import annotations

import numbers

import torch

from .sparse_matrix import SparseMatrix
from .validate import as_ids, check_range


def _ids(g, ids, what: str) -> tuple[torch.Tensor, bool]:
    scalar = isinstance(ids, numbers.Integral)
    return as_ids(torch.as_tensor(ids, device=g.device).reshape(-1), what), scalar


def has_nodes(g, vid, ntype=None):
    """Whether each of ``vid`` is a node of ``ntype``."""
    ids, scalar = _ids(g, vid, "has_nodes(vid)")
    found = (ids >= 0) & (ids < g.num_nodes(g.ntypes[g.ntype_id(ntype)]))
    return bool(found[0]) if scalar else found


def has_edges_between(g, u, v, etype=None):
    """Whether an edge of relation ``etype`` joins each ``u`` to the matching ``v``."""
    key = g.canonical_etypes[g.relation_of_call(etype, "has_edges_between")]
    us, scalar = _ids(g, u, "has_edges_between(u)")
    vs, _ = _ids(g, v, "has_edges_between(v)")
    if us.numel() != vs.numel():
        raise ValueError(f"has_edges_between: {us.numel()} source ids but {vs.numel()} destination ids")
    check_range(us, g.num_nodes(key[0]), "has_edges_between(u)")
    check_range(vs, g.num_nodes(key[2]), "has_edges_between(v)")
    src, dst = (t.long() for t in g.find_edges(key))
    width = max(g.num_nodes(key[2]), 1)
    found = torch.isin(us * width + vs, src * width + dst)
    return bool(found[0]) if scalar else found


def _neighbours(g, node, etype, end: int, call: str) -> torch.Tensor:
    """The other ends of node ``node``'s edges whose ``end`` (0 source, 1 destination) it is, in edge-id order."""
    key = g.canonical_etypes[g.relation_of_call(etype, call)]
    ends = g.find_edges(key)
    check_range(torch.tensor([int(node)]), g.num_nodes(key[2 * end]), f"{call}(v)")
    return ends[1 - end][ends[end] == int(node)]


def predecessors(g, v, etype=None) -> torch.Tensor:
    """Sources of the edges (of relation ``etype``) into node ``v``, one per edge, in edge-id order."""
    return _neighbours(g, v, etype, 1, "predecessors")


def successors(g, v, etype=None) -> torch.Tensor:
    """Destinations of the edges (of relation ``etype``) out of node ``v``, one per edge, in edge-id order."""
    return _neighbours(g, v, etype, 0, "successors")


def adj_external(g, transpose: bool = False, ctx="cpu", scipy_fmt=None, etype=None):
    """Adjacency matrix of relation ``etype``: ``[num_src, num_dst]`` (``[num_dst, num_src]`` with
    ``transpose``), an entry 1 per edge (multi-edges add up when summed); a torch sparse COO tensor on
    ``ctx``, or a SciPy matrix in ``scipy_fmt`` ('coo' or 'csr')."""
    key = g.canonical_etypes[g.relation_of_call(etype, "adj_external")]
    src, dst = (t.long() for t in g.find_edges(key))
    shape = (g.num_src_nodes(key[0]), g.num_dst_nodes(key[2]))  # a block's sides differ in size
    if transpose:
        src, dst, shape = dst, src, shape[::-1]
    if scipy_fmt is None:
        return torch.sparse_coo_tensor(
            torch.stack([src, dst]), torch.ones(src.numel()), shape, device=torch.device(ctx), check_invariants=True
        )
    if scipy_fmt not in ("coo", "csr"):
        raise ValueError(f"adj_external: scipy_fmt must be 'coo' or 'csr', got {scipy_fmt!r}")
    import scipy.sparse as sp

    matrix = sp.coo_matrix((torch.ones(src.numel()).numpy(), (src.cpu().numpy(), dst.cpu().numpy())), shape=shape)
    return matrix if scipy_fmt == "coo" else matrix.tocsr()


def inc(g, typestr: str, ctx="cpu", etype=None) -> torch.Tensor:
    """Incidence matrix of relation ``etype`` as a torch sparse COO tensor: ``'in'`` ``[num_dst, E]`` with 1 where
    edge e enters node v; ``'out'`` ``[num_src, E]`` with 1 where e leaves u; ``'both'`` (one node type)
    ``[N, E]`` with 1 where e enters, -1 where it leaves, 0 for a self loop."""
    key = g.canonical_etypes[g.relation_of_call(etype, "inc")]
    src, dst = (t.long() for t in g.find_edges(key))
    eid = torch.arange(src.numel(), device=src.device)
    device = torch.device(ctx)
    if typestr == "in":
        rows, values, n = dst, torch.ones(src.numel()), g.num_nodes(key[2])
    elif typestr == "out":
        rows, values, n = src, torch.ones(src.numel()), g.num_nodes(key[0])
    elif typestr == "both":
        if key[0] != key[2]:
            raise ValueError(f"inc('both') needs a relation within one node type, got {key}")
        loop = src == dst
        rows = torch.cat([dst[~loop], src[~loop]])
        eid = torch.cat([eid[~loop], eid[~loop]])
        values = torch.cat([torch.ones(int((~loop).sum())), -torch.ones(int((~loop).sum()))])
        n = g.num_nodes(key[0])
    else:
        raise ValueError(f"inc: typestr must be 'in', 'out' or 'both', got {typestr!r}")
    return torch.sparse_coo_tensor(
        torch.stack([rows, eid]), values, (n, src.numel()), device=device, check_invariants=True
    )


def adj_tensors(g, fmt: str, etype=None) -> tuple[torch.Tensor, ...]:
    """DGL's ``adj_tensors``: relation ``etype``'s adjacency (rows are sources) as ``coo`` (src, dst) in edge-id
    order, or ``csr`` / ``csc`` (indptr, indices, edge_ids) with each row's (column's) entries in edge-id order.
    ``edge_ids`` is empty when the entries are already in edge-id order: DGL's documented meaning of an empty
    ``edge_ids``, which DGL returns for the format a graph was built from without ids."""
    key = g.canonical_etypes[g.relation_of_call(etype, "adj_tensors")]
    src, dst = g.find_edges(key)
    if fmt == "coo":
        return src, dst
    if fmt not in ("csr", "csc"):
        raise ValueError(f"adj_tensors: fmt must be 'coo', 'csr' or 'csc', got {fmt!r}")
    rows, cols, n = (src, dst, g.num_nodes(key[0])) if fmt == "csr" else (dst, src, g.num_nodes(key[2]))
    order = torch.sort(rows.long(), stable=True).indices
    indptr = torch.zeros(n + 1, dtype=torch.int64, device=g.device)
    torch.cumsum(torch.bincount(rows.long(), minlength=n), 0, out=indptr[1:])
    in_order = torch.equal(order, torch.arange(order.numel(), device=g.device))
    return g.ids(indptr), cols[order], g.ids(order[:0] if in_order else order)


def adj(g, etype=None, eweight_name=None) -> SparseMatrix:
    """DGL's ``adj``: relation ``etype``'s ``[num_src, num_dst]`` adjacency as a :class:`SparseMatrix`, one
    entry per edge in edge-id order, valued 1.0 or by edge feature ``eweight_name``."""
    key = g.canonical_etypes[g.relation_of_call(etype, "adj")]
    src, dst = g.find_edges(key)
    val = g.edges[key].data[eweight_name] if eweight_name is not None else torch.ones(src.numel(), device=g.device)
    return SparseMatrix(torch.stack([src, dst]), val, (g.num_nodes(key[0]), g.num_nodes(key[2])))
