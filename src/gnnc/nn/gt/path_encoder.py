"""DGL's ``PathEncoder``: Graphormer's attention bias from the edges along shortest paths (Ying et al.,
2021)."""

from __future__ import annotations

import torch
from torch import nn


class PathEncoder(nn.Module):
    """DGL 2.1's ``PathEncoder``: for ``dist`` (``[batch, n, n]``) and the features of the first ``max_len``
    edges of each pair's shortest path ``path_data`` (``[batch, n, n, max_len, feat_dim]``, zeros past the
    path's end),

        out[b, x, y, h] = sum_l path_data[b, x, y, l] . w[l, h] / clamp(dist[b, x, y], 1, max_len)

    with ``w`` the ``embedding_table`` weight seen as ``[max_len, num_heads, feat_dim]``.
    """

    def __init__(self, max_len, feat_dim, num_heads=1):
        super().__init__()
        self.max_len, self.feat_dim, self.num_heads = max_len, feat_dim, num_heads
        self.embedding_table = nn.Embedding(max_len * num_heads, feat_dim)

    def forward(self, dist, path_data):
        length = torch.clamp(dist, min=1, max=self.max_len)
        weight = self.embedding_table.weight.reshape(self.max_len, self.num_heads, -1)
        return torch.einsum("bxyld,lhd->bxyh", path_data, weight) / length.unsqueeze(-1)
