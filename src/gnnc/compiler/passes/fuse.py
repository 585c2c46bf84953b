"""Broadcast fusion: gather-compute-reduce chains become one fused primitive.

Patterns on the lowered graph (``ctx`` omitted):
- ``segment_reduce(p * gather_dst(b), sum | mean)`` -> ``segment_reduce(p) * b``:
  a destination-side factor is constant within each destination's sum, so it
  is applied after aggregation (propagation postponement), which often
  leaves a plain gather-reduce for the patterns below
- ``segment_reduce(t ± gather_dst(b), max | min | mean)`` ->
  ``segment_reduce(t) ± zero_unreached(b)``: a destination-side term is
  constant within each destination's max, min or mean, so it is added after
  (EdgeConv's ``max_u (W x_u - W x_v + W' x_v)``); nodes without in-edges
  keep 0
- ``segment_reduce(gather_src(x), op)`` -> ``spmm(x, None, copy, op)``
- ``segment_reduce(gather_src(x) * w, op)`` with ``w`` edge data and op sum
  or mean -> ``spmm(x, w, mul, op)``: no ``[E, F]`` message is built
- ``gather_src(a) op gather_dst(b)`` (op add, sub, mul, div; the gathers
  used nowhere else) -> ``u_op_v(a, b, op)``: one generalized SDDMM writes the
  edge result without materialising either gathered operand
- ``leaky_relu(u_op_v(a, b, op))`` (also relu, ``nn.LeakyReLU``, ``nn.ReLU``;
  the SDDMM used nowhere else) -> ``u_op_v(a, b, op, negative_slope)``: the
  activation is applied as the SDDMM writes (GAT's attention logits)
- ``segment_reduce(edge_softmax(l) * gather_src(x), sum)`` (also with
  ``edge_softmax(l).unsqueeze(-1)``, or ``l`` carrying a trailing unit dim)
  -> ``edge_softmax_aggregate(l, x)``: stores only per-node max and
  denominator for backward.
- ``edge_softmax_aggregate(u_op_v(a, b, op, negative_slope), x)`` (also
  through the ``squeeze(-1)`` above; a, b of the SDDMM's shape, the SDDMM
  used nowhere else) -> ``sddmm_softmax_aggregate(a, b, op, negative_slope,
  x)``: the logits are computed where the softmax reads them and never
  written (GAT: the attention scores of ``apply_edges`` reach here as a
  deferred SDDMM, see ``gnnc.runtime.deferred``).
- ``sum(u_op_v(a, b, mul), -1)`` (a, b of the product's shape) -> ``u_op_v(a, b, dot).squeeze(-1)``:
  a per-head dot product of a source row and a destination row (HGT's
  attention) without its [E, H, F] product.
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
Every ``gather_src`` above may also be a ``gather_src_pair`` of (relation,
source) pair rows (``compact``), and ``gather_dst`` a ``gather_dst_pair``
where the destination row is not hoisted: the fused operator then reads
that table through the pair index (its ``x_side`` / ``a_side`` /
``b_side``). The logits of ``sddmm_softmax_aggregate`` need ``a`` and ``x``
on one source index; ``b`` may be by destination node or pair.
The producers stay when something else uses them; DCE removes them otherwise.

The fused kernels take floating operands of one dtype. Where torch's type promotion would compute the
unfused operator in another dtype than an operand's (a float feature times a bool mask, float32 times
float64), that operand is cast to it first (``x.to(dtype)``: exact, and on node rows before the
gather where it can); a postponed factor or hoisted term is left in place when the rest would then
be reduced in another dtype than the unfused reduction, and nothing is fused into a kernel whose
result would not be floating point.
"""

from __future__ import annotations

import functools
import math
import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .dce import dce
from .nodes import new_node, same_value
from .patterns import binary_op, is_call, is_last_dim_sum, unsqueezed_then_squeezed

_MULS = {operator.mul, torch.mul}


_SOURCE_SIDES = {ops.gather_src: "src", ops.gather_src_pair: "src_pair"}
_DESTINATION_SIDES = {ops.gather_dst: "dst", ops.gather_dst_local: "dst_local", ops.gather_dst_pair: "dst_pair"}


