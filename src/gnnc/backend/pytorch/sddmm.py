"""Generalized SDDMM: per-edge combination of a row of ``a`` and a row of ``b``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import Function

from .common import (
    BINARY_OPS,
    as_heads,
    binary_grad_lhs,
    binary_grad_rhs,
    broadcast_features,
    broadcast_shape,
    check_choice,
    check_float,
    check_index,
    check_same,
    chunk_rows,
    lift,
    sum_to,
)
from .csr import head_sddmm, head_spmm
from .first_order import first_order

_OUT_OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


def sddmm(
    a: torch.Tensor,
    a_index: torch.Tensor,
    b: torch.Tensor,
    b_index: torch.Tensor,
    op: str = "mul",
    *,
    negative_slope: float | None = None,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[e] = a[a_index[e]] op b[b_index[e]], then leaky_relu(out, negative_slope) when it is given.

    ``a`` [Na, ...], ``b`` [Nb, ...] with feature dims broadcast right-aligned;
    ``op`` in add, sub, mul, div, or dot (sums the last broadcast dim, kept as
    size 1, like DGL's u_dot_v). The output is [E, ...] by nature; the
    backward saves only ``a``, ``b`` and the indices (no gathered [E, ...]
    operands, which plain gather + mul autograd would keep) and runs in edge
    chunks; dot runs as per-head sampled dense-dense matmuls. The leaky_relu
    epilogue (binary ops only; 0 gives relu) saves nothing more: its
    backward recomputes the sign of the pre-activation.
    """
    full = check_sddmm(a, a_index, b, b_index, op, negative_slope)
    if op == "dot":
        if not full:
            raise ValueError("sddmm op='dot' needs at least one feature dim in a or b")
        return SddmmDot.apply(a, a_index, b, b_index, chunk)
    return _SddmmBinary.apply(a, a_index, b, b_index, op, negative_slope, chunk)


def check_sddmm(a, a_index, b, b_index, op: str, negative_slope: float | None = None) -> tuple[int, ...]:
    """Validate ``sddmm``'s arguments (errors name the culprit); returns the broadcast feature shape."""
    if negative_slope is not None and (op == "dot" or not isinstance(negative_slope, (int, float))):
        raise ValueError(
            f"sddmm negative_slope must be a number with a binary op; got {negative_slope!r} with op={op!r}"
        )
    check_float("a", a)
    check_float("b", b)
    check_same(a.device, a.dtype, b=b)
    check_index("a_index", a_index, a.shape[0], a.device)
    check_index("b_index", b_index, b.shape[0], a.device, length=a_index.numel())
    check_choice("op", op, BINARY_OPS + ("dot",))
    return broadcast_features("a", a.shape[1:], "b", b.shape[1:])


class SddmmDot(Function):
    """Per-head dot SDDMM; its backward is two per-head weighted sums (``head_spmm``; the CPU backend's forward
    names its own in ``ctx.layout``)."""

    @staticmethod
    def forward(ctx, a, a_index, b, b_index, chunk):
        full = broadcast_shape(a.shape[1:], b.shape[1:])
        k = len(full) - 1
        out = head_sddmm(as_heads(a, full, k), as_heads(b, full, k), a_index, b_index, chunk)
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (full, chunk, head_spmm)
        return out.view((a_index.numel(),) + full[:-1] + (1,))

    @staticmethod
    @first_order
    def backward(ctx, grad):
        a, a_index, b, b_index = ctx.saved_tensors
        full, chunk, aggregate = ctx.layout  # aggregate: csr.head_spmm or a backend's equivalent
        k = len(full) - 1
        grad_heads = grad.reshape(grad.shape[0], math.prod(full[:-1]))
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            ga = aggregate(as_heads(b, full, k), a_index, b_index, a.shape[0], grad_heads, chunk)
            grad_a = sum_to(ga.view((a.shape[0],) + full), a.shape[1:])
        if ctx.needs_input_grad[2]:
            gb = aggregate(as_heads(a, full, k), b_index, a_index, b.shape[0], grad_heads, chunk)
            grad_b = sum_to(gb.view((b.shape[0],) + full), b.shape[1:])
        return grad_a, None, grad_b, None, None


class _SddmmBinary(Function):
    @staticmethod
    def forward(ctx, a, a_index, b, b_index, op, negative_slope, chunk):
        # node-sized copies: index_select from a strided source (a column slice of a matmul) is ~10x slower
        a, b = a.contiguous(), b.contiguous()
        full = broadcast_shape(a.shape[1:], b.shape[1:])
        num_edges = a_index.numel()
        out = a.new_empty((num_edges,) + full)
        for s, e in chunk_rows(num_edges, math.prod(full), a.device, chunk):
            _OUT_OPS[op](
                lift(a.index_select(0, a_index[s:e]), len(full)),
                lift(b.index_select(0, b_index[s:e]), len(full)),
                out=out[s:e],
            )
        if negative_slope is not None:
            F.leaky_relu_(out, negative_slope)
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (full, op, negative_slope, chunk)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        a, a_index, b, b_index = ctx.saved_tensors
        full, op, negative_slope, chunk = ctx.layout
        grad_a = a.new_zeros(a.shape) if ctx.needs_input_grad[0] else None
        grad_b = b.new_zeros(b.shape) if ctx.needs_input_grad[2] else None
        for s, e in chunk_rows(a_index.numel(), math.prod(full), a.device, chunk):
            g = grad[s:e]
            av = lift(a.index_select(0, a_index[s:e]), len(full))
            bv = lift(b.index_select(0, b_index[s:e]), len(full))
            if negative_slope is not None:  # leaky_relu': 1 where the pre-activation is > 0, else the slope
                g = torch.ops.aten.leaky_relu_backward(g, _OUT_OPS[op](av, bv).expand_as(g), negative_slope, False)
            if grad_a is not None:
                grad_a.index_add_(0, a_index[s:e], sum_to(binary_grad_lhs(op, g, av, bv).expand_as(g), a.shape[1:]))
            if grad_b is not None:
                grad_b.index_add_(0, b_index[s:e], sum_to(binary_grad_rhs(op, g, av, bv).expand_as(g), b.shape[1:]))
        return grad_a, None, grad_b, None, None, None, None
