"""``first_order``: the backward decorator of every gnnc kernel's ``torch.autograd.Function``."""

from __future__ import annotations

import functools

import torch
from torch.autograd.function import once_differentiable


def first_order(backward):
    """``once_differentiable``, but raising where a graph of the backward itself is asked for.

    The kernels' backward passes are not differentiable. With
    ``once_differentiable`` alone, a ``create_graph=True`` backward still
    returns gradients whose graph lacks these kernels' terms, so second-order
    gradients come out silently wrong wherever another path reaches the same
    inputs; here that backward stops with an error instead.
    """
    once = once_differentiable(backward)

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        if torch.is_grad_enabled() and any(isinstance(g, torch.Tensor) and g.requires_grad for g in grads):
            raise RuntimeError(
                "gnnc: second-order gradients (backward with create_graph=True) cannot go through a compiled "
                f"message-passing call: the backward of its {type(ctx).__name__.removesuffix('Backward')} kernel "
                "is not differentiable. Run that model uncompiled (the eager executor) for higher-order gradients."
            )
        return once(ctx, *grads)

    return wrapper
