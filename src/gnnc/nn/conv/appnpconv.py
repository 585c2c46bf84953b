"""DGL's ``APPNPConv`` (Klicpera et al., 2019) with its constructor and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from .common import degree_norm, in_degrees, out_degrees
from .edgeweightnorm import EdgeWeightNorm


class APPNPConv(nn.Module):
    """Approximate personalised PageRank propagation, DGL 2.1's ``APPNPConv`` (no parameters):

        h^0 = x,   h^{t+1}_v = (1 - alpha) sum_{u->v} n_uv drop(1)_uv h^t_u + alpha x_v,   out = h^k

    ``n_uv = max(out_deg(u), 1) ** -1/2 max(in_deg(v), 1) ** -1/2``, or with ``edge_weight`` the weights
    normalised by ``EdgeWeightNorm('both')``; ``edge_drop`` drops edges in training mode (a new mask per step).
    """

    def __init__(self, k, alpha, edge_drop=0.0):
        super().__init__()
        self._k, self._alpha = k, alpha
        self.edge_drop = nn.Dropout(edge_drop)

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            if edge_weight is None:
                src_norm = degree_norm(out_degrees(graph), feat, -0.5)
                dst_norm = degree_norm(in_degrees(graph), feat, -0.5)
            else:
                edge_weight = EdgeWeightNorm("both")(graph, edge_weight)
            feat_0 = feat
            for _ in range(self._k):
                if edge_weight is None:
                    feat = feat * src_norm
                graph.ndata["h"] = feat
                w = torch.ones(graph.num_edges(), 1) if edge_weight is None else edge_weight
                graph.edata["w"] = self.edge_drop(w).to(feat.device)
                graph.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h"))
                feat = graph.ndata.pop("h")
                if edge_weight is None:
                    feat = feat * dst_norm
                feat = (1 - self._alpha) * feat + self._alpha * feat_0
            return feat
