"""What DGL's edge-kernel convolutions (NNConv, GMMConv) share: the aggregator by name, the optional
residual projection and bias, and their addition to the aggregate."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from ..utils import Identity

REDUCERS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}


def reducer(aggregator_type, message):
    """DGL's reducer for ``aggregator_type`` (sum, mean, max); KeyError for another, with ``message``."""
    if aggregator_type not in REDUCERS:
        raise KeyError(message.format(aggregator_type))
    return REDUCERS[aggregator_type]


def add_residual_and_bias(layer, in_dst_feats, out_feats, residual, bias) -> None:
    """``layer.res_fc`` (a bias-free Linear when the widths differ, else Identity; None without ``residual``)
    and ``layer.bias`` (``[out_feats]``, None without ``bias``), registered as DGL's."""
    if not residual:
        layer.register_buffer("res_fc", None)
    elif in_dst_feats != out_feats:
        layer.res_fc = nn.Linear(in_dst_feats, out_feats, bias=False)
    else:
        layer.res_fc = Identity()
    if bias:
        layer.bias = nn.Parameter(torch.empty(out_feats))
    else:
        layer.register_buffer("bias", None)


def finish(layer, rst, feat_dst):
    """``rst + res_fc(feat_dst) + bias``, each where the layer has it."""
    if layer.res_fc is not None:
        rst = rst + layer.res_fc(feat_dst)
    if layer.bias is not None:
        rst = rst + layer.bias
    return rst
