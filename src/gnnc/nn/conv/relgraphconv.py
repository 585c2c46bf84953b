"""DGL's ``RelGraphConv`` (Schlichtkrull et al., 2018) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ..linear import TypedLinear


class RelGraphConv(nn.Module):
    """Relational graph convolution on a graph whose edges carry a type id, DGL 2.1's ``RelGraphConv``:

        h_v = dropout( act( bias + LN( sum_{u->v} norm_uv x_u W_{etype(uv)} ) + x_v W_loop ) )

    (LN with ``layer_norm``, ``x_v W_loop`` with ``self_loop``.) ``W`` is a ``TypedLinear`` (``linear_r``,
    regularizer ``None``, ``'basis'`` or ``'bdd'``), the others ``h_bias``, ``loop_weight``,
    ``layer_norm_weight`` as DGL's. ``forward(g, feat, etypes, norm=None, *, presorted=False)``: ``etypes``
    ``[E]`` type ids in edge order, ``norm`` ``[E, 1]`` edge factors; ``presorted``: edges come sorted by type.
    """

    def __init__(
        self,
        in_feat,
        out_feat,
        num_rels,
        regularizer=None,
        num_bases=None,
        bias=True,
        activation=None,
        self_loop=True,
        dropout=0.0,
        layer_norm=False,
    ):
        super().__init__()
        if regularizer is not None and num_bases is None:
            num_bases = num_rels
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias, self.activation, self.self_loop, self.layer_norm = bias, activation, self_loop, layer_norm
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)
        self.presorted = False

    def message(self, edges):
        # row by row, so that gnnc's compiler fuses the typed product (DGL's presorted order changes no number)
        m = self.linear_r.rowwise(edges.src["h"], edges.data["etype"])
        if "norm" in edges.data:
            m = m * edges.data["norm"]
        return {"m": m}

    def forward(self, g, feat, etypes, norm=None, *, presorted=False):
        self.presorted = presorted
        with g.local_scope():
            g.srcdata["h"] = feat
            if norm is not None:
                g.edata["norm"] = norm
            g.edata["etype"] = etypes
            g.update_all(self.message, fn.sum("m", "h"))
            h = g.dstdata["h"]
            if self.layer_norm:
                h = self.layer_norm_weight(h)
            if self.bias:
                h = h + self.h_bias
            if self.self_loop:
                h = h + feat[: g.num_dst_nodes()] @ self.loop_weight
            if self.activation:
                h = self.activation(h)
            return self.dropout(h)
