"""DGL's ``EdgeGATConv`` (graph attention with edge features in the attention and the message) with its
constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from .common import ZeroInDegreeOption, check_in_degrees
from .heads import add_gat_attention, init_gat_attention, project_heads


class EdgeGATConv(ZeroInDegreeOption, nn.Module):
    """Graph attention with edge features, DGL 2.1's ``EdgeGATConv``. Per head k, with ``z = fc(feat_drop(x))``
    and ``y = fc_edge(edge_feat)``:

        e_uv  = LeakyReLU( <attn_l_k, z_u> + <attn_r_k, z_v> + <attn_edge_k, y_uv> )
        a_uv  = attn_drop( softmax of e_uv over the in-edges of v )
        out_v = act( sum_{u->v} a_uv (z_u + y_uv) + res_fc(x_v) + bias_k )

    Parameters as DGL's (``res_fc`` a Linear without bias when ``residual``, the default). Returns
    ``[N_dst, H, D]``, and the attention ``[E, H, 1]`` with ``get_attention``. A graph with a zero in-degree
    node raises DGL's error unless ``allow_zero_in_degree``.
    """

    def __init__(
        self,
        in_feats,
        edge_feats,
        out_feats,
        num_heads,
        feat_drop=0.0,
        attn_drop=0.0,
        negative_slope=0.2,
        residual=True,
        activation=None,
        allow_zero_in_degree=False,
        bias=True,
    ):
        super().__init__()
        add_gat_attention(self, in_feats, out_feats, num_heads, feat_drop, attn_drop, negative_slope)
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        if bias:
            self.bias = nn.Parameter(torch.empty(width))
        else:
            self.register_buffer("bias", None)
        if residual:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.register_buffer("res_fc", None)
        self._edge_feats = edge_feats
        self.fc_edge = nn.Linear(edge_feats, width, bias=False)
        self.attn_edge = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.reset_parameters()
        self.activation = activation

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        init_gat_attention(self, gain)
        nn.init.xavier_normal_(self.fc_edge.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_edge, gain=gain)
        if self.bias is not None:
            nn.init.constant_(self.bias, 0)
        if self.res_fc is not None:
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)

    def forward(self, graph, feat, edge_feat, get_attention=False):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            h_dst, z_src, z_dst = project_heads(self, feat, graph)
            z_edge = self.fc_edge(edge_feat).view(*edge_feat.shape[:-1], self._num_heads, self._out_feats)
            graph.srcdata.update({"ft": z_src, "el": (z_src * self.attn_l).sum(dim=-1, keepdim=True)})
            graph.dstdata["er"] = (z_dst * self.attn_r).sum(dim=-1, keepdim=True)
            graph.edata["ft_edge"] = z_edge
            graph.apply_edges(fn.u_add_v("el", "er", "e"))
            e = self.leaky_relu(graph.edata.pop("e") + (z_edge * self.attn_edge).sum(dim=-1, keepdim=True))
            attention = self.attn_drop(edge_softmax(graph, e))
            graph.apply_edges(fn.u_add_e("ft", "ft_edge", "ft_combined"))
            graph.edata["m"] = graph.edata["ft_combined"] * attention
            graph.update_all(fn.copy_e("m", "m"), fn.sum("m", "ft"))
            rst = graph.dstdata["ft"]
            lead = h_dst.shape[:-1]
            if self.res_fc is not None:
                rst = rst + self.res_fc(h_dst).view(*lead, -1, self._out_feats)
            if self.bias is not None:
                rst = rst + self.bias.view(*((1,) * len(lead)), self._num_heads, self._out_feats)
            if self.activation:
                rst = self.activation(rst)
            return (rst, attention) if get_attention else rst
