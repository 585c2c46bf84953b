"""Graph convolution (Kipf & Welling, 2017) and the 2-layer GCN network: a message UDF, a built-in sum."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .. import function as fn
from .common import bias_and_activation


class GCNConv(nn.Module):
    """Graph convolution with symmetric normalization (DGL ``GraphConv``, norm='both').

        z   = x W
        h_v = act( sum_{u->v} c_u c_v z_u + b )
        c_u = max(out_degree(u), 1) ** -1/2,   c_v = max(in_degree(v), 1) ** -1/2

    Every edge counts (multi-edges and self loops included); on a
    heterogeneous graph all relations take part and degrees count edges of
    every relation. Nodes without in-edges get ``act(b)``.
    ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]``; returns ``[num_nodes, out_dim]``.
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True, activation=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            g.ndata_all["z"] = x @ self.weight
            g.ndata_all["c_out"] = _inv_sqrt_degree(g.out_degrees(), x.dtype)
            g.ndata_all["c_in"] = _inv_sqrt_degree(g.in_degrees(), x.dtype)
            g.update_all(self._message, fn.sum("m", "h"))  # a built-in: zeros on a graph without edges
            h = g.ndata_all["h"]
        return bias_and_activation(h, self.bias, self.activation)

    @staticmethod
    def _message(edges):
        return {"m": edges.src["c_out"] * edges.dst["c_in"] * edges.src["z"]}


def _inv_sqrt_degree(degrees: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``max(d, 1) ** -1/2`` as a ``[num_nodes, 1]`` column."""
    return degrees.clamp(min=1).to(dtype).pow(-0.5).unsqueeze(-1)


class GCN(nn.Module):
    """The standard 2-layer GCN for node classification (e.g. Cora).

        h   = ReLU( GCNConv_1( dropout(x) ) )
        out = GCNConv_2( dropout(h) )

    ``forward(g, x)`` returns logits ``[num_nodes, num_classes]``.
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, dropout: float = 0.5):
        super().__init__()
        self.conv1 = GCNConv(in_dim, hidden, activation=F.relu)
        self.conv2 = GCNConv(hidden, num_classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(g, self.dropout(x))
        return self.conv2(g, self.dropout(h))
