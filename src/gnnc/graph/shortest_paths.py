"""DGL's ``shortest_dist``: unweighted shortest distances (and paths, as edge ids) along edge directions."""

from __future__ import annotations

import numpy as np
import scipy.sparse.csgraph
import torch

from .core import Graph

__all__ = ["shortest_dist"]


def shortest_dist(g: Graph, root=None, return_paths: bool = False):
    """DGL's ``shortest_dist`` on a homogeneous graph: from node ``root`` to every node (``[N]``), or between
    every pair (``[N, N]``, ``root=None``); -1 where unreachable. int64.

    With ``return_paths`` also the paths: edge ids from the source, padded
    with -1 to the longest path's length (``[N, L]`` or ``[N, N, L]``); a
    node's path to itself is all -1."""
    if len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise ValueError("shortest_dist: the graph must be homogeneous (as DGL's)")
    adj = g.adj_external(scipy_fmt="csr")
    if root is None:
        dist, pred = scipy.sparse.csgraph.shortest_path(adj, directed=True, unweighted=True, return_predecessors=True)
    else:
        dist, pred = scipy.sparse.csgraph.dijkstra(
            adj, directed=True, indices=int(root), unweighted=True, return_predecessors=True
        )
        dist, pred = dist[None], pred[None]
    reachable = ~np.isinf(dist)
    hops = np.where(reachable, dist, -1).astype(np.int64)
    out = torch.from_numpy(hops if root is None else hops[0]).to(g.device)
    if not return_paths:
        return out
    longest = int(hops.max()) if hops.size else 0
    paths = np.full(hops.shape + (longest,), -1, dtype=np.int64)
    sources = range(hops.shape[0]) if root is None else [int(root)]
    for row, source in enumerate(sources):
        for target in np.nonzero(pred[row] >= 0)[0]:
            nodes = _walk_back(pred[row], source, int(target))
            paths[row, target, : len(nodes) - 1] = g.edge_ids(nodes[:-1], nodes[1:]).long().numpy()
    return out, torch.from_numpy(paths if root is None else paths[0]).to(g.device)


def _walk_back(pred: np.ndarray, source: int, target: int) -> list[int]:
    """The nodes of the path ``source -> ... -> target`` given each node's predecessor on it."""
    nodes = [target]
    while nodes[-1] != source:
        nodes.append(int(pred[nodes[-1]]))
    return nodes[::-1]
