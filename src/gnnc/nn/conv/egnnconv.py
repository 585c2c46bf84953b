"""DGL's ``EGNNConv`` (Satorras et al., 2021) as gnnc message passing."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn


class EGNNConv(nn.Module):
    """E(n)-equivariant graph convolution, DGL 2.1's ``EGNNConv``: per edge ``u -> v``::

        d = x_u - x_v,  r = |d|^2,  m = edge_mlp([h_u, h_v, r, a_e])   (``a_e`` with ``edge_feat_size > 0``)
        h'_v = node_mlp([h_v, sum_u m]),  x'_v = x_v + mean_u coord_mlp(m) d / (sqrt(r) + 1e-30)

    Returns ``(h', x')``; a node without in-edges adds 0 to both. ``edge_mlp``, ``node_mlp`` and
    ``coord_mlp`` are DGL's (SiLU between linear layers, the last coordinate layer without bias).
    """

    def __init__(self, in_size, hidden_size, out_size, edge_feat_size=0):
        super().__init__()
        self.in_size, self.hidden_size, self.out_size = in_size, hidden_size, out_size
        self.edge_feat_size = edge_feat_size
        act = nn.SiLU()
        self.edge_mlp = nn.Sequential(
            nn.Linear(in_size * 2 + edge_feat_size + 1, hidden_size), act, nn.Linear(hidden_size, hidden_size), act
        )
        self.node_mlp = nn.Sequential(
            nn.Linear(in_size + hidden_size, hidden_size), act, nn.Linear(hidden_size, out_size)
        )
        self.coord_mlp = nn.Sequential(nn.Linear(hidden_size, hidden_size), act, nn.Linear(hidden_size, 1, bias=False))

    def message(self, edges):
        """The edge's feature message ``msg_h`` and coordinate message ``msg_x``."""
        parts = [edges.src["h"], edges.dst["h"], edges.data["radial"]]
        if self.edge_feat_size > 0:
            parts.append(edges.data["a"])
        msg_h = self.edge_mlp(torch.cat(parts, dim=-1))
        return {"msg_x": self.coord_mlp(msg_h) * edges.data["x_diff"], "msg_h": msg_h}

    def forward(self, graph, node_feat, coord_feat, edge_feat=None):
        with graph.local_scope():
            graph.ndata["h"] = node_feat
            graph.ndata["x"] = coord_feat
            if self.edge_feat_size > 0:
                assert edge_feat is not None, "Edge features must be provided."
                graph.edata["a"] = edge_feat
            graph.apply_edges(fn.u_sub_v("x", "x", "x_diff"))
            radial = graph.edata["x_diff"].square().sum(dim=1).unsqueeze(-1)
            graph.edata["radial"] = radial
            graph.edata["x_diff"] = graph.edata["x_diff"] / (radial.sqrt() + 1e-30)
            graph.apply_edges(self.message)
            graph.update_all(fn.copy_e("msg_x", "m"), fn.mean("m", "x_neigh"))
            graph.update_all(fn.copy_e("msg_h", "m"), fn.sum("m", "h_neigh"))
            h = self.node_mlp(torch.cat([node_feat, graph.ndata["h_neigh"]], dim=-1))
            return h, coord_feat + graph.ndata["x_neigh"]
