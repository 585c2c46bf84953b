"""Graph operators of the MP-DFG: executable functions of a ``GraphContext``.

Every function takes the block's context first. Residency notation: V all
nodes, Vd the block's destination nodes, E the block's edges (internal
order), A node types, R relations, S shared. Movement operators change
residency; the fused operators are what the fusion passes produce. Kernels
come from the active backend (``gnnc.backend.kernels()``): the reference
``gnnc.backend.pytorch`` unless the executor selected another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..backend import kernels as _kernels
from ..backend import rebuild_in_backward
from ..backend.pytorch.common import broadcast_shape
from ..backend.pytorch.edge_expr import edge_expr_aggregate as composed_edge_expr_aggregate
from ..backend.pytorch.index_matmul import grouping as _type_grouping
from ..graph.degree_buckets import Buckets
from . import bucket_order, cost

if TYPE_CHECKING:  # a block's context, built by the executors: named for types only
    from .context import GraphContext


# ------------------------------------------------------------- broadcasts
def gather_src(ctx: GraphContext, x: Tensor) -> Tensor:
    """BroadcastSrc V -> E: each edge's source row."""
    return x.index_select(0, ctx.src)


def gather_dst(ctx: GraphContext, x: Tensor) -> Tensor:
    """BroadcastDst V -> E: each edge's destination row."""
    return x.index_select(0, ctx.dst)


def gather_srctype(ctx: GraphContext, a: Tensor) -> Tensor:
    """BroadcastSrc A -> E: row of each edge's source node type."""
    return a.index_select(0, ctx.src_type)


def gather_dsttype(ctx: GraphContext, a: Tensor) -> Tensor:
    """BroadcastDst A -> E: row of each edge's destination node type."""
    return a.index_select(0, ctx.dst_type)


def gather_etype(ctx: GraphContext, r: Tensor) -> Tensor:
    """Broadcast R -> E: row of each edge's relation (edges are grouped by relation)."""
    return _rows_by_type(r, ctx.rel_ptr)


def gather_ntype(ctx: GraphContext, a: Tensor) -> Tensor:
    """Broadcast A -> Vd: row of each destination node's type."""
    return _rows_by_type(a, ctx.dst_ntype_ptr)


def node_type_rows(ctx: GraphContext, a: Tensor) -> Tensor:
    """Broadcast A -> V: row of every node's type (all nodes)."""
    return _rows_by_type(a, ctx.ntype_ptr)


def _rows_by_type(a, ptr):
    """Type t's row repeated over rows ptr[t]:ptr[t+1] (rows grouped by type), built from expanded views:
    its gradient is one sum per type, not an index_add (a scatter over every row on CPU)."""
    parts = [a[t].expand((hi - lo,) + tuple(a.shape[1:])) for t, (lo, hi) in enumerate(zip(ptr, ptr[1:]))]
    return torch.cat(parts) if parts else a.new_empty((0,) + tuple(a.shape[1:]))


def dst_nodes(ctx: GraphContext, x: Tensor) -> Tensor:
    """Fetch V -> Vd: rows of the block's destination nodes."""
    if ctx.node_lo == 0 and ctx.node_hi == x.shape[0]:
        return x
    return x[ctx.node_lo : ctx.node_hi]


def gather_dst_local(ctx: GraphContext, v: Tensor) -> Tensor:
    """BroadcastDst Vd -> E: destination-node rows for every edge."""
    return v.index_select(0, ctx.dst_local)


# ------------------------------------------------------- reduce and norm
def segment_reduce(ctx: GraphContext, e: Tensor, op: str) -> Tensor:
    """Reduce E -> Vd by destination (sum, mean, max, min); zero without in-edges."""
    return _kernels().segment_reduce(e, ctx.dst_local, ctx.num_dst, op)


def edge_softmax(ctx: GraphContext, e: Tensor) -> Tensor:
    """Norm E -> E: softmax over each destination's in-edges."""
    return _kernels().edge_softmax(e, ctx.dst_local, ctx.num_dst)


