"""DGL's ``GINEConv`` (GIN with edge features, Hu et al., 2020) with its constructor, parameters and
numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from .common import expand_as_pair, register_scalar


class GINEConv(nn.Module):
    """GIN with edge features, DGL 2.1's ``GINEConv``:

        out_v = apply_func( (1 + eps) x_v + sum_{u->v} ReLU(x_u + e_uv) )

    ``eps`` (``[1]``, from ``init_eps``) is a parameter with ``learn_eps``, else a buffer. A node without
    in-edges sums 0. ``node_feat`` may be a ``(source, destination)`` pair.
    """

    def __init__(self, apply_func=None, init_eps=0, learn_eps=False):
        super().__init__()
        self.apply_func = apply_func
        register_scalar(self, "eps", init_eps, learn_eps)

    def forward(self, graph, node_feat, edge_feat):
        with graph.local_scope():
            feat_src, feat_dst = expand_as_pair(node_feat, graph)
            graph.srcdata["hn"] = feat_src
            graph.edata["he"] = edge_feat
            graph.apply_edges(fn.u_add_e("hn", "he", "m"))
            graph.edata["m"] = torch.relu(graph.edata["m"])
            graph.update_all(fn.copy_e("m", "m"), fn.sum("m", "neigh"))
            rst = (1 + self.eps) * feat_dst + graph.dstdata["neigh"]
            return self.apply_func(rst) if self.apply_func is not None else rst