def _source_side(n) -> str | None:
    """``x_side`` of a fused operator reading what ``n`` gathers: src, src_pair, or None (not a source gather)."""
    return _SOURCE_SIDES.get(n.target) if isinstance(n, fx.Node) and n.op == "call_function" else None


def _softmax_logits(n):
    """(logits node, needs squeeze of last dim) when n is edge_softmax(l) or its unsqueeze(-1)."""
    if is_call(n, ops.edge_softmax):
        return n.args[1], True
    if (
        isinstance(n, fx.Node)
        and n.op == "call_method"
        and n.target == "unsqueeze"
        and n.args[1] == -1
        and is_call(n.args[0], ops.edge_softmax)
    ):
        return n.args[0].args[1], False
    return None


_BINARY = {
    operator.add: "add",
    torch.add: "add",
    operator.sub: "sub",
    torch.sub: "sub",
    operator.mul: "mul",
    torch.mul: "mul",
    operator.truediv: "div",
    torch.div: "div",
}


def _float_dtype(n):
    """The dtype of node ``n``'s value when it is floating point (what a fused kernel can compute), else None."""
    dtype = n.meta.get("dtype") if isinstance(n, fx.Node) else None
    return dtype if dtype is not None and dtype.is_floating_point else None


def _promoted(values):
    """The dtype torch's type promotion gives a product (or sum) of ``values``, nodes whose shape and dtype
    are known (zero-dim ones count as torch counts them); None when one is not known."""
    if any(v.meta.get("dtype") is None or v.meta.get("shape") is None for v in values):
        return None
    return functools.reduce(
        operator.mul, [torch.empty((0,) * len(v.meta["shape"]), dtype=v.meta["dtype"]) for v in values]
    ).dtype


def _as_dtype(g, like, x, dtype):
    """``x``, or ``x.to(dtype)`` when its dtype is another: an operand as the unfused operator computes with it."""
    if x.meta.get("dtype") == dtype:
        return x
    cast = new_node(g, like, "to", (x, dtype), op="call_method")
    cast.meta.update({k: x.meta[k] for k in ("shape", "res") if k in x.meta}, dtype=dtype)
    return cast


def _fuse_sddmm(out: MPDFG) -> None:
    g = out.graph
    for n in list(g.nodes):
        if not (n.op == "call_function" and n.target in _BINARY and len(n.args) == 2 and not n.kwargs):
            continue
        a, b = n.args
        a_side = _source_side(a)
        b_side = _DESTINATION_SIDES.get(b.target) if isinstance(b, fx.Node) and b.op == "call_function" else None
        dtype = _float_dtype(n)
        if a_side is None or b_side is None or len(a.users) != 1 or len(b.users) != 1 or dtype is None:
            continue
        with g.inserting_before(n):
            x, y = (_as_dtype(g, n, v.args[1], dtype) for v in (a, b))
            new = same_value(new_node(g, n, ops.u_op_v, (a.args[0], x, y, _BINARY[n.target], b_side, None, a_side)), n)
        n.replace_all_uses_with(new)
        g.erase_node(n)
        out.log.append(
            f"fuse: {n.meta.get('source')}: {a.target.__name__} {_BINARY[n.target]} {b.target.__name__} "
            "-> u_op_v (SDDMM)"
        )


def _fuse_dot(out: MPDFG) -> None:
    g = out.graph
    for sddmm in [n for n in g.nodes if is_call(n, ops.u_op_v)]:
        if sddmm.args[3] != "mul" or _slope(sddmm) is not None or len(sddmm.users) != 1:
            continue
        total = next(iter(sddmm.users))
        shape = sddmm.meta.get("shape")
        if not (
            is_last_dim_sum(total)
            and total.args[0] is sddmm
            and not total.kwargs.get("keepdim", False)
            and len(total.args) <= 2
            and shape
            and len(shape) >= 2
            and all(x.meta.get("shape") and tuple(x.meta["shape"][1:]) == tuple(shape[1:]) for x in sddmm.args[1:3])
        ):
            continue
        with g.inserting_before(total):
            args = list(sddmm.args)
            args[3] = "dot"
            dot = new_node(g, total, ops.u_op_v, tuple(args))
            new = same_value(new_node(g, total, "squeeze", (dot, -1), op="call_method"), total)
        total.replace_all_uses_with(new)
        g.erase_node(total)
        out.log.append(
            f"fuse: {total.meta.get('source')}: sum of a source-destination product -> u_op_v dot "
            "(no [E, ..., F] product)"
        )


