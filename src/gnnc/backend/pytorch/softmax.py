"""Edge softmax by destination, the fused softmax + weighted aggregation, and that aggregation of SDDMM logits."""

from __future__ import annotations

import math

import torch
from torch.autograd.function import Function

from .common import (
    BINARY_OPS,
    as_heads,
    broadcast_features,
    broadcast_shape,
    check_choice,
    check_count,
    check_float,
    check_index,
    check_same,
    head_layout,
    heads_to_weight,
    rows_view,
    sum_to,
    weight_as_heads,
)
from .csr import head_sddmm, head_spmm
from .first_order import first_order
from .sddmm import check_sddmm, sddmm


def edge_softmax(logits: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """alpha[e] = exp(logits[e] - m[dst[e]]) / sum over e' with dst[e'] == dst[e] of exp(logits[e'] - m[dst[e]]).

    ``logits`` [E, ...], ``dst`` [E] int64 (any order), ``m`` the per-destination
    max (numerical stability). Backward uses the saved output only:
    g_logits = alpha * (g - segment_sum(alpha * g)[dst]).
    """
    check_float("logits", logits)
    num_nodes = check_count("num_nodes", num_nodes)
    check_index("dst", dst, num_nodes, logits.device, length=logits.shape[0])
    return _EdgeSoftmax.apply(logits, dst, num_nodes)


def edge_softmax_aggregate(
    logits: torch.Tensor,
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[v] = sum over e with dst[e] == v of edge_softmax(logits)[e] * x[src[e]].

    ``logits`` [E, ...] and ``x`` [N_src, ...] broadcast right-aligned, except
    that logits with exactly one feature dim fewer than x get a trailing
    singleton ([E, H] against [N, H, F], [E] against [N, F]). Saves only the
    per-destination max and denominator besides its inputs; alpha is
    recomputed in backward and the [E, ..., F] messages never exist.
    """
    logits, num_dst = check_softmax_aggregate(logits, x, src, dst, num_dst)
    return _EdgeSoftmaxAggregate.apply(logits, x, src, dst, num_dst, chunk)


def check_softmax_aggregate(logits, x, src, dst, num_dst) -> tuple[torch.Tensor, int]:
    """Validate ``edge_softmax_aggregate``'s arguments (errors name the culprit);
    returns the logits with the trailing singleton added, and ``num_dst`` as an int."""
    check_float("logits", logits)
    check_float("x", x)
    check_same(x.device, x.dtype, logits=logits)
    num_dst = check_count("num_dst", num_dst)
    num_edges = logits.shape[0]
    check_index("src", src, x.shape[0], x.device, length=num_edges)
    check_index("dst", dst, num_dst, x.device, length=num_edges)
    if logits.dim() == x.dim() - 1:
        logits = logits.unsqueeze(-1)
    broadcast_features("logits", logits.shape[1:], "x", x.shape[1:])
    return logits, num_dst


def sddmm_softmax_aggregate(
    a: torch.Tensor,
    b: torch.Tensor,
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    op: str = "add",
    *,
    negative_slope: float | None = None,
    chunk: int | None = None,
    b_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """edge_softmax_aggregate(sddmm(a, src, b, b_index, op, negative_slope=negative_slope), x, src, dst, num_dst).

    ``a`` [N_src, ...] per-source and ``b`` [num_dst, ...] per-destination
    rows (GAT: attention scores [N, H] and [num_dst, H], x [N, H, F]), ``op``
    in add, sub, mul, div. ``b_index`` (default ``dst``): the row of ``b``
    each edge reads, when ``b`` holds rows of another table (RGAT: scores per
    (relation, destination) pair). This reference composes the two
    primitives, so it also saves the [E, ...] logits.
    """
    check_sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, op, negative_slope, b_index)
    logits = sddmm(a, src, b, dst if b_index is None else b_index, op, negative_slope=negative_slope, chunk=chunk)
    return edge_softmax_aggregate(logits, x, src, dst, num_dst, chunk=chunk)


def check_sddmm_softmax_aggregate(
    a, b, x, src, dst, num_dst, op: str, negative_slope: float | None, b_index: torch.Tensor | None = None
) -> tuple[tuple[int, ...], int]:
    """Validate ``sddmm_softmax_aggregate``'s arguments (errors name the culprit); returns the feature
    shape of the logits as ``edge_softmax_aggregate`` sees them, and ``num_dst`` as an int."""
    check_float("a", a)
    check_float("b", b)
    check_float("x", x)
    check_same(a.device, a.dtype, x=x)
    num_dst = check_count("num_dst", num_dst)
    if b_index is None and b.shape[0] != num_dst:
        raise ValueError(f"b has {b.shape[0]} rows, expected one per destination (num_dst = {num_dst})")
    # the index checks come first so that their errors say src / dst, not sddmm's a_index / b_index
    check_index("src", src, a.shape[0], a.device)
    check_index("dst", dst, num_dst, a.device, length=src.numel())
    if b_index is not None:
        check_index("b_index", b_index, b.shape[0], a.device, length=src.numel())
    check_choice("op", op, BINARY_OPS)
    full = check_sddmm(a, src, b, dst if b_index is None else b_index, op, negative_slope)
    stand_in = a.new_empty(()).expand((src.numel(),) + full)  # the logits' shape, without their values
    logits, num_dst = check_softmax_aggregate(stand_in, x, src, dst, num_dst)
    return tuple(logits.shape[1:]), num_dst


def _exp_and_stats(logits, dst, num_nodes):
    """exp(logits - m[dst]), with the per-destination max m and denominator s."""
    shape = (num_nodes,) + tuple(logits.shape[1:])
    index = rows_view(dst, logits.dim()).expand_as(logits)
    m = logits.new_full(shape, -math.inf).scatter_reduce_(0, index, logits, "amax")
    ex = (logits - m.index_select(0, dst)).exp_()
    s = logits.new_zeros(shape).index_add_(0, dst, ex)
    return ex, m, s


def _softmax_backward(alpha, grad_alpha, dst, num_nodes):
    """alpha * (grad_alpha - segment_sum(alpha * grad_alpha)[dst]), in that order, as torch's softmax does:
    where one edge takes nearly all the weight the difference is small, and subtracting the two products
    instead (alpha g - alpha total) leaves it the products' rounding error."""
    weighted = alpha * grad_alpha
    total = weighted.new_zeros((num_nodes,) + tuple(weighted.shape[1:])).index_add_(0, dst, weighted)
    del weighted
    return total.index_select(0, dst).neg_().add_(grad_alpha).mul_(alpha)


class _EdgeSoftmax(Function):
    @staticmethod
    def forward(ctx, logits, dst, num_nodes):
        ex, _, s = _exp_and_stats(logits, dst, num_nodes)
        alpha = ex.div_(s.index_select(0, dst))
        ctx.save_for_backward(alpha, dst)
        ctx.num_nodes = num_nodes
        return alpha

    @staticmethod
    @first_order
    def backward(ctx, grad):
        alpha, dst = ctx.saved_tensors
        return _softmax_backward(alpha, grad, dst, ctx.num_nodes), None, None


class _EdgeSoftmaxAggregate(Function):
    @staticmethod
    def forward(ctx, logits, x, src, dst, num_dst, chunk):
        full = broadcast_shape(logits.shape[1:], x.shape[1:])
        k = head_layout(logits.shape[1:], full)
        ex, m, s = _exp_and_stats(logits, dst, num_dst)
        alpha = ex.div_(s.index_select(0, dst))
        out = head_spmm(as_heads(x, full, k), dst, src, num_dst, weight_as_heads(alpha, full, k), chunk)
        ctx.save_for_backward(logits, x, src, dst, m, s)
        ctx.layout = (full, k, num_dst, chunk)
        return out.view((num_dst,) + tuple(full))

    @staticmethod
    @first_order
    def backward(ctx, grad):
        logits, x, src, dst, m, s = ctx.saved_tensors
        full, k, num_dst, chunk = ctx.layout
        alpha = (logits - m.index_select(0, dst)).exp_().div_(s.index_select(0, dst))
        grad_heads = as_heads(grad, full, k)
        grad_logits = grad_x = None
        if ctx.needs_input_grad[1]:
            gx = head_spmm(grad_heads, src, dst, x.shape[0], weight_as_heads(alpha, full, k), chunk)
            grad_x = sum_to(gx.view((x.shape[0],) + tuple(full)), x.shape[1:])
        if ctx.needs_input_grad[0]:
            dots = head_sddmm(grad_heads, as_heads(x, full, k), dst, src, chunk)
            grad_alpha = heads_to_weight(dots, logits.shape, full, k)
            grad_logits = _softmax_backward(alpha, grad_alpha, dst, num_dst)
        return grad_logits, grad_x, None, None, None, None


def keep_for_backward(ctx, heads_a, heads_b, heads_x, src, dst, m, s, b_index, layout, a, b, x) -> None:
    """Save what a fused softmax aggregation's backward reads (the CPU and Triton kernels share the format):
    head-form operands, indices (``b_index`` None: b read by destination), per-destination max and
    denominator, ``layout`` and a, b, x's shapes."""
    ctx.save_for_backward(heads_a, heads_b, heads_x, src, dst, m, s, b_index)
    ctx.layout = layout
    ctx.shapes = tuple(None if t is None else tuple(t.shape) for t in (a, b, x))


def kept(ctx):
    """(saved tensors, layout, (a, b, x) shapes, (a, b, x) needing gradients) as ``keep_for_backward`` left
    them."""
    return ctx.saved_tensors, ctx.layout, ctx.shapes, ctx.needs_input_grad[:3]
