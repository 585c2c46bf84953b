"""DGL's ``GraphConv`` (Kipf & Welling, 2017) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...dgl_base import DGLError
from .common import (
    check_in_degrees,
    copy_or_weighted,
    degree_norm,
    expand_as_pair,
    in_degrees,
    out_degrees,
)

_NORMS = ("none", "both", "right", "left")


class GraphConv(nn.Module):
    """``h_v = act( r_v sum_{u->v} w_e l_u x_u W + b )``, DGL 2.1's ``GraphConv``.

    ``norm``: ``both`` (``l_u = max(out_deg(u), 1) ** -1/2``, ``r_v = max(in_deg(v), 1) ** -1/2``), ``left``
    (``l_u = 1 / max(out_deg(u), 1)``, ``r_v = 1``), ``right`` (``l_u = 1``, ``r_v = 1 / max(in_deg(v), 1)``)
    or ``none``. ``w_e`` is ``edge_weight`` (1 without). ``weight=False``: ``forward`` takes ``weight``
    instead. Parameters ``weight [in_feats, out_feats]`` and ``bias [out_feats]``, as DGL's, so DGL state
    dicts load. A graph with a zero in-degree node raises DGL's error unless ``allow_zero_in_degree``.
    ``feat``: ``[N_src, *, in_feats]`` or a ``(source, destination)`` pair (bipartite graphs, blocks).
    """

    def __init__(
        self, in_feats, out_feats, norm="both", weight=True, bias=True, activation=None, allow_zero_in_degree=False
    ):
        super().__init__()
        if norm not in _NORMS:
            raise DGLError(f'Invalid norm value. Must be either "none", "both", "right" or "left". But got "{norm}".')
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats)) if weight else None
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()
        self._activation = activation

    def reset_parameters(self):
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value):
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, weight=None, edge_weight=None):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            message = copy_or_weighted(graph, edge_weight)
            feat_src, feat_dst = expand_as_pair(feat, graph)
            if self._norm in ("left", "both"):
                feat_src = feat_src * degree_norm(out_degrees(graph), feat_src, -0.5 if self._norm == "both" else -1)
            if weight is not None and self.weight is not None:
                raise DGLError(
                    "External weight is provided while at the same time the module has defined its own "
                    "weight parameter. Please create the module with flag weight=False."
                )
            weight = self.weight if weight is None else weight
            # as DGL: multiply by W on the narrower side of the aggregation
            if self._in_feats > self._out_feats and weight is not None:
                feat_src = torch.matmul(feat_src, weight)
            graph.srcdata["h"] = feat_src
            graph.update_all(message, fn.sum("m", "h"))
            rst = graph.dstdata["h"]
            if self._in_feats <= self._out_feats and weight is not None:
                rst = torch.matmul(rst, weight)
            if self._norm in ("right", "both"):
                rst = rst * degree_norm(in_degrees(graph), feat_dst, -0.5 if self._norm == "both" else -1)
            if self.bias is not None:
                rst = rst + self.bias
            if self._activation is not None:
                rst = self._activation(rst)
            return rst

    def extra_repr(self):
        summary = f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"
        if "_activation" in self.__dict__:
            summary += f", activation={self._activation}"
        return summary
