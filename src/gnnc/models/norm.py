"""Edge normalisation constants used by the reference models."""
from __future__ import annotations

import torch


def relation_in_degree_norm(g, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``1 / c_{v,r}`` for every edge ``(u, v)`` of relation ``r``, shape ``[E, 1]``, user edge order.

    ``c_{v,r}`` is the number of in-edges of ``v`` that have relation ``r``
    (at least 1 for the destination of an existing edge).
    """
    per_relation = []
    for rel in g.canonical_etypes:
        _, dst = g.find_edges(rel)
        per_relation.append(g.in_degrees(rel).index_select(0, dst))
    return torch.cat(per_relation).to(dtype).reciprocal().unsqueeze(1)
