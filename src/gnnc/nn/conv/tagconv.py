"""DGL's ``TAGConv`` (Du et al., 2017, topology adaptive graph convolution) with its constructor, parameters
and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from .common import copy_or_weighted, degree_norm, in_degrees
from .edgeweightnorm import EdgeWeightNorm


class TAGConv(nn.Module):
    """``out = act( lin([x, A'x, ..., A'^k x]) )``, DGL 2.1's ``TAGConv``: ``A' = D^-1/2 A D^-1/2`` with ``D``
    the in-degrees clamped to 1 on both sides (as DGL's), or with ``edge_weight`` the weights normalised by
    ``EdgeWeightNorm('both')``. Parameter ``lin`` (``Linear((k + 1) * in_feats, out_feats)``) as DGL's.
    """

    def __init__(self, in_feats, out_feats, k=2, bias=True, activation=None):
        super().__init__()
        self._in_feats, self._out_feats, self._k, self._activation = in_feats, out_feats, k, activation
        self.lin = nn.Linear(in_feats * (k + 1), out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_normal_(self.lin.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            assert graph.is_homogeneous, "Graph is not homogeneous"
            if edge_weight is None:
                norm = degree_norm(in_degrees(graph), feat, -0.5)
            else:
                edge_weight = EdgeWeightNorm("both")(graph, edge_weight)
            message = copy_or_weighted(graph, edge_weight)
            stack = [feat]
            for _ in range(self._k):
                graph.ndata["h"] = stack[-1] if edge_weight is not None else stack[-1] * norm
                graph.update_all(message, fn.sum("m", "h"))
                rst = graph.ndata["h"]
                stack.append(rst if edge_weight is not None else rst * norm)
            rst = self.lin(torch.cat(stack, dim=-1))
            if self._activation is not None:
                rst = self._activation(rst)
            return rst