def _slope(sddmm: fx.Node):
    return sddmm.args[5] if len(sddmm.args) > 5 else None


def _leaky_slope(n: fx.Node, root) -> float | None:
    """The negative slope when ``n`` is leaky_relu or relu of its first argument (as function, method or
    module), else None."""
    if n.op == "call_module":
        module = root.get_submodule(n.target)
        if isinstance(module, nn.LeakyReLU) and len(n.args) == 1:
            return float(module.negative_slope)
        return 0.0 if isinstance(module, nn.ReLU) and len(n.args) == 1 else None
    if n.op == "call_function" and n.target is F.leaky_relu:
        slope = n.kwargs.get("negative_slope", n.args[1] if len(n.args) > 1 else 0.01)
        return float(slope) if isinstance(slope, (int, float)) and not isinstance(slope, bool) else None
    if (n.op == "call_function" and n.target in (F.relu, torch.relu)) or (n.op == "call_method" and n.target == "relu"):
        return 0.0 if len(n.args) == 1 and not n.kwargs.get("inplace") else None
    return None


def _fuse_activation(out: MPDFG) -> None:
    g = out.graph
    for sddmm in [n for n in g.nodes if is_call(n, ops.u_op_v)]:
        if _slope(sddmm) is not None or sddmm.args[3] == "dot" or len(sddmm.users) != 1:
            continue
        act = next(iter(sddmm.users))
        slope = _leaky_slope(act, out.root) if act.args and act.args[0] is sddmm else None
        if slope is None:
            continue
        with g.inserting_before(act):
            new = same_value(new_node(g, act, ops.u_op_v, sddmm.args[:5] + (slope,) + sddmm.args[6:]), act)
        act.replace_all_uses_with(new)
        out.log.append(f"fuse: {act.meta.get('source')}: leaky_relu applied inside u_op_v (slope {slope:g})")


def _factors(n: fx.Node, top: bool = True) -> list:
    """Leaves of a product tree whose inner products have no other user."""
    if (
        isinstance(n, fx.Node)
        and n.op == "call_function"
        and n.target in _MULS
        and len(n.args) == 2
        and not n.kwargs
        and (top or len(n.users) == 1)
    ):
        return _factors(n.args[0], False) + _factors(n.args[1], False)
    return [n]


def _dst_rows(g, like, ctx, gather):
    """The destination-node rows a gather_dst / gather_dst_local node broadcasts to edges."""
    if gather.target is ops.gather_dst_local:
        return gather.args[1]
    return new_node(g, like, ops.dst_nodes, (ctx, gather.args[1]))


def _postpone_dst_factors(out: MPDFG) -> None:
    g = out.graph
    for red in [n for n in g.nodes if is_call(n, ops.segment_reduce)]:
        ctx, e, op = red.args
        if op not in ("sum", "mean") or not isinstance(e, fx.Node) or len(e.users) != 1:
            continue
        factors = _factors(e)
        dst_side = [f for f in factors if is_call(f, ops.gather_dst) or is_call(f, ops.gather_dst_local)]
        rest = [f for f in factors if f not in dst_side]
        if (
            len(factors) < 2
            or not dst_side
            or not rest
            or not all(isinstance(f, fx.Node) for f in rest)
            or _promoted(rest) != e.meta.get("dtype")
        ):  # else the rest would be summed in another dtype
            continue
        with g.inserting_before(red):
            product = rest[0]
            for f in rest[1:]:
                product = new_node(g, red, operator.mul, (product, f))
            product.meta["dtype"] = e.meta["dtype"]  # the spmm fusion below reads it
            scaled = new_node(g, red, ops.segment_reduce, (ctx, product, op))
            for f in dst_side:
                value = _dst_rows(g, red, ctx, f)
                scaled = new_node(g, red, operator.mul, (scaled, value))
        red.replace_all_uses_with(scaled)
        g.erase_node(red)
        out.log.append(f"fuse: {red.meta.get('source')}: destination-side factor applied after the {op}")


