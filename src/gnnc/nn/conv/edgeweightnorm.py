"""DGL's ``EdgeWeightNorm``: edge weights normalised by the weighted degrees of their end nodes."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...dgl_base import DGLError


class EdgeWeightNorm(nn.Module):
    """DGL 2.1's ``EdgeWeightNorm``: ``w'_uv = l_u r_v w_uv`` with ``s_out(u)``/``s_in(v)`` the sums of the
    weights of u's out-edges / v's in-edges (plus ``eps``):

        both:  l_u = s_out(u) ** -1/2,  r_v = s_in(v) ** -1/2      (weights must be positive)
        right: l_u = 1,                 r_v = 1 / s_in(v)
        none:  l_u = r_v = 1

    ``edge_weight`` is ``[E]`` (scalar weights only, as DGL's); returns ``[E]``.
    """

    def __init__(self, norm="both", eps=0.0):
        super().__init__()
        self._norm, self._eps = norm, eps

    def forward(self, graph, edge_weight):
        if edge_weight.dim() > 1:
            raise DGLError(
                "Currently the normalization is only defined on scalar edge weight. Please customize "
                "the normalization for your high-dimensional weights."
            )
        if self._norm == "both" and bool((edge_weight <= 0).any()):
            raise DGLError(
                'Non-positive edge weight detected with `norm="both"`. This leads to square root of '
                "zero or negative values."
            )
        with graph.local_scope():
            graph.srcdata["_src_out_w"] = edge_weight.new_ones(graph.number_of_src_nodes())
            graph.dstdata["_dst_in_w"] = edge_weight.new_ones(graph.number_of_dst_nodes())
            graph.edata["_edge_w"] = edge_weight
            if self._norm == "both":
                src, _ = graph.edges()
                out_weight = torch.zeros_like(graph.srcdata["_src_out_w"]).index_add_(0, src, edge_weight)
                graph.srcdata["_src_out_w"] = torch.pow(out_weight + self._eps, -0.5)
            if self._norm != "none":
                graph.update_all(fn.copy_e("_edge_w", "m"), fn.sum("m", "in_weight"))
                degrees = graph.dstdata["in_weight"] + self._eps
                graph.dstdata["_dst_in_w"] = torch.pow(degrees, -0.5) if self._norm == "both" else 1.0 / degrees
            graph.apply_edges(_normed)
            return graph.edata["_norm_edge_weights"]


def _normed(edges):
    return {"_norm_edge_weights": edges.src["_src_out_w"] * edges.dst["_dst_in_w"] * edges.data["_edge_w"]}
