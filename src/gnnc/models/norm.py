"""Edge normalisation constants used by the reference models."""

from __future__ import annotations

import torch


def relation_in_degree_norm(g, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``1 / c_{v,r}`` for every edge ``(u, v)`` of relation ``r``, shape ``[E, 1]``, user edge order.

    ``c_{v,r}`` is the number of in-edges of ``v`` that have relation ``r``
    (at least 1 for the destination of an existing edge).
    """
    return g.edge_relation_in_degrees().to(dtype).reciprocal().unsqueeze(1)
