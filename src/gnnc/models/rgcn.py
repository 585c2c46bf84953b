"""Relational graph convolution (Schlichtkrull et al. 2018) written as UDFs."""

from __future__ import annotations

import torch
from torch import nn

from .. import function as fn
from .common import bias_and_activation
from .norm import relation_in_degree_norm


class RGCNConv(nn.Module):
    r"""One R-GCN layer over a whole heterograph.

    .. math::
        h_v = \sigma\Big(\sum_r \sum_{u \in N_r(v)} \frac{1}{c_{v,r}} x_u W_r + x_v W_0 + b\Big)

    ``c_{v,r}`` is the number of in-edges of ``v`` with relation ``r`` and
    ``r`` runs over the graph's relations in order. With ``num_bases=B``
    the relation weights are ``W_r = \sum_b a_{rb} V_b`` (basis
    decomposition). ``self_loop`` adds ``x_v W_0``, ``bias`` adds ``b`` and
    ``activation`` (a callable) is ``\sigma``; nodes without in-edges get
    only the self-loop and bias terms.

    ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]`` by global node id;
    returns ``[num_nodes, out_dim]``. ``g`` must have ``num_rels`` relations.

    Relation-aggregation-first split (``gnnc.distributed.raf``): the layer
    is ``update_all(message, reduce)`` with node field ``x``, edge field
    ``norm`` (``relation_in_degree_norm``) and relation field ``W``
    (``relation_weights()``), giving the relation sums ``h``; then
    ``update`` (reads ``h`` and ``x``) adds the self-loop, bias and
    activation.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_rels: int,
        num_bases: int | None = None,
        self_loop: bool = True,
        bias: bool = True,
        activation=None,
    ):
        super().__init__()
        if num_bases is not None and num_bases < 1:
            raise ValueError(f"RGCNConv: num_bases must be None or at least 1, got {num_bases}")
        self.in_dim, self.out_dim, self.num_rels, self.num_bases = in_dim, out_dim, num_rels, num_bases
        self.activation = activation
        if num_bases is None:
            self.weight = nn.Parameter(torch.empty(num_rels, in_dim, out_dim))
        else:
            self.basis = nn.Parameter(torch.empty(num_bases, in_dim, out_dim))
            self.coeff = nn.Parameter(torch.empty(num_rels, num_bases))
        self.loop_weight = nn.Parameter(torch.empty(in_dim, out_dim)) if self_loop else None
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        matrices = [self.weight] if self.num_bases is None else [self.basis, self.coeff.unsqueeze(0)]
        if self.loop_weight is not None:
            matrices.append(self.loop_weight.unsqueeze(0))
        for stack in matrices:
            for w in stack:
                nn.init.xavier_uniform_(w, gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weights(self) -> torch.Tensor:
        """``W_r`` for every relation, ``[num_rels, in_dim, out_dim]``."""
        if self.num_bases is None:
            return self.weight
        return torch.einsum("rb,bio->rio", self.coeff, self.basis)

    @staticmethod
    def message(edges):
        m = torch.bmm(edges.src["x"].unsqueeze(1), edges.type["W"]).squeeze(1)
        return {"m": m * edges.data["norm"]}

    reduce = fn.sum("m", "h")  # a built-in: zeros on a graph without edges, where the update still reads "h"

    def update(self, nodes):
        h = nodes.data["h"]
        if self.loop_weight is not None:
            h = h + nodes.data["x"] @ self.loop_weight
        return {"h": bias_and_activation(h, self.bias, self.activation)}

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"RGCNConv: expected features of shape [num_nodes, {self.in_dim}], got {tuple(x.shape)}")
        with g.local_scope():
            g.ndata_all["x"] = x
            g.edata_all["norm"] = relation_in_degree_norm(g, x.dtype)
            g.etype_data["W"] = self.relation_weights()
            g.update_all(self.message, self.reduce, self.update)
            return g.ndata_all["h"]
