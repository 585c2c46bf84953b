"""APPNP propagation (Klicpera et al., 2019): GCN's message UDF, a built-in sum."""

from __future__ import annotations

import torch
from torch import nn

from .. import function as fn
from .gcn import GCNConv


class APPNPConv(nn.Module):
    """Approximate personalized-PageRank propagation (DGL ``APPNPConv`` semantics, no edge dropout).

        h^0     = x
        h^{t+1} = (1 - alpha) sum_{u->v} c_u c_v h^t_u + alpha x_v        for t < k
        out     = h^k
        c_u = max(out_degree(u), 1) ** -1/2,   c_v = max(in_degree(v), 1) ** -1/2

    No parameters. Every edge counts (multi-edges and self loops included;
    all relations on a heterogeneous graph). A node without in-edges gets
    ``alpha x_v`` after each step. ``forward(g, x)``: ``x`` is
    ``[num_nodes, *]``; returns the same shape.
    """

    def __init__(self, k: int, alpha: float):
        super().__init__()
        self.k, self.alpha = k, alpha

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        shape = (-1,) + (1,) * (x.dim() - 1)
        h = x
        with g.local_scope():
            g.ndata_all["c_out"] = g.out_degrees().clamp(min=1).to(x.dtype).pow(-0.5).view(shape)
            g.ndata_all["c_in"] = g.in_degrees().clamp(min=1).to(x.dtype).pow(-0.5).view(shape)
            for _ in range(self.k):
                g.ndata_all["z"] = h
                g.update_all(GCNConv._message, fn.sum("m", "h"))  # sum_{u->v} c_u c_v z_u; zeros without edges
                h = (1 - self.alpha) * g.ndata_all["h"] + self.alpha * x
        return h
