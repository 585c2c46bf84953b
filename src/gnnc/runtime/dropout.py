"""Dropout as compiled forwards run it: gnnc's one-pass kernel where it is faster, torch's elsewhere.

``dropout(x, p, training)`` is ``F.dropout(x, p, training)`` in distribution, but on a large float32/float64
CPU tensor (numba installed) it draws its mask from a seed taken from torch's default generator
(``torch.manual_seed`` makes runs repeatable) rather than torch's Bernoulli stream: the masks differ from
eager's. Under ``torch.use_deterministic_algorithms(True)`` it is torch's dropout, with eager's masks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import backend

# Below this many elements torch's dropout costs about as little as a kernel launch.
MIN_ELEMENTS = 1 << 16


class _MaskedScale(torch.autograd.Function):
    """``x`` times the mask of ``seed`` over ``1 - p``; linear in ``x``, so the backward is the same map."""

    @staticmethod
    def forward(ctx, x, p, seed):
        from ..backend.cpu.dropout import dropout_mask_apply

        ctx.p, ctx.seed = p, seed
        return dropout_mask_apply(x, p, seed)

    @staticmethod
    def backward(ctx, grad):
        return _MaskedScale.apply(grad, ctx.p, ctx.seed), None, None


def runs_kernel(x: torch.Tensor, p: float, training: bool) -> bool:
    """Whether ``dropout(x, p, training)`` runs gnnc's kernel (else torch's dropout, eager's masks)."""
    return (
        training
        and 0 < p < 1
        and isinstance(x, torch.Tensor)
        and x.device.type == "cpu"
        and x.dtype in backend.KERNEL_FLOATS
        and x.numel() >= MIN_ELEMENTS
        and backend.cpu_available()
        and not torch.are_deterministic_algorithms_enabled()
    )


def dropout(x, p: float = 0.5, training: bool = True):
    """``F.dropout(x, p, training)`` (not in place), by gnnc's kernel where ``runs_kernel`` says so."""
    if not runs_kernel(x, p, training):
        return F.dropout(x, p, training)
    seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
    return _MaskedScale.apply(x, p, seed)


def module_dropout(module: nn.Dropout, x):
    """A call of the ``nn.Dropout`` ``module`` (read live: its ``p`` and ``training`` now)."""
    if module.inplace:
        return module(x)
    return dropout(x, module.p, module.training)
