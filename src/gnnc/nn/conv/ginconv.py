"""DGL's ``GINConv`` (Xu et al., 2019) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from .common import copy_or_weighted, expand_as_pair

_REDUCERS = {"sum": fn.sum, "max": fn.max, "mean": fn.mean}


class GINConv(nn.Module):
    """Graph isomorphism network layer, DGL 2.1's ``GINConv``:

        out_v = act( apply_func( (1 + eps) x_v + agg_{u->v} w_e x_u ) )     agg in sum, max, mean

    ``w_e`` is ``edge_weight`` (1 without); ``eps`` (``[1]``, starting at ``init_eps``) is a parameter with
    ``learn_eps``, else a buffer, as DGL's. A node without in-edges aggregates 0. ``feat`` may be a
    ``(source, destination)`` pair.
    """

    def __init__(self, apply_func=None, aggregator_type="sum", init_eps=0, learn_eps=False, activation=None):
        super().__init__()
        if aggregator_type not in _REDUCERS:
            raise KeyError(f"Aggregator type {aggregator_type} not recognized.")
        self.apply_func, self._aggregator_type, self.activation = apply_func, aggregator_type, activation
        eps = torch.tensor([float(init_eps)], dtype=torch.float32)
        if learn_eps:
            self.eps = nn.Parameter(eps)
        else:
            self.register_buffer("eps", eps)

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            message = copy_or_weighted(graph, edge_weight)
            feat_src, feat_dst = expand_as_pair(feat, graph)
            graph.srcdata["h"] = feat_src
            graph.update_all(message, _REDUCERS[self._aggregator_type]("m", "neigh"))
            rst = (1 + self.eps) * feat_dst + graph.dstdata["neigh"]
            if self.apply_func is not None:
                rst = self.apply_func(rst)
            if self.activation is not None:
                rst = self.activation(rst)
            return rst
