"""Generalized SpMM: combine source features with edge weights and reduce into destinations."""

from __future__ import annotations

import math

import torch
from torch.autograd.function import Function

from .common import (
    BINARY_OPS,
    REDUCES,
    as_heads,
    binary,
    binary_grad_lhs,
    binary_grad_rhs,
    broadcast_features,
    broadcast_shape,
    check_choice,
    check_count,
    check_float,
    check_index,
    check_same,
    chunk_rows,
    flat_positions,
    head_layout,
    heads_to_weight,
    lift,
    rows_view,
    sum_to,
    weight_as_heads,
)
from .csr import head_sddmm, head_spmm
from .first_order import first_order
from .segment import clamped_degrees, needs_arg, scatter_extremum


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
    """out[v] = reduce over e with dst[e] == v of (x[src[e]] op edge_weight[e]).

    ``x`` [N_src, ...], ``edge_weight`` [E, ...] (feature dims broadcast
    right-aligned) or None, meaning op 'copy' (message = x[src[e]]); ``op``
    in mul, add, sub, div; ``reduce`` in sum, mean, max, min; zeros where v
    has no in-edge. The [E, ...] messages are never materialised: mul/copy
    sums run as per-head CSR matmuls (or edge chunks), the rest in edge
    chunks; max/min save one arg-extremum edge per (node, feature).
    """
    num_dst, op = check_spmm(x, src, dst, num_dst, edge_weight, op, reduce)
    if reduce in ("max", "min"):
        return _SpmmExtremum.apply(x, edge_weight, src, dst, num_dst, op, reduce, chunk, needs_arg(x, edge_weight))
    if op in ("copy", "mul"):
        return _SpmmHeads.apply(x, edge_weight, src, dst, num_dst, reduce == "mean", chunk, head_spmm)
    return _SpmmBinary.apply(x, edge_weight, src, dst, num_dst, op, reduce == "mean", chunk)


def scaled_spmm(
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    src_scale: torch.Tensor | None,
    dst_scale: torch.Tensor | None,
    edge_weight: torch.Tensor | None = None,
    reduce: str = "sum",
    *,
    chunk: int | None = None,
    aggregate=head_spmm,
    gradients=None,
) -> torch.Tensor:
    """out[v] = dst_scale[v] * reduce over e with dst[e] == v of src_scale[src[e]] * x[src[e]] (* edge_weight[e]).

    ``spmm(x * src_scale, ...) * dst_scale`` (GCN's normalisation) with the scales, vectors of one value
    per source ([N_src]) and destination ([num_dst]) or None, applied inside the sum: no scaled copy of x
    or of the result. ``reduce`` sum or mean. Scales that need a gradient take that composition instead.
    ``aggregate`` and ``gradients``: the backend's ``csr.head_spmm`` and fused gradients (``_SpmmHeads``).
    """
    num_dst, op = check_spmm(x, src, dst, num_dst, edge_weight, "mul", reduce)
    if reduce not in ("sum", "mean"):
        raise ValueError(f"scaled_spmm reduces by sum or mean, not {reduce!r}")
    for name, scale, rows in (("src_scale", src_scale, x.shape[0]), ("dst_scale", dst_scale, num_dst)):
        if scale is not None:
            check_same(x.device, x.dtype, **{name: scale})
            if tuple(scale.shape) != (rows,):
                raise ValueError(f"{name} has shape {tuple(scale.shape)}, expected ({rows},): one value per row")
    if any(s is not None and s.requires_grad for s in (src_scale, dst_scale)) and torch.is_grad_enabled():
        y = x if src_scale is None else x * rows_view(src_scale, x.dim())
        out = spmm(y, src, dst, num_dst, edge_weight, op, reduce, chunk=chunk)
        return out if dst_scale is None else out * rows_view(dst_scale, out.dim())
    return _SpmmHeads.apply(
        x, edge_weight, src, dst, num_dst, reduce == "mean", chunk, aggregate, src_scale, dst_scale, gradients
    )


