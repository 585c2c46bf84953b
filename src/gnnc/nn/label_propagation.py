"""DGL's ``LabelPropagation`` (Zhu and Ghahramani, 2002) as gnnc message passing."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import function as fn


class LabelPropagation(nn.Module):
    """Label propagation, DGL 2.1's ``LabelPropagation``: with ``Y_0`` the labels of the nodes in ``mask``
    (all without one; other rows 0), ``k`` times

        Y <- (1 - alpha) Y_0 + alpha D_in^{-1/2} A D_out^{-1/2} Y     (``norm_type="sym"``)
        Y <- (1 - alpha) Y_0 + alpha D_in^{-1} A Y                    (``"row"``)

    then clamped to [0, 1] (``clamp``), L1-normalised per row (``normalize``) and the masked rows reset to
    their labels (``reset``). ``labels`` is a class id per node (one-hot encoded to ``max + 1`` classes) or
    a ``[nodes, classes]`` multi-label matrix; the result is float32, as DGL's. Degrees count at least 1.
    """

    def __init__(self, k, alpha, norm_type="sym", clamp=True, normalize=False, reset=False):
        super().__init__()
        self.k, self.alpha, self.norm_type = k, alpha, norm_type
        self.clamp, self.normalize, self.reset = clamp, normalize, reset

    def forward(self, g, labels, mask=None):
        if self.norm_type not in ("sym", "row"):
            raise ValueError(f"Expect norm_type to be 'sym' or 'row', got {self.norm_type}")
        if labels.dim() > 1 and labels.size(1) > 1:
            labels = labels.to(torch.float32)
        else:
            labels = F.one_hot(labels.view(-1)).to(torch.float32)
        y = labels
        if mask is not None:
            y = torch.zeros_like(labels)
            y[mask] = labels[mask]
        start = (1 - self.alpha) * y
        power = -0.5 if self.norm_type == "sym" else -1.0
        norm_dst = g.in_degrees().float().clamp(min=1).pow(power).to(labels.device).unsqueeze(1)
        norm_src = g.out_degrees().float().clamp(min=1).pow(-0.5).to(labels.device).unsqueeze(1)
        with g.local_scope():
            for _ in range(self.k):
                g.ndata["h"] = y * norm_src if self.norm_type == "sym" else y
                g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
                y = start + self.alpha * g.ndata["h"] * norm_dst
                if self.clamp:
                    y = y.clamp_(0.0, 1.0)
                if self.normalize:
                    y = F.normalize(y, p=1)
                if self.reset:
                    y[mask] = labels[mask]  # DGL's indexing: no mask (None) resets every row
            return y
