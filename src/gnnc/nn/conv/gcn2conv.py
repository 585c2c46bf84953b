"""DGL's ``GCN2Conv`` (GCNII, Chen et al., 2020) with its constructor, parameters and numbers."""

from __future__ import annotations

import math

import torch
from torch import nn

from ... import function as fn
from .common import (
    ZeroInDegreeOption,
    check_in_degrees,
    copy_or_weighted,
    degree_norm,
    in_degrees,
)
from .edgeweightnorm import EdgeWeightNorm


class GCN2Conv(ZeroInDegreeOption, nn.Module):
    """Graph convolution with initial residual and identity mapping, DGL 2.1's ``GCN2Conv``::

        p     = D^-1/2 A D^-1/2 x      (in-degrees on both sides; ``edge_weight`` normalised as
                                        ``EdgeWeightNorm('both')`` instead when given)
        s     = (1 - alpha) p + alpha x0
        out   = act( (1 - beta) s + beta (s W1  or, without ``project_initial_features``,
                                             (1 - alpha) p W1 + alpha x0 W2) + bias )

    with ``beta = log(lambda_ / layer + 1)``. Parameters ``weight1``, ``weight2`` (or None) and ``bias`` as
    DGL's. A graph with a zero in-degree node raises DGL's error unless ``allow_zero_in_degree``.
    """

    def __init__(
        self,
        in_feats,
        layer,
        alpha=0.1,
        lambda_=1,
        project_initial_features=True,
        allow_zero_in_degree=False,
        bias=True,
        activation=None,
    ):
        super().__init__()
        self._in_feats = in_feats
        self._project_initial_features = project_initial_features
        self.alpha = alpha
        self.beta = math.log(lambda_ / layer + 1)
        self._bias, self._activation = bias, activation
        self._allow_zero_in_degree = allow_zero_in_degree
        self.weight1 = nn.Parameter(torch.empty(in_feats, in_feats))
        if project_initial_features:
            self.register_parameter("weight2", None)
        else:
            self.weight2 = nn.Parameter(torch.empty(in_feats, in_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(in_feats))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.normal_(self.weight1)
        if self.weight2 is not None:
            nn.init.normal_(self.weight2)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph, feat, feat_0, edge_weight=None):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            if edge_weight is None:  # D^-1/2 on both sides, by in-degrees
                norm = degree_norm(in_degrees(graph), feat, -0.5)
                graph.ndata["h"] = feat * norm
            else:
                graph.ndata["h"] = feat
                edge_weight = EdgeWeightNorm("both")(graph, edge_weight)
            graph.update_all(copy_or_weighted(graph, edge_weight), fn.sum("m", "h"))
            feat = graph.ndata.pop("h") * norm if edge_weight is None else graph.ndata.pop("h")
            feat = feat * (1 - self.alpha)
            feat_0 = feat_0[: feat.size(0)] * self.alpha
            feat_sum = feat + feat_0
            if self._project_initial_features:
                projected = feat_sum @ self.weight1
            else:
                projected = feat @ self.weight1 + feat_0 @ self.weight2
            rst = (1 - self.beta) * feat_sum + self.beta * projected + (0 if self.bias is None else self.bias)
            return rst if self._activation is None else self._activation(rst)

    def extra_repr(self):
        return f"in={self._in_feats}, alpha={self.alpha}, beta={self.beta}"
