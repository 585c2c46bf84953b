"""DGL's ``DenseGraphConv``: GraphConv over a dense adjacency matrix, with DGL 2.1's constructor, parameters
and numbers."""

from __future__ import annotations

import torch
from torch import nn


def _rows(norm: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return norm.reshape(norm.shape + (1,) * (like.dim() - 1))


class DenseGraphConv(nn.Module):
    """Kipf and Welling's graph convolution on ``adj`` (``[destinations, sources]``, DGL's
    ``g.adj_external(transpose=True).to_dense()``), the same function as ``GraphConv`` on that graph:

        out = act( D_dst^{-p} adj D_src^{-q} feat W + b )

    ``norm``: ``"both"`` (p = q = 1/2), ``"right"`` (p = 1, q = 0) or ``"none"``; degrees are the matrix's row
    and column sums, at least 1. ``weight`` is ``[in_feats, out_feats]`` as DGL's.
    """

    def __init__(self, in_feats, out_feats, norm="both", bias=True, activation=None):
        super().__init__()
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()
        self._activation = activation

    def reset_parameters(self):
        """Xavier-uniform weight and zero bias, as DGL's."""
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, adj, feat):
        adj = adj.to(feat)
        h = feat
        if self._norm == "both":
            h = h * _rows(adj.sum(dim=0).clamp(min=1).pow(-0.5), feat)
        # the narrower side of the weight goes through the aggregation, as DGL orders the products
        if self._in_feats > self._out_feats:
            out = adj @ torch.matmul(h, self.weight)
        else:
            out = torch.matmul(adj @ h, self.weight)
        if self._norm != "none":
            dst_degrees = adj.sum(dim=1).clamp(min=1)
            out = out * _rows(dst_degrees.pow(-0.5) if self._norm == "both" else 1.0 / dst_degrees, feat)
        if self.bias is not None:
            out = out + self.bias
        return out if self._activation is None else self._activation(out)
