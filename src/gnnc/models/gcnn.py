"""Bipartite graph convolution of Gasse et al. (2019): a message UDF, a built-in sum."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .. import function as fn


class GCNNConv(nn.Module):
    """Graph convolution of "Exact combinatorial optimization with graph
    convolutional neural networks" (Gasse et al., 2019).

        m_e   = W_f ReLU( W_l x_u + b_l + W_e w_e + W_r x_v ) + b_f     for edge e = u->v
        h_v   = sum_{e = u->v} m_e
        out_v = W_2 ReLU( W_1 [h_v || x_v] + b_1 ) + b_2

    ``W_e`` and ``W_r`` have no bias (as in the paper's code). Made for the
    variable/constraint bipartite graph, it runs on any homogeneous graph or
    whole heterogeneous graph whose nodes share ``emb_dim``. Nodes without
    in-edges get ``h_v = 0``. ``forward(g, x, edge_feat)``: ``x`` is
    ``[num_nodes, emb_dim]``, ``edge_feat`` is ``[num_edges, edge_dim]`` in
    the graph's edge order; returns ``[num_nodes, emb_dim]``.
    """

    def __init__(self, emb_dim: int, edge_dim: int):
        super().__init__()
        self.lin_src = nn.Linear(emb_dim, emb_dim)
        self.lin_edge = nn.Linear(edge_dim, emb_dim, bias=False)
        self.lin_dst = nn.Linear(emb_dim, emb_dim, bias=False)
        self.lin_msg = nn.Linear(emb_dim, emb_dim)
        self.out1 = nn.Linear(2 * emb_dim, emb_dim)
        self.out2 = nn.Linear(emb_dim, emb_dim)

    def forward(self, g, x: torch.Tensor, edge_feat: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            g.ndata_all["x"] = x
            g.edata_all["w"] = edge_feat
            g.update_all(self._message, fn.sum("m", "h"))  # a built-in: zeros on a graph without edges
            h = g.ndata_all["h"]
        return self.out2(F.relu(self.out1(torch.cat([h, x], -1))))

    def _message(self, edges):
        pre = self.lin_src(edges.src["x"]) + self.lin_edge(edges.data["w"]) + self.lin_dst(edges.dst["x"])
        return {"m": self.lin_msg(F.relu(pre))}
