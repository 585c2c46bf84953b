"""DGL's Set Transformer readouts (Lee et al., 2019): ``SetTransformerEncoder`` and ``SetTransformerDecoder``
with their blocks, over the node sets of a batched graph."""

from __future__ import annotations

import math

import torch
from torch import nn


def _pad(rows, lengths, longest):
    """Packed rows ``[sum(lengths), ...]`` as ``[batch, longest, ...]``, zeros past each set's end."""
    out = rows.new_zeros((len(lengths), longest) + rows.shape[1:])
    mask = torch.arange(longest, device=rows.device) < lengths.unsqueeze(1)
    out[mask] = rows
    return out, mask


def _ffn(d_model, d_ff, dropouth):
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropouth), nn.Linear(d_ff, d_model))


class MultiHeadAttention(nn.Module):
    """DGL 2.1's set attention: each query set attends over its memory set (padding masked), the projected
    result added to the queries and layer-normalised (``norm_in``), then ``ffn`` with a residual and
    ``norm_inter``. Queries and memories are packed rows with their sets' lengths. (``droph`` and ``dropa``
    exist as in DGL, which does not apply them to the attention.)"""

    def __init__(self, d_model, num_heads, d_head, d_ff, dropouth=0.0, dropouta=0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_head, self.d_ff = d_model, num_heads, d_head, d_ff
        self.proj_q = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_k = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_v = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_o = nn.Linear(num_heads * d_head, d_model, bias=False)
        self.ffn = _ffn(d_model, d_ff, dropouth)
        self.droph = nn.Dropout(dropouth)
        self.dropa = nn.Dropout(dropouta)
        self.norm_in = nn.LayerNorm(d_model)
        self.norm_inter = nn.LayerNorm(d_model)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform matrices, as DGL's (vectors keep their modules' starts)."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, x, mem, lengths_x, lengths_mem):
        lengths_x = torch.as_tensor(lengths_x, dtype=torch.int64, device=x.device)
        lengths_mem = torch.as_tensor(lengths_mem, dtype=torch.int64, device=x.device)
        longest_x, longest_mem = int(lengths_x.max()), int(lengths_mem.max())
        heads = (-1, self.num_heads, self.d_head)
        queries, mask_x = _pad(self.proj_q(x).view(heads), lengths_x, longest_x)
        keys, mask_mem = _pad(self.proj_k(mem).view(heads), lengths_mem, longest_mem)
        values, _ = _pad(self.proj_v(mem).view(heads), lengths_mem, longest_mem)
        scores = torch.einsum("bxhd,byhd->bhxy", queries, keys) / math.sqrt(self.d_head)
        valid = (mask_x.unsqueeze(2) & mask_mem.unsqueeze(1)).unsqueeze(1)  # [batch, 1, x, y]
        alpha = torch.softmax(scores.masked_fill(~valid, -float("inf")), dim=-1).masked_fill(~valid, 0.0)
        out = torch.einsum("bhxy,byhd->bxhd", alpha, values).reshape(len(lengths_x), longest_x, -1)
        x = self.norm_in(x + self.proj_o(out)[mask_x])
        return self.norm_inter(x + self.ffn(x))


class SetAttentionBlock(nn.Module):
    """DGL's SAB: a set attending over itself (``mha``)."""

    def __init__(self, d_model, num_heads, d_head, d_ff, dropouth=0.0, dropouta=0.0):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)

    def forward(self, feat, lengths):
        return self.mha(feat, feat, lengths, lengths)


class InducedSetAttentionBlock(nn.Module):
    """DGL's ISAB: ``m`` learned ``inducing_points`` attend over each set (``mha[0]``), then the set attends
    over that summary (``mha[1]``)."""

    def __init__(self, m, d_model, num_heads, d_head, d_ff, dropouth=0.0, dropouta=0.0):
        super().__init__()
        self.m, self.d_model = m, d_model
        self.inducing_points = nn.Parameter(torch.empty(m, d_model))
        self.mha = nn.ModuleList(
            [
                MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)
                for _ in range(2)
            ]
        )
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform inducing points, as DGL's."""
        nn.init.xavier_uniform_(self.inducing_points)

    def forward(self, feat, lengths):
        sizes = [self.m] * len(lengths)
        memory = self.mha[0](self.inducing_points.repeat(len(lengths), 1), feat, sizes, lengths)
        return self.mha[1](feat, memory, lengths, sizes)


class PMALayer(nn.Module):
    """DGL's PMA: ``k`` learned ``seed_vectors`` attend over each set's ``ffn`` features."""

    def __init__(self, k, d_model, num_heads, d_head, d_ff, dropouth=0.0, dropouta=0.0):
        super().__init__()
        self.k, self.d_model = k, d_model
        self.seed_vectors = nn.Parameter(torch.empty(k, d_model))
        self.mha = MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)
        self.ffn = _ffn(d_model, d_ff, dropouth)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform seed vectors, as DGL's."""
        nn.init.xavier_uniform_(self.seed_vectors)

    def forward(self, feat, lengths):
        return self.mha(self.seed_vectors.repeat(len(lengths), 1), self.ffn(feat), [self.k] * len(lengths), lengths)


class SetTransformerEncoder(nn.Module):
    """DGL 2.1's ``SetTransformerEncoder``: ``n_layers`` SAB (``block_type="sab"``) or ISAB (``"isab"``, ``m``
    inducing points) blocks over each graph's node set of a batched graph; ``[nodes, d_model]`` in and out."""

    def __init__(
        self, d_model, n_heads, d_head, d_ff, n_layers=1, block_type="sab", m=None, dropouth=0.0, dropouta=0.0
    ):
        super().__init__()
        self.n_layers, self.block_type, self.m = n_layers, block_type, m
        if block_type == "isab" and m is None:
            raise KeyError("The number of inducing points is not specified in ISAB block.")
        if block_type not in ("sab", "isab"):
            raise KeyError(f"Unrecognized block type {block_type}: we only support sab/isab")
        args = (d_model, n_heads, d_head, d_ff)
        self.layers = nn.ModuleList(
            [
                SetAttentionBlock(*args, dropouth=dropouth, dropouta=dropouta)
                if block_type == "sab"
                else InducedSetAttentionBlock(m, *args, dropouth=dropouth, dropouta=dropouta)
                for _ in range(n_layers)
            ]
        )

    def forward(self, graph, feat):
        lengths = graph.batch_num_nodes()
        for layer in self.layers:
            feat = layer(feat, lengths)
        return feat


class SetTransformerDecoder(nn.Module):
    """DGL 2.1's ``SetTransformerDecoder``: PMA with ``k`` seeds, then ``n_layers`` SABs over the seeds;
    ``[batch_size, k * d_model]``."""

    def __init__(self, d_model, num_heads, d_head, d_ff, n_layers, k, dropouth=0.0, dropouta=0.0):
        super().__init__()
        self.n_layers, self.k, self.d_model = n_layers, k, d_model
        self.pma = PMALayer(k, d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)
        self.layers = nn.ModuleList(
            [
                SetAttentionBlock(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)
                for _ in range(n_layers)
            ]
        )

    def forward(self, graph, feat):
        feat = self.pma(feat, graph.batch_num_nodes())
        for layer in self.layers:
            feat = layer(feat, [self.k] * graph.batch_size)
        return feat.view(graph.batch_size, self.k * self.d_model)
