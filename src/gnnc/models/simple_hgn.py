"""Simple-HGN attention layer (Lv et al. 2021) written as UDFs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import function as fn


class SimpleHGNConv(nn.Module):
    r"""One Simple-HGN layer over a whole heterograph.

    For an edge ``(u, v)`` of relation ``r`` and each head ``k`` (head
    ``k`` takes the ``k``-th block of columns of ``W`` and ``W_r``):

    .. math::
        e_{uv} = \mathrm{LeakyReLU}\big(a_k^\top [x_u W \,\|\, x_v W \,\|\, \psi_r W_r]\big), \quad
        \alpha_{uv} = \operatorname{softmax}_{(u', r') \to v}(e_{u'v})

        \alpha_{uv} \leftarrow (1 - \beta)\,\alpha_{uv} + \beta\,\alpha^{prev}_{uv}
        \quad\text{(only when ``prev_attn`` is given)}

        h_{v,k} = \sum_{u \to v} \alpha_{uv} (x_u W)_k \;+\; (x_v W_{res})_k \quad\text{(residual)}

    ``\psi_r`` is a learnable ``edge_dim`` embedding of relation ``r``,
    ``W`` is ``[in_dim, heads * out_dim]``, ``W_r`` is
    ``[edge_dim, heads * edge_dim]``, ``a_k`` has ``2 * out_dim + edge_dim``
    entries and ``W_{res}`` is ``[in_dim, heads * out_dim]``. The softmax
    runs over ALL incoming edges of ``v``, across relations.

    ``forward(g, x, prev_attn=None)``: ``x`` is ``[num_nodes, in_dim]`` by
    global node id; ``prev_attn`` is the previous layer's ``attn``. Returns
    ``(h, attn)``: ``h`` is ``[num_nodes, heads * out_dim]`` (heads
    concatenated) and ``attn`` the (mixed) ``\alpha``, ``[num_edges, heads]``
    in the user's edge order. ``attn`` is not detached.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_rels: int,
        edge_dim: int,
        num_heads: int,
        negative_slope: float = 0.2,
        residual: bool = True,
        beta: float = 0.0,
    ):
        super().__init__()
        self.in_dim, self.out_dim, self.num_rels = in_dim, out_dim, num_rels
        self.edge_dim, self.num_heads = edge_dim, num_heads
        self.negative_slope, self.beta = negative_slope, beta
        self.edge_emb = nn.Parameter(torch.empty(num_rels, edge_dim))
        self.weight = nn.Parameter(torch.empty(in_dim, num_heads * out_dim))
        self.edge_weight = nn.Parameter(torch.empty(edge_dim, num_heads * edge_dim))
        self.attn = nn.Parameter(torch.empty(num_heads, 2 * out_dim + edge_dim))
        self.res_weight = nn.Parameter(torch.empty(in_dim, num_heads * out_dim)) if residual else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As the authors' code: Xavier-normal (ReLU gain) maps, standard-normal type embeddings."""
        gain = nn.init.calculate_gain("relu")
        nn.init.normal_(self.edge_emb)
        for w in (self.weight, self.edge_weight, self.attn):
            nn.init.xavier_normal_(w, gain)
        if self.res_weight is not None:
            nn.init.xavier_normal_(self.res_weight, gain)

    def _score(self, edges):
        heads = self.num_heads
        z_src = torch.mm(edges.src["x"], self.weight).view(-1, heads, self.out_dim)
        z_dst = torch.mm(edges.dst["x"], self.weight).view(-1, heads, self.out_dim)
        z_rel = torch.mm(edges.type["emb"], self.edge_weight).view(-1, heads, self.edge_dim)
        score = torch.sum(torch.cat([z_src, z_dst, z_rel], dim=-1) * self.attn, dim=-1)
        return {"e": F.leaky_relu(score, self.negative_slope)}

    @staticmethod
    def _copy_score(edges):
        return {"e": edges.data["e"]}

    @staticmethod
    def _shifted_exp(edges):
        return {"exp": torch.exp(edges.data["e"] - edges.dst["e_max"])}

    @staticmethod
    def _copy_exp(edges):
        return {"exp": edges.data["exp"]}

    @staticmethod
    def _normalize(edges):
        return {"a": edges.data["exp"] / edges.dst["exp_sum"]}

    def _message(self, edges):
        z_src = torch.mm(edges.src["x"], self.weight).view(-1, self.num_heads, self.out_dim)
        return {"m": edges.data["a"].unsqueeze(-1) * z_src}

    def forward(self, g, x: torch.Tensor, prev_attn: torch.Tensor | None = None):
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(
                f"SimpleHGNConv: expected features of shape [num_nodes, {self.in_dim}], got {tuple(x.shape)}"
            )
        expected = (g.num_edges(), self.num_heads)
        if prev_attn is not None and tuple(prev_attn.shape) != expected:
            raise ValueError(
                f"SimpleHGNConv: prev_attn must have shape {list(expected)} "
                f"(edges, heads), got {tuple(prev_attn.shape)}"
            )
        with g.local_scope():
            g.ndata_all["x"] = x
            g.etype_data["emb"] = self.edge_emb
            # Edge softmax over all in-edges of each destination, shifted by the max for stability.
            # Built-in reducers: zeros on a graph without edges, where reduce UDFs would write nothing.
            g.apply_edges(self._score)
            g.update_all(self._copy_score, fn.max("e", "e_max"))
            g.apply_edges(self._shifted_exp)
            g.update_all(self._copy_exp, fn.sum("exp", "exp_sum"))
            g.apply_edges(self._normalize)
            attn = g.edata_all["a"]
            if prev_attn is not None:
                attn = (1 - self.beta) * attn + self.beta * prev_attn
                g.edata_all["a"] = attn
            g.update_all(self._message, fn.sum("m", "h"))
            h = g.ndata_all["h"].flatten(1)
        if self.res_weight is not None:
            h = h + x @ self.res_weight
        return h, attn
