"""DGL's ``DegreeEncoder``: Graphormer's learned degree embeddings (Ying et al., 2021)."""

from __future__ import annotations

import torch
from torch import nn


class DegreeEncoder(nn.Module):
    """DGL 2.1's ``DegreeEncoder``: degrees clamped to ``[0, max_degree]`` and embedded (0, padding, embeds to
    zeros). ``direction`` ``"in"`` or ``"out"``: ``[batch, nodes]`` degrees through ``encoder``; ``"both"``:
    ``[2, batch, nodes]`` (in, out) through ``encoder1`` and ``encoder2``, summed."""

    def __init__(self, max_degree, embedding_dim, direction="both"):
        super().__init__()
        self.direction, self.max_degree = direction, max_degree
        if direction == "both":
            self.encoder1 = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)
            self.encoder2 = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)
        else:
            self.encoder = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)

    def forward(self, degrees):
        degrees = torch.clamp(degrees, min=0, max=self.max_degree)
        if self.direction in ("in", "out"):
            assert degrees.dim() == 2
            return self.encoder(degrees)
        if self.direction == "both":
            assert degrees.dim() == 3 and degrees.shape[0] == 2
            return self.encoder1(degrees[0]) + self.encoder2(degrees[1])
        raise ValueError(f'Supported direction options: "in", "out" and "both", but got {self.direction}')
