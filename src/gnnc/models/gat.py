"""Graph attention (Velickovic et al., 2018) and the 2-layer GAT network, as UDFs."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import bias_and_activation, zeros_default


class GATConv(nn.Module):
    """Multi-head graph attention (DGL ``GATConv`` semantics).

    For every head k (``a_k`` is row k of ``attn``, length ``2 * out_dim``):

        z_u      = dropout_feat(x_u) W_k
        e_uv     = LeakyReLU( a_k^T [z_u || z_v] )
        alpha_uv = softmax of e_uv over all in-edges u->v of v
        h_v      = act( sum_{u->v} dropout_attn(alpha_uv) z_u + b_k )

    The softmax spans every in-edge of v (all relations on a heterogeneous
    graph). Dropout acts only in training mode. Nodes without in-edges get
    ``act(b)``. ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]``; returns
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
        activation=None,
        bias: bool = True,
    ):
        super().__init__()
        self.num_heads, self.out_dim = num_heads, out_dim
        self.fc = nn.Linear(in_dim, num_heads * out_dim, bias=False)
        self.attn = nn.Parameter(torch.empty(num_heads, 2 * out_dim))
        self.bias = nn.Parameter(torch.empty(num_heads, out_dim)) if bias else None
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        z = self.fc(self.feat_drop(x)).view(-1, self.num_heads, self.out_dim)
        with g.local_scope():
            g.ndata_all["z"] = z
            g.ndata_all["h"] = zeros_default(z, z.shape)  # kept where no node has in-edges: a reduce UDF is not called
            g.apply_edges(self._attention)
            g.update_all(self._message, self._reduce)
            h = g.ndata_all["h"]
        return bias_and_activation(h, self.bias, self.activation)

    def _attention(self, edges):
        pair = torch.cat([edges.src["z"], edges.dst["z"]], -1)  # [E, heads, 2 * out_dim]
        return {"e": self.leaky_relu((pair * self.attn).sum(-1, keepdim=True))}

    @staticmethod
    def _message(edges):
        return {"z": edges.src["z"], "e": edges.data["e"]}

    def _reduce(self, nodes):
        alpha = self.attn_drop(torch.softmax(nodes.mailbox["e"], dim=1))
        return {"h": (alpha * nodes.mailbox["z"]).sum(1)}


class GAT(nn.Module):
    """The standard 2-layer GAT for node classification (e.g. Cora).

        h   = concat over ``heads`` of ELU( GATConv_1(x) )      # [N, heads * hidden]
        out = mean over ``out_heads`` of GATConv_2(h)           # [N, num_classes]

    Both layers use ``feat_drop`` on their inputs and ``attn_drop`` on the
    attention coefficients. ``forward(g, x)`` returns logits.
    """

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        num_classes: int,
        heads: int = 8,
        out_heads: int = 1,
        feat_drop: float = 0.6,
        attn_drop: float = 0.6,
    ):
        super().__init__()
        self.conv1 = GATConv(in_dim, hidden, heads, feat_drop=feat_drop, attn_drop=attn_drop, activation=F.elu)
        self.conv2 = GATConv(hidden * heads, num_classes, out_heads, feat_drop=feat_drop, attn_drop=attn_drop)

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(g, x).flatten(1)
        return self.conv2(g, h).mean(1)
