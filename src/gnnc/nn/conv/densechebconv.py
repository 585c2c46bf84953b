"""DGL's ``DenseChebConv``: Chebyshev spectral convolution over a dense adjacency matrix, with DGL 2.1's
constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn


class DenseChebConv(nn.Module):
    """``ChebConv`` on ``adj`` (``[destinations, sources]``, square):

        L = I - D^{-1/2} adj D^{-1/2},  L^ = 2 L / lambda_max - I,  Z_0 = I, Z_1 = L^, Z_i = 2 L^ Z_{i-1} - Z_{i-2}
        out = sum_i Z_i feat W[i] + b

    ``D`` holds the row sums (at least 1); ``W`` is ``[k, in_feats, out_feats]``. Without ``lambda_max`` it is
    L's largest eigenvalue (real part), which DGL 2.1 asks of ``torch.eig``, gone from current torch.
    """

    def __init__(self, in_feats, out_feats, k, bias=True):
        super().__init__()
        self._in_feats, self._out_feats, self._k = in_feats, out_feats, k
        self.W = nn.Parameter(torch.empty(k, in_feats, out_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Zero bias and Xavier-normal ``W[i]`` with ReLU's gain, as DGL's."""
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        for i in range(self._k):
            nn.init.xavier_normal_(self.W[i], nn.init.calculate_gain("relu"))

    def forward(self, adj, feat, lambda_max=None):
        adj = adj.to(feat)
        eye = torch.eye(adj.shape[0]).to(adj)
        d_inv_sqrt = torch.diag(1 / adj.sum(dim=1).clamp(min=1).sqrt())
        laplacian = eye - d_inv_sqrt @ adj @ d_inv_sqrt
        if lambda_max is None:
            lambda_max = torch.linalg.eigvals(laplacian).real.max()
        scaled = 2 * laplacian / lambda_max - eye
        powers = [eye]
        for i in range(1, self._k):
            powers.append(scaled if i == 1 else 2 * scaled @ powers[-1] - powers[-2])
        out = (torch.stack(powers, 0) @ feat.unsqueeze(0) @ self.W).sum(0)
        return out if self.bias is None else out + self.bias
