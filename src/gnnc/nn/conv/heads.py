"""What DGL's multi-head attention convolutions (GATConv, EdgeGATConv, DotGatConv) share: their per-head
projections of the inputs (parameters, initialisation, use) and GAT's attention vectors."""

from __future__ import annotations

import torch
from torch import nn

from .common import is_block


def add_projections(layer, in_feats, out_feats, num_heads) -> None:
    """DGL's head attributes on ``layer``: ``_num_heads``, ``_out_feats``, ``_in_src_feats``/``_in_dst_feats``
    and the bias-free Linear ``fc`` to ``num_heads * out_feats``, or ``fc_src``/``fc_dst`` for ``in_feats`` a
    pair."""
    layer._num_heads, layer._out_feats = num_heads, out_feats
    layer._in_src_feats, layer._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
    width = out_feats * num_heads
    if isinstance(in_feats, tuple):
        layer.fc_src = nn.Linear(layer._in_src_feats, width, bias=False)
        layer.fc_dst = nn.Linear(layer._in_dst_feats, width, bias=False)
    else:
        layer.fc = nn.Linear(layer._in_src_feats, width, bias=False)


def add_gat_attention(layer, in_feats, out_feats, num_heads, feat_drop, attn_drop, negative_slope) -> None:
    """``add_projections``, then GAT's ``attn_l``/``attn_r`` ``[1, H, D]``, ``feat_drop``, ``attn_drop`` and
    ``leaky_relu`` on ``layer``."""
    add_projections(layer, in_feats, out_feats, num_heads)
    layer.attn_l = nn.Parameter(torch.empty(1, layer._num_heads, layer._out_feats))
    layer.attn_r = nn.Parameter(torch.empty(1, layer._num_heads, layer._out_feats))
    layer.feat_drop = nn.Dropout(feat_drop)
    layer.attn_drop = nn.Dropout(attn_drop)
    layer.leaky_relu = nn.LeakyReLU(negative_slope)


def init_gat_attention(layer, gain) -> None:
    """DGL's initialisation of what ``add_projections`` and ``add_gat_attention`` made: Xavier normal."""
    for fc in (getattr(layer, name, None) for name in ("fc", "fc_src", "fc_dst")):
        if fc is not None:
            nn.init.xavier_normal_(fc.weight, gain=gain)
    nn.init.xavier_normal_(layer.attn_l, gain=gain)
    nn.init.xavier_normal_(layer.attn_r, gain=gain)


def project_heads(layer, feat, graph):
    """``(h_dst, z_src, z_dst)`` of DGL's attention layers: the dropped-out destination input and both sides'
    ``[*, H, D]`` projections, by ``layer.fc`` or, for a pair of inputs, ``layer.fc_src``/``layer.fc_dst`` where
    the layer has them; one tensor on a block is cut to the destination rows."""
    heads = (layer._num_heads, layer._out_feats)
    if isinstance(feat, tuple):
        h_src, h_dst = layer.feat_drop(feat[0]), layer.feat_drop(feat[1])
        fc_src, fc_dst = (layer.fc, layer.fc) if hasattr(layer, "fc") else (layer.fc_src, layer.fc_dst)
        return h_dst, fc_src(h_src).view(*h_src.shape[:-1], *heads), fc_dst(h_dst).view(*h_dst.shape[:-1], *heads)
    h_src = h_dst = layer.feat_drop(feat)
    z_src = z_dst = layer.fc(h_src).view(*h_src.shape[:-1], *heads)
    if is_block(graph):
        rows = graph.number_of_dst_nodes()
        z_dst, h_dst = z_src[:rows], h_dst[:rows]
    return h_dst, z_src, z_dst
