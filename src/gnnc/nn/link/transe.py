"""DGL's ``TransE`` score (Bordes et al., 2013)."""

from __future__ import annotations

import torch
from torch import nn


class TransE(nn.Module):
    """DGL 2.1's ``TransE``: ``-|| h_head + r_rel - h_tail ||_p`` per triple, ``r`` from ``rel_emb``."""

    def __init__(self, num_rels, feats, p=1):
        super().__init__()
        self.rel_emb = nn.Embedding(num_rels, feats)
        self.p = p

    def reset_parameters(self):
        """A fresh normal draw of the relation embeddings (``nn.Embedding``'s)."""
        self.rel_emb.reset_parameters()

    def forward(self, h_head, h_tail, rels):
        return -torch.norm(h_head + self.rel_emb(rels) - h_tail, p=self.p, dim=-1)
