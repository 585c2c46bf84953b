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


def zeros_default(like: torch.Tensor, shape) -> torch.Tensor:
    """Zeros of ``shape`` in ``like``'s dtype, device and autograd graph (zero gradients flow back to it).

    The default a layer writes before a reduce UDF that DGL never calls on a graph without edges: the output
    there stays differentiable, as the zeros of a built-in reducer are.
    """
    return like[:0].sum().expand(shape).contiguous()
