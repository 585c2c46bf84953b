"""Graph isomorphism network convolution (Xu et al., 2019): message UDFs, a built-in reducer."""

from __future__ import annotations

import torch
from torch import nn

from .. import function as fn
from .common import bias_and_activation

_AGGREGATORS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}  # built-ins: zeros on a graph without edges


class GINConv(nn.Module):
    """GIN layer (DGL ``GINConv`` semantics).

        n_v   = agg_{u->v} w_e x_u          agg in sum, mean, max; w_e = 1 without edge weights
        out_v = act( f( (1 + eps) x_v + n_v ) )

    ``f`` is ``apply_func`` (e.g. an MLP; identity when None). ``eps`` starts
    at ``init_eps``; it is a learnable parameter with ``learn_eps=True``,
    else a buffer. Every edge counts (multi-edges and self loops included; all
    relations on a heterogeneous graph); a node without in-edges has
    ``n_v = 0``. ``forward(g, x, edge_weight=None)``: ``x`` is
    ``[num_nodes, *]``, ``edge_weight`` ``[num_edges]`` or ``[num_edges, 1]``
    in the user's edge order; returns ``f``'s output per node.
    """

    def __init__(
        self,
        apply_func=None,
        aggregator_type: str = "sum",
        init_eps: float = 0.0,
        learn_eps: bool = False,
        activation=None,
    ):
        super().__init__()
        if aggregator_type not in _AGGREGATORS:
            raise ValueError(f"GINConv: aggregator_type must be one of {tuple(_AGGREGATORS)}, got {aggregator_type!r}")
        self.apply_func, self.aggregator_type, self.activation = apply_func, aggregator_type, activation
        eps = torch.tensor([float(init_eps)])
        if learn_eps:
            self.eps = nn.Parameter(eps)
        else:
            self.register_buffer("eps", eps)

    def forward(self, g, x: torch.Tensor, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        reduce = _AGGREGATORS[self.aggregator_type]("m", "neigh")
        with g.local_scope():
            g.ndata_all["h"] = x
            if edge_weight is None:
                g.update_all(self._message, reduce)
            else:
                g.edata_all["w"] = edge_weight.reshape((-1,) + (1,) * (x.dim() - 1))
                g.update_all(self._weighted_message, reduce)
            out = (1 + self.eps) * x + g.ndata_all["neigh"]
        if self.apply_func is not None:
            out = self.apply_func(out)
        return bias_and_activation(out, None, self.activation)

    @staticmethod
    def _message(edges):
        return {"m": edges.src["h"]}

    @staticmethod
    def _weighted_message(edges):
        return {"m": edges.src["h"] * edges.data["w"]}
