"""The rule that turns a reduction of gathered rows into one sparse primitive.

- ``segment_reduce(gather_src(x), op)`` -> ``spmm(x, None, copy, op)``
- ``segment_reduce(gather_src(x) * w, op)`` with ``w`` edge data and op sum
  or mean -> ``spmm(x, w, mul, op)``: no ``[E, F]`` message is built
- ``segment_reduce(edge_softmax(l) * gather_src(x), sum)`` (also with
  ``edge_softmax(l).unsqueeze(-1)``, or ``l`` carrying a trailing unit dim)
  -> ``edge_softmax_aggregate(l, x)``: stores only per-node max and
  denominator for backward.
"""

from __future__ import annotations

import operator

import torch.fx as fx

from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node
from ..patterns import is_call
from .operands import MULS, as_dtype, float_dtype, source_side


def aggregate(out: MPDFG) -> None:
    """Every ``segment_reduce`` of gathered rows (times edge data, or under an edge softmax) as one primitive."""
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


def _fuse_one(g, red, ctx, e, op):
    side = source_side(e)
    if side is not None:
        return new_node(g, red, ops.spmm, (ctx, e.args[1], None, "copy", op, side)), f"gather + {op} -> spmm"
    if not (isinstance(e, fx.Node) and e.op == "call_function" and e.target in MULS and len(e.args) == 2):
        return None
    left, right = e.args
    if source_side(left) is not None and source_side(left) == source_side(right):
        product = new_node(g, red, operator.mul, (left.args[1], right.args[1]))
        return (
            new_node(g, red, ops.spmm, (ctx, product, None, "copy", op, source_side(left))),
            f"source-side product + {op} -> spmm",
        )
    for gathered, other in ((left, right), (right, left)):
        side = source_side(gathered)
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
        dtype = float_dtype(e)
        if (
            isinstance(other, fx.Node)
            and other.meta.get("shape") is not None
            and other.meta.get("res") == "E"
            and op in ("sum", "mean")
            and dtype is not None
        ):  # an edge tensor (not a size read off one)
            x, other = as_dtype(g, red, x, dtype), as_dtype(g, red, other, dtype)
            return new_node(g, red, ops.spmm, (ctx, x, other, "mul", op, side)), f"gather * edge data + {op} -> spmm"
    return None


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
