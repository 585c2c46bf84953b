"""Node scales folded into sums: ``spmm(x * s) * d`` -> ``scaled_spmm(x, s, d)``.

GCN's message ``c_u * c_v * z_u``, once ``fuse`` has applied the destination
factor after the sum and merged the source-side product, is a sum of
``z * c`` rows scaled by ``c`` again: two [N, F] tensors, ``z * c`` and the
unscaled sum, each written, kept for backward and multiplied again in
backward. When a factor is a column of one value per node (``[N, 1]``, as
many dims as the rows it scales), the sum applies it as it reads (source)
or writes (destination) a row instead.

Pattern: ``spmm(mul(x, s), w, copy | mul, sum | mean)`` on source nodes,
the product used only there, and/or the spmm used only by ``mul(spmm, d)``;
either factor may be absent. The shapes are the annotated ones; at run time
``ops.scaled_spmm`` checks them again and runs the composition otherwise.
A ``zero_unreached`` of the result (the destination factor hoisted out of a
reduce UDF) goes too: ``scaled_spmm`` leaves destinations without in-edges
at zero whatever their scale, as eager does.
"""

from __future__ import annotations

import torch.fx as fx

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .dce import dce
from .nodes import new_node, same_value
from .patterns import binary_op, is_call


def _product(n) -> tuple | None:
    """The two operands of ``n`` when it is a plain product (function or method), else None."""
    return n.args if binary_op(n) == "mul" else None


def _is_column(scale, rows) -> bool:
    """Whether ``scale`` is a node of one value per row of ``rows`` (same dims, all but the first of size 1)."""
    if not isinstance(scale, fx.Node) or not isinstance(rows, fx.Node) or scale.meta.get("res") == "E":
        return False
    a, b = scale.meta.get("shape"), rows.meta.get("shape")
    return (
        a is not None
        and b is not None
        and len(a) == len(b) >= 1
        and a[0] == b[0]
        and all(d == 1 for d in a[1:])
        and scale.meta.get("dtype") == rows.meta.get("dtype")
    )


def _source_factor(y) -> tuple | None:
    """(x, scale) when ``y`` is a product of node rows ``x`` and a column ``scale``, else None."""
    pair = _product(y)
    if pair is None:
        return None
    for x, scale in (pair, pair[::-1]):
        if _is_column(scale, x):
            return x, scale
    return None


def _destination_factor(sp):
    """The column that scales ``sp``'s rows when ``sp``'s only user is that product, else None."""
    user = next(iter(sp.users)) if len(sp.users) == 1 else None
    pair = _product(user)
    if pair is None or sp not in pair:
        return None
    scale = pair[1] if pair[0] is sp else pair[0]
    return scale if scale is not sp and _is_column(scale, sp) else None


def node_scales(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    for sp in [n for n in g.nodes if is_call(n, ops.spmm)]:
        ctx, y, w, op, reduce = sp.args[:5]
        x_side = sp.args[5] if len(sp.args) > 5 else "src"
        if x_side != "src" or op not in ("copy", "mul") or reduce not in ("sum", "mean"):
            continue
        source = _source_factor(y) if len(y.users) == 1 else None
        x, src_scale = source if source is not None else (y, None)
        dst_scale = _destination_factor(sp)
        if src_scale is None and dst_scale is None:
            continue
        end = next(iter(sp.users)) if dst_scale is not None else sp
        with g.inserting_before(end):
            new = same_value(new_node(g, sp, ops.scaled_spmm, (ctx, x, w, op, reduce, src_scale, dst_scale)), end)
        end.replace_all_uses_with(new)
        zeroed = next(iter(new.users)) if len(new.users) == 1 else None
        if is_call(zeroed, ops.zero_unreached) and zeroed.args[1] is new:  # scaled_spmm zeroes those rows itself
            zeroed.replace_all_uses_with(new)
        out.log.append(
            f"node_scales: {sp.meta.get('source')}: "
            + " and ".join(side for side, s in (("source", src_scale), ("destination", dst_scale)) if s is not None)
            + " node scale applied inside the sum -> scaled_spmm"
        )
    return rewrote(dfg, dce(out).dfg)
