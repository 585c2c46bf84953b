"""DGL's ``NNConv`` (edge-conditioned convolution, Gilmer et al., 2017) with its constructor, parameters
and numbers."""

from __future__ import annotations

from torch import nn

from ... import function as fn
from .common import expand_as_pair
from .kernel_common import add_residual_and_bias, finish, reducer


class NNConv(nn.Module):
    """Edge-conditioned convolution, DGL 2.1's ``NNConv``:

        out_v = agg_{u->v} x_u W(e_uv) + res_fc(x_v) + bias        W(e) = edge_func(e) viewed [D_in, D_out]

    ``agg`` in sum, mean, max (elementwise over ``x_u[i] W[i, :]``, then summed over i, as DGL's). Parameters
    ``edge_func``, ``res_fc`` (with ``residual``: a bias-free Linear when the widths differ, else Identity)
    and ``bias`` as DGL's. ``feat`` may be a ``(source, destination)`` pair.
    """

    def __init__(self, in_feats, out_feats, edge_func, aggregator_type="mean", residual=False, bias=True):
        super().__init__()
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats = out_feats
        self.edge_func = edge_func
        self.reducer = reducer(aggregator_type, "Aggregator type {} not recognized: ")
        self._aggre_type = aggregator_type
        add_residual_and_bias(self, self._in_dst_feats, out_feats, residual, bias)
        self.reset_parameters()

    def reset_parameters(self):
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, graph, feat, efeat):
        with graph.local_scope():
            feat_src, feat_dst = expand_as_pair(feat, graph)
            graph.srcdata["h"] = feat_src.unsqueeze(-1)
            graph.edata["w"] = self.edge_func(efeat).view(-1, self._in_src_feats, self._out_feats)
            graph.update_all(fn.u_mul_e("h", "w", "m"), self.reducer("m", "neigh"))
            return finish(self, graph.dstdata["neigh"].sum(dim=1), feat_dst)