def zero_unreached(ctx: GraphContext, v: Tensor) -> Tensor:
    """Vd -> Vd: zero the rows of destinations with no in-edges (eager's fill)."""
    mask = ctx.has_in_edges.view((-1,) + (1,) * (v.dim() - 1))
    return torch.where(mask, v, torch.zeros((), dtype=v.dtype, device=v.device))


def bucketed_reduce(
    ctx: GraphContext, fn: Callable[..., dict], kinds: Sequence[str], *inputs: Tensor
) -> dict[str, Tensor]:
    """Run a reduce UDF graph on degree buckets exactly as the eager executor does.

    ``kinds[i]`` says how input i is presented: ``mailbox`` (E values as
    ``[nodes, degree, ...]``), ``data`` (Vd rows), ``type`` (A rows by node
    type) or ``shared``. Returns a dict over all destination nodes, zero
    where nothing arrives.
    """
    buckets = Buckets(ctx.index, ctx.rel, ctx.node_lo)
    boxes = [i for i, kind in enumerate(kinds) if kind == "mailbox"]
    data = buckets.reader(lambda i: inputs[i], ctx.node_lo)
    types = buckets.reader(lambda i: inputs[i], ctx.node_lo, by=lambda nodes: ctx.index.node_type[nodes])
    parts: dict = {}
    for b, (nodes, box) in enumerate(buckets.mailboxes({i: inputs[i] for i in boxes})):
        args = []
        for i, kind in enumerate(kinds):
            if kind == "mailbox":
                args.append(box[i])
            elif kind == "data":
                args.append(data(i)[b])
            elif kind == "type":
                args.append(types(i)[b])
            else:
                args.append(inputs[i])
        for k, v in fn(*args).items():
            parts.setdefault(k, []).append(v)
    return buckets.assemble(parts, ctx.num_dst)


def in_bucket_order(ctx: GraphContext, fn: Callable[[Tensor], Tensor], x: Tensor, rows: str) -> Tensor:
    """E -> E (``rows="edges"``) or Vd -> Vd (``"nodes"``): ``fn(x)`` for an element-wise random ``fn`` of a
    lowered reduce, drawn per degree bucket as eager's when determinism is on (``runtime.bucket_order``)."""
    return bucket_order.in_bucket_order(ctx, fn, x, rows)


def result_field(results: dict[str, Tensor], key: str) -> Tensor:
    """One named output of a bucketed reduce."""
    return results[key]


# ------------------------------------------------------------ fused ops
def source_index(ctx: GraphContext, side: str) -> Tensor:
    """Each edge's row in a source-side table: its source node (``src``) or its (relation, source) pair
    (``src_pair``, the rows of ``etype_pair_matmul(..., "src")``)."""
    if side == "src":
        return ctx.src
    if side == "src_pair":
        return ctx.src_pairs.edge_pair
    raise ValueError(f"unknown source side {side!r}: src or src_pair")


def destination_index(ctx: GraphContext, side: str) -> Tensor:
    """Each edge's row in a destination-side table: over all nodes (``dst``), the block's destinations
    (``dst_local``) or its (relation, destination) pair (``dst_pair``)."""
    if side in ("dst", "dst_local"):
        return getattr(ctx, side)
    if side == "dst_pair":
        return ctx.dst_pairs.edge_pair
    raise ValueError(f"unknown destination side {side!r}: dst, dst_local or dst_pair")


def spmm(ctx: GraphContext, x: Tensor, w: Tensor | None, op: str, reduce: str, x_side: str = "src") -> Tensor:
    """Fused BroadcastSrc + Dense + Reduce: reduce_{e->v} x[src[e]] op w[e] (w None: copy); ``x_side``
    src_pair: x holds (relation, source) pair rows."""
    return _kernels().spmm(
        x, source_index(ctx, x_side), ctx.dst_local, ctx.num_dst, edge_weight=w, op=op, reduce=reduce
    )


