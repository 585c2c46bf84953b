"""Edge normalisation constants used by the reference models."""
from __future__ import annotations

import torch


def relation_in_degree_norm(g, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``1 / c_{v,r}`` for every edge ``(u, v)`` of relation ``r``, shape ``[E, 1]``, user edge order.

    ``c_{v,r}`` is the number of in-edges of ``v`` that have relation ``r``
    (at least 1 for the destination of an existing edge). One pass over the
    edges whatever the number of relations: internally they are sorted by
    (relation, destination), so each (r, v) group is one run.
    """
    index = g.index
    key = index.edge_rel * index.num_nodes + index.dst
    _, group, counts = torch.unique_consecutive(key, return_inverse=True, return_counts=True)
    return index.to_user_order(counts.index_select(0, group).to(dtype).reciprocal().unsqueeze(1))