_SIGNED = {operator.add: 1, torch.add: 1, operator.sub: -1, torch.sub: -1}


def _terms(n, sign: int = 1, top: bool = True) -> list:
    """(leaf, +1 or -1) of a sum/difference tree whose inner nodes have no other user."""
    if (
        isinstance(n, fx.Node)
        and n.op == "call_function"
        and n.target in _SIGNED
        and len(n.args) == 2
        and not n.kwargs
        and (top or len(n.users) == 1)
    ):
        left, right = n.args
        return _terms(left, sign, False) + _terms(right, sign * _SIGNED[n.target], False)
    return [(n, sign)]


def _signed_sum(g, like, terms):
    total = None
    for node, sign in terms:
        if total is None:
            total = node if sign > 0 else new_node(g, like, operator.neg, (node,))
        else:
            total = new_node(g, like, operator.add if sign > 0 else operator.sub, (total, node))
    return total


def _hoist_dst_terms(out: MPDFG) -> None:
    g = out.graph
    for red in [n for n in g.nodes if is_call(n, ops.segment_reduce)]:
        ctx, e, op = red.args
        if op not in ("max", "min", "mean") or not isinstance(e, fx.Node) or len(e.users) != 1:
            continue
        terms = _terms(e)
        dst_side = [(f, s) for f, s in terms if is_call(f, ops.gather_dst) or is_call(f, ops.gather_dst_local)]
        rest = [(f, s) for f, s in terms if (f, s) not in dst_side]
        if (
            not dst_side
            or not rest
            or not all(isinstance(f, fx.Node) for f, _ in rest)
            or _promoted([f for f, _ in rest]) != e.meta.get("dtype")
        ):  # else reduced in another dtype
            continue
        with g.inserting_before(red):
            reduced = new_node(g, red, ops.segment_reduce, (ctx, _signed_sum(g, red, rest), op))
            values = [(_dst_rows(g, red, ctx, f), s) for f, s in dst_side]
            hoisted = new_node(
                g,
                red,
                operator.add,
                (reduced, new_node(g, red, ops.zero_unreached, (ctx, _signed_sum(g, red, values)))),
            )
        red.replace_all_uses_with(hoisted)
        g.erase_node(red)
        out.log.append(f"fuse: {red.meta.get('source')}: destination-side term added after the {op}")


