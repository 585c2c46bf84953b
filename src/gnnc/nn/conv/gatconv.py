"""DGL's ``GATConv`` (Velickovic et al., 2018) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from ..utils import Identity
from .common import check_in_degrees
from .heads import add_gat_attention, init_gat_attention, project_heads


class GATConv(nn.Module):
    """Multi-head graph attention, DGL 2.1's ``GATConv``. Per head k, with ``z = fc(feat_drop(x))``:

        e_uv  = LeakyReLU( <attn_l_k, z_u> + <attn_r_k, z_v> )
        a_uv  = attn_drop( softmax of e_uv over the in-edges of v ) * edge_weight_uv
        out_v = act( sum_{u->v} a_uv z_u + res_fc(x_v) + bias_k )

    Parameters as DGL's (``fc`` or, for ``in_feats`` a pair, ``fc_src``/``fc_dst``; ``attn_l``, ``attn_r``
    ``[1, H, D]``; ``bias [H * D]``; ``res_fc`` a Linear when the residual needs a projection, which then
    carries the bias). Returns ``[N_dst, H, D]``, and the attention ``[E, H, 1]`` with ``get_attention``.
    A graph with a zero in-degree node raises DGL's error unless ``allow_zero_in_degree``.
    """

    def __init__(
        self,
        in_feats,
        out_feats,
        num_heads,
        feat_drop=0.0,
        attn_drop=0.0,
        negative_slope=0.2,
        residual=False,
        activation=None,
        allow_zero_in_degree=False,
        bias=True,
    ):
        super().__init__()
        add_gat_attention(self, in_feats, out_feats, num_heads, feat_drop, attn_drop, negative_slope)
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        self.has_linear_res = residual and self._in_dst_feats != width
        self.has_explicit_bias = bias and not self.has_linear_res
        if not residual:
            self.register_buffer("res_fc", None)
        elif self.has_linear_res:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias)
        else:
            self.res_fc = Identity()
        if self.has_explicit_bias:
            self.bias = nn.Parameter(torch.empty(width))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()
        self.activation = activation

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        init_gat_attention(self, gain)
        if self.has_explicit_bias:
            nn.init.constant_(self.bias, 0)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.constant_(self.res_fc.bias, 0)

    def set_allow_zero_in_degree(self, set_value):
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, edge_weight=None, get_attention=False):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            h_dst, z_src, z_dst = project_heads(self, feat, graph)
            graph.srcdata.update({"ft": z_src, "el": (z_src * self.attn_l).sum(dim=-1).unsqueeze(-1)})
            graph.dstdata.update({"er": (z_dst * self.attn_r).sum(dim=-1).unsqueeze(-1)})
            graph.apply_edges(fn.u_add_v("el", "er", "e"))
            e = self.leaky_relu(graph.edata.pop("e"))
            graph.edata["a"] = self.attn_drop(edge_softmax(graph, e))
            if edge_weight is not None:
                graph.edata["a"] = graph.edata["a"] * edge_weight.tile(1, self._num_heads, 1).transpose(0, 2)
            graph.update_all(fn.u_mul_e("ft", "a", "m"), fn.sum("m", "ft"))
            rst = graph.dstdata["ft"]
            lead = h_dst.shape[:-1]
            if self.res_fc is not None:
                rst = rst + self.res_fc(h_dst).view(*lead, -1, self._out_feats)
            if self.has_explicit_bias:
                rst = rst + self.bias.view(*((1,) * len(lead)), self._num_heads, self._out_feats)
            if self.activation:
                rst = self.activation(rst)
            return (rst, graph.edata["a"]) if get_attention else rst
