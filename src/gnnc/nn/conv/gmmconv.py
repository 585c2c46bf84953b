"""DGL's ``GMMConv`` (MoNet's Gaussian mixture model convolution, Monti et al., 2017) with its
constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from ... import function as fn
from .common import ZeroInDegreeOption, check_in_degrees, expand_as_pair
from .kernel_common import add_residual_and_bias, finish, reducer


class GMMConv(ZeroInDegreeOption, nn.Module):
    """Gaussian mixture model convolution, DGL 2.1's ``GMMConv``. With K kernels over pseudo-coordinates
    ``p_uv`` (``dim`` wide):

        w_uvk = exp( -1/2 sum_d (p_uvd - mu_kd)^2 inv_sigma_kd^2 )
        out_v = sum_k agg_{u->v} w_uvk fc(x_u)_k + res_fc(x_v) + bias        agg in sum, mean, max

    Parameters ``mu``, ``inv_sigma`` ``[K, dim]``, ``fc`` (no bias), ``res_fc`` and ``bias`` as DGL's. ``feat``
    may be a ``(source, destination)`` pair. A graph with a zero in-degree node raises DGL's error unless
    ``allow_zero_in_degree``.
    """

    def __init__(
        self,
        in_feats,
        out_feats,
        dim,
        n_kernels,
        aggregator_type="sum",
        residual=False,
        bias=True,
        allow_zero_in_degree=False,
    ):
        super().__init__()
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats, self._dim, self._n_kernels = out_feats, dim, n_kernels
        self._allow_zero_in_degree = allow_zero_in_degree
        self._reducer = reducer(aggregator_type, "Aggregator type {} not recognized.")
        self.mu = nn.Parameter(torch.empty(n_kernels, dim))
        self.inv_sigma = nn.Parameter(torch.empty(n_kernels, dim))
        self.fc = nn.Linear(self._in_src_feats, n_kernels * out_feats, bias=False)
        add_residual_and_bias(self, self._in_dst_feats, out_feats, residual, bias)
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
        nn.init.normal_(self.mu.data, 0, 0.1)
        nn.init.constant_(self.inv_sigma.data, 1)
        if self.bias is not None:
            nn.init.zeros_(self.bias.data)

    def forward(self, graph, feat, pseudo):
        with graph.local_scope():
            check_in_degrees(graph, self._allow_zero_in_degree)
            feat_src, feat_dst = expand_as_pair(feat, graph)
            graph.srcdata["h"] = self.fc(feat_src).view(-1, self._n_kernels, self._out_feats)
            kernels = (self._n_kernels, self._dim)
            gaussian = -0.5 * (pseudo.view(-1, 1, self._dim) - self.mu.view(1, *kernels)) ** 2
            gaussian = gaussian * self.inv_sigma.view(1, *kernels) ** 2
            graph.edata["w"] = torch.exp(gaussian.sum(dim=-1, keepdim=True))
            graph.update_all(fn.u_mul_e("h", "w", "m"), self._reducer("m", "h"))
            return finish(self, graph.dstdata["h"].sum(1), feat_dst)
