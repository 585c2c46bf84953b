"""Edge-cut partitioning baselines on the homogenized graph: random and METIS.

Node types are ignored for the cut: every node (global id) gets one owner
part. A part's local graph keeps all node types and relations and holds
every edge whose destination it owns, its owned nodes and its halo (the
remote sources of those edges), as DGL's partitions do; node features stay
with their owners. A part's boundary nodes are the owned nodes with a
neighbour (either direction) owned by another part.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..graph import Graph
from ..graph.partition import load_pymetis
from .metagraph import node_features, typed_subgraph
from .partition_io import PartitionedGraph, Partitioning


def random_owner(g: Graph, parts: int, seed: int = 0) -> torch.Tensor:
    """Owner of every node: a seeded random permutation dealt round-robin (sizes differ by <= 1)."""
    _check_parts(parts)
    perm = np.random.default_rng(seed).permutation(g.num_nodes())
    owner = np.empty(g.num_nodes(), dtype=np.int64)
    owner[perm] = np.arange(g.num_nodes()) % parts
    return torch.from_numpy(owner)


def homogeneous_adjacency(g: Graph) -> sp.csr_matrix:
    """Symmetric adjacency over global ids without self loops; entry (u, v) counts
    the edges u -> v plus v -> u, so a cut's weight is its number of edges."""
    n = g.num_nodes()
    src, dst = (t.numpy() for t in g.find_edges())
    keep = src != dst
    ones = np.ones(int(keep.sum()), dtype=np.int64)
    a = sp.coo_matrix((ones, (src[keep], dst[keep])), shape=(n, n)).tocsr()
    a = (a + a.T).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    return a


def metis_owner(g: Graph, parts: int, seed: int = 0, node_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Owner of every node from METIS (pymetis) on ``homogeneous_adjacency(g)``.

    ``node_weights``: optional non-negative integer weight per node that
    METIS balances instead of node counts. (Several balance constraints per
    node are not offered: pymetis 2025.2 did not balance them in our tests.)
    ImportError when pymetis is not installed.
    """
    _check_parts(parts)
    pymetis = load_pymetis()
    n = g.num_nodes()
    if parts == 1 or n == 0:
        return torch.zeros(n, dtype=torch.int64)
    a = homogeneous_adjacency(g)
    vweights = None
    if node_weights is not None:
        w = torch.as_tensor(node_weights)
        if w.shape != (n,) or w.is_floating_point() or w.dtype == torch.bool or bool((w < 0).any()):
            raise ValueError(f"node_weights must be {n} non-negative integers, got {w.dtype} {tuple(w.shape)}")
        vweights = w.to(torch.int64).numpy()
    result = pymetis.part_graph(
        parts,
        adjacency=pymetis.CSRAdjacency(a.indptr, a.indices),
        vweights=vweights,
        eweights=a.data,
        options=pymetis.Options(seed=int(seed)),
    )
    return torch.as_tensor(np.asarray(result.vertex_part, dtype=np.int64))


def edge_cut(g: Graph, owner: torch.Tensor) -> int:
    """Number of edges whose endpoints have different owners."""
    src, dst = g.find_edges()
    return int((owner[src] != owner[dst]).sum())


def random_partition(g: Graph, parts: int, seed: int = 0) -> PartitionedGraph:
    """Edge-cut partitions from ``random_owner``."""
    return edge_cut_partition(g, random_owner(g, parts, seed), parts, "random", {"seed": seed})


def metis_partition(g: Graph, parts: int, seed: int = 0, node_weights: torch.Tensor | None = None) -> PartitionedGraph:
    """Edge-cut partitions from ``metis_owner``."""
    owner = metis_owner(g, parts, seed, node_weights)
    return edge_cut_partition(g, owner, parts, "metis", {"seed": seed, "node_weighted": node_weights is not None})


def edge_cut_partition(
    g: Graph, owner: torch.Tensor, parts: int, method: str, params: dict | None = None
) -> PartitionedGraph:
    """Parts of ``g`` given the owner part of every node (global ids)."""
    _check_parts(parts)
    owner = torch.as_tensor(owner, dtype=torch.int64)
    if owner.shape != (g.num_nodes(),):
        raise ValueError(f"owner must have one entry per node ({g.num_nodes()}), got shape {tuple(owner.shape)}")
    if owner.numel() and (int(owner.min()) < 0 or int(owner.max()) >= parts):
        raise ValueError(f"owner ids must lie in [0, {parts}), got [{int(owner.min())}, {int(owner.max())}]")
    offsets = {t: sum(g.num_nodes(u) for u in g.ntypes[:i]) for i, t in enumerate(g.ntypes)}
    ends = {}
    for rel in g.canonical_etypes:
        s, _, d = rel
        src, dst = g.find_edges(rel)
        ends[rel] = (src, owner[src + offsets[s]], owner[dst + offsets[d]])
    src_all, dst_all = g.find_edges()
    crosses = torch.zeros(g.num_nodes(), dtype=torch.bool)
    cut = owner[src_all] != owner[dst_all]
    crosses[src_all[cut]] = True
    crosses[dst_all[cut]] = True
    out = []
    for p in range(parts):
        edge_ids = {}
        is_halo = {t: torch.zeros(g.num_nodes(t), dtype=torch.bool) for t in g.ntypes}
        for rel, (src, src_owner, dst_owner) in ends.items():
            mine = dst_owner == p
            edge_ids[rel] = torch.nonzero(mine).flatten()
            is_halo[rel[0]][src[mine & (src_owner != p)]] = True
        node_ids, num_owned, feats, boundary = {}, {}, {}, {}
        for t in g.ntypes:
            lo = offsets[t]
            owned = torch.nonzero(owner[lo : lo + g.num_nodes(t)] == p).flatten()
            halo = torch.nonzero(is_halo[t]).flatten()
            node_ids[t], num_owned[t] = torch.cat([owned, halo]), owned.numel()
            feats[t] = node_features(g, t, owned)
            edge_boundary = owned[crosses[owned + lo]]
            if edge_boundary.numel():
                boundary[t] = edge_boundary
        sub = typed_subgraph(g, g.ntypes, g.canonical_etypes, node_ids, edge_ids)
        out.append(Partitioning(p, sub, node_ids, num_owned, edge_ids, feats, boundary, {}))
    params = dict(params or {})
    params["edge_cut"] = int(cut.sum())
    return PartitionedGraph(method, g.metagraph(), out, params)


def _check_parts(parts) -> None:
    if isinstance(parts, bool) or int(parts) != parts or parts < 1:
        raise ValueError(f"number of parts must be a positive integer, got {parts!r}")
