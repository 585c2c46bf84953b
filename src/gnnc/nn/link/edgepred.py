"""DGL's ``EdgePredictor``: a score per node pair from the two ends' representations."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_OPS = ("dot", "cos", "ele", "cat")


class EdgePredictor(nn.Module):
    """DGL 2.1's ``EdgePredictor``: for ``[pairs, D]`` source and destination rows, ``"dot"`` (``[pairs, 1]``
    inner products), ``"cos"`` (cosine similarities), ``"ele"`` (element-wise products) or ``"cat"``
    (concatenations), then ``linear`` to ``out_feats`` when both ``in_feats`` and ``out_feats`` are given."""

    def __init__(self, op, in_feats=None, out_feats=None, bias=False):
        super().__init__()
        assert op in _OPS, f"Expect op to be in ['dot', 'cos', 'ele', 'cat'], got {op}"
        self.op = op
        if in_feats is not None and out_feats is not None:
            width = {"dot": 1, "cos": 1, "cat": 2 * in_feats}.get(op, in_feats)
            self.linear = nn.Linear(width, out_feats, bias=bias)
        else:
            self.linear = None

    def reset_parameters(self):
        """The linear layer's own reset, where there is one."""
        if self.linear is not None:
            self.linear.reset_parameters()

    def forward(self, h_src, h_dst):
        if self.op == "dot":
            pairs, width = h_src.shape
            h = torch.bmm(h_src.view(pairs, 1, width), h_dst.view(pairs, width, 1)).squeeze(-1)
        elif self.op == "cos":
            h = F.cosine_similarity(h_src, h_dst).unsqueeze(-1)
        elif self.op == "ele":
            h = h_src * h_dst
        else:
            h = torch.cat([h_src, h_dst], dim=-1)
        return h if self.linear is None else self.linear(h)
