"""DGL's ``GATv2Conv`` (Brody et al., 2022) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from ..utils import Identity
from .common import check_in_degrees, is_block


class GATv2Conv(nn.Module):
    """GATv2 attention, DGL 2.1's ``GATv2Conv``. Per head k, with ``s = fc_src(feat_drop(x))``,
    ``t = fc_dst(feat_drop(x))`` (the same Linear with ``share_weights``):

        e_uv  = < attn_k, LeakyReLU(s_u + t_v) >
        a_uv  = attn_drop( softmax of e_uv over the in-edges of v )
        out_v = act( sum_{u->v} a_uv s_u + res_fc(x_v) )

    ``bias`` is the Linears' biases (no separate bias parameter, as DGL's). Returns ``[N_dst, H, D]``, and the
    attention ``[E, H, 1]`` with ``get_attention``. A zero in-degree node raises DGL's error unless
    ``allow_zero_in_degree``.
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
        share_weights=False,
    ):
        super().__init__()
        self._num_heads, self._out_feats = num_heads, out_feats
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        self.fc_src = nn.Linear(self._in_src_feats, width, bias=bias)
        if share_weights and not isinstance(in_feats, tuple):
            self.fc_dst = self.fc_src
        else:
            self.fc_dst = nn.Linear(
                self._in_dst_feats if isinstance(in_feats, tuple) else self._in_src_feats, width, bias=bias
            )
        self.attn = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        if not residual:
            self.register_buffer("res_fc", None)
        elif self._in_dst_feats != width:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias)
        else:
            self.res_fc = Identity()
        self.activation, self.share_weights, self.bias = activation, share_weights, bias
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        linears = [self.fc_src] if self.share_weights else [self.fc_src, self.fc_dst]
        for fc in linears + ([self.res_fc] if isinstance(self.res_fc, nn.Linear) else []):
            nn.init.xavier_normal_(fc.weight, gain=gain)
            if self.bias:
                nn.init.constant_(fc.bias, 0)
        nn.init.xavier_normal_(self.attn, gain=gain)

    def set_allow_zero_in_degree(self, set_value):
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, get_attention=False):
        heads = (-1, self._num_heads, self._out_feats)
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            if isinstance(feat, tuple):
                h_src, h_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
                s, t = self.fc_src(h_src).view(*heads), self.fc_dst(h_dst).view(*heads)
            else:
                h_src = h_dst = self.feat_drop(feat)
                s = self.fc_src(h_src).view(*heads)
                t = s if self.share_weights else self.fc_dst(h_dst).view(*heads)
                if is_block(graph):
                    t, h_dst = t[: graph.number_of_dst_nodes()], h_dst[: graph.number_of_dst_nodes()]
            graph.srcdata.update({"el": s})
            graph.dstdata.update({"er": t})
            graph.apply_edges(fn.u_add_v("el", "er", "e"))
            e = self.leaky_relu(graph.edata.pop("e"))
            e = (e * self.attn).sum(dim=-1).unsqueeze(dim=2)
            graph.edata["a"] = self.attn_drop(edge_softmax(graph, e))
            graph.update_all(fn.u_mul_e("el", "a", "m"), fn.sum("m", "ft"))
            rst = graph.dstdata["ft"]
            if self.res_fc is not None:
                rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, self._out_feats)
            if self.activation:
                rst = self.activation(rst)
            return (rst, graph.edata["a"]) if get_attention else rst
