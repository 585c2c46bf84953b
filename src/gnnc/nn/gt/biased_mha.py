"""DGL's ``BiasedMHA``: dense multi-head attention with an attention bias (Graphormer, Ying et al., 2021)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BiasedMHA(nn.Module):
    """DGL 2.1's ``BiasedMHA`` over a padded batch ``ndata`` (``[batch, nodes, feat_size]``)::

        a[b, i, j, h] = softmax_j( (q_i . k_j) / sqrt(head_dim) (+ or *) attn_bias[b, i, j, h] ),  masked -> -inf
        out[b, i] = out_proj( concat_h sum_j dropout(a[b, i, j, h]) v_j )

    ``attn_bias_type`` ``"add"`` or ``"mul"``; ``attn_mask`` (``[batch, nodes, nodes]``) is True where a pair
    must not attend. ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` are DGL's linear layers.
    """

    def __init__(self, feat_size, num_heads, bias=True, attn_bias_type="add", attn_drop=0.1):
        super().__init__()
        self.feat_size, self.num_heads = feat_size, num_heads
        self.head_dim = feat_size // num_heads
        assert self.head_dim * num_heads == feat_size, "feat_size must be divisible by num_heads"
        self.scaling = self.head_dim**-0.5
        self.attn_bias_type = attn_bias_type
        self.q_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.k_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.v_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.out_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.dropout = nn.Dropout(p=attn_drop)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform projections (gain 1/sqrt(2) for q, k, v) and a zero output bias, as DGL's."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=2**-0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)

    def forward(self, ndata, attn_bias=None, attn_mask=None):
        batch, nodes, _ = ndata.shape
        heads = (batch, nodes, self.num_heads, self.head_dim)
        q = self.q_proj(ndata).view(heads) * self.scaling
        k = self.k_proj(ndata).view(heads)
        v = self.v_proj(ndata).view(heads)
        scores = torch.einsum("bihd,bjhd->bijh", q, k)
        if attn_bias is not None:
            scores = scores + attn_bias if self.attn_bias_type == "add" else scores * attn_bias
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask.to(torch.bool).unsqueeze(-1), float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=2))
        attn = torch.einsum("bijh,bjhd->bihd", weights, v)
        return self.out_proj(attn.reshape(batch, nodes, self.feat_size))
