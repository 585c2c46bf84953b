"""Relational graph attention (Busbridge et al. 2019, as used by Hector) written as UDFs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import zeros_default


class RGATConv(nn.Module):
    r"""One relational GAT layer over a whole heterograph.

    For an edge ``(u, v)`` of relation ``r`` and each head ``k``:

    .. math::
        z^{r}_u = x_u W_r, \quad
        e_{uv} = \mathrm{LeakyReLU}\big(a_{r,k}^\top [z^{r}_{u,k} \,\|\, z^{r}_{v,k}]\big), \quad
        \alpha_{uv} = \operatorname{softmax}_{(u', r') \to v}(e_{u'v}), \quad
        h_{v,k} = \sum_{(u, r) \to v} \alpha_{uv}\, z^{r}_{u,k}

    ``W_r`` is ``[in_dim, num_heads * out_dim]`` (head ``k`` is the ``k``-th
    block of ``out_dim`` columns) and ``a_{r,k}`` has ``2 * out_dim``
    entries. The softmax runs over ALL incoming edges of ``v``, across
    relations. There is no bias; nodes without in-edges get zeros.

    ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]`` by global node id;
    returns ``[num_nodes, num_heads * out_dim]`` (heads concatenated).

    Relation-aggregation-first split (``gnnc.distributed.raf``): ``message``
    reads node field ``x`` and relation fields ``W`` (``weight``) and ``a``
    (``attn``) and gives per edge the score ``e`` ``[E, H]`` and value ``z``
    ``[E, H, out_dim]``; ``reduce`` is their softmax-weighted sum over a
    destination's in-edges, heads flattened into ``h``.
    """

    def __init__(self, in_dim: int, out_dim: int, num_rels: int, num_heads: int = 1, negative_slope: float = 0.2):
        super().__init__()
        self.in_dim, self.out_dim, self.num_rels, self.num_heads = in_dim, out_dim, num_rels, num_heads
        self.negative_slope = negative_slope
        self.weight = nn.Parameter(torch.empty(num_rels, in_dim, num_heads * out_dim))
        self.attn = nn.Parameter(torch.empty(num_rels, num_heads, 2 * out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for w in self.weight:
            nn.init.xavier_normal_(w, gain)
        for a in self.attn:
            nn.init.xavier_normal_(a, gain)

    def message(self, edges):
        heads, d = self.num_heads, self.out_dim
        w = edges.type["W"]
        z_src = torch.bmm(edges.src["x"].unsqueeze(1), w).squeeze(1).view(-1, heads, d)
        z_dst = torch.bmm(edges.dst["x"].unsqueeze(1), w).squeeze(1).view(-1, heads, d)
        score = torch.sum(torch.cat([z_src, z_dst], dim=-1) * edges.type["a"], dim=-1)
        return {"e": F.leaky_relu(score, self.negative_slope), "z": z_src}

    @staticmethod
    def reduce(nodes):
        alpha = torch.softmax(nodes.mailbox["e"], dim=1)
        h = torch.sum(alpha.unsqueeze(-1) * nodes.mailbox["z"], dim=1)
        return {"h": h.flatten(1)}

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"RGATConv: expected features of shape [num_nodes, {self.in_dim}], got {tuple(x.shape)}")
        with g.local_scope():
            g.ndata_all["x"] = x
            g.etype_data["W"] = self.weight
            g.etype_data["a"] = self.attn
            # kept where no node has in-edges: a reduce UDF is not called
            g.ndata_all["h"] = zeros_default(x, (x.shape[0], self.num_heads * self.out_dim))
            g.update_all(self.message, self.reduce)
            return g.ndata_all["h"]
