"""DGL's ``dgl.partition`` (also in ``dgl.transforms``): METIS node assignment, partitions with HALO nodes and
node reordering, on homogeneous graphs with int64 ids, with DGL 2.1's orders and features.

A partition holds its inner nodes (ascending ids) first, then its HALO
nodes: the sources of in-edges reached within ``extra_cached_hops`` hops,
in order of first appearance hop by hop, then the destinations of the inner
nodes' out-edges. Its edges are the inner nodes' in-edges (only those from
inner nodes when ``extra_cached_hops`` is 0), the HALO nodes' in-edges from
outside the partition, then the inner nodes' out-edges to outside it.
Partitions carry no features of the input graph; ``ndata`` holds ``_ID``
(the parent node), ``inner_node`` (int32), ``part_id`` and with
``reshuffle`` ``orig_id``; ``edata`` ``_ID``, ``inner_edge`` (int8: the
edge ends at an inner node) and with ``reshuffle`` ``orig_id``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from .core import Graph, graph

__all__ = ["metis_partition", "metis_partition_assignment", "partition_graph_with_halo"]

ID = "_ID"  # DGL's NID / EID


def _homogeneous(g: Graph, call: str) -> tuple[np.ndarray, np.ndarray]:
    """``g``'s (src, dst) as int64 arrays; ValueError unless ``g`` is homogeneous with int64 ids (DGL's
    partitioning needs both)."""
    if not g.is_homogeneous:
        raise ValueError(
            f"{call}: only a homogeneous graph is partitioned (DGL's too); convert it with to_homogeneous first"
        )
    if g.idtype != torch.int64:
        raise ValueError(
            f"{call}: the graph's idtype is {g.idtype}; DGL partitions int64 graphs only (convert with g.long())"
        )
    src, dst = g.find_edges()
    return src.cpu().numpy().astype(np.int64), dst.cpu().numpy().astype(np.int64)


def _plain_graph(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Graph:
    return graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_nodes)


def reorder_nodes(g: Graph, new_node_ids) -> Graph:
    """DGL's ``dgl.partition.reorder_nodes``: node ``v`` of ``g`` becomes node ``new_node_ids[v]`` (a
    permutation); edges keep their ids. No features are carried; ``ndata['orig_id']`` is each node's old id."""
    src, dst = _homogeneous(g, "reorder_nodes")
    new = np.asarray(torch.as_tensor(np.asarray(new_node_ids)).cpu(), dtype=np.int64).reshape(-1)
    n = g.num_nodes()
    if new.size != n or not np.array_equal(np.sort(new), np.arange(n)):
        raise ValueError(f"reorder_nodes: new_node_ids must be a permutation of the {n} node ids")
    out = _plain_graph(new[src], new[dst], n)
    old = np.empty(n, dtype=np.int64)
    old[new] = np.arange(n)
    out.ndata["orig_id"] = torch.from_numpy(old)
    return out


def _reshuffle(g: Graph, src: np.ndarray, dst: np.ndarray, node_part: np.ndarray):
    """DGL's ``reshuffle_graph``: the graph whose nodes are ordered by partition (then by ``ndata['_TYPE']``
    where it holds several types) and whose edges by destination, with each node's and edge's old id as
    ``orig_id``; and the reordered nodes' partitions."""
    key = node_part
    if "_TYPE" in g.ndata and torch.unique(g.ndata["_TYPE"]).numel() > 1:
        types = g.ndata["_TYPE"].cpu().numpy().astype(np.int64)
        key = node_part * (int(types.max()) + 1) + types
    old_of_new = np.argsort(key, kind="stable")
    new_of_old = np.empty_like(old_of_new)
    new_of_old[old_of_new] = np.arange(old_of_new.size)
    edge_order = np.argsort(new_of_old[dst], kind="stable")
    out = _plain_graph(new_of_old[src][edge_order], new_of_old[dst][edge_order], g.num_nodes())
    out.ndata["orig_id"] = torch.from_numpy(old_of_new)
    out.edata["orig_id"] = torch.from_numpy(edge_order)
    return out, node_part[old_of_new]


