"""A random operator of a lowered reduce UDF drawing as eager draws, when the user asks for determinism.

Eager runs a reduce UDF once per degree bucket, so a dropout in it draws one mask per bucket (a mailbox
``[nodes, degree, ...]`` or node rows ``[nodes, ...]``), bucket after bucket. A lowered reduce runs it
once over all edges or destination nodes: a mask as valid, from the same random stream, but another
one. Under ``torch.use_deterministic_algorithms(True)`` ``in_bucket_order`` calls the operator on each
bucket's rows, shaped and ordered as eager's, and puts the results back in place, so compiled training
draws eager's masks; otherwise it calls the operator once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ..graph.degree_buckets import Buckets

if TYPE_CHECKING:  # a block's context, built by the executors: named for types only
    from .context import GraphContext


def in_bucket_order(
    ctx: GraphContext, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, rows: str
) -> torch.Tensor:
    """``fn(x)`` for an element-wise random ``fn`` of the edges' (``rows="edges"``) or the destination
    nodes' (``"nodes"``) values ``x``, drawn bucket by bucket as eager's reduce when determinism is on."""
    if not torch.are_deterministic_algorithms_enabled():
        return fn(x)
    buckets = Buckets(ctx.index, ctx.rel, ctx.node_lo)
    if buckets.edge_order is None:
        return fn(x)
    index, sizes = (buckets.edge_order, buckets.edge_sizes) if rows == "edges" else (buckets.local, buckets.node_sizes)
    drawn = []
    for part, bucket in zip(x.index_select(0, index).split(sizes), buckets.list):
        lead = (bucket.nodes.numel(), bucket.degree) if rows == "edges" else (bucket.nodes.numel(),)
        drawn.append(fn(part.view(lead + tuple(x.shape[1:]))).reshape(part.shape))
    return x.index_copy(0, index, torch.cat(drawn))  # rows of no bucket (nodes without in-edges) keep x
