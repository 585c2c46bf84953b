"""segment_reduce, and the chunked arg-extremum scatter shared with spmm's max/min."""

from __future__ import annotations

import math

import torch
from torch.autograd.function import Function

from .common import REDUCES, check_choice, check_count, check_float, check_index, chunk_rows, rows_view
from .csr import head_spmm
from .first_order import first_order


def segment_reduce(
    values: torch.Tensor, dst: torch.Tensor, num_segments: int, op: str = "sum", *, chunk: int | None = None
) -> torch.Tensor:
    """out[v] = op over edges e with dst[e] == v of values[e]; zeros where v has no edge.

    ``values`` [E, ...], ``dst`` [E] int64 (any order), ``op`` in sum, mean
    (divides by max(deg, 1)), max, min. Max/min send the gradient of each
    (segment, feature) to one edge: the smallest edge index among the ties.
    """
    check_float("values", values)
    num_segments = check_count("num_segments", num_segments)
    check_index("dst", dst, num_segments, values.device, length=values.shape[0])
    check_choice("op", op, REDUCES)
    if op in ("sum", "mean"):  # shaped outside the Function: a view made inside it could not be written in place
        return _SegmentSum.apply(values, dst, num_segments, op == "mean", chunk).view(num_segments, *values.shape[1:])
    return _SegmentExtremum.apply(values, dst, num_segments, op, chunk, needs_arg(values))


def needs_arg(*inputs) -> bool:
    """Whether autograd will call backward, i.e. max/min must find their arg-extremum edges."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)


def clamped_degrees(dst: torch.Tensor, num_nodes: int, like: torch.Tensor) -> torch.Tensor:
    """max(in-degree, 1) per node as [N, 1, ..., 1] matching ``like``'s dims, in its dtype."""
    deg = torch.bincount(dst, minlength=num_nodes).clamp_(min=1).to(like.dtype)
    return rows_view(deg, like.dim())


def arg_dtype(num_edges: int) -> torch.dtype:
    """dtype of arg-extremum edge ids (``num_edges`` meaning none): int32 when it fits, which halves the traffic."""
    return torch.int32 if num_edges < 2**31 - 1 else torch.int64


def scatter_extremum(
    messages, dst: torch.Tensor, num_dst: int, feat, op: str, like: torch.Tensor, chunks, want_arg: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Max/min of ``messages(start, end)`` ([end - start, *feat]) per destination.

    Returns ``out`` [num_dst, *feat] (zeros where no edge) and, if
    ``want_arg``, ``arg``: the smallest edge id attaining the extremum per
    (node, feature), ``E`` where none does (no edge, or a NaN extremum);
    int32 when E fits. Messages are computed chunk by chunk (twice for
    ``arg``), so no [E, *feat] temporary exists.
    """
    num_edges = dst.numel()
    shape = (num_dst, *feat)
    ndim = len(shape)
    out = torch.full(shape, -math.inf if op == "max" else math.inf, dtype=like.dtype, device=like.device)
    reduce = "amax" if op == "max" else "amin"
    for s, e in chunks:
        m = messages(s, e)
        out.scatter_reduce_(0, rows_view(dst[s:e], ndim).expand_as(m), m, reduce)
    arg = None
    if want_arg:
        id_dtype = arg_dtype(num_edges)
        arg = torch.full(shape, num_edges, dtype=id_dtype, device=like.device)
        for s, e in chunks:
            m = messages(s, e)
            d = dst[s:e]
            ids = rows_view(torch.arange(s, e, dtype=id_dtype, device=like.device), ndim)
            candidate = torch.where(m == out.index_select(0, d), ids, num_edges)
            arg.scatter_reduce_(0, rows_view(d, ndim).expand_as(m), candidate, "amin")
    empty = torch.bincount(dst, minlength=num_dst) == 0
    out.masked_fill_(rows_view(empty, ndim), 0)
    return out, arg


class _SegmentSum(Function):
    @staticmethod
    def forward(ctx, values, dst, num_segments, mean, chunk):
        """[num_segments, 1, prod(feat)]: the caller gives it ``values``' trailing shape."""
        ctx.feat = values.shape[1:]
        one_head = values.reshape(values.shape[0], 1, math.prod(ctx.feat))
        out = head_spmm(one_head, dst, None, num_segments, None, chunk)
        deg = clamped_degrees(dst, num_segments, out) if mean else None
        if mean:
            out = out / deg
        ctx.save_for_backward(dst, deg)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        dst, deg = ctx.saved_tensors
        if deg is not None:
            grad = grad / deg
        return grad.index_select(0, dst).view(dst.shape[0], *ctx.feat), None, None, None, None


class _SegmentExtremum(Function):
    @staticmethod
    def forward(ctx, values, dst, num_segments, op, chunk, want_arg):
        feat = values.shape[1:]
        chunks = chunk_rows(values.shape[0], math.prod(feat), values.device, chunk)
        out, arg = scatter_extremum(lambda s, e: values[s:e], dst, num_segments, feat, op, values, chunks, want_arg)
        ctx.save_for_backward(arg)
        ctx.num_edges = values.shape[0]
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        (arg,) = ctx.saved_tensors
        num_edges, feat = ctx.num_edges, arg.shape[1:]
        if num_edges == 0:
            return grad.new_zeros((0,) + tuple(feat)), None, None, None, None, None
        valid = arg < num_edges
        row_size = math.prod(feat)
        target = torch.where(valid, arg.long(), 0) * row_size + torch.arange(row_size, device=arg.device).view(feat)
        grad_values = grad.new_zeros(num_edges * row_size)
        grad_values.index_add_(0, target.reshape(-1), torch.where(valid, grad, 0).reshape(-1))
        return grad_values.view(num_edges, *feat), None, None, None, None, None
