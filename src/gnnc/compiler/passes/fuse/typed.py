"""Rules that fuse typed linear layers with the aggregation reading them.

- ``spmm(etype_pair_matmul(x, W, src), w, mul | copy, sum | mean)`` ->
  ``etype_spmm(x, W, w, op, reduce)``: R-GCN's typed message and sum as one
  operator whose order (transform per source pair then aggregate, or
  aggregate per destination pair then transform) the cost model picks.
- ``sddmm_softmax_aggregate(a, b, ..., view(etype_pair_matmul(x, W, src)), src_pair)`` (the view keeping
  the pair rows, each used once) -> ``etype_sddmm_softmax_aggregate(a, b, ..., x, W, feat)``: RGAT's typed
  message under its attention, whose pair table the ``recompute`` pass may let backward rebuild.
- ``segment_reduce(index_gather_matmul(x, W, t, src) [* w], sum | mean)``, ``w`` one value per edge
  -> ``index_spmm(x, W, t, w, op, reduce)``: the same with the type read from edge data (DGL's
  ``bmm(edges.src['h'].unsqueeze(1), weight[edges.data['rel_type']]).squeeze() * norm``).
"""

from __future__ import annotations

import math

import torch.fx as fx

from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node, same_value
from ..patterns import binary_op, is_call, unsqueezed_then_squeezed


def typed_softmax_aggregation(out: MPDFG) -> None:
    """Every ``sddmm_softmax_aggregate`` of a per-pair typed linear as ``etype_sddmm_softmax_aggregate``."""
    g = out.graph
    for agg in [n for n in g.nodes if is_call(n, ops.sddmm_softmax_aggregate)]:
        ctx, a, b, op, side, slope, x = agg.args[:7]
        found = _pair_table_rows(x) if (agg.args[7] if len(agg.args) > 7 else "src") == "src_pair" else None
        if found is None:
            continue
        table, feat = found
        with g.inserting_before(agg):
            new = same_value(
                new_node(
                    g,
                    agg,
                    ops.etype_sddmm_softmax_aggregate,
                    (ctx, a, b, op, side, slope, table.args[1], table.args[2], feat),
                ),
                agg,
            )
        new.meta["pair_table"] = tuple(table.meta["shape"])  # for the estimates: its FLOPs and choices
        agg.replace_all_uses_with(new)
        g.erase_node(agg)
        out.log.append(
            f"fuse: {agg.meta.get('source')}: typed linear per (relation, source) pair + softmax "
            "aggregation -> etype_sddmm_softmax_aggregate (the pair table may be rebuilt in backward)"
        )


def _pair_table_rows(x):
    """(the ``etype_pair_matmul`` by source behind ``x``, x's feature shape) when ``x`` is that table or a view of
    it keeping its rows, each read by nothing else; else None."""
    shape = x.meta.get("shape") if isinstance(x, fx.Node) else None
    table = x
    if isinstance(x, fx.Node) and x.op == "call_method" and x.target in ("view", "reshape") and len(x.users) == 1:
        table = x.args[0]
    if shape is None or not (
        is_call(table, ops.etype_pair_matmul)
        and len(table.users) == 1
        and table.kwargs.get("side", table.args[3] if len(table.args) > 3 else "src") == "src"
    ):
        return None
    rows = table.meta.get("shape")
    if rows is None or len(rows) != 2 or rows[0] != shape[0] or math.prod(shape[1:]) != rows[1]:
        return None
    return table, tuple(shape[1:])


def typed_aggregation(out: MPDFG) -> None:
    """Every ``spmm`` of a per-pair typed linear by source as ``etype_spmm``."""
    g = out.graph
    for agg in [n for n in g.nodes if is_call(n, ops.spmm)]:
        ctx, y, w, op, reduce = agg.args[:5]
        x_side = agg.args[5] if len(agg.args) > 5 else "src"
        if not (
            x_side == "src_pair"
            and is_call(y, ops.etype_pair_matmul)
            and len(y.users) == 1
            and op in ("mul", "copy")
            and reduce in ("sum", "mean")
            and y.kwargs.get("side", y.args[3] if len(y.args) > 3 else "src") == "src"
        ):
            continue
        with g.inserting_before(agg):
            new = same_value(new_node(g, agg, ops.etype_spmm, (ctx, y.args[1], y.args[2], w, op, reduce)), agg)
        agg.replace_all_uses_with(new)
        g.erase_node(agg)
        out.log.append(
            f"fuse: {agg.meta.get('source')}: typed linear + {reduce} -> etype_spmm (the cost model "
            "picks transform-first or aggregate-first per graph)"
        )


def index_typed_aggregation(out: MPDFG) -> None:
    """Every sum or mean of a typed linear by a type feature (times an edge weight) as ``index_spmm``."""
    g = out.graph
    for red in [n for n in g.nodes if is_call(n, ops.segment_reduce)]:
        ctx, m, reduce = red.args
        found = _index_typed_message(m) if reduce in ("sum", "mean") else None
        if found is None:
            continue
        typed, w = found
        _, x, weight, types, side, feature = typed.args
        with g.inserting_before(red):
            new = same_value(
                new_node(
                    g, red, ops.index_spmm, (ctx, x, weight, types, w, "copy" if w is None else "mul", reduce, feature)
                ),
                red,
            )
        red.replace_all_uses_with(new)
        g.erase_node(red)
        out.log.append(
            f"fuse: {red.meta.get('source')}: typed linear by {feature} + {reduce} -> index_spmm (the "
            "cost model picks transform-first or aggregate-first per graph and type tensor)"
        )


def _index_typed_message(m):
    """(index_gather_matmul node, per-edge weight or None) when message ``m`` is ``x[src] @ W[types]``, times
    an [E, 1] edge weight or not, each node used once; else None. The typed product may pass through the
    ``unsqueeze(-2).squeeze()`` that keeps eager's ``bmm(...).squeeze()`` when its width is not one."""
    if binary_op(m) != "mul":
        typed = _index_typed_product(m)
        return None if typed is None else (typed, None)
    if len(m.users) != 1:
        return None
    a, b = m.args
    for product, weight in ((a, b), (b, a)):
        typed = _index_typed_product(product) if _edge_column(weight) else None
        if typed is not None:
            return typed, weight
    return None


def _edge_column(n) -> bool:
    """Whether ``n`` is an edge value of one element per edge ([E, 1])."""
    shape = n.meta.get("shape") if isinstance(n, fx.Node) else None
    return shape is not None and len(shape) == 2 and shape[1] == 1 and n.meta.get("res") == "E"


def _index_typed_product(m):
    """The ``index_gather_matmul`` by source behind ``m`` (itself, or under its width-keeping
    ``unsqueeze(-2).squeeze()``), each used once; else None."""
    if not isinstance(m, fx.Node):
        return None
    if m.op == "call_method" and m.target == "squeeze" and len(m.args) == 1:
        m = unsqueezed_then_squeezed(m)
        if m is None:
            return None
    if not (
        is_call(m, ops.index_gather_matmul)
        and len(m.users) == 1
        and m.args[4] == "src"
        and len(m.meta.get("shape") or ()) == 2
    ):
        return None
    return m
