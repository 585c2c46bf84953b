"""DGL's ``AtomicConv`` (Gomes et al., 2017) as gnnc message passing."""

from __future__ import annotations

import math

import torch
from torch import nn

from ... import function as fn


class RadialPooling(nn.Module):
    """DGL's ``RadialPooling``: for ``K`` kernels and edge distances ``d`` (``[E, 1]``), ``[K, E, 1]`` values

        exp(-scaling_k (d - mean_k)^2) * (0.5 (cos(pi d / cutoff_k) + 1) if d <= cutoff_k else 0)

    with the three ``[K]`` tensors learnable, stored ``[K, 1, 1]`` as DGL's."""

    def __init__(self, interaction_cutoffs, rbf_kernel_means, rbf_kernel_scaling):
        super().__init__()
        self.interaction_cutoffs = nn.Parameter(interaction_cutoffs.reshape(-1, 1, 1), requires_grad=True)
        self.rbf_kernel_means = nn.Parameter(rbf_kernel_means.reshape(-1, 1, 1), requires_grad=True)
        self.rbf_kernel_scaling = nn.Parameter(rbf_kernel_scaling.reshape(-1, 1, 1), requires_grad=True)

    def forward(self, distances):
        rbf = torch.exp(-self.rbf_kernel_scaling * (distances - self.rbf_kernel_means) ** 2)
        cosine = 0.5 * (torch.cos(math.pi * distances / self.interaction_cutoffs) + 1)
        return rbf * torch.where(distances <= self.interaction_cutoffs, cosine, torch.zeros_like(cosine))


class AtomicConv(nn.Module):
    """Atomic convolution, DGL 2.1's ``AtomicConv``: with ``f_u`` the node's features (``[V, T]``; with
    ``features_to_use``, ``T`` indicators ``feat == features_to_use[t]``) and ``p_e`` the ``K`` radial-pooled
    distances of edge ``e``,

        out_v = sum_{e = u -> v} f_u (outer) p_e,     flattened to ``[V, T * K]`` (T-major)

    ``features_to_use`` is a frozen parameter, as DGL's.
    """

    def __init__(self, interaction_cutoffs, rbf_kernel_means, rbf_kernel_scaling, features_to_use=None):
        super().__init__()
        self.radial_pooling = RadialPooling(interaction_cutoffs, rbf_kernel_means, rbf_kernel_scaling)
        if features_to_use is None:
            self.num_channels, self.features_to_use = 1, None
        else:
            self.num_channels = len(features_to_use)
            self.features_to_use = nn.Parameter(features_to_use, requires_grad=False)

    def forward(self, graph, feat, distances):
        with graph.local_scope():
            pooled = self.radial_pooling(distances).to(feat)  # [K, E, 1]
            if self.features_to_use is not None:
                feat = (feat == self.features_to_use).to(feat)
            graph.ndata["hv"] = feat.unsqueeze(-1)  # [V, T, 1]
            graph.edata["he"] = pooled.transpose(1, 0).squeeze(-1).unsqueeze(1)  # [E, 1, K]
            graph.update_all(fn.u_mul_e("hv", "he", "m"), fn.sum("m", "hv_new"))
            return graph.ndata["hv_new"].flatten(1)
