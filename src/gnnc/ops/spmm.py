"""DGL's generalized SpMM (``dgl.ops.gspmm``) and its named forms (``u_mul_e_sum``, ``copy_u_max``, ...)."""

from __future__ import annotations

import torch

from .. import backend
from ..message_passing import graph_call
from .relation import check_operand, relation_of

BINARY_OPS = ("add", "sub", "mul", "div")
OPS = BINARY_OPS + ("copy_lhs", "copy_rhs")
REDUCES = ("sum", "max", "min", "mean")
_EMPTY = {"max": float("-inf"), "min": float("inf")}  # what max / min give a node without in-edges, as DGL


@graph_call
def gspmm(g, op: str, reduce_op: str, lhs_data, rhs_data):
    """``out[v] = reduce_op over edges (u, e, v) of (lhs_data[u] op rhs_data[e])`` on ``g``'s one relation.

    ``op`` in add, sub, mul, div, copy_lhs (message ``lhs_data[u]``; ``rhs_data`` unused), copy_rhs
    (message ``rhs_data[e]``); ``reduce_op`` in sum, max, min, mean. ``lhs_data`` has one row per source
    node, ``rhs_data`` one per edge in the user's edge order; their feature dims broadcast right-aligned
    (numpy rules). The result has one row per destination node. As DGL: a node without in-edges gets 0 from
    sum and mean, -inf from max and inf from min. Differentiable in both operands; max and min send each
    gradient to the one edge that attained the extremum.
    """
    if op not in OPS:
        raise ValueError(f"gspmm: op must be one of {OPS}, got {op!r}")
    if reduce_op not in REDUCES:
        raise ValueError(f"gspmm: reduce_op must be one of {REDUCES}, got {reduce_op!r}")
    r = relation_of(g, "gspmm")
    kernels = backend.kernels()
    w = None
    if op != "copy_lhs":
        w = r.from_user(check_operand("gspmm", "rhs_data", rhs_data, r.num_edges, "edge"))
    if op == "copy_rhs":
        out = kernels.segment_reduce(w, r.dst, r.num_dst, reduce_op)
    else:
        x = check_operand("gspmm", "lhs_data", lhs_data, r.num_src, "source node")
        out = kernels.spmm(x, r.src, r.dst, r.num_dst, w, "mul" if w is None else op, reduce_op)
    if reduce_op in _EMPTY:
        empty = torch.bincount(r.dst, minlength=r.num_dst) == 0
        out = out.masked_fill(empty.view(-1, *[1] * (out.dim() - 1)), _EMPTY[reduce_op])
    return out


def _named(message: str, reduce_op: str):
    """DGL's ``u_<op>_e_<reduce>`` / ``copy_u_<reduce>`` / ``copy_e_<reduce>`` as a function of (g, x[, y])."""
    if message == "copy_u":

        def run(g, x):
            return gspmm(g, "copy_lhs", reduce_op, x, None)

        what = f"``gspmm(g, 'copy_lhs', '{reduce_op}', x, None)``: source features x, reduced by {reduce_op}"
    elif message == "copy_e":

        def run(g, x):
            return gspmm(g, "copy_rhs", reduce_op, None, x)

        what = f"``gspmm(g, 'copy_rhs', '{reduce_op}', None, x)``: edge features x, reduced by {reduce_op}"
    else:

        def run(g, x, y):
            return gspmm(g, message, reduce_op, x, y)

        what = (
            f"``gspmm(g, '{message}', '{reduce_op}', x, y)``: source features x {message} edge features y, "
            f"reduced by {reduce_op}"
        )
    run.__name__ = run.__qualname__ = (
        f"{message}_{reduce_op}" if message.startswith("copy") else f"u_{message}_e_{reduce_op}"
    )
    run.__doc__ = what + " into the destination nodes (see ``gspmm``)."
    return run


NAMED = {f.__name__: f for f in (_named(m, red) for m in BINARY_OPS + ("copy_u", "copy_e") for red in REDUCES)}
globals().update(NAMED)

__all__ = ["gspmm"]
__all__ += list(NAMED)
