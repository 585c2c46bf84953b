"""DGL's ``HGTConv`` (Hu et al., 2020) over a graph whose node and edge types are given as tensors, as gnnc
message passing. (``gnnc.models.HGTConv`` is the heterograph layer of DGL's HGT example: typed biases, one
weight tensor per role, the types taken from the graph; another parameterisation, so not shared.)"""

from __future__ import annotations

import math

import torch
from torch import nn

from ... import function as fn
from ...ops import edge_softmax
from ..linear import TypedLinear
from .common import is_block


class HGTConv(nn.Module):
    """DGL 2.1's ``HGTConv``: with ``tau`` the node types (``ntype``), ``phi`` the edge types (``etype``) and
    ``H`` heads of ``head_size``,

        k_u, v_u = linear_k/v[tau(u)] x_u,  q_v = linear_q[tau(v)] x_v     (``TypedLinear``, no bias)
        a_e^i = (relation_att[i][phi(e)] k_u^i) . q_v^i * relation_pri[i][phi(e)] / sqrt(head_size)
        h_v = concat_i sum_{e = u -> v} softmax_{e -> v}(a_e^i) relation_msg[i][phi(e)] v_u^i
        out_v = s drop(linear_a[tau(v)] h_v) + (1 - s) x_v (W_res),   s = sigmoid(skip[tau(v)])

    ``W_res`` (``residual_w``) only when ``in_size != head_size * num_heads``; ``norm`` (LayerNorm) last with
    ``use_norm``. On a block the destination nodes are the first rows of ``x`` and ``ntype``. ``presorted``
    (rows grouped by type) changes how the typed products run, not their numbers.
    """

    def __init__(self, in_size, head_size, num_heads, num_ntypes, num_etypes, dropout=0.2, use_norm=False):
        super().__init__()
        self.in_size, self.head_size, self.num_heads = in_size, head_size, num_heads
        self.sqrt_d = math.sqrt(head_size)
        self.use_norm = use_norm
        width = head_size * num_heads
        self.linear_k = TypedLinear(in_size, width, num_ntypes)
        self.linear_q = TypedLinear(in_size, width, num_ntypes)
        self.linear_v = TypedLinear(in_size, width, num_ntypes)
        self.linear_a = TypedLinear(width, width, num_ntypes)
        self.relation_pri = nn.ParameterList([nn.Parameter(torch.ones(num_etypes)) for _ in range(num_heads)])
        self.relation_att = nn.ModuleList([TypedLinear(head_size, head_size, num_etypes) for _ in range(num_heads)])
        self.relation_msg = nn.ModuleList([TypedLinear(head_size, head_size, num_etypes) for _ in range(num_heads)])
        self.skip = nn.Parameter(torch.ones(num_ntypes))
        self.drop = nn.Dropout(dropout)
        if use_norm:
            self.norm = nn.LayerNorm(width)
        if in_size != width:
            self.residual_w = nn.Parameter(torch.empty(in_size, width))
            nn.init.xavier_uniform_(self.residual_w)

    def message(self, edges):
        """Per head, the attention score ``a`` and the message ``m`` of each edge."""
        etype = edges.data["etype"]
        k, q, v = edges.src["k"], edges.dst["q"], edges.src["v"]
        scores, messages = [], []
        for i in range(self.num_heads):
            kw = self.relation_att[i].rowwise(k[:, i], etype)
            scores.append((kw * q[:, i]).sum(-1) * self.relation_pri[i][etype] / self.sqrt_d)
            messages.append(self.relation_msg[i].rowwise(v[:, i], etype))
        return {"a": torch.stack(scores, dim=1), "m": torch.stack(messages, dim=1)}

    def forward(self, g, x, ntype, etype, *, presorted=False):
        x_dst, dst_ntype = x, ntype
        if is_block(g):
            x_dst, dst_ntype = x[: g.num_dst_nodes()], ntype[: g.num_dst_nodes()]
        heads = (-1, self.num_heads, self.head_size)
        with g.local_scope():
            g.srcdata["k"] = self.linear_k(x, ntype, presorted).view(heads)
            g.dstdata["q"] = self.linear_q(x_dst, dst_ntype, presorted).view(heads)
            g.srcdata["v"] = self.linear_v(x, ntype, presorted).view(heads)
            g.edata["etype"] = etype
            g.apply_edges(self.message)
            g.edata["m"] = g.edata["m"] * edge_softmax(g, g.edata["a"]).unsqueeze(-1)
            g.update_all(fn.copy_e("m", "m"), fn.sum("m", "h"))
            h = g.dstdata["h"].view(-1, self.num_heads * self.head_size)
        h = self.drop(self.linear_a(h, dst_ntype, presorted))
        alpha = torch.sigmoid(self.skip[dst_ntype]).unsqueeze(-1)
        residual = x_dst @ self.residual_w if x_dst.shape != h.shape else x_dst
        h = h * alpha + residual * (1 - alpha)
        return self.norm(h) if self.use_norm else h
