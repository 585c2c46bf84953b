"""DGL's ``EGATConv`` (graph attention with edge features, Kaminski et al., 2021) with its constructor,
parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from .common import check_in_degrees


class EGATConv(nn.Module):
    """Graph attention that also updates edge features, DGL 2.1's ``EGATConv``. Per head k:

        f_uv  = LeakyReLU( fc_ni(x_u) + fc_nj(x_v) + fc_fij(f_uv) + bias )      the new edge feature
        a_uv  = softmax of <attn_k, f_uv> over the in-edges of v, times ``edge_weight`` when given
        out_v = sum_{u->v} a_uv fc_node_src(x_u)

    Returns ``(out [N_dst, H, D_node], f [E, H, D_edge])`` and the attention ``[E, H, 1]`` with
    ``get_attention``. ``nfeats`` may be a ``(source, destination)`` pair (``in_node_feats`` a pair). A graph
    with a zero in-degree node raises DGL's error.
    """

    def __init__(self, in_node_feats, in_edge_feats, out_node_feats, out_edge_feats, num_heads, bias=True):
        super().__init__()
        self._num_heads, self._out_node_feats, self._out_edge_feats = num_heads, out_node_feats, out_edge_feats
        in_src, in_dst = in_node_feats if isinstance(in_node_feats, tuple) else (in_node_feats, in_node_feats)
        self._in_src_node_feats, self._in_dst_node_feats = in_src, in_dst
        self.fc_node_src = nn.Linear(in_src, out_node_feats * num_heads, bias=False)
        self.fc_ni = nn.Linear(in_src, out_edge_feats * num_heads, bias=False)
        self.fc_nj = nn.Linear(in_dst, out_edge_feats * num_heads, bias=False)
        self.fc_fij = nn.Linear(in_edge_feats, out_edge_feats * num_heads, bias=False)
        self.attn = nn.Parameter(torch.empty(1, num_heads, out_edge_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(num_heads * out_edge_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc_node_src, self.fc_ni, self.fc_fij, self.fc_nj):
            nn.init.xavier_normal_(fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn, gain=gain)
        if self.bias is not None:
            nn.init.constant_(self.bias, 0)

    def forward(self, graph, nfeats, efeats, edge_weight=None, get_attention=False):
        with graph.local_scope():
            check_in_degrees(graph, False)
            x_src, x_dst = nfeats if isinstance(nfeats, tuple) else (nfeats, nfeats)
            graph.srcdata["f_ni"] = self.fc_ni(x_src)
            graph.dstdata["f_nj"] = self.fc_nj(x_dst)
            graph.apply_edges(fn.u_add_v("f_ni", "f_nj", "f_tmp"))
            f_out = graph.edata.pop("f_tmp") + self.fc_fij(efeats)
            if self.bias is not None:
                f_out = f_out + self.bias
            f_out = nn.functional.leaky_relu(f_out).view(-1, self._num_heads, self._out_edge_feats)
            attention = edge_softmax(graph, (f_out * self.attn).sum(dim=-1, keepdim=True))
            if edge_weight is not None:
                attention = attention * edge_weight.view(-1, 1, 1)
            graph.edata["a"] = attention
            graph.srcdata["h_out"] = self.fc_node_src(x_src).view(-1, self._num_heads, self._out_node_feats)
            graph.update_all(fn.u_mul_e("h_out", "a", "m"), fn.sum("m", "h_out"))
            h_out = graph.dstdata["h_out"].view(-1, self._num_heads, self._out_node_feats)
            return (h_out, f_out, attention) if get_attention else (h_out, f_out)