def check_spmm(x, src, dst, num_dst, edge_weight, op: str, reduce: str) -> tuple[int, str]:
    """Validate ``spmm``'s arguments (errors name the culprit); returns ``num_dst`` as an int and the op
    ('copy' without edge weights)."""
    check_float("x", x)
    num_dst = check_count("num_dst", num_dst)
    check_index("src", src, x.shape[0], x.device)
    num_edges = src.numel()
    check_index("dst", dst, num_dst, x.device, length=num_edges)
    check_choice("reduce", reduce, REDUCES)
    if edge_weight is None:
        if op not in ("mul", "copy"):
            raise ValueError(f"spmm op={op!r} needs an edge_weight")
        return num_dst, "copy"
    if op == "copy":
        raise ValueError("spmm op='copy' takes no edge_weight")
    check_choice("op", op, BINARY_OPS)
    check_float("edge_weight", edge_weight)
    check_same(x.device, x.dtype, edge_weight=edge_weight)
    if edge_weight.shape[0] != num_edges:
        raise ValueError(f"edge_weight has {edge_weight.shape[0]} rows, expected one per edge ({num_edges})")
    broadcast_features("x", x.shape[1:], "edge_weight", edge_weight.shape[1:])
    return num_dst, op


def _full_shape(x, w):
    return tuple(x.shape[1:]) if w is None else broadcast_shape(x.shape[1:], w.shape[1:])


class _SpmmHeads(Function):
    """copy / mul with sum / mean: per-head weighted aggregation by ``aggregate`` (``csr.head_spmm``'s
    contract; a backend passes its own kernel), forward and for the gradient of x; with the node scales of
    ``scaled_spmm`` (constants: they get no gradient) when given. When the weights need a gradient, a
    backend's ``gradients(grad [D, H, F], x [N, H, F], w [E, H] | None, src, dst, N, row_scale, col_scale)``
    may give both (grad_x or None without w, grad_w [E, H]) in one pass, or None to decline."""

    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, mean, chunk, aggregate, src_scale=None, dst_scale=None, gradients=None):
        full = _full_shape(x, w)
        k = 0 if w is None else head_layout(w.shape[1:], full)
        w_heads = None if w is None else weight_as_heads(w, full, k)
        scales = {} if src_scale is None and dst_scale is None else {"row_scale": dst_scale, "col_scale": src_scale}
        out = aggregate(as_heads(x, full, k), dst, src, num_dst, w_heads, chunk, **scales).view((num_dst,) + full)
        deg = clamped_degrees(dst, num_dst, out) if mean else None
        if mean:  # in place: the sum is this call's own buffer, and a fresh one costs its page faults again
            out.div_(deg)
        # x only for the gradient of w and w only for that of x: kept otherwise, they would outlive the
        # forward until backward for nothing (R-GCN's per-pair transform and edge norm, GCN's projection)
        kept_x = x if w is not None and ctx.needs_input_grad[1] else None
        kept_w = w if ctx.needs_input_grad[0] else None
        ctx.save_for_backward(kept_x, kept_w, src, dst, deg, src_scale, dst_scale)
        ctx.layout = (full, k, chunk, tuple(x.shape), None if w is None else tuple(w.shape))
        ctx.aggregate, ctx.gradients = aggregate, gradients
        # not as a view of the kernel's buffer: autograd refuses in-place writes into a view a Function returns,
        # and the inplace pass adds a self-loop or a bias into this result
        return out.detach()

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, w, src, dst, deg, src_scale, dst_scale = ctx.saved_tensors
        full, k, chunk, x_shape, w_shape = ctx.layout
        need_x = ctx.needs_input_grad[0]
        if ctx.gradients is not None and w_shape is not None and ctx.needs_input_grad[1]:
            both = ctx.gradients(
                as_heads(grad, full, k),
                as_heads(x, full, k),
                weight_as_heads(w, full, k) if need_x else None,
                src,
                dst,
                x_shape[0],
                src_scale,
                _column_scale(dst_scale, deg),
            )
            if both is not None:
                gx, gw = both
                grad_x = None if gx is None else sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
                return (grad_x, heads_to_weight(gw, w_shape, full, k)) + (None,) * 9
        if deg is not None:
            grad = grad / deg
        grad_heads = as_heads(grad, full, k)
        grad_x = grad_w = None
        if need_x:
            w_heads = None if w is None else weight_as_heads(w, full, k)
            scales = {} if src_scale is None and dst_scale is None else {"row_scale": src_scale, "col_scale": dst_scale}
            gx = ctx.aggregate(grad_heads, src, dst, x_shape[0], w_heads, chunk, **scales)
            grad_x = sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        if w_shape is not None and ctx.needs_input_grad[1]:
            x_heads = as_heads(x if src_scale is None else x * rows_view(src_scale, x.dim()), full, k)
            if dst_scale is not None:
                grad_heads = grad_heads * dst_scale.view(-1, 1, 1)
            grad_w = heads_to_weight(head_sddmm(grad_heads, x_heads, dst, src, chunk), w_shape, full, k)
        return grad_x, grad_w, None, None, None, None, None, None, None, None, None


