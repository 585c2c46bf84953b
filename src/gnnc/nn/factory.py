"""DGL's graph-building modules (``dgl.nn.pytorch.factory``): graphs from point sets."""

from __future__ import annotations

import torch
from torch import nn

from ..graph.core import graph


def radius_graph(x, r, p=2, self_loop=False, compute_mode="donot_use_mm_for_euclid_dist", get_distances=False):
    """DGL 2.1's ``radius_graph``: an edge ``i -> j`` for every pair of the ``[N, D]`` points within
    ``p``-norm distance ``r`` (self loops with ``self_loop``), ordered by ``(i, j)``; with ``get_distances``
    also each edge's distance (``[E, 1]``)."""
    if r <= 0:
        raise ValueError(f"Invalid r value. expect r > 0, got r = {r}")
    if x.shape[0] == 0:
        raise ValueError("Find empty point set")
    distances = torch.cdist(x, x, p=p, compute_mode=compute_mode)
    if not self_loop:
        distances.fill_diagonal_(r + 1)
    edges = torch.nonzero(distances <= r, as_tuple=True)
    g = graph(edges, num_nodes=x.shape[0], device=x.device)
    return (g, distances[edges].unsqueeze(-1)) if get_distances else g


class RadiusGraph(nn.Module):
    """DGL 2.1's ``RadiusGraph``: ``radius_graph`` with its radius, norm, self-loop choice and ``cdist``
    compute mode fixed at construction."""

    def __init__(self, r, p=2, self_loop=False, compute_mode="donot_use_mm_for_euclid_dist"):
        super().__init__()
        self.r, self.p, self.self_loop, self.compute_mode = r, p, self_loop, compute_mode

    def forward(self, x, get_distances=False):
        return radius_graph(x, self.r, self.p, self.self_loop, self.compute_mode, get_distances)
