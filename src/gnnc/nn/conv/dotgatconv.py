"""DGL's ``DotGatConv`` (dot-product graph attention) with its constructor, parameters and numbers."""

from __future__ import annotations

from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from .common import ZeroInDegreeOption, check_in_degrees, dst_name, is_block
from .heads import add_projections


class DotGatConv(ZeroInDegreeOption, nn.Module):
    """Dot-product attention, DGL 2.1's ``DotGatConv``. Per head k, with ``z = fc(x)``:

        a_uv  = softmax of <z_u, z_v> / sqrt(D) over the in-edges of v
        out_v = sum_{u->v} a_uv z_u

    Parameters ``fc`` or, for ``in_feats`` a pair, ``fc_src``/``fc_dst`` (no bias), torch's default
    initialisation as DGL's. Returns ``[N_dst, H, D]``, and the attention ``[E, H, 1]`` with
    ``get_attention``. A graph with a zero in-degree node raises DGL's error unless ``allow_zero_in_degree``.
    """

    def __init__(self, in_feats, out_feats, num_heads, allow_zero_in_degree=False):
        super().__init__()
        add_projections(self, in_feats, out_feats, num_heads)
        self._allow_zero_in_degree = allow_zero_in_degree

    def forward(self, graph, feat, get_attention=False):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            heads = (-1, self._num_heads, self._out_feats)
            if isinstance(feat, tuple):
                z_src, z_dst = self.fc_src(feat[0]).view(heads), self.fc_dst(feat[1]).view(heads)
            else:
                z_src = z_dst = self.fc(feat).view(heads)
                if is_block(graph):
                    z_dst = z_src[: graph.number_of_dst_nodes()]
            graph.srcdata["ft"] = z_src
            graph.dstdata[dst_name(graph, "ft")] = z_dst
            graph.apply_edges(fn.u_dot_v("ft", dst_name(graph, "ft"), "a"))
            attention = edge_softmax(graph, graph.edata["a"] / self._out_feats**0.5)
            graph.edata["sa"] = attention
            graph.update_all(fn.u_mul_e("ft", "sa", "attn"), fn.sum("attn", "agg_u"))
            rst = graph.dstdata["agg_u"]
            return (rst, attention) if get_attention else rst
