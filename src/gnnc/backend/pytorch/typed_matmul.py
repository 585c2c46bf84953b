"""Typed linear layers without weight replication: rows (or gathered rows) grouped by type."""

from __future__ import annotations

import torch
from torch.autograd.function import Function

from .common import check_float, check_index, check_same, chunk_rows
from .csr import head_spmm
from .first_order import first_order


def segment_matmul(x: torch.Tensor, ptr, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """out[i] = x[i] @ weight[t] (+ bias[t]) for ptr[t] <= i < ptr[t+1].

    ``x`` [N, K]; ``ptr`` [T+1] row offsets (list or int64 tensor, ptr[0] = 0,
    ptr[T] = N, non-decreasing: empty segments allowed); ``weight`` [T, K, M];
    ``bias`` [T, M] or None.
    """
    check_float("x", x, min_dim=2)
    offsets = _offsets("ptr", ptr, x.shape[0], "x rows")
    _check_weight(x, weight, len(offsets) - 1, "ptr")
    if bias is not None:
        check_float("bias", bias)
        check_same(x.device, x.dtype, bias=bias)
        if tuple(bias.shape) != (weight.shape[0], weight.shape[2]):
            raise ValueError(f"bias must be [T, M] = {(weight.shape[0], weight.shape[2])}, got {tuple(bias.shape)}")
    return _SegmentMatmul.apply(x, weight, bias, offsets)


def gather_segment_matmul(
    x: torch.Tensor, index: torch.Tensor, ptr, weight: torch.Tensor, *, chunk: int | None = None
) -> torch.Tensor:
    """out[e] = x[index[e]] @ weight[r] for ptr[r] <= e < ptr[r+1].

    ``x`` [N, K]; ``index`` [E] int64; ``ptr`` [R+1] offsets into the edges
    (edges sorted by relation; empty blocks allowed); ``weight`` [R, K, M].
    Runs in chunks of edges, so no [E, K] gather exists.
    """
    check_float("x", x, min_dim=2)
    check_index("index", index, x.shape[0], x.device)
    offsets = _offsets("ptr", ptr, index.numel(), "index entries")
    _check_weight(x, weight, len(offsets) - 1, "ptr")
    return _GatherSegmentMatmul.apply(x, index, weight, offsets, chunk)


def _offsets(name: str, ptr, total: int, what: str) -> tuple[int, ...]:
    if isinstance(ptr, torch.Tensor):
        if ptr.dtype != torch.int64 or ptr.dim() != 1:
            raise TypeError(f"{name} must be a 1-D int64 tensor or a list of ints, got {ptr.dtype} {tuple(ptr.shape)}")
        ptr = ptr.tolist()
    offsets = tuple(ptr)
    if not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        raise TypeError(f"{name} must hold ints, got {offsets!r}")
    if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != total:
        raise ValueError(f"{name} must run from 0 to {total} ({what}) with at least 2 entries, got {offsets!r}")
    if any(lo > hi for lo, hi in zip(offsets, offsets[1:])):
        raise ValueError(f"{name} must be non-decreasing, got {offsets!r}")
    return offsets


def _check_weight(x, weight, num_types, ptr_name):
    if x.dim() != 2:
        raise ValueError(f"x must be [N, K], got shape {tuple(x.shape)}")
    check_float("weight", weight, min_dim=3)
    check_same(x.device, x.dtype, weight=weight)
    if weight.dim() != 3 or weight.shape[0] != num_types or weight.shape[1] != x.shape[1]:
        raise ValueError(
            f"weight must be [T, K, M] with T = {num_types} ({ptr_name} segments) and K = {x.shape[1]} "
            f"(x columns), got {tuple(weight.shape)}"
        )


def _segments(offsets):
    return [(t, lo, hi) for t, (lo, hi) in enumerate(zip(offsets, offsets[1:])) if hi > lo]


class _SegmentMatmul(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, offsets):
        out = x.new_empty(x.shape[0], weight.shape[2])
        for t, lo, hi in _segments(offsets):
            if bias is None:
                torch.mm(x[lo:hi], weight[t], out=out[lo:hi])
            else:
                torch.addmm(bias[t], x[lo:hi], weight[t], out=out[lo:hi])
        ctx.save_for_backward(x, weight)
        ctx.offsets = offsets
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grad_x = x.new_empty(x.shape) if need_x else None
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_b = grad.new_zeros(weight.shape[0], weight.shape[2]) if need_b else None
        for t, lo, hi in _segments(ctx.offsets):
            g = grad[lo:hi]
            if need_x:
                torch.mm(g, weight[t].t(), out=grad_x[lo:hi])
            if need_w:
                torch.mm(x[lo:hi].t(), g, out=grad_w[t])
            if need_b:
                torch.sum(g, 0, out=grad_b[t])
        return grad_x, grad_w, grad_b, None


class _GatherSegmentMatmul(Function):
    @staticmethod
    def forward(ctx, x, index, weight, offsets, chunk):
        out = x.new_empty(index.numel(), weight.shape[2])
        for r, s, e in _edge_chunks(offsets, x, chunk):
            torch.mm(x.index_select(0, index[s:e]), weight[r], out=out[s:e])
        ctx.save_for_backward(x, index, weight)
        ctx.layout = (offsets, chunk)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, index, weight = ctx.saved_tensors
        offsets, chunk = ctx.layout
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
        # x's gradient: each row's [K] gradient, summed into x's rows by one sparse matmul over the (cached)
        # CSR of ``index`` when those rows fit SCATTER_BUFFER_BYTES; else scattered per chunk
        buffered = need_x and index.numel() * x.shape[1] * x.element_size() <= SCATTER_BUFFER_BYTES
        rows = grad.new_empty(index.numel(), x.shape[1]) if buffered else None
        grad_x = torch.zeros_like(x) if need_x and not buffered else None
        grad_w = torch.zeros_like(weight) if need_w else None
        for r, s, e in _edge_chunks(offsets, x, chunk):
            g = grad[s:e]
            if buffered:
                torch.mm(g, weight[r].t(), out=rows[s:e])
            elif need_x:
                grad_x.index_add_(0, index[s:e], g @ weight[r].t())
            if need_w:
                grad_w[r].addmm_(x.index_select(0, index[s:e]).t(), g)
        if buffered:
            grad_x = head_spmm(rows.unsqueeze(1), index, None, x.shape[0], None).squeeze(1)
        return grad_x, None, grad_w, None, None


# Largest [rows, K] gradient buffer the gather matmul's backward builds to sum it with one sparse matmul.
SCATTER_BUFFER_BYTES = 1 << 30


def _edge_chunks(offsets, x, chunk):
    """(relation, start, end) for each chunk of each non-empty block."""
    return [
        (r, lo + s, lo + e)
        for r, lo, hi in _segments(offsets)
        for s, e in chunk_rows(hi - lo, x.shape[1], x.device, chunk)
    ]