def _edges_at(ends: np.ndarray, nodes: np.ndarray, n: int) -> np.ndarray:
    """Ids of the edges whose ``ends`` are among ``nodes``: node by node in the order given, by edge id."""
    pos = np.full(n, -1, dtype=np.int64)
    pos[nodes] = np.arange(nodes.size)
    hit = pos[ends]
    eids = np.nonzero(hit >= 0)[0]
    return eids[np.argsort(hit[eids], kind="stable")]


def _new_nodes(ids: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """The distinct ``ids`` not yet ``seen``, in order of first appearance; marks them seen."""
    _, first = np.unique(ids, return_index=True)
    fresh = ids[np.sort(first)]
    fresh = fresh[~seen[fresh]]
    seen[fresh] = True
    return fresh


def _halo_subgraph(src: np.ndarray, dst: np.ndarray, n: int, inner: np.ndarray, hops: int):
    """(node ids, edge ids) of the partition of ``inner`` nodes, in the module's order."""
    is_inner = np.zeros(n, dtype=bool)
    is_inner[inner] = True
    seen = is_inner.copy()
    nodes, edges = [inner], []
    into = _edges_at(dst, inner, n)
    edges.append(into if hops > 0 else into[is_inner[src[into]]])
    if hops > 0:
        frontier = _new_nodes(src[into], seen)
        nodes.append(frontier)
        for _ in range(1, hops):
            into = _edges_at(dst, frontier, n)
            edges.append(into[~is_inner[src[into]]])
            frontier = _new_nodes(src[into], seen)
            nodes.append(frontier)
        out = _edges_at(src, inner, n)
        edges.append(out[~is_inner[dst[out]]])
        nodes.append(_new_nodes(dst[out], seen))
    return np.concatenate(nodes), np.concatenate(edges)


def partition_graph_with_halo(g: Graph, node_part, extra_cached_hops: int, reshuffle: bool = False):
    """DGL's ``partition_graph_with_halo``: ``({part id: partition}, orig node ids, orig edge ids)``, the ids
    None unless ``reshuffle`` (see the module for a partition's layout).

    ``node_part``: each node's partition. With ``reshuffle`` the graph is first
    renumbered so that each partition's nodes, and the edges into them, have
    contiguous ids (DGL's ``reshuffle_graph``); ``_ID`` then names the
    renumbered graph's ids, ``orig_id`` ``g``'s, and a partition's inner edges
    come first."""
    src, dst = _homogeneous(g, "partition_graph_with_halo")
    parts = np.asarray(torch.as_tensor(np.asarray(node_part)).cpu(), dtype=np.int64).reshape(-1)
    if parts.size != g.num_nodes():
        raise ValueError(f"partition_graph_with_halo: node_part has {parts.size} entries for {g.num_nodes()} nodes")
    orig_nids = orig_eids = None
    if reshuffle:
        g, parts = _reshuffle(g, src, dst, parts)
        src, dst = (t.numpy() for t in g.find_edges())
        orig_nids, orig_eids = g.ndata["orig_id"], g.edata["orig_id"]
    n = g.num_nodes()
    out = {}
    for part in range(int(parts.max()) + 1 if parts.size else 0):
        inner = np.nonzero(parts == part)[0]
        nodes, edges = _halo_subgraph(src, dst, n, inner, extra_cached_hops)
        local = np.empty(n, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        inner_edge = local[dst[edges]] < inner.size
        if reshuffle and edges.size:
            edges = edges[np.argsort(edges + (int(edges.max()) + 1) * ~inner_edge, kind="stable")]
            inner_edge = local[dst[edges]] < inner.size
        sub = _plain_graph(local[src[edges]], local[dst[edges]], nodes.size)
        sub.ndata[ID] = torch.from_numpy(nodes)
        sub.edata[ID] = torch.from_numpy(edges)
        sub.ndata["inner_node"] = torch.from_numpy((np.arange(nodes.size) < inner.size).astype(np.int32))
        sub.ndata["part_id"] = torch.from_numpy(parts[nodes])
        if reshuffle:
            sub.ndata["orig_id"] = orig_nids[sub.ndata[ID]]
            sub.edata["orig_id"] = orig_eids[sub.edata[ID]]
        inner_edge = inner_edge if extra_cached_hops >= 1 else np.ones(edges.size, dtype=bool)
        sub.edata["inner_edge"] = torch.from_numpy(inner_edge.astype(np.int8))
        out[part] = sub
    return out, orig_nids, orig_eids


def load_pymetis():
    """The ``pymetis`` module (gnnc's METIS); ImportError saying how to install it when it is missing."""
    try:
        import pymetis
    except ImportError:
        raise ImportError(
            "METIS partitioning needs pymetis: pip install 'gnnc[dist]' (or pip install pymetis)"
        ) from None
    return pymetis


def _symmetric(src: np.ndarray, dst: np.ndarray, n: int) -> sp.csr_matrix:
    """The 0/1 adjacency of ``g`` made symmetric, without self loops (what METIS takes)."""
    keep = src != dst
    a = sp.coo_matrix((np.ones(int(keep.sum()), dtype=np.int64), (src[keep], dst[keep])), shape=(n, n)).tocsr()
    a = (a + a.T).tocsr()
    a.data[:] = 1
    a.sort_indices()
    return a


def metis_partition_assignment(
    g: Graph, k: int, balance_ntypes=None, balance_edges: bool = False, mode: str = "k-way", objtype: str = "cut"
) -> torch.Tensor:
    """DGL's ``metis_partition_assignment``: each node's partition (int64) from METIS (``pymetis``) on the
    symmetric adjacency of ``g``, ``k`` parts.

    METIS balances node counts; ``balance_ntypes`` (a type per node) balances
    each type's count instead, ``balance_edges`` the in-degrees too (per type
    with ``balance_ntypes``). ``mode``: ``"k-way"`` or ``"recursive"``
    (bisection); ``objtype``: ``"cut"`` (edge cut) or ``"vol"``
    (communication volume)."""
    if mode not in ("k-way", "recursive"):
        raise ValueError(f"metis_partition_assignment: mode must be 'k-way' or 'recursive', got {mode!r}")
    if objtype not in ("cut", "vol"):
        raise ValueError(f"metis_partition_assignment: objtype must be 'cut' or 'vol', got {objtype!r}")
    src, dst = _homogeneous(g, "metis_partition_assignment")
    pymetis = load_pymetis()
    n = g.num_nodes()
    if k == 1 or n == 0:
        return torch.zeros(n, dtype=torch.int64)
    in_degrees = np.bincount(dst, minlength=n).astype(np.int64)
    weights = []
    if balance_ntypes is not None:
        types = np.asarray(torch.as_tensor(np.asarray(balance_ntypes)).cpu()).reshape(-1)
        if types.size != n:
            raise ValueError(f"metis_partition_assignment: balance_ntypes has {types.size} entries for {n} nodes")
        masks = [(types == t).astype(np.int64) for t in np.unique(types)]
        weights += masks
        if balance_edges:
            weights += [mask * in_degrees for mask in masks]
    elif balance_edges:
        weights.append(in_degrees)
    a = _symmetric(src, dst, n)
    result = pymetis.part_graph(
        k,
        adjacency=pymetis.CSRAdjacency(a.indptr, a.indices),
        vweights=np.stack(weights, 1).reshape(-1) if weights else None,
        recursive=mode == "recursive",
        options=pymetis.Options(objtype=0 if objtype == "cut" else 1),
    )
    return torch.as_tensor(np.asarray(result.vertex_part, dtype=np.int64))


def metis_partition(
    g: Graph,
    k: int,
    extra_cached_hops: int = 0,
    reshuffle: bool = False,
    balance_ntypes=None,
    balance_edges: bool = False,
    mode: str = "k-way",
) -> dict:
    """DGL's ``metis_partition``: :func:`partition_graph_with_halo` of :func:`metis_partition_assignment`'s
    parts (the partitions only)."""
    parts = metis_partition_assignment(g, k, balance_ntypes, balance_edges, mode)
    return partition_graph_with_halo(g, parts, extra_cached_hops, reshuffle)[0]
