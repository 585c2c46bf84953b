"""DGL's ``SpatialEncoder`` and ``SpatialEncoder3d``: Graphormer's attention biases from shortest-path
distances (Ying et al., 2021) and from 3D distances (Shi et al., 2022)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _gaussian(x, mean, std):
    """The normal density, with DGL's pi (3.14159, so the numbers agree)."""
    return torch.exp(-0.5 * ((x - mean) / std) ** 2) / ((2 * 3.14159) ** 0.5 * std)


class SpatialEncoder(nn.Module):
    """DGL 2.1's ``SpatialEncoder``: ``[batch, n, n]`` shortest-path distances (-1 unreachable or padding)
    clamped to ``[-1, max_dist]`` and embedded per head (``embedding_table``; -1 embeds to zeros):
    ``[batch, n, n, num_heads]``."""

    def __init__(self, max_dist, num_heads=1):
        super().__init__()
        self.max_dist, self.num_heads = max_dist, num_heads
        self.embedding_table = nn.Embedding(max_dist + 2, num_heads, padding_idx=0)

    def forward(self, dist):
        return self.embedding_table(torch.clamp(dist, min=-1, max=self.max_dist) + 1)


class SpatialEncoder3d(nn.Module):
    """DGL 2.1's ``SpatialEncoder3d``: for coordinates ``[batch, n, 3]`` and the pair distance ``d_ij``::

        k_ij = gaussian(gamma_ij d_ij + beta_ij; means, |stds| + 0.01)      (``num_kernels`` kernels)
        out_ij = linear_layer_2(gelu(linear_layer_1(k_ij)))                  ``[batch, n, n, num_heads]``

    ``gamma_ij`` and ``beta_ij`` sum the embeddings of the pair's two node types (source ``t + 2``,
    target ``t + max_node_type + 3``); without ``node_type`` both embed index 0 (padding: 1 and 0 at start).
    """

    def __init__(self, num_kernels, num_heads=1, max_node_type=100):
        super().__init__()
        self.num_kernels, self.num_heads, self.max_node_type = num_kernels, num_heads, max_node_type
        self.means = nn.Parameter(torch.empty(num_kernels))
        self.stds = nn.Parameter(torch.empty(num_kernels))
        self.linear_layer_1 = nn.Linear(num_kernels, num_kernels)
        self.linear_layer_2 = nn.Linear(num_kernels, num_heads)
        self.gamma = nn.Embedding(2 * max_node_type + 3, 1, padding_idx=0)
        self.beta = nn.Embedding(2 * max_node_type + 3, 1, padding_idx=0)
        nn.init.uniform_(self.means, 0, 3)
        nn.init.uniform_(self.stds, 0, 3)
        nn.init.constant_(self.gamma.weight, 1)
        nn.init.constant_(self.beta.weight, 0)

    def forward(self, coord, node_type=None):
        batch, n = coord.shape[:2]
        dist = torch.cdist(coord, coord, p=2.0)
        if node_type is None:
            pair_types = torch.zeros([batch, n, n, 2], device=coord.device).long()
        else:
            src = node_type.unsqueeze(-1).repeat(1, 1, n)
            dst = node_type.unsqueeze(1).repeat(1, n, 1)
            pair_types = torch.stack([src + 2, dst + self.max_node_type + 3], dim=-1)
        gamma = self.gamma(pair_types).sum(dim=-2)
        beta = self.beta(pair_types).sum(dim=-2)
        scaled = (gamma * dist.unsqueeze(-1) + beta).expand(-1, -1, -1, self.num_kernels)
        kernels = _gaussian(scaled, self.means, self.stds.abs() + 1e-2)
        return self.linear_layer_2(F.gelu(self.linear_layer_1(kernels)))
