"""DGL's ``SGConv`` (Wu et al., 2019, simplified graph convolution) with its constructor, parameters and
numbers."""

from __future__ import annotations

from torch import nn

from ... import function as fn
from .common import check_in_degrees, copy_or_weighted, degree_norm, in_degrees
from .edgeweightnorm import EdgeWeightNorm


class SGConv(nn.Module):
    """``out = fc( norm( (D^-1/2 A D^-1/2)^k x ) )``, DGL 2.1's ``SGConv``, ``D`` the in-degrees clamped to 1
    on both sides (as DGL's), or with ``edge_weight`` the weights normalised by ``EdgeWeightNorm('both')``.
    ``cached``: the propagated features of the first call are kept and reused (for a fixed graph, as DGL's).
    A zero in-degree node raises DGL's error unless ``allow_zero_in_degree``.
    """

    def __init__(self, in_feats, out_feats, k=1, cached=False, bias=True, norm=None, allow_zero_in_degree=False):
        super().__init__()
        self.fc = nn.Linear(in_feats, out_feats, bias=bias)
        self._cached, self._cached_h, self._k = cached, None, k
        self.norm = norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.fc.weight)
        if self.fc.bias is not None:
            nn.init.zeros_(self.fc.bias)

    def set_allow_zero_in_degree(self, set_value):
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            if edge_weight is not None:
                edge_weight = EdgeWeightNorm("both")(graph, edge_weight)
            message = copy_or_weighted(graph, edge_weight)
            if self._cached_h is not None:
                feat = self._cached_h
            else:
                norm = degree_norm(in_degrees(graph), feat, -0.5)
                for _ in range(self._k):
                    if edge_weight is None:
                        feat = feat * norm
                    graph.ndata["h"] = feat
                    graph.update_all(message, fn.sum("m", "h"))
                    feat = graph.ndata.pop("h")
                    if edge_weight is None:
                        feat = feat * norm
                if self.norm is not None:
                    feat = self.norm(feat)
                if self._cached:
                    self._cached_h = feat
            return self.fc(feat)
