"""Rules that move destination-side work past a reduction (propagation postponement).

- ``segment_reduce(p * gather_dst(b), sum | mean)`` -> ``segment_reduce(p) * b``:
  a destination-side factor is constant within each destination's sum, so it
  is applied after aggregation (propagation postponement), which often
  leaves a plain gather-reduce for ``aggregate``
- ``segment_reduce(t ± gather_dst(b), max | min | mean)`` ->
  ``segment_reduce(t) ± zero_unreached(b)``: a destination-side term is
  constant within each destination's max, min or mean, so it is added after
  (EdgeConv's ``max_u (W x_u - W x_v + W' x_v)``); nodes without in-edges
  keep 0

A postponed factor or hoisted term is left in place when the rest would then be reduced in another dtype
than the unfused reduction.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node
from ..patterns import is_call
from .operands import MULS, promoted


def _factors(n: fx.Node, top: bool = True) -> list:
    """Leaves of a product tree whose inner products have no other user."""
    if (
        isinstance(n, fx.Node)
        and n.op == "call_function"
        and n.target in MULS
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


def postpone_dst_factors(out: MPDFG) -> None:
    """Every sum or mean of a product with destination-side factors: those factors applied after it."""
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
            or promoted(rest) != e.meta.get("dtype")
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


def hoist_dst_terms(out: MPDFG) -> None:
    """Every max, min or mean of a sum with destination-side terms: those terms added after it."""
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
            or promoted([f for f, _ in rest]) != e.meta.get("dtype")
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
