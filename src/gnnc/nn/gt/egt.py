"""DGL's ``EGTLayer``: the Edge-augmented Graph Transformer layer (Hussain et al., 2022)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_ELU = nn.ELU()  # DGL's default activation: one stateless module shared by every layer


def _ffn(size, activation, dropout):
    return nn.Sequential(
        nn.LayerNorm(size), nn.Linear(size, size), activation, nn.Linear(size, size), nn.Dropout(dropout)
    )


class EGTLayer(nn.Module):
    """DGL 2.1's ``EGTLayer`` over padded node features ``[batch, n, feat_size]`` and pair (edge) features
    ``[batch, n, n, edge_feat_size]``: multi-head attention whose scores ``clamp(q . k, -5, 5)`` take an
    edge bias (``edge_input``) and whose weights are gated by ``sigmoid(gate(e))``, ``mask`` (``[batch, n, n]``,
    added: -inf or a large negative where a pair must not attend) added to both; the attended values scaled by
    ``log(1 + sum of gates)`` (1 for the first ``num_virtual_nodes`` nodes), ``node_output``, residual,
    ``node_ffn``, residual. With ``edge_update`` the scores go through ``edge_output``, residual,
    ``edge_ffn``, residual, and ``(nodes, edges)`` is returned. The q, k, v projection (``qkv_proj``) is laid
    out ``[3 * head_dim, num_heads]``, heads innermost, as DGL's.
    """

    def __init__(
        self,
        feat_size,
        edge_feat_size,
        num_heads,
        num_virtual_nodes,
        dropout=0,
        attn_dropout=0,
        activation=_ELU,
        edge_update=True,
    ):
        super().__init__()
        assert feat_size % num_heads == 0, "feat_size must be divisible by num_heads"
        self.num_heads, self.num_virtual_nodes, self.edge_update = num_heads, num_virtual_nodes, edge_update
        self.dot_dim = feat_size // num_heads
        self.mha_ln_h = nn.LayerNorm(feat_size)
        self.mha_ln_e = nn.LayerNorm(edge_feat_size)
        self.edge_input = nn.Linear(edge_feat_size, num_heads)
        self.qkv_proj = nn.Linear(feat_size, feat_size * 3)
        self.gate = nn.Linear(edge_feat_size, num_heads)
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.node_output = nn.Linear(feat_size, feat_size)
        self.mha_dropout_h = nn.Dropout(dropout)
        self.node_ffn = _ffn(feat_size, activation, dropout)
        if edge_update:
            self.edge_output = nn.Linear(num_heads, edge_feat_size)
            self.mha_dropout_e = nn.Dropout(dropout)
            self.edge_ffn = _ffn(edge_feat_size, activation, dropout)

    def forward(self, nfeat, efeat, mask=None):
        efeat_ln = self.mha_ln_e(efeat)
        qkv = self.qkv_proj(self.mha_ln_h(nfeat))
        batch, n, _ = qkv.shape
        q, k, v = qkv.view(batch, n, -1, self.num_heads).split(self.dot_dim, dim=2)
        scores = torch.einsum("bldh,bmdh->blmh", q, k).clamp(-5, 5) + self.edge_input(efeat_ln)
        gates = self.gate(efeat_ln)
        if mask is None:
            gates = torch.sigmoid(gates)
            weights = F.softmax(scores, dim=2) * gates
        else:
            gates = torch.sigmoid(gates + mask.unsqueeze(-1))
            weights = F.softmax(scores + mask.unsqueeze(-1), dim=2) * gates
        attended = torch.einsum("blmh,bmkh->blkh", self.attn_dropout(weights), v)
        scalers = torch.log(1 + torch.sum(gates, dim=2, keepdim=True))
        scalers[:, : self.num_virtual_nodes] = 1.0
        attended = (attended * scalers).reshape(batch, n, self.num_heads * self.dot_dim)
        nfeat = self.mha_dropout_h(self.node_output(attended)) + nfeat
        nfeat = self.node_ffn(nfeat) + nfeat
        if not self.edge_update:
            return nfeat
        efeat = self.mha_dropout_e(self.edge_output(scores)) + efeat
        return nfeat, self.edge_ffn(efeat) + efeat
