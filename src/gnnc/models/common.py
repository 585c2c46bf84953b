"""Small pieces the reference layers share."""
from __future__ import annotations

import torch


def bias_and_activation(h: torch.Tensor, bias: torch.Tensor | None, activation) -> torch.Tensor:
    """``activation(h + bias)``, skipping whichever is None."""
    if bias is not None:
        h = h + bias
    if activation is not None:
        h = activation(h)
    return h