def fuse(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    _postpone_dst_factors(out)
    _hoist_dst_terms(out)
    out = dce(out).dfg  # the hoisted sums' old terms: nothing below should fuse them
    _fuse_sddmm(out)
    _fuse_dot(out)
    _fuse_activation(out)
    g = out.graph
    for red in [n for n in g.nodes if is_call(n, ops.segment_reduce)]:
        ctx, e, op = red.args
        with g.inserting_before(red):
            fused = _fuse_one(g, red, ctx, e, op)
        if fused is None:
            continue
        new, what = fused
        red.replace_all_uses_with(new)
        g.erase_node(red)
        out.log.append(f"fuse: {red.meta.get('source')}: {what}")
    _fuse_softmax_logits(out)
    _fuse_typed_softmax_aggregation(out)
    _fuse_typed_aggregation(out)
    _fuse_index_typed_aggregation(out)
    return rewrote(dfg, out)


def _fuse_typed_aggregation(out: MPDFG) -> None:
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


def _fuse_typed_softmax_aggregation(out: MPDFG) -> None:
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


def _fuse_index_typed_aggregation(out: MPDFG) -> None:
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


def _sddmm_logits(logits):
    """(u_op_v node, squeezed) when ``logits`` is an elementwise SDDMM or its squeeze(-1), each used once,
    whose operands have its shape; else None."""
    squeezed = (
        isinstance(logits, fx.Node)
        and logits.op == "call_method"
        and logits.target == "squeeze"
        and tuple(logits.args[1:]) == (-1,)
        and len(logits.users) == 1
    )
    sddmm = logits.args[0] if squeezed else logits
    if not (
        is_call(sddmm, ops.u_op_v)
        and sddmm.args[3] != "dot"
        and len(sddmm.users) == 1
        and sddmm.args[4] in ("dst", "dst_local", "dst_pair")
    ):
        return None
    shape = sddmm.meta.get("shape")
    if shape is None or any(
        x.meta.get("shape") is None or tuple(x.meta["shape"][1:]) != tuple(shape[1:]) for x in sddmm.args[1:3]
    ):
        return None
    return sddmm, squeezed


def _fuse_softmax_logits(out: MPDFG) -> None:
    g = out.graph
    for agg in [n for n in g.nodes if is_call(n, ops.edge_softmax_aggregate)]:
        ctx, logits, x = agg.args[:3]
        x_side = agg.args[3] if len(agg.args) > 3 else "src"
        found = _sddmm_logits(logits)
        if found is None or (found[0].args[6] if len(found[0].args) > 6 else "src") != x_side:
            continue
        sddmm, squeezed = found
        _, a, b, op, side = sddmm.args[:5]
        with g.inserting_before(agg):
            if squeezed:
                a, b = (new_node(g, agg, "squeeze", (t, -1), op="call_method") for t in (a, b))
            new = new_node(g, agg, ops.sddmm_softmax_aggregate, (ctx, a, b, op, side, _slope(sddmm), x, x_side))
        agg.replace_all_uses_with(new)
        g.erase_node(agg)
        out.log.append(
            f"fuse: {agg.meta.get('source')}: SDDMM logits computed inside the softmax aggregation "
            "-> sddmm_softmax_aggregate"
        )


def _fuse_one(g, red, ctx, e, op):
    side = _source_side(e)
    if side is not None:
        return new_node(g, red, ops.spmm, (ctx, e.args[1], None, "copy", op, side)), f"gather + {op} -> spmm"
    if not (isinstance(e, fx.Node) and e.op == "call_function" and e.target in _MULS and len(e.args) == 2):
        return None
    left, right = e.args
    if _source_side(left) is not None and _source_side(left) == _source_side(right):
        product = new_node(g, red, operator.mul, (left.args[1], right.args[1]))
        return (
            new_node(g, red, ops.spmm, (ctx, product, None, "copy", op, _source_side(left))),
            f"source-side product + {op} -> spmm",
        )
    for gathered, other in ((left, right), (right, left)):
        side = _source_side(gathered)
        if side is None:
            continue
        x = gathered.args[1]
        soft = _softmax_logits(other)
        if soft is not None and op == "sum" and other.meta.get("dtype") == x.meta.get("dtype") == e.meta.get("dtype"):
            logits, squeeze = soft
            lshape, xshape = logits.meta.get("shape"), gathered.meta.get("shape")
            if squeeze and lshape and xshape and len(lshape) == len(xshape) and lshape[-1] == 1:
                logits = new_node(g, red, "squeeze", (logits, -1), op="call_method")
                lshape = lshape[:-1]
            if lshape and xshape and tuple(lshape) == tuple(xshape[:-1]):
                return (
                    new_node(g, red, ops.edge_softmax_aggregate, (ctx, logits, x, side)),
                    "edge softmax + gather + weighted sum -> edge_softmax_aggregate",
                )
        dtype = _float_dtype(e)
        if (
            isinstance(other, fx.Node)
            and other.meta.get("shape") is not None
            and other.meta.get("res") == "E"
            and op in ("sum", "mean")
            and dtype is not None
        ):  # an edge tensor (not a size read off one)
            x, other = _as_dtype(g, red, x, dtype), _as_dtype(g, red, other, dtype)
            return new_node(g, red, ops.spmm, (ctx, x, other, "mul", op, side)), f"gather * edge data + {op} -> spmm"
    return None
