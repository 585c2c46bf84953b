"""GATv2 attention (Brody et al., 2022), as UDFs."""

from __future__ import annotations

import torch
from torch import nn

from .common import zeros_default
from .gat import GATConv


class GATv2Conv(nn.Module):
    """Multi-head dynamic graph attention (DGL ``GATv2Conv`` semantics).

    For every head k (``a_k`` is row k of ``attn``, length ``out_dim``):

        s_u      = W_src,k dropout_feat(x_u) + b_src,k
        d_v      = W_dst,k dropout_feat(x_v) + b_dst,k           (W_dst = W_src with share_weights)
        e_uv     = a_k^T LeakyReLU( s_u + d_v )
        alpha_uv = softmax of e_uv over all in-edges u->v of v
        h_v      = act( sum_{u->v} dropout_attn(alpha_uv) s_u + r_v )

    ``r_v`` is the residual (``residual=True``): ``W_res x_v (+ b_res)``, or
    ``x_v`` itself when ``in_dim == num_heads * out_dim``; else 0. The linear
    biases exist when ``bias=True``. The softmax spans every in-edge of v (all
    relations on a heterogeneous graph). Dropout acts only in training mode.
    Nodes without in-edges get ``act(r_v)`` (DGL raises unless
    ``allow_zero_in_degree``; here they are always allowed).
    ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]``; returns
    ``[num_nodes, num_heads, out_dim]``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_heads: int,
        negative_slope: float = 0.2,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        residual: bool = False,
        activation=None,
        bias: bool = True,
        share_weights: bool = False,
    ):
        super().__init__()
        self.num_heads, self.out_dim = num_heads, out_dim
        self.fc_src = nn.Linear(in_dim, num_heads * out_dim, bias=bias)
        self.fc_dst = self.fc_src if share_weights else nn.Linear(in_dim, num_heads * out_dim, bias=bias)
        self.attn = nn.Parameter(torch.empty(num_heads, out_dim))
        self.feat_drop, self.attn_drop = nn.Dropout(feat_drop), nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.res_fc = None
        if residual:
            same = in_dim == num_heads * out_dim
            self.res_fc = nn.Identity() if same else nn.Linear(in_dim, num_heads * out_dim, bias=bias)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc_src, self.fc_dst, self.res_fc):
            if isinstance(fc, nn.Linear):
                nn.init.xavier_normal_(fc.weight, gain=gain)
                if fc.bias is not None:
                    nn.init.zeros_(fc.bias)
        nn.init.xavier_normal_(self.attn, gain=gain)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        h = self.feat_drop(x)
        with g.local_scope():
            z = self.fc_src(h).view(-1, self.num_heads, self.out_dim)
            g.ndata_all["z"] = z
            g.ndata_all["d"] = (
                z if self.fc_dst is self.fc_src else self.fc_dst(h).view(-1, self.num_heads, self.out_dim)
            )
            g.ndata_all["h"] = zeros_default(z, z.shape)  # kept where no node has in-edges: a reduce UDF is not called
            g.apply_edges(self._attention)
            g.update_all(self._message, self._reduce)
            out = g.ndata_all["h"]
        if self.res_fc is not None:
            out = out + self.res_fc(h).view(-1, self.num_heads, self.out_dim)
        if self.activation is not None:
            out = self.activation(out)
        return out

    def _attention(self, edges):
        pair = self.leaky_relu(edges.src["z"] + edges.dst["d"])  # [E, heads, out_dim]
        return {"e": (pair * self.attn).sum(-1, keepdim=True)}

    # aggregation as in GATConv: softmax of e over the mailbox, weighted sum of the source projections z
    _message = staticmethod(GATConv._message)
    _reduce = GATConv._reduce
