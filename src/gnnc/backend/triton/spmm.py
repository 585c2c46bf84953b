"""spmm and segment_reduce on the Triton kernels of ``aggregate`` (forward and backward).

Same contracts as ``gnnc.backend.pytorch.spmm`` / ``segment_reduce``. Forward:
one pass over destinations (CSR by destination, cached by the torch
backend's ``csr_structure``), vertex-balanced, or edge-balanced for sum /
mean where ``balance``'s rule says; max / min find their arg edges in the
same pass. Backward: the transposed aggregation by source for x (its own
choice of balance, on the CSR by source), an edge kernel for the edge
weights, the arg-edge scatter for max / min, and for segment sums the
gather g[dst[e]] as an aggregation over rows of one edge.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import Function

from ..pytorch.common import (
    REDUCES,
    as_heads,
    broadcast_shape,
    check_choice,
    check_count,
    check_float,
    check_index,
    head_layout,
    heads_to_weight,
    sum_to,
    weight_as_heads,
)
from ..pytorch.first_order import first_order
from ..pytorch.segment import clamped_degrees, needs_arg
from ..pytorch.spmm import check_spmm
from .aggregate import aggregate, edge_dot, extremum_backward
from .launch import check_device

# the op aggregating the upstream gradient by source into x's gradient; the edge_dot mode of the weight's
_GRAD_X_OP = {"copy": "copy", "add": "copy", "sub": "copy", "mul": "mul", "div": "div"}
_GRAD_W_MODE = {"add": "sum", "sub": "neg_sum", "mul": "dot", "div": "div"}


def spmm(
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    edge_weight: torch.Tensor | None = None,
    op: str = "mul",
    reduce: str = "sum",
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[v] = reduce over e with dst[e] == v of (x[src[e]] op edge_weight[e]) (see ``gnnc.backend.pytorch.spmm``).

    ``chunk`` is accepted for signature compatibility and ignored (no edge chunks here).
    """
    num_dst, op = check_spmm(x, src, dst, num_dst, edge_weight, op, reduce)
    check_device(x.device)
    want_arg = reduce in ("max", "min") and needs_arg(x, edge_weight)
    return _Spmm.apply(x, edge_weight, src, dst, num_dst, op, reduce, want_arg)


def segment_reduce(
    values: torch.Tensor, dst: torch.Tensor, num_segments: int, op: str = "sum", *, chunk: int | None = None
) -> torch.Tensor:
    """out[v] = op over edges e with dst[e] == v of values[e] (see ``gnnc.backend.pytorch.segment_reduce``)."""
    check_float("values", values)
    num_segments = check_count("num_segments", num_segments)
    check_index("dst", dst, num_segments, values.device, length=values.shape[0])
    check_choice("op", op, REDUCES)
    check_device(values.device)
    want_arg = op in ("max", "min") and needs_arg(values)
    return _Segment.apply(values, dst, num_segments, op, want_arg)


class _Spmm(Function):
    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, op, reduce, want_arg):
        full = tuple(x.shape[1:]) if w is None else broadcast_shape(x.shape[1:], w.shape[1:])
        k = 0 if w is None else head_layout(w.shape[1:], full)
        w_heads = None if w is None else weight_as_heads(w, full, k)
        out, arg = aggregate(as_heads(x, full, k), dst, src, num_dst, w_heads, op, reduce, want_arg)
        # a sum reads x in backward only for the weight's gradient: kept otherwise, x would outlive the forward
        extremum, need_w = reduce in ("max", "min"), w is not None and ctx.needs_input_grad[1]
        ctx.save_for_backward(x if extremum or need_w else None, w, src, dst, arg)
        ctx.layout = (full, k, op, reduce, tuple(x.shape))
        return out.view((num_dst,) + full)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, w, src, dst, arg = ctx.saved_tensors
        full, k, op, reduce, x_shape = ctx.layout
        need_x, need_w = ctx.needs_input_grad[0], w is not None and ctx.needs_input_grad[1]
        x_heads = None if x is None else as_heads(x, full, k)
        w_heads = None if w is None else weight_as_heads(w, full, k)
        if reduce == "mean":
            grad = grad / clamped_degrees(dst, grad.shape[0], grad)
        grad_heads = as_heads(grad, full, k)
        if reduce in ("max", "min"):
            gx, gw = extremum_backward(arg, grad_heads, src, x_heads, w_heads, op, need_x, need_w)
        else:
            gx = gw = None
            if need_x:
                gx, _ = aggregate(grad_heads, src, dst, x_shape[0], w_heads, _GRAD_X_OP[op])
            if need_w:
                gw = edge_dot(grad_heads, dst, x_heads, src, _GRAD_W_MODE[op], w_heads)
        grad_x = None if gx is None else sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        grad_w = None if gw is None else heads_to_weight(gw, w.shape, full, k)
        return grad_x, grad_w, None, None, None, None, None, None


class _Segment(Function):
    @staticmethod
    def forward(ctx, values, dst, num_segments, op, want_arg):
        feat = tuple(values.shape[1:])
        one_head = values.reshape(values.shape[0], 1, math.prod(feat))
        out, arg = aggregate(one_head, dst, None, num_segments, None, "copy", op, want_arg)
        ctx.save_for_backward(dst, arg)
        ctx.layout = (op, feat, values.shape[0])
        return out.view((num_segments,) + feat)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        dst, arg = ctx.saved_tensors
        op, feat, num_edges = ctx.layout
        width = math.prod(feat)
        grad_rows = grad.reshape(grad.shape[0], 1, width)
        if op in ("max", "min"):
            like = grad.new_empty(num_edges, 1, width)
            grad_values, _ = extremum_backward(arg, grad_rows, None, like, None, "copy", True, False)
        else:
            if op == "mean":
                grad_rows = grad_rows / clamped_degrees(dst, grad.shape[0], grad_rows)
            # the gather g[dst[e]]: rows of one edge each
            grad_values, _ = aggregate(grad_rows, torch.arange(num_edges, device=dst.device), dst, num_edges, None)
        return grad_values.view((num_edges,) + feat), None, None, None, None
