"""DGL's ``GraphormerLayer``: a Graphormer transformer layer (Ying et al., 2021)."""

from __future__ import annotations

from torch import nn

from .biased_mha import BiasedMHA

_RELU = nn.ReLU()  # DGL's default activation: one stateless module shared by every layer


class GraphormerLayer(nn.Module):
    """DGL 2.1's ``GraphormerLayer`` over a padded batch ``[batch, n, feat_size]``: ``BiasedMHA`` (``attn``)
    then a two-layer feed-forward network (``ffn``, ``activation`` between), each with dropout and a residual
    connection, layer-normalised after (``norm_first=False``) or before (``True``) each block
    (``attn_layer_norm``, ``ffn_layer_norm``)."""

    def __init__(
        self,
        feat_size,
        hidden_size,
        num_heads,
        attn_bias_type="add",
        norm_first=False,
        dropout=0.1,
        attn_dropout=0.1,
        activation=_RELU,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.attn = BiasedMHA(
            feat_size=feat_size, num_heads=num_heads, attn_bias_type=attn_bias_type, attn_drop=attn_dropout
        )
        self.ffn = nn.Sequential(
            nn.Linear(feat_size, hidden_size),
            activation,
            nn.Dropout(p=dropout),
            nn.Linear(hidden_size, feat_size),
            nn.Dropout(p=dropout),
        )
        self.dropout = nn.Dropout(p=dropout)
        self.attn_layer_norm = nn.LayerNorm(feat_size)
        self.ffn_layer_norm = nn.LayerNorm(feat_size)

    def _block(self, nfeat, norm, inner):
        """``inner`` with a residual connection, ``norm`` before or after it."""
        out = inner(norm(nfeat) if self.norm_first else nfeat) + nfeat
        return out if self.norm_first else norm(out)

    def forward(self, nfeat, attn_bias=None, attn_mask=None):
        nfeat = self._block(nfeat, self.attn_layer_norm, lambda h: self.dropout(self.attn(h, attn_bias, attn_mask)))
        return self._block(nfeat, self.ffn_layer_norm, self.ffn)
