"""DGL's ``TransR`` score (Lin et al., 2015)."""

from __future__ import annotations

import torch
from torch import nn


class TransR(nn.Module):
    """DGL 2.1's ``TransR``: ``-|| h_head M_rel + r_rel - h_tail M_rel ||_p`` per triple, with ``r`` from
    ``rel_emb`` (``rfeats`` wide) and the ``[nfeats, rfeats]`` projection ``M`` from ``rel_project``."""

    def __init__(self, num_rels, rfeats, nfeats, p=1):
        super().__init__()
        self.rel_emb = nn.Embedding(num_rels, rfeats)
        self.rel_project = nn.Embedding(num_rels, nfeats * rfeats)
        self.rfeats, self.nfeats, self.p = rfeats, nfeats, p

    def reset_parameters(self):
        """Fresh normal draws of both embeddings (``nn.Embedding``'s)."""
        self.rel_emb.reset_parameters()
        self.rel_project.reset_parameters()

    def forward(self, h_head, h_tail, rels):
        projection = self.rel_project(rels).reshape(-1, self.nfeats, self.rfeats)
        head = (h_head.unsqueeze(1) @ projection).squeeze(1)
        tail = (h_tail.unsqueeze(1) @ projection).squeeze(1)
        return -torch.norm(head + self.rel_emb(rels) - tail, p=self.p, dim=-1)
