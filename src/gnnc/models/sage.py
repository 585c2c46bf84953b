"""GraphSAGE convolution (Hamilton et al., 2017): a message UDF, built-in reducers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .. import function as fn
from .common import bias_and_activation

_AGGREGATORS = ("mean", "pool", "gcn")


class SAGEConv(nn.Module):
    """GraphSAGE layer (DGL ``SAGEConv`` semantics, aggregators mean, pool and gcn).

    With ``h = dropout_feat(x)``:

        mean:  n_v = mean_{u->v} h_u
        pool:  n_v = max_{u->v} ReLU( W_pool h_u + b_pool )       (elementwise max)
        gcn:   n_v = ( sum_{u->v} h_u + h_v ) / ( in_degree(v) + 1 )

        out_v = norm( act( W_self h_v + W_neigh n_v + b ) )    (gcn: no W_self h_v term)

    Every edge counts (multi-edges and self loops included; all relations on
    a heterogeneous graph). A node without in-edges has ``n_v = 0`` (gcn:
    ``h_v``). Dropout acts only in training mode; ``norm`` is an optional
    callable such as a LayerNorm. ``forward(g, x)``: ``x`` is
    ``[num_nodes, in_dim]``; returns ``[num_nodes, out_dim]``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        aggregator_type: str = "mean",
        feat_drop: float = 0.0,
        bias: bool = True,
        norm=None,
        activation=None,
    ):
        super().__init__()
        if aggregator_type not in _AGGREGATORS:
            raise ValueError(f"SAGEConv: aggregator_type must be one of {_AGGREGATORS}, got {aggregator_type!r}")
        self.aggregator_type = aggregator_type
        self.feat_drop = nn.Dropout(feat_drop)
        self.fc_pool = nn.Linear(in_dim, in_dim) if aggregator_type == "pool" else None
        self.fc_self = nn.Linear(in_dim, out_dim, bias=False) if aggregator_type != "gcn" else None
        self.fc_neigh = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.norm, self.activation = norm, activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc_pool, self.fc_self, self.fc_neigh):
            if fc is not None:
                nn.init.xavier_uniform_(fc.weight, gain=gain)
        if self.fc_pool is not None:
            nn.init.zeros_(self.fc_pool.bias)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        h = self.feat_drop(x)
        with g.local_scope():
            if self.aggregator_type == "pool":
                g.ndata_all["h"] = F.relu(self.fc_pool(h))
                g.update_all(self._message, fn.max("m", "neigh"))  # built-ins: zeros on a graph without edges
                neigh = g.ndata_all["neigh"]
            elif self.aggregator_type == "mean":
                g.ndata_all["h"] = h
                g.update_all(self._message, fn.mean("m", "neigh"))
                neigh = g.ndata_all["neigh"]
            else:
                g.ndata_all["h"] = h
                g.update_all(self._message, fn.sum("m", "neigh"))
                degree = g.in_degrees().to(h.dtype).unsqueeze(-1)
                neigh = (g.ndata_all["neigh"] + h) / (degree + 1)
        out = self.fc_neigh(neigh)
        if self.fc_self is not None:
            out = self.fc_self(h) + out
        out = bias_and_activation(out, self.bias, self.activation)
        if self.norm is not None:
            out = self.norm(out)
        return out

    @staticmethod
    def _message(edges):
        return {"m": edges.src["h"]}
