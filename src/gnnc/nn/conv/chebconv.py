"""DGL's ``ChebConv`` (Defferrard et al., 2016) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ... import function as fn
from ...dgl_base import dgl_warning
from ...readout import broadcast_nodes
from .common import in_degrees


class ChebConv(nn.Module):
    """Chebyshev spectral convolution of order ``k``, DGL 2.1's ``ChebConv``:

        L~  = 2 L / lambda_max - I,   L = I - D^-1/2 A D^-1/2     (D the in-degrees clamped to 1)
        X_0 = x,  X_1 = L~ x,  X_i = 2 L~ X_{i-1} - X_{i-2}
        out = act( linear([X_0, ..., X_{k-1}]) )

    ``lambda_max`` per graph of a batch (a list or tensor; 2 with a warning when not given, as DGL's).
    Parameter ``linear`` (``Linear(k * in_feats, out_feats)``) as DGL's.
    """

    def __init__(self, in_feats, out_feats, k, activation=F.relu, bias=True):
        super().__init__()
        self._k, self._in_feats, self._out_feats = k, in_feats, out_feats
        self.activation = activation
        self.linear = nn.Linear(k * in_feats, out_feats, bias)

    def forward(self, graph, feat, lambda_max=None):
        with graph.local_scope():
            d_invsqrt = in_degrees(graph).to(feat).clamp(min=1).pow(-0.5).unsqueeze(-1)

            def laplacian_free(x):  # D^-1/2 A D^-1/2 x
                graph.ndata["h"] = x * d_invsqrt
                graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
                return graph.ndata.pop("h") * d_invsqrt

            if lambda_max is None:
                dgl_warning(
                    "lambda_max is not provided, using default value of 2.  Please use "
                    "dgl.laplacian_lambda_max to compute the eigenvalues."
                )
                lambda_max = [2] * graph.batch_size
            if isinstance(lambda_max, list):
                lambda_max = torch.tensor(lambda_max, dtype=torch.get_default_dtype()).to(feat)  # DGL's th.Tensor
            if lambda_max.dim() == 1:
                lambda_max = lambda_max.unsqueeze(-1)
            re_norm = 2.0 / broadcast_nodes(graph, lambda_max)
            x_0 = feat
            xs = [x_0]
            if self._k > 1:
                x_1 = -re_norm * laplacian_free(x_0) + x_0 * (re_norm - 1)
                xs.append(x_1)
            for _ in range(2, self._k):
                x_i = -2 * re_norm * laplacian_free(x_1) + x_1 * 2 * (re_norm - 1) - x_0
                xs.append(x_i)
                x_1, x_0 = x_i, x_1
            h = self.linear(torch.cat(xs, dim=1))
            if self.activation:
                h = self.activation(h)
        return h