def _broadcast(shape_a, shape_b) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` without its first call's imports (torch._refs and sympy: 35 MiB); torch's
    own error where the shapes do not broadcast."""
    try:
        return broadcast_shape(shape_a, shape_b)
    except ValueError:
        return tuple(torch.broadcast_shapes(shape_a, shape_b))


def scaled_spmm(
    ctx: GraphContext,
    x: Tensor,
    w: Tensor | None,
    op: str,
    reduce: str,
    src_scale: Tensor | None,
    dst_scale: Tensor | None,
) -> Tensor:
    """Fused ``spmm(x * src_scale, w) * dst_scale`` (``x_side`` src; a scale may be None), zero at destinations
    without in-edges whatever their scale (as eager leaves the nodes its reduce never sees): with node scales
    of one value per row ([rows, 1, ..., 1], x's dtype) the scales are applied inside the sum; other scales
    run as that composition."""
    out_dim = x.dim() if w is None else 1 + len(_broadcast(x.shape[1:], w.shape[1:]))
    if _row_scale(src_scale, x.shape[0], x.dim(), x) and _row_scale(dst_scale, ctx.num_dst, out_dim, x):
        if dst_scale is not None:  # an unreached row's sum is 0: a zero scale keeps it 0 (an inf one would not)
            dst_scale = torch.where(ctx.has_in_edges.view(dst_scale.shape), dst_scale, 0)
        return _kernels().scaled_spmm(
            x, ctx.src, ctx.dst_local, ctx.num_dst, _flat(src_scale), _flat(dst_scale), edge_weight=w, reduce=reduce
        )
    out = spmm(ctx, x if src_scale is None else x * src_scale, w, op, reduce)
    return out if dst_scale is None else zero_unreached(ctx, out * dst_scale)


def _row_scale(scale, rows: int, ndim: int, like) -> bool:
    """Whether ``scale`` is None or holds one value per row, shaped to broadcast over ``ndim``-dim rows."""
    return scale is None or (
        scale.dim() == ndim
        and scale.shape[0] == rows
        and scale.numel() == rows
        and scale.dtype == like.dtype
        and scale.device == like.device
    )


def _flat(scale):
    return None if scale is None else scale.reshape(-1)


def edge_softmax_aggregate(ctx: GraphContext, logits: Tensor, x: Tensor, x_side: str = "src") -> Tensor:
    """Fused Norm + BroadcastSrc + Reduce: sum_e softmax_v(logits)[e] * x[src[e]] (``x_side`` as in spmm)."""
    return _kernels().edge_softmax_aggregate(logits, x, source_index(ctx, x_side), ctx.dst_local, ctx.num_dst)


def sddmm_softmax_aggregate(
    ctx: GraphContext,
    a: Tensor,
    b: Tensor,
    op: str,
    b_side: str,
    negative_slope: float | None,
    x: Tensor,
    x_side: str = "src",
) -> Tensor:
    """Fused u_op_v + edge_softmax_aggregate: sum_e softmax_v(act(a[src[e]] op b[dst[e]]))[e] * x[src[e]]
    (act: leaky_relu with ``negative_slope`` when given); no [E, ...] logits are written. ``a`` and ``x``
    are read through one source index (``x_side``); ``b`` holds node rows (``b_side`` dst or dst_local) or
    (relation, destination) pair rows (``dst_pair``, read through the pair index)."""
    rows = dst_nodes(ctx, b) if b_side == "dst" else b
    b_index = destination_index(ctx, b_side) if b_side == "dst_pair" else None
    return _kernels().sddmm_softmax_aggregate(
        a,
        rows,
        x,
        source_index(ctx, x_side),
        ctx.dst_local,
        ctx.num_dst,
        op,
        negative_slope=negative_slope,
        b_index=b_index,
    )


def edge_expr_aggregate(
    ctx: GraphContext, program: tuple, sides: tuple[str, ...], operands: tuple[Tensor, ...], reduce: str
) -> Tensor:
    """Fused Broadcast + Dense + Reduce: reduce (sum, mean) over each destination's in-edges of the message
    ``program`` computes per edge (``gnnc.backend.pytorch.edge_expr``) from its operands, read by
    ``sides[k]``: ``src`` (node rows at the edge's source), ``dst`` (node rows at its destination),
    ``dst_local`` (the block's destination rows), ``edge`` (edge rows) or ``shared``; no message of edge
    size is written where the backend generates the loop."""
    rows = [dst_nodes(ctx, t) if side == "dst" else t for t, side in zip(operands, sides)]
    kinds = tuple("dst" if side == "dst_local" else side for side in sides)
    fused = getattr(_kernels(), "edge_expr_aggregate", None) or composed_edge_expr_aggregate
    return fused(program, kinds, tuple(rows), ctx.src, ctx.dst_local, ctx.num_dst, reduce)


def ntype_matmul(ctx: GraphContext, x: Tensor, weight: Tensor) -> Tensor:
    """Typed linear on V: row v times weight[type(v)], no per-node weight copies."""
    return _kernels().segment_matmul(x, ctx.ntype_ptr, weight, None)


def dst_ntype_matmul(ctx: GraphContext, v: Tensor, weight: Tensor) -> Tensor:
    """Typed linear on Vd: destination row v times weight[type(v)]."""
    return _kernels().segment_matmul(v, ctx.dst_ntype_ptr, weight, None)


def etype_gather_matmul(ctx: GraphContext, x: Tensor, weight: Tensor, side: str = "src") -> Tensor:
    """Typed linear on E: x[src[e]] (or x[dst[e]]) times weight[rel(e)], no per-edge weight copies."""
    index = ctx.src if side == "src" else ctx.dst
    return _kernels().gather_segment_matmul(x, index, ctx.rel_ptr, weight)


def etype_gather_head_matmul(ctx: GraphContext, y: Tensor, weight: Tensor, side: str = "src") -> Tensor:
    """Per-head typed linear on E: y[src[e], h] @ weight[rel(e), h] for y [N, H, ..., K], weight [R, H, K, M].

    Runs as one per-relation matmul with block-diagonal [H*K, H*M] weights
    (built from ``weight``, differentiably), so no [E, H, K, M] copies exist.
    """
    return _per_head(y, weight, lambda flat, block: etype_gather_matmul(ctx, flat, block, side))


def _per_head(y, weight, matmul):
    """``matmul(rows [N, H*K], block-diagonal weights [R, H*K, H*M])`` reshaped to y's head layout."""
    rels, heads, k, m = weight.shape
    eye = torch.eye(heads, dtype=weight.dtype, device=weight.device)
    block = torch.einsum("rhkm,hg->rhkgm", weight, eye).reshape(rels, heads * k, heads * m)
    out = matmul(y.reshape(y.shape[0], heads * k), block)
    return out.reshape((out.shape[0],) + tuple(y.shape[1:-1]) + (m,))


# ------------------------------------------ compact materialization (Hector 3.2.2)
def etype_pair_matmul(ctx: GraphContext, x: Tensor, weight: Tensor, side: str = "src") -> Tensor:
    """Typed linear on (relation, node) pairs: row p is x[node[p]] @ weight[rel[p]] for every unique pair
    of the block's edges (``side`` src: source nodes; dst: destinations) — ``etype_gather_matmul`` computed
    once per pair instead of once per edge; edges read it through ``gather_src_pair`` / ``gather_dst_pair``."""
    pairs = ctx.pairs(side)
    return _kernels().gather_segment_matmul(x, pairs.node, pairs.rel_ptr, weight)


def etype_sddmm_softmax_aggregate(
    ctx: GraphContext,
    a: Tensor,
    b: Tensor,
    op: str,
    b_side: str,
    negative_slope: float | None,
    x: Tensor,
    weight: Tensor,
    feat: Sequence[int],
    rebuild: bool = False,
) -> Tensor:
    """``sddmm_softmax_aggregate(a, b, op, b_side, negative_slope, z, "src_pair")`` of the pair table
    z = ``etype_pair_matmul(x, weight, "src").view(-1, *feat)`` (RGAT's typed message under its attention).
    With ``rebuild`` (set by the ``recompute`` pass), where a gradient is recorded through it and z is large
    enough (``rebuild_in_backward.worth_rebuilding``) on a backend that has the kernel, z is not kept for backward but
    rebuilt there a part at a time."""
    pairs = ctx.src_pairs
    fused = getattr(_kernels(), "rebuilt_pair_softmax_aggregate", None)
    if (
        rebuild
        and fused is not None
        and torch.is_grad_enabled()
        and any(t.requires_grad for t in (a, b, x, weight))
        and rebuild_in_backward.worth_rebuilding(pairs.count * math.prod(feat) * x.element_size(), x.device)
    ):
        rows = dst_nodes(ctx, b) if b_side == "dst" else b
        b_index = destination_index(ctx, b_side) if b_side == "dst_pair" else None
        return fused(
            a,
            rows,
            x,
            weight,
            pairs.node,
            pairs.rel_ptr,
            feat,
            pairs.edge_pair,
            ctx.dst_local,
            ctx.num_dst,
            op,
            negative_slope=negative_slope,
            b_index=b_index,
        )
    z = etype_pair_matmul(ctx, x, weight, "src")
    return sddmm_softmax_aggregate(
        ctx, a, b, op, b_side, negative_slope, z.view((z.shape[0],) + tuple(feat)), "src_pair"
    )


def etype_pair_head_matmul(ctx: GraphContext, y: Tensor, weight: Tensor, side: str = "src") -> Tensor:
    """Per-head ``etype_pair_matmul``: y [N, H, ..., K], weight [R, H, K, M] -> [pairs, H, ..., M]."""
    return _per_head(y, weight, lambda flat, block: etype_pair_matmul(ctx, flat, block, side))


def fold_attention(weight: Tensor, attn: Tensor) -> Tensor:
    """Dense on R: [R, K, H * D] weights and [R, H, D] vectors -> [R, K, H], each head's columns times its
    vector (``linear_reorder``'s product of weights)."""
    rels, k, _ = weight.shape
    heads, d = attn.shape[-2], attn.shape[-1]
    return torch.einsum("rkhd,rhd->rkh", weight.reshape(rels, k, heads, d), attn.expand(rels, heads, d))


def scale_heads(weight: Tensor, factor: Tensor) -> Tensor:
    """Dense on R: [R, H, K, M] matrices times a factor per relation and head ([R, H] or [R, 1])
    (``linear_reorder``'s scaled scores)."""
    return weight * factor[:, :, None, None]


def gather_src_pair(ctx: GraphContext, y: Tensor) -> Tensor:
    """BroadcastSrc Ps -> E: each edge's (relation, source) pair row."""
    return _pair_rows(ctx.src_pairs, y)


def gather_dst_pair(ctx: GraphContext, y: Tensor) -> Tensor:
    """BroadcastDst Pd -> E: each edge's (relation, destination) pair row."""
    return _pair_rows(ctx.dst_pairs, y)


def _pair_rows(pairs, y):
    return y if pairs.identity else y.index_select(0, pairs.edge_pair)


def pair_etype_rows(ctx: GraphContext, r: Tensor, side: str) -> Tensor:
    """Broadcast R -> Ps / Pd: the relation's row for every (relation, node) pair (pairs are grouped by
    relation)."""
    return _rows_by_type(r, ctx.pairs(side).rel_ptr)


def etype_spmm(ctx: GraphContext, x: Tensor, weight: Tensor, w: Tensor | None, op: str, reduce: str) -> Tensor:
    """Typed aggregation: reduce (sum, mean) over v's in-edges of (x[src[e]] @ weight[rel(e)]) op w[e] (op mul,
    or copy with w None) — R-GCN's message and sum — in the order ``cost.typed_aggregation`` picks for the
    graph (``cost.choose``: measured under autotune): transformed per (relation, source) pair, then
    aggregated; or, when w is one scalar per edge, aggregated per (relation, destination) pair, then
    transformed and summed per node."""
    runs = {
        cost.TRANSFORM_FIRST: lambda: spmm(ctx, etype_pair_matmul(ctx, x, weight, "src"), w, op, reduce, "src_pair")
    }
    w_shape = None if w is None else tuple(w.shape)
    if _commutes(w_shape, op):
        runs[cost.AGGREGATE_FIRST] = lambda: _aggregate_then_transform(ctx, x, weight, w, op, reduce)
    estimated = etype_spmm_choice(ctx, x.shape[-1], weight.shape[-1], w_shape, op, x.element_size())[1]
    key = ("etype_spmm", tuple(x.shape[1:]), tuple(weight.shape), op, reduce, x.dtype)
    return runs[cost.choose(ctx, key, estimated, runs)]()


def etype_spmm_choice(
    ctx: GraphContext, k: int, m: int, w_shape: tuple[int, ...] | None, op: str, itemsize: int = 4
) -> tuple[list[cost.Candidate], str]:
    """(candidates, the cost model's pick) for ``etype_spmm`` on block ``ctx``: x width k, output width m,
    edge weight of shape ``w_shape`` (None with op copy)."""
    candidates, chosen = cost.typed_aggregation(
        ctx.num_edges, ctx.pair_count("src"), ctx.pair_count("dst"), k, m, itemsize
    )
    return candidates, chosen if _commutes(w_shape, op) else cost.TRANSFORM_FIRST


def _commutes(w_shape: tuple[int, ...] | None, op: str) -> bool:
    """Whether the edge weight commutes with the matmul (copy, or one scalar per edge)."""
    return op == "copy" or (w_shape is not None and len(w_shape) <= 2 and all(d == 1 for d in w_shape[1:]))


def _aggregate_then_transform(ctx, x, weight, w, op, reduce):
    pairs, kernels = ctx.dst_pairs, _kernels()
    per_pair = kernels.spmm(x, ctx.src, pairs.edge_pair, pairs.count, edge_weight=w, op=op, reduce="sum")
    y = kernels.segment_matmul(per_pair, pairs.rel_ptr, weight, None)
    out = kernels.spmm(y, *ctx.dst_pair_edges, ctx.num_dst, op="copy", reduce="sum")
    if reduce == "mean":
        out = out / ctx.in_degrees.clamp(min=1).to(out.dtype).view((-1,) + (1,) * (out.dim() - 1))
    return out


def etype_bilinear_dot(ctx: GraphContext, k: Tensor, weight: Tensor, q: Tensor, q_side: str) -> Tensor:
    """Per edge and head: (k[src[e], h] @ weight[rel(e), h]) . q[dst[e], h] for k [N, H, 1, D], weight
    [R, H, D, D], q [N, H, D] (``q_side`` dst) or destination rows (dst_local) -> [E, H] (HGT's attention).
    The relation matrix is applied per (relation, source) pair to k, or transposed per (relation,
    destination) pair to q, whichever ``cost.typed_dot`` finds cheaper on the graph (``cost.choose``)."""

    def by_source():
        kw = etype_pair_head_matmul(ctx, k, weight, "src").squeeze(-2)
        return _kernels().sddmm(kw, ctx.src_pairs.edge_pair, q, destination_index(ctx, q_side), "dot").squeeze(-1)

    def by_destination():  # q rows are node rows here (destinations start at node 0), as the pair table reads
        qw = etype_pair_head_matmul(ctx, q.unsqueeze(-2), weight.transpose(-1, -2), "dst").squeeze(-2)
        return _kernels().sddmm(k.squeeze(-2), ctx.src, qw, ctx.dst_pairs.edge_pair, "dot").squeeze(-1)

    runs = {cost.BY_SOURCE: by_source}
    if ctx.node_lo == 0:
        runs[cost.BY_DESTINATION] = by_destination
    estimated = etype_bilinear_dot_choice(ctx, weight.shape[1], weight.shape[-1], k.element_size())[1]
    key = ("etype_bilinear_dot", tuple(k.shape[1:]), tuple(weight.shape), q_side, k.dtype)
    return runs[cost.choose(ctx, key, estimated, runs)]()


def etype_bilinear_dot_choice(
    ctx: GraphContext, heads: int, d: int, itemsize: int = 4
) -> tuple[list[cost.Candidate], str]:
    """(candidates, the cost model's pick) for ``etype_bilinear_dot`` on block ``ctx`` ([D, D] matrices per
    head); destination pairs only where destinations start at node 0 (their rows are node rows)."""
    candidates, chosen = cost.typed_dot(ctx.num_edges, ctx.pair_count("src"), ctx.pair_count("dst"), heads, d, itemsize)
    return candidates, chosen if ctx.node_lo == 0 else cost.BY_SOURCE


def index_spmm(
    ctx: GraphContext,
    x: Tensor,
    weight: Tensor,
    types: Tensor,
    w: Tensor | None,
    op: str,
    reduce: str,
    feature: str = "the index",
) -> Tensor:
    """``etype_spmm`` with edge e's relation read from ``types[e]``, an integer edge feature indexing ``weight``
    (DGL's entity-classification R-GCN: ``bmm(x_src, weight[edges.data['rel_type']]) * norm``, summed): the
    block regrouped by type (``GraphContext.retyped``, cached with the graph and the type tensor), then
    either order of ``etype_spmm``, as the cost model picks on the regrouped block. ``w`` is per edge
    (``[E, ...]``) or None with op copy."""
    typed, perm = ctx.retyped(_type_grouping(types, weight.shape[0], feature))
    return etype_spmm(typed, x, weight, None if w is None else w.index_select(0, perm), op, reduce)


def retype(ctx: GraphContext, types: Tensor, num_types: int, feature: str = "the index") -> GraphContext:
    """The whole-graph block ``ctx`` with each edge's relation replaced by ``types[e]`` (an integer edge feature
    in [-num_types, num_types) indexing per-type tables; ``GraphContext.retyped``, cached with the graph and
    the type tensor): a plan moved onto it runs DGL's ``weight[edges.data['rel_type']]`` as typed operators."""
    return ctx.retyped(_type_grouping(types, num_types, feature))[0]


def type_rows(ctx: GraphContext, table: Tensor) -> Tensor:
    """Fetch S -> R: a per-type table ([num_types, ...]) as the relation rows of the ``retype``d block ``ctx``."""
    return table


def edges_to(ctx: GraphContext, x: Tensor) -> Tensor:
    """E -> E: the parent block's edge rows in the edge order of its ``retype``d block ``ctx``."""
    assert ctx.parent_edges is not None, "a retyped block knows its parent's edges"
    return x.index_select(0, ctx.parent_edges)


def edge_rows(ctx: GraphContext, y: Tensor) -> Tensor:
    """E -> E: rows of the block's edges, as they are (an edge value an earlier call computed on ``ctx``)."""
    return y


def edges_from(ctx: GraphContext, y: Tensor) -> Tensor:
    """E -> E: edge rows of the ``retype``d block ``ctx`` back in its parent block's edge order."""
    return y.index_select(0, ctx.parent_edges_inverse)


def index_gather_matmul(
    ctx: GraphContext, x: Tensor, weight: Tensor, types: Tensor, side: str = "src", feature: str = "the index"
) -> Tensor:
    """Typed linear on E by an integer feature: x[src[e]] (``side`` src; dst: x[dst[e]]; dst_local: Vd rows
    x[dst_local[e]]) times weight[types[e]] — ``bmm(x_e.unsqueeze(1), weight[edges.data[...]]).squeeze(1)``
    without per-edge weight copies. ``feature`` names ``types`` in errors."""
    if side not in ("src", "dst", "dst_local"):
        raise ValueError(f"index_gather_matmul: side must be src, dst or dst_local, got {side!r}")
    index = getattr(ctx, side)
    return _kernels().typed_index_matmul(x, index, weight, types, name=feature)


def index_matmul(x: Tensor, weight: Tensor, types: Tensor, feature: str = "the index") -> Tensor:
    """Dense typed linear by an integer feature (rows untouched): x[i] @ weight[types[i]] for x and
    types on the same rows (edge data, or node rows in a node UDF)."""
    return _kernels().typed_index_matmul(x, None, weight, types, name=feature)


def recomputable(value: Tensor, recipe: Callable[..., Tensor], *leaves: Tensor) -> Tensor:
    """``value``, equal to ``recipe(*leaves)``: rebuilt in backward instead of kept when it is a sizeable
    share of memory (``gnnc.backend.rebuild_in_backward``; the ``recompute`` pass)."""
    return rebuild_in_backward.remember(value, recipe, *leaves)


_OUT_OF_PLACE: dict[str, Callable[..., Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}


def in_place(op: str, a: Tensor, b: Tensor | float, unsaved: bool = False) -> Tensor:
    """``a op b`` (op: add, sub, mul or div), written into ``a`` when the result has ``a``'s shape and dtype
    and autograd records nothing here, or records an add / sub (whose gradient reads neither operand) into
    an ``a`` that no backward keeps (``unsaved``: its producer saves only its inputs). The ``inplace`` pass
    passes an ``a`` that nothing else reads."""
    recorded = torch.is_grad_enabled() and (a.requires_grad or (isinstance(b, Tensor) and b.requires_grad))
    recorded_safely = unsaved and op in ("add", "sub") and not a._is_view() and not (a.is_leaf and a.requires_grad)
    if (
        (recorded and not recorded_safely)
        or not a.is_contiguous()
        or torch.result_type(a, b) != a.dtype
        or (op == "div" and not a.is_floating_point())  # true division of integers makes floats
        or (isinstance(b, Tensor) and (b.device != a.device or _broadcast(a.shape, b.shape) != tuple(a.shape)))
    ):
        return _OUT_OF_PLACE[op](a, b)
    return getattr(a, op + "_")(b)


def shared_dot(x: Tensor, w: Tensor | Sequence[Tensor], keepdim: bool) -> Tensor:
    """Dense (rows untouched): (x * w).sum(-1) for x [rows, H..., F] and shared w broadcasting to x's features.

    ``w`` may be a tuple of k such weights: the result is then [rows, H..., k],
    column j holding the sum for ``w[j]`` (``keepdim`` must be true); one
    weight is the case k = 1. Runs as the backend's ``head_dot`` on x viewed
    as [rows, H, F] (H = prod(H...)) with the weights' rows stacked [k, H, F]
    (built differentiably), instead of k [rows, H, F] products and strided sums.
    """
    ws = tuple(w) if isinstance(w, (tuple, list)) else (w,)
    feat = tuple(x.shape[1:])
    heads = math.prod(feat[:-1])
    weights = torch.stack([wj.expand(feat).reshape(heads, feat[-1]) for wj in ws])
    out = _kernels().head_dot(x.reshape(x.shape[0], heads, feat[-1]), weights)
    return out.view(x.shape[:-1] + ((len(ws),) if keepdim else ()))


def u_op_v(
    ctx: GraphContext,
    a: Tensor,
    b: Tensor,
    op: str,
    b_side: str,
    negative_slope: float | None = None,
    a_side: str = "src",
) -> Tensor:
    """Fused BroadcastSrc + BroadcastDst + Dense: a[src[e]] op b[dst[e]] (b over all nodes, Vd or
    destination pairs by ``b_side``; a over nodes or source pairs by ``a_side``), then leaky_relu with
    ``negative_slope`` when given (0: relu)."""
    return _kernels().sddmm(
        a, source_index(ctx, a_side), b, destination_index(ctx, b_side), op, negative_slope=negative_slope
    )


# Primitives whose backends compute in floating point only (integer or bool values run eagerly).
FLOATING_ONLY = frozenset(
    {
        segment_reduce,
        edge_softmax,
        spmm,
        scaled_spmm,
        edge_softmax_aggregate,
        sddmm_softmax_aggregate,
        etype_sddmm_softmax_aggregate,
        edge_expr_aggregate,
        etype_spmm,
        index_spmm,
        u_op_v,
    }
)