def _column_scale(dst_scale, deg):
    """The factor of each destination's gradient row: ``dst_scale`` over the degree of a mean (a vector, or
    None for ones)."""
    if deg is None:
        return dst_scale
    inverse = deg.reshape(-1).reciprocal()
    return inverse if dst_scale is None else dst_scale * inverse


class _SpmmBinary(Function):
    """add / sub / div with sum / mean, in edge chunks."""

    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, op, mean, chunk):
        full = _full_shape(x, w)
        out = x.new_zeros((num_dst,) + full)
        for s, e in chunk_rows(src.numel(), math.prod(full), x.device, chunk):
            msg = binary(op, lift(x.index_select(0, src[s:e]), len(full)), lift(w[s:e], len(full)))
            out.index_add_(0, dst[s:e], msg)
        deg = clamped_degrees(dst, num_dst, out) if mean else None
        if mean:
            out /= deg
        ctx.save_for_backward(x, w, src, dst, deg)
        ctx.layout = (full, op, chunk)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, w, src, dst, deg = ctx.saved_tensors
        full, op, chunk = ctx.layout
        if deg is not None:
            grad = grad / deg
        grad_x = x.new_zeros(x.shape) if ctx.needs_input_grad[0] else None
        grad_w = w.new_empty(w.shape) if ctx.needs_input_grad[1] else None
        for s, e in chunk_rows(src.numel(), math.prod(full), x.device, chunk):
            g = grad.index_select(0, dst[s:e])
            xs, ws = lift(x.index_select(0, src[s:e]), len(full)), lift(w[s:e], len(full))
            if grad_x is not None:
                grad_x.index_add_(0, src[s:e], sum_to(binary_grad_lhs(op, g, xs, ws), x.shape[1:]))
            if grad_w is not None:
                grad_w[s:e] = sum_to(binary_grad_rhs(op, g, xs, ws), w.shape[1:])
        return grad_x, grad_w, None, None, None, None, None, None


class _SpmmExtremum(Function):
    """max / min: chunked scatter; the gradient goes to the saved arg-extremum edge."""

    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, op, reduce, chunk, want_arg):
        full = _full_shape(x, w)

        def messages(s, e):
            xs = lift(x.index_select(0, src[s:e]), len(full))
            msg = xs if w is None else binary(op, xs, lift(w[s:e], len(full)))
            return msg.expand((e - s,) + full)

        chunks = chunk_rows(src.numel(), math.prod(full), x.device, chunk)
        out, arg = scatter_extremum(messages, dst, num_dst, full, reduce, x, chunks, want_arg)
        ctx.save_for_backward(x, w, src, arg)
        ctx.layout = (full, op)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, w, src, arg = ctx.saved_tensors
        full, op = ctx.layout
        num_edges = src.numel()
        if num_edges == 0:
            return (torch.zeros_like(x), None if w is None else torch.zeros_like(w)) + (None,) * 7
        valid = arg < num_edges
        edge = torch.where(valid, arg.long(), 0)
        grad = torch.where(valid, grad, 0)
        x_target = src[edge] * math.prod(x.shape[1:]) + flat_positions(x.shape[1:], full, x.device)
        x_val = x.reshape(-1)[x_target]
        grad_x = grad_w = None
        if w is None:
            w_val = None
        else:
            w_target = edge * math.prod(w.shape[1:]) + flat_positions(w.shape[1:], full, w.device)
            w_val = w.reshape(-1)[w_target]
            if ctx.needs_input_grad[1]:
                grad_w = (
                    w.new_zeros(w.numel())
                    .index_add_(0, w_target.reshape(-1), binary_grad_rhs(op, grad, x_val, w_val).reshape(-1))
                    .view(w.shape)
                )
        if ctx.needs_input_grad[0]:
            contribution = grad if w is None else binary_grad_lhs(op, grad, x_val, w_val)
            grad_x = x.new_zeros(x.numel()).index_add_(0, x_target.reshape(-1), contribution.reshape(-1)).view(x.shape)
        return grad_x, grad_w, None, None, None, None, None, None, None
