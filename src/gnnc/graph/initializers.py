"""DGL's feature initializers (``dgl.init``): ``initializer(shape, dtype, device, id_range)`` makes the rows a
call leaves unset (``Graph.set_n_initializer`` / ``set_e_initializer``)."""

from __future__ import annotations

import torch


def zero_initializer(shape, dtype, ctx, id_range) -> torch.Tensor:
    """Zeros: the rows of a new feature a call leaves unset, when no initializer is set."""
    return torch.zeros(shape, dtype=dtype, device=ctx)


__all__ = ["zero_initializer"]
