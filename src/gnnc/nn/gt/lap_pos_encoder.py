"""DGL's ``LapPosEncoder``: learned Laplacian positional encodings (Kreuzer et al., 2021; Lim et al., 2022)."""

from __future__ import annotations

import itertools

import torch
from torch import nn


def _mlp(width_in, width, width_out, layers):
    """``layers`` Linear + ReLU pairs, ``width_in -> width -> ... -> width_out``, as DGL stacks them."""
    widths = [width_in] + [width] * (layers - 1) + [width_out]
    out = []
    for a, b in itertools.pairwise(widths):
        out += [nn.Linear(a, b), nn.ReLU()]
    return out


class LapPosEncoder(nn.Module):
    """DGL 2.1's ``LapPosEncoder``: each node's ``k`` (eigenvector entry, eigenvalue) pairs, NaN (padding) set
    to 0, optionally batch-normalised (``raw_norm``), embedded by ``linear`` and encoded as a set by
    ``pe_encoder`` (``"Transformer"``: ``num_layer`` encoder layers of ``n_head`` heads, padded pairs masked;
    ``"DeepSet"``: an MLP of ``num_layer`` layers), padded pairs zeroed, summed, then ``post_mlp``
    (``num_post_layer`` layers) when asked. ``[nodes, k]`` eigenvalues and eigenvectors in, ``[nodes, dim]``
    float32 out. Module names and shapes are DGL's.
    """

    def __init__(self, model_type, num_layer, k, dim, n_head=1, batch_norm=False, num_post_layer=0):
        super().__init__()
        self.model_type = model_type
        self.linear = nn.Linear(2, dim)
        if model_type == "Transformer":
            layer = nn.TransformerEncoderLayer(d_model=dim, nhead=n_head, batch_first=True)
            self.pe_encoder = nn.TransformerEncoder(layer, num_layers=num_layer)
        elif model_type == "DeepSet":
            if num_layer == 1:
                self.pe_encoder = nn.Sequential(nn.ReLU())
            else:  # the embedding is twice as wide, the MLP brings it down to dim
                self.linear = nn.Linear(2, 2 * dim)
                self.pe_encoder = nn.Sequential(nn.ReLU(), *_mlp(2 * dim, 2 * dim, dim, num_layer - 1))
        else:
            raise ValueError(f"model_type '{model_type}' is not allowed, must be 'Transformer' or 'DeepSet'.")
        self.raw_norm = nn.BatchNorm1d(k) if batch_norm else None
        if num_post_layer == 1:
            self.post_mlp = nn.Sequential(*_mlp(dim, dim, dim, 1))
        elif num_post_layer > 1:
            self.post_mlp = nn.Sequential(*_mlp(dim, 2 * dim, dim, num_post_layer))
        else:
            self.post_mlp = None

    def forward(self, eigvals, eigvecs):
        pairs = torch.stack((eigvecs, eigvals), dim=2).float()
        empty = torch.isnan(pairs)
        pairs[empty] = 0
        if self.raw_norm:
            pairs = self.raw_norm(pairs)
        pairs = self.linear(pairs)
        if self.model_type == "Transformer":
            pairs = self.pe_encoder(src=pairs, src_key_padding_mask=empty[:, :, 1])
        else:
            pairs = self.pe_encoder(pairs)
        pairs[empty[:, :, 1]] = 0
        out = pairs.sum(1)
        return self.post_mlp(out) if self.post_mlp else out
