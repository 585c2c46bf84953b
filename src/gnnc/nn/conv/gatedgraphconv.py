"""DGL's ``GatedGraphConv`` (gated graph sequence networks, Li et al., 2016) with its constructor,
parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn


class GatedGraphConv(nn.Module):
    """Gated graph convolution, DGL 2.1's ``GatedGraphConv``: ``x`` padded with zeros to ``out_feats``, then
    ``n_steps`` times

        a_v = sum_{u->v} linears[type(u->v)](h_u)        h = GRUCell(a, h)

    ``etypes`` (one type id per edge, in ``[0, n_etypes)``) may be left out with one edge type. Parameters
    ``linears.<t>`` and ``gru`` as DGL's. Homogeneous graphs only, as DGL's.
    """

    def __init__(self, in_feats, out_feats, n_steps, n_etypes, bias=True):
        super().__init__()
        assert in_feats <= out_feats, "out_feats must be not less than in_feats"
        self._in_feats, self._out_feats = in_feats, out_feats
        self._n_steps, self._n_etypes = n_steps, n_etypes
        self.linears = nn.ModuleList([nn.Linear(out_feats, out_feats) for _ in range(n_etypes)])
        self.gru = nn.GRUCell(out_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        self.gru.reset_parameters()
        for linear in self.linears:
            nn.init.xavier_normal_(linear.weight, gain=gain)
            nn.init.zeros_(linear.bias)

    def _typed_messages(self, graph, feat, etypes):
        """Each edge's ``linears[type](h_src)`` (``[E, out_feats]``)."""
        graph.ndata["h"] = feat
        graph.apply_edges(fn.copy_u("h", "h_src"))
        h_src = graph.edata.pop("h_src")
        messages = h_src.new_zeros(h_src.shape)
        for i, linear in enumerate(self.linears):
            eids = torch.nonzero(etypes == i).view(-1)
            if len(eids) > 0:
                messages[eids] = linear(h_src[eids])
        return messages

    def forward(self, graph, feat, etypes=None):
        with graph.local_scope():
            assert graph.is_homogeneous, (
                "not a homogeneous graph; convert it with to_homogeneous and pass in the edge type as argument"
            )
            if self._n_etypes != 1:
                assert etypes.min() >= 0 and etypes.max() < self._n_etypes, (
                    f"edge type indices out of range [0, {self._n_etypes})"
                )
            feat = torch.cat([feat, feat.new_zeros((feat.shape[0], self._out_feats - feat.shape[1]))], -1)
            for _ in range(self._n_steps):
                if self._n_etypes == 1 and etypes is None:
                    graph.ndata["h"] = self.linears[0](feat)
                    graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "a"))
                else:
                    graph.edata["W_e*h"] = self._typed_messages(graph, feat, etypes)
                    graph.update_all(fn.copy_e("W_e*h", "m"), fn.sum("m", "a"))
                feat = self.gru(graph.ndata.pop("a"), feat)
            return feat
