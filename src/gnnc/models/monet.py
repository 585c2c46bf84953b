"""Gaussian mixture model convolution of MoNet (Monti et al., 2017): a message UDF, a built-in reducer."""

from __future__ import annotations

import torch
from torch import nn

from .. import function as fn

_AGGREGATORS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}  # built-ins: zeros on a graph without edges


class GMMConv(nn.Module):
    """MoNet's Gaussian mixture convolution (DGL ``GMMConv`` semantics).

    With pseudo-coordinates ``p_e`` (``pseudo_dim`` wide) on every edge
    e = u->v and K = ``num_kernels`` Gaussian kernels:

        w_k(p) = exp( -1/2 sum_d (p_d - mu_kd)^2 * inv_sigma_kd^2 )    (inv_sigma = 1/sigma)
        h_v    = sum_k AGG_{e = u->v} w_k(p_e) (x_u W_k)  + b

    AGG is ``aggregator`` (sum, mean or max, elementwise), applied per kernel
    before summing over kernels as DGL does; for sum and mean this equals
    AGG_e sum_k w_k(p_e) x_u W_k. ``mu`` and ``inv_sigma`` are learnable.
    Nodes without in-edges get ``b``. ``forward(g, x, pseudo)``: ``x`` is
    ``[num_nodes, in_dim]``, ``pseudo`` is ``[num_edges, pseudo_dim]`` in the
    graph's edge order; returns ``[num_nodes, out_dim]``.
    """

    def __init__(
        self, in_dim: int, out_dim: int, pseudo_dim: int, num_kernels: int, aggregator: str = "sum", bias: bool = True
    ):
        super().__init__()
        if aggregator not in _AGGREGATORS:
            raise ValueError(f"GMMConv: unknown aggregator {aggregator!r}; use one of {list(_AGGREGATORS)}")
        self.out_dim, self.num_kernels, self.aggregator = out_dim, num_kernels, aggregator
        self.fc = nn.Linear(in_dim, num_kernels * out_dim, bias=False)
        self.mu = nn.Parameter(torch.empty(num_kernels, pseudo_dim))
        self.inv_sigma = nn.Parameter(torch.empty(num_kernels, pseudo_dim))
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_normal_(self.fc.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.normal_(self.mu, 0.0, 0.1)
        nn.init.constant_(self.inv_sigma, 1.0)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, g, x: torch.Tensor, pseudo: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            g.ndata_all["z"] = self.fc(x).view(-1, self.num_kernels, self.out_dim)
            g.edata_all["p"] = pseudo
            g.update_all(self._message, _AGGREGATORS[self.aggregator]("m", "h"))
            h = g.ndata_all["h"].sum(1)
        if self.bias is not None:
            h = h + self.bias
        return h

    def _message(self, edges):
        diff = edges.data["p"].unsqueeze(1) - self.mu  # [E, K, pseudo_dim]
        w = torch.exp(-0.5 * (diff * diff * self.inv_sigma * self.inv_sigma).sum(-1, keepdim=True))
        return {"m": w * edges.src["z"]}
