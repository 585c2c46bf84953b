"""DGL's ``AGNNConv`` (attention-based graph neural network, Thekumparampil et al., 2018) with its
constructor, parameters and numbers."""

from __future__ import annotations

from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from .common import (
    ZeroInDegreeOption,
    check_in_degrees,
    dst_name,
    expand_as_pair,
    is_block,
    register_scalar,
)


class AGNNConv(ZeroInDegreeOption, nn.Module):
    """Attention by cosine similarity, DGL 2.1's ``AGNNConv``:

        p_uv  = softmax of beta * cos(x_u, x_v) over the in-edges of v
        out_v = sum_{u->v} p_uv x_u

    ``beta`` (``[1]``, from ``init_beta``) is a parameter with ``learn_beta``, else a buffer. ``feat`` may be a
    ``(source, destination)`` pair. A graph with a zero in-degree node raises DGL's error unless
    ``allow_zero_in_degree``.
    """

    def __init__(self, init_beta=1.0, learn_beta=True, allow_zero_in_degree=False):
        super().__init__()
        self._allow_zero_in_degree = allow_zero_in_degree
        register_scalar(self, "beta", init_beta, learn_beta)

    def forward(self, graph, feat):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            feat_src, feat_dst = expand_as_pair(feat, graph)
            graph.srcdata["h"] = feat_src
            norm_src = nn.functional.normalize(feat_src, p=2, dim=-1)
            graph.srcdata["norm_h"] = norm_src
            dst_key = dst_name(graph, "norm_h")
            if isinstance(feat, tuple):
                graph.dstdata[dst_key] = nn.functional.normalize(feat_dst, p=2, dim=-1)
            elif is_block(graph):
                graph.dstdata[dst_key] = norm_src[: graph.number_of_dst_nodes()]
            graph.apply_edges(fn.u_dot_v("norm_h", dst_key, "cos"))
            graph.edata["p"] = edge_softmax(graph, self.beta * graph.edata.pop("cos"))
            graph.update_all(fn.u_mul_e("h", "p", "m"), fn.sum("m", "h"))
            return graph.dstdata.pop("h")
