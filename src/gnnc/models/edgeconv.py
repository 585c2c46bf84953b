"""EdgeConv of DGCNN (Wang et al., 2019): a message UDF, a built-in max."""

from __future__ import annotations

import torch
from torch import nn

from .. import function as fn


class EdgeConv(nn.Module):
    """Edge convolution with max aggregation.

        h_v = max_{u->v} MLP( [x_v || x_u - x_v] )      (elementwise max)

    ``MLP`` is one linear layer ``2 * in_dim -> out_dim`` when ``hidden`` is
    None, else ``Linear(2 * in_dim, hidden) -> ReLU -> Linear(hidden, out_dim)``.
    Nodes without in-edges get zeros. ``forward(g, x)``: ``x`` is
    ``[num_nodes, in_dim]``; returns ``[num_nodes, out_dim]``.
    """

    def __init__(self, in_dim: int, out_dim: int, hidden: int | None = None):
        super().__init__()
        if hidden is None:
            self.mlp = nn.Sequential(nn.Linear(2 * in_dim, out_dim))
        else:
            self.mlp = nn.Sequential(nn.Linear(2 * in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            g.ndata_all["x"] = x
            g.update_all(self._message, fn.max("m", "h"))  # a built-in: zeros on a graph without edges
            return g.ndata_all["h"]

    def _message(self, edges):
        x_u, x_v = edges.src["x"], edges.dst["x"]
        return {"m": self.mlp(torch.cat([x_v, x_u - x_v], -1))}
