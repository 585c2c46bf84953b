"""DGL's ``GroupRevRes``: grouped reversible residual connections (Li et al., 2021)."""

from __future__ import annotations

from copy import deepcopy

import torch
from torch import nn


class GroupRevRes(nn.Module):
    """DGL 2.1's ``GroupRevRes`` around ``gnn_module`` (called as ``module(g, x, *args)``, ``groups`` copies in
    ``gnn_modules``): the features and each extra argument split into ``groups`` chunks along the last dim,

        y_0 = x_0 + f_0(g, x_1 + ... + x_{G-1}),   y_i = x_i + f_i(g, y_{i-1}),   out = [y_0, ..., y_{G-1}]

    The numbers and gradients are DGL's; DGL also frees the input's storage after the forward pass and
    recomputes it by inversion in the backward pass to save memory, where gnnc keeps autograd's activations
    (the input tensor stays intact).
    """

    def __init__(self, gnn_module, groups=2):
        super().__init__()
        self.gnn_modules = nn.ModuleList([gnn_module] + [deepcopy(gnn_module) for _ in range(groups - 1)])
        self.groups = groups

    def forward(self, g, x, *args):
        xs = torch.chunk(x, self.groups, dim=-1)
        arg_chunks = list(zip(*(torch.chunk(a, self.groups, dim=-1) for a in args))) or [()] * self.groups
        y = sum(xs[1:])
        ys = []
        for i in range(self.groups):
            y = xs[i] + self.gnn_modules[i](g, y, *arg_chunks[i])
            ys.append(y)
        return torch.cat(ys, dim=-1)
